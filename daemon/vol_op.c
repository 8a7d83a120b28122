/* SPDX-License-Identifier: BSD-3-Clause */
/* vol_op.c -- volume operations: inline or in their pool, the flush mode, the inline rule */
#include "vol_op.h"

#include <errno.h>
#include <stddef.h>

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

bool vol_op_fsync_try_inline(struct volume *v, uint64_t off, uint64_t len, enum flush_mode mode,
			     int *code, uint64_t *written_back)
{
	if (!v || !v->ns || len == 0 || len > VOL_OP_INLINE_MAX)
		return false;
	/* a replicated volume's fsync waits for its replicas: never on the loop */
	if (repl_registry_get(v))
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
	uint64_t t0 = metrics_now_ns();
	uint64_t wb = 0;
	int ret = fsync_range_try(v, off, len, mode, &wb);
	if (ret == -EBUSY)
		return false; /* another fsync of the volume runs: the pool waits for it */
	if (ret == 0)
		metrics_fsync(metrics_now_ns() - t0, wb);
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

bool vol_op_try_inline(struct vol_op *op)
{
	if (!op || op->kind != VOL_OP_FSYNC)
		return false;
	if (op_cut(op))
		return true;
	return vol_op_fsync_try_inline(op->v, op->off, op->len, op->mode, &op->code,
				       &op->written_back);
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
			op->code = repl_fsync_wait(repl_registry_get(op->v), op->off, op->len);
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
		struct repl_volume *rv = repl_registry_get(op->v);
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

bool vol_op_start(struct vol_op *op, const struct vol_pools *pools, struct worker *owner,
		  void (*done)(struct worker *w, struct worker_msg *m))
{
	if (op->kind == VOL_OP_FSYNC)
		op->mark = vol_ack_fsync_mark(op->v);
	if (vol_op_try_inline(op))
		return true;
	op->task.run = op_task_run;
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
