/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_proto.c -- librdax against an in-process fake server
 *
 * What the library promises on the wire: requests split at max_payload and
 * pipelined, durable writes as one fsync-flagged WRITE or WRITEs + one
 * FSYNC, replies matched by request id (out-of-order fsync replies), the
 * server's messages kept, arguments refused before anything is sent, and a
 * broken stream failing every pending and later call.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "errors.h"
#include "fake_server.h"
#include "frame.h"
#include "librdax.h"

/* Every wait in here ends: a client that stops pipelining fails with -ETIMEDOUT, not a hang. */
#define TEST_TIMEOUT_MS 20000

struct env {
	struct fake_server *fs;
	struct rdax_conn *conn;
	struct rdax_volume *vol;
};

static struct rdax_conn *connect_to(struct fake_server *fs, unsigned depth)
{
	struct rdax_conn_opts *opts;
	assert_int_equal(rdax_conn_opts_new(&opts), 0);
	assert_int_equal(rdax_conn_opts_set_timeout(opts, TEST_TIMEOUT_MS), 0);
	if (depth)
		assert_int_equal(rdax_conn_opts_set_queue_depth(opts, depth), 0);
	struct rdax_conn *conn = NULL;
	int ret = rdax_connect(fs->url, opts, &conn);
	if (ret)
		fprintf(stderr, "connect: %s\n", rdax_connect_last_error());
	assert_int_equal(ret, 0);
	rdax_conn_opts_delete(&opts);
	return conn;
}

/* env_up -- fake server with @cfg, a connection, volume "vol" open */
static void env_up(struct env *e, const struct fake_cfg *cfg, unsigned depth)
{
	memset(e, 0, sizeof(*e));
	assert_int_equal(fake_server_start(cfg, &e->fs), 0);
	e->conn = connect_to(e->fs, depth);
	assert_int_equal(rdax_volume_open(e->conn, "vol", &e->vol), 0);
}

static void env_down(struct env *e)
{
	if (e->vol) {
		struct rdax_completion c[64];
		while (rdax_inflight(e->conn) > 0)
			if (rdax_wait_completions(e->conn, c, 64, 1, -1) < 0)
				break;
		rdax_volume_close(&e->vol);
	}
	assert_int_equal(rdax_disconnect(&e->conn), 0);
	assert_null(e->conn);
	fake_server_stop(&e->fs);
}

static void fill_pattern(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 11));
}

/* --- connecting --------------------------------------------------------- */

static void connect__keeps_hello_limits_and_namespaces(void **state)
{
	struct fake_cfg cfg = {.max_payload = 128U << 10};
	struct fake_server *fs;
	assert_int_equal(fake_server_start(&cfg, &fs), 0);
	struct rdax_conn *conn = connect_to(fs, 0);
	assert_int_equal(rdax_conn_max_payload(conn), 128U << 10);
	assert_string_equal(rdax_conn_server_version(conn), "fake-1");
	assert_int_equal(rdax_conn_namespace_count(conn), 1);
	struct rdax_namespace_info ns;
	assert_int_equal(rdax_conn_namespace_get(conn, 0, &ns), 0);
	assert_int_equal(ns.id, 3);
	assert_string_equal(ns.path, "/fake/ns0");
	assert_string_equal(ns.mode, "sim");
	assert_int_equal(ns.persist_method, RDAX_PERSIST_SIM);
	assert_int_equal(rdax_conn_namespace_get(conn, 1, &ns), -ERANGE);
	assert_int_equal(rdax_conn_status(conn), 0);
	struct fake_req hello = fake_server_req(fs, 0);
	assert_int_equal(hello.type, FRAME_HELLO);
	assert_int_equal(rdax_disconnect(&conn), 0);
	fake_server_stop(&fs);
}

static void connect__token_accepted_and_refused(void **state)
{
	struct fake_cfg cfg = {.token = "s3cret"};
	struct fake_server *fs;
	assert_int_equal(fake_server_start(&cfg, &fs), 0);

	struct rdax_conn_opts *opts;
	struct rdax_conn *conn = NULL;
	assert_int_equal(rdax_conn_opts_new(&opts), 0);
	assert_int_equal(rdax_connect(fs->url, opts, &conn), -RDAX_E_ACCESS);
	assert_null(conn);
	assert_non_null(strstr(rdax_connect_last_error(), "access token refused"));

	assert_int_equal(rdax_conn_opts_set_token(opts, "wrong", 5), 0);
	assert_int_equal(rdax_connect(fs->url, opts, &conn), -RDAX_E_ACCESS);

	assert_int_equal(rdax_conn_opts_set_token(opts, "s3cret", 6), 0);
	assert_int_equal(rdax_connect(fs->url, opts, &conn), 0);
	assert_true(fake_server_token_is(fs, "s3cret"));
	assert_string_equal(rdax_connect_last_error(), "");
	rdax_disconnect(&conn);
	rdax_conn_opts_delete(&opts);
	fake_server_stop(&fs);
}

/* --- splitting and pipelining ------------------------------------------- */

static void write_read__split_at_max_payload_and_pipelined(void **state)
{
	/* the server answers no WRITE before 4 are in: a client waiting for each
	 * reply before sending the next would time out here */
	struct fake_cfg cfg = {.max_payload = 64U << 10, .first_batch = 4};
	struct env e;
	env_up(&e, &cfg, 0);
	unsigned before = fake_server_nlog(e.fs);
	size_t len = (1U << 20) + 123;
	uint64_t off = 4096 + 7;
	uint8_t *data = malloc(len), *back = malloc(len);
	fill_pattern(data, len, 1);
	assert_int_equal(rdax_write(e.vol, off, data, len, 0), 0);

	unsigned nreq = fake_server_nlog(e.fs) - before;
	assert_int_equal(nreq, (len + (64U << 10) - 1) / (64U << 10));
	uint64_t expect = off;
	for (unsigned i = 0; i < nreq; i++) {
		struct fake_req r = fake_server_req(e.fs, before + i);
		assert_int_equal(r.type, FRAME_WRITE);
		assert_true(r.length <= (64U << 10));
		assert_true(r.offset == expect);
		assert_false(r.fsync);
		expect += r.length;
	}
	assert_true(expect == off + len);

	memset(back, 0, len);
	assert_int_equal(rdax_read(e.vol, off, back, len), 0);
	assert_memory_equal(data, back, len);
	free(data);
	free(back);
	env_down(&e);
}

static void write_fsync__one_request_sets_the_flag(void **state)
{
	struct fake_cfg cfg = {.max_payload = 64U << 10};
	struct env e;
	env_up(&e, &cfg, 0);
	unsigned before = fake_server_nlog(e.fs);
	uint8_t data[1000];
	fill_pattern(data, sizeof(data), 2);
	assert_int_equal(rdax_write(e.vol, 0, data, sizeof(data), RDAX_WRITE_FSYNC), 0);
	assert_int_equal(fake_server_nlog(e.fs) - before, 1);
	struct fake_req r = fake_server_req(e.fs, before);
	assert_int_equal(r.type, FRAME_WRITE);
	assert_true(r.fsync);
	env_down(&e);
}

static void write_fsync__many_requests_then_one_fsync_of_the_range(void **state)
{
	struct fake_cfg cfg = {.max_payload = 64U << 10};
	struct env e;
	env_up(&e, &cfg, 0);
	unsigned before = fake_server_nlog(e.fs);
	size_t len = 300U << 10;
	uint8_t *data = malloc(len);
	fill_pattern(data, len, 3);
	assert_int_equal(rdax_write(e.vol, 8192, data, len, RDAX_WRITE_FSYNC), 0);
	unsigned n = fake_server_nlog(e.fs) - before;
	assert_int_equal(n, 5 + 1);
	for (unsigned i = 0; i < 5; i++) {
		struct fake_req r = fake_server_req(e.fs, before + i);
		assert_int_equal(r.type, FRAME_WRITE);
		assert_false(r.fsync);
	}
	struct fake_req f = fake_server_req(e.fs, before + 5);
	assert_int_equal(f.type, FRAME_FSYNC); /* last: after every write it covers */
	assert_int_equal(f.offset, 8192);
	assert_int_equal(f.length, len);
	assert_true(f.has_length);
	free(data);
	env_down(&e);
}

static void fsync__whole_volume_sends_no_length(void **state)
{
	struct fake_cfg cfg = {0};
	struct env e;
	env_up(&e, &cfg, 0);
	uint8_t d[4096] = {1};
	assert_int_equal(rdax_write(e.vol, 0, d, sizeof(d), 0), 0);
	uint64_t wb = 0;
	unsigned before = fake_server_nlog(e.fs);
	assert_int_equal(rdax_fsync(e.vol, 0, 0, &wb), 0);
	assert_int_equal(wb, 4096);
	struct fake_req f = fake_server_req(e.fs, before);
	assert_int_equal(f.type, FRAME_FSYNC);
	assert_false(f.has_length);
	env_down(&e);
}

/* --- asynchronous operations -------------------------------------------- */

static void async__fsync_reply_out_of_order_is_matched_by_id(void **state)
{
	/* the server answers an FSYNC only after the next request: replies arrive
	 * write-before-fsync although the fsync was sent first */
	struct fake_cfg cfg = {.hold_fsync = true};
	struct env e;
	env_up(&e, &cfg, 0);
	uint8_t d[8192];
	fill_pattern(d, sizeof(d), 4);
	assert_int_equal(rdax_write(e.vol, 0, d, 4096, 0), 0);
	assert_int_equal(rdax_submit_fsync(e.vol, 0, 0, 0, 111), 0);
	assert_int_equal(rdax_submit_write(e.vol, 4096, d + 4096, 4096, 0, 222), 0);
	assert_int_equal(rdax_inflight(e.conn), 2);
	struct rdax_completion c[4];
	int got = 0;
	while (got < 2) {
		int n = rdax_wait_completions(e.conn, c + got, 4 - (unsigned)got, 1, -1);
		assert_true(n > 0);
		got += n;
	}
	assert_int_equal(c[0].cookie, 222);
	assert_int_equal(c[0].op, RDAX_OP_WRITE);
	assert_int_equal(c[0].status, 0);
	assert_int_equal(c[0].bytes, 4096);
	assert_int_equal(c[1].cookie, 111);
	assert_int_equal(c[1].op, RDAX_OP_FSYNC);
	assert_int_equal(c[1].status, 0);
	assert_int_equal(c[1].bytes, 4096); /* written back: the first write */
	assert_int_equal(rdax_inflight(e.conn), 0);
	uint8_t back[8192];
	assert_int_equal(rdax_read(e.vol, 0, back, sizeof(back)), 0);
	assert_memory_equal(back, d, sizeof(d));
	env_down(&e);
}

static void async__many_in_flight_complete_once_each(void **state)
{
	struct fake_cfg cfg = {.max_payload = 16U << 10};
	struct env e;
	env_up(&e, &cfg, 32);
	enum { N = 32, LEN = 40000 }; /* each op spans three requests */
	uint8_t *w = malloc((size_t)N * LEN), *r = calloc(N, LEN);
	fill_pattern(w, (size_t)N * LEN, 5);
	unsigned before = fake_server_nlog(e.fs);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(
		    rdax_submit_write(e.vol, (uint64_t)i * LEN, w + (size_t)i * LEN, LEN, 0, i), 0);
	/* the queue is full: one more is refused (and not sent: see the count below) */
	assert_int_equal(rdax_submit_write(e.vol, 0, w, 1, 0, 99), -EAGAIN);
	assert_non_null(strstr(rdax_conn_last_error(e.conn), "reap"));
	bool seen[N] = {false};
	struct rdax_completion c[N];
	unsigned got = 0;
	while (got < N) {
		int n = rdax_wait_completions(e.conn, c, N, 1, -1);
		assert_true(n > 0);
		for (int k = 0; k < n; k++) {
			assert_true(c[k].cookie < N);
			assert_false(seen[c[k].cookie]);
			seen[c[k].cookie] = true;
			assert_int_equal(c[k].status, 0);
			assert_int_equal(c[k].bytes, LEN);
		}
		got += (unsigned)n;
	}
	assert_true(fake_server_nlog(e.fs) - before == N * 3);
	assert_int_equal(rdax_wait_completions(e.conn, c, N, 0, 0), 0); /* nothing left */
	assert_true(fake_server_holds(e.fs, 0, w, (size_t)N * LEN));
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(
		    rdax_submit_read(e.vol, (uint64_t)i * LEN, r + (size_t)i * LEN, LEN, i), 0);
	for (got = 0; got < N;) {
		int n = rdax_wait_completions(e.conn, c, N, N - got, -1);
		assert_true(n > 0);
		for (int k = 0; k < n; k++) {
			assert_int_equal(c[k].status, 0);
			assert_int_equal(c[k].bytes, LEN);
		}
		got += (unsigned)n;
	}
	assert_memory_equal(w, r, (size_t)N * LEN);
	free(w);
	free(r);
	env_down(&e);
}

static void async__sync_call_between_keeps_completions(void **state)
{
	struct fake_cfg cfg = {0};
	struct env e;
	env_up(&e, &cfg, 0);
	uint8_t d[4096];
	fill_pattern(d, sizeof(d), 6);
	assert_int_equal(rdax_submit_write(e.vol, 0, d, sizeof(d), 0, 1), 0);
	struct rdax_volume_stat st;
	assert_int_equal(rdax_stat(e.vol, &st), 0); /* completes the write on the way */
	assert_int_equal(st.dirty_bytes, 4096);
	assert_int_equal(st.fsyncs, 42);
	struct rdax_completion c[2];
	assert_int_equal(rdax_wait_completions(e.conn, c, 2, 0, 0), 1);
	assert_int_equal(c[0].cookie, 1);
	assert_int_equal(c[0].status, 0);
	env_down(&e);
}

static void volume_close__busy_while_async_in_flight(void **state)
{
	struct fake_cfg cfg = {.hold_fsync = true};
	struct env e;
	env_up(&e, &cfg, 0);
	assert_int_equal(rdax_submit_fsync(e.vol, 0, 0, 0, 5), 0);
	struct rdax_volume *v = e.vol;
	assert_int_equal(rdax_volume_close(&e.vol), -EBUSY);
	assert_ptr_equal(e.vol, v);
	assert_int_equal(rdax_disconnect(&e.conn), -EBUSY);
	assert_non_null(e.conn);
	/* a request behind it releases the held fsync reply */
	uint8_t d[16] = {0};
	assert_int_equal(rdax_write(e.vol, 0, d, sizeof(d), 0), 0);
	struct rdax_completion c;
	assert_int_equal(rdax_wait_completions(e.conn, &c, 1, 1, -1), 1);
	assert_int_equal(c.cookie, 5);
	env_down(&e);
}

/* --- errors ------------------------------------------------------------- */

static void errors__server_message_is_the_last_error(void **state)
{
	struct fake_cfg cfg = {0};
	struct env e;
	env_up(&e, &cfg, 0);
	struct rdax_volume *v = NULL;
	assert_int_equal(rdax_volume_open(e.conn, "nope", &v), -ENOENT);
	assert_null(v);
	assert_string_equal(rdax_conn_last_error(e.conn), "no volume named 'nope'");
	assert_int_equal(rdax_conn_status(e.conn), 0); /* still usable */
	env_down(&e);
}

static void errors__refused_write_still_sends_its_payload(void **state)
{
	/* the 4th request (HELLO, OPEN, WRITE, WRITE) is refused before its
	 * payload is read; the client must still send the payload, so the next
	 * request is parsed at the right place */
	struct fake_cfg cfg = {.max_payload = 64U << 10, .refuse_write_at = 4};
	struct env e;
	env_up(&e, &cfg, 0);
	uint8_t *d = malloc(256U << 10);
	fill_pattern(d, 256U << 10, 7);
	assert_int_equal(rdax_write(e.vol, 0, d, 64U << 10, 0), 0);
	assert_int_equal(rdax_write(e.vol, 0, d, 256U << 10, 0), -RDAX_E_TOO_BIG);
	assert_string_equal(rdax_conn_last_error(e.conn), "write refused early: test");
	assert_int_equal(rdax_conn_status(e.conn), 0);
	uint8_t back[1024];
	assert_int_equal(rdax_read(e.vol, 0, back, sizeof(back)), 0);
	assert_memory_equal(back, d, sizeof(back));
	free(d);
	env_down(&e);
}

static void args__checked_before_anything_is_sent(void **state)
{
	struct fake_cfg cfg = {.volume_size = 1U << 20};
	struct env e;
	env_up(&e, &cfg, 0);
	uint8_t d[16] = {0};
	unsigned before = fake_server_nlog(e.fs);
	assert_int_equal(rdax_write(e.vol, 0, NULL, 1, 0), -EINVAL);
	assert_int_equal(rdax_write(e.vol, 0, d, 0, 0), -EINVAL);
	assert_int_equal(rdax_write(e.vol, 0, d, 1, 0x80), -EINVAL);
	assert_int_equal(rdax_write(e.vol, UINT64_MAX, d, 2, 0), -EOVERFLOW);
	assert_int_equal(rdax_write(e.vol, (1U << 20) - 1, d, 2, 0), -ERANGE);
	assert_string_equal(rdax_conn_last_error(e.conn),
			    "offset+length beyond the end of the volume (size 1048576)");
	assert_int_equal(rdax_read(e.vol, 1U << 20, d, 1), -ERANGE);
	assert_int_equal(rdax_read(e.vol, 0, d, 0), -EINVAL);
	assert_int_equal(rdax_fsync(e.vol, (1U << 20) + 1, 0, NULL), -ERANGE);
	assert_int_equal(rdax_fsync(e.vol, 4096, UINT64_MAX, NULL), -EOVERFLOW);
	assert_int_equal(rdax_fsync_flags(e.vol, 0, 0, 0x10, NULL), -EINVAL);
	assert_int_equal(rdax_discard(e.vol, 0, 0), -EINVAL);
	assert_int_equal(rdax_discard(e.vol, 1U << 19, 1U << 20), -ERANGE);
	assert_int_equal(rdax_stat(e.vol, NULL), -EINVAL);
	assert_int_equal(rdax_submit_write(e.vol, 0, d, 0, 0, 1), -EINVAL);
	assert_int_equal(rdax_submit_read(e.vol, UINT64_MAX, d, 1, 1), -EOVERFLOW);
	assert_int_equal(rdax_submit_read(e.vol, 1U << 20, d, 1, 1), -ERANGE);
	assert_int_equal(rdax_submit_fsync(e.vol, 0, 1U << 21, 0, 1), -ERANGE);
	assert_int_equal(rdax_volume_create(e.conn, "", 4096, RDAX_NAMESPACE_ANY), -EINVAL);
	assert_int_equal(rdax_volume_create(e.conn, "x", 0, RDAX_NAMESPACE_ANY), -EINVAL);
	assert_int_equal(rdax_volume_delete(e.conn, NULL), -EINVAL);
	assert_int_equal(rdax_volume_open(e.conn, "vol", NULL), -EINVAL);
	struct rdax_volume_info *vi;
	assert_int_equal(rdax_volume_info(e.conn, NULL, &vi), -EINVAL);
	size_t cnt;
	assert_int_equal(rdax_volume_list(e.conn, NULL, &cnt), -EINVAL);
	struct rdax_completion c;
	assert_int_equal(rdax_wait_completions(e.conn, &c, 0, 0, 0), -EINVAL);
	assert_int_equal(rdax_wait_completions(e.conn, &c, 1, 2, 0), -EINVAL);
	assert_int_equal(rdax_wait_completions(e.conn, NULL, 1, 0, 0), -EINVAL);
	assert_int_equal(rdax_wait_completions(e.conn, &c, 1, 0, -2), -EINVAL);
	char big[70000];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(rdax_volume_create(e.conn, big, 4096, RDAX_NAMESPACE_ANY),
			 -RDAX_E_TOO_BIG);
	assert_int_equal(rdax_inflight(e.conn), 0);
	assert_int_equal(fake_server_nlog(e.fs), before); /* nothing went out */
	/* and the edges that are fine */
	assert_int_equal(rdax_write(e.vol, (1U << 20) - 2, d, 2, 0), 0);
	assert_int_equal(rdax_fsync(e.vol, 1U << 20, 0, NULL), 0);
	env_down(&e);
}

static void volume_list__all_entries(void **state)
{
	struct fake_cfg cfg = {.nvolumes_listed = 40};
	struct env e;
	env_up(&e, &cfg, 0);
	struct rdax_volume_info *v = NULL;
	size_t n = 0;
	assert_int_equal(rdax_volume_list(e.conn, &v, &n), 0);
	assert_int_equal(n, 41);
	assert_string_equal(v[0].name, "vol");
	assert_string_equal(v[40].name, "v39");
	assert_int_equal(v[40].size, 40ULL << 20);
	assert_int_equal(v[40].namespace_id, 3);
	assert_true(v[40].namespace_offset == 40ULL << 30);
	rdax_volume_info_free(&v);
	assert_null(v);
	assert_int_equal(rdax_volume_create(e.conn, "new", 1U << 20, 3), 0);
	assert_int_equal(rdax_volume_delete(e.conn, "new"), 0);
	env_down(&e);
}

/* --- a broken stream ---------------------------------------------------- */

/*
 * submit_writes -- up to @n async writes of 4 KiB into *bufp; stops at the
 * first refused submission (the stream may break while they are sent), which
 * must be @code. Returns how many were submitted.
 */
static unsigned submit_writes(struct env *e, unsigned n, int code, uint8_t **bufp)
{
	uint8_t *d = calloc(n, 4096);
	unsigned i = 0;
	for (; i < n; i++) {
		int ret = rdax_submit_write(e->vol, (uint64_t)i * 4096, d + i * 4096, 4096, 0, i);
		if (ret) {
			assert_int_equal(ret, code);
			break;
		}
	}
	*bufp = d;
	return i;
}

/* reap_all -- wait for @n completions; count those that failed with @code */
static unsigned reap_all(struct env *e, unsigned n, int code)
{
	unsigned got = 0, failed = 0;
	struct rdax_completion c[16];
	while (got < n) {
		int k = rdax_wait_completions(e->conn, c, 16, 1, -1);
		assert_true(k > 0);
		for (int i = 0; i < k; i++) {
			if (c[i].status) {
				assert_int_equal(c[i].status, code);
				failed++;
			}
		}
		got += (unsigned)k;
	}
	return failed;
}

static void broken__eof_fails_pending_and_later_calls(void **state)
{
	/* HELLO, OPEN, then the server closes on reading request 5 (the 3rd write) */
	struct fake_cfg cfg = {.close_at = 5};
	struct env e;
	env_up(&e, &cfg, 0);
	uint8_t *d;
	unsigned n = submit_writes(&e, 6, -ECONNRESET, &d);
	unsigned failed = reap_all(&e, n, -ECONNRESET);
	assert_true(n >= 3);	      /* the first three are sent before the server reads the 3rd */
	assert_true(failed >= n - 2); /* the first two may have been answered */
	struct rdax_completion c;
	assert_int_equal(rdax_wait_completions(e.conn, &c, 1, 1, -1), -ECONNRESET);
	assert_int_equal(rdax_conn_status(e.conn), -ECONNRESET);
	assert_non_null(strstr(rdax_conn_last_error(e.conn), "closed the connection"));
	assert_int_equal(rdax_write(e.vol, 0, d, 16, 0), -ECONNRESET);
	assert_int_equal(rdax_submit_write(e.vol, 0, d, 16, 0, 9), -ECONNRESET);
	assert_int_equal(rdax_fsync(e.vol, 0, 0, NULL), -ECONNRESET);
	struct rdax_volume_info *vi;
	size_t cnt;
	assert_int_equal(rdax_volume_list(e.conn, &vi, &cnt), -ECONNRESET);
	assert_int_equal(rdax_volume_close(&e.vol), 0); /* frees locally */
	free(d);
	env_down(&e);
}

static void broken__sync_call_in_flight_gets_the_error(void **state)
{
	struct fake_cfg cfg = {.max_payload = 64U << 10, .close_at = 6};
	struct env e;
	env_up(&e, &cfg, 0);
	size_t len = 1U << 20;
	uint8_t *d = calloc(1, len);
	assert_int_equal(rdax_write(e.vol, 0, d, len, RDAX_WRITE_FSYNC), -ECONNRESET);
	assert_non_null(strstr(rdax_conn_last_error(e.conn), "closed the connection"));
	assert_int_equal(rdax_read(e.vol, 0, d, 10), -ECONNRESET);
	free(d);
	env_down(&e);
}

static void broken__bad_magic_is_a_protocol_error(void **state)
{
	struct fake_cfg cfg = {.bad_magic_at = 4};
	struct env e;
	env_up(&e, &cfg, 0);
	uint8_t *d;
	unsigned n = submit_writes(&e, 4, -RDAX_E_PROTOCOL, &d);
	unsigned failed = reap_all(&e, n, -RDAX_E_PROTOCOL);
	assert_true(n >= 2);
	assert_true(failed >= n - 1);
	assert_non_null(strstr(rdax_conn_last_error(e.conn), "magic"));
	assert_int_equal(rdax_write(e.vol, 0, d, 16, 0), -RDAX_E_PROTOCOL);
	free(d);
	env_down(&e);
}

static void broken__reply_to_unknown_id_is_a_protocol_error(void **state)
{
	struct fake_cfg cfg = {.wrong_id_at = 3};
	struct env e;
	env_up(&e, &cfg, 0);
	uint8_t d[64] = {0};
	assert_int_equal(rdax_write(e.vol, 0, d, sizeof(d), 0), -RDAX_E_PROTOCOL);
	assert_non_null(strstr(rdax_conn_last_error(e.conn), "not in flight"));
	assert_int_equal(rdax_conn_status(e.conn), -RDAX_E_PROTOCOL);
	env_down(&e);
}

static void broken__frame_error_reply_then_close(void **state)
{
	struct fake_cfg cfg = {.frame_error_at = 3};
	struct env e;
	env_up(&e, &cfg, 0);
	uint8_t d[64] = {0};
	assert_int_equal(rdax_write(e.vol, 0, d, sizeof(d), 0), -RDAX_E_PROTOCOL);
	assert_string_equal(rdax_conn_last_error(e.conn), "frame header refused: test");
	/* the next call notices the close and says what came before it */
	assert_int_equal(rdax_write(e.vol, 0, d, sizeof(d), 0), -ECONNRESET);
	assert_non_null(strstr(rdax_conn_last_error(e.conn), "frame header refused: test"));
	env_down(&e);
}

static void broken__read_reply_of_the_wrong_length(void **state)
{
	struct fake_cfg cfg = {.short_read_at = 3};
	struct env e;
	env_up(&e, &cfg, 0);
	uint8_t d[100];
	assert_int_equal(rdax_read(e.vol, 0, d, sizeof(d)), -RDAX_E_PROTOCOL);
	assert_non_null(strstr(rdax_conn_last_error(e.conn), "payload of 99 bytes"));
	assert_int_equal(rdax_read(e.vol, 0, d, sizeof(d)), -RDAX_E_PROTOCOL);
	env_down(&e);
}

/* --- threads: one connection each --------------------------------------- */

#define THREADS 4
#define ROUNDS	200

static void *thread_io(void *arg)
{
	struct env *e = arg;
	uint8_t w[9000], r[9000];
	for (unsigned i = 0; i < ROUNDS; i++) {
		fill_pattern(w, sizeof(w), i);
		uint64_t off = (uint64_t)(i % 64) * 4096;
		if (rdax_write(e->vol, off, w, sizeof(w), i % 8 == 0 ? RDAX_WRITE_FSYNC : 0) ||
		    rdax_read(e->vol, off, r, sizeof(r)) || memcmp(w, r, sizeof(w)) != 0)
			return (void *)1;
		if (i % 16 == 0) {
			rdax_submit_fsync(e->vol, 0, 0, 0, i);
			struct rdax_completion c;
			if (rdax_wait_completions(e->conn, &c, 1, 1, -1) != 1 || c.status)
				return (void *)1;
		}
	}
	return NULL;
}

static void threads__one_connection_each_in_parallel(void **state)
{
	/* the promise of librdax.h: different connections need no coordination */
	struct fake_cfg cfg = {.max_payload = 4096};
	struct env e[THREADS];
	pthread_t t[THREADS];
	for (unsigned i = 0; i < THREADS; i++)
		env_up(&e[i], &cfg, 0);
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, thread_io, &e[i]), 0);
	for (unsigned i = 0; i < THREADS; i++) {
		void *res;
		assert_int_equal(pthread_join(t[i], &res), 0);
		assert_null(res);
	}
	for (unsigned i = 0; i < THREADS; i++)
		env_down(&e[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(connect__keeps_hello_limits_and_namespaces),
	    cmocka_unit_test(connect__token_accepted_and_refused),
	    cmocka_unit_test(write_read__split_at_max_payload_and_pipelined),
	    cmocka_unit_test(write_fsync__one_request_sets_the_flag),
	    cmocka_unit_test(write_fsync__many_requests_then_one_fsync_of_the_range),
	    cmocka_unit_test(fsync__whole_volume_sends_no_length),
	    cmocka_unit_test(async__fsync_reply_out_of_order_is_matched_by_id),
	    cmocka_unit_test(async__many_in_flight_complete_once_each),
	    cmocka_unit_test(async__sync_call_between_keeps_completions),
	    cmocka_unit_test(volume_close__busy_while_async_in_flight),
	    cmocka_unit_test(errors__server_message_is_the_last_error),
	    cmocka_unit_test(errors__refused_write_still_sends_its_payload),
	    cmocka_unit_test(args__checked_before_anything_is_sent),
	    cmocka_unit_test(volume_list__all_entries),
	    cmocka_unit_test(broken__eof_fails_pending_and_later_calls),
	    cmocka_unit_test(broken__sync_call_in_flight_gets_the_error),
	    cmocka_unit_test(broken__bad_magic_is_a_protocol_error),
	    cmocka_unit_test(broken__reply_to_unknown_id_is_a_protocol_error),
	    cmocka_unit_test(broken__frame_error_reply_then_close),
	    cmocka_unit_test(broken__read_reply_of_the_wrong_length),
	    cmocka_unit_test(threads__one_connection_each_in_parallel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
