/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * namespace.h -- a PMEM namespace: mapping, on-media metadata, its volumes
 *
 * A namespace is one PMEM region (devdax device, file on a DAX filesystem,
 * or plain file = emulated PMEM) mapped once through persist.h. It starts
 * with a metadata area (two checksummed, versioned copies of superblock +
 * volume table, see vol_table.h) followed by the data area that volumes are
 * carved from.
 *
 * Thread safety: the namespace mutex serialises metadata operations
 * (create, delete, open, close, list); volume data operations (volume.h,
 * fsync.h) do not take it. ns_close() must not race with anything.
 */
#ifndef RDAX_NAMESPACE_H
#define RDAX_NAMESPACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "persist.h"

struct volume;
struct vol_table;

/* Smallest namespace: metadata area plus one 2 MiB block of data. */
#define NS_MIN_SIZE (4ULL << 20)

struct ns {
	char *path;
	uint32_t id;		/* names the namespace in dirty-tree locations */
	struct persist persist; /* the mapping and its flush wrapper */
	uint64_t data_offset;	/* first byte of the data area */
	uint64_t data_size;
	struct vol_table *table; /* on-media volume table, in-memory copy */
	pthread_mutex_t lock;	 /* metadata operations */
	struct volume **volumes; /* in-memory volumes, one per table entry in use */
	unsigned nvolumes;
	unsigned volumes_cap;
};

/*
 * ns_format -- write fresh metadata (no volumes) to an existing devdax device
 * or file. Refuses (-EEXIST) when the target already holds rdax metadata
 * (either copy has the rdax magic) unless @force.
 * Returns 0, -EEXIST, -EINVAL (too small), -errno.
 */
int ns_format(const char *path, bool force);

/*
 * ns_create -- create a plain file of @size bytes (emulated PMEM), format it
 * and open it. -EEXIST if @path exists (it is never reformatted).
 */
int ns_create(const char *path, uint64_t size, enum persist_mode mode, uint32_t id,
	      struct ns **out);

/*
 * ns_open -- map @path and load its metadata. A namespace without rdax
 * metadata (-RDAX_E_NOT_RDAX), with metadata that fails its checks
 * (-RDAX_E_BAD_METADATA) or of an unknown version (-RDAX_E_VERSION) is
 * refused with a logged reason, never formatted.
 */
int ns_open(const char *path, enum persist_mode mode, uint32_t id, struct ns **out);

/*
 * ns_close -- write back everything dirty in every volume (tracked fsync),
 * free the volumes and unmap. Accepts NULL; sets *nsp = NULL.
 */
void ns_close(struct ns **nsp);

/* Limits on volume names: 1..NS_VOLUME_NAME_MAX of [A-Za-z0-9._-], not starting with '.' or '-'. */
#define NS_VOLUME_NAME_MAX 63

/* ns_volume_name_valid -- 0 or -EINVAL */
int ns_volume_name_valid(const char *name);

/*
 * ns_volume_create -- carve a volume of @size bytes (a multiple of 4 KiB,
 * > 0) out of the data area: 2 MiB-aligned (1 GiB-aligned for sizes of
 * 1 GiB and up) where the space allows, zeroed, then committed to the
 * volume table with flush + fence. Returns 0, -EINVAL (name, size), -EEXIST,
 * -ENOSPC (no free extent that large; the log says the largest free one).
 */
int ns_volume_create(struct ns *ns, const char *name, uint64_t size);

/*
 * ns_volume_delete -- remove a volume. An open volume is refused (-EBUSY);
 * dirty data of a closed one is dropped, not written back (its data is
 * going away). Returns 0, -ENOENT, -EBUSY.
 */
int ns_volume_delete(struct ns *ns, const char *name);

struct volume_info {
	char name[NS_VOLUME_NAME_MAX + 1];
	uint64_t size;
	uint64_t ns_offset; /* where its data starts in the namespace */
	uint32_t ns_id;
};

/*
 * ns_volume_list -- fill up to @max entries; *count gets the number of
 * volumes (which may exceed @max).
 */
int ns_volume_list(struct ns *ns, struct volume_info *out, unsigned max, unsigned *count);

/* ns_free_bytes -- total free bytes and the largest free extent */
void ns_free_bytes(struct ns *ns, uint64_t *total, uint64_t *largest);

/*
 * ns_volume_open -- a handle on a volume by name; counts an opener.
 * Returns 0, -ENOENT.
 */
int ns_volume_open(struct ns *ns, const char *name, struct volume **out);

/* ns_volume_close -- drop an opener; does not flush; sets *vp = NULL */
void ns_volume_close(struct ns *ns, struct volume **vp);

#endif
