/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * media_health.h -- what the persistent memory under a namespace says about
 * itself: its unsafe-shutdown count and its bad blocks
 *
 * Unsafe-shutdown count (USC): the NVDIMMs count the power losses in which
 * their write buffers could not be flushed (ADR failed). libpmem2 reports
 * the sum over the DIMMs of the namespace (pmem2_source_device_usc). A
 * count that changed while a daemon had the namespace open means that data
 * the CPU had flushed -- even data of an acknowledged fsync -- may be lost.
 * The namespace's metadata records the count and an in-use flag
 * (vol_table.h, "Shutdown state", the scheme of PMDK's shutdown state):
 * media_health_open() compares, at start, and on a change while in use
 * marks the namespace and every volume in it, says so at ERROR once, with
 * what to do, and the mark stays (a restart does not hide it) until an
 * operator clears it (ns_unsafe_clear, rdax volume|namespace clear-unsafe).
 *
 * Bad blocks: poisoned ranges of the media the kernel knows of
 * (pmem2_badblock_*: the region's badblocks list, mapped to the file or
 * device). They are read at start and again on demand
 * (media_health_refresh: rdax namespace list), kept as namespace offsets,
 * and a read that overlaps one is refused with EIO before anything touches
 * the mapping (media_health_range_bad): a load from poison is a machine
 * check, a SIGBUS at best.
 *
 * Where the device reports neither (a plain file, a qemu NVDIMM without
 * health commands) the health says "unsupported" for that part; nothing is
 * recorded and nothing is refused.
 *
 * Fake source (tests, where no such device exists): with the fault switch
 * fake-media (faults.h) the counts come from the text file PATH.media beside
 * the namespace: "usc N" and "badblock OFFSET LENGTH" lines (bytes,
 * namespace offsets); no file: both unsupported. Controls: usc-no-compare
 * records the count without comparing it (a changed count goes unnoticed),
 * no-badblock-check serves reads of bad ranges (media_health_range_bad says
 * false).
 *
 * Thread safety: the ranges and the mark are under h->lock; media_health_range_bad()
 * reads a count first without it, so healthy media costs one load per read.
 * media_health_open/close run while the namespace is not shared.
 */
#ifndef RDAX_MEDIA_HEALTH_H
#define RDAX_MEDIA_HEALTH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vol_table;

/* Bad ranges kept per namespace; more are merged into the last one (a namespace that sick is
 * to be replaced, not served around). */
#define MEDIA_BAD_MAX 64

struct media_bad_range {
	uint64_t off, len; /* namespace offsets, bytes */
};

struct media_health {
	pthread_mutex_t lock;
	atomic_uint nbad; /* ranges in bad[]: read without the lock first */
	struct media_bad_range bad[MEDIA_BAD_MAX];
	bool badblocks_supported;
	bool usc_supported;
	uint64_t usc;	      /* the count now (usc_supported) */
	bool unsafe_shutdown; /* the namespace's mark (vol_table.h), found now or earlier */
	bool recorded;	      /* media_health_open committed IN_USE: close clears it */
	const char *source;   /* "pmem2" or "fake" */
};

/* A copy of the health for reports (media_health_get). */
struct media_health_info {
	bool badblocks_supported;
	bool usc_supported;
	uint64_t usc;
	bool unsafe_shutdown;
	unsigned nbad;
	uint64_t bad_bytes;
	struct media_bad_range bad[MEDIA_BAD_MAX];
};

/*
 * media_health_open -- read the USC and the bad blocks of the namespace at
 * @path (held open on @fd), compare the count with @t's shutdown state and
 * record the new one with IN_USE (one metadata commit, only where the
 * device reports a count). A changed count while IN_USE was set marks the
 * namespace and its volumes (vol_table_shutdown_set) and is logged at
 * ERROR; bad blocks are logged at WARN with the volumes they hit.
 * Context: ns_open, before the namespace is shared. Returns 0 or the
 * commit's error (-EIO ...); a device that reports nothing is not an error.
 */
int media_health_open(struct media_health *h, const char *path, int fd, struct vol_table *t);

/*
 * media_health_close -- a clean close: clear IN_USE in the metadata (where
 * open recorded it). Context: ns_close, after everything was written back.
 */
void media_health_close(struct media_health *h, struct vol_table *t);

/*
 * media_health_refresh -- read the bad blocks (and the current count) again.
 * Context: any thread; takes h->lock briefly; blocks on sysfs reads.
 */
void media_health_refresh(struct media_health *h, const char *path, int fd);

/*
 * media_health_range_bad -- does [off, off + len) of the namespace overlap a
 * bad block? Context: any thread, the data path (one atomic load when there
 * are none).
 */
bool media_health_range_bad(struct media_health *h, uint64_t off, uint64_t len);

/*
 * media_health_mark_set -- the namespace's unsafe-shutdown mark as the
 * table now holds it (vol_table.h): cleared once an operator's clear is
 * committed (ns_unsafe_clear), as loaded again after a power cut
 * (ns_power_cut). Context: any thread, under the namespace lock; takes
 * h->lock briefly.
 */
void media_health_mark_set(struct media_health *h, bool marked);

/* media_health_get -- a copy of the health now */
void media_health_get(struct media_health *h, struct media_health_info *out);

/* media_health_destroy -- release the lock (ns_close) */
void media_health_destroy(struct media_health *h);

#endif
