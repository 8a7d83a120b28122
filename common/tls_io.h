/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls_io.h -- moving bytes through a non-blocking GnuTLS session, for the daemon and its clients
 *
 * What rdaxd's TLS wire (daemon/net/tls_wire.c) and librdax's TLS
 * connections (client/conn.c, and replica links) do alike:
 *
 *   - receive: record after record into the caller's buffer (a payload's
 *     destination included: no copy of rdax's own) until it is full or the
 *     socket has nothing more, so "less than asked" means "drained";
 *   - send: one record per call, small pieces gathered into it (a request's
 *     header and body go with the start of its payload, not as records of
 *     their own); a record GnuTLS could not send whole (GNUTLS_E_AGAIN) is
 *     kept by GnuTLS and counted as taken only once it has left, so the
 *     caller simply comes back with its queue unchanged.
 *
 * Thread safety: a struct tls_io belongs to its connection's thread.
 */
#ifndef RDAX_COMMON_TLS_IO_H
#define RDAX_COMMON_TLS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <gnutls/gnutls.h>

/* The largest TLS record's plaintext: small pieces are gathered up to this. */
#define TLS_IO_RECORD_MAX 16384

struct tls_io {
	gnutls_session_t sess;
	size_t send_pending; /* bytes of a record GnuTLS holds after GNUTLS_E_AGAIN */
	int last_error;	     /* the GnuTLS code of the last failure, for messages */
	/*
	 * the end (1) or a failure (-1) met in a receive that returned bytes:
	 * reported by the next call, and announced by tls_io_pending (the
	 * socket will not wake anyone for a close_notify already read)
	 */
	int deferred;
	/*
	 * the last receive stopped because the buffer was full, not because the
	 * socket was empty: GnuTLS may hold records it read ahead, which neither
	 * a readable event nor gnutls_record_check_pending (decrypted bytes
	 * only) announces
	 */
	bool maybe_more;
	uint8_t stage[TLS_IO_RECORD_MAX];
};

/*
 * tls_io_recv -- up to @len decrypted bytes into @buf. Returns the bytes
 * (> 0; fewer than @len: nothing more now), 0 at the end of the stream
 * (close_notify or the socket closed), -EAGAIN (nothing now), -EPROTO (a
 * record refused or another TLS failure: io->last_error says which). A
 * refused record never reaches @buf.
 */
ssize_t tls_io_recv(struct tls_io *io, void *buf, size_t len);

/*
 * tls_io_sendv -- the first record's worth of the @n pieces. Returns the
 * bytes taken (> 0), -EAGAIN (the socket is full: come back with the same
 * bytes at the head), -EPIPE (failed: io->last_error).
 */
ssize_t tls_io_sendv(struct tls_io *io, const struct iovec *iov, int n);

/*
 * tls_io_pending -- decrypted bytes held by GnuTLS, or an end or failure
 * not yet reported: what no readable event announces (> 0: call recv)
 */
size_t tls_io_pending(const struct tls_io *io);

#endif
