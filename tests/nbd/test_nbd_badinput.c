/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nbd_badinput.c -- the NBD export fed bad bytes over raw sockets
 *
 * One daemon for the whole file. A second connection ("the bystander") is
 * exported at the start and after every case must still write, flush and
 * read back correctly: a client's bad input never disturbs another. Each
 * case checks the exact answer the protocol document prescribes (an error
 * value, an option error type, or the end of the connection where it allows
 * a hard disconnect). The daemon must exit 0 at the end (ASan/UBSan clean).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <poll.h>

#include <cmocka.h>

#include "nbdtest.h"

#define VOL_SIZE (16ULL << 20)
#define MiB	 (1U << 20)

struct ctx {
	char dir[256];
	struct nt_daemon n;
	struct nt_raw bystander;
	uint64_t seed;
};

static struct ctx *g;

static int setup(void **state)
{
	static struct ctx c;
	memset(&c, 0, sizeof(c));
	c.bystander.fd = -1;
	if (hx_tmpdir_make("nbd-bad", c.dir, sizeof(c.dir)))
		return -1;
	if (nt_daemon_start(&c.n, c.dir, NULL))
		return -1;
	if (nt_volume_create(&c.n, "vol", VOL_SIZE) || nt_volume_create(&c.n, "vol2", 1 << 20) ||
	    nt_volume_create(&c.n, "fuzz", 1 << 20))
		return -1;
	if (nt_raw_connect(&c.bystander, c.n.nbd_port))
		return -1;
	const uint8_t flags[4] = {0, 0, 0, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES};
	if (nt_raw_send(&c.bystander, flags, 4) || nt_raw_go(&c.bystander, "vol", true, NULL) != 0)
		return -1;
	c.seed = 1000;
	g = &c;
	*state = &c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	nt_raw_close(&c->bystander);
	int ret = hx_daemon_stop(&c->n.d);
	if (ret)
		hx_daemon_dump_log(&c->n.d, 8192);
	hx_tmpdir_remove(c->dir);
	return ret ? -1 : 0;
}

/* bystander_ok -- the other connection is still served, correctly */
static void bystander_ok(void)
{
	g->seed += 10;
	assert_int_equal(nt_raw_roundtrip(&g->bystander, (g->seed % 64) * 4096, 8192, g->seed), 0);
	assert_true(hx_daemon_alive(&g->n.d));
}

/* client -- a raw connection past the greeting, client flags sent */
static void client(struct nt_raw *c, uint32_t flags)
{
	assert_int_equal(nt_raw_connect(c, g->n.nbd_port), 0);
	uint8_t f[4] = {(uint8_t)(flags >> 24), (uint8_t)(flags >> 16), (uint8_t)(flags >> 8),
			(uint8_t)flags};
	assert_int_equal(nt_raw_send(c, f, 4), 0);
}

/* exported -- a raw connection in transmission on "vol" */
static void exported(struct nt_raw *c, bool structured)
{
	client(c, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	uint64_t size = 0;
	assert_int_equal(nt_raw_go(c, "vol", structured, &size), 0);
	assert_int_equal(size, VOL_SIZE);
}

/* expect_opt -- the next option reply is @type for @option */
static void expect_opt(struct nt_raw *c, uint32_t option, uint32_t type)
{
	struct nt_opt_reply r;
	assert_int_equal(nt_raw_opt_reply(c, &r), 0);
	assert_int_equal(r.option, option);
	assert_int_equal(r.type, type);
}

static void handshake__unknown_client_flags(void **state)
{
	struct nt_raw c;
	client(&c, 1U << 5);
	assert_true(nt_raw_eof(&c));
	nt_raw_close(&c);
	bystander_ok();
}

static void handshake__bad_option_magic(void **state)
{
	struct nt_raw c;
	client(&c, NBD_FLAG_C_FIXED_NEWSTYLE);
	uint8_t h[NBD_OPT_HEADER_SIZE];
	nbd_opt_header_encode(h, NBD_OPT_LIST, 0);
	h[0] ^= 0xff;
	assert_int_equal(nt_raw_send(&c, h, sizeof(h)), 0);
	assert_true(nt_raw_eof(&c));
	nt_raw_close(&c);
	bystander_ok();
}

static void option__unknown_is_unsupported(void **state)
{
	struct nt_raw c;
	client(&c, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	uint8_t junk[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	assert_int_equal(nt_raw_option(&c, 42, junk, sizeof(junk)), 0);
	expect_opt(&c, 42, NBD_REP_ERR_UNSUP);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_STARTTLS, NULL, 0), 0);
	/* TLS off: not supported; behind the TLS proxy (RDAX_IT_TLS), TLS is on already */
	expect_opt(&c, NBD_OPT_STARTTLS, hx_tls() ? NBD_REP_ERR_INVALID : NBD_REP_ERR_UNSUP);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_SET_META_CONTEXT, junk, sizeof(junk)), 0);
	expect_opt(&c, NBD_OPT_SET_META_CONTEXT, NBD_REP_ERR_UNSUP);
	/* still negotiating: GO works */
	assert_int_equal(nt_raw_go(&c, "vol", false, NULL), 0);
	assert_int_equal(nt_raw_roundtrip(&c, 0, 4096, 1), 0);
	nt_raw_close(&c);
	bystander_ok();
}

static void option__oversize_length(void **state)
{
	struct nt_raw c;
	/* over what is read into memory: skipped (never stored), refused, connection goes on */
	client(&c, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	uint32_t big = 100000;
	uint8_t *data = calloc(1, big);
	assert_non_null(data);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_GO, data, big), 0);
	expect_opt(&c, NBD_OPT_GO, NBD_REP_ERR_TOO_BIG);
	assert_int_equal(nt_raw_option(&c, 77, data, big), 0);
	expect_opt(&c, 77, NBD_REP_ERR_UNSUP);
	free(data);
	assert_int_equal(nt_raw_go(&c, "vol", true, NULL), 0);
	assert_int_equal(nt_raw_roundtrip(&c, 4096, 4096, 2), 0);
	nt_raw_close(&c);
	/* past the denial-of-service bound: hard disconnect before any data is read */
	uint32_t lens[] = {UINT32_MAX, 2 * MiB};
	for (unsigned i = 0; i < 2; i++) {
		client(&c, NBD_FLAG_C_FIXED_NEWSTYLE);
		assert_int_equal(nt_raw_option(&c, i ? 99 : NBD_OPT_INFO, NULL, lens[i]), 0);
		assert_true(nt_raw_eof(&c));
		nt_raw_close(&c);
	}
	bystander_ok();
}

static void option__invalid_data(void **state)
{
	struct nt_raw c;
	client(&c, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	uint8_t four[4] = {0};
	assert_int_equal(nt_raw_option(&c, NBD_OPT_LIST, four, 4), 0);
	expect_opt(&c, NBD_OPT_LIST, NBD_REP_ERR_INVALID);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_STRUCTURED_REPLY, four, 4), 0);
	expect_opt(&c, NBD_OPT_STRUCTURED_REPLY, NBD_REP_ERR_INVALID);
	/* GO whose name length runs past the data, and whose request count does not match */
	uint8_t go[] = {0, 0, 0, 200, 'v', 'o', 'l', 0, 0};
	assert_int_equal(nt_raw_option(&c, NBD_OPT_GO, go, sizeof(go)), 0);
	expect_opt(&c, NBD_OPT_GO, NBD_REP_ERR_INVALID);
	uint8_t go2[] = {0, 0, 0, 3, 'v', 'o', 'l', 0, 2, 0, 3};
	assert_int_equal(nt_raw_option(&c, NBD_OPT_INFO, go2, sizeof(go2)), 0);
	expect_opt(&c, NBD_OPT_INFO, NBD_REP_ERR_INVALID);
	/* unknown exports: missing, empty (no default export), not a volume name */
	assert_int_equal(nt_raw_go(&c, "nosuch", false, NULL),
			 (int)(NBD_REP_ERR_UNKNOWN & 0x7fffffff));
	assert_int_equal(nt_raw_go(&c, "", false, NULL), (int)(NBD_REP_ERR_UNKNOWN & 0x7fffffff));
	assert_int_equal(nt_raw_go(&c, "../vol", false, NULL),
			 (int)(NBD_REP_ERR_UNKNOWN & 0x7fffffff));
	/* INFO and LIST answer and leave the connection negotiating */
	uint8_t info[] = {0, 0, 0, 3, 'v', 'o', 'l', 0, 1, 0, NBD_INFO_BLOCK_SIZE};
	assert_int_equal(nt_raw_option(&c, NBD_OPT_INFO, info, sizeof(info)), 0);
	struct nt_opt_reply r;
	bool export_seen = false, bs_seen = false;
	for (;;) {
		assert_int_equal(nt_raw_opt_reply(&c, &r), 0);
		assert_int_equal(r.option, NBD_OPT_INFO);
		if (r.type == NBD_REP_ACK)
			break;
		assert_int_equal(r.type, NBD_REP_INFO);
		if (r.data[1] == NBD_INFO_EXPORT) {
			assert_int_equal(r.len, 12);
			export_seen = true;
		}
		if (r.data[1] == NBD_INFO_BLOCK_SIZE) {
			assert_int_equal(r.len, 14);
			assert_int_equal(r.data[5], 1);	    /* minimum 1 */
			assert_int_equal(r.data[8], 0x10);  /* preferred 4096 */
			assert_int_equal(r.data[10], 0x02); /* maximum 32 MiB */
			bs_seen = true;
		}
	}
	assert_true(export_seen && bs_seen);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_LIST, NULL, 0), 0);
	unsigned servers = 0;
	for (;;) {
		assert_int_equal(nt_raw_opt_reply(&c, &r), 0);
		if (r.type == NBD_REP_ACK)
			break;
		assert_int_equal(r.type, NBD_REP_SERVER);
		servers++;
	}
	assert_int_equal(servers, 3);
	/* ABORT: acknowledged, then the server closes */
	assert_int_equal(nt_raw_option(&c, NBD_OPT_ABORT, NULL, 0), 0);
	expect_opt(&c, NBD_OPT_ABORT, NBD_REP_ACK);
	assert_true(nt_raw_eof(&c));
	nt_raw_close(&c);
	bystander_ok();
}

static void option__export_name(void **state)
{
	struct nt_raw c;
	uint8_t reply[NBD_EXPORT_NAME_REPLY_SIZE];
	/* with NO_ZEROES: size and flags only */
	client(&c, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_EXPORT_NAME, "vol", 3), 0);
	assert_int_equal(nt_raw_recv(&c, reply, 10), 0);
	uint64_t size = 0;
	for (int i = 0; i < 8; i++)
		size = size << 8 | reply[i];
	assert_int_equal(size, VOL_SIZE);
	assert_int_equal(reply[8] << 8 | reply[9], nbd_transmission_flags(false));
	assert_int_equal(nt_raw_roundtrip(&c, 8192, 4096, 3), 0);
	nt_raw_close(&c);
	/* without: 124 zeroes follow (an old client, no fixed newstyle either) */
	client(&c, 0);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_EXPORT_NAME, "vol", 3), 0);
	assert_int_equal(nt_raw_recv(&c, reply, sizeof(reply)), 0);
	for (size_t i = 10; i < sizeof(reply); i++)
		assert_int_equal(reply[i], 0);
	assert_int_equal(nt_raw_roundtrip(&c, 8192, 4096, 4), 0);
	nt_raw_close(&c);
	/* an unknown export cannot be answered with an error: the server closes */
	client(&c, NBD_FLAG_C_FIXED_NEWSTYLE);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_EXPORT_NAME, "nosuch", 6), 0);
	assert_true(nt_raw_eof(&c));
	nt_raw_close(&c);
	bystander_ok();
}

/* expect_error -- the next reply is for @handle with @error (and no data) */
static void expect_error(struct nt_raw *c, uint64_t handle, uint32_t error)
{
	struct nt_reply r;
	assert_int_equal(nt_raw_reply(c, &r, NULL, 0, 0), 0);
	assert_int_equal(r.handle, handle);
	assert_int_equal(r.error, error);
	assert_int_equal(r.data_len, 0);
	if (c->structured) {
		assert_true(r.structured);
		assert_true(r.message[0] != '\0'); /* a message for humans */
	}
}

/* request_errors -- the prescribed error for every bad request; the connection goes on */
static void request_errors(bool structured)
{
	struct nt_raw c;
	exported(&c, structured);
	uint8_t *buf = malloc(40 * MiB);
	assert_non_null(buf);
	memset(buf, 0x5a, 40 * MiB);
	/* unknown and unsupported commands */
	assert_int_equal(nt_raw_request(&c, 99, 0, 1, 0, 4096, NULL, 0), 0);
	expect_error(&c, 1, NBD_EINVAL);
	assert_int_equal(nt_raw_request(&c, NBD_CMD_CACHE, 0, 2, 0, 4096, NULL, 0), 0);
	expect_error(&c, 2, NBD_EINVAL);
	assert_int_equal(nt_raw_request(&c, NBD_CMD_BLOCK_STATUS, 0, 3, 0, 4096, NULL, 0), 0);
	expect_error(&c, 3, NBD_EINVAL);
	/* out of range: EINVAL for READ and TRIM, ENOSPC for WRITE and WRITE_ZEROES */
	assert_int_equal(nt_raw_request(&c, NBD_CMD_READ, 0, 4, VOL_SIZE - 4095, 4096, NULL, 0), 0);
	expect_error(&c, 4, NBD_EINVAL);
	assert_int_equal(nt_raw_request(&c, NBD_CMD_TRIM, 0, 5, VOL_SIZE, 1, NULL, 0), 0);
	expect_error(&c, 5, NBD_EINVAL);
	assert_int_equal(nt_raw_request(&c, NBD_CMD_WRITE, 0, 6, VOL_SIZE - 100, 4096, buf, 4096),
			 0);
	expect_error(&c, 6, NBD_ENOSPC);
	assert_int_equal(nt_raw_request(&c, NBD_CMD_WRITE_ZEROES, 0, 7, VOL_SIZE, 4096, NULL, 0),
			 0);
	expect_error(&c, 7, NBD_ENOSPC);
	assert_int_equal(nt_raw_request(&c, NBD_CMD_READ, 0, 8, UINT64_MAX - 100, 4096, NULL, 0),
			 0);
	expect_error(&c, 8, NBD_EINVAL);
	/* over the maximum block size: EINVAL; a refused WRITE's payload is skipped */
	assert_int_equal(nt_raw_request(&c, NBD_CMD_READ, 0, 9, 0, 33 * MiB, NULL, 0), 0);
	expect_error(&c, 9, NBD_EINVAL);
	assert_int_equal(nt_raw_request(&c, NBD_CMD_WRITE, 0, 10, 0, 40 * MiB, buf, 40 * MiB), 0);
	expect_error(&c, 10, NBD_EINVAL);
	/* flags not valid for the command (NO_HOLE on WRITE, DF where not offered) */
	assert_int_equal(
	    nt_raw_request(&c, NBD_CMD_WRITE, NBD_CMD_FLAG_NO_HOLE, 11, 0, 4096, buf, 4096), 0);
	expect_error(&c, 11, NBD_EINVAL);
	assert_int_equal(
	    nt_raw_request(&c, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_FAST_ZERO, 12, 0, 4096, NULL, 0),
	    0);
	expect_error(&c, 12, NBD_EINVAL);
	if (!structured) {
		assert_int_equal(
		    nt_raw_request(&c, NBD_CMD_READ, NBD_CMD_FLAG_DF, 13, 0, 4096, NULL, 0), 0);
		expect_error(&c, 13, NBD_EINVAL);
	}
	/* none of the refused WRITEs landed: the range still reads as it was */
	uint8_t *back = malloc(4096);
	assert_non_null(back);
	struct nt_reply r;
	assert_int_equal(nt_raw_request(&c, NBD_CMD_READ, 0, 14, VOL_SIZE - 4096, 4096, NULL, 0),
			 0);
	assert_int_equal(nt_raw_reply(&c, &r, back, 4096, 4096), 0);
	assert_int_equal(r.error, 0);
	for (int i = 0; i < 4096; i++)
		assert_int_not_equal(back[i], 0x5a);
	/* a zero-length READ succeeds with no data */
	assert_int_equal(nt_raw_request(&c, NBD_CMD_READ, 0, 15, 0, 0, NULL, 0), 0);
	assert_int_equal(nt_raw_reply(&c, &r, back, 4096, 0), 0);
	assert_int_equal(r.handle, 15);
	assert_int_equal(r.error, 0);
	assert_int_equal(r.data_len, 0);
	free(back);
	free(buf);
	/* after all that, the connection itself still works */
	assert_int_equal(nt_raw_roundtrip(&c, 12288, 65536, 5), 0);
	nt_raw_close(&c);
	bystander_ok();
}

static void request__errors_simple_replies(void **state)
{
	request_errors(false);
}

static void request__errors_structured_replies(void **state)
{
	request_errors(true);
}

static void request__structured_read_chunks(void **state)
{
	struct nt_raw c;
	exported(&c, true);
	assert_int_equal(nt_raw_roundtrip(&c, 4096 * 7 + 100, 5000, 6), 0);
	/* one data chunk carrying the request's offset, marked final; DF allowed */
	uint8_t buf[5000];
	struct nt_reply r;
	assert_int_equal(
	    nt_raw_request(&c, NBD_CMD_READ, NBD_CMD_FLAG_DF, 21, 4096 * 7 + 100, 5000, NULL, 0),
	    0);
	assert_int_equal(nt_raw_reply(&c, &r, buf, sizeof(buf), 0), 0);
	assert_true(r.structured);
	assert_int_equal(r.chunks, 1);
	assert_int_equal(r.offset, 4096 * 7 + 100);
	assert_int_equal(r.data_len, 5000);
	uint8_t want[5000];
	hx_pattern(want, sizeof(want), 6, 4096 * 7 + 100);
	assert_memory_equal(buf, want, sizeof(want));
	/* a zero-length READ: a NONE chunk, final */
	assert_int_equal(nt_raw_request(&c, NBD_CMD_READ, 0, 22, 0, 0, NULL, 0), 0);
	assert_int_equal(nt_raw_reply(&c, &r, buf, sizeof(buf), 0), 0);
	assert_true(r.structured);
	assert_int_equal(r.error, 0);
	assert_int_equal(r.data_len, 0);
	nt_raw_close(&c);
	bystander_ok();
}

static void request__pipelined_handles_echoed(void **state)
{
	struct nt_raw c;
	exported(&c, false);
	enum { N = 64 };
	uint8_t *data = malloc((size_t)N * 4096);
	assert_non_null(data);
	hx_pattern(data, (size_t)N * 4096, 77, 0);
	/* N writes, a FLUSH, N reads, all sent before any reply is read */
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(nt_raw_request(&c, NBD_CMD_WRITE, i % 3 ? 0 : NBD_CMD_FLAG_FUA,
						1000 + i, MiB + i * 4096, 4096, data + i * 4096,
						4096),
				 0);
	assert_int_equal(nt_raw_request(&c, NBD_CMD_FLUSH, 0, 5000, 0, 0, NULL, 0), 0);
	/* replies may come in any order: count them by handle */
	bool seen[N + 1] = {0};
	for (unsigned k = 0; k < N + 1; k++) {
		struct nt_reply r;
		assert_int_equal(nt_raw_reply(&c, &r, NULL, 0, 0), 0);
		assert_int_equal(r.error, 0);
		unsigned idx = r.handle == 5000 ? N : (unsigned)(r.handle - 1000);
		assert_true(idx <= N);
		assert_false(seen[idx]);
		seen[idx] = true;
	}
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(
		    nt_raw_request(&c, NBD_CMD_READ, 0, 2000 + i, MiB + i * 4096, 4096, NULL, 0),
		    0);
	uint8_t back[4096];
	bool read_seen[N] = {0};
	for (uint64_t k = 0; k < N; k++) {
		struct nt_reply r;
		assert_int_equal(nt_raw_reply(&c, &r, back, sizeof(back), 4096), 0);
		assert_int_equal(r.error, 0);
		assert_true(r.handle >= 2000 && r.handle < 2000 + N);
		uint64_t i = r.handle - 2000;
		assert_false(read_seen[i]);
		read_seen[i] = true;
		assert_memory_equal(back, data + i * 4096, 4096);
	}
	free(data);
	nt_raw_close(&c);
	bystander_ok();
}

static void request__bad_magic_closes(void **state)
{
	struct nt_raw c;
	exported(&c, false);
	uint8_t h[NBD_REQUEST_SIZE];
	struct nbd_request rq = {0x12560953, 0, NBD_CMD_READ, 1, 0, 4096};
	nbd_request_encode(h, &rq);
	assert_int_equal(nt_raw_send(&c, h, sizeof(h)), 0);
	assert_true(nt_raw_eof(&c));
	nt_raw_close(&c);
	bystander_ok();
}

static void request__write_too_large_to_skip_closes(void **state)
{
	struct nt_raw c;
	exported(&c, true);
	assert_int_equal(nt_raw_request(&c, NBD_CMD_WRITE, 0, 31, 0, 100 * MiB, NULL, 0), 0);
	expect_error(&c, 31, NBD_EINVAL);
	assert_true(nt_raw_eof(&c));
	nt_raw_close(&c);
	bystander_ok();
}

static void request__disconnect_mid_payload(void **state)
{
	struct nt_raw c;
	exported(&c, false);
	uint8_t part[1000];
	memset(part, 0x33, sizeof(part));
	assert_int_equal(nt_raw_request(&c, NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 41, 2 * MiB, MiB, part,
					sizeof(part)),
			 0);
	nt_raw_close(&c);
	/* and in the middle of a request header, and of option data */
	exported(&c, false);
	uint8_t h[NBD_REQUEST_SIZE] = {0x25, 0x60, 0x95, 0x13, 0, 0};
	assert_int_equal(nt_raw_send(&c, h, 6), 0);
	nt_raw_close(&c);
	client(&c, NBD_FLAG_C_FIXED_NEWSTYLE);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_GO, NULL, 100), 0);
	assert_int_equal(nt_raw_send(&c, "\0\0\0\3vo", 6), 0);
	nt_raw_close(&c);
	bystander_ok();
}

static void export__volume_busy_while_exported(void **state)
{
	struct nt_raw c;
	client(&c, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	assert_int_equal(nt_raw_go(&c, "vol2", false, NULL), 0);
	assert_int_equal(nt_volume_delete(&g->n, "vol2"), EBUSY);
	/* DISC: the daemon closes the socket only once the export is released */
	assert_int_equal(nt_raw_request(&c, NBD_CMD_DISC, 0, 51, 0, 0, NULL, 0), 0);
	assert_true(nt_raw_eof(&c));
	nt_raw_close(&c);
	assert_int_equal(nt_volume_delete(&g->n, "vol2"), 0);
	assert_int_equal(nt_volume_create(&g->n, "vol2", 1 << 20), 0);
	bystander_ok();
}

/* ---- random streams ---- */

struct stream {
	uint8_t *b;
	size_t len, cap;
};

static void put(struct stream *s, const void *p, size_t n)
{
	if (s->len + n > s->cap) {
		s->cap = (s->len + n) * 2;
		s->b = realloc(s->b, s->cap);
		assert_non_null(s->b);
	}
	memcpy(s->b + s->len, p, n);
	s->len += n;
}

static void put_random(struct stream *s, uint64_t *rng, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t b = (uint8_t)hx_splitmix64(rng);
		put(s, &b, 1);
	}
}

/* pick -- a length: mostly small, sometimes at or past a limit */
static uint32_t pick_len(uint64_t *rng)
{
	static const uint32_t edges[] = {0,
					 1,
					 6,
					 4095,
					 4096,
					 8192,
					 8193,
					 1U << 20,
					 (1U << 20) + 1,
					 32U << 20,
					 (32U << 20) + 1,
					 UINT32_MAX};
	uint64_t r = hx_splitmix64(rng);
	if (r % 4 == 0)
		return edges[(r >> 8) % (sizeof(edges) / sizeof(edges[0]))];
	return (uint32_t)((r >> 8) % 600);
}

/* handshake_stream -- client flags and a run of options, valid or not */
static void handshake_stream(struct stream *s, uint64_t *rng)
{
	uint8_t f[4] = {0, 0, 0, (uint8_t)(hx_splitmix64(rng) % 5 ? 3 : hx_splitmix64(rng))};
	put(s, f, 4);
	unsigned nopts = (unsigned)(hx_splitmix64(rng) % 6);
	for (unsigned i = 0; i < nopts; i++) {
		uint64_t r = hx_splitmix64(rng);
		uint32_t opt = r % 3 ? (uint32_t)(r >> 8) % 12 : (uint32_t)(r >> 8);
		uint32_t len = pick_len(rng);
		uint8_t h[NBD_OPT_HEADER_SIZE];
		nbd_opt_header_encode(h, opt, len);
		if (hx_splitmix64(rng) % 20 == 0)
			h[hx_splitmix64(rng) % 8] ^= 0x40; /* a bad magic */
		put(s, h, sizeof(h));
		put_random(s, rng, len < 2048 ? len : 2048); /* maybe less than announced */
	}
}

/* transmission_stream -- GO to "fuzz", then requests, valid or not */
static void transmission_stream(struct stream *s, uint64_t *rng, bool structured)
{
	uint8_t f[4] = {0, 0, 0, 3};
	put(s, f, 4);
	uint8_t h[NBD_OPT_HEADER_SIZE];
	if (structured) {
		nbd_opt_header_encode(h, NBD_OPT_STRUCTURED_REPLY, 0);
		put(s, h, sizeof(h));
	}
	uint8_t go[] = {0, 0, 0, 4, 'f', 'u', 'z', 'z', 0, 0};
	nbd_opt_header_encode(h, NBD_OPT_GO, sizeof(go));
	put(s, h, sizeof(h));
	put(s, go, sizeof(go));
	unsigned nreq = (unsigned)(hx_splitmix64(rng) % 12);
	for (unsigned i = 0; i < nreq; i++) {
		uint64_t r = hx_splitmix64(rng);
		struct nbd_request rq = {
		    .magic = r % 40 ? NBD_REQUEST_MAGIC : (uint32_t)r,
		    .flags = (uint16_t)(r % 2 ? 0 : r >> 8 & 0x1f),
		    .type = (uint16_t)(r >> 16) % 10,
		    .handle = i,
		    .offset = hx_splitmix64(rng) % 3 ? hx_splitmix64(rng) % (1U << 20)
						     : hx_splitmix64(rng),
		    .length = pick_len(rng),
		};
		if (rq.type == NBD_CMD_DISC && hx_splitmix64(rng) % 2)
			rq.type = NBD_CMD_FLUSH;
		uint8_t b[NBD_REQUEST_SIZE];
		nbd_request_encode(b, &rq);
		put(s, b, sizeof(b));
		if (rq.type == NBD_CMD_WRITE)
			put_random(s, rng, rq.length < 8192 ? rq.length : 8192);
	}
}

static uint64_t fuzz_sent, fuzz_received, fuzz_cut;

/* stream_run -- send @s on a fresh connection, reading whatever comes back, until EOF */
static void stream_run(const struct stream *s)
{
	struct nt_raw c;
	assert_int_equal(nt_raw_connect(&c, g->n.nbd_port), 0);
	size_t sent = 0;
	bool wr_open = true;
	int64_t deadline = hx_now_ms() + NT_TIMEOUT_MS;
	for (;;) {
		struct pollfd p = {.fd = c.fd, .events = POLLIN | (wr_open ? POLLOUT : 0)};
		int64_t left = deadline - hx_now_ms();
		assert_true(left > 0); /* a safety bound, never reached when all is well */
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			uint8_t sink[65536];
			ssize_t n = recv(c.fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				break; /* the daemon closed: done */
			if (n > 0)
				fuzz_received += (uint64_t)n;
		}
		if (wr_open && (p.revents & POLLOUT)) {
			ssize_t n =
			    send(c.fd, s->b + sent, s->len - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				wr_open = false; /* closed on us: fine, read to the end */
			if (sent == s->len) {
				shutdown(c.fd, SHUT_WR);
				wr_open = false;
			}
		}
	}
	fuzz_sent += sent;
	fuzz_cut += sent < s->len;
	nt_raw_close(&c);
}

static void random_streams__daemon_serves_on(void **state)
{
	uint64_t rng = 0x6e6264667a7aULL;
	for (unsigned i = 0; i < 300; i++) {
		struct stream s = {0};
		switch (i % 3) {
		case 0:
			handshake_stream(&s, &rng);
			break;
		case 1:
			transmission_stream(&s, &rng, false);
			break;
		default:
			transmission_stream(&s, &rng, true);
			break;
		}
		stream_run(&s);
		free(s.b);
		if (i % 50 == 49)
			bystander_ok();
	}
	printf("300 random streams: %llu bytes sent, %llu received, %llu cut short by the "
	       "daemon\n",
	       (unsigned long long)fuzz_sent, (unsigned long long)fuzz_received,
	       (unsigned long long)fuzz_cut);
	bystander_ok();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(handshake__unknown_client_flags),
	    cmocka_unit_test(handshake__bad_option_magic),
	    cmocka_unit_test(option__unknown_is_unsupported),
	    cmocka_unit_test(option__oversize_length),
	    cmocka_unit_test(option__invalid_data),
	    cmocka_unit_test(option__export_name),
	    cmocka_unit_test(request__errors_simple_replies),
	    cmocka_unit_test(request__errors_structured_replies),
	    cmocka_unit_test(request__structured_read_chunks),
	    cmocka_unit_test(request__pipelined_handles_echoed),
	    cmocka_unit_test(request__bad_magic_closes),
	    cmocka_unit_test(request__write_too_large_to_skip_closes),
	    cmocka_unit_test(request__disconnect_mid_payload),
	    cmocka_unit_test(export__volume_busy_while_exported),
	    cmocka_unit_test(random_streams__daemon_serves_on),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
