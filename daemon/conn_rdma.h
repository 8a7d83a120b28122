/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conn_rdma.h -- one RDMA connection: an RC queue pair on a worker's loop
 *
 * A connection is an RC QP whose receives come from its device's shared
 * receive queue (rdma_dev.h) and whose completions go to its own CQ, which
 * signals the completion channel of its worker for that device: the worker's
 * libev loop watches the channel, as it watches TCP sockets. The rdma_cm id
 * of the connection is migrated to the worker's own event channel before it
 * is accepted, so the worker alone handles it from then on (disconnects
 * included) and the accept loop never touches it again.
 *
 * Bytes: the frames of the TCP protocol travel in SEND_WITH_IMM messages
 * (rdma_proto.h: a byte stream cut into messages, the immediate a credit
 * grant). Received message bytes are copied into a per-connection input
 * buffer and the SRQ buffer is reposted at once; the input is parsed and
 * dispatched exactly like TCP input (dispatch.h). Replies are copied into
 * send buffers of the worker (a registered pool per worker and device) and
 * sent within the client's credits. READ payloads are copied when the reply
 * is queued (a snapshot in request order), so a later request can never
 * change what a queued READ reply returns.
 *
 * Write notices: a client's WRITE_WITH_IMM lands in the volume through the
 * memory window of its handle; its receive completion (opcode
 * RECV_RDMA_WITH_IMM) names the pages (rdma_proto.h) and is handled --
 * volume_mark_written() -- when the CQ is polled. The CQ of one QP delivers
 * completions in arrival order, and a SEND's bytes are only parsed after its
 * completion was polled, so every write the client issued before a request
 * is in the dirty tree before that request (an FSYNC) is dispatched: the
 * dirty tree stays the single source of truth. A notice naming pages outside
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
 * plus pool jobs at CONN_RDMA_MAX_PENDING, or a barrier) the grants of
 * messages carrying frame bytes are held back, so a client can have at most
 * CONN_RDMA_CREDITS messages buffered beyond the frame being parsed.
 *
 * End: on a disconnect, a completion error, a protocol error or a drain,
 * the connection stops taking requests, waits for its jobs, sends what is
 * queued (not after an error), deallocates its windows, destroys QP and CQ
 * (polling what is left: notices are still marked, SRQ buffers go back),
 * closes its volumes (in the metadata pool) and destroys its rdma_cm id.
 *
 * Thread safety: a set and its connections belong to one worker; only
 * conn_rdma_start() and conn_rdma_set_drain() are called from other
 * threads (they post to the worker).
 */
#ifndef RDAXD_CONN_RDMA_H
#define RDAXD_CONN_RDMA_H

#include <stdbool.h>
#include <stdint.h>

#include <ev.h>
#include <rdma/rdma_cma.h>

#include "dispatch.h"
#include "fsync_pool.h"
#include "rdma_dev.h"
#include "rdma_proto.h"
#include "worker.h"

/* Receives of the shared queue a client may use at once: its window of messages and notices. */
#define CONN_RDMA_CREDITS 32U
/* The most receives of the client's we use (its window may be larger): our send queue. */
#define CONN_RDMA_SEND_WINDOW_MAX 64U
/* Replies queued + requests in the pools, per connection (as over TCP). */
#define CONN_RDMA_MAX_PENDING 128U
/* Bytes of queued reply bodies and READ payload copies before the connection stops taking requests.
 */
#define CONN_RDMA_MAX_QUEUED (4U << 20)
/* Send buffers per worker and device. */
#define CONN_RDMA_TX_BUFS 256U
/* RDMA READs a client may have in flight on its QP (also capped by the device). */
#define CONN_RDMA_MAX_RD_ATOM 16U
/* After a drain starts, replies not sent by then are dropped after this many seconds. */
#define CONN_RDMA_DRAIN_TIMEOUT 10.0

struct conn_rdma;
struct conn_rdma_set;

/* What every RDMA connection of the daemon shares. */
struct conn_rdma_shared {
	const struct dispatch_env *env; /* copied per connection, with the RDMA hooks */
	struct fsync_pool *pool_fsync;
	struct fsync_pool *pool_meta;
	/*
	 * After a completion, keep polling that connection's CQ this many
	 * microseconds before letting the loop sleep (--rdma-busy-poll; 0: no
	 * spinning). A sleeping loop is woken through the completion channel
	 * per message, which costs a system call and a scheduler wake-up.
	 */
	unsigned busy_poll_us;
};

/* One device as seen by one worker: its completion channel and send buffers. */
struct conn_rdma_port {
	struct conn_rdma_set *set;
	struct rdma_dev *dev;
	struct ibv_comp_channel *channel;
	ev_io io;
	uint8_t *tx_slab; /* CONN_RDMA_TX_BUFS * dev->msg_size */
	struct ibv_mr *tx_mr;
	uint32_t tx_free[CONN_RDMA_TX_BUFS]; /* stack of free buffer indices */
	unsigned tx_nfree;
	bool tx_wanted; /* a connection waits for a buffer */
};

/* The RDMA connections of one worker. */
struct conn_rdma_set {
	struct worker *worker;
	const struct conn_rdma_shared *shared;
	struct rdma_event_channel *cm; /* the worker's rdma_cm events (migrated ids) */
	ev_io cm_io;
	struct conn_rdma_port **ports;
	unsigned nports;
	struct conn_rdma *conns;
	unsigned nconns;
	struct conn_rdma *flush; /* connections with output or grants to send */
	struct conn_rdma *dead;	 /* connections to free before the loop sleeps */
	ev_idle more;
	ev_timer drain_timer;
	bool draining;
	bool idle_reported;
	struct worker_msg drain_msg;
	void (*on_idle)(struct conn_rdma_set *set, void *arg);
	void *idle_arg;
	uint64_t accepted, closed;
};

/*
 * conn_rdma_set_new -- the RDMA connection set of @w: its rdma_cm event
 * channel, watched on the worker loop; registers the worker hook, so call
 * before worker_start(). Returns 0, -ENOMEM, -ENOSPC, -errno.
 */
int conn_rdma_set_new(struct worker *w, const struct conn_rdma_shared *shared,
		      void (*on_idle)(struct conn_rdma_set *set, void *arg), void *arg,
		      struct conn_rdma_set **out);

/*
 * conn_rdma_set_add_dev -- serve connections on @dev: a completion channel
 * watched on the worker loop and a pool of send buffers. Before
 * worker_start(). Returns 0, -ENOMEM, -errno.
 */
int conn_rdma_set_add_dev(struct conn_rdma_set *set, struct rdma_dev *dev);

/* conn_rdma_set_delete -- free a set without connections (after the drain); accepts NULL */
void conn_rdma_set_delete(struct conn_rdma_set **setp);

/*
 * conn_rdma_set_drain -- from any thread: every connection of the set stops
 * taking requests, lets those in flight finish and their replies go out (for
 * at most CONN_RDMA_DRAIN_TIMEOUT), then closes; on_idle when none is left.
 */
void conn_rdma_set_drain(struct conn_rdma_set *set);

/*
 * conn_rdma_start -- from the accept loop: take over the connection request
 * @id (its CONNECT_REQUEST event already acked) whose private data said
 * @cd and whose initiator depth (RDMA READs it wants in flight) is
 * @initiator_depth. Migrates @id to the set's channel and posts to the
 * worker, which sets up the QP and accepts (or rejects). Returns 0, or a
 * negative code after rejecting and destroying @id.
 */
int conn_rdma_start(struct conn_rdma_set *set, struct rdma_cm_id *id, const struct rdma_cm_data *cd,
		    uint8_t initiator_depth, const char *peer);

#endif
