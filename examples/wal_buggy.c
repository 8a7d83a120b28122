/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wal_buggy.c -- the example write-ahead log with a classic bug: the
 * commit record is written before the data is durable
 *
 *   wal_buggy [--server URL] VOLUME [TRANSACTIONS]
 *
 * Writes the data, then the commit record, then one fsync of both. It
 * passes every test that does not cut the power: when nothing crashes the
 * data is always there. A power cut before that fsync returns may leave
 * the commit record on media without (all of) its data -- unflushed lines
 * reach media in any order -- and recovery then trusts a transaction whose
 * data is not there. `rdax crash-states --check` finds such a state
 * (docs/persistence-testing.md walks through it). Compare wal_correct.c.
 */
#include "wal.h"

/* commit -- data, commit record, one fsync of the whole volume */
static int commit(struct rdax_volume *vol, unsigned t, const uint8_t *data, const uint8_t *record)
{
	int ret = rdax_write(vol, WAL_DATA_OFF(t), data, WAL_DATA_LEN, 0);
	/* BUG: nothing makes the data durable before the commit record is written */
	if (!ret)
		ret = rdax_write(vol, WAL_COMMIT_OFF(t), record, WAL_COMMIT_SIZE, 0);
	if (!ret)
		ret = rdax_fsync(vol, 0, 0, NULL);
	return ret;
}

int main(int argc, char **argv)
{
	return wal_main(argc, argv, commit);
}
