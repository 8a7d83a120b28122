/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fsync_pool.c -- the pools' fairness, structurally: a quick task runs
 * while every slow one is blocked, however many are queued; slow tasks never
 * take the threads kept for quick ones; each queue keeps its order. The
 * control (fault meta_no_lanes, the old single queue) shows the quick task
 * stuck behind the slow ones. No timing is asserted: a check waits for an
 * event that either happens or cannot (the slow tasks hold a closed gate).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "faults.h"
#include "fsync_pool.h"

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
	unsigned slow_running, slow_max_seen, slow_done;
	unsigned quick_done;
	unsigned order[16], norder;
};

static struct gate G = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

struct task {
	struct fsync_task t;
	unsigned id;
};

/* slow_run -- count itself running, wait for the gate */
static void slow_run(struct fsync_task *t)
{
	pthread_mutex_lock(&G.lock);
	G.slow_running++;
	if (G.slow_running > G.slow_max_seen)
		G.slow_max_seen = G.slow_running;
	pthread_cond_broadcast(&G.cond);
	while (!G.open)
		pthread_cond_wait(&G.cond, &G.lock);
	G.slow_running--;
	G.slow_done++;
	pthread_cond_broadcast(&G.cond);
	pthread_mutex_unlock(&G.lock);
}

/* quick_run -- record the order, count */
static void quick_run(struct fsync_task *t)
{
	pthread_mutex_lock(&G.lock);
	G.order[G.norder++] = ((struct task *)t)->id;
	G.quick_done++;
	pthread_cond_broadcast(&G.cond);
	pthread_mutex_unlock(&G.lock);
}

/* wait_for -- until *@counter >= @n, or @secs pass (then false) */
static bool wait_for(unsigned *counter, unsigned n, int secs)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	pthread_mutex_lock(&G.lock);
	int ret = 0;
	while (*counter < n && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&G.cond, &G.lock, &until);
	bool ok = *counter >= n;
	pthread_mutex_unlock(&G.lock);
	return ok;
}

static void gate_reset(void)
{
	pthread_mutex_lock(&G.lock);
	G.open = false;
	G.slow_running = G.slow_max_seen = G.slow_done = G.quick_done = G.norder = 0;
	pthread_mutex_unlock(&G.lock);
}

static void gate_open(void)
{
	pthread_mutex_lock(&G.lock);
	G.open = true;
	pthread_cond_broadcast(&G.cond);
	pthread_mutex_unlock(&G.lock);
}

/*
 * run_case -- a pool of 3 threads (1 kept for quick tasks), 8 slow tasks
 * that hold a closed gate, then 4 quick ones: how many quick ones ran
 * while the gate was closed (within 10 s, or 1 s when none is expected)
 */
static unsigned run_case(bool lanes_off)
{
	gate_reset();
	rdax_faults.meta_no_lanes = lanes_off;
	struct fsync_pool *p;
	assert_int_equal(fsync_pool_new("test", 3, 1, &p), 0);
	static struct task slow[8], quick[4];
	for (unsigned i = 0; i < 8; i++) {
		slow[i] = (struct task){.t = {.run = slow_run}, .id = i};
		fsync_pool_submit(p, &slow[i].t);
	}
	/* the slow ones have taken what they may take */
	assert_true(wait_for(&G.slow_running, lanes_off ? 3 : 2, 10));
	for (unsigned i = 0; i < 4; i++) {
		quick[i] = (struct task){.t = {.run = quick_run, .quick = true}, .id = 100 + i};
		fsync_pool_submit(p, &quick[i].t);
	}
	wait_for(&G.quick_done, 4, lanes_off ? 1 : 10);
	pthread_mutex_lock(&G.lock);
	unsigned ran = G.quick_done, max_seen = G.slow_max_seen;
	pthread_mutex_unlock(&G.lock);
	gate_open();
	assert_true(wait_for(&G.slow_done, 8, 30));
	assert_true(wait_for(&G.quick_done, 4, 30));
	fsync_pool_delete(&p);
	rdax_faults.meta_no_lanes = false;
	print_message("%s: %u of 4 quick tasks ran while 8 slow ones held the gate; at most %u "
		      "slow ones ran at once\n",
		      lanes_off ? "one queue (control)" : "lanes", ran, max_seen);
	if (!lanes_off) {
		assert_int_equal(max_seen, 2); /* the third thread is the quick ones' */
		for (unsigned i = 0; i < 4; i++)
			assert_int_equal(G.order[i], 100 + i); /* in order */
	}
	return ran;
}

static void fsync_pool__quick_tasks_pass_blocked_slow_ones(void **state)
{
	assert_int_equal(run_case(false), 4);
}

static void fsync_pool__control_one_queue(void **state)
{
	assert_int_equal(run_case(true), 0);
}

static void fsync_pool_new__bad_arguments(void **state)
{
	struct fsync_pool *p = NULL;
	assert_int_equal(fsync_pool_new("x", 2, 2, &p), -EINVAL);
	assert_int_equal(fsync_pool_new("x", 0, 0, &p), -EINVAL);
	assert_null(p);
	/* no thread kept: every one takes slow tasks (the fsync pool) */
	gate_reset();
	assert_int_equal(fsync_pool_new("x", 2, 0, &p), 0);
	static struct task slow[2];
	for (unsigned i = 0; i < 2; i++) {
		slow[i] = (struct task){.t = {.run = slow_run}, .id = i};
		fsync_pool_submit(p, &slow[i].t);
	}
	assert_true(wait_for(&G.slow_running, 2, 10));
	gate_open();
	assert_true(wait_for(&G.slow_done, 2, 30));
	fsync_pool_delete(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(fsync_pool__quick_tasks_pass_blocked_slow_ones),
	    cmocka_unit_test(fsync_pool__control_one_queue),
	    cmocka_unit_test(fsync_pool_new__bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
