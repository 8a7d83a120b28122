/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * repl_volume.h -- one volume's replication on its primary
 *
 * The primary's side of the data path (docs/cluster.md, "Data path" and
 * "Losing a replica"), for the protocol layer to call:
 *
 *   repl_before_write(off, len)  before a write's bytes reach the mapping:
 *                                marks the change record for every replica
 *                                that is away (durable before the bytes land)
 *   repl_write(off, len)         after they did: forwarded, in this order, on
 *                                the link of every live ISR member
 *   repl_fsync(off, len, w)      an fsync (or a durable write) of that range:
 *                                w->done(w, 0) once every ISR member confirmed
 *                                it -- or, for a member whose link failed,
 *                                once that member left the ISR in etcd
 *                                (invariant 2); the caller also waits for the
 *                                local flush before it acknowledges
 *
 * A member fails when its link does (error, death, stall past the timeout).
 * Then, before anything it lacks can be acknowledged: the change record's
 * slot for it is opened with every region it has not confirmed flushed
 * (per region, the sequence of the last write forwarded against the last
 * fsync confirmed), later writes mark it, and o->shrink(arg, rv, node) asks
 * the owner to remove it from the ISR. The owner answers with repl_removed():
 * 0 releases the waits held for that member; an error (the ISR may not
 * shrink below min_replicas, or this node is no longer primary) completes
 * them with -EIO. While no answer comes (etcd unreachable) they stay held:
 * the primary acknowledges nothing rather than guess.
 *
 * Thread safety: every function from any thread; one lock per volume.
 * repl_before_write, repl_write, repl_fsync and repl_write_durable never
 * block (a worker calls them). w->done and o->shrink run on the links' home
 * worker or the caller's thread, never under the lock.
 */
#ifndef RDAXD_REPL_VOLUME_H
#define RDAXD_REPL_VOLUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "change_record.h"
#include "cluster_meta.h"
#include "replica_link.h"

struct repl_volume;
struct repl_wait;

/* One member's part of a wait (the wait's own). */
struct repl_wait_part {
	struct rlink_waiter lw;
	struct repl_wait *w;
	unsigned member;
	struct repl_wait_part *held_next; /* the member's held list */
};

/* An fsync's wait, embedded in the caller's object. */
struct repl_wait {
	void (*done)(struct repl_wait *w, int status); /* 0, or -EIO: not acknowledgeable */
	/* the volume's own: */
	struct repl_volume *rv;
	uint64_t off, len, seq;
	unsigned pending;
	int status;
	struct repl_wait *done_next;
	struct repl_wait_part part[CLUSTER_MAX_REPLICAS];
};

struct repl_member_spec {
	const char *node; /* its name (the ISR's spelling) */
	const char *url;  /* where its rdaxd is: rdma:// where both nodes have RDMA, else tcp:// */
	const char *alt_url; /* tried when a link to @url cannot be made (NULL: none) */
};

struct repl_opts {
	const char *volume;
	const uint8_t *mapping; /* the primary's copy */
	uint64_t size;
	uint64_t epoch;
	const char *primary;	   /* this node's name, for the replicas' fence (NULL: "") */
	uint64_t incarnation;	   /* this node's run */
	bool fence;		   /* open the links as replica links at @epoch (rdaxd: true) */
	struct change_record *rec; /* NULL: none (a failed member then needs a full resync) */
	const char *token_file;
	unsigned timeout_ms; /* a link's stall timeout (0: the link's default) */
	struct worker *home; /* the worker whose loop runs the links (NULL: each its own) */
	unsigned spin_cap_us; /* the links' spin cap while answers are awaited (0: none) */
	/*
	 * A failover's start: the members' copies are not known to equal this
	 * one (un-acknowledged writes of the old primary may differ) until
	 * repl_reconcile() made them so; a member that fails before that gets
	 * no record slot, so its return is a full resync by digests.
	 */
	bool untrusted;
	void (*shrink)(void *arg, struct repl_volume *rv, const char *node);
	void *arg;
};

enum repl_member_state {
	REPL_LIVE,    /* in the ISR, link up */
	REPL_FAILED,  /* link failed; in etcd's ISR until the shrink is made */
	REPL_REMOVED, /* out of the ISR; nothing waits for it */
	REPL_RESYNC,  /* coming back: gets live writes and fsyncs, not yet in the ISR */
};

struct repl_member_info {
	char node[CLUSTER_NAME_MAX + 1];
	enum repl_member_state state;
	struct rlink_stats link;
	/* resync progress: the current (or last) resync's bytes to ship and left */
	uint64_t resync_total, resync_left;
	uint64_t resync_shipped; /* every resync of this member so far */
};

/*
 * repl_start -- links to the @n other ISR members. A member whose link
 * cannot be made fails at once (its slot opened, the shrink asked).
 * Returns 0, -ENOMEM, -EINVAL.
 */
int repl_start(const struct repl_opts *o, const struct repl_member_spec *members, unsigned n,
	       struct repl_volume **out);

void repl_before_write(struct repl_volume *rv, uint64_t off, uint64_t len);
void repl_write(struct repl_volume *rv, uint64_t off, uint64_t len);
void repl_fsync(struct repl_volume *rv, uint64_t off, uint64_t len, struct repl_wait *w);

/*
 * repl_write_durable -- repl_write() then repl_fsync() of the same range (a
 * durable write), queued on each link together: one round trip
 */
void repl_write_durable(struct repl_volume *rv, uint64_t off, uint64_t len, struct repl_wait *w);

/*
 * repl_prefer -- a request of the volume comes from worker @w (a client's
 * connection's). After REPL_PREFER_STREAK in a row from the same worker the
 * links are asked to run on its loop (rlink_move), so a durable write from
 * there crosses no thread; requests from several workers by turns leave
 * them where they are. Any thread.
 */
#define REPL_PREFER_STREAK 16
void repl_prefer(struct repl_volume *rv, struct worker *w);

/*
 * repl_fsync_wait -- repl_fsync() and wait for it on the calling thread (a
 * pool thread: it may block). @rv NULL: 0 at once. Returns 0 or -EIO.
 */
int repl_fsync_wait(struct repl_volume *rv, uint64_t off, uint64_t len);

/*
 * repl_reconcile -- after a failover, before this primary serves: make every
 * live member's copy equal to this one (whole-volume digests, the blocks that
 * differ shipped, an fsync of the whole volume), so no member keeps a write
 * of the old primary that this copy lacks. A member that fails meanwhile
 * takes the ordinary way out (its removal from the ISR). Blocks. Returns 0,
 * or -EIO if a member could not be reconciled (it fails and is removed).
 */
int repl_reconcile(struct repl_volume *rv);

/* repl_removed -- the owner's answer to o->shrink for @node (see the top) */
void repl_removed(struct repl_volume *rv, const char *node, int status);

struct repl_resync_result {
	uint64_t regions; /* regions shipped */
	uint64_t bytes;	  /* bytes shipped by the resync (live writes not counted) */
	bool full;	  /* no usable record: every region was shipped */
};

/*
 * repl_resync -- bring back @node (REMOVED), whose rdaxd is at @url (or
 * @alt_url, NULL: none, if no link to @url can be made): a new link; from then on live writes are
 * forwarded to it and every fsync waits for it as for an ISR member (stronger than needed, so
 * safe); the regions its change-record slot marks (every region without a record) are shipped from
 * the mapping in the link's order, so the last send of a byte carries its newest value; an fsync of
 * the whole volume behind them; then
 * @grow(@arg, @node) must put it back in etcd's ISR (cluster_isr_change),
 * after which it is LIVE and its slot is closed. Blocks until done.
 * Returns 0, or a negative code (the member is REMOVED again; its record
 * is kept). Context: the owner's thread, not a link's.
 */
int repl_resync(struct repl_volume *rv, const char *node, const char *url, const char *alt_url,
		int (*grow)(void *arg, const char *node), void *arg,
		struct repl_resync_result *res);

/*
 * repl_resync_cancel -- a resync running on another thread ends soon with
 * -ECANCELED (its link is failed); for a daemon that stops
 */
void repl_resync_cancel(struct repl_volume *rv);

/*
 * repl_close -- the volume is being deleted: every link fails (its
 * connection reset, so the member's copy is held open by it no more), and
 * each member takes the ordinary way out (o->shrink; the owner answers with
 * an error, so nothing is acknowledged from then on). The object stays for
 * callers that still hold it, until repl_stop(). Any thread.
 */
void repl_close(struct repl_volume *rv);

/* repl_members -- up to @max members' states; returns the count */
unsigned repl_members(struct repl_volume *rv, struct repl_member_info *out, unsigned max);

/* repl_stop -- stop every link; waits still held complete with -ECANCELED. Sets *rvp = NULL. */
void repl_stop(struct repl_volume **rvp);

#endif
