/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster.h -- the cluster thread: this node's membership and its replicas
 *
 * A node started with --cluster has one more thread, the only one that
 * talks to etcd (docs/cluster.md, "Threads"). It
 *
 *   - holds the node's lease (renewed every TTL/3 by single keepalive calls)
 *     and the node key nodes/<node> on it: addresses, zone, the namespaces'
 *     sizes and largest free extents (refreshed every few seconds and after
 *     every local change), the node's incarnation;
 *   - reads volumes/ and then watches it: for every volume whose replica list
 *     names this node, it creates the local replica (an ordinary volume of the
 *     store, same name and size) and writes volumes/<name>/members/<node>;
 *   - for a volume in state "creating" whose primary is this node, once every
 *     member key exists, makes it "ready" and takes volumes/<name>/leader on
 *     its lease, in one transaction that compares the volume key's
 *     mod_revision and that no leader exists (so two nodes can never both
 *     become primary at creation).
 *
 * A lease that etcd lost (etcd away longer than the TTL) is granted anew and
 * the node key put again; the leadership keys it held are gone with it
 * (failover, docs/cluster.md, decides what happens to those volumes).
 *
 * Thread safety: cluster_start() and cluster_stop() from one thread (main);
 * cluster_incarnation() from any thread.
 */
#ifndef RDAXD_CLUSTER_H
#define RDAXD_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "cluster_meta.h"
#include "store.h"
#include "worker.h"

struct cluster;

struct cluster_opts {
	const char *etcd;	  /* etcd://H:P[,H:P...] */
	const char *cluster_name; /* the key prefix's name */
	const char *node;	  /* this node's name */
	const char *zone;	  /* NULL or "": none */
	const char *const *addrs; /* the URLs others reach this node at */
	unsigned naddrs;
	struct store *store;
	const char *version;
	unsigned lease_ttl_s; /* 0: CLUSTER_DEFAULT_LEASE_S */
	unsigned replica_busy_poll_us; /* replica links' spin cap (replica_link.h); 0: none */
	/*
	 * The running workers whose loops run the replica links, a volume's
	 * links on one of them (round-robin by volume); none: each link runs a
	 * loop of its own. They must run until cluster_stop() returned.
	 */
	struct worker *const *workers;
	unsigned nworkers;
};

/*
 * cluster_start -- join: grant the lease, put the node key, create the local
 * replicas the volume keys ask of this node, start the thread that keeps all
 * of it up. Blocks for at most a few seconds (the etcd client's call
 * deadline). Returns 0, or a negative code with @err saying what failed
 * (e.g. "cannot reach etcd at etcd://...: ..."); then nothing is left running.
 */
int cluster_start(const struct cluster_opts *o, struct cluster **out, char *err, size_t errlen);

/*
 * cluster_stop -- stop the thread and revoke the lease (so the node key, and
 * any leader key it holds, go at once instead of at the lease's expiry).
 * Accepts NULL; sets *cp = NULL.
 */
void cluster_stop(struct cluster **cp);

/* cluster_incarnation -- the random number that names this run of the node */
uint64_t cluster_incarnation(const struct cluster *c);

#endif
