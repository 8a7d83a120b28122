/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wal.h -- a tiny write-ahead log on an rdax volume, for the persistence
 * testing examples (docs/persistence-testing.md)
 *
 * A transaction writes WAL_DATA_LEN bytes of data into its own slot of the
 * data area, then a 64-byte commit record (one cache line) naming the data
 * and its checksum. Recovery (wal_check) trusts every commit record it
 * finds: the transaction it names must have all its data. So the data must
 * be durable before the commit record can reach media -- wal_correct.c
 * orders the two with an fsync, wal_buggy.c does not.
 *
 * Volume layout:
 *   0 .. 4 KiB         commit records, slot i at i * 64
 *   4 KiB ..           data, transaction i at WAL_DATA_OFF(i)
 *
 * Commit record (little-endian, 64 bytes):
 *   0  magic "WALC"   4  transaction number   8  data offset
 *   16 data length    20 data checksum        24 zero
 *   60 record checksum (of bytes 0..59)
 * An all-zero slot is "not committed".
 */
#ifndef RDAX_EXAMPLE_WAL_H
#define RDAX_EXAMPLE_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "librdax.h"

#define WAL_SLOTS	  64
#define WAL_COMMIT_SIZE	  64
#define WAL_DATA_LEN	  256
#define WAL_DATA_START	  4096
#define WAL_VOLUME_SIZE	  (64U << 10)
#define WAL_COMMIT_OFF(i) ((uint64_t)(i)*WAL_COMMIT_SIZE)
#define WAL_DATA_OFF(i)	  (WAL_DATA_START + (uint64_t)(i)*WAL_DATA_LEN)

/* wal_sum -- the checksum of the format (FNV-1a, 32 bits) */
uint32_t wal_sum(const void *p, size_t len);

/* wal_get32, wal_get64 -- little-endian fields of the format */
uint32_t wal_get32(const uint8_t *p);
uint64_t wal_get64(const uint8_t *p);

/* wal_data -- transaction @txn's data (deterministic, so the checker can tell) */
void wal_data(unsigned txn, uint8_t out[WAL_DATA_LEN]);

/* wal_commit -- transaction @txn's commit record */
void wal_commit(unsigned txn, uint8_t out[WAL_COMMIT_SIZE]);

/*
 * wal_txn_fn -- commit transaction @txn: its @data (WAL_DATA_LEN bytes, at
 * WAL_DATA_OFF) and its @commit record (at WAL_COMMIT_OFF); 0 or the error
 */
typedef int (*wal_txn_fn)(struct rdax_volume *vol, unsigned txn, const uint8_t *data,
			  const uint8_t *commit);

/*
 * wal_main -- the programs' main: "PROG [--server URL] VOLUME
 * [TRANSACTIONS]" (default 3; URL default $RDAX_SERVER): creates VOLUME
 * (WAL_VOLUME_SIZE), opens it and commits the transactions one after the
 * other with @txn. Returns the exit status: 0, 1 (failed), 2 (usage).
 */
int wal_main(int argc, char **argv, wal_txn_fn txn);

#endif
