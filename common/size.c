/* SPDX-License-Identifier: BSD-3-Clause */
/* size.c -- parse and format byte sizes with binary suffixes (the rule is in size.h) */
#include "size.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* suffix_shift -- log2 of the unit of a suffix letter, or -1 */
static int suffix_shift(char c)
{
	switch (c) {
	case 'k':
	case 'K':
		return 10;
	case 'm':
	case 'M':
		return 20;
	case 'g':
	case 'G':
		return 30;
	case 't':
	case 'T':
		return 40;
	default:
		return -1;
	}
}

int size_parse(const char *s, uint64_t *out)
{
	if (!s || !out || *s < '0' || *s > '9')
		return -EINVAL;
	uint64_t v = 0;
	bool overflow = false;
	const char *p = s;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
			overflow = true; /* keep scanning: garbage after the digits is -EINVAL */
	}
	int shift = 0;
	if (*p) {
		shift = suffix_shift(*p);
		if (shift < 0)
			return -EINVAL;
		p++;
		if (strcmp(p, "") != 0 && strcmp(p, "iB") != 0 && strcmp(p, "ib") != 0)
			return -EINVAL;
	}
	if (overflow || (shift && v > (UINT64_MAX >> shift)))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

const char *size_syntax_hint(const char *s, char *buf, size_t len)
{
	size_t n = s ? strspn(s, "0123456789") : 0;
	if (n > 0 && suffix_shift(s[n]) > 0 && (s[n + 1] == 'B' || s[n + 1] == 'b') &&
	    s[n + 2] == '\0')
		snprintf(buf, len, "write %.*s%c or %.*s%ciB: units are powers of 1024", (int)n, s,
			 s[n], (int)n, s, s[n]);
	else
		snprintf(buf, len, "%s", SIZE_SYNTAX);
	return buf;
}

const char *size_format(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	unsigned u = 0;
	while (u + 1 < sizeof(units) / sizeof(units[0]) && bytes >= (1ULL << (10 * (u + 1))))
		u++;
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", (double)bytes / (double)(1ULL << (10 * u)), units[u]);
	return buf;
}

const char *size_format_compact(uint64_t bytes, char *buf, size_t len)
{
	static const char suffix[] = {'\0', 'K', 'M', 'G', 'T'};
	unsigned u = 0;
	while (bytes && u + 1 < sizeof(suffix) && bytes % (1ULL << (10 * (u + 1))) == 0)
		u++;
	snprintf(buf, len, "%llu%.1s", (unsigned long long)(bytes >> (10 * u)), &suffix[u]);
	return buf;
}
