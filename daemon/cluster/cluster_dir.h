/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_dir.h -- every volume of the cluster, read from etcd for a node that forwards
 *
 * A node exports every volume of its cluster over NBD, also those it holds
 * no copy of (docs/nbd.md, "Clusters"): for those it must learn from etcd
 * that the volume exists, its size, and where its copies are -- the nodes a
 * failover may make its primary, which the forwarding connection resumes
 * to. This file pair reads that, and nothing else: the volume keys and the
 * node keys (cluster_meta.h), never a write.
 *
 * Each call makes an etcd client of its own for its one or two reads, so it
 * may run on any thread but the cluster thread's client is never shared
 * (etcd.h: a client belongs to one thread). It blocks for at most the etcd
 * client's call deadline per read (3 s): never call it on an event loop;
 * rdaxd calls it in its forwarding pool, while an NBD client is in its
 * handshake (NBD_OPT_GO, NBD_OPT_INFO, NBD_OPT_LIST).
 *
 * Thread safety: any thread; no state is kept between calls.
 */
#ifndef RDAXD_CLUSTER_DIR_H
#define RDAXD_CLUSTER_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "cluster_meta.h"

/* Room for the tcp:// addresses of every copy, comma-separated (rdax_connect's list). */
#define CLUSTER_DIR_URLS_MAX (CLUSTER_MAX_REPLICAS * (CLUSTER_URL_MAX + 1))

/* One volume as the cluster describes it. */
struct cluster_dir_vol {
	char name[CLUSTER_NAME_MAX + 1];
	uint64_t size;
	uint64_t epoch;
	enum cluster_vol_state state;
	char primary[CLUSTER_NAME_MAX + 1];
	/*
	 * the tcp:// address of each copy's node whose key is up, the primary's
	 * first, then the others of the in-sync set, then the other replicas:
	 * where a resuming client finds the primary after a failover (only a copy
	 * can become primary); "" when none is up
	 */
	char urls[CLUSTER_DIR_URLS_MAX];
	unsigned nurls;
};

/*
 * cluster_dir_lookup -- volume @name of cluster @cluster in the etcd at
 * @etcd ("etcd://H:P[,...]"). Returns 0 (*out filled); -ENOENT (no such
 * volume, or being deleted); -EAGAIN (placed, not ready yet); -EHOSTDOWN (no
 * node holding a copy is up); an etcd code (etcd.h), @err saying why.
 */
int cluster_dir_lookup(const char *etcd, const char *cluster, const char *name,
		       struct cluster_dir_vol *out, char *err, size_t errlen);

/*
 * cluster_dir_list -- every ready volume of the cluster, in name order, into a
 * malloc'd array (*out, free() it; urls are not filled in) of *count.
 * Returns 0, -ENOMEM, or an etcd code with @err saying why.
 */
int cluster_dir_list(const char *etcd, const char *cluster, struct cluster_dir_vol **out,
		     unsigned *count, char *err, size_t errlen);

#endif
