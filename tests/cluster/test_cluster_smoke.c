/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_smoke.c -- the multi-node harness end to end
 *
 * Boots etcd and three rdaxd nodes, each in its own network namespace
 * (tests/cluster/net.h), checks that etcd is reachable from every node and
 * that the rdax command works against every node's address from the host,
 * then injects each fault kind once -- kill -9, SIGSTOP, link down, delay,
 * loss -- on a node and at values drawn from the seed, checks that the
 * fault took effect, heals it and checks that every node serves again.
 *
 *   test_cluster_smoke [--seed N]   (default: $RDAX_CLUSTER_SEED, else 1)
 *   test_cluster_smoke --sweep      remove namespaces left by dead runs
 *
 * A fault kind that this machine cannot inject (no namespaces, no
 * netfilter) is reported as SKIP with the reason, never as passed.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd.h"
#include "cluster_fixture.h"
#include "etcd_fixture.h"
#include "harness.h"
#include "net.h"
#include "node.h"

#define NODES	 3
#define VOL_SIZE "4M"
#define DATA_LEN 65536
#define PROBE_MS 1000

static uint64_t seed = 1, rng;
static struct nx_cluster cl;
static uint8_t data[NODES][DATA_LEN];
static unsigned skipped;

/* pick -- a number in [0, n) from the seed's sequence */
static unsigned pick(unsigned n)
{
	return (unsigned)(hx_splitmix64(&rng) % n);
}

static int setup(void **state)
{
	(void)state;
	if (nx_cluster_start(&cl, "cluster", NODES, seed, false, NULL) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return nx_cluster_stop(&cl);
}

/* cli_ok -- run the rdax command against node @i; asserts exit 0; returns its stdout (malloc'd) */
static char *cli_ok(unsigned i, const void *in, size_t in_len, const char *a0, const char *a1,
		    const char *a2, const char *a3)
{
	struct hx_run r;
	assert_int_equal(nx_node_cli(&cl.node[i], 20, in, in_len, &r, a0, a1, a2, a3, NULL), 0);
	char err[512];
	int status = r.status;
	snprintf(err, sizeof(err), "%s", r.err);
	char *out = r.out;
	r.out = NULL;
	hx_run_free(&r);
	if (status != 0) {
		free(out);
		fail_msg("rdax %s %s against node %u (%s): exit %d: %s", a0, a1 ? a1 : "", i + 1,
			 cl.node[i].url, status, err);
	}
	return out;
}

/* read_back -- node @i's volume holds what was written to it */
static void read_back(unsigned i)
{
	char len[16];
	snprintf(len, sizeof(len), "%d", DATA_LEN);
	struct hx_run r;
	assert_int_equal(nx_node_cli(&cl.node[i], 20, NULL, 0, &r, "read", "smoke", "0", len, NULL),
			 0);
	bool same = r.status == 0 && r.out_len == DATA_LEN && memcmp(r.out, data[i], DATA_LEN) == 0;
	char err[512];
	snprintf(err, sizeof(err), "read back %zu bytes, exit %d (%s)", r.out_len, r.status, r.err);
	hx_run_free(&r);
	if (!same)
		fail_msg("node %u: %s", i + 1, err);
}

/* all_serve -- every node answers (after a heal) and still has its data */
static void all_serve(void)
{
	for (unsigned i = 0; i < NODES; i++)
		read_back(i);
}

struct etcd_probe {
	const char *spec;
	char key[64];
	const char *value;
};

/* etcd_from_node -- in a node's namespace: write a key through the etcd client */
static int etcd_from_node(void *arg)
{
	struct etcd_probe *p = arg;
	struct etcd_client *c = NULL;
	char err[256];
	if (etcd_client_new(p->spec, NULL, &c, err, sizeof(err)) != 0)
		return 2;
	int ret = etcd_put(c, p->key, p->value, strlen(p->value), 0, NULL);
	if (ret)
		fprintf(stderr, "etcd from the node: %s\n", etcd_client_last_error(c));
	etcd_client_delete(&c);
	return ret ? 1 : 0;
}

static void smoke__etcd_reachable_from_every_node(void **state)
{
	(void)state;
	for (unsigned i = 0; i < NODES; i++) {
		struct etcd_probe p = {.spec = cl.etcd.spec, .value = nx_node_addr(&cl.net, i)};
		snprintf(p.key, sizeof(p.key), "/smoke/node%u", i + 1);
		assert_int_equal(nx_run_in(&cl.net, i, etcd_from_node, &p), 0);
	}
	struct etcd_client *c = NULL;
	assert_int_equal(etcd_client_new(cl.etcd.spec, NULL, &c, NULL, 0), 0);
	struct etcd_range_result r;
	assert_int_equal(etcd_get(c, "/smoke/node", true, &r), 0);
	assert_int_equal(r.count, NODES);
	for (unsigned i = 0; i < NODES; i++)
		assert_string_equal(r.kvs[i].value, nx_node_addr(&cl.net, i));
	etcd_range_result_free(&r);
	etcd_client_delete(&c);
}

static void smoke__rdax_against_every_node(void **state)
{
	(void)state;
	for (unsigned i = 0; i < NODES; i++) {
		hx_pattern(data[i], DATA_LEN, seed + i, 0);
		free(cli_ok(i, NULL, 0, "volume", "create", "smoke", VOL_SIZE));
		free(cli_ok(i, data[i], DATA_LEN, "write", "smoke", "0", "--fsync"));
		read_back(i);
	}
	if (cl.net.isolated) {
		/* the nodes are distinct hosts: node 1's address does not serve node 2's volume
		 * table */
		for (unsigned i = 0; i < NODES; i++)
			assert_int_equal(
			    nx_probe_tcp(nx_node_addr(&cl.net, i), NX_NODE_PORT, PROBE_MS, NULL),
			    0);
		assert_int_not_equal(nx_probe_tcp("192.0.2.99", NX_NODE_PORT, 300, NULL), 0);
	}
}

static void fault_kill9(unsigned i)
{
	assert_int_equal(nx_node_kill(&cl.node[i]), 0);
	if (cl.net.isolated)
		assert_int_equal(
		    nx_probe_tcp(nx_node_addr(&cl.net, i), NX_NODE_PORT, PROBE_MS, NULL),
		    -ECONNREFUSED);
	/* heal: the node comes back on its namespace file with what was fsynced */
	assert_int_equal(nx_node_restart(&cl.node[i]), 0);
}

static void fault_sigstop(unsigned i)
{
	assert_int_equal(nx_node_pause(&cl.node[i]), 0);
	for (int t = 0; t < 100 && nx_node_state(&cl.node[i]) != 'T'; t++)
		usleep(10000);
	assert_int_equal(nx_node_state(&cl.node[i]), 'T');
	struct hx_run r;
	assert_int_equal(nx_node_cli(&cl.node[i], 2, NULL, 0, &r, "volume", "list", NULL), 0);
	assert_int_not_equal(r.status, 0); /* hung: no answer within --timeout */
	hx_run_free(&r);
	assert_int_equal(nx_node_resume(&cl.node[i]), 0);
}

static void fault_link_down(unsigned i)
{
	int ret = nx_link_down(&cl.net, i);
	if (ret == -EOPNOTSUPP) {
		printf("SKIP link down: %s\n", cl.net.why);
		skipped++;
		return;
	}
	assert_int_equal(ret, 0);
	assert_int_not_equal(nx_probe_tcp(nx_node_addr(&cl.net, i), NX_NODE_PORT, PROBE_MS, NULL),
			     0);
	for (unsigned j = 0; j < NODES; j++) /* the others are not cut off */
		if (j != i)
			assert_int_equal(
			    nx_probe_tcp(nx_node_addr(&cl.net, j), NX_NODE_PORT, PROBE_MS, NULL),
			    0);
	assert_int_equal(nx_link_up(&cl.net, i), 0);
	int64_t deadline = hx_now_ms() + 10000;
	while (nx_probe_tcp(nx_node_addr(&cl.net, i), NX_NODE_PORT, PROBE_MS, NULL) != 0 &&
	       hx_now_ms() < deadline)
		usleep(50000);
}

static void fault_delay(unsigned i)
{
	unsigned ms = 20 + pick(61);
	int64_t before = 0, during = 0;
	if (cl.net.isolated)
		nx_probe_tcp(nx_node_addr(&cl.net, i), NX_NODE_PORT, PROBE_MS, &before);
	int ret = nx_delay_start(&cl.net, i, ms);
	if (ret == -EOPNOTSUPP) {
		printf("SKIP delay: %s\n", cl.net.why);
		skipped++;
		return;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(nx_probe_tcp(nx_node_addr(&cl.net, i), NX_NODE_PORT, 5000, &during), 0);
	read_back(i); /* slow, but it works */
	uint64_t held = 0;
	assert_int_equal(nx_delay_stop(&cl.net, i, &held), 0);
	printf("cluster: delay %u ms on node %u: connect %" PRId64 " us before, %" PRId64
	       " us during; %" PRIu64 " packets held\n",
	       ms, i + 1, before, during, held);
	assert_true(held > 0);
}

static void fault_loss(unsigned i)
{
	unsigned every = 3 + pick(6), packet = pick(every);
	int ret = nx_loss_start(&cl.net, i, every, packet);
	if (ret == -EOPNOTSUPP) {
		printf("SKIP loss: %s\n", cl.net.why);
		skipped++;
		return;
	}
	assert_int_equal(ret, 0);
	for (int k = 0; k < 3; k++)
		read_back(i); /* TCP retransmits what was dropped */
	uint64_t dropped = 0;
	assert_int_equal(nx_loss_stop(&cl.net, i, &dropped), 0);
	printf("cluster: loss of every %uth packet from #%u on node %u: %" PRIu64 " dropped\n",
	       every, packet, i + 1, dropped);
	assert_true(dropped > 0);
}

static void smoke__each_fault_once_then_heal(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		void (*inject)(unsigned i);
	} faults[] = {
	    {"kill -9", fault_kill9}, {"SIGSTOP", fault_sigstop}, {"link down", fault_link_down},
	    {"delay", fault_delay},   {"loss", fault_loss},
	};
	enum { NFAULTS = sizeof(faults) / sizeof(faults[0]) };
	unsigned order[NFAULTS];
	for (unsigned k = 0; k < NFAULTS; k++)
		order[k] = k;
	for (unsigned k = NFAULTS - 1; k > 0; k--) { /* the seed's order */
		unsigned j = pick(k + 1), t = order[k];
		order[k] = order[j];
		order[j] = t;
	}
	for (unsigned k = 0; k < NFAULTS; k++) {
		unsigned i = pick(NODES);
		printf("cluster: fault %u/%u: %s on node %u\n", k + 1, NFAULTS,
		       faults[order[k]].name, i + 1);
		fflush(stdout);
		faults[order[k]].inject(i);
		all_serve();
	}
	printf("cluster: %u fault kind(s) skipped\n", skipped);
}

int main(int argc, char **argv)
{
	const char *env = getenv("RDAX_CLUSTER_SEED");
	if (env && *env)
		seed = strtoull(env, NULL, 0);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--sweep") == 0) {
			printf("cluster: %d stale namespace(s) removed\n", nx_sweep_stale());
			return 0;
		}
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
	}
	rng = seed;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(smoke__etcd_reachable_from_every_node),
	    cmocka_unit_test(smoke__rdax_against_every_node),
	    cmocka_unit_test(smoke__each_fault_once_then_heal),
	};
	return cmocka_run_group_tests_name("cluster_smoke", tests, setup, teardown);
}
