/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_delete.h -- the Delete transaction of a replicated volume, and its end
 *
 * Deleting a cluster volume (docs/cluster.md, "Delete") is three steps, of
 * which this file pair holds the two that only touch etcd, for rdax
 * (`volume delete` with --cluster) and rdaxd (a VOLUME_DELETE of a cluster
 * volume, from any node) alike:
 *
 *   cluster_delete_begin   the Delete txn: volumes/<name> compared on the
 *                          mod_revision read, put back with state
 *                          "deleting" (no placement, no primary from then on)
 *   (each member)          its cluster thread sees "deleting", stops serving,
 *                          deletes its copy and change record, then its
 *                          members/<node> key (daemon/cluster/cluster.c)
 *   cluster_delete_finish  whoever finds no member key left deletes
 *                          volumes/<name> and every key under it, compared on
 *                          the volume key's mod_revision as read, so a
 *                          volume created again meanwhile is never touched
 *
 * cluster_delete_wait() and cluster_delete_left() let the one who asked wait
 * (bounded) for the key to go and say what is left when it does not: a copy
 * on a node that is down goes when that node comes back; one on a node that
 * is up, when no handle holds it open any more.
 *
 * Each call takes the caller's etcd client and blocks on it (etcd.h: at
 * most its call deadline per request; cluster_delete_wait() up to its @ms).
 *
 * Thread safety: any thread, with a client of its own (etcd.h).
 */
#ifndef RDAX_CLUSTER_DELETE_H
#define RDAX_CLUSTER_DELETE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd.h"

/* How long a delete waits for the volume key to go when the caller gives no bound. */
#define CLUSTER_DELETE_WAIT_MS 10000

/*
 * cluster_delete_begin -- the Delete txn of volume @name of cluster
 * @cluster. Returns 0 (the volume is "deleting" now, or was already); -ENOENT
 * (no such volume); -EINVAL (its key is unusable); an etcd code (etcd.h);
 * @err says why.
 */
int cluster_delete_begin(struct etcd_client *e, const char *cluster, const char *name, char *err,
			 size_t errlen);

/*
 * cluster_delete_left -- is volume @name still there? 0: its key is gone;
 * 1: it is, @left says what keeps it ("copies left on n2 (down: ...)");
 * an etcd code.
 */
int cluster_delete_left(struct etcd_client *e, const char *cluster, const char *name, char *left,
			size_t len);

/*
 * cluster_delete_wait -- until volume @name's key is gone, at most @ms.
 * Returns 0 (gone), -ETIMEDOUT (@left says what is left), or an etcd code
 * (etcd unreachable: @left says so).
 */
int cluster_delete_wait(struct etcd_client *e, const char *cluster, const char *name, unsigned ms,
			char *left, size_t len);

/*
 * cluster_delete_finish -- the last step, for a member that deleted its own
 * member key: if no member key of volume @name is left, delete
 * volumes/<name> and every key under it, comparing the volume key's
 * mod_revision with @rev (as read, state "deleting"). *done: the keys were
 * deleted by this call. Returns 0 (also when member keys are left or the
 * compare failed: another member, or a new volume, has the key), or an etcd
 * code.
 */
int cluster_delete_finish(struct etcd_client *e, const char *cluster, const char *name, int64_t rev,
			  bool *done);

#endif
