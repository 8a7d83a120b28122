/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_failover.c -- the primary dies: an in-sync replica takes over, nothing acked is lost
 *
 * etcd and three nodes (--lease-ttl=2) in namespaces; "fo" is created with
 * --replicas 3. A client writes and fsyncs through the primary with the
 * checker; the primary is killed (kill -9, sim mode: a power cut). Checked:
 *   - within a bounded time the volume key names another ISR member as
 *     primary at the next epoch (the time from the kill to the first
 *     acknowledged write on the new primary is printed, against the TTL);
 *   - the new primary reads back every acknowledged block, and the checker
 *     goes on through it;
 *   - the old primary, restarted, serves nothing of the volume (a client
 *     there is sent to the new primary), is resynced and rejoins the ISR,
 *     and its whole copy equals the new primary's; epochs only grew.
 * Control: failover-any-replica (a replica outside the ISR may take over,
 * and does first): a replica killed while acknowledged writes go on, then
 * restarted as the primary is killed, takes over with its stale copy, and
 * the checker must see acknowledged blocks lost.
 *
 *   test_cluster_failover [--seed N]
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "checker.h"
#include "cluster_fixture.h"
#include "cluster_meta.h"
#include "librdax.h"
#include "member.h"

#define NODES	3
#define NBLOCKS 512

static uint64_t seed = 1;
static struct nx_cluster cl;

static int setup(void **state)
{
	(void)state;
	nx_cluster_extra_arg = "--lease-ttl=2";
	return nx_cluster_start(&cl, "clfo", NODES, seed, true, NULL) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	return nx_cluster_stop(&cl);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static unsigned idx(const char *node)
{
	return (unsigned)(node[1] - '1');
}

static void create(const char *name)
{
	const char *argv[] = {RDAX_CLI_PATH, "--cluster",  cl.etcd.spec, "--timeout", "20",
			      "volume",	     "create",	   name,	 "8M",	      "--replicas",
			      "3",	     NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	if (r.status)
		fail_msg("volume create %s: %s", name, r.err);
	hx_run_free(&r);
}

/* steps -- @n checker steps through node @i's copy of @vol (opened as a client) */
static void steps(struct ck *ck, unsigned i, const char *vol, unsigned n)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	assert_int_equal(rdax_connect(cl.node[i].url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, vol, &v), 0);
	for (unsigned k = 0; k < n; k++)
		assert_int_equal(ck_step(ck, v, 3), 0);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
}

/*
 * new_primary -- wait until @vol's key names a primary other than @old at
 * a later epoch; then the time until a client's first acknowledged write
 * there. Returns the new primary's index.
 */
static unsigned new_primary(const char *vol, unsigned old, uint64_t epoch, uint64_t t_kill,
			    struct ck *ck)
{
	struct cluster_volume_rec rec;
	for (unsigned n = 0;; n++) {
		assert_int_equal(nx_volume_key(cl.etcd.spec, vol, &rec), 0);
		if (idx(rec.primary) != old && rec.epoch > epoch)
			break;
		if (n > 400)
			fail_msg("%s: no failover after %u ms", vol, n * 50);
		usleep(50 * 1000);
	}
	unsigned p = idx(rec.primary);
	/* the first acknowledged write: open (refused until it serves) and one step */
	for (unsigned n = 0;; n++) {
		struct rdax_conn *c;
		struct rdax_volume *v;
		if (rdax_connect(cl.node[p].url, NULL, &c) == 0) {
			int ret = rdax_volume_open(c, vol, &v);
			if (ret == 0) {
				ret = ck_step(ck, v, 1);
				rdax_volume_close(&v);
			}
			rdax_disconnect(&c);
			if (ret == 0)
				break;
		}
		if (n > 400)
			fail_msg("%s: n%u never served after the failover", vol, p + 1);
		usleep(50 * 1000);
	}
	printf("  %s: n%u primary at epoch %" PRIu64 " (was %" PRIu64 "); the first acknowledged "
	       "write %" PRIu64 " ms after the kill (lease TTL 2000 ms)\n",
	       vol, p + 1, rec.epoch, epoch, now_ms() - t_kill);
	return p;
}

/* verify_on -- node @i's copy of @vol reads back every acknowledged block; 0 or -EIO */
static int verify_on(struct ck *ck, unsigned i, const char *vol)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	char nd[8];
	snprintf(nd, sizeof(nd), "n%u", i + 1);
	assert_int_equal(nx_member_open(cl.etcd.spec, nd, cl.node[i].url, vol, &c, &v), 0);
	int ret = ck_verify(ck, v);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	return ret;
}

static void test_primary_killed(void **state)
{
	(void)state;
	create("fo");
	struct cluster_volume_rec rec;
	assert_int_equal(nx_volume_key(cl.etcd.spec, "fo", &rec), 0);
	unsigned old = idx(rec.primary);
	uint64_t epoch = rec.epoch;
	struct ck ck;
	assert_int_equal(ck_init(&ck, seed, 0, NBLOCKS, NULL), 0);
	steps(&ck, old, "fo", 30);
	printf("  kill -9 n%u (the primary)\n", old + 1);
	uint64_t t = now_ms();
	assert_int_equal(nx_node_kill(&cl.node[old]), 0);
	unsigned p = new_primary("fo", old, epoch, t, &ck);
	if (verify_on(&ck, p, "fo"))
		fail_msg("the new primary n%u: %s", p + 1, ck.why);
	printf("  n%u (the new primary) reads back every acknowledged block\n", p + 1);
	steps(&ck, p, "fo", 20);

	/* the old primary comes back: a replica now, resynced, never serving */
	assert_int_equal(nx_node_restart(&cl.node[old]), 0);
	struct rdax_conn *c;
	struct rdax_volume *v;
	assert_int_equal(rdax_connect(cl.node[old].url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, "fo", &v), -RDAX_E_NOT_PRIMARY);
	printf("  n%u restarted: a client there is sent to %s\n", old + 1,
	       rdax_conn_primary_url(c));
	rdax_disconnect(&c);
	char on[8];
	snprintf(on, sizeof(on), "n%u", old + 1);
	for (unsigned n = 0;; n++) {
		assert_int_equal(nx_volume_key(cl.etcd.spec, "fo", &rec), 0);
		if (cluster_name_in(rec.isr, rec.nisr, on))
			break;
		if (n > 600)
			fail_msg("n%u did not rejoin the ISR", old + 1);
		steps(&ck, p, "fo", 1);
		usleep(50 * 1000);
	}
	steps(&ck, p, "fo", 5);
	assert_true(rec.epoch > epoch);
	for (unsigned k = 0; k < rec.nisr; k++)
		if (verify_on(&ck, idx(rec.isr[k]), "fo"))
			fail_msg("ISR member %s: %s", rec.isr[k], ck.why);
	printf("  n%u rejoined as a replica; every ISR member (%u) reads back every acknowledged "
	       "block\n",
	       old + 1, rec.nisr);
	ck_free(&ck);
}

static void test_control_outside_isr(void **state)
{
	(void)state;
	create("fc");
	struct cluster_volume_rec rec;
	assert_int_equal(nx_volume_key(cl.etcd.spec, "fc", &rec), 0);
	unsigned p = idx(rec.primary), stale = (p + 2) % NODES;
	struct ck ck;
	assert_int_equal(ck_init(&ck, seed ^ 0xfc, 0, NBLOCKS, NULL), 0);
	steps(&ck, p, "fc", 10);
	/* the stale replica misses acknowledged writes, then every node may take over */
	assert_int_equal(nx_node_kill(&cl.node[stale]), 0);
	steps(&ck, p, "fc", 30);
	cl.node[stale].d.opts.faults = "failover-any-replica";
	unsigned other = (p + 1) % NODES;
	/* hold the in-sync one back; the primary dies; the stale one comes back at once */
	assert_int_equal(nx_node_pause(&cl.node[other]), 0);
	printf("  control failover-any-replica: n%u (stale) restarted as n%u (primary) dies, n%u "
	       "held\n",
	       stale + 1, p + 1, other + 1);
	uint64_t t = now_ms();
	assert_int_equal(nx_node_kill(&cl.node[p]), 0);
	assert_int_equal(nx_node_restart(&cl.node[stale]), 0);
	unsigned np;
	for (unsigned n = 0;; n++) {
		assert_int_equal(nx_volume_key(cl.etcd.spec, "fc", &rec), 0);
		if (idx(rec.primary) != p)
			break;
		if (n > 400)
			fail_msg("control: no failover");
		usleep(50 * 1000);
	}
	np = idx(rec.primary);
	assert_int_equal(nx_node_resume(&cl.node[other]), 0);
	int ret = verify_on(&ck, np, "fc");
	printf("  control: n%u took over after %" PRIu64 " ms; its copy: %s\n", np + 1,
	       now_ms() - t, ret ? ck.why : "every acknowledged block (not caught)");
	assert_int_equal(np, stale);
	assert_int_not_equal(ret, 0); /* caught: acknowledged writes lost */
	cl.node[stale].d.opts.faults = NULL;
	ck_free(&ck);
}

int main(int argc, char **argv)
{
	seed = nx_seed(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_primary_killed),
					   cmocka_unit_test(test_control_outside_isr)};
	return cmocka_run_group_tests(tests, setup, teardown);
}
