/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pattern.h -- data patterns for the engine's tests: fill a buffer, write
 * one into a volume, ask whether a namespace file -- what a power cut
 * leaves in sim mode -- holds it
 *
 * A pattern differs per seed and per byte and is never zero, so "reads as
 * zeros", "holds pattern 1" and "holds pattern 2" never coincide.
 *
 * Thread safety: every function may be called from any thread; none uses a
 * cmocka assertion (a namespace file that cannot be read aborts).
 */
#ifndef RDAX_TEST_PATTERN_H
#define RDAX_TEST_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct volume;

/* pattern_fill -- bytes that differ per @seed and per byte, never zero */
void pattern_fill(uint8_t *buf, size_t len, unsigned seed);

/* all_zero -- whether @len bytes at @buf are all zero */
bool all_zero(const void *buf, size_t len);

/* pattern_write -- volume_write of pattern_fill(@seed) at [off, off + len) of @v; 0 or its error */
int pattern_write(struct volume *v, uint64_t off, uint64_t len, unsigned seed);

/*
 * pattern_durable -- does the namespace file open on @fd hold
 * pattern_fill(@seed) at [off, off + len) of @v?
 */
bool pattern_durable(int fd, const struct volume *v, uint64_t off, uint64_t len, unsigned seed);

#endif
