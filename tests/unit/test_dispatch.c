/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_dispatch.c -- request validation and replies of the transport-independent
 * dispatcher, on a real SIM namespace in a temporary directory. Jobs run
 * synchronously here: vol_op_run, then dispatch_job_finish, as the pools would.
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

#include "dispatch.h"
#include "incarnation.h"
#include "powercut.h"
#include "errors.h"
#include "frame.h"
#include "log.h"
#include "rdax.pb-c.h"
#include "session.h"
#include "store.h"
#include "tmpdir.h"
#include "vol_table.h"

#define VOL_SIZE (8ULL << 20)

static const char *const transports[] = {"tcp"};

struct fixture {
	char dir[200];
	char path[256];
	struct store *store;
	struct dispatch_env env;
	struct session *s;
	uint64_t next_id;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	tmpdir_make(f->dir, sizeof(f->dir), "test-dispatch");
	tmpdir_file(f->path, sizeof(f->path), f->dir, "ns0");
	char err[256];
	if (store_new(&f->store) ||
	    store_namespace_add(f->store, f->path, 64ULL << 20, PERSIST_SIM, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	f->env = (struct dispatch_env){
	    .store = f->store,
	    .max_payload = 1U << 20,
	    .max_body = FRAME_DEFAULT_MAX_BODY,
	    .flush_mode = FLUSH_TRACKED,
	    .server_version = "test",
	    .transports = transports,
	    .ntransports = 1,
	};
	if (session_new(f->store, "test", &f->s))
		return -1;
	f->next_id = 1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	session_delete(&f->s);
	store_delete(&f->store);
	tmpdir_remove(f->dir);
	free(f);
	return 0;
}

/* request -- dispatch one request message (NULL: empty body) with @payload_len */
static void request(struct fixture *f, struct session *s, uint16_t type, const ProtobufCMessage *m,
		    uint32_t payload_len, struct dispatch_out *out)
{
	uint8_t body[4096];
	size_t n = m ? protobuf_c_message_pack(m, body) : 0;
	struct frame_header h = {
	    .magic = FRAME_MAGIC,
	    .version = FRAME_VERSION,
	    .type = type,
	    .request_id = f->next_id++,
	    .body_len = (uint32_t)n,
	    .payload_len = payload_len,
	};
	dispatch_request(&f->env, s, &h, body, out);
	assert_int_equal(out->reply.request_id, h.request_id);
}

/* finish_job -- run a job as the pool would, then finish it */
static void finish_job(struct fixture *f, struct session *s, struct dispatch_out *out)
{
	assert_int_equal(out->action, DISPATCH_JOB);
	struct dispatch_job *job = out->job;
	vol_op_run(&job->op);
	dispatch_job_finish(&f->env, s, job, out);
}

/* reply_code -- the Status.code of a reply body (every reply starts with it) */
static uint32_t reply_code(const struct dispatch_out *out)
{
	Rdax__StatusReply *r =
	    rdax__status_reply__unpack(NULL, out->reply.body_len, out->reply.body);
	assert_non_null(r);
	assert_non_null(r->status);
	uint32_t code = r->status->code;
	if (code)
		assert_non_null(r->status->message);
	rdax__status_reply__free_unpacked(r, NULL);
	return code;
}

/* done -- release a reply */
static void done(struct session *s, struct dispatch_out *out)
{
	dispatch_reply_release(s, &out->reply);
}

/* expect -- the request got a reply (or close) with @code; released */
static void expect(struct session *s, struct dispatch_out *out, enum dispatch_action action,
		   int code)
{
	assert_int_equal(out->action, action);
	assert_int_equal(reply_code(out), (uint32_t)(code < 0 ? -code : code));
	done(s, out);
}

/* expect_msg -- a refusal with @code whose message holds @want; released */
static void expect_msg(struct session *s, struct dispatch_out *out, int code, const char *want)
{
	assert_int_equal(out->action, DISPATCH_REPLY);
	Rdax__StatusReply *sr =
	    rdax__status_reply__unpack(NULL, out->reply.body_len, out->reply.body);
	assert_non_null(sr);
	assert_int_equal(sr->status->code, (uint32_t)code);
	if (!strstr(sr->status->message, want))
		fail_msg("message '%s' does not say '%s'", sr->status->message, want);
	rdax__status_reply__free_unpacked(sr, NULL);
	done(s, out);
}

static void hello(struct fixture *f, struct session *s)
{
	Rdax__HelloRequest m = RDAX__HELLO_REQUEST__INIT;
	m.protocol_version = FRAME_VERSION;
	struct dispatch_out out;
	request(f, s, FRAME_HELLO, &m.base, 0, &out);
	finish_job(f, s, &out);
	expect(s, &out, DISPATCH_REPLY, 0);
	assert_true(s->hello_done);
}

static void create(struct fixture *f, const char *name, uint64_t size, int code)
{
	Rdax__VolumeCreateRequest m = RDAX__VOLUME_CREATE_REQUEST__INIT;
	m.name = (char *)name;
	m.size = size;
	struct dispatch_out out;
	request(f, f->s, FRAME_VOLUME_CREATE, &m.base, 0, &out);
	if (out.action == DISPATCH_JOB)
		finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, code);
}

static uint32_t open_volume(struct fixture *f, struct session *s, const char *name)
{
	Rdax__VolumeOpenRequest m = RDAX__VOLUME_OPEN_REQUEST__INIT;
	m.name = (char *)name;
	struct dispatch_out out;
	request(f, s, FRAME_VOLUME_OPEN, &m.base, 0, &out);
	finish_job(f, s, &out);
	assert_int_equal(out.action, DISPATCH_REPLY);
	Rdax__VolumeOpenReply *r =
	    rdax__volume_open_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(r);
	assert_int_equal(r->status->code, 0);
	assert_true(r->has_handle);
	assert_int_equal(r->size, VOL_SIZE);
	uint32_t handle = r->handle;
	rdax__volume_open_reply__free_unpacked(r, NULL);
	done(s, &out);
	return handle;
}

/* ready -- hello, one volume "v" open: returns its handle */
static uint32_t ready(struct fixture *f)
{
	hello(f, f->s);
	create(f, "v", VOL_SIZE, 0);
	return open_volume(f, f->s, "v");
}

static void read_req(struct fixture *f, struct session *s, uint32_t handle, uint64_t off,
		     uint32_t len, struct dispatch_out *out)
{
	Rdax__ReadRequest m = RDAX__READ_REQUEST__INIT;
	m.handle = handle;
	m.offset = off;
	m.length = len;
	request(f, s, FRAME_READ, &m.base, 0, out);
}

static void write_req(struct fixture *f, uint32_t handle, uint64_t off, uint32_t len, bool fsync,
		      struct dispatch_out *out)
{
	Rdax__WriteRequest m = RDAX__WRITE_REQUEST__INIT;
	m.handle = handle;
	m.offset = off;
	m.has_fsync = fsync;
	m.fsync = fsync;
	request(f, f->s, FRAME_WRITE, &m.base, len, out);
}

/* ---- header ---- */

static void header_out(struct fixture *f, struct frame_header h, int code)
{
	uint8_t raw[FRAME_HEADER_SIZE];
	struct frame_header got;
	struct dispatch_out out;
	frame_header_encode(&h, raw);
	int ret = dispatch_header(&f->env, raw, &got, &out);
	assert_int_equal(ret, code);
	if (code == 0)
		return;
	assert_int_equal(out.reply.type, FRAME_REPLY);
	assert_int_equal(out.reply.request_id, h.request_id);
	expect(f->s, &out, DISPATCH_CLOSE, code);
}

static void dispatch_header__checks(void **state)
{
	struct fixture *f = *state;
	struct frame_header ok = {
	    .magic = FRAME_MAGIC,
	    .version = FRAME_VERSION,
	    .type = FRAME_WRITE,
	    .request_id = 0x1122334455667788ULL,
	    .body_len = 10,
	    .payload_len = 4096,
	};
	header_out(f, ok, 0);
	struct frame_header h = ok;
	h.magic = 0x12345678;
	header_out(f, h, -RDAX_E_PROTOCOL);
	h = ok;
	h.version = 2;
	header_out(f, h, -RDAX_E_VERSION);
	h = ok;
	h.type = FRAME_WRITE | FRAME_REPLY;
	header_out(f, h, -RDAX_E_PROTOCOL);
	h = ok;
	h.type = FRAME_TYPE_MAX;
	header_out(f, h, -RDAX_E_PROTOCOL);
	h = ok;
	h.type = 0;
	header_out(f, h, -RDAX_E_PROTOCOL);
	h = ok;
	h.body_len = FRAME_DEFAULT_MAX_BODY + 1;
	header_out(f, h, -RDAX_E_TOO_BIG);
	h = ok;
	h.body_len = UINT32_MAX;
	header_out(f, h, -RDAX_E_TOO_BIG);
	h = ok;
	h.payload_len = f->env.max_payload + 1;
	header_out(f, h, -RDAX_E_TOO_BIG);
	h = ok;
	h.type = FRAME_READ;
	h.payload_len = 1;
	header_out(f, h, -RDAX_E_PROTOCOL);
}

/* ---- hello ---- */

static void dispatch_request__hello_must_come_first(void **state)
{
	struct fixture *f = *state;
	struct dispatch_out out;
	request(f, f->s, FRAME_VOLUME_LIST, NULL, 0, &out);
	expect(f->s, &out, DISPATCH_CLOSE, -RDAX_E_PROTOCOL);
	/* a WRITE before HELLO: close, its payload is not drained */
	write_req(f, 1, 0, 100, false, &out);
	expect(f->s, &out, DISPATCH_CLOSE, -RDAX_E_PROTOCOL);
	assert_false(f->s->hello_done);
}

static void dispatch_request__hello_reply(void **state)
{
	struct fixture *f = *state;
	Rdax__HelloRequest m = RDAX__HELLO_REQUEST__INIT;
	m.protocol_version = FRAME_VERSION;
	struct dispatch_out out;
	request(f, f->s, FRAME_HELLO, &m.base, 0, &out);
	assert_true(out.job->ordered);
	assert_int_equal(vol_op_pool(&out.job->op), VOL_POOL_META);
	finish_job(f, f->s, &out);
	assert_int_equal(out.action, DISPATCH_REPLY);
	assert_int_equal(out.reply.type, FRAME_HELLO | FRAME_REPLY);
	Rdax__HelloReply *r = rdax__hello_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(r);
	assert_int_equal(r->status->code, 0);
	assert_int_equal(r->protocol_version, FRAME_VERSION);
	assert_int_equal(r->max_payload, 1U << 20);
	assert_int_equal(r->max_body, FRAME_DEFAULT_MAX_BODY);
	assert_string_equal(r->server_version, "test");
	assert_int_equal(r->n_transports, 1);
	assert_string_equal(r->transports[0], "tcp");
	assert_int_equal(r->n_namespaces, 1);
	assert_int_equal(r->namespaces[0]->id, 0);
	assert_string_equal(r->namespaces[0]->path, f->path);
	assert_int_equal(r->namespaces[0]->size, 64ULL << 20);
	assert_true(r->namespaces[0]->free_bytes > 0);
	assert_int_equal(r->namespaces[0]->persist_method, RDAX__PERSIST_METHOD__PERSIST_SIM);
	assert_string_equal(r->namespaces[0]->mode, "sim");
	rdax__hello_reply__free_unpacked(r, NULL);
	done(f->s, &out);
	assert_true(f->s->hello_done);
}

static void dispatch_request__hello_wrong_version(void **state)
{
	struct fixture *f = *state;
	Rdax__HelloRequest m = RDAX__HELLO_REQUEST__INIT;
	m.protocol_version = FRAME_VERSION + 1;
	struct dispatch_out out;
	request(f, f->s, FRAME_HELLO, &m.base, 0, &out);
	expect(f->s, &out, DISPATCH_CLOSE, -RDAX_E_VERSION);
	assert_false(f->s->hello_done);
}

static void dispatch_request__hello_token(void **state)
{
	struct fixture *f = *state;
	static const uint8_t token[] = "s3cret";
	f->env.token = token;
	f->env.token_len = 6;
	Rdax__HelloRequest m = RDAX__HELLO_REQUEST__INIT;
	m.protocol_version = FRAME_VERSION;
	struct dispatch_out out;

	request(f, f->s, FRAME_HELLO, &m.base, 0, &out); /* none */
	expect(f->s, &out, DISPATCH_CLOSE, -RDAX_E_ACCESS);
	m.has_token = 1;
	m.token.data = (uint8_t *)"s3creT";
	m.token.len = 6;
	request(f, f->s, FRAME_HELLO, &m.base, 0, &out); /* wrong */
	expect(f->s, &out, DISPATCH_CLOSE, -RDAX_E_ACCESS);
	m.token.len = 5; /* a prefix */
	request(f, f->s, FRAME_HELLO, &m.base, 0, &out);
	expect(f->s, &out, DISPATCH_CLOSE, -RDAX_E_ACCESS);
	m.token.data = (uint8_t *)"s3cret\n"; /* the file's newline is not part of it */
	m.token.len = 7;
	request(f, f->s, FRAME_HELLO, &m.base, 0, &out);
	expect(f->s, &out, DISPATCH_CLOSE, -RDAX_E_ACCESS);
	assert_false(f->s->hello_done);
	m.token.len = 6;
	request(f, f->s, FRAME_HELLO, &m.base, 0, &out);
	finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, 0);
	assert_true(f->s->hello_done);
	f->env.token = NULL;
}

static void dispatch_token_equal__cases(void **state)
{
	const uint8_t a[] = "abcdef";
	assert_true(dispatch_token_equal(a, 6, (const uint8_t *)"abcdef", 6));
	assert_false(dispatch_token_equal(a, 6, (const uint8_t *)"abcdeF", 6));
	assert_false(dispatch_token_equal(a, 6, (const uint8_t *)"abcde", 5));
	assert_false(dispatch_token_equal(a, 6, (const uint8_t *)"abcdefg", 7));
	assert_false(dispatch_token_equal(a, 6, NULL, 0));
}

static void dispatch_request__undecodable_body(void **state)
{
	struct fixture *f = *state;
	hello(f, f->s);
	static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff};
	struct frame_header h = {.magic = FRAME_MAGIC,
				 .version = FRAME_VERSION,
				 .type = FRAME_VOLUME_OPEN,
				 .request_id = 42,
				 .body_len = sizeof(junk)};
	struct dispatch_out out;
	dispatch_request(&f->env, f->s, &h, junk, &out);
	assert_int_equal(out.reply.type, FRAME_VOLUME_OPEN | FRAME_REPLY);
	expect(f->s, &out, DISPATCH_CLOSE, -RDAX_E_PROTOCOL);
	/* a required field missing is undecodable too */
	h.body_len = 0;
	dispatch_request(&f->env, f->s, &h, NULL, &out);
	expect(f->s, &out, DISPATCH_CLOSE, -RDAX_E_PROTOCOL);
}

/* ---- volume metadata ---- */

static void dispatch_request__create_checks(void **state)
{
	struct fixture *f = *state;
	hello(f, f->s);
	create(f, "v", VOL_SIZE, 0);
	create(f, "v", VOL_SIZE, -EEXIST);
	create(f, "bad/name", 4096, -EINVAL);
	create(f, ".hidden", 4096, -EINVAL);
	create(f, "", 4096, -EINVAL);
	create(f, "w", 0, -EINVAL);
	create(f, "w", 4095, -EINVAL);
	create(f, "w", 1ULL << 40, -ENOSPC);

	Rdax__VolumeCreateRequest m = RDAX__VOLUME_CREATE_REQUEST__INIT;
	m.name = "w";
	m.size = 4096;
	m.has_namespace_id = 1;
	m.namespace_id = 3;
	struct dispatch_out out;
	request(f, f->s, FRAME_VOLUME_CREATE, &m.base, 0, &out);
	finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, -ENOENT);
	m.namespace_id = 0;
	request(f, f->s, FRAME_VOLUME_CREATE, &m.base, 0, &out);
	finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, 0);

	/* info and list see both */
	Rdax__VolumeInfoRequest im = RDAX__VOLUME_INFO_REQUEST__INIT;
	im.name = "w";
	request(f, f->s, FRAME_VOLUME_INFO, &im.base, 0, &out);
	finish_job(f, f->s, &out);
	Rdax__VolumeInfoReply *ir =
	    rdax__volume_info_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(ir);
	assert_string_equal(ir->volume->name, "w");
	assert_int_equal(ir->volume->size, 4096);
	rdax__volume_info_reply__free_unpacked(ir, NULL);
	done(f->s, &out);
	im.name = "nope";
	request(f, f->s, FRAME_VOLUME_INFO, &im.base, 0, &out);
	finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, -ENOENT);

	request(f, f->s, FRAME_VOLUME_LIST, NULL, 0, &out);
	finish_job(f, f->s, &out);
	Rdax__VolumeListReply *lr =
	    rdax__volume_list_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(lr);
	assert_int_equal(lr->n_volumes, 2);
	rdax__volume_list_reply__free_unpacked(lr, NULL);
	done(f->s, &out);
}

/* raw_named -- dispatch a request whose field 1 is @name_len raw bytes (NULs allowed) */
static void raw_named(struct fixture *f, uint16_t type, const char *name, size_t name_len,
		      uint64_t size, struct dispatch_out *out)
{
	uint8_t body[128];
	size_t n = 0;
	body[n++] = 0x0a; /* field 1, length-delimited */
	body[n++] = (uint8_t)name_len;
	memcpy(body + n, name, name_len);
	n += name_len;
	if (size) {
		body[n++] = 0x10; /* field 2, varint */
		uint64_t v = size;
		while (v >= 0x80) {
			body[n++] = (uint8_t)(v | 0x80);
			v >>= 7;
		}
		body[n++] = (uint8_t)v;
	}
	struct frame_header h = {
	    .magic = FRAME_MAGIC,
	    .version = FRAME_VERSION,
	    .type = type,
	    .request_id = f->next_id++,
	    .body_len = (uint32_t)n,
	};
	dispatch_request(&f->env, f->s, &h, body, out);
}

/*
 * A name with a NUL byte on the wire is refused, never cut at the NUL:
 * "v\0/../x" must not create "v", "v\0anything" must not delete or open "v".
 */
static void dispatch_request__name_with_nul_is_refused(void **state)
{
	struct fixture *f = *state;
	struct dispatch_out out;
	hello(f, f->s);

	static const char evil[] = "v\0/../x";
	raw_named(f, FRAME_VOLUME_CREATE, evil, sizeof(evil) - 1, VOL_SIZE, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EINVAL);
	Rdax__VolumeInfoRequest im = RDAX__VOLUME_INFO_REQUEST__INIT;
	im.name = "v";
	request(f, f->s, FRAME_VOLUME_INFO, &im.base, 0, &out);
	finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, -ENOENT); /* nothing was created */

	create(f, "v", VOL_SIZE, 0);
	static const char del[] = "v\0anything";
	raw_named(f, FRAME_VOLUME_DELETE, del, sizeof(del) - 1, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EINVAL);
	raw_named(f, FRAME_VOLUME_OPEN, del, sizeof(del) - 1, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EINVAL);
	raw_named(f, FRAME_VOLUME_INFO, del, sizeof(del) - 1, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EINVAL);
	request(f, f->s, FRAME_VOLUME_INFO, &im.base, 0, &out);
	finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, 0); /* "v" is still there */

	/* the same bytes without the NUL are an ordinary (refused) name */
	raw_named(f, FRAME_VOLUME_DELETE, "v/x", 3, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EINVAL);
	raw_named(f, FRAME_VOLUME_DELETE, "v", 1, 0, &out);
	finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, 0);
}

static void delete_req(struct fixture *f, const char *name, int code)
{
	Rdax__VolumeDeleteRequest m = RDAX__VOLUME_DELETE_REQUEST__INIT;
	m.name = (char *)name;
	struct dispatch_out out;
	request(f, f->s, FRAME_VOLUME_DELETE, &m.base, 0, &out);
	if (out.action == DISPATCH_JOB)
		finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, code);
}

static void close_req(struct fixture *f, uint32_t handle, int code)
{
	Rdax__VolumeCloseRequest m = RDAX__VOLUME_CLOSE_REQUEST__INIT;
	m.handle = handle;
	struct dispatch_out out;
	request(f, f->s, FRAME_VOLUME_CLOSE, &m.base, 0, &out);
	if (out.action == DISPATCH_JOB)
		finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, code);
}

static void dispatch_request__delete_open_volume_is_busy(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	delete_req(f, "v", -EBUSY);
	/* open on another connection only: still busy */
	struct session *other;
	assert_int_equal(session_new(f->store, "other", &other), 0);
	hello(f, other);
	uint32_t h2 = open_volume(f, other, "v");
	close_req(f, h, 0);
	delete_req(f, "v", -EBUSY);
	/* the other connection ends: its teardown closes the volume */
	(void)h2;
	struct dispatch_job *job = dispatch_teardown_job(&other);
	assert_null(other);
	assert_non_null(job);
	vol_op_run(&job->op);
	struct dispatch_out out;
	dispatch_job_finish(&f->env, NULL, job, &out);
	assert_int_equal(out.action, DISPATCH_NONE);
	delete_req(f, "v", 0);
	delete_req(f, "v", -ENOENT);
	delete_req(f, "no/such", -EINVAL);
}

/* ---- handles ---- */

static void dispatch_request__unknown_handle(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	struct dispatch_out out;
	read_req(f, f->s, h + 1, 0, 10, &out);
	expect(f->s, &out, DISPATCH_REPLY, -RDAX_E_NOT_OPEN);
	read_req(f, f->s, 0, 0, 10, &out);
	expect(f->s, &out, DISPATCH_REPLY, -RDAX_E_NOT_OPEN);
	read_req(f, f->s, h ^ 0x10000, 0, 10, &out); /* right slot, wrong generation */
	expect(f->s, &out, DISPATCH_REPLY, -RDAX_E_NOT_OPEN);
	Rdax__StatRequest sm = RDAX__STAT_REQUEST__INIT;
	sm.handle = 0xdeadbeef;
	request(f, f->s, FRAME_STAT, &sm.base, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -RDAX_E_NOT_OPEN);
	Rdax__FsyncRequest fm = RDAX__FSYNC_REQUEST__INIT;
	fm.handle = h + 7;
	request(f, f->s, FRAME_FSYNC, &fm.base, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -RDAX_E_NOT_OPEN);
	Rdax__DiscardRequest dm = RDAX__DISCARD_REQUEST__INIT;
	dm.handle = h + 7;
	dm.length = 4096;
	request(f, f->s, FRAME_DISCARD, &dm.base, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -RDAX_E_NOT_OPEN);
	close_req(f, h + 7, -RDAX_E_NOT_OPEN);

	/* a handle of another session is not valid here */
	struct session *other;
	assert_int_equal(session_new(f->store, "other", &other), 0);
	hello(f, other);
	read_req(f, other, h, 0, 10, &out);
	expect(other, &out, DISPATCH_REPLY, -RDAX_E_NOT_OPEN);
	session_delete(&other);

	/* closed: not valid any more, also not when the slot is reused */
	close_req(f, h, 0);
	read_req(f, f->s, h, 0, 10, &out);
	expect(f->s, &out, DISPATCH_REPLY, -RDAX_E_NOT_OPEN);
	uint32_t h2 = open_volume(f, f->s, "v");
	assert_int_not_equal(h2, h);
	read_req(f, f->s, h, 0, 10, &out);
	expect(f->s, &out, DISPATCH_REPLY, -RDAX_E_NOT_OPEN);
}

/* ---- ranges and limits ---- */

static void dispatch_request__read_checks(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	struct dispatch_out out;
	read_req(f, f->s, h, VOL_SIZE - 10, 11, &out);
	expect(f->s, &out, DISPATCH_REPLY, -ERANGE);
	read_req(f, f->s, h, VOL_SIZE, 1, &out);
	expect(f->s, &out, DISPATCH_REPLY, -ERANGE);
	read_req(f, f->s, h, UINT64_MAX - 5, 10, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EOVERFLOW);
	read_req(f, f->s, h, 0, (1U << 20) + 1, &out);
	expect(f->s, &out, DISPATCH_REPLY, -RDAX_E_TOO_BIG);
	read_req(f, f->s, h, 0, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EINVAL);
	/* the last byte and a whole max_payload are fine */
	read_req(f, f->s, h, VOL_SIZE - 1, 1, &out);
	expect(f->s, &out, DISPATCH_REPLY, 0);
	read_req(f, f->s, h, 0, 1U << 20, &out);
	assert_int_equal(out.reply.payload_len, 1U << 20);
	expect(f->s, &out, DISPATCH_REPLY, 0);
	assert_int_equal(session_holds(f->s), 0);
}

static void dispatch_request__write_checks(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	struct dispatch_out out;

	/* refused WRITEs: the error now, the payload to be read and dropped */
	write_req(f, h, VOL_SIZE - 100, 101, false, &out);
	assert_int_equal(out.action, DISPATCH_PAYLOAD);
	assert_null(out.payload_dst);
	assert_int_equal(out.payload_len, 101);
	assert_int_equal(reply_code(&out), ERANGE);
	done(f->s, &out);

	write_req(f, h, UINT64_MAX, 2, false, &out);
	assert_int_equal(out.action, DISPATCH_PAYLOAD);
	assert_null(out.payload_dst);
	assert_int_equal(reply_code(&out), EOVERFLOW);
	done(f->s, &out);

	write_req(f, h + 1, 0, 4096, false, &out);
	assert_int_equal(out.action, DISPATCH_PAYLOAD);
	assert_null(out.payload_dst);
	assert_int_equal(reply_code(&out), RDAX_E_NOT_OPEN);
	done(f->s, &out);

	/* no payload at all: a plain error reply */
	write_req(f, h, 0, 0, false, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EINVAL);
	assert_int_equal(session_holds(f->s), 0);
}

static void dispatch_request__write_lands_in_the_mapping(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	struct volume *v;
	assert_int_equal(session_handle_get(f->s, h, &v), 0);
	struct dispatch_out out;
	write_req(f, h, 12288, 5000, false, &out);
	assert_int_equal(out.action, DISPATCH_PAYLOAD);
	assert_ptr_equal(out.payload_dst, v->data + 12288);
	assert_int_equal(out.payload_len, 5000);
	assert_null(out.reply.body);
	assert_int_equal(session_holds(f->s), 1); /* held while the payload lands */
	memset(out.payload_dst, 0xab, 5000);
	struct dispatch_write w = out.write;
	dispatch_payload_done(&f->env, f->s, &w, &out);
	expect(f->s, &out, DISPATCH_REPLY, 0);
	assert_int_equal(session_holds(f->s), 0);

	/* marked dirty, so an fsync writes it back */
	struct volume_stats vs;
	volume_stats_get(v, &vs);
	assert_true(vs.dirty_bytes >= 5000);

	/* READ replies point into the mapping and hold the handle until released */
	read_req(f, f->s, h, 12288, 5000, &out);
	assert_int_equal(out.action, DISPATCH_REPLY);
	assert_ptr_equal(out.reply.payload, v->data + 12288);
	assert_int_equal(out.reply.payload_len, 5000);
	assert_int_equal(out.reply.payload[4999], 0xab);
	assert_int_equal(session_holds(f->s), 1);
	expect(f->s, &out, DISPATCH_REPLY, 0);
	assert_int_equal(session_holds(f->s), 0);

	/* FSYNC: an unordered job in the fsync pool, written_back in the reply */
	Rdax__FsyncRequest fm = RDAX__FSYNC_REQUEST__INIT;
	fm.handle = h;
	request(f, f->s, FRAME_FSYNC, &fm.base, 0, &out);
	assert_int_equal(out.action, DISPATCH_JOB);
	assert_false(out.job->ordered);
	assert_int_equal(vol_op_pool(&out.job->op), VOL_POOL_FSYNC);
	assert_null(out.job->mod_volume); /* an fsync changes no data */
	finish_job(f, f->s, &out);
	Rdax__FsyncReply *fr = rdax__fsync_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(fr);
	assert_int_equal(fr->status->code, 0);
	assert_true(fr->written_back >= 5000);
	rdax__fsync_reply__free_unpacked(fr, NULL);
	done(f->s, &out);
	volume_stats_get(v, &vs);
	assert_int_equal(vs.dirty_bytes, 0);
}

static void dispatch_payload_done__fsync_write(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	struct dispatch_out out;
	write_req(f, h, 0, 8192, true, &out);
	assert_int_equal(out.action, DISPATCH_PAYLOAD);
	memset(out.payload_dst, 1, 8192);
	struct dispatch_write w = out.write;
	dispatch_payload_done(&f->env, f->s, &w, &out);
	assert_int_equal(out.action, DISPATCH_JOB);
	assert_false(out.job->ordered);
	assert_int_equal(session_holds(f->s), 1); /* the job holds it now */
	finish_job(f, f->s, &out);
	assert_int_equal(out.reply.type, FRAME_WRITE | FRAME_REPLY);
	Rdax__WriteReply *r = rdax__write_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(r);
	assert_int_equal(r->status->code, 0);
	assert_true(r->has_written_back);
	assert_true(r->written_back >= 8192);
	rdax__write_reply__free_unpacked(r, NULL);
	done(f->s, &out);
	assert_int_equal(session_holds(f->s), 0);
}

static void dispatch_payload_abort__marks_what_landed(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	struct volume *v;
	assert_int_equal(session_handle_get(f->s, h, &v), 0);
	struct dispatch_out out;
	write_req(f, h, 0, 100000, false, &out);
	assert_int_equal(out.action, DISPATCH_PAYLOAD);
	memset(out.payload_dst, 7, 3000);
	dispatch_payload_abort(f->s, &out.write, 3000);
	assert_int_equal(session_holds(f->s), 0);
	struct volume_stats vs;
	volume_stats_get(v, &vs);
	assert_true(vs.dirty_bytes >= 3000);
	assert_true(vs.dirty_bytes < 100000);
}

static void dispatch_request__fsync_and_discard_ranges(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	struct dispatch_out out;
	Rdax__FsyncRequest fm = RDAX__FSYNC_REQUEST__INIT;
	fm.handle = h;
	fm.has_offset = 1;
	fm.offset = VOL_SIZE; /* length 0 from the end: nothing, but valid */
	request(f, f->s, FRAME_FSYNC, &fm.base, 0, &out);
	finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, 0);
	fm.offset = VOL_SIZE + 1;
	request(f, f->s, FRAME_FSYNC, &fm.base, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -ERANGE);
	fm.offset = 4096;
	fm.has_length = 1;
	fm.length = UINT64_MAX;
	request(f, f->s, FRAME_FSYNC, &fm.base, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EOVERFLOW);

	Rdax__DiscardRequest dm = RDAX__DISCARD_REQUEST__INIT;
	dm.handle = h;
	dm.offset = 0;
	dm.length = 0;
	request(f, f->s, FRAME_DISCARD, &dm.base, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EINVAL);
	dm.length = VOL_SIZE + 4096;
	request(f, f->s, FRAME_DISCARD, &dm.base, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -ERANGE);
	dm.length = 8192;
	request(f, f->s, FRAME_DISCARD, &dm.base, 0, &out);
	assert_int_equal(out.action, DISPATCH_JOB);
	assert_true(out.job->ordered); /* a later WRITE must land after the zeros */
	/* it changes data: the transport waits for READ replies over the range */
	assert_non_null(out.job->mod_volume);
	assert_int_equal(out.job->mod_offset, 0);
	assert_int_equal(out.job->mod_len, 8192);
	finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, 0);
	assert_int_equal(session_holds(f->s), 0);
}

static void dispatch_request__close_waits_for_holds(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	struct dispatch_out rd;
	read_req(f, f->s, h, 0, 4096, &rd); /* reply not sent yet */
	assert_int_equal(rd.action, DISPATCH_REPLY);
	close_req(f, h, 0); /* invalid at once ... */
	struct dispatch_out out;
	read_req(f, f->s, h, 0, 1, &out);
	expect(f->s, &out, DISPATCH_REPLY, -RDAX_E_NOT_OPEN);
	delete_req(f, "v", -EBUSY); /* ... but the volume stays open under the reply */
	assert_int_equal(rd.reply.payload[0], 0);
	done(f->s, &rd); /* the reply went out: the last hold closes it */
	delete_req(f, "v", 0);
}

static void dispatch_request__stat(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	Rdax__StatRequest m = RDAX__STAT_REQUEST__INIT;
	m.handle = h;
	struct dispatch_out out;
	request(f, f->s, FRAME_STAT, &m.base, 0, &out);
	assert_int_equal(out.action, DISPATCH_REPLY);
	Rdax__StatReply *r = rdax__stat_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(r);
	assert_int_equal(r->size, VOL_SIZE);
	assert_int_equal(r->dirty_bytes, 0);
	rdax__stat_reply__free_unpacked(r, NULL);
	done(f->s, &out);
}

static void dispatch_request__error_reply_decodes_as_every_reply_type(void **state)
{
	struct fixture *f = *state;
	struct dispatch_out out;
	request(f, f->s, FRAME_STAT, NULL, 0, &out); /* before hello: an error reply */
	const ProtobufCMessageDescriptor *replies[] = {
	    &rdax__hello_reply__descriptor,	  &rdax__status_reply__descriptor,
	    &rdax__volume_list_reply__descriptor, &rdax__volume_info_reply__descriptor,
	    &rdax__volume_open_reply__descriptor, &rdax__write_reply__descriptor,
	    &rdax__read_reply__descriptor,	  &rdax__fsync_reply__descriptor,
	    &rdax__stat_reply__descriptor,
	};
	for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		ProtobufCMessage *m =
		    protobuf_c_message_unpack(replies[i], NULL, out.reply.body_len, out.reply.body);
		assert_non_null(m);
		/* every reply type has the Status as its first member */
		Rdax__Status *st = ((Rdax__StatusReply *)m)->status;
		assert_int_equal(st->code, RDAX_E_PROTOCOL);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	done(f->s, &out);
}

static void dispatch_request__hammer_flush_mode(void **state)
{
	struct fixture *f = *state;
	uint32_t h = ready(f);
	f->env.flush_mode = FLUSH_HAMMER;
	Rdax__FsyncRequest fm = RDAX__FSYNC_REQUEST__INIT;
	fm.handle = h;
	struct dispatch_out out;
	request(f, f->s, FRAME_FSYNC, &fm.base, 0, &out);
	finish_job(f, f->s, &out);
	Rdax__FsyncReply *fr = rdax__fsync_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(fr);
	/* nothing was written, yet the hammer writes back the whole volume */
	assert_int_equal(fr->written_back, VOL_SIZE);
	rdax__fsync_reply__free_unpacked(fr, NULL);
	done(f->s, &out);
	f->env.flush_mode = FLUSH_TRACKED;
	request(f, f->s, FRAME_FSYNC, &fm.base, 0, &out);
	finish_job(f, f->s, &out);
	fr = rdax__fsync_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_int_equal(fr->written_back, 0);
	rdax__fsync_reply__free_unpacked(fr, NULL);
	done(f->s, &out);
}

/*
 * dispatch_request__powercut_refused -- HELLO reports an incarnation and no
 * power cuts; a POWERCUT on this daemon (no powercut_setup) is refused with
 * EPERM naming the flag, a delay beyond a day with EINVAL, one before HELLO
 * closes the connection; the connection goes on after a refusal
 */
static void dispatch_request__powercut_refused(void **state)
{
	struct fixture *f = *state;
	incarnation_new();
	Rdax__PowercutRequest pm = RDAX__POWERCUT_REQUEST__INIT;
	struct dispatch_out out;
	request(f, f->s, FRAME_POWERCUT, &pm.base, 0, &out);
	expect(f->s, &out, DISPATCH_CLOSE, -RDAX_E_PROTOCOL); /* before HELLO */

	Rdax__HelloRequest hm = RDAX__HELLO_REQUEST__INIT;
	hm.protocol_version = FRAME_VERSION;
	request(f, f->s, FRAME_HELLO, &hm.base, 0, &out);
	finish_job(f, f->s, &out);
	assert_int_equal(out.action, DISPATCH_REPLY);
	Rdax__HelloReply *hr = rdax__hello_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(hr);
	assert_true(hr->has_incarnation);
	assert_int_equal(hr->incarnation, incarnation_get());
	assert_int_not_equal(hr->incarnation, 0);
	assert_true(hr->has_powercut_allowed);
	assert_false(hr->powercut_allowed);
	rdax__hello_reply__free_unpacked(hr, NULL);
	done(f->s, &out);

	request(f, f->s, FRAME_POWERCUT, &pm.base, 0, &out);
	expect_msg(f->s, &out, EPERM, "--allow-powercut");

	pm.has_delay_ms = 1;
	pm.delay_ms = POWERCUT_MAX_DELAY_MS + 1;
	request(f, f->s, FRAME_POWERCUT, &pm.base, 0, &out);
	expect(f->s, &out, DISPATCH_REPLY, -EINVAL);
	/* the gate is open: nothing is pending after the refusals */
	assert_false(powercut_pending());
	assert_true(powercut_ack_take());
	request(f, f->s, FRAME_VOLUME_LIST, NULL, 0, &out);
	finish_job(f, f->s, &out);
	expect(f->s, &out, DISPATCH_REPLY, 0);
}

/*
 * clear_req -- UNSAFE_CLEAR @m: the reply's code, and with @rep (may be
 * NULL) the unpacked reply of a success (freed by the caller)
 */
static int clear_req(struct fixture *f, Rdax__UnsafeClearRequest *m, Rdax__UnsafeClearReply **rep)
{
	struct dispatch_out out;
	request(f, f->s, FRAME_UNSAFE_CLEAR, &m->base, 0, &out);
	if (out.action == DISPATCH_JOB)
		finish_job(f, f->s, &out);
	assert_int_equal(out.action, DISPATCH_REPLY);
	int code = (int)reply_code(&out);
	if (code == 0 && rep) {
		*rep = rdax__unsafe_clear_reply__unpack(NULL, out.reply.body_len, out.reply.body);
		assert_non_null(*rep);
	}
	done(f->s, &out);
	return code;
}

/* mark_all -- namespace 0 and its volumes marked, as media_health_open() marks them */
static void mark_all(struct fixture *f)
{
	struct ns *ns = store_namespace(f->store, 0);
	struct vt_shutdown sds = {.usc = 1, .flags = VT_SDS_KNOWN | VT_SDS_UNSAFE};
	assert_int_equal(vol_table_shutdown_set(ns->table, &sds, true), 0);
	media_health_mark_set(&ns->health, true);
}

/*
 * dispatch_request__unsafe_clear -- UNSAFE_CLEAR names exactly one target
 * (EINVAL otherwise), an unknown volume or namespace is ENOENT, an unmarked
 * one a success naming nothing; a volume's clear reports that volume, a
 * namespace's (by path or id) its own mark and the rest of its volumes, and
 * the namespace's health follows
 */
static void dispatch_request__unsafe_clear(void **state)
{
	struct fixture *f = *state;
	hello(f, f->s);
	create(f, "v", VOL_SIZE, 0);
	create(f, "w", VOL_SIZE, 0);
	Rdax__UnsafeClearReply *r;
	Rdax__UnsafeClearRequest m = RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	assert_int_equal(clear_req(f, &m, NULL), EINVAL); /* no target */
	m.volume = "v";
	m.has_namespace_id = 1;
	assert_int_equal(clear_req(f, &m, NULL), EINVAL); /* two */
	m = (Rdax__UnsafeClearRequest)RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	m.volume = "a/b";
	assert_int_equal(clear_req(f, &m, NULL), EINVAL);
	m.volume = "nope";
	assert_int_equal(clear_req(f, &m, NULL), ENOENT);
	m = (Rdax__UnsafeClearRequest)RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	m.has_namespace_id = 1;
	m.namespace_id = 1;
	assert_int_equal(clear_req(f, &m, NULL), ENOENT);
	m = (Rdax__UnsafeClearRequest)RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	m.namespace_path = "/no/such/ns";
	assert_int_equal(clear_req(f, &m, NULL), ENOENT);

	m = (Rdax__UnsafeClearRequest)RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	m.volume = "v";
	assert_int_equal(clear_req(f, &m, &r), 0); /* not marked: nothing */
	assert_int_equal(r->namespace_id, 0);
	assert_false(r->namespace_cleared);
	assert_int_equal(r->n_cleared_volumes, 0);
	rdax__unsafe_clear_reply__free_unpacked(r, NULL);

	mark_all(f);
	assert_int_equal(clear_req(f, &m, &r), 0);
	assert_false(r->namespace_cleared);
	assert_int_equal(r->n_cleared_volumes, 1);
	assert_string_equal(r->cleared_volumes[0], "v");
	rdax__unsafe_clear_reply__free_unpacked(r, NULL);
	struct media_health_info mh;
	media_health_get(&store_namespace(f->store, 0)->health, &mh);
	assert_true(mh.unsafe_shutdown); /* a volume's clear leaves the namespace's mark */

	m = (Rdax__UnsafeClearRequest)RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	m.namespace_path = f->path;
	assert_int_equal(clear_req(f, &m, &r), 0);
	assert_true(r->namespace_cleared);
	assert_int_equal(r->n_cleared_volumes, 1);
	assert_string_equal(r->cleared_volumes[0], "w");
	rdax__unsafe_clear_reply__free_unpacked(r, NULL);
	media_health_get(&store_namespace(f->store, 0)->health, &mh);
	assert_false(mh.unsafe_shutdown);
	m = (Rdax__UnsafeClearRequest)RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	m.has_namespace_id = 1;
	assert_int_equal(clear_req(f, &m, &r), 0); /* by id, nothing left */
	assert_false(r->namespace_cleared);
	assert_int_equal(r->n_cleared_volumes, 0);
	rdax__unsafe_clear_reply__free_unpacked(r, NULL);
}

/* acl_with -- an --acl file of @text, loaded as the fixture's */
static struct acl *acl_with(struct fixture *f, const char *text)
{
	char path[300], err[256];
	snprintf(path, sizeof(path), "%s/acl", f->dir);
	FILE *file = fopen(path, "w");
	assert_non_null(file);
	fputs(text, file);
	fclose(file);
	struct acl *acl;
	assert_int_equal(acl_load(path, &acl, err, sizeof(err)), 0);
	unlink(path);
	f->env.acl = acl;
	return acl;
}

/*
 * dispatch_request__unsafe_clear_rights -- a volume's mark needs the create
 * right on it (a volume the client cannot see does not exist for it), a
 * namespace's the create right on every name (a rule for "*"); a refused
 * clear leaves the mark, and the access-error message says what is missing
 */
static void dispatch_request__unsafe_clear_rights(void **state)
{
	struct fixture *f = *state;
	hello(f, f->s);
	create(f, "v", VOL_SIZE, 0);
	create(f, "w", VOL_SIZE, 0);
	create(f, "x", VOL_SIZE, 0);
	mark_all(f);
	struct acl *acl = acl_with(f, "* v rw,create\n* w rw\n");
	Rdax__UnsafeClearRequest m = RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	m.volume = "w";
	assert_int_equal(clear_req(f, &m, NULL), RDAX_E_ACCESS);
	m.volume = "x"; /* invisible to this client */
	assert_int_equal(clear_req(f, &m, NULL), ENOENT);
	m.volume = "v";
	assert_int_equal(clear_req(f, &m, NULL), 0);
	m = (Rdax__UnsafeClearRequest)RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	m.has_namespace_id = 1;
	struct dispatch_out out;
	request(f, f->s, FRAME_UNSAFE_CLEAR, &m.base, 0, &out);
	expect_msg(f->s, &out, RDAX_E_ACCESS, "a rule for \"*\"");
	struct volume_info vi;
	assert_int_equal(store_volume_info(f->store, "w", &vi), 0);
	assert_true(vi.unsafe_shutdown); /* refused: the marks stay */
	acl_delete(&acl);

	acl = acl_with(f, "* * create\n");
	Rdax__UnsafeClearReply *r;
	assert_int_equal(clear_req(f, &m, &r), 0);
	assert_true(r->namespace_cleared);
	assert_int_equal(r->n_cleared_volumes, 2); /* w and x: v was cleared before */
	rdax__unsafe_clear_reply__free_unpacked(r, NULL);
	f->env.acl = NULL;
	acl_delete(&acl);
}

int main(void)
{
	if (!getenv("RDAX_TEST_LOG"))
		log_set_level(LOG_LEVEL_ERROR);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(dispatch_header__checks, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__hello_must_come_first, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__hello_reply, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__hello_wrong_version, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__hello_token, setup, teardown),
	    cmocka_unit_test(dispatch_token_equal__cases),
	    cmocka_unit_test_setup_teardown(dispatch_request__undecodable_body, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__create_checks, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__name_with_nul_is_refused, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__delete_open_volume_is_busy, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__unknown_handle, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__read_checks, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__write_checks, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__write_lands_in_the_mapping, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(dispatch_payload_done__fsync_write, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_payload_abort__marks_what_landed, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__fsync_and_discard_ranges, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__close_waits_for_holds, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__stat, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		dispatch_request__error_reply_decodes_as_every_reply_type, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__hammer_flush_mode, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__powercut_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__unsafe_clear, setup, teardown),
	    cmocka_unit_test_setup_teardown(dispatch_request__unsafe_clear_rights, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
