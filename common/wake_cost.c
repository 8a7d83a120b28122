/* SPDX-License-Identifier: BSD-3-Clause */
/* wake_cost.c -- a thread's wake-up through an eventfd, timed once per process */
#include "wake_cost.h"

#include "spin_window.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct ping_pong {
	int to_peer;   /* eventfd the measuring thread writes, the peer waits on */
	int from_peer; /* and the one back */
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* what an eventfd carries: a ping (or its answer), or the word to stop */
#define PING 1
#define STOP 2

/*
 * wait_and_take -- sleep in poll() until efd is readable (no spinning: the
 * sleep is measured); what was given, or 0 on a failure or after 5 s
 */
static uint64_t wait_and_take(int efd)
{
	struct pollfd p = {.fd = efd, .events = POLLIN};
	for (;;) {
		int n = poll(&p, 1, 5000);
		if (n < 0 && errno == EINTR)
			continue;
		uint64_t v;
		return n == 1 && read(efd, &v, sizeof(v)) == sizeof(v) ? v : 0;
	}
}

static int give(int efd, uint64_t what)
{
	return write(efd, &what, sizeof(what)) == sizeof(what) ? 0 : -1;
}

/* peer -- answer every ping; stops on STOP, after WAKE_COST_ROUNDS, or on a failure */
static void *peer(void *arg)
{
	struct ping_pong *pp = arg;
	for (int i = 0; i < WAKE_COST_ROUNDS; i++)
		if (wait_and_take(pp->to_peer) != PING || give(pp->from_peer, PING))
			break;
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/*
 * two_cpus -- the first two CPUs this process may run on, for the two
 * threads: a completion wakes a thread from another CPU, and two threads
 * left to the scheduler may share one (a cheaper switch, not a wake-up).
 * False if the process is held to a single CPU: then that is what its
 * wake-ups cost.
 */
static bool two_cpus(cpu_set_t *a, cpu_set_t *b)
{
	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return false;
	int first = -1;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &allowed))
			continue;
		if (first < 0) {
			first = cpu;
			continue;
		}
		CPU_ZERO(a);
		CPU_ZERO(b);
		CPU_SET(first, a);
		CPU_SET(cpu, b);
		return true;
	}
	return false;
}

struct measurer {
	struct ping_pong pp;
	unsigned us; /* the result; 0: failed */
};

/* measurer -- ping the peer WAKE_COST_ROUNDS times; the median round trip over 2 is one wake-up */
static void *measurer(void *arg)
{
	struct measurer *m = arg;
	int64_t rtt[WAKE_COST_ROUNDS];
	int n = 0;
	for (; n < WAKE_COST_ROUNDS; n++) {
		int64_t t0 = mono_ns();
		if (give(m->pp.to_peer, PING) || wait_and_take(m->pp.from_peer) != PING)
			break;
		rtt[n] = mono_ns() - t0;
	}
	if (n < WAKE_COST_ROUNDS) {
		give(m->pp.to_peer, STOP); /* a peer still waiting ends now */
		return NULL;
	}
	qsort(rtt, (size_t)n, sizeof(rtt[0]), by_value);
	int64_t one_way = rtt[n / 2] / 2000; /* ns round trip -> us one way */
	m->us = one_way < 1 ? 1 : one_way > 1000000 ? 1000000 : (unsigned)one_way;
	return NULL;
}

/*
 * measure -- one wake-up of this host in us, 0 on failure: two threads of
 * their own (the caller's thread and its CPU are left alone), on two CPUs
 * where the process may use two
 */
static unsigned measure(void)
{
	struct measurer m = {{eventfd(0, EFD_CLOEXEC), eventfd(0, EFD_CLOEXEC)}, 0};
	pthread_attr_t on_a, on_b;
	pthread_attr_init(&on_a);
	pthread_attr_init(&on_b);
	cpu_set_t a, b;
	if (two_cpus(&a, &b)) {
		pthread_attr_setaffinity_np(&on_a, sizeof(a), &a);
		pthread_attr_setaffinity_np(&on_b, sizeof(b), &b);
	}
	pthread_t tm, tp;
	if (m.pp.to_peer >= 0 && m.pp.from_peer >= 0 &&
	    pthread_create(&tp, &on_b, peer, &m.pp) == 0) {
		if (pthread_create(&tm, &on_a, measurer, &m) == 0)
			pthread_join(tm, NULL);
		else
			give(m.pp.to_peer, STOP); /* no measurer: the peer ends now */
		pthread_join(tp, NULL);
	}
	pthread_attr_destroy(&on_a);
	pthread_attr_destroy(&on_b);
	if (m.pp.to_peer >= 0)
		close(m.pp.to_peer);
	if (m.pp.from_peer >= 0)
		close(m.pp.from_peer);
	return m.us;
}

static pthread_once_t measured = PTHREAD_ONCE_INIT;
static unsigned wake_us;

static void measure_once(void)
{
	wake_us = measure();
}

unsigned wake_cost_us(void)
{
	pthread_once(&measured, measure_once);
	return wake_us;
}

unsigned busy_poll_cap(unsigned configured)
{
	return configured == SPIN_WINDOW_CAP_AUTO ? spin_window_auto_cap(wake_cost_us())
						  : configured;
}
