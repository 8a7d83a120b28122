/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_namespace.c -- namespaces: create/open/close/format, refusal of
 * foreign or damaged metadata, volume create/delete/list, placement
 *
 * Most tests use SIM namespaces: the file is the persistence domain, so
 * "durable" can be checked by re-opening or by reading the file.
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
#include "errors.h"
#include "fsync.h"
#include "namespace.h"
#include "vol_table.h"
#include "volume.h"

#include "nsfile.h"
#include "pattern.h"
#include "tmpdir.h"

#define MiB	(1ULL << 20)
#define GiB	(1ULL << 30)
#define NS_SIZE (64 * MiB)
#define PAGE	RDAX_PAGE_SIZE

struct fx {
	char dir[256];
	char path[512];
	char path2[512];
	struct ns *ns;
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "test-ns");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	tmpdir_file(fx->path2, sizeof(fx->path2), fx->dir, "ns2");
	persist_sim_set_budget(-1);
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	ns_close(&fx->ns);
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

static void reopen(struct fx *fx, enum persist_mode mode)
{
	ns_close(&fx->ns);
	assert_null(fx->ns);
	assert_int_equal(ns_open(fx->path, mode, 1, &fx->ns), 0);
}

static uint64_t vol_offset(struct ns *ns, const char *name)
{
	struct volume_info vi;
	assert_int_equal(ns_volume_info(ns, name, &vi), 0);
	return vi.ns_offset;
}

static void ns_create__open_close_round_trip(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(fx->ns->id, 1);
	assert_int_equal(fx->ns->data_offset, VT_META_SIZE);
	assert_int_equal(fx->ns->data_size, NS_SIZE - VT_META_SIZE);
	assert_int_equal(ns_volume_create(fx->ns, "a", 4 * MiB), 0);
	assert_int_equal(ns_volume_create(fx->ns, "b", 12 * PAGE), 0);
	reopen(fx, PERSIST_SIM);

	struct volume_info vi[4];
	unsigned n;
	assert_int_equal(ns_volume_list(fx->ns, vi, 4, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(vi[0].name, "a");
	assert_int_equal(vi[0].size, 4 * MiB);
	assert_string_equal(vi[1].name, "b");
	assert_int_equal(vi[1].size, 12 * PAGE);
	assert_int_equal(vi[1].ns_id, 1);
	assert_memory_not_equal(vi[0].uuid, vi[1].uuid, sizeof(vi[0].uuid));

	/* the same namespace opens in AUTO mode too */
	reopen(fx, PERSIST_AUTO);
	assert_int_equal(ns_volume_list(fx->ns, NULL, 0, &n), 0);
	assert_int_equal(n, 2);
}

static void ns_create__bad_input(void **state)
{
	struct fx *fx = *state;
	struct ns *ns = NULL;
	assert_int_equal(ns_create(NULL, NS_SIZE, PERSIST_SIM, 1, &ns), -EINVAL);
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, NULL), -EINVAL);
	assert_int_equal(ns_create(fx->path, NS_MIN_SIZE - PAGE, PERSIST_SIM, 1, &ns), -EINVAL);
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, DLOC_NS_MAX + 1, &ns), -EINVAL);
	assert_int_equal(ns_create(fx->path, NS_SIZE, (enum persist_mode)9, 1, &ns), -EINVAL);
	assert_null(ns);
	assert_int_equal(access(fx->path, F_OK), -1); /* nothing left behind */

	/* an existing path is never reformatted */
	assert_int_equal(ns_create(fx->path, NS_MIN_SIZE, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "keep", PAGE), 0);
	ns_close(&fx->ns);
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &ns), -EEXIST);
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &fx->ns), 0);
	struct volume_info vi;
	assert_int_equal(ns_volume_info(fx->ns, "keep", &vi), 0);

	assert_int_equal(ns_open(NULL, PERSIST_SIM, 1, &ns), -EINVAL);
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, NULL), -EINVAL);
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, DLOC_NS_MAX + 1, &ns), -EINVAL);
	assert_int_equal(ns_open(fx->path2, PERSIST_SIM, 1, &ns), -ENOENT);
	assert_null(ns);
	ns_close(NULL);
	struct ns *none = NULL;
	ns_close(&none);
}

static void ns_format__refuses_rdax_unless_forced(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "a", MiB), 0);
	ns_close(&fx->ns);

	assert_int_equal(ns_format(fx->path, false, NULL, 0), -EEXIST);
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &fx->ns), 0);
	struct volume_info vi;
	assert_int_equal(ns_volume_info(fx->ns, "a", &vi), 0); /* untouched */
	ns_close(&fx->ns);

	assert_int_equal(ns_format(fx->path, true, NULL, 0), 0); /* AUTO mode, plain file */
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &fx->ns), 0);
	unsigned n;
	assert_int_equal(ns_volume_list(fx->ns, NULL, 0, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(ns_format(NULL, false, NULL, 0), -EINVAL);
	assert_int_equal(ns_format(fx->path2, false, NULL, 0), -ENOENT);
}

static void ns_format__plain_file_then_open(void **state)
{
	struct fx *fx = *state;
	nsfile_create(fx->path, NS_MIN_SIZE - PAGE);
	assert_int_equal(ns_format(fx->path, false, NULL, 0), -EINVAL); /* too small */
	assert_int_equal(truncate(fx->path, NS_SIZE), 0);
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &fx->ns), -RDAX_E_NOT_RDAX);
	assert_null(fx->ns);
	assert_int_equal(ns_format(fx->path, false, NULL, 0), 0);
	assert_int_equal(ns_open(fx->path, PERSIST_AUTO, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "a", MiB), 0);
}

static void ns_open__garbage_refused_not_rdax(void **state)
{
	struct fx *fx = *state;
	uint8_t *junk = malloc(NS_MIN_SIZE);
	assert_non_null(junk);
	srand(11);
	for (size_t i = 0; i < NS_MIN_SIZE; i++)
		junk[i] = (uint8_t)rand();
	nsfile_create(fx->path, NS_MIN_SIZE);
	nsfile_write(fx->path, 0, junk, NS_MIN_SIZE);

	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &fx->ns), -RDAX_E_NOT_RDAX);
	assert_int_equal(ns_open(fx->path, PERSIST_AUTO, 1, &fx->ns), -RDAX_E_NOT_RDAX);
	assert_null(fx->ns);
	/* never formatted by an open: the garbage is still there */
	uint8_t back[4096];
	nsfile_read(fx->path, 0, back, sizeof(back));
	assert_memory_equal(back, junk, sizeof(back));
	free(junk);
}

static void ns_open__both_copies_corrupt_bad_metadata(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "a", MiB), 0);
	ns_close(&fx->ns);
	uint8_t bad = 0xff;
	/* bytes every copy's crc covers, whatever its count: the header */
	nsfile_write(fx->path, 60, &bad, 1);		     /* copy A: data offset */
	nsfile_write(fx->path, VT_SLOT_SIZE + 200, &bad, 1); /* copy B: reserved header bytes */
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &fx->ns), -RDAX_E_BAD_METADATA);
	assert_null(fx->ns);
	/* and format without force still refuses it: it is rdax, only damaged */
	assert_int_equal(ns_format(fx->path, false, NULL, 0), -EEXIST);
}

static void ns_open__one_copy_corrupt_is_repaired(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "a", MiB), 0);
	uint64_t gen = vol_table_generation(fx->ns->table);
	ns_close(&fx->ns);
	/* damage either copy: both hold the last change ("a"), so nothing is lost */
	for (unsigned copy = 0; copy < 2; copy++) {
		uint8_t bad = 0xee;
		nsfile_write(fx->path, copy * VT_SLOT_SIZE + 40, &bad, 1);

		assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &fx->ns), 0);
		assert_true(vol_table_copies_agree(fx->ns->table)); /* rewritten at open */
		assert_int_equal(vol_table_generation(fx->ns->table), gen);
		struct volume_info vi;
		assert_int_equal(ns_volume_info(fx->ns, "a", &vi), 0);
		reopen(fx, PERSIST_SIM);
		assert_true(vol_table_copies_agree(fx->ns->table));
		assert_int_equal(ns_volume_info(fx->ns, "a", &vi), 0);
		ns_close(&fx->ns);
	}
}

static void ns_volume_create__list_info_delete(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 3, &fx->ns), 0);
	uint64_t total, largest;
	ns_free_bytes(fx->ns, &total, &largest);
	assert_int_equal(total, NS_SIZE - VT_META_SIZE);
	assert_int_equal(largest, total);

	assert_int_equal(ns_volume_create(fx->ns, "one", 2 * MiB), 0);
	assert_int_equal(ns_volume_create(fx->ns, "two", 8 * PAGE), 0);
	assert_int_equal(ns_volume_create(fx->ns, "three", 3 * MiB), 0);
	ns_free_bytes(fx->ns, &total, NULL);
	assert_int_equal(total, NS_SIZE - VT_META_SIZE - 5 * MiB - 8 * PAGE);

	struct volume_info vi[2];
	unsigned n;
	assert_int_equal(ns_volume_list(fx->ns, vi, 2, &n), 0);
	assert_int_equal(n, 3); /* more than fit */
	assert_string_equal(vi[0].name, "one");
	assert_string_equal(vi[1].name, "two");
	assert_int_equal(ns_volume_list(fx->ns, NULL, 1, &n), -EINVAL);
	assert_int_equal(ns_volume_list(fx->ns, vi, 2, NULL), -EINVAL);
	assert_int_equal(ns_volume_list(NULL, vi, 2, &n), -EINVAL);

	struct volume_info one;
	assert_int_equal(ns_volume_info(fx->ns, "three", &one), 0);
	assert_int_equal(one.size, 3 * MiB);
	assert_int_equal(one.ns_id, 3);
	assert_int_equal(one.open_count, 0);
	assert_int_equal(ns_volume_info(fx->ns, "four", &one), -ENOENT);
	assert_int_equal(ns_volume_info(fx->ns, NULL, &one), -EINVAL);
	assert_int_equal(ns_volume_info(fx->ns, "one", NULL), -EINVAL);

	assert_int_equal(ns_volume_delete(fx->ns, "two"), 0);
	assert_int_equal(ns_volume_delete(fx->ns, "two"), -ENOENT);
	assert_int_equal(ns_volume_delete(fx->ns, "../x"), -EINVAL);
	assert_int_equal(ns_volume_delete(NULL, "one"), -EINVAL);
	assert_int_equal(ns_volume_delete(fx->ns, NULL), -EINVAL);
	reopen(fx, PERSIST_SIM);
	assert_int_equal(ns_volume_list(fx->ns, vi, 2, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ns_volume_info(fx->ns, "two", &one), -ENOENT);
}

static void ns_volume_create__bad_names_sizes_duplicates(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "a", PAGE), 0);
	uint64_t gen = vol_table_generation(fx->ns->table);

	char longname[NS_VOLUME_NAME_MAX + 2];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	const char *bad[] = {"", ".a", "-a", "a b", "a/b", "a\n", longname};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ns_volume_create(fx->ns, bad[i], PAGE), -EINVAL);
	assert_int_equal(ns_volume_create(fx->ns, NULL, PAGE), -EINVAL);
	assert_int_equal(ns_volume_create(NULL, "b", PAGE), -EINVAL);
	assert_int_equal(ns_volume_create(fx->ns, "b", 0), -EINVAL);
	assert_int_equal(ns_volume_create(fx->ns, "b", PAGE + 1), -EINVAL);
	assert_int_equal(ns_volume_create(fx->ns, "a", PAGE), -EEXIST);
	longname[NS_VOLUME_NAME_MAX] = '\0'; /* exactly the maximum */
	assert_int_equal(ns_volume_create(fx->ns, longname, PAGE), 0);
	assert_int_equal(vol_table_generation(fx->ns->table), gen + 1);
	assert_int_equal(ns_volume_name_valid("ok.name_1-2"), 0);
	assert_int_equal(ns_volume_name_valid(NULL), -EINVAL);
}

static void ns_volume_create__enospc_names_largest_extent(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(ns_create(fx->path, 8 * MiB, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "big", 6 * MiB + PAGE), -ENOSPC);
	assert_int_equal(ns_volume_create(fx->ns, "a", 2 * MiB), 0);
	assert_int_equal(ns_volume_create(fx->ns, "b", 2 * MiB), 0);
	assert_int_equal(ns_volume_create(fx->ns, "c", 2 * MiB), 0);
	assert_int_equal(ns_volume_create(fx->ns, "d", PAGE), -ENOSPC);
	uint64_t total, largest;
	ns_free_bytes(fx->ns, &total, &largest);
	assert_int_equal(total, 0);
	assert_int_equal(ns_volume_delete(fx->ns, "b"), 0);
	ns_free_bytes(fx->ns, &total, &largest);
	assert_int_equal(largest, 2 * MiB);
	assert_int_equal(ns_volume_create(fx->ns, "e", 4 * MiB), -ENOSPC); /* fragmented */
	assert_int_equal(ns_volume_create(fx->ns, "e", 2 * MiB), 0);
	unsigned n;
	assert_int_equal(ns_volume_list(fx->ns, NULL, 0, &n), 0);
	assert_int_equal(n, 3);
}

static void ns_volume_create__placement_alignment(void **state)
{
	struct fx *fx = *state;
	/* 3 GiB, reserved whole: on ext4 or XFS unwritten extents, quick to allocate */
	assert_int_equal(ns_create(fx->path, 3 * GiB, PERSIST_SIM, 1, &fx->ns), 0);

	assert_int_equal(ns_volume_create(fx->ns, "s1", PAGE), 0);
	assert_int_equal(vol_offset(fx->ns, "s1"), 2 * MiB);
	assert_int_equal(ns_volume_create(fx->ns, "m", 3 * MiB), 0);
	assert_int_equal(vol_offset(fx->ns, "m"), 4 * MiB); /* 2 MiB-aligned, gap before */
	assert_int_equal(ns_volume_create(fx->ns, "g", GiB), 0);
	assert_int_equal(vol_offset(fx->ns, "g"), GiB); /* 1 GiB-aligned */
	/* small volumes fill the gaps (best fit), they do not go after "g" */
	assert_int_equal(ns_volume_create(fx->ns, "s2", 2 * PAGE), 0);
	assert_int_equal(vol_offset(fx->ns, "s2"), 2 * MiB + PAGE);
	assert_int_equal(ns_volume_create(fx->ns, "s3", PAGE), 0);
	assert_int_equal(vol_offset(fx->ns, "s3"), 2 * MiB + 3 * PAGE);
	/* 2 MiB volume: the 1 MiB tail after "m" is too small; next aligned spot */
	assert_int_equal(ns_volume_create(fx->ns, "m2", 2 * MiB), 0);
	assert_int_equal(vol_offset(fx->ns, "m2"), 8 * MiB);
	/* a second 1 GiB volume: [2 GiB, 3 GiB) holds it 1 GiB-aligned */
	assert_int_equal(ns_volume_create(fx->ns, "g2", GiB), 0);
	assert_int_equal(vol_offset(fx->ns, "g2"), 2 * GiB);
	reopen(fx, PERSIST_SIM);
	assert_int_equal(vol_offset(fx->ns, "g2"), 2 * GiB);
	assert_int_equal(vol_offset(fx->ns, "s3"), 2 * MiB + 3 * PAGE);
}

static void ns_volume_create__huge_falls_back_to_2m_alignment(void **state)
{
	struct fx *fx = *state;
	/* data area [2 MiB, 1.5 GiB): no 1 GiB-aligned fit for 1 GiB */
	assert_int_equal(ns_create(fx->path, GiB + GiB / 2, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "s", PAGE), 0);
	assert_int_equal(ns_volume_create(fx->ns, "g", GiB), 0);
	assert_int_equal(vol_offset(fx->ns, "g"), 4 * MiB);
	/* and a 2 MiB volume falls back to 4 KiB alignment when that is all there is */
	assert_int_equal(ns_volume_delete(fx->ns, "g"), 0);
	assert_int_equal(ns_volume_create(fx->ns, "mid", 2 * MiB - PAGE), 0);
	assert_int_equal(vol_offset(fx->ns, "mid"), 2 * MiB + PAGE);
	assert_int_equal(ns_volume_create(fx->ns, "r", PAGE), 0);
	assert_int_equal(vol_offset(fx->ns, "r"), 4 * MiB);
	assert_int_equal(ns_volume_create(fx->ns, "big", GiB + GiB / 2 - 6 * MiB), 0);
	assert_int_equal(vol_offset(fx->ns, "big"), 6 * MiB);
	assert_int_equal(ns_volume_create(fx->ns, "f", 2 * MiB - PAGE), 0);
	assert_int_equal(vol_offset(fx->ns, "f"), 4 * MiB + PAGE);
	assert_int_equal(ns_volume_delete(fx->ns, "mid"), 0);
	assert_int_equal(ns_volume_delete(fx->ns, "r"), 0);
	uint64_t total, largest;
	ns_free_bytes(fx->ns, &total, &largest);
	assert_int_equal(total, 2 * MiB); /* [2 MiB + 4 KiB, 4 MiB + 4 KiB) */
	assert_int_equal(largest, 2 * MiB);
	assert_int_equal(ns_volume_create(fx->ns, "m", 2 * MiB), 0);
	assert_int_equal(vol_offset(fx->ns, "m"), 2 * MiB + PAGE);
}

static void ns_volume_delete__open_volume_busy(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "a", MiB), 0);
	struct volume *v1, *v2;
	assert_int_equal(ns_volume_open(fx->ns, "a", &v1), 0);
	assert_int_equal(ns_volume_open(fx->ns, "a", &v2), 0);
	assert_ptr_equal(v1, v2);
	struct volume_info vi;
	assert_int_equal(ns_volume_info(fx->ns, "a", &vi), 0);
	assert_int_equal(vi.open_count, 2);
	assert_int_equal(ns_volume_delete(fx->ns, "a"), -EBUSY);
	ns_volume_close(fx->ns, &v1);
	assert_null(v1);
	assert_int_equal(ns_volume_delete(fx->ns, "a"), -EBUSY);
	ns_volume_close(fx->ns, &v2);
	assert_int_equal(ns_volume_delete(fx->ns, "a"), 0);

	struct volume *v;
	assert_int_equal(ns_volume_open(fx->ns, "a", &v), -ENOENT);
	assert_int_equal(ns_volume_open(fx->ns, NULL, &v), -EINVAL);
	assert_int_equal(ns_volume_open(NULL, "a", &v), -EINVAL);
	assert_int_equal(ns_volume_open(fx->ns, "a", NULL), -EINVAL);
	ns_volume_close(fx->ns, NULL);
	v = NULL;
	ns_volume_close(fx->ns, &v);
}

static void ns_volume_delete__dirty_data_is_dropped(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "a", MiB), 0);
	struct volume *v;
	assert_int_equal(ns_volume_open(fx->ns, "a", &v), 0);
	uint64_t off = v->ns_offset;
	uint8_t buf[2 * PAGE];
	pattern_fill(buf, sizeof(buf), 1);
	assert_int_equal(volume_write(v, 100, buf, sizeof(buf)), 0);
	struct volume_stats st;
	volume_stats_get(v, &st);
	assert_true(st.dirty_bytes > 0);
	ns_volume_close(fx->ns, &v);
	assert_int_equal(ns_volume_delete(fx->ns, "a"), 0);
	ns_close(&fx->ns); /* writes back every remaining volume: "a" is gone */

	uint8_t back[2 * PAGE];
	nsfile_read(fx->path, off + 100, back, sizeof(back));
	assert_true(all_zero(back, sizeof(back))); /* never written back */
}

static void ns_close__writes_back_dirty_volumes(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "a", MiB), 0);
	struct volume *v;
	assert_int_equal(ns_volume_open(fx->ns, "a", &v), 0);
	uint8_t buf[3000], back[3000];
	pattern_fill(buf, sizeof(buf), 2);
	assert_int_equal(volume_write(v, 5000, buf, sizeof(buf)), 0);
	ns_volume_close(fx->ns, &v);
	reopen(fx, PERSIST_SIM); /* no fsync: ns_close writes it back */
	assert_int_equal(ns_volume_open(fx->ns, "a", &v), 0);
	assert_int_equal(volume_read(v, 5000, back, sizeof(back)), 0);
	assert_memory_equal(back, buf, sizeof(buf));
	ns_volume_close(fx->ns, &v);
}

/* zeros_after_delete_create -- a new volume over a deleted one's data reads zeros, durably */
static void zeros_after_delete_create(struct fx *fx, enum persist_mode mode)
{
	assert_int_equal(ns_create(fx->path, NS_SIZE, mode, 1, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "old", 4 * MiB), 0);
	struct volume *v;
	assert_int_equal(ns_volume_open(fx->ns, "old", &v), 0);
	uint64_t off = v->ns_offset;
	uint8_t *buf = malloc(4 * MiB);
	assert_non_null(buf);
	pattern_fill(buf, 4 * MiB, 3);
	assert_int_equal(volume_write(v, 0, buf, 4 * MiB), 0);
	assert_int_equal(fsync_range(v, 0, 0, FLUSH_DEFAULT, NULL), 0);
	ns_volume_close(fx->ns, &v);
	assert_int_equal(ns_volume_delete(fx->ns, "old"), 0);

	assert_int_equal(ns_volume_create(fx->ns, "new", 4 * MiB), 0);
	assert_int_equal(ns_volume_open(fx->ns, "new", &v), 0);
	assert_int_equal(v->ns_offset, off); /* the same space */
	assert_int_equal(volume_read(v, 0, buf, 4 * MiB), 0);
	assert_true(all_zero(buf, 4 * MiB));
	ns_volume_close(fx->ns, &v);

	reopen(fx, mode);
	assert_int_equal(ns_volume_open(fx->ns, "new", &v), 0);
	assert_int_equal(volume_read(v, 0, buf, 4 * MiB), 0);
	assert_true(all_zero(buf, 4 * MiB));
	ns_volume_close(fx->ns, &v);
	free(buf);
}

static void ns_volume_create__zeros_over_deleted_data_sim(void **state)
{
	zeros_after_delete_create(*state, PERSIST_SIM);
}

static void ns_volume_create__zeros_over_deleted_data_auto(void **state)
{
	zeros_after_delete_create(*state, PERSIST_AUTO);
}

static void ns_open__several_namespaces_distinct_ids(void **state)
{
	struct fx *fx = *state;
	struct ns *ns2;
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 7, &fx->ns), 0);
	assert_int_equal(ns_create(fx->path2, NS_SIZE, PERSIST_AUTO, 9, &ns2), 0);
	assert_memory_not_equal(vol_table_ns_uuid(fx->ns->table), vol_table_ns_uuid(ns2->table),
				VT_UUID_SIZE);
	assert_int_equal(ns_volume_create(fx->ns, "v", 2 * MiB), 0);
	assert_int_equal(ns_volume_create(ns2, "v", 2 * MiB), 0); /* names are per namespace */

	struct volume *a, *b;
	assert_int_equal(ns_volume_open(fx->ns, "v", &a), 0);
	assert_int_equal(ns_volume_open(ns2, "v", &b), 0);
	uint8_t buf[PAGE];
	pattern_fill(buf, sizeof(buf), 4);
	assert_int_equal(volume_write(a, PAGE, buf, sizeof(buf)), 0);
	assert_int_equal(volume_write(b, PAGE, buf, sizeof(buf)), 0);
	uint64_t first, ea, eb;
	assert_int_equal(dtree_lookup(a->tree, 1, &first, &ea), 0);
	assert_int_equal(dtree_lookup(b->tree, 1, &first, &eb), 0);
	assert_int_equal(dloc_ns(dentry_location(ea)), 7);
	assert_int_equal(dloc_ns(dentry_location(eb)), 9);
	assert_int_equal(dloc_page(dentry_location(ea)), a->ns_offset / PAGE + 1);
	ns_volume_close(fx->ns, &a);
	ns_volume_close(ns2, &b);
	ns_close(&ns2);
	assert_null(ns2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
	    T(ns_create__open_close_round_trip),
	    T(ns_create__bad_input),
	    T(ns_format__refuses_rdax_unless_forced),
	    T(ns_format__plain_file_then_open),
	    T(ns_open__garbage_refused_not_rdax),
	    T(ns_open__both_copies_corrupt_bad_metadata),
	    T(ns_open__one_copy_corrupt_is_repaired),
	    T(ns_volume_create__list_info_delete),
	    T(ns_volume_create__bad_names_sizes_duplicates),
	    T(ns_volume_create__enospc_names_largest_extent),
	    T(ns_volume_create__placement_alignment),
	    T(ns_volume_create__huge_falls_back_to_2m_alignment),
	    T(ns_volume_delete__open_volume_busy),
	    T(ns_volume_delete__dirty_data_is_dropped),
	    T(ns_close__writes_back_dirty_volumes),
	    T(ns_volume_create__zeros_over_deleted_data_sim),
	    T(ns_volume_create__zeros_over_deleted_data_auto),
	    T(ns_open__several_namespaces_distinct_ids),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
