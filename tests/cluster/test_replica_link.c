/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_replica_link.c -- the primary's stream to a replica, against a real rdaxd
 *
 * A "primary mapping" in the test's memory and a replica volume on an rdaxd
 * (sim mode, loopback):
 *   - writes forwarded in order, overlapping and rewritten while queued, then
 *     an fsync: once it completes the replica's bytes equal the mapping;
 *   - the fsync's completion counts as the replica's: after it, a kill -9 of
 *     the replica (a power cut) keeps what the fsync covered;
 *   - durable writes (rlink_forward_fsync, and rlink_forward + rlink_fsync of
 *     one range) go as one WRITE with fsync=true each (the stats' fused):
 *     each completion counts as the replica's flush, as above (a separate
 *     rlink_forward + rlink_fsync is fused when the loop finds both queued). Control:
 *     rlink-fused-no-flush sends those WRITEs without fsync=true, and the
 *     kill -9 loses bytes the completions confirmed;
 *   - a stalled replica (SIGSTOP): the waiting fsync fails with -ETIMEDOUT
 *     within the link timeout and on_fail runs once; later requests fail at
 *     once; never a success;
 *   - a replica that dies (kill -9) under a stream: the fsync fails;
 *   - a volume the replica does not have: rlink_start says so.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "completion.h"
#include "faults.h"
#include "harness.h"
#include "librdax.h"
#include "replica_link.h"

#define VOL_SIZE (8U << 20)

static char dir[256];
static struct hx_daemon d;
static uint8_t *mapping;

struct wait {
	struct rlink_waiter w;
	struct completion c;
};

static void wait_done(struct rlink_waiter *w, int status)
{
	completion_complete(&((struct wait *)w)->c, status);
}

static void wait_init(struct wait *x)
{
	x->w.done = wait_done;
	completion_init(&x->c);
}

/* wait_for -- the waiter's status, or 1 if it did not complete within @ms */
static int wait_for(struct wait *x, int ms)
{
	int status;
	return completion_wait(&x->c, ms, &status) ? status : 1;
}

static unsigned fails;
static int fail_code;
static void on_fail(void *arg, int code, const char *why)
{
	(void)arg;
	fails++;
	fail_code = code;
	printf("  on_fail: %s\n", why);
}

static int setup(void **state)
{
	(void)state;
	if (hx_tmpdir_make("rlink", dir, sizeof(dir)) < 0)
		return -1;
	struct hx_daemon_opts o = {.mode = "sim", .ns_size = "64M"};
	if (hx_daemon_start(&d, dir, &o))
		return -1;
	struct hx_run r;
	if (hx_cli(&d, NULL, 0, &r, "volume", "create", "rv", "8M", NULL) || r.status) {
		hx_run_free(&r);
		return -1;
	}
	hx_run_free(&r);
	mapping = calloc(1, VOL_SIZE);
	return mapping ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	int ret = d.pid > 0 ? hx_daemon_stop(&d) : 0;
	hx_tmpdir_remove(dir);
	free(mapping);
	return ret;
}

static struct replica_link *start_link(unsigned timeout_ms)
{
	struct rlink_opts o = {.url = d.url,
			       .volume = "rv",
			       .mapping = mapping,
			       .size = VOL_SIZE,
			       .timeout_ms = timeout_ms,
			       .on_fail = on_fail};
	struct replica_link *l;
	char err[512];
	int ret = rlink_start(&o, &l, err, sizeof(err));
	if (ret)
		fail_msg("rlink_start: %s", err);
	fails = 0;
	return l;
}

/* first_difference -- the first byte where the replica's volume differs from the mapping, or -1 */
static long first_difference(void)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	assert_int_equal(rdax_connect(d.url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, "rv", &v), 0);
	uint8_t *buf = malloc(VOL_SIZE);
	assert_non_null(buf);
	assert_int_equal(rdax_read(v, 0, buf, VOL_SIZE), 0);
	long at = -1;
	if (memcmp(buf, mapping, VOL_SIZE) != 0) {
		at = 0;
		while (buf[at] == mapping[at])
			at++;
	}
	free(buf);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	return at;
}

/* same_as_mapping -- the replica's volume reads back as the mapping */
static void same_as_mapping(void)
{
	long at = first_difference();
	if (at >= 0)
		fail_msg("the replica differs from the mapping at byte %ld", at);
}

/* scribble -- change @n random ranges of the mapping and forward each */
static void scribble(struct replica_link *l, uint64_t *rng, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = hx_splitmix64(rng) % VOL_SIZE;
		uint64_t len = 1 + hx_splitmix64(rng) % (256 << 10);
		if (len > VOL_SIZE - off)
			len = VOL_SIZE - off;
		memset(mapping + off, (int)(hx_splitmix64(rng) & 0xff), len);
		rlink_forward(l, off, len);
		if (i % 3 == 0) { /* rewritten while the first send may still be queued */
			memset(mapping + off, (int)(hx_splitmix64(rng) & 0xff), len / 2 + 1);
			rlink_forward(l, off, len / 2 + 1);
		}
	}
}

static void test_stream_then_fsync(void **state)
{
	(void)state;
	struct replica_link *l = start_link(5000);
	uint64_t rng = 42;
	struct wait w;
	for (unsigned round = 0; round < 3; round++) {
		scribble(l, &rng, 200);
		wait_init(&w);
		rlink_fsync(l, 0, 0, &w.w);
		assert_int_equal(wait_for(&w, 30000), 0);
	}
	struct rlink_stats st;
	rlink_stats(l, &st);
	printf("  %" PRIu64 " writes (%" PRIu64 " bytes), %" PRIu64 " fsyncs\n", st.writes,
	       st.write_bytes, st.fsyncs);
	assert_false(st.failed);
	assert_int_equal(fails, 0);
	rlink_stop(&l);
	same_as_mapping();
	/* what the fsync confirmed survives a power cut of the replica */
	assert_int_equal(hx_daemon_kill(&d), 0);
	assert_int_equal(hx_daemon_restart(&d), 0);
	same_as_mapping();
}

/*
 * durable_writes -- @n durable writes of random ranges, each waited for: by
 * turns rlink_forward_fsync, and rlink_forward then rlink_fsync of the same
 * range (fused by the loop too); then the replica is killed (a power cut)
 * and restarted. Returns the first byte where it differs from the mapping,
 * or -1.
 */
static long durable_writes(unsigned n, uint64_t seed)
{
	struct replica_link *l = start_link(5000);
	uint64_t rng = seed;
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = hx_splitmix64(&rng) % VOL_SIZE;
		uint64_t len = 1 + hx_splitmix64(&rng) % (64 << 10);
		if (len > VOL_SIZE - off)
			len = VOL_SIZE - off;
		memset(mapping + off, (int)(hx_splitmix64(&rng) | 1) & 0xff, len);
		struct wait w;
		wait_init(&w);
		if (i % 2 == 0) {
			assert_true(rlink_forward_fsync(l, off, len, &w.w));
		} else {
			rlink_forward(l, off, len);
			rlink_fsync(l, off, len, &w.w);
		}
		assert_int_equal(wait_for(&w, 30000), 0);
	}
	struct rlink_stats st;
	rlink_stats(l, &st);
	printf("  %" PRIu64 " writes, %" PRIu64 " fsyncs, %" PRIu64 " of them fused\n", st.writes,
	       st.fsyncs, st.fused);
	/*
	 * rlink_forward_fsync queues its pair at once: always fused. A separate
	 * rlink_forward and rlink_fsync from this thread may be taken by the
	 * loop in two turns (then sent as two requests): fused or not.
	 */
	assert_int_equal(st.writes, n);
	assert_int_equal(st.fsyncs, n);
	assert_true(st.fused >= (n + 1) / 2 && st.fused <= n);
	assert_false(st.failed);
	rlink_stop(&l);
	assert_int_equal(hx_daemon_kill(&d), 0);
	assert_int_equal(hx_daemon_restart(&d), 0);
	return first_difference();
}

static void test_durable_writes_fused(void **state)
{
	(void)state;
	assert_int_equal(durable_writes(64, 7), -1);
}

/* the control: fused WRITEs without fsync=true -- the kill loses confirmed bytes */
static void test_durable_writes_fused_control(void **state)
{
	(void)state;
	rdax_faults.rlink_fused_no_flush = true;
	long at = durable_writes(64, 8);
	rdax_faults.rlink_fused_no_flush = false;
	printf("  control rlink-fused-no-flush: first lost byte %ld\n", at);
	assert_true(at >= 0);
	/* the replica's copy and the mapping agree again for the tests after this one */
	struct replica_link *l = start_link(5000);
	struct wait w;
	rlink_forward(l, 0, VOL_SIZE);
	wait_init(&w);
	rlink_fsync(l, 0, 0, &w.w);
	assert_int_equal(wait_for(&w, 30000), 0);
	rlink_stop(&l);
	same_as_mapping();
}

static void test_stalled_replica(void **state)
{
	(void)state;
	struct replica_link *l = start_link(500);
	assert_int_equal(kill(d.pid, SIGSTOP), 0);
	uint64_t rng = 7;
	scribble(l, &rng, 20);
	struct wait w;
	wait_init(&w);
	rlink_fsync(l, 0, 0, &w.w);
	int st = wait_for(&w, 10000);
	kill(d.pid, SIGCONT);
	assert_int_not_equal(st, 0); /* never a success */
	assert_int_not_equal(st, 1); /* and not left hanging */
	printf("  stalled: fsync %s\n", rdax_strerror(st));
	assert_int_equal(fails, 1);
	/* later requests fail at once */
	wait_init(&w);
	rlink_fsync(l, 0, 4096, &w.w);
	assert_int_equal(wait_for(&w, 1000), st);
	assert_int_equal(fails, 1);
	rlink_stop(&l);
}

static void test_dead_replica(void **state)
{
	(void)state;
	struct replica_link *l = start_link(2000);
	assert_int_equal(hx_daemon_kill(&d), 0);
	uint64_t rng = 9;
	scribble(l, &rng, 10);
	struct wait w;
	wait_init(&w);
	rlink_fsync(l, 0, 0, &w.w);
	int st = wait_for(&w, 10000);
	printf("  dead: fsync %s\n", rdax_strerror(st));
	assert_true(st < 0);
	assert_int_equal(fails, 1);
	rlink_stop(&l);
	assert_int_equal(hx_daemon_restart(&d), 0);
}

static void test_no_such_volume(void **state)
{
	(void)state;
	struct rlink_opts o = {
	    .url = d.url, .volume = "nosuch", .mapping = mapping, .size = VOL_SIZE};
	struct replica_link *l = NULL;
	char err[512] = "";
	assert_int_not_equal(rlink_start(&o, &l, err, sizeof(err)), 0);
	printf("  %s\n", err);
	assert_non_null(strstr(err, "nosuch"));
	assert_null(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stream_then_fsync),
	    cmocka_unit_test(test_durable_writes_fused),
	    cmocka_unit_test(test_durable_writes_fused_control),
	    cmocka_unit_test(test_stalled_replica),
	    cmocka_unit_test(test_dead_replica),
	    cmocka_unit_test(test_no_such_volume),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
