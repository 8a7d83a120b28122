/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store.h -- the set of namespaces one daemon serves
 *
 * Volume names are unique across the daemon, so a client names a volume
 * without saying where it lives. A new volume goes to the namespace with the
 * largest free extent unless the request names one. Namespace ids are the
 * positions in the order the namespaces were added (0, 1, ...).
 *
 * Each namespace path is held with the namespace lock (backing.h) for as
 * long as it is served, so a second daemon, a second --namespace naming the
 * same file, or rdaxd --format is refused instead of mapping it twice.
 *
 * Thread safety: store_namespace_add() and store_delete() run before and
 * after the namespaces are shared. Every other function may be called from
 * any thread; the store mutex serialises the name lookups with creates and
 * deletes (lock order: store->lock, then ns->lock inside the engine). The
 * metadata functions block on namespace locks and I/O: rdaxd calls them
 * from its pool threads, never from an event loop.
 */
#ifndef RDAXD_STORE_H
#define RDAXD_STORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "namespace.h"
#include "volume.h"

struct store_ns {
	struct ns *ns; /* holds its namespace lock while open */
};

struct store {
	pthread_mutex_t lock; /* name lookups vs create/delete across namespaces */
	struct store_ns *nss;
	unsigned count;
};

/* store_new -- an empty store; 0 or -ENOMEM */
int store_new(struct store **out);

/*
 * store_delete -- ns_close() every namespace (writes back everything dirty),
 * release the locks, free. Nothing may use the store any more. Accepts NULL.
 */
void store_delete(struct store **sp);

/*
 * store_namespace_add -- serve the namespace at @path with the next id.
 * A missing @path is created as a file of @create_size bytes and formatted
 * (ns_create) when @create_size > 0; an existing one is checked first (what
 * it is: backing_check, without opening it) and then opened (ns_open), never
 * formatted. Refuses a path that cannot hold a namespace (a directory, a
 * FIFO, an empty file, a device that is not device DAX), one already served
 * (same file), one held by another process, a file whose space cannot be
 * reserved, and a namespace holding a volume whose name another served
 * namespace already has. @err gets one line: the engine's reason and what
 * to do. Returns 0, -ENOENT, -EBUSY, -EEXIST, -ENOSPC, the codes of
 * backing_check, or the engine's code (-RDAX_E_NOT_RDAX, ...).
 */
int store_namespace_add(struct store *s, const char *path, uint64_t create_size,
			enum persist_mode mode, char *err, size_t errlen);

/* store_namespace_count -- how many namespaces are served */
unsigned store_namespace_count(const struct store *s);

/* store_namespace -- the namespace with id @id, NULL if none */
struct ns *store_namespace(const struct store *s, uint32_t id);

/*
 * store_volume_create -- create volume @name of @size bytes in namespace
 * *@ns_id, or (NULL) in the one with the largest free extent among those
 * whose volume table has room; *placed (may be NULL) gets the namespace id
 * used. A refusal is explained in @err (may be NULL): for -ENOSPC whether
 * the volume table is full (and how many entries it holds) or no free
 * extent is large enough (with the largest one and the free space, in units).
 * Returns 0, -EINVAL (name, size), -EEXIST (the name exists in any
 * namespace), -ENOENT (no namespace *ns_id), -ENOSPC, -EOVERFLOW (the
 * namespace's metadata generation is exhausted), -ENOMEM.
 */
int store_volume_create(struct store *s, const char *name, uint64_t size, const uint32_t *ns_id,
			uint32_t *placed, char *err, size_t errlen);

/* store_volume_delete -- remove volume @name; 0, -EINVAL, -ENOENT, -EBUSY (open somewhere) */
int store_volume_delete(struct store *s, const char *name);

/* store_volume_open -- count an opener of volume @name; 0, -EINVAL, -ENOENT */
int store_volume_open(struct store *s, const char *name, struct volume **out);

/* store_volume_close -- drop an opener taken by store_volume_open; sets *vp = NULL */
void store_volume_close(struct store *s, struct volume **vp);

/* store_volume_info -- where volume @name lives; 0, -EINVAL, -ENOENT */
int store_volume_info(struct store *s, const char *name, struct volume_info *out);

/*
 * store_volume_list -- every volume of every namespace (namespace order,
 * then table order) in a malloc'd array (*out NULL when there are none).
 * Returns 0, -ENOMEM.
 */
int store_volume_list(struct store *s, struct volume_info **out, unsigned *count);

/*
 * store_volume_unsafe_clear -- clear volume @name's unsafe-shutdown mark
 * (ns_unsafe_clear; *out says whether it was set and where). Returns 0,
 * -EINVAL, -ENOENT, and ns_unsafe_clear's codes.
 */
int store_volume_unsafe_clear(struct store *s, const char *name, struct ns_unsafe_cleared *out);

/*
 * store_namespace_unsafe_clear -- clear namespace @id's unsafe-shutdown
 * mark and every volume's in it (ns_unsafe_clear with no name). Returns 0,
 * -EINVAL, -ENOENT (no namespace @id), and ns_unsafe_clear's codes.
 */
int store_namespace_unsafe_clear(struct store *s, uint32_t id, struct ns_unsafe_cleared *out);

/*
 * store_power_cut -- ns_power_cut() of every namespace, in id order: the
 * daemon's power cut (daemon/powercut.h). Every namespace must be in sim
 * mode and unused (no volume open). @err gets one line on failure.
 * Returns 0, or the first failure's code: the namespaces after it were not
 * cut, the failed one is fit only for store_delete().
 */
int store_power_cut(struct store *s, char *err, size_t errlen);

/* store_set_observer -- ns_set_observer(@obs) on every namespace; before they are shared */
void store_set_observer(struct store *s, const struct ns_observer *obs);

/* store_all_sim -- are all namespaces in sim mode (and is there one)? */
bool store_all_sim(const struct store *s);

/* store_largest_free -- the largest free extent of any namespace, and which (*ns_id may be NULL) */
void store_largest_free(struct store *s, uint64_t *largest, uint32_t *ns_id);

#endif
