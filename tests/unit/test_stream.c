/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stream.c -- the connection set and the stream layer over socketpair(2)
 *
 * A fake protocol runs on a real worker loop over one end of a socketpair;
 * the test drives the other end. Its requests are 12-byte headers
 * (type, offset, length):
 *
 *   'E' len bytes follow: echoed back ('e' + the bytes)
 *   'W' len bytes follow: received into "the volume" (a buffer) at offset,
 *       then answered 'w'
 *   'D' len bytes follow: refused, dropped unread into memory, answered 'd'
 *   'R' answered 'r' + len bytes of the volume at offset, gathered when sent
 *       (a READ reply with a range, for the read-after-write rule)
 *
 * What is checked is conn.h's and stream.h's, not the fake's: order and
 * gathering of replies, payloads straight into their destination, dropped
 * payloads, backpressure (no request taken past the limit until replies
 * leave), the read-after-write rule (and its control: a protocol that names
 * no range sees the later write in the earlier READ's reply), the drain
 * (one timeout for the whole set, replies that nobody reads dropped, every
 * connection freed).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "conn.h"
#include "stream.h"
#include "worker.h"

#define HDR	 12
#define VOL_SIZE (4U << 20)
#define WAIT_MS	 20000

static uint8_t vol[VOL_SIZE];

struct fake_out {
	struct stream_out out;
	uint8_t hdr[HDR];
	uint8_t body[256];
};

struct fake {
	struct stream s;
	uint8_t type;
	uint32_t off, len;
	bool name_ranges; /* false: the control, READ replies name no range */
	struct stream_limits lim;
};

/* what the worker did, read by the test thread */
static unsigned n_requests, n_payloads, n_freed, n_released;

static unsigned seen(unsigned *v)
{
	return __atomic_load_n(v, __ATOMIC_SEQ_CST);
}

static void bump(unsigned *v)
{
	__atomic_add_fetch(v, 1, __ATOMIC_SEQ_CST);
}

static struct fake *fake_of(const struct stream *s)
{
	return (struct fake *)((char *)s - offsetof(struct fake, s));
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* reply -- queue a reply of type @t with @n body bytes, and a payload from the volume */
static void reply(struct fake *f, uint8_t t, const void *body, size_t n, uint32_t off,
		  uint32_t plen)
{
	struct fake_out *o = calloc(1, sizeof(*o));
	assert_non_null(o);
	o->hdr[0] = t;
	put32(o->hdr + 4, off);
	put32(o->hdr + 8, (uint32_t)(n + plen));
	if (n)
		memcpy(o->body, body, n);
	stream_out_set(&o->out, o->hdr, HDR, o->body, n, plen ? vol + off : NULL, plen);
	o->out.counted = n;
	if (plen && f->name_ranges) {
		o->out.range_of = vol;
		o->out.range_off = off;
		o->out.range_len = plen;
	}
	stream_queue(&f->s, &o->out);
}

static bool fake_input(struct stream *s)
{
	struct fake *f = fake_of(s);
	if (f->type == 'E') {
		if (stream_in_avail(s) < f->len)
			return false;
		reply(f, 'e', stream_in_data(s), f->len, 0, 0);
		stream_in_consume(s, f->len);
		f->type = 0;
		return true;
	}
	if (!stream_can_take(s, &f->lim) || stream_in_avail(s) < HDR)
		return false;
	const uint8_t *p = stream_in_data(s);
	f->type = p[0];
	f->off = get32(p + 4);
	f->len = get32(p + 8);
	stream_in_consume(s, HDR);
	bump(&n_requests);
	switch (f->type) {
	case 'E':
		assert_true(f->len <= sizeof(((struct fake_out *)0)->body));
		assert_int_equal(stream_in_reserve(s, f->len), 0);
		return true;
	case 'W':
		stream_payload_begin(s, vol + f->off, f->len, f->name_ranges ? vol : NULL, f->off);
		return true;
	case 'D':
		stream_payload_begin(s, NULL, f->len, NULL, 0);
		return true;
	case 'R':
		reply(f, 'r', NULL, 0, f->off, f->len);
		f->type = 0;
		return true;
	}
	fail_msg("bad request type %d", f->type);
	return false;
}

static bool fake_want_input(const struct stream *s)
{
	const struct fake *f = fake_of(s);
	return f->type == 'E' || !(s->paused || stream_over(s, &f->lim));
}

static bool fake_input_usable(const struct stream *s, size_t avail)
{
	return avail >= HDR;
}

static void fake_payload_done(struct stream *s, bool kept)
{
	struct fake *f = fake_of(s);
	bump(&n_payloads);
	reply(f, kept ? 'w' : 'd', NULL, 0, 0, 0);
	f->type = 0;
}

static void fake_payload_abort(struct stream *s, uint32_t got)
{
}

static void fake_out_release(struct stream *s, struct stream_out *o)
{
	bump(&n_released);
	free(o);
}

static bool fake_end(struct stream *s)
{
	return false;
}

static void fake_free(struct stream *s)
{
	free(fake_of(s));
	bump(&n_freed);
}

static const struct stream_proto fake_proto = {
    .input = fake_input,
    .want_input = fake_want_input,
    .input_usable = fake_input_usable,
    .payload_done = fake_payload_done,
    .payload_abort = fake_payload_abort,
    .out_release = fake_out_release,
    .end = fake_end,
    .free = fake_free,
};

/* ---- fixture: one worker, its set, one or more fake connections ---- */

struct fx {
	struct worker *w;
	struct conn_sets *sets;
	int peer[4]; /* the test's ends */
	unsigned n;
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	assert_int_equal(worker_new(0, &fx->w), 0);
	assert_int_equal(conn_sets_new(&fx->w, 1, &fx->sets), 0);
	assert_int_equal(worker_start(fx->w), 0);
	n_requests = n_payloads = n_freed = n_released = 0;
	for (size_t i = 0; i < VOL_SIZE; i++)
		vol[i] = (uint8_t)(i * 7 + 1);
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	for (unsigned i = 0; i < fx->n; i++)
		if (fx->peer[i] >= 0)
			close(fx->peer[i]);
	conn_sets_drain_wait(fx->sets);
	worker_stop(fx->w);
	conn_sets_delete(&fx->sets);
	worker_delete(&fx->w);
	free(fx);
	return 0;
}

/* fx_conn -- a fake connection; @small: tiny socket buffers, so big replies stay queued */
static int fx_conn(struct fx *fx, bool small, bool name_ranges, unsigned max_pending)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	if (small) {
		int sz = 4096;
		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	struct fake *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->name_ranges = name_ranges;
	f->lim = (struct stream_limits){.max_pending = max_pending, .max_bytes = 1U << 20};
	assert_int_equal(stream_init(&f->s, fx->sets->sets[0], &stream_socket_conn_ops, &fake_proto,
				     4096, 4096 + 256, "fake"),
			 0);
	int fl = fcntl(sv[0], F_GETFL);
	assert_int_equal(fcntl(sv[0], F_SETFL, fl | O_NONBLOCK), 0);
	stream_socket_start(&f->s, sv[0]);
	fx->peer[fx->n] = sv[1];
	return (int)fx->n++;
}

/* send_all -- @len bytes to the daemon side */
static void send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

/* recv_all -- exactly @len bytes, bounded */
static void recv_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		assert_int_equal(poll(&pf, 1, WAIT_MS), 1);
		ssize_t n = recv(fd, p, len, 0);
		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

static void request(int fd, uint8_t type, uint32_t off, uint32_t len, const void *data, size_t dlen)
{
	uint8_t h[HDR] = {type};
	put32(h + 4, off);
	put32(h + 8, len);
	send_all(fd, h, HDR);
	if (dlen)
		send_all(fd, data, dlen);
}

/* expect -- the next reply is of @type; its bytes (up to @max) into @buf; their count */
static uint32_t expect(int fd, uint8_t type, void *buf, size_t max)
{
	uint8_t h[HDR];
	recv_all(fd, h, HDR);
	assert_int_equal(h[0], type);
	uint32_t len = get32(h + 8);
	assert_true(len <= max);
	if (len)
		recv_all(fd, buf, len);
	return len;
}

/* wait_for -- until *v reaches @want (bounded: a hang guard, not a timing check) */
static void wait_for(unsigned *v, unsigned want)
{
	for (int i = 0; i < WAIT_MS / 5 && seen(v) < want; i++)
		usleep(5000);
	assert_int_equal(seen(v), want);
}

/* ---- tests ---- */

static void stream__replies_in_request_order(void **state)
{
	struct fx *fx = *state;
	int fd = fx->peer[fx_conn(fx, false, true, 128)];
	uint8_t batch[100 * (HDR + 8)];
	size_t n = 0;
	for (uint32_t i = 0; i < 100; i++) {
		uint8_t h[HDR] = {'E'};
		put32(h + 8, 8);
		memcpy(batch + n, h, HDR);
		n += HDR;
		uint64_t v = i * 1000003ULL;
		memcpy(batch + n, &v, 8);
		n += 8;
	}
	send_all(fd, batch, n); /* many requests in one go: replies gathered, in order */
	for (uint32_t i = 0; i < 100; i++) {
		uint64_t v;
		assert_int_equal(expect(fd, 'e', &v, sizeof(v)), 8);
		assert_true(v == i * 1000003ULL);
	}
}

static void stream__payload_received_into_destination(void **state)
{
	struct fx *fx = *state;
	int fd = fx->peer[fx_conn(fx, false, true, 128)];
	static uint8_t data[300000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i ^ 0x5a);
	/* far larger than the 4 KiB input buffer: most of it is received straight into vol */
	request(fd, 'W', 100, sizeof(data), data, sizeof(data));
	expect(fd, 'w', NULL, 0);
	assert_memory_equal(vol + 100, data, sizeof(data));
	assert_int_equal(vol[99], (uint8_t)(99 * 7 + 1));
	assert_int_equal(vol[100 + sizeof(data)], (uint8_t)((100 + sizeof(data)) * 7 + 1));
}

static void stream__refused_payload_dropped(void **state)
{
	struct fx *fx = *state;
	int fd = fx->peer[fx_conn(fx, false, true, 128)];
	static uint8_t junk[20000], before[20000];
	memset(junk, 0xee, sizeof(junk));
	memcpy(before, vol, sizeof(before));
	request(fd, 'D', 0, sizeof(junk), junk, sizeof(junk));
	uint32_t v = 42;
	request(fd, 'E', 0, 4, &v, 4);
	expect(fd, 'd', NULL, 0);
	uint32_t back = 0;
	assert_int_equal(expect(fd, 'e', &back, 4), 4);
	assert_int_equal(back, 42);
	assert_memory_equal(vol, before, sizeof(before)); /* nothing of it landed anywhere */
}

/* read_then_write -- a READ reply stuck behind a full socket, then a WRITE over its range */
static void read_then_write(struct fx *fx, bool name_ranges)
{
	int fd = fx->peer[fx_conn(fx, true, name_ranges, 128)];
	static uint8_t before[1 << 20], got[1 << 20];
	memcpy(before, vol, sizeof(before));
	request(fd, 'R', 0, sizeof(before), NULL, 0);
	/* half-way into the reply: far beyond what the socket buffers took of it */
	const uint32_t at = 512 << 10;
	uint8_t newer[4096];
	memset(newer, 0xab, sizeof(newer));
	request(fd, 'W', at, sizeof(newer), newer, sizeof(newer));
	if (!name_ranges) {
		/* the control: nothing holds the write back, it lands under the queued reply */
		wait_for(&n_payloads, 1);
	} else {
		/* give the write every chance to land early; it must not */
		usleep(200000);
		assert_int_equal(seen(&n_payloads), 0);
	}
	assert_int_equal(expect(fd, 'r', got, sizeof(got)), sizeof(got));
	expect(fd, 'w', NULL, 0);
	assert_memory_equal(vol + at, newer, sizeof(newer));
	if (name_ranges)
		assert_memory_equal(got, before,
				    sizeof(got)); /* a READ never shows a later write */
	else
		assert_memory_not_equal(got, before, sizeof(got));
}

static void stream_range_hazard__write_waits_for_queued_read(void **state)
{
	read_then_write(*state, true);
}

static void stream_range_hazard__control_no_range_sees_later_write(void **state)
{
	read_then_write(*state, false);
}

static void stream_can_take__stops_taking_requests_at_the_limit(void **state)
{
	struct fx *fx = *state;
	int fd = fx->peer[fx_conn(fx, true, true, 4)];
	for (uint32_t i = 0; i < 10; i++)
		request(fd, 'R', i * 65536, 65536, NULL, 0);
	/* four replies of 64 KiB fill the pipe and the limit: the fifth request waits */
	wait_for(&n_requests, 4);
	usleep(100000);
	assert_int_equal(seen(&n_requests), 4);
	static uint8_t got[65536];
	for (uint32_t i = 0; i < 10; i++) {
		assert_int_equal(expect(fd, 'r', got, sizeof(got)), sizeof(got));
		assert_memory_equal(got, vol + i * 65536, sizeof(got));
	}
	assert_int_equal(seen(&n_requests), 10);
}

static void conn_sets_drain_wait__one_timeout_drops_unread_replies(void **state)
{
	struct fx *fx = *state;
	fx->sets->drain_timeout = 0.2;
	int a = fx->peer[fx_conn(fx, true, true, 128)];
	int b = fx->peer[fx_conn(fx, true, true, 128)];
	int c = fx->peer[fx_conn(fx, false, true, 128)];
	request(a, 'R', 0, 1 << 20, NULL, 0);
	request(b, 'R', 0, 1 << 20, NULL, 0);
	uint32_t v = 7, back;
	request(c, 'E', 0, 4, &v, 4);
	assert_int_equal(expect(c, 'e', &back, 4), 4); /* c has nothing left to send */
	wait_for(&n_requests, 3);

	conn_sets_drain_wait(fx->sets);
	struct conn_set *set = fx->sets->sets[0];
	assert_int_equal(set->drain_timeouts, 1); /* one timer for every connection */
	assert_int_equal(seen(&n_freed), 3);
	assert_int_equal(set->nconns, 0);
	assert_int_equal(seen(&n_released), 3); /* the two stuck READs dropped, the echo sent */
	/* every socket was closed: the test's ends see the end after what was sent */
	static uint8_t sink[1 << 16];
	int fds[] = {a, b, c};
	for (unsigned i = 0; i < 3; i++) {
		ssize_t n;
		do {
			struct pollfd pf = {.fd = fds[i], .events = POLLIN};
			assert_int_equal(poll(&pf, 1, WAIT_MS), 1);
			n = recv(fds[i], sink, sizeof(sink), 0);
		} while (n > 0);
		assert_int_equal(n, 0);
	}
}

static void conn_sets_drain_wait__idle_set_needs_no_timeout(void **state)
{
	struct fx *fx = *state;
	int fd = fx->peer[fx_conn(fx, false, true, 128)];
	uint32_t v = 1, back;
	request(fd, 'E', 0, 4, &v, 4);
	expect(fd, 'e', &back, 4);
	conn_sets_drain_wait(fx->sets); /* default timeout of 10 s: must not be waited for */
	assert_int_equal(fx->sets->sets[0]->drain_timeouts, 0);
	assert_int_equal(seen(&n_freed), 1);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
	    T(stream__replies_in_request_order),
	    T(stream__payload_received_into_destination),
	    T(stream__refused_payload_dropped),
	    T(stream_range_hazard__write_waits_for_queued_read),
	    T(stream_range_hazard__control_no_range_sees_later_write),
	    T(stream_can_take__stops_taking_requests_at_the_limit),
	    T(conn_sets_drain_wait__one_timeout_drops_unread_replies),
	    T(conn_sets_drain_wait__idle_set_needs_no_timeout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
