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
 * Thread safety and locks: ns->lock (a mutex) serialises the metadata
 * operations -- ns_volume_create/delete/open/close/list/info and
 * ns_free_bytes -- and protects the table, the volumes array and every
 * volume's open_count. It is held across the zeroing of a new volume and the
 * table commit (both may block on I/O); it is never taken by the data path
 * (volume.h, fsync.h), and no volume lock is taken while it is held, so the
 * order is simply: ns->lock alone. ns_open/ns_create/ns_format run before
 * the namespace is shared; ns_close() must not race with anything.
 *
 * Placement: free extents are the gaps between the volumes of the table.
 * A volume of >= 1 GiB goes 1 GiB-aligned (namespace offset) if an aligned
 * fit exists, else 2 MiB-aligned; >= 2 MiB goes 2 MiB-aligned; smaller ones
 * 4 KiB-aligned. Each step falls back to the next smaller alignment (down to
 * 4 KiB) before giving up with -ENOSPC, and picks the smallest free extent
 * that fits (best fit), so small volumes fill the gaps that alignment leaves.
 *
 * Durability of metadata: every change is committed to the volume table as
 * a whole new copy in the other metadata slot (vol_table.h), so a power cut
 * leaves the old or the new table. A new volume's range is zeroed, durably,
 * BEFORE the table commit that makes it exist: a volume is never visible
 * over a previous volume's data, even after a power cut.
 */
#ifndef RDAX_NAMESPACE_H
#define RDAX_NAMESPACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "media_health.h"
#include "persist.h"

struct volume;
struct vol_table;

/*
 * Who is told when a volume gets its first opener and loses its last
 * (rdaxd's write recorder: a volume's write log spans one such period).
 * Both run under ns->lock, in the thread that opens or closes (a pool
 * thread in rdaxd), and may block on file I/O; they must not call back
 * into the namespace. @uuid is the volume's in the table.
 */
struct ns_observer {
	void (*first_open)(void *arg, struct volume *v, const uint8_t *uuid);
	void (*last_close)(void *arg, struct volume *v);
	void *arg;
};

/* Smallest namespace: metadata area plus one 2 MiB block of data. */
#define NS_MIN_SIZE (4ULL << 20)

struct ns {
	char *path;
	uint32_t id;		    /* names the namespace in dirty-tree locations */
	int hold_fd;		    /* holds the namespace lock (backing.h) while open */
	struct persist persist;	    /* the mapping and its flush wrapper */
	const char *kind;	    /* "devdax", "fsdax" (a file in DAX mode) or "file" */
	struct media_health health; /* unsafe shutdowns and bad blocks (media_health.h) */
	uint64_t data_offset;	    /* first byte of the data area */
	uint64_t data_size;
	struct vol_table *table; /* on-media volume table, in-memory copy */
	pthread_mutex_t lock;	 /* metadata operations */
	struct volume **volumes; /* in-memory volumes, one per table entry in use */
	unsigned nvolumes;
	unsigned volumes_cap;
	struct ns_observer observer; /* members NULL: none */
};

/*
 * ns_format -- write fresh metadata (no volumes) to an existing devdax device
 * or file. Refuses (-EEXIST) when the target already holds rdax metadata
 * (either copy has the rdax magic) unless @force, and (-EBUSY) while the
 * namespace is open anywhere -- it takes the namespace lock like ns_open,
 * and @force does not override that. @err (may be NULL) gets one line
 * saying why a format failed and what to do.
 * Returns 0, -EEXIST, -EBUSY, -ENOENT, -EINVAL (too small), -ENOSPC (a file
 * that cannot be reserved), the codes of backing_check, -errno.
 */
int ns_format(const char *path, bool force, char *err, size_t errlen);

/* ns_format_mode -- ns_format() through a mapping of the given mode (tests use SIM) */
int ns_format_mode(const char *path, enum persist_mode mode, bool force, char *err, size_t errlen);

/*
 * ns_create -- create a plain file of @size bytes (emulated PMEM, every
 * block reserved: backing.h), format it and open it. -EEXIST if @path
 * exists (it is never reformatted); -ENOSPC if its filesystem cannot hold
 * it (nothing is left behind).
 */
int ns_create(const char *path, uint64_t size, enum persist_mode mode, uint32_t id,
	      struct ns **out);

/*
 * ns_open -- check what @path is, take the namespace lock, reserve its
 * space (a file: backing.h), map it and load its metadata. A path that
 * cannot hold a namespace (backing_check's codes), one in use (-EBUSY), a
 * file whose space cannot be reserved (-ENOSPC), a namespace without rdax
 * metadata (-RDAX_E_NOT_RDAX), with metadata that fails its checks
 * (-RDAX_E_BAD_METADATA) or of an unknown version (-RDAX_E_VERSION) is
 * refused with a logged reason, never formatted. When the metadata copies
 * disagree (one torn, damaged or left behind by an interrupted update) the
 * valid newer one is used and the other is rewritten from it. @id
 * (<= DLOC_NS_MAX) names the namespace in dirty-tree locations; the caller
 * keeps ids unique. Returns 0, the codes above, -EINVAL, -errno of the
 * mapping, -ENOMEM.
 */
int ns_open(const char *path, enum persist_mode mode, uint32_t id, struct ns **out);

/*
 * ns_close -- write back everything dirty in every volume (tracked fsync),
 * free the volumes, unmap and release the namespace lock. Volumes still
 * open are closed with a warning: their handles become invalid. Accepts
 * NULL; sets *nsp = NULL.
 */
void ns_close(struct ns **nsp);

/*
 * ns_set_observer -- tell @obs (NULL: nobody) of first opens and last
 * closes from now on (see struct ns_observer); before the namespace is
 * shared. ns_close() ends the period of a volume still open with
 * last_close too.
 */
void ns_set_observer(struct ns *ns, const struct ns_observer *obs);

/*
 * ns_power_cut -- a power failure of a sim-mode namespace, inside the
 * process: every in-memory volume is dropped with its dirty tree (nothing
 * is written back), the private mapping is unmapped -- its copies of the
 * pages are what a power failure loses -- and the file, the simulator's
 * persistence domain holding exactly what was flushed (persist.h), is
 * mapped afresh; the metadata is then loaded from it as ns_open() does
 * (a copy left behind by an interrupted update is repaired). The namespace
 * lock is kept throughout, and the namespace keeps its id and path. The
 * mapping's address changes: whatever was registered over the old one
 * (RDMA) must be dropped before and registered again after.
 * Context: nothing may use the namespace meanwhile -- no volume open (the
 * daemon ends every connection first), no fsync or discard running; takes
 * ns->lock. Old struct volume pointers are invalid afterwards.
 * Returns 0; -EINVAL (NULL); -EOPNOTSUPP (not PERSIST_SIM: a real
 * namespace cannot lose its caches on demand); -EBUSY (a volume is open:
 * nothing done); the codes of persist_map() and vol_table_load(): the
 * namespace is then left with no volume and no mapping, fit only for
 * ns_close().
 */
int ns_power_cut(struct ns *ns);

/* Limits on volume names: 1..NS_VOLUME_NAME_MAX of [A-Za-z0-9._-], not starting with '.' or '-'. */
#define NS_VOLUME_NAME_MAX 63

/* ns_volume_name_valid -- 0 or -EINVAL */
int ns_volume_name_valid(const char *name);

/*
 * ns_volume_create -- carve a volume of @size bytes (a multiple of 4 KiB,
 * > 0) out of the data area: 2 MiB-aligned (1 GiB-aligned for sizes of
 * 1 GiB and up) where the space allows, zeroed, then committed to the
 * volume table with flush + fence (placement: see the top of this file).
 * The in-memory volume starts clean with the flush mode FLUSH_TRACKED.
 * Context: takes ns->lock; blocks on the zeroing I/O.
 * Returns 0, -EINVAL (NULL, name, size 0 or not a multiple of 4 KiB),
 * -EEXIST, -ENOSPC (no free extent that large -- the log says the largest
 * free one -- or the table is full: the log says which), -EOVERFLOW (the
 * table's generation is exhausted, vol_table.h), -ENOMEM.
 */
int ns_volume_create(struct ns *ns, const char *name, uint64_t size);

/*
 * ns_volume_delete -- remove a volume. An open volume is refused (-EBUSY);
 * dirty data of a closed one is dropped, not written back (its data is
 * going away). The table is committed first, then the in-memory volume is
 * freed. The data is not zeroed here; a volume created later over the same
 * space is zeroed then. Context: takes ns->lock.
 * Returns 0, -EINVAL (NULL, invalid name), -ENOENT, -EBUSY.
 */
int ns_volume_delete(struct ns *ns, const char *name);

struct volume_info {
	char name[NS_VOLUME_NAME_MAX + 1];
	uint64_t size;
	uint64_t ns_offset; /* where its data starts in the namespace */
	uint32_t ns_id;
	uint8_t uuid[16];     /* the volume's uuid in the table */
	unsigned open_count;  /* openers at the time of the call */
	bool unsafe_shutdown; /* marked by an unsafe shutdown (vol_table.h) */
};

/*
 * ns_volume_list -- fill up to @max entries (@out may be NULL when @max is
 * 0), in table order; *count gets the number of volumes (which may exceed
 * @max). Context: takes ns->lock. Returns 0 or -EINVAL.
 */
int ns_volume_list(struct ns *ns, struct volume_info *out, unsigned max, unsigned *count);

/* ns_volume_info -- one volume by name; 0, -EINVAL, -ENOENT. Takes ns->lock. */
int ns_volume_info(struct ns *ns, const char *name, struct volume_info *out);

/* A volume's dirty state for reports (ns_volume_stats). */
struct ns_volume_stats {
	char name[NS_VOLUME_NAME_MAX + 1];
	uint64_t size;
	uint64_t ns_offset;
	uint64_t dirty_bytes;
	uint64_t entries[3]; /* DTREE_NR_SIZES: 4 KiB, 2 MiB, 1 GiB */
	uint64_t fsyncs;
	uint64_t fsync_bytes;
	uint64_t bad_bytes; /* bytes of bad blocks inside the volume */
	bool unsafe_shutdown;
};

/*
 * ns_volume_stats -- every volume's name, dirty state and health into a
 * malloc'd array (*out NULL when there are none). Context: takes ns->lock,
 * and each volume's tree lock inside it for a moment (the data path takes
 * tree locks but never ns->lock, so this order cannot deadlock). Returns 0,
 * -EINVAL, -ENOMEM.
 */
int ns_volume_stats(struct ns *ns, struct ns_volume_stats **out, unsigned *count);

/* What ns_unsafe_clear found marked, and cleared. */
struct ns_unsafe_cleared {
	uint32_t ns_id;			       /* the namespace */
	bool namespace_mark;		       /* the namespace's own mark (VT_SDS_UNSAFE) */
	unsigned nvolumes;		       /* volumes whose mark was set */
	char (*names)[NS_VOLUME_NAME_MAX + 1]; /* their names, in table order; malloc'd */
};

/*
 * ns_unsafe_clear -- an operator acknowledges unsafe-shutdown marks
 * (vol_table.h, "Shutdown state"): volume @name's, or with @name NULL the
 * namespace's own and every volume's in it. *out says what was marked; it
 * is freed with ns_unsafe_cleared_free() (on failure it holds nothing).
 * Nothing marked: nothing is committed, a success. Otherwise one table
 * commit (both copies, in order): a power cut leaves every mark or none of
 * those cleared, and a failure leaves them all. The namespace's health
 * follows the table. Not logged here: the caller knows who asked.
 * Context: takes ns->lock; blocks on the commit's flushes.
 * Returns 0, -EINVAL, -ENOENT (no volume @name), -ENOMEM, and the commit's
 * -EOVERFLOW, -EIO.
 */
int ns_unsafe_clear(struct ns *ns, const char *name, struct ns_unsafe_cleared *out);

/* ns_unsafe_cleared_free -- free what ns_unsafe_clear returned in @c; accepts NULL */
void ns_unsafe_cleared_free(struct ns_unsafe_cleared *c);

/*
 * ns_kind_of -- what a namespace is, by its mapping and path: "devdax",
 * "fsdax" (a file the kernel serves in DAX mode, statx STATX_ATTR_DAX) or
 * "file" (emulated PMEM)
 */
const char *ns_kind_of(const struct persist *p, const char *path);

/* ns_free_bytes -- total free bytes and the largest free extent (either pointer may be NULL) */
void ns_free_bytes(struct ns *ns, uint64_t *total, uint64_t *largest);

/*
 * ns_volume_open -- a handle on a volume by name; counts an opener (an
 * open volume cannot be deleted). Context: takes ns->lock.
 * Returns 0, -EINVAL, -ENOENT.
 */
int ns_volume_open(struct ns *ns, const char *name, struct volume **out);

/* ns_volume_close -- drop an opener; does not flush; sets *vp = NULL */
void ns_volume_close(struct ns *ns, struct volume **vp);

#endif
