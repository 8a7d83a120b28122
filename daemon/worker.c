/* SPDX-License-Identifier: BSD-3-Clause */
/* worker.c -- one libev loop per thread; hand-over through ev_async + a locked queue */
#include "worker.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* worker_drain -- run every posted message (ev_async callback, worker thread) */
static void worker_drain(struct ev_loop *loop, ev_async *a, int revents)
{
	struct worker *w = a->data;
	for (;;) {
		pthread_mutex_lock(&w->lock);
		struct worker_msg *m = w->head;
		w->head = NULL;
		w->tail = NULL;
		pthread_mutex_unlock(&w->lock);
		if (!m)
			return;
		while (m) {
			/* fn may free or re-post m: read next first */
			struct worker_msg *next = m->next;
			m->next = NULL;
			m->fn(w, m);
			m = next;
		}
	}
}

/* worker_before_sleep -- the ev_prepare callback: run the hooks */
static void worker_before_sleep(struct ev_loop *loop, ev_prepare *p, int revents)
{
	struct worker *w = p->data;
	for (unsigned i = 0; i < w->nhooks; i++)
		w->hooks[i].fn(w, w->hooks[i].arg);
}

/* worker_stop_fn -- the stop message: leave ev_run */
static void worker_stop_fn(struct worker *w, struct worker_msg *m)
{
	ev_break(w->loop, EVBREAK_ALL);
}

int worker_new(unsigned id, struct worker **out)
{
	if (!out)
		return -EINVAL;
	struct worker *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->id = id;
	/* EVFLAG_NOSIGMASK: libev must not touch the signal mask, the main thread owns signals */
	w->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
	if (!w->loop) {
		free(w);
		return -ENOMEM;
	}
	pthread_mutex_init(&w->lock, NULL);
	ev_async_init(&w->wake, worker_drain);
	w->wake.data = w;
	ev_async_start(w->loop, &w->wake);
	ev_prepare_init(&w->prepare, worker_before_sleep);
	w->prepare.data = w;
	ev_prepare_start(w->loop, &w->prepare);
	/* the prepare watcher alone must not keep the loop alive */
	ev_unref(w->loop);
	w->stop_msg.fn = worker_stop_fn;
	ev_set_userdata(w->loop, w);
	*out = w;
	return 0;
}

int worker_hook_add(struct worker *w, void (*fn)(struct worker *w, void *arg), void *arg)
{
	if (!w || !fn || w->started)
		return -EINVAL;
	if (w->nhooks >= WORKER_MAX_HOOKS)
		return -ENOSPC;
	w->hooks[w->nhooks++] = (struct worker_hook){fn, arg};
	return 0;
}

/* worker_main -- the thread: run the loop until stopped */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	LOG_DEBUG("worker %u running", w->id);
	ev_run(w->loop, 0);
	LOG_DEBUG("worker %u stopped", w->id);
	return NULL;
}

int worker_start(struct worker *w)
{
	if (!w || w->started)
		return -EINVAL;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int ret = pthread_create(&w->thread, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		LOG_ERROR("worker %u: pthread_create failed: %s", w->id, strerror(ret));
		return -ret;
	}
	w->started = true;
	return 0;
}

void worker_post(struct worker *w, struct worker_msg *m)
{
	m->next = NULL;
	pthread_mutex_lock(&w->lock);
	if (w->tail)
		w->tail->next = m;
	else
		w->head = m;
	w->tail = m;
	pthread_mutex_unlock(&w->lock);
	ev_async_send(w->loop, &w->wake);
}

void worker_stop(struct worker *w)
{
	if (!w || !w->started)
		return;
	worker_post(w, &w->stop_msg);
	pthread_join(w->thread, NULL);
	w->started = false;
}

void worker_delete(struct worker **wp)
{
	if (!wp || !*wp)
		return;
	struct worker *w = *wp;
	worker_stop(w);
	ev_async_stop(w->loop, &w->wake);
	ev_ref(w->loop);
	ev_prepare_stop(w->loop, &w->prepare);
	ev_loop_destroy(w->loop);
	pthread_mutex_destroy(&w->lock);
	free(w);
	*wp = NULL;
}
