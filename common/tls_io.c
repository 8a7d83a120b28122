/* SPDX-License-Identifier: BSD-3-Clause */
/* tls_io.c -- records in and out of a non-blocking GnuTLS session (contract in tls_io.h) */
#include "tls_io.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <gnutls/socket.h>

#include "faults.h"

/*
 * io_map -- the buffers, if not held: 0 or -ENOMEM. An anonymous mapping
 * rather than malloc: unmapped, its pages leave the process at once,
 * where glibc keeps freed heap chunks (and, once a chunk this size is
 * freed, serves the next from the heap: its mmap threshold rises).
 */
static int io_map(struct tls_io *io)
{
	if (io->mem)
		return 0;
	void *m =
	    mmap(NULL, TLS_IO_MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -ENOMEM;
	io->mem = m;
	io->ra = io->mem;
	io->tx = io->mem + TLS_IO_READAHEAD;
	io->stage = io->tx + TLS_IO_SENDAHEAD;
	io->ra_start = io->ra_end = io->tx_start = io->tx_end = 0;
	return 0;
}

/* io_unmap -- the buffers given back (their contents are the caller's concern) */
static void io_unmap(struct tls_io *io)
{
	if (io->mem)
		munmap(io->mem, TLS_IO_MEM);
	io->mem = io->ra = io->tx = io->stage = NULL;
	io->ra_start = io->ra_end = io->tx_start = io->tx_end = 0;
}

/*
 * io_pull -- GnuTLS's read: from the bytes read ahead, refilled by one
 * recv() of up to TLS_IO_READAHEAD when empty. -1 with EAGAIN only when
 * nothing is left ahead and the socket is empty.
 */
static ssize_t io_pull(gnutls_transport_ptr_t ptr, void *data, size_t len)
{
	struct tls_io *io = ptr;
	if (io_map(io) < 0) {
		gnutls_transport_set_errno(io->sess, ENOMEM);
		return -1;
	}
	if (io->ra_start == io->ra_end) {
		if (io->ra_drained) {
			/* emptied by this receive already: no recv() only to hear EAGAIN */
			gnutls_transport_set_errno(io->sess, EAGAIN);
			return -1;
		}
		ssize_t n;
		do
			n = recv(io->fd, io->ra, TLS_IO_READAHEAD, MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n <= 0) {
			if (n < 0)
				gnutls_transport_set_errno(io->sess, errno);
			return n;
		}
		io->ra_start = 0;
		io->ra_end = (size_t)n;
		io->ra_drained = (size_t)n < TLS_IO_READAHEAD;
	}
	size_t take = io->ra_end - io->ra_start;
	if (take > len)
		take = len;
	memcpy(data, io->ra + io->ra_start, take);
	io->ra_start += take;
	return (ssize_t)take;
}

/* io_pull_timeout -- for GnuTLS's waits: bytes ahead count as readable */
static int io_pull_timeout(gnutls_transport_ptr_t ptr, unsigned ms)
{
	struct tls_io *io = ptr;
	if (io->ra_start < io->ra_end)
		return 1;
	struct pollfd p = {.fd = io->fd, .events = POLLIN};
	int r = poll(&p, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
	if (r < 0)
		gnutls_transport_set_errno(io->sess, errno);
	return r;
}

/* send_keep -- the @len bytes of @iov into tx[] if they fit: true if kept */
static bool send_keep(struct tls_io *io, const giovec_t *iov, int iovcnt, size_t len)
{
	if (io->tx_end + len > TLS_IO_SENDAHEAD)
		return false;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(io->tx + io->tx_end, iov[i].iov_base, iov[i].iov_len);
		io->tx_end += iov[i].iov_len;
	}
	return true;
}

/*
 * io_push -- GnuTLS's write of its queued records. While the caller has
 * more bytes after this record (send_more), the record is kept in tx[]
 * (up to TLS_IO_SENDAHEAD) and the caller's next call brings the next
 * one; the last record of the caller's bytes, a full tx[], and anything
 * GnuTLS sends on its own (alerts) go out together with what tx[] holds,
 * in one sendmsg(). If that leaves bytes of tx[] unsent, GnuTLS is told
 * EAGAIN, so it holds its record and the caller comes back (tls_io.h):
 * tx[] is never left holding bytes that no one will send.
 */
static ssize_t io_push(gnutls_transport_ptr_t ptr, const giovec_t *iov, int iovcnt)
{
	struct tls_io *io = ptr;
	/* tx[] is needed only to keep records; an alert (a close_notify) maps nothing */
	if ((io->send_more || rdax_faults.tls_send_strand) && io_map(io) < 0) {
		gnutls_transport_set_errno(io->sess, ENOMEM);
		return -1;
	}
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	size_t held = io->tx_end - io->tx_start;
	if (io->send_more && send_keep(io, iov, iovcnt, len))
		return (ssize_t)len;
	struct iovec v[TLS_IO_PUSH_IOV];
	int n = 0;
	if (held)
		v[n++] = (struct iovec){io->tx + io->tx_start, held};
	for (int i = 0; i < iovcnt && n < TLS_IO_PUSH_IOV; i++)
		v[n++] = (struct iovec){iov[i].iov_base, iov[i].iov_len};
	struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)n};
	int flags = MSG_NOSIGNAL | MSG_DONTWAIT | (io->send_more ? MSG_MORE : 0);
	ssize_t w;
	do
		w = sendmsg(io->fd, &m, flags);
	while (w < 0 && errno == EINTR);
	if (w < 0) {
		gnutls_transport_set_errno(io->sess, errno);
		return -1;
	}
	if ((size_t)w <= held) {
		/* tx[] first: GnuTLS's record has not begun to leave */
		io->tx_start += (size_t)w;
		if (io->tx_start == io->tx_end)
			io->tx_start = io->tx_end = 0;
		if (rdax_faults.tls_send_strand && send_keep(io, iov, iovcnt, len))
			return (ssize_t)len; /* control: reported sent, left in tx[] */
		gnutls_transport_set_errno(io->sess, EAGAIN);
		return -1;
	}
	io->tx_start = io->tx_end = 0;
	return w - (ssize_t)held;
}

int tls_io_start(struct tls_io *io, gnutls_session_t sess, int fd)
{
	io->sess = sess;
	io->fd = fd;
	if (gnutls_transport_is_ktls_enabled(sess))
		return 0; /* the kernel decrypts into the destination: GnuTLS keeps the socket */
	io->own_transport = true;
	gnutls_transport_set_ptr(sess, io);
	gnutls_transport_set_pull_function(sess, io_pull);
	gnutls_transport_set_pull_timeout_function(sess, io_pull_timeout);
	gnutls_transport_set_vec_push_function(sess, io_push);
	return 0;
}

void tls_io_release(struct tls_io *io)
{
	if (io->sess)
		gnutls_deinit(io->sess);
	io->sess = NULL;
	io->own_transport = false;
	io_unmap(io);
}

bool tls_io_trim(struct tls_io *io)
{
	if (!io->mem)
		return true;
	if (io->ra_start < io->ra_end || io->tx_start < io->tx_end)
		return false; /* ciphertext not yet given to GnuTLS, or records not yet sent */
	if (rdax_faults.tls_keep_buffers)
		return false; /* control: an idle session keeps them */
	io_unmap(io);
	return true;
}

ssize_t tls_io_recv(struct tls_io *io, void *buf, size_t len)
{
	if (io->deferred)
		return io->deferred > 0 ? 0 : -EPROTO;
	if (io->own_transport && io_map(io) < 0) {
		io->last_error = GNUTLS_E_MEMORY_ERROR;
		return -EPROTO;
	}
	io->maybe_more = false;
	io->ra_drained = false; /* a new look at the socket (the caller was woken for it) */
	size_t got = 0;
	while (got < len) {
		ssize_t r = gnutls_record_recv(io->sess, (uint8_t *)buf + got, len - got);
		if (r > 0) {
			got += (size_t)r;
			io->maybe_more = got == len;
			continue;
		}
		if (r == 0 || r == GNUTLS_E_PREMATURE_TERMINATION) {
			io->deferred = 1; /* the end: 0 now, or at the next call */
			return (ssize_t)got;
		}
		if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
			break;
		if (!gnutls_error_is_fatal((int)r) && r != GNUTLS_E_REHANDSHAKE)
			break; /* a warning alert: nothing to hand out */
		io->last_error = (int)r;
		if (got) {
			io->deferred = -1; /* reported at the next call, after these bytes */
			break;
		}
		return -EPROTO;
	}
	return got ? (ssize_t)got : -EAGAIN;
}

/* gather -- the first record's worth: a large first piece itself, else pieces copied to stage */
static size_t gather(struct tls_io *io, const struct iovec *iov, int n, const void **p)
{
	if (n == 1 || iov[0].iov_len >= TLS_IO_RECORD_MAX / 2) {
		*p = iov[0].iov_base;
		return iov[0].iov_len < TLS_IO_RECORD_MAX ? iov[0].iov_len : TLS_IO_RECORD_MAX;
	}
	size_t len = 0;
	for (int i = 0; i < n && len < TLS_IO_RECORD_MAX; i++) {
		size_t take = iov[i].iov_len;
		if (take > TLS_IO_RECORD_MAX - len)
			take = TLS_IO_RECORD_MAX - len;
		memcpy(io->stage + len, iov[i].iov_base, take);
		len += take;
	}
	*p = io->stage;
	return len;
}

ssize_t tls_io_sendv(struct tls_io *io, const struct iovec *iov, int n)
{
	ssize_t r;
	if (io_map(io) < 0) {
		io->last_error = GNUTLS_E_MEMORY_ERROR;
		return -EPIPE;
	}
	if (io->send_pending) {
		/* GnuTLS holds the record: NULL, 0 sends the rest of it */
		r = gnutls_record_send(io->sess, NULL, 0);
		if (r >= 0) {
			r = (ssize_t)io->send_pending;
			io->send_pending = 0;
			return r;
		}
	} else {
		if (n == 0)
			return 0;
		const void *p;
		size_t len = gather(io, iov, n, &p);
		/* more of the caller's bytes after this record: let the kernel wait for them */
		size_t total = 0;
		for (int i = 0; i < n && total <= len; i++)
			total += iov[i].iov_len;
		io->send_more = total > len;
		r = gnutls_record_send(io->sess, p, len);
		io->send_more = false;
		if (r >= 0)
			return r;
		if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
			io->send_pending = len;
	}
	if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
		return -EAGAIN;
	io->last_error = (int)r;
	return -EPIPE;
}

size_t tls_io_pending(const struct tls_io *io)
{
	if (io->deferred || io->maybe_more || io->ra_start < io->ra_end)
		return 1;
	return io->sess ? gnutls_record_check_pending(io->sess) : 0;
}
