/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * checked.h -- overflow-checked arithmetic for offsets and lengths
 *
 * Every offset/length pair that comes from outside goes through
 * range_check() before it is used to compute an address.
 */
#ifndef RDAX_CHECKED_H
#define RDAX_CHECKED_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#define RDAX_PAGE_SHIFT 12
#define RDAX_PAGE_SIZE (1ULL << RDAX_PAGE_SHIFT)
#define RDAX_PMD_SIZE (2ULL << 20)
#define RDAX_PUD_SIZE (1ULL << 30)
#define RDAX_CACHELINE 64ULL

/* range_check -- 0 if [off, off + len) lies inside [0, size), else -ERANGE (-EOVERFLOW on wrap) */
static inline int range_check(uint64_t off, uint64_t len, uint64_t size)
{
	uint64_t end;
	if (__builtin_add_overflow(off, len, &end))
		return -EOVERFLOW;
	if (end > size)
		return -ERANGE;
	return 0;
}

static inline bool is_aligned(uint64_t v, uint64_t align)
{
	return (v & (align - 1)) == 0;
}

static inline uint64_t align_down(uint64_t v, uint64_t align)
{
	return v & ~(align - 1);
}

/* align_up -- callers guarantee v + align - 1 does not wrap */
static inline uint64_t align_up(uint64_t v, uint64_t align)
{
	return (v + align - 1) & ~(align - 1);
}

#endif
