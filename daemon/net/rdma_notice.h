/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_notice.h -- a connection's notice space: which volume a write notice names
 *
 * Every volume opened over RDMA on a connection gets a range of units of the
 * connection's notice space (common/rdma_proto.h: 2^31 units, first fit),
 * each range in its own unit (64-byte lines or 4 KiB pages), and the
 * immediate value of a client's WRITE_WITH_IMM names units of that space.
 * These two functions are the whole of the mapping between the two: where a
 * new volume's range goes, and which range (and which bytes of its volume) a
 * notice covers -- or that it covers none, so a client's notice can never
 * mark bytes of a volume it did not write, or of no volume at all.
 *
 * The ranges live in the caller's table, one entry every @stride bytes, each
 * entry starting with a struct rdma_notice_range, sorted by base and
 * disjoint (rdma_conn.c keeps its windows that way). Pure functions: no
 * locks, no allocation; the notice fuzzer drives them against a model.
 */
#ifndef RDAXD_RDMA_NOTICE_H
#define RDAXD_RDMA_NOTICE_H

#include <stddef.h>
#include <stdint.h>

/*
 * A volume's units in the notice space: [base, base + nunits), each of
 * 1 << shift bytes of the volume (RDMA_IMM_SHIFT_LINE or _PAGE).
 */
struct rdma_notice_range {
	uint64_t base;
	uint64_t nunits;
	uint32_t shift;
};

/* What a notice marks: entry @index of the table, @len bytes of its volume from @off. */
struct rdma_notice_hit {
	unsigned index;
	uint64_t off, len;
};

/*
 * rdma_notice_resolve -- the entry of the @n-entry table that holds every
 * unit of the notice (@imm, @byte_len: rdma_imm_decode() in the entry's
 * unit). Returns 0 with *hit filled -- the bytes of exactly the units
 * written (hit->len 0 for byte_len 0: nothing to mark) -- or -EPROTO: no
 * one entry holds all of its units.
 */
int rdma_notice_resolve(const void *table, size_t stride, unsigned n, uint32_t imm,
			uint32_t byte_len, struct rdma_notice_hit *hit);

/*
 * rdma_notice_place -- the first free range of @nunits units (> 0) in the
 * notice space, whatever the units of the ranges around it: *base, and
 * *pos, where its entry goes in the table to keep it sorted. Returns 0 or
 * -ENOSPC.
 */
int rdma_notice_place(const void *table, size_t stride, unsigned n, uint64_t nunits, uint64_t *base,
		      unsigned *pos);

#endif
