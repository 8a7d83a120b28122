/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conn.h -- the lifecycle every connection shares, whatever its transport
 *
 * A connection of any transport (a TCP or unix socket speaking the native
 * protocol or NBD, an RDMA queue pair) embeds a struct conn and gives it a
 * small ops table (the shape of Redis's ConnectionType and nbdkit's
 * conn->recv/send/close): how to send what is queued, how to make progress
 * after a change, what is still pending, how to end. Everything else is
 * written once, here:
 *
 *   - the connection set of a worker (struct conn_set): every live
 *     connection of every transport on that worker's loop, the flush list
 *     (connections with output to send before the loop sleeps), the dead
 *     list (connections to free once nothing on the stack refers to them),
 *     and the one prepare hook that serves both (Redis beforeSleep);
 *   - the end of a connection: conn_check_end() ends it once its input is
 *     over, its jobs are back and its output has left (or cannot leave), and
 *     buries it once its teardown job is back;
 *   - the drain (SIGTERM): every connection of the set stops taking
 *     requests, those in flight finish and their replies go out, for at most
 *     CONN_DRAIN_TIMEOUT for the whole set, then what is left is dropped.
 *     struct conn_sets drains the sets of every worker at once and waits:
 *     one drain timeout at most for every transport together;
 *   - the cut (a power cut, powercut.h): every connection of every set
 *     fails at once -- nothing more is sent, queued replies are dropped --
 *     and the cut waits until the sets are empty (jobs back, teardowns
 *     done); then the sets take connections again (conn_sets_resume).
 *
 *   live --closing/dead--> (input done, jobs 0, output gone) --end-->
 *   tearing_down (a teardown job in the metadata pool) --jobs 0--> buried
 *   --before the loop sleeps--> freed
 *
 * Thread safety: a connection and its set belong to one worker and are
 * touched only on its thread, except conn_post_start() and the conn_sets
 * functions, which post to the workers (conn_sets_drain_wait() blocks the
 * caller until every set is empty).
 */
#ifndef RDAXD_CONN_H
#define RDAXD_CONN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "worker.h"

/* After a drain starts, replies a client does not take are dropped after this many seconds. */
#define CONN_DRAIN_TIMEOUT 10.0
/* Flush rounds per loop iteration before the loop polls again. */
#define CONN_FLUSH_ROUNDS 16

struct conn;
struct conn_set;

/* What a transport supplies. Every callback runs on the connection's worker thread. */
struct conn_ops {
	/* start -- the worker takes the connection over: set up, conn_link(), first kick */
	void (*start)(struct conn *c);
	/*
	 * flush -- before the loop sleeps: send what is queued as far as the
	 * transport takes it. Returns true if queued output was freed (it may
	 * unblock input: a kick follows), false otherwise (an end check follows).
	 */
	bool (*flush)(struct conn *c);
	/* progress -- after any change: take the input that became possible, fix watchers */
	void (*progress)(struct conn *c);
	/* input_done -- no more input will be handled (c->closing, c->dead are checked first) */
	bool (*input_done)(const struct conn *c);
	/* output_pending -- output still to leave, on a transport that is not dead */
	bool (*output_pending)(const struct conn *c);
	/* drop -- the connection failed (c->dead just set): stop the transport, drop output */
	void (*drop)(struct conn *c);
	/*
	 * end -- input, jobs and output are over: release the transport and
	 * start the teardown. Returns true if a teardown job now runs (counted in
	 * c->jobs: the connection is buried when it is back), false when the
	 * connection can be buried now.
	 */
	bool (*end)(struct conn *c);
	/* free -- the memory (unlinked already; nothing refers to c any more) */
	void (*free)(struct conn *c);
};

/* The part of every connection that the set and the lifecycle see. */
struct conn {
	const struct conn_ops *ops;
	struct conn_set *set;
	struct conn *prev, *next; /* set->conns, once linked */
	struct conn *flush_next;  /* set->flush */
	struct conn *dead_next;	  /* set->dead */
	bool in_flush, in_dead, linked;
	struct worker_msg start_msg;
	char peer[64]; /* for log records */

	unsigned jobs;	   /* in the pools (or parked, or the teardown) */
	bool closing;	   /* no more input: finish jobs, send what is queued, end */
	bool dead;	   /* the transport failed: drop output, end once the jobs are back */
	bool tearing_down; /* ended: the teardown job runs */
	const char *why;   /* why it ended, for the log */
};

/* The connections of one worker, of every transport. */
struct conn_set {
	struct worker *worker;
	unsigned index;	    /* in conn_sets.sets[] */
	struct conn *conns; /* every linked connection */
	unsigned nconns;
	struct conn *flush; /* connections to look at before the loop sleeps */
	struct conn *dead;  /* connections to free before the loop sleeps */
	ev_idle more;	    /* keeps the loop from sleeping while flush is not empty */
	ev_timer drain_timer;
	bool draining;
	bool cutting; /* a power cut: draining, and every connection fails at once */
	bool idle_reported;
	struct worker_msg drain_msg;
	struct worker_msg cut_msg, resume_msg;
	struct conn_sets *group; /* told when a drain has emptied the set */
	uint64_t accepted, closed;
	unsigned drain_timeouts; /* times the drain timer fired (0 or 1 per drain) */
};

/* Every worker's connection set: where connections are spread, what a shutdown drains. */
struct conn_sets {
	struct conn_set **sets;
	unsigned nsets;
	unsigned next;	      /* round-robin position (the accept loop's thread) */
	double drain_timeout; /* seconds; CONN_DRAIN_TIMEOUT unless a test shortens it */
	pthread_mutex_t lock; /* idle, during the drain */
	pthread_cond_t cond;
	unsigned idle;
};

/*
 * conn_sets_new -- one connection set per worker of @workers, each with its
 * worker hook (so before worker_start()). Returns 0, -EINVAL, -ENOMEM,
 * -ENOSPC (a worker has no hook slot left).
 */
int conn_sets_new(struct worker **workers, unsigned nworkers, struct conn_sets **out);

/* conn_sets_next -- the set of the next worker, round-robin. Context: the accept loop. */
struct conn_set *conn_sets_next(struct conn_sets *g);

/*
 * conn_sets_drain_wait -- drain every set at once (see the top of this
 * file) and wait until every set is empty: at most one CONN_DRAIN_TIMEOUT
 * after the last worker took the drain, plus the teardowns. Context: any
 * thread but a worker's; blocks.
 */
void conn_sets_drain_wait(struct conn_sets *g);

/*
 * conn_sets_cut_wait -- the power cut (see the top of this file): every
 * connection of every set fails at once (conn_fail: its queued output
 * dropped), one linked meanwhile too; wait until every set is empty --
 * each connection's jobs are back and its teardown done, so nothing uses a
 * volume any more. Then conn_sets_resume(). Context: any thread but a
 * worker's (rdaxd's main thread); blocks.
 */
void conn_sets_cut_wait(struct conn_sets *g);

/*
 * conn_sets_resume -- after conn_sets_cut_wait(): the sets take connections
 * again. Posts to the workers; connections started after this call are
 * served (the messages of one worker run in order). Context: as above.
 */
void conn_sets_resume(struct conn_sets *g);

/* conn_sets_delete -- free the sets (after the drain, workers stopped); accepts NULL */
void conn_sets_delete(struct conn_sets **gp);

/*
 * conn_init -- a new connection of @set with @ops, from @peer; not yet on
 * the worker. The transport embeds @c and fills in the rest.
 */
void conn_init(struct conn *c, struct conn_set *set, const struct conn_ops *ops, const char *peer);

/* conn_post_start -- from any thread: the worker runs ops->start(c) soon */
void conn_post_start(struct conn *c);

/*
 * conn_link -- ops->start: the connection joins its set (counted, found by
 * the drain); in a set that is draining it is closing from the start.
 */
void conn_link(struct conn *c);

/* conn_flush_add -- look at @c before the loop sleeps (send, then kick or check the end) */
static inline void conn_flush_add(struct conn *c)
{
	if (c->in_flush || c->in_dead)
		return;
	c->in_flush = true;
	c->flush_next = c->set->flush;
	c->set->flush = c;
}

/* conn_close -- no more input: what is queued still goes out, then the connection ends */
void conn_close(struct conn *c, const char *why);

/* conn_fail -- the transport is unusable: ops->drop, and end as soon as the jobs are back */
void conn_fail(struct conn *c, const char *why);

/* conn_kick -- after any change: ops->progress, then conn_check_end() */
void conn_kick(struct conn *c);

/* conn_check_end -- end @c if nothing is left to do on it; bury it after its teardown */
void conn_check_end(struct conn *c);

#endif
