/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rdma_proto.c -- the verbs-free parts of the RDMA transport: connection
 * private data, write notices (immediate values) and the credit rules, the
 * latter checked by a model of two peers under random schedules
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rdma_proto.h"

/* ---- private data ---- */

static void cm_data__roundtrip(void **state)
{
	struct rdma_cm_data in = {RDMA_CM_MAGIC, RDMA_CM_VERSION, 32, 1024}, out;
	uint8_t buf[RDMA_CM_DATA_SIZE + 40];
	memset(buf, 0xee, sizeof(buf));
	rdma_cm_data_encode(&in, buf);
	/* little-endian on the wire, whatever the host */
	assert_int_equal(buf[0], 0x52);
	assert_int_equal(buf[3], 0x52);
	assert_int_equal(buf[6], 32);
	assert_int_equal(buf[9], 4);
	for (int i = 12; i < 16; i++)
		assert_int_equal(buf[i], 0);
	/* the CM pads private data: longer is fine */
	assert_int_equal(rdma_cm_data_decode(buf, sizeof(buf), &out), 0);
	assert_int_equal(out.credits, 32);
	assert_int_equal(out.msg_size, 1024);
}

static void cm_data__refuses_bad_input(void **state)
{
	struct rdma_cm_data d = {RDMA_CM_MAGIC, RDMA_CM_VERSION, 32, 1024}, out;
	uint8_t buf[RDMA_CM_DATA_SIZE];

	rdma_cm_data_encode(&d, buf);
	assert_int_equal(rdma_cm_data_decode(NULL, 16, &out), -EPROTO);
	assert_int_equal(rdma_cm_data_decode(buf, RDMA_CM_DATA_SIZE - 1, &out), -EPROTO);
	buf[0] ^= 1;
	assert_int_equal(rdma_cm_data_decode(buf, sizeof(buf), &out), -EPROTO);

	d.version = RDMA_CM_VERSION + 1;
	rdma_cm_data_encode(&d, buf);
	assert_int_equal(rdma_cm_data_decode(buf, sizeof(buf), &out), -EPROTONOSUPPORT);

	d.version = RDMA_CM_VERSION;
	d.credits = RDMA_CREDITS_MIN - 1;
	rdma_cm_data_encode(&d, buf);
	assert_int_equal(rdma_cm_data_decode(buf, sizeof(buf), &out), -EPROTO);
	d.credits = RDMA_CREDITS_MAX + 1;
	rdma_cm_data_encode(&d, buf);
	assert_int_equal(rdma_cm_data_decode(buf, sizeof(buf), &out), -EPROTO);

	d.credits = 8;
	d.msg_size = RDMA_MSG_MIN - 1;
	rdma_cm_data_encode(&d, buf);
	assert_int_equal(rdma_cm_data_decode(buf, sizeof(buf), &out), -EPROTO);
}

/* ---- write notices ---- */

/* check_notice -- decoded, exactly the units (1 << @shift bytes) [off, off + len) touches */
static void check_notice(uint32_t base, uint32_t shift, uint64_t off, uint32_t len)
{
	uint32_t imm = rdma_imm_encode(base, shift, off, len);
	uint64_t unit, nunits;
	rdma_imm_decode(imm, len, shift, &unit, &nunits);
	uint64_t first = off >> shift, last = (off + len - 1) >> shift;
	if (unit != base + first || nunits != last - first + 1)
		fail_msg("shift %u base %u off %llu len %u: imm %#x -> unit %llu nunits %llu, "
			 "want %llu %llu",
			 shift, base, (unsigned long long)off, len, imm, (unsigned long long)unit,
			 (unsigned long long)nunits, (unsigned long long)(base + first),
			 (unsigned long long)(last - first + 1));
}

/* check_both -- check_notice in lines and in pages */
static void check_both(uint32_t base, uint64_t off, uint32_t len)
{
	check_notice(base, RDMA_IMM_SHIFT_LINE, off, len);
	check_notice(base, RDMA_IMM_SHIFT_PAGE, off, len);
}

static void imm__covers_exactly_the_units_written(void **state)
{
	static const uint32_t lens[] = {
	    1,	  63,	64,   65,   127,   128,	     4095,	     4096,
	    4097, 8191, 8192, 8193, 65536, 1U << 20, (1U << 20) + 1, 0x7fffffffU};
	static const uint64_t offs[] = {
	    0, 1, 63, 64, 65, 100, 4095, 4096, 4097, 8191, 12288, 1ULL << 30, (1ULL << 30) - 1};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t j = 0; j < sizeof(offs) / sizeof(offs[0]); j++) {
			check_both(0, offs[j], lens[i]);
			check_both(12345, offs[j], lens[i]);
		}
	/* random ones too */
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	for (int i = 0; i < 200000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint32_t len = (uint32_t)(x % (3 * 4096)) + 1;
		uint64_t off = (x >> 20) % (1ULL << 32);
		check_both((uint32_t)(x >> 40) & 0xffff, off, len);
	}
}

/* the X bit: set exactly when the write crosses one unit boundary more than its length needs */
static void imm__extra_bit_marks_the_unaligned_crossing(void **state)
{
	uint64_t unit, nunits;
	/* 64 bytes at 100: lines 1 and 2 (X), page 0 alone (no X) */
	uint32_t imm = rdma_imm_encode(10, RDMA_IMM_SHIFT_LINE, 100, 64);
	assert_int_equal(imm, RDMA_IMM_EXTRA | 11);
	rdma_imm_decode(imm, 64, RDMA_IMM_SHIFT_LINE, &unit, &nunits);
	assert_int_equal(unit, 11);
	assert_int_equal(nunits, 2);
	imm = rdma_imm_encode(10, RDMA_IMM_SHIFT_PAGE, 100, 64);
	assert_int_equal(imm, 10);
	/* 64 bytes at 4064: lines 63 and 64 (X), pages 0 and 1 (X): a page boundary */
	imm = rdma_imm_encode(0, RDMA_IMM_SHIFT_LINE, 4064, 64);
	assert_int_equal(imm, RDMA_IMM_EXTRA | 63);
	rdma_imm_decode(imm, 64, RDMA_IMM_SHIFT_LINE, &unit, &nunits);
	assert_int_equal(nunits, 2);
	imm = rdma_imm_encode(0, RDMA_IMM_SHIFT_PAGE, 4064, 64);
	assert_int_equal(imm, RDMA_IMM_EXTRA | 0);
	rdma_imm_decode(imm, 64, RDMA_IMM_SHIFT_PAGE, &unit, &nunits);
	assert_int_equal(nunits, 2);
	/* aligned: no X in either unit, one line, one page */
	assert_int_equal(rdma_imm_encode(0, RDMA_IMM_SHIFT_LINE, 128, 64), 2);
	assert_int_equal(rdma_imm_encode(0, RDMA_IMM_SHIFT_PAGE, 8192, 64), 2);
	/* 65 bytes at 64: two lines without X (the length needs them) */
	imm = rdma_imm_encode(0, RDMA_IMM_SHIFT_LINE, 64, 65);
	assert_int_equal(imm, 1);
	rdma_imm_decode(imm, 65, RDMA_IMM_SHIFT_LINE, &unit, &nunits);
	assert_int_equal(nunits, 2);
	/* 65 bytes never touch three lines (127..191: lines 1 and 2); 66 at 127 do */
	assert_int_equal(rdma_imm_encode(0, RDMA_IMM_SHIFT_LINE, 127, 65), 1);
	imm = rdma_imm_encode(0, RDMA_IMM_SHIFT_LINE, 127, 66);
	assert_int_equal(imm, RDMA_IMM_EXTRA | 1);
	rdma_imm_decode(imm, 66, RDMA_IMM_SHIFT_LINE, &unit, &nunits);
	assert_int_equal(nunits, 3);
}

static void imm__last_unit_of_the_space(void **state)
{
	/* a volume whose range ends at the top of the 2^30-unit space */
	uint32_t base = (uint32_t)(RDMA_IMM_SPACE_UNITS - 16);
	check_notice(base, RDMA_IMM_SHIFT_PAGE, 15 * 4096, 4096);
	check_notice(base, RDMA_IMM_SHIFT_PAGE, 15 * 4096 + 10, 4086);
	check_notice(base, RDMA_IMM_SHIFT_LINE, 15 * 64, 64);
	check_notice(base, RDMA_IMM_SHIFT_LINE, 15 * 64 + 10, 54);
	uint64_t unit, nunits;
	rdma_imm_decode(rdma_imm_encode(base, RDMA_IMM_SHIFT_PAGE, 14 * 4096 + 1, 4096), 4096,
			RDMA_IMM_SHIFT_PAGE, &unit, &nunits);
	assert_int_equal(unit, RDMA_IMM_SPACE_UNITS - 2);
	assert_int_equal(nunits, 2);
	rdma_imm_decode(rdma_imm_encode(base, RDMA_IMM_SHIFT_LINE, 14 * 64 + 1, 64), 64,
			RDMA_IMM_SHIFT_LINE, &unit, &nunits);
	assert_int_equal(unit, RDMA_IMM_SPACE_UNITS - 2);
	assert_int_equal(nunits, 2);
}

static void imm__zero_length_marks_nothing(void **state)
{
	uint64_t unit, nunits;
	rdma_imm_decode(RDMA_IMM_EXTRA | 7, 0, RDMA_IMM_SHIFT_LINE, &unit, &nunits);
	assert_int_equal(unit, 7);
	assert_int_equal(nunits, 0);
	rdma_imm_decode(RDMA_IMM_EXTRA | 7, 0, RDMA_IMM_SHIFT_PAGE, &unit, &nunits);
	assert_int_equal(nunits, 0);
}

static void imm__only_lines_and_pages_are_units(void **state)
{
	assert_true(rdma_imm_shift_valid(6));
	assert_true(rdma_imm_shift_valid(12));
	assert_false(rdma_imm_shift_valid(0));
	assert_false(rdma_imm_shift_valid(7));
	assert_false(rdma_imm_shift_valid(31));
	/* the largest volume given lines fills a quarter of the space */
	assert_int_equal(RDMA_IMM_LINE_VOLUME_MAX >> RDMA_IMM_SHIFT_LINE, RDMA_IMM_SPACE_UNITS / 4);
}

/*
 * D: a durable notice names the same units as the plain one; D is the bit
 * above the space (never set by a plain notice of a unit inside it) and
 * below X; reply ids have the top bit, which client request ids never reach
 */
static void imm__durable_bit_leaves_the_units_alone(void **state)
{
	assert_int_equal(RDMA_IMM_DURABLE, RDMA_IMM_SPACE_UNITS);
	assert_int_equal(RDMA_IMM_DURABLE & RDMA_IMM_EXTRA, 0);
	assert_int_equal(RDMA_IMM_DURABLE & RDMA_IMM_UNIT_MASK, 0);
	uint32_t top = (uint32_t)(RDMA_IMM_SPACE_UNITS - 2);
	for (uint32_t shift = RDMA_IMM_SHIFT_LINE; shift <= RDMA_IMM_SHIFT_PAGE;
	     shift += RDMA_IMM_SHIFT_PAGE - RDMA_IMM_SHIFT_LINE) {
		uint32_t plain = rdma_imm_encode(top, shift, (1U << shift) - 1, 2);
		assert_false(rdma_imm_durable(plain));
		assert_true(plain & RDMA_IMM_EXTRA);
		uint32_t durable = plain | RDMA_IMM_DURABLE;
		assert_true(rdma_imm_durable(durable));
		uint64_t u1, n1, u2, n2;
		rdma_imm_decode(plain, 2, shift, &u1, &n1);
		rdma_imm_decode(durable, 2, shift, &u2, &n2);
		assert_int_equal(u1, top);
		assert_int_equal(n1, 2);
		assert_int_equal(u2, u1);
		assert_int_equal(n2, n1);
	}
	/* a daemon from before D placed units up to 2^31: encoded as they were */
	assert_int_equal(rdma_imm_encode(RDMA_IMM_DURABLE + 5, RDMA_IMM_SHIFT_PAGE, 0, 4096),
			 RDMA_IMM_DURABLE + 5);
	assert_int_equal(rdma_durable_reply_id(0), 1ULL << 63);
	assert_int_equal(rdma_durable_reply_id(41), (1ULL << 63) | 41);
}

/* ---- credits: two peers, random schedules ---- */

#define MODEL_MAX_INFLIGHT 4096

/* A message in flight: frame bytes or a notice (data) or a grant only. */
struct model_msg {
	bool data;
	uint32_t grant;
};

struct model_side {
	struct rdma_credits cr;
	unsigned to_send; /* data messages this side still wants to send */
	unsigned held;	  /* peer's data messages received, grant held back (backpressure) */
	unsigned replies; /* replies owed for requests received (the daemon side) */
	struct model_msg q[MODEL_MAX_INFLIGHT]; /* in flight towards the peer */
	unsigned qh, qn;
};

struct model {
	struct model_side s[2]; /* 0: client, 1: daemon */
	unsigned pause_at;	/* daemon stops taking requests with this many replies owed */
	bool reserve;		/* the rule under test: data needs 2 credits */
	uint64_t rng;
};

static uint32_t model_rand(struct model *m, uint32_t n)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return (uint32_t)(m->rng % n);
}

static bool side_can_send_data(const struct model *m, const struct model_side *s)
{
	return m->reserve ? rdma_credits_can_send(&s->cr) : s->cr.send_avail >= 1;
}

static void side_post(struct model_side *from, bool data)
{
	struct model_msg *msg = &from->q[(from->qh + from->qn) % MODEL_MAX_INFLIGHT];
	assert_true(from->qn < MODEL_MAX_INFLIGHT);
	msg->data = data;
	msg->grant = rdma_credits_send(&from->cr, true);
	from->qn++;
}

/* daemon_paused -- the daemon takes no request while it owes this many replies */
static bool daemon_paused(const struct model *m)
{
	return m->s[1].replies >= m->pause_at;
}

/* model_step -- one random possible action; false when none is possible */
static bool model_step(struct model *m)
{
	enum { DELIVER0, DELIVER1, SEND0, SEND1, GRANT0, GRANT1, UNHOLD, NACT };
	bool can[NACT];
	unsigned n = 0;
	struct model_side *c = &m->s[0], *d = &m->s[1];
	can[DELIVER0] = c->qn > 0;
	can[DELIVER1] = d->qn > 0;
	can[SEND0] = c->to_send > 0 && side_can_send_data(m, c);
	/* the daemon sends replies */
	can[SEND1] = d->replies > 0 && side_can_send_data(m, d);
	can[GRANT0] = rdma_credits_grant_due(&c->cr);
	can[GRANT1] = rdma_credits_grant_due(&d->cr);
	can[UNHOLD] = d->held > 0 && !daemon_paused(m);
	for (int i = 0; i < NACT; i++)
		n += can[i];
	if (n == 0)
		return false;
	uint32_t pick = model_rand(m, n);
	int act = 0;
	for (; act < NACT; act++)
		if (can[act] && pick-- == 0)
			break;

	switch (act) {
	case DELIVER0:
	case DELIVER1: {
		struct model_side *from = &m->s[act == DELIVER0 ? 0 : 1];
		struct model_side *to = &m->s[act == DELIVER0 ? 1 : 0];
		struct model_msg msg = from->q[from->qh];
		from->qh = (from->qh + 1) % MODEL_MAX_INFLIGHT;
		from->qn--;
		assert_int_equal(rdma_credits_received(&to->cr, msg.grant), 0);
		if (to == d && msg.data) {
			/* a request: the daemon holds its grant while it cannot take requests */
			if (daemon_paused(m))
				to->held++;
			else
				rdma_credits_handled(&to->cr, 1);
			to->replies++;
		} else {
			rdma_credits_handled(&to->cr, 1);
		}
		break;
	}
	case SEND0:
		c->to_send--;
		side_post(c, true);
		break;
	case SEND1:
		d->replies--;
		side_post(d, true);
		break;
	case GRANT0:
		side_post(c, false);
		break;
	case GRANT1:
		side_post(d, false);
		break;
	case UNHOLD:
		rdma_credits_handled(&d->cr, d->held);
		d->held = 0;
		break;
	}
	return true;
}

/*
 * model_run -- one schedule: the client sends @requests requests; returns
 * true if every request was sent and answered (no deadlock)
 */
static bool model_run(uint64_t seed, uint32_t wc, uint32_t wd, unsigned requests, unsigned pause_at,
		      bool reserve)
{
	static struct model m;
	memset(&m, 0, sizeof(m));
	m.rng = seed * 0x9e3779b97f4a7c15ULL + 1;
	m.pause_at = pause_at;
	m.reserve = reserve;
	/* client: sends into the daemon's wd receives, receives into its own wc */
	rdma_credits_init(&m.s[0].cr, wd, wc);
	rdma_credits_init(&m.s[1].cr, wc, wd);
	m.s[0].to_send = requests;
	for (unsigned steps = 0; steps < 1000000 && model_step(&m); steps++)
		;
	return m.s[0].to_send == 0 && m.s[1].replies == 0 && m.s[0].qn == 0 && m.s[1].qn == 0;
}

static void credits__no_deadlock_under_random_schedules(void **state)
{
	static const uint32_t windows[] = {4, 5, 8, 32};
	for (size_t i = 0; i < 4; i++)
		for (size_t j = 0; j < 4; j++)
			for (unsigned pause = 1; pause <= 6; pause += 5)
				for (uint64_t seed = 1; seed <= 60; seed++)
					if (!model_run(seed, windows[i], windows[j], 300, pause,
						       true))
						fail_msg(
						    "deadlock: client window %u, daemon window "
						    "%u, pause at %u, seed %llu",
						    windows[i], windows[j], pause,
						    (unsigned long long)seed);
}

/* The control: without the reserved credit the same model must find a deadlock. */
static void credits__control_without_reserve_deadlocks(void **state)
{
	unsigned deadlocks = 0;
	for (uint64_t seed = 1; seed <= 200; seed++)
		deadlocks += !model_run(seed, 4, 4, 300, 1, false);
	assert_true(deadlocks > 0);
}

static void credits__peer_breaking_the_rules_is_detected(void **state)
{
	struct rdma_credits c;
	rdma_credits_init(&c, 8, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(rdma_credits_received(&c, 0), 0);
	/* a fifth message without any grant back: beyond our window */
	assert_int_equal(rdma_credits_received(&c, 0), -EPROTO);

	rdma_credits_init(&c, 8, 4);
	assert_int_equal(rdma_credits_send(&c, true), 0);
	/* one credit used: a grant of 2 is more than we ever used */
	assert_int_equal(rdma_credits_received(&c, 2), -EPROTO);
	assert_int_equal(rdma_credits_received(&c, 1), 0);
	assert_int_equal(c.send_avail, 8);
}

static void credits__grant_goes_with_the_next_send(void **state)
{
	struct rdma_credits c;
	rdma_credits_init(&c, 8, 8);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rdma_credits_received(&c, 0), 0);
	rdma_credits_handled(&c, 3);
	assert_false(rdma_credits_grant_due(&c));	   /* 3 < 4: no grant-only message yet */
	assert_int_equal(rdma_credits_send(&c, false), 0); /* a notice carries no grant */
	assert_int_equal(rdma_credits_send(&c, true), 3);
	assert_int_equal(c.recv_owed, 0);
	assert_int_equal(c.recv_unreturned, 0);
	assert_int_equal(c.send_avail, 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(cm_data__roundtrip),
	    cmocka_unit_test(cm_data__refuses_bad_input),
	    cmocka_unit_test(imm__covers_exactly_the_units_written),
	    cmocka_unit_test(imm__extra_bit_marks_the_unaligned_crossing),
	    cmocka_unit_test(imm__last_unit_of_the_space),
	    cmocka_unit_test(imm__zero_length_marks_nothing),
	    cmocka_unit_test(imm__only_lines_and_pages_are_units),
	    cmocka_unit_test(imm__durable_bit_leaves_the_units_alone),
	    cmocka_unit_test(credits__no_deadlock_under_random_schedules),
	    cmocka_unit_test(credits__control_without_reserve_deadlocks),
	    cmocka_unit_test(credits__peer_breaking_the_rules_is_detected),
	    cmocka_unit_test(credits__grant_goes_with_the_next_send),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
