/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_metrics.c -- the per-thread counters and their text format
 *
 * Threads count concurrently into their own shards; the sum must be exact.
 * Threads that exit hand their shard on, and the counts stay. The rendering
 * of a daemon without a store has every family once, well formed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"
#include "metrics_expo.h"

#define THREADS 8
#define BUMPS	20000

static void *counting_thread(void *arg)
{
	for (unsigned i = 0; i < BUMPS; i++) {
		metrics_request(METRICS_TCP, METRICS_OP_WRITE, 4096);
		metrics_error(METRICS_NBD, -5);
	}
	metrics_fsync(3000, 64);	 /* 3 us: the first bucket */
	metrics_fsync(2000000000ULL, 0); /* 2 s: +Inf */
	metrics_conn(METRICS_RDMA, true);
	return NULL;
}

/* metrics_sum__threads_exact -- concurrent shards add up exactly, twice over (reuse) */
static void metrics_sum__threads_exact(void **state)
{
	struct metrics_totals before, after;
	metrics_sum(&before);
	for (int round = 0; round < 2; round++) {
		pthread_t t[THREADS];
		for (int i = 0; i < THREADS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, counting_thread, NULL), 0);
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
	}
	metrics_sum(&after);
	uint64_t n = 2ULL * THREADS * BUMPS;
	assert_int_equal(after.requests[METRICS_TCP][METRICS_OP_WRITE] -
			     before.requests[METRICS_TCP][METRICS_OP_WRITE],
			 n);
	assert_int_equal(after.bytes[METRICS_TCP][METRICS_OP_WRITE] -
			     before.bytes[METRICS_TCP][METRICS_OP_WRITE],
			 n * 4096);
	assert_int_equal(after.errors[METRICS_NBD][metrics_err_slot(-5)] -
			     before.errors[METRICS_NBD][metrics_err_slot(-5)],
			 n);
	assert_int_equal(after.fsync_count - before.fsync_count, 4 * THREADS);
	assert_int_equal(after.fsync_buckets[0] - before.fsync_buckets[0], 2 * THREADS);
	assert_int_equal(after.fsync_buckets[METRICS_FSYNC_BUCKETS] -
			     before.fsync_buckets[METRICS_FSYNC_BUCKETS],
			 2 * THREADS);
	assert_int_equal(after.conns_opened[METRICS_RDMA] - before.conns_opened[METRICS_RDMA],
			 2 * THREADS);
}

/* metrics_err_slot__codes -- errno and RDAX_E_* codes have slots of their own */
static void metrics_err_slot__codes(void **state)
{
	assert_int_equal(metrics_err_code(metrics_err_slot(-22)), 22);
	assert_int_equal(metrics_err_code(metrics_err_slot(22)), 22);
	assert_int_equal(metrics_err_code(metrics_err_slot(-4099)), 4099);
	assert_int_equal(metrics_err_code(metrics_err_slot(-100000)), 0);
	assert_int_equal(metrics_err_code(metrics_err_slot(0)), 0);
}

/* metrics_expo_render__families -- every family once, HELP before TYPE before samples */
static void metrics_expo_render__families(void **state)
{
	metrics_request(METRICS_TCP, METRICS_OP_READ, 512);
	metrics_error(METRICS_TCP, -4099); /* RDAX_E_PROTOCOL */
	struct metrics_expo_src src = {.store = NULL, .version = "t\"1"};
	char *text;
	size_t len;
	assert_int_equal(metrics_expo_render(&src, &text, &len), 0);
	assert_int_equal(strlen(text), len);
	assert_non_null(strstr(text, "# TYPE rdax_requests_total counter\n"));
	assert_non_null(strstr(text, "rdax_requests_total{op=\"read\",transport=\"tcp\"} "));
	assert_non_null(
	    strstr(text, "rdax_errors_total{code=\"RDAX_E_PROTOCOL\",transport=\"tcp\"} "));
	assert_non_null(strstr(text, "# TYPE rdax_fsync_duration_seconds histogram\n"));
	assert_non_null(strstr(text, "rdax_fsync_duration_seconds_bucket{le=\"+Inf\"} "));
	assert_non_null(strstr(text, "rdax_media_errors_total "));
	assert_non_null(strstr(text, "rdax_build_info{version=\"t\\\"1\"} 1\n")); /* escaped */
	/* every TYPE line names a family once */
	for (const char *p = text; (p = strstr(p, "# TYPE ")) != NULL; p++) {
		char name[128];
		assert_int_equal(sscanf(p, "# TYPE %127s", name), 1);
		char pat[160];
		snprintf(pat, sizeof(pat), "# TYPE %s ", name);
		assert_ptr_equal(strstr(text, pat), p);
	}
	/* the last line is complete */
	assert_int_equal(text[len - 1], '\n');
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(metrics_sum__threads_exact),
	    cmocka_unit_test(metrics_err_slot__codes),
	    cmocka_unit_test(metrics_expo_render__families),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
