/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_notice.h -- a connection's notice space: which volume a write notice names
 *
 * Every volume opened over RDMA on a connection gets a range of pages of the
 * connection's notice space (common/rdma_proto.h: 2^31 pages, first fit), and
 * the immediate value of a client's WRITE_WITH_IMM names pages of that space.
 * These two functions are the whole of the mapping between the two: where a
 * new volume's range goes, and which range (and which bytes of its volume) a
 * notice covers -- or that it covers none, so a client's notice can never
 * mark pages of a volume it did not write, or of no volume at all.
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

/* A volume's pages in the notice space: [base, base + npages). */
struct rdma_notice_range {
	uint64_t base;
	uint64_t npages;
};

/* What a notice marks: entry @index of the table, @len bytes of its volume from @off. */
struct rdma_notice_hit {
	unsigned index;
	uint64_t off, len;
};

/*
 * rdma_notice_resolve -- the entry of the @n-entry table that holds every
 * page of the notice (@imm, @byte_len: rdma_imm_decode()). Returns 0 with
 * *hit filled (hit->len 0 for byte_len 0: nothing to mark), or -EPROTO: no
 * one entry holds all of its pages.
 */
int rdma_notice_resolve(const void *table, size_t stride, unsigned n, uint32_t imm,
			uint32_t byte_len, struct rdma_notice_hit *hit);

/*
 * rdma_notice_place -- the first free range of @npages pages (> 0) in the
 * notice space: *base, and *pos, where its entry goes in the table to keep
 * it sorted. Returns 0 or -ENOSPC.
 */
int rdma_notice_place(const void *table, size_t stride, unsigned n, uint64_t npages, uint64_t *base,
		      unsigned *pos);

#endif
