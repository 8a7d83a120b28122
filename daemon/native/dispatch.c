/* SPDX-License-Identifier: BSD-3-Clause */
/* dispatch.c -- decode, validate and answer requests, transport-independent */
#include "dispatch.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "checked.h"
#include "errors.h"
#include "faults.h"
#include "pb_arena.h"
#include "fsync.h"
#include "log.h"
#include "rdax.pb-c.h"
#include "size.h"
#include "incarnation.h"
#include "powercut.h"
#include "vol_ack.h"
#include "vol_op.h"
#include "cluster_delete.h"
#include "cluster_gate.h"
#include "verifier.h"
#include "repl_registry.h"
#include "xxhash.h"
#include "write_log.h"

#define STATUS_MSG_MAX 256

/*
 * Request bodies are unpacked into a buffer on the loop's stack, not with
 * malloc: protobuf-c takes an allocator, and a bump allocator over this many
 * bytes holds every data request (a WriteRequest unpacks into 48 bytes);
 * larger ones (names, tokens) spill to malloc. The arena, the shared
 * success body (below) and reply structures reused by native_conn.c took the
 * native 4 KiB write at QD32 from 3,778 to ~2,600 instructions in rdaxd
 * (callgrind, tests/bench/compare/callgrind-native.sh; NBD: 1,500).
 */
#define UNPACK_ARENA_SIZE 1024

/* Body of every request type. */
static const ProtobufCMessageDescriptor *const request_desc[FRAME_TYPE_MAX] = {
    [FRAME_HELLO] = &rdax__hello_request__descriptor,
    [FRAME_VOLUME_CREATE] = &rdax__volume_create_request__descriptor,
    [FRAME_VOLUME_DELETE] = &rdax__volume_delete_request__descriptor,
    [FRAME_VOLUME_LIST] = &rdax__volume_list_request__descriptor,
    [FRAME_VOLUME_INFO] = &rdax__volume_info_request__descriptor,
    [FRAME_VOLUME_OPEN] = &rdax__volume_open_request__descriptor,
    [FRAME_VOLUME_CLOSE] = &rdax__volume_close_request__descriptor,
    [FRAME_WRITE] = &rdax__write_request__descriptor,
    [FRAME_READ] = &rdax__read_request__descriptor,
    [FRAME_FSYNC] = &rdax__fsync_request__descriptor,
    [FRAME_DISCARD] = &rdax__discard_request__descriptor,
    [FRAME_STAT] = &rdax__stat_request__descriptor,
    [FRAME_NAMESPACE_LIST] = &rdax__namespace_list_request__descriptor,
    [FRAME_REPLICA_DIGEST] = &rdax__replica_digest_request__descriptor,
    [FRAME_POWERCUT] = &rdax__powercut_request__descriptor,
    [FRAME_UNSAFE_CLEAR] = &rdax__unsafe_clear_request__descriptor,
};

/* The request, decoded: one member per type, all share base. */
union request {
	ProtobufCMessage *base;
	Rdax__HelloRequest *hello;
	Rdax__VolumeCreateRequest *create;
	Rdax__VolumeDeleteRequest *del;
	Rdax__VolumeInfoRequest *info;
	Rdax__VolumeOpenRequest *open;
	Rdax__VolumeCloseRequest *close;
	Rdax__WriteRequest *write;
	Rdax__ReadRequest *read;
	Rdax__FsyncRequest *fsync;
	Rdax__DiscardRequest *discard;
	Rdax__StatRequest *stat;
	Rdax__ReplicaDigestRequest *digest;
	Rdax__PowercutRequest *powercut;
	Rdax__UnsafeClearRequest *clear;
};

enum job_kind { JOB_REQUEST, JOB_TEARDOWN };

/* A job: the public part, the request's arguments and, after run, its result. */
struct job {
	struct dispatch_job pub;
	enum job_kind kind;
	const struct dispatch_env *env;
	uint16_t type; /* request type */
	uint64_t request_id;

	/* arguments (the volume, range and mode of the operation are in pub.op) */
	uint32_t hold; /* handle held by the job (write, fsync, discard) */
	char name[NS_VOLUME_NAME_MAX + 1];
	uint64_t size;
	bool has_ns_id;
	uint32_t ns_id;
	struct session *teardown;
	struct acl_subject who; /* LIST: the volumes this subject may see; UNSAFE_CLEAR: who */
	char peer[sizeof(((struct session *)0)->peer)]; /* UNSAFE_CLEAR: for the log */
	/* VOLUME_OPEN of a replica link: the sender and its epoch (cluster_gate.h) */
	uint64_t replica_epoch; /* 0: an ordinary client */
	char replica_primary[CLUSTER_NAME_MAX + 1];
	bool imm_lines; /* VOLUME_OPEN: the client names lines in its write notices (RDMA) */

	/* result (the code and written_back are in pub.op) */
	char msg[STATUS_MSG_MAX];
	struct dispatch_reply reply; /* packed on the pool thread when it needs only the store */
};

/* job_of -- the job around its public part */
static struct job *job_of(struct dispatch_job *pub)
{
	return (struct job *)((char *)pub - offsetof(struct job, pub));
}

/* job_of_op -- the job around its volume operation */
static struct job *job_of_op(struct vol_op *op)
{
	return job_of((struct dispatch_job *)((char *)op - offsetof(struct dispatch_job, op)));
}

/*
 * The body of every status-only success reply (StatusReply, WriteReply,
 * ReadReply without written_back: every reply type starts with the same
 * Status, dispatch.h), packed once and shared by all of them.
 */
static uint8_t ok_body[8];
static uint32_t ok_body_len;
static pthread_once_t ok_body_once = PTHREAD_ONCE_INIT;

/* ok_body_pack -- pack the shared success body (once) */
static void ok_body_pack(void)
{
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__StatusReply rep = RDAX__STATUS_REPLY__INIT;
	rep.status = &st;
	size_t n = protobuf_c_message_get_packed_size(&rep.base);
	if (n > sizeof(ok_body))
		abort(); /* 4 bytes: cannot happen */
	protobuf_c_message_pack(&rep.base, ok_body);
	ok_body_len = (uint32_t)n;
}

/* reply_ok_static -- the shared status-only success body into @r: no allocation */
static void reply_ok_static(struct dispatch_reply *r)
{
	pthread_once(&ok_body_once, ok_body_pack);
	r->body = ok_body;
	r->body_len = ok_body_len;
	r->body_static = true;
}

/*
 * reply_ok_verifier -- a plain write's success reply with the verifier
 * (verifier.h): the shared success body, then field 3 as fixed64, packed
 * by hand into @r's inline body (13 bytes, no allocation), as protobuf-c
 * would pack a WriteReply with only status and verifier set
 */
static void reply_ok_verifier(struct dispatch_reply *r, uint64_t verifier)
{
	pthread_once(&ok_body_once, ok_body_pack);
	uint8_t *b = r->inline_body;
	memcpy(b, ok_body, ok_body_len);
	b[ok_body_len] = (3 << 3) | 1; /* field 3, 64-bit */
	for (unsigned i = 0; i < 8; i++)
		b[ok_body_len + 1 + i] = (uint8_t)(verifier >> (8 * i));
	r->body = b;
	r->body_len = ok_body_len + 9;
	r->body_static = true;
}

/* code_wire -- the positive Status.code of a negative return code */
static uint32_t code_wire(int code)
{
	return (uint32_t)(code < 0 ? -code : code);
}

/* reply_pack -- pack @m as the body of @r; 0, -RDAX_E_TOO_BIG, -ENOMEM */
static int reply_pack(const ProtobufCMessage *m, struct dispatch_reply *r)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	if (n > DISPATCH_MAX_REPLY_BODY)
		return -RDAX_E_TOO_BIG;
	uint8_t *b = malloc(n ? n : 1);
	if (!b)
		return -ENOMEM;
	protobuf_c_message_pack(m, b);
	r->body = b;
	r->body_len = (uint32_t)n;
	return 0;
}

/*
 * reply_status -- a reply that carries only a status, packed as StatusReply
 * (every reply type starts with the same field 1, see dispatch.h). @fmt NULL:
 * the generic message of @code. Returns 0 or -ENOMEM (no body).
 */
static int reply_status(struct dispatch_reply *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int reply_status(struct dispatch_reply *r, int code, const char *fmt, ...)
{
	char msg[STATUS_MSG_MAX];
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__StatusReply rep = RDAX__STATUS_REPLY__INIT;
	st.code = code_wire(code);
	if (code) {
		if (fmt) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(msg, sizeof(msg), fmt, ap);
			va_end(ap);
		} else {
			snprintf(msg, sizeof(msg), "%s", rdax_strerror(code));
		}
		st.message = msg;
	}
	rep.status = &st;
	r->code = code;
	return reply_pack(&rep.base, r);
}

/*
 * reply_refusal -- a cluster refusal (RDAX_E_NOT_PRIMARY, RDAX_E_STALE_EPOCH):
 * the status with the primary's address (@url, may be "") and the epoch, so
 * a client can follow and a primary knows it was deposed
 */
static int reply_refusal(struct dispatch_reply *r, int code, const char *msg, const char *url,
			 uint64_t epoch)
{
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__StatusReply rep = RDAX__STATUS_REPLY__INIT;
	st.code = code_wire(code);
	st.message = (char *)msg;
	if (url && url[0])
		st.primary_url = (char *)url;
	st.has_epoch = 1;
	st.epoch = epoch;
	rep.status = &st;
	return reply_pack(&rep.base, r);
}

/* out_init -- an empty result for request @h */
static void out_init(struct dispatch_out *out, uint16_t type, uint64_t request_id)
{
	memset(out, 0, sizeof(*out));
	out->reply.type = (uint16_t)(type | FRAME_REPLY);
	out->reply.request_id = request_id;
}

/*
 * out_error -- answer with an error status; @close ends the connection after
 * it. Out of memory for the reply: close without one.
 */
static void out_error(struct dispatch_out *out, bool close, int code, const char *msg)
{
	out->action = close ? DISPATCH_CLOSE : DISPATCH_REPLY;
	if (reply_status(&out->reply, code, "%s", msg))
		out->action = DISPATCH_CLOSE;
}

/* out_refusal -- answer with a cluster refusal (reply_refusal); the connection stays */
static void out_refusal(struct dispatch_out *out, int code, const char *msg, const char *url,
			uint64_t epoch)
{
	out->action = DISPATCH_REPLY;
	if (reply_refusal(&out->reply, code, msg, url, epoch))
		out->action = DISPATCH_CLOSE;
}

/* fmt_msg -- format a status message into @buf (STATUS_MSG_MAX bytes); returns @buf */
static const char *fmt_msg(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *fmt_msg(char *buf, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, STATUS_MSG_MAX, fmt, ap);
	va_end(ap);
	return buf;
}

/* out_ok -- a success reply that carries only the status (the shared body) */
static void out_ok(struct dispatch_out *out)
{
	out->action = DISPATCH_REPLY;
	reply_ok_static(&out->reply);
}

/* out_reply -- a packed success reply; on failure an error reply instead */
static void out_reply(struct dispatch_out *out, const ProtobufCMessage *m)
{
	int ret = reply_pack(m, &out->reply);
	if (ret == 0) {
		out->action = DISPATCH_REPLY;
		return;
	}
	out_error(out, false, ret,
		  ret == -RDAX_E_TOO_BIG ? "reply larger than 16 MiB" : "out of memory");
}

bool dispatch_token_equal(const uint8_t *want, size_t want_len, const uint8_t *got, size_t got_len)
{
	/* time depends only on the configured length, never on where a mismatch is */
	volatile uint8_t diff = want_len != got_len;
	for (size_t i = 0; i < want_len; i++) {
		uint8_t g = i < got_len ? got[i] : 0;
		diff |= (uint8_t)(want[i] ^ g);
	}
	return diff == 0;
}

/* printable -- @s with anything but printable ASCII replaced by '?', for logs */
static const char *printable(const char *s, char *buf, size_t len)
{
	size_t i = 0;
	for (; s && s[i] && i + 1 < len; i++)
		buf[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
	buf[i] = '\0';
	return buf;
}

int dispatch_header(const struct dispatch_env *env, const uint8_t raw[FRAME_HEADER_SIZE],
		    struct frame_header *h, struct dispatch_out *out)
{
	char m[STATUS_MSG_MAX];
	frame_header_decode(raw, h);
	int ret = frame_header_check(h, env->max_body, env->max_payload);
	if (ret == 0)
		return 0;

	if (h->magic != FRAME_MAGIC)
		fmt_msg(m, "bad frame magic %#" PRIx32 " (expected %#x)", h->magic, FRAME_MAGIC);
	else if (h->version != FRAME_VERSION)
		fmt_msg(m, "frame version %u not supported (this daemon speaks %u)", h->version,
			FRAME_VERSION);
	else if (h->type & FRAME_REPLY)
		fmt_msg(m, "a reply frame (type %#x) sent as a request", h->type);
	else if (h->type == 0 || h->type >= FRAME_TYPE_MAX)
		fmt_msg(m, "unknown request type %u", h->type);
	else if (h->body_len > env->max_body)
		fmt_msg(m, "body of %" PRIu32 " bytes exceeds max_body %" PRIu32, h->body_len,
			env->max_body);
	else if (h->payload_len > 0 && h->type != FRAME_WRITE)
		fmt_msg(m, "a %s request carries a payload (%" PRIu32 " bytes)",
			frame_type_name(h->type), h->payload_len);
	else
		fmt_msg(m, "payload of %" PRIu32 " bytes exceeds max_payload %" PRIu32,
			h->payload_len, env->max_payload);

	out_init(out, 0, h->request_id);
	out_error(out, true, ret, m);
	return ret;
}

void dispatch_refuse(const struct frame_header *h, int code, const char *msg,
		     struct dispatch_out *out)
{
	out_init(out, h->type, h->request_id);
	out_error(out, true, code, msg);
}

/* job_new -- a job for request @h: operation @kind (@call for VOL_OP_CALL); NULL if out of memory
 */
static struct job *job_new(const struct dispatch_env *env, const struct frame_header *h,
			   enum vol_op_kind kind, bool ordered, void (*call)(struct vol_op *))
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->kind = JOB_REQUEST;
	j->env = env;
	j->type = h->type;
	j->request_id = h->request_id;
	j->pub.ordered = ordered;
	j->pub.op.kind = kind;
	j->pub.op.store = env->store;
	j->pub.op.name = j->name;
	j->pub.op.call = call;
	j->reply.type = (uint16_t)(h->type | FRAME_REPLY);
	j->reply.request_id = h->request_id;
	return j;
}

/* out_job -- hand @j to the transport; NULL (out of memory) answers ENOMEM */
static void out_job(struct dispatch_out *out, struct job *j)
{
	if (!j) {
		out_error(out, false, -ENOMEM, "out of memory");
		return;
	}
	out->action = DISPATCH_JOB;
	out->job = &j->pub;
}

/* ---- pool side: what each job does (pool thread) ---- */

/* persist_method_wire -- persist.h's method as the protocol's enum */
static Rdax__PersistMethod persist_method_wire(enum persist_method m)
{
	switch (m) {
	case PERSIST_METHOD_CPU_CACHE_FLUSH:
		return RDAX__PERSIST_METHOD__PERSIST_CPU_CACHE_FLUSH;
	case PERSIST_METHOD_FENCE_ONLY:
		return RDAX__PERSIST_METHOD__PERSIST_FENCE_ONLY;
	case PERSIST_METHOD_MSYNC:
		return RDAX__PERSIST_METHOD__PERSIST_MSYNC;
	case PERSIST_METHOD_SIM:
		return RDAX__PERSIST_METHOD__PERSIST_SIM;
	}
	return RDAX__PERSIST_METHOD__PERSIST_MSYNC;
}

/* run_hello -- the HelloReply: limits and every namespace with its free space */
static void run_hello(struct vol_op *op)
{
	struct job *j = job_of_op(op);
	const struct dispatch_env *env = j->env;
	unsigned n = store_namespace_count(env->store);
	Rdax__NamespaceInfo *infos = calloc(n ? n : 1, sizeof(*infos));
	Rdax__NamespaceInfo **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
	if (!infos || !ptrs) {
		j->pub.op.code = -ENOMEM;
		goto out_free;
	}
	for (unsigned i = 0; i < n; i++) {
		struct ns *ns = store_namespace(env->store, i);
		uint64_t total = 0;
		ns_free_bytes(ns, &total, NULL);
		rdax__namespace_info__init(&infos[i]);
		infos[i].id = ns->id;
		infos[i].path = ns->path;
		infos[i].size = ns->persist.size;
		infos[i].free_bytes = total;
		infos[i].persist_method = persist_method_wire(ns->persist.method);
		infos[i].mode = (char *)persist_mode_name(ns->persist.mode);
		ptrs[i] = &infos[i];
	}
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__HelloReply rep = RDAX__HELLO_REPLY__INIT;
	rep.status = &st;
	rep.has_protocol_version = 1;
	rep.protocol_version = FRAME_VERSION;
	rep.has_max_payload = 1;
	rep.max_payload = env->max_payload;
	rep.has_max_body = 1;
	rep.max_body = env->max_body;
	rep.n_namespaces = n;
	rep.namespaces = ptrs;
	rep.server_version = (char *)env->server_version;
	rep.n_transports = env->ntransports;
	rep.transports = (char **)env->transports;
	rep.has_incarnation = 1;
	rep.incarnation = incarnation_get();
	rep.has_powercut_allowed = 1;
	rep.powercut_allowed = powercut_allowed();
	j->pub.op.code = reply_pack(&rep.base, &j->reply);
out_free:
	free(ptrs);
	free(infos);
}

/* health_state -- the one word of a namespace's health */
static const char *health_state(const struct media_health_info *mh)
{
	return mh->unsafe_shutdown ? "unsafe-shutdown" : mh->nbad ? "bad-blocks" : "ok";
}

/* The parts of one namespace's entry in a NamespaceListReply. */
struct ns_entry {
	Rdax__NamespaceHealth health;
	Rdax__BadRange *ranges;
	Rdax__BadRange **range_ptrs;
	char **marked;
	struct ns_volume_stats *vols;
	unsigned nvols;
};

/*
 * ns_entry_fill -- the health of @ns into @e and @info: the bad blocks read
 * again, each mapped to the volumes it touches. 0 or -ENOMEM.
 */
static int ns_entry_fill(struct ns *ns, struct ns_entry *e, Rdax__NamespaceInfo *info)
{
	struct media_health_info mh;
	media_health_refresh(&ns->health, ns->path, ns->hold_fd);
	media_health_get(&ns->health, &mh);
	if (ns_volume_stats(ns, &e->vols, &e->nvols))
		return -ENOMEM;
	/* at most one entry per (range, volume), or one for a range in no volume */
	size_t max = (size_t)mh.nbad * (e->nvols + 1);
	e->ranges = calloc(max ? max : 1, sizeof(*e->ranges));
	e->range_ptrs = calloc(max ? max : 1, sizeof(*e->range_ptrs));
	e->marked = calloc(e->nvols ? e->nvols : 1, sizeof(*e->marked));
	if (!e->ranges || !e->range_ptrs || !e->marked)
		return -ENOMEM;
	rdax__namespace_health__init(&e->health);
	e->health.state = (char *)health_state(&mh);
	e->health.has_unsafe_shutdown_count = mh.usc_supported;
	e->health.unsafe_shutdown_count = mh.usc;
	e->health.unsafe_shutdown = mh.unsafe_shutdown;
	e->health.badblocks_supported = mh.badblocks_supported;
	size_t n = 0;
	for (unsigned b = 0; b < mh.nbad; b++) {
		bool in_volume = false;
		for (unsigned k = 0; k < e->nvols; k++) {
			const struct ns_volume_stats *v = &e->vols[k];
			uint64_t lo = mh.bad[b].off > v->ns_offset ? mh.bad[b].off : v->ns_offset;
			uint64_t hi = mh.bad[b].off + mh.bad[b].len;
			if (hi > v->ns_offset + v->size)
				hi = v->ns_offset + v->size;
			if (hi <= lo)
				continue;
			in_volume = true;
			Rdax__BadRange *r = &e->ranges[n];
			rdax__bad_range__init(r);
			r->offset = lo;
			r->length = hi - lo;
			r->volume = (char *)v->name;
			r->has_volume_offset = 1;
			r->volume_offset = lo - v->ns_offset;
			e->range_ptrs[n] = r;
			n++;
		}
		if (!in_volume) {
			Rdax__BadRange *r = &e->ranges[n];
			rdax__bad_range__init(r);
			r->offset = mh.bad[b].off;
			r->length = mh.bad[b].len;
			e->range_ptrs[n] = r;
			n++;
		}
	}
	e->health.n_bad_blocks = n;
	e->health.bad_blocks = e->range_ptrs;
	for (unsigned k = 0; k < e->nvols; k++)
		if (e->vols[k].unsafe_shutdown)
			e->marked[e->health.n_marked_volumes++] = e->vols[k].name;
	e->health.marked_volumes = e->marked;
	info->kind = (char *)ns->kind;
	info->health = &e->health;
	return 0;
}

/* run_namespace_list -- every namespace with its kind and health (NAMESPACE_LIST) */
static void run_namespace_list(struct vol_op *op)
{
	struct job *j = job_of_op(op);
	const struct dispatch_env *env = j->env;
	unsigned n = store_namespace_count(env->store);
	Rdax__NamespaceInfo *infos = calloc(n ? n : 1, sizeof(*infos));
	Rdax__NamespaceInfo **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
	struct ns_entry *e = calloc(n ? n : 1, sizeof(*e));
	j->pub.op.code = infos && ptrs && e ? 0 : -ENOMEM;
	for (unsigned i = 0; i < n && j->pub.op.code == 0; i++) {
		struct ns *ns = store_namespace(env->store, i);
		uint64_t total = 0;
		ns_free_bytes(ns, &total, NULL);
		rdax__namespace_info__init(&infos[i]);
		infos[i].id = ns->id;
		infos[i].path = ns->path;
		infos[i].size = ns->persist.size;
		infos[i].free_bytes = total;
		infos[i].persist_method = persist_method_wire(ns->persist.method);
		infos[i].mode = (char *)persist_mode_name(ns->persist.mode);
		ptrs[i] = &infos[i];
		j->pub.op.code = ns_entry_fill(ns, &e[i], &infos[i]);
	}
	if (j->pub.op.code == 0) {
		Rdax__Status st = RDAX__STATUS__INIT;
		Rdax__NamespaceListReply rep = RDAX__NAMESPACE_LIST_REPLY__INIT;
		rep.status = &st;
		rep.n_namespaces = n;
		rep.namespaces = ptrs;
		j->pub.op.code = reply_pack(&rep.base, &j->reply);
	}
	for (unsigned i = 0; e && i < n; i++) {
		free(e[i].ranges);
		free(e[i].range_ptrs);
		free(e[i].marked);
		free(e[i].vols);
	}
	free(e);
	free(ptrs);
	free(infos);
}

/* run_create -- place and create a volume */
static void run_create(struct vol_op *op)
{
	struct job *j = job_of_op(op);
	struct store *store = j->env->store;
	j->pub.op.code = store_volume_create(store, j->name, j->size, j->has_ns_id ? &j->ns_id : NULL,
				      &j->ns_id, j->msg, sizeof(j->msg));
	/* logged once, by the engine (namespace.c); a refusal's reason is in the store's message */
}

/*
 * run_cluster_delete -- on a cluster node, the volume @j names if etcd has
 * it: the Delete txn and a bounded wait for its end (cluster_delete.h),
 * never a copy dropped alone. Returns true if it was the cluster's (the
 * job's code and message are set), false for a volume etcd does not know
 * (a local one, deleted as on any node). Blocks on etcd: a pool thread.
 */
static bool run_cluster_delete(struct job *j)
{
	const struct dispatch_env *env = j->env;
	struct etcd_client *e;
	char why[512];
	struct gate_vol *g = cluster_gate_find(j->name);
	int ret = etcd_client_new(env->cluster_etcd, NULL, &e, why, sizeof(why));
	if (ret == 0) {
		ret = cluster_delete_begin(e, env->cluster_name, j->name, why, sizeof(why));
		if (ret == -ENOENT && !(g && !cluster_gate_retired(g))) {
			etcd_client_delete(&e);
			return false; /* not the cluster's: a local volume (or none) */
		}
		if (ret == 0)
			ret = cluster_delete_wait(e, env->cluster_name, j->name,
						  CLUSTER_DELETE_WAIT_MS, why, sizeof(why));
		etcd_client_delete(&e);
	}
	j->pub.op.code = ret;
	if (ret == -ETIMEDOUT)
		fmt_msg(j->msg, "%s (the delete goes on; volume info or delete again shows it)",
			why);
	else if (ret)
		fmt_msg(j->msg, "delete cluster volume \"%s\": %s", j->name, why);
	else
		LOG_INFO("volume %s: deleted from the cluster", j->name);
	return true;
}

/* run_delete -- remove a volume that nobody has open (a cluster volume: its Delete txn) */
static void run_delete(struct vol_op *op)
{
	struct job *j = job_of_op(op);
	if (j->env->cluster_etcd && run_cluster_delete(j))
		return;
	j->pub.op.code = store_volume_delete(j->env->store, j->name);
	if (j->pub.op.code == -EBUSY)
		fmt_msg(j->msg, "volume \"%s\" is open; close it on every connection first",
			j->name);
	else if (j->pub.op.code == -ENOENT)
		fmt_msg(j->msg, "no volume \"%s\"", j->name);
	else if (j->pub.op.code)
		fmt_msg(j->msg, "delete volume \"%s\": %s", j->name, rdax_strerror(j->pub.op.code));
}

/* volume_info_wire -- fill a VolumeInfo message from the engine's volume_info */
static void volume_info_wire(const struct volume_info *in, Rdax__VolumeInfo *out)
{
	rdax__volume_info__init(out);
	out->name = (char *)in->name;
	out->size = in->size;
	out->namespace_id = in->ns_id;
	out->namespace_offset = in->ns_offset;
}

/* run_list -- every volume of every namespace */
static void run_list(struct vol_op *op)
{
	struct job *j = job_of_op(op);
	struct volume_info *vols = NULL;
	unsigned n = 0;
	j->pub.op.code = store_volume_list(j->env->store, &vols, &n);
	if (j->pub.op.code)
		return;
	Rdax__VolumeInfo *infos = calloc(n ? n : 1, sizeof(*infos));
	Rdax__VolumeInfo **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
	if (!infos || !ptrs) {
		j->pub.op.code = -ENOMEM;
		goto out_free;
	}
	unsigned shown = 0;
	for (unsigned i = 0; i < n; i++) {
		/* a volume the client may not read is invisible (acl.h) */
		if (!(acl_rights(j->env->acl, &j->who, vols[i].name) & ACL_READ))
			continue;
		volume_info_wire(&vols[i], &infos[shown]);
		ptrs[shown] = &infos[shown];
		shown++;
	}
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__VolumeListReply rep = RDAX__VOLUME_LIST_REPLY__INIT;
	rep.status = &st;
	rep.n_volumes = shown;
	rep.volumes = ptrs;
	j->pub.op.code = reply_pack(&rep.base, &j->reply);
	if (j->pub.op.code == -RDAX_E_TOO_BIG)
		fmt_msg(j->msg, "the list of %u volumes exceeds the largest reply (%u bytes)", n,
			DISPATCH_MAX_REPLY_BODY);
out_free:
	free(ptrs);
	free(infos);
	free(vols);
}

/* run_info -- one volume by name */
static void run_info(struct vol_op *op)
{
	struct job *j = job_of_op(op);
	struct volume_info vi;
	j->pub.op.code = store_volume_info(j->env->store, j->name, &vi);
	if (j->pub.op.code == -ENOENT) {
		fmt_msg(j->msg, "no volume \"%s\"", j->name);
		return;
	}
	if (j->pub.op.code)
		return;
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__VolumeInfo info;
	Rdax__VolumeInfoReply rep = RDAX__VOLUME_INFO_REPLY__INIT;
	volume_info_wire(&vi, &info);
	rep.status = &st;
	rep.volume = &info;
	j->pub.op.code = reply_pack(&rep.base, &j->reply);
}

/*
 * cleared_list -- ", v1, v2" of @c's volumes into @buf (@len bytes), cut with
 * ", ..." where it does not fit: a log record names the volumes, within bounds
 */
static const char *cleared_list(const struct ns_unsafe_cleared *c, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < c->nvolumes; i++) {
		int w = snprintf(buf + n, len - n, "%s%s", i ? ", " : "", c->names[i]);
		if (w < 0 || (size_t)w >= len - n - 5) { /* room for ", ..." */
			snprintf(buf + n, len - n, ", ...");
			break;
		}
		n += (size_t)w;
	}
	return buf;
}

/*
 * unsafe_clear_log -- who cleared which marks, once, at info (nothing when
 * nothing was marked: a no-op changes nothing worth a record)
 */
static void unsafe_clear_log(const struct job *j, const struct ns_unsafe_cleared *c)
{
	char who[ACL_NAME_MAX + 8], list[512];
	acl_subject_describe(&j->who, who, sizeof(who));
	struct ns *ns = store_namespace(j->env->store, c->ns_id);
	const char *path = ns ? ns->path : "?";
	if (j->name[0] && c->nvolumes)
		LOG_INFO("volume \"%s\" (namespace %s): unsafe-shutdown mark cleared by %s (%s)",
			 j->name, path, who, j->peer);
	else if (!j->name[0] && c->namespace_mark)
		LOG_INFO("namespace %s: unsafe-shutdown mark cleared by %s (%s), with the marks of "
			 "%u volume%s%s%s",
			 path, who, j->peer, c->nvolumes, c->nvolumes == 1 ? "" : "s",
			 c->nvolumes ? ": " : "", cleared_list(c, list, sizeof(list)));
	else if (!j->name[0] && c->nvolumes)
		LOG_INFO(
		    "namespace %s: unsafe-shutdown marks of %u volume%s cleared by %s (%s): %s",
		    path, c->nvolumes, c->nvolumes == 1 ? "" : "s", who, j->peer,
		    cleared_list(c, list, sizeof(list)));
	else
		LOG_DEBUG("%s: unsafe-shutdown clear of %s%s: nothing was marked", j->peer,
			  j->name[0] ? "volume " : "namespace ", j->name[0] ? j->name : path);
}

/*
 * run_unsafe_clear -- UNSAFE_CLEAR: one volume's mark (j->name), or a
 * namespace's and its volumes' (j->ns_id), through one table commit
 * (ns_unsafe_clear); the reply names what was marked
 */
static void run_unsafe_clear(struct vol_op *op)
{
	struct job *j = job_of_op(op);
	struct store *store = j->env->store;
	struct ns_unsafe_cleared c;
	op->code = j->name[0] ? store_volume_unsafe_clear(store, j->name, &c)
			      : store_namespace_unsafe_clear(store, j->ns_id, &c);
	if (op->code == -ENOENT && j->name[0]) {
		fmt_msg(j->msg, "no volume \"%s\"", j->name);
		return;
	}
	if (op->code) {
		fmt_msg(j->msg,
			"clearing the unsafe-shutdown mark of %s%s%s failed: %s; the mark stays",
			j->name[0] ? "volume \"" : "namespace ",
			j->name[0] ? j->name : store_namespace(store, j->ns_id)->path,
			j->name[0] ? "\"" : "", rdax_strerror(op->code));
		return;
	}
	unsafe_clear_log(j, &c);
	char **names = calloc(c.nvolumes ? c.nvolumes : 1, sizeof(*names));
	if (!names) {
		/* committed, only the reply is lost: the client sees ENOMEM, a retry a no-op */
		op->code = -ENOMEM;
		ns_unsafe_cleared_free(&c);
		return;
	}
	for (unsigned i = 0; i < c.nvolumes; i++)
		names[i] = c.names[i];
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__UnsafeClearReply rep = RDAX__UNSAFE_CLEAR_REPLY__INIT;
	rep.status = &st;
	rep.has_namespace_id = 1;
	rep.namespace_id = c.ns_id;
	rep.has_namespace_cleared = 1;
	rep.namespace_cleared = c.namespace_mark;
	rep.n_cleared_volumes = c.nvolumes;
	rep.cleared_volumes = names;
	op->code = reply_pack(&rep.base, &j->reply);
	free(names);
	ns_unsafe_cleared_free(&c);
}

/*
 * run_digest -- REPLICA_DIGEST: XXH3-128 of every block of the range, read
 * from the mapping (a write landing meanwhile may make a block's digest
 * differ from both its old and new bytes: the resync then ships it, which is
 * safe; docs/cluster.md, "Rejoin")
 */
static void run_digest(struct vol_op *op)
{
	struct job *j = job_of_op(op);
	uint64_t nblocks = op->len / j->size;
	uint8_t *d = malloc(nblocks * 16);
	if (!d) {
		op->code = -ENOMEM;
		return;
	}
	for (uint64_t i = 0; i < nblocks; i++) {
		XXH128_hash_t h = XXH3_128bits(op->v->data + op->off + i * j->size, j->size);
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, h);
		memcpy(d + i * 16, c.digest, 16);
	}
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__ReplicaDigestReply rep = RDAX__REPLICA_DIGEST_REPLY__INIT;
	rep.status = &st;
	rep.has_digests = 1;
	rep.digests.data = d;
	rep.digests.len = nblocks * 16;
	op->code = reply_pack(&rep.base, &j->reply);
	free(d);
}

/* run_teardown -- close a finished connection's volumes and free its session */
static void run_teardown(struct vol_op *op)
{
	struct job *j = job_of_op(op);
	session_delete(&j->teardown);
}

/* ---- loop side ---- */

/* varint_get -- one varint of at most 10 bytes from [*p, end); 0, or -1 (not plain) */
static int varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		if (shift == 63 && b > 1)
			return -1; /* more than 64 bits */
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

/*
 * string_with_nul -- the first string field of a @desc body on the wire
 * that holds a NUL byte, or NULL. protobuf-c hands strings over as C
 * strings, so "v\0/../x" arrives as "v": a name that passed every check
 * would name another volume than the one the client sent. The wire length
 * is the truth; a body protobuf-c accepted is walked here field by field
 * (requests carry strings at the top level only).
 */
static const char *string_with_nul(const ProtobufCMessageDescriptor *desc, const uint8_t *body,
				   uint32_t len)
{
	const uint8_t *p = body, *end = body + len;
	while (p < end) {
		uint64_t key, n;
		if (varint_get(&p, end, &key))
			return NULL; /* protobuf-c decoded it: cannot happen */
		switch (key & 7) {
		case 0:
			if (varint_get(&p, end, &n))
				return NULL;
			continue;
		case 1:
			n = 8;
			break;
		case 5:
			n = 4;
			break;
		case 2: {
			if (varint_get(&p, end, &n) || n > (uint64_t)(end - p))
				return NULL;
			const ProtobufCFieldDescriptor *f =
			    protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3));
			if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, n))
				return f->name;
			break;
		}
		default:
			return NULL; /* groups: protobuf-c refuses them */
		}
		if (n > (uint64_t)(end - p))
			return NULL;
		p += n;
	}
	return NULL;
}

/* range_error -- the status message of a failed range_check */
static const char *range_error(char *m, int code, uint64_t off, uint64_t len,
			       const struct volume *v)
{
	if (code == -EOVERFLOW)
		return fmt_msg(m, "offset %" PRIu64 " + length %" PRIu64 " overflows", off, len);
	return fmt_msg(m,
		       "range [%" PRIu64 ", %" PRIu64 " + %" PRIu64 ") is outside volume \"%s\" "
		       "(%" PRIu64 " bytes)",
		       off, off, len, v->name, v->size);
}

/* A cluster refusal's extra status fields (reply_refusal). */
struct refusal {
	char url[CLUSTER_URL_MAX + 1];
	uint64_t epoch;
};

/*
 * check_handle -- the volume of @handle on this session, or the error; a
 * cluster volume's handle must pass its gate too (cluster_gate.h: a replica
 * link's epoch still the newest seen, a client's node still the primary)
 */
static int check_handle(struct session *s, uint32_t handle, struct volume **v, char *m,
			struct refusal *rf)
{
	struct session_slot *slot = session_handle_slot(s, handle);
	if (!slot) {
		fmt_msg(m, "handle %" PRIu32 " is not open on this connection", handle);
		return -RDAX_E_NOT_OPEN;
	}
	*v = slot->v;
	int ret = cluster_gate_check(slot->gate, slot->epoch);
	if (ret == 0)
		return 0;
	struct gate_vol *g = (struct gate_vol *)slot->gate;
	rf->epoch = atomic_load(&g->epoch);
	if (ret == -ENOENT) {
		/* the handle holds the copy until it is closed: the copy goes after that */
		fmt_msg(m, "volume \"%s\" is being deleted from the cluster: close handle %" PRIu32,
			g->name, handle);
	} else if (ret == -RDAX_E_STALE_EPOCH) {
		fmt_msg(m,
			"volume \"%s\": this replica has seen epoch %" PRIu64
			", the link's is %" PRIu64 " (a deposed primary?)",
			g->name, rf->epoch, slot->epoch);
		LOG_WARN("%s: %s", s->peer, m);
	} else {
		cluster_gate_client_over(g, s->access.rdma, rf->url, sizeof(rf->url), &rf->epoch);
		fmt_msg(m, "volume \"%s\": this node is not its primary (the primary is at %s)",
			g->name, rf->url[0] ? rf->url : "an unknown address");
	}
	return ret;
}

/* check_name -- a valid volume name, or -EINVAL */
static int check_name(const char *name, char *m)
{
	char buf[NS_VOLUME_NAME_MAX + 2];
	if (ns_volume_name_valid(name) == 0)
		return 0;
	fmt_msg(m,
		"invalid volume name \"%s\": 1 to %d of A-Z a-z 0-9 . _ -, not starting with . "
		"or -",
		printable(name, buf, sizeof(buf)), NS_VOLUME_NAME_MAX);
	return -EINVAL;
}

/*
 * check_rights -- may the client do what needs @right with the volume @name
 * (acl.h)? A volume it may not even read does not exist for it: the same
 * ENOENT and message as a missing volume. 0, -ENOENT or -RDAX_E_ACCESS.
 */
static int check_rights(const struct dispatch_env *env, const struct session *s, const char *name,
			unsigned right, char *m)
{
	unsigned rights = acl_rights(env->acl, &s->access.who, name);
	if (rights & right)
		return 0;
	if (!(rights & ACL_READ) && right != ACL_CREATE) {
		fmt_msg(m, "no volume \"%s\"", name);
		return -ENOENT;
	}
	char who[ACL_NAME_MAX + 8];
	fmt_msg(m, "%s may not %s volume \"%s\" (--acl)",
		acl_subject_describe(&s->access.who, who, sizeof(who)),
		right == ACL_CREATE ? "create or delete" : "open", name);
	return -RDAX_E_ACCESS;
}

/*
 * check_clear_volume -- may the client clear volume @name's unsafe-shutdown
 * mark (acl.h)? The create right on it, as deleting it; a volume it may not
 * even see does not exist for it. 0, -ENOENT or -RDAX_E_ACCESS.
 */
static int check_clear_volume(const struct dispatch_env *env, const struct session *s,
			      const char *name, char *m)
{
	unsigned rights = acl_rights(env->acl, &s->access.who, name);
	if (rights & ACL_CREATE)
		return 0;
	if (!(rights & ACL_READ)) {
		fmt_msg(m, "no volume \"%s\"", name);
		return -ENOENT;
	}
	char who[ACL_NAME_MAX + 8];
	fmt_msg(m,
		"%s may not clear the unsafe-shutdown mark of volume \"%s\": that takes the "
		"create right on it (--acl)",
		acl_subject_describe(&s->access.who, who, sizeof(who)), name);
	return -RDAX_E_ACCESS;
}

/*
 * check_clear_namespace -- may the client clear the marks of the namespace
 * at @path and all its volumes (acl.h)? The create right on every volume
 * name, since it speaks for volumes of any owner. 0 or -RDAX_E_ACCESS.
 */
static int check_clear_namespace(const struct dispatch_env *env, const struct session *s,
				 const char *path, char *m)
{
	if (acl_rights_every(env->acl, &s->access.who) & ACL_CREATE)
		return 0;
	char who[ACL_NAME_MAX + 8];
	fmt_msg(m,
		"%s may not clear the unsafe-shutdown mark of namespace %s: that takes the "
		"create right on every volume (a rule for \"*\", --acl)",
		acl_subject_describe(&s->access.who, who, sizeof(who)), path);
	return -RDAX_E_ACCESS;
}

/*
 * check_unsafe_clear -- an UNSAFE_CLEAR names one target, which exists, and
 * the client may clear it. A namespace named by its path gets its id here
 * (@rq->namespace_id), so the job needs only that.
 */
static int check_unsafe_clear(const struct dispatch_env *env, const struct session *s,
			      Rdax__UnsafeClearRequest *rq, char *m)
{
	char buf[STATUS_MSG_MAX / 2];
	unsigned targets =
	    (rq->volume != NULL) + rq->has_namespace_id + (rq->namespace_path != NULL);
	if (targets != 1) {
		fmt_msg(m, "UNSAFE_CLEAR names %s: one volume, namespace_id or namespace_path",
			targets ? "more than one target" : "no target");
		return -EINVAL;
	}
	if (rq->volume) {
		int ret = check_name(rq->volume, m);
		return ret ? ret : check_clear_volume(env, s, rq->volume, m);
	}
	unsigned n = store_namespace_count(env->store);
	if (rq->namespace_path) {
		for (unsigned i = 0; i < n && !rq->has_namespace_id; i++)
			if (strcmp(store_namespace(env->store, i)->path, rq->namespace_path) == 0) {
				rq->has_namespace_id = 1;
				rq->namespace_id = i;
			}
		if (!rq->has_namespace_id) {
			fmt_msg(m, "no namespace \"%s\" (rdax namespace list shows the paths)",
				printable(rq->namespace_path, buf, sizeof(buf)));
			return -ENOENT;
		}
	} else if (rq->namespace_id >= n) {
		fmt_msg(m, "no namespace %" PRIu32 " (this daemon serves %u)", rq->namespace_id, n);
		return -ENOENT;
	}
	return check_clear_namespace(env, s, store_namespace(env->store, rq->namespace_id)->path,
				     m);
}

/*
 * check_writable -- a write, discard or fsync on @handle: refused on a
 * handle opened read-only, except an fsync with nothing dirty (it changes
 * nothing). 0 or -RDAX_E_ACCESS.
 */
static int check_writable(struct session *s, uint32_t handle, struct volume *v, bool fsync, char *m)
{
	if (!session_handle_ro(s, handle))
		return 0;
	if (fsync && !vol_op_has_dirty(v))
		return 0;
	fmt_msg(m, "volume \"%s\" is open read-only: this client has ro rights (--acl)", v->name);
	return -RDAX_E_ACCESS;
}

/*
 * validate_request -- every check of a decoded request, in one place, before
 * anything acts on it. Returns 0 (with *vp the volume of handle requests)
 * or the error, with its message in @m and *close set when the connection
 * must end after the reply.
 */
static int validate_request(const struct dispatch_env *env, struct session *s,
			    const struct frame_header *h, const uint8_t *body, union request req,
			    struct volume **vp, char *m, bool *close, struct refusal *rf)
{
	struct volume *v = NULL;
	uint64_t off, len;
	int ret;

	*close = false;
	if (h->type != FRAME_HELLO && !s->hello_done) {
		*close = true;
		fmt_msg(m, "HELLO must be the first request (got %s)", frame_type_name(h->type));
		return -RDAX_E_PROTOCOL;
	}
	const char *nul = body ? string_with_nul(request_desc[h->type], body, h->body_len) : NULL;
	if (nul) {
		fmt_msg(m, "the %s of a %s request holds a NUL byte", nul,
			frame_type_name(h->type));
		return -EINVAL;
	}
	switch (h->type) {
	case FRAME_HELLO:
		if (req.hello->protocol_version != FRAME_VERSION) {
			*close = true;
			fmt_msg(
			    m, "protocol version %" PRIu32 " not supported (this daemon speaks %u)",
			    req.hello->protocol_version, FRAME_VERSION);
			return -RDAX_E_VERSION;
		}
		if (s->access.plain_refused) {
			*close = true;
			fmt_msg(m, "this daemon requires TLS: connect with rdaxs://");
			return -RDAX_E_ACCESS;
		}
		/* with a token, every client sends it, whatever else it proved */
		if (env->token &&
		    (!req.hello->has_token ||
		     !dispatch_token_equal(env->token, env->token_len, req.hello->token.data,
					   req.hello->token.len))) {
			*close = true;
			fmt_msg(m, req.hello->has_token ? "wrong access token"
							: "this daemon needs an access token");
			return -RDAX_E_ACCESS;
		}
		return 0;
	case FRAME_VOLUME_CREATE:
		ret = check_name(req.create->name, m);
		if (ret)
			return ret;
		ret = check_rights(env, s, req.create->name, ACL_CREATE, m);
		if (ret)
			return ret;
		if (cluster_gate_reserved(req.create->name)) {
			fmt_msg(m,
				"the name \"%s\" is reserved for a cluster volume's change record",
				req.create->name);
			return -RDAX_E_ACCESS;
		}
		if (req.create->size == 0 || !is_aligned(req.create->size, RDAX_PAGE_SIZE)) {
			fmt_msg(m, "volume size %" PRIu64 " is not a positive multiple of %llu",
				req.create->size, RDAX_PAGE_SIZE);
			return -EINVAL;
		}
		return 0;
	case FRAME_VOLUME_DELETE:
		ret = check_name(req.del->name, m);
		if (ret == 0)
			ret = check_rights(env, s, req.del->name, ACL_CREATE, m);
		if (ret == 0 && cluster_gate_reserved(req.del->name)) {
			fmt_msg(m,
				"the name \"%s\" is reserved for a cluster volume's change record",
				req.del->name);
			ret = -RDAX_E_ACCESS;
		}
		/* a cluster volume: run_delete goes through the cluster (run_cluster_delete) */
		return ret;
	case FRAME_VOLUME_INFO:
		ret = check_name(req.info->name, m);
		return ret ? ret : check_rights(env, s, req.info->name, ACL_READ, m);
	case FRAME_VOLUME_OPEN:
		ret = check_name(req.open->name, m);
		if (ret == 0)
			ret = check_rights(env, s, req.open->name, ACL_READ, m);
		if (ret)
			return ret;
		if (cluster_gate_reserved(req.open->name)) {
			fmt_msg(m,
				"the name \"%s\" is reserved for a cluster volume's change record",
				req.open->name);
			return -RDAX_E_ACCESS;
		}
		if (req.open->replica &&
		    (!cluster_gate_find(req.open->name) || req.open->replica->epoch == 0 ||
		     !cluster_name_valid(req.open->replica->primary))) {
			fmt_msg(m, "replica open of \"%s\": %s", req.open->name,
				!cluster_gate_find(req.open->name)
				    ? "this node keeps no copy of it for the cluster"
				    : "epoch 0 or an invalid primary name");
			return cluster_gate_find(req.open->name) ? -EINVAL : -ENOENT;
		}
		if (s->nopen >= SESSION_MAX_HANDLES) {
			fmt_msg(m, "%d volumes open on this connection already",
				SESSION_MAX_HANDLES);
			return -RDAX_E_TOO_BIG;
		}
		return 0;
	case FRAME_VOLUME_LIST:
	case FRAME_NAMESPACE_LIST:
		return 0;
	case FRAME_UNSAFE_CLEAR:
		return check_unsafe_clear(env, s, req.clear, m);
	case FRAME_POWERCUT:
		if (req.powercut->has_delay_ms && req.powercut->delay_ms > POWERCUT_MAX_DELAY_MS) {
			fmt_msg(m, "delay of %" PRIu32 " ms exceeds the longest, %u ms",
				req.powercut->delay_ms, POWERCUT_MAX_DELAY_MS);
			return -EINVAL;
		}
		return 0;
	case FRAME_VOLUME_CLOSE:
		/* a fenced handle may still be closed */
		ret = session_handle_get(s, req.close->handle, &v);
		if (ret)
			fmt_msg(m, "handle %" PRIu32 " is not open on this connection",
				req.close->handle);
		return ret;
	case FRAME_STAT:
		ret = check_handle(s, req.stat->handle, &v, m, rf);
		break;
	case FRAME_WRITE:
		ret = check_handle(s, req.write->handle, &v, m, rf);
		if (ret == 0)
			ret = check_writable(s, req.write->handle, v, false, m);
		if (ret)
			return ret;
		off = req.write->offset;
		len = h->payload_len;
		if (len == 0) {
			fmt_msg(m, "WRITE without data (payload_len 0)");
			return -EINVAL;
		}
		ret = range_check(off, len, v->size);
		if (ret)
			range_error(m, ret, off, len, v);
		break;
	case FRAME_READ:
		ret = check_handle(s, req.read->handle, &v, m, rf);
		if (ret)
			return ret;
		off = req.read->offset;
		len = req.read->length;
		if (len == 0) {
			fmt_msg(m, "READ of length 0");
			return -EINVAL;
		}
		if (len > env->max_payload) {
			fmt_msg(m, "READ of %" PRIu64 " bytes exceeds max_payload %" PRIu32, len,
				env->max_payload);
			return -RDAX_E_TOO_BIG;
		}
		ret = range_check(off, len, v->size);
		if (ret) {
			range_error(m, ret, off, len, v);
		} else if (volume_range_bad(v, off, len)) {
			/* never load from poison: the copy would be a machine check */
			fmt_msg(
			    m,
			    "read of volume \"%s\" [%" PRIu64 ", +%" PRIu64
			    ") overlaps a bad block of the media (rdax namespace list shows it)",
			    v->name, off, len);
			ret = -EIO;
		}
		break;
	case FRAME_FSYNC:
		ret = check_handle(s, req.fsync->handle, &v, m, rf);
		if (ret == 0)
			ret = check_writable(s, req.fsync->handle, v, true, m);
		if (ret)
			return ret;
		off = req.fsync->has_offset ? req.fsync->offset : 0;
		len = req.fsync->has_length ? req.fsync->length : 0;
		/* length 0: to the end; the offset must still lie inside (or at the end) */
		ret = range_check(off, len, v->size);
		if (ret)
			range_error(m, ret, off, len, v);
		break;
	case FRAME_DISCARD:
		ret = check_handle(s, req.discard->handle, &v, m, rf);
		if (ret == 0)
			ret = check_writable(s, req.discard->handle, v, false, m);
		if (ret)
			return ret;
		off = req.discard->offset;
		len = req.discard->length;
		if (len == 0) {
			fmt_msg(m, "DISCARD of length 0");
			return -EINVAL;
		}
		ret = range_check(off, len, v->size);
		if (ret)
			range_error(m, ret, off, len, v);
		break;
	case FRAME_REPLICA_DIGEST: {
		const Rdax__ReplicaDigestRequest *d = req.digest;
		ret = check_handle(s, d->handle, &v, m, rf);
		if (ret)
			return ret;
		if (!session_handle_slot(s, d->handle)->epoch) {
			fmt_msg(m, "REPLICA_DIGEST is for a replica link's handle only");
			return -RDAX_E_ACCESS;
		}
		uint32_t b = d->block_size;
		if (b < 4096 || b > FRAME_MAX_PAYLOAD_LIMIT || (b & (b - 1)) || d->offset % b ||
		    d->length == 0 || d->length % b || d->length > DISPATCH_DIGEST_MAX) {
			fmt_msg(m,
				"REPLICA_DIGEST of %" PRIu64 "+%" PRIu64 " in blocks of %" PRIu32
				": the block a power of two of 4 KiB..64 MiB, offset and length "
				"multiples of it, length at most %u",
				d->offset, d->length, b, DISPATCH_DIGEST_MAX);
			return -EINVAL;
		}
		ret = range_check(d->offset, d->length, v->size);
		if (ret)
			range_error(m, ret, d->offset, d->length, v);
		break;
	}
	default:
		*close = true;
		fmt_msg(m, "unknown request type %u", h->type);
		return -RDAX_E_PROTOCOL;
	}
	if (ret == 0)
		*vp = v;
	return ret;
}

/* act_stat -- the counters of an open volume, on the loop (takes only the tree lock) */
static void act_stat(struct dispatch_out *out, struct volume *v)
{
	struct volume_stats vs;
	volume_stats_get(v, &vs);
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__StatReply rep = RDAX__STAT_REPLY__INIT;
	rep.status = &st;
	rep.has_size = rep.has_dirty_bytes = rep.has_entries_4k = rep.has_entries_2m = 1;
	rep.has_entries_1g = rep.has_tree_bytes = rep.has_fsyncs = rep.has_fsync_bytes = 1;
	rep.size = vs.size;
	rep.dirty_bytes = vs.dirty_bytes;
	rep.entries_4k = vs.entries[DTREE_SIZE_4K];
	rep.entries_2m = vs.entries[DTREE_SIZE_2M];
	rep.entries_1g = vs.entries[DTREE_SIZE_1G];
	rep.tree_bytes = vs.tree_bytes;
	rep.fsyncs = vs.fsyncs;
	rep.fsync_bytes = vs.fsync_bytes;
	out_reply(out, &rep.base);
}

/* act_powercut -- arm a power cut (powercut.h), on the loop; the reply names the incarnation */
static void act_powercut(struct dispatch_out *out, struct session *s, Rdax__PowercutRequest *rq)
{
	char m[STATUS_MSG_MAX];
	uint64_t inc = 0;
	uint64_t after = rq->has_after ? rq->after : 0;
	uint32_t delay_ms = rq->has_delay_ms ? rq->delay_ms : 0;
	int ret = powercut_arm(after, delay_ms, &inc, m, sizeof(m));
	if (ret) {
		out_error(out, false, ret, m);
		return;
	}
	LOG_INFO("%s: power cut requested (after %" PRIu64 ", delay %" PRIu32 " ms)", s->peer,
		 after, delay_ms);
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__PowercutReply rep = RDAX__POWERCUT_REPLY__INIT;
	rep.status = &st;
	rep.has_incarnation = 1;
	rep.incarnation = inc;
	out_reply(out, &rep.base);
}

/* act_read -- answer from the mapping: the reply holds the handle until it is sent */
static void act_read(struct dispatch_out *out, struct session *s, Rdax__ReadRequest *rq)
{
	struct volume *v;
	if (session_handle_hold(s, rq->handle, &v)) {
		out_error(out, false, -RDAX_E_NOT_OPEN, "handle not open");
		return;
	}
	/* a ReadReply is the status alone */
	out_ok(out);
	out->reply.payload = v->data + rq->offset;
	out->reply.payload_len = rq->length;
	out->reply.hold = rq->handle;
	out->reply.volume = v;
	out->reply.offset = rq->offset;
}

/*
 * repl_of -- the replication from this node of @handle's volume @v, or NULL:
 * not replicated from here, or @handle is a replica link's. A link's requests
 * are another primary's replication and are never forwarded again -- a node
 * that was the volume's primary before keeps its replication in the registry
 * (repl_registry.h), whose members it must not be made to wait for.
 */
static struct repl_volume *repl_of(struct session *s, uint32_t handle, struct volume *v)
{
	struct session_slot *slot = session_handle_slot(s, handle);
	if (slot && slot->epoch)
		return NULL;
	return repl_registry_get(v);
}

/* act_write -- accept the payload straight into the mapping, the handle held meanwhile */
static void act_write(struct dispatch_out *out, struct session *s, const struct frame_header *h,
		      Rdax__WriteRequest *rq)
{
	struct volume *v;
	if (session_handle_hold(s, rq->handle, &v)) {
		out_error(out, false, -RDAX_E_NOT_OPEN, "handle not open");
		return;
	}
	struct repl_volume *rv = repl_of(s, rq->handle, v);
	if (rv) /* a replicated volume: record it for absent replicas before the bytes land */
		repl_before_write(rv, rq->offset, h->payload_len);
	out->action = DISPATCH_PAYLOAD;
	out->payload_dst = v->data + rq->offset;
	out->payload_len = h->payload_len;
	out->write = (struct dispatch_write){
	    .request_id = h->request_id,
	    .hold = rq->handle,
	    .v = v,
	    .offset = rq->offset,
	    .len = h->payload_len,
	    .fsync = rq->has_fsync && rq->fsync,
	};
}

/* act_held_job -- a job on an open volume (fsync, discard), holding its handle */
static void act_held_job(const struct dispatch_env *env, struct dispatch_out *out,
			 struct session *s, const struct frame_header *h, uint32_t handle,
			 uint64_t off, uint64_t len, bool hammer)
{
	bool fsync = h->type == FRAME_FSYNC;
	struct job *j = job_new(env, h, fsync ? VOL_OP_FSYNC : VOL_OP_DISCARD, !fsync, NULL);
	if (!j) {
		out_job(out, NULL);
		return;
	}
	if (session_handle_hold(s, handle, &j->pub.op.v)) {
		free(j);
		out_error(out, false, -RDAX_E_NOT_OPEN, "handle not open");
		return;
	}
	j->hold = handle;
	j->pub.op.off = off;
	j->pub.op.len = len;
	j->pub.op.mode = vol_op_flush_mode(env->flush_mode, hammer);
	j->pub.op.local_only = !repl_of(s, handle, j->pub.op.v);
	if (!fsync) {
		j->pub.mod_volume = j->pub.op.v;
		j->pub.mod_offset = off;
		j->pub.mod_len = len;
	}
	out_job(out, j);
}

/* act_named_job -- a metadata job on a volume name (create, delete, info, open) */
static void act_named_job(const struct dispatch_env *env, struct dispatch_out *out,
			  const struct frame_header *h, const char *name, enum vol_op_kind kind,
			  void (*call)(struct vol_op *))
{
	struct job *j = job_new(env, h, kind, true, call);
	if (j)
		snprintf(j->name, sizeof(j->name), "%s", name);
	out_job(out, j);
}

/* act -- carry out a validated request */
static void act(const struct dispatch_env *env, struct session *s, const struct frame_header *h,
		union request req, struct volume *v, struct dispatch_out *out)
{
	struct job *j;
	switch (h->type) {
	case FRAME_HELLO: {
		char client[64];
		LOG_DEBUG("%s: hello from \"%s\"", s->peer,
			  printable(req.hello->client_name, client, sizeof(client)));
		/* validated: with a token configured, the client sent it */
		s->access.who.token = env->token != NULL;
		j = job_new(env, h, VOL_OP_CALL, true, run_hello);
		if (j)
			j->pub.op.quick = true; /* the namespaces' free space: bounded */
		out_job(out, j);
		return;
	}
	case FRAME_VOLUME_CREATE:
		act_named_job(env, out, h, req.create->name, VOL_OP_CALL, run_create);
		if (out->action == DISPATCH_JOB) {
			j = job_of(out->job);
			j->size = req.create->size;
			j->has_ns_id = req.create->has_namespace_id;
			j->ns_id = req.create->namespace_id;
		}
		return;
	case FRAME_VOLUME_DELETE:
		act_named_job(env, out, h, req.del->name, VOL_OP_CALL, run_delete);
		return;
	case FRAME_VOLUME_INFO:
		act_named_job(env, out, h, req.info->name, VOL_OP_CALL, run_info);
		if (out->action == DISPATCH_JOB)
			out->job->op.quick = true; /* one look-up */
		return;
	case FRAME_VOLUME_OPEN:
		act_named_job(env, out, h, req.open->name, VOL_OP_OPEN, NULL);
		if (out->action == DISPATCH_JOB)
			job_of(out->job)->imm_lines =
			    req.open->has_imm_line_units && req.open->imm_line_units;
		if (out->action == DISPATCH_JOB && req.open->replica) {
			j = job_of(out->job);
			j->replica_epoch = req.open->replica->epoch;
			snprintf(j->replica_primary, sizeof(j->replica_primary), "%s",
				 req.open->replica->primary);
		}
		return;
	case FRAME_VOLUME_LIST:
		j = job_new(env, h, VOL_OP_CALL, true, run_list);
		if (j)
			j->who = s->access.who;
		out_job(out, j);
		return;
	case FRAME_NAMESPACE_LIST:
		out_job(out, job_new(env, h, VOL_OP_CALL, true, run_namespace_list));
		return;
	case FRAME_UNSAFE_CLEAR:
		/* validated: a valid volume name, or a namespace id that exists */
		j = job_new(env, h, VOL_OP_CALL, true, run_unsafe_clear);
		if (j) {
			snprintf(j->name, sizeof(j->name), "%s",
				 req.clear->volume ? req.clear->volume : "");
			j->ns_id = req.clear->namespace_id;
			j->who = s->access.who;
			snprintf(j->peer, sizeof(j->peer), "%s", s->peer);
		}
		out_job(out, j);
		return;
	case FRAME_VOLUME_CLOSE: {
		struct volume *closed = NULL;
		j = job_new(env, h, VOL_OP_CLOSE, true, NULL);
		if (!j) {
			out_job(out, NULL);
			return;
		}
		session_handle_close(s, req.close->handle, &closed);
		/* validated: the handle was open; its direct access ends before the reply */
		if (env->hooks && env->hooks->volume_closed)
			env->hooks->volume_closed(env->hook_arg, req.close->handle);
		if (!closed) {
			/* a reply or fsync in flight holds it: the last release closes it */
			free(j);
			out_ok(out);
			return;
		}
		j->pub.op.v = closed;
		out_job(out, j);
		return;
	}
	case FRAME_STAT:
		act_stat(out, v);
		return;
	case FRAME_POWERCUT:
		act_powercut(out, s, req.powercut);
		return;
	case FRAME_READ:
		act_read(out, s, req.read);
		return;
	case FRAME_WRITE:
		act_write(out, s, h, req.write);
		return;
	case FRAME_FSYNC:
		act_held_job(env, out, s, h, req.fsync->handle,
			     req.fsync->has_offset ? req.fsync->offset : 0,
			     req.fsync->has_length ? req.fsync->length : 0,
			     req.fsync->has_hammer && req.fsync->hammer);
		return;
	case FRAME_DISCARD:
		act_held_job(env, out, s, h, req.discard->handle, req.discard->offset,
			     req.discard->length, false);
		return;
	case FRAME_REPLICA_DIGEST:
		j = job_new(env, h, VOL_OP_CALL, false, run_digest);
		if (j && session_handle_hold(s, req.digest->handle, &j->pub.op.v)) {
			free(j);
			out_error(out, false, -RDAX_E_NOT_OPEN, "handle not open");
			return;
		}
		if (j) {
			j->hold = req.digest->handle;
			j->pub.op.off = req.digest->offset;
			j->pub.op.len = req.digest->length;
			j->size = req.digest->block_size;
		}
		out_job(out, j);
		return;
	}
}

/*
 * The data requests, WRITE and READ, are decoded by hand when their body is
 * the plain form every client sends: each field once, as a varint, of the
 * numbers proto/rdax.proto gives them (handle = 1, offset = 2, then fsync
 * or length = 3), every required one present, each value in range. That is
 * exactly what protobuf-c would accept and decode to the same values; any
 * other body (unknown or repeated fields, other wire types, a varint that
 * is overlong or out of range, a required field missing) goes to
 * protobuf_c_message_unpack(), which decides as before. protobuf-c's
 * unpack was ~580 of the ~2,600 instructions per native 4 KiB write at
 * QD32 that were left once it no longer called malloc; with this, 2,150
 * (callgrind). tests/unit/test_dispatch_plain.c checks the two agree.
 */

/*
 * decode_plain -- a WRITE or READ body in the plain form above into *w or
 * *r (the request points at it). Returns true if decoded; false: use
 * protobuf-c.
 */
static bool decode_plain(uint16_t type, const uint8_t *body, uint32_t len, Rdax__WriteRequest *w,
			 Rdax__ReadRequest *r, union request *req)
{
	const uint8_t *p = body, *end = body + len;
	uint64_t val[4];
	unsigned seen = 0;

	if (type != FRAME_WRITE && type != FRAME_READ)
		return false;
	while (p < end) {
		uint64_t key;
		if (varint_get(&p, end, &key))
			return false;
		uint64_t field = key >> 3;
		/* wire type 0 (varint), fields 1-3, each once */
		if ((key & 7) != 0 || field < 1 || field > 3 || (seen & (1U << field)))
			return false;
		if (varint_get(&p, end, &val[field]))
			return false;
		seen |= 1U << field;
	}
	/* handle and offset required, both types; handle a uint32 */
	if (!(seen & (1U << 1)) || !(seen & (1U << 2)) || val[1] > UINT32_MAX)
		return false;
	if (type == FRAME_WRITE) {
		rdax__write_request__init(w);
		w->handle = (uint32_t)val[1];
		w->offset = val[2];
		if (seen & (1U << 3)) {
			if (val[3] > 1)
				return false;
			w->has_fsync = 1;
			w->fsync = val[3] == 1;
		}
		req->write = w;
		return true;
	}
	/* READ: length required, a uint32 */
	if (!(seen & (1U << 3)) || val[3] > UINT32_MAX)
		return false;
	rdax__read_request__init(r);
	r->handle = (uint32_t)val[1];
	r->offset = val[2];
	r->length = (uint32_t)val[3];
	req->read = r;
	return true;
}

void dispatch_request(const struct dispatch_env *env, struct session *s,
		      const struct frame_header *h, const uint8_t *body, struct dispatch_out *out)
{
	static const uint8_t empty[1];
	char m[STATUS_MSG_MAX];
	bool close;

	out_init(out, h->type, h->request_id);
	if (rdax_faults.leak_per_request)
		faults_leak(4096);
	if (h->type == 0 || h->type >= FRAME_TYPE_MAX || h->body_len > env->max_body) {
		/* dispatch_header() refuses these; never index the table with them */
		out_error(out, true, -RDAX_E_PROTOCOL, "bad frame header");
		return;
	}
	_Alignas(16) uint8_t arena_buf[UNPACK_ARENA_SIZE];
	struct pb_arena arena;
	pb_arena_init(&arena, arena_buf, sizeof(arena_buf));
	union request req;
	Rdax__WriteRequest plain_write;
	Rdax__ReadRequest plain_read;
	bool plain =
	    body && decode_plain(h->type, body, h->body_len, &plain_write, &plain_read, &req);
	if (!plain)
		req.base = protobuf_c_message_unpack(request_desc[h->type], &arena.alloc,
						     h->body_len, body ? body : empty);
	if (!req.base) {
		LOG_PEER(LOG_LEVEL_INFO, s->peer,
			 "%s: %s request %" PRIu64 ": body of %" PRIu32
			 " bytes does not decode; closing",
			 s->peer, frame_type_name(h->type), h->request_id, h->body_len);
		out_error(out, true, -RDAX_E_PROTOCOL,
			  fmt_msg(m, "%s request body does not decode", frame_type_name(h->type)));
		return;
	}

	struct volume *v = NULL;
	struct refusal rf = {.epoch = 0};
	/* the plain WRITE and READ bodies carry no string */
	int ret = validate_request(env, s, h, plain ? NULL : body, req, &v, m, &close, &rf);
	if (ret == -RDAX_E_NOT_PRIMARY || ret == -RDAX_E_STALE_EPOCH) {
		out_refusal(out, ret, m, rf.url, rf.epoch);
		if (out->action == DISPATCH_REPLY && h->payload_len > 0) {
			out->action = DISPATCH_PAYLOAD; /* read and dropped */
			out->payload_dst = NULL;
			out->payload_len = h->payload_len;
		}
	} else if (ret) {
		if (close)
			LOG_PEER(LOG_LEVEL_INFO, s->peer,
				 "%s: %s request %" PRIu64 " refused, closing: %s", s->peer,
				 frame_type_name(h->type), h->request_id, m);
		else
			LOG_DEBUG("%s: %s request %" PRIu64 " refused: %s", s->peer,
				  frame_type_name(h->type), h->request_id, m);
		out_error(out, close, ret, m);
		/* a refused WRITE's payload is read and dropped before the next frame */
		if (out->action == DISPATCH_REPLY && h->payload_len > 0) {
			out->action = DISPATCH_PAYLOAD;
			out->payload_dst = NULL;
			out->payload_len = h->payload_len;
		}
	} else {
		act(env, s, h, req, v, out);
	}
	/* nothing of the request is referred to after act(): names were copied */
	if (!plain)
		pb_arena_drop(&arena, req.base);
}

void dispatch_payload_done(const struct dispatch_env *env, struct session *s,
			   struct dispatch_write *w, struct dispatch_out *out)
{
	out_init(out, FRAME_WRITE, w->request_id);
	int ret = volume_mark_written(w->v, w->offset, w->len);
	if (ret) {
		/* cannot happen for a validated range; never acknowledge what is not tracked */
		char m[STATUS_MSG_MAX];
		LOG_ERROR("%s: volume_mark_written(%s, %" PRIu64 ", %" PRIu32 ") failed: %s",
			  s->peer, w->v->name, w->offset, w->len, rdax_strerror(ret));
		session_handle_release(s, w->hold);
		out_error(out, false, ret,
			  fmt_msg(m, "write not recorded: %s", rdax_strerror(ret)));
		return;
	}
	struct repl_volume *rv = repl_of(s, w->hold, w->v);
	if (rv) /* forwarded to every in-sync replica, after it landed (docs/cluster.md) */
		repl_write(rv, w->offset, w->len);
	if (w->fsync) {
		/* recorded now, acknowledged (and its fsync recorded) once durable */
		vol_ack_record_write(w->v, w->offset, w->len);
		struct frame_header h = {.type = FRAME_WRITE, .request_id = w->request_id};
		struct job *j = job_new(env, &h, VOL_OP_FSYNC, false, NULL);
		if (!j) {
			session_handle_release(s, w->hold);
			out_job(out, NULL);
			return;
		}
		/* the job takes over the payload's hold */
		j->hold = w->hold;
		j->pub.op.v = w->v;
		j->pub.op.off = w->offset;
		j->pub.op.len = w->len;
		j->pub.op.mode = vol_op_flush_mode(env->flush_mode, false);
		j->pub.op.local_only = !rv;
		out_job(out, j);
		return;
	}
	bool ack = vol_ack_write(w->v, w->offset, w->len);
	struct session_slot *slot = session_handle_slot(s, w->hold);
	uint64_t verifier = verifier_of(slot ? slot->gate : NULL);
	session_handle_release(s, w->hold);
	if (!ack) {
		out->action = DISPATCH_DROP; /* a power cut: nothing acknowledged after it */
		return;
	}
	/* a WriteReply without written_back: the status and the verifier */
	out->action = DISPATCH_REPLY;
	reply_ok_verifier(&out->reply, verifier);
}

void dispatch_payload_abort(struct session *s, struct dispatch_write *w, uint32_t received)
{
	if (!w->hold)
		return;
	if (received > 0) {
		volume_mark_written(w->v, w->offset, received);
		/* never acknowledged, but in the mapping: the replicas get it too, so copies agree
		 */
		struct repl_volume *rv = repl_of(s, w->hold, w->v);
		if (rv)
			repl_write(rv, w->offset, received);
	}
	session_handle_release(s, w->hold);
	w->hold = 0;
}

/* op_message -- the status message of a failed volume operation (CALLs write their own) */
static void op_message(struct job *j)
{
	const struct vol_op *op = &j->pub.op;
	if (j->msg[0])
		return;
	switch (op->kind) {
	case VOL_OP_FSYNC:
		fmt_msg(j->msg, "fsync of volume \"%s\" [%" PRIu64 ", +%" PRIu64 "): %s",
			op->v->name, op->off, op->len, rdax_strerror(op->code));
		break;
	case VOL_OP_DISCARD:
		fmt_msg(j->msg, "discard of volume \"%s\" [%" PRIu64 ", +%" PRIu64 "): %s",
			op->v->name, op->off, op->len, rdax_strerror(op->code));
		break;
	case VOL_OP_OPEN:
		if (op->code == -ENOENT)
			fmt_msg(j->msg, "no volume \"%s\"", j->name);
		break;
	default:
		break;
	}
}

/*
 * op_log -- a failed operation, logged once, here: what the request asked
 * for and could not have (a name taken, a volume open elsewhere, no room)
 * is the client's business, at info and rate-limited per address; a
 * failure of the daemon or its media (EIO, out of memory, an exhausted
 * metadata generation) is an error, still rate-limited per client so one
 * client's retries cannot flood the log.
 */
static void op_log(const struct session *s, const struct job *j)
{
	int code = j->pub.op.code;
	bool ours = code == -EIO || code == -ENOMEM || code == -EOVERFLOW || code == -EFAULT;
	LOG_PEER(ours ? LOG_LEVEL_ERROR : LOG_LEVEL_INFO, s->peer,
		 "%s: %s request %" PRIu64 " failed: %s", s->peer, frame_type_name(j->type),
		 j->request_id, j->msg[0] ? j->msg : rdax_strerror(code));
}
/*
 * open_gate -- a cluster volume's gate at open (cluster_gate.h): a client
 * needs this node to be the primary (a refused one is told the primary's
 * address for its own transport, @s->access.rdma), a replica link an epoch
 * not older than seen and the right sender. 0 (*gp the gate, NULL: not a
 * cluster volume), or the refusal already in @out.
 */
static int open_gate(const struct session *s, struct job *j, struct dispatch_out *out,
		     struct gate_vol **gp, uint64_t *epoch)
{
	char m[STATUS_MSG_MAX], url[CLUSTER_URL_MAX + 1] = "";
	struct gate_vol *g = cluster_gate_find(j->name);
	int ret = 0;
	*gp = g;
	*epoch = 0;
	if (!g)
		return 0;
	if (j->replica_epoch) {
		ret = cluster_gate_replica_open(g, j->replica_epoch, j->replica_primary, m,
						sizeof(m), epoch);
		if (ret == 0)
			*epoch = j->replica_epoch;
	} else {
		ret = cluster_gate_client_over(g, s->access.rdma, url, sizeof(url), epoch);
		if (ret == -ENOENT)
			fmt_msg(m, "volume \"%s\" is being deleted from the cluster", j->name);
		else if (ret)
			fmt_msg(
			    m, "volume \"%s\": this node is not its primary (the primary is at %s)",
			    j->name, url[0] ? url : "an unknown address");
		else
			*epoch = 0;
	}
	if (ret)
		out_refusal(out, ret, m, url, *epoch);
	return ret;
}
/* finish_open -- the opened volume gets its handle on this session */
static void finish_open(const struct dispatch_env *env, struct session *s, struct job *j,
			struct dispatch_out *out)
{
	uint32_t handle;
	struct gate_vol *g;
	uint64_t epoch;
	if (open_gate(s, j, out, &g, &epoch)) {
		store_volume_close(env->store, &j->pub.op.v);
		return;
	}
	int ret = session_handle_add(s, j->pub.op.v, &handle);
	if (ret) {
		store_volume_close(env->store, &j->pub.op.v);
		out_error(out, false, ret,
			  ret == -RDAX_E_TOO_BIG ? "too many volumes open on this connection"
						 : "out of memory");
		return;
	}
	if (!(acl_rights(env->acl, &s->access.who, j->pub.op.v->name) & ACL_WRITE))
		session_handle_set_ro(s, handle);
	if (g)
		session_handle_fence(s, handle, g, epoch);
	LOG_DEBUG("%s: opened volume \"%s\" as handle %#" PRIx32, s->peer, j->pub.op.v->name,
		  handle);
	Rdax__Status st = RDAX__STATUS__INIT;
	Rdax__VolumeOpenReply rep = RDAX__VOLUME_OPEN_REPLY__INIT;
	rep.status = &st;
	rep.has_handle = 1;
	rep.handle = handle;
	rep.has_size = 1;
	rep.size = j->pub.op.v->size;
	if (g) {
		rep.has_epoch = 1;
		rep.epoch = atomic_load(&g->epoch);
	}
	rep.has_verifier = 1;
	rep.verifier = verifier_of(g);
	if (env->hooks && env->hooks->volume_opened) {
		struct dispatch_direct d;
		ret = env->hooks->volume_opened(env->hook_arg, handle, j->pub.op.v, g, epoch,
						j->imm_lines, &d);
		if (ret) {
			char m[STATUS_MSG_MAX];
			struct volume *closed = NULL;
			fmt_msg(m, "no direct access to volume \"%s\": %s", j->pub.op.v->name,
				rdax_strerror(ret));
			session_handle_close(s, handle, &closed);
			if (closed)
				store_volume_close(env->store, &closed);
			out_error(out, false, ret, m);
			return;
		}
		rep.has_remote_addr = rep.has_rkey = rep.has_imm_volume_id = 1;
		rep.remote_addr = d.remote_addr;
		rep.rkey = d.rkey;
		rep.imm_volume_id = d.imm_volume_id;
		rep.has_imm_unit_shift = 1;
		rep.imm_unit_shift = d.imm_unit_shift;
		rep.has_imm_durable = rep.imm_durable = d.imm_durable;
	}
	out_reply(out, &rep.base);
}

/*
 * job_ack -- the acknowledgement of a data job that succeeded (a durable
 * WRITE, FSYNC, DISCARD): false when it must not be acknowledged (a power
 * cut is decided; also a job the cut kept from running). Other jobs and
 * failures: true (their reply claims nothing durable).
 */
static bool job_ack(struct job *j)
{
	const struct vol_op *op = &j->pub.op;
	if (op->code == VOL_OP_CUT && (op->kind == VOL_OP_FSYNC || op->kind == VOL_OP_DISCARD))
		return false;
	if (op->code)
		return true;
	switch (j->type) {
	case FRAME_WRITE:
		return vol_ack_fsync(op->v, op->mark, op->off, op->len, WLOG_FSYNC_FUA);
	case FRAME_FSYNC:
		return vol_ack_fsync(op->v, op->mark, op->off, op->len, 0);
	case FRAME_DISCARD:
		return vol_ack_discard(op->v, op->off, op->len, WLOG_DISCARD_DURABLE);
	default:
		return true;
	}
}

void dispatch_job_finish(const struct dispatch_env *env, struct session *s,
			 struct dispatch_job *pub, struct dispatch_out *out)
{
	struct job *j = job_of(pub);
	out_init(out, j->type, j->request_id);
	if (j->kind == JOB_TEARDOWN) {
		out->action = DISPATCH_NONE;
		free(j);
		return;
	}
	/*
	 * A data request: through the gate and into the write log (vol_ack.h)
	 * while its handle still holds the volume open.
	 */
	if (!job_ack(j)) {
		if (j->hold)
			session_handle_release(s, j->hold);
		dispatch_reply_release(NULL, &j->reply);
		out->action = DISPATCH_DROP;
		free(j);
		return;
	}
	uint64_t verifier = 0;
	if (j->hold) {
		/* what a WRITE or FSYNC reply carries, while the handle is still held */
		struct session_slot *slot = session_handle_slot(s, j->hold);
		verifier = verifier_of(slot ? slot->gate : NULL);
		session_handle_release(s, j->hold);
	}

	if (j->pub.op.code)
		op_message(j);
	if (j->pub.op.code) {
		op_log(s, j);
		if (j->type == FRAME_VOLUME_OPEN && j->pub.op.v)
			store_volume_close(env->store, &j->pub.op.v);
		dispatch_reply_release(NULL, &j->reply);
		out_error(out, false, j->pub.op.code,
			  j->msg[0] ? j->msg : rdax_strerror(j->pub.op.code));
		free(j);
		return;
	}
	switch (j->type) {
	case FRAME_HELLO:
		s->hello_done = true;
		/* fall through */
	case FRAME_VOLUME_LIST:
	case FRAME_VOLUME_INFO:
	case FRAME_NAMESPACE_LIST:
	case FRAME_UNSAFE_CLEAR:
	case FRAME_REPLICA_DIGEST:
		out->action = DISPATCH_REPLY;
		out->reply.body = j->reply.body;
		out->reply.body_len = j->reply.body_len;
		break;
	case FRAME_VOLUME_OPEN:
		finish_open(env, s, j, out);
		break;
	case FRAME_WRITE: {
		Rdax__Status st = RDAX__STATUS__INIT;
		Rdax__WriteReply rep = RDAX__WRITE_REPLY__INIT;
		rep.status = &st;
		rep.has_written_back = 1;
		rep.written_back = j->pub.op.written_back;
		rep.has_verifier = verifier != 0;
		rep.verifier = verifier;
		out_reply(out, &rep.base);
		break;
	}
	case FRAME_FSYNC: {
		Rdax__Status st = RDAX__STATUS__INIT;
		Rdax__FsyncReply rep = RDAX__FSYNC_REPLY__INIT;
		rep.status = &st;
		rep.has_written_back = 1;
		rep.written_back = j->pub.op.written_back;
		rep.has_verifier = verifier != 0;
		rep.verifier = verifier;
		out_reply(out, &rep.base);
		break;
	}
	default: /* create, delete, close, discard */
		out_ok(out);
		break;
	}
	free(j);
}

struct dispatch_job *dispatch_teardown_job(struct session **sp)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j) {
		session_delete(sp);
		return NULL;
	}
	j->kind = JOB_TEARDOWN;
	j->teardown = *sp;
	*sp = NULL;
	j->pub.ordered = true;
	j->pub.op.kind = VOL_OP_CALL;
	j->pub.op.call = run_teardown;
	return &j->pub;
}

int dispatch_reply_error(struct dispatch_reply *r, uint16_t type, uint64_t request_id, int code,
			 const char *msg)
{
	memset(r, 0, sizeof(*r));
	r->type = (uint16_t)(type | FRAME_REPLY);
	r->request_id = request_id;
	return reply_status(r, code, "%s", msg);
}

void dispatch_reply_release(struct session *s, struct dispatch_reply *r)
{
	if (!r->body_static)
		free(r->body);
	r->body_static = false;
	r->body = NULL;
	r->body_len = 0;
	if (r->hold && s)
		session_handle_release(s, r->hold);
	r->hold = 0;
	r->payload = NULL;
	r->payload_len = 0;
}
