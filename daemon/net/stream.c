/* SPDX-License-Identifier: BSD-3-Clause */
/* stream.c -- input buffer, payloads, output queue and gather, backpressure; socket streams */
#include "stream.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "media_guard.h"

int stream_init(struct stream *s, struct conn_set *set, const struct conn_ops *conn_ops,
		const struct stream_proto *proto, size_t in_min, size_t in_max, const char *peer)
{
	conn_init(&s->conn, set, conn_ops, peer);
	s->proto = proto;
	s->fd = -1;
	/* the buffer comes with the first byte: a silent connection holds none */
	s->in = NULL;
	s->in_cap = 0;
	s->in_min = in_min;
	s->in_max = in_max > in_min ? in_max : in_min;
	return 0;
}

void stream_release(struct stream *s)
{
	stream_out_drop(s);
	free(s->in);
	s->in = NULL;
	s->in_cap = s->in_start = s->in_end = 0;
}

/* ---- input ---- */

/* in_compact -- move the unparsed bytes to the front of the buffer */
static void in_compact(struct stream *s)
{
	if (s->in_start == 0)
		return;
	memmove(s->in, s->in + s->in_start, s->in_end - s->in_start);
	s->in_end -= s->in_start;
	s->in_start = 0;
}

/* in_grow -- a buffer of @cap bytes (> in_cap) holding the unparsed bytes; 0 or -ENOMEM */
static int in_grow(struct stream *s, size_t cap)
{
	size_t have = s->in_end - s->in_start;
	if (cap < s->in_min)
		cap = s->in_min;
	uint8_t *b = malloc(cap);
	if (!b)
		return -ENOMEM;
	if (have)
		memcpy(b, s->in + s->in_start, have);
	free(s->in);
	s->in = b;
	s->in_cap = cap;
	s->in_start = 0;
	s->in_end = have;
	return 0;
}

/* __stream_in_reserve -- stream_in_reserve() without room at hand: compact or grow */
int __stream_in_reserve(struct stream *s, size_t need)
{
	if (need > s->in_max)
		return -E2BIG;
	if (s->in_cap >= need) {
		in_compact(s);
		return 0;
	}
	return in_grow(s, need);
}

int stream_in_append(struct stream *s, const uint8_t *b, size_t n)
{
	if (s->in_start > 0 && s->in_end + n > s->in_cap)
		in_compact(s);
	if (s->in_end + n > s->in_cap) {
		size_t want = s->in_end + n;
		if (want > s->in_max)
			return -EPROTO;
		size_t cap = s->in_cap * 2 > want ? s->in_cap * 2 : want;
		if (cap > s->in_max)
			cap = s->in_max;
		int ret = in_grow(s, cap);
		if (ret)
			return ret;
	}
	memcpy(s->in + s->in_end, b, n);
	s->in_end += n;
	return 0;
}

void stream_payload_begin(struct stream *s, uint8_t *dst, uint32_t len, const void *vol,
			  uint64_t off)
{
	s->in_payload = true;
	s->conn.unit_open = true; /* a closing connection still takes it (conn.h) */
	s->pdst = dst;
	s->plen = len;
	s->pgot = 0;
	s->p_vol = dst ? vol : NULL;
	s->p_off = off;
}

/* payload_hazard -- would the payload being received land under a READ reply still queued? */
static bool payload_hazard(const struct stream *s)
{
	return s->in_payload && s->p_vol && s->out_ranges &&
	       stream_range_hazard(s, s->p_vol, s->p_off, s->plen);
}

/* payload_finish -- every byte of the payload is in */
static void payload_finish(struct stream *s)
{
	bool kept = s->pdst != NULL;
	s->in_payload = false;
	s->conn.unit_open = false;
	s->pdst = NULL;
	s->p_vol = NULL;
	s->proto->payload_done(s, kept);
}

void stream_process(struct stream *s)
{
	for (;;) {
		if (s->conn.dead)
			return;
		/* closing: no new request, but the payload of one under way still lands */
		if (s->in_payload) {
			if (payload_hazard(s))
				return;
			size_t n = s->plen - s->pgot;
			size_t avail = stream_in_avail(s);
			if (n > avail)
				n = avail;
			/* guarded: a bad page of the mapping fails this connection, not the daemon
			 */
			if (s->pdst && n &&
			    media_copy_in(s->pdst + s->pgot, stream_in_data(s), n)) {
				conn_fail(&s->conn, "media error writing the payload");
				return;
			}
			s->pgot += (uint32_t)n;
			stream_in_consume(s, n);
			if (s->pgot < s->plen)
				return;
			payload_finish(s);
		} else if (s->conn.closing || !s->proto->input(s)) {
			return;
		}
	}
}

enum conn_input_state stream_input_state(const struct stream *s)
{
	if (!stream_want_input(s))
		return CONN_INPUT_HELD;
	if (s->in_payload || stream_in_avail(s) > 0)
		return CONN_INPUT_PARTIAL;
	return CONN_INPUT_IDLE;
}

void stream_trim(struct stream *s)
{
	if (s->in && s->in_start == s->in_end && !s->in_payload) {
		free(s->in);
		s->in = NULL;
		s->in_cap = s->in_start = s->in_end = 0;
	}
	if (s->wire && s->wire->trim)
		s->wire->trim(s);
}

bool stream_input_done(const struct stream *s)
{
	if (!s->eof)
		return false;
	size_t avail = stream_in_avail(s);
	if (s->in_payload)
		return avail == 0;
	return !s->proto->input_usable(s, avail);
}

bool stream_want_input(const struct stream *s)
{
	if (s->eof || s->conn.dead)
		return false;
	if (s->in_payload)
		return !payload_hazard(s);
	if (s->conn.closing)
		return false;
	return s->proto->want_input(s);
}

/* ---- output ---- */

void stream_out_set(struct stream_out *o, const void *hdr, size_t hdr_len, const void *body,
		    size_t body_len, const void *payload, size_t payload_len)
{
	const void *base[STREAM_OUT_PIECES] = {hdr, body, payload};
	size_t len[STREAM_OUT_PIECES] = {hdr_len, body_len, payload_len};
	o->next = NULL;
	o->niov = 0;
	o->len = 0;
	o->sent = 0;
	o->counted = 0;
	o->range_of = NULL;
	o->range_off = o->range_len = 0;
	for (unsigned i = 0; i < STREAM_OUT_PIECES; i++) {
		if (!len[i])
			continue;
		o->iov[o->niov].iov_base = (void *)base[i];
		o->iov[o->niov].iov_len = len[i];
		o->niov++;
		o->len += len[i];
	}
}

void stream_queue(struct stream *s, struct stream_out *o)
{
	o->next = NULL;
	if (s->out_tail)
		s->out_tail->next = o;
	else
		s->out_head = o;
	s->out_tail = o;
	s->out_count++;
	s->out_bytes += o->counted;
	if (o->counted) /* the set's count: this worker writes it, the others read it */
		__atomic_store_n(&s->conn.set->out_bytes, s->conn.set->out_bytes + o->counted,
				 __ATOMIC_RELAXED);
	if (o->range_of)
		s->out_ranges++;
	conn_flush_add(&s->conn);
}

/* out_pop -- the head reply left (or is dropped): off the queue and back to the protocol */
static void out_pop(struct stream *s)
{
	struct stream_out *o = s->out_head;
	s->out_head = o->next;
	if (!s->out_head)
		s->out_tail = NULL;
	s->out_count--;
	s->out_bytes -= o->counted;
	if (o->counted)
		__atomic_store_n(&s->conn.set->out_bytes, s->conn.set->out_bytes - o->counted,
				 __ATOMIC_RELAXED);
	if (o->range_of)
		s->out_ranges--;
	s->proto->out_release(s, o);
}

void stream_out_drop(struct stream *s)
{
	while (s->out_head)
		out_pop(s);
}

/* out_advance -- @n more bytes left: release the replies they finish; true if any */
static bool out_advance(struct stream *s, size_t n)
{
	bool freed = false;
	while (n > 0 && s->out_head) {
		struct stream_out *o = s->out_head;
		size_t rest = o->len - o->sent;
		if (n < rest) {
			o->sent += n;
			break;
		}
		n -= rest;
		out_pop(s);
		freed = true;
	}
	return freed;
}

size_t stream_out_copy(struct stream *s, uint8_t *buf, size_t room)
{
	size_t n = 0;
	while (s->out_head && n < room) {
		struct stream_out *o = s->out_head;
		size_t start = 0;
		for (unsigned i = 0; i < o->niov && n < room; i++) {
			size_t len = o->iov[i].iov_len;
			if (o->sent < start + len) {
				size_t off = o->sent - start;
				size_t take = len - off < room - n ? len - off : room - n;
				memcpy(buf + n, (const uint8_t *)o->iov[i].iov_base + off, take);
				n += take;
				o->sent += take;
			}
			start += len;
		}
		if (o->sent < o->len)
			break;
		out_pop(s);
	}
	return n;
}

void stream_end_io(struct stream *s)
{
	if (s->in_payload && s->pdst)
		s->proto->payload_abort(s, s->pgot);
	s->in_payload = false;
	s->conn.unit_open = false;
	s->pdst = NULL;
	s->p_vol = NULL;
	stream_out_drop(s);
}

/* ---- the read-after-write rule and backpressure ---- */

bool stream_range_hazard(const struct stream *s, const void *vol, uint64_t off, uint64_t len)
{
	if (s->out_ranges == 0)
		return false;
	uint64_t wb = off, we = off + len;
	for (const struct stream_out *o = s->out_head; o; o = o->next) {
		if (o->range_of != vol)
			continue;
		uint64_t rb = o->range_off, re = o->range_off + o->range_len;
		if (rb < we && wb < re)
			return true;
	}
	return false;
}

bool stream_park(struct stream *s, void *job, const void *vol, uint64_t off, uint64_t len)
{
	if (!stream_range_hazard(s, vol, off, len))
		return false;
	LOG_DEBUG("%s: job parked until READ replies over [%" PRIu64 ", +%" PRIu64 ") have left",
		  s->conn.peer, off, len);
	s->parked = job;
	s->park_vol = vol;
	s->park_off = off;
	s->park_len = len;
	return true;
}

void *stream_unpark(struct stream *s)
{
	void *job = s->parked;
	if (!job || stream_range_hazard(s, s->park_vol, s->park_off, s->park_len))
		return NULL;
	s->parked = NULL;
	return job;
}

/* ---- socket streams ---- */

/* stream_of -- the stream around its connection */
static struct stream *stream_of(struct conn *c)
{
	return (struct stream *)((char *)c - offsetof(struct stream, conn));
}

static ssize_t socket_recv(struct stream *s, void *buf, size_t len)
{
	for (;;) {
		ssize_t n = recv(s->fd, buf, len, 0);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

static ssize_t socket_sendv(struct stream *s, const struct iovec *iov, int n)
{
	struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
	for (;;) {
		ssize_t w = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w >= 0)
			return w;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

static void socket_close(struct stream *s, bool keep_socket)
{
	if (s->fd >= 0 && !keep_socket)
		close(s->fd);
	s->fd = -1;
}

const struct stream_wire stream_socket_wire = {
    .recv = socket_recv,
    .sendv = socket_sendv,
    .close = socket_close,
};

/* recv_some -- one receive into @buf; > 0 bytes, 0 nothing now, -1 ended (eof or failed) */
static ssize_t recv_some(struct stream *s, void *buf, size_t len)
{
	ssize_t n = s->wire->recv(s, buf, len);
	if (n > 0) {
		conn_input_seen(&s->conn);
		return n;
	}
	if (n == 0) {
		s->eof = true;
		if (!s->conn.why)
			s->conn.why = "closed by the peer";
		return -1;
	}
	if (n == -EAGAIN)
		return 0;
	LOG_DEBUG("%s: recv failed: %s", s->conn.peer, strerror((int)-n));
	conn_fail(&s->conn, "receive failed");
	return -1;
}

/* iov_add -- the unsent part of [base, base + len), given the bytes of the reply still to skip */
static void iov_add(struct iovec *iov, int *n, size_t *skip, const struct iovec *piece)
{
	if (*skip >= piece->iov_len) {
		*skip -= piece->iov_len;
		return;
	}
	iov[*n].iov_base = (uint8_t *)piece->iov_base + *skip;
	iov[*n].iov_len = piece->iov_len - *skip;
	(*n)++;
	*skip = 0;
}

/*
 * socket_flush -- send queued replies, as many per sendmsg() as the iovecs
 * hold, until done or the socket is full. Returns true if any was freed.
 */
static bool socket_flush(struct conn *c)
{
	struct stream *s = stream_of(c);
	bool freed = false;
	while (s->out_head && !c->dead) {
		struct iovec iov[STREAM_IOV_MAX];
		int n = 0;
		for (struct stream_out *o = s->out_head;
		     o && n + STREAM_OUT_PIECES <= STREAM_IOV_MAX; o = o->next) {
			size_t skip = o->sent;
			for (unsigned i = 0; i < o->niov; i++)
				iov_add(iov, &n, &skip, &o->iov[i]);
		}
		ssize_t w = s->wire->sendv(s, iov, n);
		if (w == -EAGAIN) {
			ev_io_start(c->set->worker->loop, &s->wio);
			return freed;
		}
		if (w < 0) {
			LOG_DEBUG("%s: sendmsg failed: %s", c->peer, strerror((int)-w));
			conn_fail(c, "send failed");
			return freed;
		}
		freed |= out_advance(s, (size_t)w);
	}
	ev_io_stop(c->set->worker->loop, &s->wio);
	return freed;
}

/* socket_on_read -- the socket is readable */
static void socket_on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct stream *s = w->data;
	bool drained = false;
	for (int i = 0; i < STREAM_READ_BUDGET && !drained && stream_want_input(s); i++) {
		ssize_t n;
		size_t want;
		if (s->in_payload && s->pdst && s->in_start == s->in_end) {
			/* zero-copy: straight into the validated range of the mapping */
			want = s->plen - s->pgot;
			n = recv_some(s, s->pdst + s->pgot, want);
			if (n <= 0)
				break;
			s->pgot += (uint32_t)n;
			if (s->pgot == s->plen)
				payload_finish(s);
		} else {
			if (!s->in && in_grow(s, s->in_min)) {
				LOG_ERROR("%s: out of memory for an input buffer", s->conn.peer);
				conn_fail(&s->conn, "out of memory");
				break;
			}
			if (s->in_end == s->in_cap)
				in_compact(s);
			if (s->in_end == s->in_cap)
				break; /* full of units waiting to be taken */
			want = s->in_cap - s->in_end;
			n = recv_some(s, s->in + s->in_end, want);
			if (n <= 0)
				break;
			s->in_end += (size_t)n;
		}
		/*
		 * less than asked: the socket is empty for now, and the watcher
		 * (level-triggered) fires again when more comes -- no recv() just
		 * to hear EAGAIN
		 */
		drained = (size_t)n < want;
		stream_process(s);
	}
	conn_kick(&s->conn);
}

/* socket_on_write -- the socket takes more output */
static void socket_on_write(struct ev_loop *loop, ev_io *w, int revents)
{
	struct stream *s = w->data;
	socket_flush(&s->conn);
	conn_kick(&s->conn);
}

/* socket_start -- the worker takes the socket over */
static void socket_start(struct conn *c)
{
	struct stream *s = stream_of(c);
	conn_link(c);
	LOG_DEBUG("%s: connected (worker %u)", c->peer, c->set->worker->id);
	if (s->proto->start)
		s->proto->start(s);
	conn_kick(c);
}

/* socket_progress -- take what input became possible, read only while it can be taken */
static void socket_progress(struct conn *c)
{
	struct stream *s = stream_of(c);
	if (s->parked)
		s->proto->unpark(s);
	stream_process(s);
	if (c->in_dead || c->tearing_down || s->fd < 0)
		return;
	if (stream_want_input(s)) {
		ev_io_start(c->set->worker->loop, &s->rio);
		/* bytes already inside the wire: no readable event will come for them */
		if (s->wire->pending && s->wire->pending(s))
			ev_feed_event(c->set->worker->loop, &s->rio, EV_READ);
	} else
		ev_io_stop(c->set->worker->loop, &s->rio);
}

static bool socket_input_done(const struct conn *c)
{
	return stream_input_done(
	    (const struct stream *)((const char *)c - offsetof(struct stream, conn)));
}

static enum conn_input_state socket_input_state(const struct conn *c)
{
	return stream_input_state(
	    (const struct stream *)((const char *)c - offsetof(struct stream, conn)));
}

static void socket_trim(struct conn *c)
{
	stream_trim(stream_of(c));
}

static bool socket_output_pending(const struct conn *c)
{
	const struct stream *s =
	    (const struct stream *)((const char *)c - offsetof(struct stream, conn));
	return s->out_head != NULL;
}

/* socket_stop -- no more events on the socket */
static void socket_stop(struct stream *s)
{
	ev_io_stop(s->conn.set->worker->loop, &s->rio);
	ev_io_stop(s->conn.set->worker->loop, &s->wio);
}

/* socket_drop -- the socket failed: stop it, and release the holds of every queued reply */
static void socket_drop(struct conn *c)
{
	struct stream *s = stream_of(c);
	socket_stop(s);
	stream_out_drop(s);
	if (s->proto->dead)
		s->proto->dead(s);
}

/*
 * socket_end -- everything is over: give back what the stream holds, then
 * the protocol's end. The socket itself stays open until the connection is
 * freed, after its teardown: a client that sees it close knows its volumes
 * are closed (and may be deleted).
 */
static bool socket_end(struct conn *c)
{
	struct stream *s = stream_of(c);
	socket_stop(s);
	stream_end_io(s);
	LOG_DEBUG("%s: connection closed (%s)", c->peer, c->why ? c->why : "end");
	return s->proto->end(s);
}

/*
 * socket_free -- the connection is over. A socket whose peer has not closed
 * its side (no end of file seen) may still have input coming, and closing
 * it would send a reset that destroys the replies the peer has not read:
 * it is handed to the set's linger set (linger.h) with its slot. A failed
 * socket, or one whose peer closed, is closed at once.
 */
static void socket_free(struct conn *c)
{
	struct stream *s = stream_of(c);
	int fd = s->fd >= 0 && !s->eof && !c->dead ? s->fd : -1;
	s->wire->close(s, fd >= 0);
	if (fd >= 0)
		linger_socket(&c->set->linger, fd, &c->slot);
	else
		conn_limit_give(&c->slot);
	stream_release(s);
	s->proto->free(s);
}

const struct conn_ops stream_socket_conn_ops = {
    .start = socket_start,
    .flush = socket_flush,
    .progress = socket_progress,
    .input_done = socket_input_done,
    .output_pending = socket_output_pending,
    .drop = socket_drop,
    .end = socket_end,
    .input_state = socket_input_state,
    .trim = socket_trim,
    .free = socket_free,
};

void stream_socket_start(struct stream *s, int fd)
{
	s->fd = fd;
	if (!s->wire)
		s->wire = &stream_socket_wire;
	ev_io_init(&s->rio, socket_on_read, fd, EV_READ);
	s->rio.data = s;
	ev_io_init(&s->wio, socket_on_write, fd, EV_WRITE);
	s->wio.data = s;
	conn_post_start(&s->conn);
}
