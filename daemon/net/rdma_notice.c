/* SPDX-License-Identifier: BSD-3-Clause */
/* rdma_notice.c -- placing volumes in a connection's notice space, resolving write notices */
#include "rdma_notice.h"

#include <errno.h>

#include "checked.h"
#include "rdma_proto.h"

/* range_at -- entry @i of the table */
static const struct rdma_notice_range *range_at(const void *table, size_t stride, unsigned i)
{
	return (const struct rdma_notice_range *)((const char *)table + (size_t)i * stride);
}

int rdma_notice_resolve(const void *table, size_t stride, unsigned n, uint32_t imm,
			uint32_t byte_len, struct rdma_notice_hit *hit)
{
	uint64_t unit = rdma_imm_unit(imm), nunits;
	*hit = (struct rdma_notice_hit){0};
	if (byte_len == 0)
		return 0;
	/* the last entry whose base is <= unit */
	unsigned lo = 0, hi = n;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (range_at(table, stride, mid)->base <= unit)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -EPROTO;
	const struct rdma_notice_range *r = range_at(table, stride, lo - 1);
	/* the entry's unit says how many units the byte count spans */
	rdma_imm_decode(imm, byte_len, r->shift, &unit, &nunits);
	/* unit >= r->base here: the units left in the range, without overflow */
	if (unit - r->base >= r->nunits || nunits > r->nunits - (unit - r->base))
		return -EPROTO;
	hit->index = lo - 1;
	hit->off = (unit - r->base) << r->shift;
	hit->len = nunits << r->shift;
	return 0;
}

int rdma_notice_place(const void *table, size_t stride, unsigned n, uint64_t nunits, uint64_t *base,
		      unsigned *pos)
{
	uint64_t at = 0;
	for (unsigned i = 0; i <= n; i++) {
		uint64_t next = i < n ? range_at(table, stride, i)->base : RDMA_IMM_SPACE_UNITS;
		if (next - at >= nunits) {
			*base = at;
			*pos = i;
			return 0;
		}
		if (i < n)
			at = range_at(table, stride, i)->base + range_at(table, stride, i)->nunits;
	}
	return -ENOSPC;
}
