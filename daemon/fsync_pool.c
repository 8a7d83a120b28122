/* SPDX-License-Identifier: BSD-3-Clause */
/* fsync_pool.c -- run blocking tasks on pool threads, hand completions back to their loop */
#include "fsync_pool.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* pool_main -- a pool thread: take tasks in order until stopped and the queue is empty */
static void *pool_main(void *arg)
{
	struct fsync_pool *p = arg;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->head && !p->stopping)
			pthread_cond_wait(&p->cond, &p->lock);
		struct fsync_task *t = p->head;
		if (!t)
			break; /* stopping, nothing left */
		p->head = t->next;
		if (!p->head)
			p->tail = NULL;
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
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int fsync_pool_new(const char *name, unsigned nthreads, struct fsync_pool **out)
{
	if (!name || nthreads == 0 || !out)
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
	pthread_mutex_lock(&p->lock);
	if (p->tail)
		p->tail->next = t;
	else
		p->head = t;
	p->tail = t;
	pthread_cond_signal(&p->cond);
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
