/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rdma_follow.c -- rdma:// clients that follow the primary, and a deposed primary's windows
 *
 * Inside the VM (tests/rdma/guest-suite.sh, check cluster_follow_rdma): etcd
 * and three rdaxd nodes on rxe0's address, on ports (tests/cluster/net.c's
 * RDMA fallback), each advertising rdma:// and tcp:// (RDAX_IT_TCP_HOST);
 * volume "rf" with --replicas 3. A resuming librdax client given every
 * node's rdma:// address writes checker steps (tests/cluster/checker.h):
 * one-sided writes through its window on the primary, then an fsync.
 *
 *   kill     the primary is killed (kill -9: a power cut in sim mode). The
 *            client follows to the new primary over RDMA: the refusals of
 *            the others name its rdma:// address (not its tcp:// one), the
 *            volume is reopened there with a new window (another rkey), the
 *            epoch grew, its steps are acknowledged there; the killed node
 *            comes back, is resynced into the ISR, and every acknowledged
 *            block reads back from the primary (ck_verify).
 *   deposed  a second client ("stale", no resume) opens the volume on the
 *            primary of the moment and writes block S through its window.
 *            The primary is stopped (SIGSTOP) past its lease; the first
 *            client follows the failover; the old primary is continued, is
 *            deposed and resynced back into the ISR. The stale client's
 *            window must be dead: a one-sided write of other bytes to S
 *            through it fails (remote access error), and the old primary's
 *            copy of S -- an ISR member's again -- equals the new
 *            primary's. Every acknowledged block reads back.
 *
 * Control (--control, its own check): every node runs with
 * client-window-keep (a deposed primary keeps its clients' windows): the
 * deposed round's stale write must land, leaving an ISR member's copy of S
 * different from its primary's -- the test passes when it sees that.
 *
 *   test_rdma_follow [--seed N] [--lease-ttl S] [--control]
 *
 * Without RDAX_IT_RDMA it exits 77 (skipped) and says why.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checker.h"
#include "cluster_fixture.h"
#include "cluster_meta.h"
#include "conn.h"
#include "librdax.h"
#include "member.h"
#include "transport_rdma.h"

#define NODES	3
#define VOL	"rf"
#define NBLOCKS 64
/* Block S, outside the checker's blocks: what the stale client writes. */
#define STALE_OFF ((uint64_t)NBLOCKS * CK_BLOCK)
/*
 * The lease: under emulation (TCG) etcd calls are slow, and cluster_rdma
 * needs 30 s to see no failover; this test wants failovers, so shorter.
 */
#define LEASE_TTL_S 10
/* Bounds of waiting for a failover, a rejoin (resync) and a resuming client. */
#define FAILOVER_MAX_MS 240000
#define REJOIN_MAX_MS	300000
#define RESUME_MS	300000

static struct nx_cluster cl;
static unsigned lease_ttl_s = LEASE_TTL_S;
static int failures;



/* key -- the volume key now (retried while etcd is slow); false if unreadable */
static bool key(struct cluster_volume_rec *rec)
{
	if (nx_volume_key_retry(cl.etcd.spec, VOL, 100, 200, rec) == 0)
		return true;
	NX_CHECK(0, "cannot read the volume key");
	return false;
}

/* The following client: its connection, volume and checker. */
struct client {
	struct rdax_conn *c;
	struct rdax_volume *v;
	struct ck ck;
	uint64_t acks, fails;
};

static int client_open(struct client *cc, const char *urls, uint64_t seed)
{
	memset(cc, 0, sizeof(*cc));
	/* a 10 s timeout: a stopped primary is noticed (TCG is slow) */
	int ret = nx_resuming_open("client", urls, VOL, 10000, RESUME_MS, 16ULL << 20, &cc->c,
				   &cc->v);
	return ret ? ret : ck_init(&cc->ck, seed, 0, NBLOCKS, NULL);
}

static void client_close(struct client *cc)
{
	rdax_volume_close(&cc->v);
	rdax_disconnect(&cc->c);
	ck_free(&cc->ck);
}

/* step -- one checker step (3 one-sided writes, an fsync); the node that acknowledged, or -1 */
static int step(struct client *cc)
{
	int ret = ck_step(&cc->ck, cc->v, 3);
	if (ret) {
		cc->fails++;
		printf("    step failed: %s\n", rdax_conn_last_error(cc->c));
		return -1;
	}
	cc->acks++;
	return nx_node_of_url(&cl, rdax_conn_url(cc->c));
}

/* follow -- steps until 3 were acknowledged by a node other than @p; ms to the first, 0: none */
static uint64_t follow(struct client *cc, unsigned p, int64_t t0)
{
	unsigned after = 0;
	uint64_t first = 0;
	while (hx_now_ms() - t0 < FAILOVER_MAX_MS && after < 3) {
		int by = step(cc);
		if (by >= 0 && (unsigned)by != p) {
			if (!first)
				first = (uint64_t)(hx_now_ms() - t0);
			after++;
		}
	}
	return first;
}

/* wait_isr -- steps until every node is in the ISR again (the healed one resynced) */
static void wait_isr(struct client *cc)
{
	int64_t t0 = hx_now_ms();
	struct cluster_volume_rec rec;
	while (hx_now_ms() - t0 < REJOIN_MAX_MS) {
		if (key(&rec) && rec.nisr == NODES) {
			printf("  every node in the ISR again after %" PRId64 " ms\n",
			       hx_now_ms() - t0);
			return;
		}
		step(cc);
		usleep(200 * 1000);
	}
	NX_CHECK(0, "the ISR did not grow back to %u", NODES);
}

/* verify -- @cc's acknowledged blocks read back from the primary the volume key names */
static void verify(struct client *cc)
{
	struct cluster_volume_rec rec;
	if (!key(&rec))
		return;
	struct rdax_conn *c;
	struct rdax_volume *v;
	int ret =
	    nx_member_open(cl.etcd.spec, rec.primary, cl.node[nx_node_index(rec.primary)].url, VOL, &c, &v);
	NX_CHECK(ret == 0, "cannot open the primary %s's copy: %s", rec.primary, rdax_strerror(ret));
	if (ret)
		return;
	ret = ck_verify(&cc->ck, v);
	NX_CHECK(ret == 0, "on the primary %s: %s", rec.primary,
	      ret == -EIO ? cc->ck.why : rdax_strerror(ret));
	if (ret == 0)
		printf("  every acknowledged block reads back from the primary %s\n", rec.primary);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
}

/*
 * round_kill -- kill -9 of the primary: the client follows it over RDMA and
 * takes a new window there
 */
static void round_kill(struct client *cc)
{
	struct cluster_volume_rec rec;
	if (!key(&rec))
		return;
	unsigned p = nx_node_index(rec.primary);
	for (unsigned k = 0; k < 5; k++)
		step(cc);
	const char *url0 = rdax_conn_url(cc->c);
	NX_CHECK(nx_node_of_url(&cl, url0) == (int)p, "the client is at %s, not at the primary n%u", url0,
	      p + 1);
	uint32_t rkey0 = cc->v->rkey;
	uint64_t epoch0 = rdax_volume_epoch(cc->v);
	printf("kill: the primary n%u (epoch %" PRIu64 ", the client's window rkey %#x) killed\n",
	       p + 1, rec.epoch, rkey0);
	int64_t t0 = hx_now_ms();
	NX_CHECK(nx_node_kill(&cl.node[p]) == 0, "kill n%u", p + 1);
	uint64_t first = follow(cc, p, t0);
	const char *url = rdax_conn_url(cc->c);
	int by = nx_node_of_url(&cl, url);
	printf("  first step acknowledged elsewhere after %" PRIu64 " ms (lease %u s): by %s, "
	       "window rkey %#x, epoch %" PRIu64 "; %" PRIu64 " acks, %" PRIu64 " failures\n",
	       first, lease_ttl_s, url, cc->v->rkey, rdax_volume_epoch(cc->v), cc->acks, cc->fails);
	NX_CHECK(first > 0, "no step acknowledged by another node within %d ms", FAILOVER_MAX_MS);
	NX_CHECK(by >= 0 && (unsigned)by != p, "the client is at %s", url);
	NX_CHECK(strncmp(url, "rdma://", 7) == 0, "the client followed to %s, not over RDMA", url);
	NX_CHECK(cc->v->direct, "no window on the new primary");
	NX_CHECK(cc->v->rkey != rkey0, "the window's rkey is the old one (%#x)", rkey0);
	NX_CHECK(rdax_volume_epoch(cc->v) > epoch0, "the epoch did not grow (%" PRIu64 ")", epoch0);
	NX_CHECK(rdax_conn_resumes(cc->c) >= 1, "the client never resumed");
	NX_CHECK(nx_node_restart(&cl.node[p]) == 0, "restart n%u", p + 1);
	wait_isr(cc);
	verify(cc);
}

/* tp_done -- the stale client's one-sided write completed */
static void tp_done(void *arg, void *ctx, int status)
{
	(void)ctx;
	*(int *)arg = status ? status : 1;
}

/*
 * stale_write -- @len bytes of @buf to @off through @v's window as it was
 * given, on its connection's queue pair (the library has nothing in
 * flight): 0 when it completed, -EACCES for a remote access error
 */
static int stale_write(struct rdax_volume *v, uint64_t off, const void *buf, uint32_t len)
{
	struct rdma_tp *tp = v->conn->rdma;
	struct rdma_tp_vol w = {v->remote_addr, v->rkey, v->imm_base, v->imm_shift};
	int done = 0;
	int ret = tp ? rdma_tp_write(tp, &w, off, buf, len, NULL) : -ENOTCONN;
	int64_t t0 = hx_now_ms();
	while (ret == 0 && !done) {
		ret = rdma_tp_progress(tp, tp_done, &done);
		if (ret > 0)
			ret = 0;
		else if (ret == 0 && hx_now_ms() - t0 > 60000)
			ret = -ETIMEDOUT;
		else if (ret == 0)
			usleep(1000);
	}
	if (ret)
		printf("  the stale write: %s\n", rdma_tp_error(tp));
	return ret;
}

/* copy_of -- block S of node @i's copy into @buf; 0 or the error */
static int copy_of(unsigned i, uint8_t *buf)
{
	char name[8];
	snprintf(name, sizeof(name), "n%u", i + 1);
	struct rdax_conn *c;
	struct rdax_volume *v;
	int ret = nx_member_open(cl.etcd.spec, name, cl.node[i].url, VOL, &c, &v);
	if (ret)
		return ret;
	ret = rdax_read(v, STALE_OFF, buf, CK_BLOCK);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	return ret;
}

/* What the deposed round saw of the stale client's write. */
struct stale_seen {
	bool landed;  /* the write through the old window completed */
	bool differs; /* S on the old primary, an ISR member again, is not the primary's */
};

/*
 * round_deposed -- a client's window on a primary that is deposed: dead once
 * the node stops serving, before its copy is an ISR member again
 */
static struct stale_seen round_deposed(struct client *cc)
{
	struct stale_seen seen = {false, false};
	struct cluster_volume_rec rec;
	if (!key(&rec))
		return seen;
	unsigned p = nx_node_index(rec.primary);
	struct rdax_conn *sc;
	struct rdax_volume *sv;
	int ret = rdax_connect(cl.node[p].url, NULL, &sc);
	NX_CHECK(ret == 0, "stale client: connect %s: %s", cl.node[p].url, rdax_connect_last_error());
	if (ret)
		return seen;
	ret = rdax_volume_open(sc, VOL, &sv);
	NX_CHECK(ret == 0 && sv->direct, "stale client: open at n%u: %s", p + 1,
	      rdax_conn_last_error(sc));
	if (ret) {
		rdax_disconnect(&sc);
		return seen;
	}
	static uint8_t a[CK_BLOCK], b[CK_BLOCK], got[CK_BLOCK], prim[CK_BLOCK];
	memset(a, 0xa5, sizeof(a));
	memset(b, 0x5b, sizeof(b));
	/* its window works while n is the primary: a failure below is the revocation */
	NX_CHECK(stale_write(sv, STALE_OFF, b, CK_BLOCK) == 0,
	      "the stale client's window fails early");
	ret = rdax_write(sv, STALE_OFF, a, CK_BLOCK, RDAX_WRITE_FSYNC);
	NX_CHECK(ret == 0, "stale client: write S: %s", rdax_conn_last_error(sc));
	printf("deposed: the stale client wrote S at n%u (window rkey %#x); n%u stopped\n", p + 1,
	       sv->rkey, p + 1);
	int64_t t0 = hx_now_ms();
	NX_CHECK(nx_node_pause(&cl.node[p]) == 0, "SIGSTOP n%u", p + 1);
	uint64_t first = follow(cc, p, t0);
	printf("  the client follows: first step acknowledged elsewhere after %" PRIu64
	       " ms, by %s\n",
	       first, rdax_conn_url(cc->c));
	NX_CHECK(first > 0, "no failover from the stopped n%u", p + 1);
	NX_CHECK(nx_node_resume(&cl.node[p]) == 0, "SIGCONT n%u", p + 1);
	/* deposed, then resynced back into the ISR (its epoch raised by the new primary's link) */
	wait_isr(cc);
	ret = stale_write(sv, STALE_OFF, b, CK_BLOCK);
	seen.landed = ret == 0;
	printf("  the stale client's write through its old window at n%u: %s\n", p + 1,
	       seen.landed ? "completed" : rdax_strerror(ret));
	if (key(&rec)) {
		unsigned now = nx_node_index(rec.primary);
		char name[8];
		snprintf(name, sizeof(name), "n%u", p + 1);
		int r1 = copy_of(p, got), r2 = copy_of(now, prim);
		NX_CHECK(r1 == 0 && r2 == 0, "reading S: n%u %d, n%u %d", p + 1, r1, now + 1, r2);
		seen.differs = memcmp(got, prim, CK_BLOCK) != 0;
		printf("  S on n%u (in the ISR: %s): %#x..., on the primary n%u: %#x...\n", p + 1,
		       cluster_name_in(rec.isr, rec.nisr, name) ? "yes" : "no", got[0], now + 1,
		       prim[0]);
		NX_CHECK(memcmp(prim, a, CK_BLOCK) == 0,
		      "the primary lost S, acknowledged before the fault");
	}
	rdax_volume_close(&sv);
	rdax_disconnect(&sc);
	verify(cc);
	return seen;
}

static bool arg_flag(int argc, char **argv, const char *name)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return true;
	return false;
}

static const char *arg_value(int argc, char **argv, const char *name)
{
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return argv[i + 1];
	return NULL;
}

/* create -- rdax --cluster ... volume create VOL 8M --replicas 3 */
static int create(void)
{
	const char *argv[] = {RDAX_CLI_PATH, "--cluster",  cl.etcd.spec, "--timeout",
			      "60",	     "volume",	   "create",	 VOL,
			      "8M",	     "--replicas", "3",		 NULL};
	struct hx_run r;
	for (unsigned tries = 0; tries < 10; tries++) {
		if (hx_run_argv(argv, NULL, 0, &r))
			return -1;
		int ret = r.status;
		if (ret)
			printf("volume create: %s", r.err);
		hx_run_free(&r);
		if (ret == 0)
			return 0;
		sleep(2); /* the nodes may not all have joined yet */
	}
	return -1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!hx_rdma_addr()) {
		printf("SKIP: test_rdma_follow runs in the VM suite (RDAX_IT_RDMA unset)\n");
		return 77;
	}
	uint64_t seed = nx_seed(argc, argv);
	bool control = arg_flag(argc, argv, "--control");
	const char *ttl = arg_value(argc, argv, "--lease-ttl");
	if (ttl)
		lease_ttl_s = (unsigned)atoi(ttl);
	char lease[32];
	snprintf(lease, sizeof(lease), "--lease-ttl=%u", lease_ttl_s);
	nx_cluster_extra_arg = lease;
	if (nx_cluster_start(&cl, "rdfw", NODES, seed, true, NULL))
		return 1;
	if (control && nx_cluster_restart_all(&cl, "client-window-keep"))
		return 1;
	if (create()) {
		nx_cluster_stop(&cl);
		return 1;
	}
	char urls[512];
	snprintf(urls, sizeof(urls), "%s,%s,%s", cl.node[0].url, cl.node[1].url, cl.node[2].url);
	printf("client: %s, lease %u s\n", urls, lease_ttl_s);
	struct client cc;
	if (client_open(&cc, urls, seed)) {
		nx_cluster_stop(&cl);
		return 1;
	}
	int ret;
	if (control) {
		struct stale_seen seen = round_deposed(&cc);
		bool caught = seen.landed && seen.differs;
		printf("control client-window-keep: %s\n",
		       caught ? "the stale write landed in an ISR member's copy (caught)"
			      : "NOT caught");
		ret = caught ? 0 : 1;
	} else {
		round_kill(&cc);
		struct stale_seen seen = round_deposed(&cc);
		NX_CHECK(!seen.landed, "the deposed primary's client window was not revoked");
		NX_CHECK(!seen.differs, "an ISR member's copy of S differs from the primary's");
		printf("%" PRIu64 " steps acknowledged, %" PRIu64 " failed; %d finding(s)\n",
		       cc.acks, cc.fails, failures);
		ret = failures ? 1 : 0;
	}
	client_close(&cc);
	if (nx_cluster_stop(&cl) && !control)
		ret = 1;
	return ret;
}
