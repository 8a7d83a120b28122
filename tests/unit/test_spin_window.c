/* SPDX-License-Identifier: BSD-3-Clause */
/* test_spin_window.c -- the adaptive polling window of both RDMA sides (common/spin_window.h) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "spin_window.h"

/* gap -- open a gap at @t, close it @len us later; the window the opening gave */
static unsigned gap(struct spin_window *sw, int64_t *t, int64_t len)
{
	unsigned w = spin_window_idle(sw, *t);
	*t += len;
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

static void spin_window__slow_peer_sleeps_at_once(void **state)
{
	(void)state;
	struct spin_window sw;
	spin_window_init(&sw, 200);
	int64_t t = 1000;
	gap(&sw, &t, 5000);				  /* longer than the cap */
	assert_int_equal(spin_window_expected(&sw), 800); /* counted at most 4 x cap */
	for (int i = 0; i < 5; i++)
		assert_int_equal(gap(&sw, &t, 5000), 0);
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
	assert_int_equal(spin_window_idle(&sw, t), 0);
	int n = 0;
	while (spin_window_idle(&sw, t) == 0) {
		t += 10;
		spin_window_activity(&sw, t);
		n++;
		assert_true(n <= 12);
	}
	assert_true(n >= 1);
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
