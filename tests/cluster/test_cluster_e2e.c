/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_e2e.c -- replicated volumes served by rdaxd, under a replica's death
 *
 * etcd and three nodes in namespaces; "e2e" is created with --replicas 3
 * (min 1) through rdax --cluster, so one node is its primary and its rdaxd
 * forwards every write and fsync to the two others (repl_registry.h). A
 * client (librdax, in the hub) writes and fsyncs 4 KiB blocks from the seed
 * through the primary with the checker; a replica is killed (kill -9, sim
 * mode) mid-stream. Checked:
 *   - invariant 2, end to end: every fsync acknowledged after the kill finds
 *     the dead replica out of etcd's ISR;
 *   - invariant 1: every member of etcd's ISR reads back every acknowledged
 *     block (asked directly);
 * and its control: the primary restarted with RDAX_FAULTS=repl-ack-early
 * (its fsyncs do not wait for the replicas) and the same round must show
 * acknowledgements while the dead replica is still in etcd's ISR.
 *
 *   test_cluster_e2e [--seed N]
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
#include "cluster_meta.h"
#include "etcd.h"
#include "librdax.h"

#define NODES	3
#define NBLOCKS 512

static uint64_t seed = 1;
static const char *volname = "e2e";
static struct nx_cluster cl;

static int setup(void **state)
{
	(void)state;
	return nx_cluster_start(&cl, "cle2e", NODES, seed, true, NULL) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	return nx_cluster_stop(&cl);
}

/* volume -- the volume key of "e2e" */
static void volume(struct cluster_volume_rec *v)
{
	struct etcd_client *e;
	char err[256], key[CLUSTER_KEY_MAX];
	assert_int_equal(etcd_client_new(cl.etcd.spec, NULL, &e, err, sizeof(err)), 0);
	cluster_key(key, sizeof(key), "default", "volumes", volname, NULL);
	struct etcd_range_result r;
	assert_int_equal(etcd_get(e, key, false, &r), 0);
	assert_int_equal(r.count, 1);
	assert_int_equal(
	    cluster_volume_decode(r.kvs[0].value, r.kvs[0].value_len, v, err, sizeof(err)), 0);
	etcd_range_result_free(&r);
	etcd_client_delete(&e);
}

static unsigned idx(const char *node)
{
	return (unsigned)(node[1] - '1');
}

/*
 * round_with_fault -- checker steps through the primary, a replica killed
 * (@stall false) or stopped (true) mid-stream, healed after; violations seen
 */
static unsigned round_with_fault(struct ck *ck, unsigned primary, unsigned victim, bool stall)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	assert_int_equal(rdax_connect(cl.node[primary].url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, volname, &v), 0);
	for (unsigned i = 0; i < 20; i++)
		assert_int_equal(ck_step(ck, v, 3), 0);
	printf("  %s n%u\n", stall ? "SIGSTOP" : "kill -9", victim + 1);
	if (stall)
		assert_int_equal(nx_node_pause(&cl.node[victim]), 0);
	else
		assert_int_equal(nx_node_kill(&cl.node[victim]), 0);
	char name[8];
	snprintf(name, sizeof(name), "n%u", victim + 1);
	unsigned violations = 0;
	for (unsigned i = 0; i < 20; i++) {
		assert_int_equal(ck_step(ck, v, 3), 0);
		struct cluster_volume_rec rec;
		volume(&rec);
		if (cluster_name_in(rec.isr, rec.nisr, name)) {
			violations++;
			printf("  VIOLATION: fsync acknowledged while %s (down) is in etcd's ISR\n",
			       name);
		}
	}
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	if (stall)
		assert_int_equal(nx_node_resume(&cl.node[victim]), 0);
	else
		assert_int_equal(nx_node_restart(&cl.node[victim]), 0);
	return violations;
}

/* verify -- every ISR member reads back every acknowledged block */
static void verify(struct ck *ck)
{
	struct cluster_volume_rec rec;
	volume(&rec);
	for (unsigned k = 0; k < rec.nisr; k++) {
		unsigned i = idx(rec.isr[k]);
		struct rdax_conn *c;
		struct rdax_volume *v;
		assert_int_equal(rdax_connect(cl.node[i].url, NULL, &c), 0);
		assert_int_equal(rdax_volume_open(c, volname, &v), 0);
		int ret = ck_verify(ck, v);
		rdax_volume_close(&v);
		rdax_disconnect(&c);
		if (ret)
			fail_msg("ISR member %s: %s", rec.isr[k], ck->why);
		printf("  %s (in the ISR) reads back every acknowledged block\n", rec.isr[k]);
	}
}

static void test_replica_killed(void **state)
{
	(void)state;
	const char *argv[] = {RDAX_CLI_PATH, "--cluster",  cl.etcd.spec, "--timeout",
			      "20",	     "volume",	   "create",	 "e2e",
			      "8M",	     "--replicas", "3",		 NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	if (r.status)
		fail_msg("volume create: %s", r.err);
	hx_run_free(&r);
	struct cluster_volume_rec rec;
	volume(&rec);
	unsigned primary = idx(rec.primary), victim = (primary + 1) % NODES;
	printf("  e2e: primary %s, ISR of %u\n", rec.primary, rec.nisr);
	assert_int_equal(rec.nisr, 3);
	struct ck ck;
	assert_int_equal(ck_init(&ck, seed, 0, NBLOCKS, NULL), 0);
	assert_int_equal(round_with_fault(&ck, primary, victim, false), 0);
	verify(&ck);
	unsigned second = (primary + 2) % NODES;
	assert_int_equal(round_with_fault(&ck, primary, second, true), 0);
	verify(&ck);

	/*
	 * control: the primary acknowledges without waiting for its replicas. A
	 * fresh volume (the first lost its other copies), a replica stopped: its
	 * link needs the stall timeout to fail, and every ack meanwhile is wrong.
	 */
	const char *argv2[] = {RDAX_CLI_PATH, "--cluster",  cl.etcd.spec, "--timeout",
			       "20",	      "volume",	    "create",	  "e2c",
			       "8M",	      "--replicas", "3",	  NULL};
	assert_int_equal(hx_run_argv(argv2, NULL, 0, &r), 0);
	if (r.status)
		fail_msg("volume create e2c: %s", r.err);
	hx_run_free(&r);
	volname = "e2c";
	volume(&rec);
	primary = idx(rec.primary);
	cl.node[primary].d.opts.faults = "repl-ack-early";
	assert_int_equal(nx_node_kill(&cl.node[primary]), 0);
	assert_int_equal(nx_node_restart(&cl.node[primary]), 0);
	unsigned v = round_with_fault(&ck, primary, (primary + 1) % NODES, true);
	printf("  control repl-ack-early: %u violation(s) seen\n", v);
	assert_true(v > 0);
	cl.node[primary].d.opts.faults = NULL;
	ck_free(&ck);
}

int main(int argc, char **argv)
{
	seed = nx_seed(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_replica_killed)};
	return cmocka_run_group_tests(tests, setup, teardown);
}
