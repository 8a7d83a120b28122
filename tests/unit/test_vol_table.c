/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_vol_table.c -- the on-media metadata: format, load, commit, damage
 *
 * Every test works on a SIM mapping of a fresh file, so "the media" is the
 * file: damage is done through the mapping and flushed, a reload re-maps.
 * The byte offsets used to damage a slot are the layout of vol_table.h.
 */
#include <endian.h>
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
#include <zlib.h>

#include <cmocka.h>

#include "checked.h"
#include "errors.h"
#include "faults.h"
#include "persist.h"
#include "vol_table.h"

#include "logcap.h"
#include "tmpdir.h"

#define NS_SIZE (64ULL << 20)
#define MiB	(1ULL << 20)

/* layout of vol_table.h */
#define OFF_VERSION	 6
#define OFF_GENERATION	 16
#define OFF_CRC		 24
#define OFF_COUNT	 28
#define OFF_ENTRY_OFFSET 72

struct fx {
	char dir[256];
	char path[512];
	struct persist p;
	struct vol_table *t;
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "test-vt");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	assert_int_equal(persist_create(fx->path, NS_SIZE, PERSIST_SIM, &fx->p), 0);
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	vol_table_delete(&fx->t);
	persist_unmap(&fx->p);
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

/* reload -- drop the in-memory table and the mapping, map again, load */
static int reload(struct fx *fx)
{
	vol_table_delete(&fx->t);
	persist_unmap(&fx->p);
	assert_int_equal(persist_map(fx->path, PERSIST_SIM, &fx->p), 0);
	return vol_table_load(&fx->p, &fx->t);
}

static uint8_t *slot(struct fx *fx, unsigned s)
{
	return (uint8_t *)fx->p.base + s * VT_SLOT_SIZE;
}

/* poke -- change bytes of the media, durably */
static void poke(struct fx *fx, uint64_t off, const void *src, size_t len)
{
	memcpy((uint8_t *)fx->p.base + off, src, len);
	persist_range(&fx->p, (uint8_t *)fx->p.base + off, len);
}

static void flip_byte(struct fx *fx, uint64_t off)
{
	uint8_t b = ((uint8_t *)fx->p.base)[off] ^ 0x40;
	poke(fx, off, &b, 1);
}

/* fix_crc -- recompute a slot's crc, so sanity checks behind it are reached */
static void fix_crc(struct fx *fx, unsigned s)
{
	uint8_t *b = slot(fx, s);
	uint32_t count;
	memcpy(&count, b + OFF_COUNT, 4);
	count = le32toh(count);
	uint8_t hdr[VT_HEADER_SIZE];
	memcpy(hdr, b, sizeof(hdr));
	memset(hdr + OFF_CRC, 0, 4);
	uLong crc = crc32(0L, hdr, sizeof(hdr));
	crc = crc32(crc, b + VT_HEADER_SIZE, count * VT_ENTRY_SIZE);
	uint32_t le = htole32((uint32_t)crc);
	poke(fx, s * VT_SLOT_SIZE + OFF_CRC, &le, 4);
}

static uint64_t slot_generation(struct fx *fx, unsigned s)
{
	uint64_t g;
	memcpy(&g, slot(fx, s) + OFF_GENERATION, 8);
	return le64toh(g);
}

/* format_and_load -- fresh metadata, loaded into fx->t */
static void format_and_load(struct fx *fx)
{
	assert_int_equal(vol_table_format(&fx->p, false), 0);
	assert_int_equal(reload(fx), 0);
}

static void vol_table_format__fresh_loads_empty(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	assert_int_equal(vol_table_count(fx->t), 0);
	assert_int_equal(vol_table_data_offset(fx->t), VT_META_SIZE);
	assert_int_equal(vol_table_data_size(fx->t), NS_SIZE - VT_META_SIZE);
	assert_true(vol_table_copies_agree(fx->t)); /* both copies written */
	assert_int_equal(vol_table_generation(fx->t), 1);
	assert_int_equal(slot_generation(fx, 0), 1);
	assert_int_equal(slot_generation(fx, 1), 1);
	static const uint8_t zero_uuid[VT_UUID_SIZE];
	assert_memory_not_equal(vol_table_ns_uuid(fx->t), zero_uuid, VT_UUID_SIZE);
}

static void vol_table_format__refuses_rdax_unless_forced(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, NULL), 0);
	uint8_t uuid[VT_UUID_SIZE];
	memcpy(uuid, vol_table_ns_uuid(fx->t), sizeof(uuid));
	uint64_t gen = vol_table_generation(fx->t);

	assert_int_equal(vol_table_format(&fx->p, false), -EEXIST);
	assert_int_equal(reload(fx), 0);
	assert_int_equal(vol_table_count(fx->t), 1); /* untouched */

	/* one copy with the magic is enough to refuse */
	uint8_t zero[64] = {0};
	poke(fx, 0, zero, sizeof(zero));
	assert_int_equal(vol_table_format(&fx->p, false), -EEXIST);

	assert_int_equal(vol_table_format(&fx->p, true), 0);
	assert_int_equal(reload(fx), 0);
	assert_int_equal(vol_table_count(fx->t), 0);
	assert_memory_not_equal(vol_table_ns_uuid(fx->t), uuid, sizeof(uuid));
	assert_true(vol_table_generation(fx->t) > gen); /* beats every old copy */
	assert_true(vol_table_copies_agree(fx->t));
}

static void vol_table_format__too_small(void **state)
{
	struct fx *fx = *state;
	struct persist small = fx->p;
	small.size = 4 * MiB - 4096;
	assert_int_equal(vol_table_format(&small, false), -EINVAL);
	assert_int_equal(vol_table_format(NULL, false), -EINVAL);
	assert_int_equal(reload(fx), -RDAX_E_NOT_RDAX); /* nothing written */
}

/* slots_identical -- both copies hold the same bytes (header and entries in use) */
static bool slots_identical(struct fx *fx)
{
	uint32_t count;
	memcpy(&count, slot(fx, 0) + OFF_COUNT, 4);
	count = le32toh(count);
	if (count > VT_CAPACITY)
		return false;
	return memcmp(slot(fx, 0), slot(fx, 1), VT_HEADER_SIZE + count * VT_ENTRY_SIZE) == 0;
}

static void vol_table_add__commits_both_slots(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	uint64_t gen = vol_table_generation(fx->t);

	struct vt_volume a, b;
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, 2 * MiB, &a), 0);
	assert_int_equal(a.create_generation, gen + 1);
	assert_int_equal(vol_table_add(fx->t, "b.2_x-y", 8 * MiB, 4096, &b), 0);
	assert_memory_not_equal(a.uuid, b.uuid, VT_UUID_SIZE);
	assert_int_equal(vol_table_generation(fx->t), gen + 2);
	/* both copies hold the last committed state, byte for byte */
	assert_int_equal(slot_generation(fx, 0), gen + 2);
	assert_int_equal(slot_generation(fx, 1), gen + 2);
	assert_true(slots_identical(fx));
	assert_true(vol_table_copies_agree(fx->t));

	assert_int_equal(reload(fx), 0);
	assert_int_equal(vol_table_generation(fx->t), gen + 2);
	assert_true(vol_table_copies_agree(fx->t));
	assert_int_equal(vol_table_count(fx->t), 2);
	const struct vt_volume *v =
	    vol_table_get(fx->t, (unsigned)vol_table_find(fx->t, "b.2_x-y"));
	assert_non_null(v);
	assert_int_equal(v->ns_offset, 8 * MiB);
	assert_int_equal(v->size, 4096);
	assert_memory_equal(v->uuid, b.uuid, VT_UUID_SIZE);
	assert_int_equal(v->create_generation, b.create_generation);
	assert_null(vol_table_get(fx->t, 2));
}

static void vol_table_remove__compacts_and_reloads(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, NULL), 0);
	assert_int_equal(vol_table_add(fx->t, "b", VT_META_SIZE + MiB, MiB, NULL), 0);
	assert_int_equal(vol_table_add(fx->t, "c", VT_META_SIZE + 2 * MiB, MiB, NULL), 0);
	assert_int_equal(vol_table_remove(fx->t, "a"), 0);
	assert_int_equal(vol_table_remove(fx->t, "a"), -ENOENT);
	assert_int_equal(vol_table_remove(fx->t, NULL), -EINVAL);
	assert_int_equal(reload(fx), 0);
	assert_int_equal(vol_table_count(fx->t), 2);
	assert_int_equal(vol_table_find(fx->t, "a"), -ENOENT);
	assert_true(vol_table_find(fx->t, "b") >= 0);
	assert_true(vol_table_find(fx->t, "c") >= 0);
	/* the freed range can be used again */
	assert_int_equal(vol_table_add(fx->t, "d", VT_META_SIZE, MiB, NULL), 0);
}

static void vol_table_add__rejects_bad_entries(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	uint64_t end = VT_META_SIZE + vol_table_data_size(fx->t);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, NULL), 0);
	uint64_t gen = vol_table_generation(fx->t);

	assert_int_equal(vol_table_add(NULL, "x", VT_META_SIZE + MiB, MiB, NULL), -EINVAL);
	assert_int_equal(vol_table_add(fx->t, NULL, VT_META_SIZE + MiB, MiB, NULL), -EINVAL);
	assert_int_equal(vol_table_add(fx->t, "", VT_META_SIZE + MiB, MiB, NULL), -EINVAL);
	assert_int_equal(vol_table_add(fx->t, ".x", VT_META_SIZE + MiB, MiB, NULL), -EINVAL);
	assert_int_equal(vol_table_add(fx->t, "x/y", VT_META_SIZE + MiB, MiB, NULL), -EINVAL);
	assert_int_equal(vol_table_add(fx->t, "x", VT_META_SIZE + MiB, 0, NULL), -EINVAL);
	assert_int_equal(vol_table_add(fx->t, "x", VT_META_SIZE + MiB, 100, NULL), -EINVAL);
	assert_int_equal(vol_table_add(fx->t, "x", VT_META_SIZE + 512, 4096, NULL), -EINVAL);
	assert_int_equal(vol_table_add(fx->t, "x", 0, 4096, NULL), -EINVAL); /* metadata */
	assert_int_equal(vol_table_add(fx->t, "x", end - 4096, 8192, NULL), -EINVAL);
	assert_int_equal(vol_table_add(fx->t, "x", align_down(UINT64_MAX, 4096), 8192, NULL),
			 -EINVAL);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE + MiB, MiB, NULL), -EEXIST);
	assert_int_equal(vol_table_add(fx->t, "x", VT_META_SIZE + MiB - 4096, 8192, NULL), -EBUSY);
	assert_int_equal(vol_table_generation(fx->t), gen); /* nothing committed */
	assert_int_equal(vol_table_count(fx->t), 1);
}

static void vol_table_add__table_full(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	char name[32];
	for (unsigned i = 0; i < VT_CAPACITY; i++) {
		snprintf(name, sizeof(name), "v%u", i);
		assert_int_equal(vol_table_add(fx->t, name, VT_META_SIZE + i * 4096ULL, 4096, NULL),
				 0);
	}
	assert_int_equal(
	    vol_table_add(fx->t, "one-more", VT_META_SIZE + VT_CAPACITY * 4096ULL, 4096, NULL),
	    -ENOSPC);
	assert_int_equal(reload(fx), 0);
	assert_int_equal(vol_table_count(fx->t), VT_CAPACITY);
}

static void vol_table_load__one_copy_torn_keeps_the_latest(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, NULL), 0);
	assert_int_equal(vol_table_add(fx->t, "b", VT_META_SIZE + MiB, MiB, NULL), 0);
	uint64_t gen = vol_table_generation(fx->t);

	for (unsigned torn = 0; torn < 2; torn++) {
		/* tear one copy: one byte of its second entry ("b", the last change) */
		flip_byte(fx, torn * VT_SLOT_SIZE + VT_HEADER_SIZE + VT_ENTRY_SIZE + 3);
		assert_int_equal(reload(fx), 0);
		assert_int_equal(vol_table_generation(fx->t), gen); /* nothing undone */
		assert_int_equal(vol_table_count(fx->t), 2);
		assert_true(vol_table_find(fx->t, "b") >= 0);
		assert_false(vol_table_copies_agree(fx->t));

		/* repair rewrites the torn copy, same generation, byte for byte */
		assert_int_equal(vol_table_repair(fx->t), 0);
		assert_true(vol_table_copies_agree(fx->t));
		assert_int_equal(reload(fx), 0);
		assert_true(vol_table_copies_agree(fx->t));
		assert_true(slots_identical(fx));
		assert_int_equal(vol_table_count(fx->t), 2);
		assert_int_equal(vol_table_generation(fx->t), gen);
	}
	assert_int_equal(vol_table_repair(fx->t), 0); /* agreeing copies: nothing to do */
	assert_int_equal(vol_table_repair(NULL), -EINVAL);
}

/*
 * A cut between the two writes of a commit leaves the new state in one copy
 * and the old in the other; the control meta_one_copy leaves exactly that.
 */
static void vol_table_load__cut_between_copies_takes_the_new_state(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, NULL), 0);
	uint64_t gen = vol_table_generation(fx->t);
	rdax_faults.meta_one_copy = true;
	assert_int_equal(vol_table_add(fx->t, "b", VT_META_SIZE + MiB, MiB, NULL), 0);
	rdax_faults.meta_one_copy = false;
	assert_true(slot_generation(fx, 0) != slot_generation(fx, 1));

	assert_int_equal(reload(fx), 0);
	assert_int_equal(vol_table_generation(fx->t), gen + 1);
	assert_int_equal(vol_table_count(fx->t), 2);
	assert_false(vol_table_copies_agree(fx->t));
	assert_int_equal(vol_table_repair(fx->t), 0);
	assert_int_equal(reload(fx), 0);
	assert_true(vol_table_copies_agree(fx->t));
	assert_true(slots_identical(fx));

	/* the stale copy damaged instead: the new state still wins */
	rdax_faults.meta_one_copy = true;
	assert_int_equal(vol_table_add(fx->t, "c", VT_META_SIZE + 2 * MiB, MiB, NULL), 0);
	rdax_faults.meta_one_copy = false;
	unsigned older = slot_generation(fx, 0) == gen + 2 ? 1 : 0;
	flip_byte(fx, older * VT_SLOT_SIZE + 40); /* namespace uuid */
	assert_int_equal(reload(fx), 0);
	assert_int_equal(vol_table_generation(fx->t), gen + 2);
	assert_int_equal(vol_table_count(fx->t), 3);
	assert_false(vol_table_copies_agree(fx->t));
}

static void vol_table_load__same_generation_different_contents_refused(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, NULL), 0);
	/* copy B forged: another size for "a", crc recomputed, generation kept */
	uint64_t size = htole64(2 * MiB);
	poke(fx, VT_SLOT_SIZE + VT_HEADER_SIZE + 64, &size, 8);
	fix_crc(fx, 1);
	struct logcap lc;
	logcap_begin(&lc);
	int ret = reload(fx);
	char *log = logcap_end(&lc);
	if (ret != -RDAX_E_BAD_METADATA || !strstr(log, "both hold generation"))
		fail_msg("load returned %d, log:\n%s", ret, log);
	free(log);
	assert_null(fx->t);
}

/* A generation at 2^64 - 1 refuses the next commit instead of wrapping to 0. */
static void vol_table_add__refused_at_the_last_generation(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	uint64_t g = htole64(UINT64_MAX - 1);
	for (unsigned s = 0; s < 2; s++) {
		poke(fx, s * VT_SLOT_SIZE + OFF_GENERATION, &g, 8);
		fix_crc(fx, s);
	}
	assert_int_equal(reload(fx), 0);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, NULL), 0);
	assert_int_equal(vol_table_generation(fx->t), UINT64_MAX);
	assert_int_equal(vol_table_add(fx->t, "b", VT_META_SIZE + MiB, MiB, NULL), -EOVERFLOW);
	assert_int_equal(vol_table_remove(fx->t, "a"), -EOVERFLOW);
	assert_int_equal(reload(fx), 0); /* loads, with the last committed change */
	assert_int_equal(vol_table_generation(fx->t), UINT64_MAX);
	assert_int_equal(vol_table_count(fx->t), 1);
	assert_true(vol_table_copies_agree(fx->t));
	/* a forced format is the way out: it starts again at 1 */
	assert_int_equal(vol_table_format(&fx->p, true), 0);
	assert_int_equal(reload(fx), 0);
	assert_int_equal(vol_table_generation(fx->t), 1);
	assert_int_equal(vol_table_count(fx->t), 0);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, NULL), 0);
}

/* marked -- the unsafe-shutdown mark of volume @name in the loaded table */
static bool marked(struct fx *fx, const char *name)
{
	int idx = vol_table_find(fx->t, name);
	assert_true(idx >= 0);
	return vol_table_get(fx->t, (unsigned)idx)->unsafe_shutdown;
}

/* ns_marked -- the namespace's unsafe-shutdown mark in the loaded table */
static bool ns_marked(struct fx *fx)
{
	struct vt_shutdown sds;
	vol_table_shutdown_get(fx->t, &sds);
	return (sds.flags & VT_SDS_UNSAFE) != 0;
}

/* mark_all -- a table with volumes a and b, marked with the namespace as media_health does */
static void mark_all(struct fx *fx)
{
	format_and_load(fx);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, NULL), 0);
	assert_int_equal(vol_table_add(fx->t, "b", VT_META_SIZE + MiB, MiB, NULL), 0);
	struct vt_shutdown sds = {.usc = 5, .flags = VT_SDS_KNOWN | VT_SDS_IN_USE | VT_SDS_UNSAFE};
	assert_int_equal(vol_table_shutdown_set(fx->t, &sds, true), 0);
	assert_int_equal(reload(fx), 0);
	assert_true(ns_marked(fx) && marked(fx, "a") && marked(fx, "b"));
}

/*
 * vol_table_unsafe_clear__volume_then_namespace -- a volume's mark, then the
 * namespace's with the rest, each one commit into both copies that a reload
 * finds; the count and the other shutdown flags are kept; clearing what is
 * not marked commits nothing
 */
static void vol_table_unsafe_clear__volume_then_namespace(void **state)
{
	struct fx *fx = *state;
	mark_all(fx);
	uint64_t gen = vol_table_generation(fx->t);

	assert_int_equal(vol_table_unsafe_clear(fx->t, "a"), 0);
	assert_int_equal(vol_table_generation(fx->t), gen + 1);
	assert_true(slots_identical(fx));
	assert_int_equal(reload(fx), 0);
	assert_false(marked(fx, "a"));
	assert_true(marked(fx, "b") && ns_marked(fx));
	assert_int_equal(vol_table_unsafe_clear(fx->t, "a"), 0); /* not marked: no commit */
	assert_int_equal(vol_table_generation(fx->t), gen + 1);
	assert_int_equal(vol_table_unsafe_clear(fx->t, "zz"), -ENOENT);

	assert_int_equal(vol_table_unsafe_clear(fx->t, NULL), 0);
	assert_int_equal(vol_table_generation(fx->t), gen + 2);
	assert_true(slots_identical(fx));
	assert_int_equal(reload(fx), 0);
	assert_false(ns_marked(fx) || marked(fx, "a") || marked(fx, "b"));
	struct vt_shutdown sds;
	vol_table_shutdown_get(fx->t, &sds);
	assert_int_equal(sds.usc, 5);
	assert_int_equal(sds.flags, VT_SDS_KNOWN | VT_SDS_IN_USE);
	assert_int_equal(vol_table_unsafe_clear(fx->t, NULL), 0); /* nothing marked */
	assert_int_equal(vol_table_generation(fx->t), gen + 2);
}

/*
 * vol_table_unsafe_clear__failed_commit_keeps_the_marks -- a clear the table
 * cannot commit (at its last generation) fails, and every mark stays, in
 * memory and on media
 */
static void vol_table_unsafe_clear__failed_commit_keeps_the_marks(void **state)
{
	struct fx *fx = *state;
	mark_all(fx);
	uint64_t g = htole64(UINT64_MAX);
	for (unsigned s = 0; s < 2; s++) {
		poke(fx, s * VT_SLOT_SIZE + OFF_GENERATION, &g, 8);
		fix_crc(fx, s);
	}
	assert_int_equal(reload(fx), 0);
	assert_int_equal(vol_table_unsafe_clear(fx->t, "a"), -EOVERFLOW);
	assert_int_equal(vol_table_unsafe_clear(fx->t, NULL), -EOVERFLOW);
	assert_true(ns_marked(fx) && marked(fx, "a") && marked(fx, "b"));
	assert_int_equal(reload(fx), 0);
	assert_true(ns_marked(fx) && marked(fx, "a") && marked(fx, "b"));
}

/*
 * vol_table_unsafe_clear__control_no_commit -- the control of the ops test
 * (unsafe-clear-no-commit): the clear succeeds in memory, the media keeps
 * every mark
 */
static void vol_table_unsafe_clear__control_no_commit(void **state)
{
	struct fx *fx = *state;
	mark_all(fx);
	rdax_faults.unsafe_clear_no_commit = true;
	assert_int_equal(vol_table_unsafe_clear(fx->t, NULL), 0);
	assert_false(ns_marked(fx) || marked(fx, "a") || marked(fx, "b"));
	assert_int_equal(reload(fx), 0);
	assert_true(ns_marked(fx) && marked(fx, "a") && marked(fx, "b"));
}

static void vol_table_load__both_copies_bad(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	flip_byte(fx, OFF_GENERATION);
	flip_byte(fx, VT_SLOT_SIZE + 100);
	assert_int_equal(reload(fx), -RDAX_E_BAD_METADATA);
	assert_null(fx->t);
}

static void vol_table_load__crc_catches_every_header_byte(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	/* any byte of the header after the magic/version word, in copy A */
	for (uint64_t off = 8; off < VT_HEADER_SIZE; off += 13) {
		flip_byte(fx, off);
		flip_byte(fx, VT_SLOT_SIZE + off);
		assert_int_equal(reload(fx), -RDAX_E_BAD_METADATA);
		flip_byte(fx, off);
		flip_byte(fx, VT_SLOT_SIZE + off);
	}
	assert_int_equal(reload(fx), 0);
}

static void vol_table_load__sane_crc_insane_contents(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, NULL), 0);
	assert_int_equal(vol_table_add(fx->t, "b", VT_META_SIZE + MiB, MiB, NULL), 0);

	/* make "b" overlap "a" in both copies' second entry; crc recomputed */
	for (unsigned s = 0; s < 2; s++) {
		uint32_t count;
		memcpy(&count, slot(fx, s) + OFF_COUNT, 4);
		if (le32toh(count) < 2) { /* the older copy holds "a" only: drop it */
			flip_byte(fx, s * VT_SLOT_SIZE + 1);
			continue;
		}
		uint64_t off = htole64(VT_META_SIZE + MiB / 2);
		poke(fx, s * VT_SLOT_SIZE + VT_HEADER_SIZE + VT_ENTRY_SIZE + OFF_ENTRY_OFFSET, &off,
		     8);
		fix_crc(fx, s);
	}
	assert_int_equal(reload(fx), -RDAX_E_BAD_METADATA);
}

static void vol_table_load__unknown_version(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	uint16_t v2 = htole16(2);
	poke(fx, VT_SLOT_SIZE + OFF_VERSION, &v2, 2); /* copy B only: still refused */
	assert_int_equal(reload(fx), -RDAX_E_VERSION);
	assert_int_equal(vol_table_format(&fx->p, false), -EEXIST);
}

static void vol_table_load__garbage_and_zeros_not_rdax(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(reload(fx), -RDAX_E_NOT_RDAX); /* zeros */
	uint8_t *junk = malloc(VT_META_SIZE);
	assert_non_null(junk);
	srand(7);
	for (size_t i = 0; i < VT_META_SIZE; i++)
		junk[i] = (uint8_t)rand();
	poke(fx, 0, junk, VT_META_SIZE);
	free(junk);
	assert_int_equal(reload(fx), -RDAX_E_NOT_RDAX);
	/* the magic on junk: a version we do not know, then bad metadata */
	poke(fx, 0, VT_MAGIC, VT_MAGIC_LEN);
	assert_int_equal(reload(fx), -RDAX_E_VERSION); /* junk version */
	uint16_t v1 = htole16(VT_VERSION);
	poke(fx, OFF_VERSION, &v1, 2);
	assert_int_equal(reload(fx), -RDAX_E_BAD_METADATA);
}

static void vol_table_load__mapping_smaller_than_recorded(void **state)
{
	struct fx *fx = *state;
	format_and_load(fx);
	vol_table_delete(&fx->t);
	struct persist shrunk = fx->p;
	shrunk.size = NS_SIZE / 2;
	assert_int_equal(vol_table_load(&shrunk, &fx->t), -RDAX_E_BAD_METADATA);
	shrunk.size = MiB;
	assert_int_equal(vol_table_load(&shrunk, &fx->t), -RDAX_E_NOT_RDAX);
	assert_int_equal(vol_table_load(NULL, &fx->t), -EINVAL);
	assert_int_equal(vol_table_load(&fx->p, NULL), -EINVAL);
	assert_null(fx->t);
}

/*
 * Every field of each copy (the layout of vol_table.h), every byte of it,
 * flipped on its own: the namespace must load the last committed state --
 * or be refused with a reason that names the copy -- and never come back
 * with an older one.
 */
struct field {
	const char *name;
	unsigned off, len;
};

static const struct field header_fields[] = {
    {"magic", 0, 6},	    {"version", 6, 2},		{"header size", 8, 4},
    {"entry size", 12, 4},  {"generation", 16, 8},	{"crc", 24, 4},
    {"count", 28, 4},	    {"namespace uuid", 32, 16}, {"namespace size", 48, 8},
    {"data offset", 56, 8}, {"data size", 64, 8},	{"capacity", 72, 4},
    {"reserved", 76, 180},
};

static const struct field entry_fields[] = {
    {"name", 0, 64},	 {"size", 64, 8},  {"namespace offset", 72, 8},	  {"flags", 80, 4},
    {"reserved", 84, 4}, {"uuid", 88, 16}, {"create generation", 104, 8}, {"reserved", 112, 16},
};

struct flip_result {
	unsigned flips;		   /* single-byte damages tried */
	unsigned kept;		   /* loaded with the last committed state */
	unsigned reported_invalid; /* ... and the log called the damaged copy invalid */
	unsigned refused;	   /* refused, with a reason naming the damaged copy */
	unsigned lost;		   /* loaded with an older state: a committed change undone */
};

/* committed -- the two volumes of the committed state, as vol_table_add returned them */
struct committed {
	uint64_t generation;
	struct vt_volume v[2];
	uint8_t image[2][VT_HEADER_SIZE + 2 * VT_ENTRY_SIZE];
};

/* loaded_is_committed -- does fx->t hold exactly @c? */
static bool loaded_is_committed(struct fx *fx, const struct committed *c)
{
	if (vol_table_generation(fx->t) != c->generation || vol_table_count(fx->t) != 2)
		return false;
	for (unsigned i = 0; i < 2; i++) {
		int idx = vol_table_find(fx->t, c->v[i].name);
		if (idx < 0)
			return false;
		const struct vt_volume *v = vol_table_get(fx->t, (unsigned)idx);
		if (v->size != c->v[i].size || v->ns_offset != c->v[i].ns_offset ||
		    memcmp(v->uuid, c->v[i].uuid, VT_UUID_SIZE) != 0 ||
		    v->create_generation != c->v[i].create_generation)
			return false;
	}
	return true;
}

/* flip_one -- damage byte @off of copy @s with @mask, load, judge, restore both copies */
static void flip_one(struct fx *fx, const struct committed *c, unsigned s, const char *field,
		     unsigned off, uint8_t mask, struct flip_result *r)
{
	uint8_t b = slot(fx, s)[off] ^ mask;
	poke(fx, s * VT_SLOT_SIZE + off, &b, 1);
	r->flips++;

	struct logcap lc;
	logcap_begin(&lc);
	int ret = reload(fx);
	char *log = logcap_end(&lc);
	char copy[16];
	snprintf(copy, sizeof(copy), "copy %c", s == 0 ? 'A' : 'B');
	if (ret == 0 && loaded_is_committed(fx, c)) {
		r->kept++;
		/* the damage was seen, named, and repair makes the copies one again */
		if (strstr(log, "invalid"))
			r->reported_invalid++;
		if (vol_table_copies_agree(fx->t) || !strstr(log, copy))
			fail_msg("%s byte %u of %s: loaded, but the damage was not reported:\n%s",
				 field, off, copy, log);
		assert_int_equal(vol_table_repair(fx->t), 0);
		assert_true(slots_identical(fx));
	} else if (ret == 0) {
		r->lost++;
	} else {
		/* a refusal: a known code, a reason naming the damaged copy */
		r->refused++;
		if ((ret != -RDAX_E_VERSION && ret != -RDAX_E_BAD_METADATA) || !strstr(log, copy))
			fail_msg("%s byte %u of %s: refused (%s), but not clearly:\n%s", field, off,
				 copy, rdax_strerror(ret), log);
	}
	free(log);
	for (unsigned k = 0; k < 2; k++)
		poke(fx, k * VT_SLOT_SIZE, c->image[k], sizeof(c->image[k]));
}

/*
 * flip_every_field -- format, commit "a" then "b" (the last change), then
 * flip every byte of every field of each copy, one at a time
 */
static struct flip_result flip_every_field(struct fx *fx)
{
	struct committed c;
	struct flip_result r = {0};
	format_and_load(fx);
	assert_int_equal(vol_table_add(fx->t, "a", VT_META_SIZE, MiB, &c.v[0]), 0);
	assert_int_equal(vol_table_add(fx->t, "b", VT_META_SIZE + MiB, MiB, &c.v[1]), 0);
	c.generation = vol_table_generation(fx->t);
	for (unsigned k = 0; k < 2; k++)
		memcpy(c.image[k], slot(fx, k), sizeof(c.image[k]));
	static const uint8_t masks[] = {0x01, 0xff};

	for (unsigned s = 0; s < 2; s++) {
		for (unsigned f = 0; f < sizeof(header_fields) / sizeof(header_fields[0]); f++) {
			const struct field *hf = &header_fields[f];
			for (unsigned i = 0; i < hf->len; i++)
				for (unsigned m = 0; m < sizeof(masks); m++)
					flip_one(fx, &c, s, hf->name, hf->off + i, masks[m], &r);
		}
		for (unsigned e = 0; e < 2; e++) {
			for (unsigned f = 0; f < sizeof(entry_fields) / sizeof(entry_fields[0]);
			     f++) {
				const struct field *ef = &entry_fields[f];
				unsigned base = VT_HEADER_SIZE + e * VT_ENTRY_SIZE + ef->off;
				for (unsigned i = 0; i < ef->len; i++)
					for (unsigned m = 0; m < sizeof(masks); m++)
						flip_one(fx, &c, s, ef->name, base + i, masks[m],
							 &r);
			}
		}
	}
	print_message("%u single-byte damages: %u loaded the last state, %u refused, %u lost "
		      "a committed change\n",
		      r.flips, r.kept, r.refused, r.lost);
	return r;
}

static void vol_table_load__damage_to_any_field_of_one_copy_loses_nothing(void **state)
{
	struct flip_result r = flip_every_field(*state);
	assert_int_equal(r.flips, 2 * 2 * (VT_HEADER_SIZE + 2 * VT_ENTRY_SIZE));
	assert_int_equal(r.lost, 0);
	assert_int_equal(r.kept + r.refused, r.flips);
	assert_int_equal(r.reported_invalid, r.kept);
	/* only an unknown format version is refused: it may be a newer rdax's namespace */
	assert_int_equal(r.refused, 2 * 2 * 2);
}

/* control: commits into one copy only (the alternating order) undo changes */
static void vol_table_load__damage_control_meta_one_copy(void **state)
{
	rdax_faults.meta_one_copy = true;
	struct flip_result r = flip_every_field(*state);
	assert_true(r.lost > 0);
}

static void vt_name_valid__rules(void **state)
{
	char max[VT_NAME_SIZE], over[VT_NAME_SIZE + 1];
	memset(max, 'a', sizeof(max) - 1);
	max[sizeof(max) - 1] = '\0';
	memset(over, 'a', sizeof(over) - 1);
	over[sizeof(over) - 1] = '\0';
	assert_int_equal(vt_name_valid("a"), 0);
	assert_int_equal(vt_name_valid("Vol_1.2-x"), 0);
	assert_int_equal(vt_name_valid("_x"), 0);
	assert_int_equal(vt_name_valid(max), 0);
	assert_int_equal(vt_name_valid(over), -EINVAL);
	assert_int_equal(vt_name_valid(""), -EINVAL);
	assert_int_equal(vt_name_valid(NULL), -EINVAL);
	assert_int_equal(vt_name_valid(".hidden"), -EINVAL);
	assert_int_equal(vt_name_valid("-opt"), -EINVAL);
	assert_int_equal(vt_name_valid("a b"), -EINVAL);
	assert_int_equal(vt_name_valid("a/b"), -EINVAL);
	assert_int_equal(vt_name_valid("caf\xc3\xa9"), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
	    T(vol_table_format__fresh_loads_empty),
	    T(vol_table_format__refuses_rdax_unless_forced),
	    T(vol_table_format__too_small),
	    T(vol_table_add__commits_both_slots),
	    T(vol_table_remove__compacts_and_reloads),
	    T(vol_table_add__rejects_bad_entries),
	    T(vol_table_add__table_full),
	    T(vol_table_load__one_copy_torn_keeps_the_latest),
	    T(vol_table_load__cut_between_copies_takes_the_new_state),
	    T(vol_table_load__same_generation_different_contents_refused),
	    T(vol_table_add__refused_at_the_last_generation),
	    T(vol_table_unsafe_clear__volume_then_namespace),
	    T(vol_table_unsafe_clear__failed_commit_keeps_the_marks),
	    T(vol_table_unsafe_clear__control_no_commit),
	    T(vol_table_load__both_copies_bad),
	    T(vol_table_load__crc_catches_every_header_byte),
	    T(vol_table_load__sane_crc_insane_contents),
	    T(vol_table_load__unknown_version),
	    T(vol_table_load__garbage_and_zeros_not_rdax),
	    T(vol_table_load__mapping_smaller_than_recorded),
	    T(vol_table_load__damage_to_any_field_of_one_copy_loses_nothing),
	    T(vol_table_load__damage_control_meta_one_copy),
	    T(vt_name_valid__rules),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
