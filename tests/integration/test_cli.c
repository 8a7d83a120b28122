/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cli.c -- the rdax command against the real rdaxd
 *
 * One daemon (auto mode, emulated namespace) for most cases; the token and
 * restart cases start their own. Every failure of the command must be one
 * line on stderr and exit status 1 (2 for usage errors).
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "errors.h"
#include "harness.h"
#include "wire.h"

struct fx {
	char dir[256];
	struct hx_daemon d;
	char nbd_listen[64]; /* the daemon's NBD listener, for the "that is NBD" message */
	int nbd_port;
};

static struct fx F;

static int group_setup(void **state)
{
	(void)state;
	memset(&F, 0, sizeof(F));
	if (hx_tmpdir_make("cli", F.dir, sizeof(F.dir)) < 0)
		return -1;
	F.nbd_port = hx_free_port();
	if (F.nbd_port < 0)
		return -1;
	snprintf(F.nbd_listen, sizeof(F.nbd_listen), "nbd://127.0.0.1:%d", F.nbd_port);
	struct hx_daemon_opts o = { .ns_size = "128M",
				    .extra_args = { "--listen", F.nbd_listen, NULL } };
	return hx_daemon_start(&F.d, F.dir, &o) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	int ret = hx_daemon_stop(&F.d);
	if (ret == 0)
		hx_tmpdir_remove(F.dir);
	return ret == 0 ? 0 : -1;
}

/* show -- print a failed run's details (cmocka shows only the assertion) */
static void show(const char *what, const struct hx_run *r)
{
	fprintf(stderr, "rdax %s: exit %d\n  stdout: %.400s\n  stderr: %.400s\n", what, r->status,
		r->out ? r->out : "", r->err ? r->err : "");
}

/* ok -- the run exited 0 with nothing on stderr */
#define ok(what, r)                                         \
	do {                                                \
		if ((r)->status != 0) {                     \
			show(what, r);                      \
			fail_msg("rdax %s failed", what);   \
		}                                           \
	} while (0)

/* one_line_error -- exit @code and exactly one non-empty line on stderr */
static void one_line_error(const char *what, const struct hx_run *r, int code)
{
	if (r->status != code) {
		show(what, r);
		fail_msg("rdax %s: exit %d, expected %d", what, r->status, code);
	}
	const char *nl = strchr(r->err, '\n');
	if (r->err_len < 2 || !nl || nl[1] != '\0') {
		show(what, r);
		fail_msg("rdax %s: stderr is not exactly one line", what);
	}
}

/* has_word -- @needle appears in @hay as a whole word (not inside a longer name) */
static bool has_word(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) {
		bool left = p == hay || !(isalnum((unsigned char)p[-1]) || strchr("._-", p[-1]));
		char c = p[n];
		bool right = !(isalnum((unsigned char)c) || (c && strchr("._-", c)));
		if (left && right)
			return true;
	}
	return false;
}

/* stat_dirty -- the dirty-bytes figure of "rdax stat NAME": the first number after "dirty" */
static long long stat_dirty(const char *name)
{
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "stat", name, NULL), 0);
	ok("stat", &r);
	const char *p = strcasestr(r.out, "dirty");
	if (!p) {
		show("stat", &r);
		fail_msg("rdax stat prints no dirty figure");
	}
	while (*p && !isdigit((unsigned char)*p))
		p++;
	long long v = strtoll(p, NULL, 10);
	hx_run_free(&r);
	return v;
}

static void create(const char *name, const char *size)
{
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "create", name, size, NULL), 0);
	ok("volume create", &r);
	hx_run_free(&r);
}

/* write_read -- write @len pattern bytes at @off (offset given as @off_arg), read back */
static void write_read(const char *vol, uint64_t off, const char *off_arg, size_t len,
		       uint64_t seed, bool fsync)
{
	uint8_t *buf = malloc(len);
	assert_non_null(buf);
	hx_pattern(buf, len, seed, off);
	char offs[32], lens[32];
	snprintf(offs, sizeof(offs), "%llu", (unsigned long long)off);
	snprintf(lens, sizeof(lens), "%zu", len);
	struct hx_run r;
	if (fsync)
		assert_int_equal(hx_cli(&F.d, buf, len, &r, "write", vol, off_arg ? off_arg : offs,
					"--fsync", NULL), 0);
	else
		assert_int_equal(hx_cli(&F.d, buf, len, &r, "write", vol,
					off_arg ? off_arg : offs, NULL), 0);
	ok("write", &r);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", vol, offs, lens, NULL), 0);
	ok("read", &r);
	if (r.out_len != len)
		fail_msg("read %s %s %s: %zu bytes on stdout", vol, offs, lens, r.out_len);
	if (memcmp(r.out, buf, len) != 0)
		fail_msg("read %s %s %s: data differs from what was written", vol, offs, lens);
	hx_run_free(&r);
	free(buf);
}

static void volume__create_list_info_delete(void **state)
{
	(void)state;
	struct hx_run r;
	create("alpha", "1M");
	create("beta", "64K");
	create("gamma.v-2_x", "8M");
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "list", NULL), 0);
	ok("volume list", &r);
	assert_true(has_word(r.out, "alpha"));
	assert_true(has_word(r.out, "beta"));
	assert_true(has_word(r.out, "gamma.v-2_x"));
	hx_run_free(&r);

	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "info", "alpha", NULL), 0);
	ok("volume info", &r);
	assert_true(has_word(r.out, "alpha"));
	/* the size, in bytes or in a binary unit */
	assert_true(strstr(r.out, "1048576") || strstr(r.out, "1.0 MiB") ||
		    strstr(r.out, "1 MiB") || strstr(r.out, "1M"));
	hx_run_free(&r);

	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "delete", "beta", NULL), 0);
	ok("volume delete", &r);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "list", NULL), 0);
	ok("volume list", &r);
	assert_false(has_word(r.out, "beta"));
	assert_true(has_word(r.out, "alpha"));
	hx_run_free(&r);

	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "info", "beta", NULL), 0);
	one_line_error("volume info (deleted)", &r, 1);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "delete", "beta", NULL), 0);
	one_line_error("volume delete (deleted)", &r, 1);
	hx_run_free(&r);
	/* the name can be used again, and the new volume reads as zeros */
	create("beta", "64K");
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "beta", "0", "64K", NULL), 0);
	ok("read", &r);
	assert_int_equal(r.out_len, 65536);
	for (size_t i = 0; i < r.out_len; i++)
		assert_int_equal(r.out[i], 0);
	hx_run_free(&r);
}

static void volume__duplicate_refused(void **state)
{
	(void)state;
	create("dup", "1M");
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "create", "dup", "1M", NULL), 0);
	one_line_error("volume create (duplicate)", &r, 1);
	assert_true(strcasestr(r.err, "exist") != NULL);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "create", "dup", "2M", NULL), 0);
	one_line_error("volume create (duplicate, other size)", &r, 1);
	hx_run_free(&r);
}

static void volume__bad_names_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		".hidden", "a/b", "a b", "semi;colon", "tab\tname", "\xc3\xa9t\xc3\xa9",
		/* 64 characters: one more than allowed */
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hx_run r;
		assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "create", bad[i], "1M", NULL),
				 0);
		one_line_error(bad[i], &r, 1);
		hx_run_free(&r);
	}
	/* empty, and one that looks like an option: refused (as usage or by the server) */
	static const char *const odd[] = { "", "-x" };
	for (size_t i = 0; i < 2; i++) {
		struct hx_run r;
		assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "create", odd[i], "1M", NULL),
				 0);
		if (r.status != 1 && r.status != 2) {
			show("volume create (odd name)", &r);
			fail_msg("volume create '%s': exit %d", odd[i], r.status);
		}
		hx_run_free(&r);
	}
	/* 63 characters is fine */
	create("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "64K");
}

/*
 * ns_bytes -- the size of the fixture's namespace: 128M as asked, or the
 * device's when the harness gave it a devdax namespace (RDAX_IT_NS, whose
 * size /sys tells: a character device has no st_size)
 */
static uint64_t ns_bytes(void)
{
	if (!F.d.devdax)
		return 128ULL << 20;
	struct stat st;
	assert_int_equal(stat(F.d.ns_path, &st), 0);
	char path[96];
	snprintf(path, sizeof(path), "/sys/dev/char/%u:%u/size", major(st.st_rdev),
		 minor(st.st_rdev));
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	unsigned long long size = 0;
	assert_int_equal(fscanf(f, "%llu", &size), 1);
	fclose(f);
	return size & ~4095ULL;
}

static void volume__too_big_is_enospc(void **state)
{
	(void)state;
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "create", "huge", "1T", NULL), 0);
	one_line_error("volume create 1T", &r, 1);
	if (!strcasestr(r.err, "space")) {
		show("volume create 1T", &r);
		fail_msg("ENOSPC expected in the message");
	}
	hx_run_free(&r);
	/* as large as the whole namespace: its metadata takes room */
	char whole[32];
	snprintf(whole, sizeof(whole), "%llu", (unsigned long long)ns_bytes());
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "create", "huge", whole, NULL), 0);
	one_line_error("volume create of the namespace's whole size", &r, 1);
	assert_true(strcasestr(r.err, "space") != NULL);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "info", "huge", NULL), 0);
	one_line_error("volume info huge", &r, 1);
	hx_run_free(&r);
}

static void usage__errors_exit_2(void **state)
{
	(void)state;
	static const char *const cases[][4] = {
		{ "frobnicate", NULL },	 { "volume", NULL },	 { "volume", "explode", NULL },
		{ "write", NULL },	 { "read", "x", NULL },	 { "read", "x", "0", NULL },
		{ "discard", "x", NULL }, { "stat", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *argv[8] = { RDAX_CLI_PATH, "--server", F.d.url };
		int n = 3;
		for (int j = 0; j < 4 && cases[i][j]; j++)
			argv[n++] = cases[i][j];
		argv[n] = NULL;
		struct hx_run r;
		assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
		if (r.status != 2) {
			show(cases[i][0], &r);
			fail_msg("usage error case %zu: exit %d, expected 2", i, r.status);
		}
		hx_run_free(&r);
	}
	/* no arguments at all */
	const char *argv[] = { RDAX_CLI_PATH, NULL };
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	assert_int_equal(r.status, 2);
	hx_run_free(&r);
}

static void size__bad_values_refused(void **state)
{
	(void)state;
	create("sizes", "1M");
	static const char *const bad[] = { "12abc", "-5", "1X", "", "0x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hx_run r;
		assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "sizes", "0", bad[i], NULL), 0);
		if (r.status != 1 && r.status != 2) {
			show("read with a bad length", &r);
			fail_msg("read length '%s': exit %d", bad[i], r.status);
		}
		assert_int_equal(r.out_len, 0);
		hx_run_free(&r);
	}
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "create", "zero", "0", NULL), 0);
	assert_true(r.status == 1 || r.status == 2);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "nosuchvol", "0", "4K", NULL), 0);
	one_line_error("read of a missing volume", &r, 1);
	hx_run_free(&r);
	/* past the end of the volume */
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "sizes", "1M", "1", NULL), 0);
	one_line_error("read past the end", &r, 1);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, "abc", 3, &r, "write", "sizes", "1048574", NULL), 0);
	one_line_error("write past the end", &r, 1);
	hx_run_free(&r);
}

static void io__round_trips(void **state)
{
	(void)state;
	create("rt", "16M");
	static const struct {
		uint64_t off;
		size_t len;
	} cases[] = {
		{ 0, 1 },
		{ 1, 100 },
		{ 4095, 2 },
		{ 4096, 4096 },
		{ 8191, 4097 },
		{ 12345, 65539 },
		{ (2 << 20) - 7, 1 << 20 },	    /* across a 2 MiB boundary */
		{ 3 << 20, 5 * (1 << 20) + 123 }, /* more than max_payload (4 MiB) */
		{ (16 << 20) - 333, 333 },	    /* the last bytes */
		{ 4 << 20, 2 << 20 },		    /* a whole aligned 2 MiB */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		write_read("rt", cases[i].off, NULL, cases[i].len, 100 + i, i % 3 == 0);
	/* K/M suffixes on offsets and lengths */
	write_read("rt", 1 << 20, "1M", 5000, 7, false);
	write_read("rt", 12 << 10, "12K", 4096, 8, true);
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "rt", "12K", "4K", NULL), 0);
	ok("read 12K 4K", &r);
	uint8_t expect[4096];
	hx_pattern(expect, sizeof(expect), 8, 12 << 10);
	assert_int_equal(r.out_len, 4096);
	assert_memory_equal(r.out, expect, 4096);
	hx_run_free(&r);
	/* the whole volume in one read, checked against every write above */
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "rt", "0", "16M", NULL), 0);
	ok("read 0 16M", &r);
	assert_int_equal(r.out_len, 16 << 20);
	hx_run_free(&r);
}

static void io__unwritten_reads_zeros(void **state)
{
	(void)state;
	create("zeros", "4M");
	write_read("zeros", 1 << 20, NULL, 4096, 1, false);
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "zeros", "0", "1M", NULL), 0);
	ok("read", &r);
	assert_int_equal(r.out_len, 1 << 20);
	for (size_t i = 0; i < r.out_len; i++)
		if (r.out[i] != 0)
			fail_msg("byte %zu of a never-written range is 0x%02x", i, r.out[i]);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "zeros", "1052672", "3141632", NULL), 0);
	ok("read", &r);
	for (size_t i = 0; i < r.out_len; i++)
		assert_int_equal(r.out[i], 0);
	hx_run_free(&r);
}

static void fsync__clears_dirty(void **state)
{
	(void)state;
	create("fs", "8M");
	assert_int_equal(stat_dirty("fs"), 0);
	write_read("fs", 4096, NULL, 10000, 3, false);
	assert_true(stat_dirty("fs") > 0);
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "fsync", "fs", NULL), 0);
	ok("fsync", &r);
	hx_run_free(&r);
	assert_int_equal(stat_dirty("fs"), 0);

	/* a range fsync covers its range and leaves the rest dirty */
	write_read("fs", 0, NULL, 4096, 4, false);
	write_read("fs", 4 << 20, NULL, 4096, 5, false);
	long long both = stat_dirty("fs");
	assert_true(both >= 8192);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "fsync", "fs", "0", "4K", NULL), 0);
	ok("fsync range", &r);
	hx_run_free(&r);
	long long left = stat_dirty("fs");
	assert_true(left > 0 && left < both);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "fsync", "fs", "4M", "4K", NULL), 0);
	ok("fsync range", &r);
	hx_run_free(&r);
	assert_int_equal(stat_dirty("fs"), 0);

	/* a durable write leaves nothing dirty */
	write_read("fs", 6 << 20, NULL, 70000, 6, true);
	assert_int_equal(stat_dirty("fs"), 0);

	/* bad fsync ranges */
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "fsync", "fs", "8M", "4K", NULL), 0);
	one_line_error("fsync past the end", &r, 1);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "fsync", "nosuch", NULL), 0);
	one_line_error("fsync of a missing volume", &r, 1);
	hx_run_free(&r);
}

static void discard__reads_zeros(void **state)
{
	(void)state;
	create("dc", "4M");
	write_read("dc", 0, NULL, 3 << 20, 9, true);
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "discard", "dc", "4K", "1M", NULL), 0);
	ok("discard", &r);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "dc", "0", "3M", NULL), 0);
	ok("read", &r);
	assert_int_equal(r.out_len, 3 << 20);
	uint8_t *expect = malloc(3 << 20);
	assert_non_null(expect);
	hx_pattern(expect, 3 << 20, 9, 0);
	memset(expect + 4096, 0, 1 << 20);
	assert_memory_equal(r.out, expect, 3 << 20);
	hx_run_free(&r);
	/* unaligned discard */
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "discard", "dc", "2097151", "3", NULL), 0);
	ok("discard unaligned", &r);
	hx_run_free(&r);
	memset(expect + 2097151, 0, 3);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "dc", "0", "3M", NULL), 0);
	ok("read", &r);
	assert_memory_equal(r.out, expect, 3 << 20);
	hx_run_free(&r);
	free(expect);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "discard", "dc", "4M", "1", NULL), 0);
	one_line_error("discard past the end", &r, 1);
	hx_run_free(&r);
}

/* delete of a volume that a connection holds open: EBUSY, and the volume stays */
static void volume__delete_open_is_ebusy(void **state)
{
	(void)state;
	create("held", "1M");
	write_read("held", 0, NULL, 4096, 11, true);
	struct wconn c;
	assert_int_equal(wire_connect(&c, F.d.port), 0);
	assert_int_equal(wire_hello(&c, NULL, 0), 0);
	uint32_t h;
	assert_int_equal(wire_open(&c, "held", &h, NULL), 0);
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "delete", "held", NULL), 0);
	one_line_error("volume delete (open)", &r, 1);
	if (!strcasestr(r.err, "busy") && !strcasestr(r.err, "open")) {
		show("volume delete (open)", &r);
		fail_msg("EBUSY (busy / open) expected in the message");
	}
	hx_run_free(&r);
	/* data intact, and the holder still works */
	uint8_t buf[4096], expect[4096];
	hx_pattern(expect, sizeof(expect), 11, 0);
	assert_int_equal(wire_read(&c, h, 0, sizeof(buf), buf), 0);
	assert_memory_equal(buf, expect, sizeof(buf));
	/* once the holder's connection is gone, delete works */
	wire_close(&c);
	int tries = 0;
	for (;;) {
		/* the daemon notices the closed connection asynchronously: retry, bounded */
		assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "delete", "held", NULL), 0);
		if (r.status == 0 || ++tries == 50)
			break;
		hx_run_free(&r);
	}
	ok("volume delete after close", &r);
	hx_run_free(&r);
}

struct par_arg {
	int idx;
	const char *vol;
	uint64_t off;
	size_t len;
	int failed;
};

/* par_worker -- one rdax process: write a pattern, then read it back */
static void *par_worker(void *p)
{
	struct par_arg *a = p;
	uint8_t *buf = malloc(a->len);
	hx_pattern(buf, a->len, 1000 + (uint64_t)a->idx, a->off);
	char offs[32], lens[32];
	snprintf(offs, sizeof(offs), "%llu", (unsigned long long)a->off);
	snprintf(lens, sizeof(lens), "%zu", a->len);
	struct hx_run r;
	if (hx_cli(&F.d, buf, a->len, &r, "write", a->vol, offs, NULL) < 0 || r.status != 0) {
		fprintf(stderr, "worker %d: write failed: %s", a->idx, r.err ? r.err : "");
		a->failed = 1;
	}
	hx_run_free(&r);
	if (!a->failed &&
	    (hx_cli(&F.d, NULL, 0, &r, "read", a->vol, offs, lens, NULL) < 0 || r.status != 0 ||
	     r.out_len != a->len || memcmp(r.out, buf, a->len) != 0)) {
		fprintf(stderr, "worker %d: read back differs\n", a->idx);
		a->failed = 1;
	}
	hx_run_free(&r);
	free(buf);
	return NULL;
}

/* 16 rdax processes at once: 8 on their own volumes, 8 on disjoint ranges of a shared one */
static void clients__many_processes_at_once(void **state)
{
	(void)state;
	enum { N = 16 };
	char names[N][16];
	create("shared", "8M");
	struct par_arg args[N];
	pthread_t th[N];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "own%d", i);
		args[i] = (struct par_arg){ .idx = i, .len = 300000 + (size_t)i * 777 };
		if (i < N / 2) {
			create(names[i], "1M");
			args[i].vol = names[i];
			args[i].off = (uint64_t)i * 100;
		} else {
			args[i].vol = "shared";
			args[i].off = (uint64_t)(i - N / 2) * (1 << 20) + 3;
		}
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(pthread_create(&th[i], NULL, par_worker, &args[i]), 0);
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N; i++)
		assert_int_equal(args[i].failed, 0);
	/* the shared volume holds every worker's range, and zeros between them */
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "shared", "0", "8M", NULL), 0);
	ok("read shared", &r);
	uint8_t *expect = calloc(1, 8 << 20);
	assert_non_null(expect);
	for (int i = N / 2; i < N; i++)
		hx_pattern(expect + args[i].off, args[i].len, 1000 + (uint64_t)i, args[i].off);
	assert_memory_equal(r.out, expect, 8 << 20);
	free(expect);
	hx_run_free(&r);
}

/* clean stop (SIGTERM) writes back what was never fsynced; sim mode shows it */
static void restart__data_intact_after_clean_stop(void **state)
{
	(void)state;
	char dir[256];
	assert_int_equal(hx_tmpdir_make("cli-restart", dir, sizeof(dir)), 0);
	struct hx_daemon d;
	struct hx_daemon_opts o = { .ns_size = "64M", .mode = "sim" };
	assert_int_equal(hx_daemon_start(&d, dir, &o), 0);
	size_t len = 3 << 20;
	uint8_t *buf = malloc(len);
	assert_non_null(buf);
	hx_pattern(buf, len, 77, 12345);
	struct hx_run r;
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "volume", "create", "keep", "8M", NULL), 0);
	ok("volume create", &r);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&d, buf, len, &r, "write", "keep", "12345", NULL), 0);
	ok("write", &r);
	hx_run_free(&r);
	assert_int_equal(hx_daemon_stop(&d), 0);

	assert_int_equal(hx_daemon_restart(&d), 0);
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "volume", "info", "keep", NULL), 0);
	ok("volume info after restart", &r);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "read", "keep", "12345", "3M", NULL), 0);
	ok("read after restart", &r);
	assert_int_equal(r.out_len, len);
	if (memcmp(r.out, buf, len) != 0)
		fail_msg("data written before a clean stop is not intact after the restart");
	hx_run_free(&r);
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "read", "keep", "0", "12345", NULL), 0);
	ok("read after restart", &r);
	for (size_t i = 0; i < r.out_len; i++)
		assert_int_equal(r.out[i], 0);
	hx_run_free(&r);
	assert_int_equal(hx_daemon_stop(&d), 0);
	free(buf);
	hx_tmpdir_remove(dir);
}

/* with --token-file: the right token works, a wrong or missing one is refused */
static void token__required(void **state)
{
	(void)state;
	char dir[256], tok[320], wrong[320], crlf[320];
	assert_int_equal(hx_tmpdir_make("cli-token", dir, sizeof(dir)), 0);
	snprintf(tok, sizeof(tok), "%s/token", dir);
	snprintf(wrong, sizeof(wrong), "%s/wrong", dir);
	snprintf(crlf, sizeof(crlf), "%s/crlf", dir);
	assert_int_equal(hx_write_file(tok, "s3cret-token-value\n", 19), 0);
	assert_int_equal(hx_write_file(wrong, "s3cret-token-valuf\n", 19), 0);
	assert_int_equal(hx_write_file(crlf, "s3cret-token-value\r\n", 20), 0);
	struct hx_daemon d;
	struct hx_daemon_opts o = { .ns_size = "32M", .token_file = tok };
	assert_int_equal(hx_daemon_start(&d, dir, &o), 0);
	struct hx_run r;
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "volume", "create", "t", "1M", NULL), 0);
	ok("volume create with the token", &r);
	hx_run_free(&r);
	assert_int_equal(hx_cli_tok(&d, crlf, NULL, 0, &r, "volume", "list", NULL), 0);
	ok("volume list with the token (CRLF file)", &r);
	assert_true(has_word(r.out, "t"));
	hx_run_free(&r);
	assert_int_equal(hx_cli_tok(&d, wrong, NULL, 0, &r, "volume", "list", NULL), 0);
	one_line_error("volume list with a wrong token", &r, 1);
	assert_int_equal(r.out_len, 0);
	hx_run_free(&r);
	assert_int_equal(hx_cli_tok(&d, NULL, NULL, 0, &r, "volume", "create", "u", "1M", NULL), 0);
	one_line_error("volume create without a token", &r, 1);
	hx_run_free(&r);
	assert_int_equal(hx_cli_tok(&d, wrong, "x", 1, &r, "write", "t", "0", NULL), 0);
	one_line_error("write with a wrong token", &r, 1);
	hx_run_free(&r);
	/* nothing of the refused requests happened */
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "volume", "list", NULL), 0);
	ok("volume list", &r);
	assert_false(has_word(r.out, "u"));
	hx_run_free(&r);
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "read", "t", "0", "1", NULL), 0);
	ok("read", &r);
	assert_int_equal(r.out_len, 1);
	assert_int_equal(r.out[0], 0);
	hx_run_free(&r);
	/* raw: HELLO with a wrong token gets RDAX_E_ACCESS, then a closed connection */
	struct wconn c;
	assert_int_equal(wire_connect(&c, d.port), 0);
	assert_int_equal(wire_hello(&c, "nope", 4), RDAX_E_ACCESS);
	assert_true(wire_eof(&c));
	wire_close(&c);
	assert_int_equal(wire_connect(&c, d.port), 0);
	assert_int_equal(wire_hello(&c, NULL, 0), RDAX_E_ACCESS);
	wire_close(&c);
	assert_int_equal(wire_connect(&c, d.port), 0);
	assert_int_equal(wire_hello(&c, "s3cret-token-value", 18), 0);
	wire_close(&c);
	assert_int_equal(hx_daemon_stop(&d), 0);
	hx_tmpdir_remove(dir);
}

/* rdaxd --format PATH: formats a file once, refuses a formatted one without --force */
static void daemon__format(void **state)
{
	(void)state;
	char dir[256], path[320];
	assert_int_equal(hx_tmpdir_make("cli-format", dir, sizeof(dir)), 0);
	snprintf(path, sizeof(path), "%s/fmt.ns", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(ftruncate(fileno(f), 16 << 20), 0);
	fclose(f);
	const char *fmt[] = { RDAXD_PATH, "--format", path, NULL };
	const char *force[] = { RDAXD_PATH, "--format", path, "--force", NULL };
	struct hx_run r;
	assert_int_equal(hx_run_argv(fmt, NULL, 0, &r), 0);
	if (r.status != 0) {
		show("rdaxd --format", &r);
		fail_msg("rdaxd --format of a blank file failed");
	}
	hx_run_free(&r);
	assert_int_equal(hx_run_argv(fmt, NULL, 0, &r), 0);
	if (r.status == 0) {
		show("rdaxd --format (again)", &r);
		fail_msg("rdaxd --format overwrote a formatted namespace without --force");
	}
	hx_run_free(&r);
	/* a daemon on it (no size: the namespace must exist), a volume, then --force wipes it */
	struct hx_daemon d;
	struct hx_daemon_opts o = { .ns_name = "fmt.ns", .ns_size = "16M" };
	assert_int_equal(hx_daemon_start(&d, dir, &o), 0);
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "volume", "create", "f1", "1M", NULL), 0);
	ok("volume create on a formatted namespace", &r);
	hx_run_free(&r);
	assert_int_equal(hx_daemon_stop(&d), 0);
	assert_int_equal(hx_run_argv(force, NULL, 0, &r), 0);
	if (r.status != 0) {
		show("rdaxd --format --force", &r);
		fail_msg("rdaxd --format --force failed");
	}
	hx_run_free(&r);
	assert_int_equal(hx_daemon_restart(&d), 0);
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "volume", "list", NULL), 0);
	ok("volume list", &r);
	assert_false(has_word(r.out, "f1"));
	hx_run_free(&r);
	assert_int_equal(hx_daemon_stop(&d), 0);
	hx_tmpdir_remove(dir);
}

/* --config FILE: its namespace and listen address add to the command line's */
static void daemon__config_file(void **state)
{
	(void)state;
	char dir[256], conf[320], text[1024];
	assert_int_equal(hx_tmpdir_make("cli-config", dir, sizeof(dir)), 0);
	snprintf(conf, sizeof(conf), "%s/rdaxd.conf", dir);
	int port = hx_free_port();
	assert_true(port > 0);
	/* over RDMA (harness.h) the second address is an rdma:// one, like the first */
	char listen[128];
	if (hx_rdma_addr())
		snprintf(listen, sizeof(listen), "rdma://%s:%d", hx_rdma_addr(), port);
	else
		snprintf(listen, sizeof(listen), "tcp://127.0.0.1:%d", port);
	int n = snprintf(text, sizeof(text),
			 "# a comment\n"
			 "namespace = %s/second.ns,size=32M,mode=sim\n"
			 "listen = %s   # trailing comment\n"
			 "log-level = warn\n",
			 dir, listen);
	assert_int_equal(hx_write_file(conf, text, (size_t)n), 0);
	struct hx_daemon d;
	struct hx_daemon_opts o = { .ns_size = "32M", .extra_args = { "--config", conf } };
	assert_int_equal(hx_daemon_start(&d, dir, &o), 0);
	/* both listen addresses serve; two namespaces: 2 x 32M holds what one cannot */
	struct wconn c;
	assert_int_equal(wire_connect(&c, port), 0);
	assert_int_equal(wire_hello(&c, NULL, 0), 0);
	assert_int_equal(wire_create(&c, "c1", 20 << 20), 0);
	assert_int_equal(wire_create(&c, "c2", 20 << 20), 0);
	wire_close(&c);
	struct hx_run r;
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "volume", "list", NULL), 0);
	ok("volume list", &r);
	assert_true(has_word(r.out, "c1") && has_word(r.out, "c2"));
	hx_run_free(&r);
	assert_int_equal(hx_daemon_stop(&d), 0);
	hx_tmpdir_remove(dir);
}

/*
 * json_check -- python3's json module parses @out's stdout and @checks (Python
 * statements about the document d) hold; a failed assert fails the test
 */
static void json_check(const char *what, const struct hx_run *out, const char *checks)
{
	ok(what, out);
	char prog[4096];
	snprintf(prog, sizeof(prog), "import json, sys\nd = json.load(sys.stdin)\n%s\n", checks);
	const char *argv[] = {"/usr/bin/python3", "-c", prog, NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, out->out, out->out_len, &r), 0);
	if (r.status != 0) {
		fprintf(stderr, "rdax %s --json printed: %.600s\npython3: %.1200s\n", what,
			out->out, r.err);
		fail_msg("rdax %s --json: the document is not what docs/cli.md says", what);
	}
	hx_run_free(&r);
}

/* json__every_printing_command -- the schemas of docs/cli.md, checked by a JSON parser */
static void json__every_printing_command(void **state)
{
	(void)state;
	create("js1", "4M");
	create("js2", "8M");
	write_read("js1", 4096, NULL, 10000, 5, false);
	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "list", "--json", NULL), 0);
	json_check("volume list", &r,
		   "assert set(d) == {'volumes'}\n"
		   "v = {x['name']: x for x in d['volumes']}\n"
		   "assert {'js1', 'js2'} <= set(v)\n"
		   "for x in d['volumes']:\n"
		   "    assert set(x) == {'name', 'size', 'namespace', 'namespace_offset'}, x\n"
		   "    assert set(x['namespace']) == {'id', 'path'}\n"
		   "    assert type(x['namespace']['id']) is int\n"
		   "    assert isinstance(x['namespace']['path'], str)\n"
		   "    assert type(x['namespace_offset']) is int and x['namespace_offset'] >= 0\n"
		   "assert v['js1']['size'] == 4 << 20 and v['js2']['size'] == 8 << 20\n");
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "info", "--json", "js2", NULL), 0);
	json_check("volume info", &r,
		   "assert set(d) == {'name', 'size', 'namespace', 'namespace_offset'}\n"
		   "assert d['name'] == 'js2' and d['size'] == 8 << 20\n"
		   "assert type(d['namespace']['id']) is int\n");
	hx_run_free(&r);
	static const char stat_keys[] = "keys = {'name', 'size', 'dirty_bytes', 'entries_4k', "
					"'entries_2m', 'entries_1g', 'tree_bytes', 'fsyncs', "
					"'fsync_bytes'}\n"
					"assert set(d) == keys\n"
					"assert all(type(d[k]) is int for k in keys - {'name'})\n";
	char checks[1024];
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "stat", "js1", "--json", NULL), 0);
	snprintf(checks, sizeof(checks),
		 "%sassert d['name'] == 'js1' and d['size'] == 4 << 20\n"
		 "assert d['dirty_bytes'] >= 10000 and d['entries_4k'] >= 3\n",
		 stat_keys);
	json_check("stat", &r, checks);
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "fsync", "js1", "--json", NULL), 0);
	json_check("fsync", &r,
		   "assert set(d) == {'name', 'written_back'}\n"
		   "assert d['name'] == 'js1' and d['written_back'] >= 10000\n");
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "stat", "js1", "--json", NULL), 0);
	snprintf(checks, sizeof(checks),
		 "%sassert d['dirty_bytes'] == 0 and d['fsyncs'] >= 1\n"
		 "assert d['fsync_bytes'] >= 10000\n",
		 stat_keys);
	json_check("stat after fsync", &r, checks);
	hx_run_free(&r);
	/* a command that prints nothing takes no --json */
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "discard", "js1", "0", "4K", "--json", NULL), 0);
	one_line_error("discard --json", &r, 2);
	hx_run_free(&r);
}

/* file_bytes -- all of file @path (malloc'd), its length in *len */
static uint8_t *file_bytes(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	uint8_t *b = malloc((size_t)n + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

/*
 * import_export__sparse_round_trip -- a sparse file into a volume that held
 * other data (its holes must read as zeros afterwards: DISCARD, not skipped),
 * byte-compared; exported back as a sparse file, byte-compared
 */
static void import_export__sparse_round_trip(void **state)
{
	(void)state;
	/* in units of 1 MiB, or 256 KiB over emulated RDMA (soft-RoCE under TCG is slow) */
	const size_t u = hx_scale(1 << 20, 256 << 10);
	const size_t vsize = 16 * u, fsize = 12 * u, at = 2 * u;
	char vsz[32], at_s[32], late[32], fsz_h[32], vsz_h[32];
	snprintf(vsz, sizeof(vsz), "%zu", vsize);
	snprintf(at_s, sizeof(at_s), "%zu", at);
	snprintf(late, sizeof(late), "%zu", 8 * u);
	snprintf(fsz_h, sizeof(fsz_h), "%.1f MiB", (double)fsize / (1 << 20));
	snprintf(vsz_h, sizeof(vsz_h), "%.1f MiB", (double)vsize / (1 << 20));
	create("sp", vsz);
	create("sp2", vsz);
	write_read("sp", 0, NULL, vsize, 77, true); /* every byte non-zero before the import */
	/* the file: data at 1u (0.3u), a page at 5u+7, the last unit; holes elsewhere */
	char path[400], out[400];
	snprintf(path, sizeof(path), "%s/sparse.img", F.dir);
	snprintf(out, sizeof(out), "%s/export.img", F.dir);
	uint8_t *file = calloc(1, fsize);
	assert_non_null(file);
	const size_t runs[][2] = {{u, 3 * u / 10}, {5 * u + 7, 4096}, {11 * u, u}};
	for (size_t i = 0; i < 3; i++)
		hx_pattern(file + runs[i][0], runs[i][1], i + 1, 0);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(ftruncate(fileno(f), (off_t)fsize), 0);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(fseek(f, (long)runs[i][0], SEEK_SET), 0);
		assert_int_equal(fwrite(file + runs[i][0], 1, runs[i][1], f), runs[i][1]);
	}
	fclose(f);

	struct hx_run r;
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "import", path, "sp", at_s, "--fsync", NULL), 0);
	ok("import --fsync", &r);
	assert_int_equal(r.err_len, 0); /* no progress bar into a pipe */
	hx_run_free(&r);
	assert_int_equal(stat_dirty("sp"), 0); /* --fsync made the copy durable */

	uint8_t *expect = malloc(vsize);
	assert_non_null(expect);
	hx_pattern(expect, vsize, 77, 0);
	memcpy(expect + at, file, fsize);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "read", "sp", "0", vsz, NULL), 0);
	ok("read after import", &r);
	assert_int_equal(r.out_len, vsize);
	const uint8_t *vb = (const uint8_t *)r.out;
	for (size_t i = 0; i < vsize; i++)
		if (vb[i] != expect[i])
			fail_msg("byte %zu after import: 0x%02x, expected 0x%02x", i, vb[i],
				 expect[i]);
	hx_run_free(&r);

	/* export into a file that was larger: cut to the volume, zeros left as holes */
	f = fopen(out, "wb");
	assert_non_null(f);
	assert_int_equal(ftruncate(fileno(f), (off_t)(40 * u)), 0);
	fclose(f);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "export", "sp", out, "--fsync", NULL), 0);
	ok("export", &r);
	hx_run_free(&r);
	size_t got_len;
	uint8_t *got = file_bytes(out, &got_len);
	assert_int_equal(got_len, vsize);
	assert_memory_equal(got, expect, vsize);
	free(got);
	struct stat st;
	assert_int_equal(stat(out, &st), 0);
	/* data: 2u + 0.3u + 8K + 1u + 2u; the ~10.7u of holes are not allocated */
	if ((uint64_t)st.st_blocks * 512 >= 8 * (uint64_t)u)
		fail_msg("export wrote %llu bytes of blocks for ~%zu bytes of data: no holes",
			 (unsigned long long)st.st_blocks * 512, 53 * u / 10);

	/* without --fsync the import is not yet durable: the check above can fail */
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "import", path, "sp2", NULL), 0);
	ok("import", &r);
	hx_run_free(&r);
	assert_true(stat_dirty("sp2") > 0);

	/* too large for the volume: refused before anything is sent, sizes in units */
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "import", path, "sp", late, NULL), 0);
	one_line_error("import past the end", &r, 1);
	assert_non_null(strstr(r.err, fsz_h));
	assert_non_null(strstr(r.err, vsz_h));
	hx_run_free(&r);
	free(expect);
	free(file);
}

/* progress__on_a_terminal -- a bar and a summary on a tty's stderr (a pipe gets none: above) */
static void progress__on_a_terminal(void **state)
{
	(void)state;
	create("tty", "8M");
	char path[400], cmd[1024];
	snprintf(path, sizeof(path), "%s/tty.img", F.dir);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(ftruncate(fileno(f), 6 << 20), 0);
	assert_int_equal(fseek(f, 3 << 20, SEEK_SET), 0);
	assert_int_equal(fputs("data", f) >= 0, 1);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "'%s' --server '%s'%s%s import '%s' tty", RDAX_CLI_PATH, F.d.url,
		 F.d.token_file[0] ? " --token-file " : "", F.d.token_file, path);
	/* script(1) gives the command a pseudo-terminal and copies what it shows */
	const char *argv[] = {"/usr/bin/script", "-qec", cmd, "/dev/null", NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	if (r.status != 0 || !strstr(r.out, "import [") || !strstr(r.out, "100%") ||
	    !strstr(r.out, "6.0 MiB of 6.0 MiB") || !strstr(r.out, "of holes")) {
		show("import on a terminal", &r);
		fail_msg("no progress bar or summary on a terminal");
	}
	hx_run_free(&r);
}

/* errors__name_nbd_and_units -- an NBD port is named as such; a volume too big, in units */
static void errors__name_nbd_and_units(void **state)
{
	(void)state;
	char url[96];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", F.nbd_port);
	const char *argv[] = {RDAX_CLI_PATH, "--server", url, "volume", "list", NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	one_line_error("volume list against an NBD port", &r, 1);
	if (!strstr(r.err, "is an NBD server")) {
		show("volume list against an NBD port", &r);
		fail_msg("the message does not say that the port is an NBD server");
	}
	hx_run_free(&r);
	assert_int_equal(hx_cli(&F.d, NULL, 0, &r, "volume", "create", "huge", "1T", NULL), 0);
	one_line_error("volume create 1T", &r, 1);
	assert_non_null(strstr(r.err, "1.0 TiB"));
	assert_non_null(strstr(r.err, " MiB")); /* the largest free extent */
	hx_run_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(volume__create_list_info_delete),
		cmocka_unit_test(volume__duplicate_refused),
		cmocka_unit_test(volume__bad_names_refused),
		cmocka_unit_test(volume__too_big_is_enospc),
		cmocka_unit_test(usage__errors_exit_2),
		cmocka_unit_test(size__bad_values_refused),
		cmocka_unit_test(io__round_trips),
		cmocka_unit_test(io__unwritten_reads_zeros),
		cmocka_unit_test(fsync__clears_dirty),
		cmocka_unit_test(discard__reads_zeros),
		cmocka_unit_test(volume__delete_open_is_ebusy),
		cmocka_unit_test(clients__many_processes_at_once),
		cmocka_unit_test(restart__data_intact_after_clean_stop),
		cmocka_unit_test(token__required),
		cmocka_unit_test(daemon__format),
		cmocka_unit_test(daemon__config_file),
		cmocka_unit_test(json__every_printing_command),
		cmocka_unit_test(import_export__sparse_round_trip),
		cmocka_unit_test(progress__on_a_terminal),
		cmocka_unit_test(errors__name_nbd_and_units),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
