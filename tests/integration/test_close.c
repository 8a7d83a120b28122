/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_close.c -- the end of a connection loses no reply
 *
 * A daemon that closes a socket while its peer is still sending used to
 * close it with unread input, which makes the kernel send a reset: the
 * replies still in the daemon's send buffer were destroyed, and the client
 * saw ECONNRESET. The connection layer now closes lingering (linger.h).
 *
 *   error_frame_reaches_a_sending_client: replies queued before a bad frame,
 *     and the error frame that says why the connection ends, all reach a
 *     client that sent more bytes after the bad frame and reads only later.
 *   sigterm_pipelined_writers: clients pipeline WRITEs until the daemon's
 *     SIGTERM drain ends their connections. No client sees a reset; after a
 *     restart every WRITE that was answered is in the volume, every WRITE
 *     whose bytes are in the volume was answered (none carried out without
 *     its reply), and none is there in part. One more client is half way
 *     through a WRITE's payload when the SIGTERM comes and sends the rest
 *     after it: that WRITE was started, so it lands whole and is answered.
 *
 * Each runs again with RDAX_FAULTS=linger-off (the old close) as its
 * control, which must show the loss; the half-sent WRITE also with
 * drain-cuts-payload (a drain that ends a connection in a payload).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "harness.h"
#include "wire.h"

#define MiB   (1ULL << 20)
#define R_LEN (4U << 20) /* one READ of the error case */

/* ---- error frame after queued replies ---- */

/* recv_all -- read @len bytes from @fd (blocking, bounded); 0, -ECONNRESET, -EPIPE (EOF), -errno */
static int recv_all(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, WIRE_TIMEOUT_MS) <= 0)
			return -ETIMEDOUT;
		ssize_t n = recv(fd, (char *)buf + got, len - got, 0);
		if (n == 0)
			return -EPIPE;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	return 0;
}

/*
 * error_after_reads -- against a daemon with @faults: 8 READs of 4 MiB
 * (more than the socket buffers hold), a bad frame, then 1 MiB of bytes the
 * daemon will never parse; read only after a second. Returns how many of
 * the 8 replies (with their data), the error frame and the end of file
 * (not a reset) arrived: 10 when nothing was lost.
 */
static int error_after_reads(const char *faults)
{
	char dir[256];
	struct hx_daemon d;
	assert_int_equal(hx_tmpdir_make("close-err", dir, sizeof(dir)), 0);
	struct hx_daemon_opts o = {.ns_size = "64M", .max_payload = "4M", .faults = faults};
	assert_int_equal(hx_daemon_start(&d, dir, &o), 0);
	struct wconn c;
	uint32_t h;
	assert_int_equal(wire_connect(&c, d.port), 0);
	assert_int_equal(wire_hello(&c, NULL, 0), 0);
	assert_int_equal(wire_create(&c, "v", 32 * MiB), 0);
	assert_int_equal(wire_open(&c, "v", &h, NULL), 0);

	for (unsigned i = 0; i < 8; i++) {
		size_t blen;
		uint8_t *body = wire_body_read(h, i * R_LEN, R_LEN, &blen);
		assert_int_equal(wire_send_frame(&c, FRAME_READ, 100 + i, body, blen, NULL, 0), 0);
		free(body);
	}
	uint8_t bad[FRAME_HEADER_SIZE];
	struct frame_header bh = {
	    .magic = 0xdeadbeef, .version = FRAME_VERSION, .type = FRAME_READ, .request_id = 200};
	frame_header_encode(&bh, bad);
	assert_int_equal(wire_send_all(&c, bad, sizeof(bad)), 0);
	/* a client still sending: bytes after the bad frame that nobody will read */
	uint8_t *junk = calloc(1, MiB);
	assert_non_null(junk);
	ssize_t sent = wire_send_some(&c, junk, MiB, 2000);
	assert_true(sent > 0);
	usleep(1000 * 1000); /* the daemon has answered, ended the connection and closed it */

	int got = 0;
	uint8_t *data = malloc(R_LEN);
	assert_non_null(data);
	for (unsigned i = 0; i < 9; i++) {
		uint8_t raw[FRAME_HEADER_SIZE];
		struct frame_header rh;
		if (recv_all(c.fd, raw, sizeof(raw)))
			break;
		frame_header_decode(raw, &rh);
		uint8_t body[512];
		if (rh.body_len > sizeof(body) || recv_all(c.fd, body, rh.body_len))
			break;
		if (rh.payload_len &&
		    (rh.payload_len > R_LEN || recv_all(c.fd, data, rh.payload_len)))
			break;
		if (i < 8 && (rh.request_id != 100 + i || rh.payload_len != R_LEN))
			break;
		if (i == 8 && (rh.request_id != 200 || rh.type != FRAME_REPLY))
			break;
		got++;
	}
	int eof = -1;
	if (got == 9) {
		uint8_t b;
		eof = recv_all(c.fd, &b, 1);
		got += eof == -EPIPE; /* a FIN, not a reset */
	}
	print_message("linger %s: %d of 8 READ replies arrived, the error frame %s, then %s\n",
		      faults ? "off" : "on", got < 8 ? got : 8, got >= 9 ? "too" : "not",
		      eof == -EPIPE	   ? "end of file"
		      : eof == -ECONNRESET ? "a reset"
					   : "-");
	free(data);
	free(junk);
	wire_close(&c);
	assert_int_equal(hx_daemon_stop(&d), 0);
	hx_tmpdir_remove(dir);
	return got;
}

static void error_frame_reaches_a_sending_client(void **state)
{
	assert_int_equal(error_after_reads(NULL), 10);
}

static void error_frame_control_linger_off(void **state)
{
	assert_true(error_after_reads("linger-off") < 10);
}

/* ---- SIGTERM with pipelining writers ---- */

#define W_CLIENTS	4
#define W_WRITES	192 /* per client */
#define W_LEN		(64U << 10)
#define W_WINDOW	32
#define W_SIGTERM_AFTER 200	   /* replies in all before the SIGTERM */
#define HALF_LEN	(1U << 20) /* the WRITE half sent when the SIGTERM comes */
#define HALF_OFF	((uint64_t)W_CLIENTS * W_WRITES * W_LEN)

struct writer {
	struct wconn c;
	uint32_t h;
	unsigned index;
	uint8_t *frame; /* the frame being sent: header + body + payload */
	size_t frame_len, frame_sent;
	unsigned next; /* next write to send */
	unsigned inflight;
	bool replied[W_WRITES];
	uint8_t rx[FRAME_HEADER_SIZE + 64];
	size_t rx_got;
	bool done;
	bool reset;
	unsigned replies, bad_replies;
};

static uint64_t w_off(unsigned client, unsigned i)
{
	return ((uint64_t)client * W_WRITES + i) * W_LEN;
}

/* frame_make -- write @i of @w as one frame in w->frame */
static void frame_make(struct writer *w, unsigned i)
{
	size_t blen;
	uint8_t *body = wire_body_write(w->h, w_off(w->index, i), false, &blen);
	struct frame_header fh = {.magic = FRAME_MAGIC,
				  .version = FRAME_VERSION,
				  .type = FRAME_WRITE,
				  .request_id = i + 1,
				  .body_len = (uint32_t)blen,
				  .payload_len = W_LEN};
	w->frame_len = FRAME_HEADER_SIZE + blen + W_LEN;
	frame_header_encode(&fh, w->frame);
	memcpy(w->frame + FRAME_HEADER_SIZE, body, blen);
	hx_pattern(w->frame + FRAME_HEADER_SIZE + blen, W_LEN, 1000 + w->index * W_WRITES + i,
		   w_off(w->index, i));
	w->frame_sent = 0;
	free(body);
}

/* writer_send -- send what the socket takes; stop at an error */
static void writer_send(struct writer *w)
{
	while (!w->done && w->inflight < W_WINDOW) {
		if (w->frame_sent == w->frame_len) {
			if (w->next == W_WRITES)
				return;
			frame_make(w, w->next++);
		}
		ssize_t n = send(w->c.fd, w->frame + w->frame_sent, w->frame_len - w->frame_sent,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			if (errno == ECONNRESET)
				w->reset = true;
			w->done = true;
			return;
		}
		w->frame_sent += (size_t)n;
		if (w->frame_sent == w->frame_len)
			w->inflight++;
	}
}

/* writer_recv -- take the replies (status-only bodies); end of file or a reset ends it */
static void writer_recv(struct writer *w)
{
	for (;;) {
		ssize_t n =
		    recv(w->c.fd, w->rx + w->rx_got, sizeof(w->rx) - w->rx_got, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			if (n < 0 && errno == ECONNRESET)
				w->reset = true;
			w->done = true;
			return;
		}
		w->rx_got += (size_t)n;
		while (w->rx_got >= FRAME_HEADER_SIZE) {
			struct frame_header rh;
			frame_header_decode(w->rx, &rh);
			size_t len = FRAME_HEADER_SIZE + rh.body_len;
			if (len > sizeof(w->rx)) {
				w->bad_replies++;
				w->done = true;
				return;
			}
			if (w->rx_got < len)
				break;
			struct wreply r = {.h = rh, .body = w->rx + FRAME_HEADER_SIZE};
			int st = wreply_status(&r, NULL, 0);
			if (rh.request_id >= 1 && rh.request_id <= W_WRITES && st == 0 &&
			    rh.type == (FRAME_WRITE | FRAME_REPLY))
				w->replied[rh.request_id - 1] = true;
			else
				w->bad_replies++;
			w->replies++;
			w->inflight--;
			memmove(w->rx, w->rx + len, w->rx_got - len);
			w->rx_got -= len;
		}
	}
}

struct drain_result {
	unsigned resets, replied, landed_unreplied, partial, bad;
	bool half_replied, half_whole;
	bool late_reset; /* the late sender's bytes after the end were answered by a reset */
};

/* half_start -- a WRITE of HALF_LEN at HALF_OFF: the header and half its payload */
static uint8_t *half_start(struct wconn *c, uint32_t h)
{
	size_t blen;
	uint8_t *body = wire_body_write(h, HALF_OFF, false, &blen);
	uint8_t *data = malloc(HALF_LEN);
	assert_non_null(data);
	hx_pattern(data, HALF_LEN, 77, HALF_OFF);
	assert_int_equal(wire_send_frame(c, FRAME_WRITE, 1, body, blen, NULL, HALF_LEN), 0);
	assert_int_equal(wire_send_all(c, data, HALF_LEN / 2), 0);
	free(body);
	return data;
}

struct half {
	struct wconn c;
	uint8_t *data;
	bool replied;
	pthread_t thread;
};

/*
 * half_finish -- a thread, started at the SIGTERM: a moment later (the drain
 * has begun), the rest of the payload, then the reply (the writers go on
 * meanwhile)
 */
static void *half_finish(void *arg)
{
	struct half *hf = arg;
	usleep(200 * 1000);
	if (wire_send_all(&hf->c, hf->data + HALF_LEN / 2, HALF_LEN / 2) == 0) {
		struct wreply r;
		if (wire_recv(&hf->c, &r) == 0) {
			hf->replied = r.h.request_id == 1 && wreply_status(&r, NULL, 0) == 0;
			wreply_free(&r);
		}
	}
	return NULL;
}

/*
 * A client idle when the drain ends its connection, which sends once more
 * after the daemon's end of file: the other writers leave unread input at
 * the close only when the drain ends while their requests are on the way
 * (on a loaded machine they may all be waiting for replies), this one
 * always does. A lingering close reads and drops its bytes; a socket closed
 * at once answers them with a reset, which its next send reports (EPIPE or
 * ECONNRESET).
 */
struct late {
	struct wconn c;
	bool eof, reset;
	pthread_t thread;
};

static void *late_send(void *arg)
{
	struct late *l = arg;
	char b[256];
	static const char more[64];
	for (int64_t end = hx_now_ms() + 30000; !l->eof && hx_now_ms() < end;) {
		struct pollfd p = {.fd = l->c.fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = recv(l->c.fd, b, sizeof(b), 0);
		if (n == 0)
			l->eof = true;
		else if (n < 0 && errno != EINTR && errno != EAGAIN)
			break;
	}
	if (!l->eof)
		return NULL;
	for (int i = 0; i < 2 && !l->reset; i++) {
		if (send(l->c.fd, more, sizeof(more), MSG_NOSIGNAL) < 0)
			l->reset = errno == EPIPE || errno == ECONNRESET;
		usleep(200 * 1000); /* the reset, if one comes, is back by then */
	}
	return NULL;
}

/* drain_run -- the writers against a daemon with @faults, SIGTERM, then the volume checked */
static struct drain_result drain_run(const char *faults)
{
	char dir[256];
	struct hx_daemon d;
	struct drain_result res = {0};
	assert_int_equal(hx_tmpdir_make("close-drain", dir, sizeof(dir)), 0);
	struct hx_daemon_opts o = {.ns_size = "128M", .faults = faults};
	assert_int_equal(hx_daemon_start(&d, dir, &o), 0);
	static struct writer ws[W_CLIENTS];
	memset(ws, 0, sizeof(ws));
	for (unsigned k = 0; k < W_CLIENTS; k++) {
		struct writer *w = &ws[k];
		w->index = k;
		assert_int_equal(wire_connect(&w->c, d.port), 0);
		assert_int_equal(wire_hello(&w->c, NULL, 0), 0);
		if (k == 0)
			assert_int_equal(wire_create(&w->c, "v", HALF_OFF + HALF_LEN), 0);
		assert_int_equal(wire_open(&w->c, "v", &w->h, NULL), 0);
		w->frame = malloc(FRAME_HEADER_SIZE + 64 + W_LEN);
		assert_non_null(w->frame);
		fcntl(w->c.fd, F_SETFL, fcntl(w->c.fd, F_GETFL) | O_NONBLOCK);
	}
	/* one more client, half way through a WRITE's payload when the SIGTERM comes */
	static struct half hf;
	memset(&hf, 0, sizeof(hf));
	uint32_t hh;
	assert_int_equal(wire_connect(&hf.c, d.port), 0);
	assert_int_equal(wire_hello(&hf.c, NULL, 0), 0);
	assert_int_equal(wire_open(&hf.c, "v", &hh, NULL), 0);
	hf.data = half_start(&hf.c, hh);
	static struct late late;
	memset(&late, 0, sizeof(late));
	assert_int_equal(wire_connect(&late.c, d.port), 0);
	assert_int_equal(wire_hello(&late.c, NULL, 0), 0);
	bool termed = false;
	int64_t end = hx_now_ms() + 120000;
	for (;;) {
		struct pollfd p[W_CLIENTS];
		unsigned live = 0, replies = 0;
		for (unsigned k = 0; k < W_CLIENTS; k++) {
			replies += ws[k].replies;
			p[k] =
			    (struct pollfd){.fd = ws[k].done ? -1 : ws[k].c.fd, .events = POLLIN};
			if (!ws[k].done) {
				live++;
				if (ws[k].inflight < W_WINDOW)
					p[k].events |= POLLOUT;
			}
		}
		if (!live || hx_now_ms() > end)
			break;
		if (!termed && replies >= W_SIGTERM_AFTER) {
			kill(d.pid, SIGTERM); /* while every writer has requests on the way */
			termed = true;
			assert_int_equal(pthread_create(&hf.thread, NULL, half_finish, &hf), 0);
			assert_int_equal(pthread_create(&late.thread, NULL, late_send, &late), 0);
		}
		poll(p, W_CLIENTS, 100);
		for (unsigned k = 0; k < W_CLIENTS; k++) {
			if (ws[k].done)
				continue;
			writer_recv(&ws[k]);
			writer_send(&ws[k]);
		}
	}
	assert_true(termed);
	pthread_join(hf.thread, NULL);
	pthread_join(late.thread, NULL);
	res.half_replied = hf.replied;
	res.late_reset = late.reset;
	if (!late.eof)
		fail_msg("the late sender's connection did not end (no end of file)");
	wire_close(&late.c);
	free(hf.data);
	assert_int_equal(hx_daemon_wait_stopped(&d), 0); /* it drained and exited 0 */

	/* what landed: each write whole, not at all, or in part */
	assert_int_equal(hx_daemon_restart(&d), 0);
	struct wconn c;
	uint32_t h;
	assert_int_equal(wire_connect(&c, d.port), 0);
	assert_int_equal(wire_hello(&c, NULL, 0), 0);
	assert_int_equal(wire_open(&c, "v", &h, NULL), 0);
	uint8_t *got = malloc(W_LEN), *want = malloc(W_LEN);
	assert_non_null(got);
	assert_non_null(want);
	for (unsigned k = 0; k < W_CLIENTS; k++) {
		struct writer *w = &ws[k];
		res.resets += w->reset;
		res.bad += w->bad_replies;
		for (unsigned i = 0; i < W_WRITES; i++) {
			assert_int_equal(wire_read(&c, h, w_off(k, i), W_LEN, got), 0);
			hx_pattern(want, W_LEN, 1000 + k * W_WRITES + i, w_off(k, i));
			size_t same = 0, zero = 0;
			for (size_t b = 0; b < W_LEN; b++) {
				same += got[b] == want[b];
				zero += got[b] == 0;
			}
			bool whole = same == W_LEN, none = zero == W_LEN;
			res.replied += w->replied[i];
			if (w->replied[i] && !whole)
				fail_msg("client %u write %u was answered but is not in the volume",
					 k, i);
			if (whole && !w->replied[i])
				res.landed_unreplied++;
			if (!whole && !none)
				res.partial++;
		}
		wire_close(&w->c);
		free(w->frame);
	}
	free(got);
	free(want);
	got = malloc(HALF_LEN);
	want = malloc(HALF_LEN);
	assert_non_null(got);
	assert_non_null(want);
	assert_int_equal(wire_read(&c, h, HALF_OFF, HALF_LEN, got), 0);
	hx_pattern(want, HALF_LEN, 77, HALF_OFF);
	res.half_whole = memcmp(got, want, HALF_LEN) == 0;
	free(got);
	free(want);
	wire_close(&hf.c);
	wire_close(&c);
	assert_int_equal(hx_daemon_stop(&d), 0);
	hx_tmpdir_remove(dir);
	print_message("faults %s: %u writes answered; %u connection(s) reset, %u writes carried "
		      "out without a reply, %u in part, %u bad replies; the half-sent WRITE %s "
		      "and %s; the late sender %s\n",
		      faults ? faults : "none", res.replied, res.resets, res.landed_unreplied,
		      res.partial, res.bad, res.half_replied ? "answered" : "not answered",
		      res.half_whole ? "whole" : "not whole",
		      res.late_reset ? "reset" : "not reset");
	return res;
}

static void sigterm_pipelined_writers(void **state)
{
	struct drain_result r = drain_run(NULL);
	assert_true(r.replied >= W_SIGTERM_AFTER);
	assert_int_equal(r.resets, 0);
	assert_false(r.late_reset);
	assert_int_equal(r.landed_unreplied, 0);
	assert_int_equal(r.partial, 0);
	assert_int_equal(r.bad, 0);
	assert_true(r.half_replied);
	assert_true(r.half_whole);
}

/*
 * Without the lingering close the writers see a reset only if the drain
 * ends while their requests are on the way; the late sender (above) sees
 * one whenever the socket was closed at once.
 */
static void sigterm_control_linger_off(void **state)
{
	struct drain_result r = drain_run("linger-off");
	assert_true(r.late_reset || r.resets > 0 || r.landed_unreplied > 0);
}

static void sigterm_control_drain_cuts_payload(void **state)
{
	struct drain_result r = drain_run("drain-cuts-payload");
	assert_false(r.half_replied && r.half_whole);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(error_frame_reaches_a_sending_client),
	    cmocka_unit_test(error_frame_control_linger_off),
	    cmocka_unit_test(sigterm_pipelined_writers),
	    cmocka_unit_test(sigterm_control_linger_off),
	    cmocka_unit_test(sigterm_control_drain_cuts_payload),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
