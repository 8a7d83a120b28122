/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_replication.c -- the primary's replication under faults, with the checker
 *
 * etcd and three rdaxd nodes (n1, n2, n3) in their network namespaces. The
 * volume "rep" is placed on the test's own primary "tp" and on n2 and n3
 * (the test writes its key: replicas [tp, n2, n3], ISR all three, min 1, and
 * the leader key of tp); the nodes' cluster threads create their local
 * replicas. The test process is the primary: its mapping is the primary's
 * copy, repl_volume forwards to n2 and n3 over replica links, and ISR shrinks
 * run the real transaction (cluster_isr_change) against etcd. The checker
 * writes 4 KiB blocks from the seed through it and fsyncs.
 *
 * What must hold, checked after every acknowledged fsync while a fault is on
 * and after every heal:
 *   - invariant 2: when an fsync is acknowledged, every member still in the
 *     ISR recorded in etcd has confirmed it -- concretely, a replica that is
 *     down is no longer in etcd's ISR when an fsync after its failure is
 *     acknowledged;
 *   - invariant 1 (the checker): every member in etcd's ISR reads back every
 *     acknowledged block, none older, none invented;
 *   - a primary that cannot reach etcd acknowledges nothing that needs a
 *     shrink: with etcd stopped and a replica stalled, the fsync stays
 *     unacknowledged until etcd is back and the shrink is made.
 * Faults: delay on n2's link (acks go on), kill -9 of n3 (sim mode: a power
 * cut), loss on n3's link (acks go on), n2's link down (it leaves the ISR;
 * up again, it resyncs), etcd stopped under load (acks go on: no ISR
 * change is needed), SIGSTOP of n2 with etcd stopped, then etcd restarted.
 * Resync: 4 MiB written while n3 is away, then repl_resync() of n3 while
 * the checker keeps writing: it ships only what the primary's change record
 * marks (at most the 4 MiB plus the checker's one region), rejoins the ISR,
 * reads back every acknowledged block, and its whole volume equals the
 * primary's copy.
 * Control: RDAX_FAULTS' repl-ack-early (an fsync acknowledged without waiting
 * for the replicas) in the same kill -9 round must be caught -- by the
 * invariant-2 check, or by the checker finding an acknowledged block
 * missing on an ISR member.
 *
 *   test_replication [--seed N]   (default: $RDAX_CLUSTER_SEED, else 1)
 *   test_replication --campaign [ROUNDS] [--seed N]
 *       the longer campaign, its own command: ROUNDS (default 10) of a random
 *       fault (kill -9, SIGSTOP, link down, delay, loss) on a random replica
 *       from the seed, each healed, resynced and verified
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "checker.h"
#include "cluster_meta.h"
#include "cluster_txn.h"
#include "completion.h"
#include "etcd.h"
#include "cluster_fixture.h"
#include "etcd_fixture.h"
#include "faults.h"
#include "harness.h"
#include "member.h"
#include "net.h"
#include "node.h"
#include "change_record.h"
#include "persist.h"
#include "repl_volume.h"

#define NODES	 3
#define VOL_SIZE (48ULL << 20) /* the nodes' namespaces are 64 MiB */
#define NBLOCKS	 512	       /* the checker's blocks: the first 2 MiB region */
#define DELTA	 (4ULL << 20)  /* written while n3 is away, at DELTA_AT */
#define DELTA_AT (24ULL << 20)
#define STALL_AT (40ULL << 20) /* the stalled-replica round's own write */
#define LINK_MS	 500
#define CLUSTER	 "default"
#define PRIMARY	 "tp"

static uint64_t seed = 1;
static struct nx_cluster cl;
static uint8_t *mapping;
static struct persist rec_pm; /* the primary's change record, in the simulator */
static struct change_record rec;
static const char *volname = "rep";  /* the control uses a fresh volume */
static uint64_t vol_size = VOL_SIZE; /* and a smaller one: both must fit a node */

/* --- the primary's shrink worker: what the cluster thread does for rdaxd --- */

static pthread_mutex_t sh_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sh_cond = PTHREAD_COND_INITIALIZER;
static char sh_queue[8][CLUSTER_NAME_MAX + 1];
static unsigned sh_n;
static bool sh_stop;
static struct repl_volume *sh_rv;
static pthread_t sh_thread;

static void on_shrink(void *arg, struct repl_volume *rv, const char *nd)
{
	(void)arg;
	pthread_mutex_lock(&sh_lock);
	sh_rv = rv;
	if (sh_n < 8)
		snprintf(sh_queue[sh_n++], CLUSTER_NAME_MAX + 1, "%s", nd);
	pthread_cond_signal(&sh_cond);
	pthread_mutex_unlock(&sh_lock);
}

/* shrinker -- runs each shrink until etcd gives a definite answer (retrying while unreachable) */
static void *shrinker(void *arg)
{
	(void)arg;
	struct etcd_client *e;
	char err[256];
	if (etcd_client_new(cl.etcd.spec, NULL, &e, err, sizeof(err)))
		return NULL;
	pthread_mutex_lock(&sh_lock);
	while (!sh_stop) {
		if (sh_n == 0) {
			pthread_cond_wait(&sh_cond, &sh_lock);
			continue;
		}
		char nd[CLUSTER_NAME_MAX + 1];
		snprintf(nd, sizeof(nd), "%s", sh_queue[0]);
		memmove(sh_queue, sh_queue + 1, sizeof(sh_queue[0]) * --sh_n);
		struct repl_volume *rv = sh_rv;
		pthread_mutex_unlock(&sh_lock);
		int ret;
		for (;;) {
			ret = cluster_isr_change(e, CLUSTER, volname, PRIMARY, 1, nd, false, NULL,
						 err, sizeof(err));
			/* only etcd's definite answers end it; anything else may be etcd away */
			if (ret == 0 || ret == -ESTALE || ret == -EDQUOT || ret == -ENOENT ||
			    ret == -EINVAL)
				break;
			usleep(200 * 1000); /* etcd away: nothing is acknowledged meanwhile */
			pthread_mutex_lock(&sh_lock);
			bool stop = sh_stop;
			pthread_mutex_unlock(&sh_lock);
			if (stop)
				break;
		}
		printf("  shrink %s: %s\n", nd, ret ? err : "left the ISR in etcd");
		repl_removed(rv, nd, ret);
		pthread_mutex_lock(&sh_lock);
	}
	pthread_mutex_unlock(&sh_lock);
	etcd_client_delete(&e);
	return NULL;
}

/* --- etcd views ------------------------------------------------------------ */

static int read_volume(struct cluster_volume_rec *v)
{
	struct etcd_client *e;
	char err[256], key[CLUSTER_KEY_MAX];
	if (etcd_client_new(cl.etcd.spec, NULL, &e, err, sizeof(err)))
		return -1;
	cluster_key(key, sizeof(key), CLUSTER, "volumes", volname, NULL);
	struct etcd_range_result r;
	int ret = etcd_get(e, key, false, &r);
	if (ret == 0)
		ret = r.count == 1 ? cluster_volume_decode(r.kvs[0].value, r.kvs[0].value_len, v,
							   err, sizeof(err))
				   : -ENOENT;
	if (r.count || ret == 0)
		etcd_range_result_free(&r);
	etcd_client_delete(&e);
	return ret;
}

static bool in_isr(const char *nd)
{
	struct cluster_volume_rec v;
	assert_int_equal(read_volume(&v), 0);
	return cluster_name_in(v.isr, v.nisr, nd);
}

/* put -- write a key (no lease) */
static void put(const char *key, const char *json)
{
	struct etcd_client *e;
	char err[256];
	assert_int_equal(etcd_client_new(cl.etcd.spec, NULL, &e, err, sizeof(err)), 0);
	assert_int_equal(etcd_put(e, key, json, strlen(json), 0, NULL), 0);
	etcd_client_delete(&e);
}

/* --- the primary's write path, as the checker sees it ------------------------ */

struct fsync_wait {
	struct repl_wait w;
	struct completion c;
};

static void fsync_done(struct repl_wait *w, int status)
{
	completion_complete(&((struct fsync_wait *)w)->c, status);
}

static struct repl_volume *rv;
static const char *down_node; /* a member known down: must be out of etcd's ISR at every ack */
static unsigned violations;
static int fsync_wait_ms = 20000;

static int p_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	(void)arg;
	repl_before_write(rv, off, len);
	memcpy(mapping + off, buf, len);
	repl_write(rv, off, len);
	return 0;
}

/* p_fsync -- the primary's fsync: the local copy is the test's memory, so only the replicas */
static int p_fsync(void *arg, uint64_t off, uint64_t len)
{
	(void)arg;
	struct fsync_wait f = {.w = {.done = fsync_done}};
	completion_init(&f.c);
	repl_fsync(rv, off, len, &f.w);
	int status = 0;
	bool done = completion_wait(&f.c, fsync_wait_ms, &status);
	if (!done) {
		/* the wait belongs to rv still: leave it (the test fails) rather than free it */
		struct repl_member_info mi[4];
		unsigned n = repl_members(rv, mi, 4);
		for (unsigned i = 0; i < n; i++)
			printf("  member %s state %d link writes %" PRIu64 " fsyncs %" PRIu64
			       " failed %d\n",
			       mi[i].node, mi[i].state, mi[i].link.writes, mi[i].link.fsyncs,
			       mi[i].link.failed);
		hx_daemon_dump_log(&cl.node[1].d, 4096);
		hx_daemon_dump_log(&cl.node[2].d, 4096);
		fail_msg("an fsync neither acknowledged nor failed in %d ms", fsync_wait_ms);
	}
	if (status == 0 && down_node && in_isr(down_node)) {
		violations++;
		printf("  VIOLATION: fsync acknowledged while down replica %s is in etcd's ISR\n",
		       down_node);
	}
	return status;
}

static const struct ck_io pio = {.write = p_write, .fsync = p_fsync};

/* verify_isr -- every member of etcd's ISR (but tp) reads back every acknowledged block */
static bool count_only; /* the control: a violation is counted, not fatal */

static void verify_isr(struct ck *ck, const char *when)
{
	struct cluster_volume_rec v;
	assert_int_equal(read_volume(&v), 0);
	for (unsigned i = 0; i < NODES; i++) {
		char nd[8];
		snprintf(nd, sizeof(nd), "n%u", i + 1);
		if (!cluster_name_in(v.isr, v.nisr, nd))
			continue;
		struct rdax_conn *c;
		struct rdax_volume *vol;
		assert_int_equal(
		    nx_member_open(cl.etcd.spec, nd, cl.node[i].url, volname, &c, &vol), 0);
		int ret = ck_verify(ck, vol);
		rdax_volume_close(&vol);
		rdax_disconnect(&c);
		if (ret && count_only) {
			violations++;
			printf("  VIOLATION: %s: ISR member %s: %s\n", when, nd, ck->why);
			continue;
		}
		if (ret) {
			hx_daemon_dump_log(&cl.node[i].d, 16384);
			fail_msg("%s: ISR member %s: %s", when, nd, ck->why);
		}
		printf("  %s: %s (in the ISR) reads back every acknowledged block\n", when, nd);
	}
}

static int setup(void **state)
{
	(void)state;
	if (nx_cluster_start(&cl, "clrep", NODES, seed, true, NULL) != 0)
		return -1;
	mapping = calloc(1, VOL_SIZE);
	if (!mapping)
		return -1;
	char path[320];
	snprintf(path, sizeof(path), "%s/primary.rec", cl.dir);
	return persist_create(path, change_record_size(VOL_SIZE), PERSIST_SIM, &rec_pm);
}

static int teardown(void **state)
{
	(void)state;
	free(mapping);
	persist_unmap(&rec_pm);
	return nx_cluster_stop(&cl);
}

/* place -- the volume key with tp as primary, n2 and n3 as replicas; their copies appear */
static void place(void)
{
	char key[CLUSTER_KEY_MAX], json[512];
	cluster_key(key, sizeof(key), CLUSTER, "volumes", volname, NULL);
	snprintf(json, sizeof(json),
		 "{\"name\":\"%s\",\"size\":%llu,\"replicas\":[\"tp\",\"n2\",\"n3\"],"
		 "\"min_replicas\":1,\"isr\":[\"tp\",\"n2\",\"n3\"],\"primary\":\"tp\",\"epoch\":1,"
		 "\"state\":\"ready\"}",
		 volname, (unsigned long long)vol_size);
	put(key, json);
	cluster_key(key, sizeof(key), CLUSTER, "volumes", volname, "leader", NULL);
	put(key, "{\"node\":\"tp\",\"epoch\":1,\"incarnation\":\"0000000000000001\"}");
	for (unsigned i = 1; i < NODES; i++) {
		bool there = false;
		for (int t = 0; t < 100 && !there; t++) {
			struct hx_run r;
			assert_int_equal(nx_node_cli(&cl.node[i], 20, NULL, 0, &r, "volume", "info",
						     volname, NULL),
					 0);
			there = r.status == 0;
			hx_run_free(&r);
			if (!there)
				usleep(100 * 1000);
		}
		assert_true(there);
	}
}

static void start_primary(void)
{
	struct repl_member_spec m[] = {{"n2", cl.node[1].url, NULL}, {"n3", cl.node[2].url, NULL}};
	assert_int_equal(change_record_format(&rec, rec_pm.base, rec_pm.size, &rec_pm, vol_size, 1),
			 0);
	struct repl_opts o = {.volume = volname,
			      .rec = &rec,
			      .mapping = mapping,
			      .size = vol_size,
			      .epoch = 1,
			      .primary = PRIMARY,
			      .fence = true,
			      .timeout_ms = LINK_MS,
			      .shrink = on_shrink};
	assert_int_equal(repl_start(&o, m, 2, &rv), 0);
	sh_stop = false;
	assert_int_equal(pthread_create(&sh_thread, NULL, shrinker, NULL), 0);
}

static void stop_primary(void)
{
	pthread_mutex_lock(&sh_lock);
	sh_stop = true;
	pthread_cond_signal(&sh_cond);
	pthread_mutex_unlock(&sh_lock);
	pthread_join(sh_thread, NULL);
	repl_stop(&rv);
}

/* steps -- @n acknowledged checker steps (each must be acknowledged) */
static void steps(struct ck *ck, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(ck_step_with(ck, &pio, 1 + (unsigned)(ck->steps % 5)), 0);
}

/* kill_round -- kill -9 n3 mid-stream; returns the violations seen (invariant 2, and 1) */
static unsigned kill_round(struct ck *ck)
{
	steps(ck, 30);
	verify_isr(ck, "before faults");
	printf("  kill -9 n3\n");
	assert_int_equal(nx_node_kill(&cl.node[2]), 0);
	down_node = "n3";
	steps(ck, 30);
	down_node = NULL;
	assert_int_equal(nx_node_restart(&cl.node[2]), 0);
	return violations;
}

/*
 * stop_round -- n3 stopped (SIGSTOP) mid-stream, then continued: its link
 * notices only at its timeout, so an acknowledgement that does not wait for
 * the replicas lands while n3 is still in etcd's ISR (the control's round: a
 * kill -9 is noticed at once, from the reset, and the shrink may win the
 * race with the next acknowledgement). Returns the violations seen.
 */
static unsigned stop_round(struct ck *ck)
{
	steps(ck, 30);
	verify_isr(ck, "before faults");
	printf("  SIGSTOP n3\n");
	assert_int_equal(nx_node_pause(&cl.node[2]), 0);
	down_node = "n3";
	steps(ck, 30);
	down_node = NULL;
	assert_int_equal(nx_node_resume(&cl.node[2]), 0);
	return violations;
}

/* grow -- the ISR grow transaction for a resynced member */
static int grow(void *arg, const char *nd)
{
	(void)arg;
	struct etcd_client *e;
	char err[256];
	if (etcd_client_new(cl.etcd.spec, NULL, &e, err, sizeof(err)))
		return -ENOMEM;
	int ret =
	    cluster_isr_change(e, CLUSTER, volname, PRIMARY, 1, nd, true, NULL, err, sizeof(err));
	etcd_client_delete(&e);
	printf("  grow %s: %s\n", nd, ret ? err : "back in the ISR in etcd");
	return ret;
}

struct resync_run {
	unsigned who; /* node index */
	pthread_t thread;
	int ret;
	struct repl_resync_result res;
	volatile bool done;
};

static void *resync_thread(void *arg)
{
	struct resync_run *x = arg;
	char nd[8];
	snprintf(nd, sizeof(nd), "n%u", x->who + 1);
	/* a link just brought up may not carry a connect at once: try again, as an owner would */
	for (int t = 0; t < 10; t++) {
		x->ret = repl_resync(rv, nd, cl.node[x->who].url, NULL, grow, NULL, &x->res);
		if (x->ret != -ETIMEDOUT && x->ret != -ECONNREFUSED && x->ret != -EHOSTUNREACH)
			break;
		usleep(300 * 1000);
	}
	x->done = true;
	return NULL;
}

/* copy_equal -- node @i's whole volume equals the primary's copy (digest of both) */
static bool copy_equal(unsigned i)
{
	struct rdax_conn *c;
	struct rdax_volume *vol;
	char nd[8];
	snprintf(nd, sizeof(nd), "n%u", i + 1);
	assert_int_equal(nx_member_open(cl.etcd.spec, nd, cl.node[i].url, volname, &c, &vol), 0);
	uint8_t *buf = malloc(VOL_SIZE);
	assert_non_null(buf);
	assert_int_equal(rdax_read(vol, 0, buf, VOL_SIZE), 0);
	uint64_t h1 = 0xcbf29ce484222325ULL, h2 = h1;
	for (uint64_t k = 0; k < VOL_SIZE; k++) {
		h1 = (h1 ^ buf[k]) * 0x100000001b3ULL;
		h2 = (h2 ^ mapping[k]) * 0x100000001b3ULL;
	}
	printf("  whole-volume FNV-1a: n%u %016" PRIx64 ", primary %016" PRIx64 "\n", i + 1, h1,
	       h2);
	bool equal = h1 == h2 && memcmp(buf, mapping, VOL_SIZE) == 0;
	free(buf);
	rdax_volume_close(&vol);
	rdax_disconnect(&c);
	return equal;
}

static void same_as_mapping(unsigned i)
{
	assert_true(copy_equal(i));
}

/*
 * resync_run_round -- DELTA written while node @who is away, then its resync
 * while the checker writes; @full: no record slot (a full resync by digests)
 */
static void resync_run_round(struct ck *ck, unsigned who, bool full, struct resync_run *out)
{
	/* durable 1 MiB writes (repl_write_durable: write and fsync queued together) */
	for (uint64_t off = DELTA_AT; off < DELTA_AT + DELTA; off += 1 << 20) {
		repl_before_write(rv, off, 1 << 20);
		memset(mapping + off, (int)(0x40 + (off >> 20) + who), 1 << 20);
		struct fsync_wait f = {.w = {.done = fsync_done}};
		completion_init(&f.c);
		repl_write_durable(rv, off, 1 << 20, &f.w);
		int st = -1;
		assert_true(completion_wait(&f.c, fsync_wait_ms, &st));
		assert_int_equal(st, 0);
		completion_destroy(&f.c);
	}
	struct resync_run x = {.who = who};
	assert_int_equal(pthread_create(&x.thread, NULL, resync_thread, &x), 0);
	unsigned during = 0;
	while (!x.done) { /* client writes go on meanwhile */
		assert_int_equal(ck_step_with(ck, &pio, 3), 0);
		during++;
	}
	pthread_join(x.thread, NULL);
	assert_int_equal(x.ret, 0);
	printf("  resync n%u: %" PRIu64 " region(s), %" PRIu64 " bytes shipped for %llu MiB "
	       "written while away (%u checker steps during it)%s\n",
	       who + 1, x.res.regions, x.res.bytes, DELTA >> 20, during,
	       x.res.full ? ", FULL" : "");
	/*
	 * the delta: the MiB written away plus the checker's region (what was
	 * unconfirmed); a full resync finds the same by comparing digests
	 */
	assert_true(x.res.full == full);
	assert_true(x.res.bytes <= DELTA + CHANGE_RECORD_REGION);
	*out = x;
}

/* resync_round -- resync_run_round by the record, then every check */
static void resync_round(struct ck *ck, unsigned who)
{
	struct resync_run x;
	resync_run_round(ck, who, false, &x);
	char nd[8];
	snprintf(nd, sizeof(nd), "n%u", who + 1);
	assert_true(in_isr(nd));
	steps(ck, 5);
	verify_isr(ck, "after the resync");
	same_as_mapping(2);
	same_as_mapping(1);
}

static void test_replication_faults(void **state)
{
	(void)state;
	place();
	start_primary();
	struct ck ck;
	char log[320];
	snprintf(log, sizeof(log), "%s/acked.log", cl.dir);
	assert_int_equal(ck_init(&ck, seed, 0, NBLOCKS, log), 0);

	/* delay on n2's link: slower, every ack still needs both */
	uint64_t held = 0;
	if (cl.net.isolated && nx_delay_start(&cl.net, 1, 20) == 0) {
		steps(&ck, 20);
		assert_int_equal(nx_delay_stop(&cl.net, 1, &held), 0);
		printf("  delay 20 ms on n2: %" PRIu64 " packets held, acks went on\n", held);
		assert_true(in_isr("n2") && in_isr("n3"));
	} else {
		printf("  SKIP delay: %s\n", cl.net.isolated ? "no delayer" : "no namespaces");
	}

	violations = 0;
	assert_int_equal(kill_round(&ck), 0);
	assert_false(in_isr("n3"));
	verify_isr(&ck, "after kill -9 n3 and its restart");
	resync_round(&ck, 2);

	/* loss on n3's link: TCP repairs it, acks go on, nobody leaves the ISR */
	uint64_t dropped = 0;
	if (cl.net.isolated && nx_loss_start(&cl.net, 2, 7, 3) == 0) {
		steps(&ck, 20);
		assert_int_equal(nx_loss_stop(&cl.net, 2, &dropped), 0);
		printf("  loss on n3 (every 7th packet): %" PRIu64 " dropped, acks went on\n",
		       dropped);
		assert_true(in_isr("n2") && in_isr("n3"));
	}

	/* n2's link down: it stalls, leaves the ISR; up again, it resyncs and rejoins */
	if (cl.net.isolated) {
		printf("  link down n2\n");
		assert_int_equal(nx_link_down(&cl.net, 1), 0);
		down_node = "n2";
		steps(&ck, 10);
		down_node = NULL;
		assert_false(in_isr("n2"));
		assert_int_equal(nx_link_up(&cl.net, 1), 0);
		resync_round(&ck, 1);
	}

	/* etcd stopped under load: no ISR change is needed, so acks go on */
	printf("  etcd stopped under load\n");
	ef_member_stop(&cl.etcd, 0);
	steps(&ck, 20);
	assert_int_equal(ef_member_restart(&cl.etcd, 0), 0);
	steps(&ck, 5);
	verify_isr(&ck, "after etcd's restart");

	/* etcd stopped, then n2 stalls: the fsync that needs n2 gone waits for etcd */
	printf("  etcd stopped, SIGSTOP n2\n");
	ef_member_stop(&cl.etcd, 0);
	assert_int_equal(nx_node_pause(&cl.node[1]), 0);
	struct fsync_wait f = {.w = {.done = fsync_done}};
	completion_init(&f.c);
	/* outside the checker's blocks, which are verified again below */
	memset(mapping + STALL_AT, 0x5a, 4096);
	repl_before_write(rv, STALL_AT, 4096);
	repl_write(rv, STALL_AT, 4096);
	repl_fsync(rv, STALL_AT, 4096, &f.w);
	sleep(3); /* well past the link timeout: n2 is failed, the shrink cannot be made */
	int early_status = 0;
	bool early = completion_wait(&f.c, 0, &early_status);
	printf("  after 3 s without etcd: fsync %s\n",
	       !early		   ? "not acknowledged"
	       : early_status == 0 ? "ACKNOWLEDGED (wrong)"
				   : "failed (wrong: etcd's answer was not known)");
	assert_false(early);
	assert_int_equal(ef_member_restart(&cl.etcd, 0), 0);
	int st = 0;
	assert_true(completion_wait(&f.c, 30000, &st));
	assert_int_equal(st, 0);
	assert_false(in_isr("n2"));
	printf("  etcd back: n2 left the ISR, then the fsync was acknowledged\n");
	assert_int_equal(nx_node_resume(&cl.node[1]), 0);

	/*
	 * a lost record: n3 killed and its slot dropped, as if the record were
	 * gone; its resync is full, and the digests ship only what differs
	 */
	struct resync_run x;
	steps(&ck, 10); /* n2 back after its stall, by the record */
	if (!in_isr("n2")) {
		resync_run_round(&ck, 1, false, &x);
		assert_true(in_isr("n2"));
	}
	kill_round(&ck);
	change_record_slot_close(&rec, change_record_slot_find(&rec, "n3"));
	printf("  n3's record slot dropped: a full resync by digests\n");
	resync_run_round(&ck, 2, true, &x);
	assert_true(in_isr("n3"));
	steps(&ck, 5);
	verify_isr(&ck, "after the full resync");
	same_as_mapping(2);

	/* control: every digest taken as equal -- the copies must be seen to differ */
	kill_round(&ck);
	change_record_slot_close(&rec, change_record_slot_find(&rec, "n3"));
	rdax_faults.resync_digest_equal = true;
	resync_run_round(&ck, 2, true, &x);
	rdax_faults.resync_digest_equal = false;
	bool equal = copy_equal(2);
	printf("  control resync-digest-equal: %" PRIu64 " bytes shipped, n3's copy %s\n",
	       x.res.bytes, equal ? "EQUALS the primary's (not caught)" : "differs (caught)");
	assert_false(equal);

	stop_primary();
	printf("  %" PRIu64 " fsyncs acknowledged\n", ck.acked_fsyncs);
	ck_free(&ck);
}

static void test_control_ack_early(void **state)
{
	(void)state;
	/* a fresh volume: both replicas in the ISR, zeros everywhere */
	volname = "rep2";
	vol_size = 8ULL << 20;
	place();
	memset(mapping, 0, VOL_SIZE);
	start_primary();
	struct ck ck;
	assert_int_equal(ck_init(&ck, seed ^ 0xc0, 0, NBLOCKS, NULL), 0);
	steps(&ck, 5);
	violations = 0;
	rdax_faults.repl_ack_early = true;
	count_only = true;
	unsigned v = stop_round(&ck);
	count_only = false;
	rdax_faults.repl_ack_early = false;
	printf("  control repl-ack-early: %u violation(s) seen\n", v);
	assert_true(v > 0);
	stop_primary();
	ck_free(&ck);
}

/* --- the campaign: random faults and heals from the seed (its own command) ---- */

static unsigned campaign_rounds;

/* away_round -- node @who is away by @what, the checker writes on; heal, resync, verify */
static void away_round(struct ck *ck, unsigned who, const char *what)
{
	char nd[8];
	snprintf(nd, sizeof(nd), "n%u", who + 1);
	struct nx_node *n = &cl.node[who];
	if (strcmp(what, "kill -9") == 0)
		assert_int_equal(nx_node_kill(n), 0);
	else if (strcmp(what, "SIGSTOP") == 0)
		assert_int_equal(nx_node_pause(n), 0);
	else
		assert_int_equal(nx_link_down(&cl.net, who), 0);
	down_node = nd;
	steps(ck, 10);
	down_node = NULL;
	assert_false(in_isr(nd));
	if (strcmp(what, "kill -9") == 0)
		assert_int_equal(nx_node_restart(n), 0);
	else if (strcmp(what, "SIGSTOP") == 0)
		assert_int_equal(nx_node_resume(n), 0);
	else
		assert_int_equal(nx_link_up(&cl.net, who), 0);
	resync_round(ck, who);
}

static void test_campaign(void **state)
{
	(void)state;
	volname = "camp";
	vol_size = VOL_SIZE; /* alone on the nodes: the full size, DELTA fits */
	place();
	memset(mapping, 0, VOL_SIZE);
	start_primary();
	struct ck ck;
	assert_int_equal(ck_init(&ck, seed ^ 0xca, 0, NBLOCKS, NULL), 0);
	uint64_t rng = seed;
	static const char *const kinds[] = {"kill -9", "SIGSTOP", "link down", "delay", "loss"};
	for (unsigned round = 0; round < campaign_rounds; round++) {
		unsigned who = 1 + (unsigned)(hx_splitmix64(&rng) % 2);
		const char *what = kinds[hx_splitmix64(&rng) % (cl.net.isolated ? 5 : 2)];
		printf("round %u: %s on n%u\n", round + 1, what, who + 1);
		if (strcmp(what, "delay") == 0 || strcmp(what, "loss") == 0) {
			uint64_t count = 0;
			unsigned every = 5 + (unsigned)(hx_splitmix64(&rng) % 5);
			assert_int_equal(what[0] == 'd' ? nx_delay_start(&cl.net, who, 10 + every)
							: nx_loss_start(&cl.net, who, every, 1),
					 0);
			steps(&ck, 20);
			assert_int_equal(what[0] == 'd' ? nx_delay_stop(&cl.net, who, &count)
							: nx_loss_stop(&cl.net, who, &count),
					 0);
			printf("  %" PRIu64 " packets %s, acks went on\n", count,
			       what[0] == 'd' ? "held" : "dropped");
		} else {
			away_round(&ck, who, what);
		}
		verify_isr(&ck, "after the heal");
	}
	printf("campaign: %u rounds, %" PRIu64 " fsyncs acknowledged, seed %" PRIu64 "\n",
	       campaign_rounds, ck.acked_fsyncs, seed);
	stop_primary();
	ck_free(&ck);
}

int main(int argc, char **argv)
{
	seed = nx_seed(argc, argv);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--campaign") == 0)
			campaign_rounds =
			    i + 1 < argc ? (unsigned)strtoul(argv[i + 1], NULL, 0) : 10;
	if (campaign_rounds) {
		setvbuf(stdout, NULL, _IOLBF, 0);
		const struct CMUnitTest campaign[] = {cmocka_unit_test(test_campaign)};
		return cmocka_run_group_tests(campaign, setup, teardown);
	}
	setvbuf(stdout, NULL, _IOLBF,
		0); /* a run killed at its timeout still shows how far it got */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replication_faults),
	    cmocka_unit_test(test_control_ack_early),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
