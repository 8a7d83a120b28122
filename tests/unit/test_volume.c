/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_volume.c -- a volume's data path: read/write round trips, zeros,
 * discard, counters, and the argument checks of every public function
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
#include "fsync.h"
#include "namespace.h"
#include "volume.h"

#include "nsfile.h"
#include "pattern.h"
#include "tmpdir.h"

#define MiB	 (1ULL << 20)
#define NS_SIZE	 (32 * MiB)
#define VOL_SIZE (4 * MiB)
#define PAGE	 RDAX_PAGE_SIZE

struct fx {
	char dir[256];
	char path[512];
	struct ns *ns;
	struct volume *v;
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "test-vol");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	persist_sim_set_budget(-1);
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 2, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "vol", VOL_SIZE), 0);
	assert_int_equal(ns_volume_open(fx->ns, "vol", &fx->v), 0);
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	ns_volume_close(fx->ns, &fx->v);
	ns_close(&fx->ns);
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

/* reopen -- close without fsync of our own (ns_close writes back), open again */
static void reopen(struct fx *fx)
{
	ns_volume_close(fx->ns, &fx->v);
	ns_close(&fx->ns);
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 2, &fx->ns), 0);
	assert_int_equal(ns_volume_open(fx->ns, "vol", &fx->v), 0);
}

/* file_read -- what the namespace file (the persistence domain) holds for the volume */
static void file_read(struct fx *fx, uint64_t off, void *buf, size_t len)
{
	nsfile_read(fx->path, fx->v->ns_offset + off, buf, len);
}

static void volume_read__never_written_reads_zero(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = malloc(VOL_SIZE);
	assert_non_null(buf);
	memset(buf, 0xa5, VOL_SIZE);
	assert_int_equal(volume_read(fx->v, 0, buf, VOL_SIZE), 0);
	assert_true(all_zero(buf, VOL_SIZE));
	free(buf);
}

static void volume_write__round_trips_aligned_and_unaligned(void **state)
{
	struct fx *fx = *state;
	static const struct {
		uint64_t off, len;
	} cases[] = {
	    {0, PAGE},			/* one page */
	    {3 * PAGE + 1, 1},		/* one byte */
	    {5 * PAGE - 7, 20},		/* across a page boundary */
	    {64 * PAGE + 33, 3 * PAGE}, /* unaligned, several pages */
	    {2 * MiB, 2 * MiB},		/* a whole aligned 2 MiB block (huge entry) */
	    {VOL_SIZE - 1, 1},		/* the last byte */
	};
	uint8_t *buf = malloc(2 * MiB), *back = malloc(2 * MiB);
	assert_non_null(buf);
	assert_non_null(back);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pattern_fill(buf, cases[i].len, (unsigned)i + 1);
		assert_int_equal(volume_write(fx->v, cases[i].off, buf, cases[i].len), 0);
		assert_int_equal(volume_read(fx->v, cases[i].off, back, cases[i].len), 0);
		assert_memory_equal(back, buf, cases[i].len);
	}
	/* the bytes next to a small write are untouched */
	assert_int_equal(volume_read(fx->v, 3 * PAGE, back, 2), 0);
	assert_int_equal(back[0], 0);

	/* and all of it is durable after fsync: the file holds it */
	assert_int_equal(fsync_range(fx->v, 0, 0, FLUSH_DEFAULT, NULL), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pattern_fill(buf, cases[i].len, (unsigned)i + 1);
		file_read(fx, cases[i].off, back, cases[i].len);
		if (i != 4) /* the last case rewrote the last byte of case 4 */
			assert_memory_equal(back, buf, cases[i].len);
	}
	free(buf);
	free(back);
}

static void volume_write__marks_dirty_and_fsync_clears(void **state)
{
	struct fx *fx = *state;
	struct volume_stats st;
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.size, VOL_SIZE);
	assert_int_equal(st.dirty_bytes, 0);

	uint8_t buf[100];
	pattern_fill(buf, sizeof(buf), 1);
	assert_int_equal(volume_write(fx->v, PAGE + 10, buf, sizeof(buf)), 0);
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.dirty_bytes, 2 * DTREE_LINE_SIZE); /* bytes [10, 110): two lines */
	assert_int_equal(st.entries[DTREE_SIZE_4K], 1);
	uint64_t first, e;
	assert_int_equal(dtree_lookup(fx->v->tree, 1, &first, &e), 0);
	assert_int_equal(dloc_ns(dentry_location(e)), 2);
	assert_int_equal(dloc_page(dentry_location(e)), fx->v->ns_offset / PAGE + 1);

	/* written directly into the mapping, then recorded */
	memcpy(fx->v->data + 7 * PAGE, buf, sizeof(buf));
	assert_int_equal(volume_mark_written(fx->v, 7 * PAGE, sizeof(buf)), 0);
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.dirty_bytes, 4 * DTREE_LINE_SIZE); /* and bytes [0, 100) of page 7 */

	assert_int_equal(fsync_range(fx->v, 0, 0, FLUSH_DEFAULT, NULL), 0);
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.dirty_bytes, 0);
	assert_int_equal(st.fsyncs, 1);
	assert_int_equal(st.fsync_bytes, 4 * DTREE_LINE_SIZE); /* the written lines */
	uint8_t back[100];
	file_read(fx, 7 * PAGE, back, sizeof(back));
	assert_memory_equal(back, buf, sizeof(buf));
}

static void volume_discard__zeros_durably_and_drops_entries(void **state)
{
	struct fx *fx = *state;
	uint8_t *buf = malloc(8 * PAGE), *back = malloc(8 * PAGE);
	assert_non_null(buf);
	assert_non_null(back);
	pattern_fill(buf, 8 * PAGE, 3);
	assert_int_equal(volume_write(fx->v, 0, buf, 8 * PAGE), 0);
	assert_int_equal(fsync_range(fx->v, 0, 0, FLUSH_DEFAULT, NULL), 0);
	assert_int_equal(volume_write(fx->v, 0, buf, 8 * PAGE), 0); /* dirty again */

	/* from the middle of page 1 to the middle of page 5 */
	uint64_t lo = PAGE + 100, hi = 5 * PAGE + 100;
	assert_int_equal(volume_discard(fx->v, lo, hi - lo), 0);

	uint8_t *expect = malloc(8 * PAGE);
	assert_non_null(expect);
	pattern_fill(expect, 8 * PAGE, 3);
	memset(expect + lo, 0, hi - lo);
	assert_int_equal(volume_read(fx->v, 0, back, 8 * PAGE), 0);
	assert_memory_equal(back, expect, 8 * PAGE);

	/* whole pages 2-4 lost their entries; the partial edge pages keep theirs */
	uint64_t first, e;
	for (uint64_t pg = 2; pg < 5; pg++)
		assert_int_equal(dtree_lookup(fx->v->tree, pg, &first, &e), -ENOENT);
	assert_int_equal(dtree_lookup(fx->v->tree, 1, &first, &e), 0);
	assert_int_equal(dtree_lookup(fx->v->tree, 5, &first, &e), 0);

	/* durable without an fsync: the file already reads zeros there */
	file_read(fx, lo, back, hi - lo);
	assert_true(all_zero(back, hi - lo));
	reopen(fx);
	assert_int_equal(volume_read(fx->v, 0, back, 8 * PAGE), 0);
	assert_memory_equal(back, expect, 8 * PAGE);
	free(buf);
	free(back);
	free(expect);
}

static void volume_discard__whole_volume(void **state)
{
	struct fx *fx = *state;
	uint8_t buf[PAGE];
	pattern_fill(buf, sizeof(buf), 4);
	assert_int_equal(volume_write(fx->v, VOL_SIZE - PAGE, buf, sizeof(buf)), 0);
	assert_int_equal(volume_discard(fx->v, 0, VOL_SIZE), 0);
	struct volume_stats st;
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.dirty_bytes, 0);
	assert_int_equal(volume_read(fx->v, VOL_SIZE - PAGE, buf, sizeof(buf)), 0);
	assert_true(all_zero(buf, sizeof(buf)));
}

static void volume_set_flush_mode__hammer_writes_everything(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(fx->v->flush_mode, FLUSH_TRACKED);
	assert_int_equal(volume_set_flush_mode(fx->v, FLUSH_HAMMER), 0);
	assert_int_equal(fx->v->flush_mode, FLUSH_HAMMER);
	uint64_t written = 0;
	assert_int_equal(fsync_range(fx->v, 0, 0, FLUSH_DEFAULT, &written), 0);
	assert_int_equal(written, VOL_SIZE);
	assert_int_equal(volume_set_flush_mode(fx->v, FLUSH_TRACKED), 0);
	assert_int_equal(fsync_range(fx->v, 0, 0, FLUSH_DEFAULT, &written), 0);
	assert_int_equal(written, 0);

	assert_int_equal(volume_set_flush_mode(fx->v, FLUSH_DEFAULT), -EINVAL);
	assert_int_equal(volume_set_flush_mode(fx->v, (enum flush_mode)42), -EINVAL);
	assert_int_equal(volume_set_flush_mode(NULL, FLUSH_TRACKED), -EINVAL);
	assert_int_equal(fx->v->flush_mode, FLUSH_TRACKED);
}

/* check_unchanged -- contents and dirty state as the bad-input test left them */
static void check_unchanged(struct fx *fx, const uint8_t *expect)
{
	uint8_t back[2 * PAGE];
	assert_int_equal(volume_read(fx->v, 0, back, sizeof(back)), 0);
	assert_memory_equal(back, expect, sizeof(back));
	uint8_t tail[PAGE];
	assert_int_equal(volume_read(fx->v, VOL_SIZE - PAGE, tail, sizeof(tail)), 0);
	assert_true(all_zero(tail, sizeof(tail)));
	struct volume_stats st;
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.dirty_bytes, 2 * PAGE);
}

static void volume__bad_input_changes_nothing(void **state)
{
	struct fx *fx = *state;
	struct volume *v = fx->v;
	uint8_t expect[2 * PAGE], buf[2 * PAGE];
	pattern_fill(expect, sizeof(expect), 5);
	assert_int_equal(volume_write(v, 0, expect, sizeof(expect)), 0);
	pattern_fill(buf, sizeof(buf), 6);

	/* write */
	assert_int_equal(volume_write(NULL, 0, buf, 1), -EINVAL);
	assert_int_equal(volume_write(v, 0, NULL, 1), -EINVAL);
	assert_int_equal(volume_write(v, 0, buf, 0), -EINVAL);
	assert_int_equal(volume_write(v, VOL_SIZE, buf, 1), -ERANGE);
	assert_int_equal(volume_write(v, VOL_SIZE - 1, buf, 2), -ERANGE);
	assert_int_equal(volume_write(v, UINT64_MAX, buf, 2), -EOVERFLOW);
	assert_int_equal(volume_write(v, 1, buf, UINT64_MAX), -EOVERFLOW);
	/* read */
	assert_int_equal(volume_read(NULL, 0, buf, 1), -EINVAL);
	assert_int_equal(volume_read(v, 0, NULL, 1), -EINVAL);
	assert_int_equal(volume_read(v, 0, buf, 0), -EINVAL);
	assert_int_equal(volume_read(v, VOL_SIZE, buf, 1), -ERANGE);
	assert_int_equal(volume_read(v, UINT64_MAX - 1, buf, 4), -EOVERFLOW);
	/* mark_written */
	assert_int_equal(volume_mark_written(NULL, 0, 1), -EINVAL);
	assert_int_equal(volume_mark_written(v, 0, 0), -EINVAL);
	assert_int_equal(volume_mark_written(v, VOL_SIZE - PAGE, 2 * PAGE), -ERANGE);
	assert_int_equal(volume_mark_written(v, UINT64_MAX, 1), -EOVERFLOW);
	assert_int_equal(volume_mark_written(v, 2, UINT64_MAX - 1), -EOVERFLOW);
	/* discard */
	assert_int_equal(volume_discard(NULL, 0, PAGE), -EINVAL);
	assert_int_equal(volume_discard(v, 0, 0), -EINVAL);
	assert_int_equal(volume_discard(v, 0, VOL_SIZE + 1), -ERANGE);
	assert_int_equal(volume_discard(v, PAGE, UINT64_MAX), -EOVERFLOW);
	/* stats, flush mode, delete */
	struct volume_stats st;
	volume_stats_get(NULL, &st);
	volume_stats_get(v, NULL);
	assert_int_equal(volume_set_flush_mode(v, FLUSH_DEFAULT), -EINVAL);
	volume_delete(NULL);
	struct volume *none = NULL;
	volume_delete(&none);

	check_unchanged(fx, expect);
}

static void volume_new__bad_input(void **state)
{
	struct fx *fx = *state;
	struct volume *v = (struct volume *)0x1; /* must stay untouched */
	uint64_t off = fx->ns->data_offset;
	assert_int_equal(volume_new(NULL, "x", off, PAGE, &v), -EINVAL);
	assert_int_equal(volume_new(fx->ns, NULL, off, PAGE, &v), -EINVAL);
	assert_int_equal(volume_new(fx->ns, ".x", off, PAGE, &v), -EINVAL);
	assert_int_equal(volume_new(fx->ns, "x", off, PAGE, NULL), -EINVAL);
	assert_int_equal(volume_new(fx->ns, "x", off, 0, &v), -EINVAL);
	assert_int_equal(volume_new(fx->ns, "x", off, PAGE + 1, &v), -EINVAL);
	assert_int_equal(volume_new(fx->ns, "x", off + 1, PAGE, &v), -EINVAL);
	assert_int_equal(volume_new(fx->ns, "x", NS_SIZE, PAGE, &v), -ERANGE);
	assert_int_equal(volume_new(fx->ns, "x", align_down(UINT64_MAX, PAGE), 2 * PAGE, &v),
			 -EOVERFLOW);
	assert_ptr_equal(v, (struct volume *)0x1);

	/* a good one, freed again: the in-memory object only, no table entry */
	assert_int_equal(volume_new(fx->ns, "x", off, PAGE, &v), 0);
	assert_int_equal(v->size, PAGE);
	assert_ptr_equal(v->data, (uint8_t *)fx->ns->persist.base + off);
	assert_int_equal(dtree_npages(v->tree), 1);
	volume_delete(&v);
	assert_null(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
	    T(volume_read__never_written_reads_zero),
	    T(volume_write__round_trips_aligned_and_unaligned),
	    T(volume_write__marks_dirty_and_fsync_clears),
	    T(volume_discard__zeros_durably_and_drops_entries),
	    T(volume_discard__whole_volume),
	    T(volume_set_flush_mode__hammer_writes_everything),
	    T(volume__bad_input_changes_nothing),
	    T(volume_new__bad_input),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
