/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * copy.h -- rdax import / export: a file to a volume and back, many requests in flight
 *
 * Both keep COPY_DEPTH requests of up to COPY_CHUNK_MAX bytes (at most the
 * server's max payload) in flight through librdax's asynchronous API, so a
 * copy runs at the link's speed rather than one round trip per chunk.
 *
 * Sparse regions are not sent:
 *  - import walks the file's data with lseek(SEEK_DATA / SEEK_HOLE) and
 *    DISCARDs each hole on the volume (DISCARD makes a range read as zeros,
 *    durably: docs/protocol.md), so the volume ends up holding the file
 *    exactly, whatever it held before, without zeros on the wire. A file
 *    system without SEEK_DATA is read as all data.
 *  - export reads the whole volume (the protocol has no map of written
 *    ranges) and, when @holes is set, leaves every all-zero 4 KiB block
 *    unwritten in the output file, which the caller has sized with
 *    ftruncate(2), so zeros become holes.
 *
 * Thread safety: the connection's (one thread at a time).
 */
#ifndef RDAX_CLIENT_COPY_H
#define RDAX_CLIENT_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "librdax.h"

#define COPY_DEPTH     16
#define COPY_CHUNK_MAX (1U << 20)

struct copy_stats {
	uint64_t data_bytes; /* sent (import) or written to the file (export) */
	uint64_t hole_bytes; /* discarded on the volume (import) or left as holes (export) */
};

/*
 * copy_import -- @len bytes of file @fd from offset 0 into @vol at @vol_off
 * (the caller checked that they fit). @label names the progress bar.
 * Context: blocks until done; @vol has nothing else in flight.
 * Returns 0, or a negative code with a message in @err.
 */
int copy_import(struct rdax_conn *conn, struct rdax_volume *vol, int fd, uint64_t len,
		uint64_t vol_off, const char *label, struct copy_stats *st, char *err,
		size_t errlen);

/*
 * copy_export -- all of @vol into file @fd at the same offsets; all-zero
 * 4 KiB blocks are skipped when @holes (the file must read as zeros there).
 * Returns 0, or a negative code with a message in @err.
 */
int copy_export(struct rdax_conn *conn, struct rdax_volume *vol, int fd, bool holes,
		const char *label, struct copy_stats *st, char *err, size_t errlen);

#endif
