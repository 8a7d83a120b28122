/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_fixture.h -- a test cluster: the hub network, etcd and N rdaxd nodes
 *
 * What every multi-node test starts with (tests/cluster/net.h, node.h,
 * etcd_fixture.h): a scratch directory, the per-run network (namespaces, or
 * the loopback fallback, said on one line with the seed), one etcd member
 * in the hub, and @n nodes in sim mode -- with --cluster, --node=nI (and
 * --zone=Z when zones are given) if @join, plain otherwise.
 *
 * Thread safety: the main thread only.
 */
#ifndef RDAX_TEST_CLUSTER_FIXTURE_H
#define RDAX_TEST_CLUSTER_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd_fixture.h"
#include "net.h"
#include "node.h"

struct nx_cluster {
	char dir[256];
	struct nx_net net;
	struct ef_cluster etcd;
	struct nx_node node[NX_MAX_NODES];
	unsigned n;
};

/*
 * NX_CHECK -- a condition a test goes on after when it fails: printed with
 * "FAIL:" and counted in the test's own `static int failures`, which its
 * exit status reports (for the long runs that check many rounds before
 * they end; cmocka's asserts stop at the first)
 */
#define NX_CHECK(cond, ...)                                                                        \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("FAIL: " __VA_ARGS__);                                              \
			printf("\n");                                                              \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

/* One more rdaxd flag for every joined node (e.g. "--lease-ttl=2"); NULL: none. */
extern const char *nx_cluster_extra_arg;

/*
 * Joined nodes serve their metrics (rdaxd --metrics) at
 * http://ADDR:NX_METRICS_PORT+i/metrics (nx_node.metrics) when set before
 * nx_cluster_start (and no zones are given).
 */
extern bool nx_cluster_metrics;
#define NX_METRICS_PORT 9480

/*
 * Joined nodes listen for NBD too, at nbd://ADDR:NX_NBD_PORT (nx_node.nbd),
 * when set before nx_cluster_start.
 */
extern bool nx_cluster_nbd;
#define NX_NBD_PORT 10809

/* nx_seed -- --seed N from argv, else $RDAX_CLUSTER_SEED, else 1 */
uint64_t nx_seed(int argc, char **argv);

/*
 * nx_cluster_start -- everything above (@tag names the scratch directory,
 * @zones may be NULL). Returns 0 or -1 (what failed is printed).
 */
int nx_cluster_start(struct nx_cluster *cl, const char *tag, unsigned n, uint64_t seed, bool join,
		     const char *const *zones);

/*
 * nx_cluster_restart_all -- every node killed (kill -9, where it runs) and
 * started again with @faults (rdaxd --faults; NULL: none): how a control
 * run puts its fault switch on every node. Returns 0 or -1 (a node did not
 * come back; what failed is printed).
 */
int nx_cluster_restart_all(struct nx_cluster *cl, const char *faults);

/* nx_node_of_url -- the index of the node whose URL is @url, or -1 */
int nx_node_of_url(const struct nx_cluster *cl, const char *url);

/* nx_cluster_stop -- stop the nodes (0 if every one exited 0), etcd, the network; remove the dir */
int nx_cluster_stop(struct nx_cluster *cl);

#endif
