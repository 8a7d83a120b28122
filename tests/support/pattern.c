/* SPDX-License-Identifier: BSD-3-Clause */
/* pattern.c -- data patterns for the engine's tests */
#include "pattern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsfile.h"
#include "volume.h"

void pattern_fill(uint8_t *buf, size_t len, unsigned seed)
{
	/* xorshift32: no short period a page or a cache line could line up with */
	uint32_t x = seed * 2654435761U + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (uint8_t)(x | 1);
	}
}

bool all_zero(const void *buf, size_t len)
{
	const uint8_t *b = buf;
	for (size_t i = 0; i < len; i++)
		if (b[i])
			return false;
	return true;
}

/* pattern_alloc -- malloc that cannot fail quietly (no cmocka in helper threads) */
static uint8_t *pattern_alloc(size_t len)
{
	uint8_t *b = malloc(len ? len : 1);
	if (!b) {
		fprintf(stderr, "pattern: out of memory (%zu bytes)\n", len);
		abort();
	}
	return b;
}

int pattern_write(struct volume *v, uint64_t off, uint64_t len, unsigned seed)
{
	uint8_t *buf = pattern_alloc(len);
	pattern_fill(buf, len, seed);
	int ret = volume_write(v, off, buf, len);
	free(buf);
	return ret;
}

bool pattern_durable(int fd, const struct volume *v, uint64_t off, uint64_t len, unsigned seed)
{
	uint8_t *want = pattern_alloc(len), *got = pattern_alloc(len);
	nsfile_pread(fd, v->ns_offset + off, got, len);
	pattern_fill(want, len, seed);
	bool same = memcmp(want, got, len) == 0;
	free(want);
	free(got);
	return same;
}
