/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_native_requests.c -- a whole native connection's requests through rdaxd's dispatcher
 *
 * Input: the bytes a client sends on one connection -- frame headers,
 * protobuf-c bodies, WRITE payloads -- taken exactly as native_conn.c takes
 * them: dispatch_header() on 32 bytes, dispatch_request() on the body,
 * payloads received into the destination dispatch names (or dropped),
 * dispatch_payload_done() / dispatch_payload_abort() at their end, every job
 * run as its pool would (vol_op_run, then dispatch_job_finish), and the
 * connection's teardown at the end of the input. The store behind it is real:
 * one small namespace in the power-fail simulator's mode, in a temporary
 * directory, kept across inputs; inputs of even length run without an
 * access token, odd ones against a daemon that needs one.
 *
 * Checked beyond the sanitizers: every reply echoes its request's id and
 * decodes as a StatusReply (a message with every error); a WRITE's
 * destination and a READ reply's data lie inside the volume the handle
 * names (never another volume's bytes, never outside the mapping); a
 * connection closed by the daemon takes no further request; after the
 * teardown no volume is left open or held (every volume the input created
 * can be deleted at once), so the next input starts from an empty
 * namespace.
 */
#include "fuzz.h"

#include <errno.h>
#include <unistd.h>

#include "dispatch.h"
#include "frame.h"
#include "log.h"
#include "rdax.pb-c.h"
#include "session.h"
#include "store.h"

/* Small enough that creating a volume (zeroed, written back) stays cheap. */
#define FUZZ_NS_SIZE (8ULL << 20)
#define FUZZ_TOKEN   "fuzz-token-0123456789"

static const char *const transports[] = {"tcp"};
static struct store *store;
static char dir[256], path[300];

/* cleanup -- remove the namespace file at exit */
static void cleanup(void)
{
	store_delete(&store);
	unlink(path);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_log_init();
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/rdax-fuzz-native-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/ns0", dir);
	char err[256];
	if (store_new(&store) ||
	    store_namespace_add(store, path, FUZZ_NS_SIZE, PERSIST_SIM, err, sizeof(err))) {
		fprintf(stderr, "fuzz_native_requests: set-up: %s\n", err);
		exit(1);
	}
	atexit(cleanup);
	return 0;
}

/* check_reply -- a reply to request @id: its id, a status body, data only inside its volume */
static void check_reply(const struct dispatch_reply *r, uint64_t id)
{
	FUZZ_CHECK(r->request_id == id);
	if (!r->body)
		return;
	Rdax__StatusReply *st = rdax__status_reply__unpack(NULL, r->body_len, r->body);
	FUZZ_CHECK(st && st->status);
	FUZZ_CHECK(st->status->code == 0 || st->status->message);
	rdax__status_reply__free_unpacked(st, NULL);
	if (r->payload_len) {
		const struct volume *v = r->volume;
		FUZZ_CHECK(v && r->payload >= v->data);
		FUZZ_CHECK(r->offset + r->payload_len <= v->size);
		FUZZ_CHECK(r->payload + r->payload_len <= v->data + v->size);
		/* "send" it: every byte of the reply's range is read */
		volatile uint8_t sum = 0;
		for (uint32_t i = 0; i < r->payload_len; i += 512)
			sum ^= r->payload[i];
		(void)sum;
	}
}

/* conn -- the harness's connection */
struct conn {
	const struct dispatch_env *env;
	struct session *s;
	struct fuzz_in in;
	uint64_t id;
	bool closed;
};

static void handle_out(struct conn *c, struct dispatch_out *out);

/* run_job -- what a pool does with a job, then its completion on the connection's thread */
static void run_job(struct conn *c, struct dispatch_job *job)
{
	struct dispatch_out out;
	vol_op_run(&job->op);
	dispatch_job_finish(c->env, c->s, job, &out);
	FUZZ_CHECK(out.action == DISPATCH_REPLY || out.action == DISPATCH_CLOSE);
	handle_out(c, &out);
}

/* payload -- receive an accepted WRITE's payload into its destination, or drop a refused one */
static void payload(struct conn *c, struct dispatch_out *out)
{
	struct dispatch_write w = out->write;
	uint32_t len = out->payload_len;
	size_t got = c->in.left < len ? c->in.left : len;
	const uint8_t *src = fuzz_take(&c->in, got);
	/* refused: the reply (sent now) says why; the bytes are read and dropped */
	FUZZ_CHECK(out->payload_dst || out->reply.body);
	if (out->reply.body)
		check_reply(&out->reply, c->id);
	dispatch_reply_release(c->s, &out->reply);
	if (!out->payload_dst) {
		if (got < len)
			c->closed = true;
		return;
	}
	FUZZ_CHECK(w.v && w.len == len && w.request_id == c->id);
	FUZZ_CHECK(out->payload_dst == w.v->data + w.offset);
	FUZZ_CHECK(w.offset + len <= w.v->size);
	memcpy(out->payload_dst, src, got);
	if (got < len) {
		dispatch_payload_abort(c->s, &out->write, (uint32_t)got);
		c->closed = true;
		return;
	}
	struct dispatch_out done;
	dispatch_payload_done(c->env, c->s, &out->write, &done);
	handle_out(c, &done);
}

/* handle_out -- what native_conn.c's handle_out does, with the checks */
static void handle_out(struct conn *c, struct dispatch_out *out)
{
	switch (out->action) {
	case DISPATCH_NONE:
		return;
	case DISPATCH_REPLY:
		check_reply(&out->reply, c->id);
		dispatch_reply_release(c->s, &out->reply);
		return;
	case DISPATCH_CLOSE:
		if (out->reply.body)
			check_reply(&out->reply, c->id);
		dispatch_reply_release(c->s, &out->reply);
		c->closed = true;
		return;
	case DISPATCH_PAYLOAD:
		payload(c, out);
		return;
	case DISPATCH_JOB:
		run_job(c, out->job);
		return;
	case DISPATCH_DROP:
		/* only after a power cut was decided (vol_ack.h): none is, here */
		FUZZ_CHECK(!"DISPATCH_DROP without a power cut");
		c->closed = true;
		return;
	}
	FUZZ_CHECK(!"unknown dispatch action");
}

/* teardown -- the end of the connection: its volumes closed as native_end() does */
static void teardown(struct conn *c)
{
	if (c->s && c->s->nopen > 0) {
		struct dispatch_job *job = dispatch_teardown_job(&c->s);
		FUZZ_CHECK(c->s == NULL);
		if (job) {
			struct dispatch_out out;
			vol_op_run(&job->op);
			dispatch_job_finish(c->env, NULL, job, &out);
			FUZZ_CHECK(out.action == DISPATCH_NONE);
		}
	}
	session_delete(&c->s);
}

/* reset -- delete every volume: each must be closed and free of holds by now */
static void reset(void)
{
	struct volume_info *vols = NULL;
	unsigned n = 0;
	FUZZ_CHECK(store_volume_list(store, &vols, &n) == 0);
	for (unsigned i = 0; i < n; i++)
		FUZZ_CHECK(store_volume_delete(store, vols[i].name) == 0);
	free(vols);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct dispatch_env env = {
	    .store = store,
	    .max_payload = 1U << 20,
	    .max_body = FRAME_DEFAULT_MAX_BODY,
	    .token = (size & 1) ? (const uint8_t *)FUZZ_TOKEN : NULL,
	    .token_len = (size & 1) ? strlen(FUZZ_TOKEN) : 0,
	    .flush_mode = FLUSH_TRACKED,
	    .server_version = "fuzz",
	    .transports = transports,
	    .ntransports = 1,
	};
	struct conn c = {.env = &env, .in = {data, size}};
	FUZZ_CHECK(session_new(store, "fuzz", &c.s) == 0);

	while (!c.closed) {
		const uint8_t *raw = fuzz_take(&c.in, FRAME_HEADER_SIZE);
		if (!raw)
			break;
		struct frame_header h;
		struct dispatch_out out;
		if (dispatch_header(&env, raw, &h, &out)) {
			c.id = h.request_id;
			FUZZ_CHECK(out.action == DISPATCH_CLOSE);
			handle_out(&c, &out);
			break;
		}
		c.id = h.request_id;
		const uint8_t *body = fuzz_take(&c.in, h.body_len);
		if (!body)
			break; /* the connection ended inside the body */
		dispatch_request(&env, c.s, &h, body, &out);
		handle_out(&c, &out);
	}
	teardown(&c);
	reset();
	return 0;
}
