/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls_wire.h -- TLS as one more wire under a socket stream (stream.h)
 *
 * The TLS wire is a struct stream_wire whose recv decrypts into the buffer
 * it is given -- the input buffer, or a WRITE payload's destination in the
 * volume's mapping: rdaxd adds no copy of its own -- and whose sendv
 * encrypts the gathered pieces, small ones gathered into one record (a
 * reply's header and body are one record with the start of its payload, not
 * three). The protocol over the stream is unchanged.
 *
 * How a stream comes to TLS:
 *
 *   DETECT --first byte 0x16 (a TLS handshake record)--> HANDSHAKE
 *   DETECT --any other first byte--> PLAIN (the protocol refuses it if TLS is
 *                                    required: tls_wire_peer().plain_refused)
 *   PLAIN --tls_wire_upgrade (NBD STARTTLS)--> UPGRADE: the bytes queued until
 *            then (the ACK) leave in plain, nothing is read --> HANDSHAKE
 *   HANDSHAKE --done--> OPEN; --failed or TLS_HANDSHAKE_TIMEOUT--> the
 *            connection fails (GnuTLS's alert sent, a warning logged)
 *
 * The native protocol starts a stream in DETECT (rdaxs:// clients speak
 * TLS from their first byte, tcp:// ones plain, on the same listener); NBD
 * starts in PLAIN and upgrades on NBD_OPT_STARTTLS.
 *
 * Thread safety: a wire belongs to its stream's worker thread, like the
 * stream; tls_wire_attach() runs before stream_socket_start() hands the
 * stream over.
 */
#ifndef RDAXD_TLS_WIRE_H
#define RDAXD_TLS_WIRE_H

#include <stdbool.h>

#include "stream.h"
#include "tls_server.h"

/* Longest identity kept: a PSK username or a certificate's common name. */
#define TLS_IDENTITY_MAX 128

/* What the protocol over a stream learns from its wire. */
struct tls_peer {
	bool tls;	    /* the handshake is done: everything is encrypted */
	bool plain_refused; /* a plaintext client on a daemon that requires TLS */
	bool authenticated; /* identity was proved (a PSK, or a certificate the CA signed) */
	char identity[TLS_IDENTITY_MAX + 1]; /* "" unless authenticated */
	const char *how;		     /* "psk", "x509", "" */
};

/*
 * tls_wire_attach -- @s (stream_init'ed, not yet started) gets the TLS wire
 * of @srv: in DETECT when @detect (the native protocol), else PLAIN until
 * tls_wire_upgrade(). Returns 0 or -ENOMEM. Context: before
 * stream_socket_start(), any thread.
 */
int tls_wire_attach(struct stream *s, const struct tls_server *srv, bool detect);

/*
 * tls_wire_upgrade -- STARTTLS: the bytes queued on @s now leave in plain,
 * then the TLS handshake starts; nothing more is read until then. The
 * caller has checked that no input is buffered (bytes a client sent after
 * STARTTLS and before its handshake are an injection, not to be served).
 * Returns 0, -EINVAL (@s has no TLS wire, or is past PLAIN), or a negative
 * GnuTLS code. Context: @s's worker.
 */
int tls_wire_upgrade(struct stream *s);

/* tls_wire_peer -- what the wire of @s knows about its peer (all false: no TLS wire) */
void tls_wire_peer(const struct stream *s, struct tls_peer *out);

/* tls_wire_active -- has @s a TLS wire past DETECT and PLAIN (upgrading, handshaking, open)? */
bool tls_wire_active(const struct stream *s);

/*
 * tls_wire_can_send -- would bytes queued on @s leave now, without waiting
 * for the client to speak first: no TLS wire, or one in PLAIN or OPEN (not
 * while it waits for the first byte or for the client's handshake)?
 */
bool tls_wire_can_send(const struct stream *s);

#endif
