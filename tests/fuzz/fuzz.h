/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz.h -- what every fuzz harness shares
 *
 * A harness defines LLVMFuzzerTestOneInput() (and, if it needs set-up,
 * LLVMFuzzerInitialize()). Built with clang and -DTESTS_FUZZ=ON it links
 * libFuzzer; otherwise it links fuzz_replay.c, which runs the files of the
 * corpus given on its command line once each (the default suite's
 * regression run of every harness).
 *
 * Harnesses call the daemon's own parsers and validation functions, never
 * copies, and check what the daemon relies on after each call
 * (FUZZ_CHECK): a finding is a sanitizer report or a failed check, both of
 * which abort with the input saved by libFuzzer.
 *
 * Thread safety: harnesses are single-threaded; libFuzzer runs one input at
 * a time.
 */
#ifndef RDAX_FUZZ_H
#define RDAX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* FUZZ_CHECK -- an invariant the daemon relies on; a violation is a finding (abort) */
#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__,      \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/*
 * fuzz_log_init -- the daemon's log: errors only while fuzzing (a record per
 * refused input would cost more than the input), RDAX_FUZZ_LOG=debug (or
 * info, warn) to see why a reproduced input went where it went.
 */
static inline void fuzz_log_init(void)
{
	enum log_level level = LOG_LEVEL_ERROR;
	const char *env = getenv("RDAX_FUZZ_LOG");
	if (env && log_level_parse(env, &level) != 0)
		level = LOG_LEVEL_ERROR;
	log_set_level(level);
}

/* A cursor over the input. */
struct fuzz_in {
	const uint8_t *p;
	size_t left;
};

/* fuzz_take -- the next @n bytes (NULL if fewer are left: the input is over) */
static inline const uint8_t *fuzz_take(struct fuzz_in *in, size_t n)
{
	if (in->left < n)
		return NULL;
	const uint8_t *p = in->p;
	in->p += n;
	in->left -= n;
	return p;
}

/* fuzz_u8 -- the next byte, 0 once the input is over */
static inline uint8_t fuzz_u8(struct fuzz_in *in)
{
	const uint8_t *p = fuzz_take(in, 1);
	return p ? *p : 0;
}

/* fuzz_u32 -- the next 4 bytes little-endian, 0 once the input is over */
static inline uint32_t fuzz_u32(struct fuzz_in *in)
{
	const uint8_t *p = fuzz_take(in, 4);
	return p ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		       (uint32_t)p[3] << 24
		 : 0;
}

/* fuzz_strndup -- @n bytes as a NUL-terminated string (malloc'd; NULL: out of memory) */
static inline char *fuzz_strndup(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

#endif
