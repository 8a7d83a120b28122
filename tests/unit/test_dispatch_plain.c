/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_dispatch_plain.c -- WRITE and READ bodies decoded by hand agree with protobuf-c
 *
 * dispatch_request() decodes the plain form of a WRITE or READ body itself
 * and leaves every other body to protobuf_c_message_unpack() (dispatch.c).
 * Here, bodies packed by protobuf-c and then mutated (bytes flipped, cut,
 * fields repeated or appended, varints made overlong, random bytes) go
 * through dispatch_request(), and what it does must be what protobuf-c's
 * own decoding of the same bytes implies: a body protobuf-c refuses closes
 * the connection; one it accepts is served with exactly its values (the
 * payload lands at its offset, fsync as decoded, a READ of its length), or
 * refused with an error reply when those values are invalid.
 *
 * The control: the same check must fail for a decoder that gets a value
 * wrong; dispatch__plain_decoding_control_sees_a_wrong_offset feeds the
 * checker a wrong reference and asserts it notices.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "checked.h"
#include "dispatch.h"
#include "errors.h"
#include "frame.h"
#include "log.h"
#include "rdax.pb-c.h"
#include "session.h"
#include "store.h"
#include "tmpdir.h"

#define VOL_SIZE  (8ULL << 20)
#define WRITE_LEN 4096U
#define ROUNDS	  20000

static const char *const transports[] = {"tcp"};

struct fx {
	char dir[200];
	char path[256];
	struct store *store;
	struct dispatch_env env;
	struct session *s;
	struct volume *v;
	uint32_t handle;
	uint64_t rng;
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "test-dispatch-plain");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	char err[256];
	assert_int_equal(store_new(&fx->store), 0);
	assert_int_equal(
	    store_namespace_add(fx->store, fx->path, 32ULL << 20, PERSIST_SIM, err, sizeof(err)), 0);
	assert_int_equal(store_volume_create(fx->store, "v", VOL_SIZE, NULL, NULL, NULL, 0), 0);
	fx->env = (struct dispatch_env){
	    .store = fx->store,
	    .max_payload = 1U << 20,
	    .max_body = FRAME_DEFAULT_MAX_BODY,
	    .flush_mode = FLUSH_TRACKED,
	    .server_version = "test",
	    .transports = transports,
	    .ntransports = 1,
	};
	assert_int_equal(session_new(fx->store, "test", &fx->s), 0);
	fx->s->hello_done = true;
	assert_int_equal(store_volume_open(fx->store, "v", &fx->v), 0);
	assert_int_equal(session_handle_add(fx->s, fx->v, &fx->handle), 0);
	fx->rng = 0x9e3779b97f4a7c15ULL;
	log_set_level(LOG_LEVEL_ERROR); /* every refused body is logged as a warning */
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	session_delete(&fx->s);
	store_delete(&fx->store);
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

/* rnd -- splitmix64 */
static uint64_t rnd(struct fx *fx)
{
	uint64_t z = (fx->rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* a value that is sometimes valid, sometimes at an edge, sometimes anything */
static uint64_t pick(struct fx *fx, uint64_t valid, uint64_t edge)
{
	switch (rnd(fx) % 4) {
	case 0:
	case 1:
		return valid;
	case 2:
		return edge + rnd(fx) % 3 - 1;
	default:
		return rnd(fx) >> (rnd(fx) % 64);
	}
}

/* varint_put -- a varint, @extra bytes longer than needed (non-minimal but valid) */
static size_t varint_put(uint8_t *p, uint64_t v, unsigned extra)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	for (unsigned i = 0; i < extra && n < 9; i++) {
		p[n++] = (uint8_t)(v | 0x80);
		v = 0;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* body_make -- a WRITE or READ body: protobuf-c's packing, then maybe mutated */
static size_t body_make(struct fx *fx, uint16_t type, uint8_t *b, size_t cap)
{
	uint32_t handle = (uint32_t)pick(fx, fx->handle, fx->handle);
	uint64_t off = pick(fx, rnd(fx) % (VOL_SIZE - WRITE_LEN), VOL_SIZE - WRITE_LEN);
	size_t n;
	if (type == FRAME_WRITE) {
		Rdax__WriteRequest w = RDAX__WRITE_REQUEST__INIT;
		w.handle = handle;
		w.offset = off;
		w.has_fsync = rnd(fx) % 2;
		w.fsync = rnd(fx) % 2;
		n = protobuf_c_message_pack(&w.base, b);
	} else {
		Rdax__ReadRequest r = RDAX__READ_REQUEST__INIT;
		r.handle = handle;
		r.offset = off;
		r.length = (uint32_t)pick(fx, 1 + rnd(fx) % 65536, fx->env.max_payload);
		n = protobuf_c_message_pack(&r.base, b);
	}
	unsigned field = 1 + rnd(fx) % 5; /* 4, 5: unknown fields */
	switch (rnd(fx) % 10) {
	case 0: /* flip a byte */
		if (n)
			b[rnd(fx) % n] ^= (uint8_t)(1 + rnd(fx) % 255);
		break;
	case 1: /* cut */
		n = n ? rnd(fx) % n : 0;
		break;
	case 2: /* a field again (repeated, or unknown), as a varint of any value */
		b[n++] = (uint8_t)(field << 3);
		n += varint_put(b + n, pick(fx, 1, UINT32_MAX), 0);
		break;
	case 3: /* a field with another wire type: 64-bit, length-delimited, 32-bit */
		b[n++] = (uint8_t)(field << 3 | (rnd(fx) % 2 ? 1 : 5));
		for (unsigned i = 0; i < 8; i++)
			b[n++] = (uint8_t)rnd(fx);
		break;
	case 4: { /* rebuilt with overlong varints and fields in another order */
		uint64_t third = rnd(fx) % 3;
		size_t m = 0;
		b[m++] = 2 << 3;
		m += varint_put(b + m, off, (unsigned)(rnd(fx) % 4));
		b[m++] = 1 << 3;
		m += varint_put(b + m, handle, (unsigned)(rnd(fx) % 4));
		if (type == FRAME_READ || rnd(fx) % 2) {
			b[m++] = 3 << 3;
			m += varint_put(b + m, type == FRAME_READ ? rnd(fx) % 70000 : third,
					(unsigned)(rnd(fx) % 3));
		}
		n = m;
		break;
	}
	case 5: /* random bytes */
		n = rnd(fx) % 24;
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)rnd(fx);
		break;
	default: /* as packed */
		break;
	}
	assert_true(n <= cap);
	return n;
}

/*
 * check_one -- dispatch @body and compare with what @ref (protobuf-c's
 * decoding of the same bytes, NULL: refused) implies; returns true if it
 * matches. Releases whatever dispatch took.
 */
static bool check_one(struct fx *fx, uint16_t type, const uint8_t *body, size_t n,
		      const ProtobufCMessage *ref)
{
	struct frame_header h = {
	    .magic = FRAME_MAGIC,
	    .version = FRAME_VERSION,
	    .type = type,
	    .request_id = 7,
	    .body_len = (uint32_t)n,
	    .payload_len = type == FRAME_WRITE ? WRITE_LEN : 0,
	};
	struct dispatch_out out;
	dispatch_request(&fx->env, fx->s, &h, body, &out);
	bool ok;
	if (!ref) {
		ok = out.action == DISPATCH_CLOSE;
	} else if (type == FRAME_WRITE) {
		const Rdax__WriteRequest *w = (const Rdax__WriteRequest *)ref;
		bool valid = w->handle == fx->handle &&
			     range_check(w->offset, WRITE_LEN, VOL_SIZE) == 0;
		ok = out.action == DISPATCH_PAYLOAD && out.payload_len == WRITE_LEN;
		if (valid)
			ok = ok && out.payload_dst == fx->v->data + w->offset &&
			     out.write.offset == w->offset &&
			     out.write.fsync == (w->has_fsync && w->fsync) && !out.reply.body;
		else
			ok = ok && out.payload_dst == NULL && out.reply.body != NULL;
	} else {
		const Rdax__ReadRequest *r = (const Rdax__ReadRequest *)ref;
		bool valid = r->handle == fx->handle && r->length > 0 &&
			     r->length <= fx->env.max_payload &&
			     range_check(r->offset, r->length, VOL_SIZE) == 0;
		ok = out.action == DISPATCH_REPLY;
		if (valid)
			ok = ok && out.reply.payload == fx->v->data + r->offset &&
			     out.reply.payload_len == r->length;
		else
			ok = ok && out.reply.payload_len == 0;
	}
	if (out.action == DISPATCH_PAYLOAD && out.payload_dst)
		dispatch_payload_abort(fx->s, &out.write, 0);
	dispatch_reply_release(fx->s, &out.reply);
	assert_int_equal(session_holds(fx->s), 0);
	return ok;
}

static void dispatch_request__plain_decoding_agrees_with_protobuf_c(void **state)
{
	struct fx *fx = *state;
	unsigned refused = 0, accepted = 0;
	for (unsigned i = 0; i < ROUNDS; i++) {
		uint16_t type = i % 2 ? FRAME_WRITE : FRAME_READ;
		uint8_t body[128];
		size_t n = body_make(fx, type, body, sizeof(body));
		const ProtobufCMessageDescriptor *d = type == FRAME_WRITE
							  ? &rdax__write_request__descriptor
							  : &rdax__read_request__descriptor;
		ProtobufCMessage *ref = protobuf_c_message_unpack(d, NULL, n, body);
		if (!check_one(fx, type, body, n, ref)) {
			fprintf(stderr, "round %u: %s body of %zu bytes:", i, frame_type_name(type),
				n);
			for (size_t k = 0; k < n; k++)
				fprintf(stderr, " %02x", body[k]);
			fprintf(stderr, "\n");
			fail_msg("dispatch_request disagrees with protobuf-c's decoding");
		}
		if (ref)
			accepted++;
		else
			refused++;
		protobuf_c_message_free_unpacked(ref, NULL);
	}
	/* both kinds were really tried */
	assert_true(refused > ROUNDS / 20);
	assert_true(accepted > ROUNDS / 2);
}

/* the control: a reference that differs in one value must be told apart */
static void dispatch__plain_decoding_control_sees_a_wrong_offset(void **state)
{
	struct fx *fx = *state;
	Rdax__WriteRequest w = RDAX__WRITE_REQUEST__INIT;
	w.handle = fx->handle;
	w.offset = 3 * 4096;
	uint8_t body[64];
	size_t n = protobuf_c_message_pack(&w.base, body);
	assert_true(check_one(fx, FRAME_WRITE, body, n, &w.base));
	Rdax__WriteRequest wrong = w;
	wrong.offset += 1;
	assert_false(check_one(fx, FRAME_WRITE, body, n, &wrong.base));
	wrong = w;
	wrong.has_fsync = wrong.fsync = 1;
	assert_false(check_one(fx, FRAME_WRITE, body, n, &wrong.base));
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(dispatch_request__plain_decoding_agrees_with_protobuf_c),
	    T(dispatch__plain_decoding_control_sees_a_wrong_offset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
