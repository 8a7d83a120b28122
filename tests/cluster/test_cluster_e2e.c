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
 * Over RDMA (in the VM, tests/rdma/guest-suite.sh: RDAX_IT_RDMA and
 * RDAX_IT_TCP_HOST) the same test runs with every node on the VM's RDMA
 * address: clients write one-sided into the primary, the primary's replica
 * links are RDMA (volume info says link rdma), and the fence also covers
 * the links' windows: a link of an older epoch has its window revoked, so its
 * one-sided write fails instead of landing (control replica-no-fence: it
 * lands).
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
#include "conn.h"
#include "cluster_meta.h"
#include "etcd.h"
#include "librdax.h"
#include "member.h"

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
	assert_int_equal(nx_volume_key(cl.etcd.spec, volname, v), 0);
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
		unsigned i = nx_node_index(rec.isr[k]);
		struct rdax_conn *c;
		struct rdax_volume *v;
		assert_int_equal(
		    nx_member_open(cl.etcd.spec, rec.isr[k], cl.node[i].url, volname, &c, &v), 0);
		int ret = ck_verify(ck, v);
		rdax_volume_close(&v);
		rdax_disconnect(&c);
		if (ret)
			fail_msg("ISR member %s: %s", rec.isr[k], ck->why);
		printf("  %s (in the ISR) reads back every acknowledged block\n", rec.isr[k]);
	}
}

/*
 * rejoin -- checker steps through the primary until @victim is back in
 * etcd's ISR (rdaxd resyncs it while the writes go on); the steps taken
 */
static unsigned rejoin(struct ck *ck, unsigned primary, unsigned victim)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	char name[8];
	snprintf(name, sizeof(name), "n%u", victim + 1);
	assert_int_equal(rdax_connect(cl.node[primary].url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, volname, &v), 0);
	unsigned steps = 0;
	struct cluster_volume_rec rec;
	for (volume(&rec); !cluster_name_in(rec.isr, rec.nisr, name); volume(&rec)) {
		if (steps++ > 600)
			fail_msg("%s did not rejoin the ISR of %s", name, volname);
		assert_int_equal(ck_step(ck, v, 3), 0);
		usleep(50 * 1000);
	}
	/* a few more: the rejoined member gets the writes and fsyncs as any ISR member */
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(ck_step(ck, v, 3), 0);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	printf("  %s back in the ISR of %s after %u checker steps during its resync\n", name,
	       volname, steps);
	return steps;
}

/* same_copy -- node @i's whole copy equals the primary's (byte compare) */
static void same_copy(unsigned primary, unsigned i)
{
	struct cluster_volume_rec rec;
	volume(&rec);
	uint8_t *a = malloc(rec.size), *b = malloc(rec.size);
	assert_non_null(a);
	assert_non_null(b);
	uint8_t *bufs[2] = {a, b};
	unsigned who[2] = {primary, i};
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
	if (memcmp(a, b, rec.size) != 0)
		fail_msg("n%u's copy of %s differs from the primary's", i + 1, volname);
	printf("  n%u's whole copy (%" PRIu64 " bytes) equals the primary's\n", i + 1, rec.size);
	free(a);
	free(b);
}

/* rdma -- the nodes talk RDMA (their URLs are rdma://) */
static bool rdma(void)
{
	return hx_rdma_addr() != NULL;
}

/*
 * info_state -- rdax volume info --json of @volname: the replica @node's
 * state, link (@link NULL: not wanted) and shipped bytes
 */
static void info_state(const char *node, char *state, size_t len, char *link, uint64_t *shipped)
{
	const char *argv[] = {RDAX_CLI_PATH, "--cluster", cl.etcd.spec, "volume",
			      "info",	     volname,	  "--json",	NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	assert_int_equal(r.status, 0);
	/* "node": "n2", "state": "in-sync", ... "resync_bytes_shipped": N -- in this order */
	char pat[32];
	snprintf(pat, sizeof(pat), "\"node\": \"%s\"", node);
	const char *at = strstr(r.out, pat);
	assert_non_null(at);
	const char *st = strstr(at, "\"state\": \"");
	assert_non_null(st);
	st += strlen("\"state\": \"");
	size_t n = strcspn(st, "\"");
	snprintf(state, len, "%.*s", (int)n, st);
	const char *lk = strstr(at, "\"link\": \"");
	assert_non_null(lk);
	lk += strlen("\"link\": \"");
	if (link)
		snprintf(link, len, "%.*s", (int)strcspn(lk, "\""), lk);
	const char *sh = strstr(at, "\"resync_bytes_shipped\": ");
	assert_non_null(sh);
	*shipped = strtoull(sh + strlen("\"resync_bytes_shipped\": "), NULL, 10);
	hx_run_free(&r);
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
	unsigned primary = nx_node_index(rec.primary), victim = (primary + 1) % NODES;
	printf("  e2e: primary %s, ISR of %u\n", rec.primary, rec.nisr);
	assert_int_equal(rec.nisr, 3);
	struct ck ck;
	assert_int_equal(ck_init(&ck, seed, 0, NBLOCKS, NULL), 0);
	assert_int_equal(round_with_fault(&ck, primary, victim, false), 0);
	verify(&ck);
	/* the restarted replica is resynced by rdaxd while the checker writes, and rejoins */
	rejoin(&ck, primary, victim);
	verify(&ck);
	same_copy(primary, victim);
	char vn[8], st[16], lk[16];
	uint64_t shipped;
	snprintf(vn, sizeof(vn), "n%u", victim + 1);
	for (unsigned i = 0; i < 50; i++) { /* status keys follow within a tick */
		info_state(vn, st, sizeof(st), lk, &shipped);
		if (strcmp(st, "in-sync") == 0 && shipped > 0)
			break;
		usleep(100 * 1000);
	}
	printf("  volume info: %s %s, link %s, %" PRIu64 " bytes shipped by resyncs\n", vn, st, lk,
	       shipped);
	assert_string_equal(st, "in-sync");
	assert_true(shipped > 0);
	/* where both nodes serve RDMA the link is RDMA (one-sided writes), else TCP */
	assert_string_equal(lk, rdma() ? "rdma" : "tcp");
	unsigned second = (primary + 2) % NODES;
	assert_int_equal(round_with_fault(&ck, primary, second, true), 0);
	verify(&ck);
	rejoin(&ck, primary, second);
	verify(&ck);
	same_copy(primary, second);

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
	primary = nx_node_index(rec.primary);
	cl.node[primary].d.opts.faults = "repl-ack-early";
	assert_int_equal(nx_node_kill(&cl.node[primary]), 0);
	assert_int_equal(nx_node_restart(&cl.node[primary]), 0);
	unsigned v = round_with_fault(&ck, primary, (primary + 1) % NODES, true);
	printf("  control repl-ack-early: %u violation(s) seen\n", v);
	assert_true(v > 0);
	/* the control's node runs without the fault from here on */
	cl.node[primary].d.opts.faults = NULL;
	assert_int_equal(nx_node_kill(&cl.node[primary]), 0);
	assert_int_equal(nx_node_restart(&cl.node[primary]), 0);
	ck_free(&ck);
}

/* create -- rdax --cluster ... volume create @name @size --replicas 3 */
static void create(const char *name, const char *size)
{
	const char *argv[] = {RDAX_CLI_PATH, "--cluster",  cl.etcd.spec, "--timeout",
			      "20",	     "volume",	   "create",	 name,
			      size,	     "--replicas", "3",		 NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	if (r.status)
		fail_msg("volume create %s: %s", name, r.err);
	hx_run_free(&r);
}

/*
 * stale_write -- open "fen" on node @i as @primary's link at @epoch and write
 * @byte at 0: the open's code, then the write's (1 if the open failed)
 */
static int stale_write(unsigned i, const char *primary, uint64_t epoch, uint8_t byte,
		       int *write_ret)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	static uint8_t buf[4096];
	memset(buf, byte, sizeof(buf));
	*write_ret = 1;
	assert_int_equal(rdax_connect(cl.node[i].url, NULL, &c), 0);
	int ret = conn_volume_open_replica(c, "fen", epoch, primary, 0, &v);
	if (ret == 0) {
		*write_ret = rdax_write(v, 0, buf, sizeof(buf), RDAX_WRITE_FSYNC);
		rdax_volume_close(&v);
	}
	rdax_disconnect(&c);
	return ret;
}

/* first_byte -- byte 0 of node @i's copy of "fen", read at the copy's epoch @epoch */
static uint8_t first_byte(unsigned i, const char *primary, uint64_t epoch)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	uint8_t b = 0;
	assert_int_equal(rdax_connect(cl.node[i].url, NULL, &c), 0);
	assert_int_equal(conn_volume_open_replica(c, "fen", epoch, primary, 0, &v), 0);
	assert_int_equal(rdax_read(v, 0, &b, 1), 0);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	return b;
}

/*
 * test_fence -- a replica serves only its primary, and only at the newest
 * epoch it has seen (invariant 4), durably; control replica-no-fence
 */
static void test_fence(void **state)
{
	(void)state;
	volname = "fen";
	create("fen", "4M");
	struct cluster_volume_rec rec;
	volume(&rec);
	unsigned p = nx_node_index(rec.primary), a = (p + 1) % NODES, b = (p + 2) % NODES;
	char an[8], bn[8];
	snprintf(an, sizeof(an), "n%u", a + 1);
	snprintf(bn, sizeof(bn), "n%u", b + 1);
	uint64_t e = rec.epoch;
	printf("  fen: primary %s epoch %" PRIu64 "; replica %s is asked\n", rec.primary, e, an);

	/* an ordinary client at a replica: refused with the primary's address */
	struct rdax_conn *c;
	struct rdax_volume *v;
	assert_int_equal(rdax_connect(cl.node[a].url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, "fen", &v), -RDAX_E_NOT_PRIMARY);
	printf("  client open at %s: %s (primary at %s)\n", an, rdax_conn_last_error(c),
	       rdax_conn_primary_url(c));
	/* its tcp:// address (the node's URL is rdma:// over RDMA): the same host and port */
	assert_string_equal(strstr(rdax_conn_primary_url(c), "://"), strstr(cl.node[p].url, "://"));
	rdax_disconnect(&c);

	/* a link from a node that is not the primary at this epoch */
	int w;
	assert_int_equal(stale_write(a, bn, e, 0xbb, &w), -RDAX_E_NOT_PRIMARY);
	/* a link of the primary at the epoch, kept open across the raise below */
	struct rdax_conn *c2;
	struct rdax_volume *v2;
	assert_int_equal(rdax_connect(cl.node[a].url, NULL, &c2), 0);
	assert_int_equal(conn_volume_open_replica(c2, "fen", e, rec.primary, 0, &v2), 0);
	assert_int_equal(stale_write(a, rec.primary, e, 0x11, &w), 0);
	assert_int_equal(w, 0);
	/* a newer epoch (a failover this node may not have seen yet): accepted, persisted */
	assert_int_equal(stale_write(a, rec.primary, e + 1, 0x22, &w), 0);
	assert_int_equal(w, 0);
	/* the handle opened before the raise: its write is refused, not applied */
	static uint8_t buf[4096];
	memset(buf, 0x44, sizeof(buf));
	int wr = rdax_write(v2, 0, buf, sizeof(buf), RDAX_WRITE_FSYNC);
	printf("  a link of epoch %" PRIu64 " after %" PRIu64 " was seen: %s\n", e, e + 1,
	       rdax_conn_last_error(c2));
	/* over RDMA the window is gone: the one-sided write fails on the wire */
	if (rdma())
		assert_true(wr != 0);
	else
		assert_int_equal(wr, -RDAX_E_STALE_EPOCH);
	assert_int_equal(first_byte(a, rec.primary, e + 1), 0x22); /* not applied */
	rdax_volume_close(&v2);
	rdax_disconnect(&c2);
	/* the old epoch now: refused at open; one far ahead: not believed */
	assert_int_equal(stale_write(a, rec.primary, e, 0x33, &w), -RDAX_E_STALE_EPOCH);
	assert_int_equal(stale_write(a, rec.primary, e + 5, 0x55, &w), -EAGAIN);
	assert_int_equal(first_byte(a, rec.primary, e + 1), 0x22);

	/* the epoch survives a power cut of the replica */
	assert_int_equal(nx_node_kill(&cl.node[a]), 0);
	assert_int_equal(nx_node_restart(&cl.node[a]), 0);
	assert_int_equal(stale_write(a, rec.primary, e, 0x55, &w), -RDAX_E_STALE_EPOCH);
	assert_int_equal(first_byte(a, rec.primary, e + 1), 0x22);
	printf("  after kill -9 and restart %s still refuses epoch %" PRIu64 "\n", an, e);

	/* the real primary's link is stale at that replica now: it leaves the ISR */
	assert_int_equal(rdax_connect(cl.node[p].url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, "fen", &v), 0);
	memset(buf, 0x66, sizeof(buf));
	assert_int_equal(rdax_write(v, 4096, buf, sizeof(buf), RDAX_WRITE_FSYNC), 0);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	volume(&rec);
	assert_false(cluster_name_in(rec.isr, rec.nisr, an));
	printf("  the primary's write after the raise: %s left the ISR first\n", an);

	/* control: with the fence off the stale link's write lands */
	cl.node[a].d.opts.faults = "replica-no-fence";
	assert_int_equal(nx_node_kill(&cl.node[a]), 0);
	assert_int_equal(nx_node_restart(&cl.node[a]), 0);
	int open = stale_write(a, rec.primary, e, 0x77, &w);
	uint8_t got = first_byte(a, rec.primary, e + 1);
	printf("  control replica-no-fence: open of epoch %" PRIu64 " %d, write %d, byte 0 %#x\n",
	       e, open, w, got);
	/*
	 * the stale write was opened and acknowledged durable: the fence is what
	 * stops it. (Its byte is printed, not asserted: the primary resyncs this
	 * copy, which was out of the ISR, and may put its own byte back first.)
	 */
	assert_int_equal(open, 0);
	assert_int_equal(w, 0);
	/* and a link kept open across a raise writes on (over RDMA: its window stays) */
	assert_int_equal(rdax_connect(cl.node[a].url, NULL, &c2), 0);
	assert_int_equal(conn_volume_open_replica(c2, "fen", e + 1, rec.primary, 0, &v2), 0);
	assert_int_equal(stale_write(a, rec.primary, e + 2, 0x88, &w), 0);
	memset(buf, 0x99, sizeof(buf));
	wr = rdax_write(v2, 0, buf, sizeof(buf), RDAX_WRITE_FSYNC);
	rdax_volume_close(&v2);
	rdax_disconnect(&c2);
	got = first_byte(a, rec.primary, e + 2);
	printf("  control replica-no-fence: a link of epoch %" PRIu64 " open across the raise to "
	       "%" PRIu64 ": write %d, byte 0 %#x\n",
	       e + 1, e + 2, wr, got);
	assert_int_equal(wr, 0); /* acknowledged durable across the raise (byte: as above) */
	cl.node[a].d.opts.faults = NULL;
	assert_int_equal(nx_node_kill(&cl.node[a]), 0);
	assert_int_equal(nx_node_restart(&cl.node[a]), 0);
}

int main(int argc, char **argv)
{
	seed = nx_seed(argc, argv);
	/*
	 * In the VM (TCG, no KVM) every etcd call of the nodes is slow: with the
	 * default 5 s lease a node's keepalives fell behind, its lease expired and
	 * failovers started mid-test. This test is not about failover.
	 */
	if (rdma())
		nx_cluster_extra_arg = "--lease-ttl=30";
	setvbuf(stdout, NULL, _IOLBF, 0);
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_replica_killed),
					   cmocka_unit_test(test_fence)};
	return cmocka_run_group_tests(tests, setup, teardown);
}
