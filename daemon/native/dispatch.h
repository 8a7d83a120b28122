/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dispatch.h -- one request in, one reply out; no sockets
 *
 * The connection core (native_conn.h, over TCP or RDMA) frames bytes;
 * dispatch decides. It checks the header (dispatch_header), decodes the
 * body, validates the request in one function against the session and the
 * volume (handle open on this connection, range_check against the volume
 * size, payload length, limits), and then either answers at once or tells
 * the transport what to do next:
 *
 *   DISPATCH_REPLY    send the reply
 *   DISPATCH_CLOSE    send the reply, then close the connection (bad header,
 *                     undecodable body, HELLO missing, refused or wrong
 *                     version/token)
 *   DISPATCH_PAYLOAD  a WRITE: receive payload_len bytes into payload_dst --
 *                     inside the volume's mapping, already range-checked --
 *                     then call dispatch_payload_done(). payload_dst NULL: the
 *                     WRITE was refused; read and drop its payload, and send
 *                     the refusal in reply now.
 *   DISPATCH_JOB      start job->op with vol_op_start() (inline, or in its
 *                     pool), call dispatch_job_finish() on the connection's
 *                     thread when it has run. An ordered
 *                     job (job->ordered) is a barrier: the transport handles
 *                     no later request of the connection before its reply.
 *                     Unordered jobs (FSYNC, WRITE with fsync) let later
 *                     requests go ahead; their replies may come later.
 *   DISPATCH_NONE     nothing to send (the end of a connection's teardown)
 *   DISPATCH_DROP     send nothing, drop the connection now: a data request
 *                     completed after a power cut was decided, and nothing
 *                     is acknowledged after the cut (powercut.h, vol_ack.h)
 *
 * Which requests become jobs: whatever may block -- fsync and discard (the
 * data pool); hello, volume create/delete/list/info/open/close (the metadata
 * pool: they take namespace locks, and create zeroes the new volume).
 * WRITE, READ, STAT and POWERCUT (which only arms the cut) run on the loop.
 *
 * Every acknowledgement of a WRITE, DISCARD or FSYNC goes through vol_ack.h
 * (the power cut's gate, then the write log) right before its reply.
 *
 * Every reply body starts with field 1, the Status (proto/rdax.proto), so an
 * error reply is packed as a StatusReply whatever the request type: a
 * client decodes it as the reply type it expects and sees only the status.
 *
 * Thread safety: every function runs on the session's thread, except a job's
 * operation (job->op), which may run on a pool thread and touches only the job, the store
 * and the volume it holds.
 */
#ifndef RDAXD_DISPATCH_H
#define RDAXD_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "fsync_pool.h"
#include "session.h"
#include "store.h"
#include "vol_op.h"
#include "volume.h"

/* Largest reply body a client accepts (wire conventions): a list of 1024 volumes fits. */
#define DISPATCH_MAX_REPLY_BODY (16U << 20)

/* REPLICA_DIGEST covers at most this many bytes (docs/protocol.md) */
#define DISPATCH_DIGEST_MAX (64U << 20)

/* What a transport with direct data access (RDMA) adds to a VOLUME_OPEN reply. */
struct dispatch_direct {
	uint64_t remote_addr;	 /* where the volume starts in the daemon's address space */
	uint32_t rkey;		 /* remote key that reaches exactly the volume */
	uint32_t imm_volume_id;	 /* the volume's range in the connection's write notices */
	uint32_t imm_unit_shift; /* its unit: RDMA_IMM_SHIFT_LINE or _PAGE (rdma_proto.h) */
	bool imm_durable;	 /* its notices' D bit is taken (rdma_proto.h) */
};

/*
 * Transport hooks, called on the connection's thread with env->hook_arg
 * (the transport's connection): a transport that lets clients reach
 * volumes directly grants and revokes that access with the handles.
 */
struct gate_vol;

struct dispatch_hooks {
	/*
	 * volume_opened -- @v was opened as @handle: give the client direct
	 * access and describe it in *out. @gate: the cluster volume's gate
	 * (cluster_gate.h), NULL for others; @epoch: a replica link's epoch, 0
	 * for a client (a replica link's window is revoked when a newer epoch
	 * is seen, a client's when this node stops serving the volume).
	 * @want_lines: the client asked to name 64-byte lines in its write
	 * notices (VolumeOpenRequest.imm_line_units), which the transport may
	 * grant or not (out->imm_unit_shift). 0, or a negative code: the open
	 * then fails with it (the handle is closed again).
	 */
	int (*volume_opened)(void *arg, uint32_t handle, struct volume *v, struct gate_vol *gate,
			     uint64_t epoch, bool want_lines, struct dispatch_direct *out);
	/* volume_closed -- @handle was closed by the client: revoke its direct access now */
	void (*volume_closed)(void *arg, uint32_t handle);
};

struct dispatch_env {
	struct store *store;
	uint32_t max_payload;
	uint32_t max_body;
	const uint8_t *token; /* NULL: no token needed */
	size_t token_len;
	const struct acl *acl;	    /* NULL: every client has every right (acl.h) */
	enum flush_mode flush_mode; /* FLUSH_TRACKED or FLUSH_HAMMER: for every fsync */
	const char *server_version;
	const char *const *transports; /* reported in HELLO */
	unsigned ntransports;
	/* --cluster: a VOLUME_DELETE of a cluster volume runs its Delete txn (cluster_delete.h) */
	const char *cluster_etcd; /* NULL: not a cluster node */
	const char *cluster_name;
	const struct dispatch_hooks *hooks; /* NULL: none (TCP) */
	void *hook_arg;			    /* per connection: the transport's own env copy */
};

/* A reply ready to be framed: header fields, packed body and an optional payload. */
struct dispatch_reply {
	uint16_t type; /* the request's type | FRAME_REPLY (FRAME_REPLY alone: bad header) */
	uint64_t request_id;
	uint8_t *body; /* malloc'd, or shared (body_static) */
	uint32_t body_len;
	const uint8_t *payload; /* READ: inside the volume mapping */
	uint32_t payload_len;
	uint32_t hold;	       /* handle held until the reply is sent (0: none) */
	struct volume *volume; /* READ: the volume read ... */
	uint64_t offset;       /* ... and where, for write-after-read ordering */
	int code;	       /* the status: 0, or the error's negative code (metrics) */
	/*
	 * body is a shared constant (the status-only success reply, packed
	 * once), never written to: dispatch_reply_release() does not free it.
	 * Transports only read body and release replies, so they need not care.
	 */
	bool body_static;
	/*
	 * a small body packed per reply (a plain write's status and verifier):
	 * body points here, body_static is set; a transport that copies the
	 * structure points body at its copy's inline_body
	 */
	uint8_t inline_body[16];
};

enum dispatch_action {
	DISPATCH_NONE,
	DISPATCH_REPLY,
	DISPATCH_CLOSE,
	DISPATCH_PAYLOAD,
	DISPATCH_JOB,
	DISPATCH_DROP,
};

/* A WRITE between its request and the end of its payload. */
struct dispatch_write {
	uint64_t request_id;
	uint32_t hold; /* the handle held while the payload lands; 0 if refused */
	struct volume *v;
	uint64_t offset;
	uint32_t len;
	bool fsync;
};

/* The part of a job the transport sees; dispatch.c embeds it in its own. */
struct dispatch_job {
	struct vol_op op; /* what runs: the transport starts it with vol_op_start() */
	void *owner;	  /* the transport's connection */
	bool ordered;
	/*
	 * The range the job changes (DISCARD), NULL volume if none: the
	 * transport starts it only when no READ reply over that range is
	 * still waiting to be sent, as for a WRITE's payload.
	 */
	struct volume *mod_volume;
	uint64_t mod_offset, mod_len;
};

struct dispatch_out {
	enum dispatch_action action;
	struct dispatch_reply reply; /* REPLY, CLOSE; PAYLOAD when reply.body != NULL */
	uint8_t *payload_dst;	     /* PAYLOAD; NULL: drop the payload */
	uint32_t payload_len;
	struct dispatch_write write; /* PAYLOAD */
	struct dispatch_job *job;    /* JOB */
};

/*
 * dispatch_header -- decode and check a request header (frame_header_check
 * against env's limits) before anything is read or allocated for its body.
 * Returns 0 with *h filled, or a negative code with *out a DISPATCH_CLOSE
 * reply of type FRAME_REPLY naming the error and echoing the request id.
 */
int dispatch_header(const struct dispatch_env *env, const uint8_t raw[FRAME_HEADER_SIZE],
		    struct frame_header *h, struct dispatch_out *out);

/*
 * dispatch_refuse -- the answer of a connection the daemon refuses (over a
 * connection limit): a DISPATCH_CLOSE error reply with @code and @msg, of
 * @h's type and id (type 0 and id 0: a frame of type FRAME_REPLY that
 * answers no request, sent before any).
 */
void dispatch_refuse(const struct frame_header *h, int code, const char *msg,
		     struct dispatch_out *out);

/*
 * dispatch_request -- decode @body (h->body_len bytes) and act on the
 * request. @h passed dispatch_header(). *out says what the transport does
 * next (see the top of this file).
 */
void dispatch_request(const struct dispatch_env *env, struct session *s,
		      const struct frame_header *h, const uint8_t *body, struct dispatch_out *out);

/*
 * dispatch_payload_done -- the whole payload of an accepted WRITE landed at
 * payload_dst: mark it written, then reply (DISPATCH_REPLY) or, with fsync
 * set, make it durable first (DISPATCH_JOB, unordered).
 */
void dispatch_payload_done(const struct dispatch_env *env, struct session *s,
			   struct dispatch_write *w, struct dispatch_out *out);

/*
 * dispatch_payload_abort -- the connection ended after @received bytes of
 * an accepted WRITE's payload: they are in the mapping, so they are marked
 * written (a later fsync covers them; the write was never acknowledged),
 * and the hold is dropped. No reply.
 */
void dispatch_payload_abort(struct session *s, struct dispatch_write *w, uint32_t received);

/*
 * dispatch_job_finish -- on the connection's thread after job->op ran:
 * apply the result to the session (a new handle, a dropped hold) and build
 * the reply into *out (DISPATCH_REPLY, or DISPATCH_NONE for a teardown).
 * Frees the job.
 */
void dispatch_job_finish(const struct dispatch_env *env, struct session *s,
			 struct dispatch_job *job, struct dispatch_out *out);

/*
 * dispatch_teardown_job -- a job (metadata pool) that closes every volume of
 * a finished connection and frees the session, off the event loop. Takes
 * *sp (sets it NULL). Returns NULL if out of memory: then the session was
 * deleted on the spot.
 */
struct dispatch_job *dispatch_teardown_job(struct session **sp);

/*
 * dispatch_reply_error -- build into @r (released or empty) an error reply
 * to request @request_id of @type (FRAME_REPLY may be set) with @code and
 * @msg: for a transport that finds a failure after dispatch answered (a
 * READ whose copy out of the mapping met a bad page). 0 or -ENOMEM.
 */
int dispatch_reply_error(struct dispatch_reply *r, uint16_t type, uint64_t request_id, int code,
			 const char *msg);

/* dispatch_reply_release -- free the body and drop the hold of a reply (sent or not) */
void dispatch_reply_release(struct session *s, struct dispatch_reply *r);

/* dispatch_token_equal -- compare a token in time independent of where they differ */
bool dispatch_token_equal(const uint8_t *want, size_t want_len, const uint8_t *got, size_t got_len);

#endif
