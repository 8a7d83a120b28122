/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_persist.c -- the persistence wrapper in both modes
 *
 * SIM: what was flushed (whole 64-byte lines) is in the file, what was not
 * is lost on re-map; the power budget cuts flushes at an exact line. AUTO on
 * a plain file: msync method, data in the file after persist_range().
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "checked.h"
#include "faults.h"
#include "persist.h"

#include "nsfile.h"
#include "pattern.h"
#include "tmpdir.h"

#define FILE_SIZE (1ULL << 20)
#define LINE	  RDAX_CACHELINE
#define PAGE	  RDAX_PAGE_SIZE

struct fx {
	char dir[256];
	char path[512];
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "test-persist");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	persist_sim_set_budget(-1);
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	persist_sim_set_budget(-1);
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

static void persist_flush__sim_flushed_lines_survive_remap(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_SIM, &p), 0);
	assert_int_equal(p.method, PERSIST_METHOD_SIM);
	assert_true(p.is_regular_file);
	assert_false(p.is_devdax);

	uint8_t *b = p.base;
	pattern_fill(b, 4 * LINE, 1);
	/* line 1 whole; one byte in line 3 persists the whole of line 3 */
	persist_range(&p, b + LINE, LINE);
	persist_range(&p, b + 3 * LINE + 17, 1);
	persist_unmap(&p);

	assert_int_equal(persist_map(fx->path, PERSIST_SIM, &p), 0);
	uint8_t expect[4 * LINE];
	pattern_fill(expect, sizeof(expect), 1);
	b = p.base;
	assert_true(all_zero(b, LINE));				    /* line 0: never flushed */
	assert_memory_equal(b + LINE, expect + LINE, LINE);	    /* flushed */
	assert_true(all_zero(b + 2 * LINE, LINE));		    /* never flushed */
	assert_memory_equal(b + 3 * LINE, expect + 3 * LINE, LINE); /* whole line */
	persist_unmap(&p);
}

static void persist_flush__sim_unflushed_stores_not_in_file(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_SIM, &p), 0);
	pattern_fill((uint8_t *)p.base + PAGE, PAGE, 2);

	/* the store is visible in the mapping but not in the file */
	uint8_t buf[PAGE];
	nsfile_read(fx->path, PAGE, buf, sizeof(buf));
	assert_true(all_zero(buf, sizeof(buf)));

	persist_flush(&p, (uint8_t *)p.base + PAGE, PAGE);
	persist_drain(&p);
	uint8_t expect[PAGE];
	pattern_fill(expect, sizeof(expect), 2);
	nsfile_read(fx->path, PAGE, buf, sizeof(buf));
	assert_memory_equal(buf, expect, sizeof(buf));
	persist_unmap(&p);
}

static void persist_sim_set_budget__tears_a_multi_line_flush(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_SIM, &p), 0);
	uint8_t *b = p.base;
	pattern_fill(b, 8 * LINE, 3);

	persist_sim_set_budget(2);
	persist_range(&p, b, 5 * LINE); /* lines 0, 1 persist; 2-4 are dropped */
	assert_int_equal(persist_sim_budget(), 0);
	assert_int_equal(persist_sim_dropped(), 3);
	persist_range(&p, b + 6 * LINE, LINE); /* power is gone */
	assert_int_equal(persist_sim_dropped(), 4);
	persist_sim_set_budget(-1);
	assert_int_equal(persist_sim_budget(), -1);
	assert_int_equal(persist_sim_dropped(), 0);

	uint8_t expect[8 * LINE], buf[8 * LINE];
	pattern_fill(expect, sizeof(expect), 3);
	nsfile_read(fx->path, 0, buf, sizeof(buf));
	assert_memory_equal(buf, expect, 2 * LINE);
	assert_true(all_zero(buf + 2 * LINE, 6 * LINE));
	persist_unmap(&p);
}

static void persist_sim_set_budget__zero_drops_everything(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_SIM, &p), 0);
	pattern_fill(p.base, PAGE, 4);
	persist_sim_set_budget(0);
	persist_range(&p, p.base, PAGE);
	assert_int_equal(persist_sim_dropped(), PAGE / LINE);
	persist_sim_set_budget(-1);
	uint8_t buf[PAGE];
	nsfile_read(fx->path, 0, buf, sizeof(buf));
	assert_true(all_zero(buf, sizeof(buf)));
	persist_unmap(&p);
}

/* check_zeroed -- [lo, hi) reads zero in @b, everything else of [0, 4 pages) the pattern */
static void check_zeroed(const uint8_t *b, uint64_t lo, uint64_t hi, unsigned seed)
{
	uint8_t expect[4 * PAGE];
	pattern_fill(expect, sizeof(expect), seed);
	memset(expect + lo, 0, hi - lo);
	assert_memory_equal(b, expect, sizeof(expect));
}

/* file_allocated -- bytes of @path's blocks (a fully provisioned file: its size) */
static uint64_t file_allocated(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

/* zero_edges_and_middle -- persist_zero over unaligned edges and two whole pages */
static void zero_edges_and_middle(const char *path, enum persist_mode mode)
{
	struct persist p;
	assert_int_equal(persist_create(path, FILE_SIZE, mode, &p), 0);
	uint8_t *b = p.base;
	pattern_fill(b, 4 * PAGE, 5);
	persist_range(&p, b, 4 * PAGE);

	uint64_t lo = PAGE - 100, hi = 3 * PAGE + 100; /* edge, pages 1-2, edge */
	assert_int_equal(persist_zero(&p, lo, hi - lo), 0);
	check_zeroed(b, lo, hi, 5); /* the mapping reads zeros at once */

	uint8_t buf[4 * PAGE];
	nsfile_read(path, 0, buf, sizeof(buf)); /* and so does the file */
	check_zeroed(buf, lo, hi, 5);

	/* the whole pages kept their blocks: nothing was given back to the filesystem */
	assert_true(file_allocated(path) >= FILE_SIZE);
	persist_unmap(&p);

	assert_int_equal(persist_map(path, mode, &p), 0);
	check_zeroed(p.base, lo, hi, 5);
	persist_unmap(&p);
}

static void persist_zero__sim_edges_and_middle(void **state)
{
	zero_edges_and_middle(((struct fx *)*state)->path, PERSIST_SIM);
}

static void persist_zero__auto_edges_and_middle(void **state)
{
	zero_edges_and_middle(((struct fx *)*state)->path, PERSIST_AUTO);
}

/*
 * control (faults.h zero_punches): the old discard punched holes, giving
 * the blocks back to the filesystem; the check above must see the hole
 */
static void persist_zero__control_zero_punches_leaves_a_hole(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_AUTO, &p), 0);
	rdax_faults.zero_punches = true;
	assert_int_equal(persist_zero(&p, PAGE, 2 * PAGE), 0);
	rdax_faults.zero_punches = false;
	assert_true(file_allocated(fx->path) < FILE_SIZE); /* the hole gave blocks back */
	persist_unmap(&p);
}

static void persist_zero__within_one_page(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_SIM, &p), 0);
	pattern_fill(p.base, 4 * PAGE, 6);
	persist_range(&p, p.base, 4 * PAGE);
	assert_int_equal(persist_zero(&p, PAGE + 10, 50), 0);
	check_zeroed(p.base, PAGE + 10, PAGE + 60, 6);
	persist_unmap(&p);
	assert_int_equal(persist_map(fx->path, PERSIST_SIM, &p), 0);
	check_zeroed(p.base, PAGE + 10, PAGE + 60, 6);
	persist_unmap(&p);
}

static void persist_zero__sim_zero_range_is_one_budget_unit(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_SIM, &p), 0);
	pattern_fill(p.base, 4 * PAGE, 7);
	persist_range(&p, p.base, 4 * PAGE);

	/* budget 1: the zero range of pages 0-1 persists whole */
	persist_sim_set_budget(1);
	assert_int_equal(persist_zero(&p, 0, 2 * PAGE), 0);
	assert_int_equal(persist_sim_dropped(), 0);
	/* budget 0: pages 2-3 read zero in the mapping, the file keeps them */
	persist_sim_set_budget(0);
	assert_int_equal(persist_zero(&p, 2 * PAGE, 2 * PAGE), 0);
	assert_int_equal(persist_sim_dropped(), 1);
	persist_sim_set_budget(-1);
	check_zeroed(p.base, 0, 4 * PAGE, 7);
	persist_unmap(&p);

	assert_int_equal(persist_map(fx->path, PERSIST_SIM, &p), 0);
	check_zeroed(p.base, 0, 2 * PAGE, 7);
	persist_unmap(&p);
}

static void persist_map__auto_plain_file(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_AUTO, &p), 0);
	assert_int_equal(p.mode, PERSIST_AUTO);
	assert_int_equal(p.size, FILE_SIZE);
	assert_true(p.is_regular_file);
	if (!p.is_pmem) /* PMEM_IS_PMEM_FORCE=1 makes libpmem call a plain file pmem */
		assert_int_equal(p.method, PERSIST_METHOD_MSYNC);

	pattern_fill((uint8_t *)p.base + 3 * PAGE + 5, 1000, 8);
	persist_range(&p, (uint8_t *)p.base + 3 * PAGE + 5, 1000);
	persist_unmap(&p);
	assert_null(p.base);
	assert_int_equal(p.fd, -1);

	uint8_t buf[1000], expect[1000];
	pattern_fill(expect, sizeof(expect), 8);
	nsfile_read(fx->path, 3 * PAGE + 5, buf, sizeof(buf));
	assert_memory_equal(buf, expect, sizeof(buf));

	assert_int_equal(persist_map(fx->path, PERSIST_AUTO, &p), 0);
	assert_memory_equal((uint8_t *)p.base + 3 * PAGE + 5, expect, sizeof(expect));
	persist_unmap(&p);
}

static void persist_map__bad_input(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	memset(&p, 0x5a, sizeof(p));
	struct persist untouched = p;

	assert_int_equal(persist_map(NULL, PERSIST_SIM, &p), -EINVAL);
	assert_int_equal(persist_map(fx->path, PERSIST_SIM, NULL), -EINVAL);
	assert_int_equal(persist_map(fx->path, (enum persist_mode)7, &p), -EINVAL);
	assert_int_equal(persist_map(fx->path, PERSIST_SIM, &p), -ENOENT);
	assert_int_equal(persist_map(fx->dir, PERSIST_SIM, &p), -EISDIR); /* a directory */
	assert_int_equal(persist_map(fx->dir, PERSIST_AUTO, &p), -EISDIR);
	/* a character device, but not a device DAX: refused in either mode */
	assert_int_equal(persist_map("/dev/null", PERSIST_SIM, &p), -ENODEV);
	assert_int_equal(persist_map("/dev/null", PERSIST_AUTO, &p), -ENODEV);
	assert_memory_equal(&p, &untouched, sizeof(p));

	int fd = open(fx->path, O_CREAT | O_RDWR, 0600); /* empty file */
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(persist_map(fx->path, PERSIST_SIM, &p), -EINVAL);
	assert_int_equal(persist_map(fx->path, PERSIST_AUTO, &p), -EINVAL);
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_SIM, &p), -EEXIST);
	assert_memory_equal(&p, &untouched, sizeof(p));
	unlink(fx->path);

	assert_int_equal(persist_create(NULL, FILE_SIZE, PERSIST_SIM, &p), -EINVAL);
	assert_int_equal(persist_create(fx->path, 0, PERSIST_SIM, &p), -EINVAL);
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_SIM, NULL), -EINVAL);
	assert_int_equal(access(fx->path, F_OK), -1); /* nothing created */

	struct persist zeroed;
	memset(&zeroed, 0, sizeof(zeroed));
	persist_unmap(&zeroed); /* safe, closes nothing */
	persist_unmap(NULL);
}

static void persist_zero__bad_input(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_SIM, &p), 0);
	pattern_fill(p.base, PAGE, 9);
	assert_int_equal(persist_zero(NULL, 0, 1), -EINVAL);
	assert_int_equal(persist_zero(&p, 0, 0), -EINVAL);
	assert_int_equal(persist_zero(&p, FILE_SIZE - 1, 2), -ERANGE);
	assert_int_equal(persist_zero(&p, UINT64_MAX, 2), -EOVERFLOW);
	uint8_t expect[PAGE];
	pattern_fill(expect, sizeof(expect), 9);
	assert_memory_equal(p.base, expect, sizeof(expect)); /* nothing changed */
	persist_unmap(&p);
}

static void persist_flush__outside_the_mapping_aborts(void **state)
{
	struct fx *fx = *state;
	struct persist p;
	assert_int_equal(persist_create(fx->path, FILE_SIZE, PERSIST_SIM, &p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		persist_flush(&p, (uint8_t *)p.base + FILE_SIZE - 10, 64);
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	persist_unmap(&p);
}

static void persist_mode_parse__names(void **state)
{
	enum persist_mode m;
	assert_int_equal(persist_mode_parse("sim", &m), 0);
	assert_int_equal(m, PERSIST_SIM);
	assert_int_equal(persist_mode_parse("auto", &m), 0);
	assert_int_equal(m, PERSIST_AUTO);
	assert_int_equal(persist_mode_parse("fast", &m), -EINVAL);
	assert_int_equal(persist_mode_parse(NULL, &m), -EINVAL);
	assert_int_equal(persist_mode_parse("sim", NULL), -EINVAL);
	assert_string_equal(persist_mode_name(PERSIST_SIM), "sim");
	assert_string_equal(persist_method_name(PERSIST_METHOD_MSYNC), "msync");
	assert_string_equal(persist_method_name(PERSIST_METHOD_FENCE_ONLY), "fence-only");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
	    T(persist_flush__sim_flushed_lines_survive_remap),
	    T(persist_flush__sim_unflushed_stores_not_in_file),
	    T(persist_sim_set_budget__tears_a_multi_line_flush),
	    T(persist_sim_set_budget__zero_drops_everything),
	    T(persist_zero__sim_edges_and_middle),
	    T(persist_zero__auto_edges_and_middle),
	    T(persist_zero__control_zero_punches_leaves_a_hole),
	    T(persist_zero__within_one_page),
	    T(persist_zero__sim_zero_range_is_one_budget_unit),
	    T(persist_map__auto_plain_file),
	    T(persist_map__bad_input),
	    T(persist_zero__bad_input),
	    T(persist_flush__outside_the_mapping_aborts),
	    T(persist_mode_parse__names),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
