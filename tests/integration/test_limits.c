/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_limits.c -- what a daemon does against clients that hold on to it
 *
 * Each case starts its own rdaxd with the limits it needs and checks them
 * from the outside, with a control that shows the check can fail (the same
 * case with the limit switched off, where that is a setting):
 *
 *   handshake_timeout: connections that never say a word are closed after
 *     --handshake-timeout, one that said HELLO is not (control: 0, none).
 *   request_timeout: a WRITE that announces 4 MiB and stalls after 1 KiB
 *     keeps its volume open (undeletable) only until --request-timeout; a
 *     header cut half way is closed too (control: 0, still busy).
 *   idle_timeout: a connection that said HELLO and then nothing is closed
 *     after --idle-timeout; without it (the default) it stays.
 *   max_connections: at --max-connections-per-peer from one address and at
 *     --max-connections in all, one more connection gets a clear refusal
 *     (EUSERS with the reason, over the rdax protocol, through the rdax
 *     command, and over NBD), while a client connected before is served.
 *   descriptor_limit: a daemon whose descriptor limit is below the
 *     default --max-connections lowers it to fit; silent connections up to
 *     the cap and beyond it do not starve a new client: it gets a clear
 *     refusal at once, and is served once the handshake timeout has closed
 *     the silent ones (before: thousands of silent connections held every
 *     descriptor and a new client waited without an answer).
 *   keepalive: accepted TCP sockets carry keepalive timers (ss(8)); with
 *     --keepalive 0 they do not.
 *   metadata_fairness: 50 connections pipelining VOLUME_LIST over 1,000
 *     volumes; a witness's HELLO latency under that load as a ratio to its
 *     latency alone, with the single metadata queue of before
 *     (meta-no-lanes) and with the quick lane (printed, not asserted: the
 *     lane is asserted structurally by test_fsync_pool).
 *   client_refusals_logged_rate_limited: 600 refused requests and broken
 *     frames of one address make at most 10 log lines, none at error.
 *   reply_memory_bounded: connections that pipeline requests and never read
 *     the replies hold at most --max-reply-memory in all (control: 0, each
 *     its own 4 MiB), while a witness is served.
 *   memory: thousands of silent connections, slowloris (a header at a byte
 *     a second) and WRITEs announcing the largest payload then stalling:
 *     the daemon's memory stays under a bound computed from what each kind
 *     may hold, and a witness keeps being served; its latency under the
 *     load, as a ratio to its latency before, is printed (not asserted:
 *     times on a shared machine are noise).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "errors.h"
#include "frame.h"
#include "harness.h"
#include "wire.h"

#define MiB (1ULL << 20)

static char g_dir[256];

/* start -- a daemon in a fresh directory with @extra flags (NULL-terminated, at most 8) */
static void start(struct hx_daemon *d, const char *const *extra)
{
	struct hx_daemon_opts o = {.ns_size = "64M", .log_level = "info"};
	for (unsigned i = 0; extra && extra[i] && i < 7; i++)
		o.extra_args[i] = extra[i];
	assert_int_equal(hx_tmpdir_make("limits", g_dir, sizeof(g_dir)), 0);
	assert_int_equal(hx_daemon_start(d, g_dir, &o), 0);
}

static void stop(struct hx_daemon *d)
{
	assert_int_equal(hx_daemon_stop(d), 0);
	hx_tmpdir_remove(g_dir);
}

/* closed_within -- does the daemon end @c (EOF or reset) within @ms? */
static bool closed_within(struct wconn *c, int ms)
{
	int64_t end = hx_now_ms() + ms;
	for (;;) {
		int left = (int)(end - hx_now_ms());
		if (left <= 0)
			return false;
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		if (poll(&p, 1, left) <= 0)
			continue;
		uint8_t b[4096];
		ssize_t n = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		/* bytes (a greeting, a reply): read on */
	}
}

/* count_closed -- how many of @n connections the daemon ends within @ms (all watched at once) */
static unsigned count_closed(struct wconn *c, unsigned n, int ms)
{
	struct pollfd *p = calloc(n, sizeof(*p));
	assert_non_null(p);
	unsigned closed = 0;
	for (unsigned i = 0; i < n; i++)
		p[i] = (struct pollfd){.fd = c[i].fd, .events = POLLIN};
	for (int64_t end = hx_now_ms() + ms; closed < n && hx_now_ms() < end;) {
		if (poll(p, n, (int)(end - hx_now_ms())) <= 0)
			continue;
		for (unsigned i = 0; i < n; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			uint8_t b[4096];
			ssize_t r = recv(p[i].fd, b, sizeof(b), MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno == ECONNRESET)) {
				closed++;
				p[i].fd = -1;
			}
		}
	}
	free(p);
	return closed;
}

/* ready -- a connection that said HELLO (and created @vol if not NULL) */
static void ready(struct wconn *c, int port, const char *src)
{
	assert_int_equal(wire_connect_from(c, port, src), 0);
	assert_int_equal(wire_hello(c, NULL, 0), 0);
}

/* ---- time limits ---- */

/*
 * CONTROL_WAIT_MS -- how long a control (the limit off) watches for what the
 * limit would have done: three times the 2 s limit of the case it mirrors,
 * which closes within about 3 s under ASan on a loaded machine. The cases
 * with the limit on keep their long ceilings: they end as soon as it acts.
 */
#define CONTROL_WAIT_MS 6000

/*
 * silent_case -- @n silent connections and one that said HELLO; how many
 * silent ones the daemon closed within @wait_ms
 */
static unsigned silent_case(const char *timeout, int wait_ms)
{
	struct hx_daemon d;
	const char *extra[] = {"--handshake-timeout", timeout, NULL};
	start(&d, extra);
	enum { N = 100 };
	static struct wconn s[N];
	struct wconn h;
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(wire_connect_from(&s[i], d.port, "127.0.0.2"), 0);
	ready(&h, d.port, NULL);
	int64_t start_ms = hx_now_ms();
	unsigned closed = count_closed(s, N, wait_ms);
	int64_t took = hx_now_ms() - start_ms;
	/* the one that said HELLO outlives the limit and is still served */
	usleep(2500 * 1000);
	assert_int_equal(wire_create(&h, "still", MiB), 0);
	print_message("--handshake-timeout %s: %u of %d silent connections closed (%.1f s), the "
		      "HELLO one still served\n",
		      timeout, closed, N, took / 1000.0);
	for (unsigned i = 0; i < N; i++)
		wire_close(&s[i]);
	wire_close(&h);
	stop(&d);
	return closed;
}

static void handshake_timeout(void **state)
{
	assert_int_equal(silent_case("2", 15000), 100);
}

static void handshake_timeout_control_none(void **state)
{
	assert_int_equal(silent_case("0", CONTROL_WAIT_MS), 0);
}

/*
 * stall_case -- a WRITE announcing 4 MiB that stalls after 1 KiB, and a
 * header cut after 10 bytes; true if the volume could be deleted within
 * @wait_ms (and both stalled connections were closed)
 */
static bool stall_case(const char *timeout, int wait_ms)
{
	struct hx_daemon d;
	const char *extra[] = {"--request-timeout", timeout, NULL};
	start(&d, extra);
	struct wconn a, b, cut;
	uint32_t h;
	ready(&a, d.port, NULL);
	ready(&b, d.port, NULL);
	ready(&cut, d.port, NULL);
	assert_int_equal(wire_create(&b, "v", 8 * MiB), 0);
	assert_int_equal(wire_open(&a, "v", &h, NULL), 0);
	size_t blen;
	uint8_t *body = wire_body_write(h, 0, false, &blen);
	static uint8_t kib[1024];
	assert_int_equal(wire_send_frame(&a, FRAME_WRITE, 9, body, blen, NULL, 4 << 20), 0);
	assert_int_equal(wire_send_all(&a, kib, sizeof(kib)), 0);
	free(body);
	uint8_t half[10];
	struct frame_header fh = {.magic = FRAME_MAGIC,
				  .version = FRAME_VERSION,
				  .type = FRAME_VOLUME_LIST,
				  .request_id = 5};
	uint8_t raw[FRAME_HEADER_SIZE];
	frame_header_encode(&fh, raw);
	memcpy(half, raw, sizeof(half));
	assert_int_equal(wire_send_all(&cut, half, sizeof(half)), 0);

	assert_int_equal(wire_delete(&b, "v"), EBUSY); /* the stalled WRITE holds it */
	bool deleted = false;
	int64_t t0 = hx_now_ms();
	while (!deleted && hx_now_ms() - t0 < wait_ms) {
		usleep(500 * 1000);
		deleted = wire_delete(&b, "v") == 0;
	}
	bool both_closed = deleted && closed_within(&a, 5000) && closed_within(&cut, 5000);
	print_message("--request-timeout %s: the volume under a stalled WRITE %s (%.1f s)%s\n",
		      timeout, deleted ? "was deleted" : "stayed busy", (hx_now_ms() - t0) / 1000.0,
		      both_closed ? "; both stalled connections closed" : "");
	wire_close(&a);
	wire_close(&b);
	wire_close(&cut);
	stop(&d);
	return deleted && both_closed;
}

static void request_timeout(void **state)
{
	assert_true(stall_case("2", 20000));
}

static void request_timeout_control_none(void **state)
{
	assert_false(stall_case("0", CONTROL_WAIT_MS));
}

static void idle_timeout(void **state)
{
	struct hx_daemon d;
	const char *extra[] = {"--idle-timeout", "2", NULL};
	start(&d, extra);
	struct wconn c;
	ready(&c, d.port, NULL);
	assert_true(closed_within(&c, 15000));
	wire_close(&c);
	stop(&d);
	/* the default: none */
	start(&d, NULL);
	ready(&c, d.port, NULL);
	assert_false(closed_within(&c, 4000));
	assert_int_equal(wire_create(&c, "v", MiB), 0);
	wire_close(&c);
	stop(&d);
}

/* ---- connection limits ---- */

/*
 * refused -- the daemon refuses @c at once: one frame of type FRAME_REPLY
 * answering no request (id 0), EUSERS with a message containing @words,
 * then the end of the connection -- whatever the client sends (a HELLO)
 */
static void refused(struct wconn *c, const char *words)
{
	size_t blen;
	uint8_t *body = wire_body_hello(NULL, 0, FRAME_VERSION, &blen);
	assert_int_equal(wire_send_frame(c, FRAME_HELLO, 1, body, blen, NULL, 0), 0);
	free(body);
	struct wreply r;
	assert_int_equal(wire_recv(c, &r), 0);
	assert_int_equal(r.h.type, FRAME_REPLY);
	assert_int_equal(r.h.request_id, 0);
	char msg[256] = "";
	assert_int_equal(wreply_status(&r, msg, sizeof(msg)), EUSERS);
	wreply_free(&r);
	if (!strstr(msg, words))
		fail_msg("refusal \"%s\" does not say \"%s\"", msg, words);
	assert_true(wire_eof(c));
}

static void max_connections(void **state)
{
	struct hx_daemon d;
	char nbd_listen[64];
	int nbd_port = hx_free_port();
	snprintf(nbd_listen, sizeof(nbd_listen), "nbd://127.0.0.1:%d", nbd_port);
	const char *extra[] = {
	    "--max-connections", "12", "--max-connections-per-peer", "4", "--listen",
	    nbd_listen,		 NULL};
	start(&d, extra);
	struct wconn w, p2[5], p3[4], p4[3], p5;
	ready(&w, d.port, NULL); /* the witness, connected before the others */
	assert_int_equal(wire_create(&w, "v", MiB), 0);
	for (unsigned i = 0; i < 4; i++)
		ready(&p2[i], d.port, "127.0.0.2");
	/* a fifth from the same address: refused, with the reason */
	assert_int_equal(wire_connect_from(&p2[4], d.port, "127.0.0.2"), 0);
	refused(&p2[4], "per address");
	/* other addresses fill the total: 1 + 4 + 4 + 3 = 12 */
	for (unsigned i = 0; i < 4; i++)
		ready(&p3[i], d.port, "127.0.0.3");
	for (unsigned i = 0; i < 3; i++)
		ready(&p4[i], d.port, "127.0.0.4");
	assert_int_equal(wire_connect_from(&p5, d.port, "127.0.0.5"), 0);
	refused(&p5, "too many connections");
	/* the rdax command says why too */
	struct hx_run r;
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "volume", "list", NULL), 0);
	print_message("rdax at the limit: exit %d: %s", r.status, r.err);
	assert_int_not_equal(r.status, 0);
	assert_non_null(strstr(r.err, "too many connections"));
	hx_run_free(&r);
	/* and an NBD client (libnbd) */
	char uri[96];
	snprintf(uri, sizeof(uri), "nbd://127.0.0.1:%d/v", nbd_port);
	/*
	 * libnbd fails NBD_OPT_GO ("server replied with error") and shows the
	 * server's reason only in its debug output
	 */
	const char *nbdinfo[] = {"/usr/bin/env", "LIBNBD_DEBUG=1", "/usr/bin/nbdinfo", uri, NULL};
	assert_int_equal(hx_run_argv(nbdinfo, NULL, 0, &r), 0);
	print_message("nbdinfo at the limit: exit %d\n", r.status);
	assert_int_not_equal(r.status, 0);
	assert_non_null(strstr(r.err, "too many connections"));
	hx_run_free(&r);
	/* the witness is served all along */
	uint32_t h;
	assert_int_equal(wire_open(&w, "v", &h, NULL), 0);
	assert_int_equal(wire_write(&w, h, 0, "abc", 3, true), 0);
	/* one leaves: its address may connect again */
	wire_close(&p2[0]);
	wire_close(&p2[4]);
	bool again = false;
	for (int i = 0; i < 50 && !again; i++) {
		usleep(100 * 1000);
		struct wconn n;
		assert_int_equal(wire_connect_from(&n, d.port, "127.0.0.2"), 0);
		again = wire_hello(&n, NULL, 0) == 0;
		wire_close(&n);
	}
	assert_true(again);
	wire_close(&w);
	for (unsigned i = 1; i < 4; i++)
		wire_close(&p2[i]);
	for (unsigned i = 0; i < 4; i++)
		wire_close(&p3[i]);
	for (unsigned i = 0; i < 3; i++)
		wire_close(&p4[i]);
	wire_close(&p5);
	stop(&d);
}

static void descriptor_limit(void **state)
{
	/* a hard limit of 400: the default 1024 connections cannot fit */
	setenv("RDAXD_WRAPPER", "prlimit --nofile=400:400", 1);
	struct hx_daemon d;
	const char *extra[] = {"--handshake-timeout", "3", NULL};
	start(&d, extra);
	unsetenv("RDAXD_WRAPPER");
	enum { SILENT = 300 };
	static struct wconn s[SILENT];
	unsigned opened = 0;
	for (; opened < SILENT; opened++)
		if (wire_connect_from(&s[opened], d.port, "127.0.0.2"))
			break;
	usleep(300 * 1000);
	/*
	 * at the cap (400 - 64 - 128 = 208): a new client learns at once, not
	 * left waiting -- a refusal frame, or the end of its connection when the
	 * refusing slots are taken too (by the silent ones beyond the cap)
	 */
	struct wconn c;
	assert_int_equal(wire_connect(&c, d.port), 0);
	int64_t t0 = hx_now_ms();
	struct wreply r;
	int got = wire_recv(&c, &r);
	int64_t refusal_ms = hx_now_ms() - t0;
	char msg[256] = "";
	if (got == 0) {
		assert_int_equal(wreply_status(&r, msg, sizeof(msg)), EUSERS);
		assert_non_null(strstr(msg, "too many connections"));
		wreply_free(&r);
	} else {
		assert_int_equal(got, -EPIPE); /* closed, not a timeout */
	}
	assert_true(refusal_ms < 5000);
	wire_close(&c);
	/* the silent ones go at the handshake timeout; then a new client is served */
	bool served = false;
	for (int i = 0; i < 100 && !served; i++) {
		usleep(200 * 1000);
		if (wire_connect(&c, d.port) == 0) {
			served = wire_hello(&c, NULL, 0) == 0;
			wire_close(&c);
		}
	}
	print_message("descriptor limit 400: %u silent connections opened; a new client refused "
		      "in %lld ms (%s), served after the handshake timeout: %s\n",
		      opened, (long long)refusal_ms, msg[0] ? msg : "closed at once",
		      served ? "yes" : "no");
	assert_true(served);
	for (unsigned i = 0; i < opened; i++)
		wire_close(&s[i]);
	char log[64 << 10];
	int fd = open(d.log_path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, log, sizeof(log) - 1) : -1;
	if (fd >= 0)
		close(fd);
	log[n > 0 ? n : 0] = '\0';
	assert_non_null(strstr(log, "lowered to 208"));
	stop(&d);
}

/* keepalive_timers -- accepted sockets of the daemon on @port with a keepalive timer (ss) */
static int keepalive_timers(int port)
{
	char filter[64];
	snprintf(filter, sizeof(filter), "( sport = :%d )", port);
	const char *argv[] = {"/usr/bin/ss", "-tnoH", "state", "established", filter, NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	int n = 0;
	for (const char *p = r.out; (p = strstr(p, "timer:(keepalive")); p++)
		n++;
	hx_run_free(&r);
	return n;
}

static void keepalive(void **state)
{
	struct hx_daemon d;
	struct wconn c[3];
	start(&d, NULL);
	for (unsigned i = 0; i < 3; i++)
		ready(&c[i], d.port, NULL);
	int on = keepalive_timers(d.port);
	for (unsigned i = 0; i < 3; i++)
		wire_close(&c[i]);
	stop(&d);
	const char *extra[] = {"--keepalive", "0", NULL};
	start(&d, extra);
	for (unsigned i = 0; i < 3; i++)
		ready(&c[i], d.port, NULL);
	int off = keepalive_timers(d.port);
	for (unsigned i = 0; i < 3; i++)
		wire_close(&c[i]);
	stop(&d);
	print_message("keepalive timers: %d of 3 by default, %d with --keepalive 0\n", on, off);
	assert_int_equal(on, 3);
	assert_int_equal(off, 0);
}

/* ---- metadata fairness ---- */

/* hello_us -- a fresh connection's HELLO, in microseconds */
static double hello_us(int port)
{
	struct wconn c;
	assert_int_equal(wire_connect(&c, port), 0);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(wire_hello(&c, NULL, 0), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	wire_close(&c);
	return (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
}

/* median_of -- sort @n values in place, the middle one */
static double median_of(double *v, unsigned n)
{
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[n / 2];
}

#define LISTERS	     50
#define LIST_WINDOW  8
#define FAIR_VOLUMES 1000

struct lister {
	struct wconn c;
	unsigned inflight;
	uint64_t next_id;
	uint8_t *rx;
	size_t rx_got, rx_cap;
	unsigned replies;
};

/* lister_pump -- keep LIST_WINDOW VOLUME_LIST requests in flight, take the replies */
static void lister_pump(struct lister *l)
{
	while (l->inflight < LIST_WINDOW) {
		struct frame_header fh = {.magic = FRAME_MAGIC,
					  .version = FRAME_VERSION,
					  .type = FRAME_VOLUME_LIST,
					  .request_id = l->next_id++};
		uint8_t raw[FRAME_HEADER_SIZE];
		frame_header_encode(&fh, raw);
		ssize_t n = send(l->c.fd, raw, sizeof(raw), MSG_DONTWAIT | MSG_NOSIGNAL);
		assert_int_equal(n, sizeof(raw)); /* 32 bytes: the socket always takes them */
		l->inflight++;
	}
	for (;;) {
		if (l->rx_got == l->rx_cap) {
			l->rx_cap = l->rx_cap ? 2 * l->rx_cap : 1 << 16;
			l->rx = realloc(l->rx, l->rx_cap);
			assert_non_null(l->rx);
		}
		ssize_t n = recv(l->c.fd, l->rx + l->rx_got, l->rx_cap - l->rx_got, MSG_DONTWAIT);
		if (n <= 0)
			break;
		l->rx_got += (size_t)n;
		for (;;) {
			if (l->rx_got < FRAME_HEADER_SIZE)
				break;
			struct frame_header rh;
			frame_header_decode(l->rx, &rh);
			assert_int_equal(rh.type, FRAME_VOLUME_LIST | FRAME_REPLY);
			size_t len = FRAME_HEADER_SIZE + rh.body_len;
			if (l->rx_got < len)
				break;
			memmove(l->rx, l->rx + len, l->rx_got - len);
			l->rx_got -= len;
			l->inflight--;
			l->replies++;
		}
	}
}

/*
 * fairness_run -- against @d (1,000 volumes): the witness's HELLO median
 * alone and while 50 connections pipeline VOLUME_LIST; returns the ratio
 */
static double fairness_run(struct hx_daemon *d, const char *what)
{
	enum { SAMPLES = 11 };
	double idle[SAMPLES], busy[SAMPLES];
	for (unsigned i = 0; i < SAMPLES; i++)
		idle[i] = hello_us(d->port);
	static struct lister ls[LISTERS];
	memset(ls, 0, sizeof(ls));
	for (unsigned i = 0; i < LISTERS; i++) {
		ready(&ls[i].c, d->port, NULL);
		ls[i].next_id = 10;
	}
	unsigned replies = 0;
	for (unsigned i = 0; i < SAMPLES; i++) {
		for (unsigned k = 0; k < LISTERS; k++)
			lister_pump(&ls[k]);
		/* the witness's HELLO while the listers' requests are queued */
		busy[i] = hello_us(d->port);
	}
	/*
	 * The load was real: the lists queued meanwhile are answered. The samples
	 * may all be taken before the first list (1,000 volumes) is done, so
	 * wait for the answers here rather than counting only those that came.
	 */
	for (int64_t end = hx_now_ms() + 30000; hx_now_ms() < end;) {
		replies = 0;
		for (unsigned k = 0; k < LISTERS; k++) {
			lister_pump(&ls[k]);
			replies += ls[k].replies;
		}
		if (replies >= LISTERS)
			break;
		usleep(10000);
	}
	replies = 0;
	for (unsigned k = 0; k < LISTERS; k++) {
		replies += ls[k].replies;
		wire_close(&ls[k].c);
		free(ls[k].rx);
	}
	double mi = median_of(idle, SAMPLES), mb = median_of(busy, SAMPLES);
	print_message(
	    "%s: witness HELLO median %.0f us alone, %.0f us while %d connections "
	    "pipeline VOLUME_LIST over %d volumes (%u lists answered by the end): %.1fx\n",
	    what, mi, mb, LISTERS, FAIR_VOLUMES, replies, mb / mi);
	assert_true(replies > 0);
	return mb / mi;
}

/*
 * The metadata pool's quick lane, from outside: the ratio of the witness's
 * HELLO under the load to its HELLO alone, with the single queue of before
 * (meta-no-lanes) and with the lanes. Printed, not asserted (timing);
 * test_fsync_pool asserts the lane structurally.
 */
static void metadata_fairness(void **state)
{
	struct hx_daemon d;
	const char *extra[] = {"--threads", "2", NULL};
	struct hx_daemon_opts o = {.ns_size = "256M", .log_level = "warn"};
	o.extra_args[0] = extra[0];
	o.extra_args[1] = extra[1];
	assert_int_equal(hx_tmpdir_make("limits", g_dir, sizeof(g_dir)), 0);
	assert_int_equal(hx_daemon_start(&d, g_dir, &o), 0);
	struct wconn c;
	ready(&c, d.port, NULL);
	for (unsigned i = 0; i < FAIR_VOLUMES; i++) {
		char name[32];
		snprintf(name, sizeof(name), "vol-%04u", i);
		assert_int_equal(wire_create(&c, name, 4096), 0);
	}
	wire_close(&c);
	double after = fairness_run(&d, "lanes");
	assert_int_equal(hx_daemon_stop(&d), 0);
	d.opts.faults = "meta-no-lanes";
	assert_int_equal(hx_daemon_restart(&d), 0);
	double before = fairness_run(&d, "one queue (before)");
	print_message("the witness's HELLO under the load: %.1fx its latency alone before, %.1fx "
		      "now\n",
		      before, after);
	stop(&d);
}

/* ---- logs ---- */

/* count_lines -- lines of the daemon's log containing @what */
static unsigned count_lines(const struct hx_daemon *d, const char *what)
{
	FILE *f = fopen(d->log_path, "r");
	assert_non_null(f);
	char line[2048];
	unsigned n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

/*
 * What a client causes is logged at info, at most LOG_PEER_BURST (10)
 * records a minute per address, never as a daemon error: 300 creates of a
 * name that exists, 200 deletes of a volume open elsewhere and 100
 * connections with a bad frame from one address make a handful of lines
 * (before: 500 error records, one per request, and 100 warnings).
 */
static void client_refusals_logged_rate_limited(void **state)
{
	struct hx_daemon d;
	start(&d, NULL);
	struct wconn c, o;
	uint32_t h;
	ready(&c, d.port, "127.0.0.2");
	ready(&o, d.port, NULL);
	assert_int_equal(wire_create(&c, "v", MiB), 0);
	assert_int_equal(wire_open(&o, "v", &h, NULL), 0);
	for (unsigned i = 0; i < 300; i++)
		assert_int_equal(wire_create(&c, "v", MiB), EEXIST);
	for (unsigned i = 0; i < 200; i++)
		assert_int_equal(wire_delete(&c, "v"), EBUSY);
	for (unsigned i = 0; i < 100; i++) {
		struct wconn b;
		assert_int_equal(wire_connect_from(&b, d.port, "127.0.0.2"), 0);
		uint8_t raw[FRAME_HEADER_SIZE] = {0xde, 0xad};
		assert_int_equal(wire_send_all(&b, raw, sizeof(raw)), 0);
		assert_true(closed_within(&b, 10000)); /* the error frame, then the end */
		wire_close(&b);
	}
	unsigned lines = count_lines(&d, "127.0.0.2"), errors = count_lines(&d, "<3>error");
	print_message("600 refusals from one address: %u log lines about it, %u error records\n",
		      lines, errors);
	assert_true(lines <= 10);
	assert_int_equal(errors, 0);
	wire_close(&c);
	wire_close(&o);
	stop(&d);
}

/* ---- memory ---- */

/* proc_read -- /proc/@pid/@file into @buf (NUL-terminated) */
static void proc_read(pid_t pid, const char *file, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
}

/* rss_kib -- VmRSS of @pid in KiB */
static long rss_kib(pid_t pid)
{
	char buf[4096];
	proc_read(pid, "status", buf, sizeof(buf));
	const char *p = strstr(buf, "VmRSS:");
	assert_non_null(p);
	return strtol(p + 6, NULL, 10);
}

/* cpu_ticks -- the user + system clock ticks @pid has run so far (/proc/PID/stat) */
static long cpu_ticks(pid_t pid)
{
	char buf[1024];
	proc_read(pid, "stat", buf, sizeof(buf));
	/* after the command's ")": state is field 3, utime 14, stime 15 */
	const char *p = strrchr(buf, ')');
	assert_non_null(p);
	long utime = 0, stime = 0;
	assert_int_equal(
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &utime, &stime),
	    2);
	return utime + stime;
}

/* witness_round -- @n 4 KiB READs by @w; their median latency in microseconds */
static double witness_round(struct wconn *w, uint32_t h, unsigned n)
{
	static double lat[400];
	static uint8_t buf[4096];
	for (unsigned i = 0; i < n; i++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		assert_int_equal(wire_read(w, h, (i % 16) * 4096, 4096, buf), 0);
		clock_gettime(CLOCK_MONOTONIC, &b);
		lat[i] =
		    (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
	}
	for (unsigned i = 1; i < n; i++) /* insertion sort: n is small */
		for (unsigned j = i; j > 0 && lat[j] < lat[j - 1]; j--) {
			double t = lat[j];
			lat[j] = lat[j - 1];
			lat[j - 1] = t;
		}
	return lat[n / 2];
}

static void memory_bounded_under_hostile_clients(void **state)
{
	enum { SILENT = 2000, SLOW = 200, STALLED = 200 };
	struct hx_daemon d;
	const char *extra[] = {"--max-connections",
			       "4000",
			       "--max-connections-per-peer",
			       "4000",
			       "--handshake-timeout",
			       "120",
			       NULL};
	start(&d, extra);
	struct wconn w;
	uint32_t wh;
	ready(&w, d.port, NULL);
	assert_int_equal(wire_create(&w, "v", 32 * MiB), 0);
	assert_int_equal(wire_open(&w, "v", &wh, NULL), 0);
	double before = witness_round(&w, wh, 200);
	long rss0 = rss_kib(d.pid);

	static struct wconn silent[SILENT], slow[SLOW], stalled[STALLED];
	for (unsigned i = 0; i < SILENT; i++)
		assert_int_equal(wire_connect_from(&silent[i], d.port, "127.0.0.2"), 0);
	for (unsigned i = 0; i < STALLED; i++) {
		uint32_t h;
		ready(&stalled[i], d.port, "127.0.0.3");
		assert_int_equal(wire_open(&stalled[i], "v", &h, NULL), 0);
		size_t blen;
		uint8_t *body = wire_body_write(h, (i % 8) * 4 * MiB, false, &blen);
		/* the largest payload announced, one byte of it sent */
		assert_int_equal(
		    wire_send_frame(&stalled[i], FRAME_WRITE, 2, body, blen, NULL, 4 << 20), 0);
		assert_int_equal(wire_send_all(&stalled[i], "x", 1), 0);
		free(body);
	}
	for (unsigned i = 0; i < SLOW; i++)
		assert_int_equal(wire_connect_from(&slow[i], d.port, "127.0.0.4"), 0);
	/* slowloris: a HELLO header, a byte a second to every slow connection */
	struct frame_header fh = {.magic = FRAME_MAGIC,
				  .version = FRAME_VERSION,
				  .type = FRAME_HELLO,
				  .request_id = 1,
				  .body_len = 4};
	uint8_t raw[FRAME_HEADER_SIZE];
	frame_header_encode(&fh, raw);
	double during = 0;
	for (unsigned sec = 0; sec < 8; sec++) {
		for (unsigned i = 0; i < SLOW; i++)
			assert_int_equal(wire_send_all(&slow[i], raw + sec, 1), 0);
		int64_t t0 = hx_now_ms();
		double m = witness_round(&w, wh, 50);
		during = m > during ? m : during;
		int64_t left = 1000 - (hx_now_ms() - t0);
		if (left > 0)
			usleep((useconds_t)left * 1000);
	}
	long rss1 = rss_kib(d.pid);
	/*
	 * The bound: a silent connection holds its structures and no input
	 * buffer; a slow one and a stalled one an input buffer of 16 KiB
	 * (NATIVE_INBUF_MIN) besides; 8 KiB of structures each is generous (a
	 * sanitizer build pads every allocation), and 8 MiB for the rest.
	 */
	long bound = (SILENT + SLOW + STALLED) * 8L + (SLOW + STALLED) * 16L + 8192;
	print_message("%d silent, %d slowloris, %d stalled WRITEs of 4 MiB: daemon RSS %ld -> "
		      "%ld KiB (+%ld KiB; bound %ld KiB); witness 4 KiB READ median %.0f us "
		      "before, worst second %.0f us under the load: %.2fx\n",
		      SILENT, SLOW, STALLED, rss0, rss1, rss1 - rss0, bound, before, during,
		      during / before);
	assert_true(rss1 - rss0 < bound);
	assert_int_equal(wire_read(&w, wh, 0, 4096, (uint8_t[4096]){0}), 0);
	for (unsigned i = 0; i < SILENT; i++)
		wire_close(&silent[i]);
	for (unsigned i = 0; i < SLOW; i++)
		wire_close(&slow[i]);
	for (unsigned i = 0; i < STALLED; i++)
		wire_close(&stalled[i]);
	wire_close(&w);
	stop(&d);
}

/*
 * reply_growth -- against a daemon with --max-reply-memory @budget: 8
 * connections pipeline 2,000 VOLUME_LIST each over 1,000 volumes and never
 * read a reply; the growth of the daemon's RSS in KiB once they are stuck.
 * A witness's VOLUME_LIST is answered meanwhile.
 */
static long reply_growth(const char *budget)
{
	/* 1,000 volumes: ~40 KiB a reply, so 128 of them pass a connection's 4 MiB */
	enum { HOGS = 8, EACH = 2000, VOLS = 1000 };
	struct hx_daemon d;
	const char *extra[] = {"--max-reply-memory", budget, NULL};
	/*
	 * a sanitizer build keeps freed memory in quarantine (256 MiB): every
	 * list sent and freed would count; without it RSS shows what is held
	 */
	const char *asan = getenv("ASAN_OPTIONS");
	char *saved = asan ? strdup(asan) : NULL;
	char opts[512];
	snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=0", asan ? asan : "",
		 asan && *asan ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
	start(&d, extra);
	if (saved)
		setenv("ASAN_OPTIONS", saved, 1);
	else
		unsetenv("ASAN_OPTIONS");
	free(saved);
	struct wconn w;
	ready(&w, d.port, NULL);
	for (unsigned i = 0; i < VOLS; i++) {
		char name[32];
		snprintf(name, sizeof(name), "vol-%04u", i);
		assert_int_equal(wire_create(&w, name, 4096), 0);
	}
	long rss0 = rss_kib(d.pid);
	static struct wconn hog[HOGS];
	static uint8_t frames[EACH * FRAME_HEADER_SIZE];
	for (unsigned i = 0; i < EACH; i++) {
		struct frame_header fh = {.magic = FRAME_MAGIC,
					  .version = FRAME_VERSION,
					  .type = FRAME_VOLUME_LIST,
					  .request_id = 10 + i};
		frame_header_encode(&fh, frames + i * FRAME_HEADER_SIZE);
	}
	for (unsigned k = 0; k < HOGS; k++) {
		/* a small receive window (set before connect): replies stay in the daemon */
		memset(&hog[k], 0, sizeof(hog[k]));
		hog[k].next_id = 1;
		hog[k].fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(hog[k].fd >= 0);
		int sz = 4096;
		setsockopt(hog[k].fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons((uint16_t)d.port),
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		assert_int_equal(connect(hog[k].fd, (struct sockaddr *)&a, sizeof(a)), 0);
		assert_int_equal(wire_hello(&hog[k], NULL, 0), 0);
		assert_int_equal(wire_send_all(&hog[k], frames, sizeof(frames)), 0);
	}
	/*
	 * until the daemon's memory has not grown for 5 s while it was idle
	 * (at most a tick of CPU a second): the hogs are stuck (first their
	 * socket buffers fill, while freed replies are reused and the memory
	 * stays flat; then the queues grow). Idle, not only flat: on a loaded
	 * machine a daemon starved of CPU is flat too, with its work undone.
	 */
	long rss = rss_kib(d.pid), top = rss, ticks = cpu_ticks(d.pid);
	for (int i = 0, flat = 0; i < 180 && flat < 5; i++) {
		usleep(1000 * 1000);
		rss = rss_kib(d.pid);
		long t = cpu_ticks(d.pid);
		flat = rss > top || t - ticks > 1 ? 0 : flat + 1;
		top = rss > top ? rss : top;
		ticks = t;
	}
	rss = top;
	/* the witness is served all along */
	struct wconn c;
	ready(&c, d.port, NULL);
	struct frame_header fh = {.magic = FRAME_MAGIC,
				  .version = FRAME_VERSION,
				  .type = FRAME_VOLUME_LIST,
				  .request_id = 7};
	uint8_t raw[FRAME_HEADER_SIZE];
	frame_header_encode(&fh, raw);
	assert_int_equal(wire_send_all(&c, raw, sizeof(raw)), 0);
	struct wreply r;
	assert_int_equal(wire_recv(&c, &r), 0);
	assert_int_equal(wreply_status(&r, NULL, 0), 0);
	wreply_free(&r);
	print_message("--max-reply-memory %s: 8 connections not reading 2,000 VOLUME_LIST "
		      "replies each: daemon RSS +%ld KiB; a witness's list answered\n",
		      budget, rss - rss0);
	wire_close(&c);
	for (unsigned k = 0; k < HOGS; k++)
		wire_close(&hog[k]);
	wire_close(&w);
	stop(&d);
	return rss - rss0;
}

/*
 * reply_memory_bounded -- replies queued for clients that never read them
 * stay within --max-reply-memory (1 MiB here) plus a floor per connection
 * (64 KiB and one ~40 KiB reply): 1.8 MiB, asserted under 12 MiB (a
 * sanitizer build's own overhead); without the bound (0) each connection
 * holds up to its own 4 MiB, 32 MiB in all, asserted over 24 MiB
 */
static void reply_memory_bounded(void **state)
{
	long bounded = reply_growth("1M");
	long unbounded = reply_growth("0");
	assert_true(bounded < 12 * 1024);
	assert_true(unbounded > 24 * 1024); /* the control: the bound is what held */
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	struct rlimit rl;
	/* thousands of client sockets in this process */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 8192) {
		rl.rlim_cur = rl.rlim_max < 8192 ? rl.rlim_max : 8192;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(handshake_timeout),
	    cmocka_unit_test(handshake_timeout_control_none),
	    cmocka_unit_test(request_timeout),
	    cmocka_unit_test(request_timeout_control_none),
	    cmocka_unit_test(idle_timeout),
	    cmocka_unit_test(max_connections),
	    cmocka_unit_test(descriptor_limit),
	    cmocka_unit_test(keepalive),
	    cmocka_unit_test(client_refusals_logged_rate_limited),
	    cmocka_unit_test(metadata_fairness),
	    cmocka_unit_test(memory_bounded_under_hostile_clients),
	    cmocka_unit_test(reply_memory_bounded),
	};
	/* RDAX_IT_ONLY=PATTERN: only the matching tests (debugging a run) */
	if (getenv("RDAX_IT_ONLY"))
		cmocka_set_test_filter(getenv("RDAX_IT_ONLY"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
