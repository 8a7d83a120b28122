/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * checker.h -- every acknowledged fsync must read back, never older
 *
 * The durability checker of the cluster tests (docs/cluster.md, "Tests"). A
 * client writes 4 KiB blocks of one volume from a seed and fsyncs them; the
 * checker keeps, per block, the highest version an fsync acknowledged as
 * durable and the highest version ever written, and logs every acknowledged
 * fsync (one line: the step, the range and the blocks it covered). After any
 * fault and heal, ck_verify() reads every block back: each must be a
 * well-formed block of the checker (or zeros, version 0), of a version at
 * least the acknowledged one (an acknowledged write lost, or replaced by an
 * older one, fails) and at most the highest written (nothing invented).
 *
 * A block's bytes: "RDAXCK01", the block index (u32), a pad (u32), the
 * version (u64), then a splitmix64 stream of (seed, block, version) -- so a
 * torn or mixed block is caught too.
 *
 * An fsync that fails acknowledges nothing: the blocks it covered keep their
 * acknowledged versions (a fault may lose them; that is allowed).
 *
 * Thread safety: one thread per checker.
 */
#ifndef RDAX_TEST_CHECKER_H
#define RDAX_TEST_CHECKER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "librdax.h"

#define CK_BLOCK 4096

struct ck {
	uint64_t seed, rng;
	uint64_t off; /* first byte of the checked range in the volume */
	unsigned nblocks;
	uint64_t *acked;   /* per block: highest version acknowledged durable, 0: none */
	uint64_t *written; /* per block: highest version written */
	uint64_t *pending; /* per block: version written since the last good fsync, 0: none */
	uint64_t version;  /* the last version handed out */
	FILE *log;	   /* the acknowledged fsyncs, NULL: none */
	uint64_t steps, acked_fsyncs, failed_fsyncs, failed_writes;
	char why[512]; /* ck_verify: the first violation */
};

/* ck_init -- a checker of @nblocks blocks from byte @off; @log_path NULL: no log. 0 or -errno */
int ck_init(struct ck *ck, uint64_t seed, uint64_t off, unsigned nblocks, const char *log_path);

/* ck_free -- release it (the log is closed) */
void ck_free(struct ck *ck);

/*
 * ck_step -- write @nwrites blocks picked from the seed (new versions), then
 * fsync the range they span. Returns 0 when the fsync was acknowledged, or
 * the first error (a write's or the fsync's); nothing is counted acknowledged
 * then.
 */
int ck_step(struct ck *ck, struct rdax_volume *vol, unsigned nwrites);

/* A write path for ck_step_with(): write @len bytes at @off; fsync a range. 0 or < 0. */
struct ck_io {
	int (*write)(void *arg, uint64_t off, const void *buf, size_t len);
	int (*fsync)(void *arg, uint64_t off, uint64_t len);
	void *arg;
};

/* ck_step_with -- ck_step through @io instead of a librdax volume (a primary's own path) */
int ck_step_with(struct ck *ck, const struct ck_io *io, unsigned nwrites);

/*
 * ck_verify -- read every block back and check it (top of the file).
 * Returns 0, -EIO with ck->why naming the first bad block, or a read error.
 */
int ck_verify(struct ck *ck, struct rdax_volume *vol);

/* ck_fill -- the bytes of @block at @version (exposed for tests of the checker itself) */
void ck_fill(const struct ck *ck, unsigned block, uint64_t version, uint8_t *buf);

#endif
