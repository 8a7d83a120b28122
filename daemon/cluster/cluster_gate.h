/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_gate.h -- who may use a clustered volume on this node
 *
 * Every local copy of a cluster volume has a gate entry, made by the cluster
 * thread when it creates or finds the copy: the copy itself (held open), its
 * change record (a companion volume "<name>.rrec" of the same namespace,
 * docs/cluster.md, "The change record"), this node's role for the volume and
 * the highest epoch the copy has seen (kept durably in the record's header).
 * The protocol layer asks it:
 *
 *   at VOLUME_OPEN of an ordinary client   cluster_gate_client(): only the
 *                                          primary serves clients; others
 *                                          answer RDAX_E_NOT_PRIMARY with the
 *                                          primary's address and the epoch
 *   at VOLUME_OPEN of a replica link       cluster_gate_replica_open(): the
 *                                          sender names itself and its epoch;
 *                                          an older epoch than seen is
 *                                          RDAX_E_STALE_EPOCH, a sender that
 *                                          is not the primary of that epoch
 *                                          RDAX_E_NOT_PRIMARY; a newer epoch is
 *                                          persisted before the open answers
 *   on every request of an open handle     cluster_gate_check(): the handle's
 *                                          epoch (a replica link's) must still
 *                                          be the newest seen; a client handle
 *                                          needs the node still primary
 *
 * So the epoch travels with the handle: a replica link's requests all belong
 * to the epoch it opened with, and the check on each of them is one atomic
 * load (invariant 4: a replica never applies a request of an older epoch
 * than one it has seen).
 *
 * Record volumes are reserved: cluster_gate_reserved() is true for every
 * name with the record suffix on a cluster node, and the protocol layer
 * refuses clients those names.
 *
 * Deleting (docs/cluster.md, "Delete"). An entry's life:
 *
 *   live ---retire---> retired ---release---> released ---bury---> dead
 *     ^                                                              |
 *     +----------- cluster_gate_open() of a name, reusing it --------+
 *
 *   retired   every check refuses (-ENOENT: "being deleted"), opens too,
 *             and every RDMA window over the copy is revoked; the entry
 *             stays findable, so the copy is never served as an ordinary
 *             volume meanwhile
 *   released  the gate's own openers of the copy and its record are closed
 *             (g->v and g->recv are NULL): the copy can be deleted once no
 *             handle holds it
 *   dead      the copy and its record are deleted; cluster_gate_find() no
 *             longer finds it (the name is free, e.g. for a local volume)
 *
 * Entries are never freed while the daemon runs, so a pointer a reader got
 * from cluster_gate_find() stays a valid gate_vol. Who keeps one for longer
 * (a session's handle, an NBD export, an RDMA window) holds an opener of
 * the copy too, so its entry cannot die under it: the copy is deleted only
 * when its last opener closed. Only a dead entry is reused: for the same
 * name first (a re-create), for another name only when all
 * CLUSTER_GATE_MAX slots are taken -- then its name is rewritten under a
 * sequence count (odd while it changes) that cluster_gate_find() reads
 * around its compare, so a lock-free look-up never matches a torn name. So
 * create/delete cycles use at most CLUSTER_GATE_MAX entries, whatever the
 * names.
 *
 * Thread safety: cluster_gate_find(), _client(), _check(), _reserved() from
 * any thread, lock-free (entries are never freed while the daemon runs,
 * above). _replica_open() and _raise_epoch() from any thread (one lock per
 * entry around the record's writes). _open(), _retire(), _release(),
 * _bury() and _set_*() from the cluster thread only.
 */
#ifndef RDAXD_CLUSTER_GATE_H
#define RDAXD_CLUSTER_GATE_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "change_record.h"
#include "cluster_meta.h"
#include "errors.h"
#include "faults.h"
#include "store.h"

#define CLUSTER_GATE_MAX 256

/*
 * A window of direct access (RDMA: daemon/net/rdma_conn.c) over a copy. One-
 * sided writes land without the daemon seeing a request, so the check on
 * every request cannot fence them: the window itself must go (@revoke,
 * under the gate's lock, at most once; from then on a write through it
 * fails on the wire with a remote access error instead of landing).
 *
 *   a replica link's   @epoch: the link's. Every raise of the copy's epoch
 *                      revokes each window of an older epoch before it
 *                      returns -- so before the newer primary's open is
 *                      answered.
 *   a client's         (@client) @epoch: the epoch this node served the
 *                      volume at when the window was bound. Revoked when the
 *                      node stops serving at that epoch (deposed: the volume
 *                      key names another primary, or its lease was lost) or
 *                      a newer epoch is seen -- whichever comes first. A
 *                      deposed primary's copy is a replica from then on; a
 *                      client's write through an old window would change it
 *                      behind the new primary's back, and it is back in the
 *                      ISR only after the new primary's link raised its epoch.
 */
struct gate_window {
	struct gate_window *next; /* the gate's list, under its lock */
	uint64_t epoch;
	bool client;
	void (*revoke)(struct gate_window *w); /* under the gate's lock, at most once */
	bool revoked;
};

struct gate_vol {
	char name[CLUSTER_NAME_MAX + 1]; /* rewritten only when dead, under seq (above) */
	_Atomic uint32_t seq;		 /* odd while the name is rewritten */
	_Atomic bool retired;		 /* being deleted: every check refuses */
	bool released;			 /* cluster thread: v and recv closed (NULL) */
	_Atomic bool dead;		 /* the copy and its record are gone: not found */
	struct volume *v;		 /* the local copy, open until the entry is released */
	struct volume *recv;		 /* the record's companion volume */
	struct change_record rec;
	_Atomic uint64_t serving;  /* the epoch this node is primary at, 0: a replica */
	_Atomic uint64_t until_ms; /* serving ends then (the lease bound, coarse clock); 0: none */
	_Atomic uint64_t epoch;	   /* the highest epoch seen: the record's, mirrored */
	pthread_mutex_t lock;	   /* the record's writes; the strings below */
	char primary[CLUSTER_NAME_MAX + 1];	/* the volume key's primary, as last read */
	char primary_url[CLUSTER_URL_MAX + 1];	/* its tcp:// address, "" if unknown */
	char primary_rdma[CLUSTER_URL_MAX + 1]; /* its rdma:// address, "" if none */
	uint64_t key_epoch;			/* the volume key's epoch, as last read */
	struct gate_window *windows;		/* RDMA windows (links', clients'), under lock */
};

/* cluster_record_name -- "<volume>.rrec" into @out; 0 or -ENAMETOOLONG */
int cluster_record_name(const char *volume, char *out, size_t len);

/*
 * cluster_gate_open -- open (creating it if absent) the local copy @vol's
 * companion record in @store and publish a gate entry for @vol, role
 * replica (not serving), epoch the record's (a new record gets @epoch); a
 * dead entry is reused (above). Returns 0 and *out; -EEXIST if a live entry
 * exists already (*out is it); -EBUSY (@vol's entry is retired, its copy not
 * deleted yet); -ENOSPC (no room for the record, or CLUSTER_GATE_MAX
 * entries none of which is dead); the store's error. Context: cluster thread.
 */
int cluster_gate_open(struct store *store, const char *vol, uint64_t epoch, char *err,
		      size_t errlen, struct gate_vol **out);

/*
 * cluster_gate_find -- @name's entry, or NULL (not a cluster volume of this
 * node). A retired entry is found too (a dead one is not): callers check it
 * (the checks below refuse it), so a copy being deleted is never taken for an
 * ordinary local volume.
 */
struct gate_vol *cluster_gate_find(const char *name);

/* cluster_gate_enable -- this node is a cluster node (cluster_start, before any client) */
void cluster_gate_enable(void);

/* cluster_gate_reserved -- @name is a record's name and this node is a cluster node */
bool cluster_gate_reserved(const char *name);

/*
 * cluster_gate_serve -- this node is the volume's primary at @epoch from now
 * on (0: it is not); the epoch is persisted as seen first. Clients' windows
 * bound while it served at another epoch (or at all, for 0) are revoked
 * before it returns. Returns 0, or -RDAX_E_STALE_EPOCH (the copy has seen a
 * newer epoch: it does not serve). Context: cluster thread.
 */
int cluster_gate_serve(struct gate_vol *g, uint64_t epoch);

/*
 * cluster_gate_set_primary -- the volume key as read: its primary, the
 * primary's tcp:// address (@url) and rdma:// address (@rdma_url, NULL or
 * "": it has none), the key's epoch
 */
void cluster_gate_set_primary(struct gate_vol *g, const char *primary, const char *url,
			      const char *rdma_url, uint64_t key_epoch);

/*
 * cluster_gate_raise_epoch -- persist @epoch as the highest seen (record
 * header, then the mirror). Returns 0 (raised or equal), -RDAX_E_STALE_EPOCH
 * (@epoch is older: nothing changes).
 */
int cluster_gate_raise_epoch(struct gate_vol *g, uint64_t epoch);

/*
 * cluster_gate_client -- may an ordinary client use the volume here? 0 when
 * this node is its primary; else -RDAX_E_NOT_PRIMARY with the primary's
 * address in @url ("" if unknown) and the epoch in *epoch.
 */
int cluster_gate_client(struct gate_vol *g, char *url, size_t urllen, uint64_t *epoch);

/*
 * cluster_gate_client_over -- cluster_gate_client for a client connected
 * over @rdma: its refusal names the primary's rdma:// address where the
 * primary has one, so an rdma:// client follows it over RDMA (and gets a
 * window there); the tcp:// one otherwise.
 */
int cluster_gate_client_over(struct gate_vol *g, bool rdma, char *url, size_t urllen,
			     uint64_t *epoch);

/*
 * cluster_gate_replica_open -- may @primary, at @epoch, open the volume as a
 * replica link? 0 (the epoch is persisted as the highest seen first);
 * -RDAX_E_STALE_EPOCH (an older epoch than seen); -RDAX_E_NOT_PRIMARY
 * (@primary is not the primary the volume key names for @epoch, or this
 * node is the primary of @epoch itself); -EAGAIN (@epoch is more than one
 * ahead of the volume key as this node read it: not believed, so a sender's
 * word cannot fence the real primary for good). @msg (STATUS message) says why;
 * *seen gets the epoch this copy has seen.
 */
int cluster_gate_replica_open(struct gate_vol *g, uint64_t epoch, const char *primary, char *msg,
			      size_t msglen, uint64_t *seen);

/* cluster_gate_now_ms -- the clock the lease bound is checked on (coarse: ~4 ms, cheap) */
static inline uint64_t cluster_gate_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * cluster_gate_lease -- the primary serves the volume until @until_ms
 * (CLOCK_MONOTONIC ms): the node lease's bound less a margin (docs/cluster.md,
 * "Failover"); a client request after it is refused. Cluster thread.
 */
void cluster_gate_lease(struct gate_vol *g, uint64_t until_ms);

/*
 * cluster_gate_check -- a request on a handle of @g opened at @handle_epoch
 * (0: an ordinary client's). 0, -ENOENT (the volume is being deleted: any
 * handle), -RDAX_E_STALE_EPOCH (a newer epoch was seen
 * since the link opened), -RDAX_E_NOT_PRIMARY (a client's, and this node is
 * not primary, or was deposed: a newer epoch than the one it serves was
 * seen, or its lease bound passed). @g NULL: 0 (not a cluster volume).
 */
static inline int cluster_gate_check(const struct gate_vol *g, uint64_t handle_epoch)
{
	if (!g)
		return 0;
	if (atomic_load_explicit(&g->retired, memory_order_acquire))
		return -ENOENT; /* being deleted: nothing is served or applied any more */
	uint64_t seen = atomic_load_explicit(&g->epoch, memory_order_acquire);
	if (handle_epoch) /* the control replica-no-fence lets every epoch through */
		return handle_epoch >= seen || rdax_faults.replica_no_fence ? 0
									    : -RDAX_E_STALE_EPOCH;
	uint64_t serving = atomic_load_explicit(&g->serving, memory_order_acquire);
	uint64_t until = atomic_load_explicit(&g->until_ms, memory_order_acquire);
	if (until && cluster_gate_now_ms() >= until && !rdax_faults.lease_ignore)
		return -RDAX_E_NOT_PRIMARY; /* the lease may have run out: another may lead */
	return serving && serving >= seen ? 0 : -RDAX_E_NOT_PRIMARY;
}

/*
 * cluster_gate_window_add -- a window over @g's copy exists: a replica
 * link's of @w->epoch, which a raise past that epoch revokes; or a client's
 * (@w->client), whose epoch is set here to the one this node serves at, and
 * which the end of serving at it revokes. Returns 0; -RDAX_E_STALE_EPOCH (a
 * link's: a newer epoch was seen since the handle's open) or
 * -RDAX_E_NOT_PRIMARY (a client's: this node serves the volume no more);
 * either way the caller revokes the window itself and refuses the open.
 * Context: the connection's worker.
 */
int cluster_gate_window_add(struct gate_vol *g, struct gate_window *w);

/*
 * cluster_gate_window_remove -- forget @w (its handle or connection ends).
 * Returns true if a raise revoked it already (the caller must not revoke it
 * again), false if the caller revokes it now. Context: the connection's worker.
 */
bool cluster_gate_window_remove(struct gate_vol *g, struct gate_window *w);

/*
 * cluster_gate_retire -- the volume is being deleted: from now on every
 * check, open and window refuses @g, and every window over the copy is
 * revoked before it returns; this node serves it no more. Idempotent.
 * Context: cluster thread.
 */
void cluster_gate_retire(struct gate_vol *g);

/* cluster_gate_retired -- has @g been retired (any thread) */
static inline bool cluster_gate_retired(const struct gate_vol *g)
{
	return g && atomic_load_explicit(&g->retired, memory_order_acquire);
}

/*
 * cluster_gate_release -- close the entry's own openers of the copy and its
 * record (a retired entry's: the copy can then be deleted once no handle
 * holds it). Idempotent. Context: cluster thread.
 */
void cluster_gate_release(struct store *store, struct gate_vol *g);

/*
 * cluster_gate_bury -- a released entry's copy and record are deleted: the
 * entry may be reused (above). Context: cluster thread.
 */
void cluster_gate_bury(struct gate_vol *g);

/* cluster_gate_close_all -- close every entry's volumes (after the workers stopped) */
void cluster_gate_close_all(struct store *store);

#endif
