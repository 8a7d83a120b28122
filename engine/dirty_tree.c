/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dirty_tree.c -- per-volume radix tree of dirty ranges (dirty_tree.h)
 *
 * Shape (the XArray's, simplified to what a volume needs):
 *
 *  - 64 slots per node, so one node level resolves 6 bits of the page
 *    index; a node is 552 bytes, a full leaf 8.6 bytes per dirty page.
 *  - Written lines (dirty_tree.h, "Lines"): a leaf whose entries are all
 *    wholly written has no line masks; the first entry with only some
 *    lines written gives the leaf a line array (64 masks, 512 bytes, from
 *    a per-tree cache like the nodes), kept until the leaf is freed. So
 *    sequential 4 KiB writes cost what they did, 8.6 bytes per page, and
 *    sparse small writes a leaf and an array each (a parallel array in
 *    every leaf would be 16.5 bytes per page for every write).
 *  - The height is fixed when the tree is made: the root has a level for
 *    every size class the volume can hold. A 1 GiB entry is one slot of a
 *    shift-18 node; a 2 MiB entry is 8 slots of a shift-6 node, the first
 *    (canonical) one holding the value and the other 7 holding a sibling
 *    marker that names it (XArray multi-index entries). Marks live on the
 *    canonical slot only.
 *  - A slot holds NULL, a node pointer (low two bits 00), a value entry
 *    (bit 0 set, made by the dentry_* helpers only) or a sibling marker
 *    (low two bits 10, the canonical slot number above them).
 *  - marks[m] bit i of a node is set iff slot i is a value entry carrying
 *    mark m, or slot i is a child node with any bit of marks[m] set.
 *  - The root node is embedded in struct dtree and never freed; every other
 *    node is freed as soon as its last slot is emptied (into a small
 *    per-tree cache first).
 *
 * All work happens under t->lock. Nodes are never allocated with it held:
 * an operation that finds the cache too small returns -EAGAIN with the
 * count it needs, the caller drops the lock, allocates, retakes it and
 * restarts that step (the tree may have changed meanwhile; every step is
 * idempotent). Waiting for locked entries uses t->unlocked, signalled by
 * dtree_release().
 */
#include "dirty_tree.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "faults.h"
#include "log.h"

#define DTREE_SLOT_BITS 6U
#define DTREE_SLOTS	(1U << DTREE_SLOT_BITS)
#define DTREE_SLOT_MASK (DTREE_SLOTS - 1)
#define DTREE_NR_MARKS	2U
/* __dtree_find: any present entry instead of a mark */
#define DTREE_FIND_ANY DTREE_NR_MARKS

/*
 * Free nodes kept per tree (the spare-node cache), instead of free() and a
 * malloc() for the next write. Every volume keeps DTREE_CACHE_MIN: the
 * deepest new path of any volume (6 levels below the root of a 2^40-page
 * volume). Beyond that, up to 1/1024 of the volume's size and at most
 * DTREE_CACHE_MAX_BYTES: an fsync of sparse pages (one leaf each) empties
 * as many nodes as it had dirty pages, and the writes after it need them
 * again; through malloc that was ~250 instructions and several cache
 * misses per node and cycle (callgrind: free() alone 135 instructions per
 * page of a 2048-page fsync). A cache fills only with nodes the tree had
 * in use, so it never adds to the tree's largest size; tree_bytes counts it.
 */
#define DTREE_CACHE_MIN	      8U
#define DTREE_CACHE_MAX_BYTES (4U << 20)

/*
 * Sanitizer builds (the test builds) cross-check what the fast paths take
 * on trust, at the cost of a walk: dtree_release() compares the node and
 * slot a claim recorded with a lookup from the root.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(DTREE_DEBUG)
#define DTREE_DEBUG_CHECKS 1
#endif

/* Entries removed by dtree_remove_range() before it lets others in. */
#define DTREE_REMOVE_BATCH 1024U

/* Highest page count: the page part of a location is 40 bits. */
#define DTREE_MAX_PAGES (1ULL << DLOC_PAGE_BITS)

_Static_assert(sizeof(uintptr_t) <= sizeof(uint64_t), "slots hold pointers");

/*
 * The line masks of one leaf: mask[i] is the written-lines mask of the
 * 4 KiB entry in slot i while it is DIRTY, 0 otherwise (empty, or not
 * DIRTY). In the cache, @next links free arrays.
 */
struct dtree_lines {
	union {
		uint64_t mask[DTREE_SLOTS];
		struct dtree_lines *next;
	};
};

struct dtree_node {
	struct dtree_node *parent; /* NULL for the root; next free node in the cache */
	uint8_t shift;		   /* page-index bits below this node's slots */
	uint8_t offset;		   /* slot number in the parent */
	uint8_t count;		   /* non-empty slots, siblings included */
	uint64_t marks[DTREE_NR_MARKS];
	/* leaves only: the line masks, NULL while every DIRTY entry is wholly written */
	struct dtree_lines *lines;
	uint64_t slots[DTREE_SLOTS];
};

/* what a step found missing from the caches (nodes, line arrays) */
struct dtree_need {
	unsigned nodes;
	unsigned lines;
};

struct dtree {
	pthread_mutex_t lock;
	pthread_cond_t unlocked; /* an entry lock was released */
	unsigned waiters;	 /* threads waiting on @unlocked */
	uint64_t npages;
	uint64_t base_location;
	bool huge_ok[DTREE_NR_SIZES]; /* location alignment allows this size class */
	uint64_t entries[DTREE_NR_SIZES];
	uint64_t dirty_bytes;
	/*
	 * entries carrying each mark: a walk that has met them all stops
	 * instead of searching the rest of the range (for a whole-volume
	 * fsync of one page, half of the search)
	 */
	uint64_t marked[DTREE_NR_MARKS];
	uint64_t nodes;	 /* allocated nodes in the tree, the root not counted */
	uint64_t nlines; /* line arrays attached to leaves */
	struct dtree_node *cache;
	unsigned ncache;
	struct dtree_lines *lines_cache; /* free line arrays, up to cache_max */
	unsigned nlines_cache;
	unsigned cache_max;	 /* dtree_cache_max() of the volume */
	struct dtree_node *hint; /* the leaf last marked in, or NULL */
	uint64_t hint_index;	 /* its first page >> 6 */
	struct dtree_node root;
};

/*
 * Slot encodings other than value entries.
 *
 *  63                                   2   1   0
 *  |  node pointer (aligned)            | 0 | 0 |   child node
 *  |  canonical slot number (0..63)     | 1 | 0 |   sibling of a 2 MiB entry
 *  |  location, size, lock (dirty_tree.h)   |   1 |   value entry
 */
#define SLOT_TYPE_MASK 0x3ULL
#define SLOT_SIBLING   0x2ULL

static inline bool slot_is_node(uint64_t v)
{
	return v != 0 && (v & SLOT_TYPE_MASK) == 0;
}

static inline bool slot_is_sibling(uint64_t v)
{
	return (v & SLOT_TYPE_MASK) == SLOT_SIBLING;
}

static inline uint64_t slot_sibling_make(unsigned canonical)
{
	return ((uint64_t)canonical << 2) | SLOT_SIBLING;
}

static inline unsigned slot_sibling_canonical(uint64_t v)
{
	return (unsigned)(v >> 2);
}

static inline struct dtree_node *slot_node(uint64_t v)
{
	return (struct dtree_node *)(uintptr_t)v;
}

static inline uint64_t slot_from_node(struct dtree_node *n)
{
	return (uint64_t)(uintptr_t)n;
}

/* shift of the node whose slot holds an entry of @size: 0, 6, 18 */
static inline unsigned size_node_shift(enum dtree_size size)
{
	static const unsigned shift[DTREE_NR_SIZES] = {0, 6, 18};
	return shift[size];
}

/* slots taken by an entry of @size in its node: 1, 8, 1 */
static inline unsigned size_slots(enum dtree_size size)
{
	return 1U << (dtree_size_order(size) - size_node_shift(size));
}

static inline uint64_t size_pages(enum dtree_size size)
{
	return 1ULL << dtree_size_order(size);
}

static inline uint64_t entry_pages(uint64_t e)
{
	return size_pages(dentry_size(e));
}

/* bits [off, off + n) of a 64-bit map; n is 1..8 */
static inline uint64_t slot_bits(unsigned off, unsigned n)
{
	return ((1ULL << n) - 1) << off;
}

static inline uint64_t node_span(const struct dtree_node *n)
{
	return (uint64_t)DTREE_SLOTS << n->shift;
}

/* ------------------------------------------------------------------------ */
/* nodes                                                                    */

/*
 * __node_take -- a zeroed node from the cache. Context: t->lock held; the
 * caller has checked t->ncache (never fails).
 */
static struct dtree_node *__node_take(struct dtree *t)
{
	struct dtree_node *n = t->cache;
	t->cache = n->parent;
	t->ncache--;
	memset(n, 0, sizeof(*n));
	t->nodes++;
	return n;
}

/* __node_free -- return an empty, unlinked node. Context: t->lock held. */
static void __node_free(struct dtree *t, struct dtree_node *n)
{
	t->nodes--;
	if (n == t->hint)
		t->hint = NULL;
	if (n->lines) {
		struct dtree_lines *l = n->lines;
		t->nlines--;
		if (t->nlines_cache < t->cache_max) {
			l->next = t->lines_cache;
			t->lines_cache = l;
			t->nlines_cache++;
		} else {
			free(l);
		}
	}
	if (t->ncache < t->cache_max) {
		n->parent = t->cache;
		t->cache = n;
		t->ncache++;
		return;
	}
	free(n);
}

/*
 * __dtree_refill -- make the caches hold at least @need nodes and line
 * arrays, allocating with t->lock dropped. Context: t->lock held on entry
 * and on return; the tree may have changed in between. Returns 0 or -ENOMEM.
 */
static int __dtree_refill(struct dtree *t, const struct dtree_need *need)
{
	struct dtree_node *list = NULL;
	struct dtree_lines *llist = NULL;
	int ret = 0;

	pthread_mutex_unlock(&t->lock);
	for (unsigned got = 0; got < need->nodes; got++) {
		struct dtree_node *n = malloc(sizeof(*n));
		if (!n) {
			LOG_ERROR("dtree node allocation (%zu bytes, %u of %u) failed", sizeof(*n),
				  got + 1, need->nodes);
			ret = -ENOMEM;
			break;
		}
		n->parent = list;
		list = n;
	}
	for (unsigned got = 0; ret == 0 && got < need->lines; got++) {
		struct dtree_lines *l = malloc(sizeof(*l));
		if (!l) {
			LOG_ERROR("dtree line array allocation (%zu bytes) failed", sizeof(*l));
			ret = -ENOMEM;
			break;
		}
		l->next = llist;
		llist = l;
	}
	pthread_mutex_lock(&t->lock);
	while (list) {
		struct dtree_node *n = list;
		list = n->parent;
		n->parent = t->cache;
		t->cache = n;
		t->ncache++;
	}
	while (llist) {
		struct dtree_lines *l = llist;
		llist = l->next;
		l->next = t->lines_cache;
		t->lines_cache = l;
		t->nlines_cache++;
	}
	return ret;
}

/*
 * __lines_attach -- give leaf @n a line array from the cache: every DIRTY
 * entry of it is wholly written so far (the meaning of no array), every
 * other slot 0. Context: t->lock held; the caller has checked
 * t->nlines_cache (never fails).
 */
static void __lines_attach(struct dtree *t, struct dtree_node *n)
{
	struct dtree_lines *l = t->lines_cache;
	t->lines_cache = l->next;
	t->nlines_cache--;
	t->nlines++;
	uint64_t dirty = n->marks[DTREE_DIRTY];
	for (unsigned i = 0; i < DTREE_SLOTS; i++)
		l->mask[i] = (dirty >> i) & 1 ? DTREE_LINES_ALL : 0;
	n->lines = l;
}

/* __dtree_wait -- wait for any entry lock to be released. Context: t->lock held. */
static void __dtree_wait(struct dtree *t)
{
	t->waiters++;
	pthread_cond_wait(&t->unlocked, &t->lock);
	t->waiters--;
}

/* ------------------------------------------------------------------------ */
/* marks                                                                    */

/*
 * __marks_fixup -- after n->marks[m] changed, make each ancestor's bit for
 * the path say whether anything below carries mark @m. Stops at the first
 * ancestor already right. Context: t->lock held.
 */
static void __marks_fixup(struct dtree_node *n, unsigned m)
{
	while (n->parent) {
		struct dtree_node *p = n->parent;
		uint64_t bit = 1ULL << n->offset;
		bool any = n->marks[m] != 0;
		if (((p->marks[m] & bit) != 0) == any)
			break;
		p->marks[m] ^= bit;
		n = p;
	}
}

static inline bool __entry_has_mark(const struct dtree_node *n, unsigned off, unsigned m)
{
	return (n->marks[m] >> off) & 1;
}

/*
 * __entry_lines -- the written-lines mask of the entry at canonical slot
 * @off of @n: 0 unless DIRTY; DTREE_LINES_ALL for a huge entry and for a
 * 4 KiB entry of a leaf without line array. Context: t->lock held.
 */
static inline uint64_t __entry_lines(const struct dtree_node *n, unsigned off)
{
	if (!__entry_has_mark(n, off, DTREE_DIRTY))
		return 0;
	return n->lines ? n->lines->mask[off] : DTREE_LINES_ALL;
}

/* __entry_dirty_bytes -- bytes a DIRTY entry counts in dirty_bytes: its written lines */
static inline uint64_t __entry_dirty_bytes(const struct dtree_node *n, unsigned off)
{
	if (dentry_size(n->slots[off]) != DTREE_SIZE_4K)
		return dentry_bytes(n->slots[off]);
	return dtree_lines_bytes(__entry_lines(n, off));
}

/*
 * __entry_dirty_small -- record that lines @w of the 4 KiB entry at slot
 * @off of leaf @n were written: OR them into its mask (a clean entry's
 * mask starts empty) and set DIRTY. The caller has attached a line array
 * if @w is partial and the entry not yet DIRTY. Context: t->lock held.
 */
static inline void __entry_dirty_small(struct dtree *t, struct dtree_node *n, unsigned off,
				       uint64_t w)
{
	uint64_t bit = 1ULL << off;
	if (n->marks[DTREE_DIRTY] & bit) {
		if (n->lines) {
			uint64_t add = w & ~n->lines->mask[off];
			n->lines->mask[off] |= add;
			t->dirty_bytes += dtree_lines_bytes(add);
		}
		return;
	}
	if (n->lines)
		n->lines->mask[off] = w;
	bool was_any = n->marks[DTREE_DIRTY] != 0;
	n->marks[DTREE_DIRTY] |= bit;
	t->marked[DTREE_DIRTY]++;
	t->dirty_bytes += dtree_lines_bytes(w);
	if (!was_any)
		__marks_fixup(n, DTREE_DIRTY);
}

/*
 * __entry_mark_set -- set mark @m on the canonical slot @off of @n; DIRTY
 * so means every line written. Context: t->lock held.
 */
static void __entry_mark_set(struct dtree *t, struct dtree_node *n, unsigned off, unsigned m)
{
	uint64_t bit = 1ULL << off;
	if (m == DTREE_DIRTY && dentry_size(n->slots[off]) == DTREE_SIZE_4K) {
		__entry_dirty_small(t, n, off, DTREE_LINES_ALL);
		return;
	}
	if (n->marks[m] & bit)
		return;
	bool was_any = n->marks[m] != 0;
	n->marks[m] |= bit;
	t->marked[m]++;
	if (m == DTREE_DIRTY)
		t->dirty_bytes += dentry_bytes(n->slots[off]);
	if (!was_any)
		__marks_fixup(n, m);
}

/*
 * __entry_mark_clear -- clear mark @m on the canonical slot @off of @n;
 * clearing DIRTY empties the entry's line mask. Context: t->lock held.
 */
static void __entry_mark_clear(struct dtree *t, struct dtree_node *n, unsigned off, unsigned m)
{
	uint64_t bit = 1ULL << off;
	if (!(n->marks[m] & bit))
		return;
	if (m == DTREE_DIRTY) {
		t->dirty_bytes -= __entry_dirty_bytes(n, off);
		if (n->lines)
			n->lines->mask[off] = 0;
	}
	n->marks[m] &= ~bit;
	t->marked[m]--;
	if (n->marks[m] == 0)
		__marks_fixup(n, m);
}

/* ------------------------------------------------------------------------ */
/* removal                                                                  */

/*
 * __node_shrink -- free @n and then its ancestors while they are empty
 * (never the root). An empty node carries no marks, so its parent's bits
 * for it are already clear. Context: t->lock held.
 */
static void __node_shrink(struct dtree *t, struct dtree_node *n)
{
	while (n->count == 0 && n->parent) {
		struct dtree_node *p = n->parent;
		p->slots[n->offset] = 0;
		p->count--;
		__node_free(t, n);
		n = p;
	}
}

/*
 * __entry_remove -- remove the value entry at canonical slot @off of @n
 * (and its siblings), then free nodes left empty. Context: t->lock held;
 * @n may be freed.
 */
static void __entry_remove(struct dtree *t, struct dtree_node *n, unsigned off)
{
	uint64_t v = n->slots[off];
	enum dtree_size size = dentry_size(v);
	unsigned nslots = size_slots(size);

	__entry_mark_clear(t, n, off, DTREE_DIRTY);
	__entry_mark_clear(t, n, off, DTREE_TOWRITE);
	for (unsigned i = 0; i < nslots; i++)
		n->slots[off + i] = 0;
	n->count -= nslots;
	t->entries[size]--;
	__node_shrink(t, n);
}

/*
 * __subtree_has_locked -- whether any entry below @n is locked.
 * Context: t->lock held.
 */
static bool __subtree_has_locked(const struct dtree_node *n)
{
	for (unsigned i = 0; i < DTREE_SLOTS; i++) {
		uint64_t v = n->slots[i];
		if (slot_is_node(v)) {
			if (__subtree_has_locked(slot_node(v)))
				return true;
		} else if (dentry_is_value(v) && dentry_is_locked(v)) {
			return true;
		}
	}
	return false;
}

/*
 * __subtree_free -- free @n and everything below it, taking its entries
 * out of the counters. Does not touch @n's parent. Context: t->lock held.
 */
static void __subtree_free(struct dtree *t, struct dtree_node *n)
{
	for (unsigned i = 0; i < DTREE_SLOTS; i++) {
		uint64_t v = n->slots[i];
		if (slot_is_node(v)) {
			__subtree_free(t, slot_node(v));
		} else if (dentry_is_value(v)) {
			t->entries[dentry_size(v)]--;
			if (__entry_has_mark(n, i, DTREE_DIRTY))
				t->dirty_bytes -= __entry_dirty_bytes(n, i);
			for (unsigned m = 0; m < DTREE_NR_MARKS; m++)
				t->marked[m] -= __entry_has_mark(n, i, m);
		}
	}
	__node_free(t, n);
}

/* ------------------------------------------------------------------------ */
/* lookup and search                                                        */

/*
 * __dtree_load -- the entry covering page @index (< npages), or 0. On a
 * hit, *np and *offp name its canonical slot and *firstp its first page.
 * Context: t->lock held.
 */
static uint64_t __dtree_load(struct dtree *t, uint64_t index, struct dtree_node **np,
			     unsigned *offp, uint64_t *firstp)
{
	struct dtree_node *n = &t->root;
	for (;;) {
		unsigned off = (index >> n->shift) & DTREE_SLOT_MASK;
		uint64_t v = n->slots[off];
		if (v == 0)
			return 0;
		if (slot_is_node(v)) {
			n = slot_node(v);
			continue;
		}
		if (slot_is_sibling(v)) {
			off = slot_sibling_canonical(v);
			v = n->slots[off];
		}
		*np = n;
		*offp = off;
		*firstp = align_down(index, node_span(n)) + ((uint64_t)off << n->shift);
		return v;
	}
}

/*
 * __dtree_range_start -- where a walk over [index, end) begins: the first
 * page of the entry covering @index if there is one (so a range starting
 * inside a huge entry includes it), else @index. An empty range stays
 * empty: a walk that stopped at @end inside a huge entry is done.
 * Context: t->lock held.
 */
static uint64_t __dtree_range_start(struct dtree *t, uint64_t index, uint64_t end)
{
	struct dtree_node *n;
	unsigned off;
	uint64_t first;
	if (index >= end || index >= t->npages)
		return index;
	/*
	 * Only a huge entry begins before a page it covers, and none begins
	 * before a 1 GiB-aligned page: no walk for most fsyncs (start 0).
	 */
	if ((t->entries[DTREE_SIZE_2M] | t->entries[DTREE_SIZE_1G]) == 0 ||
	    is_aligned(index, size_pages(DTREE_SIZE_1G)))
		return index;
	return __dtree_load(t, index, &n, &off, &first) ? first : index;
}

struct dtree_pos {
	struct dtree_node *node;
	unsigned off;	/* canonical slot */
	uint64_t index; /* first page of the entry */
	uint64_t entry;
};

/* node_next_present -- first slot >= @off holding a child node or a canonical entry, or 64 */
static unsigned node_next_present(const struct dtree_node *n, unsigned off)
{
	for (; off < DTREE_SLOTS; off++) {
		uint64_t v = n->slots[off];
		if (v != 0 && !slot_is_sibling(v))
			break;
	}
	return off;
}

/*
 * Where the last __dtree_find() of a walk stopped: the node holding the
 * entry it found and that node's first page. The next search of the walk
 * starts there and climbs only as far as it must, instead of descending
 * from the root for every entry (for sparse pages, one leaf each, that was
 * two dependent node loads and ~40 instructions per entry and pass).
 * Valid while the mutex is held and no node is freed; every walk that
 * removes entries starts a new cursor after a removal.
 */
struct dtree_cursor {
	struct dtree_node *node;
	uint64_t base;
};

static inline void cursor_init(struct dtree *t, struct dtree_cursor *c)
{
	c->node = &t->root;
	c->base = 0;
}

/*
 * __dtree_find -- the first entry whose first page is in [start, end) and
 * that carries mark @what (DTREE_FIND_ANY: any entry), searching from
 * cursor @cur (updated to the node of the entry found). @start must not be
 * inside an entry that begins before it (see __dtree_range_start()): the
 * walk skips sibling slots. @start must not lie before the cursor's node:
 * walks only move forward. Context: t->lock held.
 */
static bool __dtree_find(struct dtree *t, struct dtree_cursor *cur, uint64_t start, uint64_t end,
			 unsigned what, struct dtree_pos *pos)
{
	struct dtree_node *n = cur->node;
	uint64_t base = cur->base;
	/* the shift kept in a register: a child's is its parent's less 6 (dtree_check()) */
	unsigned shift = n->shift;
	uint64_t s = start;

	if (end > t->npages)
		end = t->npages;
	if (s >= end)
		return false;
	for (;;) {
		/* climb while @s lies beyond this node (never past the root: s < end) */
		while (((s - base) >> shift) >= DTREE_SLOTS) {
			n = n->parent;
			if (!n)
				return false;
			shift += DTREE_SLOT_BITS;
			base = align_down(base, (uint64_t)DTREE_SLOTS << shift);
		}
		unsigned off = (unsigned)((s - base) >> shift);
		unsigned i;
		if (what == DTREE_FIND_ANY) {
			i = node_next_present(n, off);
		} else {
			uint64_t bits = n->marks[what] & (~0ULL << off);
			i = bits ? (unsigned)__builtin_ctzll(bits) : DTREE_SLOTS;
		}
		if (i == DTREE_SLOTS) {
			s = base + ((uint64_t)DTREE_SLOTS << shift);
			if (s >= end)
				return false;
			continue;
		}
		uint64_t idx = base + ((uint64_t)i << shift);
		if (idx >= end)
			return false;
		uint64_t v = n->slots[i];
		if (slot_is_node(v)) {
			n = slot_node(v);
			base = idx;
			shift -= DTREE_SLOT_BITS;
			if (idx > s)
				s = idx;
			continue;
		}
		pos->node = n;
		pos->off = i;
		pos->index = idx;
		pos->entry = v;
		cur->node = n;
		cur->base = base;
		return true;
	}
}

/* ------------------------------------------------------------------------ */
/* marking                                                                  */

enum { DESCEND_TARGET = 0, DESCEND_ENTRY = 1 };

/*
 * __dtree_descend -- walk from the root to the node of shift @target that
 * holds page @index, creating missing nodes from the cache. Returns
 * DESCEND_TARGET (*np, *offp: that node and @index's slot), DESCEND_ENTRY
 * (a value entry above @target covers @index; *np and *offp: its canonical
 * slot), or -EAGAIN with need->nodes set when the cache is short
 * (nothing changed). Context: t->lock held.
 */
static int __dtree_descend(struct dtree *t, uint64_t index, unsigned target, struct dtree_node **np,
			   unsigned *offp, struct dtree_need *need)
{
	struct dtree_node *n = &t->root;
	/* the shift kept in a register: one dependent load per level, not two */
	unsigned shift = n->shift;
	for (;; shift -= DTREE_SLOT_BITS) {
		unsigned off = (index >> shift) & DTREE_SLOT_MASK;
		if (shift == target) {
			*np = n;
			*offp = off;
			return DESCEND_TARGET;
		}
		uint64_t v = n->slots[off];
		if (slot_is_node(v)) {
			n = slot_node(v);
			continue;
		}
		if (v != 0) {
			if (slot_is_sibling(v))
				off = slot_sibling_canonical(v);
			*np = n;
			*offp = off;
			return DESCEND_ENTRY;
		}
		unsigned k = (shift - target) / DTREE_SLOT_BITS;
		if (t->ncache < k) {
			need->nodes = k;
			return -EAGAIN;
		}
		struct dtree_node *c = __node_take(t);
		c->parent = n;
		c->shift = (uint8_t)(shift - DTREE_SLOT_BITS);
		c->offset = (uint8_t)off;
		n->slots[off] = slot_from_node(c);
		n->count++;
		n = c;
	}
}

/* __entry_first -- first page of the entry at canonical slot @off of @n, @index inside @n */
static inline uint64_t __entry_first(const struct dtree_node *n, unsigned off, uint64_t index)
{
	return align_down(index, node_span(n)) + ((uint64_t)off << n->shift);
}

/*
 * page_lines -- the lines of page @q that bytes [off, end) touch (the
 * range overlaps the page): all but at the first and the last page. A
 * page the range covers wholly costs two compares (the mark path).
 */
static inline uint64_t page_lines(uint64_t q, uint64_t off, uint64_t end)
{
	uint64_t pb = q << RDAX_PAGE_SHIFT;
	if (off <= pb && end - pb >= RDAX_PAGE_SIZE)
		return DTREE_LINES_ALL;
	uint64_t s = off > pb ? off - pb : 0;
	uint64_t e = end - pb < RDAX_PAGE_SIZE ? end - pb : RDAX_PAGE_SIZE;
	unsigned first = (unsigned)(s >> DTREE_LINE_SHIFT);
	unsigned last = (unsigned)((e - 1) >> DTREE_LINE_SHIFT);
	return (DTREE_LINES_ALL >> (DTREE_SLOTS - 1 - last)) & (DTREE_LINES_ALL << first);
}

/*
 * __lines_wanted -- whether marking lines @w of slot @off of leaf @n needs
 * a line array the leaf lacks: @w is partial and the entry not DIRTY (a
 * DIRTY entry of such a leaf is wholly written, and stays so).
 */
static inline bool __lines_wanted(const struct dtree_node *n, unsigned off, uint64_t w)
{
	return w != DTREE_LINES_ALL && !n->lines && !__entry_has_mark(n, off, DTREE_DIRTY);
}

/*
 * __mark_small -- mark bytes [boff, bend) of pages [p, min(last, end of p's
 * leaf)] dirty with 4 KiB entries and their lines, or the huge entry
 * covering p. *next gets the first page not handled. Returns 0 or -EAGAIN
 * (@need: nodes or a line array). Context: t->lock held.
 *
 * The leaf used last is remembered (t->hint, forgotten when the leaf is
 * freed): sequential writes and rewrites of hot pages skip the descent,
 * which was half the cost of marking an already-dirty page.
 */
static int __mark_small(struct dtree *t, uint64_t p, uint64_t last, uint64_t boff, uint64_t bend,
			uint64_t *next, struct dtree_need *need)
{
	struct dtree_node *n = t->hint;
	unsigned off;
	if (!n || t->hint_index != p >> DTREE_SLOT_BITS) {
		int ret = __dtree_descend(t, p, 0, &n, &off, need);
		if (ret < 0)
			return ret;
		if (ret == DESCEND_ENTRY) {
			__entry_mark_set(t, n, off, DTREE_DIRTY);
			*next = __entry_first(n, off, p) + entry_pages(n->slots[off]);
			return 0;
		}
		t->hint = n;
		t->hint_index = p >> DTREE_SLOT_BITS;
	}
	uint64_t stop = p | DTREE_SLOT_MASK;
	if (stop > last)
		stop = last;
	/* only the first and the last page of a write can be partly written */
	uint64_t wfirst = page_lines(p, boff, bend);
	uint64_t wlast = stop == p ? wfirst : page_lines(stop, boff, bend);
	uint64_t wmid = DTREE_LINES_ALL;
	if (rdax_faults.lines_first_only) {
		/* control: a write records the lowest line it touches in each page alone */
		wfirst &= -wfirst;
		wlast &= -wlast;
		wmid = 1;
	}
	if ((wfirst & wlast & wmid) != DTREE_LINES_ALL && !n->lines &&
	    (__lines_wanted(n, p & DTREE_SLOT_MASK, wfirst) ||
	     __lines_wanted(n, stop & DTREE_SLOT_MASK, wlast) ||
	     (wmid != DTREE_LINES_ALL && stop > p + 1))) {
		if (t->nlines_cache == 0) {
			need->lines = 1;
			return -EAGAIN;
		}
		__lines_attach(t, n);
	}
	for (uint64_t q = p; q <= stop; q++) {
		unsigned s = q & DTREE_SLOT_MASK;
		if (n->slots[s] == 0) {
			n->slots[s] = dentry_make(t->base_location + q, DTREE_SIZE_4K);
			n->count++;
			t->entries[DTREE_SIZE_4K]++;
		}
		uint64_t w = q == p ? wfirst : q == stop ? wlast : wmid;
		__entry_dirty_small(t, n, s, w);
	}
	*next = stop + 1;
	return 0;
}

/*
 * __mark_huge -- mark the aligned block of @size starting at page p dirty
 * as one huge entry, replacing the entries under it (their TOWRITE carried
 * over). *next gets the first page not handled. Returns 0, -EAGAIN (@need
 * nodes) or -EBUSY (an entry to replace is locked; nothing changed).
 * Context: t->lock held.
 */
static int __mark_huge(struct dtree *t, uint64_t p, enum dtree_size size, uint64_t *next,
		       struct dtree_need *need)
{
	struct dtree_node *n;
	unsigned off;
	int ret = __dtree_descend(t, p, size_node_shift(size), &n, &off, need);
	if (ret < 0)
		return ret;
	uint64_t v = n->slots[off];
	if (ret == DESCEND_ENTRY || dentry_is_value(v)) {
		/* an entry of this size or larger is already there */
		__entry_mark_set(t, n, off, DTREE_DIRTY);
		*next = __entry_first(n, off, p) + entry_pages(n->slots[off]);
		return 0;
	}

	unsigned nslots = size_slots(size);
	for (unsigned i = 0; i < nslots; i++) {
		v = n->slots[off + i];
		if (slot_is_node(v) && __subtree_has_locked(slot_node(v)))
			return -EBUSY;
	}
	uint64_t bits = slot_bits(off, nslots);
	bool towrite = (n->marks[DTREE_TOWRITE] & bits) != 0;
	for (unsigned i = 0; i < nslots; i++) {
		v = n->slots[off + i];
		if (slot_is_node(v)) {
			__subtree_free(t, slot_node(v));
			n->slots[off + i] = 0;
			n->count--;
		}
	}
	n->marks[DTREE_DIRTY] &= ~bits;
	n->marks[DTREE_TOWRITE] &= ~bits;

	n->slots[off] = dentry_make(t->base_location + p, size);
	for (unsigned i = 1; i < nslots; i++)
		n->slots[off + i] = slot_sibling_make(off);
	n->count = (uint8_t)(n->count + nslots);
	t->entries[size]++;
	n->marks[DTREE_DIRTY] |= 1ULL << off;
	t->marked[DTREE_DIRTY]++;
	t->dirty_bytes += size_pages(size) << RDAX_PAGE_SHIFT;
	if (towrite && !rdax_faults.no_towrite_inherit) {
		n->marks[DTREE_TOWRITE] |= 1ULL << off;
		t->marked[DTREE_TOWRITE]++;
	}
	__marks_fixup(n, DTREE_DIRTY);
	__marks_fixup(n, DTREE_TOWRITE);
	*next = p + size_pages(size);
	return 0;
}

/*
 * mark_choose_size -- the entry size for page @p of a write of bytes
 * [off, end): huge when the aligned block starting at @p lies wholly in
 * the write and its data location is aligned as well.
 */
static enum dtree_size mark_choose_size(const struct dtree *t, uint64_t p, uint64_t off,
					uint64_t end)
{
	uint64_t pb = p << RDAX_PAGE_SHIFT;
	if (pb < off)
		return DTREE_SIZE_4K;
	for (int size = DTREE_SIZE_1G; size > DTREE_SIZE_4K; size--) {
		uint64_t pages = size_pages((enum dtree_size)size);
		if (t->huge_ok[size] && is_aligned(p, pages) &&
		    pb + (pages << RDAX_PAGE_SHIFT) <= end)
			return (enum dtree_size)size;
	}
	return DTREE_SIZE_4K;
}

int dtree_mark_dirty(struct dtree *t, uint64_t offset, uint64_t len)
{
	if (!t) {
		LOG_ERROR("dtree_mark_dirty(offset=%" PRIu64 ", len=%" PRIu64 "): no tree", offset,
			  len);
		return -EINVAL;
	}
	if (len == 0) {
		LOG_ERROR("dtree_mark_dirty(offset=%" PRIu64 ", len=0): empty range", offset);
		return -EINVAL;
	}
	int ret = range_check(offset, len, t->npages << RDAX_PAGE_SHIFT);
	if (ret) {
		LOG_ERROR("dtree_mark_dirty(offset=%" PRIu64 ", len=%" PRIu64
			  "): outside the volume of %" PRIu64 " pages",
			  offset, len, t->npages);
		return ret;
	}

	uint64_t end = offset + len;
	uint64_t p = offset >> RDAX_PAGE_SHIFT;
	uint64_t last = (end - 1) >> RDAX_PAGE_SHIFT;

	pthread_mutex_lock(&t->lock);
	while (p <= last) {
		struct dtree_need need = {0, 0};
		enum dtree_size size = mark_choose_size(t, p, offset, end);
		if (size == DTREE_SIZE_4K)
			ret = __mark_small(t, p, last, offset, end, &p, &need);
		else
			ret = __mark_huge(t, p, size, &p, &need);
		if (ret == -EAGAIN) {
			ret = __dtree_refill(t, &need);
			if (ret)
				break;
		} else if (ret == -EBUSY) {
			__dtree_wait(t);
		}
		ret = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* walks                                                                    */

/*
 * range_args_ok -- common checks of the range walks; logs what is wrong.
 * Accepts *index == end (nothing left to do).
 */
static bool range_args_ok(const char *op, const struct dtree *t, const uint64_t *index,
			  uint64_t end)
{
	if (!t || !index) {
		LOG_ERROR("%s: no tree or no index", op);
		return false;
	}
	if (end > t->npages || *index > end) {
		LOG_ERROR("%s(index=%" PRIu64 ", end=%" PRIu64 "): outside the volume of %" PRIu64
			  " pages",
			  op, *index, end, t->npages);
		return false;
	}
	return true;
}

long dtree_tag_towrite(struct dtree *t, uint64_t *index, uint64_t end, unsigned batch)
{
	if (!range_args_ok("dtree_tag_towrite", t, index, end))
		return -EINVAL;
	if (batch == 0) {
		LOG_ERROR("dtree_tag_towrite(index=%" PRIu64 "): batch 0", *index);
		return -EINVAL;
	}

	long tagged = 0;
	struct dtree_pos pos;
	struct dtree_cursor cur;
	pthread_mutex_lock(&t->lock);
	uint64_t s = __dtree_range_start(t, *index, end);
	uint64_t left = t->marked[DTREE_DIRTY]; /* DIRTY entries not yet met */
	cursor_init(t, &cur);
	while ((unsigned long)tagged < batch) {
		if (left-- == 0 || !__dtree_find(t, &cur, s, end, DTREE_DIRTY, &pos)) {
			s = end;
			break;
		}
		__entry_mark_set(t, pos.node, pos.off, DTREE_TOWRITE);
		tagged++;
		s = pos.index + entry_pages(pos.entry);
	}
	pthread_mutex_unlock(&t->lock);
	*index = s < end ? s : end;
	return tagged;
}

/*
 * item_set -- fill @item from a found position: its lines as they are now;
 * the hint only for a claimed entry
 */
static inline void item_set(struct dtree_item *item, const struct dtree_pos *pos, uint64_t entry,
			    bool claimed)
{
	item->index = pos->index;
	item->entry = entry;
	item->lines = __entry_lines(pos->node, pos->off);
	item->priv_node = claimed ? pos->node : NULL;
	item->priv_slot = claimed ? pos->off : 0;
}

/*
 * __dtree_gang -- copy up to @max entries carrying @what overlapping
 * [*index, end) into @items and advance *index. Context: t->lock held.
 */
static unsigned __dtree_gang(struct dtree *t, uint64_t *index, uint64_t end, unsigned what,
			     struct dtree_item *items, unsigned max)
{
	unsigned n = 0;
	struct dtree_pos pos;
	struct dtree_cursor cur;
	uint64_t s = __dtree_range_start(t, *index, end);
	/* entries with @what not yet met */
	uint64_t left = what == DTREE_FIND_ANY ? t->entries[0] + t->entries[1] + t->entries[2]
					       : t->marked[what];
	cursor_init(t, &cur);
	while (n < max) {
		if (left-- == 0 || !__dtree_find(t, &cur, s, end, what, &pos)) {
			s = end;
			break;
		}
		item_set(&items[n], &pos, pos.entry, false);
		n++;
		s = pos.index + entry_pages(pos.entry);
	}
	*index = s < end ? s : end;
	return n;
}

unsigned dtree_gang_lookup(struct dtree *t, uint64_t *index, uint64_t end, enum dtree_mark mark,
			   struct dtree_item *items, unsigned max)
{
	if (!range_args_ok("dtree_gang_lookup", t, index, end))
		return 0;
	if ((unsigned)mark >= DTREE_NR_MARKS || !items || max == 0) {
		LOG_ERROR("dtree_gang_lookup(index=%" PRIu64 ", mark=%d, max=%u): bad arguments",
			  *index, (int)mark, max);
		return 0;
	}
	pthread_mutex_lock(&t->lock);
	unsigned n = __dtree_gang(t, index, end, (unsigned)mark, items, max);
	pthread_mutex_unlock(&t->lock);
	return n;
}

unsigned dtree_gang_lookup_any(struct dtree *t, uint64_t *index, uint64_t end,
			       struct dtree_item *items, unsigned max)
{
	if (!range_args_ok("dtree_gang_lookup_any", t, index, end))
		return 0;
	if (!items || max == 0) {
		LOG_ERROR("dtree_gang_lookup_any(index=%" PRIu64 ", max=%u): bad arguments", *index,
			  max);
		return 0;
	}
	pthread_mutex_lock(&t->lock);
	unsigned n = __dtree_gang(t, index, end, DTREE_FIND_ANY, items, max);
	pthread_mutex_unlock(&t->lock);
	return n;
}

/*
 * __entry_claim -- fsync step 3 for one unlocked entry: set its lock bit,
 * take its line mask into @item, then clear TOWRITE and DIRTY (which
 * empties the mask; DIRTY only on release under the clear_after_writeback
 * control). All under t->lock, which every writer's OR into a mask takes
 * too: a line is in the mask taken here or in the one a later write
 * starts (dirty_tree.h, "Lines"). An entry with no lines recorded (not
 * DIRTY: cannot happen, TOWRITE is only set on DIRTY entries) is taken
 * whole. Fills @item. Context: t->lock held.
 */
static inline void __entry_claim(struct dtree *t, const struct dtree_pos *pos,
				 struct dtree_item *item)
{
	uint64_t locked = dentry_lock(pos->entry);
	pos->node->slots[pos->off] = locked;
	item_set(item, pos, locked, true);
	if (item->lines == 0)
		item->lines = DTREE_LINES_ALL;
	__entry_mark_clear(t, pos->node, pos->off, DTREE_TOWRITE);
	if (!rdax_faults.clear_after_writeback)
		__entry_mark_clear(t, pos->node, pos->off, DTREE_DIRTY);
}

unsigned dtree_claim_towrite(struct dtree *t, uint64_t *index, uint64_t end,
			     struct dtree_item *items, unsigned max)
{
	if (!range_args_ok("dtree_claim_towrite", t, index, end))
		return 0;
	if (!items || max == 0) {
		LOG_ERROR("dtree_claim_towrite(index=%" PRIu64 ", max=%u): bad arguments", *index,
			  max);
		return 0;
	}

	unsigned n = 0;
	struct dtree_pos pos;
	struct dtree_cursor cur;
	pthread_mutex_lock(&t->lock);
	uint64_t s = __dtree_range_start(t, *index, end);
	/* TOWRITE entries not yet met; claiming one takes it off t->marked, not off this */
	uint64_t left = t->marked[DTREE_TOWRITE];
	cursor_init(t, &cur);
	while (n < max) {
		if (left-- == 0 || !__dtree_find(t, &cur, s, end, DTREE_TOWRITE, &pos)) {
			s = end;
			break;
		}
		s = pos.index + entry_pages(pos.entry);
		if (dentry_is_locked(pos.entry)) {
			/*
			 * Held by another claimer (only possible when fsyncs are
			 * not serialised, or a caller claims again before it
			 * releases). Skip it with its marks left set: it stays
			 * DIRTY and TOWRITE, so the next walk takes it. Waiting
			 * here could wait for the caller itself.
			 */
			continue;
		}
		__entry_claim(t, &pos, &items[n]);
		n++;
	}
	pthread_mutex_unlock(&t->lock);
	*index = s < end ? s : end;
	return n;
}

/*
 * dtree_claim_dirty -- see dirty_tree.h. One pass under one hold of the
 * mutex: first find the DIRTY entries of the range, at most @max + 1 of
 * them (their positions kept in @items and @extra; nothing changes while
 * looking, so the positions stay valid), then act on all of them:
 *  - at most @max: claim each (an entry locked by another claimer is
 *    skipped with its marks, as dtree_claim_towrite() skips it). This is
 *    dtree_tag_towrite() over the whole range followed by
 *    dtree_claim_towrite() over it, with no moment between the two at
 *    which another thread could run: every entry DIRTY when the call
 *    began is claimed, none is left TOWRITE, and a write that lands after
 *    the call sets DIRTY again (the same order of lock bit and marks).
 *  - more: tag those @max + 1 TOWRITE, exactly dtree_tag_towrite()'s first
 *    batch, and tell the caller to go on with the batched walk.
 * The pass is bounded (@max + 1 entries, the cursor only moves forward),
 * so a stream of new writes cannot keep it going: the no-livelock rule of
 * the tagged walk holds for it as well.
 */
long dtree_claim_dirty(struct dtree *t, uint64_t *index, uint64_t end, struct dtree_item *items,
		       unsigned max)
{
	if (!range_args_ok("dtree_claim_dirty", t, index, end))
		return -EINVAL;
	if (!items || max == 0) {
		LOG_ERROR("dtree_claim_dirty(index=%" PRIu64 ", max=%u): bad arguments", *index,
			  max);
		return -EINVAL;
	}

	unsigned found = 0;
	bool more = false;
	struct dtree_pos pos, extra = {0};
	struct dtree_cursor cur;
	pthread_mutex_lock(&t->lock);
	uint64_t s = __dtree_range_start(t, *index, end);
	uint64_t left = t->marked[DTREE_DIRTY]; /* DIRTY entries not yet met */
	cursor_init(t, &cur);
	while (left-- != 0 && __dtree_find(t, &cur, s, end, DTREE_DIRTY, &pos)) {
		s = pos.index + entry_pages(pos.entry);
		if (found == max) {
			extra = pos;
			more = true;
			break;
		}
		item_set(&items[found++], &pos, pos.entry, true);
	}

	long ret;
	if (!more) {
		unsigned n = 0;
		for (unsigned i = 0; i < found; i++) {
			if (dentry_is_locked(items[i].entry))
				continue; /* held by another claimer: see dtree_claim_towrite() */
			pos.node = items[i].priv_node;
			pos.off = items[i].priv_slot;
			pos.index = items[i].index;
			pos.entry = items[i].entry;
			__entry_claim(t, &pos, &items[n]);
			n++;
		}
		*index = end;
		ret = n;
	} else {
		for (unsigned i = 0; i < found; i++)
			__entry_mark_set(t, items[i].priv_node, items[i].priv_slot, DTREE_TOWRITE);
		__entry_mark_set(t, extra.node, extra.off, DTREE_TOWRITE);
		*index = s < end ? s : end;
		ret = -EAGAIN;
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/*
 * __release_find -- the node and slot of claimed item @item, or false when
 * it names no claimed entry. The hint stored by the claim is used when it
 * still describes the item exactly: a claimed entry is locked, and nothing
 * removes a locked entry (removals and huge conversions wait for it), so
 * its node can be neither freed nor changed until this release. An item
 * that was not made by a claim has no hint; one whose hint does not match
 * (a caller bug: released twice, or changed) is looked up from the root
 * like it. Context: t->lock held.
 */
static bool __release_find(struct dtree *t, const struct dtree_item *item, struct dtree_node **np,
			   unsigned *offp)
{
	struct dtree_node *node = item->priv_node;
	unsigned off = item->priv_slot;
	bool claimed = dentry_is_locked(item->entry) &&
		       dentry_location(item->entry) == t->base_location + item->index;

	if (node && claimed && off < DTREE_SLOTS && node->slots[off] == item->entry) {
#ifdef DTREE_DEBUG_CHECKS
		struct dtree_node *wn = NULL;
		unsigned woff = 0;
		uint64_t wfirst = 0;
		uint64_t wv = __dtree_load(t, item->index, &wn, &woff, &wfirst);
		if (wv != item->entry || wn != node || woff != off || wfirst != item->index) {
			LOG_ERROR("dtree_release(index=%" PRIu64 "): hint names slot %u of %p, the "
				  "tree has it in slot %u of %p",
				  item->index, off, (void *)node, woff, (void *)wn);
			abort();
		}
#endif
		*np = node;
		*offp = off;
		return true;
	}
	uint64_t first = 0;
	uint64_t v = 0;
	if (item->index < t->npages)
		v = __dtree_load(t, item->index, np, offp, &first);
	if (!v || first != item->index || !dentry_is_locked(v) ||
	    dentry_unlock(v) != dentry_unlock(item->entry)) {
		LOG_ERROR("dtree_release(index=%" PRIu64 ", entry=%#" PRIx64
			  "): not a claimed entry (found %#" PRIx64 ")",
			  item->index, item->entry, v);
		return false;
	}
	return true;
}

void dtree_release(struct dtree *t, struct dtree_item *items, unsigned n)
{
	if (!t || (!items && n)) {
		LOG_ERROR("dtree_release(n=%u): no tree or no items", n);
		return;
	}
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < n; i++) {
		struct dtree_node *node;
		unsigned off;
		bool found = __release_find(t, &items[i], &node, &off);
		items[i].priv_node = NULL;
		items[i].priv_slot = 0;
		if (!found)
			continue;
		node->slots[off] = dentry_unlock(node->slots[off]);
		if (rdax_faults.clear_after_writeback)
			__entry_mark_clear(t, node, off, DTREE_DIRTY);
		if (!__entry_has_mark(node, off, DTREE_DIRTY) &&
		    !__entry_has_mark(node, off, DTREE_TOWRITE))
			__entry_remove(t, node, off);
	}
	if (t->waiters)
		pthread_cond_broadcast(&t->unlocked);
	pthread_mutex_unlock(&t->lock);
}

int dtree_lookup(struct dtree *t, uint64_t index, uint64_t *first, uint64_t *entry)
{
	if (!t || index >= t->npages) {
		LOG_ERROR("dtree_lookup(index=%" PRIu64 "): no tree or beyond the volume", index);
		return -EINVAL;
	}
	struct dtree_node *n;
	unsigned off;
	uint64_t f = 0;
	pthread_mutex_lock(&t->lock);
	uint64_t v = __dtree_load(t, index, &n, &off, &f);
	pthread_mutex_unlock(&t->lock);
	if (!v)
		return -ENOENT;
	if (first)
		*first = f;
	if (entry)
		*entry = v;
	return 0;
}

bool dtree_get_mark(struct dtree *t, uint64_t index, enum dtree_mark mark)
{
	if (!t || index >= t->npages || (unsigned)mark >= DTREE_NR_MARKS)
		return false;
	struct dtree_node *n;
	unsigned off;
	uint64_t f;
	pthread_mutex_lock(&t->lock);
	bool set = __dtree_load(t, index, &n, &off, &f) && __entry_has_mark(n, off, mark);
	pthread_mutex_unlock(&t->lock);
	return set;
}

uint64_t dtree_remove_range(struct dtree *t, uint64_t first, uint64_t end)
{
	if (!t || first >= end || end > t->npages) {
		LOG_ERROR("dtree_remove_range(first=%" PRIu64 ", end=%" PRIu64
			  "): bad range or no tree",
			  first, end);
		return 0;
	}

	uint64_t removed = 0;
	unsigned batch = 0;
	struct dtree_pos pos;
	struct dtree_cursor cur;
	pthread_mutex_lock(&t->lock);
	uint64_t s = __dtree_range_start(t, first, end);
	cursor_init(t, &cur);
	while (__dtree_find(t, &cur, s, end, DTREE_FIND_ANY, &pos)) {
		if (dentry_is_locked(pos.entry)) {
			__dtree_wait(t);
			s = __dtree_range_start(t, s, end);
			cursor_init(t, &cur); /* the tree may have changed while waiting */
			continue;
		}
		s = pos.index + entry_pages(pos.entry);
		if (pos.index < first || s > end)
			continue; /* a huge entry only partly inside: its other data is dirty */
		__entry_remove(t, pos.node, pos.off);
		cursor_init(t, &cur); /* the removal may have freed the cursor's node */
		removed++;
		if (++batch == DTREE_REMOVE_BATCH) {
			/* long discards: let writers and fsyncs in */
			batch = 0;
			pthread_mutex_unlock(&t->lock);
			pthread_mutex_lock(&t->lock);
			s = __dtree_range_start(t, s, end);
			cursor_init(t, &cur);
		}
	}
	pthread_mutex_unlock(&t->lock);
	return removed;
}

void dtree_clear(struct dtree *t)
{
	if (!t)
		return;
	dtree_remove_range(t, 0, t->npages);
}

void dtree_stats_get(struct dtree *t, struct dtree_stats *out)
{
	if (!t || !out)
		return;
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < DTREE_NR_SIZES; i++)
		out->entries[i] = t->entries[i];
	out->dirty_bytes = t->dirty_bytes;
	out->nodes = t->nodes + 1;
	out->tree_bytes = sizeof(*t) + (t->nodes + t->ncache) * sizeof(struct dtree_node) +
			  (t->nlines + t->nlines_cache) * sizeof(struct dtree_lines);
	pthread_mutex_unlock(&t->lock);
}

uint64_t dtree_npages(const struct dtree *t)
{
	return t ? t->npages : 0;
}

unsigned dtree_waiters(struct dtree *t)
{
	if (!t)
		return 0;
	pthread_mutex_lock(&t->lock);
	unsigned n = t->waiters;
	pthread_mutex_unlock(&t->lock);
	return n;
}

size_t dtree_node_size(void)
{
	return sizeof(struct dtree_node);
}

/* ------------------------------------------------------------------------ */
/* structure check                                                          */

struct check_totals {
	uint64_t entries[DTREE_NR_SIZES];
	uint64_t marked[DTREE_NR_MARKS];
	uint64_t dirty_bytes;
	uint64_t nodes;
	uint64_t lines; /* line arrays attached */
};

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			LOG_ERROR("dtree_check: " __VA_ARGS__);                                    \
			return -EUCLEAN;                                                           \
		}                                                                                  \
	} while (0)

/*
 * __check_value -- checks of one canonical value entry at slot @i of @n
 * whose first page is @idx. Context: t->lock held.
 */
static int __check_value(struct dtree *t, const struct dtree_node *n, unsigned i, uint64_t idx,
			 struct check_totals *tot)
{
	uint64_t v = n->slots[i];
	enum dtree_size size = dentry_size(v);
	CHECK((unsigned)size < DTREE_NR_SIZES, "entry %#" PRIx64 " at %" PRIu64 ": bad size", v,
	      idx);
	CHECK(size_node_shift(size) == n->shift,
	      "entry of size %d at %" PRIu64 " in a node of shift %u", (int)size, idx, n->shift);
	CHECK(is_aligned(idx, size_pages(size)), "entry of size %d at unaligned %" PRIu64,
	      (int)size, idx);
	CHECK(idx + size_pages(size) <= t->npages, "entry at %" PRIu64 " beyond the volume", idx);
	CHECK(dentry_location(v) == t->base_location + idx,
	      "entry at %" PRIu64 ": location %#" PRIx64 ", expected %#" PRIx64, idx,
	      dentry_location(v), t->base_location + idx);
	bool dirty = __entry_has_mark(n, i, DTREE_DIRTY);
	bool towrite = __entry_has_mark(n, i, DTREE_TOWRITE);
	CHECK(dirty || towrite || dentry_is_locked(v),
	      "entry at %" PRIu64 " is clean and unlocked but present", idx);
	unsigned nslots = size_slots(size);
	for (unsigned k = 1; k < nslots; k++) {
		uint64_t s = n->slots[i + k];
		CHECK(slot_is_sibling(s) && slot_sibling_canonical(s) == i,
		      "entry at %" PRIu64 ": slot %u is %#" PRIx64 ", not its sibling", idx, i + k,
		      s);
		CHECK(!((n->marks[0] | n->marks[1]) & (1ULL << (i + k))),
		      "entry at %" PRIu64 ": a sibling slot carries a mark", idx);
	}
	tot->entries[size]++;
	tot->marked[DTREE_DIRTY] += dirty;
	tot->marked[DTREE_TOWRITE] += towrite;
	if (dirty)
		tot->dirty_bytes += __entry_dirty_bytes(n, i);
	/* a DIRTY entry has lines written (none left under the clear_after_writeback control) */
	CHECK(!dirty || __entry_lines(n, i) != 0 || rdax_faults.clear_after_writeback,
	      "DIRTY entry at %" PRIu64 " has no written line", idx);
	return 0;
}

/*
 * __check_lines -- the line array of leaf @n: only leaves have one, and a
 * mask is non-zero only for a DIRTY 4 KiB entry. Context: t->lock held.
 */
static int __check_lines(const struct dtree_node *n, uint64_t base, struct check_totals *tot)
{
	if (!n->lines)
		return 0;
	CHECK(n->shift == 0, "node at %" PRIu64 " of shift %u has a line array", base, n->shift);
	tot->lines++;
	for (unsigned i = 0; i < DTREE_SLOTS; i++) {
		uint64_t v = n->slots[i];
		bool dirty = dentry_is_value(v) && __entry_has_mark(n, i, DTREE_DIRTY);
		CHECK(dirty || n->lines->mask[i] == 0,
		      "slot %u of leaf at %" PRIu64 ": lines %#" PRIx64 " on a clean slot", i, base,
		      n->lines->mask[i]);
	}
	return 0;
}

/* __check_node -- recursive structure checks below @n (first page @base). Context: t->lock held. */
static int __check_node(struct dtree *t, const struct dtree_node *n, uint64_t base,
			struct check_totals *tot)
{
	unsigned count = 0;
	for (unsigned i = 0; i < DTREE_SLOTS; i++) {
		uint64_t v = n->slots[i];
		uint64_t idx = base + ((uint64_t)i << n->shift);
		uint64_t bit = 1ULL << i;
		if (v == 0) {
			CHECK(!((n->marks[0] | n->marks[1]) & bit),
			      "empty slot %u of node at %" PRIu64 " carries a mark", i, base);
			continue;
		}
		count++;
		if (slot_is_sibling(v)) {
			unsigned c = slot_sibling_canonical(v);
			CHECK(c < i && dentry_is_value(n->slots[c]) &&
				  i < c + size_slots(dentry_size(n->slots[c])),
			      "stray sibling in slot %u of node at %" PRIu64, i, base);
			continue;
		}
		if (dentry_is_value(v)) {
			int ret = __check_value(t, n, i, idx, tot);
			if (ret)
				return ret;
			continue;
		}
		CHECK(slot_is_node(v), "slot %u of node at %" PRIu64 ": bad slot %#" PRIx64, i,
		      base, v);
		const struct dtree_node *c = slot_node(v);
		CHECK(c->parent == n && c->offset == i && c->shift + DTREE_SLOT_BITS == n->shift,
		      "child %u of node at %" PRIu64 ": bad parent/offset/shift", i, base);
		CHECK(c->count > 0, "empty child node at %" PRIu64 " not freed", idx);
		CHECK(idx < t->npages, "node at %" PRIu64 " beyond the volume", idx);
		for (unsigned m = 0; m < DTREE_NR_MARKS; m++)
			CHECK(((n->marks[m] & bit) != 0) == (c->marks[m] != 0),
			      "mark %u of slot %u of node at %" PRIu64 " not propagated", m, i,
			      base);
		tot->nodes++;
		int ret = __check_node(t, c, idx, tot);
		if (ret)
			return ret;
	}
	CHECK(count == n->count, "node at %" PRIu64 " counts %u slots, has %u", base, n->count,
	      count);
	return __check_lines(n, base, tot);
}

int dtree_check(struct dtree *t)
{
	if (!t)
		return -EINVAL;
	struct check_totals tot = {0};
	pthread_mutex_lock(&t->lock);
	int ret = __check_node(t, &t->root, 0, &tot);
	if (ret)
		goto out_unlock;
	ret = -EUCLEAN;
	for (unsigned i = 0; i < DTREE_NR_SIZES; i++) {
		if (tot.entries[i] != t->entries[i]) {
			LOG_ERROR("dtree_check: %" PRIu64
				  " entries of size %u, counter says %" PRIu64,
				  tot.entries[i], i, t->entries[i]);
			goto out_unlock;
		}
	}
	for (unsigned m = 0; m < DTREE_NR_MARKS; m++) {
		if (tot.marked[m] != t->marked[m]) {
			LOG_ERROR("dtree_check: %" PRIu64
				  " entries carry mark %u, counter says %" PRIu64,
				  tot.marked[m], m, t->marked[m]);
			goto out_unlock;
		}
	}
	if (tot.dirty_bytes != t->dirty_bytes || tot.nodes != t->nodes || tot.lines != t->nlines) {
		LOG_ERROR("dtree_check: dirty_bytes %" PRIu64 "/%" PRIu64 ", nodes %" PRIu64
			  "/%" PRIu64 ", line arrays %" PRIu64 "/%" PRIu64 " (found/counter)",
			  tot.dirty_bytes, t->dirty_bytes, tot.nodes, t->nodes, tot.lines,
			  t->nlines);
		goto out_unlock;
	}
	unsigned ncache = 0, nlcache = 0;
	for (const struct dtree_node *c = t->cache; c; c = c->parent)
		ncache++;
	for (const struct dtree_lines *l = t->lines_cache; l; l = l->next)
		nlcache++;
	if (ncache != t->ncache || nlcache != t->nlines_cache) {
		LOG_ERROR("dtree_check: caches hold %u nodes and %u line arrays, counters say %u "
			  "and %u",
			  ncache, nlcache, t->ncache, t->nlines_cache);
		goto out_unlock;
	}
	ret = 0;
out_unlock:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* life cycle                                                               */

/*
 * dtree_root_shift -- the root's shift for @npages: enough levels to index
 * every page, and at least 6 (2 MiB entries) / 18 (1 GiB entries) when the
 * volume can hold such a block, so a huge entry is always canonical at a
 * fixed level.
 */
static unsigned dtree_root_shift(uint64_t npages)
{
	unsigned shift = 0;
	while (((uint64_t)DTREE_SLOTS << shift) < npages)
		shift += DTREE_SLOT_BITS;
	for (int size = DTREE_SIZE_2M; size < DTREE_NR_SIZES; size++) {
		if (npages >= size_pages((enum dtree_size)size) &&
		    shift < size_node_shift((enum dtree_size)size))
			shift = size_node_shift((enum dtree_size)size);
	}
	return shift;
}

/* dtree_cache_max -- spare nodes a tree of @npages keeps (see DTREE_CACHE_MIN) */
static unsigned dtree_cache_max(uint64_t npages)
{
	uint64_t bytes = npages * (RDAX_PAGE_SIZE / 1024);
	if (bytes > DTREE_CACHE_MAX_BYTES)
		bytes = DTREE_CACHE_MAX_BYTES;
	uint64_t nodes = bytes / sizeof(struct dtree_node);
	return nodes > DTREE_CACHE_MIN ? (unsigned)nodes : DTREE_CACHE_MIN;
}

int dtree_new(uint64_t npages, uint64_t base_location, struct dtree **out)
{
	if (!out) {
		LOG_ERROR("dtree_new(npages=%" PRIu64 "): no out pointer", npages);
		return -EINVAL;
	}
	if (npages == 0 || npages > DTREE_MAX_PAGES) {
		LOG_ERROR("dtree_new(npages=%" PRIu64 "): must be 1..%llu", npages,
			  DTREE_MAX_PAGES);
		return -EINVAL;
	}
	if (dloc_ns(base_location) > DLOC_NS_MAX ||
	    dloc_page(base_location) + npages > DTREE_MAX_PAGES) {
		LOG_ERROR("dtree_new(npages=%" PRIu64 ", base_location=%#" PRIx64
			  "): locations overflow the namespace",
			  npages, base_location);
		return -EINVAL;
	}

	struct dtree *t = calloc(1, sizeof(*t));
	if (!t) {
		LOG_ERROR("dtree_new(npages=%" PRIu64 "): allocation of %zu bytes failed", npages,
			  sizeof(*t));
		return -ENOMEM;
	}
	int ret;
	pthread_mutexattr_t attr;
	ret = -pthread_mutexattr_init(&attr);
	if (ret)
		goto err_free;
	/* short critical sections: spin briefly before sleeping */
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	ret = -pthread_mutex_init(&t->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	if (ret)
		goto err_free;
	ret = -pthread_cond_init(&t->unlocked, NULL);
	if (ret)
		goto err_destroy_lock;

	t->npages = npages;
	t->base_location = base_location;
	t->cache_max = dtree_cache_max(npages);
	t->root.shift = (uint8_t)dtree_root_shift(npages);
	t->huge_ok[DTREE_SIZE_4K] = true;
	for (int size = DTREE_SIZE_2M; size < DTREE_NR_SIZES; size++)
		t->huge_ok[size] = is_aligned(base_location, size_pages((enum dtree_size)size));
	*out = t;
	return 0;

err_destroy_lock:
	pthread_mutex_destroy(&t->lock);
err_free:
	LOG_ERROR("dtree_new(npages=%" PRIu64 "): lock initialisation failed: %d", npages, ret);
	free(t);
	return ret;
}

/* node_free_all -- free every node below @n (not @n itself) and every line array */
static void node_free_all(struct dtree_node *n)
{
	free(n->lines);
	for (unsigned i = 0; i < DTREE_SLOTS; i++) {
		if (slot_is_node(n->slots[i])) {
			struct dtree_node *c = slot_node(n->slots[i]);
			node_free_all(c);
			free(c);
		}
	}
}

void dtree_delete(struct dtree **tp)
{
	if (!tp || !*tp)
		return;
	struct dtree *t = *tp;
	node_free_all(&t->root);
	while (t->cache) {
		struct dtree_node *n = t->cache;
		t->cache = n->parent;
		free(n);
	}
	while (t->lines_cache) {
		struct dtree_lines *l = t->lines_cache;
		t->lines_cache = l->next;
		free(l);
	}
	pthread_cond_destroy(&t->unlocked);
	pthread_mutex_destroy(&t->lock);
	free(t);
	*tp = NULL;
}
