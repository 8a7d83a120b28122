/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_drain_all.c -- SIGTERM drains every transport at once
 *
 * One daemon (one worker thread) serves the native protocol over TCP, NBD
 * over TCP and, inside the RDMA VM (RDAX_IT_RDMA, tests/rdma), the native
 * protocol over RDMA. On each, a slow client asks for many 1 MiB READs and
 * never reads the replies, so the daemon's replies stay queued behind a
 * full socket (or the client's exhausted credits). Then SIGTERM.
 *
 * The drain of the connection sets (daemon/net/conn.h) must cover every
 * transport together: the log shows one drain start, then exactly one
 * drain timeout (one worker), during which every slow connection -- one per
 * transport -- loses its replies, then the end of the drain; the daemon
 * exits 0. Before, TCP, NBD and RDMA were drained one after another, each
 * with its own timeout: that shows as one timeout line per transport, in
 * turn.
 *
 * With as many workers as transports, each slow connection on its own
 * worker, every worker must be told to drain before the first drain
 * timeout fires (then their timeouts run together); its control,
 * RDAX_FAULTS=drain-one-by-one, drains the workers one after another and
 * must be caught by the same check. No wall-clock threshold is asserted;
 * the harness's stop bound is only a hang guard.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "nbdtest.h"
#include "transport_rdma.h"
#include "wire.h"

#define MiB	 (1ULL << 20)
#define READS	 64 /* 1 MiB each: far more than socket buffers hold, under every limit */
#define VOL_SIZE (64 * MiB)
#define WAIT_MS	 30000
/*
 * Over RDMA every request message needs a credit of the daemon, granted with
 * its messages, which the client stops taking once its receive window is
 * full of unread replies: 8 requests stay within the first window (32) and
 * are still 8 MiB of replies, far more than the client's receive window.
 */
#define READS_RDMA 8

/* tcp_wconn -- a native protocol connection over TCP even inside the RDMA VM; 0 or -errno */
static int tcp_wconn(struct wconn *w, int port)
{
	memset(w, 0, sizeof(*w));
	w->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (w->fd < 0)
		return -errno;
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(w->fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		int ret = -errno;
		close(w->fd);
		w->fd = -1;
		return ret;
	}
	w->next_id = 1;
	return 0;
}

/* send_reads -- @n READ requests of 1 MiB over @w's volume @handle, replies left unread */
static void send_reads(struct wconn *w, uint32_t handle, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		size_t len;
		uint8_t *body =
		    wire_body_read(handle, (i % 64) * MiB % VOL_SIZE, (uint32_t)MiB, &len);
		assert_non_null(body);
		assert_int_equal(wire_send_frame(w, FRAME_READ, w->next_id++, body, len, NULL, 0),
				 0);
		free(body);
	}
}

/*
 * wait_stalled -- until bytes of replies wait on @fd and stop growing (the
 * same count three times, 100 ms apart): the daemon has filled the socket
 * and its replies queue behind it. Not just the first byte: with requests
 * still being read or worked on, a drain could find nothing queued yet.
 */
static void wait_stalled(int fd)
{
	int64_t end = hx_now_ms() + WAIT_MS;
	int n = 0, last = -1, same = 0;
	while (hx_now_ms() < end) {
		assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
		same = n > 0 && n == last ? same + 1 : 0;
		if (same == 2)
			return;
		last = n;
		usleep(100000);
	}
	fail_msg("the replies did not fill the socket within %d ms (%d bytes waiting)", WAIT_MS,
		 n);
}

/* wait_rdma_input -- until a message of the daemon arrived on the RDMA connection */
static void wait_rdma_input(struct wconn *w)
{
	int64_t end = hx_now_ms() + WAIT_MS;
	while (hx_now_ms() < end) {
		rdma_tp_progress(w->tp, NULL, NULL);
		if (rdma_tp_has_input(w->tp))
			return;
		usleep(10000);
	}
	fail_msg("no reply message arrived over RDMA within %d ms", WAIT_MS);
}

/* count -- occurrences of @what in @s */
static unsigned count(const char *s, const char *what)
{
	unsigned n = 0;
	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

/* slow_native -- HELLO, open "v", then READs left unread */
static void slow_native(struct wconn *w, bool tcp, int port)
{
	assert_int_equal(tcp ? tcp_wconn(w, port) : wire_connect(w, port), 0);
	assert_int_equal(wire_hello(w, NULL, 0), 0);
	uint32_t handle;
	uint64_t size;
	assert_int_equal(wire_open(w, "v", &handle, &size), 0);
	send_reads(w, handle, tcp ? READS : READS_RDMA);
}

/*
 * drain_run -- a daemon of @threads workers, one slow client per transport
 * (each on its own worker when @threads is the number of transports:
 * consecutive connections go to consecutive workers), then SIGTERM; the
 * daemon's log in *log (malloc'd), the number of transports in *transports
 */
static void drain_run(unsigned threads, const char *faults, char **log, unsigned *transports)
{
	char dir[256];
	assert_int_equal(hx_tmpdir_make("drain-all", dir, sizeof(dir)), 0);
	struct nt_daemon n;
	memset(&n, 0, sizeof(n));
	struct hx_daemon_opts o = {
	    .ns_size = "256M", .threads = threads, .log_level = "info", .faults = faults};
	assert_int_equal(nt_daemon_start(&n, dir, &o), 0);
	assert_int_equal(nt_volume_create(&n, "v", VOL_SIZE), 0);
	bool rdma = hx_rdma_addr() != NULL;

	struct wconn tcp, rd;
	slow_native(&tcp, true, n.d.port);
	if (rdma)
		slow_native(&rd, false, n.d.port);

	struct nt_raw nbd;
	assert_int_equal(nt_raw_connect(&nbd, n.nbd_port), 0);
	const uint8_t flags[4] = {0, 0, 0, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES};
	assert_int_equal(nt_raw_send(&nbd, flags, sizeof(flags)), 0);
	assert_int_equal(nt_raw_go(&nbd, "v", false, NULL), 0);
	for (unsigned i = 0; i < READS; i++)
		assert_int_equal(nt_raw_request(&nbd, NBD_CMD_READ, 0, i, (i % 64) * MiB % VOL_SIZE,
						(uint32_t)MiB, NULL, 0),
				 0);

	/* every transport has answered until it stalled on its slow client */
	wait_stalled(tcp.fd);
	wait_stalled(nbd.fd);
	if (rdma)
		wait_rdma_input(&rd);

	assert_int_equal(hx_daemon_stop(&n.d), 0);

	uint8_t *raw;
	size_t len;
	assert_int_equal(nt_read_file(n.d.log_path, &raw, &len), 0);
	raw[len] = '\0';
	*log = (char *)raw;
	*transports = rdma ? 3 : 2;
	if (!strstr(*log, "nbd:127.0.0.1:"))
		fprintf(stderr, "no NBD connection in the daemon's log:\n%s\n", *log);
	assert_non_null(strstr(*log, "nbd:127.0.0.1:"));

	wire_close(&tcp);
	if (rdma)
		wire_close(&rd);
	nt_raw_close(&nbd);
	hx_tmpdir_remove(dir);
}

/*
 * workers_told_first -- did every worker start its drain before any drain
 * timeout fired? (All are told at once and a timeout is 10 s away; drained
 * one after another, a worker is told only after the previous one's timeout.)
 */
static bool workers_told_first(const char *log)
{
	const char *first_timeout = strstr(log, "drain timeout:");
	const char *last_told = NULL;
	for (const char *p = strstr(log, "drain started"); p; p = strstr(p + 1, "drain started"))
		last_told = p;
	return first_timeout && last_told && last_told < first_timeout;
}

static void sigterm__drains_every_transport_at_once(void **state)
{
	char *s;
	unsigned transports;
	drain_run(1, NULL, &s, &transports);
	/* one drain for all: started once, timed out once, each slow client lost its replies */
	assert_int_equal(count(s, "draining the connections of every transport"), 1);
	assert_int_equal(count(s, "drain timeout:"), 1);
	assert_int_equal(count(s, "replies not taken"), transports);
	char want[64];
	snprintf(want, sizeof(want), "drain timeout: %u connection(s) lost", transports);
	assert_non_null(strstr(s, want));
	/* in that order: the drain, the lost replies of every transport, the end */
	const char *start = strstr(s, "draining the connections of every transport");
	const char *lost = strstr(s, "replies not taken");
	const char *timeout = strstr(s, "drain timeout:");
	const char *end = strstr(s, "every connection closed");
	assert_non_null(end);
	assert_true(start < lost && lost < timeout && timeout < end);
	free(s);
}

/*
 * sigterm__drains_every_worker_at_once -- one slow client per transport,
 * each on its own worker: every worker's drain starts before the first
 * drain timeout, so the shutdown waits one timeout, not one per worker
 */
static void sigterm__drains_every_worker_at_once(void **state)
{
	char *s;
	unsigned transports;
	unsigned threads = hx_rdma_addr() ? 3 : 2;
	drain_run(threads, NULL, &s, &transports);
	assert_int_equal(transports, threads);
	assert_int_equal(count(s, "draining the connections of every transport"), 1);
	assert_int_equal(count(s, "drain started"), threads);
	/* each slow client on its own worker: a timeout per worker, one connection each */
	assert_int_equal(count(s, "drain timeout: 1 connection(s) lost"), threads);
	assert_int_equal(count(s, "replies not taken"), transports);
	assert_true(workers_told_first(s));
	assert_non_null(strstr(s, "every connection closed"));
	free(s);
}

/*
 * sigterm__drain_one_by_one_control_caught -- the control: with the
 * workers drained one after another (RDAX_FAULTS=drain-one-by-one) the
 * same check sees a worker told only after a drain timeout
 */
static void sigterm__drain_one_by_one_control_caught(void **state)
{
	char *s;
	unsigned transports;
	unsigned threads = hx_rdma_addr() ? 3 : 2;
	drain_run(threads, "drain-one-by-one", &s, &transports);
	assert_int_equal(count(s, "drain started"), threads);
	assert_int_equal(count(s, "drain timeout: 1 connection(s) lost"), threads);
	assert_false(workers_told_first(s));
	free(s);
}

int main(void)
{
	nt_env_init();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(sigterm__drains_every_transport_at_once),
	    cmocka_unit_test(sigterm__drains_every_worker_at_once),
	    cmocka_unit_test(sigterm__drain_one_by_one_control_caught),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
