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

/* The volume layout: NREGIONS regions of REGION bytes, region r owned by loader r % loaders. */
#define PC_REGION (2ULL << 20)
#define PC_NREGIONS 8
#define PC_VOLUME_SIZE (PC_REGION * PC_NREGIONS)

#endif
