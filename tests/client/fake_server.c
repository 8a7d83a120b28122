/* SPDX-License-Identifier: BSD-3-Clause */
/* fake_server.c -- an in-process rdax server that can misbehave, for librdax tests */
#include "fake_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "errors.h"
#include "frame.h"
#include "rdax.pb-c.h"

struct outbuf {
	uint8_t *data;
	size_t len, cap;
};

static void out_append(struct outbuf *o, const void *p, size_t n)
{
	if (o->len + n > o->cap) {
		o->cap = (o->len + n) * 2;
		o->data = realloc(o->data, o->cap);
		if (!o->data)
			abort();
	}
	memcpy(o->data + o->len, p, n);
	o->len += n;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n) {
		ssize_t r = recv(fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void out_flush(int fd, struct outbuf *o)
{
	if (o->len)
		write_all(fd, o->data, o->len);
	o->len = 0;
}

/* put_frame -- append a reply frame: header, @msg packed, @payload */
static void put_frame(struct outbuf *o, uint16_t type, uint64_t id, const ProtobufCMessage *msg,
		      const void *payload, uint32_t payload_len)
{
	size_t size = protobuf_c_message_get_packed_size(msg);
	uint8_t *body = malloc(size ? size : 1);
	protobuf_c_message_pack(msg, body);
	struct frame_header h = {.magic = FRAME_MAGIC,
				 .version = FRAME_VERSION,
				 .type = type,
				 .request_id = id,
				 .body_len = (uint32_t)size,
				 .payload_len = payload_len};
	uint8_t hb[FRAME_HEADER_SIZE];
	frame_header_encode(&h, hb);
	out_append(o, hb, sizeof(hb));
	out_append(o, body, size);
	if (payload_len)
		out_append(o, payload, payload_len);
	free(body);
}

static void put_status(struct outbuf *o, uint16_t type, uint64_t id, uint32_t code, const char *msg)
{
	Rdax__Status st = RDAX__STATUS__INIT;
	st.code = code;
	st.message = code ? (char *)msg : NULL;
	Rdax__StatusReply r = RDAX__STATUS_REPLY__INIT;
	r.status = &st;
	put_frame(o, type, id, &r.base, NULL, 0);
}

static void log_req(struct fake_server *fs, const struct fake_req *r)
{
	pthread_mutex_lock(&fs->lock);
	if (fs->nlog < FAKE_LOG_MAX)
		fs->log[fs->nlog] = *r;
	fs->nlog++;
	pthread_mutex_unlock(&fs->lock);
}

/* range_err -- the daemon's way of refusing a range: 0 if inside the volume */
static uint32_t range_err(struct fake_server *fs, uint64_t off, uint64_t len, char *msg,
			  size_t mlen)
{
	uint64_t end;
	if (__builtin_add_overflow(off, len, &end)) {
		snprintf(msg, mlen, "offset+length overflows");
		return EOVERFLOW;
	}
	if (end > fs->cfg.volume_size) {
		snprintf(msg, mlen, "offset+length beyond the end of the volume (size %llu)",
			 (unsigned long long)fs->cfg.volume_size);
		return ERANGE;
	}
	return 0;
}

/* verifier -- what this connection's replies carry (0: none) */
static uint64_t verifier(const struct fake_server *fs)
{
	if (!fs->cfg.verifier)
		return 0;
	return fs->cfg.verifier + (fs->cfg.verifier_per_conn ? fs->conns : 0);
}

/* make_durable -- an fsync: everything written so far survives a lose_unsynced end */
static void make_durable(struct fake_server *fs)
{
	if (!fs->durable)
		return;
	pthread_mutex_lock(&fs->lock);
	memcpy(fs->durable, fs->vol, fs->cfg.volume_size);
	pthread_mutex_unlock(&fs->lock);
}

/*
 * serve -- one connection: read a frame, answer it (now or later), repeat.
 * Returns when the client closes or a knob says to close.
 */
static void serve(struct fake_server *fs, int fd)
{
	struct outbuf out = {0}, held = {0};
	uint8_t *body = NULL, *payload = NULL;
	unsigned n = 0, writes = 0;
	for (;;) {
		uint8_t hb[FRAME_HEADER_SIZE];
		if (read_all(fd, hb, sizeof(hb)))
			break;
		struct frame_header h;
		frame_header_decode(hb, &h);
		n++;
		struct fake_req lr = {.type = h.type, .id = h.request_id};
		if (fs->cfg.close_at == n && (!fs->cfg.close_first_only || fs->conns == 1)) {
			log_req(fs, &lr);
			break;
		}
		if (h.body_len > (1U << 20) || h.payload_len > (64U << 20))
			break;
		free(body);
		body = malloc(h.body_len ? h.body_len : 1);
		if (read_all(fd, body, h.body_len))
			break;
		bool held_reply = false;
		char msg[256];

		if (fs->cfg.frame_error_at == n) {
			log_req(fs, &lr);
			out_flush(fd, &out);
			put_status(&out, FRAME_REPLY, h.request_id, RDAX_E_PROTOCOL,
				   "frame header refused: test");
			out_flush(fd, &out);
			break;
		}
		if (fs->cfg.bad_magic_at == n || fs->cfg.wrong_id_at == n) {
			/* the payload of a WRITE is still read so the stream stays aligned */
			free(payload);
			payload = malloc(h.payload_len ? h.payload_len : 1);
			if (read_all(fd, payload, h.payload_len))
				break;
			log_req(fs, &lr);
			out_flush(fd, &out);
			if (fs->cfg.bad_magic_at == n) {
				uint8_t junk[FRAME_HEADER_SIZE];
				memset(junk, 0xab, sizeof(junk));
				write_all(fd, junk, sizeof(junk));
			} else {
				put_status(&out, h.type | FRAME_REPLY, h.request_id + 1000, 0,
					   NULL);
				out_flush(fd, &out);
			}
			continue;
		}

		switch (h.type) {
		case FRAME_HELLO: {
			Rdax__HelloRequest *r = rdax__hello_request__unpack(NULL, h.body_len, body);
			if (!r)
				goto out;
			if (r->has_token) {
				size_t l = r->token.len < sizeof(fs->token_seen) - 1
					       ? r->token.len
					       : sizeof(fs->token_seen) - 1;
				pthread_mutex_lock(&fs->lock);
				memcpy(fs->token_seen, r->token.data, l);
				fs->token_seen[l] = '\0';
				pthread_mutex_unlock(&fs->lock);
			}
			bool ok = !fs->cfg.token ||
				  (r->has_token && r->token.len == strlen(fs->cfg.token) &&
				   memcmp(r->token.data, fs->cfg.token, r->token.len) == 0);
			rdax__hello_request__free_unpacked(r, NULL);
			log_req(fs, &lr);
			Rdax__Status st = RDAX__STATUS__INIT;
			Rdax__HelloReply rep = RDAX__HELLO_REPLY__INIT;
			Rdax__NamespaceInfo ns = RDAX__NAMESPACE_INFO__INIT;
			Rdax__NamespaceInfo *nsp = &ns;
			rep.status = &st;
			if (!ok) {
				st.code = RDAX_E_ACCESS;
				st.message = "access token refused";
				put_frame(&out, h.type | FRAME_REPLY, h.request_id, &rep.base, NULL,
					  0);
				out_flush(fd, &out);
				goto out;
			}
			rep.has_protocol_version = rep.has_max_payload = rep.has_max_body = true;
			rep.protocol_version = FRAME_VERSION;
			rep.max_payload = fs->cfg.max_payload;
			rep.max_body = FRAME_DEFAULT_MAX_BODY;
			rep.server_version = "fake-1";
			ns.id = 3;
			ns.path = "/fake/ns0";
			ns.size = 1ULL << 30;
			ns.free_bytes = 1ULL << 29;
			ns.persist_method = RDAX__PERSIST_METHOD__PERSIST_SIM;
			ns.mode = "sim";
			rep.n_namespaces = 1;
			rep.namespaces = &nsp;
			put_frame(&out, h.type | FRAME_REPLY, h.request_id, &rep.base, NULL, 0);
			out_flush(fd, &out);
			continue;
		}
		case FRAME_VOLUME_OPEN: {
			Rdax__VolumeOpenRequest *r =
			    rdax__volume_open_request__unpack(NULL, h.body_len, body);
			if (!r)
				goto out;
			log_req(fs, &lr);
			Rdax__Status st = RDAX__STATUS__INIT;
			Rdax__VolumeOpenReply rep = RDAX__VOLUME_OPEN_REPLY__INIT;
			rep.status = &st;
			if (fs->cfg.not_primary) {
				st.code = RDAX_E_NOT_PRIMARY;
				st.message = "not the primary: test";
				st.primary_url = (char *)fs->cfg.not_primary;
				st.has_epoch = true;
				st.epoch = 2;
			} else if (strcmp(r->name, "vol") == 0) {
				rep.has_handle = rep.has_size = true;
				rep.handle = FAKE_HANDLE;
				rep.size = fs->cfg.volume_size;
				rep.has_verifier = verifier(fs) != 0;
				rep.verifier = verifier(fs);
			} else {
				st.code = ENOENT;
				snprintf(msg, sizeof(msg), "no volume named '%s'", r->name);
				st.message = msg;
			}
			put_frame(&out, h.type | FRAME_REPLY, h.request_id, &rep.base, NULL, 0);
			rdax__volume_open_request__free_unpacked(r, NULL);
			break;
		}
		case FRAME_VOLUME_CREATE:
		case FRAME_VOLUME_DELETE:
		case FRAME_VOLUME_CLOSE:
			log_req(fs, &lr);
			put_status(&out, h.type | FRAME_REPLY, h.request_id, 0, NULL);
			break;
		case FRAME_VOLUME_LIST: {
			log_req(fs, &lr);
			unsigned nv = fs->cfg.nvolumes_listed + 1;
			Rdax__VolumeInfo *infos = calloc(nv, sizeof(*infos));
			Rdax__VolumeInfo **ptrs = calloc(nv, sizeof(*ptrs));
			char(*names)[16] = calloc(nv, sizeof(*names));
			for (unsigned i = 0; i < nv; i++) {
				rdax__volume_info__init(&infos[i]);
				if (i == 0)
					snprintf(names[i], sizeof(names[i]), "vol");
				else
					snprintf(names[i], sizeof(names[i]), "v%u", i - 1);
				infos[i].name = names[i];
				infos[i].size = i == 0 ? fs->cfg.volume_size : (uint64_t)i << 20;
				infos[i].namespace_id = 3;
				infos[i].namespace_offset = (uint64_t)i << 30;
				ptrs[i] = &infos[i];
			}
			Rdax__Status st = RDAX__STATUS__INIT;
			Rdax__VolumeListReply rep = RDAX__VOLUME_LIST_REPLY__INIT;
			rep.status = &st;
			rep.n_volumes = nv;
			rep.volumes = ptrs;
			put_frame(&out, h.type | FRAME_REPLY, h.request_id, &rep.base, NULL, 0);
			free(names);
			free(ptrs);
			free(infos);
			break;
		}
		case FRAME_WRITE: {
			Rdax__WriteRequest *r = rdax__write_request__unpack(NULL, h.body_len, body);
			if (!r)
				goto out;
			lr.offset = r->offset;
			lr.length = h.payload_len;
			lr.fsync = r->has_fsync && r->fsync;
			log_req(fs, &lr);
			bool durable = lr.fsync;
			uint32_t code = range_err(fs, r->offset, h.payload_len, msg, sizeof(msg));
			rdax__write_request__free_unpacked(r, NULL);
			if (fs->cfg.refuse_write_at == n) {
				/* answer before the payload is read, as a daemon refusing it may */
				out_flush(fd, &out);
				put_status(&out, FRAME_WRITE | FRAME_REPLY, h.request_id,
					   RDAX_E_TOO_BIG, "write refused early: test");
				out_flush(fd, &out);
				free(payload);
				payload = malloc(h.payload_len ? h.payload_len : 1);
				if (read_all(fd, payload, h.payload_len))
					goto out;
				continue;
			}
			free(payload);
			payload = malloc(h.payload_len ? h.payload_len : 1);
			if (read_all(fd, payload, h.payload_len))
				goto out;
			Rdax__Status st = RDAX__STATUS__INIT;
			Rdax__WriteReply rep = RDAX__WRITE_REPLY__INIT;
			rep.status = &st;
			if (code) {
				st.code = code;
				st.message = msg;
			} else {
				pthread_mutex_lock(&fs->lock);
				memcpy(fs->vol + lr.offset, payload, h.payload_len);
				pthread_mutex_unlock(&fs->lock);
				fs->dirty += h.payload_len;
				if (durable) {
					rep.has_written_back = true;
					rep.written_back = h.payload_len;
					make_durable(fs);
				}
				rep.has_verifier = verifier(fs) != 0;
				rep.verifier = verifier(fs);
			}
			held_reply = durable && fs->cfg.hold_fsync;
			put_frame(held_reply ? &held : &out, h.type | FRAME_REPLY, h.request_id,
				  &rep.base, NULL, 0);
			break;
		}
		case FRAME_READ: {
			Rdax__ReadRequest *r = rdax__read_request__unpack(NULL, h.body_len, body);
			if (!r)
				goto out;
			lr.offset = r->offset;
			lr.length = r->length;
			log_req(fs, &lr);
			uint32_t code = range_err(fs, r->offset, r->length, msg, sizeof(msg));
			rdax__read_request__free_unpacked(r, NULL);
			Rdax__Status st = RDAX__STATUS__INIT;
			Rdax__ReadReply rep = RDAX__READ_REPLY__INIT;
			rep.status = &st;
			if (code) {
				st.code = code;
				st.message = msg;
			}
			uint32_t plen = code ? 0 : (uint32_t)lr.length;
			if (fs->cfg.short_read_at == n && plen)
				plen--;
			put_frame(&out, h.type | FRAME_REPLY, h.request_id, &rep.base,
				  code ? NULL : fs->vol + lr.offset, plen);
			break;
		}
		case FRAME_FSYNC: {
			Rdax__FsyncRequest *r = rdax__fsync_request__unpack(NULL, h.body_len, body);
			if (!r)
				goto out;
			lr.offset = r->offset;
			lr.length = r->length;
			lr.has_length = r->has_length;
			log_req(fs, &lr);
			rdax__fsync_request__free_unpacked(r, NULL);
			Rdax__Status st = RDAX__STATUS__INIT;
			Rdax__FsyncReply rep = RDAX__FSYNC_REPLY__INIT;
			rep.status = &st;
			rep.has_written_back = true;
			rep.written_back = fs->dirty;
			fs->dirty = 0;
			make_durable(fs);
			rep.has_verifier = verifier(fs) != 0;
			rep.verifier = verifier(fs);
			held_reply = fs->cfg.hold_fsync;
			put_frame(held_reply ? &held : &out, h.type | FRAME_REPLY, h.request_id,
				  &rep.base, NULL, 0);
			break;
		}
		case FRAME_DISCARD: {
			Rdax__DiscardRequest *r =
			    rdax__discard_request__unpack(NULL, h.body_len, body);
			if (!r)
				goto out;
			lr.offset = r->offset;
			lr.length = r->length;
			log_req(fs, &lr);
			uint32_t code = range_err(fs, r->offset, r->length, msg, sizeof(msg));
			if (!code)
				memset(fs->vol + r->offset, 0, r->length);
			rdax__discard_request__free_unpacked(r, NULL);
			put_status(&out, h.type | FRAME_REPLY, h.request_id, code, msg);
			break;
		}
		case FRAME_STAT: {
			log_req(fs, &lr);
			Rdax__Status st = RDAX__STATUS__INIT;
			Rdax__StatReply rep = RDAX__STAT_REPLY__INIT;
			rep.status = &st;
			rep.has_size = rep.has_dirty_bytes = rep.has_fsyncs = true;
			rep.size = fs->cfg.volume_size;
			rep.dirty_bytes = fs->dirty;
			rep.fsyncs = 42;
			put_frame(&out, h.type | FRAME_REPLY, h.request_id, &rep.base, NULL, 0);
			break;
		}
		default:
			log_req(fs, &lr);
			put_status(&out, FRAME_REPLY, h.request_id, RDAX_E_PROTOCOL,
				   "unknown type");
			out_flush(fd, &out);
			goto out;
		}
		/* the first WRITEs: no reply before all of them are in */
		if (h.type == FRAME_WRITE && fs->cfg.first_batch && ++writes < fs->cfg.first_batch)
			continue;
		out_flush(fd, &out);
		if (!held_reply)
			out_flush(fd, &held);
	}
out:
	free(out.data);
	free(held.data);
	free(body);
	free(payload);
}

static void *server_thread(void *arg)
{
	struct fake_server *fs = arg;
	for (;;) {
		int fd = accept(fs->listen_fd, NULL, NULL);
		if (fd < 0)
			break;
		int one = 1; /* replies go one by one: no waiting for ACKs (Nagle) */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		__atomic_store_n(&fs->conn_fd, fd, __ATOMIC_SEQ_CST);
		fs->conns++;
		serve(fs, fd);
		__atomic_store_n(&fs->conn_fd, -1, __ATOMIC_SEQ_CST);
		close(fd);
		if (fs->durable) { /* a power cut: what no fsync covered is gone */
			pthread_mutex_lock(&fs->lock);
			memcpy(fs->vol, fs->durable, fs->cfg.volume_size);
			pthread_mutex_unlock(&fs->lock);
		}
	}
	return NULL;
}

int fake_server_start(const struct fake_cfg *cfg, struct fake_server **out)
{
	struct fake_server *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	fs->cfg = *cfg;
	if (!fs->cfg.max_payload)
		fs->cfg.max_payload = 64U << 10;
	if (!fs->cfg.volume_size)
		fs->cfg.volume_size = 4U << 20;
	fs->vol = calloc(1, fs->cfg.volume_size);
	if (fs->cfg.lose_unsynced && !(fs->durable = calloc(1, fs->cfg.volume_size)))
		abort();
	fs->conn_fd = -1;
	pthread_mutex_init(&fs->lock, NULL);
	fs->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	if (!fs->vol || fs->listen_fd < 0 || bind(fs->listen_fd, (struct sockaddr *)&a, alen) ||
	    listen(fs->listen_fd, 4) || getsockname(fs->listen_fd, (struct sockaddr *)&a, &alen))
		abort();
	fs->port = ntohs(a.sin_port);
	snprintf(fs->url, sizeof(fs->url), "tcp://127.0.0.1:%u", fs->port);
	if (pthread_create(&fs->thread, NULL, server_thread, fs))
		abort();
	*out = fs;
	return 0;
}

void fake_server_stop(struct fake_server **fsp)
{
	struct fake_server *fs = *fsp;
	shutdown(fs->listen_fd, SHUT_RDWR);
	int cfd = __atomic_load_n(&fs->conn_fd, __ATOMIC_SEQ_CST);
	if (cfd >= 0)
		shutdown(cfd, SHUT_RDWR);
	pthread_join(fs->thread, NULL);
	close(fs->listen_fd);
	pthread_mutex_destroy(&fs->lock);
	free(fs->vol);
	free(fs->durable);
	free(fs);
	*fsp = NULL;
}

unsigned fake_server_nlog(struct fake_server *fs)
{
	pthread_mutex_lock(&fs->lock);
	unsigned n = fs->nlog;
	pthread_mutex_unlock(&fs->lock);
	return n;
}

struct fake_req fake_server_req(struct fake_server *fs, unsigned i)
{
	pthread_mutex_lock(&fs->lock);
	struct fake_req r = i < fs->nlog && i < FAKE_LOG_MAX ? fs->log[i] : (struct fake_req){0};
	pthread_mutex_unlock(&fs->lock);
	return r;
}

bool fake_server_token_is(struct fake_server *fs, const char *token)
{
	pthread_mutex_lock(&fs->lock);
	bool same = strcmp(fs->token_seen, token) == 0;
	pthread_mutex_unlock(&fs->lock);
	return same;
}

bool fake_server_holds(struct fake_server *fs, uint64_t off, const void *data, size_t len)
{
	pthread_mutex_lock(&fs->lock);
	bool same = off + len <= fs->cfg.volume_size && memcmp(fs->vol + off, data, len) == 0;
	pthread_mutex_unlock(&fs->lock);
	return same;
}
