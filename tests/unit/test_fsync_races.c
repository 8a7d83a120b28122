/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fsync_races.c -- the four fsync races of docs/architecture.md, made deterministic
 *
 * Each test holds fsync A at a known step with the fsync test hooks
 * (fsync.h), lets another thread act, then releases A and checks the state:
 *  1. two fsyncs of one volume: B must not return while A holds entries it
 *     has claimed but not written back;        control: no_fsync_serialise
 *  2. a write landing while its entry is being cleaned must end up DIRTY
 *     (or written back);                        control: clear_after_writeback
 *  3. a discard of a range an fsync holds must wait for it, and its zeros
 *     must be what is durable afterwards;       no control exists (below)
 *  4. a 2 MiB write converting TOWRITE small entries into a huge entry: the
 *     small writes, done before the fsync began, are durable when it
 *     returns;                                  control: no_towrite_inherit
 *
 * fsync has two paths (fsync.c): one pass (claim without tagging) for a
 * range with at most FSYNC_CLAIM_BATCH dirty entries, and the batched walk
 * (tag, then claim) for more. Races 1-3 run on both: as written (a few
 * entries: the one-pass path) and again with the batched_only test hook
 * ("(batched)" in the test name). Race 4 needs a pause between tagging and
 * claiming, which only the batched walk has: it runs with batched_only, and
 * again with more entries than one claim batch so the walk is batched by
 * itself (its first tags then come from dtree_claim_dirty()). Its
 * counterpart on the one-pass path, a conversion while the fsync holds the
 * claimed small entries, is race 4b: the conversion must wait for them.
 *
 * How "the other thread is waiting" is decided without timing:
 *  - for fsync B, the before_wait hook: fsync_range() calls it just before
 *    it blocks on the volume's fsync lock, so "B waits" is a state we see;
 *  - for a thread blocked inside the dirty tree (a discard or write waiting
 *    for an entry lock), dtree_waiters(): while A is held, nobody else can
 *    be waiting in the tree.
 * The main thread waits, without a time limit that could decide the result,
 * until the other thread is either finished or seen waiting while A is
 * held. Finishing while A is held is the failure; a slow machine only makes
 * the wait longer. (A safety deadline of 60 s fails the test, never passes
 * it.)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "checked.h"
#include "dirty_tree.h"
#include "faults.h"
#include "fsync.h"
#include "log.h"
#include "namespace.h"
#include "volume.h"
#include "fsync_pattern.h"
#include "volfx.h"

#define NS_SIZE		  (32ULL << 20)
#define VOL_SIZE	  (16ULL << 20)
#define PAGE		  RDAX_PAGE_SIZE
#define PMD		  RDAX_PMD_SIZE
#define SAFETY_DEADLINE_S 60

static int fx_setup(void **state)
{
	*state = volfx_new("test-races", NS_SIZE, VOL_SIZE, 3);
	return 0;
}

/* set by the "(batched)" variants' setup: every race of the test walks in batches */
static bool batched_variant;

/* fx_setup_batched -- fx_setup() for the "(batched)" variants of a test */
static int fx_setup_batched(void **state)
{
	batched_variant = true;
	return fx_setup(state);
}

static void race_end_current(void);

static int fx_teardown(void **state)
{
	/* a failed check left a scenario running: release A, join its threads */
	race_end_current();
	batched_variant = false;
	/* whatever a race did, the tree must be whole afterwards */
	assert_int_equal(volfx_delete(*state), 0);
	return 0;
}

static bool page_dirty(struct volfx *fx, uint64_t page)
{
	return dtree_get_mark(fx->v->tree, page, DTREE_DIRTY);
}

/* ---- holding fsync A at one step ---------------------------------------- */

enum pause_at { PAUSE_AFTER_TAG, PAUSE_AFTER_CLAIM, PAUSE_AFTER_WRITEBACK };

struct race;

/* the racing operation, run in a thread of its own */
struct actor {
	void (*fn)(struct actor *);
	struct volfx *fx;
	uint64_t off, len;
	const uint8_t *buf;
	int ret;
	atomic_bool done;
	/* A was still held when the operation returned */
	bool done_while_a_held;
	struct race *race;
};

/* fsync B of race 1 */
struct b_state {
	uint64_t written;
	int ret;
	bool returned_while_a_held;
	bool durable_at_return;
	uint64_t check_off, check_len;
	unsigned check_seed;
};

/*
 * One scenario: fsync A (a thread of its own) is held at @pause_at until the
 * main thread releases it; another thread (an actor, or fsync B) races it.
 * It lives in static storage, not on a test's stack, so that when a check
 * fails (cmocka jumps out of the test) the teardown can still release A and
 * join the threads instead of hanging behind a held fsync.
 */
struct race {
	bool active;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct volfx *fx;
	enum pause_at pause_at;
	bool batched_only; /* fsync A (and B) skip the one-pass path */
	uint64_t a_off, a_len;
	pthread_t a_thread, other_thread;
	bool a_started, other_started;
	/* under mu */
	bool a_paused; /* A is inside the hook (and stays until a_release) */
	bool a_tagged; /* A ran after_tag: it walks in batches */
	bool a_release;
	bool b_waiting;	 /* B called before_wait */
	bool b_returned; /* fsync B returned */
	struct dtree_item claimed[FSYNC_CLAIM_BATCH];
	unsigned nclaimed;
	/* results */
	int a_ret;
	uint64_t a_written;
	atomic_bool a_done;
	atomic_bool a_held; /* A is paused: set before a_paused, cleared on release */
	struct actor actor;
	struct b_state b;
};

static struct race the_race;

/* the thread running fsync A; hooks act only there */
static _Thread_local bool thread_is_a;

/* race_begin -- a fresh scenario: A will fsync [off, off + len) and stop at @at */
static struct race *race_begin(struct volfx *fx, enum pause_at at, uint64_t off, uint64_t len)
{
	struct race *r = &the_race;
	memset(r, 0, sizeof(*r));
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&r->mu, NULL);
	r->fx = fx;
	r->pause_at = at;
	r->a_off = off;
	r->a_len = len;
	atomic_init(&r->a_done, false);
	atomic_init(&r->a_held, false);
	r->actor.race = r;
	r->actor.fx = fx;
	atomic_init(&r->actor.done, false);
	r->batched_only = batched_variant;
	r->active = true;
	return r;
}

/*
 * race_release_a -- let A go on and wait for it to return. Safe to call
 * more than once, and when A never started.
 */
static void race_release_a(struct race *r)
{
	pthread_mutex_lock(&r->mu);
	r->a_release = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (r->a_started) {
		pthread_join(r->a_thread, NULL);
		r->a_started = false;
	}
	fsync_set_test_hooks(NULL);
}

/* race_join_other -- wait for the racing thread (A must be released first) */
static void race_join_other(struct race *r)
{
	if (r->other_started) {
		pthread_join(r->other_thread, NULL);
		r->other_started = false;
	}
}

/* race_end -- release and join everything, free the scenario (teardown too) */
static void race_end(struct race *r)
{
	if (!r->active)
		return;
	race_release_a(r);
	race_join_other(r);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	r->active = false;
}

static void race_end_current(void)
{
	race_end(&the_race);
}

static struct timespec deadline_in(int seconds)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += seconds;
	return ts;
}

/* race_wait -- wait on r->cv (mu held); false when the safety deadline passed */
static bool race_wait(struct race *r, const struct timespec *deadline)
{
	return pthread_cond_timedwait(&r->cv, &r->mu, deadline) != ETIMEDOUT;
}

/* hold_a -- the pause: A stays here until the main thread releases it */
static void hold_a(struct race *r, const struct dtree_item *items, unsigned n)
{
	pthread_mutex_lock(&r->mu);
	if (!r->a_paused) {
		for (unsigned i = 0; i < n && i < FSYNC_CLAIM_BATCH; i++)
			r->claimed[i] = items[i];
		r->nclaimed = n;
		atomic_store(&r->a_held, true);
		r->a_paused = true;
		pthread_cond_broadcast(&r->cv);
		/* no deadline: the main thread, or the teardown, always releases */
		while (!r->a_release)
			pthread_cond_wait(&r->cv, &r->mu);
		atomic_store(&r->a_held, false);
	}
	pthread_mutex_unlock(&r->mu);
}

static void hook_after_tag(struct volume *v, void *arg)
{
	struct race *r = arg;
	if (!thread_is_a)
		return;
	pthread_mutex_lock(&r->mu);
	r->a_tagged = true;
	pthread_mutex_unlock(&r->mu);
	if (r->pause_at == PAUSE_AFTER_TAG)
		hold_a(r, NULL, 0);
}

static void hook_after_claim(struct volume *v, const struct dtree_item *items, unsigned n,
			     void *arg)
{
	struct race *r = arg;
	if (thread_is_a && r->pause_at == PAUSE_AFTER_CLAIM)
		hold_a(r, items, n);
}

static void hook_after_writeback(struct volume *v, const struct dtree_item *items, unsigned n,
				 void *arg)
{
	struct race *r = arg;
	if (thread_is_a && r->pause_at == PAUSE_AFTER_WRITEBACK)
		hold_a(r, items, n);
}

static void hook_before_wait(struct volume *v, void *arg)
{
	struct race *r = arg;
	if (thread_is_a)
		return;
	pthread_mutex_lock(&r->mu);
	r->b_waiting = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void *thread_fsync_a(void *arg)
{
	struct race *r = arg;
	thread_is_a = true;
	r->a_ret = fsync_range(r->fx->v, r->a_off, r->a_len, FLUSH_TRACKED, &r->a_written);
	atomic_store(&r->a_done, true);
	pthread_mutex_lock(&r->mu);
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* race_start_a -- run fsync A in a thread and wait until it is held */
static void race_start_a(struct race *r)
{
	struct fsync_test_hooks hooks = {
	    .after_tag = hook_after_tag,
	    .after_claim = hook_after_claim,
	    .arg = r,
	    .after_writeback = hook_after_writeback,
	    .before_wait = hook_before_wait,
	    .batched_only = r->batched_only,
	};
	fsync_set_test_hooks(&hooks);
	assert_int_equal(pthread_create(&r->a_thread, NULL, thread_fsync_a, r), 0);
	r->a_started = true;
	struct timespec dl = deadline_in(SAFETY_DEADLINE_S);
	pthread_mutex_lock(&r->mu);
	bool ok = true;
	while (!r->a_paused && !atomic_load(&r->a_done) && ok)
		ok = race_wait(r, &dl);
	bool paused = r->a_paused;
	bool tagged = r->a_tagged;
	pthread_mutex_unlock(&r->mu);
	if (!paused)
		fail_msg("fsync A never reached its pause point (nothing to claim?)");
	/* the path under test is the one taken: tagging happens on the batched walk only */
	if (r->batched_only)
		assert_true(tagged);
	else if (r->pause_at != PAUSE_AFTER_TAG)
		assert_false(tagged);
}

/* ---- an actor thread, and whether it waits in the tree ------------------- */

static void *actor_main(void *arg)
{
	struct actor *ac = arg;
	ac->fn(ac);
	ac->done_while_a_held = atomic_load(&ac->race->a_held);
	atomic_store(&ac->done, true);
	return NULL;
}

/*
 * actor_run_until_done_or_blocked -- start r->actor (fn and arguments set)
 * and return once it has either finished or is seen waiting in the volume's
 * dirty tree with its work not finished. Returns true if it finished.
 * Polling only looks at state; how long it takes never changes the answer.
 */
static bool actor_run_until_done_or_blocked(struct race *r)
{
	struct actor *ac = &r->actor;
	assert_int_equal(pthread_create(&r->other_thread, NULL, actor_main, ac), 0);
	r->other_started = true;
	time_t start = time(NULL);
	for (;;) {
		if (atomic_load(&ac->done))
			return true;
		if (dtree_waiters(ac->fx->v->tree) > 0)
			return atomic_load(&ac->done);
		if (time(NULL) - start > SAFETY_DEADLINE_S)
			fail_msg("actor neither finished nor blocked within %d s",
				 SAFETY_DEADLINE_S);
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
}

static void act_write(struct actor *ac)
{
	ac->ret = volume_write(ac->fx->v, ac->off, ac->buf, ac->len);
}

static void act_discard(struct actor *ac)
{
	ac->ret = volume_discard(ac->fx->v, ac->off, ac->len);
}

/* ---- race 1: two fsyncs of one volume ------------------------------------ */

static void *thread_fsync_b(void *arg)
{
	struct race *r = arg;
	struct b_state *b = &r->b;
	b->ret = fsync_range(r->fx->v, 0, 0, FLUSH_TRACKED, &b->written);
	/* what B acknowledges must be durable now, whatever A is doing */
	b->durable_at_return =
	    pattern_durable(r->fx->fd, r->fx->v, b->check_off, b->check_len, b->check_seed);
	b->returned_while_a_held = atomic_load(&r->a_held);
	pthread_mutex_lock(&r->mu);
	r->b_returned = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

struct two_fsyncs_result {
	bool b_waited; /* B called before_wait while A was held */
	bool b_returned_while_a_held;
	bool b_durable_at_return;
	uint64_t a_written, b_written;
};

/*
 * run_two_fsyncs -- A claims the dirty pages and is held before writing
 * them back; B fsyncs the same volume. The main thread waits until B
 * either announces that it waits for the fsync lock (before_wait) or
 * returns; both wake it, so no time limit decides which. Then A is
 * released. B's thread records, at its return, whether A was still held
 * and whether the data was in the file.
 */
static void run_two_fsyncs(struct volfx *fx, struct two_fsyncs_result *res)
{
	assert_int_equal(pattern_write(fx->v, PAGE, 3 * PAGE, 41), 0);
	struct race *r = race_begin(fx, PAUSE_AFTER_CLAIM, 0, 0);
	r->b = (struct b_state){.check_off = PAGE, .check_len = 3 * PAGE, .check_seed = 41};
	race_start_a(r);
	assert_int_equal(r->nclaimed, 3);
	assert_int_equal(pthread_create(&r->other_thread, NULL, thread_fsync_b, r), 0);
	r->other_started = true;

	struct timespec dl = deadline_in(SAFETY_DEADLINE_S);
	bool ok = true;
	pthread_mutex_lock(&r->mu);
	while (!r->b_waiting && !r->b_returned && ok)
		ok = race_wait(r, &dl);
	res->b_waited = r->b_waiting;
	pthread_mutex_unlock(&r->mu);
	if (!ok)
		fail_msg("fsync B neither waited nor returned within %d s", SAFETY_DEADLINE_S);

	race_release_a(r);
	race_join_other(r);
	assert_int_equal(r->a_ret, 0);
	assert_int_equal(r->b.ret, 0);
	res->b_returned_while_a_held = r->b.returned_while_a_held;
	res->b_durable_at_return = r->b.durable_at_return;
	res->a_written = r->a_written;
	res->b_written = r->b.written;
	race_end(r);
}

static void fsync_range__concurrent_fsync_waits_for_claimed_writeback(void **state)
{
	struct two_fsyncs_result res;
	run_two_fsyncs(*state, &res);
	assert_true(res.b_waited);
	assert_false(res.b_returned_while_a_held);
	assert_true(res.b_durable_at_return);
	assert_int_equal(res.a_written, 3 * PAGE);
	assert_int_equal(res.b_written, 0); /* A wrote it all back before B looked */
}

/* control: without the per-volume lock B acknowledges what A has not written back */
static void fsync_range__concurrent_fsync_control_no_serialise(void **state)
{
	struct two_fsyncs_result res;
	rdax_faults.no_fsync_serialise = true;
	run_two_fsyncs(*state, &res);
	rdax_faults.no_fsync_serialise = false;
	assert_false(res.b_waited);
	assert_true(res.b_returned_while_a_held);
	assert_false(res.b_durable_at_return); /* the check catches the loss */
	assert_int_equal(res.b_written, 0);
}

/* ---- race 2: a write landing while its entry is cleaned ------------------ */

struct write_during_result {
	bool write_done_while_a_held;
	bool dirty_after;      /* the page is DIRTY after A returned */
	bool new_data_durable; /* ... or its new data is in the file */
	bool durable_after_next_fsync;
	uint64_t a_written, next_written; /* bytes A and the next fsync wrote back */
};

/*
 * What is written: bytes [0, first_len) of page 4 before A, then bytes
 * [new_off, new_off + new_len) of it while A holds the page (seed: of the
 * new bytes).
 */
struct write_shape {
	uint64_t first_len, new_off, new_len;
	unsigned seed;
};

/* the page test: the whole page, then 100 bytes inside it */
static const struct write_shape shape_page = {PAGE, 200, 100, 52};

/*
 * run_write_during -- page 4 is dirty (@shape); A claims it and is held at
 * @at (before or after its write-back); a write to page 4 lands; A is
 * released. The write must end up DIRTY or written back, never neither.
 */
static void run_write_during(struct volfx *fx, enum pause_at at, const struct write_shape *shape,
			     struct write_during_result *res)
{
	const uint64_t page = 4;
	static uint8_t newdata[PAGE];
	const uint64_t first_lines = (shape->first_len + DTREE_LINE_SIZE - 1) / DTREE_LINE_SIZE;
	pattern_fill(newdata, shape->new_len, shape->seed);

	assert_int_equal(pattern_write(fx->v, page * PAGE, shape->first_len, 51), 0);
	struct race *r = race_begin(fx, at, 0, 0);
	race_start_a(r);
	assert_int_equal(r->nclaimed, 1);
	assert_int_equal(r->claimed[0].index, page);
	/* A took the lines written before it, and only those */
	assert_int_equal(r->claimed[0].lines,
			 first_lines == 64 ? DTREE_LINES_ALL : (1ULL << first_lines) - 1);

	r->actor.fn = act_write;
	r->actor.off = page * PAGE + shape->new_off;
	r->actor.len = shape->new_len;
	r->actor.buf = newdata;
	/* either outcome is allowed here: a write may wait for the entry lock or not */
	actor_run_until_done_or_blocked(r);
	race_release_a(r);
	race_join_other(r);
	assert_int_equal(r->a_ret, 0);
	assert_int_equal(r->actor.ret, 0);

	res->write_done_while_a_held = r->actor.done_while_a_held;
	res->a_written = r->a_written;
	res->dirty_after = page_dirty(fx, page);
	res->new_data_durable = pattern_durable(fx->fd, fx->v, page * PAGE + shape->new_off,
						shape->new_len, shape->seed);
	assert_int_equal(fsync_range(fx->v, 0, 0, FLUSH_TRACKED, &res->next_written), 0);
	res->durable_after_next_fsync = pattern_durable(fx->fd, fx->v, page * PAGE + shape->new_off,
							shape->new_len, shape->seed);
	race_end(r);
}

/* run_write_during_clean -- run_write_during() of the page test */
static void run_write_during_clean(struct volfx *fx, enum pause_at at, struct write_during_result *res)
{
	run_write_during(fx, at, &shape_page, res);
	assert_int_equal(res->a_written, PAGE);
}

/*
 * Written back already, not yet released: the write's bytes are not in the
 * file, so only DIRTY can save them.
 */
static void fsync_range__write_after_writeback_stays_dirty(void **state)
{
	struct write_during_result res;
	run_write_during_clean(*state, PAUSE_AFTER_WRITEBACK, &res);
	assert_true(res.write_done_while_a_held); /* the scenario really raced */
	assert_false(res.new_data_durable);
	assert_true(res.dirty_after || res.new_data_durable);
	assert_true(res.durable_after_next_fsync);
}

static void fsync_range__write_after_writeback_control_clear_after_writeback(void **state)
{
	struct write_during_result res;
	rdax_faults.clear_after_writeback = true;
	run_write_during_clean(*state, PAUSE_AFTER_WRITEBACK, &res);
	rdax_faults.clear_after_writeback = false;
	assert_true(res.write_done_while_a_held);
	assert_false(res.dirty_after || res.new_data_durable); /* caught: neither */
	assert_false(res.durable_after_next_fsync);	       /* and lost for good */
}

/*
 * Claimed, not yet written back: in this test the write-back copies the new
 * bytes too, but a real write (an RDMA write) can land during the
 * write-back, so the design promises DIRTY, and that is what is checked.
 */
static void fsync_range__write_after_claim_stays_dirty(void **state)
{
	struct write_during_result res;
	run_write_during_clean(*state, PAUSE_AFTER_CLAIM, &res);
	assert_true(res.write_done_while_a_held);
	assert_true(res.dirty_after);
	assert_true(res.durable_after_next_fsync);
}

static void fsync_range__write_after_claim_control_clear_after_writeback(void **state)
{
	struct write_during_result res;
	rdax_faults.clear_after_writeback = true;
	run_write_during_clean(*state, PAUSE_AFTER_CLAIM, &res);
	rdax_faults.clear_after_writeback = false;
	assert_true(res.write_done_while_a_held);
	assert_false(res.dirty_after); /* caught: the mark the design promises is gone */
}

/*
 * Race 2 per line: page 4 has line 0 written; A claims it (taking line 0
 * alone) and is held; a write lands in line 10 of the same page. Line 10
 * is in no mask A took, so A never writes it back: it must end up in the
 * page's new mask, DIRTY, and the next fsync must write back that line and
 * only it. @at: where A is held; the new bytes differ per round.
 */
static void run_line_write_during_clean(struct volfx *fx, enum pause_at at,
					struct write_during_result *res)
{
	const struct write_shape shape = {DTREE_LINE_SIZE, 10 * DTREE_LINE_SIZE, DTREE_LINE_SIZE,
					  54 + (unsigned)at};
	run_write_during(fx, at, &shape, res);
	assert_true(pattern_durable(fx->fd, fx->v, 4 * PAGE, DTREE_LINE_SIZE, 51));
}

static void fsync_range__line_write_during_clean_stays_dirty(void **state)
{
	for (int at = PAUSE_AFTER_CLAIM; at <= PAUSE_AFTER_WRITEBACK; at++) {
		struct write_during_result res;
		run_line_write_during_clean(*state, (enum pause_at)at, &res);
		assert_true(res.write_done_while_a_held); /* a mark never waits for a claim */
		assert_int_equal(res.a_written, DTREE_LINE_SIZE); /* line 0 alone */
		assert_false(res.new_data_durable);		  /* A never wrote line 10 back */
		assert_true(res.dirty_after);
		assert_int_equal(res.next_written, DTREE_LINE_SIZE); /* line 10 alone */
		assert_true(res.durable_after_next_fsync);
	}
}

/* control: with DIRTY cleared on release, line 10 is neither DIRTY nor written back */
static void fsync_range__line_write_during_clean_control_clear_after_writeback(void **state)
{
	struct write_during_result res;
	rdax_faults.clear_after_writeback = true;
	run_line_write_during_clean(*state, PAUSE_AFTER_CLAIM, &res);
	rdax_faults.clear_after_writeback = false;
	assert_true(res.write_done_while_a_held);
	assert_false(res.dirty_after || res.new_data_durable); /* caught: neither */
	assert_false(res.durable_after_next_fsync);	       /* and lost for good */
}

/* ---- race 3: discard during fsync ---------------------------------------- */

/*
 * What the wait prevents: were dtree_remove_range() not to wait for the
 * entries an fsync holds locked, the discard would drop entries A is about
 * to write back and release. A's release would then act on entries no longer
 * in the tree (freed nodes: a use-after-free ASan reports, or the removal of
 * an entry a later write created), and A's write-back of the old data could
 * reach the persistence domain after the discard's zeros, so the discarded
 * data would come back after a power cut.
 *
 * No switch in faults.h disables that wait, so these tests have no control:
 * they check the state (the discard is waiting in the tree, not finished,
 * while A holds the entries; afterwards zeros read back and are durable,
 * and the tree is consistent) and rely on ASan for the memory errors. That
 * they can fail was checked once by hand, not by a switch: with the wait
 * taken out of dtree_remove_range(), both fail (the discard finishes while
 * A is held, and A's release no longer finds the entries it claimed).
 */
static void run_discard_during_fsync(struct volfx *fx, uint64_t off, uint64_t len, bool huge)
{
	if (huge)
		assert_int_equal(pattern_write(fx->v, off, len, 61), 0);
	else
		for (uint64_t p = 0; p < len / PAGE; p++)
			assert_int_equal(
			    pattern_write(fx->v, off + p * PAGE, PAGE, 61 + (unsigned)p), 0);
	assert_int_equal(pattern_write(fx->v, off + len + 8 * PAGE, 10, 70),
			 0); /* outside: stays dirty */

	struct race *r = race_begin(fx, PAUSE_AFTER_CLAIM, off, len);
	race_start_a(r);
	assert_int_equal(r->nclaimed, huge ? 1 : len / PAGE);
	assert_int_equal(r->claimed[0].index, off / PAGE);

	r->actor.fn = act_discard;
	r->actor.off = off;
	r->actor.len = len;
	bool done = actor_run_until_done_or_blocked(r);
	/* the discard must not finish while A holds the entries */
	assert_false(done);
	race_release_a(r);
	race_join_other(r);
	assert_int_equal(r->a_ret, 0);
	assert_int_equal(r->actor.ret, 0);
	assert_false(r->actor.done_while_a_held);
	assert_int_equal(r->a_written, len);
	race_end(r);

	/* reads zeros, and the zeros are what is durable */
	uint8_t *buf = malloc(len), *zero = calloc(1, len);
	assert_non_null(buf);
	assert_non_null(zero);
	assert_int_equal(volume_read(fx->v, off, buf, len), 0);
	assert_memory_equal(buf, zero, len);
	assert_true(volfx_durable_zero(fx, off, len));
	free(buf);
	free(zero);

	/* the tree: nothing in the range, the page outside still dirty */
	for (uint64_t p = off / PAGE; p < (off + len) / PAGE; p++) {
		uint64_t first, entry;
		assert_int_equal(dtree_lookup(fx->v->tree, p, &first, &entry), -ENOENT);
	}
	struct volume_stats st;
	volume_stats_get(fx->v, &st);
	assert_int_equal(st.entries[DTREE_SIZE_4K], 1);
	assert_int_equal(st.entries[DTREE_SIZE_2M], 0);
	assert_int_equal(st.dirty_bytes, DTREE_LINE_SIZE); /* 10 bytes: one line */
	assert_int_equal(dtree_check(fx->v->tree), 0);
	assert_true(page_dirty(fx, (off + len) / PAGE + 8));
	uint64_t written = 0;
	assert_int_equal(fsync_range(fx->v, 0, 0, FLUSH_TRACKED, &written), 0);
	assert_int_equal(written, DTREE_LINE_SIZE);
	assert_true(pattern_durable(fx->fd, fx->v, off + len + 8 * PAGE, 10, 70));
}

static void volume_discard__waits_for_fsync_holding_small_entries(void **state)
{
	run_discard_during_fsync(*state, 8 * PAGE, 4 * PAGE, false);
}

static void volume_discard__waits_for_fsync_holding_huge_entry(void **state)
{
	run_discard_during_fsync(*state, 2 * PMD, PMD, true);
}

/* ---- race 4: a huge entry replacing tagged small ones --------------------- */

struct conversion_result {
	bool converted;		 /* one 2 MiB entry after the write */
	bool huge_towrite;	 /* and it carries TOWRITE */
	bool small_data_durable; /* when A returned */
	uint64_t a_written;
};

/* the extra small writes of the many-entry variant: one byte in each of these pages */
#define CONV_EXTRA_FIRST 200
#define CONV_EXTRA	 (FSYNC_CLAIM_BATCH + 1)
#define CONV_EXTRA_SEED	 84

/*
 * run_conversion_while_tagged -- small writes in the 2 MiB block at 2 MiB;
 * A tags them and is held; a write of the whole block (which keeps the
 * small writes' bytes) converts them to one huge entry; A is released. The
 * small writes were done before A began, so they must be durable.
 * @many: CONV_EXTRA more small writes in the block, so the range holds
 * more than one claim batch and A walks in batches without the test hook
 * (its first tags come from dtree_claim_dirty()); else the batched_only
 * hook makes A walk in batches with two entries.
 */
static void run_conversion_while_tagged(struct volfx *fx, struct conversion_result *res, bool many)
{
	const uint64_t block = PMD;
	const uint64_t s1_off = block + 3 * PAGE + 10, s1_len = 100;
	const uint64_t s2_off = block + 100 * PAGE, s2_len = PAGE;
	static uint8_t whole[PMD];

	assert_int_equal(pattern_write(fx->v, s1_off, s1_len, 81), 0);
	assert_int_equal(pattern_write(fx->v, s2_off, s2_len, 82), 0);
	for (unsigned k = 0; many && k < CONV_EXTRA; k++)
		assert_int_equal(pattern_write(fx->v, block + (CONV_EXTRA_FIRST + k) * PAGE + k, 1,
					       CONV_EXTRA_SEED + k),
				 0);
	struct race *r = race_begin(fx, PAUSE_AFTER_TAG, 0, 0);
	r->batched_only = !many;
	race_start_a(r);
	assert_true(dtree_get_mark(fx->v->tree, s1_off / PAGE, DTREE_TOWRITE));
	assert_true(dtree_get_mark(fx->v->tree, s2_off / PAGE, DTREE_TOWRITE));
	for (unsigned k = 0; many && k < CONV_EXTRA; k++)
		assert_true(dtree_get_mark(fx->v->tree, block / PAGE + CONV_EXTRA_FIRST + k,
					   DTREE_TOWRITE));

	pattern_fill(whole, PMD, 83);
	pattern_fill(whole + (s1_off - block), s1_len, 81);
	pattern_fill(whole + (s2_off - block), s2_len, 82);
	for (unsigned k = 0; many && k < CONV_EXTRA; k++)
		pattern_fill(whole + (CONV_EXTRA_FIRST + k) * PAGE + k, 1, CONV_EXTRA_SEED + k);
	r->actor.fn = act_write;
	r->actor.off = block;
	r->actor.len = PMD;
	r->actor.buf = whole;
	/* A holds no entry lock after tagging: the conversion has nothing to wait for */
	bool done = actor_run_until_done_or_blocked(r);
	if (done) {
		uint64_t first, entry;
		res->converted = dtree_lookup(fx->v->tree, block / PAGE + 7, &first, &entry) == 0 &&
				 dentry_size(entry) == DTREE_SIZE_2M && first == block / PAGE;
		res->huge_towrite = dtree_get_mark(fx->v->tree, block / PAGE, DTREE_TOWRITE);
	}
	race_release_a(r);
	race_join_other(r);
	assert_int_equal(r->a_ret, 0);
	assert_int_equal(r->actor.ret, 0);
	assert_true(done);
	res->small_data_durable = pattern_durable(fx->fd, fx->v, s1_off, s1_len, 81) &&
				  pattern_durable(fx->fd, fx->v, s2_off, s2_len, 82);
	for (unsigned k = 0; many && k < CONV_EXTRA; k++)
		res->small_data_durable =
		    res->small_data_durable &&
		    pattern_durable(fx->fd, fx->v, block + (CONV_EXTRA_FIRST + k) * PAGE + k, 1,
				    CONV_EXTRA_SEED + k);
	res->a_written = r->a_written;
	race_end(r);
}

static void fsync_range__huge_conversion_of_tagged_entries_is_written_back(void **state)
{
	struct conversion_result res = {0};
	run_conversion_while_tagged(*state, &res, false);
	assert_true(res.converted);
	assert_true(res.huge_towrite);
	assert_true(res.small_data_durable);
	assert_int_equal(res.a_written, PMD);
}

static void fsync_range__huge_conversion_control_no_towrite_inherit(void **state)
{
	struct conversion_result res = {0};
	rdax_faults.no_towrite_inherit = true;
	run_conversion_while_tagged(*state, &res, false);
	rdax_faults.no_towrite_inherit = false;
	assert_true(res.converted);
	assert_false(res.huge_towrite);
	assert_false(res.small_data_durable); /* the check catches the loss */
	assert_int_equal(res.a_written, 0);
}

/* the same race on the batched walk that more than one claim batch of entries starts by itself */
static void fsync_range__huge_conversion_of_many_tagged_entries_is_written_back(void **state)
{
	struct conversion_result res = {0};
	run_conversion_while_tagged(*state, &res, true);
	assert_true(res.converted);
	assert_true(res.huge_towrite);
	assert_true(res.small_data_durable);
	assert_int_equal(res.a_written, PMD);
}

static void fsync_range__huge_conversion_of_many_control_no_towrite_inherit(void **state)
{
	struct conversion_result res = {0};
	rdax_faults.no_towrite_inherit = true;
	run_conversion_while_tagged(*state, &res, true);
	rdax_faults.no_towrite_inherit = false;
	assert_true(res.converted);
	assert_false(res.huge_towrite);
	assert_false(res.small_data_durable); /* the check catches the loss */
	assert_int_equal(res.a_written, 0);
}

/* ---- race 4b: a huge entry replacing small ones an fsync holds ------------ */

/*
 * On the one-pass path there is no moment between tagging and claiming:
 * the small entries go from DIRTY to claimed (locked) at once, so the
 * conversion can only meet them before the claim (then A claims the huge
 * entry) or while A holds them. A huge conversion waits for locked entries
 * it would replace (dirty_tree.h), so it must stay blocked until A has
 * written the small entries back and released them; then it makes one
 * DIRTY huge entry, which the next fsync writes back whole. Were it not to
 * wait, it would free the entries A holds: A's release would not find them
 * (logged, and a use-after-free ASan reports) and the tree check fails.
 * No switch in faults.h breaks that wait, so, like race 3, this has no
 * control; the one-pass path itself is checked to have been taken.
 */
static void fsync_range__huge_conversion_waits_for_claimed_small_entries(void **state)
{
	struct volfx *fx = *state;
	const uint64_t block = 3 * PMD;
	const uint64_t s1_off = block + 7 * PAGE + 5, s1_len = 300;
	const uint64_t s2_off = block + 300 * PAGE, s2_len = PAGE;
	static uint8_t whole[PMD];

	assert_int_equal(pattern_write(fx->v, s1_off, s1_len, 101), 0);
	assert_int_equal(pattern_write(fx->v, s2_off, s2_len, 102), 0);
	struct race *r = race_begin(fx, PAUSE_AFTER_CLAIM, 0, 0);
	race_start_a(r);
	assert_false(r->batched_only);
	assert_int_equal(r->nclaimed, 2);
	/* one pass: claimed without ever being tagged */
	assert_false(dtree_get_mark(fx->v->tree, s1_off / PAGE, DTREE_TOWRITE));
	assert_false(dtree_get_mark(fx->v->tree, s1_off / PAGE, DTREE_DIRTY));

	pattern_fill(whole, PMD, 103);
	pattern_fill(whole + (s1_off - block), s1_len, 101);
	pattern_fill(whole + (s2_off - block), s2_len, 102);
	r->actor.fn = act_write;
	r->actor.off = block;
	r->actor.len = PMD;
	r->actor.buf = whole;
	bool done = actor_run_until_done_or_blocked(r);
	assert_false(done); /* waits for A's claimed entries */
	race_release_a(r);
	race_join_other(r);
	assert_int_equal(r->a_ret, 0);
	assert_int_equal(r->actor.ret, 0);
	assert_false(r->actor.done_while_a_held);
	assert_int_equal(r->a_written, 5 * DTREE_LINE_SIZE + PAGE); /* s1: bytes [5, 305) */
	race_end(r);
	/* A made the small writes durable; the conversion came after it */
	assert_true(pattern_durable(fx->fd, fx->v, s1_off, s1_len, 101));
	assert_true(pattern_durable(fx->fd, fx->v, s2_off, s2_len, 102));
	uint64_t first = 0, entry = 0;
	assert_int_equal(dtree_lookup(fx->v->tree, block / PAGE + 9, &first, &entry), 0);
	assert_int_equal(dentry_size(entry), DTREE_SIZE_2M);
	assert_int_equal(first, block / PAGE);
	assert_true(dtree_get_mark(fx->v->tree, first, DTREE_DIRTY));
	assert_int_equal(dtree_check(fx->v->tree), 0);
	/* and the next fsync writes the whole block back */
	uint64_t written = 0;
	assert_int_equal(fsync_range(fx->v, 0, 0, FLUSH_TRACKED, &written), 0);
	assert_int_equal(written, PMD);
	uint8_t *got = malloc(PMD);
	assert_non_null(got);
	assert_int_equal(pread(fx->fd, got, PMD, (off_t)(fx->v->ns_offset + block)), (ssize_t)PMD);
	assert_memory_equal(got, whole, PMD);
	free(got);
}

/*
 * The reverse direction: a small write into a tagged huge entry. The tree
 * never splits a huge entry (dirty_tree.h), so the entry must stay one
 * TOWRITE 2 MiB entry and be written back whole. No fault switch breaks
 * this path, so there is no control.
 */
static void fsync_range__small_write_into_tagged_huge_entry_keeps_it(void **state)
{
	struct volfx *fx = *state;
	static uint8_t small[64];
	pattern_fill(small, sizeof(small), 92);

	assert_int_equal(pattern_write(fx->v, 3 * PMD, PMD, 91), 0);
	struct race *r = race_begin(fx, PAUSE_AFTER_TAG, 0, 0);
	r->batched_only = true; /* a pause after tagging: the batched walk */
	race_start_a(r);
	r->actor.fn = act_write;
	r->actor.off = 3 * PMD + 5 * PAGE;
	r->actor.len = sizeof(small);
	r->actor.buf = small;
	assert_true(actor_run_until_done_or_blocked(r));
	uint64_t first = 0, entry = 0;
	assert_int_equal(dtree_lookup(fx->v->tree, 3 * PMD / PAGE + 5, &first, &entry), 0);
	assert_int_equal(dentry_size(entry), DTREE_SIZE_2M);
	assert_int_equal(first, 3 * PMD / PAGE);
	assert_true(dtree_get_mark(fx->v->tree, first, DTREE_TOWRITE));
	race_release_a(r);
	race_join_other(r);
	assert_int_equal(r->a_ret, 0);
	assert_int_equal(r->actor.ret, 0);
	assert_int_equal(r->a_written, PMD);
	assert_true(pattern_durable(fx->fd, fx->v, 3 * PMD, 5 * PAGE, 91));
	race_end(r);
}

int main(void)
{
	log_set_level(LOG_LEVEL_WARN);
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
	    T(fsync_range__concurrent_fsync_waits_for_claimed_writeback),
	    T(fsync_range__concurrent_fsync_control_no_serialise),
	    T(fsync_range__write_after_writeback_stays_dirty),
	    T(fsync_range__write_after_writeback_control_clear_after_writeback),
	    T(fsync_range__write_after_claim_stays_dirty),
	    T(fsync_range__write_after_claim_control_clear_after_writeback),
	    T(fsync_range__line_write_during_clean_stays_dirty),
	    T(fsync_range__line_write_during_clean_control_clear_after_writeback),
	    T(volume_discard__waits_for_fsync_holding_small_entries),
	    T(volume_discard__waits_for_fsync_holding_huge_entry),
	    T(fsync_range__huge_conversion_of_tagged_entries_is_written_back),
	    T(fsync_range__huge_conversion_control_no_towrite_inherit),
	    T(fsync_range__small_write_into_tagged_huge_entry_keeps_it),
#define TB(name) {#name " (batched)", name, fx_setup_batched, fx_teardown, NULL}
	    TB(fsync_range__concurrent_fsync_waits_for_claimed_writeback),
	    TB(fsync_range__concurrent_fsync_control_no_serialise),
	    TB(fsync_range__write_after_writeback_stays_dirty),
	    TB(fsync_range__write_after_writeback_control_clear_after_writeback),
	    TB(fsync_range__write_after_claim_stays_dirty),
	    TB(fsync_range__write_after_claim_control_clear_after_writeback),
	    TB(fsync_range__line_write_during_clean_stays_dirty),
	    TB(fsync_range__line_write_during_clean_control_clear_after_writeback),
	    TB(volume_discard__waits_for_fsync_holding_small_entries),
	    TB(volume_discard__waits_for_fsync_holding_huge_entry),
	    T(fsync_range__huge_conversion_of_many_tagged_entries_is_written_back),
	    T(fsync_range__huge_conversion_of_many_control_no_towrite_inherit),
	    T(fsync_range__huge_conversion_waits_for_claimed_small_entries),
#undef TB
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
