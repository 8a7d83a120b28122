/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fsync.h -- the fsync engine: make exactly what was written durable
 *
 * For a volume and a byte range (docs/architecture.md, "fsync"):
 *  1. if the start is covered by a huge entry, round it down to that entry
 *     (each dtree walk does it, under the tree lock);
 *  2. tag DIRTY entries TOWRITE in batches, the tree lock dropped between
 *     batches so a stream of writes cannot livelock the walk;
 *  3. gang-lookup TOWRITE entries; claim each (lock, take its written
 *     lines, clear TOWRITE and DIRTY), write back those cache lines
 *     unordered (persist_flush; a huge entry whole), release;
 *  4. one fence (persist_drain);
 *  5. return the number of bytes written back: 64 per line of a 4 KiB
 *     entry, the whole size of a huge one.
 * Steps 2 and 3 in one pass when the range holds at most FSYNC_CLAIM_BATCH
 * dirty entries (dtree_claim_dirty(): tag and claim under one hold of the
 * tree lock, nothing in between); the batched walk above for more.
 *
 * Guarantee: every write whose volume_write()/volume_mark_written() returned
 * before fsync_range() was called is durable when fsync_range() returns.
 *
 * Concurrent fsyncs of one volume are serialised (volume->fsync_lock): a
 * fence on one CPU does not order another CPU's write-backs, so fsync B,
 * which may skip an entry that A has claimed, must not return before A's
 * fence. Different volumes never wait for each other. fsync_range_try()
 * is the variant for an event loop: instead of waiting for A it says
 * -EBUSY, and the caller hands B to the fsync pool, which waits.
 */
#ifndef RDAX_FSYNC_H
#define RDAX_FSYNC_H

#include <stdbool.h>
#include <stdint.h>

#include "dirty_tree.h"
#include "volume.h"

/* Entries tagged per batch before the tree lock is dropped (step 2). */
#define FSYNC_TAG_BATCH 4096
/* Entries claimed and written back per batch (step 3). */
#define FSYNC_CLAIM_BATCH 64

/*
 * fsync_range -- make [off, off + len) of @v durable (len 0 = to the end of
 * the volume). @mode FLUSH_DEFAULT uses the volume's mode; FLUSH_HAMMER
 * writes back every line of the volume; FLUSH_PAGES every line of each
 * dirty page (the page-granular baseline of the benchmarks). *written_back (may be NULL) gets the
 * bytes written back. Context: any thread; blocks while another fsync of
 * the same volume runs. Returns 0, -EINVAL, -ERANGE/-EOVERFLOW.
 */
int fsync_range(struct volume *v, uint64_t off, uint64_t len, enum flush_mode mode,
		uint64_t *written_back);

/*
 * fsync_range_try -- fsync_range() that never waits for another fsync of
 * the same volume: when v->fsync_lock is held by one, it returns -EBUSY
 * at once, having done nothing (the caller hands the fsync to a thread that
 * may wait). Arguments are checked first, as by fsync_range(). With the
 * no_fsync_serialise control on, the lock is not taken, so it never says
 * -EBUSY. Context: any thread, typically a connection's event loop (see
 * vol_op_fsync_try_inline()); never blocks on another fsync, though it
 * takes the dirty tree's mutex like any writer. Returns 0, -EBUSY,
 * -EINVAL, -ERANGE/-EOVERFLOW.
 */
int fsync_range_try(struct volume *v, uint64_t off, uint64_t len, enum flush_mode mode,
		    uint64_t *written_back);

/*
 * Test-only pause points, so the race tests can hold one fsync at a known
 * step while another thread acts. NULL members are skipped. Not for
 * production use: set before the threads start, cleared after.
 */
struct fsync_test_hooks {
	void (*after_tag)(struct volume *v, void *arg);
	/* items claimed (locked, marks cleared), not yet written back */
	void (*after_claim)(struct volume *v, const struct dtree_item *items, unsigned n,
			    void *arg);
	/* all write-backs issued, fence not yet run */
	void (*before_fence)(struct volume *v, void *arg);
	void *arg;
	/*
	 * Added after the first three (members at the end, so existing
	 * initialisers keep their meaning):
	 * items written back (flushes issued), not yet released; in hammer
	 * mode, the whole volume written back
	 */
	void (*after_writeback)(struct volume *v, const struct dtree_item *items, unsigned n,
				void *arg);
	/*
	 * another fsync of this volume holds v->fsync_lock and this one is
	 * about to wait for it (called in the waiting thread, lock not held),
	 * so a race test can observe "B waits for A" as a state, not a timeout
	 */
	void (*before_wait)(struct volume *v, void *arg);
	/*
	 * skip the single-pass fast path (fsync.c) and walk in batches even
	 * for a few entries, so a test can hold an fsync between tagging and
	 * claiming (after_tag runs on the batched path only)
	 */
	bool batched_only;
};

void fsync_set_test_hooks(const struct fsync_test_hooks *hooks);

#endif
