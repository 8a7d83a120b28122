/* SPDX-License-Identifier: BSD-3-Clause */
/* conn_tcp.c -- per-connection framing state machine on the worker's libev loop */
#include "conn_tcp.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "errors.h"
#include "frame.h"
#include "log.h"

/* iovecs per sendmsg(): header, body, payload of up to this many / 3 replies */
#define CONN_IOV_MAX 64
/* recv() calls per readable event, so one busy connection does not starve the others */
#define CONN_READ_BUDGET 16
/* flush/dispatch rounds per loop iteration before the loop polls again */
#define CONN_FLUSH_ROUNDS 16
/*
 * Sent reply structures kept for reuse per connection, instead of a calloc
 * and a free per reply: enough for a client with 32 writes in flight and
 * their replies queued twice over.
 */
#define CONN_SPARE_REPLIES 64

enum conn_rstate { RS_HEADER, RS_BODY, RS_PAYLOAD };

struct conn_reply {
	struct conn_reply *next;
	uint8_t hdr[FRAME_HEADER_SIZE];
	struct dispatch_reply r;
	size_t sent; /* bytes of header + body + payload already sent */
};

struct conn_tcp {
	struct conn_tcp_set *set;
	struct conn_tcp *prev, *next; /* set->conns */
	struct conn_tcp *flush_next;  /* set->flush */
	struct conn_tcp *dead_next;   /* set->dead */
	bool in_flush, in_dead;
	struct worker_msg start_msg;
	int fd;
	char peer[64];
	struct session *session;
	ev_io rio, wio;

	/* input: [in_start, in_end) of in[] is unparsed */
	uint8_t *in;
	size_t in_cap, in_start, in_end;
	enum conn_rstate rstate;
	struct frame_header hdr;
	uint8_t *pdst; /* RS_PAYLOAD: where the payload goes; NULL: dropped */
	uint32_t plen, pgot;
	struct dispatch_write pw;

	/* output */
	struct conn_reply *out_head, *out_tail;
	struct conn_reply *spare; /* sent replies kept for reuse (next), CONN_SPARE_REPLIES at most */
	unsigned nspare;
	unsigned out_count;
	unsigned out_reads; /* queued replies with a READ payload */
	size_t out_body;
	unsigned jobs;		     /* in the pools (or parked) */
	struct dispatch_job *parked; /* a job waiting for READ replies over its range to leave */
	unsigned barrier;	     /* ordered jobs in the pools */
	bool paused;		     /* over the pending limits: no new frame until half drained */

	bool eof;	   /* the peer closed its side */
	bool closing;	   /* send what is queued, then close */
	bool dead;	   /* the socket failed: drop output */
	bool tearing_down; /* the teardown job is in the metadata pool */
	const char *why;   /* why it ended, for the log */
};

static void conn_kick(struct conn_tcp *c);

/* ---- set bookkeeping ---- */

/* flush_add -- c has replies to send before the loop sleeps */
static void flush_add(struct conn_tcp *c)
{
	if (c->in_flush)
		return;
	c->in_flush = true;
	c->flush_next = c->set->flush;
	c->set->flush = c;
}

/* reply_get -- a zeroed reply structure: a spare one, or calloc'd; NULL if out of memory */
static struct conn_reply *reply_get(struct conn_tcp *c)
{
	struct conn_reply *cr = c->spare;
	if (!cr)
		return calloc(1, sizeof(*cr));
	c->spare = cr->next;
	c->nspare--;
	memset(cr, 0, sizeof(*cr));
	return cr;
}

/* reply_put -- release @cr's reply and keep the structure for reuse (or free it) */
static void reply_put(struct conn_tcp *c, struct conn_reply *cr)
{
	dispatch_reply_release(c->session, &cr->r);
	if (c->nspare >= CONN_SPARE_REPLIES) {
		free(cr);
		return;
	}
	cr->next = c->spare;
	c->spare = cr;
	c->nspare++;
}

/* replies_drop -- release every queued reply (sent or not) */
static void replies_drop(struct conn_tcp *c)
{
	struct conn_reply *r = c->out_head;
	while (r) {
		struct conn_reply *next = r->next;
		reply_put(c, r);
		r = next;
	}
	c->out_head = c->out_tail = NULL;
	c->out_count = c->out_reads = 0;
	c->out_body = 0;
}

/* conn_fail -- the socket is unusable: stop everything on it and drop queued output */
static void conn_fail(struct conn_tcp *c, const char *why)
{
	if (c->dead)
		return;
	c->dead = true;
	if (!c->why)
		c->why = why;
	ev_io_stop(c->set->worker->loop, &c->rio);
	ev_io_stop(c->set->worker->loop, &c->wio);
	/* nobody will read them: release their holds now (a parked job may wait on them) */
	replies_drop(c);
}

/* conn_free -- unlink and free (worker hook, nothing refers to c any more) */
static void conn_free(struct conn_tcp *c)
{
	struct conn_tcp_set *set = c->set;
	if (c->in_flush) {
		struct conn_tcp **pp = &set->flush;
		while (*pp && *pp != c)
			pp = &(*pp)->flush_next;
		if (*pp)
			*pp = c->flush_next;
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		set->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	set->nconns--;
	set->closed++;
	while (c->spare) {
		struct conn_reply *cr = c->spare;
		c->spare = cr->next;
		free(cr);
	}
	free(c->in);
	free(c);
}

/* conn_bury -- c is finished: free it before the loop sleeps */
static void conn_bury(struct conn_tcp *c)
{
	if (c->in_dead)
		return;
	c->in_dead = true;
	c->dead_next = c->set->dead;
	c->set->dead = c;
}

/* ---- output ---- */

/* queue_reply -- put a reply from dispatch on the queue (takes it over) */
static void queue_reply(struct conn_tcp *c, struct dispatch_reply *r)
{
	if (c->dead) {
		dispatch_reply_release(c->session, r);
		return;
	}
	struct conn_reply *cr = reply_get(c);
	if (!cr) {
		dispatch_reply_release(c->session, r);
		LOG_ERROR("%s: out of memory for a reply; closing", c->peer);
		conn_fail(c, "out of memory");
		return;
	}
	struct frame_header h = {
	    .magic = FRAME_MAGIC,
	    .version = FRAME_VERSION,
	    .type = r->type,
	    .request_id = r->request_id,
	    .body_len = r->body_len,
	    .payload_len = r->payload_len,
	};
	frame_header_encode(&h, cr->hdr);
	cr->r = *r;
	memset(r, 0, sizeof(*r));
	if (c->out_tail)
		c->out_tail->next = cr;
	else
		c->out_head = cr;
	c->out_tail = cr;
	c->out_count++;
	c->out_body += cr->r.body_len;
	if (cr->r.payload_len)
		c->out_reads++;
	flush_add(c);
}

/* reply_size -- bytes of one reply on the wire */
static size_t reply_size(const struct conn_reply *cr)
{
	return FRAME_HEADER_SIZE + (size_t)cr->r.body_len + cr->r.payload_len;
}

/* iov_add -- the unsent part of [base, base + len) that starts at @pos of the reply */
static void iov_add(struct iovec *iov, int *n, size_t *skip, const void *base, size_t len)
{
	if (*skip >= len) {
		*skip -= len;
		return;
	}
	if (len > 0) {
		iov[*n].iov_base = (uint8_t *)base + *skip;
		iov[*n].iov_len = len - *skip;
		(*n)++;
	}
	*skip = 0;
}

/*
 * conn_flush -- send queued replies until done or the socket is full;
 * free the sent ones. Returns true if anything was freed.
 */
static bool conn_flush(struct conn_tcp *c)
{
	bool freed = false;
	while (c->out_head && !c->dead) {
		struct iovec iov[CONN_IOV_MAX];
		int n = 0;
		for (struct conn_reply *cr = c->out_head; cr && n + 3 <= CONN_IOV_MAX;
		     cr = cr->next) {
			size_t skip = cr->sent;
			iov_add(iov, &n, &skip, cr->hdr, FRAME_HEADER_SIZE);
			iov_add(iov, &n, &skip, cr->r.body, cr->r.body_len);
			iov_add(iov, &n, &skip, cr->r.payload, cr->r.payload_len);
		}
		struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ev_io_start(c->set->worker->loop, &c->wio);
				return freed;
			}
			LOG_DEBUG("%s: sendmsg failed: %s", c->peer, strerror(errno));
			conn_fail(c, "send failed");
			return freed;
		}
		size_t left = (size_t)w;
		while (left > 0 && c->out_head) {
			struct conn_reply *cr = c->out_head;
			size_t rest = reply_size(cr) - cr->sent;
			if (left < rest) {
				cr->sent += left;
				break;
			}
			left -= rest;
			c->out_head = cr->next;
			if (!c->out_head)
				c->out_tail = NULL;
			c->out_count--;
			c->out_body -= cr->r.body_len;
			if (cr->r.payload_len)
				c->out_reads--;
			reply_put(c, cr);
			freed = true;
		}
	}
	ev_io_stop(c->set->worker->loop, &c->wio);
	return freed;
}

/* ---- input ---- */

/* over_limits -- too much in flight to take another request */
static bool over_limits(const struct conn_tcp *c)
{
	return c->out_count + c->jobs >= CONN_MAX_PENDING || c->out_body >= CONN_MAX_QUEUED_BODY;
}

/* can_dispatch -- may a new frame be started? (updates the backpressure state) */
static bool can_dispatch(struct conn_tcp *c)
{
	if (c->closing || c->dead || c->barrier)
		return false;
	if (c->paused) {
		/* hysteresis: resume at half, not at the first freed slot */
		if (c->out_count + c->jobs > CONN_MAX_PENDING / 2 ||
		    c->out_body > CONN_MAX_QUEUED_BODY / 2)
			return false;
		c->paused = false;
	}
	if (over_limits(c)) {
		c->paused = true;
		return false;
	}
	return true;
}

/* range_hazard -- does [off, off + len) of @v overlap a READ reply still queued? */
static bool range_hazard(const struct conn_tcp *c, const struct volume *v, uint64_t off,
			 uint64_t len)
{
	if (c->out_reads == 0)
		return false;
	/* validated ranges: off + len does not wrap */
	uint64_t wb = off, we = off + len;
	for (const struct conn_reply *cr = c->out_head; cr; cr = cr->next) {
		if (!cr->r.payload_len || cr->r.volume != v)
			continue;
		uint64_t rb = cr->r.offset, re = cr->r.offset + cr->r.payload_len;
		if (rb < we && wb < re)
			return true;
	}
	return false;
}

/* write_hazard -- would the pending WRITE land under a READ reply still queued? */
static bool write_hazard(const struct conn_tcp *c)
{
	if (c->rstate != RS_PAYLOAD || !c->pdst)
		return false;
	return range_hazard(c, c->pw.v, c->pw.offset, c->pw.len);
}

/*
 * job_complete -- a job has run: queue its reply. No kick: the caller (a
 * pool completion, or dispatch itself for an inline fsync) decides what runs
 * next.
 */
static void job_complete(struct conn_tcp *c, struct dispatch_job *job)
{
	struct dispatch_out out;

	c->jobs--;
	if (job->ordered)
		c->barrier--;
	dispatch_job_finish(c->set->shared->env, c->session, job, &out);
	if (out.reply.body)
		queue_reply(c, &out.reply);
	if (out.action == DISPATCH_CLOSE && !c->closing) {
		c->closing = true;
		c->why = "out of memory";
	}
}

/* job_done -- a pool job ran (worker thread, posted by the pool) */
static void job_done(struct worker *w, struct worker_msg *m)
{
	struct fsync_task *t = (struct fsync_task *)((char *)m - offsetof(struct fsync_task, done));
	struct dispatch_job *job =
	    (struct dispatch_job *)((char *)t - offsetof(struct dispatch_job, task));
	struct conn_tcp *c = job->owner;

	job_complete(c, job);
	conn_kick(c);
}

/*
 * job_start -- run a small range fsync right here when dispatch takes it
 * (dispatch_fsync_try_inline: no hop to the pool and back), else hand the
 * job to its pool. An inline job's reply is queued before this returns.
 */
static void job_start(struct conn_tcp *c, struct dispatch_job *job)
{
	const struct conn_tcp_shared *sh = c->set->shared;
	if (dispatch_job_try_inline(job)) {
		job_complete(c, job);
		return;
	}
	fsync_pool_submit(job->pool == DISPATCH_POOL_META ? sh->pool_meta : sh->pool_fsync,
			  &job->task);
}

/* submit_job -- start a job (inline or in its pool), or park it behind READ replies */
static void submit_job(struct conn_tcp *c, struct dispatch_job *job)
{
	job->owner = c;
	job->task.owner = c->set->worker;
	job->task.done.fn = job_done;
	c->jobs++;
	if (job->ordered)
		c->barrier++;
	if (job->mod_volume && range_hazard(c, job->mod_volume, job->mod_offset, job->mod_len)) {
		/* it would change data under a READ reply still queued: after that reply */
		LOG_DEBUG("%s: job parked until READ replies over [%" PRIu64 ", +%" PRIu64
			  ") have left",
			  c->peer, job->mod_offset, job->mod_len);
		c->parked = job;
		return;
	}
	job_start(c, job);
}

/* unpark -- start the parked job once the READ replies it waited for have left */
static void unpark(struct conn_tcp *c)
{
	struct dispatch_job *job = c->parked;
	if (!job || range_hazard(c, job->mod_volume, job->mod_offset, job->mod_len))
		return;
	c->parked = NULL;
	job_start(c, job);
}

/* handle_out -- do what dispatch said */
static void handle_out(struct conn_tcp *c, struct dispatch_out *out)
{
	switch (out->action) {
	case DISPATCH_NONE:
		break;
	case DISPATCH_REPLY:
		queue_reply(c, &out->reply);
		break;
	case DISPATCH_CLOSE:
		if (out->reply.body)
			queue_reply(c, &out->reply);
		c->closing = true;
		if (!c->why)
			c->why = "protocol error";
		break;
	case DISPATCH_PAYLOAD:
		if (out->reply.body)
			queue_reply(c, &out->reply);
		c->rstate = RS_PAYLOAD;
		c->pdst = out->payload_dst;
		c->plen = out->payload_len;
		c->pgot = 0;
		c->pw = out->write;
		break;
	case DISPATCH_JOB:
		submit_job(c, out->job);
		break;
	}
}

/* payload_complete -- the whole payload is in: finish the WRITE */
static void payload_complete(struct conn_tcp *c)
{
	c->rstate = RS_HEADER;
	if (!c->pdst)
		return;
	struct dispatch_out out;
	dispatch_payload_done(c->set->shared->env, c->session, &c->pw, &out);
	c->pdst = NULL;
	c->pw.hold = 0;
	handle_out(c, &out);
}

/* inbuf_reserve -- room for @need bytes from in_start on; 0 or -ENOMEM */
static int inbuf_reserve(struct conn_tcp *c, size_t need)
{
	if (c->in_cap - c->in_start >= need)
		return 0;
	size_t have = c->in_end - c->in_start;
	if (c->in_cap >= need) {
		memmove(c->in, c->in + c->in_start, have);
	} else {
		/* need <= FRAME_HEADER_SIZE + max_body: the header was checked */
		uint8_t *b = malloc(need);
		if (!b)
			return -ENOMEM;
		memcpy(b, c->in + c->in_start, have);
		free(c->in);
		c->in = b;
		c->in_cap = need;
	}
	c->in_start = 0;
	c->in_end = have;
	return 0;
}

/* conn_process -- parse and dispatch whatever the input buffer holds, as far as allowed */
static void conn_process(struct conn_tcp *c)
{
	const struct dispatch_env *env = c->set->shared->env;
	for (;;) {
		if (c->dead || c->closing)
			return;
		size_t avail = c->in_end - c->in_start;
		struct dispatch_out out;
		switch (c->rstate) {
		case RS_HEADER:
			/* can_dispatch first: it also lifts the backpressure once drained */
			if (!can_dispatch(c) || avail < FRAME_HEADER_SIZE)
				return;
			if (dispatch_header(env, c->in + c->in_start, &c->hdr, &out)) {
				LOG_WARN("%s: bad frame header (request %" PRIu64 "); closing",
					 c->peer, c->hdr.request_id);
				handle_out(c, &out);
				return;
			}
			c->in_start += FRAME_HEADER_SIZE;
			c->rstate = RS_BODY;
			if (inbuf_reserve(c, c->hdr.body_len)) {
				LOG_ERROR("%s: out of memory for a body of %" PRIu32 " bytes",
					  c->peer, c->hdr.body_len);
				conn_fail(c, "out of memory");
				return;
			}
			break;
		case RS_BODY:
			if (avail < c->hdr.body_len)
				return;
			c->rstate = RS_HEADER;
			dispatch_request(env, c->session, &c->hdr, c->in + c->in_start, &out);
			c->in_start += c->hdr.body_len;
			handle_out(c, &out);
			break;
		case RS_PAYLOAD: {
			if (write_hazard(c))
				return;
			size_t n = c->plen - c->pgot;
			if (n > avail)
				n = avail;
			if (c->pdst && n)
				memcpy(c->pdst + c->pgot, c->in + c->in_start, n);
			c->in_start += n;
			c->pgot += (uint32_t)n;
			if (c->pgot < c->plen)
				return;
			payload_complete(c);
			break;
		}
		}
		if (c->in_start == c->in_end)
			c->in_start = c->in_end = 0;
	}
}

/* want_read -- should the read watcher run? */
static bool want_read(struct conn_tcp *c)
{
	if (c->eof || c->closing || c->dead)
		return false;
	switch (c->rstate) {
	case RS_HEADER:
		/* blocked (backpressure, barrier): the next frame would wait anyway */
		return !(c->barrier || c->paused || over_limits(c));
	case RS_BODY:
		return true;
	case RS_PAYLOAD:
		return !write_hazard(c);
	}
	return true;
}

/* input_done -- no more input will be handled: ended, or EOF with nothing usable left */
static bool input_done(const struct conn_tcp *c)
{
	if (c->dead || c->closing)
		return true;
	if (!c->eof)
		return false;
	size_t avail = c->in_end - c->in_start;
	switch (c->rstate) {
	case RS_HEADER:
		return avail < FRAME_HEADER_SIZE;
	case RS_BODY:
		return avail < c->hdr.body_len;
	case RS_PAYLOAD:
		return avail == 0;
	}
	return true;
}

/* conn_end -- everything is over: give back what the connection holds */
static void conn_end(struct conn_tcp *c)
{
	struct ev_loop *loop = c->set->worker->loop;
	ev_io_stop(loop, &c->rio);
	ev_io_stop(loop, &c->wio);
	if (c->rstate == RS_PAYLOAD && c->pdst) {
		dispatch_payload_abort(c->session, &c->pw, c->pgot);
		if (c->pgot < c->plen)
			LOG_DEBUG("%s: WRITE %" PRIu64 " cut off after %" PRIu32 " of %" PRIu32
				  " payload bytes",
				  c->peer, c->pw.request_id, c->pgot, c->plen);
		c->pdst = NULL;
	}
	replies_drop(c);
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	LOG_DEBUG("%s: connection closed (%s)", c->peer, c->why ? c->why : "end");
	if (c->session && c->session->nopen > 0) {
		/* closing volumes takes namespace locks: not on the loop */
		struct dispatch_job *job = dispatch_teardown_job(&c->session);
		if (job) {
			c->tearing_down = true;
			submit_job(c, job);
			return;
		}
	}
	session_delete(&c->session);
	conn_bury(c);
}

/* conn_check_end -- end the connection if nothing is left to do on it */
static void conn_check_end(struct conn_tcp *c)
{
	if (c->in_dead)
		return;
	if (c->tearing_down) {
		if (c->jobs == 0)
			conn_bury(c);
		return;
	}
	if (!input_done(c) || c->jobs > 0)
		return;
	if (!c->dead && c->out_head)
		return;
	conn_end(c);
}

/* conn_update_watchers -- start or stop reading as the state allows */
static void conn_update_watchers(struct conn_tcp *c)
{
	struct ev_loop *loop = c->set->worker->loop;
	if (c->in_dead || c->tearing_down)
		return;
	if (want_read(c))
		ev_io_start(loop, &c->rio);
	else
		ev_io_stop(loop, &c->rio);
}

/* conn_kick -- after any change: dispatch what became possible, fix watchers, maybe end */
static void conn_kick(struct conn_tcp *c)
{
	if (c->in_dead || c->tearing_down) {
		conn_check_end(c);
		return;
	}
	unpark(c);
	conn_process(c);
	conn_update_watchers(c);
	conn_check_end(c);
}

/* recv_some -- one recv() into @buf; >0 bytes, 0 nothing now, -1 ended (eof/dead set) */
static ssize_t recv_some(struct conn_tcp *c, void *buf, size_t len)
{
	for (;;) {
		ssize_t n = recv(c->fd, buf, len, 0);
		if (n > 0)
			return n;
		if (n == 0) {
			c->eof = true;
			if (!c->why)
				c->why = "closed by the peer";
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		LOG_DEBUG("%s: recv failed: %s", c->peer, strerror(errno));
		conn_fail(c, "receive failed");
		return -1;
	}
}

/* conn_on_read -- the socket is readable */
static void conn_on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn_tcp *c = w->data;
	for (int i = 0; i < CONN_READ_BUDGET && want_read(c); i++) {
		ssize_t n;
		if (c->rstate == RS_PAYLOAD && c->pdst && c->in_start == c->in_end) {
			/* zero-copy: straight into the validated range of the mapping */
			n = recv_some(c, c->pdst + c->pgot, c->plen - c->pgot);
			if (n <= 0)
				break;
			c->pgot += (uint32_t)n;
			if (c->pgot == c->plen)
				payload_complete(c);
		} else {
			if (c->in_start == c->in_end)
				c->in_start = c->in_end = 0;
			if (c->in_end == c->in_cap && c->in_start > 0) {
				memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
				c->in_end -= c->in_start;
				c->in_start = 0;
			}
			if (c->in_end == c->in_cap)
				break; /* full of frames waiting for dispatch */
			n = recv_some(c, c->in + c->in_end, c->in_cap - c->in_end);
			if (n <= 0)
				break;
			c->in_end += (size_t)n;
		}
		conn_process(c);
	}
	conn_kick(c);
}

/* conn_on_write -- the socket takes more output */
static void conn_on_write(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn_tcp *c = w->data;
	conn_flush(c);
	conn_kick(c);
}

/* conn_started -- the start message: the worker takes the connection over */
static void conn_started(struct worker *w, struct worker_msg *m)
{
	struct conn_tcp *c = (struct conn_tcp *)((char *)m - offsetof(struct conn_tcp, start_msg));
	struct conn_tcp_set *set = c->set;
	c->next = set->conns;
	if (set->conns)
		set->conns->prev = c;
	set->conns = c;
	set->nconns++;
	set->accepted++;
	if (set->draining) {
		c->closing = true;
		c->why = "shutting down";
	}
	LOG_DEBUG("%s: connected (worker %u)", c->peer, w->id);
	conn_kick(c);
}

int conn_tcp_start(struct conn_tcp_set *set, int fd, const char *peer)
{
	struct conn_tcp *c = calloc(1, sizeof(*c));
	if (!c)
		goto err_close;
	c->in = malloc(CONN_INBUF_MIN);
	if (!c->in)
		goto err_free_conn;
	c->in_cap = CONN_INBUF_MIN;
	c->set = set;
	c->fd = fd;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	if (session_new(set->shared->env->store, peer, &c->session))
		goto err_free_in;
	ev_io_init(&c->rio, conn_on_read, fd, EV_READ);
	c->rio.data = c;
	ev_io_init(&c->wio, conn_on_write, fd, EV_WRITE);
	c->wio.data = c;
	c->start_msg.fn = conn_started;
	worker_post(set->worker, &c->start_msg);
	return 0;

err_free_in:
	free(c->in);
err_free_conn:
	free(c);
err_close:
	LOG_ERROR("%s: out of memory for a new connection; closing it", peer);
	close(fd);
	return -ENOMEM;
}

/* set_before_sleep -- worker hook: send queued replies, free finished connections */
static void set_before_sleep(struct worker *w, void *arg)
{
	struct conn_tcp_set *set = arg;
	for (int round = 0; set->flush && round < CONN_FLUSH_ROUNDS; round++) {
		struct conn_tcp *c = set->flush;
		set->flush = NULL;
		while (c) {
			struct conn_tcp *next = c->flush_next;
			c->in_flush = false;
			c->flush_next = NULL;
			/* freed replies may unblock dispatch, which may queue more (next round) */
			if (!c->in_dead && conn_flush(c))
				conn_kick(c);
			else if (!c->in_dead)
				conn_check_end(c);
			c = next;
		}
	}
	/* still more to send: poll without sleeping and come back */
	if (set->flush)
		ev_idle_start(w->loop, &set->more);

	while (set->dead) {
		struct conn_tcp *c = set->dead;
		set->dead = c->dead_next;
		conn_free(c);
	}
	if (set->draining && set->nconns == 0 && !set->idle_reported) {
		set->idle_reported = true;
		ev_timer_stop(w->loop, &set->drain_timer);
		if (set->on_idle)
			set->on_idle(set, set->idle_arg);
	}
}

/* set_more -- the idle watcher: nothing to do but let the prepare hook run again */
static void set_more(struct ev_loop *loop, ev_idle *w, int revents)
{
	ev_idle_stop(loop, w);
}

/* set_drain_timeout -- clients that did not read their replies in time lose them */
static void set_drain_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct conn_tcp_set *set = t->data;
	for (struct conn_tcp *c = set->conns; c; c = c->next) {
		if (c->in_dead || c->tearing_down)
			continue;
		if (c->out_head)
			LOG_WARN("%s: replies not read %.0f s into the shutdown; dropping them",
				 c->peer, CONN_DRAIN_TIMEOUT);
		conn_fail(c, "shutdown timeout");
		conn_check_end(c);
	}
}

/* set_drain -- the drain message (worker thread) */
static void set_drain(struct worker *w, struct worker_msg *m)
{
	struct conn_tcp_set *set =
	    (struct conn_tcp_set *)((char *)m - offsetof(struct conn_tcp_set, drain_msg));
	set->draining = true;
	ev_timer_start(w->loop, &set->drain_timer);
	for (struct conn_tcp *c = set->conns; c; c = c->next) {
		if (c->in_dead || c->tearing_down)
			continue;
		c->closing = true;
		if (!c->why)
			c->why = "shutting down";
		flush_add(c); /* so the hook looks at it even with nothing to send */
		conn_kick(c);
	}
}

void conn_tcp_set_drain(struct conn_tcp_set *set)
{
	worker_post(set->worker, &set->drain_msg);
}

int conn_tcp_set_new(struct worker *w, const struct conn_tcp_shared *shared,
		     void (*on_idle)(struct conn_tcp_set *set, void *arg), void *arg,
		     struct conn_tcp_set **out)
{
	if (!w || !shared || !out)
		return -EINVAL;
	struct conn_tcp_set *set = calloc(1, sizeof(*set));
	if (!set)
		return -ENOMEM;
	set->worker = w;
	set->shared = shared;
	set->on_idle = on_idle;
	set->idle_arg = arg;
	set->drain_msg.fn = set_drain;
	ev_idle_init(&set->more, set_more);
	ev_timer_init(&set->drain_timer, set_drain_timeout, CONN_DRAIN_TIMEOUT, 0.);
	set->drain_timer.data = set;
	int ret = worker_hook_add(w, set_before_sleep, set);
	if (ret) {
		free(set);
		return ret;
	}
	*out = set;
	return 0;
}

void conn_tcp_set_delete(struct conn_tcp_set **setp)
{
	if (!setp || !*setp)
		return;
	struct conn_tcp_set *set = *setp;
	if (set->nconns)
		LOG_ERROR("worker %u: freeing a connection set with %u connections",
			  set->worker->id, set->nconns);
	free(set);
	*setp = NULL;
}
