/* SPDX-License-Identifier: BSD-3-Clause */
/* checker.c -- every acknowledged fsync must read back, never older */
#include "checker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MAGIC "RDAXCK01"

int ck_init(struct ck *ck, uint64_t seed, uint64_t off, unsigned nblocks, const char *log_path)
{
	memset(ck, 0, sizeof(*ck));
	ck->seed = seed;
	ck->rng = seed;
	ck->off = off;
	ck->nblocks = nblocks;
	ck->acked = calloc(nblocks, sizeof(uint64_t));
	ck->written = calloc(nblocks, sizeof(uint64_t));
	ck->pending = calloc(nblocks, sizeof(uint64_t));
	if (!ck->acked || !ck->written || !ck->pending) {
		ck_free(ck);
		return -ENOMEM;
	}
	if (log_path && !(ck->log = fopen(log_path, "w"))) {
		int ret = -errno;
		ck_free(ck);
		return ret;
	}
	return 0;
}

void ck_free(struct ck *ck)
{
	free(ck->acked);
	free(ck->written);
	free(ck->pending);
	if (ck->log)
		fclose(ck->log);
	memset(ck, 0, sizeof(*ck));
}

void ck_fill(const struct ck *ck, unsigned block, uint64_t version, uint8_t *buf)
{
	uint32_t b = block, pad = 0;
	memcpy(buf, MAGIC, 8);
	memcpy(buf + 8, &b, 4);
	memcpy(buf + 12, &pad, 4);
	memcpy(buf + 16, &version, 8);
	uint64_t st = ck->seed ^ ((uint64_t)block << 40) ^ version * 0x9e3779b97f4a7c15ULL;
	for (size_t i = 24; i < CK_BLOCK; i += 8) {
		uint64_t v = hx_splitmix64(&st);
		memcpy(buf + i, &v, 8);
	}
}

static int vol_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	return rdax_write(arg, off, buf, len, 0);
}

static int vol_fsync(void *arg, uint64_t off, uint64_t len)
{
	return rdax_fsync(arg, off, len, NULL);
}

int ck_step(struct ck *ck, struct rdax_volume *vol, unsigned nwrites)
{
	struct ck_io io = {.write = vol_write, .fsync = vol_fsync, .arg = vol};
	return ck_step_with(ck, &io, nwrites);
}

int ck_step_with(struct ck *ck, const struct ck_io *io, unsigned nwrites)
{
	uint8_t buf[CK_BLOCK];
	unsigned lo = ck->nblocks, hi = 0;
	ck->steps++;
	for (unsigned i = 0; i < nwrites; i++) {
		unsigned b = (unsigned)(hx_splitmix64(&ck->rng) % ck->nblocks);
		uint64_t v = ++ck->version;
		ck_fill(ck, b, v, buf);
		/* counted written before it is sent: a write that fails may still have landed */
		ck->written[b] = v;
		int ret = io->write(io->arg, ck->off + (uint64_t)b * CK_BLOCK, buf, CK_BLOCK);
		if (ret) {
			ck->failed_writes++;
			return ret;
		}
		ck->pending[b] = v;
		lo = b < lo ? b : lo;
		hi = b > hi ? b : hi;
	}
	if (lo > hi)
		return 0;
	uint64_t len = (uint64_t)(hi - lo + 1) * CK_BLOCK;
	int ret = io->fsync(io->arg, ck->off + (uint64_t)lo * CK_BLOCK, len);
	if (ret) {
		ck->failed_fsyncs++;
		return ret;
	}
	/* acknowledged: every write sent before it in that range is durable */
	ck->acked_fsyncs++;
	if (ck->log)
		fprintf(ck->log, "step %" PRIu64 " fsync blocks %u..%u acked:", ck->steps, lo, hi);
	for (unsigned b = lo; b <= hi; b++) {
		if (!ck->pending[b])
			continue;
		if (ck->pending[b] > ck->acked[b])
			ck->acked[b] = ck->pending[b];
		if (ck->log)
			fprintf(ck->log, " %u@%" PRIu64, b, ck->pending[b]);
		ck->pending[b] = 0;
	}
	if (ck->log) {
		fputc('\n', ck->log);
		fflush(ck->log);
	}
	return 0;
}

/* check_block -- what @buf holds for @block; 0 with *version, or -EILSEQ */
static int check_block(const struct ck *ck, unsigned block, const uint8_t *buf, uint64_t *version)
{
	static const uint8_t zero[CK_BLOCK];
	if (memcmp(buf, zero, CK_BLOCK) == 0) {
		*version = 0;
		return 0;
	}
	uint8_t want[CK_BLOCK];
	uint64_t v;
	memcpy(&v, buf + 16, 8);
	ck_fill(ck, block, v, want);
	if (memcmp(buf, want, CK_BLOCK) != 0)
		return -EILSEQ;
	*version = v;
	return 0;
}

int ck_verify(struct ck *ck, struct rdax_volume *vol)
{
	enum { CHUNK = 64 };
	uint8_t *buf = malloc((size_t)CHUNK * CK_BLOCK);
	if (!buf)
		return -ENOMEM;
	int ret = 0;
	ck->why[0] = '\0';
	for (unsigned first = 0; first < ck->nblocks && ret == 0; first += CHUNK) {
		unsigned n = ck->nblocks - first < CHUNK ? ck->nblocks - first : CHUNK;
		ret =
		    rdax_read(vol, ck->off + (uint64_t)first * CK_BLOCK, buf, (size_t)n * CK_BLOCK);
		if (ret) {
			snprintf(ck->why, sizeof(ck->why), "read of blocks %u..%u: %s", first,
				 first + n - 1, rdax_strerror(ret));
			break;
		}
		for (unsigned i = 0; i < n && ret == 0; i++) {
			unsigned b = first + i;
			uint64_t v;
			if (check_block(ck, b, buf + (size_t)i * CK_BLOCK, &v)) {
				snprintf(ck->why, sizeof(ck->why),
					 "block %u is not a block of this checker (torn or foreign "
					 "bytes); acknowledged version %" PRIu64,
					 b, ck->acked[b]);
				ret = -EIO;
			} else if (v < ck->acked[b]) {
				snprintf(ck->why, sizeof(ck->why),
					 "block %u reads version %" PRIu64 ", older than the "
					 "acknowledged %" PRIu64 " (%s)",
					 b, v, ck->acked[b], v ? "replaced by older data" : "lost");
				ret = -EIO;
			} else if (v > ck->written[b]) {
				snprintf(ck->why, sizeof(ck->why),
					 "block %u reads version %" PRIu64
					 ", newer than any written (%" PRIu64 ")",
					 b, v, ck->written[b]);
				ret = -EIO;
			}
		}
	}
	free(buf);
	return ret;
}
