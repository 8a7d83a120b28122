/* SPDX-License-Identifier: BSD-3-Clause */
/* conn.c -- connection sets, the flush and dead lists, the end of a connection, the drain */
#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "faults.h"
#include "log.h"

/* ---- one connection ---- */

void conn_init(struct conn *c, struct conn_set *set, const struct conn_ops *ops, const char *peer)
{
	c->ops = ops;
	c->set = set;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
}

/* conn_started -- the start message (worker thread) */
static void conn_started(struct worker *w, struct worker_msg *m)
{
	struct conn *c = (struct conn *)((char *)m - offsetof(struct conn, start_msg));
	c->ops->start(c);
}

void conn_post_start(struct conn *c)
{
	c->start_msg.fn = conn_started;
	worker_post(c->set->worker, &c->start_msg);
}

void conn_link(struct conn *c)
{
	struct conn_set *set = c->set;
	c->next = set->conns;
	if (set->conns)
		set->conns->prev = c;
	set->conns = c;
	c->linked = true;
	set->nconns++;
	set->accepted++;
	if (set->cutting)
		conn_fail(c, "power cut");
	else if (set->draining)
		conn_close(c, "shutting down");
}

void conn_close(struct conn *c, const char *why)
{
	c->closing = true;
	if (!c->why)
		c->why = why;
}

void conn_fail(struct conn *c, const char *why)
{
	if (c->dead)
		return;
	c->dead = true;
	if (!c->why)
		c->why = why;
	c->ops->drop(c);
	conn_flush_add(c); /* the end check runs before the loop sleeps */
}

/* conn_bury -- @c is finished: free it before the loop sleeps */
static void conn_bury(struct conn *c)
{
	if (c->in_dead)
		return;
	c->in_dead = true;
	c->dead_next = c->set->dead;
	c->set->dead = c;
}

void conn_check_end(struct conn *c)
{
	if (c->in_dead)
		return;
	if (c->tearing_down) {
		if (c->jobs == 0)
			conn_bury(c);
		return;
	}
	bool input_over = c->closing || c->dead || c->ops->input_done(c);
	if (!input_over || c->jobs > 0)
		return;
	if (!c->dead && c->ops->output_pending(c))
		return;
	if (c->ops->end(c))
		c->tearing_down = true;
	else
		conn_bury(c);
}

void conn_kick(struct conn *c)
{
	if (c->in_dead)
		return;
	if (!c->tearing_down)
		c->ops->progress(c);
	conn_check_end(c);
}

/* conn_free -- unlink and free (the set's hook: nothing refers to c any more) */
static void conn_free(struct conn *c)
{
	struct conn_set *set = c->set;
	if (c->in_flush) {
		struct conn **pp = &set->flush;
		while (*pp && *pp != c)
			pp = &(*pp)->flush_next;
		if (*pp)
			*pp = c->flush_next;
	}
	if (c->linked) {
		if (c->prev)
			c->prev->next = c->next;
		else
			set->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		set->nconns--;
		set->closed++;
	}
	c->ops->free(c);
}

/* ---- the set of one worker ---- */

/* set_report_idle -- a drain emptied the set: tell whoever waits */
static void set_report_idle(struct conn_set *set)
{
	struct conn_sets *g = set->group;
	set->idle_reported = true;
	ev_timer_stop(set->worker->loop, &set->drain_timer);
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->idle++;
	pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* set_before_sleep -- worker hook: send queued output, free finished connections */
static void set_before_sleep(struct worker *w, void *arg)
{
	struct conn_set *set = arg;
	for (int round = 0; set->flush && round < CONN_FLUSH_ROUNDS; round++) {
		struct conn *c = set->flush;
		set->flush = NULL;
		while (c) {
			struct conn *next = c->flush_next;
			c->in_flush = false;
			c->flush_next = NULL;
			/*
			 * freed output may unblock input, which may queue more (next
			 * round); a failed connection's dropped output may unblock a
			 * parked job: a kick either way
			 */
			if (!c->in_dead) {
				if (c->ops->flush(c) || c->dead)
					conn_kick(c);
				else
					conn_check_end(c);
			}
			c = next;
		}
	}
	/* still more to send: poll without sleeping and come back */
	if (set->flush)
		ev_idle_start(w->loop, &set->more);

	while (set->dead) {
		struct conn *c = set->dead;
		set->dead = c->dead_next;
		conn_free(c);
	}
	if (set->draining && set->nconns == 0 && !set->idle_reported)
		set_report_idle(set);
}

/* set_more -- the idle watcher: nothing to do but let the prepare hook run again */
static void set_more(struct ev_loop *loop, ev_idle *w, int revents)
{
	ev_idle_stop(loop, w);
}

/* set_drain_timeout -- connections whose output did not leave in time lose it */
static void set_drain_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct conn_set *set = t->data;
	unsigned dropped = 0;
	set->drain_timeouts++;
	for (struct conn *c = set->conns; c; c = c->next) {
		if (c->in_dead || c->tearing_down)
			continue;
		if (!c->dead && c->ops->output_pending(c)) {
			LOG_WARN("%s: replies not taken %.1f s into the shutdown; dropping them",
				 c->peer,
				 set->group ? set->group->drain_timeout : CONN_DRAIN_TIMEOUT);
			dropped++;
		}
		conn_fail(c, "shutdown timeout");
		conn_check_end(c);
	}
	LOG_INFO("worker %u: drain timeout: %u connection(s) lost their replies", set->worker->id,
		 dropped);
}

/* set_drain -- the drain message (worker thread): every connection of every transport */
static void set_drain(struct worker *w, struct worker_msg *m)
{
	struct conn_set *set =
	    (struct conn_set *)((char *)m - offsetof(struct conn_set, drain_msg));
	set->draining = true;
	ev_timer_set(&set->drain_timer, set->group ? set->group->drain_timeout : CONN_DRAIN_TIMEOUT,
		     0.);
	ev_timer_start(w->loop, &set->drain_timer);
	LOG_INFO("worker %u: drain started, %u connection(s)", w->id, set->nconns);
	for (struct conn *c = set->conns; c; c = c->next) {
		if (c->in_dead || c->tearing_down)
			continue;
		conn_close(c, "shutting down");
		conn_flush_add(c); /* so the hook looks at it even with nothing to send */
		conn_kick(c);
	}
	/* no connection at all: the hook reports the set idle before the loop sleeps */
}

/* set_cut -- the cut message (worker thread): every connection fails now */
static void set_cut(struct worker *w, struct worker_msg *m)
{
	struct conn_set *set = (struct conn_set *)((char *)m - offsetof(struct conn_set, cut_msg));
	unsigned n = 0;
	set->draining = true;
	set->cutting = true;
	for (struct conn *c = set->conns; c; c = c->next) {
		if (c->in_dead || c->tearing_down)
			continue;
		conn_fail(c, "power cut");
		conn_check_end(c);
		n++;
	}
	LOG_INFO("worker %u: power cut: %u connection(s) dropped", w->id, n);
	/* no connection at all: the hook reports the set idle before the loop sleeps */
}

/* set_resume -- the resume message (worker thread): the set serves again after a cut */
static void set_resume(struct worker *w, struct worker_msg *m)
{
	struct conn_set *set =
	    (struct conn_set *)((char *)m - offsetof(struct conn_set, resume_msg));
	set->draining = false;
	set->cutting = false;
	set->idle_reported = false;
}

/* set_new -- the set of @w; 0, -ENOMEM, -ENOSPC */
static int set_new(struct worker *w, struct conn_sets *g, struct conn_set **out)
{
	struct conn_set *set = calloc(1, sizeof(*set));
	if (!set)
		return -ENOMEM;
	set->worker = w;
	set->group = g;
	set->drain_msg.fn = set_drain;
	set->cut_msg.fn = set_cut;
	set->resume_msg.fn = set_resume;
	ev_idle_init(&set->more, set_more);
	ev_timer_init(&set->drain_timer, set_drain_timeout, CONN_DRAIN_TIMEOUT, 0.);
	set->drain_timer.data = set;
	int ret = worker_hook_add(w, set_before_sleep, set);
	if (ret) {
		free(set);
		return ret;
	}
	*out = set;
	return 0;
}

/* ---- every worker's set ---- */

int conn_sets_new(struct worker **workers, unsigned nworkers, struct conn_sets **out)
{
	if (!workers || nworkers == 0 || !out)
		return -EINVAL;
	struct conn_sets *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->sets = calloc(nworkers, sizeof(*g->sets));
	if (!g->sets) {
		free(g);
		return -ENOMEM;
	}
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	g->drain_timeout = CONN_DRAIN_TIMEOUT;
	for (; g->nsets < nworkers; g->nsets++) {
		int ret = set_new(workers[g->nsets], g, &g->sets[g->nsets]);
		if (ret == 0)
			g->sets[g->nsets]->index = g->nsets;
		if (ret) {
			conn_sets_delete(&g);
			return ret;
		}
	}
	*out = g;
	return 0;
}

struct conn_set *conn_sets_next(struct conn_sets *g)
{
	struct conn_set *set = g->sets[g->next];
	g->next = (g->next + 1) % g->nsets;
	return set;
}

/* sets_wait_idle -- until @n sets have reported idle after their drain or cut */
static void sets_wait_idle(struct conn_sets *g, unsigned n)
{
	pthread_mutex_lock(&g->lock);
	while (g->idle < n)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

void conn_sets_drain_wait(struct conn_sets *g)
{
	uint64_t accepted = 0;
	for (unsigned i = 0; i < g->nsets; i++)
		accepted += __atomic_load_n(&g->sets[i]->accepted, __ATOMIC_RELAXED);
	LOG_INFO("draining the connections of every transport (%u workers, %llu accepted in all)",
		 g->nsets, (unsigned long long)accepted);
	/*
	 * every set at once, then one wait; the control drain_one_by_one waits
	 * for each set before the next is told (one drain timeout per worker,
	 * as the transports were drained one after another before)
	 */
	bool one_by_one = rdax_faults.drain_one_by_one;
	for (unsigned i = 0; i < g->nsets; i++) {
		worker_post(g->sets[i]->worker, &g->sets[i]->drain_msg);
		if (one_by_one)
			sets_wait_idle(g, i + 1);
	}
	sets_wait_idle(g, g->nsets);
	LOG_INFO("every connection closed");
}

void conn_sets_cut_wait(struct conn_sets *g)
{
	for (unsigned i = 0; i < g->nsets; i++)
		worker_post(g->sets[i]->worker, &g->sets[i]->cut_msg);
	sets_wait_idle(g, g->nsets);
	LOG_INFO("power cut: every connection is gone");
}

void conn_sets_resume(struct conn_sets *g)
{
	pthread_mutex_lock(&g->lock);
	g->idle = 0;
	pthread_mutex_unlock(&g->lock);
	for (unsigned i = 0; i < g->nsets; i++)
		worker_post(g->sets[i]->worker, &g->sets[i]->resume_msg);
}

void conn_sets_delete(struct conn_sets **gp)
{
	if (!gp || !*gp)
		return;
	struct conn_sets *g = *gp;
	for (unsigned i = 0; i < g->nsets; i++) {
		struct conn_set *set = g->sets[i];
		if (set->nconns)
			LOG_ERROR("worker %u: freeing a connection set with %u connections",
				  set->worker->id, set->nconns);
		free(set);
	}
	free(g->sets);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
	free(g);
	*gp = NULL;
}
