/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_faults.c -- replicated volumes served by rdaxd under network faults and etcd outages
 *
 * etcd and three nodes in namespaces; "lf" is created with --replicas 3 and a
 * client (librdax, in the hub) writes and fsyncs through its primary with
 * the checker throughout. Faults, each healed before the next:
 *   - a replica's link down (a partition from everything): every fsync
 *     acknowledged after it finds the replica out of etcd's ISR (invariant
 *     2); link up: rdaxd resyncs it while the checker writes, it rejoins, its
 *     whole copy equals the primary's;
 *   - delay (nx_delay, 20 ms a packet) and loss (every 7th packet dropped)
 *     on a replica's link: acknowledgements go on, nobody leaves the ISR;
 *   - etcd stopped under load with nobody failing: acknowledgements go on
 *     (no ISR change is needed), etcd restarted;
 *   - etcd stopped and a replica stalled (SIGSTOP): an fsync stays
 *     unacknowledged for 5 s (the shrink cannot be made), and is
 *     acknowledged only once etcd is back and the replica left the ISR;
 *     the primary's lease bound passed meanwhile, and it renews before it
 *     acknowledges, so the requests after it are served;
 * after every heal every ISR member reads back every acknowledged block.
 * The checker's control (an fsync acknowledged before the replicas
 * answered must be caught) is cluster_e2e's repl-ack-early round.
 *
 *   test_cluster_faults [--seed N]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
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
#include "librdax.h"
#include "member.h"

#define NODES	3
#define NBLOCKS 512

static uint64_t seed = 1;
static const char *volname = "lf";
static struct nx_cluster cl;
static struct ck ck;
static unsigned primary;
static struct rdax_conn *pc;
static struct rdax_volume *pv;

static int setup(void **state)
{
	(void)state;
	return nx_cluster_start(&cl, "clflt", NODES, seed, true, NULL) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	return nx_cluster_stop(&cl);
}


static bool in_isr(unsigned i)
{
	struct cluster_volume_rec rec;
	char nd[8];
	snprintf(nd, sizeof(nd), "n%u", i + 1);
	assert_int_equal(nx_volume_key(cl.etcd.spec, volname, &rec), 0);
	return cluster_name_in(rec.isr, rec.nisr, nd);
}

/* steps -- @n checker steps through the primary; with @down, each ack must find it out */
static unsigned steps(unsigned n, int down)
{
	unsigned violations = 0;
	for (unsigned i = 0; i < n; i++) {
		int ret = ck_step(&ck, pv, 3);
		if (ret)
			fail_msg("checker step: %s (%s)", rdax_strerror(ret),
				 rdax_conn_last_error(pc));
		if (down >= 0 && in_isr((unsigned)down)) {
			violations++;
			printf(
			    "  VIOLATION: fsync acknowledged while n%d (away) is in etcd's ISR\n",
			    down + 1);
		}
	}
	return violations;
}

/* verify -- every ISR member reads back every acknowledged block */
static void verify(const char *when)
{
	struct cluster_volume_rec rec;
	assert_int_equal(nx_volume_key(cl.etcd.spec, volname, &rec), 0);
	for (unsigned k = 0; k < rec.nisr; k++) {
		unsigned i = nx_node_index(rec.isr[k]);
		struct rdax_conn *c;
		struct rdax_volume *v;
		assert_int_equal(
		    nx_member_open(cl.etcd.spec, rec.isr[k], cl.node[i].url, volname, &c, &v), 0);
		int ret = ck_verify(&ck, v);
		rdax_volume_close(&v);
		rdax_disconnect(&c);
		if (ret)
			fail_msg("%s: ISR member %s: %s", when, rec.isr[k], ck.why);
	}
	printf("  %s: every ISR member (%u) reads back every acknowledged block\n", when, rec.nisr);
}

/* rejoin -- checker steps until node @i is back in etcd's ISR; then its copy equals the primary's
 */
static void rejoin(unsigned i)
{
	unsigned n = 0;
	while (!in_isr(i)) {
		if (n++ > 600)
			fail_msg("n%u did not rejoin the ISR", i + 1);
		steps(1, -1);
		usleep(50 * 1000);
	}
	steps(5, -1);
	struct cluster_volume_rec rec;
	assert_int_equal(nx_volume_key(cl.etcd.spec, volname, &rec), 0);
	uint8_t *a = malloc(rec.size), *b = malloc(rec.size);
	assert_non_null(a);
	assert_non_null(b);
	unsigned who[2] = {primary, i};
	uint8_t *bufs[2] = {a, b};
	for (unsigned k = 0; k < 2; k++) {
		struct rdax_conn *c;
		struct rdax_volume *v;
		char nd[8];
		snprintf(nd, sizeof(nd), "n%u", who[k] + 1);
		assert_int_equal(
		    nx_member_open(cl.etcd.spec, nd, cl.node[who[k]].url, volname, &c, &v), 0);
		assert_int_equal(rdax_read(v, 0, bufs[k], rec.size), 0);
		rdax_volume_close(&v);
		rdax_disconnect(&c);
	}
	/* the checker keeps writing meanwhile only through steps(); none run during the reads */
	if (memcmp(a, b, rec.size) != 0)
		fail_msg("n%u's copy differs from the primary's after its rejoin", i + 1);
	free(a);
	free(b);
	printf("  n%u rejoined the ISR after %u steps of resync; its whole copy equals the "
	       "primary's\n",
	       i + 1, n);
}

/* An fsync step on a thread of its own, to see it held. */
struct held {
	int ret;
	bool done;
	pthread_t t;
};

static void *held_step(void *arg)
{
	struct held *h = arg;
	h->ret = ck_step(&ck, pv, 3);
	__atomic_store_n(&h->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void test_faults(void **state)
{
	(void)state;
	const char *argv[] = {RDAX_CLI_PATH, "--cluster",  cl.etcd.spec, "--timeout",
			      "20",	     "volume",	   "create",	 volname,
			      "8M",	     "--replicas", "3",		 NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	if (r.status)
		fail_msg("volume create: %s", r.err);
	hx_run_free(&r);
	struct cluster_volume_rec rec;
	assert_int_equal(nx_volume_key(cl.etcd.spec, volname, &rec), 0);
	primary = nx_node_index(rec.primary);
	unsigned a = (primary + 1) % NODES, b = (primary + 2) % NODES;
	printf("  %s: primary n%u, replicas n%u n%u\n", volname, primary + 1, a + 1, b + 1);
	assert_int_equal(ck_init(&ck, seed, 0, NBLOCKS, NULL), 0);
	assert_int_equal(rdax_connect(cl.node[primary].url, NULL, &pc), 0);
	assert_int_equal(rdax_volume_open(pc, volname, &pv), 0);
	steps(10, -1);

	if (!cl.net.isolated) {
		printf("  SKIP link down, delay, loss: %s\n", cl.net.why);
	} else {
		printf("  link down n%u\n", a + 1);
		assert_int_equal(nx_link_down(&cl.net, a), 0);
		assert_int_equal(steps(20, (int)a), 0);
		verify("link down");
		assert_int_equal(nx_link_up(&cl.net, a), 0);
		rejoin(a);
		verify("after the link came back");

		printf("  delay 20 ms on n%u's link\n", b + 1);
		assert_int_equal(nx_delay_start(&cl.net, b, 20), 0);
		steps(20, -1);
		uint64_t packets = 0;
		assert_int_equal(nx_delay_stop(&cl.net, b, &packets), 0);
		printf("  %" PRIu64 " packets delayed; n%u %s the ISR\n", packets, b + 1,
		       in_isr(b) ? "stayed in" : "LEFT");
		assert_true(packets > 0);
		assert_true(in_isr(b));
		verify("after the delay");

		printf("  loss: every 7th packet of n%u dropped\n", b + 1);
		assert_int_equal(nx_loss_start(&cl.net, b, 7, 0), 0);
		steps(30, -1);
		uint64_t dropped = 0;
		assert_int_equal(nx_loss_stop(&cl.net, b, &dropped), 0);
		printf("  %" PRIu64 " packets dropped; n%u %s the ISR\n", dropped, b + 1,
		       in_isr(b) ? "stayed in" : "left (resynced below)");
		assert_true(dropped > 0);
		if (!in_isr(b))
			rejoin(b);
		verify("after the loss");
	}

	/* etcd stopped under load: nobody fails, so no ISR change is needed: acks go on */
	printf("  etcd stopped under load\n");
	ef_member_stop(&cl.etcd, 0);
	steps(20, -1);
	assert_int_equal(ef_member_restart(&cl.etcd, 0), 0);
	steps(5, -1);
	verify("after etcd's restart");

	/* etcd stopped, then a replica stalls: the fsync needs its removal, which waits for etcd */
	printf("  etcd stopped, SIGSTOP n%u\n", a + 1);
	ef_member_stop(&cl.etcd, 0);
	assert_int_equal(nx_node_pause(&cl.node[a]), 0);
	struct held h = {0};
	assert_int_equal(pthread_create(&h.t, NULL, held_step, &h), 0);
	/*
	 * Past the link's 2 s stall timeout: n_a failed, the shrink cannot be
	 * made. Past the primary's lease bound too (the 5 s TTL less its margin
	 * from the last keepalive): once etcd is back the primary must renew
	 * before it releases the fsync, or the next request finds it lapsed.
	 */
	sleep(5);
	bool early = __atomic_load_n(&h.done, __ATOMIC_ACQUIRE);
	printf("  after 5 s without etcd: the fsync %s\n",
	       early ? (h.ret ? "failed (wrong)" : "ACKNOWLEDGED (wrong)") : "is not acknowledged");
	assert_false(early);
	assert_int_equal(ef_member_restart(&cl.etcd, 0), 0);
	pthread_join(h.t, NULL);
	assert_int_equal(h.ret, 0);
	assert_false(in_isr(a));
	printf("  etcd back: n%u left the ISR, then the fsync was acknowledged\n", a + 1);
	assert_int_equal(nx_node_resume(&cl.node[a]), 0);
	rejoin(a);
	verify("after etcd and the stall");

	rdax_volume_close(&pv);
	rdax_disconnect(&pc);
	printf("  %" PRIu64 " fsyncs acknowledged\n", ck.acked_fsyncs);
	ck_free(&ck);
}

int main(int argc, char **argv)
{
	seed = nx_seed(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_faults)};
	return cmocka_run_group_tests(tests, setup, teardown);
}
