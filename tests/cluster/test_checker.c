/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_checker.c -- the durability checker catches a lost acknowledged write
 *
 * The checker (checker.h) is what every cluster fault test relies on, so it
 * is itself tested against a daemon whose durability is known: one rdaxd in
 * sim mode (a kill -9 is a power cut), a client writing and fsyncing 4 KiB
 * blocks from the seed, kill -9 and restart every few steps, ck_verify()
 * after each restart -- it must pass. Its control: the same run against a
 * daemon with RDAX_FAULTS=skip-writeback (the fsync skips the write-back of
 * its first entry, so an acknowledged write is not durable) must make
 * ck_verify() fail, naming a block older than acknowledged.
 *
 *   test_checker [--seed N]   (default: $RDAX_CLUSTER_SEED, else 1)
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "checker.h"
#include "cluster_fixture.h"
#include "harness.h"
#include "librdax.h"

#define NBLOCKS 512 /* 2 MiB of the volume */
#define ROUNDS	4
#define STEPS	40

static uint64_t seed = 1;

/* open_vol -- connect to @d and open "ck" */
static void open_vol(const struct hx_daemon *d, struct rdax_conn **c, struct rdax_volume **v)
{
	assert_int_equal(rdax_connect(d->url, NULL, c), 0);
	assert_int_equal(rdax_volume_open(*c, "ck", v), 0);
}

/*
 * run -- a daemon (with @faults), ROUNDS of STEPS acknowledged steps each
 * followed by kill -9, restart and ck_verify(); returns the first verify's
 * error (0: every round read back)
 */
static int run(const char *faults, char *why, size_t whylen)
{
	char dir[256], log[320];
	assert_int_equal(hx_tmpdir_make("checker", dir, sizeof(dir)), 0);
	struct hx_daemon_opts o = {.mode = "sim", .ns_size = "64M", .faults = faults};
	struct hx_daemon d;
	assert_int_equal(hx_daemon_start(&d, dir, &o), 0);
	struct hx_run r;
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "volume", "create", "ck", "8M", NULL), 0);
	assert_int_equal(r.status, 0);
	hx_run_free(&r);
	snprintf(log, sizeof(log), "%s/acked.log", dir);
	struct ck ck;
	assert_int_equal(ck_init(&ck, seed ^ (faults ? 0xfa : 0), 4096 * 16, NBLOCKS, log), 0);
	int bad = 0;
	for (unsigned round = 0; round < ROUNDS && !bad; round++) {
		struct rdax_conn *c;
		struct rdax_volume *v;
		open_vol(&d, &c, &v);
		for (unsigned s = 0; s < STEPS; s++)
			assert_int_equal(ck_step(&ck, v, 1 + (unsigned)(ck.steps % 7)), 0);
		rdax_volume_close(&v);
		rdax_disconnect(&c);
		assert_int_equal(hx_daemon_kill(&d), 0);
		assert_int_equal(hx_daemon_restart(&d), 0);
		open_vol(&d, &c, &v);
		bad = ck_verify(&ck, v);
		if (bad)
			snprintf(why, whylen, "round %u: %s", round, ck.why);
		rdax_volume_close(&v);
		rdax_disconnect(&c);
	}
	printf("  %s: %" PRIu64 " fsyncs acknowledged, %s\n", faults ? faults : "no fault",
	       ck.acked_fsyncs, bad ? why : "every acknowledged block read back");
	ck_free(&ck);
	assert_int_equal(hx_daemon_stop(&d), 0);
	hx_tmpdir_remove(dir);
	return bad;
}

static void test_checker_passes(void **state)
{
	(void)state;
	char why[600];
	int ret = run(NULL, why, sizeof(why));
	if (ret)
		fail_msg("checker failed on a sound daemon: %s", why);
}

static void test_checker_control(void **state)
{
	(void)state;
	char why[600] = "";
	assert_int_equal(run("skip-writeback", why, sizeof(why)), -EIO);
	assert_non_null(strstr(why, "older than the acknowledged"));
}

int main(int argc, char **argv)
{
	seed = nx_seed(argc, argv);
	printf("checker: seed %" PRIu64 "\n", seed);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_checker_passes),
	    cmocka_unit_test(test_checker_control),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
