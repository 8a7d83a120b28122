/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_conn.h -- one RDMA connection: an RC queue pair on a worker's loop
 *
 * A connection is an RC QP whose receives come from its device's shared
 * receive queue (rdma_dev.h) and whose completions go to its own CQ, which
 * signals the completion channel of its worker for that device: the worker's
 * libev loop watches the channel, as it watches TCP sockets. The rdma_cm id
 * of the connection is migrated to the worker's own event channel before it
 * is accepted, so the worker alone handles it from then on (disconnects
 * included) and the accept loop never touches it again.
 *
 * Bytes: the frames of the native protocol travel in SEND_WITH_IMM
 * messages (rdma_proto.h: a byte stream cut into messages, the immediate a
 * credit grant). The connection is a stream (stream.h) whose input is
 * pushed: received message bytes are appended to its input buffer and the
 * SRQ buffer is reposted at once; the native core (native_conn.h) parses
 * and dispatches them exactly as it does a socket's. Replies are copied out
 * of the stream's queue into send buffers of the worker (a registered pool
 * per worker and device) and sent within the client's credits. READ
 * payloads are copied when the reply is queued (a snapshot in request
 * order: native_transport.snapshot_reads), so neither a later request nor
 * a one-sided write can change what a queued READ reply returns.
 *
 * Write notices: a client's WRITE_WITH_IMM lands in the volume through the
 * memory window of its handle; its receive completion (opcode
 * RECV_RDMA_WITH_IMM) names the lines or pages (rdma_proto.h) and is handled --
 * volume_mark_written() -- when the CQ is polled. The CQ of one QP delivers
 * completions in arrival order, and a SEND's bytes are only parsed after its
 * completion was polled, so every write the client issued before a request
 * is in the dirty tree before that request (an FSYNC) is dispatched: the
 * dirty tree stays the single source of truth. A notice naming units outside
 * every volume of the connection closes the connection.
 *
 * Direct access: VOLUME_OPEN binds a type-2 memory window over the volume
 * to this QP (IBV_WR_BIND_MW, posted before the reply on the same send
 * queue); VOLUME_CLOSE and the end of the connection deallocate it, which
 * revokes it at once (measured: a write with the old rkey after
 * ibv_dealloc_mw returns fails with a remote access error). Another QP using
 * the rkey fails the same way: type 2B windows belong to one QP.
 *
 * Backpressure: while the connection cannot take another request (replies
 * plus pool jobs at NATIVE_MAX_PENDING, or a barrier: native_conn_blocked)
 * the grants of messages carrying frame bytes are held back, so a client
 * can have at most CONN_RDMA_CREDITS messages buffered beyond the frame
 * being parsed.
 *
 * End: on a disconnect, a completion error, a protocol error or a drain,
 * the connection stops taking requests, waits for its jobs, sends what is
 * queued (not after an error), deallocates its windows, destroys QP and CQ
 * (polling what is left: notices are still marked, SRQ buffers go back),
 * closes its volumes (in the metadata pool) and destroys its rdma_cm id.
 *
 * The lifecycle (flush before sleeping, the end, the drain) is conn.h's:
 * an RDMA connection is one more conn_ops table in its worker's set.
 *
 * Thread safety: a worker's RDMA state and its connections belong to that
 * worker; only conn_rdma_start() is called from another thread (the accept
 * loop; it posts to the worker).
 */
#ifndef RDAXD_RDMA_CONN_H
#define RDAXD_RDMA_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <ev.h>
#include <rdma/rdma_cma.h>

#include "conn.h"
#include "dispatch.h"
#include "fsync_pool.h"
#include "native_conn.h"
#include "rdma_dev.h"
#include "rdma_proto.h"
#include "worker.h"

/* Receives of the shared queue a client may use at once: its window of messages and notices. */
#define CONN_RDMA_CREDITS 32U
/* The most receives of the client's we use (its window may be larger): our send queue. */
#define CONN_RDMA_SEND_WINDOW_MAX 64U
/* Send buffers per worker and device. */
#define CONN_RDMA_TX_BUFS 256U
/* RDMA READs a client may have in flight on its QP (also capped by the device). */
#define CONN_RDMA_MAX_RD_ATOM 16U

struct conn_rdma;
struct rdma_worker;

/* What every RDMA connection of the daemon shares. */
struct conn_rdma_shared {
	struct native_shared native; /* its env is copied per connection, with the RDMA hooks */
	/*
	 * After a completion, keep polling that connection's CQ for an
	 * adaptive window of at most this many microseconds before letting
	 * the loop sleep (--rdma-busy-poll, spin_window.h; 0: no spinning).
	 * A sleeping loop is woken through the completion channel per
	 * message, which costs a system call and a scheduler wake-up.
	 */
	unsigned busy_poll_us;
};

/* One device as seen by one worker: its completion channel and send buffers. */
struct conn_rdma_port {
	struct rdma_worker *rw;
	struct rdma_dev *dev;
	struct ibv_comp_channel *channel;
	ev_io io;
	uint8_t *tx_slab; /* CONN_RDMA_TX_BUFS * dev->msg_size */
	struct ibv_mr *tx_mr;
	uint32_t tx_free[CONN_RDMA_TX_BUFS]; /* stack of free buffer indices */
	unsigned tx_nfree;
	bool tx_wanted; /* a connection waits for a buffer */
};

/* What RDMA adds to one worker's connection set: its rdma_cm channel and its devices. */
struct rdma_worker {
	struct conn_set *set;
	const struct conn_rdma_shared *shared;
	struct rdma_event_channel *cm; /* the worker's rdma_cm events (migrated ids) */
	ev_io cm_io;
	struct conn_rdma_port **ports;
	unsigned nports;
};

/*
 * rdma_worker_new -- the RDMA state of @set's worker: its rdma_cm event
 * channel, watched on the worker loop. Before worker_start(). Returns 0,
 * -EINVAL, -ENOMEM, -errno.
 */
int rdma_worker_new(struct conn_set *set, const struct conn_rdma_shared *shared,
		    struct rdma_worker **out);

/*
 * rdma_worker_add_dev -- serve connections on @dev: a completion channel
 * watched on the worker loop and a pool of send buffers. Before
 * worker_start(). Returns 0, -ENOMEM, -errno.
 */
int rdma_worker_add_dev(struct rdma_worker *rw, struct rdma_dev *dev);

/* rdma_worker_delete -- free (after the drain, the worker stopped); accepts NULL */
void rdma_worker_delete(struct rdma_worker **rwp);

/*
 * conn_rdma_start -- from the accept loop: take over the connection request
 * @id (its CONNECT_REQUEST event already acked) whose private data said
 * @cd and whose initiator depth (RDMA READs it wants in flight) is
 * @initiator_depth. Migrates @id to @rw's channel and posts to the
 * worker, which sets up the QP and accepts (or rejects). @identity: the
 * user the request proved (rdma_auth.h), NULL if none. The connection
 * holds *@slot (moved). Returns 0, or a negative code after rejecting and
 * destroying @id (and giving @slot back).
 */
int conn_rdma_start(struct rdma_worker *rw, struct rdma_cm_id *id, const struct rdma_cm_data *cd,
		    uint8_t initiator_depth, const char *peer, const char *identity,
		    struct conn_slot *slot);

#endif
