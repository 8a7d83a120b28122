/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_media_guard.c -- a SIGBUS during a guarded copy into or out of a
 * mapping is an -EIO return; any other SIGBUS still kills
 *
 * A real SIGBUS: a file of two pages is mapped shared, then truncated to
 * one page; touching the second page of the mapping faults with BUS_ADRERR,
 * exactly what a hole on a full filesystem or a poisoned PMEM page does to
 * a namespace mapping.
 *
 * Every case that is expected to die runs in a forked child: the parent
 * checks that it died of SIGBUS. Control (faults.h no_media_guard): with the
 * guard off, the guarded copy kills the child, and the check that it
 * returned -EIO fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "faults.h"
#include "log.h"
#include "media_guard.h"

#include "child.h"
#include "pattern.h"
#include "tmpdir.h"

#define PAGE 4096

struct fx {
	char dir[256];
	char path[512];
	int fd;
	uint8_t *map; /* two pages; the second one is past the end of the file */
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "test-guard");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "f");
	fx->fd = open(fx->path, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fx->fd >= 0);
	assert_int_equal(ftruncate(fx->fd, 2 * PAGE), 0);
	fx->map = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fx->fd, 0);
	assert_true(fx->map != MAP_FAILED);
	memset(fx->map, 0x11, 2 * PAGE);
	assert_int_equal(ftruncate(fx->fd, PAGE), 0); /* page 1 now faults with SIGBUS */
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	*state = fx;
	return 0;
}

/*
 * armed -- the fixture of every test body: cmocka puts its own SIGBUS
 * handler in place around each test function (after the setup has run), so
 * the guard goes back on top of it, chaining to it
 */
static struct fx *armed(void **state)
{
	assert_int_equal(media_guard_init(), 0);
	return *state;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	munmap(fx->map, 2 * PAGE);
	close(fx->fd);
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

/* in_child -- run @fn(@fx) in a child (child.h) with the guard installed; its wait status */
struct child_case {
	struct fx *fx;
	void (*fn)(struct fx *);
};

static void child_case_run(void *arg)
{
	struct child_case *c = arg;
	child_check(media_guard_init() == 0); /* over the default action child_run restored */
	c->fn(c->fx);
}

static int in_child(struct fx *fx, void (*fn)(struct fx *))
{
	struct child_case c = {fx, fn};
	return child_run(child_case_run, &c, 60);
}

static void media_copy_in__sigbus_is_eio(void **state)
{
	struct fx *fx = armed(state);
	uint8_t buf[PAGE];
	pattern_fill(buf, sizeof(buf), 1);
	assert_int_equal(media_copy_in(fx->map + PAGE, buf, sizeof(buf)), -EIO);
	/* a copy that starts in the good page and runs into the bad one: EIO too */
	assert_int_equal(media_copy_in(fx->map + PAGE / 2, buf, sizeof(buf)), -EIO);
	/* the guard is disarmed and re-armed: good copies work, more bad ones are EIO */
	assert_int_equal(media_copy_in(fx->map, buf, PAGE), 0);
	assert_memory_equal(fx->map, buf, PAGE);
	for (int i = 0; i < 100; i++)
		assert_int_equal(media_copy_in(fx->map + PAGE + 8, buf, 8), -EIO);
	assert_true(media_guard_errors() >= 102);
}

static void media_copy_out__sigbus_is_eio(void **state)
{
	struct fx *fx = armed(state);
	uint8_t buf[PAGE];
	assert_int_equal(media_copy_out(buf, fx->map + PAGE, sizeof(buf)), -EIO);
	assert_int_equal(media_copy_out(buf, fx->map + 100, PAGE), -EIO);
	assert_int_equal(media_copy_out(buf, fx->map, PAGE), 0);
	for (size_t i = 0; i < PAGE; i++)
		assert_int_equal(buf[i], 0x11);
}

static void pmem_like_set(void *arg)
{
	uint8_t *p = arg;
	memset(p, 0, 2 * PAGE);
}

static void media_set__and_media_guarded__sigbus_is_eio(void **state)
{
	struct fx *fx = armed(state);
	assert_int_equal(media_set(fx->map + PAGE, 0, PAGE), -EIO);
	assert_int_equal(media_set(fx->map, 0x22, PAGE), 0);
	assert_int_equal(fx->map[PAGE - 1], 0x22);
	assert_int_equal(media_guarded(fx->map, 2 * PAGE, pmem_like_set, fx->map), -EIO);
	assert_int_equal(media_guarded(fx->map, PAGE, NULL, NULL), -EINVAL);
	assert_int_equal(media_copy_in(fx->map, NULL, 0), 0); /* nothing to do */
}

/* child_unguarded_store -- a store into the bad page outside any guard */
static void child_unguarded_store(struct fx *fx)
{
	child_check(media_guard_init() == 0); /* the handler is installed ... */
	fx->map[PAGE] = 1;		      /* ... and still must not swallow this */
}

/* child_fault_outside_the_range -- a guarded copy whose bad page is not in its guarded range */
static void child_fault_outside_the_range(struct fx *fx)
{
	uint8_t buf[64];
	/* copy_in guards the destination (good); the source is the bad page */
	media_copy_in(fx->map, fx->map + PAGE, sizeof(buf));
}

/* child_kill_sigbus -- a SIGBUS sent by kill() is not a media error either */
static void child_kill_sigbus(struct fx *fx)
{
	child_check(media_guard_init() == 0);
	kill(getpid(), SIGBUS);
	for (;;)
		pause();
}

static void media_guard__other_sigbus_still_kills(void **state)
{
	struct fx *fx = armed(state);
	void (*cases[])(struct fx *) = {child_unguarded_store, child_fault_outside_the_range,
					child_kill_sigbus};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int status = in_child(fx, cases[i]);
		if (!child_died_of(status, SIGBUS))
			fail_msg("case %zu: the child should die of SIGBUS, status 0x%x", i,
				 status);
	}
}

/* Two threads copy at once: one into the bad page, one into the good one. */
struct racer {
	struct fx *fx;
	bool bad;
	int fails, oks;
};

static void *racer_thread(void *arg)
{
	struct racer *r = arg;
	uint8_t buf[256];
	memset(buf, r->bad ? 0x33 : 0x44, sizeof(buf));
	for (int i = 0; i < 20000; i++) {
		uint8_t *dst = r->fx->map + (r->bad ? PAGE + 64 : 64 + (i % 8) * 256);
		if (media_copy_in(dst, buf, sizeof(buf)) == 0)
			r->oks++;
		else
			r->fails++;
	}
	return NULL;
}

static void media_copy_in__guards_are_per_thread(void **state)
{
	struct fx *fx = armed(state);
	struct racer good = {fx, false, 0, 0}, bad = {fx, true, 0, 0};
	pthread_t a, b;
	assert_int_equal(pthread_create(&a, NULL, racer_thread, &good), 0);
	assert_int_equal(pthread_create(&b, NULL, racer_thread, &bad), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	assert_int_equal(good.oks, 20000);
	assert_int_equal(good.fails, 0);
	assert_int_equal(bad.fails, 20000);
}

/* child_guarded_copy -- the guarded copy of the first test, in a child */
static void child_guarded_copy(struct fx *fx)
{
	uint8_t buf[PAGE] = {0};
	child_check(media_copy_in(fx->map + PAGE, buf, sizeof(buf)) == -EIO);
}

static void media_copy_in__control_no_media_guard_dies(void **state)
{
	struct fx *fx = armed(state);
	int status = in_child(fx, child_guarded_copy);
	assert_true(child_exited_ok(status)); /* guarded: -EIO */
	rdax_faults.no_media_guard = true;
	status = in_child(fx, child_guarded_copy);
	assert_true(child_died_of(status, SIGBUS)); /* the defect */
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/*
 * What the guard costs a 4 KiB copy: printed, never judged (timings are
 * noise). Plain and guarded runs alternate and the fastest of each is kept,
 * so a busy machine disturbs the ratio less.
 */
static void media_copy_in__cost_printed(void **state)
{
	struct fx *fx = armed(state);
	static uint8_t src[PAGE];
	enum { ROUNDS = 15, COPIES = 20000 };
	double best_plain = 1e9, best_guarded = 1e9;
	for (int r = 0; r < ROUNDS; r++) {
		double t0 = now();
		for (int i = 0; i < COPIES; i++) {
			memcpy(fx->map, src, PAGE);
			__asm__ __volatile__("" ::: "memory");
		}
		double t1 = now();
		for (int i = 0; i < COPIES; i++)
			if (media_copy_in(fx->map, src, PAGE) != 0)
				fail();
		double t2 = now();
		best_plain = t1 - t0 < best_plain ? t1 - t0 : best_plain;
		best_guarded = t2 - t1 < best_guarded ? t2 - t1 : best_guarded;
	}
	print_message("4 KiB copy into a mapping: guarded/plain = %.2f (%.0f ns vs %.0f ns, "
		      "fastest of %d runs)\n",
		      best_guarded / best_plain, best_guarded / COPIES * 1e9,
		      best_plain / COPIES * 1e9, ROUNDS);
}

/*
 * A sanitizer build would catch the deadly SIGBUS itself and exit with a
 * report; this test checks the signal the process dies of, so the
 * sanitizer leaves SIGBUS alone here (it still reports everything else).
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "handle_sigbus=0";
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
	    T(media_copy_in__sigbus_is_eio),
	    T(media_copy_out__sigbus_is_eio),
	    T(media_set__and_media_guarded__sigbus_is_eio),
	    T(media_guard__other_sigbus_still_kills),
	    T(media_copy_in__guards_are_per_thread),
	    T(media_copy_in__control_no_media_guard_dies),
	    T(media_copy_in__cost_printed),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
