/* SPDX-License-Identifier: BSD-3-Clause */
/* wire.c -- a raw rdax protocol client for tests */
#include "wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "rdax.pb-c.h"
#include "rdma_proto.h"
#include "transport_rdma.h"

/* The largest reply this client accepts (wire conventions: bodies up to 16 MiB). */
#define WIRE_MAX_REPLY_BODY (16U << 20)

/*
 * rdma_wait -- handle what the RDMA connection got; sleep until news or
 * @deadline. @want_input: received bytes waiting are news (a receiver),
 * else they are not (a sender must not spin on replies nobody reads).
 */
static int rdma_wait(struct wconn *c, int64_t deadline, bool want_input)
{
	int64_t left = deadline - hx_now_ms();
	if (left <= 0)
		return -ETIMEDOUT;
	int ret = rdma_tp_progress(c->tp, NULL, NULL);
	if (ret < 0)
		return ret;
	/* something happened (credits, bytes, a disconnect): let the caller look */
	if (ret > 0 || (want_input && rdma_tp_has_input(c->tp)) || rdma_tp_arm(c->tp, NULL, NULL))
		return 0;
	struct pollfd p[2];
	rdma_tp_pollfds(c->tp, p);
	if (poll(p, 2, (int)left) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

/* rdma_send -- like wire_send_some over RDMA */
static ssize_t rdma_send(struct wconn *c, const void *buf, size_t len, int timeout_ms)
{
	int64_t deadline = hx_now_ms() + timeout_ms;
	for (;;) {
		struct iovec iov = {(void *)buf, len};
		ssize_t n = rdma_tp_send(c->tp, &iov, 1);
		if (n < 0)
			return n == -ECONNRESET ? -EPIPE : n;
		if (n > 0)
			return n;
		int ret = rdma_wait(c, deadline, false);
		if (ret == -ETIMEDOUT)
			return 0;
		if (ret)
			return ret == -ECONNRESET ? -EPIPE : ret;
	}
}

int wire_connect(struct wconn *c, int port)
{
	return wire_connect_from(c, port, NULL);
}

int wire_connect_from(struct wconn *c, int port, const char *src)
{
	memset(c, 0, sizeof(*c));
	c->next_id = 1;
	c->fd = -1;
	if (hx_rdma_addr()) {
		char ps[16], err[256];
		snprintf(ps, sizeof(ps), "%d", port);
		int ret = rdma_tp_connect(hx_rdma_addr(), ps, WIRE_TIMEOUT_MS, 0, &c->tp, err,
					  sizeof(err));
		if (ret)
			fprintf(stderr, "wire: %s\n", err);
		return ret;
	}
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (src) {
		struct sockaddr_in b = {.sin_family = AF_INET};
		if (inet_pton(AF_INET, src, &b.sin_addr) != 1 ||
		    bind(c->fd, (struct sockaddr *)&b, sizeof(b)) < 0) {
			int ret = -errno;
			close(c->fd);
			c->fd = -1;
			return ret ? ret : -EINVAL;
		}
	}
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int ret = -errno;
		close(c->fd);
		c->fd = -1;
		return ret;
	}
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

void wire_close(struct wconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	rdma_tp_delete(&c->tp);
}

/* wait_fd -- poll @fd for @events within WIRE_TIMEOUT_MS; 0 or -ETIMEDOUT/-errno */
static int wait_fd(int fd, short events)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		int r = poll(&p, 1, WIRE_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		return 0;
	}
}

ssize_t wire_send_some(struct wconn *c, const void *buf, size_t len, int timeout_ms)
{
	if (c->tp)
		return rdma_send(c, buf, len, timeout_ms);
	struct pollfd p = {.fd = c->fd, .events = POLLOUT};
	int r = poll(&p, 1, timeout_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r == 0)
		return 0;
	ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	return n;
}

int wire_send_all(struct wconn *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (c->tp && len > 0) {
		ssize_t n = rdma_send(c, p, len, WIRE_TIMEOUT_MS);
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ETIMEDOUT;
		p += n;
		len -= (size_t)n;
	}
	while (len > 0) {
		int ret = wait_fd(c->fd, POLLOUT);
		if (ret < 0)
			return ret;
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* recv_all -- exactly @len bytes; 0, -EPIPE (closed, also mid-way), -ETIMEDOUT */
static int recv_all(struct wconn *c, void *buf, size_t len)
{
	uint8_t *p = buf;
	int64_t deadline = hx_now_ms() + WIRE_TIMEOUT_MS;
	while (c->tp && len > 0) {
		ssize_t n = rdma_tp_recv(c->tp, p, len);
		if (n < 0)
			return n == -ECONNRESET ? -EPIPE : (int)n;
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		int ret = rdma_wait(c, deadline, true);
		if (ret)
			return ret == -ECONNRESET ? -EPIPE : ret;
	}
	while (len > 0) {
		int ret = wait_fd(c->fd, POLLIN);
		if (ret < 0)
			return ret;
		ssize_t n = recv(c->fd, p, len, MSG_DONTWAIT);
		if (n == 0)
			return -EPIPE;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int wire_send_frame(struct wconn *c, uint16_t type, uint64_t id, const void *body, size_t body_len,
		    const void *payload, uint32_t payload_len)
{
	struct frame_header h = {.magic = FRAME_MAGIC,
				 .version = FRAME_VERSION,
				 .type = type,
				 .request_id = id,
				 .body_len = (uint32_t)body_len,
				 .payload_len = payload_len};
	uint8_t hb[FRAME_HEADER_SIZE];
	frame_header_encode(&h, hb);
	int ret = wire_send_all(c, hb, sizeof(hb));
	if (ret == 0 && body_len > 0)
		ret = wire_send_all(c, body, body_len);
	if (ret == 0 && payload && payload_len > 0)
		ret = wire_send_all(c, payload, payload_len);
	return ret;
}

int wire_recv(struct wconn *c, struct wreply *r)
{
	memset(r, 0, sizeof(*r));
	uint8_t hb[FRAME_HEADER_SIZE];
	int ret = recv_all(c, hb, sizeof(hb));
	if (ret < 0)
		return ret;
	frame_header_decode(hb, &r->h);
	if (r->h.magic != FRAME_MAGIC || r->h.version != FRAME_VERSION ||
	    !(r->h.type & FRAME_REPLY) || r->h.body_len > WIRE_MAX_REPLY_BODY ||
	    r->h.payload_len > FRAME_MAX_PAYLOAD_LIMIT)
		return -EBADMSG;
	r->body = malloc(r->h.body_len ? r->h.body_len : 1);
	r->payload = malloc(r->h.payload_len ? r->h.payload_len : 1);
	if (!r->body || !r->payload) {
		wreply_free(r);
		return -ENOMEM;
	}
	ret = recv_all(c, r->body, r->h.body_len);
	if (ret == 0)
		ret = recv_all(c, r->payload, r->h.payload_len);
	if (ret < 0)
		wreply_free(r);
	return ret;
}

void wreply_free(struct wreply *r)
{
	free(r->body);
	free(r->payload);
	r->body = NULL;
	r->payload = NULL;
}

int wreply_status(const struct wreply *r, char *msg, size_t msglen)
{
	Rdax__StatusReply *s = rdax__status_reply__unpack(NULL, r->h.body_len, r->body);
	if (!s || !s->status) {
		if (s)
			rdax__status_reply__free_unpacked(s, NULL);
		return -EBADMSG;
	}
	int code = (int)s->status->code;
	if (msg && msglen)
		snprintf(msg, msglen, "%s", s->status->message ? s->status->message : "");
	rdax__status_reply__free_unpacked(s, NULL);
	return code;
}

bool wire_eof(struct wconn *c)
{
	uint8_t b;
	int64_t deadline = hx_now_ms() + WIRE_TIMEOUT_MS;
	while (c->tp) {
		ssize_t n = rdma_tp_recv(c->tp, &b, 1);
		if (n == -ECONNRESET)
			return true;
		if (n != 0)
			return false;
		int ret = rdma_wait(c, deadline, true);
		if (ret)
			return ret == -ECONNRESET;
	}
	for (;;) {
		if (wait_fd(c->fd, POLLIN) < 0)
			return false;
		ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT);
		if (n == 0)
			return true;
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		return n < 0 && errno == ECONNRESET;
	}
}

/* pack -- a malloc'd packed message */
static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
	*len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(*len ? *len : 1);
	if (buf)
		protobuf_c_message_pack(m, buf);
	return buf;
}

/*
 * exchange -- send one request and receive its reply; the reply must carry
 * the request's type with the reply bit and its id. Returns the status code,
 * or a negative transport error. On success with @out, the caller owns *out.
 */
static int exchange(struct wconn *c, uint16_t type, const ProtobufCMessage *body,
		    const void *payload, uint32_t payload_len, struct wreply *out)
{
	size_t blen;
	uint8_t *b = pack(body, &blen);
	if (!b)
		return -ENOMEM;
	uint64_t id = c->next_id++;
	int ret = wire_send_frame(c, type, id, b, blen, payload, payload_len);
	free(b);
	if (ret < 0)
		return ret;
	struct wreply r;
	ret = wire_recv(c, &r);
	if (ret < 0)
		return ret;
	if (r.h.type != (type | FRAME_REPLY) || r.h.request_id != id) {
		wreply_free(&r);
		return -EBADMSG;
	}
	ret = wreply_status(&r, NULL, 0);
	if (out && ret == 0)
		*out = r;
	else
		wreply_free(&r);
	return ret;
}

uint8_t *wire_body_hello(const void *token, size_t token_len, uint32_t version, size_t *len)
{
	Rdax__HelloRequest m = RDAX__HELLO_REQUEST__INIT;
	m.protocol_version = version;
	if (token) {
		m.has_token = 1;
		m.token.data = (uint8_t *)token;
		m.token.len = token_len;
	}
	m.client_name = "rdax-integration-test";
	return pack(&m.base, len);
}

int wire_hello(struct wconn *c, const void *token, size_t token_len)
{
	Rdax__HelloRequest m = RDAX__HELLO_REQUEST__INIT;
	m.protocol_version = FRAME_VERSION;
	if (token) {
		m.has_token = 1;
		m.token.data = (uint8_t *)token;
		m.token.len = token_len;
	}
	m.client_name = "rdax-integration-test";
	struct wreply r;
	int ret = exchange(c, FRAME_HELLO, &m.base, NULL, 0, &r);
	if (ret != 0)
		return ret;
	Rdax__HelloReply *h = rdax__hello_reply__unpack(NULL, r.h.body_len, r.body);
	wreply_free(&r);
	if (!h)
		return -EBADMSG;
	c->max_payload = h->has_max_payload ? h->max_payload : FRAME_DEFAULT_MAX_PAYLOAD;
	c->max_body = h->has_max_body ? h->max_body : FRAME_DEFAULT_MAX_BODY;
	rdax__hello_reply__free_unpacked(h, NULL);
	return 0;
}

int wire_create(struct wconn *c, const char *name, uint64_t size)
{
	Rdax__VolumeCreateRequest m = RDAX__VOLUME_CREATE_REQUEST__INIT;
	m.name = (char *)name;
	m.size = size;
	return exchange(c, FRAME_VOLUME_CREATE, &m.base, NULL, 0, NULL);
}

int wire_delete(struct wconn *c, const char *name)
{
	Rdax__VolumeDeleteRequest m = RDAX__VOLUME_DELETE_REQUEST__INIT;
	m.name = (char *)name;
	return exchange(c, FRAME_VOLUME_DELETE, &m.base, NULL, 0, NULL);
}

uint8_t *wire_body_open(const char *name, size_t *len)
{
	Rdax__VolumeOpenRequest m = RDAX__VOLUME_OPEN_REQUEST__INIT;
	m.name = (char *)name;
	return pack(&m.base, len);
}

int wire_open(struct wconn *c, const char *name, uint32_t *handle, uint64_t *size)
{
	Rdax__VolumeOpenRequest m = RDAX__VOLUME_OPEN_REQUEST__INIT;
	m.name = (char *)name;
	struct wreply r;
	int ret = exchange(c, FRAME_VOLUME_OPEN, &m.base, NULL, 0, &r);
	if (ret != 0)
		return ret;
	Rdax__VolumeOpenReply *o = rdax__volume_open_reply__unpack(NULL, r.h.body_len, r.body);
	wreply_free(&r);
	if (!o || !o->has_handle) {
		if (o)
			rdax__volume_open_reply__free_unpacked(o, NULL);
		return -EBADMSG;
	}
	*handle = o->handle;
	if (size)
		*size = o->has_size ? o->size : 0;
	rdax__volume_open_reply__free_unpacked(o, NULL);
	return 0;
}

int wire_connect_direct(struct wconn *c, int port)
{
	memset(c, 0, sizeof(*c));
	c->next_id = 1;
	c->fd = -1;
	if (!hx_rdma_addr())
		return -EPROTONOSUPPORT;
	char ps[16], err[256];
	snprintf(ps, sizeof(ps), "%d", port);
	int ret = rdma_tp_connect(hx_rdma_addr(), ps, WIRE_TIMEOUT_MS, 1U << 20, &c->tp, err,
				  sizeof(err));
	if (ret)
		fprintf(stderr, "wire: %s\n", err);
	return ret;
}

int wire_open_direct(struct wconn *c, const char *name, uint32_t *handle, struct wire_direct *d)
{
	Rdax__VolumeOpenRequest m = RDAX__VOLUME_OPEN_REQUEST__INIT;
	m.name = (char *)name;
	struct wreply r;
	int ret = exchange(c, FRAME_VOLUME_OPEN, &m.base, NULL, 0, &r);
	if (ret != 0)
		return ret;
	Rdax__VolumeOpenReply *o = rdax__volume_open_reply__unpack(NULL, r.h.body_len, r.body);
	wreply_free(&r);
	if (!o || !o->has_handle || !o->has_remote_addr || !o->has_rkey || !o->has_imm_volume_id) {
		if (o)
			rdax__volume_open_reply__free_unpacked(o, NULL);
		return -EBADMSG;
	}
	*handle = o->handle;
	d->remote_addr = o->remote_addr;
	d->rkey = o->rkey;
	d->imm_base = o->imm_volume_id;
	d->imm_shift = o->has_imm_unit_shift ? o->imm_unit_shift : RDMA_IMM_SHIFT_PAGE;
	d->durable = o->has_imm_durable && o->imm_durable;
	rdax__volume_open_reply__free_unpacked(o, NULL);
	return 0;
}

/* direct_done -- a one-sided operation completed */
static void direct_done(void *arg, void *ctx, int status)
{
	*(bool *)ctx = true;
}

/* wire_rdma_op -- post one one-sided operation and wait for its completion */
static int wire_rdma_op(struct wconn *c, bool write, const struct wire_direct *d, uint64_t off,
			void *buf, uint32_t len)
{
	if (!c->tp)
		return -EPROTONOSUPPORT;
	struct rdma_tp_vol vol = {d->remote_addr, d->rkey, d->imm_base, d->imm_shift};
	bool done = false;
	int64_t deadline = hx_now_ms() + WIRE_TIMEOUT_MS;
	int ret;
	for (;;) {
		ret = write ? rdma_tp_write(c->tp, &vol, off, buf, len, &done)
			    : rdma_tp_read(c->tp, &vol, off, buf, len, &done);
		if (ret != -EAGAIN)
			break;
		ret = rdma_tp_progress(c->tp, direct_done, NULL);
		if (ret < 0)
			break;
		if (hx_now_ms() > deadline)
			return -ETIMEDOUT;
	}
	while (ret >= 0 && !done) {
		ret = rdma_tp_progress(c->tp, direct_done, NULL);
		if (ret < 0 || done)
			break;
		if (ret > 0)
			continue;
		if (!rdma_tp_arm(c->tp, direct_done, NULL)) {
			int64_t left = deadline - hx_now_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			struct pollfd p[2];
			rdma_tp_pollfds(c->tp, p);
			poll(p, 2, (int)left);
		}
	}
	if (ret > 0)
		ret = 0;
	return ret == -ECONNRESET ? -EPIPE : ret;
}

int wire_rdma_write(struct wconn *c, const struct wire_direct *d, uint64_t off, const void *buf,
		    uint32_t len)
{
	return wire_rdma_op(c, true, d, off, (void *)buf, len);
}

int wire_rdma_read(struct wconn *c, const struct wire_direct *d, uint64_t off, void *buf,
		   uint32_t len)
{
	return wire_rdma_op(c, false, d, off, buf, len);
}

int wire_rdma_write_durable(struct wconn *c, const struct wire_direct *d, uint64_t off,
			    const void *buf, uint32_t len, uint64_t *written_back)
{
	if (!c->tp)
		return -EPROTONOSUPPORT;
	struct rdma_tp_vol vol = {d->remote_addr, d->rkey, d->imm_base, d->imm_shift};
	uint64_t id = 0;
	int64_t deadline = hx_now_ms() + WIRE_TIMEOUT_MS;
	int ret;
	while ((ret = rdma_tp_write_durable(c->tp, &vol, off, buf, len, &id)) == -EAGAIN) {
		ret = rdma_tp_progress(c->tp, NULL, NULL);
		if (ret < 0)
			return ret;
		if (hx_now_ms() > deadline)
			return -ETIMEDOUT;
	}
	if (ret)
		return ret;
	/* the write's completion calls back with no context: the reply is the answer */
	struct wreply r;
	ret = wire_recv(c, &r);
	if (ret)
		return ret == -ECONNRESET ? -EPIPE : ret;
	if (r.h.request_id != id || r.h.type != (FRAME_FSYNC | FRAME_REPLY)) {
		fprintf(stderr, "wire: a durable notice (reply id %#llx) answered by a %#x reply to %#llx\n",
			(unsigned long long)id, r.h.type, (unsigned long long)r.h.request_id);
		wreply_free(&r);
		return -EBADMSG;
	}
	ret = wreply_status(&r, NULL, 0);
	Rdax__FsyncReply *f = rdax__fsync_reply__unpack(NULL, r.h.body_len, r.body);
	wreply_free(&r);
	if (!f)
		return -EBADMSG;
	*written_back = f->has_written_back ? f->written_back : 0;
	rdax__fsync_reply__free_unpacked(f, NULL);
	return ret;
}

int wire_close_volume(struct wconn *c, uint32_t handle)
{
	Rdax__VolumeCloseRequest m = RDAX__VOLUME_CLOSE_REQUEST__INIT;
	m.handle = handle;
	return exchange(c, FRAME_VOLUME_CLOSE, &m.base, NULL, 0, NULL);
}

uint8_t *wire_body_write(uint32_t handle, uint64_t off, bool fsync, size_t *len)
{
	Rdax__WriteRequest m = RDAX__WRITE_REQUEST__INIT;
	m.handle = handle;
	m.offset = off;
	m.has_fsync = fsync;
	m.fsync = fsync;
	return pack(&m.base, len);
}

int wire_write(struct wconn *c, uint32_t handle, uint64_t off, const void *buf, uint32_t len,
	       bool fsync)
{
	Rdax__WriteRequest m = RDAX__WRITE_REQUEST__INIT;
	m.handle = handle;
	m.offset = off;
	m.has_fsync = fsync;
	m.fsync = fsync;
	return exchange(c, FRAME_WRITE, &m.base, buf, len, NULL);
}

uint8_t *wire_body_read(uint32_t handle, uint64_t off, uint32_t length, size_t *len)
{
	Rdax__ReadRequest m = RDAX__READ_REQUEST__INIT;
	m.handle = handle;
	m.offset = off;
	m.length = length;
	return pack(&m.base, len);
}

int wire_read(struct wconn *c, uint32_t handle, uint64_t off, uint32_t len, void *buf)
{
	Rdax__ReadRequest m = RDAX__READ_REQUEST__INIT;
	m.handle = handle;
	m.offset = off;
	m.length = len;
	struct wreply r;
	int ret = exchange(c, FRAME_READ, &m.base, NULL, 0, &r);
	if (ret != 0)
		return ret;
	if (r.h.payload_len != len) {
		wreply_free(&r);
		return -EBADMSG;
	}
	memcpy(buf, r.payload, len);
	wreply_free(&r);
	return 0;
}

uint8_t *wire_body_fsync(uint32_t handle, uint64_t off, uint64_t length, size_t *len)
{
	Rdax__FsyncRequest m = RDAX__FSYNC_REQUEST__INIT;
	m.handle = handle;
	m.has_offset = 1;
	m.offset = off;
	m.has_length = 1;
	m.length = length;
	return pack(&m.base, len);
}

int wire_fsync(struct wconn *c, uint32_t handle, uint64_t off, uint64_t len)
{
	Rdax__FsyncRequest m = RDAX__FSYNC_REQUEST__INIT;
	m.handle = handle;
	m.has_offset = 1;
	m.offset = off;
	m.has_length = 1;
	m.length = len;
	return exchange(c, FRAME_FSYNC, &m.base, NULL, 0, NULL);
}

uint8_t *wire_body_discard(uint32_t handle, uint64_t off, uint64_t length, size_t *len)
{
	Rdax__DiscardRequest m = RDAX__DISCARD_REQUEST__INIT;
	m.handle = handle;
	m.offset = off;
	m.length = length;
	return pack(&m.base, len);
}

int wire_discard(struct wconn *c, uint32_t handle, uint64_t off, uint64_t len)
{
	Rdax__DiscardRequest m = RDAX__DISCARD_REQUEST__INIT;
	m.handle = handle;
	m.offset = off;
	m.length = len;
	return exchange(c, FRAME_DISCARD, &m.base, NULL, 0, NULL);
}

int wire_stat(struct wconn *c, uint32_t handle, uint64_t *dirty_bytes)
{
	Rdax__StatRequest m = RDAX__STAT_REQUEST__INIT;
	m.handle = handle;
	struct wreply r;
	int ret = exchange(c, FRAME_STAT, &m.base, NULL, 0, &r);
	if (ret != 0)
		return ret;
	Rdax__StatReply *s = rdax__stat_reply__unpack(NULL, r.h.body_len, r.body);
	wreply_free(&r);
	if (!s)
		return -EBADMSG;
	if (dirty_bytes)
		*dirty_bytes = s->has_dirty_bytes ? s->dirty_bytes : 0;
	rdax__stat_reply__free_unpacked(s, NULL);
	return 0;
}
