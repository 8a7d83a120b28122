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
#include <stddef.h>

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
	/*
	 * rdma: a write notice in line units marks the whole pages of its lines
	 * (as before notices named lines): an fsync writes back more than the
	 * lines written, which the direct-write line tests must see
	 */
	bool rdma_notice_pages;
	/*
	 * rdma: a durable write notice marks nothing written: its FSYNC finds the
	 * range clean and acknowledges bytes that were never written back
	 */
	bool rdma_durable_unmarked;
	/* rdax crash-states: fsync records make nothing durable (the model forgets them) */
	bool crash_states_no_fsync;
	/* change record: set a region's bit without persisting it (lost after a power cut) */
	bool change_record_no_persist;
	/* replication: an fsync is acknowledged without waiting for the replicas */
	bool repl_ack_early;
	/* cluster gate: a replica applies requests of any epoch (no fencing, invariant 4) */
	bool replica_no_fence;
	/* replica link: a WRITE fused with its FSYNC is sent without fsync=true (not flushed) */
	bool rlink_fused_no_flush;
	/* resync: every digest is taken as equal to the member's (nothing is shipped) */
	bool resync_digest_equal;
	/* failover: a replica outside the ISR may take over, first (invariant 3) */
	bool failover_any_replica;
	/* cluster gate: a primary serves past its lease bound (a deposed one keeps serving) */
	bool lease_ignore;
	/*
	 * cluster gate: a deposed primary keeps its clients' RDMA windows (their
	 * one-sided writes still land in its copy, a replica now)
	 */
	bool client_window_keep;
	/*
	 * failover (a load, not a defect): the reconcile after a take-over
	 * sleeps three lease TTLs first, as a big volume's would take long
	 */
	bool reconcile_slow;
	/* failover: the reconcile runs on the cluster thread, which then renews no lease */
	bool reconcile_inline;
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
	/*
	 * conn: SIGTERM drains the workers' connection sets one after another,
	 * each waited for (one drain timeout per worker) instead of all at once
	 */
	bool drain_one_by_one;
	/*
	 * media_health: read the unsafe-shutdown count and bad blocks from
	 * PATH.media beside each namespace instead of the device (a test source)
	 */
	bool fake_media;
	/* media_health: record the unsafe-shutdown count without comparing it */
	bool usc_no_compare;
	/* media_health: reads overlapping a known bad block are served, not refused */
	bool no_badblock_check;
	/*
	 * vol_table: clearing an unsafe-shutdown mark changes the table in
	 * memory only, no commit: acknowledged, yet a power cut brings it back
	 */
	bool unsafe_clear_no_commit;
	/* TLS: with --tls require a plaintext client is served anyway */
	bool tls_plain_ok;
	/* TLS: client certificates are taken without checking them (CA, dates) */
	bool tls_no_verify;
	/*
	 * tls_io: records kept to go out together that the socket did not take
	 * are reported sent anyway: they wait in the buffer for a next send
	 * that may never come (test_tls_io must see the bytes missing)
	 */
	bool tls_send_strand;
	/*
	 * tls_io: tls_io_trim keeps the buffers of an idle session (the
	 * per-connection memory bound of tls_idle_memory must be exceeded)
	 */
	bool tls_keep_buffers;
	/* acl: every client has every right, whatever --acl says */
	bool acl_ignore;
	/* rdma_auth: the nonces of signed connection requests are not remembered (replays pass) */
	bool rdma_auth_no_replay_check;
	/*
	 * dispatch: every native request leaks 4 KiB (written, so resident):
	 * the soak's memory check and the fault sweep's leak check must
	 * report it
	 */
	bool leak_per_request;
	/*
	 * librdax: an fsync does not compare the server's verifier with the
	 * writes it covers (a write lost by a restart goes unnoticed: the fsync
	 * succeeds); the resume test's control must see the silent loss
	 */
	bool client_no_verifier;
	/*
	 * ns_power_cut: keep the private mapping (its unwritten stores survive
	 * the "cut"); volumes and metadata are still dropped and reloaded
	 */
	bool powercut_keep_mapping;
	/*
	 * NBD forwarding: a forwarded FLUSH is answered at once and a FUA write
	 * sent as a plain one, without the primary's fsync (acknowledged as
	 * durable, held nowhere durably); the forwarding test's control must see
	 * flushed data missing after the copies lose power
	 */
	bool nbd_forward_flush_early;
	/*
	 * cluster delete: a member drops its member key but keeps its copy and
	 * change record (the volume's keys go, the space stays taken); the delete
	 * test's control must find the copies left on the nodes
	 */
	bool delete_keep_copy;
};

extern struct rdax_faults rdax_faults;

/*
 * Counted fault points (librpma's fault injection): a fallible call of the
 * daemon -- an allocation, a socket, a mapping, a thread, an unpack --
 * asks faults_point() first, and fails as if the call had failed when it is
 * the Nth point reached in the process, counting from 1 over every thread:
 *
 *   RDAX_FAULT_AT=N      fail the Nth point (once); unset or 0: none
 *   RDAX_FAULT_REPORT=1  at exit, print the number of points reached
 *                        ("fault points reached: M" on stderr), so a sweep
 *                        knows how far N goes
 *
 * The failed point is announced on stderr with its call stack. The calls
 * are routed here at link time (tests/fault: rdaxd-fault is rdaxd linked
 * with -Wl,--wrap for each), so rdaxd itself pays nothing. A sweep runs
 * N = 1, 2, ... until a run reaches fewer than N points
 * (tests/fault/fault-sweep.sh).
 */

/*
 * faults_point -- count one fault point (@what names the call, for the
 * announcement): true if this one is to fail. Context: any thread; lock-free.
 */
bool faults_point(const char *what);

/* faults_leak -- allocate @n bytes, write them and forget them (leak_per_request) */
void faults_leak(size_t n);

/* faults_points_reached -- how many points were counted so far */
unsigned long faults_points_reached(void);

/*
 * faults_from_env -- read RDAX_FAULTS (comma-separated names above, with
 * '-' for '_'); returns 0, or -EINVAL naming nothing valid (logged).
 */
int faults_from_env(void);

#endif
