/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * powercut_common.h -- what the power-cut load clients and their verifier share
 *
 * Each load client (powercut_load) owns a set of regions of one volume and
 * is their only writer. It appends a record to its log file BEFORE it sends
 * each write or discard (the intent: the operation may land, wholly or in
 * part, from then on) and AFTER each acknowledgement that makes something
 * durable (an fsync, or a durable write / discard). The log is written with
 * write(2) by a process that is not killed, so it is complete.
 *
 * The content of a write is not logged: it is recomputed from the master
 * seed, the loader index, the write's generation (unique per loader) and the
 * absolute byte offset (pc_content), so the verifier can tell, per byte,
 * which write it came from.
 */
#ifndef RDAX_TEST_POWERCUT_COMMON_H
#define RDAX_TEST_POWERCUT_COMMON_H

#include <stddef.h>
#include <stdint.h>

enum pc_kind {
	PC_WRITE = 1,	/* intent: write gen at [off, off + len) */
	PC_DISCARD,	/* intent: discard gen at [off, off + len) (content: zeros) */
	PC_FSYNC,	/* ack: every write/discard of gen <= gen, intersected with
			 * [off, off + len) (len 0: the whole volume), is durable */
	PC_DURABLE,	/* ack: the one operation gen (durable write or discard) is durable */
	/* the metadata loader (--meta): volume "m<gen>" of len bytes */
	PC_CREATE,	/* intent: create */
	PC_CREATED,	/* ack: created */
	PC_DELETE,	/* intent: delete */
	PC_DELETED,	/* ack: deleted */
	PC_ACKED,	/* ack: write gen completed (durable only after a clean stop) */
};

struct pc_rec {
	uint32_t kind;
	uint32_t gen;
	uint64_t off;
	uint64_t len;
	uint64_t reserved;
};

/* pc_key -- the pattern key of loader @loader's write @gen */
uint64_t pc_key(uint64_t seed, unsigned loader, uint32_t gen);

/* pc_content -- the bytes write (seed, loader, gen) put at [off, off + len) */
void pc_content(void *buf, size_t len, uint64_t seed, unsigned loader, uint32_t gen, uint64_t off);

/*
 * The volume layout: PC_NBIG regions of 2 MiB (2 MiB-aligned: whole-region
 * writes make huge entries), then PC_NSMALL regions of PC_SMALL bytes packed
 * back to back, so small regions of different loaders share 4 KiB pages and
 * cache lines (an fsync of one connection writes back pages another
 * connection is writing). Region r is owned by loader r % loaders; each
 * region has exactly one writer.
 */
#define PC_REGION (2ULL << 20) /* the largest region */
#define PC_NBIG 8
#define PC_SMALL 1500ULL
#define PC_NSMALL 16
#define PC_NREGIONS (PC_NBIG + PC_NSMALL)
#define PC_VOLUME_SIZE (PC_REGION * PC_NBIG + 24576) /* room for the small regions */

/* pc_region -- where region @r starts and how long it is */
static inline void pc_region(unsigned r, uint64_t *start, uint64_t *len)
{
	if (r < PC_NBIG) {
		*start = r * PC_REGION;
		*len = PC_REGION;
	} else {
		*start = PC_NBIG * PC_REGION + (r - PC_NBIG) * PC_SMALL;
		*len = PC_SMALL;
	}
}

/* pc_region_of -- the region holding byte @off, PC_NREGIONS for the unused tail */
static inline unsigned pc_region_of(uint64_t off)
{
	if (off < PC_NBIG * PC_REGION)
		return (unsigned)(off / PC_REGION);
	uint64_t i = (off - PC_NBIG * PC_REGION) / PC_SMALL;
	return i < PC_NSMALL ? (unsigned)(PC_NBIG + i) : PC_NREGIONS;
}

#endif
