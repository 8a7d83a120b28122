/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vol_table.h -- a namespace's on-media metadata: superblock + volume table
 *
 * The first 2 MiB of a namespace hold two copies ("slots") of the metadata;
 * the data area that volumes are carved from follows.
 *
 *  namespace offset
 *  0        slot A: header (256 B) | entries[0 .. count) (128 B each) | unused
 *  1 MiB    slot B: same layout
 *  2 MiB    data area (data_offset), data_size bytes, to the end of the namespace
 *
 * Header (all integers little-endian):
 *
 *  off  size  field
 *    0     8  magic: "RDAXNS" + u16 format version (1); one aligned 8-byte
 *             word, so magic and version are written together
 *    8     4  header size (256)
 *   12     4  entry size (128)
 *   16     8  generation: +1 per committed update
 *   24     4  crc32 (zlib) over the header with this field zero, then
 *             entries[0 .. count)
 *   28     4  volume count (entries in use, kept contiguous from 0)
 *   32    16  namespace uuid (random, set by format)
 *   48     8  namespace size in bytes
 *   56     8  data offset (2 MiB)
 *   64     8  data size
 *   72     4  table capacity (1024 entries)
 *   76     8  shutdown state: the unsafe-shutdown count last recorded (below)
 *   84     4  shutdown state flags (VT_SDS_*)
 *   88   168  reserved, zero
 *
 * Entry:
 *
 *  off  size  field
 *    0    64  name, NUL-terminated, [A-Za-z0-9._-], not starting with '.' or '-'
 *   64     8  size in bytes (multiple of 4 KiB, > 0)
 *   72     8  namespace offset of the data (4 KiB aligned, inside the data area)
 *   80     4  flags (VT_ENTRY_IN_USE, VT_ENTRY_UNSAFE_SHUTDOWN)
 *   84     4  reserved, zero
 *   88    16  volume uuid (random)
 *  104     8  generation that created the volume
 *  112    16  reserved, zero
 *
 * Only the first `count` entries are part of a slot's state and covered by
 * its crc; a commit writes header + those entries and nothing else, so an
 * update costs a few cache lines, not the whole 128 KiB table.
 *
 * Loading: both slots are checked (magic, version, sizes, crc, then sanity:
 * every entry inside the data area, 4 KiB-aligned, non-overlapping, names
 * valid and unique). Both normally hold the same, latest committed state:
 * the same generation, the same bytes. When they disagree, the valid slot
 * with the higher generation wins; the other is stale (a commit was cut
 * between its two writes) or invalid (torn or damaged), and
 * vol_table_copies_agree() says so until vol_table_repair() has written the
 * winning state over it. Two valid slots with one generation and different
 * contents are refused (-RDAX_E_BAD_METADATA): nothing says which is right.
 *
 * Committing an update writes the new state, generation + 1, into BOTH
 * slots, the second only after the first is durable: first the slot other
 * than the one the state was loaded from, then that one. Each slot write
 * clears the slot's first cache line (its magic disappears), writes and
 * fences header lines 1-3 and the entries, then writes and fences line 0
 * (magic, version, generation, crc). The commit returns after both.
 *
 * A power cut at any instant leaves a complete slot with the old state or
 * the new one: during the first write the other slot holds the old state,
 * during the second the first holds the new. Damage to one copy later costs
 * nothing, since the other holds the same state. So neither a cut nor one
 * damaged copy undoes a committed change; a load can only fall back past
 * the update that was being committed when the power failed, which no one
 * had been told about. Clearing line 0 first means a slot being written
 * never shows the magic unless it is complete: format of a fresh device,
 * where the other slot holds nothing, stays "not rdax" until a slot is whole.
 *
 * Shutdown state (media_health.h): where the device reports an unsafe-
 * shutdown count (USC), the header records the count last seen and whether
 * a daemon had the namespace open (VT_SDS_IN_USE, set at open, cleared at a
 * clean close). Finding the count changed while IN_USE was set means the
 * platform lost power without flushing its write buffers while the
 * namespace was being written: VT_SDS_UNSAFE and every volume's
 * VT_ENTRY_UNSAFE_SHUTDOWN are then set, and stay set until an operator who
 * checked or restored the data clears them (vol_table_unsafe_clear: one
 * volume's mark, or the namespace's with every volume's), through the same
 * two-copy commit as any change. These fields were
 * reserved (zero) in the first builds of format version 1, whose loaders
 * ignore them (the crc covers them): a namespace written by either build
 * loads in the other; an older build's next commit zeroes them, which
 * loses only the record (the next start records the count again).
 *
 * Generations count commits from 1. A commit at 2^64 - 1 is refused
 * (-EOVERFLOW) instead of wrapping to 0, which no load accepts; a forced
 * format of such a namespace starts again at 1.
 *
 * Controls (faults.h): meta_one_copy commits into one slot only, the other
 * alternately (damage to the newest copy then undoes a change);
 * meta_copies_together writes both slots line by line together (a cut can
 * then tear both); unsafe_clear_no_commit clears marks in memory only (a
 * power cut brings them back).
 *
 * Thread safety: none; the namespace lock serialises every call.
 */
#ifndef RDAX_VOL_TABLE_H
#define RDAX_VOL_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "persist.h"

#define VT_MAGIC       "RDAXNS" /* 6 bytes, followed by the u16 version */
#define VT_MAGIC_LEN   6
#define VT_VERSION     1
#define VT_META_SIZE   (2ULL << 20) /* the metadata area */
#define VT_SLOT_SIZE   (1ULL << 20)
#define VT_HEADER_SIZE 256
#define VT_ENTRY_SIZE  128
#define VT_CAPACITY    1024 /* entries per table: 256 + 1024 * 128 B fits a slot */
#define VT_NAME_SIZE   64   /* name field, NUL included */
#define VT_UUID_SIZE   16

#define VT_ENTRY_IN_USE		 0x1U
#define VT_ENTRY_UNSAFE_SHUTDOWN 0x2U /* in use when an unsafe shutdown was found */

/* Shutdown state flags (header, offset 84). */
#define VT_SDS_KNOWN  0x1U /* usc holds a count the device reported */
#define VT_SDS_IN_USE 0x2U /* a daemon has the namespace open (cleared at a clean close) */
#define VT_SDS_UNSAFE 0x4U /* an unsafe shutdown hit the namespace while in use */

/* The shutdown state of the header. */
struct vt_shutdown {
	uint64_t usc;
	uint32_t flags; /* VT_SDS_* */
};

struct vol_table;

/* One volume as the table records it (host byte order). */
struct vt_volume {
	char name[VT_NAME_SIZE];
	uint64_t size;
	uint64_t ns_offset;
	uint8_t uuid[VT_UUID_SIZE];
	uint64_t create_generation;
	bool unsafe_shutdown; /* VT_ENTRY_UNSAFE_SHUTDOWN */
};

/* vt_name_valid -- the on-media name rule (namespace.h); 0 or -EINVAL */
int vt_name_valid(const char *name);

/*
 * vol_table_format -- write fresh metadata (no volumes, new namespace uuid)
 * to both slots of @p. Refuses with -EEXIST when either slot carries the rdax
 * magic, unless @force. The first slot written is the one not holding the
 * newest valid state, with a generation above every valid one found (1 when
 * that one is at the maximum), so a power cut during a forced format leaves
 * the old state or the new one.
 * Returns 0, -EINVAL (mapping smaller than NS_MIN_SIZE), -EEXIST, -errno.
 */
int vol_table_format(const struct persist *p, bool force);

/*
 * vol_table_load -- check both slots of @p and load the newest valid one.
 * Returns 0, -RDAX_E_NOT_RDAX (neither slot has the magic), -RDAX_E_VERSION
 * (a slot has the magic and a version this build does not know),
 * -RDAX_E_BAD_METADATA (slots with the magic, none valid), -ENOMEM. What
 * failed in each slot is logged.
 */
int vol_table_load(const struct persist *p, struct vol_table **out);

/* vol_table_delete -- free the in-memory copy; accepts NULL; sets *tp = NULL */
void vol_table_delete(struct vol_table **tp);

/* Accessors of the loaded state. */
uint64_t vol_table_generation(const struct vol_table *t);
uint64_t vol_table_data_offset(const struct vol_table *t);
uint64_t vol_table_data_size(const struct vol_table *t);
const uint8_t *vol_table_ns_uuid(const struct vol_table *t);
unsigned vol_table_count(const struct vol_table *t);
/* vol_table_get -- entry @i (< count); its position changes on remove */
const struct vt_volume *vol_table_get(const struct vol_table *t, unsigned i);
/* vol_table_find -- index of the entry named @name, or -ENOENT */
int vol_table_find(const struct vol_table *t, const char *name);

/*
 * vol_table_copies_agree -- whether both slots hold the current state (as
 * loaded, or since the last commit or repair). A namespace whose copies
 * disagree should be repaired with vol_table_repair() before it is used.
 */
bool vol_table_copies_agree(const struct vol_table *t);

/*
 * vol_table_add -- commit a new volume (uuid and create generation filled
 * in); *out (may be NULL) gets the entry as committed. Checks everything the
 * loader checks first, so what is written always loads.
 * Returns 0, -EINVAL (name, size, alignment, outside the data area), -EEXIST
 * (name), -EBUSY (overlaps a volume), -ENOSPC (table full: VT_CAPACITY
 * entries), -EOVERFLOW (the generation is at its maximum), -ENOMEM.
 */
int vol_table_add(struct vol_table *t, const char *name, uint64_t ns_offset, uint64_t size,
		  struct vt_volume *out);

/*
 * vol_table_remove -- commit the table without @name; 0, -ENOENT, -EINVAL,
 * -EOVERFLOW, -ENOMEM
 */
int vol_table_remove(struct vol_table *t, const char *name);

/* vol_table_shutdown_get -- the shutdown state of the loaded or last committed table */
void vol_table_shutdown_get(const struct vol_table *t, struct vt_shutdown *out);

/*
 * vol_table_shutdown_set -- commit @sds as the shutdown state; with
 * @mark_volumes every volume of the table is marked
 * VT_ENTRY_UNSAFE_SHUTDOWN in the same commit. Returns 0, -EINVAL,
 * -EOVERFLOW, -ENOMEM, -EIO (vt_commit).
 */
int vol_table_shutdown_set(struct vol_table *t, const struct vt_shutdown *sds, bool mark_volumes);

/*
 * vol_table_unsafe_clear -- commit the table with unsafe-shutdown marks
 * cleared: volume @name's (VT_ENTRY_UNSAFE_SHUTDOWN), or with @name NULL the
 * namespace's (VT_SDS_UNSAFE) and every volume's. The count and the other
 * flags of the shutdown state are kept. Nothing of that marked: nothing is
 * committed (the generation stays). A failed commit changes nothing: the
 * marks are still set, in memory and on media.
 * Returns 0, -ENOENT (no volume @name), -EINVAL, -EOVERFLOW, -ENOMEM, -EIO.
 */
int vol_table_unsafe_clear(struct vol_table *t, const char *name);

/*
 * vol_table_repair -- write the current state, unchanged (same generation),
 * into the slot that does not hold it; a no-op when the copies agree. The
 * current slot is not touched, so a cut during the repair loses nothing.
 * Returns 0, -EINVAL, -ENOMEM.
 */
int vol_table_repair(struct vol_table *t);

#endif
