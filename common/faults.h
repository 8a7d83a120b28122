/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * faults.h -- switches that break a mechanism on purpose (test controls)
 *
 * Every durability or race test has a control: the same test with one of
 * these switched on must report the loss. They are plain globals so the hot
 * paths pay one predictable branch; production never sets them.
 *
 * Tests set them directly, or through the environment of a daemon:
 *   RDAX_FAULTS=skip-writeback,no-fsync-serialise,...
 */
#ifndef RDAX_FAULTS_H
#define RDAX_FAULTS_H

#include <stdbool.h>

struct rdax_faults {
	/* fsync: skip the write-back of the first entry of every fsync */
	bool skip_writeback;
	/* fsync: do not wait for a concurrent fsync of the same volume */
	bool no_fsync_serialise;
	/* dtree: clear DIRTY after write-back (on release) instead of on claim */
	bool clear_after_writeback;
	/* dtree: a huge entry replacing TOWRITE small entries is not TOWRITE */
	bool no_towrite_inherit;
	/* etcd client: send transactions without their compares (lost updates) */
	bool etcd_txn_no_compare;
	/*
	 * vol_table: commit into one metadata copy only, alternating (the order
	 * before both copies carried the latest state): damage to the newest
	 * copy then rolls back a committed change
	 */
	bool meta_one_copy;
	/*
	 * vol_table: write the two metadata copies line by line together instead
	 * of the second after the first is durable: a cut can tear both
	 */
	bool meta_copies_together;
	/* dtree: a write records only the lowest line it touches in each page */
	bool lines_first_only;
	/* rdax crash-states: fsync records make nothing durable (the model forgets them) */
	bool crash_states_no_fsync;
	/* change record: set a region's bit without persisting it (lost after a power cut) */
	bool change_record_no_persist;
	/* replication: an fsync is acknowledged without waiting for the replicas */
	bool repl_ack_early;
	/* persist: namespace files are not reserved at creation and open (sparse, as before) */
	bool no_reserve;
	/* persist: a discard punches holes (gives the blocks back) instead of zeroing in place */
	bool zero_punches;
	/* media_guard: copies into and out of mappings run unguarded (a SIGBUS kills) */
	bool no_media_guard;
	/* ns_format: go ahead on a namespace whose lock another opener holds */
	bool format_no_lock;
	/*
	 * persist (sim): flushes and zero ranges do not exclude each other, so
	 * a flush's copy of old data can land in the file between a zero
	 * range and the drop of the private pages
	 */
	bool sim_no_flush_lock;
	/*
	 * net: a socket is closed at once at the end of its connection, unread
	 * input or not (a reset then destroys the replies the peer has not read)
	 */
	bool linger_off;
	/* net: a closing connection ends in the middle of a WRITE's payload (cut, unanswered) */
	bool drain_cuts_payload;
	/*
	 * pools: one queue in order, no quick lane (a HELLO waits behind every
	 * VOLUME_LIST queued before it)
	 */
	bool meta_no_lanes;
};

extern struct rdax_faults rdax_faults;

/*
 * faults_from_env -- read RDAX_FAULTS (comma-separated names above, with
 * '-' for '_'); returns 0, or -EINVAL naming nothing valid (logged).
 */
int faults_from_env(void);

#endif
