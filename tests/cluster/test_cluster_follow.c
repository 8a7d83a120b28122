/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_follow.c -- clients that follow the primary through faults of the primary
 *
 * etcd and three nodes (--lease-ttl=2) in namespaces; volume "fw" with
 * --replicas 3. One resuming librdax client, given every node's address
 * (rdax_conn_opts_set_resume), writes and fsyncs with the checker while the
 * primary of the moment suffers, in turn:
 *
 *   kill        kill -9 (sim mode: a power cut), then restarted
 *   stop        SIGSTOP past its lease, then SIGCONT (a deposed primary that
 *               comes back)
 *   etcd        its packets to etcd dropped: it cannot renew its lease. A
 *               second client that knows only this node (the other side of
 *               the partition) writes there meanwhile.
 *   replicas    its packets to the other nodes dropped (it keeps its lease)
 *   all         its link down (cut off from everything)
 *
 * After every heal: the client goes on; every block an acknowledged fsync
 * covered reads back from the current primary, for both clients
 * (ck_verify); epochs only grow (the volume key's, and those the client's
 * acknowledgements came at: rdax_volume_epoch); and no two nodes
 * acknowledged fsyncs in one epoch.
 *
 * Control (--control, its own ctest): every node runs with
 * lease-ignore,repl-ack-early -- a deposed primary keeps acknowledging
 * (past its lease, without its replicas); the "etcd" round with the client
 * on the other side must be caught (acknowledged fsyncs by a node that was
 * not the primary of the epoch, or acknowledged blocks lost). The other
 * control, a replica outside the ISR taking over, is cluster_failover's
 * (failover-any-replica).
 *
 *   test_cluster_follow [--seed N]            the five rounds, then 1 drawn from the seed
 *   test_cluster_follow --campaign N [--seed S]  N rounds, faults drawn from the seed
 *   test_cluster_follow --control             the control above
 *   test_cluster_follow --bench N             failover time, N kills of the primary
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
#include "librdax.h"
#include "member.h"

#define NODES	   3
#define VOL	   "fw"
#define NBLOCKS	   256
#define MAX_EPOCHS 256
#define TTL_MS	   2000

enum fault { F_KILL, F_STOP, F_ETCD, F_REPLICAS, F_ALL, F_COUNT };
static const char *const fault_name[F_COUNT] = {"kill", "stop", "etcd", "replicas", "all"};

static struct nx_cluster cl;
static int failures;
/* how long a fault may last before it is healed (the control's never moves: shorter) */
static uint64_t fault_max_ms = 45000;
/* the node that acknowledged fsyncs in epoch e, over every client (-1: none seen) */
static int acker[MAX_EPOCHS];

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}


/* A client: its connection, volume, checker, and who acknowledged in which epoch. */
struct client {
	const char *name;
	struct rdax_conn *c;
	struct rdax_volume *v;
	struct ck ck;
	uint64_t acks, fails, max_epoch;
};

/* client_open -- a resuming client over @urls, checking blocks from @first */
static int client_open(struct client *cl_, const char *name, const char *urls, int resume_ms,
		       uint64_t seed, unsigned first)
{
	memset(cl_, 0, sizeof(*cl_));
	cl_->name = name;
	/* a 3 s timeout: a silent (stopped, cut off) primary is noticed */
	int ret = nx_resuming_open(name, urls, VOL, 3000, resume_ms, 16ULL << 20, &cl_->c, &cl_->v);
	return ret ? ret : ck_init(&cl_->ck, seed, (uint64_t)first * CK_BLOCK, NBLOCKS, NULL);
}

static void client_close(struct client *c)
{
	rdax_volume_close(&c->v);
	rdax_disconnect(&c->c);
	ck_free(&c->ck);
}

/*
 * step -- one checker step (3 writes and an fsync); an acknowledged one is
 * attributed to the node the client is connected to and the epoch that
 * node serves at (its open reply): one node per epoch, epochs only growing
 */
static int step(struct client *c)
{
	int ret = c->v ? ck_step(&c->ck, c->v, 3) : -ENOTCONN;
	if (ret) {
		c->fails++;
		return ret;
	}
	c->acks++;
	int by = nx_node_of_url(&cl, rdax_conn_url(c->c));
	uint64_t e = rdax_volume_epoch(c->v);
	NX_CHECK(e >= c->max_epoch, "%s: epoch went back from %" PRIu64 " to %" PRIu64, c->name,
	      c->max_epoch, e);
	if (e > c->max_epoch)
		c->max_epoch = e;
	if (by < 0 || e >= MAX_EPOCHS)
		return 0;
	NX_CHECK(acker[e] < 0 || acker[e] == by,
	      "%s: epoch %" PRIu64 " acknowledged by n%d and by n%d", c->name, e, acker[e] + 1,
	      by + 1);
	acker[e] = by;
	return 0;
}

/* key -- the volume key now (retried while etcd is slow) */
static void key(struct cluster_volume_rec *rec)
{
	memset(rec, 0, sizeof(*rec));
	snprintf(rec->primary, sizeof(rec->primary), "n1");
	for (unsigned n = 0; n < 100; n++) {
		if (nx_volume_key(cl.etcd.spec, VOL, rec) == 0)
			return;
		usleep(100 * 1000);
	}
	printf("FAIL: cannot read the volume key\n");
	failures++;
}


static int etcd_port(void)
{
	return cl.etcd.m[0].client_port;
}

/* fault_apply / fault_heal -- @f on node @p */
static void fault_apply(enum fault f, unsigned p)
{
	int ret = 0;
	switch (f) {
	case F_KILL:
		ret = nx_node_kill(&cl.node[p]);
		break;
	case F_STOP:
		ret = nx_node_pause(&cl.node[p]);
		break;
	case F_ETCD:
		ret = nx_block_start(&cl.net, p, NX_HUB_ADDR, etcd_port());
		break;
	case F_REPLICAS:
		for (unsigned i = 0; i < NODES && !ret; i++)
			if (i != p)
				ret = nx_block_start(&cl.net, p, nx_node_addr(&cl.net, i), 0);
		break;
	case F_ALL:
		ret = nx_link_down(&cl.net, p);
		break;
	default:
		break;
	}
	NX_CHECK(ret == 0, "fault %s on n%u: %d", fault_name[f], p + 1, ret);
}

static void fault_heal(enum fault f, unsigned p)
{
	int ret = 0;
	switch (f) {
	case F_KILL:
		ret = nx_node_restart(&cl.node[p]);
		break;
	case F_STOP:
		ret = nx_node_resume(&cl.node[p]);
		break;
	case F_ETCD:
		ret = nx_block_stop(&cl.net, p, NX_HUB_ADDR, etcd_port());
		break;
	case F_REPLICAS:
		for (unsigned i = 0; i < NODES; i++)
			if (i != p)
				ret |= nx_block_stop(&cl.net, p, nx_node_addr(&cl.net, i), 0);
		break;
	case F_ALL:
		ret = nx_link_up(&cl.net, p);
		break;
	default:
		break;
	}
	NX_CHECK(ret == 0, "heal %s on n%u: %d", fault_name[f], p + 1, ret);
}

/*
 * verify -- @c's acknowledged blocks read back from the current primary: the
 * node the volume key names (a fresh connection there; a deposed node that
 * still answered would read back its own copy, not the primary's)
 */
static void verify(struct client *c)
{
	struct cluster_volume_rec rec;
	key(&rec);
	const char *url = cl.node[nx_node_index(rec.primary) % NODES].url;
	struct rdax_conn *conn;
	struct rdax_volume *v;
	int ret = nx_resuming_open(c->name, url, VOL, 5000, 60000, 0, &conn, &v);
	if (ret) {
		NX_CHECK(0, "%s: cannot reach the primary to verify: %s", c->name, rdax_strerror(ret));
		return;
	}
	ret = ck_verify(&c->ck, v);
	NX_CHECK(ret == 0, "%s: on %s: %s", c->name, rdax_conn_url(conn),
	      ret == -EIO ? c->ck.why : rdax_strerror(ret));
	rdax_volume_close(&v);
	rdax_disconnect(&conn);
}

/*
 * round -- fault @f on the primary while @c writes (and, for the etcd
 * partition, @other writes on the old primary's side); heal; verify.
 * Returns the ms from the fault to the first fsync acknowledged by another
 * node (0 if none was seen).
 */
static uint64_t round_of(enum fault f, struct client *c, struct client *other)
{
	struct cluster_volume_rec rec;
	key(&rec);
	unsigned p = nx_node_index(rec.primary);
	uint64_t epoch = rec.epoch;
	for (unsigned k = 0; k < 5; k++)
		step(c);
	printf("  %s on n%u (primary at epoch %" PRIu64 ")\n", fault_name[f], p + 1, epoch);
	uint64_t t0 = now_ms(), first = 0, last_ack = t0, stall = 0;
	fault_apply(f, p);
	/* the client goes on; the fault lasts until another node acknowledged a few steps */
	unsigned after = 0;
	bool other_side = other && f == F_ETCD;
	while (now_ms() - t0 < fault_max_ms && after < 6) {
		int ret = step(c);
		if (other_side)
			step(other);
		if (ret)
			continue;
		uint64_t now = now_ms();
		if (now - last_ack > stall)
			stall = now - last_ack;
		last_ack = now;
		int by = nx_node_of_url(&cl, rdax_conn_url(c->c));
		if (by >= 0 && (unsigned)by != p) {
			if (!first)
				first = now - t0;
			after++;
		} else if (f == F_REPLICAS && now - t0 > 3 * TTL_MS) {
			after++; /* the primary keeps its lease: no failover is due */
		}
	}
	key(&rec);
	printf("    %s: %" PRIu64 " acks %" PRIu64 " failures; n%u primary at epoch %" PRIu64
	       "; first ack elsewhere after %" PRIu64 " ms, longest stall %" PRIu64 " ms\n",
	       c->name, c->acks, c->fails, nx_node_index(rec.primary) + 1, rec.epoch, first, stall);
	NX_CHECK(rec.epoch >= epoch, "epoch went back: %" PRIu64 " after %" PRIu64, rec.epoch, epoch);
	NX_CHECK(f == F_REPLICAS || nx_node_index(rec.primary) != p, "%s: no failover from n%u", fault_name[f],
	      p + 1);
	fault_heal(f, p);
	for (unsigned k = 0; k < 5; k++)
		step(c);
	verify(c);
	if (other_side) {
		printf("    %s (knows only n%u): %" PRIu64 " acks %" PRIu64 " failures\n",
		       other->name, p + 1, other->acks, other->fails);
		verify(other);
	}
	return first;
}

/* wait_isr -- until every node is in the ISR again (the healed one resynced) */
static void wait_isr(struct client *c)
{
	struct cluster_volume_rec rec;
	for (unsigned n = 0; n < 600; n++) {
		key(&rec);
		if (rec.nisr == NODES)
			return;
		step(c);
		usleep(100 * 1000);
	}
	printf("FAIL: the ISR did not grow back to %u (%u)\n", NODES, rec.nisr);
	failures++;
}

static int create(void)
{
	sleep(2);
	const char *argv[] = {RDAX_CLI_PATH, "--cluster",  cl.etcd.spec, "--timeout",
			      "20",	     "volume",	   "create",	 VOL,
			      "8M",	     "--replicas", "3",		 NULL};
	struct hx_run r;
	if (hx_run_argv(argv, NULL, 0, &r))
		return -1;
	int ret = r.status;
	if (ret)
		printf("volume create: %s\n", r.err);
	hx_run_free(&r);
	return ret ? -1 : 0;
}

static const char *arg_value(int argc, char **argv, const char *name)
{
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return argv[i + 1];
	return NULL;
}

static bool arg_flag(int argc, char **argv, const char *name)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return true;
	return false;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	uint64_t seed = nx_seed(argc, argv);
	for (unsigned e = 0; e < MAX_EPOCHS; e++)
		acker[e] = -1;
	const char *campaign = arg_value(argc, argv, "--campaign");
	const char *bench = arg_value(argc, argv, "--bench");
	bool control = arg_flag(argc, argv, "--control");
	nx_cluster_extra_arg = "--lease-ttl=2";
	if (nx_cluster_start(&cl, "clfw", NODES, seed, true, NULL))
		return 1;
	if (!cl.net.isolated || !cl.net.netfilter) {
		printf("SKIP: partitions need network namespaces and netfilter: %s\n", cl.net.why);
		nx_cluster_stop(&cl);
		return 77;
	}
	if (control) {
		fault_max_ms = 15000;
		if (nx_cluster_restart_all(&cl, "lease-ignore,repl-ack-early"))
			return 1;
	}
	if (create())
		return 1;
	char urls[512];
	snprintf(urls, sizeof(urls), "%s,%s,%s", cl.node[0].url, cl.node[1].url, cl.node[2].url);
	struct client c, other;
	if (client_open(&c, "client", urls, 60000, seed, 0))
		return 1;
	uint64_t rng = seed ^ 0x5eed;
	if (bench) {
		unsigned n = (unsigned)atoi(bench);
		uint64_t *t = calloc(n ? n : 1, sizeof(*t));
		unsigned got = 0;
		for (unsigned k = 0; k < n; k++) {
			uint64_t ms = round_of(F_KILL, &c, NULL);
			if (ms)
				t[got++] = ms;
			wait_isr(&c);
		}
		qsort(t, got, sizeof(*t), cmp_u64);
		if (got)
			printf(
			    "failover time (kill -9 of the primary -> first fsync acknowledged by "
			    "the new one, through a resuming client), %u runs, lease TTL %u ms: "
			    "min %" PRIu64 " p50 %" PRIu64 " p90 %" PRIu64 " max %" PRIu64
			    " ms; p50 / TTL = %.2f\n",
			    got, TTL_MS, t[0], t[got / 2], t[got * 9 / 10], t[got - 1],
			    (double)t[got / 2] / TTL_MS);
		free(t);
	} else if (control) {
		struct cluster_volume_rec rec;
		key(&rec);
		unsigned p = nx_node_index(rec.primary);
		if (client_open(&other, "other-side", cl.node[p].url, 5000, seed ^ 0x07, NBLOCKS))
			return 1;
		round_of(F_ETCD, &c, &other);
		int caught = failures;
		printf("control lease-ignore,repl-ack-early: %s (%d finding(s))\n",
		       caught ? "caught" : "NOT caught", caught);
		client_close(&other);
		client_close(&c);
		nx_cluster_stop(&cl);
		return caught ? 0 : 1;
	} else {
		unsigned n = campaign ? (unsigned)atoi(campaign) : F_COUNT + 1;
		for (unsigned k = 0; k < n; k++) {
			enum fault f = !campaign && k < F_COUNT
					   ? (enum fault)k
					   : (enum fault)(hx_splitmix64(&rng) % F_COUNT);
			bool two = f == F_ETCD;
			if (two) {
				struct cluster_volume_rec rec;
				key(&rec);
				if (client_open(&other, "other-side", cl.node[nx_node_index(rec.primary)].url,
						5000, seed ^ k, NBLOCKS))
					failures++;
			}
			printf("round %u of %u: %s\n", k + 1, n, fault_name[f]);
			round_of(f, &c, two ? &other : NULL);
			if (two)
				client_close(&other);
			wait_isr(&c);
		}
	}
	printf("%" PRIu64 " steps acknowledged, %" PRIu64 " failed; %d finding(s)\n", c.acks,
	       c.fails, failures);
	client_close(&c);
	if (nx_cluster_stop(&cl))
		failures++;
	return failures ? 1 : 0;
}
