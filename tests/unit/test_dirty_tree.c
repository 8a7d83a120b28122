/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_dirty_tree.c -- the dirty tree, one operation and one edge case at a time
 *
 * Every test ends with dtree_check(), so each also verifies mark
 * propagation, sibling slots and the counters after what it did.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "checked.h"
#include "dirty_tree.h"
#include "faults.h"

#define PG	  RDAX_PAGE_SIZE
#define PMD_PAGES 512ULL
#define PUD_PAGES (1ULL << 18)
/* a location aligned for 1 GiB, in namespace 3 */
#define LOC_PUD dloc_make(3, 5 * PUD_PAGES)
/* aligned for 2 MiB only */
#define LOC_PMD dloc_make(3, 5 * PUD_PAGES + 7 * PMD_PAGES)
/* aligned for neither */
#define LOC_ODD dloc_make(3, 12345)

static struct dtree *tree_new(uint64_t npages, uint64_t base)
{
	struct dtree *t = NULL;
	assert_int_equal(dtree_new(npages, base, &t), 0);
	assert_non_null(t);
	return t;
}

/* tree_done -- structure check, then free */
static void tree_done(struct dtree *t)
{
	assert_int_equal(dtree_check(t), 0);
	dtree_delete(&t);
	assert_null(t);
}

static struct dtree_stats stats_of(struct dtree *t)
{
	struct dtree_stats st;
	memset(&st, 0xa5, sizeof(st));
	dtree_stats_get(t, &st);
	return st;
}

static void assert_stats_equal(const struct dtree_stats *a, const struct dtree_stats *b)
{
	for (int i = 0; i < DTREE_NR_SIZES; i++)
		assert_int_equal(a->entries[i], b->entries[i]);
	assert_int_equal(a->dirty_bytes, b->dirty_bytes);
	assert_int_equal(a->tree_bytes, b->tree_bytes);
	assert_int_equal(a->nodes, b->nodes);
}

/* mark_pages -- mark pages [first, first + n) with one call */
static void mark_pages(struct dtree *t, uint64_t first, uint64_t n)
{
	assert_int_equal(dtree_mark_dirty(t, first * PG, n * PG), 0);
}

/* assert_entry -- page @index is covered by an entry of @size starting at @first */
static uint64_t assert_entry(struct dtree *t, uint64_t index, uint64_t first, enum dtree_size size)
{
	uint64_t f = ~0ULL, e = 0;
	assert_int_equal(dtree_lookup(t, index, &f, &e), 0);
	assert_int_equal(f, first);
	assert_true(dentry_is_value(e));
	assert_int_equal(dentry_size(e), size);
	return e;
}

/* full_walk -- tag everything, claim and release it all; returns entries claimed */
static uint64_t full_walk(struct dtree *t)
{
	uint64_t idx = 0, end = dtree_npages(t), claimed = 0;
	while (dtree_tag_towrite(t, &idx, end, 7) > 0)
		;
	assert_int_equal(idx, end);
	idx = 0;
	struct dtree_item items[5];
	unsigned n;
	while ((n = dtree_claim_towrite(t, &idx, end, items, 5)) > 0) {
		claimed += n;
		dtree_release(t, items, n);
	}
	return claimed;
}

static int reset_faults(void **state)
{
	(void)state;
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	return 0;
}

/* ------------------------------------------------------------------------ */

static void dtree_new__bad_arguments(void **state)
{
	(void)state;
	struct dtree *t = (struct dtree *)0x1;
	assert_int_equal(dtree_new(0, 0, &t), -EINVAL);
	assert_int_equal(dtree_new(1ULL << 41, 0, &t), -EINVAL);
	/* namespace id beyond 20 bits */
	assert_int_equal(dtree_new(16, 1ULL << 60, &t), -EINVAL);
	/* pages run past the 40-bit page part of the location */
	assert_int_equal(dtree_new(16, dloc_make(1, DLOC_PAGE_MASK - 7), &t), -EINVAL);
	assert_ptr_equal(t, (struct dtree *)0x1);
	assert_int_equal(dtree_new(16, 0, NULL), -EINVAL);
	/* the last page that fits */
	t = NULL;
	assert_int_equal(dtree_new(8, dloc_make(DLOC_NS_MAX, DLOC_PAGE_MASK - 7), &t), 0);
	mark_pages(t, 7, 1);
	uint64_t e = assert_entry(t, 7, 7, DTREE_SIZE_4K);
	assert_int_equal(dloc_ns(dentry_location(e)), DLOC_NS_MAX);
	assert_int_equal(dloc_page(dentry_location(e)), DLOC_PAGE_MASK);
	tree_done(t);
}

static void dtree_delete__null(void **state)
{
	(void)state;
	struct dtree *t = NULL;
	dtree_delete(NULL);
	dtree_delete(&t);
	assert_null(t);
}

static void dtree_new__empty_tree(void **state)
{
	(void)state;
	struct dtree *t = tree_new(1000, LOC_PUD);
	assert_int_equal(dtree_npages(t), 1000);
	assert_int_equal(dtree_npages(NULL), 0);
	struct dtree_stats st = stats_of(t);
	for (int i = 0; i < DTREE_NR_SIZES; i++)
		assert_int_equal(st.entries[i], 0);
	assert_int_equal(st.dirty_bytes, 0);
	assert_int_equal(st.nodes, 1);
	assert_true(st.tree_bytes >= dtree_node_size());
	assert_int_equal(dtree_lookup(t, 0, NULL, NULL), -ENOENT);
	tree_done(t);
}

static void dtree_mark_dirty__bad_arguments(void **state)
{
	(void)state;
	struct dtree *t = tree_new(100, LOC_PUD);
	mark_pages(t, 3, 1);
	struct dtree_stats before = stats_of(t);

	assert_int_equal(dtree_mark_dirty(NULL, 0, PG), -EINVAL);
	assert_int_equal(dtree_mark_dirty(t, 0, 0), -EINVAL);
	assert_int_equal(dtree_mark_dirty(t, UINT64_MAX, 2), -EOVERFLOW);
	assert_int_equal(dtree_mark_dirty(t, 2, UINT64_MAX), -EOVERFLOW);
	assert_int_equal(dtree_mark_dirty(t, 100 * PG, 1), -ERANGE);
	assert_int_equal(dtree_mark_dirty(t, 99 * PG, PG + 1), -ERANGE);
	/* a range that starts inside: nothing marked at all */
	assert_int_equal(dtree_mark_dirty(t, 50 * PG, 51 * PG), -ERANGE);

	struct dtree_stats after = stats_of(t);
	assert_stats_equal(&before, &after);
	assert_int_equal(dtree_lookup(t, 50, NULL, NULL), -ENOENT);
	/* the last byte is fine */
	assert_int_equal(dtree_mark_dirty(t, 100 * PG - 1, 1), 0);
	assert_entry(t, 99, 99, DTREE_SIZE_4K);
	tree_done(t);
}

static void dtree_mark_dirty__single_page(void **state)
{
	(void)state;
	struct dtree *t = tree_new(5000, LOC_ODD);
	assert_int_equal(dtree_mark_dirty(t, 4097 * PG + 100, 10), 0);
	uint64_t e = assert_entry(t, 4097, 4097, DTREE_SIZE_4K);
	assert_int_equal(dentry_location(e), LOC_ODD + 4097);
	assert_false(dentry_is_locked(e));
	assert_int_equal(dentry_bytes(e), PG);
	assert_true(dtree_get_mark(t, 4097, DTREE_DIRTY));
	assert_false(dtree_get_mark(t, 4097, DTREE_TOWRITE));
	assert_int_equal(dtree_lookup(t, 4096, NULL, NULL), -ENOENT);
	assert_int_equal(dtree_lookup(t, 4098, NULL, NULL), -ENOENT);
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 1);
	/* bytes [100, 110) of the page: line 1 alone */
	assert_int_equal(st.dirty_bytes, DTREE_LINE_SIZE);
	/* root (shift 12) + a shift-6 node + a leaf */
	assert_int_equal(st.nodes, 3);
	tree_done(t);
}

static void dtree_mark_dirty__bytes_straddling_pages(void **state)
{
	(void)state;
	struct dtree *t = tree_new(200, 0);
	/* 2 bytes across the boundary of pages 63 and 64 (two leaves) */
	assert_int_equal(dtree_mark_dirty(t, 64 * PG - 1, 2), 0);
	assert_entry(t, 63, 63, DTREE_SIZE_4K);
	assert_entry(t, 64, 64, DTREE_SIZE_4K);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 2);
	/* a long unaligned range covers first and last partial pages */
	assert_int_equal(dtree_mark_dirty(t, 100 * PG + 1, 70 * PG), 0);
	for (uint64_t p = 100; p <= 170; p++)
		assert_entry(t, p, p, DTREE_SIZE_4K);
	assert_int_equal(dtree_lookup(t, 171, NULL, NULL), -ENOENT);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 2 + 71);
	/* lines: the last of page 63, the first of 64 and of 170, 100-169 whole */
	assert_int_equal(stats_of(t).dirty_bytes, 70 * PG + 3 * DTREE_LINE_SIZE);
	tree_done(t);
}

static void dtree_mark_dirty__already_dirty_changes_nothing(void **state)
{
	(void)state;
	struct dtree *t = tree_new(300, 0);
	mark_pages(t, 10, 20);
	struct dtree_stats before = stats_of(t);
	mark_pages(t, 15, 3);
	assert_int_equal(dtree_mark_dirty(t, 10 * PG + 5, 1), 0);
	struct dtree_stats after = stats_of(t);
	assert_stats_equal(&before, &after);
	tree_done(t);
}

static void dtree_mark_dirty__tiny_volume(void **state)
{
	(void)state;
	/* fewer than 64 pages: the root is the only level */
	struct dtree *t = tree_new(5, 0);
	mark_pages(t, 0, 5);
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 5);
	assert_int_equal(st.nodes, 1);
	assert_int_equal(dtree_mark_dirty(t, 5 * PG, 1), -ERANGE);
	assert_int_equal(full_walk(t), 5);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 0);
	tree_done(t);
}

static void dtree_mark_dirty__whole_2m_aligned_location(void **state)
{
	(void)state;
	struct dtree *t = tree_new(2000, LOC_PMD);
	/* bytes [1 MiB, 5 MiB + 1): only the block [2 MiB, 4 MiB) is whole */
	assert_int_equal(dtree_mark_dirty(t, RDAX_PMD_SIZE / 2, 2 * RDAX_PMD_SIZE + 1), 0);
	uint64_t e = assert_entry(t, 512, 512, DTREE_SIZE_2M);
	assert_int_equal(dentry_location(e), LOC_PMD + 512);
	assert_int_equal(dentry_bytes(e), RDAX_PMD_SIZE);
	for (uint64_t p = 512; p < 1024; p += 37)
		assert_entry(t, p, 512, DTREE_SIZE_2M);
	assert_entry(t, 1023, 512, DTREE_SIZE_2M);
	assert_true(dtree_get_mark(t, 700, DTREE_DIRTY));
	assert_entry(t, 256, 256, DTREE_SIZE_4K);
	assert_entry(t, 511, 511, DTREE_SIZE_4K);
	assert_entry(t, 1024, 1024, DTREE_SIZE_4K);
	assert_entry(t, 1280, 1280, DTREE_SIZE_4K);
	assert_int_equal(dtree_lookup(t, 1281, NULL, NULL), -ENOENT);
	assert_int_equal(dtree_lookup(t, 255, NULL, NULL), -ENOENT);
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_2M], 1);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 256 + 257);
	/* page 1280 holds the range's last byte alone: one line */
	assert_int_equal(st.dirty_bytes, RDAX_PMD_SIZE + (256 + 256) * PG + DTREE_LINE_SIZE);
	tree_done(t);
}

static void dtree_mark_dirty__whole_2m_unaligned_location(void **state)
{
	(void)state;
	struct dtree *t = tree_new(2000, LOC_ODD);
	mark_pages(t, 512, 512);
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_2M], 0);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 512);
	assert_entry(t, 600, 600, DTREE_SIZE_4K);
	tree_done(t);
}

static void dtree_mark_dirty__2m_not_wholly_covered(void **state)
{
	(void)state;
	struct dtree *t = tree_new(2000, LOC_PUD);
	/* one byte short at either end */
	assert_int_equal(dtree_mark_dirty(t, 512 * PG, RDAX_PMD_SIZE - 1), 0);
	assert_int_equal(dtree_mark_dirty(t, 1024 * PG + 1, RDAX_PMD_SIZE - 1), 0);
	/* a whole block, but in two calls */
	mark_pages(t, 0, 256);
	mark_pages(t, 256, 256);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_2M], 0);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 512 * 3);
	/* the last block of a volume that ends inside it is never huge */
	struct dtree *u = tree_new(700, LOC_PUD);
	mark_pages(u, 0, 700);
	assert_int_equal(stats_of(u).entries[DTREE_SIZE_2M], 1);
	assert_int_equal(stats_of(u).entries[DTREE_SIZE_4K], 188);
	tree_done(u);
	tree_done(t);
}

static void dtree_mark_dirty__huge_replaces_small_carrying_towrite(void **state)
{
	(void)state;
	struct dtree *t = tree_new(4096, LOC_PMD);
	mark_pages(t, 1024 + 3, 1);
	mark_pages(t, 1024 + 300, 2);
	/* an fsync tags them ... */
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 4096, 100), 3);
	/* ... and a write of the whole block replaces them */
	mark_pages(t, 1024, 512);
	assert_entry(t, 1024 + 3, 1024, DTREE_SIZE_2M);
	assert_true(dtree_get_mark(t, 1024, DTREE_TOWRITE));
	assert_true(dtree_get_mark(t, 1024, DTREE_DIRTY));
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 0);
	assert_int_equal(st.entries[DTREE_SIZE_2M], 1);
	assert_int_equal(st.dirty_bytes, RDAX_PMD_SIZE);
	/* the fsync in flight claims it */
	struct dtree_item items[4];
	idx = 1024 + 3; /* where it had got to: inside the new entry */
	assert_int_equal(dtree_claim_towrite(t, &idx, 4096, items, 4), 1);
	assert_int_equal(items[0].index, 1024);
	assert_int_equal(dentry_size(items[0].entry), DTREE_SIZE_2M);
	dtree_release(t, items, 1);
	/* a block of untagged small entries gives an untagged huge entry */
	mark_pages(t, 2048 + 5, 1);
	mark_pages(t, 2048, 512);
	assert_false(dtree_get_mark(t, 2048, DTREE_TOWRITE));
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_2M], 1);
	tree_done(t);
}

/* control: with the fault on, the huge entry drops TOWRITE and the fsync misses it */
static void dtree_mark_dirty__no_towrite_inherit_control(void **state)
{
	(void)state;
	struct dtree *t = tree_new(4096, LOC_PMD);
	mark_pages(t, 1024 + 3, 1);
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 4096, 100), 1);
	rdax_faults.no_towrite_inherit = true;
	mark_pages(t, 1024, 512);
	rdax_faults.no_towrite_inherit = false;
	assert_false(dtree_get_mark(t, 1024, DTREE_TOWRITE));
	struct dtree_item items[4];
	idx = 0;
	/* the check the fsync tests rely on: page 1027 was tagged, nothing claims it */
	assert_int_equal(dtree_claim_towrite(t, &idx, 4096, items, 4), 0);
	tree_done(t);
}

static void dtree_mark_dirty__small_write_inside_huge(void **state)
{
	(void)state;
	struct dtree *t = tree_new(4096, LOC_PMD);
	mark_pages(t, 512, 512);
	struct dtree_stats before = stats_of(t);
	mark_pages(t, 700, 3);
	struct dtree_stats after = stats_of(t);
	assert_stats_equal(&before, &after);
	/* clean it: claim, then write inside it while it is locked */
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 4096, 10), 1);
	struct dtree_item items[2];
	idx = 0;
	assert_int_equal(dtree_claim_towrite(t, &idx, 4096, items, 2), 1);
	assert_false(dtree_get_mark(t, 512, DTREE_DIRTY));
	assert_int_equal(stats_of(t).dirty_bytes, 0);
	mark_pages(t, 1000, 1);
	uint64_t e = assert_entry(t, 1000, 512, DTREE_SIZE_2M);
	assert_true(dentry_is_locked(e));
	assert_true(dtree_get_mark(t, 1000, DTREE_DIRTY));
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 0);
	/* a whole-block write over a locked huge entry only sets DIRTY too */
	mark_pages(t, 512, 512);
	dtree_release(t, items, 1);
	e = assert_entry(t, 600, 512, DTREE_SIZE_2M);
	assert_false(dentry_is_locked(e));
	assert_int_equal(stats_of(t).dirty_bytes, RDAX_PMD_SIZE);
	tree_done(t);
}

/*
 * No promotion (dirty_tree.h, "Huge entries"): a whole aligned block
 * written in smaller calls keeps its smaller entries -- 2 MiB as 512 page
 * writes stays 512 4 KiB entries, 1 GiB as 512 2 MiB writes (the largest
 * request a client sends) stays 512 2 MiB entries -- and an fsync of part
 * of it writes back that part only.
 */
static void dtree_mark_dirty__block_in_smaller_calls_is_not_promoted(void **state)
{
	(void)state;
	struct dtree *t = tree_new(2 * PUD_PAGES, LOC_PUD);
	for (uint64_t p = PMD_PAGES; p < 2 * PMD_PAGES; p++)
		mark_pages(t, p, 1);
	for (uint64_t b = 0; b < 512; b++)
		mark_pages(t, PUD_PAGES + b * PMD_PAGES, PMD_PAGES);
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_4K], PMD_PAGES);
	assert_int_equal(st.entries[DTREE_SIZE_2M], 512);
	assert_int_equal(st.entries[DTREE_SIZE_1G], 0);
	assert_int_equal(st.dirty_bytes, RDAX_PMD_SIZE + RDAX_PUD_SIZE);
	/* a claim of one page of each takes that page, one 2 MiB entry */
	struct dtree_item items[2];
	uint64_t idx = PMD_PAGES + 3;
	assert_int_equal(dtree_claim_dirty(t, &idx, PMD_PAGES + 4, items, 2), 1);
	assert_int_equal(items[0].index, PMD_PAGES + 3);
	assert_int_equal(dtree_item_bytes(&items[0]), PG);
	dtree_release(t, items, 1);
	idx = PUD_PAGES + 5 * PMD_PAGES + 7;
	assert_int_equal(dtree_claim_dirty(t, &idx, idx + 1, items, 2), 1);
	assert_int_equal(items[0].index, PUD_PAGES + 5 * PMD_PAGES);
	assert_int_equal(dtree_item_bytes(&items[0]), RDAX_PMD_SIZE);
	dtree_release(t, items, 1);
	assert_int_equal(stats_of(t).dirty_bytes, RDAX_PUD_SIZE - PG);
	tree_done(t);
}

/* lines: masks per page, OR-ed by later writes; whole pages need no line array */
static void dtree_mark_dirty__lines(void **state)
{
	(void)state;
	struct dtree *t = tree_new(1000, LOC_ODD);
	struct dtree_item it;
	uint64_t idx;
	mark_pages(t, 10, 2); /* whole: no line array, 8 KiB */
	size_t bytes_whole = stats_of(t).tree_bytes;
	assert_int_equal(stats_of(t).dirty_bytes, 2 * PG);
	assert_int_equal(dtree_mark_dirty(t, 12 * PG + 130, 1), 0);   /* line 2 */
	assert_int_equal(dtree_mark_dirty(t, 12 * PG + 4000, 96), 0); /* lines 62, 63 */
	assert_int_equal(dtree_mark_dirty(t, 11 * PG + 5, 1), 0);     /* inside a whole page */
	assert_true(stats_of(t).tree_bytes > bytes_whole);	      /* the line array */
	assert_int_equal(stats_of(t).dirty_bytes, 2 * PG + 3 * DTREE_LINE_SIZE);
	idx = 12;
	assert_int_equal(dtree_gang_lookup(t, &idx, 13, DTREE_DIRTY, &it, 1), 1);
	assert_int_equal(it.lines, (1ULL << 2) | (3ULL << 62));
	idx = 11;
	assert_int_equal(dtree_gang_lookup(t, &idx, 12, DTREE_DIRTY, &it, 1), 1);
	assert_int_equal(it.lines, DTREE_LINES_ALL);
	/* a claim takes the mask; a write after it starts a new one */
	idx = 12;
	assert_int_equal(dtree_claim_dirty(t, &idx, 13, &it, 1), 1);
	assert_int_equal(it.lines, (1ULL << 2) | (3ULL << 62));
	assert_int_equal(dtree_item_bytes(&it), 3 * DTREE_LINE_SIZE);
	assert_int_equal(dtree_mark_dirty(t, 12 * PG + 64 * 7, 64), 0); /* line 7 */
	assert_int_equal(stats_of(t).dirty_bytes, 2 * PG + DTREE_LINE_SIZE);
	dtree_release(t, &it, 1);
	idx = 12;
	assert_int_equal(dtree_gang_lookup(t, &idx, 13, DTREE_DIRTY, &it, 1), 1);
	assert_int_equal(it.lines, 1ULL << 7);
	assert_int_equal(dtree_check(t), 0);
	tree_done(t);
}

static void dtree_mark_dirty__1g_entries(void **state)
{
	(void)state;
	uint64_t npages = PUD_PAGES + 2 * PMD_PAGES + 3;
	struct dtree *t = tree_new(npages, LOC_PUD);
	/* small, 2 MiB entries, a locked-free mix inside the 1 GiB block first */
	mark_pages(t, 5, 1);
	mark_pages(t, 1024, 512);
	mark_pages(t, PUD_PAGES - 1, 1);
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 1024, 1), 1); /* page 5 TOWRITE */
	assert_int_equal(dtree_mark_dirty(t, 0, RDAX_PUD_SIZE + RDAX_PMD_SIZE + 2 * PG + 10), 0);
	uint64_t e = assert_entry(t, 123456, 0, DTREE_SIZE_1G);
	assert_int_equal(dentry_location(e), LOC_PUD);
	assert_int_equal(dentry_bytes(e), RDAX_PUD_SIZE);
	assert_true(dtree_get_mark(t, PUD_PAGES - 1, DTREE_TOWRITE));
	assert_entry(t, PUD_PAGES + 3, PUD_PAGES, DTREE_SIZE_2M);
	assert_entry(t, PUD_PAGES + PMD_PAGES, PUD_PAGES + PMD_PAGES, DTREE_SIZE_4K);
	assert_entry(t, PUD_PAGES + PMD_PAGES + 2, PUD_PAGES + PMD_PAGES + 2, DTREE_SIZE_4K);
	assert_int_equal(dtree_lookup(t, PUD_PAGES + PMD_PAGES + 3, NULL, NULL), -ENOENT);
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_1G], 1);
	assert_int_equal(st.entries[DTREE_SIZE_2M], 1);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 3);
	/* the last page holds 10 bytes: one line */
	assert_int_equal(st.dirty_bytes, RDAX_PUD_SIZE + RDAX_PMD_SIZE + 2 * PG + DTREE_LINE_SIZE);
	/* a whole 2 MiB block inside the 1 GiB entry just keeps it dirty */
	mark_pages(t, 2048, 512);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_2M], 1);
	assert_int_equal(dtree_check(t), 0);
	/* removing the 1 GiB entry frees all the nodes under it */
	assert_int_equal(dtree_remove_range(t, 0, PUD_PAGES), 1);
	assert_int_equal(dtree_check(t), 0);
	assert_int_equal(full_walk(t), 4);
	assert_int_equal(stats_of(t).nodes, 1);
	tree_done(t);
}

static void dtree_mark_dirty__1g_needs_aligned_location(void **state)
{
	(void)state;
	struct dtree *t = tree_new(PUD_PAGES, LOC_PMD);
	assert_int_equal(dtree_mark_dirty(t, 0, RDAX_PUD_SIZE), 0);
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_1G], 0);
	assert_int_equal(st.entries[DTREE_SIZE_2M], PUD_PAGES / PMD_PAGES);
	assert_int_equal(st.dirty_bytes, RDAX_PUD_SIZE);
	tree_done(t);
}

struct marker_arg {
	struct dtree *t;
	uint64_t offset, len;
	int ret;
	uint64_t removed;
	bool remove;
};

static void *marker_thread(void *p)
{
	struct marker_arg *a = p;
	if (a->remove)
		a->removed = dtree_remove_range(a->t, a->offset, a->offset + a->len);
	else
		a->ret = dtree_mark_dirty(a->t, a->offset, a->len);
	return NULL;
}

/* wait_for_waiter -- poll (not sleep) until a thread blocks in the tree */
static void wait_for_waiter(struct dtree *t)
{
	while (dtree_waiters(t) == 0)
		sched_yield();
}

static void dtree_mark_dirty__huge_waits_for_locked_entry(void **state)
{
	(void)state;
	struct dtree *t = tree_new(2048, LOC_PMD);
	mark_pages(t, 520, 1);
	mark_pages(t, 600, 1);
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 2048, 10), 2);
	struct dtree_item items[1];
	idx = 0;
	assert_int_equal(dtree_claim_towrite(t, &idx, 2048, items, 1), 1);
	assert_int_equal(items[0].index, 520);

	struct marker_arg a = {.t = t, .offset = 512 * PG, .len = RDAX_PMD_SIZE, .ret = 1};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, marker_thread, &a), 0);
	wait_for_waiter(t);
	/* still the small entries: the conversion waits for page 520 */
	uint64_t e = assert_entry(t, 520, 520, DTREE_SIZE_4K);
	assert_true(dentry_is_locked(e));
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_2M], 0);
	dtree_release(t, items, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.ret, 0);
	assert_entry(t, 520, 512, DTREE_SIZE_2M);
	/* page 600 was still TOWRITE: the huge entry is too */
	assert_true(dtree_get_mark(t, 512, DTREE_TOWRITE));
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 0);
	tree_done(t);
}

static void dtree_tag_towrite__batches(void **state)
{
	(void)state;
	struct dtree *t = tree_new(4096, LOC_PMD);
	uint64_t pages[] = {1, 2, 70, 200, 513, 1000, 1500, 4000, 4001, 4095};
	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		mark_pages(t, pages[i], 1);
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 4096, 3), 3);
	assert_int_equal(idx, 71);
	assert_true(dtree_get_mark(t, 70, DTREE_TOWRITE));
	assert_false(dtree_get_mark(t, 200, DTREE_TOWRITE));
	assert_int_equal(dtree_tag_towrite(t, &idx, 4096, 3), 3);
	assert_int_equal(idx, 1001);
	assert_int_equal(dtree_tag_towrite(t, &idx, 4096, 3), 3);
	assert_int_equal(idx, 4002);
	assert_int_equal(dtree_tag_towrite(t, &idx, 4096, 3), 1);
	assert_int_equal(idx, 4096);
	assert_int_equal(dtree_tag_towrite(t, &idx, 4096, 3), 0);
	assert_int_equal(idx, 4096);
	/* already-TOWRITE entries are counted again; end is exclusive */
	idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 1000, 100), 5);
	assert_int_equal(idx, 1000);
	/* a claimed (clean) entry is not tagged */
	struct dtree_item it[1];
	idx = 0;
	assert_int_equal(dtree_claim_towrite(t, &idx, 4096, it, 1), 1);
	idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 4096, 100), 9);
	dtree_release(t, it, 1);
	tree_done(t);
}

static void dtree_tag_towrite__starts_inside_huge(void **state)
{
	(void)state;
	struct dtree *t = tree_new(4096, LOC_PMD);
	mark_pages(t, 1024, 512);
	uint64_t idx = 1300;
	assert_int_equal(dtree_tag_towrite(t, &idx, 1301, 10), 1);
	assert_int_equal(idx, 1301);
	assert_true(dtree_get_mark(t, 1024, DTREE_TOWRITE));
	/* stopped at the end, inside the entry: the next call is done, not a repeat */
	assert_int_equal(dtree_tag_towrite(t, &idx, 1301, 10), 0);
	assert_int_equal(idx, 1301);
	struct dtree_item it[2];
	idx = 1100;
	assert_int_equal(dtree_gang_lookup(t, &idx, 1200, DTREE_TOWRITE, it, 2), 1);
	assert_int_equal(idx, 1200);
	assert_int_equal(dtree_gang_lookup(t, &idx, 1200, DTREE_TOWRITE, it, 2), 0);
	idx = 1100;
	assert_int_equal(dtree_claim_towrite(t, &idx, 1200, it, 2), 1);
	assert_int_equal(idx, 1200);
	assert_int_equal(dtree_claim_towrite(t, &idx, 1200, it + 1, 1), 0);
	dtree_release(t, it, 1);
	/* a huge entry beyond the end of the range is not included */
	mark_pages(t, 2048, 512);
	idx = 1536;
	assert_int_equal(dtree_tag_towrite(t, &idx, 2048, 10), 0);
	assert_int_equal(idx, 2048);
	assert_false(dtree_get_mark(t, 2048, DTREE_TOWRITE));
	tree_done(t);
}

static void dtree_tag_towrite__bad_arguments(void **state)
{
	(void)state;
	struct dtree *t = tree_new(100, 0);
	mark_pages(t, 5, 1);
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(NULL, &idx, 100, 1), -EINVAL);
	assert_int_equal(dtree_tag_towrite(t, NULL, 100, 1), -EINVAL);
	assert_int_equal(dtree_tag_towrite(t, &idx, 100, 0), -EINVAL);
	assert_int_equal(dtree_tag_towrite(t, &idx, 101, 1), -EINVAL);
	idx = 50;
	assert_int_equal(dtree_tag_towrite(t, &idx, 40, 1), -EINVAL);
	assert_int_equal(idx, 50);
	assert_false(dtree_get_mark(t, 5, DTREE_TOWRITE));
	idx = 100;
	assert_int_equal(dtree_tag_towrite(t, &idx, 100, 1), 0);
	tree_done(t);
}

static void dtree_gang_lookup__order_and_overlap(void **state)
{
	(void)state;
	struct dtree *t = tree_new(4096, LOC_PMD);
	mark_pages(t, 2000, 1);
	mark_pages(t, 512, 512);
	mark_pages(t, 5, 1);
	mark_pages(t, 4095, 1);
	struct dtree_item items[8];
	uint64_t idx = 0;
	assert_int_equal(dtree_gang_lookup(t, &idx, 4096, DTREE_DIRTY, items, 8), 4);
	assert_int_equal(items[0].index, 5);
	assert_int_equal(items[1].index, 512);
	assert_int_equal(dentry_size(items[1].entry), DTREE_SIZE_2M);
	assert_int_equal(items[2].index, 2000);
	assert_int_equal(items[3].index, 4095);
	assert_int_equal(idx, 4096);
	/* starting inside the huge entry includes it */
	idx = 1023;
	assert_int_equal(dtree_gang_lookup(t, &idx, 4096, DTREE_DIRTY, items, 1), 1);
	assert_int_equal(items[0].index, 512);
	assert_int_equal(idx, 1024);
	assert_int_equal(dtree_gang_lookup(t, &idx, 4096, DTREE_DIRTY, items, 1), 1);
	assert_int_equal(items[0].index, 2000);
	assert_int_equal(idx, 2001);
	/* end is exclusive: [6, 512) misses the entry at 512, [6, 513) has it */
	idx = 6;
	assert_int_equal(dtree_gang_lookup(t, &idx, 512, DTREE_DIRTY, items, 8), 0);
	assert_int_equal(idx, 512);
	idx = 6;
	assert_int_equal(dtree_gang_lookup(t, &idx, 513, DTREE_DIRTY, items, 8), 1);
	assert_int_equal(idx, 513);
	/* nothing is TOWRITE yet */
	idx = 0;
	assert_int_equal(dtree_gang_lookup(t, &idx, 4096, DTREE_TOWRITE, items, 8), 0);
	/* bad arguments: 0, index untouched */
	idx = 0;
	assert_int_equal(dtree_gang_lookup(NULL, &idx, 4096, DTREE_DIRTY, items, 8), 0);
	assert_int_equal(dtree_gang_lookup(t, NULL, 4096, DTREE_DIRTY, items, 8), 0);
	assert_int_equal(dtree_gang_lookup(t, &idx, 4097, DTREE_DIRTY, items, 8), 0);
	assert_int_equal(dtree_gang_lookup(t, &idx, 4096, (enum dtree_mark)2, items, 8), 0);
	assert_int_equal(dtree_gang_lookup(t, &idx, 4096, DTREE_DIRTY, NULL, 8), 0);
	assert_int_equal(dtree_gang_lookup(t, &idx, 4096, DTREE_DIRTY, items, 0), 0);
	assert_int_equal(idx, 0);
	tree_done(t);
}

static void dtree_gang_lookup_any__includes_locked_clean(void **state)
{
	(void)state;
	struct dtree *t = tree_new(300, 0);
	mark_pages(t, 10, 1);
	mark_pages(t, 20, 1);
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 300, 1), 1);
	struct dtree_item it[4];
	idx = 0;
	assert_int_equal(dtree_claim_towrite(t, &idx, 300, it, 4), 1);
	idx = 0;
	assert_int_equal(dtree_gang_lookup(t, &idx, 300, DTREE_DIRTY, it + 1, 3), 1);
	assert_int_equal(it[1].index, 20);
	idx = 0;
	assert_int_equal(dtree_gang_lookup_any(t, &idx, 300, it + 1, 3), 2);
	assert_int_equal(it[1].index, 10);
	assert_true(dentry_is_locked(it[1].entry));
	assert_int_equal(it[2].index, 20);
	dtree_release(t, it, 1);
	idx = 0;
	assert_int_equal(dtree_gang_lookup_any(t, &idx, 300, it + 1, 3), 1);
	tree_done(t);
}

static void dtree_claim_towrite__locks_and_clears(void **state)
{
	(void)state;
	struct dtree *t = tree_new(1000, LOC_ODD);
	mark_pages(t, 100, 3);
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 1000, 100), 3);
	mark_pages(t, 500, 1); /* DIRTY, not TOWRITE */
	struct dtree_item items[8];
	idx = 0;
	assert_int_equal(dtree_claim_towrite(t, &idx, 1000, items, 2), 2);
	assert_int_equal(idx, 102);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(items[i].index, 100 + i);
		assert_true(dentry_is_locked(items[i].entry));
		assert_int_equal(dentry_location(items[i].entry), LOC_ODD + 100 + i);
		assert_false(dtree_get_mark(t, 100 + i, DTREE_DIRTY));
		assert_false(dtree_get_mark(t, 100 + i, DTREE_TOWRITE));
	}
	assert_int_equal(stats_of(t).dirty_bytes, 2 * PG);
	assert_int_equal(dtree_claim_towrite(t, &idx, 1000, items + 2, 6), 1);
	assert_int_equal(idx, 1000);
	assert_int_equal(dtree_claim_towrite(t, &idx, 1000, items + 3, 5), 0);
	/* written while claimed: DIRTY again, kept on release, unlocked */
	mark_pages(t, 101, 1);
	dtree_release(t, items, 3);
	assert_int_equal(dtree_lookup(t, 100, NULL, NULL), -ENOENT);
	assert_int_equal(dtree_lookup(t, 102, NULL, NULL), -ENOENT);
	uint64_t e = assert_entry(t, 101, 101, DTREE_SIZE_4K);
	assert_false(dentry_is_locked(e));
	assert_true(dtree_get_mark(t, 101, DTREE_DIRTY));
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 2);
	assert_int_equal(st.dirty_bytes, 2 * PG);
	/* bad arguments */
	idx = 0;
	assert_int_equal(dtree_claim_towrite(NULL, &idx, 1000, items, 1), 0);
	assert_int_equal(dtree_claim_towrite(t, &idx, 1000, NULL, 1), 0);
	assert_int_equal(dtree_claim_towrite(t, &idx, 1000, items, 0), 0);
	assert_int_equal(dtree_claim_towrite(t, &idx, 1001, items, 1), 0);
	dtree_release(NULL, items, 1);
	dtree_release(t, NULL, 1);
	dtree_release(t, NULL, 0);
	/* releasing something not claimed is refused and changes nothing */
	struct dtree_item bogus = {.index = 101, .entry = e};
	dtree_release(t, &bogus, 1);
	bogus.index = 5000;
	dtree_release(t, &bogus, 1);
	assert_true(dtree_get_mark(t, 101, DTREE_DIRTY));
	tree_done(t);
}

static void dtree_claim_towrite__skips_entry_locked_elsewhere(void **state)
{
	(void)state;
	struct dtree *t = tree_new(1000, 0);
	mark_pages(t, 10, 1);
	mark_pages(t, 20, 1);
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 1000, 100), 2);
	struct dtree_item a[1], b[4];
	idx = 20;
	assert_int_equal(dtree_claim_towrite(t, &idx, 1000, a, 1), 1);
	/* page 20 written and tagged again by a second, unserialised walk */
	mark_pages(t, 20, 1);
	idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 1000, 100), 2);
	/* the second walk (or the holder itself) does not wait: it skips page 20 */
	idx = 0;
	assert_int_equal(dtree_claim_towrite(t, &idx, 1000, b, 4), 1);
	assert_int_equal(b[0].index, 10);
	assert_int_equal(idx, 1000);
	/* ... which keeps its marks for the next walk */
	assert_true(dtree_get_mark(t, 20, DTREE_DIRTY));
	assert_true(dtree_get_mark(t, 20, DTREE_TOWRITE));
	dtree_release(t, a, 1);
	idx = 0;
	assert_int_equal(dtree_claim_towrite(t, &idx, 1000, b + 1, 3), 1);
	assert_int_equal(b[1].index, 20);
	dtree_release(t, b, 2);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 0);
	tree_done(t);
}

/* at most @max DIRTY entries: every one claimed in one call, none left TOWRITE */
static void dtree_claim_dirty__claims_all_when_few(void **state)
{
	(void)state;
	struct dtree *t = tree_new(4096, LOC_PMD);
	uint64_t pages[] = {1, 2, 70, 200, 513};
	for (size_t i = 0; i < 5; i++)
		mark_pages(t, pages[i], 1);
	mark_pages(t, 1024, 512); /* a 2 MiB entry */
	uint64_t idx = 70;
	assert_int_equal(dtree_tag_towrite(t, &idx, 71, 1), 1); /* one already TOWRITE */
	struct dtree_item items[6];
	idx = 0;
	assert_int_equal(dtree_claim_dirty(t, &idx, 4096, items, 6), 6);
	assert_int_equal(idx, 4096);
	for (size_t i = 0; i < 6; i++) {
		uint64_t want = i < 5 ? pages[i] : 1024;
		assert_int_equal(items[i].index, want);
		assert_true(dentry_is_locked(items[i].entry));
		assert_non_null(items[i].priv_node);
		assert_false(dtree_get_mark(t, want, DTREE_DIRTY));
		assert_false(dtree_get_mark(t, want, DTREE_TOWRITE));
	}
	assert_int_equal(dentry_size(items[5].entry), DTREE_SIZE_2M);
	assert_int_equal(stats_of(t).dirty_bytes, 0);
	/* the tree is consistent while they are held */
	assert_int_equal(dtree_check(t), 0);
	/* nothing dirty left: a second call claims nothing */
	idx = 0;
	assert_int_equal(dtree_claim_dirty(t, &idx, 4096, items + 6, 1), 0);
	assert_int_equal(idx, 4096);
	dtree_release(t, items, 6);
	struct dtree_stats st = stats_of(t);
	for (int i = 0; i < DTREE_NR_SIZES; i++)
		assert_int_equal(st.entries[i], 0);
	assert_int_equal(st.nodes, 1);
	tree_done(t);
}

/* more than @max: nothing claimed, the first max + 1 tagged, the walk goes on in batches */
static void dtree_claim_dirty__tags_first_batch_when_more(void **state)
{
	(void)state;
	struct dtree *t = tree_new(4096, LOC_PMD);
	uint64_t pages[] = {1, 2, 70, 200, 513, 1000, 1500, 4000, 4001, 4095};
	for (size_t i = 0; i < 10; i++)
		mark_pages(t, pages[i], 1);
	struct dtree_item items[10];
	uint64_t idx = 0;
	assert_int_equal(dtree_claim_dirty(t, &idx, 4096, items, 3), -EAGAIN);
	assert_int_equal(idx, 201);
	for (size_t i = 0; i < 10; i++) {
		assert_true(dtree_get_mark(t, pages[i], DTREE_DIRTY));
		assert_int_equal(dtree_get_mark(t, pages[i], DTREE_TOWRITE), i < 4);
		uint64_t e = assert_entry(t, pages[i], pages[i], DTREE_SIZE_4K);
		assert_false(dentry_is_locked(e));
	}
	assert_int_equal(stats_of(t).dirty_bytes, 10 * PG);
	/* exactly one more than max is "more" too */
	uint64_t idx2 = 4000;
	assert_int_equal(dtree_claim_dirty(t, &idx2, 4096, items, 2), -EAGAIN);
	assert_int_equal(idx2, 4096);
	/* the batched walk from there */
	assert_int_equal(dtree_tag_towrite(t, &idx, 4096, 100), 6);
	idx = 0;
	assert_int_equal(dtree_claim_towrite(t, &idx, 4096, items, 10), 10);
	dtree_release(t, items, 10);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 0);
	tree_done(t);
}

/* entries locked by another claimer: skipped with their marks, counted for the threshold */
static void dtree_claim_dirty__skips_entry_locked_elsewhere(void **state)
{
	(void)state;
	struct dtree *t = tree_new(1000, 0);
	mark_pages(t, 10, 1);
	struct dtree_item a[1], b[4];
	uint64_t idx = 0;
	assert_int_equal(dtree_claim_dirty(t, &idx, 1000, a, 1), 1);
	mark_pages(t, 10, 1); /* written again while held */
	mark_pages(t, 20, 1);
	/* two DIRTY entries (one locked) for max 1: more, both tagged */
	idx = 0;
	assert_int_equal(dtree_claim_dirty(t, &idx, 1000, b, 1), -EAGAIN);
	assert_int_equal(idx, 21);
	assert_true(dtree_get_mark(t, 10, DTREE_TOWRITE));
	assert_true(dtree_get_mark(t, 20, DTREE_TOWRITE));
	/* max 2: page 20 claimed, page 10 skipped with DIRTY and TOWRITE kept */
	idx = 0;
	assert_int_equal(dtree_claim_dirty(t, &idx, 1000, b, 2), 1);
	assert_int_equal(idx, 1000);
	assert_int_equal(b[0].index, 20);
	assert_true(dtree_get_mark(t, 10, DTREE_DIRTY));
	assert_true(dtree_get_mark(t, 10, DTREE_TOWRITE));
	dtree_release(t, a, 1);
	dtree_release(t, b, 1);
	uint64_t e = assert_entry(t, 10, 10, DTREE_SIZE_4K);
	assert_false(dentry_is_locked(e));
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 1);
	assert_int_equal(full_walk(t), 1);
	tree_done(t);
}

/* a range starting inside a huge entry includes it; bad arguments change nothing */
static void dtree_claim_dirty__range_and_arguments(void **state)
{
	(void)state;
	struct dtree *t = tree_new(4096, LOC_PMD);
	mark_pages(t, 1024, 512);
	mark_pages(t, 5, 1);
	struct dtree_item it[2];
	uint64_t idx = 0;
	assert_int_equal(dtree_claim_dirty(NULL, &idx, 100, it, 1), -EINVAL);
	assert_int_equal(dtree_claim_dirty(t, NULL, 100, it, 1), -EINVAL);
	assert_int_equal(dtree_claim_dirty(t, &idx, 100, NULL, 1), -EINVAL);
	assert_int_equal(dtree_claim_dirty(t, &idx, 100, it, 0), -EINVAL);
	assert_int_equal(dtree_claim_dirty(t, &idx, 4097, it, 1), -EINVAL);
	idx = 50;
	assert_int_equal(dtree_claim_dirty(t, &idx, 40, it, 1), -EINVAL);
	assert_int_equal(idx, 50);
	idx = 100;
	assert_int_equal(dtree_claim_dirty(t, &idx, 100, it, 1), 0); /* empty range */
	assert_true(dtree_get_mark(t, 5, DTREE_DIRTY));
	assert_false(dtree_get_mark(t, 5, DTREE_TOWRITE));
	assert_true(dtree_get_mark(t, 1024, DTREE_DIRTY));
	idx = 1300;
	assert_int_equal(dtree_claim_dirty(t, &idx, 1301, it, 1), 1);
	assert_int_equal(idx, 1301);
	assert_int_equal(it[0].index, 1024);
	assert_int_equal(dentry_size(it[0].entry), DTREE_SIZE_2M);
	/* a huge entry beyond the end of the range is not included */
	mark_pages(t, 2048, 512);
	idx = 1536;
	assert_int_equal(dtree_claim_dirty(t, &idx, 2048, it + 1, 1), 0);
	assert_true(dtree_get_mark(t, 2048, DTREE_DIRTY));
	dtree_release(t, it, 1);
	assert_int_equal(dtree_lookup(t, 1024, NULL, NULL), -ENOENT);
	assert_int_equal(full_walk(t), 2);
	tree_done(t);
}

/*
 * dtree_release finds a claimed entry by the node and slot its claim
 * recorded, or by a walk when an item has none; both release the same
 * way, and an array released twice is refused the second time.
 */
static void dtree_release__with_and_without_claim_hint(void **state)
{
	(void)state;
	struct dtree *t = tree_new(1 << 20, LOC_PUD);
	mark_pages(t, 3, 1);
	mark_pages(t, 70000, 1);
	mark_pages(t, 9 * PMD_PAGES, PMD_PAGES);
	struct dtree_item it[3];
	uint64_t idx = 0;
	assert_int_equal(dtree_claim_dirty(t, &idx, 1 << 20, it, 3), 3);
	/* item 1 as a caller might build it: no hint */
	struct dtree_item plain = {.index = it[1].index, .entry = it[1].entry};
	/* item 2 with a hint that does not match (wrong slot): the walk is used */
	it[2].priv_slot ^= 1;
	mark_pages(t, 3, 1); /* written while held: kept DIRTY on release */
	dtree_release(t, &it[0], 1);
	dtree_release(t, &plain, 1);
	dtree_release(t, &it[2], 1);
	assert_null(it[0].priv_node);
	uint64_t e = assert_entry(t, 3, 3, DTREE_SIZE_4K);
	assert_false(dentry_is_locked(e));
	assert_true(dtree_get_mark(t, 3, DTREE_DIRTY));
	assert_int_equal(dtree_lookup(t, 70000, NULL, NULL), -ENOENT);
	assert_int_equal(dtree_lookup(t, 9 * PMD_PAGES, NULL, NULL), -ENOENT);
	struct dtree_stats before = stats_of(t);
	/* released again: refused (logged), nothing changes */
	dtree_release(t, it, 1);
	dtree_release(t, &plain, 1);
	struct dtree_stats after = stats_of(t);
	assert_stats_equal(&before, &after);
	assert_true(dtree_get_mark(t, 3, DTREE_DIRTY));
	assert_int_equal(full_walk(t), 1);
	tree_done(t);
}

/* control: with the broken order a write during write-back is lost on release */
static void dtree_release__clear_after_writeback_control(void **state)
{
	(void)state;
	struct dtree *t = tree_new(100, 0);
	mark_pages(t, 7, 1);
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 100, 10), 1);
	rdax_faults.clear_after_writeback = true;
	struct dtree_item it[1];
	idx = 0;
	assert_int_equal(dtree_claim_towrite(t, &idx, 100, it, 1), 1);
	mark_pages(t, 7, 1);
	dtree_release(t, it, 1);
	rdax_faults.clear_after_writeback = false;
	assert_false(dtree_get_mark(t, 7, DTREE_DIRTY));
	assert_int_equal(dtree_lookup(t, 7, NULL, NULL), -ENOENT);
	tree_done(t);
}

static void dtree_remove_range__whole_and_partial(void **state)
{
	(void)state;
	struct dtree *t = tree_new(4096, LOC_PMD);
	mark_pages(t, 512, 512); /* huge [512, 1024) */
	mark_pages(t, 300, 10);
	mark_pages(t, 1100, 10);
	/* [305, 1100): 300..304 stay, 305..309 go, the huge entry is partly inside */
	assert_int_equal(dtree_remove_range(t, 305, 1000), 5);
	assert_entry(t, 304, 304, DTREE_SIZE_4K);
	assert_int_equal(dtree_lookup(t, 305, NULL, NULL), -ENOENT);
	assert_entry(t, 700, 512, DTREE_SIZE_2M);
	assert_true(dtree_get_mark(t, 512, DTREE_DIRTY));
	/* starting inside the huge entry: kept too (it starts before) */
	assert_int_equal(dtree_remove_range(t, 513, 1105), 5);
	assert_entry(t, 513, 512, DTREE_SIZE_2M);
	assert_entry(t, 1105, 1105, DTREE_SIZE_4K);
	/* wholly inside: removed */
	assert_int_equal(dtree_remove_range(t, 512, 1024), 1);
	assert_int_equal(dtree_lookup(t, 600, NULL, NULL), -ENOENT);
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_2M], 0);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 5 + 5);
	assert_int_equal(st.dirty_bytes, 10 * PG);
	/* bad ranges: nothing removed */
	assert_int_equal(dtree_remove_range(NULL, 0, 10), 0);
	assert_int_equal(dtree_remove_range(t, 10, 10), 0);
	assert_int_equal(dtree_remove_range(t, 10, 5), 0);
	assert_int_equal(dtree_remove_range(t, 0, 4097), 0);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 10);
	dtree_clear(t);
	dtree_clear(NULL);
	st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 0);
	assert_int_equal(st.nodes, 1);
	assert_int_equal(st.dirty_bytes, 0);
	tree_done(t);
}

static void dtree_remove_range__many_entries(void **state)
{
	(void)state;
	/* more than one batch of removals, the mutex dropped in between */
	struct dtree *t = tree_new(10000, 0);
	for (uint64_t p = 0; p < 10000; p += 2)
		mark_pages(t, p, 1);
	assert_int_equal(dtree_remove_range(t, 1, 9999), 4999);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 1);
	assert_entry(t, 0, 0, DTREE_SIZE_4K);
	tree_done(t);
}

static void dtree_remove_range__waits_for_locked_entry(void **state)
{
	(void)state;
	struct dtree *t = tree_new(1000, 0);
	mark_pages(t, 10, 1);
	mark_pages(t, 20, 1);
	uint64_t idx = 0;
	assert_int_equal(dtree_tag_towrite(t, &idx, 1000, 10), 2);
	struct dtree_item it[1];
	idx = 0;
	assert_int_equal(dtree_claim_towrite(t, &idx, 1000, it, 1), 1);
	mark_pages(t, 10, 1); /* written during write-back: would be kept */

	struct marker_arg a = {.t = t, .offset = 0, .len = 1000, .remove = true};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, marker_thread, &a), 0);
	wait_for_waiter(t);
	assert_true(dentry_is_locked(assert_entry(t, 10, 10, DTREE_SIZE_4K)));
	dtree_release(t, it, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.removed, 2);
	assert_int_equal(stats_of(t).entries[DTREE_SIZE_4K], 0);
	tree_done(t);
}

static void dtree_lookup__bad_arguments(void **state)
{
	(void)state;
	struct dtree *t = tree_new(100, 0);
	mark_pages(t, 99, 1);
	assert_int_equal(dtree_lookup(NULL, 0, NULL, NULL), -EINVAL);
	assert_int_equal(dtree_lookup(t, 100, NULL, NULL), -EINVAL);
	assert_int_equal(dtree_lookup(t, 99, NULL, NULL), 0);
	assert_false(dtree_get_mark(NULL, 99, DTREE_DIRTY));
	assert_false(dtree_get_mark(t, 100, DTREE_DIRTY));
	assert_false(dtree_get_mark(t, 99, (enum dtree_mark)5));
	assert_true(dtree_get_mark(t, 99, DTREE_DIRTY));
	assert_int_equal(dtree_check(NULL), -EINVAL);
	struct dtree_stats st;
	dtree_stats_get(NULL, &st);
	dtree_stats_get(t, NULL);
	tree_done(t);
}

static void dtree_stats_get__counters_follow_the_dirty_set(void **state)
{
	(void)state;
	struct dtree *t = tree_new(PUD_PAGES * 2, LOC_PUD);
	struct dtree_stats empty = stats_of(t);
	mark_pages(t, 0, PUD_PAGES);		 /* 1 GiB */
	mark_pages(t, PUD_PAGES, PMD_PAGES * 2); /* 2 x 2 MiB */
	mark_pages(t, PUD_PAGES * 2 - 10, 10);	 /* 10 x 4 KiB */
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.entries[DTREE_SIZE_1G], 1);
	assert_int_equal(st.entries[DTREE_SIZE_2M], 2);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 10);
	assert_int_equal(st.dirty_bytes, RDAX_PUD_SIZE + 2 * RDAX_PMD_SIZE + 10 * PG);
	assert_int_equal(st.tree_bytes - empty.tree_bytes,
			 (st.nodes - empty.nodes) * dtree_node_size());
	/* after an fsync everything is gone again; memory back to the empty tree */
	assert_int_equal(full_walk(t), 13);
	st = stats_of(t);
	for (int i = 0; i < DTREE_NR_SIZES; i++)
		assert_int_equal(st.entries[i], 0);
	assert_int_equal(st.dirty_bytes, 0);
	assert_int_equal(st.nodes, 1);
	/* freed nodes may sit in the small cache: at most 8 of them */
	assert_true(st.tree_bytes <= empty.tree_bytes + 8 * dtree_node_size());
	tree_done(t);
}

/*
 * The spare-node cache: nodes an fsync empties are kept for the next
 * writes, up to 1/1024 of the volume's size (at least 8 nodes, at most
 * 4 MiB), and tree_bytes counts them.
 */
static void dtree_stats_get__spare_node_cache_is_bounded(void **state)
{
	(void)state;
	const uint64_t npages = 64 * 1024; /* 256 MiB: 256 KiB of spare nodes */
	const uint64_t cap = (npages * PG / 1024) / dtree_node_size();
	struct dtree *t = tree_new(npages, 0);
	struct dtree_stats empty = stats_of(t);
	for (uint64_t k = 0; k < 1000; k++) /* one page in each of 1000 leaves */
		mark_pages(t, 64 * k + k % 64, 1);
	struct dtree_stats full = stats_of(t);
	assert_true(full.nodes - 1 > cap);
	assert_int_equal(full_walk(t), 1000);
	struct dtree_stats st = stats_of(t);
	assert_int_equal(st.nodes, 1);
	/* as many kept as allowed, and counted */
	assert_int_equal(st.tree_bytes - empty.tree_bytes, cap * dtree_node_size());
	/* the next writes take them back: the tree is no larger than before */
	for (uint64_t k = 0; k < 1000; k++)
		mark_pages(t, 64 * k + k % 64, 1);
	st = stats_of(t);
	assert_int_equal(st.nodes, full.nodes);
	assert_int_equal(st.tree_bytes, full.tree_bytes);
	tree_done(t);

	/* a small volume (4 MiB: 4 KiB would be 7 nodes) keeps the minimum of 8 */
	t = tree_new(1024, 0);
	empty = stats_of(t);
	for (uint64_t k = 0; k < 16; k++)
		mark_pages(t, 64 * k, 1);
	assert_int_equal(full_walk(t), 16);
	st = stats_of(t);
	assert_int_equal(st.tree_bytes - empty.tree_bytes, 8 * dtree_node_size());
	tree_done(t);
}

/*
 * dtree_stats_get__bytes_per_page -- memory for sequential 4 KiB writes
 * (the design target: at most 16 B per dirty page) and, for the record,
 * the sparse worst case (one page per 1 GiB: a whole path of nodes each).
 */
static void dtree_stats_get__bytes_per_page(void **state)
{
	(void)state;
	uint64_t npages = PUD_PAGES * 4;
	struct dtree *t = tree_new(npages, LOC_PUD);
	uint64_t n = 4096;
	for (uint64_t p = 0; p < n; p++)
		mark_pages(t, 1000 + p, 1);
	struct dtree_stats st = stats_of(t);
	double seq = (double)st.tree_bytes / (double)n;
	printf("# dirty tree: node %zu B; sequential 4 KiB writes: %" PRIu64 " pages, %" PRIu64
	       " B, %.2f B/page (%" PRIu64 " nodes)\n",
	       dtree_node_size(), n, st.tree_bytes, seq, st.nodes);
	assert_true(seq <= 16.0);
	dtree_delete(&t);

	/* a full-ish leaf: 64 pages cost one leaf plus the path to it */
	t = tree_new(PMD_PAGES * 4, 0);
	struct dtree_stats empty = stats_of(t);
	for (uint64_t p = 0; p < 64; p++)
		mark_pages(t, 64 + p, 1);
	st = stats_of(t);
	double leaf = (double)(st.tree_bytes - empty.tree_bytes) / 64.0;
	printf("# dirty tree: one full leaf: %.2f B/page above the empty tree\n", leaf);
	assert_true(leaf <= 16.0);
	dtree_delete(&t);

	t = tree_new(npages, LOC_PUD);
	empty = stats_of(t);
	for (uint64_t p = 0; p < npages; p += PUD_PAGES)
		mark_pages(t, p + 12345, 1);
	st = stats_of(t);
	printf("# dirty tree: sparse (1 page per GiB): %.0f B/page above the empty tree "
	       "(%" PRIu64 " B empty)\n",
	       (double)(st.tree_bytes - empty.tree_bytes) / (double)(npages / PUD_PAGES),
	       empty.tree_bytes);
	tree_done(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(dtree_new__bad_arguments),
	    cmocka_unit_test(dtree_delete__null),
	    cmocka_unit_test(dtree_new__empty_tree),
	    cmocka_unit_test(dtree_mark_dirty__bad_arguments),
	    cmocka_unit_test(dtree_mark_dirty__single_page),
	    cmocka_unit_test(dtree_mark_dirty__bytes_straddling_pages),
	    cmocka_unit_test(dtree_mark_dirty__already_dirty_changes_nothing),
	    cmocka_unit_test(dtree_mark_dirty__tiny_volume),
	    cmocka_unit_test(dtree_mark_dirty__whole_2m_aligned_location),
	    cmocka_unit_test(dtree_mark_dirty__whole_2m_unaligned_location),
	    cmocka_unit_test(dtree_mark_dirty__2m_not_wholly_covered),
	    cmocka_unit_test(dtree_mark_dirty__huge_replaces_small_carrying_towrite),
	    cmocka_unit_test_teardown(dtree_mark_dirty__no_towrite_inherit_control, reset_faults),
	    cmocka_unit_test(dtree_mark_dirty__small_write_inside_huge),
	    cmocka_unit_test(dtree_mark_dirty__1g_entries),
	    cmocka_unit_test(dtree_mark_dirty__block_in_smaller_calls_is_not_promoted),
	    cmocka_unit_test(dtree_mark_dirty__lines),
	    cmocka_unit_test(dtree_mark_dirty__1g_needs_aligned_location),
	    cmocka_unit_test(dtree_mark_dirty__huge_waits_for_locked_entry),
	    cmocka_unit_test(dtree_tag_towrite__batches),
	    cmocka_unit_test(dtree_tag_towrite__starts_inside_huge),
	    cmocka_unit_test(dtree_tag_towrite__bad_arguments),
	    cmocka_unit_test(dtree_gang_lookup__order_and_overlap),
	    cmocka_unit_test(dtree_gang_lookup_any__includes_locked_clean),
	    cmocka_unit_test(dtree_claim_towrite__locks_and_clears),
	    cmocka_unit_test(dtree_claim_towrite__skips_entry_locked_elsewhere),
	    cmocka_unit_test_teardown(dtree_release__clear_after_writeback_control, reset_faults),
	    cmocka_unit_test(dtree_claim_dirty__claims_all_when_few),
	    cmocka_unit_test(dtree_claim_dirty__tags_first_batch_when_more),
	    cmocka_unit_test(dtree_claim_dirty__skips_entry_locked_elsewhere),
	    cmocka_unit_test(dtree_claim_dirty__range_and_arguments),
	    cmocka_unit_test(dtree_release__with_and_without_claim_hint),
	    cmocka_unit_test(dtree_remove_range__whole_and_partial),
	    cmocka_unit_test(dtree_remove_range__many_entries),
	    cmocka_unit_test(dtree_remove_range__waits_for_locked_entry),
	    cmocka_unit_test(dtree_lookup__bad_arguments),
	    cmocka_unit_test(dtree_stats_get__counters_follow_the_dirty_set),
	    cmocka_unit_test(dtree_stats_get__bytes_per_page),
	    cmocka_unit_test(dtree_stats_get__spare_node_cache_is_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
