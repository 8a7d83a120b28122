/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd_conn.h -- one NBD connection: a stream, its replies and its jobs
 *
 * An NBD client (qemu, nbd-client, libnbd, fio) reaches a volume by name:
 * the export name is the volume name. The connection is a socket stream
 * (stream.h) on one worker loop, like a native one, and uses the same
 * pools: whatever takes namespace locks (export lookup, list, the final
 * close of the volume) runs in the metadata pool, whatever writes back or
 * fences (FLUSH, FUA, TRIM, WRITE_ZEROES) in the fsync pool.
 *
 * The protocol has two phases, each in its own file:
 *
 *   nbd_handshake.c   FLAGS --4 bytes--> OPT_HEADER --16--> OPT_DATA (len <=
 *                     NBD_OPT_MAX_LEN, buffered) or OPT_SKIP (unknown option
 *                     or too long: read and dropped, never stored) --> a
 *                     reply, or OPT_WAIT while a pool job looks the export
 *                     up --> OPT_HEADER again, or after GO / EXPORT_NAME:
 *   nbd_transmission.c REQ_HEADER --28--> a WRITE's payload --> REQ_HEADER ...
 *
 * This file pair holds what both phases share: the connection, the reply
 * queue (option replies, simple and structured replies, READ data gathered
 * from the mapping when sent) and the jobs in the pools.
 *
 * Every length is checked before anything is allocated or received for it:
 * an option longer than NBD_OPT_SKIP_MAX, more than NBD_MAX_OPTIONS options,
 * a bad magic, unknown client flags, or a refused WRITE whose payload is
 * longer than NBD_WRITE_SKIP_MAX end the connection (the hard disconnect the
 * protocol allows); everything else gets the error the protocol document
 * prescribes and the connection goes on. A refused WRITE is answered after
 * its payload has been read (and dropped), never while the client may
 * still be sending it.
 *
 * Data path: an accepted WRITE's payload is received straight into the
 * volume's mapping (stream_payload_begin) and marked in the dirty tree
 * before the reply; a READ reply is gathered straight from the mapping when
 * it is sent. A WRITE (or TRIM/WRITE_ZEROES) over the range of a READ reply
 * of this connection that is still queued waits until that reply has left
 * (the stream's read-after-write rule), so a READ never returns bytes of a
 * request the client sent after it. Requests are pipelined; a FLUSH or FUA
 * write is answered from the fsync pool, possibly after replies to later
 * requests (the protocol allows any order; handles are echoed) -- except a
 * FUA write of at most VOL_OP_INLINE_MAX bytes, or a FLUSH while the
 * volume's dirty set is that small, whose fsync can start without waiting:
 * it runs on the loop and is answered at once (the one inline rule of
 * vol_op.h, which also picks every job's pool). Backpressure: replies queued
 * plus jobs in the pools are bounded by NBD_CONN_MAX_PENDING per connection
 * (resume at half).
 *
 * An exported volume is opened (counted as an opener) for as long as the
 * connection lives, so it cannot be deleted meanwhile (EBUSY); the socket
 * closes only after the volume was closed again.
 *
 * Thread safety: a connection belongs to its worker's thread, except
 * nbd_conn_start(), which posts to it.
 */
#ifndef RDAXD_NBD_CONN_H
#define RDAXD_NBD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acl.h"
#include "namespace.h"
#include "nbd_forward.h"
#include "nbd_proto.h"
#include "store.h"
#include "stream.h"
#include "tls_server.h"
#include "vol_op.h"
#include "volume.h"

struct gate_vol;

/* Block size constraints advertised with NBD_INFO_BLOCK_SIZE. */
#define NBD_MIN_BLOCK	    1U		/* any byte offset and length works */
#define NBD_PREFERRED_BLOCK 4096U	/* the dirty tree's page */
#define NBD_MAX_BLOCK	    (32U << 20) /* READ/WRITE/WRITE_ZEROES length; 2^25 as clients expect */

/* Option data read into memory; longer known options are skipped and refused. */
#define NBD_OPT_MAX_LEN (8U << 10)
/* Longer options than this are taken as a denial of service: hard disconnect. */
#define NBD_OPT_SKIP_MAX (1U << 20)
/* Options per connection before the server gives up on the client. */
#define NBD_MAX_OPTIONS 4096
/* A refused WRITE's payload is read and dropped up to this length; longer: hard disconnect. */
#define NBD_WRITE_SKIP_MAX (64U << 20)
/* Replies queued + jobs in the pools, per connection. */
#define NBD_CONN_MAX_PENDING 256
/* Input buffer: request headers, option data (>= NBD_OPT_MAX_LEN + a header). */
#define NBD_INBUF_SIZE (64U << 10)
/* Room for a reply's header bytes: option replies (names, messages) and error chunks. */
#define NBD_OUT_INLINE (NBD_OPT_REPLY_HEADER_SIZE + 4 + NS_VOLUME_NAME_MAX + NBD_MESSAGE_MAX)

/* What every NBD connection of the daemon shares. */
struct nbd_shared {
	struct store *store;
	struct vol_pools pools;	    /* FLUSH, FUA, TRIM, WRITE_ZEROES; export lookup, list, close */
	enum flush_mode flush_mode; /* the daemon's; each fsync's by vol_op_flush_mode() */
	uint32_t max_block;	    /* <= NBD_MAX_BLOCK */
	const struct tls_server *tls; /* NULL: --tls off (NBD_OPT_STARTTLS refused) */
	const struct acl *acl;	      /* NULL: every client sees and writes every volume */
	/*
	 * A cluster node (rdaxd --cluster; NULL etcd otherwise): a volume it is
	 * not primary of is exported by forwarding to the primary (nbd_forward.h),
	 * looked up in etcd (cluster_dir.h); the look-ups, connects and resumes
	 * run in the forwarding pool
	 */
	const char *etcd, *cluster_name;
	const char *token_file; /* where the forwarding connections find the cluster's token */
	struct fsync_pool *forward;
};

/*
 * nbd_conn_start -- from any thread: serve NBD on the connected,
 * non-blocking socket @fd from @peer, holding *@slot, on @set's worker,
 * which sends the greeting and owns the socket from then on. With
 * @refusal (over a connection limit), every option is answered
 * NBD_REP_ERR_POLICY with @refusal, and NBD_OPT_EXPORT_NAME ends the
 * connection. Returns 0, -EINVAL (bad @sh), or -ENOMEM (@fd is closed and
 * @slot given back in both cases).
 */
int nbd_conn_start(struct conn_set *set, const struct nbd_shared *sh, int fd, const char *peer,
		   struct conn_slot *slot, const char *refusal);

/* ---- inside the NBD server: what nbd_handshake.c and nbd_transmission.c share ---- */

enum nbd_phase {
	PH_FLAGS,      /* the client's flags */
	PH_OPT_HEADER, /* option haggling */
	PH_OPT_DATA,   /* an option's data, buffered */
	PH_OPT_SKIP,   /* an option's data, dropped */
	PH_OPT_WAIT,   /* a pool job answers the option */
	PH_REQ_HEADER, /* transmission */
};

enum nbd_job_kind {
	JOB_EXPORT,  /* meta: GO / EXPORT_NAME opens, INFO looks up */
	JOB_FORWARD, /* forward pool: a cluster volume not served here, looked up, connected */
	JOB_LIST,    /* meta: every volume (forward pool on a cluster node: the cluster's too) */
	JOB_CLOSE,   /* meta: close the exported volume (teardown) */
	JOB_FLUSH,   /* fsync: whole volume */
	JOB_FUA,     /* fsync: the range of a WRITE just marked */
	JOB_ZERO,    /* fsync: TRIM / WRITE_ZEROES = volume_discard */
};

/* A request or option waiting for its volume operation (vol_op.h): op.code its result. */
struct nbd_job {
	struct vol_op op;
	struct nbd_conn *c;
	enum nbd_job_kind kind;
	/* JOB_EXPORT, JOB_LIST */
	uint32_t option;
	char name[NS_VOLUME_NAME_MAX + 1];
	bool want_name, want_description;
	/* JOB_FORWARD: the forwarder made (GO, EXPORT_NAME), or why not; a local volume first */
	bool local_first; /* no copy here: a plain local volume, if the cluster has none */
	bool forwarded;	  /* INFO: a cluster volume this node would forward */
	struct nbd_forward *fwd;
	char why[NBD_MESSAGE_MAX];
	/* request jobs */
	uint64_t handle;
	uint16_t type;
	uint64_t offset;
	uint32_t length;
};

struct nbd_conn {
	struct stream s;
	const struct nbd_shared *sh;
	enum nbd_phase phase;

	/* handshake */
	char *refusal;	 /* over a connection limit: every option is refused with this */
	bool no_zeroes;	 /* NBD_FLAG_C_NO_ZEROES */
	bool structured; /* NBD_OPT_STRUCTURED_REPLY acknowledged */
	unsigned noptions;
	uint32_t opt, opt_len, opt_got;
	struct acl_subject who; /* a TLS name once the handshake is done; local */
	bool ro;		/* the export is read-only for this client (acl.h) */

	/* transmission */
	struct volume *v;	 /* the export, open while the connection lives */
	struct gate_vol *gate;	 /* a cluster volume's gate (served here as its primary), or NULL */
	struct nbd_forward *fwd; /* or: the export forwarded to its primary (nbd_forward.h) */
	uint64_t size;		 /* the export's size */
	uint8_t *wbuf;		 /* a forwarded WRITE's payload being received */
	struct nbd_request req;	 /* the WRITE whose payload is being received */
	/*
	 * A refused WRITE: its error, sent once its payload has been read and
	 * dropped. Sent before, it reaches a client still sending that payload,
	 * which has no request to match it to yet (libnbd drops the connection).
	 */
	uint32_t refused_error; /* 0: the payload is an accepted WRITE's */
	char refused_msg[NBD_MESSAGE_MAX];
	uint64_t requests;
};

/* nbd_queue_bytes -- a reply made of @len raw bytes (len <= NBD_OUT_INLINE) */
void nbd_queue_bytes(struct nbd_conn *c, const void *buf, size_t len);

/* nbd_opt_reply -- an option reply with @len bytes of @data (cut to what fits) */
void nbd_opt_reply(struct nbd_conn *c, uint32_t option, uint32_t type, const void *data,
		   size_t len);

/* nbd_opt_error -- an option error reply with a message for humans */
void nbd_opt_error(struct nbd_conn *c, uint32_t option, uint32_t type, const char *msg);

/* nbd_req_ok -- a successful reply without data */
void nbd_req_ok(struct nbd_conn *c, const struct nbd_request *r);

/* nbd_req_error -- an error reply: a structured error chunk with @msg if negotiated */
void nbd_req_error(struct nbd_conn *c, uint64_t handle, uint16_t type, uint32_t error,
		   const char *msg);

/* nbd_req_read -- the reply to a valid READ: header, then the data gathered from the mapping */
void nbd_req_read(struct nbd_conn *c, const struct nbd_request *r);

/* nbd_job_new -- a job of @kind for @c; NULL if out of memory (logged) */
struct nbd_job *nbd_job_new(struct nbd_conn *c, enum nbd_job_kind kind);

/* nbd_job_submit -- start @j (inline or in its pool), or park it behind READ replies */
void nbd_job_submit(struct nbd_conn *c, struct nbd_job *j);

/* nbd_job_run_in -- run @j as @run(&j->op) on a thread of @pool; its end as any job's */
void nbd_job_run_in(struct nbd_conn *c, struct nbd_job *j, struct fsync_pool *pool,
		    void (*run)(struct vol_op *op));

/* nbd_req_read_buf -- the reply to a valid READ with the @r->length bytes of @buf (taken: freed) */
void nbd_req_read_buf(struct nbd_conn *c, const struct nbd_request *r, uint8_t *buf);

/* nbd_forward_kick -- the forwarder's kick (nbd_forward_start): the connection may go on */
void nbd_forward_kick(void *arg);

/* nbd_handshake_input -- one input step of the handshake phase (stream_proto.input) */
bool nbd_handshake_input(struct nbd_conn *c);

/*
 * nbd_handshake_opt_check -- what the handshake does with an option header,
 * the @noptions'th of the connection. Returns 0 with *read true (its data is
 * read into memory and handled: an option this server reads, at most
 * NBD_OPT_MAX_LEN bytes) or false (the data is skipped unread, then the
 * option refused), or -EPROTO (bad magic), -E2BIG (more than
 * NBD_MAX_OPTIONS options), -EMSGSIZE (over NBD_OPT_SKIP_MAX bytes of
 * data): the connection closes. Pure: the option fuzzer calls it too.
 */
int nbd_handshake_opt_check(const struct nbd_opt_header *h, unsigned noptions, bool *read);

/*
 * nbd_handshake_name_check -- the @len bytes at @name (not NUL-terminated)
 * as an export's volume name: 0 with the name NUL-terminated in @copy, or
 * -EINVAL (empty, too long, not a valid volume name, a NUL byte inside).
 */
int nbd_handshake_name_check(const char *name, size_t len, char copy[NS_VOLUME_NAME_MAX + 1]);

/* nbd_handshake_usable -- after EOF: could @avail bytes make a handshake step? */
bool nbd_handshake_usable(const struct nbd_conn *c, size_t avail);

/* nbd_handshake_job_done -- an export or list job of the handshake came back */
void nbd_handshake_job_done(struct nbd_conn *c, struct nbd_job *j);

/* nbd_transmission_input -- one request header (stream_proto.input in transmission) */
bool nbd_transmission_input(struct nbd_conn *c);

/* nbd_transmission_payload_done -- a WRITE's payload is all in (or was dropped) */
void nbd_transmission_payload_done(struct nbd_conn *c, bool kept);

/* nbd_transmission_want_input -- may another request be read now? */
bool nbd_transmission_want_input(const struct nbd_conn *c);

/* nbd_transmission_job_done -- a request's job (FLUSH, FUA, TRIM, WRITE_ZEROES) came back */
void nbd_transmission_job_done(struct nbd_conn *c, struct nbd_job *j);

#endif
