/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls_client.h -- the client side of TLS to an rdaxd: credentials and the handshake
 *
 * Used by librdax for rdaxs:// (client/conn.c) and meant for every other
 * connection that rdax makes to an rdaxd (replica links), so that one set
 * of rules decides how a client proves itself and checks the server:
 *
 *   - x509: a directory in the layout of qemu and libnbd: ca-cert.pem (the
 *     CA the server's certificate must chain to; without the directory the
 *     system's trust store), and client-cert.pem + client-key.pem if present
 *     (for a daemon with --tls-verify-peer). The server's certificate must
 *     name the host connected to (gnutls_session_set_verify_cert);
 *   - PSK: a psktool file and a username in it (default: the file's first).
 *
 * Both may be given; with a PSK the handshake uses it (TLS 1.3 PSK with
 * (EC)DHE), the certificate otherwise. TLS 1.2 and 1.3 only.
 *
 * Thread safety: credentials are read-only once made; handshakes on
 * different sockets may run on different threads.
 */
#ifndef RDAX_COMMON_TLS_CLIENT_H
#define RDAX_COMMON_TLS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <gnutls/gnutls.h>

struct tls_client_opts {
	const char *cert_dir; /* NULL: the system's CAs, no client certificate */
	const char *psk_file; /* NULL: no PSK */
	const char *username; /* PSK: NULL for the file's first user */
};

struct tls_client {
	gnutls_certificate_credentials_t x509;
	gnutls_psk_client_credentials_t psk; /* NULL: none */
	gnutls_priority_t prio;
	char username[129];
};

/*
 * tls_client_new -- credentials from @o. Returns 0, -EINVAL (@err says
 * which file and why), -ENOMEM.
 */
int tls_client_new(const struct tls_client_opts *o, struct tls_client **out, char *err,
		   size_t errlen);

/* tls_client_delete -- free; accepts NULL and sets *cp to NULL */
void tls_client_delete(struct tls_client **cp);

/*
 * tls_client_handshake -- a session over the connected, non-blocking socket
 * @fd to the server @host (checked against its certificate unless a PSK is
 * used), handshaken within @timeout_ms (<= 0: no limit; poll() waits).
 * Returns 0 with *out, -ETIMEDOUT, -ECONNREFUSED (the server refused: wrong
 * PSK, unknown user, certificate not accepted), -EPROTO (any other TLS
 * failure), -ENOMEM; @err says what GnuTLS reported.
 */
int tls_client_handshake(const struct tls_client *c, int fd, const char *host, int timeout_ms,
			 gnutls_session_t *out, char *err, size_t errlen);

#endif
