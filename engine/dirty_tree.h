/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dirty_tree.h -- per-volume radix tree of dirty ranges (the DAX design)
 *
 * PMEM has no struct page, so what was written since the last fsync is kept
 * in a radix tree of packed 64-bit entries, a "miniature struct page",
 * indexed by 4 KiB page index within the volume. 64 slots per node; each node
 * keeps two mark bitmaps, DIRTY and TOWRITE, and a parent slot carries a mark
 * whenever anything below it does, so finding the next marked entry skips
 * clean subtrees.
 *
 * The tree holds dirty state only: an entry exists while it is DIRTY, TOWRITE
 * or locked (being written back); releasing a clean entry removes it and
 * frees empty nodes, so memory follows the dirty set, not the volume size
 * (freed nodes are kept for the next writes up to a bound: 1/1024 of the
 * volume's size, at most 4 MiB, at least 8 nodes).
 *
 * Huge entries: a byte range that covers a whole aligned 2 MiB (or 1 GiB)
 * block, whose data is 2 MiB (1 GiB) aligned in its namespace, gets one
 * 2 MiB (1 GiB) entry; the small entries under it are removed first and
 * their marks carried over (a TOWRITE small entry makes the huge entry
 * TOWRITE, so an fsync in flight still writes it back). A smaller write
 * inside a huge entry keeps the huge entry dirty; a huge entry is never
 * split back into small ones.
 *
 * Only one call that covers a whole block makes a huge entry: a block
 * written in smaller calls keeps its smaller entries (no promotion). So
 * 4 KiB-at-a-time writes never form a 2 MiB entry, and no 1 GiB entry forms
 * from network requests, which are smaller (a TCP write carries at most
 * the daemon's max payload, 4 MiB by default and 64 MiB at most, an NBD
 * write 32 MiB; an RDMA write is cut at 2 MiB boundaries). This
 * was measured, not assumed (bench_engine, "huge entries"): for 1 GiB, the
 * tree's walk over 512 2 MiB entries is under 0.1% of writing the 1 GiB
 * back; for 2 MiB written a page at a time, the walk over 512 entries is
 * about a tenth of that fsync on emulated PMEM (less where write-back is
 * slower) and the leaves 8.6 bytes per page, while a promoted entry would
 * make every later fsync of part of the block write back all 2 MiB (a
 * 4 KiB fsync would cost 512 times as much) unless it were split again.
 *
 * Range operations act on every entry that overlaps the page range, so a
 * range that starts inside a huge entry includes that entry.
 *
 * Lines: a 4 KiB entry also records which of its 64 cache lines (64 bytes
 * each) were written since it was last claimed, one bit per line, so fsync
 * writes back exactly those lines and dirty_bytes counts them (a 64-byte
 * write then costs one line's write-back, not 64). A huge entry is whole:
 * every line of it is written back. The protocol, every step under the
 * tree's mutex (so a mask is read and cleared atomically with respect to
 * the writers that OR into it):
 *
 *   writer (dtree_mark_dirty)        fsync                         mask  DIRTY
 *   store data lines A                                              -     -
 *   lock; mask |= A; DIRTY; unlock                                  A     1
 *                                    lock; claim: LCK,              0     0
 *                                      item.lines = A, mask = 0,
 *                                      clear TOWRITE, DIRTY; unlock
 *   store data lines B               write back lines A (no lock)
 *   lock; mask |= B; DIRTY; unlock                                  B     1
 *                                    fence
 *                                    lock; release: unlock LCK;
 *                                      DIRTY set again: keep it;    B     1
 *                                      else remove it; unlock
 *
 * A line stored before its writer's OR reaches the tree is in the mask the
 * claim takes (and written back after the claim, so after the store) or,
 * if the OR came after the claim, in the mask the next fsync takes: per
 * line DIRTY or written back, never neither. A mark never waits for a
 * claimed entry: it only ORs and sets DIRTY.
 *
 * Thread safety: every function except dtree_new()/dtree_delete() takes the
 * tree's mutex itself and may be called from any number of threads at once;
 * each call is atomic with respect to the others, except that a range
 * operation may drop the mutex between entries (to allocate, to wait for an
 * entry lock, or every 1024 entries in dtree_remove_range()), so a call over
 * a range is a sequence of atomic steps, not one snapshot. The promise the
 * tests exercise is one thread marking (and discarding) while another runs
 * fsync walks (tag, claim, one-pass claim, release). Calls that may block, with the mutex
 * dropped, until entry locks are released: dtree_mark_dirty() (only when a
 * huge entry replaces a locked entry), dtree_remove_range() and
 * dtree_clear() (any locked entry overlapping the range). So a thread that
 * holds claimed entries must dtree_release() them before it calls one of
 * these on a range that overlaps them, or it waits for itself. No other
 * call blocks (dtree_claim_towrite() and dtree_claim_dirty() skip entries
 * locked elsewhere).
 * dtree_delete() must not race with anything.
 */
#ifndef RDAX_DIRTY_TREE_H
#define RDAX_DIRTY_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The packed entry: a value entry, never a node pointer.
 *
 *  63                                          4   3   2   1   0
 *  |  location of the data, in 4 KiB units     | size  |LCK| 1 |
 *
 * bit 0      always 1: a value entry (node pointers are aligned, bit 0 = 0)
 * bit 1      entry lock: held by an fsync while it writes the entry back
 * bits 2-3   size class: 0 = 4 KiB (pte), 1 = 2 MiB (pmd), 2 = 1 GiB (pud)
 * bits 4-63  location: a PFN-like number that names the namespace too:
 *
 *  59                      40 39                                      0
 *  |  namespace id (20 bits) |  page within the namespace (40 bits)    |
 *
 * 40 bits of 4 KiB pages is 4 PiB per namespace; 2^20 namespaces.
 * Only the helpers below shift or mask an entry.
 */
#define DENTRY_VALUE_BIT  0x1ULL
#define DENTRY_LOCK_BIT	  0x2ULL
#define DENTRY_SIZE_SHIFT 2
#define DENTRY_SIZE_MASK  (0x3ULL << DENTRY_SIZE_SHIFT)
#define DENTRY_LOC_SHIFT  4
#define DLOC_PAGE_BITS	  40
#define DLOC_NS_BITS	  20
#define DLOC_PAGE_MASK	  ((1ULL << DLOC_PAGE_BITS) - 1)
#define DLOC_NS_MAX	  ((1U << DLOC_NS_BITS) - 1)

enum dtree_size { DTREE_SIZE_4K = 0, DTREE_SIZE_2M = 1, DTREE_SIZE_1G = 2 };
#define DTREE_NR_SIZES 3

enum dtree_mark { DTREE_DIRTY = 0, DTREE_TOWRITE = 1 };

/* pages (log2) covered by an entry of each size class: 0, 9, 18 */
static inline unsigned dtree_size_order(enum dtree_size size)
{
	return size * 9U;
}

static inline uint64_t dloc_make(uint32_t ns_id, uint64_t ns_page)
{
	return ((uint64_t)ns_id << DLOC_PAGE_BITS) | (ns_page & DLOC_PAGE_MASK);
}

static inline uint32_t dloc_ns(uint64_t loc)
{
	return (uint32_t)(loc >> DLOC_PAGE_BITS);
}

static inline uint64_t dloc_page(uint64_t loc)
{
	return loc & DLOC_PAGE_MASK;
}

static inline uint64_t dentry_make(uint64_t loc, enum dtree_size size)
{
	return (loc << DENTRY_LOC_SHIFT) | ((uint64_t)size << DENTRY_SIZE_SHIFT) | DENTRY_VALUE_BIT;
}

static inline bool dentry_is_value(uint64_t e)
{
	return (e & DENTRY_VALUE_BIT) != 0;
}

static inline bool dentry_is_locked(uint64_t e)
{
	return (e & DENTRY_LOCK_BIT) != 0;
}

static inline uint64_t dentry_lock(uint64_t e)
{
	return e | DENTRY_LOCK_BIT;
}

static inline uint64_t dentry_unlock(uint64_t e)
{
	return e & ~DENTRY_LOCK_BIT;
}

static inline enum dtree_size dentry_size(uint64_t e)
{
	return (enum dtree_size)((e & DENTRY_SIZE_MASK) >> DENTRY_SIZE_SHIFT);
}

static inline uint64_t dentry_location(uint64_t e)
{
	return e >> DENTRY_LOC_SHIFT;
}

/* bytes covered by an entry */
static inline uint64_t dentry_bytes(uint64_t e)
{
	return 4096ULL << dtree_size_order(dentry_size(e));
}

/*
 * Written lines of a 4 KiB entry: bit i stands for bytes [64 i, 64 i + 64)
 * of its page; DTREE_LINES_ALL for a wholly written page.
 */
#define DTREE_LINE_SHIFT 6
#define DTREE_LINE_SIZE	 (1U << DTREE_LINE_SHIFT)
#define DTREE_LINES_ALL	 (~0ULL)

/* bytes of the lines in mask @lines (a whole page without a popcount: the mark path) */
static inline uint64_t dtree_lines_bytes(uint64_t lines)
{
	if (lines == DTREE_LINES_ALL)
		return 64ULL << DTREE_LINE_SHIFT;
	return (uint64_t)__builtin_popcountll(lines) << DTREE_LINE_SHIFT;
}

struct dtree;

/*
 * One entry found by a lookup: its first page index, its value and its
 * written lines: for a 4 KiB entry the mask of the lines written since it
 * was last claimed (0 when not DIRTY), for a huge entry DTREE_LINES_ALL
 * when DIRTY (every line of every page), else 0. A claim returns the lines
 * it took from the entry, the ones to write back (never 0). The priv_
 * members belong to the tree: a claim records there where the entry sits,
 * so dtree_release() finds it without a walk from the root (NULL/0 in
 * items made any other way, and in items a caller builds itself).
 */
struct dtree_item {
	uint64_t index;
	uint64_t entry;
	uint64_t lines;
	void *priv_node;
	unsigned priv_slot;
};

/* dtree_item_bytes -- bytes of @item's lines: what writing it back writes */
static inline uint64_t dtree_item_bytes(const struct dtree_item *item)
{
	if (dentry_size(item->entry) != DTREE_SIZE_4K)
		return item->lines ? dentry_bytes(item->entry) : 0;
	return dtree_lines_bytes(item->lines);
}

struct dtree_stats {
	uint64_t entries[DTREE_NR_SIZES]; /* entries present, per size class */
	uint64_t dirty_bytes; /* bytes of the written lines of DIRTY entries (huge: whole) */
	uint64_t tree_bytes;  /* memory held by nodes, line arrays and the tree */
	uint64_t nodes;
};

/*
 * dtree_new -- a tree for a volume of @npages 4 KiB pages whose page i lives
 * at location @base_location + i.
 * Returns 0 or -EINVAL (npages 0, location overflow), -ENOMEM.
 */
int dtree_new(uint64_t npages, uint64_t base_location, struct dtree **out);

/* dtree_delete -- free the tree; accepts NULL and *tp == NULL; sets *tp = NULL */
void dtree_delete(struct dtree **tp);

/*
 * dtree_mark_dirty -- record that bytes [offset, offset + len) were written.
 * Creates 4 KiB entries, or huge entries for whole aligned 2 MiB / 1 GiB
 * blocks that this one call covers (see above); marks them DIRTY and adds
 * the lines the range touches to their masks ("Lines" above). Marking
 * an entry that is locked by an fsync only sets DIRTY (the write is caught
 * by the next fsync). When the call returns 0, every page of the range is
 * covered by a DIRTY entry.
 * Context: any thread; may block while a huge conversion waits for locked
 * entries it replaces. Returns 0, -EINVAL (no tree, len 0),
 * -ERANGE/-EOVERFLOW (nothing changed), -ENOMEM (a prefix of the range may
 * be marked: treat the write as not tracked).
 */
int dtree_mark_dirty(struct dtree *t, uint64_t offset, uint64_t len);

/*
 * dtree_tag_towrite -- set TOWRITE on DIRTY entries overlapping pages
 * [*index, end), at most @batch of them, starting at *index. On return
 * *index is where the next call continues (end when done): the end of the
 * last entry tagged, capped at @end. The mutex is held for one call only:
 * fsync calls this in a loop so writers are not starved. Entries that were
 * already TOWRITE count as tagged. Returns the number of entries tagged
 * (0 when done), or -EINVAL (no tree/index, batch 0, end beyond the volume,
 * *index > end; *index unchanged).
 */
long dtree_tag_towrite(struct dtree *t, uint64_t *index, uint64_t end, unsigned batch);

/*
 * dtree_gang_lookup -- copy up to @max entries carrying @mark that overlap
 * pages [*index, end) into @items, in index order; advance *index past the
 * last one returned (capped at @end; @end when none are left). Returns the
 * count (0 when none are left, and on bad arguments, which are logged).
 */
unsigned dtree_gang_lookup(struct dtree *t, uint64_t *index, uint64_t end, enum dtree_mark mark,
			   struct dtree_item *items, unsigned max);

/*
 * dtree_gang_lookup_any -- like dtree_gang_lookup() but every entry
 * present, whatever its marks (a locked entry whose marks were cleared by a
 * claim included). For checks and statistics.
 */
unsigned dtree_gang_lookup_any(struct dtree *t, uint64_t *index, uint64_t end,
			       struct dtree_item *items, unsigned max);

/*
 * dtree_claim_towrite -- the first half of fsync step 3: take up to @max
 * TOWRITE entries overlapping [*index, end); for each, set its lock bit and
 * clear TOWRITE and DIRTY (in that order under the mutex, so a write that
 * lands after this sets DIRTY again). items[i].entry is the entry as
 * stored, lock bit set; items[i].lines the lines taken from it (the
 * entry's mask is then empty). The caller writes those back, then calls
 * dtree_release() with the same items. While claimed, an entry cannot be
 * removed or replaced by a huge entry (those wait). A TOWRITE entry already
 * locked by another claimer (fsyncs not serialised, or a caller holding
 * entries across calls whose entry was written and tagged again) is
 * skipped and keeps DIRTY and TOWRITE, so the next walk takes it: the
 * caller must serialise fsyncs of a volume for its own guarantee. Never
 * blocks. Returns the count (0 when done, and on bad arguments, which are
 * logged); advances *index like dtree_gang_lookup().
 */
unsigned dtree_claim_towrite(struct dtree *t, uint64_t *index, uint64_t end,
			     struct dtree_item *items, unsigned max);

/*
 * dtree_claim_dirty -- fsync's single-pass fast path for a range with few
 * dirty entries. If the DIRTY entries overlapping pages [*index, end)
 * number at most @max, claims every one of them, as dtree_tag_towrite()
 * over the whole range followed at once by dtree_claim_towrite() would,
 * but in one hold of the mutex (no TOWRITE tagging step, nothing can land
 * in between), sets *index = end and returns the count claimed (0: the
 * range is clean). An entry locked by another claimer is skipped with its
 * marks, as dtree_claim_towrite() skips it. If there are more, claims
 * nothing: tags the first @max + 1 of them TOWRITE (a first batch of
 * dtree_tag_towrite()), sets *index past the last tagged and returns
 * -EAGAIN: the caller goes on tagging from *index and then claims TOWRITE
 * entries from its start, the batched walk. Never blocks.
 * Returns the count, -EAGAIN, or -EINVAL (no tree/index/items, max 0, end
 * beyond the volume, *index > end; nothing changed).
 */
long dtree_claim_dirty(struct dtree *t, uint64_t *index, uint64_t end, struct dtree_item *items,
		       unsigned max);

/*
 * dtree_release -- unlock entries returned by dtree_claim_towrite() or
 * dtree_claim_dirty(), each exactly once; an entry that was not marked
 * DIRTY again meanwhile is removed. Wakes any thread waiting for those
 * entries. Clears the priv_ members of @items, so an array released twice
 * is refused the second time, not acted upon. An item that does not name
 * a claimed entry is logged and skipped (a caller bug).
 */
void dtree_release(struct dtree *t, struct dtree_item *items, unsigned n);

/*
 * dtree_lookup -- the entry covering page @index (a huge entry covers many
 * indexes); *first gets its first page index. @first and @entry may be
 * NULL. Returns 0, -ENOENT, or -EINVAL (no tree, index beyond the volume).
 */
int dtree_lookup(struct dtree *t, uint64_t index, uint64_t *first, uint64_t *entry);

/* dtree_get_mark -- whether the entry covering page @index carries @mark */
bool dtree_get_mark(struct dtree *t, uint64_t index, enum dtree_mark mark);

/*
 * dtree_remove_range -- drop every entry that lies wholly inside pages
 * [first, end) (discard). Huge entries only partly inside are kept with
 * their marks (their remaining data is still dirty). Waits for locked
 * entries overlapping the range to be released first. Returns entries
 * removed (0 on bad arguments -- no tree, first >= end, end beyond the
 * volume -- which are logged).
 */
uint64_t dtree_remove_range(struct dtree *t, uint64_t first, uint64_t end);

/* dtree_clear -- remove every entry (waits for locked ones) */
void dtree_clear(struct dtree *t);

/*
 * dtree_stats_get -- a consistent snapshot of the counters. nodes counts
 * the root; tree_bytes is the tree structure plus every node it holds,
 * including its cache of free nodes (malloc's own overhead excluded).
 */
void dtree_stats_get(struct dtree *t, struct dtree_stats *out);

/* dtree_npages -- pages of the volume (0 for NULL); no lock needed */
uint64_t dtree_npages(const struct dtree *t);

/*
 * dtree_check -- verify the whole structure: mark propagation, sibling
 * slots, entry sizes, locations and alignment, no empty nodes, no clean
 * unlocked entries, and the counters. For tests; takes the mutex for the
 * whole walk. Returns 0, or -EUCLEAN after logging the first fault found.
 */
int dtree_check(struct dtree *t);

/*
 * dtree_waiters -- threads now blocked in this tree waiting for an entry
 * lock to be released; lets a test know a blocking call really waits.
 */
unsigned dtree_waiters(struct dtree *t);

/* dtree_node_size -- bytes of one tree node (tests of memory per page) */
size_t dtree_node_size(void);

#endif
