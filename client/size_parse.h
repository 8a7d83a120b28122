/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * size_parse.h -- sizes and offsets on the command line, and back to text
 *
 * "4096", "4K", "64M", "1G", "2T": decimal digits and an optional binary
 * suffix (K = 1024, M = 1024^2, G = 1024^3, T = 1024^4; upper or lower
 * case, optionally followed by "iB" or "B": "4KiB", "4kb"). Nothing else:
 * no sign, no spaces, no fractions, no hex.
 */
#ifndef RDAX_CLIENT_SIZE_PARSE_H
#define RDAX_CLIENT_SIZE_PARSE_H

#include <stddef.h>
#include <stdint.h>

/*
 * size_parse -- parse @s into *out (written only on success).
 * Returns 0, -EINVAL (empty, sign, garbage, unknown suffix), -ERANGE (does
 * not fit in 64 bits).
 */
int size_parse(const char *s, uint64_t *out);

/*
 * size_format -- @bytes for people: "64 MiB" when it is an exact multiple
 * of the unit, else with one decimal "1.5 MiB"; below 1 KiB "512 B".
 * Returns @buf (at least 24 bytes is always enough).
 */
const char *size_format(uint64_t bytes, char *buf, size_t len);

/*
 * size_format_compact -- @bytes exactly, in the largest unit that divides it,
 * in the form size_parse reads back: "64M", "1536K", "1G", "4097", "0".
 * Returns @buf (24 bytes are always enough).
 */
const char *size_format_compact(uint64_t bytes, char *buf, size_t len);

#endif
