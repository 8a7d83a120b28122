/* SPDX-License-Identifier: BSD-3-Clause */
/* tls_io.c -- records in and out of a non-blocking GnuTLS session (contract in tls_io.h) */
#include "tls_io.h"

#include <errno.h>
#include <string.h>

ssize_t tls_io_recv(struct tls_io *io, void *buf, size_t len)
{
	if (io->deferred)
		return io->deferred > 0 ? 0 : -EPROTO;
	io->maybe_more = false;
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
		r = gnutls_record_send(io->sess, p, len);
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
	if (io->deferred || io->maybe_more)
		return 1;
	return io->sess ? gnutls_record_check_pending(io->sess) : 0;
}
