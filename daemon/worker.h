/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker.h -- a thread running its own libev loop
 *
 * Every connection belongs to exactly one worker and is touched only on
 * that worker's thread. Other threads hand work to a worker with
 * worker_post(): the message goes on a locked queue and an ev_async wakes
 * the loop, which runs the message's function on the worker thread. The
 * message is embedded in the poster's object (intrusive), so posting never
 * allocates and never fails.
 *
 * Before the loop sleeps it runs the registered hooks (an ev_prepare):
 * transports flush queued replies and free closed connections there, so a
 * burst of requests read in one go is answered with one write.
 *
 * Thread safety: worker_post() from any thread; worker_hook_add() before
 * worker_start(); worker_stop() from any thread except the worker's own.
 */
#ifndef RDAXD_WORKER_H
#define RDAXD_WORKER_H

#include <pthread.h>
#include <stdbool.h>

#include <ev.h>

struct worker;

struct worker_msg {
	struct worker_msg *next;
	void (*fn)(struct worker *w, struct worker_msg *m); /* runs on the worker's thread */
};

#define WORKER_MAX_HOOKS 4

struct worker_hook {
	void (*fn)(struct worker *w, void *arg);
	void *arg;
};

struct worker {
	unsigned id;
	struct ev_loop *loop;
	pthread_t thread;
	bool started;
	ev_async wake;
	ev_prepare prepare;
	pthread_mutex_t lock; /* the message queue */
	struct worker_msg *head, *tail;
	struct worker_msg stop_msg;
	struct worker_hook hooks[WORKER_MAX_HOOKS];
	unsigned nhooks;
};

/* worker_new -- a worker with its loop, not yet running; 0, -ENOMEM */
int worker_new(unsigned id, struct worker **out);

/* worker_hook_add -- run @fn(w, @arg) on the worker thread before every sleep; 0 or -ENOSPC */
int worker_hook_add(struct worker *w, void (*fn)(struct worker *w, void *arg), void *arg);

/*
 * worker_start -- start the thread (all signals blocked in it: the main
 * thread handles them). Returns 0 or -errno.
 */
int worker_start(struct worker *w);

/* worker_post -- run @m->fn on @w's thread soon. Context: any thread; never blocks for long. */
void worker_post(struct worker *w, struct worker_msg *m);

/*
 * worker_stop -- let the loop finish the messages already posted, end it
 * and join the thread. Whatever still has watchers on the loop is the
 * caller's business (stop transports first). Safe on a worker never started.
 */
void worker_stop(struct worker *w);

/* worker_delete -- free a stopped worker; accepts NULL, sets *wp = NULL */
void worker_delete(struct worker **wp);

#endif
