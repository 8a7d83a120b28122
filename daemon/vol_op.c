/* SPDX-License-Identifier: BSD-3-Clause */
/* vol_op.c -- volume operations: inline or in their pool, the flush mode, the inline rule */
#include "vol_op.h"

#include <errno.h>
#include <stddef.h>

#include "namespace.h"
#include "persist.h"
#include "repl_registry.h"

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
	int ret = fsync_range_try(v, off, len, mode, written_back);
	if (ret == -EBUSY)
		return false; /* another fsync of the volume runs: the pool waits for it */
	*code = ret;
	return true;
}

bool vol_op_try_inline(struct vol_op *op)
{
	if (!op || op->kind != VOL_OP_FSYNC)
		return false;
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
	switch (op->kind) {
	case VOL_OP_FSYNC:
		op->code = fsync_range(op->v, op->off, op->len, op->mode, &op->written_back);
		if (op->code == 0)
			op->code = repl_fsync_wait(repl_registry_get(op->v), op->off, op->len);
		break;
	case VOL_OP_DISCARD:
		op->code = volume_discard(op->v, op->off, op->len);
		break;
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
