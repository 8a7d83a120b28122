/* SPDX-License-Identifier: BSD-3-Clause */
/* wake_cost.c -- a thread's wake-up through an eventfd, timed once per process */
#include "wake_cost.h"

#include "spin_window.h"

#include <poll.h>
#include <pthread.h>
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

/* wait_and_take -- sleep in poll() until efd is readable (no spinning: the sleep is measured) */
static int wait_and_take(int efd)
{
	struct pollfd p = {.fd = efd, .events = POLLIN};
	for (;;) {
		int n = poll(&p, 1, 5000);
		if (n == 1) {
			uint64_t v;
			return read(efd, &v, sizeof(v)) == sizeof(v) ? 0 : -1;
		}
		if (n == 0)
			return -1; /* 5 s: the peer is gone; do not hang the caller */
	}
}

static int give(int efd)
{
	uint64_t one = 1;
	return write(efd, &one, sizeof(one)) == sizeof(one) ? 0 : -1;
}

/* peer -- answer every ping; stops after WAKE_COST_ROUNDS or a failure */
static void *peer(void *arg)
{
	struct ping_pong *pp = arg;
	for (int i = 0; i < WAKE_COST_ROUNDS; i++)
		if (wait_and_take(pp->to_peer) || give(pp->from_peer))
			break;
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* measure -- the median round trip over 2: one wake-up; 0 on failure */
static unsigned measure(void)
{
	struct ping_pong pp = {eventfd(0, EFD_CLOEXEC), eventfd(0, EFD_CLOEXEC)};
	unsigned us = 0;
	pthread_t t;
	if (pp.to_peer < 0 || pp.from_peer < 0 || pthread_create(&t, NULL, peer, &pp))
		goto out;
	int64_t rtt[WAKE_COST_ROUNDS];
	int n = 0;
	for (; n < WAKE_COST_ROUNDS; n++) {
		int64_t t0 = mono_ns();
		if (give(pp.to_peer) || wait_and_take(pp.from_peer))
			break;
		rtt[n] = mono_ns() - t0;
	}
	if (n < WAKE_COST_ROUNDS)
		give(pp.to_peer); /* unblock a peer still waiting (it gives up after 5 s anyway) */
	pthread_join(t, NULL);
	if (n == WAKE_COST_ROUNDS) {
		qsort(rtt, (size_t)n, sizeof(rtt[0]), by_value);
		int64_t one_way = rtt[n / 2] / 2000; /* ns round trip -> us one way */
		us = one_way < 1 ? 1 : one_way > 1000000 ? 1000000 : (unsigned)one_way;
	}
out:
	if (pp.to_peer >= 0)
		close(pp.to_peer);
	if (pp.from_peer >= 0)
		close(pp.from_peer);
	return us;
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
