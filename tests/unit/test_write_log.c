/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_write_log.c -- the write log: round trip, limit, every corruption
 * and truncation refused with the record and offset named, logs of other
 * volumes, concurrent writers, a file that cannot be written
 */
#include <errno.h>
#include <inttypes.h>
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "errors.h"
#include "write_log.h"
#include "tmpdir.h"

static char g_dir[256];
static unsigned g_seq;

static int group_setup(void **state)
{
	(void)state;
	tmpdir_make(g_dir, sizeof(g_dir), "write-log");
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	tmpdir_remove(g_dir);
	return 0;
}

static void new_path(char *buf, size_t len)
{
	snprintf(buf, len, "%s/log%u", g_dir, g_seq++);
}

static struct wlog_volume vol_a(void)
{
	struct wlog_volume v = {.name = "vol-a", .size = 1 << 20, .base_zero = true};
	for (unsigned i = 0; i < WLOG_UUID_SIZE; i++)
		v.uuid[i] = (uint8_t)(0xa0 + i);
	return v;
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(*len ? *len : 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

static void write_file(const char *path, const uint8_t *b, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, len, f), len);
	fclose(f);
}

/*
 * small_log -- a log with one record of each kind: write (100 bytes at
 * 4096), discard (durable, write-zeroes), fsync (mark 2, whole volume), a
 * FUA fsync of a range; closed. Returns its path in @path.
 */
static void small_log(char *path, size_t len, const struct wlog_volume *v)
{
	new_path(path, len);
	struct write_log *wl;
	assert_int_equal(write_log_create(path, v, 1 << 20, &wl), 0);
	uint8_t data[100];
	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 3 + 1);
	assert_int_equal(write_log_write(wl, 4096, data, sizeof(data)), 0);
	assert_int_equal(
	    write_log_discard(wl, 8192, 4096, WLOG_DISCARD_DURABLE | WLOG_DISCARD_ZEROES), 0);
	uint64_t mark = write_log_mark(wl);
	assert_int_equal(mark, 2);
	assert_int_equal(write_log_fsync(wl, mark, 0, 0, 0), 0);
	assert_int_equal(write_log_fsync(wl, 3, 4096, 100, WLOG_FSYNC_FUA), 0);
	assert_int_equal(write_log_records(wl), 4);
	assert_int_equal(write_log_close(&wl), 0);
	assert_null(wl);
}

/* small_log_copy -- small_log's bytes, and a fresh path @bad to write altered copies to */
static uint8_t *small_log_copy(char *bad, size_t badlen, size_t *len)
{
	char path[320];
	struct wlog_volume v = vol_a();
	small_log(path, sizeof(path), &v);
	new_path(bad, badlen);
	return read_file(path, len);
}

/* open_ok -- the log at @path must read */
static struct wlog_view *open_ok(const char *path)
{
	struct wlog_view *lv;
	char err[256] = "";
	int ret = write_log_open(path, &lv, err, sizeof(err));
	if (ret)
		fail_msg("%s: %s", path, err);
	return lv;
}

static void write_log__round_trip(void **state)
{
	(void)state;
	char path[320];
	struct wlog_volume v = vol_a();
	small_log(path, sizeof(path), &v);
	struct wlog_view *lv = open_ok(path);
	assert_string_equal(lv->vol.name, "vol-a");
	assert_int_equal(lv->vol.size, 1 << 20);
	assert_memory_equal(lv->vol.uuid, v.uuid, WLOG_UUID_SIZE);
	assert_true(lv->vol.base_zero);
	assert_int_equal(lv->limit, 1 << 20);
	assert_false(lv->full);
	assert_int_equal(lv->count, 4);
	const struct wlog_record *r = lv->records;
	assert_int_equal(r[0].type, WLOG_WRITE);
	assert_int_equal(r[0].off, 4096);
	assert_int_equal(r[0].len, 100);
	assert_int_equal(r[0].file_off, WLOG_HEADER_SIZE);
	for (unsigned i = 0; i < 100; i++)
		assert_int_equal(r[0].data[i], (uint8_t)(i * 3 + 1));
	assert_int_equal(r[1].type, WLOG_DISCARD);
	assert_int_equal(r[1].flags, WLOG_DISCARD_DURABLE | WLOG_DISCARD_ZEROES);
	assert_int_equal(r[2].type, WLOG_FSYNC);
	assert_int_equal(r[2].mark, 2);
	assert_int_equal(r[2].off, 0);
	assert_int_equal(r[2].len, 1 << 20); /* length 0 was "to the end" */
	assert_int_equal(r[3].flags, WLOG_FSYNC_FUA);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(r[i].seq, i);
	char err[256] = "";
	assert_int_equal(write_log_check_volume(lv, "vol-a", v.uuid, err, sizeof(err)), 0);
	write_log_view_delete(&lv);
	assert_null(lv);
}

static void write_log__bad_arguments(void **state)
{
	(void)state;
	char path[320];
	new_path(path, sizeof(path));
	struct wlog_volume v = vol_a();
	struct write_log *wl = NULL;
	assert_int_equal(write_log_create(path, &v, WLOG_MIN_BYTES - 1, &wl), -EINVAL);
	struct wlog_volume nameless = v;
	nameless.name[0] = '\0';
	assert_int_equal(write_log_create(path, &nameless, 1 << 20, &wl), -EINVAL);
	assert_null(wl);
	assert_int_equal(write_log_create(path, &v, 1 << 20, &wl), 0);
	/* an existing log is never overwritten */
	struct write_log *wl2 = NULL;
	assert_int_equal(write_log_create(path, &v, 1 << 20, &wl2), -EEXIST);
	uint8_t b[8] = {0};
	assert_int_equal(write_log_write(wl, 0, b, 0), -EINVAL);
	assert_int_equal(write_log_write(wl, (1 << 20) - 4, b, 8), -EINVAL);
	assert_int_equal(write_log_write(wl, UINT64_MAX - 2, b, 8), -EINVAL);
	assert_int_equal(write_log_discard(wl, 0, 8, 0x80), -EINVAL);
	assert_int_equal(write_log_fsync(wl, 1, 0, 0, 0), -EINVAL); /* mark in the future */
	assert_int_equal(write_log_fsync(wl, 0, 0, 0, WLOG_FSYNC_FLUSH | WLOG_FSYNC_FUA), -EINVAL);
	/* refused calls record nothing and the log goes on */
	assert_int_equal(write_log_records(wl), 0);
	assert_int_equal(write_log_write(wl, 0, b, 8), 0);
	assert_int_equal(write_log_close(&wl), 0);
	assert_int_equal(write_log_close(&wl), 0); /* NULL: nothing */
}

/*
 * The limit: records until one would not fit; then FULL, -ENOSPC for it and
 * every later call, a file within the limit, and the reader sees the
 * records that were accepted and that the log filled.
 */
static void write_log__full(void **state)
{
	(void)state;
	char path[320];
	new_path(path, sizeof(path));
	struct wlog_volume v = vol_a();
	struct write_log *wl;
	uint64_t limit = WLOG_HEADER_SIZE + 10 * (WLOG_RECORD_SIZE + 64) + WLOG_RECORD_SIZE;
	assert_int_equal(write_log_create(path, &v, limit, &wl), 0);
	uint8_t b[64];
	memset(b, 7, sizeof(b));
	unsigned ok = 0;
	int ret;
	while ((ret = write_log_write(wl, ok * 64, b, sizeof(b))) == 0)
		ok++;
	assert_int_equal(ret, -ENOSPC);
	assert_int_equal(ok, 10);
	assert_int_equal(write_log_write(wl, 0, b, 1), -ENOSPC);
	assert_int_equal(write_log_fsync(wl, write_log_mark(wl), 0, 0, 0), -ENOSPC);
	assert_int_equal(write_log_discard(wl, 0, 64, 0), -ENOSPC);
	assert_true(write_log_size(wl) <= limit);
	assert_int_equal(write_log_close(&wl), 0);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true((uint64_t)st.st_size <= limit);
	struct wlog_view *lv = open_ok(path);
	assert_true(lv->full);
	assert_int_equal(lv->count, 10);
	write_log_view_delete(&lv);
}

/*
 * Every bit of a small log flipped, one at a time: the reader refuses each
 * copy, and for a byte inside a record it names that record and the
 * offset where the record starts.
 */
static void write_log__every_corruption_refused(void **state)
{
	(void)state;
	char bad[320];
	size_t len;
	uint8_t *orig = small_log_copy(bad, sizeof(bad), &len);
	/* record starts: header, write (48 + 100), then three 48-byte records and END */
	uint64_t starts[] = {128, 276, 324, 372, 420};
	assert_int_equal(len, 468);
	for (size_t i = 0; i < len; i++) {
		for (unsigned bit = 0; bit < 8; bit++) {
			orig[i] ^= (uint8_t)(1U << bit);
			write_file(bad, orig, len);
			orig[i] ^= (uint8_t)(1U << bit);
			struct wlog_view *lv = NULL;
			char err[256] = "";
			int ret = write_log_open(bad, &lv, err, sizeof(err));
			if (ret == 0)
				fail_msg("flip of bit %u of byte %zu not detected", bit, i);
			assert_null(lv);
			assert_true(err[0] != '\0');
			if (i < WLOG_HEADER_SIZE)
				continue;
			unsigned rec = 0;
			while (rec + 1 < 5 && starts[rec + 1] <= i)
				rec++;
			char want[64];
			snprintf(want, sizeof(want), "record %u at offset %" PRIu64 "", rec,
				 starts[rec]);
			if (!strstr(err, want))
				fail_msg("byte %zu: '%s' does not name '%s'", i, err, want);
		}
	}
	free(orig);
}

/* Cut at every length: refused, saying truncated (or not a log at all, before the magic). */
static void write_log__every_truncation_refused(void **state)
{
	(void)state;
	char bad[320];
	size_t len;
	uint8_t *orig = small_log_copy(bad, sizeof(bad), &len);
	for (size_t cut = 0; cut < len; cut++) {
		write_file(bad, orig, cut);
		struct wlog_view *lv = NULL;
		char err[256] = "";
		int ret = write_log_open(bad, &lv, err, sizeof(err));
		if (cut < WLOG_MAGIC_LEN) {
			assert_int_equal(ret, -RDAX_E_NOT_RDAX);
			continue;
		}
		assert_int_equal(ret, -EBADMSG);
		if (!strstr(err, "truncated"))
			fail_msg("cut at %zu: '%s'", cut, err);
		if (cut > WLOG_HEADER_SIZE && !strstr(err, "record"))
			fail_msg("cut at %zu: '%s' names no record", cut, err);
	}
	/* and bytes after the end record */
	uint8_t *longer = malloc(len + 1);
	memcpy(longer, orig, len);
	longer[len] = 0;
	write_file(bad, longer, len + 1);
	struct wlog_view *lv = NULL;
	char err[256] = "";
	assert_int_equal(write_log_open(bad, &lv, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "after the end record"));
	free(longer);
	free(orig);
}

/* A record copied from the log of another volume fails its crc. */
static void write_log__record_of_another_log_refused(void **state)
{
	(void)state;
	char a[320], b[320];
	struct wlog_volume va = vol_a(), vb = vol_a();
	snprintf(vb.name, sizeof(vb.name), "vol-b");
	small_log(a, sizeof(a), &va);
	small_log(b, sizeof(b), &vb);
	size_t la, lb;
	uint8_t *ba = read_file(a, &la), *bb = read_file(b, &lb);
	assert_int_equal(la, lb);
	memcpy(ba + 324, bb + 324, WLOG_RECORD_SIZE); /* record 2 of b into a */
	write_file(a, ba, la);
	struct wlog_view *lv = NULL;
	char err[256] = "";
	assert_int_equal(write_log_open(a, &lv, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "record 2 at offset 324: header crc mismatch"));
	free(ba);
	free(bb);
}

/* The log of another volume, or of an earlier volume of the same name. */
static void write_log__check_volume(void **state)
{
	(void)state;
	char path[320];
	struct wlog_volume v = vol_a();
	small_log(path, sizeof(path), &v);
	struct wlog_view *lv = open_ok(path);
	char err[256] = "";
	assert_int_equal(write_log_check_volume(lv, "vol-b", NULL, err, sizeof(err)), -EXDEV);
	assert_non_null(strstr(err, "'vol-a'"));
	assert_non_null(strstr(err, "not of 'vol-b'"));
	uint8_t other[WLOG_UUID_SIZE] = {1};
	assert_int_equal(write_log_check_volume(lv, "vol-a", other, err, sizeof(err)), -EXDEV);
	assert_non_null(strstr(err, "uuid"));
	write_log_view_delete(&lv);
}

/* Not a log; another format version; a corrupt header. */
static void write_log__header_refused(void **state)
{
	(void)state;
	char bad[320];
	size_t len;
	uint8_t *b = small_log_copy(bad, sizeof(bad), &len);
	struct wlog_view *lv = NULL;
	char err[256] = "";
	write_file(bad, (const uint8_t *)"hello, world, this is not a log", 31);
	assert_int_equal(write_log_open(bad, &lv, err, sizeof(err)), -RDAX_E_NOT_RDAX);
	assert_non_null(strstr(err, "not an rdax write log"));
	b[8] = 2; /* version 2 */
	write_file(bad, b, len);
	assert_int_equal(write_log_open(bad, &lv, err, sizeof(err)), -RDAX_E_VERSION);
	assert_non_null(strstr(err, "version 2"));
	b[8] = 1;
	b[40] ^= 1; /* the name */
	write_file(bad, b, len);
	assert_int_equal(write_log_open(bad, &lv, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "header at offset 0: crc mismatch"));
	assert_int_equal(write_log_open("/nonexistent/log", &lv, err, sizeof(err)), -ENOENT);
	free(b);
}

/*
 * Several threads writing one log at once: every record there once, the
 * sequence numbers in order (the reader checks), each thread's records in
 * its own call order, and fsync marks never past their own record.
 */
#define THREADS	   4
#define PER_THREAD 400

struct writer_arg {
	struct write_log *wl;
	unsigned id;
};

static void *writer(void *p)
{
	struct writer_arg *a = p;
	uint8_t b[32];
	for (unsigned i = 0; i < PER_THREAD; i++) {
		memset(b, (int)(a->id * 16 + i % 16), sizeof(b));
		uint64_t off = ((uint64_t)a->id * PER_THREAD + i) * 64;
		if (write_log_write(a->wl, off, b, sizeof(b)) != 0)
			return (void *)1;
		if (i % 50 == 0) {
			uint64_t mark = write_log_mark(a->wl);
			if (write_log_fsync(a->wl, mark, off, 64, 0) != 0)
				return (void *)1;
		}
	}
	return NULL;
}

static void write_log__concurrent_writers(void **state)
{
	(void)state;
	char path[320];
	new_path(path, sizeof(path));
	struct wlog_volume v = vol_a();
	struct write_log *wl;
	assert_int_equal(write_log_create(path, &v, 64 << 20, &wl), 0);
	pthread_t th[THREADS];
	struct writer_arg args[THREADS];
	for (unsigned i = 0; i < THREADS; i++) {
		args[i] = (struct writer_arg){wl, i};
		assert_int_equal(pthread_create(&th[i], NULL, writer, &args[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		void *r;
		pthread_join(th[i], &r);
		assert_null(r);
	}
	assert_int_equal(write_log_close(&wl), 0);
	struct wlog_view *lv = open_ok(path);
	assert_int_equal(lv->count, THREADS * (PER_THREAD + PER_THREAD / 50));
	unsigned next[THREADS] = {0};
	for (uint64_t i = 0; i < lv->count; i++) {
		const struct wlog_record *r = &lv->records[i];
		if (r->type == WLOG_FSYNC) {
			assert_true(r->mark <= r->seq);
			continue;
		}
		unsigned id = (unsigned)(r->off / 64 / PER_THREAD);
		assert_int_equal(r->off / 64 % PER_THREAD, next[id]);
		assert_int_equal(r->data[0], (uint8_t)(id * 16 + next[id] % 16));
		next[id]++;
	}
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(next[i], PER_THREAD);
	write_log_view_delete(&lv);
}

/*
 * A log file that cannot be written (here: past RLIMIT_FSIZE, -EFBIG): the
 * call fails, the log stops with that error, the file is cut back to its
 * last whole record, and the reader calls it truncated.
 */
static void write_log__write_error_stops_the_log(void **state)
{
	(void)state;
	char path[320];
	new_path(path, sizeof(path));
	struct wlog_volume v = vol_a();
	struct write_log *wl;
	assert_int_equal(write_log_create(path, &v, 1 << 20, &wl), 0);
	uint8_t b[200];
	memset(b, 1, sizeof(b));
	assert_int_equal(write_log_write(wl, 0, b, sizeof(b)), 0);
	uint64_t good = write_log_size(wl);
	struct rlimit old, small = {.rlim_cur = good + 100, .rlim_max = RLIM_INFINITY};
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small.rlim_max = old.rlim_max;
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	int ret = write_log_write(wl, 0, b, sizeof(b));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(ret, -EFBIG);
	assert_int_equal(write_log_write(wl, 0, b, 8), -EFBIG);
	assert_int_equal(write_log_size(wl), good);
	assert_int_equal(write_log_close(&wl), -EFBIG);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal((uint64_t)st.st_size, good);
	struct wlog_view *lv = NULL;
	char err[256] = "";
	assert_int_equal(write_log_open(path, &lv, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "truncated: no end record after record 1"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(write_log__round_trip),
	    cmocka_unit_test(write_log__bad_arguments),
	    cmocka_unit_test(write_log__full),
	    cmocka_unit_test(write_log__every_corruption_refused),
	    cmocka_unit_test(write_log__every_truncation_refused),
	    cmocka_unit_test(write_log__record_of_another_log_refused),
	    cmocka_unit_test(write_log__check_volume),
	    cmocka_unit_test(write_log__header_refused),
	    cmocka_unit_test(write_log__concurrent_writers),
	    cmocka_unit_test(write_log__write_error_stops_the_log),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
