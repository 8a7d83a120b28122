/* SPDX-License-Identifier: BSD-3-Clause */
/* replica_link.c -- the primary's ordered, pipelined stream to one replica, on a worker's loop */
#include "replica_link.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>

#include "../../client/conn.h"		 /* librdax's own: run from a loop, the socket aborted */
#include "../../client/transport_rdma.h" /* ... and its queue pair */
#include "completion.h"
#include "spin_window.h"
#include "loop_watch.h"
#include "errors.h"
#include "faults.h"
#include "librdax.h"
#include "log.h"

#define RLINK_DEFAULT_TIMEOUT_MS 2000
#define RLINK_DEFAULT_DEPTH	 32
/* A forwarded range is sent in pieces of at most this (every rdaxd takes 1 MiB requests). */
#define RLINK_PIECE (1U << 20)
/* Completions taken from librdax per call. */
#define RLINK_REAP_BATCH 16
/* The stall check runs this often (a quarter of the timeout, at least this many ms). */
#define RLINK_STALL_CHECK_MIN_MS 10

enum rlink_kind { RLINK_WRITE, RLINK_FSYNC };

struct rlink_op {
	struct rlink_op *next;
	enum rlink_kind kind;
	uint64_t off, len;
	bool durable;		/* WRITE: sent with fsync=true, for the FSYNC fused into it */
	struct rlink_waiter *w; /* FSYNC, or a durable WRITE's fused FSYNC */
	uint64_t cookie;	/* once submitted */
	uint64_t sent_ms;
};

struct replica_link {
	struct rlink_opts o;
	char *url, *volume;
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	struct worker *home; /* the loop the link runs on */
	struct worker *own;  /* a worker of the link's own (no home was given), else NULL */

	/* the hand-over from any thread, under lock */
	pthread_mutex_t lock;
	struct rlink_op *head, *tail; /* queued, not yet taken by the loop */
	bool kicked;		      /* kick_msg is posted and has not run yet */
	struct worker *move_to;	      /* rlink_move's wish: the loop to run on once quiet */
	bool stop;
	bool failed;
	int code;
	int fail_asked; /* a caller's failure for the loop to carry out */
	struct rlink_stats stats;
	struct worker_msg attach_msg, kick_msg, detach_msg;
	struct completion detached; /* the loop let go of the link (rlink_stop) */

	/* the loop's own: the home worker's thread only */
	bool attached;
	bool pumping;	      /* inside pump or push: not entered again (a waiter may queue more) */
	struct loop_watch lw; /* the descriptors librdax waits on (loop_watch.h) */
	ev_prepare prep;      /* before the loop sleeps: send what was queued, arm */
	ev_idle more;	      /* work queued on this thread, or ready already: no sleep yet */
	ev_idle spin;	      /* answers awaited within the spin window: poll, don't sleep */
	struct spin_window sw;
	int64_t spin_until_us; /* the open spin's end; 0: none */
	ev_timer stall;
	struct rlink_op **inflight; /* by cookie's slot (cookie_slot) */
	unsigned ninflight;
	uint64_t next_cookie;
};

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* on_home -- is the calling thread the link's loop? */
static bool on_home(const struct replica_link *l)
{
	return l->home->started && pthread_equal(pthread_self(), l->home->thread);
}

/* finish -- an op is over: complete its waiter, free it */
static void finish(struct rlink_op *op, int status)
{
	if (op->w)
		op->w->done(op->w, status);
	free(op);
}

/*
 * abort_socket -- end the connection now with a reset, dropping what the
 * kernel still holds to send. A failed link's queued writes are old: were
 * they delivered later (a partition heals, TCP retransmits), they could land
 * on the replica after a resync's newer bytes over a new link. The socket is
 * replaced by a fresh unconnected one under the same descriptor (dup2), so
 * librdax's later calls on it fail instead of touching a reused descriptor.
 * Over RDMA the queue pair goes to the error state: what was posted and not
 * yet sent is flushed, never retransmitted later (rdma_tp_abort).
 */
static void abort_socket(struct replica_link *l)
{
	if (l->conn && l->conn->rdma) {
		rdma_tp_abort(l->conn->rdma);
		return;
	}
	int fd = l->conn ? l->conn->fd : -1;
	if (fd < 0)
		return;
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	int spare = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (spare >= 0) {
		dup2(spare, fd); /* the last reference to the old socket: RST, queue dropped */
		close(spare);
	}
}

/* unwatch -- the loop lets go of the link's watchers (home thread) */
static void unwatch(struct replica_link *l)
{
	struct ev_loop *loop = l->home->loop;
	loop_watch_stop(&l->lw, loop);
	ev_prepare_stop(loop, &l->prep);
	ev_idle_stop(loop, &l->more);
	ev_idle_stop(loop, &l->spin);
	l->spin_until_us = 0;
	ev_timer_stop(loop, &l->stall);
	l->attached = false;
}

/*
 * fail -- the link is done for (home thread): abort it, let go of the
 * loop, tell the owner once, complete everything with @code
 */
static void fail(struct replica_link *l, int code, const char *why)
{
	pthread_mutex_lock(&l->lock);
	bool first = !l->failed;
	l->failed = true;
	l->code = code;
	l->stats.failed = true;
	l->stats.code = code;
	struct rlink_op *q = l->head;
	l->head = l->tail = NULL;
	pthread_mutex_unlock(&l->lock);
	if (first) {
		abort_socket(l);
		if (l->attached)
			unwatch(l); /* an aborted socket would wake the loop for ever */
		LOG_WARN("replica link %s volume %s failed: %s", l->url, l->volume, why);
		if (l->o.on_fail)
			l->o.on_fail(l->o.arg, code, why);
	}
	for (unsigned i = 0; i < l->o.depth; i++)
		if (l->inflight[i]) {
			finish(l->inflight[i], code);
			l->inflight[i] = NULL;
		}
	l->ninflight = 0;
	while (q) {
		struct rlink_op *next = q->next;
		finish(q, code);
		q = next;
	}
}

/*
 * A cookie names its in-flight slot in its low 16 bits and a sequence above
 * them. Completions come out of order (an fsync may finish after later
 * writes), so the requests in flight are not a window of consecutive
 * cookies and "cookie % depth" would give two of them one slot: a free slot
 * is looked for instead (depth <= RDAX_MAX_QUEUE_DEPTH < 65536).
 */
static unsigned cookie_slot(uint64_t cookie)
{
	return (unsigned)(cookie & 0xffff);
}

/* submit -- hand @op to librdax (home thread); false if the link failed doing so */
static bool submit(struct replica_link *l, struct rlink_op *op)
{
	unsigned slot = 0;
	while (l->inflight[slot]) /* ninflight < depth: one is free */
		slot++;
	op->cookie = (l->next_cookie++ << 16) | slot;
	op->sent_ms = now_ms();
	int ret;
	if (op->kind == RLINK_WRITE)
		ret = rdax_submit_write(
		    l->vol, op->off, l->o.mapping + op->off, op->len,
		    op->durable && !rdax_faults.rlink_fused_no_flush ? RDAX_WRITE_FSYNC : 0,
		    op->cookie);
	else
		ret = rdax_submit_fsync(l->vol, op->off, op->len, 0, op->cookie);
	if (ret) {
		char why[256];
		snprintf(why, sizeof(why), "submit: %s", rdax_strerror(ret));
		finish(op, ret);
		fail(l, ret, why);
		return false;
	}
	l->inflight[slot] = op;
	l->ninflight++;
	return true;
}

/*
 * fuse -- a WRITE followed by an FSYNC of exactly its range (a durable
 * write: rlink_forward_fsync, or repl_write then repl_fsync of one client
 * request) becomes one WRITE with fsync=true: the replica flushes that range
 * before it answers, which is what the FSYNC asked, and covers every earlier
 * write of the range as the FSYNC did (the connection's order). One request
 * and one reply instead of two: the replica parses, dispatches and answers
 * once, and the link wakes once for the answer. The FSYNC's waiter moves to
 * the WRITE; the FSYNC op is freed. (An FSYNC of length 0, to the end of the
 * volume, is never fused: it covers more than the write.)
 */
static void fuse(struct rlink_op *batch)
{
	for (struct rlink_op *op = batch; op; op = op->next) {
		struct rlink_op *fs = op->next;
		if (op->kind != RLINK_WRITE || op->durable || !fs || fs->kind != RLINK_FSYNC ||
		    fs->off != op->off || fs->len != op->len)
			continue;
		op->durable = true;
		op->w = fs->w;
		op->next = fs->next;
		free(fs);
	}
}

/*
 * take -- move what fits in the pipeline from the queue to librdax, in
 * order (home thread); *@left: ops stay queued (no room). The batch is sent
 * corked (conn_cork): its requests leave in one sendmsg where the socket
 * takes them, so the replica reads them in one go. False if the link
 * failed (or was asked to).
 */
static bool take(struct replica_link *l, bool *left)
{
	pthread_mutex_lock(&l->lock);
	int asked = l->failed ? 0 : l->fail_asked;
	struct rlink_op *batch = NULL, **tailp = &batch;
	unsigned room = l->o.depth - l->ninflight;
	while (!asked && !l->failed && !l->stop && l->head && room) {
		struct rlink_op *op = l->head;
		l->head = op->next;
		op->next = NULL;
		*tailp = op;
		tailp = &op->next;
		room--;
	}
	if (!l->head)
		l->tail = NULL;
	*left = l->head != NULL;
	bool failed = l->failed;
	pthread_mutex_unlock(&l->lock);
	if (asked) {
		fail(l, asked,
		     asked == -ENOMEM ? "out of memory queueing a write" : "aborted by its owner");
		return false;
	}
	bool ok = !failed;
	fuse(batch);
	if (ok && batch)
		conn_cork(l->conn);
	while (batch) {
		struct rlink_op *next = batch->next;
		if (ok)
			ok = submit(l, batch);
		else
			finish(batch, l->code);
		batch = next;
	}
	/* a send that fails breaks the connection: its ops complete with the error (reap) */
	conn_uncork(l->conn);
	return ok;
}

/*
 * reap -- librdax's progress without waiting: send what the socket (or the
 * queue pair) takes, take what arrived, complete the answered ops (home
 * thread). Returns the ops completed, or -1 if the link failed.
 */
static int reap(struct replica_link *l)
{
	int total = 0;
	for (;;) {
		struct rdax_completion c[RLINK_REAP_BATCH];
		int n = conn_reap(l->conn, c, RLINK_REAP_BATCH, 0, 0);
		if (n < 0) {
			char why[320];
			snprintf(why, sizeof(why), "connection: %s", rdax_conn_last_error(l->conn));
			fail(l, n, why);
			return -1;
		}
		for (int i = 0; i < n; i++) {
			unsigned slot = cookie_slot(c[i].cookie);
			struct rlink_op *op = slot < l->o.depth ? l->inflight[slot] : NULL;
			if (!op || op->cookie != c[i].cookie) {
				fail(l, -RDAX_E_PROTOCOL, "a completion of a request never sent");
				return -1;
			}
			l->inflight[slot] = NULL;
			l->ninflight--;
			if (c[i].status) {
				char why[320];
				snprintf(why, sizeof(why), "%s at %" PRIu64 "+%" PRIu64 ": %s",
					 op->kind == RLINK_FSYNC ? "fsync"
					 : op->durable		 ? "durable write"
								 : "write",
					 op->off, op->len, rdax_conn_last_error(l->conn));
				finish(op, c[i].status);
				fail(l, c[i].status, why);
				return -1;
			}
			pthread_mutex_lock(&l->lock);
			if (op->kind == RLINK_WRITE) {
				l->stats.writes++;
				l->stats.write_bytes += op->len;
			}
			if (op->kind == RLINK_FSYNC || op->durable)
				l->stats.fsyncs++;
			if (op->durable)
				l->stats.fused++;
			pthread_mutex_unlock(&l->lock);
			finish(op, 0);
		}
		total += n;
		if (n > 0) {
			spin_window_activity(&l->sw, now_us());
			l->spin_until_us = 0; /* the next wait opens a window of its own */
		}
		if (n < RLINK_REAP_BATCH)
			return total;
	}
}

/*
 * maybe_move -- the owner asked for another loop (rlink_move): go there now
 * if nothing is queued or in flight, so the link's order stays one loop's
 * (home thread). Not while a kick is posted: kick_msg would then be wanted
 * on two queues at once. True if it went.
 */
static bool maybe_move(struct replica_link *l)
{
	pthread_mutex_lock(&l->lock);
	struct worker *to = l->move_to;
	bool go = to && to != l->home && l->attached && !l->stop && !l->failed && !l->fail_asked &&
		  !l->kicked && !l->head && l->ninflight == 0;
	if (go) {
		unwatch(l); /* the old loop's watchers, before the home changes */
		l->home = to;
	}
	pthread_mutex_unlock(&l->lock);
	/* rlink_stop reads the home under the lock: its detach follows this attach */
	if (go) {
		LOG_DEBUG("replica link %s volume %s: to worker %u's loop", l->url, l->volume,
			  to->id);
		worker_post(to, &l->attach_msg);
	}
	return go;
}

/* pump -- everything the link can do now (home thread) */
static void pump(struct replica_link *l)
{
	if (!l->attached)
		return;
	if (l->pumping)
		return;
	l->pumping = true;
	/* reaping frees pipeline slots: take again while it does and ops wait */
	int n;
	bool left;
	do {
		if (!take(l, &left)) {
			l->pumping = false;
			return;
		}
		n = reap(l);
	} while (n > 0 && left);
	l->pumping = false;
	if (n > 0)
		maybe_move(l); /* just went quiet, maybe */
}

/*
 * push -- an fsync was queued: on the home thread, send what is queued now
 * rather than when the loop next goes idle (rlink_push). A durable write's
 * caller queues the replicas' part first and then runs its local flush
 * inline on the same thread (vol_op.c, repl_op_start): sent only at idle,
 * the replicas' WRITE and FSYNC left after that flush (strace of a primary:
 * pwrite, then the sendmsg to the replica), and the two ran one after the
 * other instead of side by side. From another thread the kick already woke
 * the loop. The answers are reaped by the loop as before.
 */
static void push(struct replica_link *l)
{
	pthread_mutex_lock(&l->lock);
	bool here = on_home(l) && l->attached && !l->pumping && !l->stop;
	pthread_mutex_unlock(&l->lock);
	if (!here)
		return;
	bool left;
	l->pumping = true;
	take(l, &left);
	l->pumping = false;
}

/*
 * awaited -- is an op someone waits on in flight (an fsync, a durable write)?
 * Only those are spun for: a resync's stream of plain writes is not
 * waited on one by one, and its loop sleeps between answers.
 */
static bool awaited(const struct replica_link *l)
{
	for (unsigned i = 0; l->ninflight && i < l->o.depth; i++)
		if (l->inflight[i] && l->inflight[i]->w)
			return true;
	return false;
}

/*
 * spin -- answers are awaited and the loop would sleep: keep it polling
 * instead (the spin idle watcher: each turn is one epoll_wait that does not
 * block, the socket's watcher reaps what came) for the adaptive window
 * (spin_window.h: about twice the recent wait for an answer, none while
 * those waits are longer than the cap). A primary's worker that sleeps
 * while its replicas flush is woken per answer -- a scheduler wake-up on
 * the path of every replicated durable write (docs/cluster.md,
 * "Benchmark"); the cost is at most the cap of CPU per wait.
 */
static void spin(struct replica_link *l)
{
	struct ev_loop *loop = l->home->loop;
	if (!l->o.spin_cap_us || ev_is_active(&l->more) || !awaited(l)) {
		ev_idle_stop(loop, &l->spin);
		l->spin_until_us = 0;
		return;
	}
	int64_t now = now_us();
	if (!l->spin_until_us) {
		unsigned us = spin_window_idle(&l->sw, now);
		l->spin_until_us = us ? now + us : -1;
	}
	if (l->spin_until_us > now)
		ev_idle_start(loop, &l->spin);
	else
		ev_idle_stop(loop, &l->spin);
}

/* watch -- before the loop sleeps: the descriptors librdax waits on, or no sleep (home thread) */
static void watch(struct replica_link *l)
{
	loop_watch_update(&l->lw, l->home->loop, l->conn);
	spin(l);
}

static void on_spin(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	/* nothing: the next turn's prepare decides whether to go on */
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
	pump(w->data);
}

static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop;
	(void)revents;
	struct replica_link *l = w->data;
	pump(l);
	if (l->attached)
		watch(l);
}

/* on_stall -- the oldest request in flight waited longer than the timeout: a stalled replica */
static void on_stall(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	struct replica_link *l = w->data;
	uint64_t now = now_ms();
	for (unsigned i = 0; i < l->o.depth; i++)
		if (l->inflight[i] && now - l->inflight[i]->sent_ms > l->o.timeout_ms) {
			char why[128];
			snprintf(why, sizeof(why), "no answer for %u ms (stalled replica)",
				 l->o.timeout_ms);
			fail(l, -ETIMEDOUT, why);
			return;
		}
}

/* attach_fn -- the home loop takes the link over (posted by rlink_start) */
static void attach_fn(struct worker *w, struct worker_msg *m)
{
	struct replica_link *l =
	    (struct replica_link *)((char *)m - offsetof(struct replica_link, attach_msg));
	struct ev_loop *loop = w->loop;
	for (unsigned i = 0; i < 2; i++) {
		ev_io_init(&l->lw.io[i], on_io, -1, 0);
		l->lw.io[i].data = l;
	}
	ev_prepare_init(&l->prep, on_prepare);
	l->prep.data = l;
	ev_idle_init(&l->spin, on_spin);
	l->spin.data = l;
	spin_window_init(&l->sw, l->o.spin_cap_us);
	l->spin_until_us = 0;
	ev_idle_init(&l->more, on_idle);
	l->lw.more = &l->more;
	l->more.data = l;
	double period = (double)l->o.timeout_ms / 4000.0;
	if (period < RLINK_STALL_CHECK_MIN_MS / 1000.0)
		period = RLINK_STALL_CHECK_MIN_MS / 1000.0;
	ev_timer_init(&l->stall, on_stall, period, period);
	l->stall.data = l;
	ev_prepare_start(loop, &l->prep);
	ev_timer_start(loop, &l->stall);
	l->attached = true;
	pump(l);
}

/* kick_fn -- work queued from another thread (posted by enqueue) */
static void kick_fn(struct worker *w, struct worker_msg *m)
{
	(void)w;
	struct replica_link *l =
	    (struct replica_link *)((char *)m - offsetof(struct replica_link, kick_msg));
	pthread_mutex_lock(&l->lock);
	l->kicked = false;
	pthread_mutex_unlock(&l->lock);
	pump(l);
}

/* detach_fn -- the home loop lets go of the link (posted by rlink_stop) */
static void detach_fn(struct worker *w, struct worker_msg *m)
{
	(void)w;
	struct replica_link *l =
	    (struct replica_link *)((char *)m - offsetof(struct replica_link, detach_msg));
	if (l->attached)
		unwatch(l);
	completion_complete(&l->detached, 0);
}

/*
 * __kick -- under l->lock: make the loop look at the queue. On the loop's
 * own thread the idle watcher keeps the loop from sleeping until it did (a
 * burst of writes and the fsync behind them, queued by one turn of the
 * loop, leave in one go; the idle watcher, not the prepare one, because
 * another prepare watcher -- the connection set's flush -- may dispatch
 * requests after this link's prepare ran); from another thread a message
 * wakes it, one at a time. Returns true if the caller must post kick_msg
 * (after dropping the lock).
 */
static bool __kick(struct replica_link *l)
{
	if (l->stop)
		return false;
	if (on_home(l)) {
		if (l->attached) /* else the attach message takes the queue */
			ev_idle_start(l->home->loop, &l->more);
		return false;
	}
	if (l->kicked)
		return false;
	l->kicked = true;
	return true;
}

/* enqueue -- add the chain @op.. (linked by next), or complete it at once if the link failed */
static void enqueue(struct replica_link *l, struct rlink_op *op)
{
	struct rlink_op *last = op;
	while (last->next)
		last = last->next;
	pthread_mutex_lock(&l->lock);
	if (l->failed || l->stop) {
		int code = l->failed ? l->code : -ECANCELED;
		pthread_mutex_unlock(&l->lock);
		while (op) {
			struct rlink_op *next = op->next;
			finish(op, code);
			op = next;
		}
		return;
	}
	if (l->tail)
		l->tail->next = op;
	else
		l->head = op;
	l->tail = last;
	bool post = __kick(l);
	struct worker *home = l->home; /* no move while a kick is posted */
	pthread_mutex_unlock(&l->lock);
	if (post)
		worker_post(home, &l->kick_msg);
}

/* ask_fail -- the loop fails the link with @code (any thread) */
static void ask_fail(struct replica_link *l, int code)
{
	pthread_mutex_lock(&l->lock);
	if (!l->fail_asked)
		l->fail_asked = code;
	bool post = __kick(l);
	struct worker *home = l->home;
	pthread_mutex_unlock(&l->lock);
	if (post)
		worker_post(home, &l->kick_msg);
}

void rlink_forward(struct replica_link *l, uint64_t off, uint64_t len)
{
	if (len == 0 || off >= l->o.size || len > l->o.size - off)
		return;
	/* one request per piece: the pipeline's depth counts requests */
	while (len > RLINK_PIECE) {
		rlink_forward(l, off, RLINK_PIECE);
		off += RLINK_PIECE;
		len -= RLINK_PIECE;
	}
	struct rlink_op *op = calloc(1, sizeof(*op));
	if (!op) {
		/* a write that cannot be queued is one the replica would lack: the link fails */
		ask_fail(l, -ENOMEM);
		return;
	}
	*op = (struct rlink_op){.kind = RLINK_WRITE, .off = off, .len = len};
	enqueue(l, op);
}

void rlink_fsync(struct replica_link *l, uint64_t off, uint64_t len, struct rlink_waiter *w)
{
	struct rlink_op *op = calloc(1, sizeof(*op));
	if (!op) {
		w->done(w, -ENOMEM);
		return;
	}
	*op = (struct rlink_op){.kind = RLINK_FSYNC, .off = off, .len = len, .w = w};
	enqueue(l, op);
	push(l);
}

bool rlink_forward_fsync(struct replica_link *l, uint64_t off, uint64_t len, struct rlink_waiter *w)
{
	if (len == 0 || len > RLINK_PIECE || off >= l->o.size || len > l->o.size - off)
		return false;
	struct rlink_op *wr = calloc(1, sizeof(*wr)), *fs = calloc(1, sizeof(*fs));
	if (!wr || !fs) {
		free(wr);
		free(fs);
		return false;
	}
	*fs = (struct rlink_op){.kind = RLINK_FSYNC, .off = off, .len = len, .w = w};
	*wr = (struct rlink_op){.kind = RLINK_WRITE, .off = off, .len = len, .next = fs};
	pthread_mutex_lock(&l->lock);
	bool ok = !l->failed && !l->stop;
	bool post = false;
	if (ok) {
		if (l->tail)
			l->tail->next = wr;
		else
			l->head = wr;
		l->tail = fs;
		post = __kick(l);
	}
	struct worker *home = l->home;
	pthread_mutex_unlock(&l->lock);
	if (post)
		worker_post(home, &l->kick_msg);
	if (!ok) {
		free(wr);
		free(fs);
	}
	return ok;
}

void rlink_push(struct replica_link *l)
{
	push(l);
}

void rlink_abort(struct replica_link *l, int code)
{
	ask_fail(l, code);
}

void rlink_move(struct replica_link *l, struct worker *w)
{
	pthread_mutex_lock(&l->lock);
	if (!l->own && w)
		l->move_to = w;
	pthread_mutex_unlock(&l->lock);
}

bool rlink_home_is(struct replica_link *l, const struct worker *w)
{
	pthread_mutex_lock(&l->lock);
	bool same = l->home == w;
	pthread_mutex_unlock(&l->lock);
	return same;
}

void rlink_stats(struct replica_link *l, struct rlink_stats *out)
{
	pthread_mutex_lock(&l->lock);
	*out = l->stats;
	pthread_mutex_unlock(&l->lock);
}

/*
 * drain -- take the completions librdax still owes (a failed link left
 * requests in flight), once the loop let go: the connection's own timeout
 * (the link's) ends a stalled one, after which every request completes with
 * its error, and the volume can be closed
 */
static void drain(struct replica_link *l)
{
	struct rdax_completion c[16];
	for (unsigned tries = 0; l->conn && rdax_inflight(l->conn) > 0 && tries < 8; tries++)
		if (rdax_wait_completions(l->conn, c, 16, 1, (int)l->o.timeout_ms) < 0 &&
		    rdax_inflight(l->conn) > 0)
			continue;
}

static void link_free(struct replica_link *l)
{
	drain(l);
	if (l->vol)
		rdax_volume_close(&l->vol);
	if (l->conn)
		rdax_disconnect(&l->conn);
	if (l->own) {
		worker_stop(l->own);
		worker_delete(&l->own);
	}
	completion_destroy(&l->detached);
	pthread_mutex_destroy(&l->lock);
	free(l->inflight);
	free(l->url);
	free(l->volume);
	free(l);
}

/* link_home -- the loop the link runs on: the owner's worker, else a worker of its own */
static int link_home(struct replica_link *l, const struct rlink_opts *o, char *err, size_t errlen)
{
	if (o->home) {
		l->home = o->home;
		return 0;
	}
	int ret = worker_new(0, &l->own);
	if (ret == 0)
		ret = worker_start(l->own);
	if (ret) {
		rdax_seterr(err, errlen, "cannot start the link's loop: %s", strerror(-ret));
		worker_delete(&l->own);
		return ret;
	}
	l->home = l->own;
	return 0;
}

int rlink_start(const struct rlink_opts *o, struct replica_link **out, char *err, size_t errlen)
{
	struct replica_link *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->o = *o;
	l->o.timeout_ms = o->timeout_ms ? o->timeout_ms : RLINK_DEFAULT_TIMEOUT_MS;
	l->o.depth = o->depth ? o->depth : RLINK_DEFAULT_DEPTH;
	pthread_mutex_init(&l->lock, NULL);
	completion_init(&l->detached);
	l->attach_msg.fn = attach_fn;
	l->kick_msg.fn = kick_fn;
	l->detach_msg.fn = detach_fn;
	l->url = strdup(o->url);
	l->volume = strdup(o->volume);
	l->inflight = calloc(l->o.depth, sizeof(*l->inflight));
	l->o.url = l->url;
	l->o.volume = l->volume;
	if (!l->url || !l->volume || !l->inflight) {
		link_free(l);
		return -ENOMEM;
	}
	struct rdax_conn_opts *co;
	int ret = rdax_conn_opts_new(&co);
	if (ret) {
		link_free(l);
		return ret;
	}
	rdax_conn_opts_set_client_name(co, "replica-link");
	rdax_conn_opts_set_timeout(co, (int)l->o.timeout_ms);
	rdax_conn_opts_set_queue_depth(co, l->o.depth);
	if (o->token_file && (ret = rdax_conn_opts_set_token_file(co, o->token_file))) {
		rdax_seterr(err, errlen, "token file %s: %s", o->token_file, rdax_strerror(ret));
		rdax_conn_opts_delete(&co);
		link_free(l);
		return ret;
	}
	ret = rdax_connect(o->url, co, &l->conn);
	rdax_conn_opts_delete(&co);
	if (ret) {
		rdax_seterr(err, errlen, "connect %s: %s", o->url, rdax_connect_last_error());
		link_free(l);
		return ret;
	}
	if (o->epoch)
		ret =
		    conn_volume_open_replica(l->conn, o->volume, o->epoch,
					     o->primary ? o->primary : "", o->incarnation, &l->vol);
	else
		ret = rdax_volume_open(l->conn, o->volume, &l->vol);
	if (ret) {
		rdax_seterr(err, errlen, "open %s on %s: %s", o->volume, o->url,
			    rdax_conn_last_error(l->conn));
		link_free(l);
		return ret;
	}
	if (l->conn->rdma && !l->vol->direct) {
		/* an RDMA link is one-sided writes; a replica that gives no window is refused */
		rdax_seterr(err, errlen, "open %s on %s: no direct access over rdma://", o->volume,
			    o->url);
		link_free(l);
		return -EOPNOTSUPP;
	}
	snprintf(l->stats.transport, sizeof(l->stats.transport), "%s",
		 l->conn->rdma ? "rdma" : "tcp");
	ret = link_home(l, o, err, errlen);
	if (ret) {
		link_free(l);
		return ret;
	}
	/* from here on the connection is the home loop's */
	worker_post(l->home, &l->attach_msg);
	*out = l;
	return 0;
}

void rlink_stop(struct replica_link **lp)
{
	struct replica_link *l = lp ? *lp : NULL;
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	struct worker *home = l->home; /* a move done by now posted its attach there */
	pthread_mutex_unlock(&l->lock);
	/* after the attach and any kick or move posted before (messages run in order) */
	worker_post(home, &l->detach_msg);
	completion_wait(&l->detached, -1, NULL);
	/* what is still in flight or queued never got its answer */
	for (unsigned i = 0; i < l->o.depth; i++)
		if (l->inflight[i]) {
			finish(l->inflight[i], -ECANCELED);
			l->inflight[i] = NULL;
		}
	for (struct rlink_op *q = l->head, *next; q; q = next) {
		next = q->next;
		finish(q, -ECANCELED);
	}
	l->head = l->tail = NULL;
	link_free(l);
	*lp = NULL;
}
