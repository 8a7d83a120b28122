/* SPDX-License-Identifier: BSD-3-Clause */
/* nbd_forward.c -- an NBD export served by the volume's primary on another node */
#include "nbd_forward.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ev.h>

#include "../../client/conn.h"	 /* librdax's own: run from a loop, resumed by rounds */
#include "../../client/resume.h" /* ... conn_resume_round */
#include "errors.h"
#include "faults.h"
#include "librdax.h"
#include "log.h"
#include "loop_watch.h"

/* Completions taken from librdax per call. */
#define FWD_REAP_BATCH 16

enum fwd_state {
	FWD_LIVE,     /* the loop runs the connection */
	FWD_RESUMING, /* a resume round runs in the pool: the connection is the pool's */
	FWD_WAITING,  /* between rounds: the backoff timer runs */
};

struct nbd_forward {
	char *volume, *peer;
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	uint64_t size;
	int timeout_ms;

	/* the loop's: the worker's thread only, from nbd_forward_start on */
	struct worker *w;
	struct fsync_pool *pool;
	void (*kick)(void *arg); /* something completed: the owner may take requests again */
	void *kick_arg;
	bool started;
	enum fwd_state state;
	struct fwd_req *q_head, *q_tail;   /* not yet handed to librdax, in order */
	struct fwd_req *in_head, *in_tail; /* handed to librdax, in submission order */
	uint64_t write_bytes, read_bytes;  /* of the requests not done */
	unsigned nwrites;
	uint64_t held_bytes, held_recs; /* librdax's held writes, as last read on the loop */
	struct fwd_req own;		/* the fsync of our own that bounds what is held */
	bool own_busy;
	int sticky; /* an fsync of our own failed: the next FLUSH or FUA write reports it */
	char sticky_msg[160];
	bool cancelling;
	uint64_t last_done_ms; /* the last completion (a stall: none for the timeout) */
	unsigned ndone;	       /* completions so far (a turn that had some does not sleep) */
	struct loop_watch lw;  /* the descriptors librdax waits on (loop_watch.h) */
	ev_prepare prep; /* before the loop sleeps: send what was queued, arm */
	ev_idle more;	 /* requests queued by this turn, or librdax ready: no sleep yet */
	ev_timer tick;	 /* the stall check */
	ev_timer retry;	 /* the backoff between resume rounds */
	unsigned busy;	 /* inside pump: a delete waits for its end */
	bool delete_asked;

	/* a resume round in the pool */
	struct fsync_task task;
	int round_ret, retry_ms;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- lists ---- */

static void list_add(struct fwd_req **head, struct fwd_req **tail, struct fwd_req *r)
{
	r->next = NULL;
	r->prev = *tail;
	if (*tail)
		(*tail)->next = r;
	else
		*head = r;
	*tail = r;
}

static void list_del(struct fwd_req **head, struct fwd_req **tail, struct fwd_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		*head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		*tail = r->prev;
	r->prev = r->next = NULL;
}

/* ---- completing ---- */

/*
 * finish -- @r is answered with @status (@msg the words, may be NULL): the
 * accounting, the sticky error of our own fsync, then the caller's done
 */
static void finish(struct nbd_forward *f, struct fwd_req *r, int status, const char *msg)
{
	r->status = status;
	snprintf(r->msg, sizeof(r->msg), "%s", status && msg ? msg : "");
	if (r == &f->own) {
		f->own_busy = false;
		if (status && status != -ECANCELED) {
			/* reported once, by the next FLUSH (or FUA write) of the client */
			LOG_ERROR("NBD export %s for %s: an fsync of the forwarded writes failed: "
				  "%s",
				  f->volume, f->peer, msg ? msg : rdax_strerror(status));
			f->sticky = status;
			snprintf(f->sticky_msg, sizeof(f->sticky_msg), "%s",
				 msg ? msg : rdax_strerror(status));
		}
		return;
	}
	if (r->kind == FWD_WRITE) {
		f->write_bytes -= r->len;
		f->nwrites--;
	} else if (r->kind == FWD_READ) {
		f->read_bytes -= r->len;
	}
	bool durable = r->kind == FWD_FLUSH || (r->kind == FWD_WRITE && r->fua);
	if (durable && status == 0 && f->sticky) {
		r->status = f->sticky;
		snprintf(r->msg, sizeof(r->msg), "%s", f->sticky_msg);
		f->sticky = 0;
	}
	r->done(r);
}

/* complete_queued -- every request not handed to librdax fails with @status */
static void complete_queued(struct nbd_forward *f, int status, const char *msg)
{
	struct fwd_req *r;
	while ((r = f->q_head)) {
		list_del(&f->q_head, &f->q_tail, r);
		finish(f, r, status, msg);
	}
}

/* ---- the loop's side ---- */

static void go_resume(struct nbd_forward *f);

/* unwatch -- no events of the connection's descriptors */
static void unwatch(struct nbd_forward *f)
{
	loop_watch_stop(&f->lw, f->w->loop);
}

/*
 * submit_one -- hand @r to librdax. Returns false if librdax has no room
 * (@r stays queued), true otherwise (handed over, or finished with the error).
 */
static bool submit_one(struct nbd_forward *f, struct fwd_req *r)
{
	uint64_t cookie = (uint64_t)(uintptr_t)r;
	int ret;
	if (rdax_faults.nbd_forward_flush_early && r->kind == FWD_FLUSH && r != &f->own) {
		/* control: acknowledged without the primary's fsync (must be caught) */
		finish(f, r, 0, NULL);
		return true;
	}
	switch (r->kind) {
	case FWD_READ:
		ret = rdax_submit_read(f->vol, r->off, r->buf, r->len, cookie);
		break;
	case FWD_WRITE:
		ret = rdax_submit_write(
		    f->vol, r->off, r->buf, r->len,
		    r->fua && !rdax_faults.nbd_forward_flush_early ? RDAX_WRITE_FSYNC : 0, cookie);
		break;
	case FWD_FLUSH:
		ret = rdax_submit_fsync(f->vol, 0, 0, 0, cookie);
		break;
	case FWD_DISCARD:
	default:
		ret = conn_submit_discard(f->vol, r->off, r->len, cookie);
		break;
	}
	if (ret == -EAGAIN)
		return false;
	if (ret) {
		finish(f, r, ret, rdax_conn_last_error(f->conn));
		return true;
	}
	r->submitted = true;
	r->sent_ms = now_ms();
	list_add(&f->in_head, &f->in_tail, r);
	return true;
}

/* submit_queued -- hand over what waits, in order, while librdax takes it */
static void submit_queued(struct nbd_forward *f)
{
	struct fwd_req *r;
	while ((r = f->q_head)) {
		list_del(&f->q_head, &f->q_tail, r);
		if (!submit_one(f, r)) {
			/* no room: back at the head, in its place */
			r->next = f->q_head;
			r->prev = NULL;
			if (f->q_head)
				f->q_head->prev = r;
			else
				f->q_tail = r;
			f->q_head = r;
			return;
		}
	}
}

/*
 * reap -- librdax's progress without waiting; complete what was answered.
 * Returns the completions taken (0 when none, or the connection broke with
 * nothing left to return).
 */
static int reap(struct nbd_forward *f)
{
	int total = 0;
	for (;;) {
		struct rdax_completion c[FWD_REAP_BATCH];
		int n = conn_reap(f->conn, c, FWD_REAP_BATCH, 0, 0);
		if (n <= 0)
			return total;
		/* the words of the last failure; each failure gets its code's words too */
		const char *last = rdax_conn_last_error(f->conn);
		for (int i = 0; i < n; i++) {
			struct fwd_req *r = (struct fwd_req *)(uintptr_t)c[i].cookie;
			list_del(&f->in_head, &f->in_tail, r);
			r->submitted = false;
			if (c[i].status)
				LOG_WARN("NBD export %s for %s: forwarded request at %" PRIu64
					 "+%" PRIu32 " failed: %s",
					 f->volume, f->peer, r->off, r->len, last);
			finish(f, r, c[i].status, c[i].status ? last : NULL);
		}
		total += n;
		f->ndone += (unsigned)n;
		f->last_done_ms = now_ms();
		if (n < FWD_REAP_BATCH)
			return total;
	}
}

/* held_read -- what librdax holds of acknowledged, unflushed writes (for the bounds) */
static void held_read(struct nbd_forward *f)
{
	f->held_bytes = f->conn->budget.used;
	f->held_recs = f->vol->held.n;
}

/* own_fsync -- an fsync of our own once half of what may be held is (the top of nbd_forward.h) */
static void own_fsync(struct nbd_forward *f)
{
	if (f->own_busy || f->conn->broken || f->cancelling ||
	    (f->held_bytes < FWD_HOLD_SOFT / 2 && f->held_recs < HELD_MAX_RECORDS / 2))
		return;
	memset(&f->own, 0, sizeof(f->own));
	f->own.kind = FWD_FLUSH;
	f->own_busy = true;
	if (!submit_one(f, &f->own))
		f->own_busy = false; /* librdax is full: the next pump tries again */
}

/* watch -- before the loop sleeps: the descriptors librdax waits on, or no sleep */
static void watch(struct nbd_forward *f)
{
	struct ev_loop *loop = f->w->loop;
	if (f->state != FWD_LIVE || f->conn->broken || f->conn->lost) {
		unwatch(f);
		ev_idle_stop(loop, &f->more);
		return;
	}
	loop_watch_update(&f->lw, loop, f->conn);
}

static void fwd_free(struct nbd_forward *f);

/*
 * pump -- everything the forwarder can do now: send, reap, complete, and
 * notice a loss (which starts a resume). Returns false if @f was freed (a
 * delete asked meanwhile, by the owner's kick).
 */
static bool pump(struct nbd_forward *f)
{
	if (!f->started || f->delete_asked)
		return !f->delete_asked;
	f->busy++;
	bool any = false;
	if (f->cancelling) {
		complete_queued(f, -ECANCELED, "the NBD connection ended");
		if (f->state != FWD_RESUMING && !f->conn->broken && f->in_head) {
			/* what librdax holds fails now, and comes back through reap */
			ev_timer_stop(f->w->loop, &f->retry);
			conn_give_up(f->conn, -ECANCELED, "the NBD connection ended");
			f->state = FWD_LIVE;
		}
	}
	if (f->state == FWD_LIVE) {
		int n;
		do {
			submit_queued(f);
			n = reap(f);
			any = any || n > 0;
		} while (n > 0 && f->q_head && !f->conn->lost);
		if (f->conn->broken) {
			/* no primary within the bound (logged once), or cancelled: all that waits
			 * fails */
			complete_queued(f, f->conn->broken, f->conn->broken_msg);
		} else if (f->conn->lost) {
			go_resume(f);
		} else {
			held_read(f);
			own_fsync(f);
		}
	}
	if (any && f->kick && !f->delete_asked)
		f->kick(f->kick_arg); /* may end the owner's connection, and ask for a delete */
	f->busy--;
	if (f->delete_asked && f->busy == 0 && f->state != FWD_RESUMING) {
		fwd_free(f);
		return false;
	}
	return true;
}

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	pump(w->data);
}

static void on_idle(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)loop;
	(void)revents;
	struct nbd_forward *f = w->data;
	ev_idle_stop(loop, w);
	pump(f);
}

static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)revents;
	struct nbd_forward *f = w->data;
	unsigned done = f->ndone;
	if (!pump(f))
		return;
	watch(f);
	/*
	 * replies queued by completions here may come after the connection set's
	 * own prepare hook sent this turn's output: one more turn before sleeping
	 */
	if (f->ndone != done)
		ev_idle_start(loop, &f->more);
}

/*
 * on_tick -- the oldest request has had no answer, and nothing completed,
 * for the timeout: the primary is taken as lost (stopped, cut off), and the
 * connection resumes elsewhere
 */
static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	struct nbd_forward *f = w->data;
	if (f->state != FWD_LIVE || !f->in_head || f->conn->broken || f->conn->lost)
		return;
	uint64_t now = now_ms();
	uint64_t limit = (uint64_t)f->timeout_ms;
	if (now - f->in_head->sent_ms < limit || now - f->last_done_ms < limit)
		return;
	char msg[160];
	snprintf(msg, sizeof(msg), "no answer from %s for %d ms", rdax_conn_url(f->conn),
		 f->timeout_ms);
	conn_lose(f->conn, -ETIMEDOUT, msg, NULL);
	pump(f);
}

/* round_run -- a pool thread: one round of the resume (the connection is ours meanwhile) */
static void round_run(struct fsync_task *t)
{
	struct nbd_forward *f =
	    (struct nbd_forward *)((char *)t - offsetof(struct nbd_forward, task));
	f->round_ret = conn_resume_round(f->conn, &f->retry_ms);
}

/* round_done -- the round came back to the loop */
static void round_done(struct worker *w, struct worker_msg *m)
{
	(void)w;
	struct fsync_task *t = (struct fsync_task *)((char *)m - offsetof(struct fsync_task, done));
	struct nbd_forward *f =
	    (struct nbd_forward *)((char *)t - offsetof(struct nbd_forward, task));
	if (f->delete_asked) {
		f->state = FWD_LIVE;
		if (f->busy == 0)
			fwd_free(f);
		return;
	}
	if (f->round_ret == -EINPROGRESS) {
		f->state = FWD_WAITING;
		ev_timer_set(&f->retry, f->retry_ms / 1000.0, 0.);
		ev_timer_start(f->w->loop, &f->retry);
		if (f->cancelling)
			ev_idle_start(f->w->loop, &f->more);
		return;
	}
	f->state = FWD_LIVE;
	if (f->round_ret == 0) {
		LOG_INFO("NBD export %s for %s: forwarding to %s again", f->volume, f->peer,
			 rdax_conn_url(f->conn));
		uint64_t now = now_ms();
		f->last_done_ms = now;
		for (struct fwd_req *r = f->in_head; r; r = r->next)
			r->sent_ms = now; /* sent again now */
	} else {
		LOG_ERROR("NBD export %s for %s: no primary could be reached: %s; every request "
			  "fails from now on (the NBD client sees EIO)",
			  f->volume, f->peer, f->conn->broken_msg);
	}
	if (pump(f))
		watch(f);
}

/* on_retry -- the backoff passed: the next round */
static void on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	go_resume(w->data);
}

/* go_resume -- the stream is lost: the next resume round, in the pool */
static void go_resume(struct nbd_forward *f)
{
	if (f->state == FWD_LIVE)
		LOG_WARN("NBD export %s for %s: lost the primary (%s): resuming for up to %d ms",
			 f->volume, f->peer, f->conn->lost_msg, f->conn->resume_ms);
	unwatch(f);
	ev_idle_stop(f->w->loop, &f->more);
	f->state = FWD_RESUMING;
	f->task.run = round_run;
	f->task.quick = false;
	f->task.owner = f->w;
	f->task.done.fn = round_done;
	fsync_pool_submit(f->pool, &f->task);
}

/* ---- the API ---- */

int nbd_forward_open(const struct fwd_opts *o, struct nbd_forward **out, char *err, size_t errlen)
{
	struct nbd_forward *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->volume = strdup(o->volume);
	f->peer = strdup(o->peer ? o->peer : "");
	f->timeout_ms = o->timeout_ms ? o->timeout_ms : FWD_TIMEOUT_MS;
	int ret = -ENOMEM;
	struct rdax_conn_opts *co = NULL;
	if (!f->volume || !f->peer || (ret = rdax_conn_opts_new(&co)))
		goto err_free;
	rdax_conn_opts_set_client_name(co, "nbd-forward");
	rdax_conn_opts_set_timeout(co, f->timeout_ms);
	rdax_conn_opts_set_resume(co, o->resume_ms ? o->resume_ms : FWD_RESUME_MS);
	rdax_conn_opts_set_write_hold(co, FWD_HOLD_BYTES);
	rdax_conn_opts_set_queue_depth(co, FWD_DEPTH);
	if (o->token_file && (ret = rdax_conn_opts_set_token_file(co, o->token_file))) {
		rdax_seterr(err, errlen, "token file %s: %s", o->token_file, rdax_strerror(ret));
		goto err_opts;
	}
	ret = rdax_connect(o->urls, co, &f->conn);
	if (ret) {
		rdax_seterr(err, errlen, "cannot reach a node holding the volume (%s): %s", o->urls,
			    rdax_connect_last_error());
		goto err_opts;
	}
	/* follows a refusal to the primary, and waits out a failover (a resume) */
	ret = rdax_volume_open(f->conn, o->volume, &f->vol);
	if (ret) {
		rdax_seterr(err, errlen, "cannot open it at its primary: %s",
			    rdax_conn_last_error(f->conn));
		goto err_disconnect;
	}
	rdax_conn_opts_delete(&co);
	f->size = rdax_volume_size(f->vol);
	/* from here on the loop runs it, and resumes go by rounds in the pool */
	f->conn->resume_by_owner = true;
	*out = f;
	return 0;

err_disconnect:
	rdax_disconnect(&f->conn);
err_opts:
	rdax_conn_opts_delete(&co);
err_free:
	free(f->volume);
	free(f->peer);
	free(f);
	return ret;
}

uint64_t nbd_forward_size(const struct nbd_forward *f)
{
	return f->size;
}

void nbd_forward_start(struct nbd_forward *f, struct worker *w, struct fsync_pool *pool,
		       void (*kick)(void *arg), void *arg)
{
	f->w = w;
	f->pool = pool;
	f->kick = kick;
	f->kick_arg = arg;
	for (unsigned i = 0; i < 2; i++) {
		ev_io_init(&f->lw.io[i], on_io, -1, 0);
		f->lw.io[i].data = f;
	}
	ev_prepare_init(&f->prep, on_prepare);
	f->prep.data = f;
	ev_idle_init(&f->more, on_idle);
	f->lw.more = &f->more;
	f->more.data = f;
	double period = f->timeout_ms / 4000.0;
	ev_timer_init(&f->tick, on_tick, period, period);
	f->tick.data = f;
	ev_timer_init(&f->retry, on_retry, 0., 0.);
	f->retry.data = f;
	ev_prepare_start(w->loop, &f->prep);
	ev_timer_start(w->loop, &f->tick);
	f->state = FWD_LIVE;
	f->last_done_ms = now_ms();
	f->started = true;
}

bool nbd_forward_room(const struct nbd_forward *f)
{
	/* two records at most per write (one split in two), and one for ours */
	return f->write_bytes + f->held_bytes < FWD_HOLD_SOFT &&
	       f->held_recs + 2 * ((uint64_t)f->nwrites + 1) + 1 < HELD_MAX_RECORDS &&
	       f->read_bytes < FWD_READ_SOFT;
}

void nbd_forward_submit(struct nbd_forward *f, struct fwd_req *r)
{
	r->status = 0;
	r->msg[0] = '\0';
	r->submitted = false;
	if (r->kind == FWD_WRITE) {
		f->write_bytes += r->len;
		f->nwrites++;
	} else if (r->kind == FWD_READ) {
		f->read_bytes += r->len;
	}
	list_add(&f->q_head, &f->q_tail, r);
	/* sent before the loop sleeps, with whatever else this turn queues */
	if (f->state == FWD_LIVE || f->cancelling)
		ev_idle_start(f->w->loop, &f->more);
}

void nbd_forward_cancel(struct nbd_forward *f)
{
	if (!f || f->cancelling)
		return;
	f->cancelling = true;
	if (f->started)
		ev_idle_start(f->w->loop, &f->more);
}

/* fwd_free -- stop the watchers, end the connection without waiting, free */
static void fwd_free(struct nbd_forward *f)
{
	if (f->started) {
		struct ev_loop *loop = f->w->loop;
		unwatch(f);
		ev_prepare_stop(loop, &f->prep);
		ev_idle_stop(loop, &f->more);
		ev_timer_stop(loop, &f->tick);
		ev_timer_stop(loop, &f->retry);
	}
	if (f->conn) {
		/* no goodbye on the wire (it would wait): the primary sees the end, closes */
		if (!f->conn->broken)
			conn_give_up(f->conn, -ECANCELED, "the NBD export ended");
		struct rdax_completion c[FWD_REAP_BATCH];
		while (conn_reap(f->conn, c, FWD_REAP_BATCH, 0, 0) > 0)
			; /* our own fsync, if it was still out */
		rdax_volume_close(&f->vol);
		rdax_disconnect(&f->conn);
	}
	free(f->volume);
	free(f->peer);
	free(f);
}

void nbd_forward_delete(struct nbd_forward **fp)
{
	struct nbd_forward *f = fp ? *fp : NULL;
	if (!f)
		return;
	*fp = NULL;
	f->delete_asked = true;
	if (f->started && (f->busy || f->state == FWD_RESUMING))
		return; /* freed by the pump's end, or the round's return */
	fwd_free(f);
}
