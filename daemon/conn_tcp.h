/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conn_tcp.h -- one TCP connection: framing, pipelining, backpressure
 *
 * Input is a state machine over a bounded buffer:
 *
 *   HEADER --(32 bytes, dispatch_header ok)--> BODY --(body_len bytes,
 *   dispatch_request)--> HEADER, or PAYLOAD for a WRITE --(payload_len
 *   bytes)--> HEADER
 *
 * The header is checked before the buffer grows for the body (at most
 * FRAME_HEADER_SIZE + max_body). An accepted WRITE's payload is received
 * straight into the volume mapping (recv() into the validated range, never
 * more than the bytes left), a refused one is read and dropped.
 *
 * Requests are pipelined: frames are dispatched as they arrive, replies go
 * on a queue that is written with one sendmsg() per loop iteration, READ
 * payloads gathered straight from the mapping. Backpressure: when the replies
 * queued plus the requests in the pools reach CONN_MAX_PENDING, or the
 * queued reply bodies CONN_MAX_QUEUED_BODY bytes, the connection stops
 * reading and dispatching; it resumes when the queue drains to half.
 * An ordered job (dispatch.h) also stops dispatch until its reply is queued.
 * A range fsync (FSYNC, WRITE with fsync) of at most DISPATCH_FSYNC_INLINE_MAX
 * bytes runs on the loop itself when dispatch_job_try_inline() takes it; its
 * reply is then queued at once, after the fence.
 *
 * Write after read: a WRITE whose range overlaps a READ reply of this
 * connection still queued waits (its payload is not received) until that
 * reply has left, and so does a DISCARD (its job is parked), so a READ never
 * returns data changed by a later request of its connection.
 *
 * End: on EOF, a socket error, a DISPATCH_CLOSE or a drain, the connection
 * stops reading, waits for its jobs (fsyncs in flight finish, their holds
 * are released), sends what is queued (not after an error), closes the
 * socket and closes its session's volumes (in the metadata pool if any are
 * open, as that takes namespace locks).
 *
 * Thread safety: a connection and its set belong to one worker; everything
 * runs on that worker's thread, except conn_tcp_new()/conn_tcp_start() and
 * conn_tcp_set_drain(), which post to it.
 */
#ifndef RDAXD_CONN_TCP_H
#define RDAXD_CONN_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatch.h"
#include "fsync_pool.h"
#include "worker.h"

/* Replies queued + requests in the pools, per connection. */
#define CONN_MAX_PENDING 128
/* Bytes of reply bodies queued (READ payloads are not copied, they do not count). */
#define CONN_MAX_QUEUED_BODY (4U << 20)
/* First size of the input buffer; it grows to FRAME_HEADER_SIZE + max_body at most. */
#define CONN_INBUF_MIN (16U << 10)
/* After a drain starts, replies a client does not read are dropped after this many seconds. */
#define CONN_DRAIN_TIMEOUT 10.0

struct conn_tcp;

/* What every connection of the daemon shares. */
struct conn_tcp_shared {
	const struct dispatch_env *env;
	struct fsync_pool *pool_fsync; /* fsync, discard */
	struct fsync_pool *pool_meta;  /* hello, volume metadata, teardown */
};

/* The connections of one worker. */
struct conn_tcp_set {
	struct worker *worker;
	const struct conn_tcp_shared *shared;
	struct conn_tcp *conns; /* all live connections */
	unsigned nconns;
	struct conn_tcp *flush; /* connections with replies to send */
	struct conn_tcp *dead;	/* connections to free before the loop sleeps */
	ev_idle more;		/* keeps the loop from sleeping while flush is not empty */
	ev_timer drain_timer;
	bool draining;
	bool idle_reported;
	struct worker_msg drain_msg;
	void (*on_idle)(struct conn_tcp_set *set, void *arg); /* drained: no connection left */
	void *idle_arg;
	uint64_t accepted, closed; /* counters for logs */
};

/*
 * conn_tcp_set_new -- the connection set of @w; registers the worker hook,
 * so call before worker_start(). @on_idle runs on the worker thread once a
 * drain has closed every connection. Returns 0, -ENOMEM, -ENOSPC.
 */
int conn_tcp_set_new(struct worker *w, const struct conn_tcp_shared *shared,
		     void (*on_idle)(struct conn_tcp_set *set, void *arg), void *arg,
		     struct conn_tcp_set **out);

/* conn_tcp_set_delete -- free a set without connections (after the drain); accepts NULL */
void conn_tcp_set_delete(struct conn_tcp_set **setp);

/*
 * conn_tcp_set_drain -- from any thread: stop reading on every connection
 * of the set, let requests in flight finish and their replies go out (for
 * at most CONN_DRAIN_TIMEOUT), then close; on_idle when none is left.
 */
void conn_tcp_set_drain(struct conn_tcp_set *set);

/*
 * conn_tcp_start -- from any thread: hand the connected, non-blocking
 * socket @fd from @peer ("ADDR:PORT") to the set's worker, which owns it
 * from now on (and closes it on failure). Returns 0, or -ENOMEM (then @fd
 * is closed here).
 */
int conn_tcp_start(struct conn_tcp_set *set, int fd, const char *peer);

#endif
