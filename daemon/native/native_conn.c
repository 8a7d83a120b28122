/* SPDX-License-Identifier: BSD-3-Clause */
/* native_conn.c -- frames in, dispatch, jobs, replies out: the rdax protocol over a stream */
#include "native_conn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "media_guard.h"
#include "sock.h"
#include "tls_wire.h"

/* One reply on the stream: its header bytes and what dispatch built. */
struct native_reply {
	struct stream_out out;
	struct native_reply *next_spare;
	uint8_t hdr[FRAME_HEADER_SIZE];
	struct dispatch_reply r;
	uint8_t *payload_copy; /* snapshot_reads: the READ payload, copied when queued */
};

static const struct stream_limits native_limits = {
    .max_pending = NATIVE_MAX_PENDING,
    .max_bytes = NATIVE_MAX_QUEUED,
};

/* nc_of -- the connection around its stream */
static struct native_conn *nc_of(const struct stream *s)
{
	return (struct native_conn *)((char *)s - offsetof(struct native_conn, s));
}

/* ---- replies ---- */

/*
 * reply_get -- a reply structure: a spare one, or calloc'd; NULL if out of
 * memory. Not cleared: queue_reply sets every field (a memset of the whole
 * structure was a measurable share of a small write's instructions).
 */
static struct native_reply *reply_get(struct native_conn *nc)
{
	struct native_reply *nr = nc->spare;
	if (!nr)
		return calloc(1, sizeof(*nr));
	nc->spare = nr->next_spare;
	nc->nspare--;
	return nr;
}

/* native_out_release -- a reply left or was dropped: release it, keep the structure for reuse */
static void native_out_release(struct stream *s, struct stream_out *o)
{
	struct native_conn *nc = nc_of(s);
	struct native_reply *nr = (struct native_reply *)o;
	dispatch_reply_release(nc->session, &nr->r);
	free(nr->payload_copy);
	nr->payload_copy = NULL;
	if (nc->nspare >= NATIVE_SPARE_REPLIES) {
		free(nr);
		return;
	}
	nr->next_spare = nc->spare;
	nc->spare = nr;
	nc->nspare++;
}

/* frame_op -- the metrics' operation of a frame type (a reply's type without FRAME_REPLY) */
static enum metrics_op frame_op(uint16_t type)
{
	static const enum metrics_op ops[FRAME_TYPE_MAX] = {
	    [FRAME_HELLO] = METRICS_OP_HELLO,
	    [FRAME_VOLUME_CREATE] = METRICS_OP_VOLUME_CREATE,
	    [FRAME_VOLUME_DELETE] = METRICS_OP_VOLUME_DELETE,
	    [FRAME_VOLUME_LIST] = METRICS_OP_VOLUME_LIST,
	    [FRAME_VOLUME_INFO] = METRICS_OP_VOLUME_INFO,
	    [FRAME_VOLUME_OPEN] = METRICS_OP_VOLUME_OPEN,
	    [FRAME_VOLUME_CLOSE] = METRICS_OP_VOLUME_CLOSE,
	    [FRAME_WRITE] = METRICS_OP_WRITE,
	    [FRAME_READ] = METRICS_OP_READ,
	    [FRAME_FSYNC] = METRICS_OP_FSYNC,
	    [FRAME_DISCARD] = METRICS_OP_DISCARD,
	    [FRAME_STAT] = METRICS_OP_STAT,
	    [FRAME_NAMESPACE_LIST] = METRICS_OP_NAMESPACE_LIST,
	    [FRAME_REPLICA_DIGEST] = METRICS_OP_OTHER,
	    [FRAME_POWERCUT] = METRICS_OP_OTHER,
	    [FRAME_UNSAFE_CLEAR] = METRICS_OP_UNSAFE_CLEAR,
	};
	type &= (uint16_t)~FRAME_REPLY;
	return type > 0 && type < FRAME_TYPE_MAX ? ops[type] : METRICS_OP_OTHER;
}

/*
 * snapshot_read -- copy a READ payload out of the mapping when it is queued
 * (guarded: a bad page answers EIO instead of killing the daemon). Returns
 * 0, -ENOMEM, or -EIO with @r turned into the error reply.
 */
static int snapshot_read(struct native_conn *nc, struct native_reply *nr, struct dispatch_reply *r)
{
	nr->payload_copy = malloc(r->payload_len);
	if (!nr->payload_copy)
		return -ENOMEM;
	int ret = media_copy_out(nr->payload_copy, r->payload, r->payload_len);
	if (ret) {
		free(nr->payload_copy);
		nr->payload_copy = NULL;
		char m[128];
		snprintf(m, sizeof(m), "media error reading volume \"%s\" at %" PRIu64,
			 r->volume ? r->volume->name : "?", r->offset);
		uint16_t type = r->type;
		uint64_t id = r->request_id;
		dispatch_reply_release(nc->session, r);
		return dispatch_reply_error(r, type, id, -EIO, m) ? -ENOMEM : -EIO;
	}
	return 0;
}

/* queue_reply -- put a reply from dispatch on the stream (takes it over) */
static void queue_reply(struct native_conn *nc, struct dispatch_reply *r)
{
	struct conn *c = &nc->s.conn;
	if (c->dead) {
		dispatch_reply_release(nc->session, r);
		return;
	}
	struct native_reply *nr = reply_get(nc);
	if (!nr)
		goto err_nomem;
	nr->payload_copy = NULL;
	if (r->payload_len && nc->t->snapshot_reads) {
		/* a snapshot now: later requests and one-sided writes cannot change it */
		int ret = snapshot_read(nc, nr, r);
		if (ret == -ENOMEM) {
			free(nr);
			goto err_nomem;
		}
	}
	metrics_request(nc->t->metrics, frame_op(r->type), r->payload_len);
	if (r->code)
		metrics_error(nc->t->metrics, r->code);
	if (nr->payload_copy) {
		if (r->hold)
			session_handle_release(nc->session, r->hold);
		r->hold = 0;
		r->payload = nr->payload_copy;
		r->volume = NULL;
	}
	struct frame_header h = {
	    .magic = FRAME_MAGIC,
	    .version = FRAME_VERSION,
	    .type = r->type,
	    .request_id = r->request_id,
	    .body_len = r->body_len,
	    .payload_len = r->payload_len,
	};
	frame_header_encode(&h, nr->hdr);
	nr->r = *r;
	if (r->body == r->inline_body)
		nr->r.body = nr->r.inline_body;
	memset(r, 0, sizeof(*r));
	stream_out_set(&nr->out, nr->hdr, FRAME_HEADER_SIZE, nr->r.body, nr->r.body_len,
		       nr->r.payload, nr->r.payload_len);
	/* READ payloads gathered when sent are not copied: only copies count */
	nr->out.counted = nr->r.body_len + (nr->payload_copy ? nr->r.payload_len : 0);
	if (nr->r.payload_len && !nr->payload_copy) {
		nr->out.range_of = nr->r.volume;
		nr->out.range_off = nr->r.offset;
		nr->out.range_len = nr->r.payload_len;
	}
	stream_queue(&nc->s, &nr->out);
	return;

err_nomem:
	dispatch_reply_release(nc->session, r);
	LOG_ERROR("%s: out of memory for a reply; closing", c->peer);
	conn_fail(c, "out of memory");
}

/* ---- jobs ---- */

static void handle_out(struct native_conn *nc, struct dispatch_out *out);
static bool refuse_now(struct native_conn *nc);

/*
 * job_complete -- a job has run: queue its reply. No kick: the caller (a
 * pool completion, or the request itself for an inline fsync) decides what
 * runs next.
 */
static void job_complete(struct native_conn *nc, struct dispatch_job *job)
{
	struct dispatch_out out;
	struct conn *c = &nc->s.conn;

	c->jobs--;
	if (job->ordered)
		nc->barrier--;
	dispatch_job_finish(nc->env, nc->session, job, &out);
	if (!c->handshake_done && nc->session && nc->session->hello_done)
		conn_handshake_done(c); /* HELLO answered: the handshake limit is over */
	if (out.reply.body)
		queue_reply(nc, &out.reply);
	if (out.action == DISPATCH_CLOSE && !c->closing)
		conn_close(c, "out of memory");
	else if (out.action == DISPATCH_DROP)
		conn_fail(c, "power cut");
}

/* job_done -- a pool job ran (worker thread, posted by the pool) */
static void job_done(struct worker *w, struct worker_msg *m)
{
	struct vol_op *op = vol_op_of_msg(m);
	struct dispatch_job *job =
	    (struct dispatch_job *)((char *)op - offsetof(struct dispatch_job, op));
	struct native_conn *nc = job->owner;

	job_complete(nc, job);
	conn_kick(&nc->s.conn);
}

/*
 * job_start -- a small range fsync runs right here when the inline rule
 * takes it (vol_op_start: no hop to the pool and back), anything else in its
 * pool. An inline job's reply is queued before this returns. Over
 * RDMA the write notices that arrived before the FSYNC were marked as they
 * completed, before its message was parsed, so the inline fsync covers them
 * as the pool would.
 */
static void job_start(struct native_conn *nc, struct dispatch_job *job)
{
	if (vol_op_start(&job->op, &nc->sh->pools, nc->s.conn.set->worker, job_done))
		job_complete(nc, job);
}

/* submit_job -- start a job (inline or in its pool), or park it behind READ replies */
static void submit_job(struct native_conn *nc, struct dispatch_job *job)
{
	job->owner = nc;
	nc->s.conn.jobs++;
	if (job->ordered)
		nc->barrier++;
	/* it would change data under a READ reply still queued: after that reply */
	if (job->mod_volume &&
	    stream_park(&nc->s, job, job->mod_volume, job->mod_offset, job->mod_len))
		return;
	job_start(nc, job);
}

/* native_unpark -- start the parked job once the READ replies it waited for have left */
static void native_unpark(struct stream *s)
{
	struct dispatch_job *job = stream_unpark(s);
	if (job)
		job_start(nc_of(s), job);
}

/* ---- input ---- */

/* handle_out -- do what dispatch said */
static void handle_out(struct native_conn *nc, struct dispatch_out *out)
{
	switch (out->action) {
	case DISPATCH_NONE:
		break;
	case DISPATCH_REPLY:
		queue_reply(nc, &out->reply);
		break;
	case DISPATCH_CLOSE:
		if (out->reply.body)
			queue_reply(nc, &out->reply);
		conn_close(&nc->s.conn, "protocol error");
		break;
	case DISPATCH_PAYLOAD:
		if (out->reply.body)
			queue_reply(nc, &out->reply);
		nc->pw = out->write;
		stream_payload_begin(&nc->s, out->payload_dst, out->payload_len, out->write.v,
				     out->write.offset);
		break;
	case DISPATCH_JOB:
		submit_job(nc, out->job);
		break;
	case DISPATCH_DROP:
		conn_fail(&nc->s.conn, "power cut");
		break;
	}
}

/* native_payload_done -- the whole payload is in: finish the WRITE */
static void native_payload_done(struct stream *s, bool kept)
{
	struct native_conn *nc = nc_of(s);
	if (!kept)
		return;
	struct dispatch_out out;
	metrics_bytes(nc->t->metrics, METRICS_OP_WRITE, nc->pw.len);
	dispatch_payload_done(nc->env, nc->session, &nc->pw, &out);
	nc->pw.hold = 0;
	handle_out(nc, &out);
}

/* native_payload_abort -- the connection ended inside an accepted WRITE's payload */
static void native_payload_abort(struct stream *s, uint32_t got)
{
	struct native_conn *nc = nc_of(s);
	dispatch_payload_abort(nc->session, &nc->pw, got);
	if (got < s->plen)
		LOG_DEBUG("%s: WRITE %" PRIu64 " cut off after %" PRIu32 " of %" PRIu32
			  " payload bytes",
			  s->conn.peer, nc->pw.request_id, got, s->plen);
}

/* can_dispatch -- may a new frame be started? (updates the backpressure state) */
static bool can_dispatch(struct native_conn *nc)
{
	if (nc->s.conn.closing || nc->s.conn.dead || nc->barrier)
		return false;
	return stream_can_take(&nc->s, &native_limits);
}

/*
 * access_from_wire -- before HELLO: what the wire proved (a TLS name) or
 * refused (plaintext where TLS is required) goes into the session
 */
static void access_from_wire(struct native_conn *nc)
{
	struct tls_peer p;
	tls_wire_peer(&nc->s, &p);
	struct session_access *a = &nc->session->access;
	a->tls = p.tls;
	a->plain_refused = p.plain_refused;
	if (p.authenticated)
		snprintf(a->who.user, sizeof(a->who.user), "%s", p.identity);
}

/* native_input -- one step: a header, or a body (dispatched) */
static bool native_input(struct stream *s)
{
	struct native_conn *nc = nc_of(s);
	size_t avail = stream_in_avail(s);
	struct dispatch_out out;
	if (nc->refusal) {
		/* over a limit: nothing it sends is served; the refusal once the wire can say it */
		refuse_now(nc);
		stream_in_consume(s, avail);
		return false;
	}
	switch (nc->rstate) {
	case NATIVE_HEADER:
		/* can_dispatch first: it also lifts the backpressure once drained */
		if (!can_dispatch(nc) || avail < FRAME_HEADER_SIZE)
			return false;
		if (dispatch_header(nc->env, stream_in_data(s), &nc->hdr, &out)) {
			LOG_PEER(LOG_LEVEL_INFO, s->conn.peer,
				 "%s: bad frame header (request %" PRIu64 "); closing",
				 s->conn.peer, nc->hdr.request_id);
			handle_out(nc, &out);
			return false;
		}
		stream_in_consume(s, FRAME_HEADER_SIZE);
		nc->rstate = NATIVE_BODY;
		if (stream_in_reserve(s, nc->hdr.body_len)) {
			LOG_ERROR("%s: out of memory for a body of %" PRIu32 " bytes", s->conn.peer,
				  nc->hdr.body_len);
			conn_fail(&s->conn, "out of memory");
			return false;
		}
		/* the body usually came with its header: on with it */
		avail = stream_in_avail(s);
		__attribute__((fallthrough));
	case NATIVE_BODY:
		if (avail < nc->hdr.body_len)
			return false;
		nc->rstate = NATIVE_HEADER;
		if (!nc->session->hello_done)
			access_from_wire(nc);
		dispatch_request(nc->env, nc->session, &nc->hdr, stream_in_data(s), &out);
		stream_in_consume(s, nc->hdr.body_len);
		handle_out(nc, &out);
		return true;
	}
	return false;
}

/* native_want_input -- blocked (backpressure, barrier): the next frame would wait anyway */
static bool native_want_input(const struct stream *s)
{
	const struct native_conn *nc = nc_of(s);
	if (nc->rstate == NATIVE_BODY)
		return true;
	return !(nc->barrier || s->paused || stream_over(s, &native_limits));
}

/* native_input_usable -- after EOF: is a whole header or body still buffered? */
static bool native_input_usable(const struct stream *s, size_t avail)
{
	const struct native_conn *nc = nc_of(s);
	return avail >= (nc->rstate == NATIVE_HEADER ? FRAME_HEADER_SIZE : nc->hdr.body_len);
}

bool native_conn_blocked(const struct native_conn *nc)
{
	const struct stream *s = &nc->s;
	return !s->conn.dead && !s->conn.closing && !s->in_payload && nc->rstate == NATIVE_HEADER &&
	       stream_in_avail(s) >= FRAME_HEADER_SIZE;
}

/* ---- end ---- */

/* native_end -- close the session's volumes: in the metadata pool if any are open */
static bool native_end(struct stream *s)
{
	struct native_conn *nc = nc_of(s);
	if (nc->session && nc->session->nopen > 0) {
		/* closing volumes takes namespace locks: not on the loop */
		struct dispatch_job *job = dispatch_teardown_job(&nc->session);
		if (job) {
			submit_job(nc, job);
			return true;
		}
	}
	session_delete(&nc->session);
	return false;
}

/* native_free -- the spare replies, then the transport's connection */
static void native_free(struct stream *s)
{
	struct native_conn *nc = nc_of(s);
	while (nc->spare) {
		struct native_reply *nr = nc->spare;
		nc->spare = nr->next_spare;
		free(nr);
	}
	free(nc->refusal);
	metrics_conn(nc->t->metrics, false);
	nc->t->free(nc);
}

/*
 * refuse_now -- a connection over a connection limit is told so as soon as
 * its wire can carry it: one frame of type FRAME_REPLY with request id 0
 * (as for a bad header) and -EUSERS, then the end. A plain socket or RDMA
 * can at once, before the client sends anything (answering at once frees
 * its refusing slot soon, whatever the client does); a listener that also
 * takes rdaxs:// waits for the client's first byte -- and its TLS
 * handshake -- to know how to say it. Returns true once sent.
 */
static bool refuse_now(struct native_conn *nc)
{
	if (!nc->refusal || nc->refused || !tls_wire_can_send(&nc->s))
		return nc->refused;
	nc->refused = true;
	struct frame_header h = {.type = 0, .request_id = 0};
	struct dispatch_out out;
	dispatch_refuse(&h, -EUSERS, nc->refusal, &out);
	handle_out(nc, &out);
	return true;
}

/* native_start -- the first output: a refusal, if the connection is over a limit */
static void native_start(struct stream *s)
{
	refuse_now(nc_of(s));
}

const struct stream_proto native_proto = {
    .start = native_start,
    .input = native_input,
    .want_input = native_want_input,
    .input_usable = native_input_usable,
    .unpark = native_unpark,
    .payload_done = native_payload_done,
    .payload_abort = native_payload_abort,
    .out_release = native_out_release,
    .end = native_end,
    .free = native_free,
};

int native_conn_init(struct native_conn *nc, struct conn_set *set, const struct conn_ops *conn_ops,
		     const struct native_transport *t, const struct native_shared *sh,
		     size_t in_min, size_t in_extra, const char *peer)
{
	int ret = stream_init(&nc->s, set, conn_ops, &native_proto, in_min,
			      FRAME_HEADER_SIZE + (size_t)sh->env->max_body + in_extra, peer);
	if (ret)
		return ret;
	nc->t = t;
	nc->sh = sh;
	nc->env = sh->env;
	ret = session_new(sh->env->store, peer, &nc->session);
	if (ret) {
		stream_release(&nc->s);
		return ret;
	}
	metrics_conn(t->metrics, true);
	return 0;
}

/* ---- over a socket ---- */

/* socket_free -- a native socket connection is nothing but its core */
static void socket_conn_free(struct native_conn *nc)
{
	free(nc);
}

static const struct native_transport native_socket = {
    .snapshot_reads = false,
    .metrics = METRICS_TCP,
    .free = socket_conn_free,
};

int native_conn_refuse(struct native_conn *nc, const char *why)
{
	nc->refusal = strdup(why);
	return nc->refusal ? 0 : -ENOMEM;
}

int native_conn_start_socket(struct conn_set *set, const struct native_shared *sh, int fd,
			     const char *peer, struct conn_slot *slot, const char *refusal)
{
	struct native_conn *nc = calloc(1, sizeof(*nc));
	if (!nc)
		goto err_close;
	if (native_conn_init(nc, set, &stream_socket_conn_ops, &native_socket, sh, NATIVE_INBUF_MIN,
			     0, peer))
		goto err_free;
	nc->session->access.who.local = sock_peer_is_local(fd);
	if (refusal && native_conn_refuse(nc, refusal))
		goto err_release;
	/* rdaxs:// and tcp:// clients on the same listener: the first byte tells */
	if (sh->tls && tls_wire_attach(&nc->s, sh->tls, true))
		goto err_release;
	conn_take_slot(&nc->s.conn, slot);
	stream_socket_start(&nc->s, fd);
	return 0;

err_release:
	free(nc->refusal);
	metrics_conn(native_socket.metrics, false);
	session_delete(&nc->session);
	stream_release(&nc->s);
err_free:
	free(nc);
err_close:
	LOG_ERROR("%s: out of memory for a new connection; closing it", peer);
	close(fd);
	conn_limit_give(slot);
	return -ENOMEM;
}
