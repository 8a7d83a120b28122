/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replica_link.h -- the primary's ordered, pipelined stream to one replica
 *
 * One link per (volume, replica): a connection to the replica node's
 * rdaxd, speaking the ordinary rdax protocol through librdax's pipelined
 * calls (rdax_submit_write / _fsync and its completions), run on a worker's
 * event loop (its home: the worker the owner names, or a worker of the
 * link's own): the loop watches the descriptors librdax waits on
 * (conn_poll_prepare) and reaps without blocking, as it serves its client
 * connections. A write or fsync queued on the home worker's own thread (a
 * client's request handled there) costs no hand-over at all: the loop
 * sends it before it sleeps, with whatever else was queued meanwhile; from
 * another thread one message wakes the loop. Over rdma:// (where both
 * nodes have RDMA, docs/cluster.md "RDMA links") the replica gives the
 * link's handle direct access, as it does any RDMA client's: every
 * forwarded write is a one-sided RDMA WRITE_WITH_IMM into the replica's
 * volume (librdax's transport_rdma), and the FSYNC behind it travels on the
 * same queue pair, so it covers the writes as over TCP. The primary hands
 * it, in order:
 *
 *   rlink_forward(off, len)  a write that was applied to the primary's
 *                            mapping; the bytes are read from the mapping
 *                            when they are sent, not copied when queued
 *                            (docs/cluster.md, "Data path": the last send
 *                            covering a byte carries its final value, so a
 *                            replica applying sends in order converges)
 *   rlink_fsync(off, len, w) an fsync: sent behind every write queued
 *                            before it (the protocol's per-connection order
 *                            makes it cover them) -- at once, with them, if
 *                            queued on the home thread; w->done(w, status)
 *                            runs on the home worker's thread when the
 *                            replica answered
 *
 * A link fails -- once, for good -- when the connection breaks, a request
 * fails, or a request has had no answer for the timeout (a stalled replica):
 * its connection is reset at once (what the kernel still held to send is
 * dropped, so no old write reaches the replica after a newer link's; over
 * RDMA the queue pair is moved to the error state, which flushes what was
 * posted and not yet sent), the loop lets go of it, then on_fail(arg, code,
 * why) runs and every waiter completes with the error (home thread).
 * Nothing queued later is sent. The caller decides what a failure means
 * (docs/cluster.md, "Losing a replica": the replica leaves the ISR before
 * anything it lacks is acknowledged); the link never retries.
 *
 * Thread safety: rlink_forward(), rlink_fsync(), rlink_forward_fsync() and
 * rlink_abort() from any thread (one lock); they never block on the
 * network, so a worker may call them. rlink_start() and rlink_stop() block
 * (connecting; waiting for the home loop to let go): never on the home
 * worker's thread, and the home worker must run until rlink_stop() returned.
 */
#ifndef RDAXD_REPLICA_LINK_H
#define RDAXD_REPLICA_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "worker.h"

struct replica_link;

/* An fsync's completion, embedded in the caller's object. */
struct rlink_waiter {
	struct rlink_waiter *next;			  /* the link's own */
	void (*done)(struct rlink_waiter *w, int status); /* home thread; status 0 or < 0 */
};

struct rlink_opts {
	const char *url;	/* the replica node's tcp:// (or rdma://) URL */
	const char *volume;	/* the volume's name there */
	const uint8_t *mapping; /* the primary's copy of the volume: what is sent */
	uint64_t size;		/* its size */
	const char *token_file; /* NULL: none */
	unsigned timeout_ms;	/* no answer this long: failed (0: 2000) */
	unsigned depth;		/* requests in flight (0: 32) */
	struct worker *home;	/* the loop it runs on (running); NULL: a worker of its own */
	/*
	 * While a fsync's (or durable write's) answer is awaited, the loop
	 * polls instead of sleeping for an adaptive window of at most this
	 * many microseconds (spin_window.h); 0: it sleeps at once.
	 */
	unsigned spin_cap_us;
	/*
	 * The sender, for the replica's fence (cluster_gate.h): the volume is
	 * opened as a replica link of @primary at @epoch, and every request of
	 * the link is refused once the replica has seen a newer epoch. @epoch 0:
	 * an ordinary open (tests of the link against a plain rdaxd).
	 */
	uint64_t epoch;
	const char *primary;
	uint64_t incarnation;
	void (*on_fail)(void *arg, int code, const char *why);
	void *arg;
};

struct rlink_stats {
	uint64_t writes, write_bytes, fsyncs;
	uint64_t fused; /* of those fsyncs, sent inside their write (one request: "fuse") */
	bool failed;
	int code;
	char transport[8]; /* "tcp", or "rdma" (one-sided writes) */
};

/*
 * rlink_start -- connect and open the volume (on the calling thread), then
 * hand the link to its home loop. Returns 0, or a negative code with @err
 * saying why (nothing runs then).
 */
int rlink_start(const struct rlink_opts *o, struct replica_link **out, char *err, size_t errlen);

/* rlink_forward -- queue a write of [off, off + len) of the mapping */
void rlink_forward(struct replica_link *l, uint64_t off, uint64_t len);

/*
 * rlink_fsync -- queue an fsync of [off, off + len) (len 0: to the end);
 * @w->done runs once, with 0 or the link's error (at once if it failed).
 */
void rlink_fsync(struct replica_link *l, uint64_t off, uint64_t len, struct rlink_waiter *w);

/*
 * rlink_forward_fsync -- rlink_forward() and rlink_fsync() of the same range
 * (at most 1 MiB) queued together (a durable write): the loop takes both
 * in one go and sends them as one WRITE with fsync=true -- one request, one
 * answer, one round trip. (A WRITE and an FSYNC of exactly its range that
 * the loop finds one behind the other, from rlink_forward and rlink_fsync,
 * are fused the same way; the stats count them in fsyncs and in fused.)
 * Returns false, queueing nothing and never calling @w, if the link failed
 * or stops (so a caller may hold a lock of its own around it).
 */
bool rlink_forward_fsync(struct replica_link *l, uint64_t off, uint64_t len,
			 struct rlink_waiter *w);

/*
 * rlink_push -- on the link's home thread, send what is queued now instead
 * of when the loop next goes idle (rlink_fsync does it itself): so a
 * durable write's replicas get it before the caller's local flush runs
 * inline. Elsewhere nothing (the loop was woken). Not under a lock that a
 * waiter's done or on_fail takes: a failure found while sending completes
 * them here.
 */
void rlink_push(struct replica_link *l);

/*
 * rlink_abort -- fail the link with @code (its loop carries it out: the
 * connection reset, on_fail, every waiter completed). Any thread.
 */
void rlink_abort(struct replica_link *l, int code);

/*
 * rlink_move -- run the link on @w's loop from now on: its home hands it
 * over the next time nothing is queued or in flight (its order stays one
 * loop's). For an owner whose requests come from @w, so they cross no
 * thread. Ignored for a link with a worker of its own. Any thread.
 */
void rlink_move(struct replica_link *l, struct worker *w);

/* rlink_home_is -- does the link run on @w's loop now? Any thread. */
bool rlink_home_is(struct replica_link *l, const struct worker *w);

/* rlink_stats -- counters so far */
void rlink_stats(struct replica_link *l, struct rlink_stats *out);

/*
 * rlink_stop -- take the link off its loop, complete what is still waiting
 * with -ECANCELED (on the calling thread), close the connection, free.
 * Accepts NULL; sets *lp = NULL.
 */
void rlink_stop(struct replica_link **lp);

#endif
