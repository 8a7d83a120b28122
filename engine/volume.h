/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * volume.h -- a volume's data path: read, write, discard, counters
 *
 * A volume is a named range of its namespace's data area plus the dirty tree
 * that records what was written since the last fsync (fsync.h).
 *
 * Thread safety: read/write/discard/mark may run from any threads at once and
 * concurrently with fsync; overlapping concurrent writes land in an
 * unspecified order, as on a block device. The caller holds the volume open
 * (ns_volume_open) for as long as it uses it.
 */
#ifndef RDAX_VOLUME_H
#define RDAX_VOLUME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "dirty_tree.h"
#include "namespace.h"

struct write_recording;

enum flush_mode {
	FLUSH_DEFAULT = 0, /* the volume's own mode */
	FLUSH_TRACKED,	   /* write back what the dirty tree says (docs/architecture.md) */
	FLUSH_HAMMER,	   /* write back every line of the volume (baseline) */
	/*
	 * write back every line of each dirty 4 KiB page, not only its written
	 * lines: the page-granular baseline the benchmarks measure tracked
	 * lines against; accepted by fsync_range() only, never a volume's mode
	 */
	FLUSH_PAGES,
};

struct volume {
	char name[NS_VOLUME_NAME_MAX + 1];
	struct ns *ns;
	uint64_t size;	    /* bytes */
	uint64_t ns_offset; /* first byte in the namespace */
	uint8_t *data;	    /* ns->persist.base + ns_offset */
	struct dtree *tree;
	enum flush_mode flush_mode; /* FLUSH_TRACKED or FLUSH_HAMMER */
	unsigned open_count;	    /* under ns->lock */
	pthread_mutex_t fsync_lock; /* serialises fsyncs of this volume (fsync.c) */
	atomic_uint_fast64_t fsyncs;
	atomic_uint_fast64_t fsync_bytes; /* bytes written back by fsync */
	/*
	 * The daemon's, never the engine's (namespace.h, struct ns_observer):
	 * what records the volume's requests while it is open (rdaxd
	 * --write-log, daemon/write_recorder.h), set by the first opener and
	 * cleared by the last, under ns->lock; and whether the volume still
	 * reads as the zeros ns_volume_create() gave it (no opener since).
	 */
	struct write_recording *recording;
	bool pristine;
};

struct volume_stats {
	uint64_t size;
	uint64_t dirty_bytes;
	uint64_t entries[DTREE_NR_SIZES];
	uint64_t tree_bytes;
	uint64_t fsyncs;
	uint64_t fsync_bytes;
};

/*
 * volume_new -- in-memory volume over [ns_offset, ns_offset + size) of @ns
 * (namespace.c), clean, flush mode FLUSH_TRACKED; its dirty tree locates
 * page i at dloc_make(ns->id, ns_offset / 4096 + i).
 * Returns 0, -EINVAL (NULL, name, size 0 or unaligned, offset unaligned),
 * -ERANGE/-EOVERFLOW (outside the mapping), -ENOMEM.
 */
int volume_new(struct ns *ns, const char *name, uint64_t ns_offset, uint64_t size,
	       struct volume **out);
/* volume_delete -- free it; drops dirty state without writing back */
void volume_delete(struct volume **vp);

/*
 * volume_write -- copy @len bytes into the volume at @off (no flush) and mark
 * the range dirty (stores first, then the mark, so an fsync racing the write
 * either sees the mark or runs after it). The copy is guarded
 * (media_guard.h). Returns 0, -EINVAL (NULL, len 0), -ERANGE/-EOVERFLOW,
 * -EIO (a page of the range could not be written: bytes before it may have
 * landed; the range is not marked), -ENOMEM (the mark failed: the bytes may
 * have landed but are not tracked; the write must be reported as failed).
 */
int volume_write(struct volume *v, uint64_t off, const void *buf, uint64_t len);

/*
 * volume_read -- copy out (guarded, media_guard.h); never-written bytes read
 * as zero. Returns 0, -EINVAL, -ERANGE/-EOVERFLOW, -EIO (a bad page).
 */
int volume_read(struct volume *v, uint64_t off, void *buf, uint64_t len);

/*
 * volume_mark_written -- data for [off, off + len) was placed directly in
 * the mapping (zero-copy receive, RDMA): record it in the dirty tree.
 * Must be called after the stores, before the write is acknowledged.
 */
int volume_mark_written(struct volume *v, uint64_t off, uint64_t len);

/*
 * volume_discard -- drop the dirty entries of the range, then make it read
 * as zeros, durably, its blocks kept (persist_zero: the zeros are flushed
 * and fenced before return, so a discard survives a power cut without a
 * later fsync).
 * Returns 0, -EINVAL, -ERANGE/-EOVERFLOW, -EIO (a page could not be zeroed).
 */
int volume_discard(struct volume *v, uint64_t off, uint64_t len);

/*
 * volume_range_bad -- does [off, off + len) of @v (validated) overlap a bad
 * block of its namespace (media_health.h)? One load when there are none.
 */
bool volume_range_bad(struct volume *v, uint64_t off, uint64_t len);

/* volume_stats_get -- sizes, dirty state and fsync counters (NULL arguments: no-op) */
void volume_stats_get(struct volume *v, struct volume_stats *out);

/*
 * volume_set_flush_mode -- the mode FLUSH_DEFAULT means for this volume:
 * FLUSH_TRACKED or FLUSH_HAMMER. In memory only (a reopened namespace
 * starts TRACKED). Stored atomically; an fsync already running keeps the
 * mode it read. Returns 0 or -EINVAL.
 */
int volume_set_flush_mode(struct volume *v, enum flush_mode mode);

#endif
