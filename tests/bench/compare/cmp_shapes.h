/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmp_shapes.h -- the I/O shapes of the comparison, as run by the
 * native (librdax) and the NBD (libnbd) helpers alike
 *
 *   write    QD1 4 KiB random write, not durable: the cost of one request
 *            (a diagnostic beside the two durable shapes)
 *   wflush   QD1 4 KiB random write, then a flush of the whole device, both
 *            answered before the next pair starts (fio --fsync=1)
 *   durable  QD1 4 KiB random write that is durable when answered: NBD FUA,
 *            rdax WRITE with fsync = true (one request)
 *   qd32     4 KiB random writes, 32 in flight
 *   seq1m    1 MiB sequential writes, 8 in flight
 *   read     QD1 4 KiB random read
 *   rqd32    4 KiB random reads, 32 in flight
 *   rseq1m   1 MiB sequential reads, 8 in flight
 *
 * Offsets: 4 KiB aligned, uniformly random over the device for the 4 KiB
 * shapes (splitmix64, fixed seed); sequential and wrapping for seq1m and
 * rseq1m. Reads of the prefilled device: every byte was written once.
 * Each shape runs for a tenth of its time as a warm-up, then for the
 * measured time; or, with ops set, for a tenth of ops and then exactly ops
 * operations (for instruction and system-call counts per operation). A driver implements struct
 * cmp_target and cmp_run_shapes() does the timing, so both helpers time exactly the same loop.
 */
#ifndef RDAX_CMP_SHAPES_H
#define RDAX_CMP_SHAPES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CMP_SMALL      4096u
#define CMP_ALL_SHAPES "write,wflush,durable,qd32,seq1m,read,rqd32,rseq1m"
#define CMP_BIG	       (1u << 20)

/* A device under test; every callback returns 0 or a negative code. */
struct cmp_target {
	void *ctx;
	uint64_t size;
	/* synchronous: write @len bytes at @off (@durable: FUA / fsync=true), flush everything */
	int (*write)(void *ctx, uint64_t off, const void *buf, uint32_t len, bool durable);
	int (*flush)(void *ctx);
	/* asynchronous: submit a write whose completion reports @tag */
	int (*submit)(void *ctx, uint64_t off, const void *buf, uint32_t len, uint64_t tag);
	/* synchronous read of @len bytes at @off into @buf */
	int (*read)(void *ctx, uint64_t off, void *buf, uint32_t len);
	/* asynchronous: submit a read into @buf whose completion reports @tag */
	int (*submit_read)(void *ctx, uint64_t off, void *buf, uint32_t len, uint64_t tag);
	/* wait until at least one completion, store up to @max tags; count or negative */
	int (*reap)(void *ctx, uint64_t *tags, unsigned max);
	const char *(*error)(void *ctx, int code); /* message for a failed call */
};

struct cmp_shape_opts {
	double seconds;	    /* measured time per shape */
	uint64_t ops;	    /* > 0: measure exactly this many operations instead */
	const char *shapes; /* comma-separated subset of CMP_ALL_SHAPES */
	int server_pid;	    /* > 0: report the server's CPU use per shape too */
	bool no_flush;	    /* no untimed flush after each shape (callgrind counts) */
};

/*
 * cmp_run_shapes -- run the selected shapes against @t and print their JSON
 * members (`"wflush": {...}, ...`, each preceded by ", ") on @out.
 * Returns 0, or the first error of the target (printed on stderr).
 */
int cmp_run_shapes(struct cmp_target *t, const struct cmp_shape_opts *o, FILE *out);

/* cmp_prefill -- write the whole device once with 1 MiB writes, 8 in flight, then flush */
int cmp_prefill(struct cmp_target *t);

#endif
