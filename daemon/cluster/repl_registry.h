/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * repl_registry.h -- which local volumes this node replicates as their primary
 *
 * The protocol layer asks, on every write and fsync, whether the volume it
 * touches is replicated from here (repl_volume.h); the cluster thread adds
 * a volume when this node becomes its primary. Entries stay until the
 * daemon stops (a lost primaryship is failover, docs/cluster.md), but a
 * deposed primary's entry is retired: its copy is then an ordinary replica,
 * whose writes and fsyncs from the new primary must not go through the old
 * replication (whose members it can no longer remove: they would wait for
 * ever, and the new primary's resync of this node with them).
 *
 * A deleted volume's entry is removed (repl_registry_remove) and its slot is
 * used again by a later put, so create/delete cycles need no more than
 * REPL_REGISTRY_MAX slots.
 *
 * Thread safety: repl_registry_get() from any thread, lock-free (a few loads
 * per entry); repl_registry_each() from any thread (it holds a lock that
 * _remove() takes, so the replication it passes is not stopped under it);
 * repl_registry_put(), _retire() and _remove() from the cluster thread only.
 */
#ifndef RDAXD_REPL_REGISTRY_H
#define RDAXD_REPL_REGISTRY_H

#include "repl_volume.h"
#include "volume.h"

#define REPL_REGISTRY_MAX 256

/* repl_registry_get -- @v's replication, or NULL (not replicated from this node) */
struct repl_volume *repl_registry_get(const struct volume *v);

/* repl_registry_put -- @v is replicated through @rv from now on; 0 or -ENOSPC */
int repl_registry_put(const struct volume *v, struct repl_volume *rv);

/*
 * repl_registry_retire -- this node was deposed as @v's primary: lookups of
 * @v find nothing from now on (the replication object stays allocated for
 * callers that still hold it). Context: cluster thread.
 */
void repl_registry_retire(const struct volume *v);

/*
 * repl_registry_remove -- @v is deleted (or about to be): lookups find
 * nothing from now on and the slot may be reused. The caller stops the
 * replication once no request can hold it any more (the copy is deleted:
 * every request holds an opener of it), and once this returned no
 * repl_registry_each() walker holds it either. Context: cluster thread.
 */
void repl_registry_remove(const struct volume *v);

/*
 * repl_registry_each -- @fn(@arg, volume name, its replication) for every
 * entry (the metrics endpoint's view of the replicas), under the walkers'
 * lock (@fn must not call back in here). Context: any thread, while the
 * registry is not cleared (rdaxd stops its readers first).
 */
void repl_registry_each(void (*fn)(void *arg, const char *volume, struct repl_volume *rv),
			void *arg);

/* repl_registry_clear -- forget every entry (after the workers stopped); returns them via @fn */
void repl_registry_clear(void (*fn)(struct repl_volume *rv));

#endif
