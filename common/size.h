/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * size.h -- byte sizes on command lines and in config files, and back to text
 *
 * The one rule, for rdax and rdaxd alike (docs/cli.md, rdaxd --help):
 *   SIZE = DIGITS [UNIT]    UNIT = K | M | G | T, upper or lower case, optionally
 *                                  followed by "iB" (or "ib")
 * Units are powers of 1024: "4096", "4K", "4KiB", "64m", "1G", "2TiB".
 * Refused: a sign, spaces, fractions, hex, exponents, and "KB"/"MB"/"GB"/"TB":
 * dd(1) and many tools read those as powers of 1000, so they are ambiguous and
 * an error says which spelling to use (size_syntax_hint()).
 *
 * Printing: size_format() for people, always one decimal from 1 KiB up
 * ("64.0 MiB", "1.5 MiB", "512 B"), so columns of sizes line up and a rounded
 * value never passes for an exact one; size_format_compact() exact and in the
 * form size_parse() reads back ("64M", "1536K", "4097").
 *
 * Thread safety: every function is pure (no state); @buf is the caller's.
 */
#ifndef RDAX_COMMON_SIZE_H
#define RDAX_COMMON_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* What a size looks like, for error messages: "... is not a size (SIZE_SYNTAX)". */
#define SIZE_SYNTAX "a number of bytes with an optional K, M, G or T suffix, powers of 1024"

/* Room for any size_format()/size_format_compact() result. */
#define SIZE_FORMAT_MAX 24

/*
 * size_parse -- parse @s into *out (written only on success).
 * Returns 0, -EINVAL (NULL, empty, sign, garbage, unknown or ambiguous
 * suffix), -ERANGE (does not fit in 64 bits; garbage wins over overflow).
 */
int size_parse(const char *s, uint64_t *out);

/*
 * size_syntax_hint -- why @s (refused by size_parse with -EINVAL) is not a
 * size, as a phrase: "use 4M or 4MiB: rdax units are powers of 1024" for
 * "4MB", else SIZE_SYNTAX. Returns @buf.
 */
const char *size_syntax_hint(const char *s, char *buf, size_t len);

/*
 * size_format -- @bytes for people: the largest binary unit it reaches, one
 * decimal ("64.0 MiB", "1.5 MiB", "16.0 EiB"); below 1 KiB "512 B".
 * Returns @buf (SIZE_FORMAT_MAX bytes are always enough).
 */
const char *size_format(uint64_t bytes, char *buf, size_t len);

/*
 * size_format_compact -- @bytes exactly, in the largest unit that divides it,
 * in the form size_parse reads back: "64M", "1536K", "1G", "4097", "0".
 * Returns @buf (SIZE_FORMAT_MAX bytes are always enough).
 */
const char *size_format_compact(uint64_t bytes, char *buf, size_t len);

#endif
