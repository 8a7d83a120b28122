/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fsync.c -- the fsync engine: write back what the dirty tree says, fence once
 *
 * The five steps of fsync.h, with the dirty tree doing the locking of
 * entries. The tree mutex is never held here: every dtree_* call takes and
 * drops it, so writers run between our batches (fs/dax.c drops the i_pages
 * lock every few entries for the same reason).
 *
 * Serialisation: v->fsync_lock is held from step 1 to step 5. fsync B may
 * find nothing to do because fsync A has claimed (cleared) the entries but
 * not yet written them back, and a fence on B's CPU does not order A's
 * write-backs, so B must not acknowledge before A's fence: waiting for A's
 * whole fsync is the simplest rule that gives that (docs/architecture.md, "fsync races").
 */
#include "fsync.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "faults.h"
#include "log.h"
#include "namespace.h"
#include "persist.h"

/* Pause points for the race tests; all NULL in production. */
static struct fsync_test_hooks fsync_hooks;

void fsync_set_test_hooks(const struct fsync_test_hooks *hooks)
{
	if (hooks)
		fsync_hooks = *hooks;
	else
		fsync_hooks = (struct fsync_test_hooks){0};
}

/*
 * fsync_entry_addr -- the mapped address of a claimed entry's data.
 * An entry naming another namespace, or data outside the volume, can only
 * come from memory corruption; writing back (or not) the wrong lines and
 * acknowledging would be silent data loss, so abort.
 */
static const uint8_t *fsync_entry_addr(const struct volume *v, const struct dtree_item *item)
{
	uint64_t loc = dentry_location(item->entry);
	uint64_t bytes = dentry_bytes(item->entry);
	uint64_t off = dloc_page(loc) << RDAX_PAGE_SHIFT;

	if (dloc_ns(loc) != v->ns->id) {
		LOG_ERROR("fsync(volume=%s): entry 0x%" PRIx64 " at page %" PRIu64
			  " names namespace %" PRIu32 ", volume is in namespace %" PRIu32,
			  v->name, item->entry, item->index, dloc_ns(loc), v->ns->id);
		abort();
	}
	if (off < v->ns_offset || range_check(off - v->ns_offset, bytes, v->size) != 0) {
		LOG_ERROR("fsync(volume=%s): entry 0x%" PRIx64 " at page %" PRIu64
			  " (ns offset %" PRIu64 ", %" PRIu64 " bytes) lies outside the volume"
			  " [%" PRIu64 ", +%" PRIu64 ")",
			  v->name, item->entry, item->index, off, bytes, v->ns_offset, v->size);
		abort();
	}
	return (const uint8_t *)v->ns->persist.base + off;
}

/*
 * fsync_lock_volume -- take v->fsync_lock, telling the before_wait hook when
 * another fsync holds it. Not taken when the no_fsync_serialise control is
 * on; the caller reads that switch once per fsync so lock and unlock agree.
 */
static void fsync_lock_volume(struct volume *v)
{
	if (pthread_mutex_trylock(&v->fsync_lock) == 0)
		return;
	if (fsync_hooks.before_wait)
		fsync_hooks.before_wait(v, fsync_hooks.arg);
	pthread_mutex_lock(&v->fsync_lock);
}

/*
 * fsync_tag -- step 2: tag DIRTY entries of pages [first, end) TOWRITE,
 * FSYNC_TAG_BATCH per call (the tree mutex is dropped between calls).
 * Returns 0 or the negative error of dtree_tag_towrite().
 */
static int fsync_tag(struct volume *v, uint64_t first, uint64_t end)
{
	uint64_t index = first;

	while (index < end) {
		long n = dtree_tag_towrite(v->tree, &index, end, FSYNC_TAG_BATCH);
		if (n < 0) {
			LOG_ERROR("dtree_tag_towrite(volume=%s, pages [%" PRIu64 ", %" PRIu64
				  ")) failed: %ld",
				  v->name, index, end, n);
			return (int)n;
		}
		if (n == 0)
			break;
	}
	return 0;
}

/*
 * fsync_flush_lines -- write back the lines of mask @lines of the page at
 * @addr, one persist_flush() per run of adjacent lines. Returns the bytes.
 */
static uint64_t fsync_flush_lines(const struct persist *p, const uint8_t *addr, uint64_t lines)
{
	uint64_t bytes = 0;
	while (lines) {
		unsigned first = (unsigned)__builtin_ctzll(lines);
		uint64_t rest = ~(lines >> first);
		unsigned n = rest ? (unsigned)__builtin_ctzll(rest) : 64 - first;
		persist_flush(p, addr + ((size_t)first << DTREE_LINE_SHIFT),
			      (size_t)n << DTREE_LINE_SHIFT);
		bytes += (uint64_t)n << DTREE_LINE_SHIFT;
		lines &= n == 64 ? 0 : ~(((1ULL << n) - 1) << first);
	}
	return bytes;
}

/*
 * fsync_writeback -- write back claimed @items unordered (step 3), then
 * release them; the bytes are added to *bytes. A 4 KiB entry's written
 * lines only (@pages: all of it, the page-granular baseline), a huge entry
 * whole. *skip: the skip_writeback control, cleared once it has skipped
 * an entry.
 */
static void fsync_writeback(struct volume *v, struct dtree_item *items, unsigned n, bool pages,
			    bool *skip, uint64_t *bytes)
{
	const struct persist *p = &v->ns->persist;

	if (fsync_hooks.after_claim)
		fsync_hooks.after_claim(v, items, n, fsync_hooks.arg);
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *addr = fsync_entry_addr(v, &items[i]);
		bool whole = pages || dentry_size(items[i].entry) != DTREE_SIZE_4K;
		uint64_t len = whole ? dentry_bytes(items[i].entry) : dtree_item_bytes(&items[i]);
		if (*skip) {
			/* control: the forgotten flush the crash tests must catch */
			*skip = false;
		} else if (whole) {
			persist_flush(p, addr, (size_t)len);
		} else {
			fsync_flush_lines(p, addr, items[i].lines);
		}
		*bytes += len;
	}
	if (fsync_hooks.after_writeback)
		fsync_hooks.after_writeback(v, items, n, fsync_hooks.arg);
	dtree_release(v->tree, items, n);
}

/*
 * fsync_tracked -- steps 2-4 for pages [first, end), then fence once.
 *
 * Fast path: when the range holds at most one claim batch of DIRTY
 * entries, dtree_claim_dirty() claims them all in one pass under one hold
 * of the tree mutex, with no separate tagging step (a one-page fsync of
 * a 1 GiB volume was four mutex round trips, a lookup and three walks from
 * the root, 1,771 instructions by callgrind; now three round trips and one
 * walk, 1,215). That is tagging and claiming with nothing in between, so
 * the guarantee is the batched walk's: every entry DIRTY when the fsync
 * began is claimed before anything is written back, and a write landing
 * later sets DIRTY again. It cannot livelock: the pass looks at no more
 * than FSYNC_CLAIM_BATCH + 1 entries.
 *
 * Otherwise (more entries, or the test hook batched_only) the batched walk
 * of docs/architecture.md: dtree_claim_dirty() has tagged a first batch, the rest is
 * tagged FSYNC_TAG_BATCH at a time with the mutex dropped in between, then
 * TOWRITE entries are claimed, written back and released
 * FSYNC_CLAIM_BATCH at a time.
 * Context: v->fsync_lock held. Returns 0 or a negative error (tagging).
 */
static int fsync_tracked(struct volume *v, uint64_t first, uint64_t end, bool pages,
			 uint64_t *written)
{
	struct dtree_item items[FSYNC_CLAIM_BATCH];
	bool skip = rdax_faults.skip_writeback;
	uint64_t index = first;
	uint64_t bytes = 0;
	long got = -EAGAIN;

	if (!fsync_hooks.batched_only)
		got = dtree_claim_dirty(v->tree, &index, end, items, FSYNC_CLAIM_BATCH);
	if (got > 0) {
		fsync_writeback(v, items, (unsigned)got, pages, &skip, &bytes);
	} else if (got == -EAGAIN) {
		int ret = fsync_tag(v, index, end);
		if (ret)
			return ret;
		if (fsync_hooks.after_tag)
			fsync_hooks.after_tag(v, fsync_hooks.arg);
		/*
		 * The cursor reaches @end when the walk has passed every entry
		 * (as in fsync_tag()), so the last batch is not followed by a
		 * claim call that finds nothing.
		 */
		index = first;
		while (index < end) {
			unsigned n =
			    dtree_claim_towrite(v->tree, &index, end, items, FSYNC_CLAIM_BATCH);
			if (n == 0)
				break;
			fsync_writeback(v, items, n, pages, &skip, &bytes);
		}
	} else if (got < 0) {
		LOG_ERROR("dtree_claim_dirty(volume=%s, pages [%" PRIu64 ", %" PRIu64
			  ")) failed: %ld",
			  v->name, first, end, got);
		return (int)got;
	}

	if (fsync_hooks.before_fence)
		fsync_hooks.before_fence(v, fsync_hooks.arg);
	persist_drain(&v->ns->persist);
	*written = bytes;
	return 0;
}

/*
 * fsync_hammer_flush -- write back every line of the volume; with the
 * skip_writeback control on, all but the bytes of @skip (may be NULL).
 */
static void fsync_hammer_flush(struct volume *v, const struct dtree_item *skip)
{
	const struct persist *p = &v->ns->persist;

	if (!skip) {
		persist_flush(p, v->data, (size_t)v->size);
		return;
	}
	const uint8_t *addr = fsync_entry_addr(v, skip);
	size_t head = (size_t)(addr - v->data);
	size_t skipped = (size_t)dentry_bytes(skip->entry);
	if (head)
		persist_flush(p, v->data, head);
	if (head + skipped < v->size)
		persist_flush(p, addr + skipped, (size_t)v->size - head - skipped);
}

/*
 * fsync_hammer_pass -- write back the whole volume, fence, release @items.
 * @last: no more claims follow (the before_fence hook runs only then).
 */
static void fsync_hammer_pass(struct volume *v, struct dtree_item *items, unsigned n, bool last,
			      bool *skip)
{
	if (n && fsync_hooks.after_claim)
		fsync_hooks.after_claim(v, items, n, fsync_hooks.arg);
	fsync_hammer_flush(v, *skip && n ? &items[0] : NULL);
	if (n)
		*skip = false;
	if (fsync_hooks.after_writeback)
		fsync_hooks.after_writeback(v, items, n, fsync_hooks.arg);
	if (last && fsync_hooks.before_fence)
		fsync_hooks.before_fence(v, fsync_hooks.arg);
	persist_drain(&v->ns->persist);
	if (n)
		dtree_release(v->tree, items, n);
}

/*
 * fsync_hammer -- the baseline: claim every entry of the volume first (so a
 * write racing the hammer sets DIRTY again and stays dirty), write back the
 * whole volume, fence, then release. Claimed entries are collected in an
 * array that starts on the stack and grows on the heap; if it cannot grow,
 * what is held is written back, fenced and released before claiming goes
 * on, which is as correct, only slower.
 * Context: v->fsync_lock held. Returns 0 or a negative error (tagging).
 */
static int fsync_hammer(struct volume *v, uint64_t *written)
{
	uint64_t npages = v->size >> RDAX_PAGE_SHIFT;
	struct dtree_item local[FSYNC_CLAIM_BATCH];
	struct dtree_item *buf = local, *heap = NULL;
	size_t cap = FSYNC_CLAIM_BATCH, n = 0;
	uint64_t index = 0;
	bool skip = rdax_faults.skip_writeback;

	int ret = fsync_tag(v, 0, npages);
	if (ret)
		return ret;
	if (fsync_hooks.after_tag)
		fsync_hooks.after_tag(v, fsync_hooks.arg);

	for (;;) {
		if (cap - n < FSYNC_CLAIM_BATCH && cap <= SIZE_MAX / 2 / sizeof(*buf)) {
			struct dtree_item *grown = realloc(heap, 2 * cap * sizeof(*buf));
			if (grown) {
				if (!heap)
					memcpy(grown, local, n * sizeof(*buf));
				heap = buf = grown;
				cap *= 2;
			}
		}
		bool room = cap - n >= FSYNC_CLAIM_BATCH;
		unsigned got = 0;
		if (room)
			got = dtree_claim_towrite(v->tree, &index, npages, buf + n,
						  FSYNC_CLAIM_BATCH);
		n += got;
		bool done = room && got == 0;
		if (!done && room)
			continue;
		if (!done)
			LOG_WARN("fsync(volume=%s, hammer): no memory to hold more than %zu claimed"
				 " entries, writing back in parts",
				 v->name, n);
		fsync_hammer_pass(v, buf, (unsigned)n, done, &skip);
		n = 0;
		if (done)
			break;
	}
	free(heap);
	*written = v->size;
	return 0;
}

/*
 * fsync_do -- fsync_range() and fsync_range_try(): check the arguments, take
 * v->fsync_lock (@wait: blocking; otherwise -EBUSY if it is held), write
 * back and fence. @fn names the caller in the logs.
 */
static int fsync_do(const char *fn, struct volume *v, uint64_t off, uint64_t len,
		    enum flush_mode mode, bool wait, uint64_t *written_back)
{
	if (!v || !v->ns || !v->tree) {
		LOG_ERROR("%s(volume=%p): no volume", fn, (void *)v);
		return -EINVAL;
	}
	if (mode != FLUSH_DEFAULT && mode != FLUSH_TRACKED && mode != FLUSH_HAMMER &&
	    mode != FLUSH_PAGES) {
		LOG_ERROR("%s(volume=%s, mode=%d): unknown flush mode", fn, v->name, (int)mode);
		return -EINVAL;
	}
	if (len == 0) {
		if (off > v->size) {
			LOG_ERROR("%s(volume=%s, off=%" PRIu64 ", len=0): offset beyond"
				  " the volume size %" PRIu64,
				  fn, v->name, off, v->size);
			return -ERANGE;
		}
		len = v->size - off;
	}
	int ret = range_check(off, len, v->size);
	if (ret) {
		LOG_ERROR("%s(volume=%s, off=%" PRIu64 ", len=%" PRIu64 "): outside the"
			  " volume size %" PRIu64,
			  fn, v->name, off, len, v->size);
		return ret;
	}
	if (mode == FLUSH_DEFAULT) {
		/* volume_set_flush_mode() stores it atomically, at any time */
		enum flush_mode vmode = __atomic_load_n(&v->flush_mode, __ATOMIC_RELAXED);
		mode = vmode == FLUSH_HAMMER ? FLUSH_HAMMER : FLUSH_TRACKED;
	}

	uint64_t first = off >> RDAX_PAGE_SHIFT;
	/* off + len <= size, and size is far below 2^64 - 4096: no wrap */
	uint64_t end = align_up(off + len, RDAX_PAGE_SIZE) >> RDAX_PAGE_SHIFT;
	uint64_t written = 0;

	bool serialise = !rdax_faults.no_fsync_serialise;
	if (serialise) {
		if (!wait) {
			if (pthread_mutex_trylock(&v->fsync_lock) != 0)
				return -EBUSY;
		} else {
			fsync_lock_volume(v);
		}
	}
	if (mode == FLUSH_HAMMER) {
		ret = fsync_hammer(v, &written);
	} else if (first < end) {
		/*
		 * Step 1, a start inside a huge entry includes that whole entry,
		 * is done by every dtree walk itself, under the tree lock
		 * (dirty_tree.h: range operations act on every entry that
		 * overlaps the range): no separate lookup and lock round trip
		 * here, and no gap in which a huge conversion could move the
		 * head of the range between the lookup and the walk.
		 */
		ret = fsync_tracked(v, first, end, mode == FLUSH_PAGES, &written);
	}
	if (ret == 0) {
		atomic_fetch_add(&v->fsyncs, 1);
		atomic_fetch_add(&v->fsync_bytes, written);
	}
	if (serialise)
		pthread_mutex_unlock(&v->fsync_lock);
	if (ret)
		return ret;

	LOG_DEBUG("%s(volume=%s, off=%" PRIu64 ", len=%" PRIu64 ", mode=%s): %" PRIu64
		  " bytes written back",
		  fn, v->name, off, len,
		  mode == FLUSH_HAMMER	? "hammer"
		  : mode == FLUSH_PAGES ? "pages"
					: "tracked",
		  written);
	if (written_back)
		*written_back = written;
	return 0;
}

int fsync_range(struct volume *v, uint64_t off, uint64_t len, enum flush_mode mode,
		uint64_t *written_back)
{
	return fsync_do("fsync_range", v, off, len, mode, true, written_back);
}

int fsync_range_try(struct volume *v, uint64_t off, uint64_t len, enum flush_mode mode,
		    uint64_t *written_back)
{
	return fsync_do("fsync_range_try", v, off, len, mode, false, written_back);
}
