/* SPDX-License-Identifier: BSD-3-Clause */
/* nbd_conn.c -- an NBD connection over a stream: its replies, its jobs, its end */
#include "nbd_conn.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "sock.h"
#include "tls_wire.h"
#include "repl_registry.h"

/* One reply on the stream: header bytes, then (READ) data from the mapping. */
struct nbd_out {
	struct stream_out out;
	uint8_t *owned; /* a forwarded READ's data: freed with the reply */
	uint8_t hdr[NBD_OUT_INLINE];
};

/* c_of -- the connection around its stream */
static struct nbd_conn *c_of(const struct stream *s)
{
	return (struct nbd_conn *)((char *)s - offsetof(struct nbd_conn, s));
}

/* ---- output ---- */

/* out_new -- a reply with room for NBD_OUT_INLINE header bytes; NULL (connection failed) */
static struct nbd_out *out_new(struct nbd_conn *c)
{
	if (c->s.conn.dead)
		return NULL;
	struct nbd_out *o = malloc(sizeof(*o));
	if (!o) {
		LOG_ERROR("%s: out of memory for a reply; closing", c->s.conn.peer);
		conn_fail(&c->s.conn, "out of memory");
		return NULL;
	}
	o->owned = NULL;
	return o;
}

/* out_queue -- @len header bytes of @o, then @payload_len bytes at @payload (a READ) */
static void out_queue(struct nbd_conn *c, struct nbd_out *o, size_t len, const uint8_t *payload,
		      uint32_t payload_len, uint64_t offset)
{
	stream_out_set(&o->out, o->hdr, len, NULL, 0, payload, payload_len);
	if (payload_len && c->v) {
		o->out.range_of = c->v;
		o->out.range_off = offset;
		o->out.range_len = payload_len;
	}
	stream_queue(&c->s, &o->out);
}

/* nbd_out_release -- a reply left or was dropped */
static void nbd_out_release(struct stream *s, struct stream_out *o)
{
	(void)s;
	free(((struct nbd_out *)o)->owned);
	free((struct nbd_out *)o);
}

void nbd_queue_bytes(struct nbd_conn *c, const void *buf, size_t len)
{
	struct nbd_out *o = out_new(c);
	if (!o)
		return;
	memcpy(o->hdr, buf, len);
	out_queue(c, o, len, NULL, 0, 0);
}

void nbd_opt_reply(struct nbd_conn *c, uint32_t option, uint32_t type, const void *data, size_t len)
{
	struct nbd_out *o = out_new(c);
	if (!o)
		return;
	if (len > NBD_OUT_INLINE - NBD_OPT_REPLY_HEADER_SIZE)
		len = NBD_OUT_INLINE - NBD_OPT_REPLY_HEADER_SIZE;
	nbd_opt_reply_encode(o->hdr, option, type, (uint32_t)len);
	if (len)
		memcpy(o->hdr + NBD_OPT_REPLY_HEADER_SIZE, data, len);
	out_queue(c, o, NBD_OPT_REPLY_HEADER_SIZE + len, NULL, 0, 0);
}

void nbd_opt_error(struct nbd_conn *c, uint32_t option, uint32_t type, const char *msg)
{
	LOG_DEBUG("%s: option %s (%" PRIu32 ") refused: %s", c->s.conn.peer, nbd_opt_name(option),
		  option, msg);
	nbd_opt_reply(c, option, type, msg, strlen(msg));
}

void nbd_req_ok(struct nbd_conn *c, const struct nbd_request *r)
{
	struct nbd_out *o = out_new(c);
	if (!o)
		return;
	if (c->structured && r->type == NBD_CMD_READ) {
		/* a READ of length 0: structured replies must be used for READ */
		nbd_chunk_header_encode(o->hdr, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, r->handle,
					0);
		out_queue(c, o, NBD_CHUNK_HEADER_SIZE, NULL, 0, 0);
	} else {
		nbd_simple_reply_encode(o->hdr, 0, r->handle);
		out_queue(c, o, NBD_SIMPLE_REPLY_SIZE, NULL, 0, 0);
	}
}

void nbd_req_error(struct nbd_conn *c, uint64_t handle, uint16_t type, uint32_t error,
		   const char *msg)
{
	LOG_DEBUG("%s: %s (handle %" PRIu64 ") failed: error %" PRIu32 ": %s", c->s.conn.peer,
		  nbd_cmd_name(type), handle, error, msg ? msg : "");
	metrics_error(METRICS_NBD, (int)error); /* NBD's error values are Linux's errno values */
	struct nbd_out *o = out_new(c);
	if (!o)
		return;
	if (c->structured) {
		size_t n = nbd_error_chunk_encode(o->hdr, sizeof(o->hdr), handle, error, msg);
		out_queue(c, o, n, NULL, 0, 0);
	} else {
		nbd_simple_reply_encode(o->hdr, error, handle);
		out_queue(c, o, NBD_SIMPLE_REPLY_SIZE, NULL, 0, 0);
	}
}

/*
 * read_reply_header -- the reply header of a successful READ of @r into
 * @o->hdr (structured: one final data chunk, so NBD_CMD_FLAG_DF always holds
 * and nothing can fail later), counted; returns its length
 */
static size_t read_reply_header(struct nbd_conn *c, struct nbd_out *o, const struct nbd_request *r)
{
	size_t n;
	if (c->structured) {
		nbd_data_chunk_prefix_encode(o->hdr, r->handle, r->offset, r->length, true);
		n = NBD_DATA_CHUNK_PREFIX;
	} else {
		nbd_simple_reply_encode(o->hdr, 0, r->handle);
		n = NBD_SIMPLE_REPLY_SIZE;
	}
	metrics_bytes(METRICS_NBD, METRICS_OP_READ, r->length);
	return n;
}

void nbd_req_read(struct nbd_conn *c, const struct nbd_request *r)
{
	struct nbd_out *o = out_new(c);
	if (!o)
		return;
	size_t n = read_reply_header(c, o, r);
	out_queue(c, o, n, c->v->data + r->offset, r->length, r->offset);
}

void nbd_req_read_buf(struct nbd_conn *c, const struct nbd_request *r, uint8_t *buf)
{
	struct nbd_out *o = out_new(c);
	if (!o) {
		free(buf);
		return;
	}
	size_t n = read_reply_header(c, o, r);
	o->owned = buf;
	/* a copy, not the mapping: c->v is NULL, so no range for the read-after-write rule */
	out_queue(c, o, n, buf, r->length, 0);
}

/* ---- jobs ---- */

static void job_done(struct worker *w, struct worker_msg *m);

struct nbd_job *nbd_job_new(struct nbd_conn *c, enum nbd_job_kind kind)
{
	struct nbd_job *j = calloc(1, sizeof(*j));
	if (!j) {
		LOG_ERROR("%s: out of memory for a job", c->s.conn.peer);
		return NULL;
	}
	j->c = c;
	j->kind = kind;
	j->op.store = c->sh->store;
	j->op.v = c->v;
	j->op.name = j->name;
	switch (kind) {
	case JOB_EXPORT:
		j->op.kind = VOL_OP_OPEN; /* INFO: VOL_OP_INFO, once the option is known */
		break;
	case JOB_FORWARD:
		j->op.kind = VOL_OP_CALL; /* nbd_job_run_in's */
		break;
	case JOB_LIST:
		j->op.kind = VOL_OP_LIST;
		break;
	case JOB_CLOSE:
		j->op.kind = VOL_OP_CLOSE;
		break;
	case JOB_FLUSH:
	case JOB_FUA:
		j->op.kind = VOL_OP_FSYNC;
		j->op.mode = vol_op_flush_mode(c->sh->flush_mode, false);
		break;
	case JOB_ZERO:
		/* zeros, written back and fenced: durable without a FLUSH, so FUA holds too */
		j->op.kind = VOL_OP_DISCARD;
		break;
	}
	return j;
}

/*
 * job_complete -- a job has run: act on its result and free it. No kick:
 * the caller (a pool completion, or job_start for an inline fsync) decides
 * what runs next.
 */
static void job_complete(struct nbd_conn *c, struct nbd_job *j)
{
	c->s.conn.jobs--;
	switch (j->kind) {
	case JOB_EXPORT:
	case JOB_FORWARD:
	case JOB_LIST:
		nbd_handshake_job_done(c, j);
		break;
	case JOB_CLOSE:
		break;
	case JOB_FLUSH:
	case JOB_FUA:
	case JOB_ZERO:
		nbd_transmission_job_done(c, j);
		break;
	}
	free(j);
}

/*
 * job_start -- a FUA write's range fsync, or a FLUSH, runs right here when
 * the inline rule takes it (vol_op_start: little to write back -- a small
 * range, or a FLUSH while the volume's dirty set is small -- and not
 * waiting for another fsync), its reply queued before this returns;
 * everything else goes to its pool.
 */
static void job_start(struct nbd_conn *c, struct nbd_job *j)
{
	if (j->kind == JOB_FUA || j->kind == JOB_ZERO) {
		j->op.off = j->offset;
		j->op.len = j->length;
	}
	if (vol_op_start(&j->op, &c->sh->pools, c->s.conn.set->worker, job_done))
		job_complete(c, j);
}

void nbd_job_submit(struct nbd_conn *c, struct nbd_job *j)
{
	c->s.conn.jobs++;
	if (j->kind == JOB_ZERO && stream_park(&c->s, j, c->v, j->offset, j->length))
		return;
	job_start(c, j);
}

/* job_call -- a pool thread runs a job of nbd_job_run_in */
static void job_call(struct fsync_task *t)
{
	struct vol_op *op = (struct vol_op *)((char *)t - offsetof(struct vol_op, task));
	op->call(op);
}

void nbd_job_run_in(struct nbd_conn *c, struct nbd_job *j, struct fsync_pool *pool,
		    void (*run)(struct vol_op *op))
{
	c->s.conn.jobs++;
	j->op.kind = VOL_OP_CALL;
	j->op.call = run;
	j->op.task.run = job_call;
	j->op.task.quick = false;
	j->op.task.owner = c->s.conn.set->worker;
	j->op.task.done.fn = job_done;
	fsync_pool_submit(pool, &j->op.task);
}

void nbd_forward_kick(void *arg)
{
	struct nbd_conn *c = arg;
	conn_kick(&c->s.conn);
}

/* nbd_unpark -- start the parked job once the READ replies it waited for have left */
static void nbd_unpark(struct stream *s)
{
	struct nbd_job *j = stream_unpark(s);
	if (j)
		job_start(c_of(s), j);
}

/* job_done -- a pool job ran (worker thread, posted by the pool) */
static void job_done(struct worker *w, struct worker_msg *m)
{
	struct nbd_job *j =
	    (struct nbd_job *)((char *)vol_op_of_msg(m) - offsetof(struct nbd_job, op));
	struct nbd_conn *c = j->c;

	job_complete(c, j);
	conn_kick(&c->s.conn);
}

/* ---- the stream's protocol ---- */

/* nbd_start -- the greeting (not to a connection accepted while draining) */
static void nbd_start(struct stream *s)
{
	struct nbd_conn *c = c_of(s);
	if (!s->conn.closing) {
		uint8_t g[NBD_GREETING_SIZE];
		nbd_greeting_encode(g);
		nbd_queue_bytes(c, g, sizeof(g));
	}
	conn_flush_add(&s->conn);
}

static bool nbd_input(struct stream *s)
{
	struct nbd_conn *c = c_of(s);
	if (c->phase == PH_REQ_HEADER)
		return nbd_transmission_input(c);
	return nbd_handshake_input(c);
}

/* nbd_want_input -- should the read watcher run (at a unit boundary)? */
static bool nbd_want_input(const struct stream *s)
{
	const struct nbd_conn *c = c_of(s);
	switch (c->phase) {
	case PH_OPT_WAIT:
		return false; /* the client must wait for the reply anyway */
	case PH_REQ_HEADER:
		return nbd_transmission_want_input(c);
	default:
		return true;
	}
}

static bool nbd_input_usable(const struct stream *s, size_t avail)
{
	const struct nbd_conn *c = c_of(s);
	if (c->phase == PH_REQ_HEADER)
		return avail >= NBD_REQUEST_SIZE;
	return nbd_handshake_usable(c, avail);
}

static void nbd_payload_done(struct stream *s, bool kept)
{
	nbd_transmission_payload_done(c_of(s), kept);
}

/* nbd_payload_abort -- in the mapping already: tracked, so a later flush covers it (never acked) */
static void nbd_payload_abort(struct stream *s, uint32_t got)
{
	struct nbd_conn *c = c_of(s);
	if (c->fwd) {
		/* a forwarded WRITE cut off: nothing of it was sent anywhere */
		free(c->wbuf);
		c->wbuf = NULL;
		return;
	}
	if (got) {
		volume_mark_written(c->v, c->req.offset, got);
		/* never acknowledged, but in the mapping: the replicas get it too, so copies agree
		 */
		struct repl_volume *rv = repl_registry_get(c->v);
		if (rv)
			repl_write(rv, c->req.offset, got);
	}
	LOG_DEBUG("%s: WRITE (handle %" PRIu64 ") cut off after %" PRIu32 " of %" PRIu32 " bytes",
		  s->conn.peer, c->req.handle, got, c->req.length);
}

/*
 * nbd_end -- close the export. Closing a volume takes the namespace lock:
 * not on the loop. The socket stays open until the volume is closed, so a
 * client that sees the end of the connection (after NBD_CMD_DISC, say)
 * knows the export is no longer held and the volume may be deleted.
 */
static bool nbd_end(struct stream *s)
{
	struct nbd_conn *c = c_of(s);
	LOG_DEBUG("%s: NBD connection closed after %" PRIu64 " requests (%s)", s->conn.peer,
		  c->requests, s->conn.why ? s->conn.why : "end");
	if (c->fwd) {
		/* every forwarded request is back (jobs 0): only the connection is left */
		nbd_forward_delete(&c->fwd);
		return false;
	}
	if (!c->v)
		return false;
	struct nbd_job *j = nbd_job_new(c, JOB_CLOSE);
	if (j) {
		c->v = NULL;
		nbd_job_submit(c, j);
		return true;
	}
	store_volume_close(c->sh->store, &c->v);
	return false;
}

/* nbd_dead -- the connection failed: forwarded requests' answers are not wanted any more */
static void nbd_dead(struct stream *s)
{
	struct nbd_conn *c = c_of(s);
	if (c->fwd)
		nbd_forward_cancel(c->fwd);
}

static void nbd_free(struct stream *s)
{
	nbd_forward_delete(&c_of(s)->fwd); /* a forwarder made while the connection ended */
	free(c_of(s)->wbuf);
	free(c_of(s)->refusal);
	metrics_conn(METRICS_NBD, false);
	free(c_of(s));
}

static const struct stream_proto nbd_proto = {
    .start = nbd_start,
    .input = nbd_input,
    .want_input = nbd_want_input,
    .input_usable = nbd_input_usable,
    .unpark = nbd_unpark,
    .payload_done = nbd_payload_done,
    .payload_abort = nbd_payload_abort,
    .out_release = nbd_out_release,
    .dead = nbd_dead,
    .end = nbd_end,
    .free = nbd_free,
};

int nbd_conn_start(struct conn_set *set, const struct nbd_shared *sh, int fd, const char *peer,
		   struct conn_slot *slot, const char *refusal)
{
	if (!sh || !sh->store || !sh->pools.fsync || !sh->pools.meta || sh->max_block == 0 ||
	    sh->max_block > NBD_MAX_BLOCK) {
		close(fd);
		conn_limit_give(slot);
		return -EINVAL;
	}
	struct nbd_conn *c = calloc(1, sizeof(*c));
	if (!c)
		goto err_close;
	if (refusal && !(c->refusal = strdup(refusal)))
		goto err_free;
	if (stream_init(&c->s, set, &stream_socket_conn_ops, &nbd_proto, NBD_INBUF_SIZE,
			NBD_INBUF_SIZE, peer))
		goto err_free;
	c->sh = sh;
	c->phase = PH_FLAGS;
	c->who.local = sock_peer_is_local(fd);
	/* plain until NBD_OPT_STARTTLS */
	if (sh->tls && tls_wire_attach(&c->s, sh->tls, false)) {
		stream_release(&c->s);
		goto err_free;
	}
	conn_take_slot(&c->s.conn, slot);
	metrics_conn(METRICS_NBD, true);
	stream_socket_start(&c->s, fd);
	return 0;

err_free:
	free(c->refusal);
	free(c);
err_close:
	LOG_ERROR("%s: out of memory for a new NBD connection; closing it", peer);
	close(fd);
	conn_limit_give(slot);
	return -ENOMEM;
}
