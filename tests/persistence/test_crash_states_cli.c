/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_crash_states_cli.c -- rdax crash-states on the examples' write logs
 *
 * One daemon with --write-log; wal_correct and wal_buggy (examples/) each
 * run once against it, three transactions each, and the daemon's write log
 * of each run is what crash-states reads. The programs also record
 * themselves on the client side (wlog_record.c, linked in), and the two
 * logs must hold the same records: the daemon's acknowledgement order is
 * the program's call order for a program that waits for each call. Then:
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
 * And the daemon's side of write logs: one log per open period, a full log
 * (--write-log-max) ends with FULL and the requests are served on, and the
 * state a real power cut (rdax powercut) leaves is one of the crash states
 * of the log that the cut ended -- with skip-writeback as its control,
 * under which none of them is.
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
#include "librdax.h"
#include "write_log.h"

struct fx {
	char dir[256];
	struct hx_daemon d;
	char logs[300];				     /* the daemon's --write-log DIR */
	char correct_log[320], buggy_log[320];	     /* the daemon's logs of the two runs */
	char client_correct[320], client_buggy[320]; /* the programs' own recordings */
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
	snprintf(F.logs, sizeof(F.logs), "%s/logs", F.dir);
	struct hx_daemon_opts o = {.ns_size = "128M", .extra_args = {"--write-log", F.logs}};
	if (hx_daemon_start(&F.d, F.dir, &o))
		return -1;
	/* each program opens its volume once: its run is the volume's first log */
	snprintf(F.correct_log, sizeof(F.correct_log), "%s/wal-correct.1.wlog", F.logs);
	snprintf(F.buggy_log, sizeof(F.buggy_log), "%s/wal-buggy.1.wlog", F.logs);
	snprintf(F.client_correct, sizeof(F.client_correct), "%s/client-correct.wlog", F.dir);
	snprintf(F.client_buggy, sizeof(F.client_buggy), "%s/client-buggy.wlog", F.dir);
	snprintf(F.check, sizeof(F.check), "'%s' \"$1\"", WAL_CHECK_PATH);
	snprintf(F.check_load, sizeof(F.check_load), "'%s' --volume \"$RDAX_STATE_VOLUME\"",
		 WAL_CHECK_PATH);
	if (record(WAL_CORRECT_PATH, "wal-correct", F.client_correct) ||
	    record(WAL_BUGGY_PATH, "wal-buggy", F.client_buggy))
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

/* --- the daemon's log ----------------------------------------------------- */

/* same_records -- the daemon's log @dlog and the client's @clog hold the same records */
static void same_records(const char *dlog, const char *clog, const char *vol)
{
	struct wlog_view *a = NULL, *b = NULL;
	char err[256];
	if (write_log_open(dlog, &a, err, sizeof(err)))
		fail_msg("%s: %s", dlog, err);
	if (write_log_open(clog, &b, err, sizeof(err)))
		fail_msg("%s: %s", clog, err);
	assert_string_equal(a->vol.name, vol);
	assert_string_equal(b->vol.name, vol);
	assert_int_equal(a->vol.size, b->vol.size);
	assert_true(a->vol.base_zero); /* created by the program, first opened by it */
	assert_false(a->full);
	if (a->count != b->count)
		fail_msg("%s: %" PRIu64 " records, the client recorded %" PRIu64, dlog, a->count,
			 b->count);
	for (uint64_t i = 0; i < a->count; i++) {
		const struct wlog_record *x = &a->records[i], *y = &b->records[i];
		if (x->type != y->type || x->flags != y->flags || x->off != y->off ||
		    x->len != y->len || x->mark != y->mark ||
		    (x->type == WLOG_WRITE && memcmp(x->data, y->data, x->len) != 0))
			fail_msg("%s: record %" PRIu64 " is %s [%" PRIu64 ", +%" PRIu64
				 "] mark %" PRIu64 ", the client recorded %s [%" PRIu64
				 ", +%" PRIu64 "] mark %" PRIu64,
				 dlog, i, wlog_type_name(x->type), x->off, x->len, x->mark,
				 wlog_type_name(y->type), y->off, y->len, y->mark);
	}
	printf("%s: %" PRIu64 " records, as the program recorded them\n", dlog, a->count);
	write_log_view_delete(&a);
	write_log_view_delete(&b);
}

static void write_log__daemon_log_matches_the_program(void **state)
{
	(void)state;
	same_records(F.correct_log, F.client_correct, "wal-correct");
	same_records(F.buggy_log, F.client_buggy, "wal-buggy");
	/* one open period each: no second log */
	char second[400];
	snprintf(second, sizeof(second), "%s/wal-correct.2.wlog", F.logs);
	assert_false(exists(second));
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

/* --- the daemon's side: full logs, periods, the real cut against the model ---- */

/*
 * start_own -- a second daemon for one test, in a directory of its own,
 * recording into DIR/logs, with volume @vol of @size created
 */
static void start_own(struct hx_daemon *d, char *dir, size_t len, const char *tag,
		      struct hx_daemon_opts *o, char *logs, size_t logs_len, const char *vol,
		      const char *size)
{
	assert_int_equal(hx_tmpdir_make(tag, dir, len), 0);
	snprintf(logs, logs_len, "%s/logs", dir);
	o->extra_args[0] = "--write-log";
	o->extra_args[1] = logs;
	assert_int_equal(hx_daemon_start(d, dir, o), 0);
	struct hx_run r;
	assert_int_equal(hx_cli(d, NULL, 0, &r, "volume", "create", vol, size, NULL), 0);
	expect_ok("volume create", &r);
	hx_run_free(&r);
}

static void stop_own(struct hx_daemon *d, const char *dir)
{
	int ret = hx_daemon_stop(d);
	if (ret)
		hx_daemon_dump_log(d, 8192);
	assert_int_equal(ret, 0);
	hx_tmpdir_remove(dir);
}

/*
 * write_log__full_log_serves_on -- a 64 KiB limit and 192 KiB written: the
 * log ends with FULL after the 7 writes that fit, the daemon says so once, the writes are
 * acknowledged and readable, crash-states reads the log and says it is a prefix
 */
static void write_log__full_log_serves_on(void **state)
{
	(void)state;
	char dir[256], logs[300], log[400], out[400];
	struct hx_daemon d;
	struct hx_daemon_opts o = {.ns_size = "64M", .log_level = "info"};
	o.extra_args[2] = "--write-log-max";
	o.extra_args[3] = "64K";
	start_own(&d, dir, sizeof(dir), "wlog-full", &o, logs, sizeof(logs), "f", "1M");
	struct hx_run r;
	/* 24 writes of 8 KiB on one connection: the log has room for 7 */
	size_t len = 24 * 8192;
	uint8_t *data = malloc(len);
	assert_non_null(data);
	hx_pattern(data, len, 3, 0);
	struct rdax_conn *c = NULL;
	struct rdax_volume *v = NULL;
	assert_int_equal(rdax_connect(d.url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, "f", &v), 0);
	for (size_t off = 0; off < len; off += 8192)
		assert_int_equal(rdax_write(v, off, data + off, 8192, 0), 0);
	assert_int_equal(rdax_fsync(v, 0, 0, NULL), 0);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "read", "f", "0", "192K", NULL), 0);
	expect_ok("read", &r);
	assert_int_equal(r.out_len, len);
	assert_memory_equal(r.out, data, len);
	hx_run_free(&r);
	free(data);

	snprintf(log, sizeof(log), "%s/f.1.wlog", logs);
	struct wlog_view *view = NULL;
	char err[256];
	if (write_log_open(log, &view, err, sizeof(err)))
		fail_msg("%s: %s", log, err);
	assert_true(view->full);
	assert_true(view->limit == 64 << 10);
	assert_int_equal(view->count, 7);
	for (uint64_t i = 0; i < view->count; i++)
		assert_int_equal(view->records[i].off, i * 8192);
	printf("full log: %" PRIu64 " records kept\n", view->count);
	write_log_view_delete(&view);
	char *dlog = slurp(d.log_path, NULL);
	const char *first = strstr(dlog, "is full");
	assert_non_null(first);
	assert_null(strstr(first + 1, "is full")); /* said once */
	free(dlog);

	snprintf(out, sizeof(out), "%s/states", dir);
	assert_int_equal(
	    hx_cli(&d, NULL, 0, &r, "crash-states", log, "f", "--out", out, "--max", "5", NULL), 0);
	expect_ok("crash-states on a full log", &r);
	assert_non_null(strstr(r.out, "the log stopped at its size limit"));
	hx_run_free(&r);
	stop_own(&d, dir);
}

/* the writes of write_log__cut_state_is_a_crash_state, in order */
static const struct {
	uint64_t off, len;
	bool fsync; /* fsync [off, off + len) after it */
} cut_writes[] = {
    {0, 200, true},	   /* lines 0-3, durable */
    {4096, 100, false},	   /* lines of another page, never fsynced */
    {130, 60, false},	   /* over a durable line, not fsynced */
    {8192 + 64, 64, true}, /* durable */
    {8192, 128, false},	   /* over the durable line and one more */
};

/*
 * cut_vs_model -- a run on one connection (the writes above), cut by `rdax
 * powercut` with the connection open, which ends the volume's log; the
 * volume's content after the cut must equal one of the states crash-states
 * makes of that log for a cut at its end (the last crash interval: the
 * manifest's before_record is null). Returns whether one matched.
 */
static bool cut_vs_model(const char *faults)
{
	char dir[256], logs[300], log[400], out[400], img[400];
	struct hx_daemon d;
	struct hx_daemon_opts o = {.ns_size = "64M", .mode = "sim", .faults = faults};
	o.extra_args[2] = "--allow-powercut";
	start_own(&d, dir, sizeof(dir), "wlog-cut", &o, logs, sizeof(logs), "c", "64K");
	struct hx_run r;

	struct rdax_conn *c = NULL;
	struct rdax_volume *v = NULL;
	assert_int_equal(rdax_connect(d.url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, "c", &v), 0);
	uint8_t buf[256];
	for (unsigned i = 0; i < sizeof(cut_writes) / sizeof(cut_writes[0]); i++) {
		hx_pattern(buf, cut_writes[i].len, 100 + i, cut_writes[i].off);
		assert_int_equal(rdax_write(v, cut_writes[i].off, buf, cut_writes[i].len, 0), 0);
		if (cut_writes[i].fsync)
			assert_int_equal(rdax_fsync(v, cut_writes[i].off, cut_writes[i].len, NULL),
					 0);
	}
	/* the cut while this connection holds the volume: its log ends there */
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "powercut", NULL), 0);
	expect_ok("powercut", &r);
	hx_run_free(&r);
	assert_int_not_equal(rdax_read(v, 0, buf, 1), 0); /* dropped */
	rdax_volume_close(&v);
	rdax_disconnect(&c);

	snprintf(img, sizeof(img), "%s/after-cut.img", dir);
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "export", "c", img, NULL), 0);
	expect_ok("export after the cut", &r);
	hx_run_free(&r);
	snprintf(log, sizeof(log), "%s/c.1.wlog", logs);
	snprintf(out, sizeof(out), "%s/states", dir);
	/*
	 * over tcp:// every state (55); over rdma:// a one-sided write is
	 * recorded as the whole lines its notice names, not only its bytes,
	 * which may make more states than the cap: a sample, in
	 * which each sampled interval starts with its floor state -- what a
	 * cut leaves in sim mode when no fsync ran past the last one recorded
	 */
	assert_int_equal(
	    hx_cli(&d, NULL, 0, &r, "crash-states", log, "c", "--out", out, "--max", "200", NULL),
	    0);
	expect_ok("crash-states of the cut's log", &r);
	if (!hx_rdma_addr())
		assert_non_null(strstr(r.out, "every one there is"));
	hx_run_free(&r);

	size_t ilen;
	char *real = slurp(img, &ilen);
	assert_int_equal(ilen, 64 << 10);
	uint64_t n = summary_u64(out, "produced");
	bool found = false;
	for (uint64_t i = 0; i < n && !found; i++) {
		char p[450];
		size_t slen;
		snprintf(p, sizeof(p), "%s/state-%06" PRIu64 ".json", out, i);
		char *manifest = slurp(p, NULL);
		bool at_end = strstr(manifest, "\"before_record\":null") != NULL;
		free(manifest);
		if (!at_end)
			continue;
		snprintf(p, sizeof(p), "%s/state-%06" PRIu64 ".img", out, i);
		char *st = slurp(p, &slen);
		found = slen == ilen && memcmp(st, real, ilen) == 0;
		if (found)
			printf("the cut left state %" PRIu64 " of %" PRIu64 "\n", i, n);
		free(st);
	}
	free(real);
	stop_own(&d, dir);
	return found;
}

static void write_log__cut_state_is_a_crash_state(void **state)
{
	(void)state;
	assert_true(cut_vs_model(NULL));
}

/* the control: an fsync that skips a write-back leaves a state the model does not allow */
static void write_log__control_skip_writeback_state_is_not(void **state)
{
	(void)state;
	assert_false(cut_vs_model("skip-writeback"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(write_log__daemon_log_matches_the_program),
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
	    cmocka_unit_test(write_log__full_log_serves_on),
	    cmocka_unit_test(write_log__cut_state_is_a_crash_state),
	    cmocka_unit_test(write_log__control_skip_writeback_state_is_not),
	};
	/* RDAX_IT_ONLY=PATTERN: those tests (the VM suite runs the cut over rdma://) */
	const char *only = getenv("RDAX_IT_ONLY");
	if (only && *only)
		cmocka_set_test_filter(only);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
