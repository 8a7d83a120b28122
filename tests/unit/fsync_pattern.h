/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fsync_pattern.h -- data patterns for the fsync engine's tests
 * (test_fsync.c, test_fsync_inline.c, test_fsync_races.c): write one into a
 * volume, then ask whether the namespace file -- what a power cut leaves in
 * sim mode -- holds it.
 */
#ifndef RDAX_TEST_FSYNC_PATTERN_H
#define RDAX_TEST_FSYNC_PATTERN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "volume.h"

/* pattern_fill -- bytes that differ per @seed and per byte, never zero */
static inline void pattern_fill(uint8_t *buf, size_t len, unsigned seed)
{
	uint32_t x = seed * 2654435761U + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (uint8_t)(x | 1);
	}
}

/* pattern_write -- volume_write of pattern_fill(@seed) at [off, off + len) of @v; 0 or its error */
static inline int pattern_write(struct volume *v, uint64_t off, uint64_t len, unsigned seed)
{
	uint8_t *buf = malloc(len);
	if (!buf)
		abort();
	pattern_fill(buf, len, seed);
	int ret = volume_write(v, off, buf, len);
	free(buf);
	return ret;
}

/*
 * pattern_durable -- does the namespace file @fd hold pattern_fill(@seed)
 * at [off, off + len) of @v? No cmocka assertion (it also runs in helper
 * threads): a file that cannot be read aborts the test rather than answer.
 */
static inline bool pattern_durable(int fd, const struct volume *v, uint64_t off, uint64_t len,
				   unsigned seed)
{
	uint8_t *want = malloc(len), *got = malloc(len);
	if (!want || !got || pread(fd, got, len, (off_t)(v->ns_offset + off)) != (ssize_t)len) {
		fprintf(stderr, "pattern_durable: cannot read %llu bytes of the namespace file\n",
			(unsigned long long)len);
		abort();
	}
	pattern_fill(want, len, seed);
	bool same = memcmp(want, got, len) == 0;
	free(want);
	free(got);
	return same;
}

#endif
