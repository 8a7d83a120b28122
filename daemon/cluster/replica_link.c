/* SPDX-License-Identifier: BSD-3-Clause */
/* replica_link.c -- the primary's ordered, pipelined stream to one replica */
#include "replica_link.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/socket.h>
#include <unistd.h>

#include "../../client/conn.h"		 /* librdax's own: a failed link's socket is aborted */
#include "../../client/transport_rdma.h" /* ... and its queue pair */
#include "errors.h"
#include "librdax.h"
#include "log.h"

#define RLINK_DEFAULT_TIMEOUT_MS 2000
#define RLINK_DEFAULT_DEPTH	 32
/* A forwarded range is sent in pieces of at most this (every rdaxd takes 1 MiB requests). */
#define RLINK_PIECE (1U << 20)
/* While requests are in flight the thread looks at its queue at least this often. */
#define RLINK_POLL_MS 1

enum rlink_kind { RLINK_WRITE, RLINK_FSYNC };

struct rlink_op {
	struct rlink_op *next;
	enum rlink_kind kind;
	uint64_t off, len;
	struct rlink_waiter *w; /* FSYNC */
	uint64_t cookie;	/* once submitted */
	uint64_t sent_ms;
};

struct replica_link {
	struct rlink_opts o;
	char *url, *volume;
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rlink_op *head, *tail; /* queued, not yet submitted (under lock) */
	bool stop;		      /* under lock */
	bool failed;		      /* under lock once set */
	int code;
	int fail_asked;		    /* under lock: a caller's failure for the thread to carry out */
	struct rlink_op **inflight; /* by cookie's slot (cookie_slot); link thread only */
	unsigned ninflight;
	uint64_t next_cookie;
	struct rlink_stats stats; /* under lock */
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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

/* fail -- the link is done for: abort it, tell the owner once, complete everything with @code */
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

/* submit -- send @op (the thread owns it now); false if the link failed doing so */
static bool submit(struct replica_link *l, struct rlink_op *op)
{
	unsigned slot = 0;
	while (l->inflight[slot]) /* ninflight < depth: one is free */
		slot++;
	op->cookie = (l->next_cookie++ << 16) | slot;
	op->sent_ms = now_ms();
	int ret;
	if (op->kind == RLINK_WRITE)
		ret = rdax_submit_write(l->vol, op->off, l->o.mapping + op->off, op->len, 0,
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

/* reap -- take completions; false if the link failed */
static bool reap(struct replica_link *l, int timeout_ms)
{
	struct rdax_completion c[16];
	int n = rdax_wait_completions(l->conn, c, 16, 1, timeout_ms);
	if (n < 0) {
		char why[320];
		snprintf(why, sizeof(why), "connection: %s", rdax_conn_last_error(l->conn));
		fail(l, n, why);
		return false;
	}
	for (int i = 0; i < n; i++) {
		unsigned slot = cookie_slot(c[i].cookie);
		struct rlink_op *op = slot < l->o.depth ? l->inflight[slot] : NULL;
		if (!op || op->cookie != c[i].cookie) {
			fail(l, -RDAX_E_PROTOCOL, "a completion of a request never sent");
			return false;
		}
		l->inflight[slot] = NULL;
		l->ninflight--;
		if (c[i].status) {
			char why[320];
			snprintf(why, sizeof(why), "%s at %" PRIu64 "+%" PRIu64 ": %s",
				 op->kind == RLINK_WRITE ? "write" : "fsync", op->off, op->len,
				 rdax_conn_last_error(l->conn));
			finish(op, c[i].status);
			fail(l, c[i].status, why);
			return false;
		}
		pthread_mutex_lock(&l->lock);
		if (op->kind == RLINK_WRITE) {
			l->stats.writes++;
			l->stats.write_bytes += op->len;
		} else {
			l->stats.fsyncs++;
		}
		pthread_mutex_unlock(&l->lock);
		finish(op, 0);
	}
	return true;
}

/* stalled -- the oldest request in flight waited longer than the timeout */
static bool stalled(struct replica_link *l)
{
	uint64_t now = now_ms();
	for (unsigned i = 0; i < l->o.depth; i++)
		if (l->inflight[i] && now - l->inflight[i]->sent_ms > l->o.timeout_ms)
			return true;
	return false;
}

static void *link_thread(void *arg)
{
	struct replica_link *l = arg;
	for (;;) {
		pthread_mutex_lock(&l->lock);
		while (!l->stop && !l->failed && !l->fail_asked && !l->head && l->ninflight == 0)
			pthread_cond_wait(&l->cond, &l->lock);
		int asked = l->fail_asked;
		if (l->stop || l->failed || asked) {
			pthread_mutex_unlock(&l->lock);
			if (asked && !l->failed)
				fail(l, asked,
				     asked == -ENOMEM ? "out of memory queueing a write"
						      : "aborted by its owner");
			break;
		}
		/* take what fits in the pipeline, in order */
		struct rlink_op *take = NULL, **tailp = &take;
		unsigned room = l->o.depth - l->ninflight;
		while (l->head && room) {
			struct rlink_op *op = l->head;
			l->head = op->next;
			op->next = NULL;
			*tailp = op;
			tailp = &op->next;
			room--;
		}
		if (!l->head)
			l->tail = NULL;
		pthread_mutex_unlock(&l->lock);
		bool ok = true;
		while (take) {
			struct rlink_op *next = take->next;
			if (ok)
				ok = submit(l, take);
			else
				finish(take, l->code);
			take = next;
		}
		if (!ok)
			break;
		if (l->ninflight && !reap(l, RLINK_POLL_MS))
			break;
		if (l->ninflight && stalled(l)) {
			char why[128];
			snprintf(why, sizeof(why), "no answer for %u ms (stalled replica)",
				 l->o.timeout_ms);
			fail(l, -ETIMEDOUT, why);
			break;
		}
	}
	return NULL;
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
	pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->lock);
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
		pthread_mutex_lock(&l->lock);
		l->fail_asked = -ENOMEM;
		pthread_cond_signal(&l->cond);
		pthread_mutex_unlock(&l->lock);
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
	if (ok) {
		if (l->tail)
			l->tail->next = wr;
		else
			l->head = wr;
		l->tail = fs;
		pthread_cond_signal(&l->cond);
	}
	pthread_mutex_unlock(&l->lock);
	if (!ok) {
		free(wr);
		free(fs);
	}
	return ok;
}

void rlink_abort(struct replica_link *l, int code)
{
	pthread_mutex_lock(&l->lock);
	if (!l->fail_asked)
		l->fail_asked = code;
	pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

void rlink_stats(struct replica_link *l, struct rlink_stats *out)
{
	pthread_mutex_lock(&l->lock);
	*out = l->stats;
	pthread_mutex_unlock(&l->lock);
}

/*
 * drain -- take the completions librdax still owes (a failed link left
 * requests in flight): the connection's own timeout (the link's) ends a
 * stalled one, after which every request completes with its error, and the
 * volume can be closed
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
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
	free(l->inflight);
	free(l->url);
	free(l->volume);
	free(l);
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
	pthread_cond_init(&l->cond, NULL);
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
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&l->thread, NULL, link_thread, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		rdax_seterr(err, errlen, "cannot start the link thread: %s", strerror(-ret));
		link_free(l);
		return ret;
	}
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
	pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->lock);
	pthread_join(l->thread, NULL);
	/* what is still in flight or queued never got its answer */
	for (unsigned i = 0; i < l->o.depth; i++)
		if (l->inflight[i])
			finish(l->inflight[i], -ECANCELED);
	for (struct rlink_op *q = l->head, *next; q; q = next) {
		next = q->next;
		finish(q, -ECANCELED);
	}
	link_free(l);
	*lp = NULL;
}
