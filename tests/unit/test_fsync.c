/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fsync.c -- fsync_range(): exactly the written bytes are written back
 *
 * Every test runs on a fresh SIM-mode namespace (persist.h): the namespace
 * file holds exactly what was flushed, so reading it with pread() shows what
 * an fsync made durable, and what it did not.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "checked.h"
#include "dirty_tree.h"
#include "faults.h"
#include "fsync.h"
#include "log.h"
#include "namespace.h"
#include "volume.h"
#include "fsync_pattern.h"
#include "volfx.h"

#define NS_SIZE	 (64ULL << 20)
#define VOL_SIZE (32ULL << 20)
#define PAGE	 RDAX_PAGE_SIZE
#define PMD	 RDAX_PMD_SIZE
#define LINE	 DTREE_LINE_SIZE

/* fx_setup -- a SIM namespace with one 2 MiB-aligned volume, opened (volfx.h) */
static int fx_setup(void **state)
{
	*state = volfx_new("test-fsync", NS_SIZE, VOL_SIZE, 5);
	return 0;
}

static int fx_teardown(void **state)
{
	/* every test leaves a tree that passes its own structural check */
	assert_int_equal(volfx_delete(*state), 0);
	return 0;
}

static bool page_dirty(struct volfx *fx, uint64_t page)
{
	return dtree_get_mark(fx->v->tree, page, DTREE_DIRTY);
}

static uint64_t do_fsync(struct volfx *fx, uint64_t off, uint64_t len, enum flush_mode mode)
{
	uint64_t written = UINT64_MAX;
	assert_int_equal(fsync_range(fx->v, off, len, mode, &written), 0);
	return written;
}

static void fsync_range__one_page_written_back(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 5 * PAGE + 10, 100, 1), 0);
	assert_false(pattern_durable(fx->fd, fx->v, 5 * PAGE + 10, 100, 1));
	/* bytes [10, 110) of the page: lines 0 and 1 */
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 2 * LINE);
	assert_true(pattern_durable(fx->fd, fx->v, 5 * PAGE + 10, 100, 1));
	assert_false(page_dirty(fx, 5));
}

/*
 * Line-exact write-back: a write to some lines of a page writes back those
 * lines only. Bytes stored in another line of the page without being
 * marked (as if by a writer that never told the tree) stay out of the
 * file, which shows no other line was written back; the page-granular
 * baseline FLUSH_PAGES writes the whole page, those bytes included.
 */
static void fsync_range__only_written_lines_written_back(void **state)
{
	struct volfx *fx = *state;
	struct volume_stats st;
	const uint64_t page = 9 * PAGE;
	pattern_fill(fx->v->data + page + 5 * LINE, LINE, 40); /* not marked */
	/* bytes [20 * 64 + 3, 22 * 64 + 3): lines 20, 21 and 22 */
	assert_int_equal(pattern_write(fx->v, page + 20 * LINE + 3, 2 * LINE, 41), 0);
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.dirty_bytes, 3 * LINE);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 3 * LINE);
	assert_true(pattern_durable(fx->fd, fx->v, page + 20 * LINE + 3, 2 * LINE, 41));
	assert_false(pattern_durable(fx->fd, fx->v, page + 5 * LINE, LINE, 40));
	assert_true(volfx_durable_zero(fx, page + 6 * LINE, 14 * LINE));

	assert_int_equal(pattern_write(fx->v, page + 20 * LINE + 3, 2 * LINE, 42), 0);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_PAGES), PAGE);
	assert_true(pattern_durable(fx->fd, fx->v, page + 20 * LINE + 3, 2 * LINE, 42));
	assert_true(pattern_durable(fx->fd, fx->v, page + 5 * LINE, LINE, 40));
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.dirty_bytes, 0);
}

/* lines written by several writes to one page add up; a whole page is 64 lines */
static void fsync_range__lines_of_several_writes_add_up(void **state)
{
	struct volfx *fx = *state;
	struct volume_stats st;
	assert_int_equal(pattern_write(fx->v, 3 * PAGE, 1, 43), 0);		 /* line 0 */
	assert_int_equal(pattern_write(fx->v, 3 * PAGE + 63 * LINE, 64, 44), 0); /* line 63 */
	assert_int_equal(pattern_write(fx->v, 3 * PAGE + 10, 1, 45), 0);	 /* line 0 again */
	assert_int_equal(pattern_write(fx->v, 4 * PAGE, PAGE, 46), 0);		 /* whole */
	assert_int_equal(pattern_write(fx->v, 4 * PAGE + 7, 1, 47), 0);		 /* inside it */
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.dirty_bytes, 2 * LINE + PAGE);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 2 * LINE + PAGE);
	assert_true(pattern_durable(fx->fd, fx->v, 3 * PAGE + 63 * LINE, 64, 44));
	assert_true(pattern_durable(fx->fd, fx->v, 3 * PAGE + 10, 1, 45));
	assert_true(pattern_durable(fx->fd, fx->v, 4 * PAGE + 7, 1, 47));
	assert_true(volfx_durable_zero(fx, 3 * PAGE + LINE, 62 * LINE));
}

static void fsync_range__unaligned_write_spanning_pages(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 3 * PAGE - 50, 100, 2), 0);
	/* the last line of page 2, the first of page 3 */
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 2 * LINE);
	assert_true(pattern_durable(fx->fd, fx->v, 3 * PAGE - 50, 100, 2));
}

static void fsync_range__huge_entry_written_back_whole(void **state)
{
	struct volfx *fx = *state;
	struct volume_stats st;
	assert_int_equal(pattern_write(fx->v, 2 * PMD, PMD, 3), 0);
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.entries[DTREE_SIZE_2M], 1);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 0);
	assert_int_equal(st.dirty_bytes, PMD);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), PMD);
	assert_true(pattern_durable(fx->fd, fx->v, 2 * PMD, PMD, 3));
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.entries[DTREE_SIZE_2M], 0);
	assert_int_equal(st.dirty_bytes, 0);
}

static void fsync_range__partial_range_leaves_rest_dirty(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 0, 10, 4), 0);
	assert_int_equal(pattern_write(fx->v, 5 * PAGE, 10, 5), 0);
	assert_int_equal(pattern_write(fx->v, 10 * PAGE, 10, 6), 0);
	/* a range of one byte inside page 5 writes back page 5 only (its line) */
	assert_int_equal(do_fsync(fx, 5 * PAGE + 7, 1, FLUSH_TRACKED), LINE);
	assert_true(pattern_durable(fx->fd, fx->v, 5 * PAGE, 10, 5));
	assert_false(pattern_durable(fx->fd, fx->v, 0, 10, 4));
	assert_false(pattern_durable(fx->fd, fx->v, 10 * PAGE, 10, 6));
	assert_true(page_dirty(fx, 0));
	assert_false(page_dirty(fx, 5));
	assert_true(page_dirty(fx, 10));
	/* a range ending inside page 10 includes it; page 0 stays dirty */
	assert_int_equal(do_fsync(fx, PAGE, 9 * PAGE + 1, FLUSH_TRACKED), LINE);
	assert_true(pattern_durable(fx->fd, fx->v, 10 * PAGE, 10, 6));
	assert_true(page_dirty(fx, 0));
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), LINE);
	assert_true(pattern_durable(fx->fd, fx->v, 0, 10, 4));
}

static void fsync_range__start_inside_huge_entry_rounds_down(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, PMD, PMD, 7), 0);
	assert_int_equal(pattern_write(fx->v, 0, PAGE, 8),
			 0); /* before the huge entry: outside the range */
	assert_int_equal(do_fsync(fx, PMD + 12345, 1, FLUSH_TRACKED), PMD);
	assert_true(pattern_durable(fx->fd, fx->v, PMD, PMD, 7));
	assert_false(pattern_durable(fx->fd, fx->v, 0, PAGE, 8));
	assert_true(page_dirty(fx, 0));
	assert_false(page_dirty(fx, PMD / PAGE));
}

/*
 * The same on the batched walk, by the test hook and by more entries than
 * one claim batch: every walk rounds its start down to the huge entry.
 */
static void fsync_range__start_inside_huge_entry_rounds_down_batched(void **state)
{
	struct volfx *fx = *state;
	struct fsync_test_hooks hooks = {.batched_only = true};
	assert_int_equal(pattern_write(fx->v, PMD, PMD, 34), 0);
	assert_int_equal(pattern_write(fx->v, 0, PAGE, 35),
			 0); /* before the huge entry: outside the range */
	fsync_set_test_hooks(&hooks);
	assert_int_equal(do_fsync(fx, PMD + 12345, 1, FLUSH_TRACKED), PMD);
	fsync_set_test_hooks(NULL);
	assert_true(pattern_durable(fx->fd, fx->v, PMD, PMD, 34));
	assert_true(page_dirty(fx, 0));

	const uint64_t nsmall = FSYNC_CLAIM_BATCH + 6;
	assert_int_equal(pattern_write(fx->v, PMD, PMD, 36), 0);
	for (uint64_t i = 0; i < nsmall; i++)
		assert_int_equal(pattern_write(fx->v, 2 * PMD + 2 * i * PAGE, 1, 37 + (unsigned)i),
				 0);
	assert_int_equal(do_fsync(fx, PMD + 12345, PMD + 2 * nsmall * PAGE, FLUSH_TRACKED),
			 PMD + nsmall * LINE);
	assert_true(pattern_durable(fx->fd, fx->v, PMD, PMD, 36));
	for (uint64_t i = 0; i < nsmall; i++)
		assert_true(
		    pattern_durable(fx->fd, fx->v, 2 * PMD + 2 * i * PAGE, 1, 37 + (unsigned)i));
	assert_true(page_dirty(fx, 0));
}

static void fsync_range__end_inside_huge_entry_includes_it(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, PMD - PAGE, PAGE, 9), 0);
	assert_int_equal(pattern_write(fx->v, PMD, PMD, 10), 0);
	assert_int_equal(pattern_write(fx->v, 2 * PMD, PAGE, 11), 0); /* after the range */
	assert_int_equal(do_fsync(fx, PMD - PAGE, 2 * PAGE, FLUSH_TRACKED), PAGE + PMD);
	assert_true(pattern_durable(fx->fd, fx->v, PMD - PAGE, PAGE, 9));
	assert_true(pattern_durable(fx->fd, fx->v, PMD, PMD, 10));
	assert_false(pattern_durable(fx->fd, fx->v, 2 * PMD, PAGE, 11));
	assert_true(page_dirty(fx, 2 * PMD / PAGE));
}

static void fsync_range__len_zero_means_to_end(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 0, 1, 12), 0);
	assert_int_equal(pattern_write(fx->v, 7 * PAGE, 1, 13), 0);
	assert_int_equal(pattern_write(fx->v, VOL_SIZE - 1, 1, 14), 0);
	/* from page 7 to the end: pages 7 and the last, one line each */
	assert_int_equal(do_fsync(fx, 7 * PAGE, 0, FLUSH_TRACKED), 2 * LINE);
	assert_true(page_dirty(fx, 0));
	/* off == size, len 0: an empty range */
	assert_int_equal(do_fsync(fx, VOL_SIZE, 0, FLUSH_TRACKED), 0);
	/* 0, 0: the whole volume */
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), LINE);
	assert_true(pattern_durable(fx->fd, fx->v, 0, 1, 12));
	assert_true(pattern_durable(fx->fd, fx->v, 7 * PAGE, 1, 13));
	assert_true(pattern_durable(fx->fd, fx->v, VOL_SIZE - 1, 1, 14));
}

static void fsync_range__second_fsync_returns_zero(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 0, 3 * PAGE, 15), 0);
	assert_int_equal(pattern_write(fx->v, 4 * PMD, PMD, 16), 0);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 3 * PAGE + PMD);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 0);
	struct volume_stats st;
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.dirty_bytes, 0);
	for (int i = 0; i < DTREE_NR_SIZES; i++)
		assert_int_equal(st.entries[i], 0);
	/* a write after the fsync is caught by the next one */
	assert_int_equal(pattern_write(fx->v, PAGE, 1, 17), 0);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), LINE);
}

static void fsync_range__hammer_returns_volume_size(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 9 * PAGE, 100, 18), 0);
	assert_int_equal(pattern_write(fx->v, PMD, PMD, 19), 0);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_HAMMER), VOL_SIZE);
	assert_true(pattern_durable(fx->fd, fx->v, 9 * PAGE, 100, 18));
	assert_true(pattern_durable(fx->fd, fx->v, PMD, PMD, 19));
	/* the hammer claims every entry: nothing is left dirty */
	struct volume_stats st;
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.dirty_bytes, 0);
	assert_int_equal(st.entries[DTREE_SIZE_4K] + st.entries[DTREE_SIZE_2M], 0);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 0);
	/* the range is checked, then ignored: every line of the volume */
	assert_int_equal(do_fsync(fx, PAGE, 1, FLUSH_HAMMER), VOL_SIZE);
}

static void fsync_range__default_mode_follows_volume(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 0, 1, 20), 0);
	fx->v->flush_mode = FLUSH_HAMMER;
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_DEFAULT), VOL_SIZE);
	fx->v->flush_mode = FLUSH_TRACKED;
	assert_int_equal(pattern_write(fx->v, 0, 1, 21), 0);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_DEFAULT), LINE);
	assert_true(pattern_durable(fx->fd, fx->v, 0, 1, 21));
}

static void fsync_range__counters(void **state)
{
	struct volfx *fx = *state;
	struct volume_stats st;
	volume_stats_get(fx->v, &st);
	uint64_t fsyncs0 = st.fsyncs, bytes0 = st.fsync_bytes;

	assert_int_equal(pattern_write(fx->v, 0, 2 * PAGE, 22), 0);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 2 * PAGE);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 0);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_HAMMER), VOL_SIZE);
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.fsyncs - fsyncs0, 3);
	assert_int_equal(st.fsync_bytes - bytes0, 2 * PAGE + VOL_SIZE);
}

/* more entries than one tag batch and many claim batches */
static void fsync_range__more_entries_than_one_batch(void **state)
{
	struct volfx *fx = *state;
	uint64_t npages = FSYNC_TAG_BATCH + 3 * FSYNC_CLAIM_BATCH + 5;
	assert_true(npages * PAGE <= VOL_SIZE);
	uint8_t b = 0x5a;
	/* one byte per page: never a whole 2 MiB block, so all 4 KiB entries */
	for (uint64_t i = 0; i < npages; i++)
		assert_int_equal(volume_write(fx->v, i * PAGE + (i % 4000), &b, 1), 0);
	struct volume_stats st;
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.entries[DTREE_SIZE_4K], npages);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), npages * LINE);
	for (uint64_t i = 0; i < npages; i += 997) {
		uint8_t got = 0;
		assert_int_equal(
		    pread(fx->fd, &got, 1, (off_t)(fx->v->ns_offset + i * PAGE + (i % 4000))), 1);
		assert_int_equal(got, b);
	}
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 0);
	assert_int_equal(st.dirty_bytes, 0);
}

static void fsync_range__written_back_may_be_null(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 0, 1, 23), 0);
	assert_int_equal(fsync_range(fx->v, 0, 0, FLUSH_TRACKED, NULL), 0);
	assert_true(pattern_durable(fx->fd, fx->v, 0, 1, 23));
}

static void fsync_range__bad_input_changes_nothing(void **state)
{
	struct volfx *fx = *state;
	struct volume_stats before, after;
	assert_int_equal(pattern_write(fx->v, 3 * PAGE, 1, 24), 0);
	volume_stats_get(fx->v, &before);

	const struct {
		uint64_t off, len;
		int mode;
		int ret;
	} cases[] = {
	    {0, 0, 99, -EINVAL},
	    {0, 0, -1, -EINVAL},
	    {VOL_SIZE + 1, 0, FLUSH_TRACKED, -ERANGE},
	    {VOL_SIZE, 1, FLUSH_TRACKED, -ERANGE},
	    {0, VOL_SIZE + 1, FLUSH_TRACKED, -ERANGE},
	    {PAGE, UINT64_MAX, FLUSH_TRACKED, -EOVERFLOW},
	    {UINT64_MAX, 2, FLUSH_TRACKED, -EOVERFLOW},
	    {UINT64_MAX, 0, FLUSH_HAMMER, -ERANGE},
	    {VOL_SIZE, PAGE, FLUSH_HAMMER, -ERANGE},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t written = 777;
		int ret = fsync_range(fx->v, cases[i].off, cases[i].len,
				      (enum flush_mode)cases[i].mode, &written);
		assert_int_equal(ret, cases[i].ret);
		assert_int_equal(written, 777);
	}
	uint64_t written = 777;
	assert_int_equal(fsync_range(NULL, 0, 0, FLUSH_TRACKED, &written), -EINVAL);
	assert_int_equal(written, 777);

	volume_stats_get(fx->v, &after);
	assert_int_equal(after.fsyncs, before.fsyncs);
	assert_int_equal(after.fsync_bytes, before.fsync_bytes);
	assert_int_equal(after.dirty_bytes, LINE);
	assert_true(page_dirty(fx, 3));
	assert_false(dtree_get_mark(fx->v->tree, 3, DTREE_TOWRITE));
	assert_true(volfx_durable_zero(fx, 3 * PAGE, PAGE));
}

/*
 * The durability control itself: with skip_writeback on, the first entry of
 * an fsync is not written back, and pread of the file must show it. The
 * crash tests depend on this switch really losing data.
 */
static void fsync_range__skip_writeback_control_loses_data(void **state)
{
	struct volfx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 0, PAGE, 25), 0);
	assert_int_equal(pattern_write(fx->v, 8 * PAGE, PAGE, 26), 0);
	rdax_faults.skip_writeback = true;
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 2 * PAGE);
	rdax_faults.skip_writeback = false;
	assert_false(pattern_durable(fx->fd, fx->v, 0, PAGE, 25)); /* lost */
	assert_true(pattern_durable(fx->fd, fx->v, 8 * PAGE, PAGE, 26));

	assert_int_equal(pattern_write(fx->v, 16 * PAGE, PAGE, 27), 0);
	assert_int_equal(pattern_write(fx->v, 20 * PAGE, PAGE, 28), 0);
	rdax_faults.skip_writeback = true;
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_HAMMER), VOL_SIZE);
	rdax_faults.skip_writeback = false;
	assert_false(pattern_durable(fx->fd, fx->v, 16 * PAGE, PAGE, 27)); /* lost */
	assert_true(pattern_durable(fx->fd, fx->v, 20 * PAGE, PAGE, 28));
}

/* the hooks run in step order, with the claimed items */
struct hook_log {
	char seq[16];
	unsigned nseq;
	uint64_t claimed_index[4];
	unsigned nclaimed;
};

static void log_step(struct hook_log *log, char c)
{
	if (log->nseq < sizeof(log->seq) - 1)
		log->seq[log->nseq++] = c;
}

static void hook_after_tag(struct volume *v, void *arg)
{
	log_step(arg, 't');
	/* step 2 done: the entries are TOWRITE */
	assert_true(dtree_get_mark(v->tree, 2, DTREE_TOWRITE));
}

static void hook_after_claim(struct volume *v, const struct dtree_item *items, unsigned n,
			     void *arg)
{
	struct hook_log *log = arg;
	log_step(log, 'c');
	for (unsigned i = 0; i < n && log->nclaimed < 4; i++) {
		assert_true(dentry_is_locked(items[i].entry));
		log->claimed_index[log->nclaimed++] = items[i].index;
	}
	/* claimed: DIRTY and TOWRITE already clear */
	assert_false(dtree_get_mark(v->tree, 2, DTREE_DIRTY));
	assert_false(dtree_get_mark(v->tree, 2, DTREE_TOWRITE));
}

static void hook_after_writeback(struct volume *v, const struct dtree_item *items, unsigned n,
				 void *arg)
{
	log_step(arg, 'w');
}

static void hook_before_fence(struct volume *v, void *arg)
{
	log_step(arg, 'f');
}

static void fsync_set_test_hooks__run_in_step_order(void **state)
{
	struct volfx *fx = *state;
	struct hook_log log = {0};
	struct fsync_test_hooks hooks = {
	    .after_tag = hook_after_tag,
	    .after_claim = hook_after_claim,
	    .before_fence = hook_before_fence,
	    .arg = &log,
	    .after_writeback = hook_after_writeback,
	    .batched_only = true, /* two entries would take the one-pass path */
	};
	assert_int_equal(pattern_write(fx->v, 2 * PAGE, 1, 29), 0);
	assert_int_equal(pattern_write(fx->v, 6 * PAGE, 1, 30), 0);
	fsync_set_test_hooks(&hooks);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 2 * LINE);
	fsync_set_test_hooks(NULL);
	assert_string_equal(log.seq, "tcwf");
	assert_int_equal(log.nclaimed, 2);
	assert_int_equal(log.claimed_index[0], 2);
	assert_int_equal(log.claimed_index[1], 6);
	/* cleared hooks are not called */
	assert_int_equal(pattern_write(fx->v, 2 * PAGE, 1, 31), 0);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), LINE);
	assert_string_equal(log.seq, "tcwf");
}

/* the one-pass path: no tagging step, claim, write-back, fence */
static void fsync_set_test_hooks__one_pass_has_no_tag_step(void **state)
{
	struct volfx *fx = *state;
	struct hook_log log = {0};
	struct fsync_test_hooks hooks = {
	    .after_tag = hook_after_tag,
	    .after_claim = hook_after_claim,
	    .before_fence = hook_before_fence,
	    .arg = &log,
	    .after_writeback = hook_after_writeback,
	};
	assert_int_equal(pattern_write(fx->v, 2 * PAGE, 1, 32), 0);
	assert_int_equal(pattern_write(fx->v, 6 * PAGE, 1, 33), 0);
	fsync_set_test_hooks(&hooks);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), 2 * LINE);
	fsync_set_test_hooks(NULL);
	assert_string_equal(log.seq, "cwf");
	assert_int_equal(log.nclaimed, 2);
	assert_int_equal(log.claimed_index[0], 2);
	assert_int_equal(log.claimed_index[1], 6);
	assert_true(pattern_durable(fx->fd, fx->v, 2 * PAGE, 1, 32));
	assert_true(pattern_durable(fx->fd, fx->v, 6 * PAGE, 1, 33));
}

/* steps seen by the hooks, counted */
struct step_count {
	unsigned tags, claims, claimed, writebacks, fences;
};

static void count_tag(struct volume *v, void *arg)
{
	((struct step_count *)arg)->tags++;
}

static void count_claim(struct volume *v, const struct dtree_item *items, unsigned n, void *arg)
{
	struct step_count *c = arg;
	c->claims++;
	c->claimed += n;
}

static void count_writeback(struct volume *v, const struct dtree_item *items, unsigned n, void *arg)
{
	((struct step_count *)arg)->writebacks++;
}

static void count_fence(struct volume *v, void *arg)
{
	((struct step_count *)arg)->fences++;
}

/* fsync_counted -- an fsync of the whole volume with @npages dirty pages, its steps counted */
static void fsync_counted(struct volfx *fx, uint64_t npages, struct step_count *c)
{
	struct fsync_test_hooks hooks = {
	    .after_tag = count_tag,
	    .after_claim = count_claim,
	    .before_fence = count_fence,
	    .arg = c,
	    .after_writeback = count_writeback,
	};
	uint8_t b = 0x77;
	memset(c, 0, sizeof(*c));
	/* every other page: all 4 KiB entries, never a huge one */
	for (uint64_t i = 0; i < npages; i++)
		assert_int_equal(volume_write(fx->v, 2 * i * PAGE + 5, &b, 1), 0);
	fsync_set_test_hooks(&hooks);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), npages * LINE);
	fsync_set_test_hooks(NULL);
	for (uint64_t i = 0; i < npages; i += 7) {
		uint8_t got = 0;
		assert_int_equal(
		    pread(fx->fd, &got, 1, (off_t)(fx->v->ns_offset + 2 * i * PAGE + 5)), 1);
		assert_int_equal(got, b);
	}
	struct volume_stats st;
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 0);
	assert_int_equal(st.dirty_bytes, 0);
}

/* one claim batch of entries: one pass; one more: the batched walk, tagging first */
static void fsync_range__one_pass_up_to_one_claim_batch(void **state)
{
	struct volfx *fx = *state;
	struct step_count c;
	fsync_counted(fx, FSYNC_CLAIM_BATCH, &c);
	assert_int_equal(c.tags, 0);
	assert_int_equal(c.claims, 1);
	assert_int_equal(c.claimed, FSYNC_CLAIM_BATCH);
	assert_int_equal(c.writebacks, 1);
	assert_int_equal(c.fences, 1);

	fsync_counted(fx, FSYNC_CLAIM_BATCH + 1, &c);
	assert_int_equal(c.tags, 1);
	assert_int_equal(c.claims, 2);
	assert_int_equal(c.claimed, FSYNC_CLAIM_BATCH + 1);
	assert_int_equal(c.fences, 1);

	fsync_counted(fx, 1, &c);
	assert_int_equal(c.tags, 0);
	assert_int_equal(c.claims, 1);

	/* a clean volume: nothing claimed, still one fence */
	fsync_counted(fx, 0, &c);
	assert_int_equal(c.tags, 0);
	assert_int_equal(c.claims, 0);
	assert_int_equal(c.fences, 1);
}

/* a partial range with more than one batch outside it still takes one pass */
static void fsync_range__one_pass_counts_only_the_range(void **state)
{
	struct volfx *fx = *state;
	uint8_t b = 0x33;
	for (uint64_t i = 0; i < 3 * FSYNC_CLAIM_BATCH; i++)
		assert_int_equal(volume_write(fx->v, (100 + i) * PAGE, &b, 1), 0);
	struct step_count c = {0};
	struct fsync_test_hooks hooks = {
	    .after_tag = count_tag,
	    .after_claim = count_claim,
	    .before_fence = count_fence,
	    .arg = &c,
	};
	fsync_set_test_hooks(&hooks);
	/* pages [150, 160): ten entries */
	assert_int_equal(do_fsync(fx, 150 * PAGE, 10 * PAGE, FLUSH_TRACKED), 10 * LINE);
	fsync_set_test_hooks(NULL);
	assert_int_equal(c.tags, 0);
	assert_int_equal(c.claims, 1);
	assert_int_equal(c.claimed, 10);
	assert_true(page_dirty(fx, 149));
	assert_false(page_dirty(fx, 150));
	assert_false(page_dirty(fx, 159));
	assert_true(page_dirty(fx, 160));
	/* the rest, more than one batch: batched */
	memset(&c, 0, sizeof(c));
	fsync_set_test_hooks(&hooks);
	assert_int_equal(do_fsync(fx, 0, 0, FLUSH_TRACKED), (3 * FSYNC_CLAIM_BATCH - 10) * LINE);
	fsync_set_test_hooks(NULL);
	assert_int_equal(c.tags, 1);
	assert_int_equal(c.claimed, 3 * FSYNC_CLAIM_BATCH - 10);
}

int main(void)
{
	log_set_level(LOG_LEVEL_WARN);
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
	    T(fsync_range__one_page_written_back),
	    T(fsync_range__only_written_lines_written_back),
	    T(fsync_range__lines_of_several_writes_add_up),
	    T(fsync_range__unaligned_write_spanning_pages),
	    T(fsync_range__huge_entry_written_back_whole),
	    T(fsync_range__partial_range_leaves_rest_dirty),
	    T(fsync_range__start_inside_huge_entry_rounds_down),
	    T(fsync_range__start_inside_huge_entry_rounds_down_batched),
	    T(fsync_range__end_inside_huge_entry_includes_it),
	    T(fsync_range__len_zero_means_to_end),
	    T(fsync_range__second_fsync_returns_zero),
	    T(fsync_range__hammer_returns_volume_size),
	    T(fsync_range__default_mode_follows_volume),
	    T(fsync_range__counters),
	    T(fsync_range__more_entries_than_one_batch),
	    T(fsync_range__written_back_may_be_null),
	    T(fsync_range__bad_input_changes_nothing),
	    T(fsync_range__skip_writeback_control_loses_data),
	    T(fsync_set_test_hooks__run_in_step_order),
	    T(fsync_set_test_hooks__one_pass_has_no_tag_step),
	    T(fsync_range__one_pass_up_to_one_claim_batch),
	    T(fsync_range__one_pass_counts_only_the_range),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
