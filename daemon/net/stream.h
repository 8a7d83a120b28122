/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stream.h -- a connection that carries a byte stream, for every protocol over it
 *
 * The native protocol and NBD are byte streams over TCP or unix sockets;
 * the native protocol is also a byte stream cut into messages over RDMA
 * (rdma_proto.h). What a stream needs is written here once:
 *
 *   - input: a bounded buffer [in_start, in_end) the protocol parses step
 *     by step (struct stream_proto.input), growing on request up to what
 *     the protocol allows (stream_in_reserve: a header is checked before the
 *     buffer grows for its body); allocated with the first byte and given
 *     back when the connection has been idle a while (stream_trim), so a
 *     silent or idle connection holds no buffer;
 *   - a payload: the protocol says where the next @len bytes go
 *     (stream_payload_begin: a range of a volume's mapping, or NULL to drop
 *     them); bytes already buffered are copied there, the rest is received
 *     straight into it (zero-copy: recv() into the validated range, never
 *     more than the bytes left);
 *   - output: a queue of replies of up to three pieces each (header, body,
 *     payload), sent with one sendmsg() gathering as many as fit, or copied
 *     into messages by a transport that has them (stream_out_copy);
 *   - backpressure: replies queued + jobs in flight, and the bytes queued,
 *     against the protocol's bounds, with hysteresis (stream_can_take); and
 *     against the daemon's: while the replies queued on every connection
 *     together reach the budget (conn_sets_out_over), a connection holding
 *     STREAM_OUT_FLOOR bytes or more takes no new request -- each may
 *     still have a reply or so queued, so no connection is starved by the
 *     others' backlog, and the whole daemon's queued replies stay within
 *     the budget plus a floor (and one reply) per connection;
 *   - the read-after-write rule, written once: a READ reply whose bytes are
 *     gathered from the mapping when it is sent names its range
 *     (stream_out.range_*); a payload or a job that would change bytes under
 *     such a reply still queued waits until it has left
 *     (stream_range_hazard), so a READ never returns bytes of a later
 *     request of its connection. A transport that copies READ payloads when
 *     they are queued (RDMA) names no range and never waits.
 *
 * The wire below a socket stream is a small ops table (struct
 * stream_wire): stream_socket_wire is the plain socket; a TLS stream is
 * one more table whose recv decrypts into the buffer it is given -- the
 * payload destination included -- and whose sendv encrypts the gathered
 * pieces. The protocol never sees the socket; the wire never parses.
 *
 * A socket stream's conn_ops (stream_socket_conn_ops) are the lifecycle
 * of conn.h for every protocol over a socket: read watcher on while the
 * protocol may take input, write watcher on while the socket is full,
 * end = close the socket after the protocol's own end.
 *
 * Thread safety: a stream belongs to its connection's worker thread; only
 * stream_socket_start() may be called from another (it posts).
 */
#ifndef RDAXD_STREAM_H
#define RDAXD_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <ev.h>

#include "conn.h"

/* recv() calls per readable event, so one busy connection does not starve the others */
#define STREAM_READ_BUDGET 16
/* iovecs per sendmsg() */
#define STREAM_IOV_MAX 64
/* pieces of one reply: header, body, payload */
#define STREAM_OUT_PIECES 3
/* Reply bytes a connection may always keep queued, whatever the daemon's budget. */
#define STREAM_OUT_FLOOR (64U << 10)

struct stream;

/* One reply on the output queue; the protocol embeds it in its own reply. */
struct stream_out {
	struct stream_out *next;
	struct iovec iov[STREAM_OUT_PIECES];
	unsigned niov;
	size_t len;	/* bytes of all pieces */
	size_t sent;	/* bytes already sent (or copied into messages) */
	size_t counted; /* bytes counted against stream_limits.max_bytes */
	/* a READ reply gathered from the mapping when sent: the bytes it shows */
	const void *range_of; /* the volume; NULL: no range */
	uint64_t range_off, range_len;
};

/* Bounds of one connection's backlog (stream_can_take). */
struct stream_limits {
	unsigned max_pending; /* replies queued + jobs in flight */
	size_t max_bytes;     /* bytes counted by the queued replies */
};

/* How bytes move on a socket-like wire: a plain socket now, TLS as one more table. */
struct stream_wire {
	/* recv -- up to @len bytes into @buf: > 0, 0 at EOF, -EAGAIN nothing now, -errno */
	ssize_t (*recv)(struct stream *s, void *buf, size_t len);
	/* sendv -- the @n pieces in order: bytes taken (>= 0), -EAGAIN full, -errno */
	ssize_t (*sendv)(struct stream *s, const struct iovec *iov, int n);
	/*
	 * close -- release the wire: its state, and the socket unless
	 * @keep_socket (the linger set takes it over, linger.h). A wire with
	 * something to say at the end (a TLS close_notify) says it first.
	 * s->fd is -1 afterwards.
	 */
	void (*close)(struct stream *s, bool keep_socket);
	/*
	 * pending -- bytes the wire holds already received (decrypted TLS
	 * records), which no readable event will announce; NULL: none ever
	 */
	size_t (*pending)(const struct stream *s);
	/* trim -- optional: the connection is idle, give back the wire's empty buffers */
	void (*trim)(struct stream *s);
};

/* What the protocol over a stream supplies. Every callback runs on the worker thread. */
struct stream_proto {
	/* start -- the connection is linked on its worker: first output (a greeting) */
	void (*start)(struct stream *s);
	/*
	 * input -- one step over stream_in_data()/stream_in_avail(): consume
	 * what it parsed (stream_in_consume) and act on it, or begin a payload.
	 * Returns true to be called again, false to stop (it needs more bytes, or
	 * may not go on now).
	 */
	bool (*input)(struct stream *s);
	/* want_input -- at a unit boundary, would input be taken now (not blocked)? */
	bool (*want_input)(const struct stream *s);
	/* input_usable -- after EOF: could @avail buffered bytes still make a step? */
	bool (*input_usable)(const struct stream *s, size_t avail);
	/* unpark -- before input is taken: a job that waited for READ replies may start */
	void (*unpark)(struct stream *s);
	/* payload_done -- the payload of stream_payload_begin() is all in; @kept: not dropped */
	void (*payload_done)(struct stream *s, bool kept);
	/* payload_abort -- the stream ends after @got bytes of an accepted payload */
	void (*payload_abort)(struct stream *s, uint32_t got);
	/* out_release -- @o was sent or dropped: the protocol frees or reuses it */
	void (*out_release)(struct stream *s, struct stream_out *o);
	/*
	 * dead -- optional: the connection failed (its replies will never leave);
	 * work still out whose answers nobody will read may be cut short (its
	 * jobs must still come back before end)
	 */
	void (*dead)(struct stream *s);
	/* end -- the protocol's teardown; true if a teardown job runs (counted in conn.jobs) */
	bool (*end)(struct stream *s);
	/* free -- the protocol's memory around the stream */
	void (*free)(struct stream *s);
};

struct stream {
	struct conn conn;
	const struct stream_proto *proto;
	const struct stream_wire *wire; /* socket streams; NULL where input is pushed (RDMA) */
	void *wire_ctx;			/* the wire's own state (a TLS session) */
	int fd;				/* socket streams: the socket, -1 once closed */
	ev_io rio, wio;
	bool eof; /* the peer closed its side */

	/* input: [in_start, in_end) of in[] is unparsed */
	uint8_t *in; /* NULL until the first byte, and again after stream_trim() */
	size_t in_cap, in_min, in_max, in_start, in_end;

	/* the payload being received */
	bool in_payload;
	uint8_t *pdst; /* NULL: dropped */
	uint32_t plen, pgot;
	const void *p_vol; /* where it lands, for the read-after-write rule */
	uint64_t p_off;

	/* output */
	struct stream_out *out_head, *out_tail;
	unsigned out_count;
	unsigned out_ranges; /* queued replies naming a range */
	size_t out_bytes;    /* counted bytes of the queued replies */
	bool paused;	     /* over the limits: no new unit until half drained */

	/* a job that would change bytes under a queued READ reply (stream_park) */
	void *parked;
	const void *park_vol;
	uint64_t park_off, park_len;
};

/*
 * stream_init -- a stream of @set for @proto, its input buffer @in_min
 * bytes once input comes (growing up to @in_max on stream_in_reserve). @conn_ops is
 * stream_socket_conn_ops for a socket stream, the transport's own
 * otherwise. Returns 0 or -ENOMEM.
 */
int stream_init(struct stream *s, struct conn_set *set, const struct conn_ops *conn_ops,
		const struct stream_proto *proto, size_t in_min, size_t in_max, const char *peer);

/* stream_release -- free what stream_init allocated and drop queued output */
void stream_release(struct stream *s);

/* ---- input (the protocol's input callback) ---- */

static inline const uint8_t *stream_in_data(const struct stream *s)
{
	return s->in + s->in_start;
}

static inline size_t stream_in_avail(const struct stream *s)
{
	return s->in_end - s->in_start;
}

/* stream_in_consume -- @n parsed bytes are done with */
static inline void stream_in_consume(struct stream *s, size_t n)
{
	s->in_start += n;
	if (s->in_start == s->in_end)
		s->in_start = s->in_end = 0;
}

int __stream_in_reserve(struct stream *s, size_t need);

/*
 * stream_in_reserve -- room for @need bytes from in_start on (compacting or
 * growing, never beyond in_max). 0, -ENOMEM, -E2BIG (over in_max). Inline
 * for the common case of room already there (every request header asks).
 */
static inline int stream_in_reserve(struct stream *s, size_t need)
{
	if (s->in_cap - s->in_start >= need)
		return 0;
	return __stream_in_reserve(s, need);
}

/*
 * stream_in_append -- bytes pushed by a message transport (RDMA). 0,
 * -EPROTO (the buffer would pass in_max), -ENOMEM.
 */
int stream_in_append(struct stream *s, const uint8_t *b, size_t n);

/*
 * stream_payload_begin -- the next @len bytes of input go to @dst (NULL:
 * dropped), which lies at @off of volume @vol (for the read-after-write
 * rule; NULL when dropped). payload_done runs when they are in.
 */
void stream_payload_begin(struct stream *s, uint8_t *dst, uint32_t len, const void *vol,
			  uint64_t off);

/*
 * stream_process -- take whatever input is buffered, as far as the
 * protocol allows: payload bytes first, then input steps.
 */
void stream_process(struct stream *s);

/* stream_input_done -- no more input will be handled: EOF with nothing usable left */
bool stream_input_done(const struct stream *s);

/* stream_want_input -- should more input be read now? */
bool stream_want_input(const struct stream *s);

/* stream_input_state -- for the connection's time limits (conn.h) */
enum conn_input_state stream_input_state(const struct stream *s);

/*
 * stream_trim -- an idle stream gives back its empty input buffer, and its
 * wire its own (a TLS session's read-ahead); they come back with input
 */
void stream_trim(struct stream *s);

/* ---- output ---- */

/*
 * stream_out_set -- fill @o with up to three pieces (len 0: absent) and no
 * range; the caller sets range_* for a READ gathered when sent.
 */
void stream_out_set(struct stream_out *o, const void *hdr, size_t hdr_len, const void *body,
		    size_t body_len, const void *payload, size_t payload_len);

/* stream_queue -- append @o (the stream owns it until out_release) */
void stream_queue(struct stream *s, struct stream_out *o);

/* stream_out_drop -- release every queued reply, sent or not */
void stream_out_drop(struct stream *s);

/*
 * stream_end_io -- the connection ends: an accepted payload cut off is
 * handed to payload_abort, queued output is dropped. Transports call it
 * from their conn_ops.end before the protocol's end.
 */
void stream_end_io(struct stream *s);

/*
 * stream_out_copy -- copy queued bytes into @buf (at most @room), releasing
 * the replies copied whole: a message transport's send. Returns the bytes.
 */
size_t stream_out_copy(struct stream *s, uint8_t *buf, size_t room);

/*
 * stream_range_hazard -- does [off, off + len) of @vol overlap a READ
 * reply still queued? (validated ranges: off + len does not wrap)
 */
bool stream_range_hazard(const struct stream *s, const void *vol, uint64_t off, uint64_t len);

/*
 * stream_park -- the read-after-write rule for a job that changes
 * [off, off + len) of @vol (a discard, a zeroing): if a READ reply over it
 * is still queued, keep @job parked (one at a time: the protocol takes no
 * new request meanwhile) and return true; false: start it now.
 */
bool stream_park(struct stream *s, void *job, const void *vol, uint64_t off, uint64_t len);

/* stream_unpark -- the parked job once the READ replies it waited for have left, else NULL */
void *stream_unpark(struct stream *s);

/* stream_over -- is the backlog at @lim's bounds, or at the daemon's (no state change)? */
static inline bool stream_over(const struct stream *s, const struct stream_limits *lim)
{
	return s->out_count + s->conn.jobs >= lim->max_pending || s->out_bytes >= lim->max_bytes ||
	       (s->out_bytes >= STREAM_OUT_FLOOR && conn_sets_out_over(s->conn.set->group));
}

/*
 * stream_can_take -- may a new unit (request) be started under @lim?
 * Updates the backpressure state: paused at the bounds, resumed at half.
 * (Inline: it runs for every request.)
 */
static inline bool stream_can_take(struct stream *s, const struct stream_limits *lim)
{
	if (s->paused) {
		/* hysteresis: resume at half, not at the first freed slot */
		if (s->out_count + s->conn.jobs > lim->max_pending / 2 ||
		    s->out_bytes > lim->max_bytes / 2)
			return false;
		s->paused = false;
	}
	if (stream_over(s, lim)) {
		s->paused = true;
		return false;
	}
	return true;
}

/* ---- socket streams ---- */

/* The lifecycle of every protocol over a socket (conn.h). */
extern const struct conn_ops stream_socket_conn_ops;
/* The plain socket wire. */
extern const struct stream_wire stream_socket_wire;

/*
 * stream_socket_start -- from any thread: @s (stream_init'ed with
 * stream_socket_conn_ops) takes the connected, non-blocking socket @fd and
 * goes to its worker, which owns both from now on. The wire is the plain
 * socket unless one was set before (tls_wire_attach).
 */
void stream_socket_start(struct stream *s, int fd);

#endif
