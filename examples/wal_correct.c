/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wal_correct.c -- the example write-ahead log, done right: the data is
 * durable before the commit record is written
 *
 *   wal_correct [--server URL] VOLUME [TRANSACTIONS]
 *
 * Creates VOLUME and commits TRANSACTIONS (default 3) transactions
 * (wal.h). Compare wal_buggy.c: the only difference is the fsync of the
 * data before its commit record.
 */
#include "wal.h"

/* commit -- data, fsync of the data, commit record, fsync of the commit record */
static int commit(struct rdax_volume *vol, unsigned t, const uint8_t *data, const uint8_t *record)
{
	int ret = rdax_write(vol, WAL_DATA_OFF(t), data, WAL_DATA_LEN, 0);
	/* the data is durable before anything says it is committed */
	if (!ret)
		ret = rdax_fsync(vol, WAL_DATA_OFF(t), WAL_DATA_LEN, NULL);
	if (!ret)
		ret = rdax_write(vol, WAL_COMMIT_OFF(t), record, WAL_COMMIT_SIZE, 0);
	/* the transaction is committed once its commit record is durable */
	if (!ret)
		ret = rdax_fsync(vol, WAL_COMMIT_OFF(t), WAL_COMMIT_SIZE, NULL);
	return ret;
}

int main(int argc, char **argv)
{
	return wal_main(argc, argv, commit);
}
