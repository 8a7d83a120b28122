/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * spin_window.h -- adaptive polling: how long to spin on a completion queue before sleeping
 *
 * An RDMA peer that sleeps on its completion channel is woken per message:
 * a system call and a scheduler wake-up, which is most of a small request's
 * round trip (docs/rdma.md, "Sleeping or spinning"). Spinning on the CQ
 * saves that, at the price of a CPU. Both sides of rdax (rdaxd's
 * connection loops, librdax's waiting calls) spin for a bounded window
 * after activity and then sleep, and the window follows what the peer
 * does:
 *
 *   gap      time from the moment a side would go to sleep (it has nothing
 *            left to do) to the next completion, whether it came while
 *            spinning or woke it from sleep;
 *   expected follows the longest recent gaps: a longer gap is taken at
 *            once, a shorter one pulls it down by 1/8 of the difference.
 *            A peer's gaps alternate: between a request's two messages, or
 *            a reply and its send completion, a few microseconds; between
 *            a reply and the next request, a round trip. An average would
 *            sit between the two and the window end just before the
 *            request that spinning is for. A gap counts at most 4 x cap,
 *            so a long idle period is forgotten after about eight quick
 *            gaps;
 *   window   2 x expected, at most cap; 0 (sleep at once) while expected
 *            exceeds cap: spinning would only burn the CPU before the sleep;
 *   probe    but while sleeping, a gap now and then spins the whole cap
 *            once: the first gap after falling asleep, then after 2, 4, 8
 *            and at most SPIN_WINDOW_PROBE_EVERY gaps. A gap that ends in
 *            a sleep includes the wake-up, so a peer whose round trip fits
 *            the cap but whose round trip plus a wake-up does not would
 *            otherwise sleep for good once one stall put it to sleep (in
 *            the emulated VM a wake-up alone is ~150 us: a run stuck there
 *            took a write+fsync from 1.2x to 3.3x perftest's; probing
 *            every 16th gap only, stalls kept it asleep half the time). A
 *            probe the activity ends sets expected to its gap at once, and
 *            spinning resumes.
 *
 * So a connection in a request/reply rhythm spins through its round trips
 * as perftest does, and an idle or slow one sleeps at once; the cost is at
 * most cap of CPU per gap, and for a peer whose gaps exceed cap one cap
 * per SPIN_WINDOW_PROBE_EVERY gaps once the probes have backed off. cap 0
 * turns spinning off.
 *
 * Thread safety: none; one spin_window belongs to one connection, used by
 * the thread that polls that connection.
 */
#ifndef RDAX_SPIN_WINDOW_H
#define RDAX_SPIN_WINDOW_H

#include <stdint.h>

/*
 * The default cap of both sides (rdaxd --rdma-busy-poll, librdax's
 * rdax_conn_opts_set_busy_poll): a wake-up from the completion channel
 * costs 5-20 us on a real host and ~150 us in the project's emulated VM
 * (docs/rdma.md); waits longer than 200 us lose little by sleeping.
 */
#define SPIN_WINDOW_DEFAULT_CAP_US 200U

/*
 * The default of both sides is "auto" (wake_cost.h): a cap of
 * SPIN_WINDOW_WAKES_PER_CAP wake-ups as measured on this host, within
 * [SPIN_WINDOW_DEFAULT_CAP_US, SPIN_WINDOW_AUTO_CAP_MAX_US]. On a real host
 * that is the 200 us floor; in the emulated VM ~1.5 ms, which a round trip
 * with one side asleep fits, so a probe of either side can bring a
 * connection whose sides both sleep back to spinning.
 */
#define SPIN_WINDOW_CAP_AUTO	    0xffffffffU
#define SPIN_WINDOW_WAKES_PER_CAP   10U
#define SPIN_WINDOW_AUTO_CAP_MAX_US 5000U

/* spin_window_auto_cap -- the "auto" cap for a wake-up of @wake_us (0: unknown, the default cap) */
unsigned spin_window_auto_cap(unsigned wake_us);

/* while sleeping, at least one gap in this many spins the whole cap (above: probe) */
#define SPIN_WINDOW_PROBE_EVERY 16U

struct spin_window {
	unsigned cap_us;      /* 0: never spin */
	int64_t expected_us;  /* recent gaps (above); 0: nothing learnt, the first wait spins */
	int64_t idle_from_us; /* when the current gap began; 0: none open */
	unsigned sleeps;      /* gaps slept through at once since the last probe */
	unsigned probe_after; /* ... and how many before the next: 1, 2, 4 .. PROBE_EVERY */
	int probing;	      /* the open gap spins the whole cap as a probe */
};

/* spin_window_init -- a window of at most @cap_us microseconds (0: never spin) */
void spin_window_init(struct spin_window *sw, unsigned cap_us);

/*
 * spin_window_idle -- the caller has nothing left to do at @now_us and is
 * about to spin or sleep: a gap opens (an open one is kept). Returns how
 * many microseconds to spin from now before sleeping (0: sleep at once).
 */
unsigned spin_window_idle(struct spin_window *sw, int64_t now_us);

/*
 * spin_window_activity -- a completion (or input) arrived at @now_us: the
 * open gap, if any, closes and is averaged in. Idempotent while no new gap
 * opens.
 */
void spin_window_activity(struct spin_window *sw, int64_t now_us);

/* spin_window_expected -- the gap expected now, in microseconds (tests, logs) */
int64_t spin_window_expected(const struct spin_window *sw);

#endif
