/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conn.h -- inside a librdax connection: operations, requests, the socket
 *
 * An operation (struct conn_op) is what a caller asked for: one write of any
 * length, one read, one fsync, one control request. It is carried by one or
 * more wire requests (struct conn_req, one frame each), created lazily as the
 * in-flight window allows, strictly in submission order of the operations
 * (a write followed by an fsync reaches the server in that order).
 *
 *   caller ──op──▶ active list ──parts──▶ send queue ──▶ socket
 *                                           │
 *                      in-flight list ◀─────┘ (awaiting the reply, by id)
 *
 * A request is finished when it is both fully sent and answered (the server
 * may answer a refused WRITE before its payload is all sent; the payload
 * still has to go, and the caller's buffer must live until then). An
 * operation is finished when all its requests are.
 *
 * The socket is non-blocking; one loop (conn_run) sends queued requests and
 * receives replies as either side is ready, so a large write never blocks
 * while the server waits for us to read its replies.
 *
 * Over rdma:// (c->rdma) the frames go through transport_rdma's message
 * stream instead of a socket, and the WRITE and READ requests of a volume
 * opened with direct access are one-sided RDMA operations (req->direct):
 * posted from the send queue in order with the frames -- so an FSYNC
 * queued after a write reaches the daemon after the write's notice -- and
 * finished by their completion instead of a reply. A durable write of one
 * part, on a volume whose daemon takes durable notices, is one one-sided
 * write whose notice asks for durability, answered by the daemon's FSYNC
 * reply (req->durable_notice, rdma_proto.h); a longer one is the one-sided
 * writes followed by one FSYNC of the range.
 *
 * Thread safety: none; the caller serialises all use of a connection.
 */
#ifndef RDAX_CLIENT_CONN_H
#define RDAX_CLIENT_CONN_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#include "held.h"
#include "librdax.h"
#include "tls_client.h"
#include "tls_io.h"
#include "spin_window.h"
#include "url.h"

/* Largest reply body accepted (a volume list of 1024 volumes fits easily). */
#define CONN_MAX_REPLY_BODY (16U << 20)
/* Receive buffer for headers and small bodies; larger reads go straight to their target. */
#define CONN_RX_BUF_SIZE (64U << 10)
/* Payload bytes in flight: at least this, or CONN_INFLIGHT_PAYLOADS requests' worth. */
#define CONN_MIN_INFLIGHT_BYTES (16ULL << 20)
#define CONN_INFLIGHT_PAYLOADS	4
/* Length of the detailed error messages kept. */
#define CONN_ERR_MAX 512
/* Addresses one connection may be given (rdax_connect's comma-separated list). */
#define CONN_MAX_URLS 16
/* Longest address a primary is named by (Status.primary_url). */
#define CONN_URL_MAX 128

enum conn_op_kind { OP_CONTROL, OP_WRITE, OP_READ, OP_FSYNC };

/* What a lost connection does to a control operation in flight (resume.h). */
enum conn_ctl_resume {
	CTL_FAIL,	  /* not idempotent (create, delete): fails with the loss */
	CTL_RESEND,	  /* sent again on the new connection (open, list, info, discard, stat) */
	CTL_DONE_ON_LOSS, /* close: the handle died with the connection; done */
};

struct conn_op {
	struct conn_op *prev, *next; /* in the connection's active list */
	enum conn_op_kind kind;
	bool async;
	uint64_t cookie;
	struct rdax_volume *vol; /* data operations */

	/* data operations: what is asked */
	uint64_t offset, length;
	const uint8_t *wbuf;
	uint8_t *rbuf;
	bool durable; /* write: RDAX_WRITE_FSYNC */
	bool hammer;  /* fsync: RDAX_FSYNC_HAMMER */

	/* control operation: the frame, header space first, filled in when issued */
	uint16_t ctl_type;
	uint8_t *ctl_frame;
	size_t ctl_len;
	ProtobufCMessage *reply; /* control: the unpacked reply, for the caller */
	/*
	 * a control request to send again after a reconnect: the caller's
	 * message (it waits, so it lives), packed anew with the volume's new
	 * handle written into *ctl_handle (NULL: no handle in it)
	 */
	enum conn_ctl_resume ctl_resume;
	const ProtobufCMessage *ctl_msg;
	uint32_t *ctl_handle;
	void *ctl_own; /* an asynchronous control op's own message (ctl_msg in it), freed with it */

	/* the verifier (held.h) */
	uint64_t seq;	       /* submission number on the connection */
	uint64_t verifier;     /* of the replies so far */
	bool has_verifier;     /* a reply carried one */
	bool verifier_mixed;   /* two replies carried different ones */
	bool internal;	       /* a resend of held bytes: nobody waits for it */
	struct held_buf *hbuf; /* internal: the copy it sends */
	unsigned redo;	       /* times sent again because the verifier changed under it */

	/* progress */
	uint64_t issued;     /* bytes of the range covered by requests made so far */
	bool tail_fsync;     /* a durable multi-request write still owes its FSYNC */
	bool all_issued;     /* no more requests will be made */
	unsigned parts_left; /* requests made and not yet finished */
	bool done;

	/* result */
	int status;	       /* 0 or negative; the first error of any part */
	char *errmsg;	       /* the server's message of that error, malloc'd, or NULL */
	uint64_t bytes;	       /* data moved by successful parts */
	uint64_t written_back; /* sum over FSYNC / durable WRITE replies */
};

struct conn_req {
	struct conn_req *next_send;   /* send queue */
	struct conn_req *prev, *next; /* in-flight list (not yet answered) */
	struct conn_op *op;
	uint64_t id;
	uint16_t type;
	uint8_t *buf; /* header + body: inline_buf or malloc'd */
	size_t buf_len;
	const uint8_t *payload; /* WRITE: the caller's data */
	uint32_t payload_len;
	size_t sent;	    /* bytes of buf, then payload, sent */
	uint8_t *read_dest; /* READ: where the reply's payload goes */
	uint32_t read_len;
	bool direct;	       /* RDMA: a one-sided WRITE/READ, no frame (transport_rdma.h) */
	bool durable_notice;   /* direct WRITE: its notice is durable; an FSYNC reply answers it */
	uint64_t offset;       /* direct: where in the volume */
	uint64_t window_bytes; /* counted in conn->inflight_bytes */
	bool sent_all, replied;
	int status;
	char *errmsg;
	uint64_t written_back;
	uint64_t verifier; /* WRITE, FSYNC: of the reply, if has_verifier */
	bool has_verifier;
	ProtobufCMessage *reply; /* control replies */
	uint8_t inline_buf[80];	 /* header + the small body of a data request */
};

struct conn_completion {
	struct rdax_completion c;
	char *errmsg; /* malloc'd, or NULL */
};

enum conn_rx_state { RX_HEADER, RX_BODY, RX_PAYLOAD };

struct conn_namespace {
	struct rdax_namespace_info info;
	char *path, *mode;
};

struct rdax_conn_opts {
	uint8_t *token;
	size_t token_len;
	char *client_name;
	int timeout_ms;
	unsigned queue_depth;
	unsigned busy_poll_us;
	char *tls_cert_dir; /* rdaxs:// */
	char *tls_psk_file;
	char *tls_username;
	int resume_ms;	     /* resume.h: 0 off */
	uint64_t write_hold; /* bytes of acknowledged writes kept to send again */
};

/* One address of the connection's list. */
struct conn_url {
	struct url u;
	char text[URL_HOST_MAX + 32]; /* as given, for messages */
};

struct rdma_tp;

/* A buffer of rdax_buffer_alloc: whole pages, mapped for the connection's life at most. */
struct conn_buffer {
	void *addr;
	size_t len;
};

struct rdax_conn {
	int fd;			      /* tcp:// */
	struct rdma_tp *rdma;	      /* rdma:// (fd is -1) */
	struct tls_io *tls;	      /* rdaxs://: the session over fd */
	struct tls_client *tls_creds; /* rdaxs://: what the session uses */
	char peer[URL_HOST_MAX + 16]; /* "HOST:PORT" or "[HOST]:PORT", for messages */

	/* limits and facts from HELLO */
	uint32_t max_payload; /* 0 until HELLO: no data requests */
	uint32_t max_body;
	char *server_version;
	uint64_t incarnation;  /* 0: the server sent none */
	bool powercut_allowed; /* rdaxd --allow-powercut */
	struct conn_namespace *namespaces;
	unsigned nnamespaces;

	int timeout_ms;	       /* idle limit of a waiting call; 0: none */
	int64_t last_activity; /* CLOCK_MONOTONIC ms of the last byte moved while waiting */
	unsigned queue_depth;
	struct spin_window spin; /* rdma://: how long to spin before sleeping (the opts' cap) */
	uint64_t max_inflight_bytes;

	/* operations */
	struct conn_op *ops_head, *ops_tail; /* unfinished, in submission order */
	struct conn_op *issue_cursor;	     /* first op that may still make requests */
	unsigned nasync;		     /* async ops submitted and not yet reaped */
	unsigned nasync_active;		     /* of those, not yet finished */
	struct conn_completion *cq;	     /* ring of queue_depth finished async ops */
	unsigned cq_head, cq_count;

	/* requests */
	uint64_t next_id;
	struct conn_req *sendq_head, *sendq_tail;
	struct conn_req *inflight_head, *inflight_tail;
	unsigned ninflight; /* requests not finished */
	uint64_t inflight_bytes;
	struct conn_req *req_spare; /* finished requests kept for reuse (next_send) */
	unsigned nreq_spare;

	/* receiving */
	enum conn_rx_state rx_state;
	uint8_t rx_hdr[32];
	size_t rx_got;
	uint32_t rx_body_len, rx_payload_len;
	uint16_t rx_type;
	uint64_t rx_id;
	uint8_t *rx_body;
	size_t rx_body_cap;
	struct conn_req *rx_req;
	uint8_t *rx_buf;
	size_t rx_start, rx_end;
	/*
	 * tcp://: the last recv() found the socket empty (EAGAIN, or fewer
	 * bytes than it asked for), so rx_fill() does not ask again until
	 * poll() reports input: a request then costs one send, one poll and
	 * one recv, not also an empty recv before the poll and another after
	 * the reply (strace: 2.9 recv per durable write, 1.9 of them EAGAIN).
	 */
	bool rx_sock_empty;
	/*
	 * conn_cork: requests submitted are queued, not sent, until conn_uncork
	 * (an owner submitting several at once sends them in one sendmsg)
	 */
	bool corked;

	/* errors */
	int broken; /* 0, or the code every call fails with */
	char broken_msg[CONN_ERR_MAX];
	char *closing_msg; /* a connection-level error reply: the server closes next */
	char last_error[CONN_ERR_MAX];
	/* the last refusal with RDAX_E_NOT_PRIMARY: where the primary is ("" if none) */
	char primary_url[128];

	/* rdax_buffer_alloc's buffers: registered on every rdma:// transport made */
	struct conn_buffer bufs[RDAX_BUFFERS_MAX];
	unsigned nbufs;

	unsigned nvolumes;
	struct rdax_volume *volumes; /* open ones, to open again after a reconnect */

	/* resuming (resume.h) */
	struct conn_url *urls; /* the addresses given; urls[cur] is the one in use */
	unsigned nurls, cur;
	char url_now[URL_HOST_MAX + 32]; /* the address connected to */
	struct rdax_conn_opts *opts;	 /* a copy, to connect again */
	int resume_ms;			 /* 0: a lost connection breaks it */
	struct held_budget budget;	 /* data copies of held writes */
	int lost;			 /* the stream was lost: resume before going on */
	char lost_msg[CONN_ERR_MAX];
	int64_t lost_at;	       /* CLOCK_MONOTONIC ms of the loss a resume answers */
	char follow_url[CONN_URL_MAX]; /* a primary named by a refusal: tried first */
	bool resuming;		       /* inside conn_resume: a failure fails the attempt */
	bool reverify;		       /* an fsync found its verifier changed: resume */
	unsigned resumes;	       /* successful resumes so far */
	/*
	 * the owner runs the resume itself, a round at a time (conn_resume_round),
	 * off the loop it runs the connection from: conn_run returns a loss
	 * instead of resuming (rdaxd's NBD forwarding, which must never sleep)
	 */
	bool resume_by_owner;
	int64_t resume_delay;	       /* the backoff before the next round (ms) */
	char resume_why[CONN_ERR_MAX]; /* the last round's failure */
	uint64_t next_seq;
};

struct rdax_volume {
	struct rdax_conn *conn;
	uint32_t handle;
	uint64_t size;
	bool direct; /* rdma://: writes and reads are one-sided (the fields below) */
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm_base;  /* its notice range's first unit (rdma_proto.h) */
	uint32_t imm_shift; /* and its unit: lines or pages */
	bool imm_durable;   /* its notices may be durable (rdma_proto.h, D) */
	char *name;
	unsigned ops_active;		 /* async operations not yet finished */
	struct rdax_volume *prev, *next; /* in conn->volumes */
	uint64_t epoch;			 /* the highest the cluster named for it; 0: none */
	uint64_t verifier;		 /* the server's, as last answered */
	struct held held;		 /* acknowledged writes since their fsync (resume only) */
	int gone; /* a reconnect could not open it again: its calls fail with this */
};

/*
 * conn_volume_open_replica -- rdax_volume_open as a cluster primary's replica
 * link (rdaxd's, docs/cluster.md): the sender @primary at @epoch; the
 * replica refuses an older epoch (-RDAX_E_STALE_EPOCH) or a sender that is
 * not the primary (-RDAX_E_NOT_PRIMARY). Not part of the public API.
 */
int conn_volume_open_replica(struct rdax_conn *conn, const char *name, uint64_t epoch,
			     const char *primary, uint64_t incarnation, struct rdax_volume **volp);

/*
 * conn_replica_digest -- REPLICA_DIGEST on a replica link's volume: 16 bytes
 * (XXH3-128, canonical) per @block_size block of [offset, offset + length)
 * into @out (@outlen >= length / block_size * 16). Synchronous. Returns 0,
 * the server's refusal, -RDAX_E_PROTOCOL (a reply of the wrong size), or a
 * connection error. Not part of the public API.
 */
int conn_replica_digest(struct rdax_volume *vol, uint64_t offset, uint64_t length,
			uint32_t block_size, uint8_t *out, size_t outlen);

/* conn_new -- an unconnected connection with @opts applied (NULL: defaults); 0 or -ENOMEM */
int conn_new(const struct rdax_conn_opts *opts, struct rdax_conn **out);

/* conn_delete -- close the socket, drop every operation without completing it, free */
void conn_delete(struct rdax_conn **cp);

/*
 * conn_connect -- resolve @host/@port and connect the socket (non-blocking
 * afterwards, TCP_NODELAY). @numeric_host: @host is an IPv6 literal.
 * Returns 0, -EHOSTUNREACH/-EAGAIN (lookup), -errno of connect, -ETIMEDOUT;
 * @err says why.
 */
int conn_connect(struct rdax_conn *c, const char *host, const char *port, bool numeric_host,
		 char *err, size_t errlen);

/*
 * conn_start_tls -- rdaxs://: TLS over the connected socket with @opts'
 * credentials, to @host (tls_client.h). 0, -ENOMEM, or the code of
 * tls_client_new / tls_client_handshake (@err says why).
 */
int conn_start_tls(struct rdax_conn *c, const struct rdax_conn_opts *opts, const char *host,
		   char *err, size_t errlen);

/*
 * conn_connect_rdma -- connect over RDMA to @host:@port (transport_rdma.h),
 * the request signed with the PSK of @opts if it names one (rdma_auth.h).
 * Returns 0 or -errno; @err says why.
 */
int conn_connect_rdma(struct rdax_conn *c, const struct rdax_conn_opts *opts, const char *host,
		      const char *port, bool numeric_host, char *err, size_t errlen);

/*
 * conn_set_error -- record the detailed message of a failed call (what
 * rdax_conn_last_error returns) and return @code.
 */
int conn_set_error(struct rdax_conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* conn_op_new -- an operation of @kind, zeroed; NULL when out of memory */
struct conn_op *conn_op_new(enum conn_op_kind kind);

/*
 * conn_op_new_control -- a control operation whose request is @msg packed as
 * a frame of @type. Returns 0, -RDAX_E_TOO_BIG (body above the server's
 * max_body), -ENOMEM.
 */
int conn_op_new_control(struct rdax_conn *c, uint16_t type, const ProtobufCMessage *msg,
			struct conn_op **out);

/* conn_op_free -- free a finished synchronous op (and its reply); accepts NULL */
void conn_op_free(struct conn_op *op);

/*
 * conn_op_submit -- queue @op behind every op submitted before it, then send
 * what the socket takes without blocking. The connection owns an async op
 * from here on; a sync op stays the caller's, to wait for with conn_op_wait.
 * Assumes: the connection is not broken, the op's arguments were checked.
 */
void conn_op_submit(struct rdax_conn *c, struct conn_op *op);

/*
 * conn_op_wait -- run the connection until the sync @op is finished; then
 * op->status says how it went (the connection's error if it broke).
 * Records the message of a failure as the last error. Returns op->status.
 */
int conn_op_wait(struct rdax_conn *c, struct conn_op *op);

/*
 * conn_reap -- run the connection until at least @min async completions are
 * ready, @timeout_ms passed (-1: no limit) or no async op is left running;
 * copy up to @max into @out. Returns the count, or the broken code when
 * nothing is left to return.
 */
int conn_reap(struct rdax_conn *c, struct rdax_completion *out, unsigned max, unsigned min,
	      int timeout_ms);

/*
 * conn_poll_prepare -- for an owner that runs the connection from an event
 * loop of its own instead of waiting in conn_run (rdaxd's replica links:
 * conn_reap with @timeout_ms 0 when a descriptor is ready), before that loop
 * sleeps. Fills @fds with the descriptors and events to wait for (the
 * socket, POLLOUT too while requests wait to be sent; over RDMA the
 * completion channel, armed here, and the rdma_cm channel) and returns
 * their count; 0 when something is ready already (completions that came
 * before the arm, TLS records held, a broken connection): reap again
 * instead of sleeping.
 */
int conn_poll_prepare(struct rdax_conn *c, struct pollfd fds[2]);

/*
 * conn_cork / conn_uncork -- for an owner submitting several async requests
 * in a row (rdaxd's replica links: a durable write's WRITE and FSYNC, a
 * burst of forwarded writes): between the two, a submission queues its
 * requests without sending; conn_uncork sends what was queued, in order, in
 * as few sendmsg calls as the socket takes, so the peer wakes once for the
 * batch, not once per request. conn_uncork returns 0, or the code the
 * connection broke with (its ops are then finished with it, as a failed
 * send in conn_op_submit does). Context: the connection's owner thread.
 */
void conn_cork(struct rdax_conn *c);
int conn_uncork(struct rdax_conn *c);

/*
 * conn_lose -- the stream was lost for a reason a new connection may cure
 * (a resuming connection, resume.h): close it, drop every request, put
 * every unfinished operation back to its start (control requests that are
 * not idempotent fail, a close is done) and mark the connection for
 * conn_resume. @follow: a primary's address to try first (may be NULL).
 * Returns @code.
 */
int conn_lose(struct rdax_conn *c, int code, const char *msg, const char *follow);

/*
 * conn_give_up -- end the connection for good: every operation fails with
 * @code and @msg, and so does every later call. Returns @code.
 */
int conn_give_up(struct rdax_conn *c, int code, const char *msg);

/* conn_op_end -- an op with no request left and a status: report it (resume.c) */
void conn_op_end(struct rdax_conn *c, struct conn_op *op);

/*
 * conn_hello -- HELLO on a fresh connection with @opts (token, client name),
 * and keep what the reply says (limits, namespaces, incarnation), replacing
 * what an earlier HELLO said. 0 or the error (rdax_conn_last_error says why).
 */
int conn_hello(struct rdax_conn *c, const struct rdax_conn_opts *opts);

/*
 * conn_volume_reopen -- VOLUME_OPEN of @v's name on a new connection:
 * its new handle, window (rdma://) and verifier. Returns 0; -ESTALE (another
 * size now: not the volume it was); -RDAX_E_NOT_PRIMARY (refused so, or an
 * older epoch than one seen: a node left behind by a failover); the
 * server's other refusals (-ENOENT, ...); a connection error.
 */
int conn_volume_reopen(struct rdax_conn *c, struct rdax_volume *v);

/*
 * conn_submit_discard -- an asynchronous rdax_discard of [offset, offset +
 * length) of @vol: completes through conn_reap with @cookie (op
 * RDAX_OP_FSYNC, bytes 0), sent again after a resume like the synchronous
 * one. The range is durable zeros once it succeeded: older held writes over
 * it are forgotten (held.h), so a resume never writes them back over the
 * zeros. Not part of the public API (rdaxd's NBD forwarding). Returns as
 * rdax_submit_write.
 */
int conn_submit_discard(struct rdax_volume *vol, uint64_t offset, uint64_t length, uint64_t cookie);

/* conn_transport_close -- close the socket, TLS session or RDMA transport; reset receiving */
void conn_transport_close(struct rdax_conn *c);

/*
 * conn_rdma_settle -- over rdma://, take completions until no one-sided
 * write or read is posted (at most a few seconds; a failed connection
 * flushes them at once). A durable notice's write is answered by its FSYNC
 * reply, which can come before the write's own completion: until then the
 * device may still read the memory it came from (a retransmission), so a
 * registered buffer is unregistered only after this. Nothing to do over TCP.
 */
void conn_rdma_settle(struct rdax_conn *c);

/* conn_op_message -- the message for a failed op: the server's, the broken stream's, or strerror */
const char *conn_op_message(const struct rdax_conn *c, const struct conn_op *op);

#endif
