/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conn_nbd.h -- one NBD connection on a worker loop: handshake, requests
 *
 * An NBD client (qemu, nbd-client, libnbd, fio) reaches a volume by name:
 * the export name is the volume name. The connection lives on one worker
 * loop like a TCP connection of the rdax protocol (conn_tcp.h) and uses the
 * same pools: whatever takes namespace locks (export lookup, list, the
 * final close of the volume) runs in the metadata pool, whatever writes
 * back or fences (FLUSH, FUA, TRIM, WRITE_ZEROES) in the fsync pool.
 *
 * Input is a state machine over a fixed buffer:
 *
 *   FLAGS --4 bytes--> OPT_HEADER --16--> OPT_DATA (len <= NBD_OPT_MAX_LEN,
 *   buffered) or OPT_SKIP (unknown option or too long: read and dropped,
 *   never stored) --> a reply, or OPT_WAIT while a pool job looks the
 *   export up --> OPT_HEADER again, or after GO / EXPORT_NAME:
 *   REQ_HEADER --28--> REQ_PAYLOAD (a WRITE) --> REQ_HEADER ...
 *
 * Every length is checked before anything is allocated or received for it:
 * an option longer than NBD_OPT_SKIP_MAX, more than NBD_MAX_OPTIONS options,
 * a bad magic, unknown client flags, or a refused WRITE whose payload is
 * longer than NBD_WRITE_SKIP_MAX end the connection (the hard disconnect the
 * protocol allows); everything else gets the error the protocol document
 * prescribes and the connection goes on.
 *
 * Data path: an accepted WRITE's payload is received straight into the
 * volume's mapping and marked in the dirty tree before the reply; a READ
 * reply is gathered straight from the mapping when it is sent. A WRITE (or
 * TRIM/WRITE_ZEROES) over the range of a READ reply of this connection that
 * is still queued waits until that reply has left, so a READ never returns
 * bytes of a request the client sent after it. Requests are pipelined; a
 * FLUSH or FUA write is answered from the fsync pool, possibly after
 * replies to later requests (the protocol allows any order; handles are
 * echoed) -- except a FUA write of at most DISPATCH_FSYNC_INLINE_MAX bytes
 * whose fsync can start without waiting: it runs on the loop and is
 * answered at once (dispatch_fsync_try_inline(), dispatch.h). Backpressure: replies queued plus jobs in the pools are bounded
 * by NBD_CONN_MAX_PENDING per connection (resume at half).
 *
 * An exported volume is opened (counted as an opener) for as long as the
 * connection lives, so it cannot be deleted meanwhile (EBUSY).
 *
 * Thread safety: a connection and its set belong to one worker; everything
 * runs on that worker's thread, except conn_nbd_start() and
 * conn_nbd_set_drain(), which post to it.
 */
#ifndef RDAXD_CONN_NBD_H
#define RDAXD_CONN_NBD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsync_pool.h"
#include "store.h"
#include "volume.h"
#include "worker.h"

/* Block size constraints advertised with NBD_INFO_BLOCK_SIZE. */
#define NBD_MIN_BLOCK	    1U		/* any byte offset and length works */
#define NBD_PREFERRED_BLOCK 4096U	/* the dirty tree's page */
#define NBD_MAX_BLOCK	    (32U << 20) /* READ/WRITE/WRITE_ZEROES length; 2^25 as clients expect */

/* Option data read into memory; longer known options are skipped and refused. */
#define NBD_OPT_MAX_LEN (8U << 10)
/* Longer options than this are taken as a denial of service: hard disconnect. */
#define NBD_OPT_SKIP_MAX (1U << 20)
/* Options per connection before the server gives up on the client. */
#define NBD_MAX_OPTIONS 4096
/* A refused WRITE's payload is read and dropped up to this length; longer: hard disconnect. */
#define NBD_WRITE_SKIP_MAX (64U << 20)
/* Replies queued + jobs in the pools, per connection. */
#define NBD_CONN_MAX_PENDING 256
/* Input buffer: request headers, option data (>= NBD_OPT_MAX_LEN + a header). */
#define NBD_INBUF_SIZE (64U << 10)
/* After a drain starts, replies a client does not read are dropped after this many seconds. */
#define NBD_DRAIN_TIMEOUT 10.0

/* What every NBD connection of the daemon shares. */
struct conn_nbd_shared {
	struct store *store;
	struct fsync_pool *pool_fsync; /* FLUSH, FUA, TRIM, WRITE_ZEROES */
	struct fsync_pool *pool_meta;  /* export lookup and list, closing the volume */
	enum flush_mode flush_mode;    /* FLUSH_DEFAULT (the volume's) or FLUSH_HAMMER */
	uint32_t max_block;	       /* <= NBD_MAX_BLOCK */
};

struct conn_nbd;

/* The NBD connections of one worker. */
struct conn_nbd_set {
	struct worker *worker;
	const struct conn_nbd_shared *shared;
	struct conn_nbd *conns;
	unsigned nconns;
	struct conn_nbd *flush; /* connections with output to send */
	struct conn_nbd *dead;	/* connections to free before the loop sleeps */
	ev_idle more;
	ev_timer drain_timer;
	bool draining;
	bool idle_reported;
	struct worker_msg drain_msg;
	void (*on_idle)(struct conn_nbd_set *set, void *arg);
	void *idle_arg;
	uint64_t accepted, closed;
};

/*
 * conn_nbd_set_new -- the NBD connection set of @w; registers a worker
 * hook, so call before worker_start(). @on_idle runs on the worker thread
 * once a drain has closed every connection. Returns 0, -EINVAL, -ENOMEM,
 * -ENOSPC (the worker has no hook slot left).
 */
int conn_nbd_set_new(struct worker *w, const struct conn_nbd_shared *shared,
		     void (*on_idle)(struct conn_nbd_set *set, void *arg), void *arg,
		     struct conn_nbd_set **out);

/* conn_nbd_set_delete -- free a set without connections (after the drain); accepts NULL */
void conn_nbd_set_delete(struct conn_nbd_set **setp);

/*
 * conn_nbd_set_drain -- from any thread: stop reading on every connection,
 * let requests in flight finish and their replies go out (for at most
 * NBD_DRAIN_TIMEOUT), close; on_idle when none is left.
 */
void conn_nbd_set_drain(struct conn_nbd_set *set);

/*
 * conn_nbd_start -- from any thread: hand the connected, non-blocking
 * socket @fd from @peer to the set's worker, which sends the greeting and
 * owns the socket from then on. Returns 0, or -ENOMEM (@fd is closed).
 */
int conn_nbd_start(struct conn_nbd_set *set, int fd, const char *peer);

#endif
