/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_ns_power_cut.c -- the in-process power cut of a sim namespace
 *
 * ns_power_cut() must leave a namespace exactly as a power failure would
 * (namespace.h): what fsync or a discard wrote back is there, what was only
 * stored is gone, the metadata is what was committed, the dirty trees are
 * empty, and the namespace serves on in the same process.
 *
 *  - cut__fsynced_present_unfsynced_gone: pattern A written and fsynced,
 *    pattern B written over part of A and beside it without fsync, a
 *    discarded range; after the cut A and the zeros are there, B is not.
 *    Its control: the same check after a cut with the powercut-keep-mapping
 *    fault (the private copy survives) must report B as surviving; and
 *    with skip-writeback (an fsync loses a page) must report A as lost.
 *  - cut__metadata: volumes created and deleted before the cut are as the
 *    table committed them; a volume created after the cut works.
 *  - cut__refusals: a volume still open (-EBUSY, nothing dropped), a
 *    namespace in auto mode (-EOPNOTSUPP).
 *  - cut__repeated: many cuts in a row, each with its own fsynced and
 *    unfsynced bytes, under ASan: nothing leaks, nothing is kept.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checked.h"
#include "faults.h"
#include "fsync.h"
#include "namespace.h"
#include "volume.h"

#include "tmpdir.h"

#define NS_SIZE	 (16ULL << 20)
#define VOL_SIZE (4ULL << 20)
#define NS_ID	 3

struct fx {
	char dir[256];
	char path[320];
	struct ns *ns;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	tmpdir_make(f->dir, sizeof(f->dir), "nscut");
	tmpdir_file(f->path, sizeof(f->path), f->dir, "ns");
	assert_int_equal(ns_create(f->path, NS_SIZE, PERSIST_SIM, NS_ID, &f->ns), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	ns_close(&f->ns);
	tmpdir_remove(f->dir);
	free(f);
	return 0;
}

/* fill -- bytes of pattern @seed at volume offset @off */
static void fill(uint8_t *buf, size_t len, unsigned seed, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)((off + i) * 131 + seed * 7 + 1);
}

/* Where the first test writes (the ranges do not share a cache line unless said). */
#define A_OFF  4096ULL /* A: 3 pages, fsynced */
#define A_LEN  (3 * 4096ULL)
#define B1_OFF (A_OFF + 4096) /* B over the middle page of A, not fsynced */
#define B1_LEN 4096ULL
#define B2_OFF (64 * 4096ULL) /* B beside A, never fsynced */
#define B2_LEN (2 * 4096ULL + 100)
#define Z_OFF  (128 * 4096ULL) /* written, fsynced, then discarded */
#define Z_LEN  (8 * 4096ULL)

/* before_cut -- the writes of the first test on volume "v" */
static void before_cut(struct ns *ns)
{
	struct volume *v;
	assert_int_equal(ns_volume_create(ns, "v", VOL_SIZE), 0);
	assert_int_equal(ns_volume_open(ns, "v", &v), 0);
	uint8_t *buf = malloc(Z_LEN > A_LEN ? Z_LEN : A_LEN);
	assert_non_null(buf);
	fill(buf, A_LEN, 1, A_OFF);
	assert_int_equal(volume_write(v, A_OFF, buf, A_LEN), 0);
	fill(buf, Z_LEN, 3, Z_OFF);
	assert_int_equal(volume_write(v, Z_OFF, buf, Z_LEN), 0);
	assert_int_equal(fsync_range(v, 0, 0, FLUSH_DEFAULT, NULL), 0);
	assert_int_equal(volume_discard(v, Z_OFF, Z_LEN), 0);
	fill(buf, B1_LEN, 2, B1_OFF);
	assert_int_equal(volume_write(v, B1_OFF, buf, B1_LEN), 0);
	fill(buf, B2_LEN, 2, B2_OFF);
	assert_int_equal(volume_write(v, B2_OFF, buf, B2_LEN), 0);
	free(buf);
	ns_volume_close(ns, &v);
}

/*
 * after_cut -- what the first test finds: 0 when A and the zeros are there
 * and B is gone; else a bit per broken rule (1: A lost, 2: B survived,
 * 4: the discarded range not zero, 8: the tree not empty)
 */
static int after_cut(struct ns *ns)
{
	struct volume *v;
	assert_int_equal(ns_volume_open(ns, "v", &v), 0);
	int broken = 0;
	uint8_t *got = malloc(VOL_SIZE), *want = malloc(A_LEN);
	assert_non_null(got);
	assert_non_null(want);
	assert_int_equal(volume_read(v, 0, got, VOL_SIZE), 0);
	fill(want, A_LEN, 1, A_OFF);
	uint64_t b1 = B1_OFF - A_OFF;
	if (memcmp(got + A_OFF, want, b1) != 0 ||
	    memcmp(got + B1_OFF + B1_LEN, want + b1 + B1_LEN, A_LEN - b1 - B1_LEN) != 0)
		broken |= 1;
	if (memcmp(got + B1_OFF, want + b1, B1_LEN) != 0) {
		/* B's bytes where A's should be: B survived; anything else: A lost */
		fill(want, B1_LEN, 2, B1_OFF);
		broken |= memcmp(got + B1_OFF, want, B1_LEN) == 0 ? 2 : 1;
	}
	for (uint64_t i = 0; i < B2_LEN; i++)
		if (got[B2_OFF + i] != 0) {
			broken |= 2;
			break;
		}
	for (uint64_t i = 0; i < Z_LEN; i++)
		if (got[Z_OFF + i] != 0) {
			broken |= 4;
			break;
		}
	struct volume_stats st;
	volume_stats_get(v, &st);
	if (st.dirty_bytes != 0)
		broken |= 8;
	free(got);
	free(want);
	ns_volume_close(ns, &v);
	return broken;
}

static void cut__fsynced_present_unfsynced_gone(void **state)
{
	struct fx *f = *state;
	before_cut(f->ns);
	assert_int_equal(ns_power_cut(f->ns), 0);
	assert_int_equal(after_cut(f->ns), 0);
	/* and once more, nothing written in between: the same state */
	assert_int_equal(ns_power_cut(f->ns), 0);
	assert_int_equal(after_cut(f->ns), 0);
}

static void cut__control_keep_mapping(void **state)
{
	struct fx *f = *state;
	before_cut(f->ns);
	rdax_faults.powercut_keep_mapping = true;
	assert_int_equal(ns_power_cut(f->ns), 0);
	rdax_faults.powercut_keep_mapping = false;
	/* the check must see what survived: B, and only B */
	assert_int_equal(after_cut(f->ns), 2);
}

static void cut__control_skip_writeback(void **state)
{
	struct fx *f = *state;
	rdax_faults.skip_writeback = true;
	before_cut(f->ns);
	rdax_faults.skip_writeback = false;
	assert_int_equal(ns_power_cut(f->ns), 0);
	assert_true(after_cut(f->ns) & 1);
}

static void cut__metadata(void **state)
{
	struct fx *f = *state;
	assert_int_equal(ns_volume_create(f->ns, "keep", 1ULL << 20), 0);
	assert_int_equal(ns_volume_create(f->ns, "gone", 1ULL << 20), 0);
	assert_int_equal(ns_volume_delete(f->ns, "gone"), 0);
	assert_int_equal(ns_power_cut(f->ns), 0);
	unsigned n = 0;
	assert_int_equal(ns_volume_list(f->ns, NULL, 0, &n), 0);
	assert_int_equal(n, 1);
	struct volume_info vi;
	assert_int_equal(ns_volume_info(f->ns, "keep", &vi), 0);
	assert_int_equal(vi.size, 1ULL << 20);
	assert_int_equal(ns_volume_info(f->ns, "gone", &vi), -ENOENT);
	/* the namespace serves on: a new volume, written, fsynced, survives the next cut */
	assert_int_equal(ns_volume_create(f->ns, "new", 1ULL << 20), 0);
	struct volume *v;
	assert_int_equal(ns_volume_open(f->ns, "new", &v), 0);
	uint8_t buf[300], got[300];
	fill(buf, sizeof(buf), 9, 77);
	assert_int_equal(volume_write(v, 77, buf, sizeof(buf)), 0);
	assert_int_equal(fsync_range(v, 0, 0, FLUSH_DEFAULT, NULL), 0);
	ns_volume_close(f->ns, &v);
	assert_int_equal(ns_power_cut(f->ns), 0);
	assert_int_equal(ns_volume_open(f->ns, "new", &v), 0);
	assert_int_equal(volume_read(v, 77, got, sizeof(got)), 0);
	assert_memory_equal(got, buf, sizeof(buf));
	ns_volume_close(f->ns, &v);
}

static void cut__refusals(void **state)
{
	struct fx *f = *state;
	struct volume *v;
	assert_int_equal(ns_volume_create(f->ns, "open", 1ULL << 20), 0);
	assert_int_equal(ns_volume_open(f->ns, "open", &v), 0);
	uint8_t b = 0x5a;
	assert_int_equal(volume_write(v, 0, &b, 1), 0);
	assert_int_equal(ns_power_cut(f->ns), -EBUSY);
	/* nothing was dropped: the handle and its unwritten byte are still there */
	uint8_t got = 0;
	assert_int_equal(volume_read(v, 0, &got, 1), 0);
	assert_int_equal(got, 0x5a);
	ns_volume_close(f->ns, &v);
	assert_int_equal(ns_power_cut(NULL), -EINVAL);

	/* auto mode: no cut */
	char path[320];
	struct ns *auto_ns;
	tmpdir_file(path, sizeof(path), f->dir, "auto");
	assert_int_equal(ns_create(path, NS_SIZE, PERSIST_AUTO, NS_ID + 1, &auto_ns), 0);
	assert_int_equal(ns_power_cut(auto_ns), -EOPNOTSUPP);
	ns_close(&auto_ns);
}

static void cut__repeated(void **state)
{
	struct fx *f = *state;
	assert_int_equal(ns_volume_create(f->ns, "r", VOL_SIZE), 0);
	for (unsigned round = 1; round <= 20; round++) {
		struct volume *v;
		assert_int_equal(ns_volume_open(f->ns, "r", &v), 0);
		uint64_t durable = (uint64_t)round * 8192, lost = durable + 4096;
		uint8_t buf[4096], got[4096];
		/* last round's lost page reads zeros; its durable page the pattern */
		if (round > 1) {
			assert_int_equal(volume_read(v, lost - 8192, got, sizeof(got)), 0);
			for (size_t i = 0; i < sizeof(got); i++)
				assert_int_equal(got[i], 0);
			fill(buf, sizeof(buf), round - 1, durable - 8192);
			assert_int_equal(volume_read(v, durable - 8192, got, sizeof(got)), 0);
			assert_memory_equal(got, buf, sizeof(buf));
		}
		fill(buf, sizeof(buf), round, durable);
		assert_int_equal(volume_write(v, durable, buf, sizeof(buf)), 0);
		assert_int_equal(fsync_range(v, durable, sizeof(buf), FLUSH_DEFAULT, NULL), 0);
		fill(buf, sizeof(buf), round + 100, lost);
		assert_int_equal(volume_write(v, lost, buf, sizeof(buf)), 0);
		ns_volume_close(f->ns, &v);
		assert_int_equal(ns_power_cut(f->ns), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(cut__fsynced_present_unfsynced_gone, setup, teardown),
	    cmocka_unit_test_setup_teardown(cut__control_keep_mapping, setup, teardown),
	    cmocka_unit_test_setup_teardown(cut__control_skip_writeback, setup, teardown),
	    cmocka_unit_test_setup_teardown(cut__metadata, setup, teardown),
	    cmocka_unit_test_setup_teardown(cut__refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(cut__repeated, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
