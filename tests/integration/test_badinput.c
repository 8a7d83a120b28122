/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_badinput.c -- hostile and broken input on the TCP transport
 *
 * One daemon for the whole group. Before the cases run, the volume "canary"
 * is filled with a known pattern and fsynced, and a second client (the
 * witness) connects and stays connected throughout. Each case opens a fresh
 * attacking connection, sends something broken, and checks what the wire
 * conventions promise: an error reply with the stated code (and a closed
 * connection where the stream cannot be trusted any more), or a closed
 * connection where no reply can be expected. After every case
 * check_world() verifies that the daemon is alive, that the witness still
 * gets correct service, and that the canary volume is unchanged -- all of
 * it, including the bytes right next to the ranges the cases address.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "errors.h"
#include "frame.h"
#include "harness.h"
#include "wire.h"

#define CANARY_SIZE (4ULL << 20)
#define CANARY_SEED 0xc0ffee
#define SCRATCH_SIZE (1ULL << 20)
#define MAX_PAYLOAD (1U << 20) /* the daemon's --max-payload in this test */

struct world {
	char dir[256];
	struct hx_daemon d;
	struct wconn witness;
	uint32_t w_canary;  /* the witness's handle on "canary" */
	uint32_t w_scratch; /* ... and on "scratch" */
	uint8_t *expect;    /* what "canary" must hold */
	uint8_t *got;
	uint64_t round;
	struct wconn stalled; /* a client that never reads its replies, open until the stop */
};

static struct world W;

/* read_volume -- read @len bytes at 0 through @c in max_payload pieces */
static int read_volume(struct wconn *c, uint32_t h, uint8_t *buf, uint64_t len)
{
	for (uint64_t off = 0; off < len; off += c->max_payload) {
		uint32_t n = (uint32_t)(len - off < c->max_payload ? len - off : c->max_payload);
		int ret = wire_read(c, h, off, n, buf + off);
		if (ret != 0)
			return ret;
	}
	return 0;
}

/*
 * check_world -- the daemon lives, the witness is served correctly, the
 * canary is unchanged (bytes in [skip_off, skip_off + skip_len) may instead
 * hold the matching byte of @alt: a write that was legitimately cut short)
 */
static void check_world_except(uint64_t skip_off, uint64_t skip_len, const uint8_t *alt)
{
	assert_true(hx_daemon_alive(&W.d));
	/* service: a fresh pattern to scratch, read back */
	W.round++;
	uint8_t buf[8192], back[8192];
	uint64_t off = (W.round * 12345) % (SCRATCH_SIZE - sizeof(buf));
	hx_pattern(buf, sizeof(buf), W.round, off);
	assert_int_equal(wire_write(&W.witness, W.w_scratch, off, buf, sizeof(buf), false), 0);
	assert_int_equal(wire_read(&W.witness, W.w_scratch, off, sizeof(back), back), 0);
	assert_memory_equal(buf, back, sizeof(buf));
	/* the canary */
	assert_int_equal(read_volume(&W.witness, W.w_canary, W.got, CANARY_SIZE), 0);
	for (uint64_t i = 0; i < CANARY_SIZE; i++) {
		if (W.got[i] == W.expect[i])
			continue;
		if (alt && i >= skip_off && i - skip_off < skip_len && W.got[i] == alt[i - skip_off])
			continue;
		fail_msg("canary byte %llu changed: 0x%02x, expected 0x%02x",
			 (unsigned long long)i, W.got[i], W.expect[i]);
	}
}

static void check_world(void)
{
	check_world_except(0, 0, NULL);
}

/* group_setup -- daemon, volumes, the canary pattern (fsynced), the witness */
static int group_setup(void **state)
{
	(void)state;
	memset(&W, 0, sizeof(W));
	W.stalled.fd = -1;
	if (hx_tmpdir_make("badinput", W.dir, sizeof(W.dir)) < 0)
		return -1;
	struct hx_daemon_opts o = { .ns_size = "64M", .max_payload = "1M", .threads = 2 };
	if (hx_daemon_start(&W.d, W.dir, &o) < 0)
		return -1;
	W.expect = malloc(CANARY_SIZE);
	W.got = malloc(CANARY_SIZE);
	if (!W.expect || !W.got)
		return -1;
	hx_pattern(W.expect, CANARY_SIZE, CANARY_SEED, 0);
	struct wconn *c = &W.witness;
	if (wire_connect(c, W.d.port) < 0 || wire_hello(c, NULL, 0) != 0) {
		fprintf(stderr, "witness: connect/hello failed\n");
		return -1;
	}
	if (c->max_payload != MAX_PAYLOAD)
		fprintf(stderr, "note: daemon reports max_payload %u (asked for %u)\n",
			c->max_payload, MAX_PAYLOAD);
	if (wire_create(c, "canary", CANARY_SIZE) != 0 ||
	    wire_create(c, "scratch", SCRATCH_SIZE) != 0 ||
	    wire_open(c, "canary", &W.w_canary, NULL) != 0 ||
	    wire_open(c, "scratch", &W.w_scratch, NULL) != 0) {
		fprintf(stderr, "witness: create/open failed\n");
		return -1;
	}
	for (uint64_t off = 0; off < CANARY_SIZE; off += c->max_payload) {
		if (wire_write(c, W.w_canary, off, W.expect + off, c->max_payload, false) != 0)
			return -1;
	}
	if (wire_fsync(c, W.w_canary, 0, 0) != 0)
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	/* stop with the witness connected and a client that never reads its replies */
	int ret = hx_daemon_stop(&W.d);
	wire_close(&W.witness);
	wire_close(&W.stalled);
	if (ret == 0)
		hx_tmpdir_remove(W.dir);
	else
		fprintf(stderr, "kept %s for inspection\n", W.dir);
	free(W.expect);
	free(W.got);
	return ret == 0 ? 0 : -1;
}

/* attacker -- a fresh connection, optionally after a successful HELLO */
static void attacker(struct wconn *c, bool hello)
{
	assert_int_equal(wire_connect(c, W.d.port), 0);
	if (hello)
		assert_int_equal(wire_hello(c, NULL, 0), 0);
}

/* attacker_open -- a fresh connection with HELLO done and "canary" open */
static uint32_t attacker_open(struct wconn *c)
{
	uint32_t h;
	attacker(c, true);
	assert_int_equal(wire_open(c, "canary", &h, NULL), 0);
	return h;
}

/* send_header -- a raw header, any field value */
static void send_header(struct wconn *c, uint32_t magic, uint16_t version, uint16_t type,
			uint64_t id, uint32_t body_len, uint32_t payload_len)
{
	struct frame_header h = { magic, version, type, id, body_len, payload_len };
	uint8_t b[FRAME_HEADER_SIZE];
	frame_header_encode(&h, b);
	assert_int_equal(wire_send_all(c, b, sizeof(b)), 0);
}

/*
 * expect_error_then_close -- one reply of @type (with the reply bit) echoing
 * @id, with status @code, then the daemon closes the connection
 */
static void expect_error_then_close(struct wconn *c, uint16_t type, uint64_t id, int code)
{
	struct wreply r;
	int ret = wire_recv(c, &r);
	if (ret < 0)
		fail_msg("expected an error reply (code %d), got transport error %d (%s)", code,
			 ret, strerror(-ret));
	char msg[256];
	int st = wreply_status(&r, msg, sizeof(msg));
	uint16_t rtype = r.h.type;
	uint64_t rid = r.h.request_id;
	wreply_free(&r);
	if (st != code)
		fail_msg("expected status %d (%s), got %d (%s) \"%s\"", code, rdax_strerror(code),
			 st, st >= 0 ? rdax_strerror(st) : "undecodable", msg);
	assert_int_equal(rtype, type | FRAME_REPLY);
	assert_int_equal(rid, id);
	if (!wire_eof(c))
		fail_msg("daemon kept the connection open after an unrecoverable frame");
	wire_close(c);
}

/* expect_code -- an exchange's status (or transport error) equals @code */
#define expect_code(expr, code)                                                          \
	do {                                                                             \
		int got_ = (expr);                                                       \
		if (got_ != (code))                                                      \
			fail_msg("%s: expected %d (%s), got %d (%s)", #expr, (int)(code), \
				 rdax_strerror(code), got_,                              \
				 got_ < 0 ? strerror(-got_) : rdax_strerror(got_));      \
	} while (0)

/* still_usable -- the connection serves a correct read of the canary afterwards */
static void still_usable(struct wconn *c, uint32_t h, uint64_t off)
{
	uint8_t buf[4096];
	expect_code(wire_read(c, h, off, sizeof(buf), buf), 0);
	assert_memory_equal(buf, W.expect + off, sizeof(buf));
}

static void header__truncated_then_close(void **state)
{
	(void)state;
	struct wconn c;
	attacker(&c, false);
	uint8_t b[FRAME_HEADER_SIZE];
	struct frame_header h = { FRAME_MAGIC, FRAME_VERSION, FRAME_HELLO, 1, 0, 0 };
	frame_header_encode(&h, b);
	assert_int_equal(wire_send_all(&c, b, 13), 0);
	wire_close(&c);
	check_world();
}

static void header__disconnect_mid_header_after_hello(void **state)
{
	(void)state;
	struct wconn c;
	uint32_t h = attacker_open(&c);
	size_t blen;
	uint8_t *body = wire_body_read(h, 0, 4096, &blen);
	struct frame_header fh = { FRAME_MAGIC, FRAME_VERSION, FRAME_READ, 9, (uint32_t)blen, 0 };
	uint8_t b[FRAME_HEADER_SIZE];
	frame_header_encode(&fh, b);
	assert_int_equal(wire_send_all(&c, b, 20), 0);
	free(body);
	wire_close(&c);
	check_world();
}

static void header__wrong_magic(void **state)
{
	(void)state;
	struct wconn c;
	attacker(&c, false);
	send_header(&c, 0x21444152, FRAME_VERSION, FRAME_HELLO, 77, 0, 0);
	expect_error_then_close(&c, 0, 77, RDAX_E_PROTOCOL);
	/* also after a good HELLO */
	attacker(&c, true);
	send_header(&c, 0xdeadbeef, FRAME_VERSION, FRAME_READ, 78, 0, 0);
	expect_error_then_close(&c, 0, 78, RDAX_E_PROTOCOL);
	check_world();
}

static void header__wrong_version(void **state)
{
	(void)state;
	struct wconn c;
	attacker(&c, true);
	send_header(&c, FRAME_MAGIC, FRAME_VERSION + 1, FRAME_VOLUME_LIST, 5, 0, 0);
	expect_error_then_close(&c, 0, 5, RDAX_E_VERSION);
	attacker(&c, false);
	send_header(&c, FRAME_MAGIC, 0, FRAME_HELLO, 6, 0, 0);
	expect_error_then_close(&c, 0, 6, RDAX_E_VERSION);
	check_world();
}

static void header__huge_body_len(void **state)
{
	(void)state;
	struct wconn c;
	attacker(&c, true);
	send_header(&c, FRAME_MAGIC, FRAME_VERSION, FRAME_VOLUME_CREATE, 11, UINT32_MAX, 0);
	expect_error_then_close(&c, 0, 11, RDAX_E_TOO_BIG);
	/* one byte over the default body limit, before HELLO */
	attacker(&c, false);
	send_header(&c, FRAME_MAGIC, FRAME_VERSION, FRAME_HELLO, 12, FRAME_DEFAULT_MAX_BODY + 1, 0);
	expect_error_then_close(&c, 0, 12, RDAX_E_TOO_BIG);
	check_world();
}

static void header__huge_payload_len(void **state)
{
	(void)state;
	struct wconn c;
	uint32_t h = attacker_open(&c);
	size_t blen;
	uint8_t *body = wire_body_write(h, 0, false, &blen);
	/* the header is refused from its lengths alone: no payload is sent */
	assert_int_equal(wire_send_frame(&c, FRAME_WRITE, 21, body, blen, NULL, UINT32_MAX), 0);
	expect_error_then_close(&c, 0, 21, RDAX_E_TOO_BIG);
	h = attacker_open(&c);
	assert_int_equal(wire_send_frame(&c, FRAME_WRITE, 22, body, blen, NULL, MAX_PAYLOAD + 1),
			 0);
	expect_error_then_close(&c, 0, 22, RDAX_E_TOO_BIG);
	free(body);
	check_world();
}

static void header__payload_on_non_write(void **state)
{
	(void)state;
	static const uint16_t types[] = { FRAME_READ, FRAME_FSYNC, FRAME_HELLO, FRAME_STAT };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct wconn c;
		uint32_t h = attacker_open(&c);
		size_t blen;
		uint8_t *body = wire_body_read(h, 0, 4096, &blen);
		assert_int_equal(wire_send_frame(&c, types[i], 30 + i, body, blen, NULL, 4096), 0);
		free(body);
		expect_error_then_close(&c, 0, 30 + i, RDAX_E_PROTOCOL);
	}
	check_world();
}

static void header__unknown_type(void **state)
{
	(void)state;
	static const uint16_t types[] = { 0, FRAME_TYPE_MAX, 0x7fff, FRAME_READ | FRAME_REPLY,
					  FRAME_REPLY };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct wconn c;
		attacker(&c, true);
		send_header(&c, FRAME_MAGIC, FRAME_VERSION, types[i], 40 + i, 0, 0);
		expect_error_then_close(&c, 0, 40 + i, RDAX_E_PROTOCOL);
	}
	check_world();
}

static void body__does_not_parse(void **state)
{
	(void)state;
	/* bytes that are no valid protobuf: field 0 / truncated varint */
	static const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					   0xff, 0xff, 0xff, 0x00, 0x07 };
	struct wconn c;
	attacker(&c, true);
	assert_int_equal(wire_send_frame(&c, FRAME_VOLUME_OPEN, 51, garbage, sizeof(garbage),
					 NULL, 0), 0);
	expect_error_then_close(&c, FRAME_VOLUME_OPEN, 51, RDAX_E_PROTOCOL);

	/* a WRITE whose body does not parse, with a payload that must not land anywhere */
	uint8_t *pay = malloc(65536);
	assert_non_null(pay);
	memset(pay, 0xa5, 65536);
	attacker_open(&c);
	int ret = wire_send_frame(&c, FRAME_WRITE, 52, garbage, sizeof(garbage), pay, 65536);
	/*
	 * over RDMA the daemon's disconnect may stop the payload half-way (a
	 * TCP peer's socket buffers take it all); the reply came before
	 */
	if (ret != 0 && !(hx_rdma_addr() && ret == -EPIPE))
		fail_msg("sending the WRITE: %d (%s)", ret, strerror(-ret));
	expect_error_then_close(&c, FRAME_WRITE, 52, RDAX_E_PROTOCOL);

	/* a body missing required fields (an empty WriteRequest) */
	attacker_open(&c);
	assert_int_equal(wire_send_frame(&c, FRAME_WRITE, 53, NULL, 0, pay, 4096), 0);
	expect_error_then_close(&c, FRAME_WRITE, 53, RDAX_E_PROTOCOL);
	free(pay);

	/* a HELLO that does not parse */
	attacker(&c, false);
	assert_int_equal(wire_send_frame(&c, FRAME_HELLO, 54, garbage, sizeof(garbage), NULL, 0),
			 0);
	expect_error_then_close(&c, FRAME_HELLO, 54, RDAX_E_PROTOCOL);
	check_world();
}

static void hello__missing(void **state)
{
	(void)state;
	struct wconn c;
	attacker(&c, false);
	assert_int_equal(wire_send_frame(&c, FRAME_VOLUME_LIST, 61, NULL, 0, NULL, 0), 0);
	expect_error_then_close(&c, FRAME_VOLUME_LIST, 61, RDAX_E_PROTOCOL);

	/* a WRITE (with its payload) before HELLO, aimed at the canary's likely handles */
	uint8_t pay[4096];
	memset(pay, 0x5a, sizeof(pay));
	for (uint32_t h = 0; h < 3; h++) {
		attacker(&c, false);
		size_t blen;
		uint8_t *body = wire_body_write(h, 0, true, &blen);
		assert_int_equal(
			wire_send_frame(&c, FRAME_WRITE, 62 + h, body, blen, pay, sizeof(pay)), 0);
		free(body);
		expect_error_then_close(&c, FRAME_WRITE, 62 + h, RDAX_E_PROTOCOL);
	}
	/* HELLO with a protocol version the daemon does not speak: refused */
	attacker(&c, false);
	size_t blen;
	uint8_t *body = wire_body_hello(NULL, 0, FRAME_VERSION + 7, &blen);
	assert_int_equal(wire_send_frame(&c, FRAME_HELLO, 66, body, blen, NULL, 0), 0);
	free(body);
	struct wreply r;
	assert_int_equal(wire_recv(&c, &r), 0);
	int st = wreply_status(&r, NULL, 0);
	wreply_free(&r);
	if (st == 0)
		fail_msg("HELLO with protocol_version %d accepted", FRAME_VERSION + 7);
	wire_close(&c);
	check_world();
}

/* range_cases -- every data request with (off, len) gets @code; the connection stays usable */
static void range_cases(uint64_t off, uint64_t len, int code)
{
	struct wconn c;
	uint32_t h = attacker_open(&c);
	assert_true(len <= MAX_PAYLOAD);
	uint32_t wlen = (uint32_t)len;
	uint8_t *pay = malloc(wlen ? wlen : 1);
	assert_non_null(pay);
	memset(pay, 0xee, wlen);
	uint8_t *rbuf = malloc(wlen ? wlen : 1);
	assert_non_null(rbuf);
	expect_code(wire_write(&c, h, off, pay, wlen, false), code);
	still_usable(&c, h, 0);
	expect_code(wire_write(&c, h, off, pay, wlen, true), code);
	still_usable(&c, h, CANARY_SIZE - 4096);
	expect_code(wire_read(&c, h, off, wlen, rbuf), code);
	still_usable(&c, h, 8192);
	expect_code(wire_discard(&c, h, off, len), code);
	still_usable(&c, h, 0);
	expect_code(wire_fsync(&c, h, off, len), code);
	still_usable(&c, h, CANARY_SIZE - 4096);
	free(pay);
	free(rbuf);
	wire_close(&c);
	check_world();
}

static void range__overflowing_offset(void **state)
{
	(void)state;
	range_cases(UINT64_MAX - 100, 4096, EOVERFLOW);
	range_cases(UINT64_MAX, 1, EOVERFLOW);
	range_cases(UINT64_MAX - 4095, 4096, EOVERFLOW);
}

static void range__outside_volume(void **state)
{
	(void)state;
	range_cases(CANARY_SIZE - 4095, 4096, ERANGE); /* one byte past the end */
	range_cases(CANARY_SIZE, 1, ERANGE);
	range_cases(CANARY_SIZE, 4096, ERANGE);
	range_cases(1ULL << 63, 65536, ERANGE);
	range_cases(CANARY_SIZE - 65536, 131072, ERANGE); /* starts inside, runs past */

	/* discard and fsync take 64-bit lengths: whole-volume-sized, starting inside */
	struct wconn c;
	uint32_t h = attacker_open(&c);
	expect_code(wire_discard(&c, h, 4096, CANARY_SIZE), ERANGE);
	expect_code(wire_fsync(&c, h, 4096, CANARY_SIZE), ERANGE);
	expect_code(wire_discard(&c, h, 0, UINT64_MAX), ERANGE);
	expect_code(wire_discard(&c, h, 4096, UINT64_MAX), EOVERFLOW);
	expect_code(wire_fsync(&c, h, 4096, UINT64_MAX), EOVERFLOW);
	still_usable(&c, h, 0);
	wire_close(&c);
	check_world();
}

static void read__longer_than_max_payload(void **state)
{
	(void)state;
	struct wconn c;
	uint32_t h = attacker_open(&c);
	size_t blen;
	uint8_t *body = wire_body_read(h, 0, MAX_PAYLOAD + 1, &blen);
	assert_int_equal(wire_send_frame(&c, FRAME_READ, 71, body, blen, NULL, 0), 0);
	free(body);
	struct wreply r;
	assert_int_equal(wire_recv(&c, &r), 0);
	assert_int_equal(r.h.type, FRAME_READ | FRAME_REPLY);
	assert_int_equal(r.h.request_id, 71);
	assert_int_equal(r.h.payload_len, 0); /* no payload on error */
	expect_code(wreply_status(&r, NULL, 0), RDAX_E_TOO_BIG);
	wreply_free(&r);
	still_usable(&c, h, 4096);
	body = wire_body_read(h, 0, UINT32_MAX, &blen);
	assert_int_equal(wire_send_frame(&c, FRAME_READ, 72, body, blen, NULL, 0), 0);
	free(body);
	assert_int_equal(wire_recv(&c, &r), 0);
	assert_int_equal(r.h.payload_len, 0);
	expect_code(wreply_status(&r, NULL, 0), RDAX_E_TOO_BIG);
	wreply_free(&r);
	still_usable(&c, h, 0);
	wire_close(&c);
	check_world();
}

/* refused writes carry payloads that must be read and thrown away, never stored */
static void write__refused_payload_is_discarded(void **state)
{
	(void)state;
	struct wconn c;
	uint32_t h = attacker_open(&c);
	uint8_t *pay = malloc(MAX_PAYLOAD);
	assert_non_null(pay);
	memset(pay, 0x3c, MAX_PAYLOAD);
	/* a payload whose bytes look like frames: they must never be parsed as such */
	struct frame_header fake = { FRAME_MAGIC, FRAME_VERSION, FRAME_DISCARD, 99, 0, 0 };
	for (size_t off = 0; off + FRAME_HEADER_SIZE <= MAX_PAYLOAD; off += 4096)
		frame_header_encode(&fake, pay + off);
	expect_code(wire_write(&c, h, CANARY_SIZE - 4096, pay, MAX_PAYLOAD, false), ERANGE);
	still_usable(&c, h, CANARY_SIZE - 4096);
	expect_code(wire_write(&c, h + 1000, 0, pay, MAX_PAYLOAD, true), RDAX_E_NOT_OPEN);
	still_usable(&c, h, 0);
	free(pay);
	wire_close(&c);
	check_world();
}

/* a valid WRITE cut short: neighbours untouched, the range holds old or sent bytes */
static void write__short_payload_then_disconnect(void **state)
{
	(void)state;
	const uint64_t off = 1ULL << 20;
	const uint32_t announced = 65536, sent = 10000;
	uint8_t *pay = malloc(announced);
	assert_non_null(pay);
	memset(pay, 0x77, announced);
	struct wconn c;
	uint32_t h = attacker_open(&c);
	size_t blen;
	uint8_t *body = wire_body_write(h, off, true, &blen);
	assert_int_equal(wire_send_frame(&c, FRAME_WRITE, 81, body, blen, NULL, announced), 0);
	assert_int_equal(wire_send_all(&c, pay, sent), 0);
	free(body);
	wire_close(&c);
	/* bytes never sent can only hold the old canary: alt covers the sent part */
	check_world_except(off, sent, pay);
	/* whatever landed there (old or sent bytes, checked above) is the canary from now on */
	memcpy(W.expect + off, W.got + off, sent);

	/* the same on a refused range: nothing may change */
	h = attacker_open(&c);
	body = wire_body_write(h, CANARY_SIZE - 100, false, &blen);
	assert_int_equal(wire_send_frame(&c, FRAME_WRITE, 82, body, blen, NULL, announced), 0);
	assert_int_equal(wire_send_all(&c, pay, sent), 0);
	free(body);
	wire_close(&c);
	free(pay);
	check_world();
}

static void body__disconnect_mid_body(void **state)
{
	(void)state;
	struct wconn c;
	uint32_t h = attacker_open(&c);
	size_t blen;
	uint8_t *body = wire_body_write(h, 0, true, &blen);
	struct frame_header fh = { FRAME_MAGIC, FRAME_VERSION, FRAME_WRITE, 91, (uint32_t)blen,
				   4096 };
	uint8_t b[FRAME_HEADER_SIZE];
	frame_header_encode(&fh, b);
	assert_int_equal(wire_send_all(&c, b, sizeof(b)), 0);
	assert_int_equal(wire_send_all(&c, body, blen / 2), 0);
	free(body);
	wire_close(&c);
	/* announce a larger body than is ever sent, before HELLO */
	attacker(&c, false);
	send_header(&c, FRAME_MAGIC, FRAME_VERSION, FRAME_HELLO, 92, 1000, 0);
	assert_int_equal(wire_send_all(&c, "\x08\x01", 2), 0);
	wire_close(&c);
	check_world();
}

static void handle__bogus(void **state)
{
	(void)state;
	static const uint32_t handles[] = { 0, 1, 2, 7, 0x7fffffff, UINT32_MAX };
	struct wconn c;
	attacker(&c, true);
	uint8_t buf[512];
	memset(buf, 0x42, sizeof(buf));
	for (size_t i = 0; i < sizeof(handles) / sizeof(handles[0]); i++) {
		uint32_t h = handles[i];
		expect_code(wire_write(&c, h, 0, buf, sizeof(buf), false), RDAX_E_NOT_OPEN);
		expect_code(wire_write(&c, h, 4096, buf, sizeof(buf), true), RDAX_E_NOT_OPEN);
		expect_code(wire_read(&c, h, 0, sizeof(buf), buf), RDAX_E_NOT_OPEN);
		expect_code(wire_fsync(&c, h, 0, 0), RDAX_E_NOT_OPEN);
		expect_code(wire_discard(&c, h, 0, 4096), RDAX_E_NOT_OPEN);
		expect_code(wire_stat(&c, h, NULL), RDAX_E_NOT_OPEN);
		expect_code(wire_close_volume(&c, h), RDAX_E_NOT_OPEN);
	}
	/* a handle that was closed is no longer valid */
	uint32_t h;
	assert_int_equal(wire_open(&c, "canary", &h, NULL), 0);
	assert_int_equal(wire_close_volume(&c, h), 0);
	expect_code(wire_write(&c, h, 0, buf, sizeof(buf), false), RDAX_E_NOT_OPEN);
	expect_code(wire_read(&c, h, 0, sizeof(buf), buf), RDAX_E_NOT_OPEN);
	wire_close(&c);
	check_world();
}

/* a handle is only valid on the connection that opened it */
static void handle__from_another_connection(void **state)
{
	(void)state;
	struct wconn a, b;
	attacker(&a, true);
	attacker(&b, true);
	uint32_t ha[3];
	for (int i = 0; i < 3; i++)
		assert_int_equal(wire_open(&a, "canary", &ha[i], NULL), 0);
	uint32_t hb;
	assert_int_equal(wire_open(&b, "scratch", &hb, NULL), 0);
	uint8_t buf[4096];
	memset(buf, 0x99, sizeof(buf));
	int tried = 0;
	for (int i = 0; i < 3; i++) {
		if (ha[i] == hb)
			continue; /* the same number names B's own volume on B: legitimate */
		tried++;
		expect_code(wire_write(&b, ha[i], 0, buf, sizeof(buf), true), RDAX_E_NOT_OPEN);
		expect_code(wire_read(&b, ha[i], 0, sizeof(buf), buf), RDAX_E_NOT_OPEN);
		expect_code(wire_discard(&b, ha[i], 0, 4096), RDAX_E_NOT_OPEN);
		expect_code(wire_fsync(&b, ha[i], 0, 0), RDAX_E_NOT_OPEN);
		expect_code(wire_close_volume(&b, ha[i]), RDAX_E_NOT_OPEN);
	}
	assert_true(tried >= 2);
	/* A's handles still work on A */
	still_usable(&a, ha[0], 0);
	wire_close(&a);
	wire_close(&b);
	check_world();
}

/* closing a connection with dirty data and open handles does not disturb anything */
static void conn__close_with_open_handles(void **state)
{
	(void)state;
	for (int i = 0; i < 20; i++) {
		struct wconn c;
		attacker(&c, true);
		uint32_t h;
		assert_int_equal(wire_open(&c, "scratch", &h, NULL), 0);
		assert_int_equal(wire_open(&c, "canary", &h, NULL), 0);
		wire_close(&c);
	}
	check_world();
}

/* zero lengths are refused (WRITE without payload, READ/DISCARD of 0 bytes), fsync at the end is fine */
static void range__zero_lengths_and_the_end(void **state)
{
	(void)state;
	struct wconn c;
	uint32_t h = attacker_open(&c);
	expect_code(wire_write(&c, h, 4096, NULL, 0, false), EINVAL);
	still_usable(&c, h, 4096);
	uint8_t b[1];
	expect_code(wire_read(&c, h, 4096, 0, b), EINVAL);
	expect_code(wire_discard(&c, h, 4096, 0), EINVAL);
	still_usable(&c, h, 0);
	expect_code(wire_fsync(&c, h, CANARY_SIZE, 0), 0); /* offset == size: nothing to do */
	expect_code(wire_fsync(&c, h, CANARY_SIZE + 1, 0), ERANGE);
	expect_code(wire_fsync(&c, h, CANARY_SIZE - 1, 0), 0);
	still_usable(&c, h, CANARY_SIZE - 4096);
	wire_close(&c);
	check_world();
}

/* a second HELLO is answered like the first; the connection keeps its handles */
static void hello__second(void **state)
{
	(void)state;
	struct wconn c;
	uint32_t h = attacker_open(&c);
	expect_code(wire_hello(&c, NULL, 0), 0);
	still_usable(&c, h, 0);
	wire_close(&c);
	check_world();
}

/* 1024 handles per connection; the next open is refused and the connection stays usable */
static void handle__limit_per_connection(void **state)
{
	(void)state;
	struct wconn c;
	attacker(&c, true);
	uint32_t h = 0, first = 0;
	for (int i = 0; i < 1024; i++) {
		int ret = wire_open(&c, i % 2 ? "canary" : "scratch", &h, NULL);
		if (ret != 0)
			fail_msg("open #%d: %d", i, ret);
		if (i == 1)
			first = h;
	}
	expect_code(wire_open(&c, "canary", &h, NULL), RDAX_E_TOO_BIG);
	still_usable(&c, first, 0);
	/* closing one makes room for one */
	expect_code(wire_close_volume(&c, first), 0);
	expect_code(wire_open(&c, "canary", &h, NULL), 0);
	still_usable(&c, h, 4096);
	wire_close(&c);
	check_world();
}

/* pipelined READ then overlapping WRITE: the READ returns the data from before the WRITE */
static void pipeline__read_then_write_in_order(void **state)
{
	(void)state;
	const uint32_t len = 512 << 10;
	struct wconn c;
	attacker(&c, true);
	uint32_t h;
	expect_code(wire_create(&c, "pipe", 1 << 20), 0);
	expect_code(wire_open(&c, "pipe", &h, NULL), 0);
	uint8_t *a = malloc(len), *b = malloc(len);
	assert_non_null(a);
	assert_non_null(b);
	hx_pattern(a, len, 501, 0);
	hx_pattern(b, len, 502, 0);
	expect_code(wire_write(&c, h, 0, a, len, false), 0);
	size_t rl, wl;
	uint8_t *rb = wire_body_read(h, 0, len, &rl);
	uint8_t *wb = wire_body_write(h, 0, false, &wl);
	/* READ(0), WRITE(0, b), READ(0), all sent before any reply is read */
	assert_int_equal(wire_send_frame(&c, FRAME_READ, 1001, rb, rl, NULL, 0), 0);
	assert_int_equal(wire_send_frame(&c, FRAME_WRITE, 1002, wb, wl, b, len), 0);
	assert_int_equal(wire_send_frame(&c, FRAME_READ, 1003, rb, rl, NULL, 0), 0);
	free(rb);
	free(wb);
	struct wreply r;
	for (uint64_t id = 1001; id <= 1003; id++) {
		assert_int_equal(wire_recv(&c, &r), 0);
		assert_int_equal(r.h.request_id, id); /* no fsync among them: in request order */
		expect_code(wreply_status(&r, NULL, 0), 0);
		if (id == 1001) {
			assert_int_equal(r.h.payload_len, len);
			if (memcmp(r.payload, a, len) != 0)
				fail_msg("a READ returned data of a WRITE pipelined after it");
		} else if (id == 1003) {
			assert_int_equal(r.h.payload_len, len);
			if (memcmp(r.payload, b, len) != 0)
				fail_msg("a READ does not see the WRITE pipelined before it");
		}
		wreply_free(&r);
	}
	/* DISCARD then WRITE then READ, pipelined */
	size_t dl;
	uint8_t *db = wire_body_discard(h, 0, len, &dl);
	wb = wire_body_write(h, 4096, false, &wl);
	rb = wire_body_read(h, 0, 8192, &rl);
	assert_int_equal(wire_send_frame(&c, FRAME_DISCARD, 2001, db, dl, NULL, 0), 0);
	assert_int_equal(wire_send_frame(&c, FRAME_WRITE, 2002, wb, wl, a + 4096, 100), 0);
	assert_int_equal(wire_send_frame(&c, FRAME_READ, 2003, rb, rl, NULL, 0), 0);
	free(db);
	free(wb);
	free(rb);
	for (uint64_t id = 2001; id <= 2003; id++) {
		assert_int_equal(wire_recv(&c, &r), 0);
		assert_int_equal(r.h.request_id, id);
		expect_code(wreply_status(&r, NULL, 0), 0);
		if (id == 2003) {
			uint8_t want[8192] = { 0 };
			memcpy(want + 4096, a + 4096, 100);
			assert_int_equal(r.h.payload_len, 8192);
			assert_memory_equal(r.payload, want, 8192);
		}
		wreply_free(&r);
	}
	expect_code(wire_close_volume(&c, h), 0);
	expect_code(wire_delete(&c, "pipe"), 0);
	free(a);
	free(b);
	wire_close(&c);
	check_world();
}

/*
 * flood__never_reads_replies -- a client pipelines READs of 1 MiB and never
 * reads a reply; the daemon must bound what it queues (it stops reading the
 * connection) and keep serving others. The client stays connected until the
 * daemon is stopped at the end (the stop must still exit 0).
 */
static void flood__never_reads_replies(void **state)
{
	(void)state;
	struct wconn *c = &W.stalled;
	uint32_t h = attacker_open(c);
	size_t rl;
	uint8_t *rb = wire_body_read(h, 0, MAX_PAYLOAD, &rl);
	struct frame_header fh = { FRAME_MAGIC, FRAME_VERSION, FRAME_READ, 0, (uint32_t)rl, 0 };
	uint8_t frame[FRAME_HEADER_SIZE + 64];
	assert_true(rl <= 64);
	unsigned sent = 0;
	/* send until the socket takes nothing more for a second (the daemon stopped reading) */
	for (;;) {
		fh.request_id = 5000 + sent;
		frame_header_encode(&fh, frame);
		memcpy(frame + FRAME_HEADER_SIZE, rb, rl);
		size_t len = FRAME_HEADER_SIZE + rl, off = 0;
		while (off < len) {
			ssize_t n = wire_send_some(c, frame + off, len - off, 1000);
			if (n == 0)
				goto stalled;
			if (n < 0)
				fail_msg("flood: send: %s", strerror((int)-n));
			off += (size_t)n;
		}
		if (++sent == 200000)
			break;
	}
stalled:
	free(rb);
	fprintf(stderr, "flood: %u READs of 1 MiB sent before the daemon stopped reading\n", sent);
	/* 128 in flight + what the socket buffers hold: far fewer than 200000 */
	assert_true(sent < 200000);
	check_world();
	/* a second flooder that then disconnects with everything queued */
	struct wconn d;
	h = attacker_open(&d);
	rb = wire_body_read(h, 0, MAX_PAYLOAD, &rl);
	for (int i = 0; i < 300; i++)
		if (wire_send_frame(&d, FRAME_READ, 9000 + (uint64_t)i, rb, rl, NULL, 0) < 0)
			break;
	free(rb);
	wire_close(&d);
	check_world();
}

/* many connections at once, idle, some without HELLO */
static void conns__many_idle(void **state)
{
	(void)state;
	/* over RDMA every connection is a QP set up under emulation: fewer */
	const unsigned N = hx_scale(300, 24);
	struct wconn *c = calloc(N, sizeof(*c));
	assert_non_null(c);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(wire_connect(&c[i], W.d.port), 0);
		if (i % 3 == 0)
			assert_int_equal(wire_hello(&c[i], NULL, 0), 0);
	}
	check_world();
	for (unsigned i = 0; i < N; i += 3) {
		uint32_t h;
		assert_int_equal(wire_open(&c[i], "canary", &h, NULL), 0);
		still_usable(&c[i], h, (uint64_t)(i % 1000) * 4096);
	}
	for (unsigned i = 0; i < N; i++)
		wire_close(&c[i]);
	free(c);
	check_world();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(header__truncated_then_close),
		cmocka_unit_test(header__disconnect_mid_header_after_hello),
		cmocka_unit_test(header__wrong_magic),
		cmocka_unit_test(header__wrong_version),
		cmocka_unit_test(header__huge_body_len),
		cmocka_unit_test(header__huge_payload_len),
		cmocka_unit_test(header__payload_on_non_write),
		cmocka_unit_test(header__unknown_type),
		cmocka_unit_test(body__does_not_parse),
		cmocka_unit_test(body__disconnect_mid_body),
		cmocka_unit_test(hello__missing),
		cmocka_unit_test(range__overflowing_offset),
		cmocka_unit_test(range__outside_volume),
		cmocka_unit_test(read__longer_than_max_payload),
		cmocka_unit_test(write__refused_payload_is_discarded),
		cmocka_unit_test(write__short_payload_then_disconnect),
		cmocka_unit_test(handle__bogus),
		cmocka_unit_test(handle__from_another_connection),
		cmocka_unit_test(conn__close_with_open_handles),
		cmocka_unit_test(range__zero_lengths_and_the_end),
		cmocka_unit_test(hello__second),
		cmocka_unit_test(handle__limit_per_connection),
		cmocka_unit_test(pipeline__read_then_write_in_order),
		cmocka_unit_test(conns__many_idle),
		cmocka_unit_test(flood__never_reads_replies),
	};
	/* RDAX_IT_ONLY=PATTERN: only the matching tests (debugging a run) */
	if (getenv("RDAX_IT_ONLY"))
		cmocka_set_test_filter(getenv("RDAX_IT_ONLY"));
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
