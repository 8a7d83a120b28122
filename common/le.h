/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * le.h -- little-endian fields of on-disk and on-wire layouts
 *
 * le_put16/32/64 store a value at any (unaligned) address in little-endian
 * order; le_get16/32/64 load one. memcpy + htole/letoh: one instruction
 * each on x86, and no alignment or aliasing assumptions.
 * Thread safety: pure functions.
 */
#ifndef RDAX_LE_H
#define RDAX_LE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline void le_put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void le_put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void le_put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static inline uint16_t le_get16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t le_get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t le_get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

#endif
