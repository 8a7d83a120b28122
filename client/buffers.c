/* SPDX-License-Identifier: BSD-3-Clause */
/* buffers.c -- rdax_buffer_alloc's buffers: memory registered for RDMA once */
#include "buffers.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "librdax.h"
#include "log.h"
#include "transport_rdma.h"

_Static_assert(RDAX_BUFFERS_MAX <= RDMA_TP_USER_MRS, "each buffer takes one registration");

void conn_buffers_register(struct rdax_conn *c)
{
	for (unsigned i = 0; i < c->nbufs; i++) {
		int ret = rdma_tp_register(c->rdma, c->bufs[i].addr, c->bufs[i].len);
		if (ret)
			LOG_WARN("%s: a buffer of %zu bytes cannot be registered again (%s): "
				 "it is copied instead",
				 c->peer, c->bufs[i].len, strerror(-ret));
	}
}

void conn_buffers_free(struct rdax_conn *c)
{
	for (unsigned i = 0; i < c->nbufs; i++)
		munmap(c->bufs[i].addr, c->bufs[i].len);
	c->nbufs = 0;
}

int rdax_buffer_alloc(struct rdax_conn *conn, size_t len, void **bufp)
{
	if (!conn)
		return -EINVAL;
	if (!bufp)
		return conn_set_error(conn, -EINVAL, "rdax_buffer_alloc: NULL result pointer");
	*bufp = NULL;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if (len == 0 || len > SIZE_MAX - page)
		return conn_set_error(conn, -EINVAL, "rdax_buffer_alloc: bad length %zu", len);
	if (conn->nbufs == RDAX_BUFFERS_MAX)
		return conn_set_error(conn, -ENOSPC,
				      "rdax_buffer_alloc: %d buffers already on this connection",
				      RDAX_BUFFERS_MAX);
	size_t mlen = (len + page - 1) / page * page;
	void *p = mmap(NULL, mlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return conn_set_error(conn, -errno, "rdax_buffer_alloc: mmap of %zu bytes: %s",
				      mlen, strerror(errno));
	if (conn->rdma) {
		int ret = rdma_tp_register(conn->rdma, p, mlen);
		if (ret) {
			munmap(p, mlen);
			return conn_set_error(conn, ret,
					      "rdax_buffer_alloc: cannot register %zu bytes for "
					      "RDMA: %s%s",
					      mlen, strerror(-ret),
					      ret == -ENOMEM || ret == -EAGAIN
						  ? " (memlock limit: ulimit -l)"
						  : "");
		}
	}
	conn->bufs[conn->nbufs++] = (struct conn_buffer){p, mlen};
	*bufp = p;
	return 0;
}

int rdax_buffer_free(struct rdax_conn *conn, void *buf)
{
	if (!conn)
		return -EINVAL;
	if (!buf)
		return 0;
	for (unsigned i = 0; i < conn->nbufs; i++) {
		if (conn->bufs[i].addr != buf)
			continue;
		if (conn->rdma) {
			conn_rdma_settle(conn); /* a durable write's completion may trail its reply */
			rdma_tp_unregister(conn->rdma, buf);
		}
		munmap(buf, conn->bufs[i].len);
		conn->bufs[i] = conn->bufs[--conn->nbufs];
		return 0;
	}
	return conn_set_error(conn, -EINVAL,
			      "rdax_buffer_free: %p is not a buffer of this connection", buf);
}
