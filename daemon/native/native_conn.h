/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * native_conn.h -- the rdax protocol on one connection, whatever carries its bytes
 *
 * The native protocol is a byte stream of frames (frame.h) over a TCP socket
 * or over RDMA messages (rdma_proto.h); both carry it in a stream (stream.h)
 * and this core does the rest. Input is a state machine over the stream's
 * bounded buffer:
 *
 *   HEADER --(32 bytes, dispatch_header ok)--> BODY --(body_len bytes,
 *   dispatch_request)--> HEADER, or PAYLOAD for a WRITE --(payload_len
 *   bytes)--> HEADER
 *
 * The header is checked before the buffer grows for the body (at most
 * FRAME_HEADER_SIZE + max_body). Where an accepted WRITE's payload goes is
 * the stream's business (stream_payload_begin): received straight into the
 * volume mapping over a socket, copied from the messages over RDMA, whose
 * large writes go one-sided and are announced by notices instead
 * (rdma_conn.h). A refused WRITE's payload is read and dropped.
 *
 * Requests are pipelined: frames are dispatched as they arrive, replies are
 * queued on the stream and sent before the loop sleeps, READ payloads
 * gathered straight from the mapping (or copied when queued, where the
 * transport asks for snapshots: RDMA, whose one-sided writes bypass the
 * stream). Backpressure: at the transport's limits the connection stops
 * dispatching until its backlog drains to half. An ordered job (dispatch.h)
 * stops dispatch until its reply is queued. An fsync with little to write
 * back (a range of at most VOL_OP_INLINE_MAX bytes, or any range while the
 * volume's dirty set is that small) runs on the loop itself when
 * vol_op_start() takes it (vol_op.h); its reply is then queued at once,
 * after the fence.
 *
 * Write after read: a WRITE or a DISCARD whose range overlaps a READ reply
 * still queued on this connection waits until that reply has left (the
 * stream's read-after-write rule; the DISCARD's job is parked).
 *
 * End: the session's volumes are closed in the metadata pool (that takes
 * namespace locks) by the teardown job.
 *
 * Thread safety: a connection belongs to its worker's thread;
 * native_conn_start_socket() may be called from any thread (it posts).
 */
#ifndef RDAXD_NATIVE_CONN_H
#define RDAXD_NATIVE_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatch.h"
#include "frame.h"
#include "metrics.h"
#include "stream.h"
#include "tls_server.h"

/* Replies queued + requests in the pools, per connection. */
#define NATIVE_MAX_PENDING 128
/* Bytes of queued reply bodies (and of READ payload copies where they are copied). */
#define NATIVE_MAX_QUEUED (4U << 20)
/* First size of the input buffer of a socket connection. */
#define NATIVE_INBUF_MIN (16U << 10)
/*
 * Sent reply structures kept for reuse per connection, instead of a calloc
 * and a free per reply: enough for a client with 32 writes in flight and
 * their replies queued twice over.
 */
#define NATIVE_SPARE_REPLIES 64

/* What every native connection of the daemon shares. */
struct native_shared {
	const struct dispatch_env *env;
	struct vol_pools pools;	      /* fsync and discard; hello, volume metadata, teardown */
	const struct tls_server *tls; /* NULL: --tls off (socket connections only) */
};

struct native_conn;

/* What the transport under the core decides. */
struct native_transport {
	/* READ payloads copied when queued (the mapping may change under them otherwise) */
	bool snapshot_reads;
	/* the "transport" label of its requests in the metrics */
	enum metrics_transport metrics;
	/* free -- the transport's connection around @nc (after the stream was released) */
	void (*free)(struct native_conn *nc);
};

enum native_rstate { NATIVE_HEADER, NATIVE_BODY };

struct native_conn {
	struct stream s;
	const struct native_transport *t;
	const struct native_shared *sh;
	const struct dispatch_env *env; /* sh->env, or the transport's copy with its hooks */
	struct session *session;
	enum native_rstate rstate;
	struct frame_header hdr;
	struct dispatch_write pw;   /* the WRITE whose payload is being received */
	unsigned barrier;	    /* ordered jobs in the pools */
	struct native_reply *spare; /* sent replies kept for reuse, NATIVE_SPARE_REPLIES at most */
	unsigned nspare;
	char *refusal; /* over a connection limit: the first request gets this, then the end */
	bool refused;  /* the refusal is queued */
};

/* The native protocol's side of a stream (stream.h). */
extern const struct stream_proto native_proto;

/*
 * native_conn_init -- the core of a new connection from @peer on @set, over
 * the transport's @conn_ops and @t, its input buffer from @in_min bytes up to
 * @in_extra bytes beyond the largest frame. Returns 0 or -ENOMEM.
 */
int native_conn_init(struct native_conn *nc, struct conn_set *set, const struct conn_ops *conn_ops,
		     const struct native_transport *t, const struct native_shared *sh,
		     size_t in_min, size_t in_extra, const char *peer);

/*
 * native_conn_blocked -- a whole header is buffered but may not be
 * dispatched now (backpressure, a barrier): what a transport that grants
 * credits waits for before it grants more.
 */
bool native_conn_blocked(const struct native_conn *nc);

/*
 * native_conn_refuse -- the connection is over a connection limit: once
 * started it sends one frame of type FRAME_REPLY, request id 0, status
 * -EUSERS and @why, and ends. 0 or -ENOMEM.
 */
int native_conn_refuse(struct native_conn *nc, const char *why);

/*
 * native_conn_start_socket -- from any thread: serve the native protocol
 * on the connected, non-blocking socket @fd from @peer, holding *@slot, on
 * @set's worker, which owns it from now on (@refusal: see listener.h).
 * Returns 0, or -ENOMEM (then @fd is closed and @slot given back).
 */
int native_conn_start_socket(struct conn_set *set, const struct native_shared *sh, int fd,
			     const char *peer, struct conn_slot *slot, const char *refusal);

#endif
