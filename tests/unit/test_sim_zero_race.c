/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_sim_zero_race.c -- the simulator's write-back against a zero range
 *
 * A discard zeroes a range while an fsync writes back a dirty entry that
 * covers it (a 2 MiB entry only partly inside the discard keeps its mark).
 * On real PMEM a cache line's write-back is atomic with respect to the
 * stores into that line, so whatever the order the range ends as zeros. The
 * simulator's write-back is a copy from the private mapping to the file; if
 * it read the old data before the zero range and wrote it after, the file
 * held the old data again, and the drop of the private pages then read it
 * back into the mapping: an acknowledged discard undone (seen as old data
 * after a power cut in crash_powercut).
 *
 * The test holds the zero range at its window (persist_test_hooks: the file
 * zeroed, the private pages not yet dropped) and starts a write-back of the
 * whole region from another thread there. With the simulator's lock the
 * write-back waits until the zero range is done; the range must read as
 * zeros in the file and in the mapping. The control switches the lock off
 * (RDAX faults: sim-no-flush-lock), and the same check must see the old
 * data.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "faults.h"
#include "nsfile.h"
#include "pattern.h"
#include "persist.h"
#include "tmpdir.h"

#define NS_SIZE	   (4ULL << 20)
#define REGION	   (2ULL << 20) /* what the fsync writes back: one 2 MiB entry */
#define ZERO_OFF   (512ULL << 10)
#define ZERO_LEN   (512ULL << 10)
#define OLD_BYTE   0xab
#define WAIT_LIMIT 2 /* seconds the window stays open for the write-back */

static struct {
	char dir[256];
	char path[320];
	struct persist p;
	pthread_t flusher;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool flushed;
} T;

static int setup(void **state)
{
	tmpdir_make(T.dir, sizeof(T.dir), "simzero");
	tmpdir_file(T.path, sizeof(T.path), T.dir, "ns");
	assert_int_equal(persist_create(T.path, NS_SIZE, PERSIST_SIM, &T.p), 0);
	pthread_mutex_init(&T.lock, NULL);
	pthread_cond_init(&T.cond, NULL);
	T.flushed = false;
	/* the old data, durable: the region as a finished fsync left it */
	memset(T.p.base, OLD_BYTE, REGION);
	persist_range(&T.p, T.p.base, REGION);
	return 0;
}

static int teardown(void **state)
{
	persist_set_test_hooks(NULL);
	rdax_faults.sim_no_flush_lock = false;
	persist_unmap(&T.p);
	pthread_cond_destroy(&T.cond);
	pthread_mutex_destroy(&T.lock);
	tmpdir_remove(T.dir);
	return 0;
}

/* flusher -- the fsync's write-back of the whole 2 MiB region */
static void *flusher(void *arg)
{
	persist_range(&T.p, T.p.base, REGION);
	pthread_mutex_lock(&T.lock);
	T.flushed = true;
	pthread_cond_signal(&T.cond);
	pthread_mutex_unlock(&T.lock);
	return NULL;
}

/*
 * in_window -- the zero range's hook: start the write-back and give it
 * WAIT_LIMIT seconds to finish inside the window (it cannot with the lock)
 */
static void in_window(void *arg)
{
	assert_int_equal(pthread_create(&T.flusher, NULL, flusher, NULL), 0);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAIT_LIMIT;
	pthread_mutex_lock(&T.lock);
	while (!T.flushed && pthread_cond_timedwait(&T.cond, &T.lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&T.lock);
}

/* discard_with_writeback_in_window -- zero the range with the write-back racing it */
static void discard_with_writeback_in_window(void)
{
	static const struct persist_test_hooks hooks = {.sim_zero_range_done = in_window};
	persist_set_test_hooks(&hooks);
	assert_int_equal(persist_zero(&T.p, ZERO_OFF, ZERO_LEN), 0);
	persist_set_test_hooks(NULL);
	assert_int_equal(pthread_join(T.flusher, NULL), 0);
}

/* zeroed_in_file / zeroed_in_mapping -- does the discarded range read as zeros? */
static bool zeroed_in_file(void)
{
	static uint8_t buf[ZERO_LEN];
	nsfile_read(T.path, ZERO_OFF, buf, sizeof(buf));
	return all_zero(buf, sizeof(buf));
}

static bool zeroed_in_mapping(void)
{
	return all_zero((uint8_t *)T.p.base + ZERO_OFF, ZERO_LEN);
}

/* zero_range__writeback_in_window_waits -- the range stays zero, in the file and mapped */
static void zero_range__writeback_in_window_waits(void **state)
{
	discard_with_writeback_in_window();
	assert_true(zeroed_in_file());
	assert_true(zeroed_in_mapping());
	/* the rest of the region is the old data, still durable */
	static uint8_t buf[ZERO_OFF];
	nsfile_read(T.path, 0, buf, sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], OLD_BYTE);
}

/* zero_range__control_without_lock_brings_old_data_back -- the check sees the race */
static void zero_range__control_without_lock_brings_old_data_back(void **state)
{
	rdax_faults.sim_no_flush_lock = true;
	discard_with_writeback_in_window();
	assert_false(zeroed_in_file());
	assert_false(zeroed_in_mapping());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(zero_range__writeback_in_window_waits, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(zero_range__control_without_lock_brings_old_data_back,
					    setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
