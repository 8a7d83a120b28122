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
 * A reconcile longer than the lease (reconcile-slow: three TTLs): the new
 * primary keeps its lease through it, serves, and no second failover
 * follows; control reconcile-inline (the reconcile on the cluster thread,
 * which then renews no lease) must fail that.
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


/* create_tries -- volume @name on 3 nodes, tried @tries times 3 s apart (nodes joining) */
static void create_tries(const char *name, unsigned tries)
{
	/* a node that lost its lease (the stalled primary) joins again within a keepalive */
	sleep(2);
	const char *argv[] = {RDAX_CLI_PATH, "--cluster",  cl.etcd.spec, "--timeout",
			      "20",	     "volume",	   "create",	 name,
			      "8M",	     "--replicas", "3",		 NULL};
	for (unsigned n = 1;; n++) {
		struct hx_run r;
		assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
		int st = r.status;
		if (st && n >= tries)
			fail_msg("volume create %s: %s", name, r.err);
		if (st)
			printf("  volume create %s: %s (again in 3 s)\n", name, r.err);
		hx_run_free(&r);
		if (!st)
			return;
		sleep(3);
	}
}

static void create(const char *name)
{
	create_tries(name, 1);
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
		if (nx_node_index(rec.primary) != old && rec.epoch > epoch)
			break;
		if (n > 400)
			fail_msg("%s: no failover after %u ms", vol, n * 50);
		usleep(50 * 1000);
	}
	unsigned p = nx_node_index(rec.primary);
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
	char nd[16];
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
	unsigned old = nx_node_index(rec.primary);
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
		if (verify_on(&ck, nx_node_index(rec.isr[k]), "fo"))
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
	unsigned p = nx_node_index(rec.primary), stale = (p + 2) % NODES;
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
		if (nx_node_index(rec.primary) != p)
			break;
		if (n > 400)
			fail_msg("control: no failover");
		usleep(50 * 1000);
	}
	np = nx_node_index(rec.primary);
	assert_int_equal(nx_node_resume(&cl.node[other]), 0);
	for (unsigned n = 0;; n++) { /* it serves once its members are reconciled */
		struct rdax_conn *c;
		struct rdax_volume *v;
		assert_int_equal(rdax_connect(cl.node[np].url, NULL, &c), 0);
		int ret = rdax_volume_open(c, "fc", &v);
		if (ret == 0)
			rdax_volume_close(&v);
		rdax_disconnect(&c);
		if (ret == 0)
			break;
		if (n > 400)
			fail_msg("control: n%u does not serve", np + 1);
		usleep(50 * 1000);
	}
	int ret = verify_on(&ck, np, "fc");
	printf("  control: n%u took over after %" PRIu64 " ms; its copy: %s\n", np + 1,
	       now_ms() - t, ret ? ck.why : "every acknowledged block (not caught)");
	assert_int_equal(np, stale);
	assert_int_not_equal(ret, 0); /* caught: acknowledged writes lost */
	cl.node[stale].d.opts.faults = NULL;
	ck_free(&ck);
}

/*
 * isolate -- node @p cut off from etcd and from the other nodes (@on), or
 * joined again (!@on); clients still reach it. Without namespaces (the
 * loopback fallback) there is nothing to cut: said once, and the stalled
 * primary then only races its news from etcd.
 */
static void isolate(unsigned p, bool on)
{
	int (*rule)(struct nx_net *, unsigned, const char *, int) =
	    on ? nx_block_start : nx_block_stop;
	int ret = rule(&cl.net, p, nx_host_addr(&cl.net), cl.etcd.m[0].client_port);
	if (ret == -EOPNOTSUPP) {
		printf("  (n%u not cut off from etcd: %s)\n", p + 1, cl.net.why);
		return;
	}
	assert_int_equal(ret, 0);
	for (unsigned i = 0; i < NODES; i++)
		if (i != p)
			assert_int_equal(rule(&cl.net, p, nx_node_addr(&cl.net, i), 0), 0);
}

/*
 * stalled_primary -- volume @vol's primary stopped (SIGSTOP) past its lease:
 * another takes over and acknowledges new bytes; the old one, continued,
 * is asked through a handle it opened before. Returns how many of 20 reads
 * there returned the old bytes (a deposed primary serving stale data).
 */
static unsigned stalled_primary(const char *vol)
{
	create(vol);
	struct cluster_volume_rec rec;
	assert_int_equal(nx_volume_key(cl.etcd.spec, vol, &rec), 0);
	unsigned p = nx_node_index(rec.primary);
	static uint8_t a[4096], b[4096];
	memset(a, 0xa1, sizeof(a));
	memset(b, 0xb2, sizeof(b));
	struct rdax_conn *c;
	struct rdax_volume *v;
	assert_int_equal(rdax_connect(cl.node[p].url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, vol, &v), 0);
	assert_int_equal(rdax_write(v, 0, a, sizeof(a), RDAX_WRITE_FSYNC), 0);
	printf("  %s: SIGSTOP n%u (the primary) past its lease, cut off from etcd and its "
	       "peers\n",
	       vol, p + 1);
	isolate(p, true);
	assert_int_equal(nx_node_pause(&cl.node[p]), 0);
	unsigned np;
	for (unsigned n = 0;; n++) {
		assert_int_equal(nx_volume_key(cl.etcd.spec, vol, &rec), 0);
		if (nx_node_index(rec.primary) != p)
			break;
		if (n > 400)
			fail_msg("%s: no failover", vol);
		usleep(50 * 1000);
	}
	np = nx_node_index(rec.primary);
	struct rdax_conn *c2;
	struct rdax_volume *v2;
	for (unsigned n = 0;; n++) { /* until the new primary serves */
		assert_int_equal(rdax_connect(cl.node[np].url, NULL, &c2), 0);
		if (rdax_volume_open(c2, vol, &v2) == 0)
			break;
		rdax_disconnect(&c2);
		if (n > 400)
			fail_msg("%s: n%u does not serve", vol, np + 1);
		usleep(50 * 1000);
	}
	assert_int_equal(rdax_write(v2, 0, b, sizeof(b), RDAX_WRITE_FSYNC), 0);
	rdax_volume_close(&v2);
	rdax_disconnect(&c2);
	/*
	 * The old primary, continued, can hear of the new epoch from nobody (it
	 * is cut off from etcd and its peers, both ways: a watch event etcd had
	 * already sent would otherwise wait in its socket, and in one run a
	 * lease-ignoring node refused all 20, most likely having read it
	 * first) -- so what refuses them is its own lease bound, the mechanism
	 * under test. The reads go out while it is still stopped and wait in
	 * its socket.
	 */
	enum { READS = 20 };
	static uint8_t got[READS][4096];
	for (unsigned i = 0; i < READS; i++)
		assert_int_equal(rdax_submit_read(v, 0, got[i], sizeof(got[i]), i), 0);
	assert_int_equal(nx_node_resume(&cl.node[p]), 0);
	unsigned stale = 0, refused = 0, done = 0;
	while (done < READS) {
		struct rdax_completion cq[READS];
		int n = rdax_wait_completions(c, cq, READS - done, 1, 30000);
		assert_true(n > 0);
		for (int i = 0; i < n; i++) {
			if (cq[i].status == 0 && memcmp(got[cq[i].cookie], a, sizeof(a)) == 0)
				stale++;
			else if (cq[i].status == -RDAX_E_NOT_PRIMARY)
				refused++;
		}
		done += (unsigned)n;
	}
	printf("  %s: n%u took over and acknowledged new bytes; n%u, continued, answered its old "
	       "handle: %u stale read(s), %u refused\n",
	       vol, np + 1, p + 1, stale, refused);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	isolate(p, false);
	return stale;
}

static void test_stalled_primary(void **state)
{
	(void)state;
	assert_int_equal(stalled_primary("fs"), 0);
}

/* control lease-ignore: every node serves past its lease bound; the stale reads are seen */
static void test_control_lease_ignore(void **state)
{
	(void)state;
	assert_int_equal(nx_cluster_restart_all(&cl, "lease-ignore"), 0);
	unsigned stale = stalled_primary("fl");
	printf("  control lease-ignore: %u stale read(s) seen\n", stale);
	assert_true(stale > 0);
	for (unsigned i = 0; i < NODES; i++)
		cl.node[i].d.opts.faults = NULL;
}

/*
 * slow_reconcile -- every node with reconcile-slow (+ @faults): the take-over
 * after a kill -9 of @vol's primary reconciles for three lease TTLs before it
 * serves. The new primary must keep its lease meanwhile: it serves, and no
 * further failover follows (the epoch went up by one). Returns whether that
 * held; prints what was seen.
 */
static bool slow_reconcile(const char *vol, const char *faults)
{
	assert_int_equal(nx_cluster_restart_all(&cl, faults), 0);
	/*
	 * tries: after the restart the earlier volumes' take-overs reconcile
	 * slowly too, and with reconcile-inline their node is away meanwhile
	 */
	create_tries(vol, 6);
	struct cluster_volume_rec rec;
	assert_int_equal(nx_volume_key(cl.etcd.spec, vol, &rec), 0);
	unsigned old = nx_node_index(rec.primary);
	uint64_t epoch = rec.epoch;
	struct ck ck;
	assert_int_equal(ck_init(&ck, seed, 0, NBLOCKS, NULL), 0);
	steps(&ck, old, vol, 10);
	printf("  %s: kill -9 n%u (the primary); every node reconciles for 6 s (3 TTLs)\n", vol,
	       old + 1);
	uint64_t t = now_ms();
	assert_int_equal(nx_node_kill(&cl.node[old]), 0);
	int served = -1;
	while (served < 0 && now_ms() - t < 30000) {
		usleep(200 * 1000);
		if (nx_volume_key(cl.etcd.spec, vol, &rec) || rec.epoch <= epoch ||
		    nx_node_index(rec.primary) == old)
			continue;
		struct rdax_conn *c;
		struct rdax_volume *v;
		if (rdax_connect(cl.node[nx_node_index(rec.primary)].url, NULL, &c))
			continue;
		if (rdax_volume_open(c, vol, &v) == 0) {
			if (ck_step(&ck, v, 1) == 0)
				served = (int)nx_node_index(rec.primary);
			rdax_volume_close(&v);
		}
		rdax_disconnect(&c);
	}
	bool held = false;
	if (served < 0) {
		printf("  %s: nobody served within 30 s of the kill (epoch now %" PRIu64 ")\n", vol,
		       rec.epoch);
	} else {
		printf("  %s: n%d served %" PRIu64 " ms after the kill\n", vol, served + 1,
		       now_ms() - t);
		sleep(4); /* two TTLs: a lease lost during the reconcile shows as a new failover */
		assert_int_equal(nx_volume_key(cl.etcd.spec, vol, &rec), 0);
		printf("  %s: epoch %" PRIu64 " (was %" PRIu64 "), primary %s\n", vol, rec.epoch,
		       epoch, rec.primary);
		held = rec.epoch == epoch + 1 && nx_node_index(rec.primary) == (unsigned)served;
		if (held && verify_on(&ck, (unsigned)served, vol))
			fail_msg("the new primary n%d: %s", served + 1, ck.why);
	}
	ck_free(&ck);
	return held;
}

/* a reconcile longer than the lease: the new primary keeps its lease and serves */
static void test_slow_reconcile(void **state)
{
	(void)state;
	if (!slow_reconcile("fr", "reconcile-slow"))
		fail_msg("the take-over did not survive its own reconcile");
}

/* control reconcile-inline: the reconcile blocks the lease keepalives; the take-over fails */
static void test_control_reconcile_inline(void **state)
{
	(void)state;
	bool held = slow_reconcile("fi", "reconcile-slow,reconcile-inline");
	printf("  control reconcile-inline: %s\n",
	       held ? "NOT caught" : "caught (the new primary lost its lease)");
	assert_false(held);
	for (unsigned i = 0; i < NODES; i++)
		cl.node[i].d.opts.faults = NULL;
}

int main(int argc, char **argv)
{
	seed = nx_seed(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_primary_killed),
					   cmocka_unit_test(test_stalled_primary),
					   cmocka_unit_test(test_control_outside_isr),
					   cmocka_unit_test(test_control_lease_ignore),
					   cmocka_unit_test(test_slow_reconcile),
					   cmocka_unit_test(test_control_reconcile_inline)};
	return cmocka_run_group_tests(tests, setup, teardown);
}
