/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls_io.h -- moving bytes through a non-blocking GnuTLS session, for the daemon and its clients
 *
 * What rdaxd's TLS wire (daemon/net/tls_wire.c) and librdax's TLS
 * connections (client/conn.c, and replica links) do alike:
 *
 *   - receive: record after record into the caller's buffer (a payload's
 *     destination included: the plaintext is copied by GnuTLS straight
 *     there, no copy of rdax's own) until it is full or the socket has
 *     nothing more, so "less than asked" means "drained";
 *   - the socket read ahead (once tls_io_start has run): GnuTLS asks its
 *     transport for a record's 5-byte header and then for its body, two
 *     recv() calls per 16 KiB record; here one recv() takes up to
 *     TLS_IO_READAHEAD bytes of ciphertext and GnuTLS's reads are served
 *     from them, and a receive that found the socket emptied by a short
 *     recv() ends there, without a recv() only to hear EAGAIN. Only
 *     ciphertext is held there; it is empty whenever a receive ends
 *     because the socket had nothing more;
 *   - send: one record per call, small pieces gathered into it (a request's
 *     header and body go with the start of its payload, not as records of
 *     their own); a record GnuTLS could not send whole (GNUTLS_E_AGAIN) is
 *     kept by GnuTLS and counted as taken only once it has left, so the
 *     caller simply comes back with its queue unchanged. Records followed
 *     by more of the caller's bytes are kept (up to TLS_IO_SENDAHEAD) and
 *     leave with the next in one sendmsg(), with MSG_MORE while more is to
 *     come, rather than one system call and one push per 16 KiB record;
 *     the last record of the caller's pieces takes them all out, and if
 *     the socket cannot take them all, that record counts as not sent
 *     (-EAGAIN), so the caller comes back and nothing is left behind;
 *   - buffers only while in use: the read-ahead, the records kept and the
 *     staging of small pieces (TLS_IO_MEM together, about 146 KiB) are
 *     mapped at the first receive or send that needs them and given back by
 *     tls_io_trim once they are empty, which the caller does when the
 *     connection has been idle a while (the daemon after CONN_TRIM_AFTER
 *     seconds without input): an idle session holds GnuTLS's state and no
 *     buffer of rdax's, and a busy one maps nothing per record or request.
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
/* Ciphertext one recv() may take ahead of GnuTLS: four full records. */
#define TLS_IO_READAHEAD (4 * (TLS_IO_RECORD_MAX + 256))
/* Records kept to go out in one sendmsg() while the caller has more: four. */
#define TLS_IO_SENDAHEAD (4 * (TLS_IO_RECORD_MAX + 256))
/* iovecs of one sendmsg() of records */
#define TLS_IO_PUSH_IOV 32
/* The buffers of a session in use: read-ahead, records kept, staging of small pieces. */
#define TLS_IO_MEM (TLS_IO_READAHEAD + TLS_IO_SENDAHEAD + TLS_IO_RECORD_MAX)

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
	/* the socket under the session, once tls_io_start has run */
	int fd;
	bool own_transport; /* GnuTLS reads and writes through io_pull/io_push (not ktls) */
	/*
	 * the TLS_IO_MEM bytes below, mapped while in use (NULL: none held);
	 * ra, tx and stage point into it
	 */
	uint8_t *mem;
	/* ciphertext read ahead: [ra_start, ra_end) of ra[] not yet given to GnuTLS */
	uint8_t *ra;
	size_t ra_start, ra_end;
	/*
	 * the socket gave less than asked in this tls_io_recv: it is empty, and
	 * GnuTLS hears EAGAIN without another recv() (a stream socket hands
	 * over what it holds; the caller's poll or readable event says when
	 * more comes, and its next call looks again)
	 */
	bool ra_drained;
	bool send_more; /* the record being sent is followed by more of the caller's bytes */
	/* records kept to go with the next (io_push): [tx_start, tx_end) of tx[] */
	uint8_t *tx;
	size_t tx_start, tx_end;
	uint8_t *stage; /* small pieces gathered into one record */
};

/*
 * tls_io_start -- @io moves the bytes of @sess (its handshake done) over
 * the connected, non-blocking socket @fd: the read-ahead and the sends
 * with MSG_MORE from now on. Until it is called, GnuTLS uses the socket
 * it was given itself -- and goes on doing so if the session runs on
 * kernel TLS (GnuTLS's ktls: its own recvmsg/sendmsg on the socket, which
 * a transport of ours would bypass). Maps nothing yet: the buffers come
 * with the first receive or send. Returns 0.
 */
int tls_io_start(struct tls_io *io, gnutls_session_t sess, int fd);

/*
 * tls_io_release -- the session (gnutls_deinit) and the read-ahead; the
 * socket stays with the caller. @io may be zeroed or already released.
 */
void tls_io_release(struct tls_io *io);

/*
 * tls_io_trim -- give back the buffers if they hold nothing (nothing read
 * ahead, no record kept): true if @io holds none now. The next receive or
 * send maps them again. Context: the connection's thread, between calls
 * (an idle connection: one munmap now, one mmap when it speaks again).
 */
bool tls_io_trim(struct tls_io *io);

/*
 * tls_io_recv -- up to @len decrypted bytes into @buf. Returns the bytes
 * (> 0; fewer than @len: nothing more now), 0 at the end of the stream
 * (close_notify or the socket closed), -EAGAIN (nothing now), -EPROTO (a
 * record refused, no memory for the buffers or another TLS failure:
 * io->last_error says which). A
 * refused record never reaches @buf.
 */
ssize_t tls_io_recv(struct tls_io *io, void *buf, size_t len);

/*
 * tls_io_sendv -- the first record's worth of the @n pieces. Returns the
 * bytes taken (> 0), -EAGAIN (the socket is full: come back with the same
 * bytes at the head), -EPIPE (failed, or no memory for the buffers:
 * io->last_error).
 */
ssize_t tls_io_sendv(struct tls_io *io, const struct iovec *iov, int n);

/*
 * tls_io_pending -- decrypted bytes held by GnuTLS, or an end or failure
 * not yet reported: what no readable event announces (> 0: call recv)
 */
size_t tls_io_pending(const struct tls_io *io);

#endif
