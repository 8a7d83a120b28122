/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nbd_powercut.c -- a FLUSH on one NBD connection covers writes
 * acknowledged on another (why the export advertises CAN_MULTI_CONN)
 *
 * A sim-mode daemon (a kill -9 is a power cut: only what was written back
 * survives). libnbd (scripts/multiconn.py) opens two connections to one
 * volume, writes chunks spread over many pages and dirty-tree entries
 * through connection 1, then sends FLUSH through connection 2 and waits for
 * its reply. The daemon is killed, restarted on the same namespace, and the
 * volume is read back with nbdcopy: every chunk must be there.
 *
 * Controls, which must report the loss with the same check:
 *  - RDAX_FAULTS=skip-writeback: the fsync engine skips a write-back;
 *  - no FLUSH at all: unflushed writes do not survive the cut, so the
 *    check above is not passing by accident (data that survives anyway).
 *
 * The same with FUA writes and no FLUSH: each write is durable when it is
 * acknowledged. These small range fsyncs run on the connection's loop
 * (vol_op_fsync_try_inline), which the daemon's debug log shows: the test
 * counts them, so it checks that path and not the pool's. Its control is
 * skip-writeback again.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nbdtest.h"

#define VOL_SIZE (8ULL << 20)
#define CHUNK	 4096U
#define STRIDE	 (64U << 10) /* one chunk per 64 KiB: separate pages and entries */
#define NCHUNKS	 64U

/*
 * cut_and_count -- the scenario; returns how many chunks are missing after
 * the power cut (0: all found).
 */
enum sync_how { SYNC_NONE, SYNC_FLUSH_OTHER_CONN, SYNC_FUA };

/* count_lines -- lines of @path that contain @what */
static unsigned count_lines(const char *path, const char *what)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	char line[1024];
	unsigned n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

static unsigned cut_and_count(const char *faults, enum sync_how how, uint64_t seed)
{
	char dir[256], data_path[320], back[320], uri[128];
	assert_int_equal(hx_tmpdir_make("nbd-cut", dir, sizeof(dir)), 0);
	struct nt_daemon n;
	memset(&n, 0, sizeof(n));
	/* debug: the log names every fsync (fsync.c), inline ones as fsync_range_try */
	struct hx_daemon_opts o = {
	    .ns_size = "64M", .mode = "sim", .faults = faults, .log_level = "debug"};
	assert_int_equal(nt_daemon_start(&n, dir, &o), 0);
	assert_int_equal(nt_volume_create(&n, "cut", VOL_SIZE), 0);

	size_t len = (size_t)CHUNK * NCHUNKS;
	uint8_t *data = malloc(len);
	assert_non_null(data);
	hx_pattern(data, len, seed, 0);
	snprintf(data_path, sizeof(data_path), "%s/data", dir);
	assert_int_equal(hx_write_file(data_path, data, len), 0);

	char e_uri[200], e_data[360], e_chunk[32], e_stride[32];
	snprintf(e_uri, sizeof(e_uri), "NT_URI=%s", nt_uri(&n, "cut", uri, sizeof(uri)));
	snprintf(e_data, sizeof(e_data), "NT_DATA=%s", data_path);
	snprintf(e_chunk, sizeof(e_chunk), "NT_CHUNK=%u", CHUNK);
	snprintf(e_stride, sizeof(e_stride), "NT_STRIDE=%u", STRIDE);
	const char *env[] = {e_uri,
			     e_data,
			     e_chunk,
			     e_stride,
			     how == SYNC_FLUSH_OTHER_CONN ? "NT_FLUSH=1" : "NT_FLUSH=0",
			     how == SYNC_FUA ? "NT_FUA=1" : "NT_FUA=0",
			     NULL};
	struct hx_run r;
	assert_int_equal(nt_nbdsh("scripts/multiconn.py", env, &r), 0);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, how == SYNC_FUA		    ? "FUA WRITES"
				      : how == SYNC_FLUSH_OTHER_CONN ? "FLUSHED"
								     : "NOT FLUSHED"));
	hx_run_free(&r);
	if (how == SYNC_FUA) {
		/* one write, one fsync of its range, each on the loop */
		unsigned inline_fsyncs = count_lines(n.d.log_path, "fsync_range_try(volume=cut,");
		printf("%u of %u FUA writes fsynced on the loop\n", inline_fsyncs, NCHUNKS);
		assert_int_equal(inline_fsyncs, NCHUNKS);
	}

	/* the power cut, right after the FLUSH reply; then the same namespace again */
	assert_int_equal(hx_daemon_kill(&n.d), 0);
	n.d.opts.faults = NULL;
	assert_int_equal(nt_daemon_restart(&n), 0);
	snprintf(back, sizeof(back), "%s/back", dir);
	const char *copy[] = {"nbdcopy", nt_uri(&n, "cut", uri, sizeof(uri)), back, NULL};
	assert_int_equal(nt_run(copy, &r, false), 0);
	assert_int_equal(r.status, 0);
	hx_run_free(&r);

	uint8_t *img;
	size_t img_len;
	assert_int_equal(nt_read_file(back, &img, &img_len), 0);
	assert_int_equal(img_len, VOL_SIZE);
	unsigned missing = 0;
	for (unsigned i = 0; i < NCHUNKS; i++)
		if (memcmp(img + (size_t)i * STRIDE, data + (size_t)i * CHUNK, CHUNK) != 0)
			missing++;
	static const char *const how_name[] = {"none", "flush on the other connection", "fua"};
	printf("faults=%s sync=%s: %u of %u chunks missing after the cut\n",
	       faults ? faults : "none", how_name[how], missing, NCHUNKS);
	free(img);
	free(data);
	int ret = hx_daemon_stop(&n.d);
	if (ret)
		hx_daemon_dump_log(&n.d, 8192);
	assert_int_equal(ret, 0);
	hx_tmpdir_remove(dir);
	return missing;
}

static void multi_conn__flush_on_other_connection_survives_cut(void **state)
{
	assert_int_equal(cut_and_count(NULL, SYNC_FLUSH_OTHER_CONN, 1), 0);
}

static void multi_conn__control_skip_writeback_loses_data(void **state)
{
	assert_true(cut_and_count("skip-writeback", SYNC_FLUSH_OTHER_CONN, 2) > 0);
}

static void multi_conn__control_no_flush_loses_data(void **state)
{
	assert_true(cut_and_count(NULL, SYNC_NONE, 3) > 0);
}

static void fua__every_acknowledged_write_survives_cut(void **state)
{
	assert_int_equal(cut_and_count(NULL, SYNC_FUA, 4), 0);
}

static void fua__control_skip_writeback_loses_data(void **state)
{
	assert_true(cut_and_count("skip-writeback", SYNC_FUA, 5) > 0);
}

int main(void)
{
	nt_env_init();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(multi_conn__flush_on_other_connection_survives_cut),
	    cmocka_unit_test(multi_conn__control_skip_writeback_loses_data),
	    cmocka_unit_test(multi_conn__control_no_flush_loses_data),
	    cmocka_unit_test(fua__every_acknowledged_write_survives_cut),
	    cmocka_unit_test(fua__control_skip_writeback_loses_data),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
