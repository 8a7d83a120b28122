/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fsync_inline.c -- small range fsyncs on the connection's loop
 *
 * fsync_range_try() must never wait for another fsync of the volume (it
 * says -EBUSY, having changed nothing), and must make durable exactly what
 * fsync_range() would. vol_op_fsync_try_inline() is the one place that
 * decides which fsyncs a loop runs itself (a short range, or any range
 * while the volume's dirty set is small); vol_op_try_inline() is how the
 * native protocol's durable WRITE and FSYNC reach it.
 *
 * Every test runs on a SIM-mode namespace: the namespace file holds exactly
 * what was written back, so pread() of it shows what an fsync made durable.
 * The control: with the skip_writeback fault on, the same checks must find
 * the data missing from the file.
 *
 * "Another fsync holds the lock" is a state, not a timing: a thread runs
 * fsync_range() and stops in its before_fence hook (the lock held) until
 * the test releases it; the thread reports that it has arrived through a
 * condition variable.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#include "dirty_tree.h"
#include "dispatch.h"
#include "errors.h"
#include "faults.h"
#include "frame.h"
#include "fsync.h"
#include "rdax.pb-c.h"
#include "session.h"
#include "store.h"
#include "volume.h"
#include "fsync_pattern.h"
#include "tmpdir.h"

#define NS_SIZE	 (64ULL << 20)
#define VOL_SIZE (8ULL << 20)
#define PAGE	 RDAX_PAGE_SIZE

static const char *const transports[] = {"tcp"};

struct fx {
	char dir[200];
	char path[256];
	struct store *store;
	struct volume *v;
	int fd; /* read-only: what is in the persistence domain */
	struct dispatch_env env;
	struct session *s;
	uint32_t handle;
	uint64_t next_id;
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "test-fsync-inline");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	char err[256];
	assert_int_equal(store_new(&fx->store), 0);
	assert_int_equal(
	    store_namespace_add(fx->store, fx->path, NS_SIZE, PERSIST_SIM, err, sizeof(err)), 0);
	assert_int_equal(store_volume_create(fx->store, "v", VOL_SIZE, NULL, NULL, NULL, 0), 0);
	assert_int_equal(store_volume_open(fx->store, "v", &fx->v), 0);
	fx->fd = open(fx->path, O_RDONLY);
	assert_true(fx->fd >= 0);
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
	struct volume *again;
	assert_int_equal(store_volume_open(fx->store, "v", &again), 0);
	assert_int_equal(session_handle_add(fx->s, again, &fx->handle), 0);
	fx->next_id = 1;
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	fsync_set_test_hooks(NULL);
	session_delete(&fx->s);
	close(fx->fd);
	store_volume_close(fx->store, &fx->v);
	store_delete(&fx->store);
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

static bool page_dirty(struct fx *fx, uint64_t page)
{
	return dtree_get_mark(fx->v->tree, page, DTREE_DIRTY);
}

/* ---- another fsync holding the volume's fsync lock ---- */

struct holder {
	struct fx *fx;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool inside;  /* the holder stopped before its fence, fsync_lock held */
	bool release; /* the test lets it go on */
	int ret;
};

/* holder_stop -- before_fence hook: say "inside", wait for the release */
static void holder_stop(struct volume *v, void *arg)
{
	struct holder *h = arg;
	pthread_mutex_lock(&h->lock);
	h->inside = true;
	pthread_cond_broadcast(&h->cond);
	while (!h->release)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
}

static void *holder_main(void *arg)
{
	struct holder *h = arg;
	h->ret = fsync_range(h->fx->v, 0, 0, FLUSH_TRACKED, NULL);
	return NULL;
}

/* holder_start -- another thread runs a whole-volume fsync and stops holding the lock */
static void holder_start(struct fx *fx, struct holder *h)
{
	memset(h, 0, sizeof(*h));
	h->fx = fx;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->cond, NULL);
	struct fsync_test_hooks hooks = {.before_fence = holder_stop, .arg = h};
	fsync_set_test_hooks(&hooks);
	assert_int_equal(pthread_create(&h->thread, NULL, holder_main, h), 0);
	pthread_mutex_lock(&h->lock);
	while (!h->inside)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
}

/* holder_finish -- let the holder fence and return; hooks cleared */
static void holder_finish(struct holder *h)
{
	pthread_mutex_lock(&h->lock);
	h->release = true;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	assert_int_equal(pthread_join(h->thread, NULL), 0);
	assert_int_equal(h->ret, 0);
	fsync_set_test_hooks(NULL);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->lock);
}

/* ---- fsync_range_try ---- */

static void fsync_range_try__free_lock_writes_back(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 3 * PAGE, PAGE, 1), 0);
	assert_int_equal(pattern_write(fx->v, 9 * PAGE, PAGE, 2), 0);
	uint64_t written = 0;
	assert_int_equal(fsync_range_try(fx->v, 3 * PAGE, PAGE, FLUSH_DEFAULT, &written), 0);
	assert_int_equal(written, PAGE);
	assert_true(pattern_durable(fx->fd, fx->v, 3 * PAGE, PAGE, 1));
	assert_false(page_dirty(fx, 3));
	/* outside the range: untouched */
	assert_true(page_dirty(fx, 9));
	assert_false(pattern_durable(fx->fd, fx->v, 9 * PAGE, PAGE, 2));
}

static void fsync_range_try__busy_while_another_fsync_runs(void **state)
{
	struct fx *fx = *state;
	struct holder h;
	holder_start(fx, &h); /* the volume is clean: it holds the lock, claims nothing */
	assert_int_equal(pattern_write(fx->v, 5 * PAGE, PAGE, 3), 0);
	uint64_t written = 77;
	assert_int_equal(fsync_range_try(fx->v, 5 * PAGE, PAGE, FLUSH_DEFAULT, &written), -EBUSY);
	/* nothing done: still dirty, not in the file, counters untouched */
	assert_int_equal(written, 77);
	assert_true(page_dirty(fx, 5));
	assert_false(pattern_durable(fx->fd, fx->v, 5 * PAGE, PAGE, 3));
	uint64_t fsyncs = atomic_load(&fx->v->fsyncs);
	holder_finish(&h);
	assert_int_equal(atomic_load(&fx->v->fsyncs), fsyncs + 1); /* the holder's */

	/* the lock is free again: the same call now writes it back */
	assert_int_equal(fsync_range_try(fx->v, 5 * PAGE, PAGE, FLUSH_DEFAULT, &written), 0);
	assert_true(pattern_durable(fx->fd, fx->v, 5 * PAGE, PAGE, 3));
}

/* the control: a missing write-back must be seen by the check above */
static void fsync_range_try__control_skip_writeback_loses_data(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 7 * PAGE, PAGE, 4), 0);
	rdax_faults.skip_writeback = true;
	assert_int_equal(fsync_range_try(fx->v, 7 * PAGE, PAGE, FLUSH_DEFAULT, NULL), 0);
	rdax_faults.skip_writeback = false;
	assert_false(pattern_durable(fx->fd, fx->v, 7 * PAGE, PAGE, 4)); /* lost */
}

static void fsync_range_try__bad_input_changes_nothing(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 0, PAGE, 5), 0);
	assert_int_equal(fsync_range_try(NULL, 0, PAGE, FLUSH_DEFAULT, NULL), -EINVAL);
	assert_int_equal(fsync_range_try(fx->v, 0, PAGE, (enum flush_mode)42, NULL), -EINVAL);
	assert_int_equal(fsync_range_try(fx->v, VOL_SIZE, PAGE, FLUSH_DEFAULT, NULL), -ERANGE);
	assert_int_equal(fsync_range_try(fx->v, UINT64_MAX, 2, FLUSH_DEFAULT, NULL), -EOVERFLOW);
	assert_true(page_dirty(fx, 0));
	assert_false(pattern_durable(fx->fd, fx->v, 0, PAGE, 5));
}

/* ---- vol_op_fsync_try_inline: which fsyncs a loop runs itself ---- */

static void vol_op_fsync_try_inline__small_range_runs(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 100, VOL_OP_INLINE_MAX, 6),
			 0); /* unaligned: 17 pages */
	int code = 1;
	uint64_t written = 0;
	assert_true(
	    vol_op_fsync_try_inline(fx->v, 100, VOL_OP_INLINE_MAX, FLUSH_DEFAULT, &code, &written));
	assert_int_equal(code, 0);
	/* the written lines: 100 is not a line boundary, so one line more than the bytes */
	assert_int_equal(written, VOL_OP_INLINE_MAX + DTREE_LINE_SIZE);
	assert_true(pattern_durable(fx->fd, fx->v, 100, VOL_OP_INLINE_MAX, 6));
}

static void vol_op_fsync_try_inline__refuses_what_belongs_in_the_pool(void **state)
{
	struct fx *fx = *state;
	int code = 12345;
	assert_int_equal(pattern_write(fx->v, 0, 2 * VOL_OP_INLINE_MAX, 7), 0);
	/*
	 * more than the limit dirty: to the end of the volume, longer than the
	 * limit; hammer asked or configured
	 */
	assert_false(vol_op_fsync_try_inline(fx->v, 0, 0, FLUSH_DEFAULT, &code, NULL));
	assert_false(
	    vol_op_fsync_try_inline(fx->v, 0, VOL_OP_INLINE_MAX + 1, FLUSH_DEFAULT, &code, NULL));
	assert_false(vol_op_fsync_try_inline(fx->v, 0, PAGE, FLUSH_HAMMER, &code, NULL));
	assert_int_equal(volume_set_flush_mode(fx->v, FLUSH_HAMMER), 0);
	assert_false(vol_op_fsync_try_inline(fx->v, 0, PAGE, FLUSH_DEFAULT, &code, NULL));
	assert_int_equal(volume_set_flush_mode(fx->v, FLUSH_TRACKED), 0);
	assert_false(vol_op_fsync_try_inline(NULL, 0, PAGE, FLUSH_DEFAULT, &code, NULL));

	/* contended: another fsync holds the lock */
	struct holder h;
	holder_start(fx, &h);
	assert_false(vol_op_fsync_try_inline(fx->v, 0, PAGE, FLUSH_DEFAULT, &code, NULL));
	holder_finish(&h); /* it wrote back everything, as a pool fsync would */
	assert_int_equal(code, 12345);
	assert_true(pattern_durable(fx->fd, fx->v, 0, 2 * VOL_OP_INLINE_MAX, 7));
}

/* sparse_write -- @len bytes of pattern @seed at each of @n places @stride bytes apart from @off */
static void sparse_write(struct fx *fx, uint64_t off, uint64_t stride, unsigned n, uint64_t len,
			 unsigned seed)
{
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(pattern_write(fx->v, off + i * stride, len, seed + i), 0);
}

static bool sparse_durable(struct fx *fx, uint64_t off, uint64_t stride, unsigned n, uint64_t len,
			   unsigned seed)
{
	for (unsigned i = 0; i < n; i++)
		if (!pattern_durable(fx->fd, fx->v, off + i * stride, len, seed + i))
			return false;
	return true;
}

/*
 * A whole-volume fsync (NBD's FLUSH, an FSYNC to the end) or any long range
 * runs on the loop while the volume's dirty set is small: at most
 * VOL_OP_INLINE_MAX bytes in at most FSYNC_CLAIM_BATCH entries. It writes
 * back exactly the written lines, wherever they are.
 */
static void vol_op_fsync_try_inline__whole_volume_small_dirty_set_runs(void **state)
{
	struct fx *fx = *state;
	int code = 1;
	uint64_t written = 0;
	/* 64 B in 10 pages spread over the volume, and exactly the limit in one run */
	sparse_write(fx, 3 * PAGE + 128, VOL_SIZE / 16, 10, 64, 20);
	assert_true(vol_op_fsync_try_inline(fx->v, 0, 0, FLUSH_DEFAULT, &code, &written));
	assert_int_equal(code, 0);
	assert_int_equal(written, 10 * 64);
	assert_true(sparse_durable(fx, 3 * PAGE + 128, VOL_SIZE / 16, 10, 64, 20));

	assert_int_equal(pattern_write(fx->v, 64 * PAGE, VOL_OP_INLINE_MAX, 31), 0);
	assert_true(vol_op_fsync_try_inline(fx->v, 0, VOL_SIZE, FLUSH_DEFAULT, &code, &written));
	assert_int_equal(code, 0);
	assert_int_equal(written, VOL_OP_INLINE_MAX);
	assert_true(pattern_durable(fx->fd, fx->v, 64 * PAGE, VOL_OP_INLINE_MAX, 31));
	assert_false(page_dirty(fx, 64));
}

/* the bounds of "small": one line more than the limit, or one entry more than a claim batch */
static void vol_op_fsync_try_inline__whole_volume_large_dirty_set_refused(void **state)
{
	struct fx *fx = *state;
	int code = 12345;
	assert_int_equal(pattern_write(fx->v, 64 * PAGE, VOL_OP_INLINE_MAX + DTREE_LINE_SIZE, 32),
			 0);
	assert_false(vol_op_fsync_try_inline(fx->v, 0, 0, FLUSH_DEFAULT, &code, NULL));
	assert_int_equal(fsync_range(fx->v, 0, 0, FLUSH_DEFAULT, NULL), 0);

	/* 65 entries of one line each: 4,160 bytes, but more entries than one pass */
	sparse_write(fx, 0, 2 * PAGE, FSYNC_CLAIM_BATCH + 1, 64, 40);
	assert_false(vol_op_fsync_try_inline(fx->v, 0, 0, FLUSH_DEFAULT, &code, NULL));
	assert_false(
	    vol_op_fsync_try_inline(fx->v, 0, VOL_OP_INLINE_MAX + 1, FLUSH_DEFAULT, &code, NULL));
	assert_int_equal(code, 12345);
	assert_true(page_dirty(fx, 0)); /* nothing was done */
	assert_false(sparse_durable(fx, 0, 2 * PAGE, 1, 64, 40));
	/* one entry fewer: taken */
	assert_int_equal(fsync_range(fx->v, 0, 2 * PAGE, FLUSH_DEFAULT, NULL), 0);
	assert_true(vol_op_fsync_try_inline(fx->v, 0, 0, FLUSH_DEFAULT, &code, NULL));
	assert_int_equal(code, 0);
	assert_true(sparse_durable(fx, 0, 2 * PAGE, FSYNC_CLAIM_BATCH + 1, 64, 40));
}

/* the control: an inline whole-volume fsync with skip_writeback must lose data */
static void vol_op_fsync_try_inline__whole_volume_control_skip_writeback(void **state)
{
	struct fx *fx = *state;
	int code = 1;
	sparse_write(fx, 5 * PAGE, 7 * PAGE, 1, 64, 50);
	rdax_faults.skip_writeback = true;
	assert_true(vol_op_fsync_try_inline(fx->v, 0, 0, FLUSH_DEFAULT, &code, NULL));
	assert_int_equal(code, 0);
	assert_false(sparse_durable(fx, 5 * PAGE, 7 * PAGE, 1, 64, 50)); /* lost */
}

/* ---- the native protocol: vol_op_try_inline ---- */

/* request -- dispatch one request message with @payload_len */
static void request(struct fx *fx, uint16_t type, const ProtobufCMessage *m, uint32_t payload_len,
		    struct dispatch_out *out)
{
	uint8_t body[256];
	size_t n = protobuf_c_message_pack(m, body);
	struct frame_header h = {
	    .magic = FRAME_MAGIC,
	    .version = FRAME_VERSION,
	    .type = type,
	    .request_id = fx->next_id++,
	    .body_len = (uint32_t)n,
	    .payload_len = payload_len,
	};
	dispatch_request(&fx->env, fx->s, &h, body, out);
}

/*
 * durable_write -- a WRITE with fsync of pattern_fill(@seed) at [off, off + len) as
 * a connection does it; returns whether its fsync ran inline (the job was
 * taken by vol_op_try_inline), having run it in place of the pool
 * otherwise. The reply must be a success with @len's pages written back.
 */
static bool durable_write(struct fx *fx, uint64_t off, uint32_t len, unsigned seed)
{
	Rdax__WriteRequest w = RDAX__WRITE_REQUEST__INIT;
	w.handle = fx->handle;
	w.offset = off;
	w.has_fsync = 1;
	w.fsync = 1;
	struct dispatch_out out;
	request(fx, FRAME_WRITE, &w.base, len, &out);
	assert_int_equal(out.action, DISPATCH_PAYLOAD);
	assert_non_null(out.payload_dst);
	pattern_fill(out.payload_dst, len, seed);
	struct dispatch_write pw = out.write;
	dispatch_payload_done(&fx->env, fx->s, &pw, &out);
	assert_int_equal(out.action, DISPATCH_JOB);
	struct dispatch_job *job = out.job;
	assert_false(job->ordered); /* durable writes never hold later requests back */
	bool inline_run = vol_op_try_inline(&job->op);
	if (!inline_run)
		vol_op_run(&job->op); /* what the pool would do */
	dispatch_job_finish(&fx->env, fx->s, job, &out);
	assert_int_equal(out.action, DISPATCH_REPLY);
	Rdax__WriteReply *r = rdax__write_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(r);
	assert_int_equal(r->status->code, 0);
	assert_true(r->has_written_back);
	assert_true(r->written_back >= len);
	rdax__write_reply__free_unpacked(r, NULL);
	dispatch_reply_release(fx->s, &out.reply);
	assert_int_equal(session_holds(fx->s), 0);
	return inline_run;
}

static void vol_op_try_inline__durable_write_runs_inline(void **state)
{
	struct fx *fx = *state;
	assert_true(durable_write(fx, 12 * PAGE, PAGE, 8));
	assert_true(pattern_durable(fx->fd, fx->v, 12 * PAGE, PAGE, 8));
	assert_false(page_dirty(fx, 12));
	/* larger than the limit: the pool's */
	assert_false(durable_write(fx, 1 << 20, 1 << 20, 9));
	assert_true(pattern_durable(fx->fd, fx->v, 1 << 20, 1 << 20, 9));
}

/* the control for the native path: the same write and check, a write-back skipped */
static void vol_op_try_inline__control_skip_writeback_loses_data(void **state)
{
	struct fx *fx = *state;
	rdax_faults.skip_writeback = true;
	assert_true(durable_write(fx, 20 * PAGE, PAGE, 10));
	rdax_faults.skip_writeback = false;
	assert_false(pattern_durable(fx->fd, fx->v, 20 * PAGE, PAGE, 10)); /* lost */
}

/* fsync_req -- an FSYNC request of [off, off + len); returns its job */
static struct dispatch_job *fsync_req(struct fx *fx, uint64_t off, uint64_t len)
{
	Rdax__FsyncRequest f = RDAX__FSYNC_REQUEST__INIT;
	f.handle = fx->handle;
	f.has_offset = f.has_length = 1;
	f.offset = off;
	f.length = len;
	struct dispatch_out out;
	request(fx, FRAME_FSYNC, &f.base, 0, &out);
	assert_int_equal(out.action, DISPATCH_JOB);
	return out.job;
}

/* fsync_finish -- finish an FSYNC job; returns written_back of its success reply */
static uint64_t fsync_finish(struct fx *fx, struct dispatch_job *job)
{
	struct dispatch_out out;
	dispatch_job_finish(&fx->env, fx->s, job, &out);
	assert_int_equal(out.action, DISPATCH_REPLY);
	Rdax__FsyncReply *r = rdax__fsync_reply__unpack(NULL, out.reply.body_len, out.reply.body);
	assert_non_null(r);
	assert_int_equal(r->status->code, 0);
	uint64_t written = r->written_back;
	rdax__fsync_reply__free_unpacked(r, NULL);
	dispatch_reply_release(fx->s, &out.reply);
	return written;
}

static void vol_op_try_inline__fsync_range_inline_whole_volume_by_dirty_set(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(pattern_write(fx->v, 30 * PAGE, PAGE, 11), 0);
	struct dispatch_job *job = fsync_req(fx, 30 * PAGE, PAGE);
	assert_true(vol_op_try_inline(&job->op));
	assert_int_equal(fsync_finish(fx, job), PAGE);
	assert_true(pattern_durable(fx->fd, fx->v, 30 * PAGE, PAGE, 11));

	/* length 0 (to the end) is a whole-volume fsync: inline while little is dirty */
	assert_int_equal(pattern_write(fx->v, 31 * PAGE, PAGE, 12), 0);
	job = fsync_req(fx, 0, 0);
	assert_true(vol_op_try_inline(&job->op));
	assert_int_equal(fsync_finish(fx, job), PAGE);
	assert_true(pattern_durable(fx->fd, fx->v, 31 * PAGE, PAGE, 12));

	/* ... and in the pool when more is */
	assert_int_equal(pattern_write(fx->v, 40 * PAGE, 2 * VOL_OP_INLINE_MAX, 14), 0);
	job = fsync_req(fx, 0, 0);
	assert_false(vol_op_try_inline(&job->op));
	assert_true(page_dirty(fx, 40)); /* untouched until the pool runs it */
	vol_op_run(&job->op);
	assert_int_equal(fsync_finish(fx, job), 2 * VOL_OP_INLINE_MAX);
	assert_true(pattern_durable(fx->fd, fx->v, 40 * PAGE, 2 * VOL_OP_INLINE_MAX, 14));

	/* contended: the job goes to the pool, which waits for the other fsync */
	assert_int_equal(pattern_write(fx->v, 32 * PAGE, PAGE, 13), 0);
	job = fsync_req(fx, 32 * PAGE, PAGE);
	struct holder h;
	holder_start(fx, &h);
	assert_false(vol_op_try_inline(&job->op));
	holder_finish(&h);
	vol_op_run(&job->op);
	fsync_finish(fx, job);
	assert_true(pattern_durable(fx->fd, fx->v, 32 * PAGE, PAGE, 13));
	assert_int_equal(session_holds(fx->s), 0);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(fsync_range_try__free_lock_writes_back),
	    T(fsync_range_try__busy_while_another_fsync_runs),
	    T(fsync_range_try__control_skip_writeback_loses_data),
	    T(fsync_range_try__bad_input_changes_nothing),
	    T(vol_op_fsync_try_inline__small_range_runs),
	    T(vol_op_fsync_try_inline__refuses_what_belongs_in_the_pool),
	    T(vol_op_fsync_try_inline__whole_volume_small_dirty_set_runs),
	    T(vol_op_fsync_try_inline__whole_volume_large_dirty_set_refused),
	    T(vol_op_fsync_try_inline__whole_volume_control_skip_writeback),
	    T(vol_op_try_inline__durable_write_runs_inline),
	    T(vol_op_try_inline__control_skip_writeback_loses_data),
	    T(vol_op_try_inline__fsync_range_inline_whole_volume_by_dirty_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
