/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_crash_states_cli.c -- rdax crash-states on the examples' write logs
 *
 * One daemon; wal_correct and wal_buggy (examples/) each run once against
 * it, recorded into a write log by the test-only recorder (wlog_record.c),
 * three transactions each. Then:
 *  - every crash state of wal_correct passes wal_check (49 of them at line
 *    granularity, 7 at write granularity: counts worked out in
 *    tests/unit/test_crash_states.c), and the control -- the model told to
 *    forget the fsyncs (RDAX_FAULTS=crash-states-no-fsync) -- makes the same
 *    check fail, so the pass depends on wal_correct's fsyncs;
 *  - wal_buggy is caught, and the failing state's manifest names a commit
 *    record present and its transaction's data missing;
 *  - sampling, --load, and bad input: a corrupt or truncated log, the log
 *    of another volume, an --out directory in use, a state volume name
 *    taken: each a clear one-line error, and nothing of the user's touched.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

struct fx {
	char dir[256];
	struct hx_daemon d;
	char correct_log[320], buggy_log[320];
	char check[640];      /* --check: wal_check on the image */
	char check_load[640]; /* --check with --load: wal_check on the state's volume */
	unsigned outs;
};

static struct fx F;

static void show(const char *what, const struct hx_run *r)
{
	fprintf(stderr, "%s: exit %d\n  stdout: %.2000s\n  stderr: %.2000s\n", what, r->status,
		r->out ? r->out : "", r->err ? r->err : "");
}

/* record -- run example @prog on a new volume @vol, its write log into @log */
static int record(const char *prog, const char *vol, const char *log)
{
	const char *argv[] = {prog, "--server", F.d.url, vol, "3", NULL};
	setenv("RDAX_TEST_WRITE_LOG", log, 1);
	struct hx_run r;
	int ret = hx_run_argv(argv, NULL, 0, &r);
	unsetenv("RDAX_TEST_WRITE_LOG");
	if (ret || r.status != 0) {
		show(prog, &r);
		ret = -1;
	}
	hx_run_free(&r);
	return ret;
}

static int group_setup(void **state)
{
	(void)state;
	memset(&F, 0, sizeof(F));
	if (hx_tmpdir_make("crashstates", F.dir, sizeof(F.dir)) < 0)
		return -1;
	struct hx_daemon_opts o = {.ns_size = "128M"};
	if (hx_daemon_start(&F.d, F.dir, &o))
		return -1;
	snprintf(F.correct_log, sizeof(F.correct_log), "%s/correct.wlog", F.dir);
	snprintf(F.buggy_log, sizeof(F.buggy_log), "%s/buggy.wlog", F.dir);
	snprintf(F.check, sizeof(F.check), "'%s' \"$1\"", WAL_CHECK_PATH);
	snprintf(F.check_load, sizeof(F.check_load), "'%s' --volume \"$RDAX_STATE_VOLUME\"",
		 WAL_CHECK_PATH);
	if (record(WAL_CORRECT_PATH, "wal-correct", F.correct_log) ||
	    record(WAL_BUGGY_PATH, "wal-buggy", F.buggy_log))
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	int ret = hx_daemon_stop(&F.d);
	if (ret == 0)
		hx_tmpdir_remove(F.dir);
	return ret == 0 ? 0 : -1;
}

/* out_dir -- a fresh path for --out (not created) */
static const char *out_dir(char *buf, size_t len)
{
	snprintf(buf, len, "%s/out%u", F.dir, F.outs++);
	return buf;
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* count_files -- files in @dir whose names end in @suffix */
static unsigned count_files(const char *dir, const char *suffix)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	unsigned n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		size_t l = strlen(e->d_name), s = strlen(suffix);
		n += l >= s && strcmp(e->d_name + l - s, suffix) == 0;
	}
	closedir(d);
	return n;
}

static char *slurp(const char *path, size_t *lenp)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	size_t len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = calloc(1, len + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, len, f), len);
	fclose(f);
	if (lenp)
		*lenp = len;
	return b;
}

static void spill(const char *path, const void *b, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, len, f), len);
	fclose(f);
}

/* summary_u64 -- "key": N from DIR/summary.json */
static uint64_t summary_u64(const char *dir, const char *key)
{
	char path[400], pat[64];
	snprintf(path, sizeof(path), "%s/summary.json", dir);
	char *s = slurp(path, NULL);
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	char *p = strstr(s, pat);
	assert_non_null(p);
	uint64_t v = strtoull(p + strlen(pat), NULL, 10);
	free(s);
	return v;
}

/* expect_ok -- exit 0 */
static void expect_ok(const char *what, const struct hx_run *r)
{
	if (r->status != 0) {
		show(what, r);
		fail_msg("%s: exit %d", what, r->status);
	}
}

/* expect_error -- exit @code, one line on stderr containing @needle */
static void expect_error(const char *what, const struct hx_run *r, int code, const char *needle)
{
	const char *nl = r->err ? strchr(r->err, '\n') : NULL;
	if (r->status != code || !nl || nl[1] != '\0' || !strstr(r->err, needle)) {
		show(what, r);
		fail_msg("%s: wanted exit %d and one line with '%s'", what, code, needle);
	}
}

/* --- the correct program passes, the buggy one is caught ------------------ */

static void crash_states__correct_wal_passes_every_state(void **state)
{
	(void)state;
	char out[320];
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct",
				"--out", out_dir(out, sizeof(out)), "--check", F.check, NULL),
			 0);
	expect_ok("crash-states correct", &r);
	assert_non_null(strstr(r.out, "49 states (every one there is"));
	assert_non_null(strstr(r.out, "every state passed the check"));
	assert_int_equal(summary_u64(out, "produced"), 49);
	assert_int_equal(count_files(out, ".img"), 49);
	assert_int_equal(count_files(out, ".json"), 50);
	/* the checker ran on every state: each printed its verdict */
	unsigned verdicts = 0;
	for (const char *p = r.out; (p = strstr(p, "wal_check: ok")); p++)
		verdicts++;
	assert_int_equal(verdicts, 49);
	/* the last state holds all three transactions; images are the volume's size */
	assert_non_null(strstr(r.out, "ok, 3 committed transactions intact"));
	char img[400];
	snprintf(img, sizeof(img), "%s/state-000048.img", out);
	struct stat st;
	assert_int_equal(stat(img, &st), 0);
	assert_int_equal(st.st_size, 64 << 10);
	hx_run_free(&r);
}

/*
 * The control: the same run with the model forgetting the fsyncs must
 * find a failing state -- wal_correct's pass rests on its fsyncs.
 */
static void crash_states__control_without_fsyncs_correct_wal_fails(void **state)
{
	(void)state;
	char out[320];
	struct hx_run r;
	setenv("RDAX_FAULTS", "crash-states-no-fsync", 1);
	int ret = hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct", "--out",
			 out_dir(out, sizeof(out)), "--check", F.check, NULL);
	unsetenv("RDAX_FAULTS");
	assert_int_equal(ret, 0);
	if (r.status != 1 || !strstr(r.err, "fails the check")) {
		show("crash-states control", &r);
		fail_msg("without its fsyncs the correct WAL still passed");
	}
	hx_run_free(&r);
}

struct pending {
	uint64_t record, offset, length;
	char status[16];
	bool missing;
};

/* parse_pending -- the pending writes of the manifest (JSON) in @text */
static unsigned parse_pending(const char *text, struct pending *out, unsigned max)
{
	const char *list = strstr(text, "\"pending\":[");
	assert_non_null(list);
	unsigned n = 0;
	for (const char *p = list; n < max && (p = strstr(p, "{\"record\":")); p++) {
		struct pending e = {0};
		if (sscanf(p,
			   "{\"record\":%" SCNu64 ",\"type\":\"write\",\"offset\":%" SCNu64
			   ",\"length\":%" SCNu64 ",\"status\":\"%15[a-z]\"",
			   &e.record, &e.offset, &e.length, e.status) != 4)
			continue;
		const char *end = strchr(p, '}'); /* entries hold arrays, no objects */
		const char *m = strstr(p, "\"missing\":[[");
		e.missing = m && end && m < end;
		out[n++] = e;
	}
	return n;
}

/*
 * check_caught -- @r is a run that stopped at a failing state: the checker
 * said which transaction is committed without its data, and the printed
 * manifest agrees: that transaction's commit record present, its data
 * write absent or partial with missing bytes listed
 */
static void check_caught(const char *what, const struct hx_run *r)
{
	unsigned txn;
	const char *c = strstr(r->out, "wal_check: transaction ");
	if (r->status != 1 || !strstr(r->err, "fails the check") || !c ||
	    sscanf(c, "wal_check: transaction %u is committed", &txn) != 1) {
		show(what, r);
		fail_msg("%s: the buggy WAL was not caught", what);
	}
	const char *manifest = strstr(r->out, "fails the check: a power cut");
	assert_non_null(manifest);
	struct pending p[16];
	unsigned n = parse_pending(manifest, p, 16);
	bool commit_present = false, data_missing = false;
	for (unsigned i = 0; i < n; i++) {
		if (p[i].offset == txn * 64ULL && p[i].length == 64)
			commit_present = strcmp(p[i].status, "present") == 0;
		if (p[i].offset == 4096 + txn * 256ULL && p[i].length == 256)
			data_missing = strcmp(p[i].status, "present") != 0 && p[i].missing;
	}
	if (!commit_present || !data_missing) {
		show(what, r);
		fail_msg("%s: the manifest does not show commit %u present and its data missing",
			 what, txn);
	}
}

static void crash_states__buggy_wal_is_caught(void **state)
{
	(void)state;
	char out[320];
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.buggy_log, "wal-buggy",
				"--out", out_dir(out, sizeof(out)), "--check", F.check, NULL),
			 0);
	check_caught("crash-states buggy", &r);
	/* the run stopped there: the summary names the state, no state after it exists */
	uint64_t failed = summary_u64(out, "failed_state");
	assert_int_equal(summary_u64(out, "produced"), failed + 1);
	assert_int_equal(count_files(out, ".img"), failed + 1);
	hx_run_free(&r);
}

/* Whole writes only: fewer states (7 and 10), same verdicts. */
static void crash_states__write_granularity(void **state)
{
	(void)state;
	char out[320];
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct",
				"--out", out_dir(out, sizeof(out)), "--granularity", "write",
				"--check", F.check, NULL),
			 0);
	expect_ok("crash-states correct --granularity write", &r);
	assert_non_null(strstr(r.out, "7 states (every one there is"));
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.buggy_log, "wal-buggy",
				"--out", out_dir(out, sizeof(out)), "--granularity", "write",
				"--check", F.check, NULL),
			 0);
	check_caught("crash-states buggy --granularity write", &r);
	hx_run_free(&r);
}

/* --max below the total: that many states, sampled, the same for the same seed. */
static void crash_states__sampled_run_is_reproducible(void **state)
{
	(void)state;
	char a[320], b[320];
	struct hx_run r;
	for (unsigned k = 0; k < 2; k++) {
		assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.buggy_log, "wal-buggy",
					"--out", out_dir(k ? b : a, sizeof(a)), "--max", "20",
					"--seed", "5", NULL),
				 0);
		expect_ok("crash-states --max 20", &r);
		assert_non_null(strstr(r.out, "20 states sampled with seed 5 of 94"));
		hx_run_free(&r);
	}
	assert_int_equal(count_files(a, ".img"), 20);
	for (unsigned i = 0; i < 20; i++) {
		char pa[400], pb[400];
		snprintf(pa, sizeof(pa), "%s/state-%06u.img", a, i);
		snprintf(pb, sizeof(pb), "%s/state-%06u.img", b, i);
		size_t la, lb;
		char *x = slurp(pa, &la), *y = slurp(pb, &lb);
		assert_int_equal(la, lb);
		assert_memory_equal(x, y, la);
		free(x);
		free(y);
	}
}

/* --- --load ----------------------------------------------------------------- */

/* crash_volumes -- how many volumes named PREFIX.crash-* the daemon has */
static unsigned crash_volumes(const char *prefix, char *first, size_t len)
{
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "list", NULL), 0);
	expect_ok("volume list", &r);
	char pat[96];
	snprintf(pat, sizeof(pat), "%s.crash-", prefix);
	unsigned n = 0;
	for (const char *p = r.out; (p = strstr(p, pat)); p++) {
		if (n++ == 0 && first)
			snprintf(first, len, "%.*s", (int)strcspn(p, " \n"), p);
	}
	hx_run_free(&r);
	return n;
}

static void crash_states__load_keeps_the_failing_state(void **state)
{
	(void)state;
	char out[320];
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.buggy_log, "wal-buggy",
				"--out", out_dir(out, sizeof(out)), "--load", "--check",
				F.check_load, NULL),
			 0);
	check_caught("crash-states buggy --load", &r);
	hx_run_free(&r);
	/* the passing states' volumes are gone, the failing one is kept */
	char name[96], want[96];
	assert_int_equal(crash_volumes("wal-buggy", name, sizeof(name)), 1);
	snprintf(want, sizeof(want), "wal-buggy.crash-%06" PRIu64,
		 summary_u64(out, "failed_state"));
	assert_string_equal(name, want);
	/* it holds the state: wal_check on the volume and on the image agree */
	const char *argv[] = {WAL_CHECK_PATH, "--server", F.d.url, "--volume", name, NULL};
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	assert_int_equal(r.status, 1);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "delete", name, NULL), 0);
	expect_ok("volume delete", &r);
	hx_run_free(&r);

	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct",
				"--out", out_dir(out, sizeof(out)), "--load", "--max", "6",
				"--check", F.check_load, NULL),
			 0);
	expect_ok("crash-states correct --load", &r);
	assert_non_null(strstr(r.out, "every state passed the check"));
	hx_run_free(&r);
	assert_int_equal(crash_volumes("wal-correct", NULL, 0), 0);
}

/* --- bad input: clear errors, nothing destroyed ------------------------------ */

static void crash_states__corrupt_log_refused(void **state)
{
	(void)state;
	size_t len;
	char *b = slurp(F.correct_log, &len);
	char bad[320], out[320];
	snprintf(bad, sizeof(bad), "%s/corrupt.wlog", F.dir);
	/* record 0 is the first data write: header at 128, data from 176 */
	b[176 + 100] ^= 0x40;
	spill(bad, b, len);
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", bad, "wal-correct", "--out",
				out_dir(out, sizeof(out)), NULL),
			 0);
	expect_error("crash-states corrupt", &r, 1, "record 0 at offset 128");
	assert_non_null(strstr(r.err, "data crc mismatch"));
	assert_false(exists(out));
	hx_run_free(&r);
	free(b);
}

static void crash_states__truncated_log_refused(void **state)
{
	(void)state;
	size_t len;
	char *b = slurp(F.correct_log, &len);
	char bad[320], out[320];
	snprintf(bad, sizeof(bad), "%s/truncated.wlog", F.dir);
	struct hx_run r;
	/* cut inside a record, and cut at a record boundary (the END record gone) */
	size_t cuts[] = {len - 100, len - 48};
	for (unsigned i = 0; i < 2; i++) {
		spill(bad, b, cuts[i]);
		assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", bad, "wal-correct",
					"--out", out_dir(out, sizeof(out)), NULL),
				 0);
		expect_error("crash-states truncated", &r, 1, "truncated");
		assert_non_null(strstr(r.err, "record"));
		assert_false(exists(out));
		hx_run_free(&r);
	}
	free(b);
}

static void crash_states__log_of_another_volume_refused(void **state)
{
	(void)state;
	char out[320];
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-buggy",
				"--out", out_dir(out, sizeof(out)), NULL),
			 0);
	expect_error("crash-states other volume", &r, 1, "the log is of volume 'wal-correct'");
	assert_false(exists(out));
	hx_run_free(&r);
	char notlog[320];
	snprintf(notlog, sizeof(notlog), "%s/notlog", F.dir);
	spill(notlog, "just some text\n", 15);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", notlog, "wal-buggy", "--out",
				out_dir(out, sizeof(out)), NULL),
			 0);
	expect_error("crash-states not a log", &r, 1, "not an rdax write log");
	hx_run_free(&r);
}

/*
 * --out in use: refused, the user's file untouched; with --force an earlier
 * run's states are replaced (stale ones removed) and the user's file kept.
 */
static void crash_states__out_dir_not_clobbered(void **state)
{
	(void)state;
	char out[320], keep[400];
	out_dir(out, sizeof(out));
	assert_int_equal(mkdir(out, 0755), 0);
	snprintf(keep, sizeof(keep), "%s/keep.txt", out);
	spill(keep, "mine\n", 5);
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct",
				"--out", out, NULL),
			 0);
	expect_error("crash-states into a used dir", &r, 1, "is not empty");
	assert_int_equal(count_files(out, ".img"), 0);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct",
				"--out", out, "--force", NULL),
			 0);
	expect_ok("crash-states --force", &r);
	assert_int_equal(count_files(out, ".img"), 49);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct",
				"--out", out, "--force", "--max", "10", NULL),
			 0);
	expect_ok("crash-states --force --max 10", &r);
	assert_int_equal(count_files(out, ".img"), 10);
	hx_run_free(&r);
	char *k = slurp(keep, NULL);
	assert_string_equal(k, "mine\n");
	free(k);
}

/* --load when a state's volume name is taken: refused, that volume untouched. */
static void crash_states__load_never_overwrites_a_volume(void **state)
{
	(void)state;
	struct hx_run r;
	const char *name = "wal-correct.crash-000000";
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "create", name, "64K", NULL), 0);
	expect_ok("volume create", &r);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, "precious", 8, &r, "write", name, "0", "--fsync", NULL), 0);
	expect_ok("write", &r);
	hx_run_free(&r);
	char out[320];
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct",
				"--out", out_dir(out, sizeof(out)), "--load", NULL),
			 0);
	expect_error("crash-states --load onto a taken name", &r, 1, "exists");
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", name, "0", "8", NULL), 0);
	expect_ok("read", &r);
	assert_memory_equal(r.out, "precious", 8);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "delete", name, NULL), 0);
	hx_run_free(&r);
}

static void crash_states__usage_errors(void **state)
{
	(void)state;
	struct hx_run r;
	assert_int_equal(
	    hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct", NULL), 0);
	expect_error("crash-states without --out", &r, 2, "--out DIR is required");
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct",
				"--out", "x", "--granularity", "byte", NULL),
			 0);
	expect_error("crash-states --granularity byte", &r, 2, "bad --granularity");
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "crash-states", F.correct_log, "wal-correct",
				"--out", "x", "--max", "0", NULL),
			 0);
	expect_error("crash-states --max 0", &r, 2, "--max");
	hx_run_free(&r);
	assert_false(exists("x"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(crash_states__correct_wal_passes_every_state),
	    cmocka_unit_test(crash_states__control_without_fsyncs_correct_wal_fails),
	    cmocka_unit_test(crash_states__buggy_wal_is_caught),
	    cmocka_unit_test(crash_states__write_granularity),
	    cmocka_unit_test(crash_states__sampled_run_is_reproducible),
	    cmocka_unit_test(crash_states__load_keeps_the_failing_state),
	    cmocka_unit_test(crash_states__corrupt_log_refused),
	    cmocka_unit_test(crash_states__truncated_log_refused),
	    cmocka_unit_test(crash_states__log_of_another_volume_refused),
	    cmocka_unit_test(crash_states__out_dir_not_clobbered),
	    cmocka_unit_test(crash_states__load_never_overwrites_a_volume),
	    cmocka_unit_test(crash_states__usage_errors),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
