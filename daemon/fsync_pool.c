/* SPDX-License-Identifier: BSD-3-Clause */
/* fsync_pool.c -- run blocking tasks on pool threads, hand completions back to their loop */
#include "fsync_pool.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"
#include "log.h"

/*
 * __take -- the next task this thread may run: a quick one first, else a
 * slow one while fewer than slow_max run; NULL if none may. Needs p->lock.
 */
static struct fsync_task *__take(struct fsync_pool *p)
{
	struct fsync_task *t = p->quick_head;
	if (t) {
		p->quick_head = t->next;
		if (!p->quick_head)
			p->quick_tail = NULL;
		return t;
	}
	t = p->head;
	if (!t || p->slow_running >= p->slow_max)
		return NULL;
	p->head = t->next;
	if (!p->head)
		p->tail = NULL;
	p->slow_running++;
	return t;
}

/* pool_main -- a pool thread: take tasks until stopped and both queues are empty */
static void *pool_main(void *arg)
{
	struct fsync_pool *p = arg;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct fsync_task *t;
		while (!(t = __take(p)) && !(p->stopping && !p->head && !p->quick_head))
			pthread_cond_wait(&p->cond, &p->lock);
		if (!t)
			break; /* stopping, nothing left */
		bool slow = !t->quick;
		pthread_mutex_unlock(&p->lock);

		t->next = NULL;
		/* read first: a task without an owner may be done with (freed) once it ran */
		struct worker *owner = t->owner;
		t->run(t);
		/* after this, t belongs to its owner's loop again */
		if (owner)
			worker_post(owner, &t->done);

		pthread_mutex_lock(&p->lock);
		p->done++;
		if (slow) {
			p->slow_running--;
			pthread_cond_signal(&p->cond); /* a slow task may wait for this slot */
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int fsync_pool_new(const char *name, unsigned nthreads, unsigned quick_threads,
		   struct fsync_pool **out)
{
	if (!name || nthreads == 0 || quick_threads >= nthreads || !out)
		return -EINVAL;
	struct fsync_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->threads = calloc(nthreads, sizeof(*p->threads));
	if (!p->threads) {
		free(p);
		return -ENOMEM;
	}
	p->name = name;
	/* the fault meta_no_lanes: every thread takes slow tasks, as before */
	p->slow_max = rdax_faults.meta_no_lanes ? nthreads : nthreads - quick_threads;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);

	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int ret = 0;
	for (; p->nthreads < nthreads; p->nthreads++) {
		ret = pthread_create(&p->threads[p->nthreads], NULL, pool_main, p);
		if (ret) {
			LOG_ERROR("%s pool: pthread_create (thread %u of %u) failed: %s", name,
				  p->nthreads + 1, nthreads, strerror(ret));
			break;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		fsync_pool_delete(&p);
		return -ret;
	}
	LOG_DEBUG("%s pool: %u threads", name, nthreads);
	*out = p;
	return 0;
}

void fsync_pool_submit(struct fsync_pool *p, struct fsync_task *t)
{
	t->next = NULL;
	if (rdax_faults.meta_no_lanes)
		t->quick = false; /* one queue, in order: the old pool */
	pthread_mutex_lock(&p->lock);
	struct fsync_task **head = t->quick ? &p->quick_head : &p->head;
	struct fsync_task **tail = t->quick ? &p->quick_tail : &p->tail;
	if (*tail)
		(*tail)->next = t;
	else
		*head = t;
	*tail = t;
	/* every waiter: the one woken must be a thread that may take it */
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void fsync_pool_delete(struct fsync_pool **pp)
{
	if (!pp || !*pp)
		return;
	struct fsync_pool *p = *pp;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	LOG_DEBUG("%s pool stopped after %lu tasks", p->name, p->done);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
	*pp = NULL;
}
