/* SPDX-License-Identifier: BSD-3-Clause */
/* vol_op.c -- volume operations: inline or in their pool, the flush mode, the inline rule */
#include "vol_op.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#include "metrics.h"
#include "namespace.h"
#include "persist.h"
#include "powercut.h"
#include "repl_registry.h"
#include "vol_ack.h"

enum flush_mode vol_op_flush_mode(enum flush_mode configured, bool hammer)
{
	return hammer || configured == FLUSH_HAMMER ? FLUSH_HAMMER : FLUSH_DEFAULT;
}

/*
 * vol_op_dirty_set_small -- whether all of @v that is dirty is at most
 * VOL_OP_INLINE_MAX bytes in at most FSYNC_CLAIM_BATCH entries: an fsync of
 * any range of it is then one pass of the tree and that much write-back.
 */
static bool vol_op_dirty_set_small(struct volume *v)
{
	struct dtree_stats st;
	dtree_stats_get(v->tree, &st);
	uint64_t entries = 0;
	for (unsigned i = 0; i < DTREE_NR_SIZES; i++)
		entries += st.entries[i];
	return st.dirty_bytes <= VOL_OP_INLINE_MAX && entries <= FSYNC_CLAIM_BATCH;
}

/*
 * local_try_inline -- the inline rule (vol_op.h) for the local write-back
 * and fence alone, and the fsync if it takes it; true if it ran
 */
static bool local_try_inline(struct volume *v, uint64_t off, uint64_t len, enum flush_mode mode,
			     int *code, uint64_t *written_back)
{
	if (!v || !v->ns || !v->tree)
		return false;
	/* a long range (len 0: to the end, NBD's FLUSH) only while little of the volume is dirty */
	if ((len == 0 || len > VOL_OP_INLINE_MAX) && !vol_op_dirty_set_small(v))
		return false;
	if (mode == FLUSH_HAMMER)
		return false;
	/* FLUSH_DEFAULT: the volume's mode, as fsync_range() will read it */
	if (mode == FLUSH_DEFAULT &&
	    __atomic_load_n(&v->flush_mode, __ATOMIC_RELAXED) == FLUSH_HAMMER)
		return false;
	/* msync writes back to a disk: it may block for milliseconds */
	if (v->ns->persist.method == PERSIST_METHOD_MSYNC)
		return false;
	uint64_t wb = 0;
	int ret = fsync_range_try(v, off, len, mode, &wb);
	if (ret == -EBUSY)
		return false; /* another fsync of the volume runs: the pool waits for it */
	if (written_back)
		*written_back = wb;
	*code = ret;
	return true;
}

/* op_cut -- an FSYNC or DISCARD after a power cut was decided: not run (VOL_OP_CUT) */
static bool op_cut(struct vol_op *op)
{
	if ((op->kind != VOL_OP_FSYNC && op->kind != VOL_OP_DISCARD) || !powercut_pending())
		return false;
	op->code = VOL_OP_CUT;
	return true;
}

bool vol_op_fsync_try_inline(struct volume *v, uint64_t off, uint64_t len, enum flush_mode mode,
			     int *code, uint64_t *written_back)
{
	/* a replicated volume's fsync waits for its replicas: vol_op_start's own way */
	if (!v || repl_registry_get(v))
		return false;
	uint64_t t0 = metrics_now_ns();
	uint64_t wb = 0;
	if (!local_try_inline(v, off, len, mode, code, &wb))
		return false;
	if (*code == 0)
		metrics_fsync(metrics_now_ns() - t0, wb);
	if (written_back)
		*written_back = wb;
	return true;
}

/* op_repl -- the replication @op must wait for: NULL if none or @op is this copy's only */
static struct repl_volume *op_repl(const struct vol_op *op)
{
	return op->local_only ? NULL : repl_registry_get(op->v);
}

bool vol_op_try_inline(struct vol_op *op)
{
	if (!op || op->kind != VOL_OP_FSYNC)
		return false;
	if (op_cut(op))
		return true;
	if (op->local_only) {
		/* the inline rule for the local flush alone (a replica link's fsync) */
		uint64_t t0 = metrics_now_ns();
		if (!local_try_inline(op->v, op->off, op->len, op->mode, &op->code,
				      &op->written_back))
			return false;
		if (op->code == 0)
			metrics_fsync(metrics_now_ns() - t0, op->written_back);
		return true;
	}
	return vol_op_fsync_try_inline(op->v, op->off, op->len, op->mode, &op->code,
				       &op->written_back);
}

bool vol_op_quick(const struct vol_op *op)
{
	switch (op->kind) {
	case VOL_OP_OPEN:
	case VOL_OP_INFO:
		return true;
	case VOL_OP_CALL:
		return op->quick;
	default:
		return false;
	}
}

enum vol_op_pool vol_op_pool(const struct vol_op *op)
{
	return op->kind == VOL_OP_FSYNC || op->kind == VOL_OP_DISCARD ? VOL_POOL_FSYNC
								      : VOL_POOL_META;
}

void vol_op_run(struct vol_op *op)
{
	if (op_cut(op))
		return;
	switch (op->kind) {
	case VOL_OP_FSYNC: {
		uint64_t t0 = metrics_now_ns();
		op->code = fsync_range(op->v, op->off, op->len, op->mode, &op->written_back);
		if (op->code == 0)
			op->code = repl_fsync_wait(op_repl(op), op->off, op->len);
		if (op->code == 0)
			metrics_fsync(metrics_now_ns() - t0, op->written_back);
		break;
	}
	case VOL_OP_DISCARD: {
		/*
		 * A replicated volume's discard reaches its replicas as the zeros it
		 * leaves, read from the mapping like any forwarded write (the link has
		 * no discard of its own), and is durable there before it is answered.
		 */
		struct repl_volume *rv = op_repl(op);
		if (rv)
			repl_before_write(rv, op->off, op->len);
		op->code = volume_discard(op->v, op->off, op->len);
		if (rv) {
			repl_write(rv, op->off, op->len);
			int ret = repl_fsync_wait(rv, op->off, op->len);
			if (op->code == 0)
				op->code = ret;
		}
		break;
	}
	case VOL_OP_OPEN:
		op->code = store_volume_open(op->store, op->name, &op->v);
		break;
	case VOL_OP_CLOSE:
		store_volume_close(op->store, &op->v);
		op->code = 0;
		break;
	case VOL_OP_INFO:
		op->code = store_volume_info(op->store, op->name, &op->info);
		break;
	case VOL_OP_LIST:
		op->code = store_volume_list(op->store, &op->list, &op->count);
		break;
	case VOL_OP_CALL:
		op->call(op);
		break;
	}
}

/* op_task_run -- a pool thread runs the op */
static void op_task_run(struct fsync_task *t)
{
	vol_op_run((struct vol_op *)((char *)t - offsetof(struct vol_op, task)));
}

/*
 * A replicated volume's fsync in flight (vol_op.h): the replicas' wait
 * (first: repl_wait's done gives it back) and the two results. The local
 * part and the replicas' end on any thread (the loop, a pool thread, the
 * links' home worker); the last of the two posts the completion.
 */
struct repl_op {
	struct repl_wait w;
	struct vol_op *op;
	struct worker *owner;
	atomic_uint parts; /* of 2 (local, replicas) still running */
	int local, remote;
	uint64_t t0;
};

/* repl_op_part_done -- one part ended; the last one completes the op */
static void repl_op_part_done(struct repl_op *x)
{
	if (atomic_fetch_sub(&x->parts, 1) != 1)
		return;
	struct vol_op *op = x->op;
	struct worker *owner = x->owner;
	op->code = x->local ? x->local : x->remote;
	if (op->code == 0)
		metrics_fsync(metrics_now_ns() - x->t0, op->written_back);
	op->repl = NULL;
	free(x);
	worker_post(owner, &op->task.done);
}

/* repl_op_replicas_done -- every ISR member confirmed (or left the ISR), or -EIO */
static void repl_op_replicas_done(struct repl_wait *w, int status)
{
	struct repl_op *x = (struct repl_op *)w;
	x->remote = status;
	repl_op_part_done(x);
}

/* repl_op_local_run -- the local part in the pool (it did not run inline) */
static void repl_op_local_run(struct fsync_task *t)
{
	struct vol_op *op = (struct vol_op *)((char *)t - offsetof(struct vol_op, task));
	struct repl_op *x = op->repl;
	x->local = fsync_range(op->v, op->off, op->len, op->mode, &op->written_back);
	repl_op_part_done(x);
}

/*
 * repl_op_start -- @op is an fsync of a replicated volume: start both parts
 * (see the top of vol_op.h). False if it is not, or no memory for its wait
 * (then the pool runs it whole: vol_op_run waits for the replicas there).
 */
static bool repl_op_start(struct vol_op *op, const struct vol_pools *pools, struct worker *owner,
			  void (*done)(struct worker *w, struct worker_msg *m))
{
	struct repl_volume *rv = op->kind == VOL_OP_FSYNC ? op_repl(op) : NULL;
	if (!rv)
		return false;
	struct repl_op *x = calloc(1, sizeof(*x));
	if (!x)
		return false;
	x->w.done = repl_op_replicas_done;
	x->op = op;
	x->owner = owner;
	x->t0 = metrics_now_ns();
	atomic_init(&x->parts, 2);
	op->repl = x;
	op->task.done.fn = done;
	op->written_back = 0;
	/* the links to this worker's loop, if its requests keep coming from here */
	repl_prefer(rv, owner);
	/* the replicas first: their FSYNCs leave while the local flush runs */
	repl_fsync(rv, op->off, op->len, &x->w);
	int code;
	if (local_try_inline(op->v, op->off, op->len, op->mode, &code, &op->written_back)) {
		x->local = code;
		repl_op_part_done(x);
		return true;
	}
	op->task.run = repl_op_local_run;
	op->task.owner = NULL; /* the last part posts, not the pool */
	fsync_pool_submit(pools->fsync, &op->task);
	return true;
}

bool vol_op_start(struct vol_op *op, const struct vol_pools *pools, struct worker *owner,
		  void (*done)(struct worker *w, struct worker_msg *m))
{
	if (op->kind == VOL_OP_FSYNC)
		op->mark = vol_ack_fsync_mark(op->v);
	/* a power cut decided: not run, wherever it would have run (op_cut) */
	if (op_cut(op))
		return true;
	if (repl_op_start(op, pools, owner, done))
		return false;
	if (vol_op_try_inline(op))
		return true;
	op->task.run = op_task_run;
	op->task.quick = vol_op_quick(op);
	op->task.owner = owner;
	op->task.done.fn = done;
	fsync_pool_submit(vol_op_pool(op) == VOL_POOL_META ? pools->meta : pools->fsync, &op->task);
	return false;
}

struct vol_op *vol_op_of_msg(struct worker_msg *m)
{
	struct fsync_task *t = (struct fsync_task *)((char *)m - offsetof(struct fsync_task, done));
	return (struct vol_op *)((char *)t - offsetof(struct vol_op, task));
}

bool vol_op_has_dirty(struct volume *v)
{
	struct volume_stats vs;
	volume_stats_get(v, &vs);
	return vs.dirty_bytes != 0;
}
