/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fsync_pool.h -- threads that run blocking work off the event loops
 *
 * An fsync writes back and fences; it may take long (a large dirty set, or
 * the hammer mode) and may wait behind another fsync of the same volume. It
 * must not stall the loop that serves other connections' small requests, so
 * a loop hands it to this pool and goes on. When the task has run, the pool
 * posts the task's completion message back to the worker that owns the
 * connection (worker_post), and the reply is sent from there -- after the
 * fence.
 *
 * rdaxd runs two pools of this kind: one for fsyncs and discards (data I/O),
 * one for metadata requests (volume create/delete/open/list, which take
 * namespace locks and may zero a new volume), so neither waits for the other.
 *
 * Tasks are intrusive (embedded in the caller's request), so submitting
 * never allocates and never fails; the queue is bounded by the requests in
 * flight, which every connection bounds.
 *
 * Fairness: a task is quick (a hello, a look-up, an open: bounded work) or
 * slow (a list of every volume, a create that zeroes, a close that writes
 * back). Quick tasks are taken first, from their own queue, and slow ones
 * may occupy all threads but @quick_threads (fsync_pool_new): however many
 * slow tasks are queued or running, a quick one waits only for the quick
 * tasks ahead of it, never behind the slow ones. (Before: one queue, in order; 50
 * connections pipelining VOLUME_LIST over 1,000 volumes raised every other
 * client's HELLO from 0.9 ms to 318 ms.) Within each queue, tasks run in
 * the order they came, and a connection has at most one metadata task
 * queued at a time (they are barriers), so connections take turns.
 *
 * Thread safety: fsync_pool_submit() from any thread; fsync_pool_delete()
 * once no task can be submitted any more.
 */
#ifndef RDAXD_FSYNC_POOL_H
#define RDAXD_FSYNC_POOL_H

#include <pthread.h>
#include <stdbool.h>

#include "worker.h"

struct fsync_task {
	struct fsync_task *next;
	bool quick; /* bounded work: its own queue, taken first (see above) */
	void (*run)(struct fsync_task *t); /* pool thread; may block */
	struct worker *owner;	/* where done is posted; NULL: nowhere (read before run) */
	struct worker_msg done; /* posted to owner after run */
};

struct fsync_pool {
	const char *name; /* for logs: "fsync", "meta" */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fsync_task *head, *tail;		    /* slow tasks */
	struct fsync_task *quick_head, *quick_tail; /* quick tasks */
	unsigned slow_running, slow_max;	    /* slow_max: nthreads - quick_threads */
	bool stopping;
	unsigned nthreads;
	pthread_t *threads;
	unsigned long done; /* tasks run, for logs */
};

/*
 * fsync_pool_new -- start @nthreads threads (signals blocked), of which
 * @quick_threads (< @nthreads) never take a slow task; 0, -EINVAL,
 * -ENOMEM, -errno
 */
int fsync_pool_new(const char *name, unsigned nthreads, unsigned quick_threads,
		   struct fsync_pool **out);

/* fsync_pool_submit -- queue @t; @t->run and @t->done.fn must be set */
void fsync_pool_submit(struct fsync_pool *p, struct fsync_task *t);

/*
 * fsync_pool_delete -- run every task still queued, then stop and join the
 * threads. Completion messages of those tasks are still posted: stop the
 * workers after the pools. Accepts NULL; sets *pp = NULL.
 */
void fsync_pool_delete(struct fsync_pool **pp);

#endif
