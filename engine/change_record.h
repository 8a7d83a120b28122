/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * change_record.h -- what changed on a volume while a replica was away, durably
 *
 * From the moment a replica leaves the in-sync set, the primary records which
 * regions of the volume change, so that when the replica comes back only those
 * are shipped -- even after the primary restarted (docs/cluster.md, "The change
 * record"). The record is a bitmap per replica slot, one bit per 2 MiB region,
 * kept in persistent memory: 64 bytes per GiB of volume per slot. Its
 * coarseness is undone at resync time by comparing 4 KiB digests inside each
 * marked region, so it only has to be a superset of what may differ.
 *
 * The record also keeps the highest epoch this copy has seen: the fencing
 * state of a replica (invariant 4: never apply a request of an older epoch).
 *
 * Layout, at the start of the bytes given (little-endian):
 *
 *   0     8  magic "RDAXRREC"
 *   8     4  version 1
 *  12     4  region_shift (21)
 *  16     8  volume size
 *  24     8  highest epoch seen
 *  32     8  flags: bit 0 untrusted (a superset is not guaranteed: resync by digests)
 *  40    24  reserved
 *  64  4x128 slots: node name[64], state u32 (0 free, 1 recording), pad u32, epoch
 *            when recording began u64, reserved
 *  4096      CHANGE_RECORD_SLOTS bitmaps, each ceil(regions / 8) bytes rounded up to
 *            4 KiB, slot i's at 4096 + i x that size
 *
 * Rules that make it a superset: change_record_mark() sets and persists (flush
 * + fence) a region's bit in every recording slot *before* the caller lets the
 * write's bytes into the mapping, so a power cut mid-write finds the bit set;
 * a bit already set costs one load and no flush. change_record_clear() is for
 * a region whose resync ship the replica confirmed durable.
 *
 * Thread safety: change_record_mark(), _test(), _count(), _next() from any
 * thread concurrently (bits are set with atomic OR; a flush covers the word);
 * the rest (format, open, slot open/close, clear, epoch, flags) from one
 * thread at a time -- the volume's owner -- not concurrently with each other.
 */
#ifndef RDAX_CHANGE_RECORD_H
#define RDAX_CHANGE_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "persist.h"

#define CHANGE_RECORD_REGION_SHIFT   21
#define CHANGE_RECORD_REGION	     (1ULL << CHANGE_RECORD_REGION_SHIFT)
#define CHANGE_RECORD_SLOTS	     4
#define CHANGE_RECORD_NODE_MAX	     63
#define CHANGE_RECORD_FLAG_UNTRUSTED 1ULL

struct change_record {
	uint8_t *base; /* the record's first byte, inside @p's mapping */
	uint64_t len;
	const struct persist *p;
	uint64_t vol_size;
	uint64_t nregions;
	uint64_t bitmap_bytes; /* one slot's bitmap, rounded up to 4 KiB */
};

/* change_record_size -- bytes a record of a @vol_size volume takes */
uint64_t change_record_size(uint64_t vol_size);

/*
 * change_record_format -- write an empty record (epoch @epoch, no slot) over
 * @len bytes at @base (inside @p's mapping) and persist it; @r describes it.
 * Returns 0, -EINVAL (@len too small for @vol_size, or @vol_size 0).
 */
int change_record_format(struct change_record *r, void *base, uint64_t len, const struct persist *p,
			 uint64_t vol_size, uint64_t epoch);

/*
 * change_record_open -- describe the record at @base. Returns 0, or -EINVAL
 * if it is not one (magic, version, region size) or is for another volume
 * size: the caller treats the replica as having no usable record (full
 * resync by digests) and formats anew.
 */
int change_record_open(struct change_record *r, void *base, uint64_t len, const struct persist *p,
		       uint64_t vol_size);

/* change_record_epoch -- the highest epoch seen */
uint64_t change_record_epoch(const struct change_record *r);

/*
 * change_record_raise_epoch -- persist @epoch as the highest seen. Returns 0
 * (raised, or already that epoch), -ESTALE if @epoch is older than the one
 * kept (nothing changes: the caller refuses the request that carried it).
 */
int change_record_raise_epoch(struct change_record *r, uint64_t epoch);

/* change_record_flags, change_record_set_flags -- the flags word (persisted on set) */
uint64_t change_record_flags(const struct change_record *r);
void change_record_set_flags(struct change_record *r, uint64_t flags);

/*
 * change_record_slot_open -- start recording for @node (at most
 * CHANGE_RECORD_NODE_MAX characters): its existing slot if it has one (its
 * bits are kept: an absence that began earlier goes on), else a free one,
 * zeroed. Persisted before it returns. Returns the slot, or -ENOSPC (every
 * slot is taken), -EINVAL (@node empty or too long).
 */
int change_record_slot_open(struct change_record *r, const char *node, uint64_t epoch);

/* change_record_slot_find -- @node's recording slot, or -ENOENT */
int change_record_slot_find(const struct change_record *r, const char *node);

/* change_record_slot_close -- stop recording: bits zeroed, slot freed, persisted */
void change_record_slot_close(struct change_record *r, int slot);

/*
 * change_record_mark -- set, durably, the bit of every region [off, off + len)
 * touches in every recording slot; returns once they are persisted (flush and
 * fence; nothing is flushed if every bit was set already). Bytes past the
 * volume's end are ignored. Call it before the write's bytes reach the mapping.
 */
void change_record_mark(struct change_record *r, uint64_t off, uint64_t len);

/* change_record_mark_slot -- the same for one slot only (a resync that finds more to ship) */
void change_record_mark_slot(struct change_record *r, int slot, uint64_t off, uint64_t len);

/* change_record_test -- whether region @region's bit is set in @slot */
bool change_record_test(const struct change_record *r, int slot, uint64_t region);

/* change_record_clear -- clear region @region's bit in @slot, durably */
void change_record_clear(struct change_record *r, int slot, uint64_t region);

/* change_record_next -- the first set region >= @from in @slot, or r->nregions if none */
uint64_t change_record_next(const struct change_record *r, int slot, uint64_t from);

/* change_record_count -- how many regions are set in @slot */
uint64_t change_record_count(const struct change_record *r, int slot);

#endif
