/* SPDX-License-Identifier: BSD-3-Clause */
/* powercut.c -- the gate, the trigger and the cut itself (powercut.h) */
#include "powercut.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "incarnation.h"
#include "log.h"
#include "rdma_listen.h"

/*
 * The gate: acknowledgements left before the cut.
 *
 *   GATE_OPEN   no cut armed by count: every acknowledgement passes, with
 *               one load and no write (the common case)
 *   N > 0       an --after cut armed: N more may pass, the Nth closes it
 *   0           closed: a cut is decided; nothing passes until it is done
 */
#define GATE_OPEN INT64_MAX
static _Atomic int64_t gate = GATE_OPEN;

static struct {
	bool allowed;
	struct powercut_parts parts;
	ev_async wake;	/* a worker armed a cut, or its count reached 0 */
	ev_timer delay; /* --delay */
	pthread_mutex_t lock;
	bool armed;	       /* under lock: armed or cutting, until the cut is done */
	uint32_t delay_wanted; /* under lock: ms for the main loop's timer, 0: none */
	bool failed;	       /* main thread */
	_Atomic uint64_t cuts;
} pc = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool powercut_ack_take(void)
{
	int64_t cur = atomic_load_explicit(&gate, memory_order_acquire);
	for (;;) {
		if (cur == GATE_OPEN)
			return true;
		if (cur <= 0)
			return false;
		if (atomic_compare_exchange_weak_explicit(
			&gate, &cur, cur - 1, memory_order_acq_rel, memory_order_acquire))
			break;
	}
	if (cur == 1) /* this was the Nth: it passes, and the cut follows it */
		ev_async_send(pc.parts.loop, &pc.wake);
	return true;
}

bool powercut_pending(void)
{
	return atomic_load_explicit(&gate, memory_order_acquire) == 0;
}

bool powercut_allowed(void)
{
	return pc.allowed;
}

bool powercut_failed(void)
{
	return pc.failed;
}

uint64_t powercut_count(void)
{
	return atomic_load(&pc.cuts);
}

int powercut_arm(uint64_t after, uint32_t delay_ms, uint64_t *incarnation, char *why, size_t whylen)
{
	if (!pc.allowed) {
		rdax_seterr(why, whylen,
			    "power cuts are not allowed: start rdaxd with --allow-powercut (every "
			    "namespace in sim mode)");
		return -EPERM;
	}
	if (delay_ms > POWERCUT_MAX_DELAY_MS) {
		rdax_seterr(why, whylen, "delay of %" PRIu32 " ms exceeds the longest, %u ms",
			    delay_ms, POWERCUT_MAX_DELAY_MS);
		return -EINVAL;
	}
	pthread_mutex_lock(&pc.lock);
	if (pc.armed) {
		pthread_mutex_unlock(&pc.lock);
		rdax_seterr(why, whylen, "a power cut is already armed");
		return -EBUSY;
	}
	pc.armed = true;
	if (incarnation)
		*incarnation = incarnation_get();
	if (after == 0 && delay_ms == 0) {
		atomic_store_explicit(&gate, 0, memory_order_release);
	} else {
		if (after)
			atomic_store_explicit(
			    &gate, after > (uint64_t)GATE_OPEN - 1 ? GATE_OPEN - 1 : (int64_t)after,
			    memory_order_release);
		pc.delay_wanted = delay_ms;
	}
	pthread_mutex_unlock(&pc.lock);
	if (after == 0 && delay_ms == 0)
		LOG_INFO("power cut armed: now");
	else if (delay_ms == 0)
		LOG_INFO("power cut armed: after %" PRIu64 " acknowledged requests", after);
	else if (after == 0)
		LOG_INFO("power cut armed: in %.3f s", delay_ms / 1000.0);
	else
		LOG_INFO("power cut armed: after %" PRIu64 " acknowledged requests or in %.3f s",
			 after, delay_ms / 1000.0);
	ev_async_send(pc.parts.loop, &pc.wake);
	return 0;
}

/* cut_fail -- the namespaces did not come back: the daemon stops, the gate stays closed */
static void cut_fail(const char *why)
{
	LOG_ERROR("power cut: %s; rdaxd stops", why);
	pc.failed = true;
	ev_break(pc.parts.loop, EVBREAK_ALL);
}

/* cut -- the power cut itself (powercut.h, steps 2 to 4), on the main thread; the gate is closed */
static void cut(void)
{
	const struct powercut_parts *p = &pc.parts;
	char err[512];
	uint64_t old = incarnation_get();
	ev_timer_stop(p->loop, &pc.delay);
	LOG_WARN("power cut: incarnation %016" PRIx64 " ends: every connection is dropped, "
		 "everything not written back is lost",
		 old);
	conn_sets_cut_wait(p->sets);
	if (p->rdma)
		server_rdma_ns_release(p->rdma);
	int ret = store_power_cut(p->store, err, sizeof(err));
	if (ret) {
		cut_fail(err);
		return;
	}
	if (p->rdma && server_rdma_ns_register(p->rdma, err, sizeof(err))) {
		cut_fail(err);
		return;
	}
	uint64_t inc = incarnation_new();
	uint64_t n = atomic_fetch_add(&pc.cuts, 1) + 1;
	pthread_mutex_lock(&pc.lock);
	pc.armed = false;
	pc.delay_wanted = 0;
	atomic_store_explicit(&gate, GATE_OPEN, memory_order_release);
	pthread_mutex_unlock(&pc.lock);
	conn_sets_resume(p->sets);
	LOG_WARN("power cut %" PRIu64 " done: serving again as incarnation %016" PRIx64, n, inc);
	if (p->served)
		p->served(p->arg, inc, n);
}

/* on_wake -- a worker armed a cut or counted the last acknowledgement before one */
static void on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	pthread_mutex_lock(&pc.lock);
	bool now = pc.armed && powercut_pending();
	uint32_t delay_ms = pc.delay_wanted;
	pc.delay_wanted = 0;
	pthread_mutex_unlock(&pc.lock);
	if (now) {
		cut();
		return;
	}
	if (delay_ms) {
		ev_timer_set(&pc.delay, delay_ms / 1000.0, 0.);
		ev_timer_start(loop, &pc.delay);
	}
}

/* on_delay -- the --delay ran out: close the gate and cut */
static void on_delay(struct ev_loop *loop, ev_timer *t, int revents)
{
	atomic_store_explicit(&gate, 0, memory_order_release);
	cut();
}

int powercut_setup(const struct powercut_parts *parts)
{
	if (!parts || !parts->loop || !parts->store || !parts->sets || pc.allowed)
		return -EINVAL;
	pc.parts = *parts;
	ev_async_init(&pc.wake, on_wake);
	ev_async_start(parts->loop, &pc.wake);
	ev_timer_init(&pc.delay, on_delay, 0., 0.);
	pc.failed = false;
	pc.allowed = true;
	return 0;
}

void powercut_shutdown(void)
{
	if (!pc.allowed)
		return;
	ev_async_stop(pc.parts.loop, &pc.wake);
	ev_timer_stop(pc.parts.loop, &pc.delay);
	pc.allowed = false;
	pthread_mutex_lock(&pc.lock);
	pc.armed = false;
	pc.delay_wanted = 0;
	/* a stop with a cut armed and not reached: the drain acknowledges as usual */
	if (!pc.failed)
		atomic_store_explicit(&gate, GATE_OPEN, memory_order_release);
	pthread_mutex_unlock(&pc.lock);
}
