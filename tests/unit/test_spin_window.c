/* SPDX-License-Identifier: BSD-3-Clause */
/* test_spin_window.c -- adaptive polling (spin_window.h) and its cap from the wake-up (wake_cost.h) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "spin_window.h"
#include "wake_cost.h"

/* gap -- open a gap at @t, close it @len us later; the window the opening gave */
static unsigned gap(struct spin_window *sw, int64_t *t, int64_t len)
{
	unsigned w = spin_window_idle(sw, *t);
	*t += len;
	spin_window_activity(sw, *t);
	return w;
}

/*
 * peer_gap -- one gap of a peer whose activity comes @rtt us after the
 * side goes idle: caught by a spin window of at least @rtt, otherwise seen
 * only after a sleep and a wake-up of @wake us. Returns the window.
 */
static unsigned peer_gap(struct spin_window *sw, int64_t *t, int64_t rtt, int64_t wake)
{
	unsigned w = spin_window_idle(sw, *t);
	*t += w >= rtt ? rtt : rtt + wake;
	spin_window_activity(sw, *t);
	return w;
}

static void spin_window__cap_zero_never_spins(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 0);
	int64_t t = 1000;
	for (int i = 0; i < 10; i++)
		assert_int_equal(gap(&sw, &t, 5), 0);
}

static void spin_window__first_wait_spins_the_cap(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	assert_int_equal(spin_window_idle(&sw, 1000), 200);
}

static void spin_window__quick_peer_gets_twice_its_gap(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	int64_t t = 1000;
	for (int i = 0; i < 40; i++)
		gap(&sw, &t, 10);
	assert_int_equal(spin_window_expected(&sw), 10);
	assert_int_equal(spin_window_idle(&sw, t), 21);
}

/*
 * A request/reply rhythm: gaps alternate between a few us (a request's two
 * messages) and a round trip. The window must still cover the round trip
 * after a short gap: that is where spinning pays.
 */
static void spin_window__alternating_gaps_cover_the_long_one(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	int64_t t = 1000;
	for (int i = 0; i < 50; i++) {
		gap(&sw, &t, 2);
		unsigned w = gap(&sw, &t, 60);
		if (i > 0)
			assert_true(w >= 60);
	}
}

/* a slow peer sleeps at once but for the probes: after 1, 2, 4, 8, then every 16 gaps */
static void spin_window__slow_peer_sleeps_at_once(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	int64_t t = 1000;
	gap(&sw, &t, 5000);				  /* longer than the cap */
	assert_int_equal(spin_window_expected(&sw), 800); /* counted at most 4 x cap */
	unsigned probes_at[] = {1, 3, 7, 15, 31, 47, 63};
	unsigned next = 0;
	for (unsigned i = 1; i <= 63; i++) {
		unsigned w = gap(&sw, &t, 5000);
		if (next < sizeof(probes_at) / sizeof(probes_at[0]) && i == probes_at[next]) {
			assert_int_equal(w, 200);
			next++;
		} else {
			assert_int_equal(w, 0);
		}
	}
}

static void spin_window__never_above_the_cap(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	int64_t t = 1000;
	for (int i = 0; i < 100; i++) {
		unsigned w = gap(&sw, &t, (i * 37) % 190);
		assert_true(w <= 200);
	}
}

/* after an idle period the window comes back within a bounded number of quick gaps */
static void spin_window__idle_period_is_forgotten(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	int64_t t = 1000;
	for (int i = 0; i < 10; i++)
		gap(&sw, &t, 10);
	gap(&sw, &t, 10 * 1000 * 1000); /* ten seconds idle */
	/* the first gap after it probes: a quick peer is caught, and spinning resumes */
	assert_int_equal(peer_gap(&sw, &t, 10, 300), 200);
	for (int i = 0; i < 20; i++)
		assert_true(peer_gap(&sw, &t, 10, 300) >= 10);
}

/* an idle call while a gap is open keeps the gap's start (a wake-up without activity) */
static void spin_window__repeated_idle_keeps_the_gap_start(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	spin_window_idle(&sw, 1000);
	spin_window_idle(&sw, 1100);
	spin_window_activity(&sw, 1150);
	assert_int_equal(spin_window_expected(&sw), 150);
	spin_window_activity(&sw, 9999); /* no gap open: nothing learnt */
	assert_int_equal(spin_window_expected(&sw), 150);
}


/*
 * A round trip that fits the cap, a wake-up that does not: once asleep
 * (here after one long stall), every gap seen through a sleep exceeds the
 * cap. The probe must bring spinning back, and keep it.
 */
static void spin_window__asleep_with_a_quick_peer_spins_again(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	int64_t t = 1000;
	for (int i = 0; i < 10; i++)
		peer_gap(&sw, &t, 70, 300);
	assert_true(spin_window_idle(&sw, t) >= 70);
	spin_window_activity(&sw, t += 70);
	gap(&sw, &t, 5000); /* a stall: asleep from here */
	int asleep = 0;
	while (peer_gap(&sw, &t, 70, 300) < 70) {
		asleep++;
		assert_true(asleep <= 1);
	}
	for (int i = 0; i < 100; i++)
		assert_true(peer_gap(&sw, &t, 70, 300) >= 70);
}

/* a probe spins once per gap: a wake-up without activity in it sleeps again */
static void spin_window__probe_spins_once_per_gap(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	int64_t t = 1000;
	gap(&sw, &t, 5000);
	assert_int_equal(spin_window_idle(&sw, t), 200); /* the probe */
	assert_int_equal(spin_window_idle(&sw, t + 300), 0);
	assert_int_equal(spin_window_idle(&sw, t + 900), 0);
}

/* a stall every tenth gap (a busy machine) must not keep a quick peer asleep */
static void spin_window__stalls_do_not_keep_a_quick_peer_asleep(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	int64_t t = 1000;
	unsigned quick = 0, caught = 0;
	for (unsigned i = 0; i < 400; i++) {
		if (i % 10 == 9) {
			gap(&sw, &t, 2000);
			continue;
		}
		quick++;
		caught += peer_gap(&sw, &t, 70, 300) >= 70;
	}
	assert_true(caught >= quick * 9 / 10);
}

/* a peer slower than the cap costs one probe of the cap per SPIN_WINDOW_PROBE_EVERY gaps */
static void spin_window__slow_peer_probes_rarely(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	int64_t t = 1000;
	unsigned spun = 0, n = 100 * SPIN_WINDOW_PROBE_EVERY;
	gap(&sw, &t, 5000);
	for (unsigned i = 0; i < n; i++)
		spun += peer_gap(&sw, &t, 5000, 150);
	/* one cap per 16 gaps, and the four probes of the back-off */
	assert_true(spun <= 200 * (n / SPIN_WINDOW_PROBE_EVERY + 4));
	assert_true(spun >= 200 * (n / SPIN_WINDOW_PROBE_EVERY));
}

/*
 * The two sides together: a client that sends a request at once after each
 * reply, and a daemon that answers it. Each side, once it has nothing left
 * to do, spins for what its window says; a message that lands inside the
 * spin is seen at once, one that lands after it only after a wake-up of
 * @wake. Both sides start asleep (a long idle period). Returns how many of
 * the last 100 of 300 round trips both sides spun through (no wake-up).
 */
static unsigned two_sides_spinning(unsigned cap, int64_t wake)
{
	const int64_t one_way = 30, work = 10; /* the emulated link's transit, the daemon's work */
	struct spin_window client, daemon;
	spin_window_init(&client, cap);
	spin_window_init(&daemon, cap);
	int64_t t = 1000;
	gap(&client, &t, 100000);
	gap(&daemon, &t, 100000);
	int64_t daemon_spins_until = 0;
	spin_window_idle(&daemon, t); /* the daemon waits for the first request, asleep */
	unsigned clean = 0;
	for (int i = 0; i < 300; i++) {
		int64_t sent = t;
		int64_t client_spins_until = sent + spin_window_idle(&client, sent);
		int64_t at = sent + one_way;
		int64_t seen = at <= daemon_spins_until ? at : at + wake;
		spin_window_activity(&daemon, seen);
		int64_t replied = seen + work;
		daemon_spins_until = replied + spin_window_idle(&daemon, replied);
		at = replied + one_way;
		t = at <= client_spins_until ? at : at + wake;
		spin_window_activity(&client, t);
		clean += i >= 200 && t - sent == 2 * one_way + work;
	}
	return clean;
}

/*
 * Both sides asleep, where a round trip with one side asleep exceeds the
 * cap (a wake-up of 150 us against 200 us, the emulated VM): neither side's
 * probe can catch the other, and the connection stays asleep. A cap of ten
 * wake-ups (the "auto" cap) covers that round trip: a probe catches it and
 * both sides spin again. The first half is what the auto cap is for.
 */
static void spin_window__both_asleep_need_a_cap_above_a_wake_up(void **state)
{
	(void)state;
	assert_int_equal(two_sides_spinning(200, 150), 0);
	assert_true(two_sides_spinning(spin_window_auto_cap(150), 150) >= 95);
	/* a real host's wake-up: the 200 us floor recovers too */
	assert_int_equal(spin_window_auto_cap(10), 200);
	assert_true(two_sides_spinning(spin_window_auto_cap(10), 10) >= 95);
}

/* the auto cap: ten wake-ups, within [the default cap, SPIN_WINDOW_AUTO_CAP_MAX_US] */
static void spin_window__auto_cap_follows_the_wake_up(void **state)
{
	(void)state;
	assert_int_equal(spin_window_auto_cap(0), SPIN_WINDOW_DEFAULT_CAP_US); /* not measured */
	assert_int_equal(spin_window_auto_cap(1), SPIN_WINDOW_DEFAULT_CAP_US);
	assert_int_equal(spin_window_auto_cap(20), 200);
	assert_int_equal(spin_window_auto_cap(150), 1500);
	assert_int_equal(spin_window_auto_cap(500), SPIN_WINDOW_AUTO_CAP_MAX_US);
	assert_int_equal(spin_window_auto_cap(0xffffffffU), SPIN_WINDOW_AUTO_CAP_MAX_US);
}

/* the measured wake-up: measured once, a plausible figure, and the same ever after */
static void wake_cost__measured_once(void **state)
{
	(void)state;
	unsigned us = wake_cost_us();
	assert_true(us >= 1 && us <= 1000000);
	assert_int_equal(wake_cost_us(), us);
	assert_int_equal(busy_poll_cap(SPIN_WINDOW_CAP_AUTO), spin_window_auto_cap(us));
	assert_int_equal(busy_poll_cap(0), 0);
	assert_int_equal(busy_poll_cap(300), 300);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(spin_window__cap_zero_never_spins),
	    cmocka_unit_test(spin_window__first_wait_spins_the_cap),
	    cmocka_unit_test(spin_window__quick_peer_gets_twice_its_gap),
	    cmocka_unit_test(spin_window__alternating_gaps_cover_the_long_one),
	    cmocka_unit_test(spin_window__slow_peer_sleeps_at_once),
	    cmocka_unit_test(spin_window__never_above_the_cap),
	    cmocka_unit_test(spin_window__idle_period_is_forgotten),
	    cmocka_unit_test(spin_window__repeated_idle_keeps_the_gap_start),
	    cmocka_unit_test(spin_window__asleep_with_a_quick_peer_spins_again),
	    cmocka_unit_test(spin_window__slow_peer_probes_rarely),
	    cmocka_unit_test(spin_window__probe_spins_once_per_gap),
	    cmocka_unit_test(spin_window__stalls_do_not_keep_a_quick_peer_asleep),
	    cmocka_unit_test(spin_window__both_asleep_need_a_cap_above_a_wake_up),
	    cmocka_unit_test(spin_window__auto_cap_follows_the_wake_up),
	    cmocka_unit_test(wake_cost__measured_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
