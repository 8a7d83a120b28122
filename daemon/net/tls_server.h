/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls_server.h -- the daemon's TLS credentials and policy (GnuTLS)
 *
 * One struct tls_server holds what every TLS connection of the daemon
 * shares: the mode (--tls off|on|require), the x509 credentials of
 * --tls-certificates DIR (ca-cert.pem, server-cert.pem, server-key.pem: the
 * layout of qemu and nbdkit), the PSK file of --tls-psk FILE (psktool's
 * "username:hexkey" lines), whether a client certificate signed by the CA
 * is required (--tls-verify-peer), and the priorities (TLS 1.2 and 1.3
 * only: an offer of anything older is a downgrade and fails the handshake).
 *
 * A connection's session is made by tls_server_session_new() and driven by
 * the TLS wire of a stream (tls_wire.h).
 *
 * Thread safety: the credentials are read-only once made; sessions of any
 * worker may be created from it concurrently (GnuTLS credentials are shared
 * read-only between sessions).
 */
#ifndef RDAXD_TLS_SERVER_H
#define RDAXD_TLS_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include <gnutls/gnutls.h>

/* Seconds a TLS handshake may take before the connection is dropped. */
#define TLS_HANDSHAKE_TIMEOUT 10.0

enum tls_mode {
	TLS_OFF = 0, /* no TLS; STARTTLS refused */
	TLS_ON,	     /* TLS offered; plaintext clients served too */
	TLS_REQUIRE, /* plaintext clients refused */
};

struct tls_server_opts {
	enum tls_mode mode;
	const char *cert_dir; /* NULL: no x509 */
	const char *psk_file; /* NULL: no PSK */
	bool verify_peer;     /* a client certificate signed by the CA is required */
};

struct tls_server {
	enum tls_mode mode;
	bool verify_peer;
	gnutls_certificate_credentials_t x509; /* NULL: none */
	gnutls_psk_server_credentials_t psk;   /* NULL: none */
	gnutls_priority_t prio;
	double handshake_timeout; /* seconds */
};

/*
 * tls_server_new -- load the credentials of @o (mode on or require; at
 * least one of cert_dir and psk_file). Returns 0, -EINVAL (@err names the
 * file and GnuTLS's reason), -ENOMEM.
 */
int tls_server_new(const struct tls_server_opts *o, struct tls_server **out, char *err,
		   size_t errlen);

/* tls_server_delete -- free; accepts NULL and sets *sp to NULL */
void tls_server_delete(struct tls_server **sp);

/*
 * tls_server_session_new -- a server session over the non-blocking socket
 * @fd with the daemon's credentials and priorities. Returns 0 or a
 * negative GnuTLS error code. Context: any thread.
 */
int tls_server_session_new(const struct tls_server *srv, int fd, gnutls_session_t *out);

/* tls_mode_name -- "off", "on", "require" */
const char *tls_mode_name(enum tls_mode mode);

#endif
