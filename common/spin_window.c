/* SPDX-License-Identifier: BSD-3-Clause */
/* spin_window.c -- adaptive polling window: spin twice the recent gaps, at most the cap */
#include "spin_window.h"

#include <stdbool.h>
#include <stddef.h>

void spin_window_init(struct spin_window *sw, unsigned cap_us)
{
	sw->cap_us = cap_us;
	sw->expected_us = 0;
	sw->idle_from_us = 0;
	sw->sleeps = 0;
	sw->probe_after = 1;
	sw->probing = 0;
}

unsigned spin_window_idle(struct spin_window *sw, int64_t now_us)
{
	if (!sw->cap_us)
		return 0;
	bool opened = !sw->idle_from_us;
	if (opened)
		sw->idle_from_us = now_us ? now_us : 1;
	if (sw->probing)
		return 0; /* the open gap's probe has spun once: a wake-up without activity sleeps */
	if (sw->expected_us > (int64_t)sw->cap_us) {
		/* the peer is slower than the cap: sleeping costs little -- but probe now and then */
		if (opened && ++sw->sleeps >= sw->probe_after) {
			sw->sleeps = 0;
			sw->probing = 1;
			return sw->cap_us;
		}
		return 0;
	}
	/* the first wait (expected 0) spins the whole cap, to learn the gap */
	int64_t w = sw->expected_us ? 2 * sw->expected_us + 1 : (int64_t)sw->cap_us;
	return w > (int64_t)sw->cap_us ? sw->cap_us : (unsigned)w;
}

void spin_window_activity(struct spin_window *sw, int64_t now_us)
{
	if (!sw->idle_from_us)
		return;
	int64_t gap = now_us - sw->idle_from_us;
	int64_t most = 4 * (int64_t)sw->cap_us;
	int probe = sw->probing;
	sw->idle_from_us = 0;
	sw->probing = 0;
	if (gap < 0)
		gap = 0;
	if (gap > most)
		gap = most;
	if (probe && gap <= (int64_t)sw->cap_us) {
		/* the probe's spin caught the activity: the gap without a wake-up */
		sw->expected_us = gap ? gap : 1;
		sw->probe_after = 1;
		return;
	}
	if (probe && sw->probe_after < SPIN_WINDOW_PROBE_EVERY)
		sw->probe_after *= 2; /* missed: the next probe waits twice as many gaps */
	/* up at once, down by 1/8 of the difference (spin_window.h) */
	if (gap >= sw->expected_us)
		sw->expected_us = gap;
	else
		sw->expected_us -= (sw->expected_us - gap + 7) / 8;
	if (!sw->expected_us)
		sw->expected_us = 1; /* 0 means "nothing learnt yet" */
}

unsigned spin_window_auto_cap(unsigned wake_us)
{
	if (wake_us > SPIN_WINDOW_AUTO_CAP_MAX_US / SPIN_WINDOW_WAKES_PER_CAP)
		return SPIN_WINDOW_AUTO_CAP_MAX_US;
	unsigned cap = wake_us * SPIN_WINDOW_WAKES_PER_CAP;
	return cap < SPIN_WINDOW_DEFAULT_CAP_US ? SPIN_WINDOW_DEFAULT_CAP_US : cap;
}

int64_t spin_window_expected(const struct spin_window *sw)
{
	return sw->expected_us;
}
