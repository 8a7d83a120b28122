/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_tls_io.c -- records through tls_io over a real TCP socket: every byte arrives, in order
 *
 * tls_io reads the socket ahead of GnuTLS and keeps records to send them
 * together (tls_io.h). What that must not change: a receive that returns
 * less than asked leaves nothing buffered (the caller waits for the
 * socket), one that fills the buffer says more may be there
 * (tls_io_pending), and once a sender's pieces are all taken every byte
 * reaches the peer, even when the socket could not take the records kept
 * for later -- the control (RDAX_FAULTS tls-send-strand) reports such
 * records sent, and the test must see the bytes missing. An idle session
 * gives its buffers back (tls_io_trim) only when they hold nothing, and
 * maps them again when it next speaks; the control (tls-keep-buffers)
 * keeps them, and the test must see them held.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "faults.h"
#include "tls_io.h"

#define PIECES	  9
#define BIG_PIECE (300U << 10)

static const uint8_t key_bytes[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

struct pair {
	int sfd, cfd; /* server (sender) and client (receiver) sockets */
	gnutls_psk_server_credentials_t scred;
	gnutls_psk_client_credentials_t ccred;
	gnutls_priority_t prio;
	struct tls_io *tx, *rx;
};

static int server_key(gnutls_session_t s, const char *user, gnutls_datum_t *key)
{
	key->data = gnutls_malloc(sizeof(key_bytes));
	memcpy(key->data, key_bytes, sizeof(key_bytes));
	key->size = sizeof(key_bytes);
	return 0;
}

/* tcp_pair -- a connected loopback pair, non-blocking, small buffers so the sender fills */
static void tcp_pair(struct pair *p)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &al), 0);
	p->cfd = socket(AF_INET, SOCK_STREAM, 0);
	int small = 8192, one = 1;
	setsockopt(p->cfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	assert_int_equal(connect(p->cfd, (struct sockaddr *)&a, sizeof(a)), 0);
	p->sfd = accept(l, NULL, NULL);
	assert_true(p->sfd >= 0);
	close(l);
	setsockopt(p->sfd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(p->sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(p->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(p->sfd, F_SETFL, O_NONBLOCK);
	fcntl(p->cfd, F_SETFL, O_NONBLOCK);
}

/* pair_open -- a PSK session each way, the handshake driven from both ends, then tls_io_start */
static int pair_open(void **state)
{
	struct pair *p = calloc(1, sizeof(*p));
	tcp_pair(p);
	gnutls_session_t ss, cs;
	assert_int_equal(gnutls_priority_init(&p->prio, "NORMAL:+ECDHE-PSK:+PSK", NULL), 0);
	gnutls_psk_allocate_server_credentials(&p->scred);
	gnutls_psk_set_server_credentials_function(p->scred, server_key);
	gnutls_psk_allocate_client_credentials(&p->ccred);
	gnutls_datum_t k = {(unsigned char *)key_bytes, sizeof(key_bytes)};
	assert_int_equal(gnutls_psk_set_client_credentials(p->ccred, "u", &k, GNUTLS_PSK_KEY_RAW),
			 0);
	gnutls_init(&ss, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
	gnutls_init(&cs, GNUTLS_CLIENT | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
	gnutls_priority_set(ss, p->prio);
	gnutls_priority_set(cs, p->prio);
	gnutls_credentials_set(ss, GNUTLS_CRD_PSK, p->scred);
	gnutls_credentials_set(cs, GNUTLS_CRD_PSK, p->ccred);
	gnutls_transport_set_int(ss, p->sfd);
	gnutls_transport_set_int(cs, p->cfd);
	int gs = GNUTLS_E_AGAIN, gc = GNUTLS_E_AGAIN;
	for (int i = 0; i < 1000 && (gs != 0 || gc != 0); i++) {
		if (gc != 0)
			gc = gnutls_handshake(cs);
		if (gs != 0)
			gs = gnutls_handshake(ss);
		assert_true(gc == 0 || gc == GNUTLS_E_AGAIN);
		assert_true(gs == 0 || gs == GNUTLS_E_AGAIN);
		if (gs != 0 || gc != 0)
			poll(NULL, 0, 1);
	}
	assert_int_equal(gs, 0);
	assert_int_equal(gc, 0);
	p->tx = calloc(1, sizeof(*p->tx));
	p->rx = calloc(1, sizeof(*p->rx));
	assert_int_equal(tls_io_start(p->tx, ss, p->sfd), 0);
	assert_int_equal(tls_io_start(p->rx, cs, p->cfd), 0);
	*state = p;
	return 0;
}

static int pair_close(void **state)
{
	struct pair *p = *state;
	tls_io_release(p->tx);
	tls_io_release(p->rx);
	free(p->tx);
	free(p->rx);
	close(p->sfd);
	close(p->cfd);
	gnutls_psk_free_server_credentials(p->scred);
	gnutls_psk_free_client_credentials(p->ccred);
	gnutls_priority_deinit(p->prio);
	free(p);
	rdax_faults.tls_send_strand = false;
	rdax_faults.tls_keep_buffers = false;
	return 0;
}

/* recv_step -- one receive of at most @max bytes at @buf + *got; false if nothing came */
static bool recv_step(struct pair *p, uint8_t *buf, size_t *got, size_t max)
{
	ssize_t r = tls_io_recv(p->rx, buf + *got, max);
	assert_true(r > 0 || r == -EAGAIN);
	if (r > 0)
		*got += (size_t)r;
	return r > 0;
}

/*
 * send_all -- three replies of header, body and a 300 KiB payload sent as
 * the stream sends them (the unsent part of every piece, again after each
 * EAGAIN, while the peer reads in small steps); then the peer reads until
 * the socket stays quiet. Returns the bytes the peer got, checked in order.
 */
static size_t send_all(struct pair *p, size_t *total)
{
	static uint8_t hdr[24], body[40];
	uint8_t *pay = malloc(BIG_PIECE);
	for (size_t i = 0; i < BIG_PIECE; i++)
		pay[i] = (uint8_t)(i * 7 + i / 251);
	memset(hdr, 0xa1, sizeof(hdr));
	memset(body, 0xb2, sizeof(body));
	struct iovec pieces[PIECES];
	*total = 0;
	for (int i = 0; i < PIECES; i++) {
		pieces[i] = (struct iovec){i % 3 == 0	? hdr
					   : i % 3 == 1 ? body
							: pay,
					   i % 3 == 0	? sizeof(hdr)
					   : i % 3 == 1 ? sizeof(body)
							: BIG_PIECE};
		*total += pieces[i].iov_len;
	}
	uint8_t *want = malloc(*total), *got_buf = malloc(*total);
	for (size_t i = 0, off = 0; i < PIECES; off += pieces[i].iov_len, i++)
		memcpy(want + off, pieces[i].iov_base, pieces[i].iov_len);

	size_t sent = 0, got = 0;
	int eagains = 0;
	while (sent < *total) {
		struct iovec iov[PIECES];
		int n = 0;
		size_t skip = sent;
		for (int i = 0; i < PIECES; i++) {
			if (skip >= pieces[i].iov_len) {
				skip -= pieces[i].iov_len;
				continue;
			}
			iov[n].iov_base = (uint8_t *)pieces[i].iov_base + skip;
			iov[n++].iov_len = pieces[i].iov_len - skip;
			skip = 0;
		}
		ssize_t w = tls_io_sendv(p->tx, iov, n);
		assert_true(w > 0 || w == -EAGAIN);
		if (w > 0) {
			sent += (size_t)w;
			continue;
		}
		eagains++;
		/* the peer reads a little: room comes back for the sender */
		for (int k = 0; k < 4 && got < *total; k++)
			if (!recv_step(p, got_buf, &got, 5000))
				poll(NULL, 0, 1);
	}
	assert_true(eagains > 0); /* the socket did fill: records were kept and not taken */
	/* all taken: the peer reads the rest until the socket stays quiet */
	for (int quiet = 0; quiet < 50 && got < *total;) {
		if (recv_step(p, got_buf, &got, *total - got))
			quiet = 0;
		else {
			quiet++;
			struct pollfd pf = {.fd = p->cfd, .events = POLLIN};
			poll(&pf, 1, 10);
		}
	}
	assert_memory_equal(got_buf, want, got);
	free(pay);
	free(want);
	free(got_buf);
	return got;
}

/* every byte of pieces taken by tls_io_sendv reaches the peer, in order */
static void test_send_all_arrives(void **state)
{
	size_t total;
	size_t got = send_all(*state, &total);
	assert_int_equal(got, total);
}

/* control: kept records the socket did not take, reported sent, never arrive */
static void test_control_send_strand(void **state)
{
	rdax_faults.tls_send_strand = true;
	size_t total;
	size_t got = send_all(*state, &total);
	assert_true(got < total);
}

/* send_records -- @n records of @len bytes, each sent alone */
static void send_records(struct pair *p, int n, size_t len, uint8_t fill)
{
	uint8_t *b = malloc(len);
	memset(b, fill, len);
	for (int i = 0; i < n; i++) {
		struct iovec iov = {b, len};
		assert_int_equal(tls_io_sendv(p->tx, &iov, 1), (ssize_t)len);
	}
	free(b);
}

/* wait_readable -- the receiving socket has bytes (loopback: almost at once) */
static void wait_readable(struct pair *p)
{
	struct pollfd pf = {.fd = p->cfd, .events = POLLIN};
	assert_int_equal(poll(&pf, 1, 2000), 1);
}

/*
 * less than asked means drained: nothing is held ahead, and the next
 * receive hears EAGAIN; a full buffer means more may be held (pending)
 */
static void test_recv_drained_and_pending(void **state)
{
	struct pair *p = *state;
	static uint8_t buf[100000];
	send_records(p, 3, 1000, 0x11);
	wait_readable(p);
	ssize_t r = tls_io_recv(p->rx, buf, sizeof(buf));
	assert_int_equal(r, 3000);
	assert_int_equal(tls_io_pending(p->rx), 0);
	assert_int_equal(tls_io_recv(p->rx, buf, sizeof(buf)), -EAGAIN);

	send_records(p, 3, 1000, 0x22);
	wait_readable(p);
	assert_int_equal(tls_io_recv(p->rx, buf, 1200), 1200);
	assert_true(tls_io_pending(p->rx) > 0);
	size_t got = 1200;
	while (got < 3000) {
		r = tls_io_recv(p->rx, buf + got, sizeof(buf) - got);
		assert_true(r > 0);
		got += (size_t)r;
	}
	assert_int_equal(got, 3000);
	for (size_t i = 0; i < got; i++)
		assert_int_equal(buf[i], 0x22);
	assert_int_equal(tls_io_pending(p->rx), 0);
}

/*
 * trim_drained -- records both ways until drained, then tls_io_trim on both
 * ends: true if both gave back their buffers
 */
static bool trim_drained(struct pair *p)
{
	static uint8_t buf[8192];
	send_records(p, 3, 1000, 0x33);
	wait_readable(p);
	assert_int_equal(tls_io_recv(p->rx, buf, sizeof(buf)), 3000);
	assert_non_null(p->rx->mem); /* in use: mapped */
	bool rx = tls_io_trim(p->rx), tx = tls_io_trim(p->tx);
	return rx && tx && !p->rx->mem && !p->tx->mem;
}

/*
 * a drained session gives back its buffers, and the next sends and
 * receives map them again: every byte still arrives in order
 */
static void test_trim_drained_releases(void **state)
{
	struct pair *p = *state;
	assert_true(trim_drained(p));
	size_t total;
	size_t got = send_all(p, &total);
	assert_int_equal(got, total);
	assert_true(tls_io_trim(p->rx));
	assert_null(p->rx->mem);
}

/* ciphertext read ahead and not yet decrypted is kept: trim refuses, the bytes still arrive */
static void test_trim_keeps_bytes_ahead(void **state)
{
	struct pair *p = *state;
	static uint8_t buf[3000];
	send_records(p, 3, 1000, 0x44);
	wait_readable(p);
	/* one recv() took the three records ahead; the first only is asked for */
	assert_int_equal(tls_io_recv(p->rx, buf, 1000), 1000);
	assert_true(p->rx->ra_start < p->rx->ra_end);
	assert_false(tls_io_trim(p->rx));
	assert_non_null(p->rx->mem);
	size_t got = 1000;
	while (got < 3000) {
		ssize_t r = tls_io_recv(p->rx, buf + got, sizeof(buf) - got);
		assert_true(r > 0);
		got += (size_t)r;
	}
	for (size_t i = 0; i < got; i++)
		assert_int_equal(buf[i], 0x44);
	assert_true(tls_io_trim(p->rx));
}

/* control: with tls-keep-buffers an idle session keeps them, and the check above sees it */
static void test_control_keep_buffers(void **state)
{
	rdax_faults.tls_keep_buffers = true;
	assert_false(trim_drained(*state));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_send_all_arrives, pair_open, pair_close),
	    cmocka_unit_test_setup_teardown(test_control_send_strand, pair_open, pair_close),
	    cmocka_unit_test_setup_teardown(test_recv_drained_and_pending, pair_open, pair_close),
	    cmocka_unit_test_setup_teardown(test_trim_drained_releases, pair_open, pair_close),
	    cmocka_unit_test_setup_teardown(test_trim_keeps_bytes_ahead, pair_open, pair_close),
	    cmocka_unit_test_setup_teardown(test_control_keep_buffers, pair_open, pair_close),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
