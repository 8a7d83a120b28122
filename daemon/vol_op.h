/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vol_op.h -- one way to run a volume operation, for every protocol
 *
 * The native protocol (dispatch.h) and NBD (nbd_conn.h) reach storage
 * through the same operations, the shape of nbdkit's backend_flush /
 * backend_trim / backend_zero: a struct vol_op names what to do (fsync a
 * range, discard one, open / close / look up / list volumes, or a
 * protocol's own metadata work), and vol_op_start() decides where it runs:
 *
 *   - a range fsync that the inline rule takes (vol_op_fsync_try_inline)
 *     runs right there, on the connection's loop, and is done when
 *     vol_op_start() returns true;
 *   - everything else goes to its pool (vol_op_pool): fsyncs and discards
 *     to the fsync pool (write-back, fences, per-volume serialisation), the
 *     rest to the metadata pool (namespace locks, zeroing a new volume); the
 *     pool posts the completion to the connection's worker.
 *
 * The flush mode of every fsync is decided here too (vol_op_flush_mode):
 * the hammer if the request or the daemon asks for it, else the volume's.
 * Reads and writes need no operation: they are the mapping itself (a READ
 * reply gathered from it, a WRITE's payload received into it and marked).
 *
 * Thread safety: vol_op_start() on the connection's loop thread; the
 * operation then runs on that thread or on a pool thread, touching only the
 * op, the store and the volume it names.
 */
#ifndef RDAXD_VOL_OP_H
#define RDAXD_VOL_OP_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "fsync.h"
#include "fsync_pool.h"
#include "store.h"
#include "volume.h"
#include "worker.h"

enum vol_op_kind {
	VOL_OP_FSYNC,	/* fsync_range(v, off, len, mode); len 0: to the end of the volume */
	VOL_OP_DISCARD, /* volume_discard(v, off, len): zeros, written back and fenced */
	VOL_OP_OPEN,	/* store_volume_open(store, name) into v */
	VOL_OP_CLOSE,	/* store_volume_close(store, v) */
	VOL_OP_INFO,	/* store_volume_info(store, name) into info */
	VOL_OP_LIST,	/* store_volume_list(store) into list, count */
	VOL_OP_CALL,	/* call(op): a protocol's own work in the metadata pool */
};

enum vol_op_pool { VOL_POOL_FSYNC, VOL_POOL_META };

/* The daemon's two pools (fsync_pool.h). */
struct vol_pools {
	struct fsync_pool *fsync; /* fsyncs, discards */
	struct fsync_pool *meta;  /* metadata, teardowns */
};

struct vol_op {
	struct fsync_task task; /* how a pool runs it: set by vol_op_start() */
	enum vol_op_kind kind;
	struct store *store;		 /* OPEN, CLOSE, INFO, LIST */
	struct volume *v;		 /* FSYNC, DISCARD, CLOSE; OPEN: the result */
	uint64_t off, len;		 /* FSYNC, DISCARD */
	enum flush_mode mode;		 /* FSYNC: from vol_op_flush_mode() */
	const char *name;		 /* OPEN, INFO: the caller's string */
	void (*call)(struct vol_op *op); /* CALL */

	uint64_t mark; /* FSYNC: the write log's mark, taken when it starts */

	/* results */
	int code;		  /* 0 or a negative code (CALL: whatever call sets) */
	uint64_t written_back;	  /* FSYNC */
	struct volume_info info;  /* INFO */
	struct volume_info *list; /* LIST: malloc'd, the caller frees */
	unsigned count;
};

/*
 * The code of an FSYNC or DISCARD that was not run because a power cut is
 * decided (powercut.h): nothing is made durable that the cut would not
 * have kept, and the protocol drops the connection instead of replying.
 */
#define VOL_OP_CUT (-ESHUTDOWN)

/*
 * Small range fsyncs run on the connection's loop.
 *
 * A durable write handed to the fsync pool costs a hop to the pool thread
 * and back: 4.8 context switches and ~10 system calls per write against 1.0
 * and 4 for a plain write, measured by the comparative benchmark; run on
 * the loop, 1.0 (docs/benchmarks.md has the latencies). Running there is
 * safe only when it cannot stall the loop's other connections: a short
 * range, written back by CPU cache flushes (or the simulator's pwrite into
 * the page cache), not waiting for another fsync of the volume. Everything
 * else keeps the pool:
 * longer ranges, fsyncs to the end of the volume, the hammer mode, the
 * msync method (write-back to a disk), and a volume whose fsync lock is
 * held (by a pool thread, or another loop).
 */
#define VOL_OP_INLINE_MAX (64U << 10)

/* vol_op_flush_mode -- the mode of an fsync: the hammer if asked or @configured, else the volume's
 */
enum flush_mode vol_op_flush_mode(enum flush_mode configured, bool hammer);

/*
 * vol_op_fsync_try_inline -- the one place that decides whether a range
 * fsync runs on the calling thread, and if so runs it: @len bytes from
 * @off, @mode as for fsync_range(). Context: a connection's loop thread;
 * never waits for another fsync. Returns true if the fsync ran (*code its
 * result: 0 or a negative code; *written_back, may be NULL, its bytes),
 * false if nothing was done: the fsync belongs in the pool.
 */
bool vol_op_fsync_try_inline(struct volume *v, uint64_t off, uint64_t len, enum flush_mode mode,
			     int *code, uint64_t *written_back);

/* vol_op_try_inline -- run @op here if it is a range fsync the rule takes; true if it ran */
bool vol_op_try_inline(struct vol_op *op);

/* vol_op_pool -- the pool @op runs in when it does not run inline */
enum vol_op_pool vol_op_pool(const struct vol_op *op);

/* vol_op_run -- do @op on the calling thread, as a pool thread does (may block) */
void vol_op_run(struct vol_op *op);

/*
 * vol_op_start -- run @op inline if the rule takes it (returns true: the
 * result is in @op, nothing is posted), else submit it to its pool of
 * @pools and return false; an FSYNC takes its write-log mark first
 * (vol_ack.h), and an FSYNC or DISCARD is not run once a power cut is
 * decided (op->code VOL_OP_CUT, wherever it would have run).
 * @done(@owner, &op->task.done) runs on @owner's thread once a pool ran it
 * (vol_op_of_msg() gives @op back).
 */
bool vol_op_start(struct vol_op *op, const struct vol_pools *pools, struct worker *owner,
		  void (*done)(struct worker *w, struct worker_msg *m));

/* vol_op_of_msg -- the op whose completion message @m is */
struct vol_op *vol_op_of_msg(struct worker_msg *m);

/*
 * vol_op_has_dirty -- has @v bytes written and not yet made durable? (A
 * read-only client's fsync is refused only then: otherwise it changes nothing.)
 * Context: any thread; takes the dirty tree's lock briefly.
 */
bool vol_op_has_dirty(struct volume *v);

#endif
