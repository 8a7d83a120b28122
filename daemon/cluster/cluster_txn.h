/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_txn.h -- the safety-relevant changes of a volume key, as transactions
 *
 * Each reads the volume key (and its leader key), decides, and writes with a
 * transaction that compares the volume key's mod_revision and the leader
 * key's create_revision as read (docs/cluster.md, "The transactions"): a
 * concurrent change makes the compare fail, and the function reads again
 * and decides again, instead of overwriting it.
 *
 * Thread safety: as the etcd client's (one thread per client).
 */
#ifndef RDAXD_CLUSTER_TXN_H
#define RDAXD_CLUSTER_TXN_H

#include <stdbool.h>
#include <stddef.h>

#include "cluster_meta.h"
#include "etcd.h"

/*
 * cluster_isr_change -- as primary @primary of @volume at @epoch, remove
 * @node from its ISR (@add false: "ISR shrink", invariant 2) or add it
 * ("ISR grow", after a resync). *out (may be NULL) gets the record as
 * written (or as found when nothing had to change).
 * Returns 0 (done, or it was so already); -ESTALE (the key names another
 * primary or epoch, or the leader key is not @primary's: this node must not
 * change it); -EDQUOT (the shrink would leave fewer than min_replicas);
 * -ENOENT (no such volume); -EINVAL (an unusable key, @node not a replica);
 * or the etcd client's code (-ENOTCONN, -ETIMEDOUT...: unknown whether the
 * change was made -- call again, it is idempotent). @err says why.
 */
int cluster_isr_change(struct etcd_client *e, const char *cluster, const char *volume,
		       const char *primary, uint64_t epoch, const char *node, bool add,
		       struct cluster_volume_rec *out, char *err, size_t errlen);

/*
 * cluster_failover -- the failover txn (invariant 3): the volume is ready,
 * has no leader key (its primary's lease ran out) and @node is in its ISR;
 * compare the volume key's mod_revision as read and the leader key's
 * absence, then put the volume with @node primary at epoch + 1 and the
 * leader key on @lease, in one transaction: exactly one candidate wins.
 * *out (may be NULL) gets the record as written. Returns 0; -EEXIST (a
 * leader exists); -EPERM (@node is not in the ISR: it may not take over);
 * -ESTALE (the compare failed: another node changed the key first);
 * -ENOENT, -EINVAL; or the etcd client's code (unknown whether it was made:
 * read the key again).
 */
int cluster_failover(struct etcd_client *e, const char *cluster, const char *volume,
		     const char *node, int64_t lease, uint64_t incarnation,
		     struct cluster_volume_rec *out, char *err, size_t errlen);

#endif
