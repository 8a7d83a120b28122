/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nbd_interop.c -- rdaxd's NBD export driven by real clients
 *
 * Clients nobody on this project wrote, from Debian: qemu-img (info,
 * convert, compare), nbdcopy and nbdinfo (libnbd), nbdsh scripts
 * (the scripts/ directory: options, I/O, errors), fio's nbd engine with verify=, over
 * TCP and the unix socket. Where a tool's own check decides (qemu-img
 * compare, fio verify), a control corrupts the volume on purpose and the
 * same check must fail. Also: the unix socket's mode, stale and live socket
 * handling, and the token rule (a daemon with a token refuses a
 * non-loopback nbd:// listener).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "nbdtest.h"

#define MiB	 (1ULL << 20)
#define VOL_SIZE (16 * MiB)
#define IMG_SIZE (8 * MiB)

struct ctx {
	char dir[256];
	struct nt_daemon n;
};

static struct ctx *g;

static int setup(void **state)
{
	static struct ctx c;
	memset(&c, 0, sizeof(c));
	nt_env_init();
	if (hx_tmpdir_make("nbd-interop", c.dir, sizeof(c.dir)))
		return -1;
	if (nt_daemon_start(&c.n, c.dir, NULL))
		return -1;
	const char *vols[] = {"vol", "img", "copy", "copy2", "fio", "fio2", "ctl"};
	const uint64_t sizes[] = {VOL_SIZE, IMG_SIZE, 24 * MiB, 24 * MiB, 16 * MiB, 16 * MiB, MiB};
	for (unsigned i = 0; i < sizeof(vols) / sizeof(vols[0]); i++)
		if (nt_volume_create(&c.n, vols[i], sizes[i]))
			return -1;
	g = &c;
	*state = &c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	int ret = hx_daemon_stop(&c->n.d);
	if (ret)
		hx_daemon_dump_log(&c->n.d, 8192);
	/* the unix socket goes with the daemon */
	struct stat st;
	if (ret == 0 && lstat(c->n.sock_path, &st) == 0) {
		fprintf(stderr, "%s still exists after the daemon stopped\n", c->n.sock_path);
		ret = -1;
	}
	hx_tmpdir_remove(c->dir);
	return ret ? -1 : 0;
}

/* path_in -- DIR/@name */
static const char *path_in(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", g->dir, name);
	return buf;
}

/* run_ok -- run a tool, assert exit 0; returns the run (free it) */
static void run_ok(const char *const argv[], struct hx_run *r)
{
	assert_int_equal(nt_run(argv, r, false), 0);
	assert_int_equal(r->status, 0);
}

/* make_image -- @len bytes: random data, a zero region and a 0xff region */
static uint8_t *make_image(size_t len, uint64_t seed)
{
	uint8_t *b = malloc(len);
	assert_non_null(b);
	hx_pattern(b, len, seed, 0);
	memset(b + len / 4, 0, len / 4);	 /* a hole the clients may send as zeroes */
	memset(b + len / 2 + 4096, 0xff, 65536); /* and a constant region */
	return b;
}

/* expect_file -- the file at @path holds exactly @len bytes of @want */
static void expect_file(const char *path, const uint8_t *want, size_t len)
{
	uint8_t *got;
	size_t got_len;
	assert_int_equal(nt_read_file(path, &got, &got_len), 0);
	assert_int_equal(got_len, len);
	assert_memory_equal(got, want, len);
	free(got);
}

/* poke -- write @len bytes of @byte at @off of @export (nbdsh), flushed */
static void poke(const char *export, uint64_t off, unsigned len, unsigned byte)
{
	char uri[128], e_uri[160], e_off[64], e_len[32], e_byte[32];
	snprintf(e_uri, sizeof(e_uri), "NT_URI=%s", nt_uri(&g->n, export, uri, sizeof(uri)));
	snprintf(e_off, sizeof(e_off), "NT_OFF=%llu", (unsigned long long)off);
	snprintf(e_len, sizeof(e_len), "NT_LEN=%u", len);
	snprintf(e_byte, sizeof(e_byte), "NT_BYTE=%u", byte);
	const char *env[] = {e_uri, e_off, e_len, e_byte, NULL};
	struct hx_run r;
	assert_int_equal(nt_nbdsh("scripts/poke.py", env, &r), 0);
	assert_int_equal(r.status, 0);
	hx_run_free(&r);
}

static void qemu_img__info_convert_compare(void **state)
{
	char raw[320], qcow[320], junk[320], uri[128];
	nt_uri(&g->n, "img", uri, sizeof(uri));
	uint8_t *img = make_image(IMG_SIZE, 11);
	assert_int_equal(hx_write_file(path_in("img.raw", raw, sizeof(raw)), img, IMG_SIZE), 0);
	uint8_t *j = malloc(IMG_SIZE);
	assert_non_null(j);
	memset(j, 0xee, IMG_SIZE);
	assert_int_equal(hx_write_file(path_in("junk.raw", junk, sizeof(junk)), j, IMG_SIZE), 0);
	free(j);
	struct hx_run r;

	const char *info[] = {"qemu-img", "info", uri, NULL};
	run_ok(info, &r);
	assert_non_null(strstr(r.out, "virtual size: 8 MiB (8388608 bytes)"));
	hx_run_free(&r);

	/* junk first, so the image's zeros must really be written (write_zeroes) */
	const char *fill[] = {"qemu-img", "convert", "-n", "-f", "raw",
			      "-O",	  "raw",     junk, uri,	 NULL};
	run_ok(fill, &r);
	hx_run_free(&r);
	/* a qcow2 of the image, converted into the volume */
	const char *mkq[] = {"qemu-img", "convert", "-f", "raw",
			     "-O",	 "qcow2",   raw,  path_in("img.qcow2", qcow, sizeof(qcow)),
			     NULL};
	run_ok(mkq, &r);
	hx_run_free(&r);
	const char *conv[] = {"qemu-img", "convert", "-n", "-f", "qcow2",
			      "-O",	  "raw",     qcow, uri,	 NULL};
	run_ok(conv, &r);
	hx_run_free(&r);
	const char *cmp[] = {"qemu-img", "compare", "-f", "raw", "-F", "raw", raw, uri, NULL};
	run_ok(cmp, &r);
	assert_non_null(strstr(r.out, "Images are identical"));
	hx_run_free(&r);

	/* control: one byte changed in the volume, and compare must see it */
	poke("img", IMG_SIZE / 4 + 12345, 1, 0x01);
	printf("control: qemu-img compare must now report a mismatch at %llu\n",
	       (unsigned long long)(IMG_SIZE / 4 + 12345));
	assert_int_equal(nt_run(cmp, &r, false), 0);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "Content mismatch"));
	hx_run_free(&r);
	free(img);
}

static void nbdcopy__both_ways_and_between_exports(void **state)
{
	char src[320], back[320], back2[320], junk[320], uri[128], uri2[128], uuri[256];
	const size_t len = 24 * MiB;
	uint8_t *img = make_image(len, 12);
	assert_int_equal(hx_write_file(path_in("copy.raw", src, sizeof(src)), img, len), 0);
	uint8_t *j = malloc(len);
	assert_non_null(j);
	memset(j, 0xee, len);
	assert_int_equal(hx_write_file(path_in("junk24.raw", junk, sizeof(junk)), j, len), 0);
	free(j);
	nt_uri(&g->n, "copy", uri, sizeof(uri));
	struct hx_run r;

	const char *fill[] = {"nbdcopy", junk, uri, NULL};
	run_ok(fill, &r);
	hx_run_free(&r);
	/* file -> export (its holes go as zero requests), export -> file */
	const char *up[] = {"nbdcopy", "--flush", src, uri, NULL};
	run_ok(up, &r);
	hx_run_free(&r);
	const char *down[] = {"nbdcopy", uri, path_in("copy.back", back, sizeof(back)), NULL};
	run_ok(down, &r);
	hx_run_free(&r);
	expect_file(back, img, len);

	/* export -> export over 4 connections each (multi-conn), one of them the unix socket */
	nt_uri(&g->n, "copy2", uri2, sizeof(uri2));
	const char *fill2[] = {"nbdcopy", junk, uri2, NULL};
	run_ok(fill2, &r);
	hx_run_free(&r);
	const char *x[] = {"nbdcopy",
			   "-C",
			   "4",
			   "--request-size=1048576",
			   "--flush",
			   uri,
			   nt_unix_uri(&g->n, "copy2", uuri, sizeof(uuri)),
			   NULL};
	run_ok(x, &r);
	hx_run_free(&r);
	const char *down2[] = {"nbdcopy", uri2, path_in("copy2.back", back2, sizeof(back2)), NULL};
	run_ok(down2, &r);
	hx_run_free(&r);
	expect_file(back2, img, len);
	free(img);
}

static void nbdinfo__list_and_json(void **state)
{
	char uri[128], uuri[256];
	struct hx_run r;
	const char *list[] = {"nbdinfo", "--list", g->n.nbd_base, NULL};
	run_ok(list, &r);
	assert_non_null(strstr(r.out, "export=\"vol\""));
	assert_non_null(strstr(r.out, "export=\"copy2\""));
	assert_non_null(strstr(r.out, "description: rdax volume, 16.0 MiB"));
	hx_run_free(&r);
	const char *json[] = {"nbdinfo", "--json", nt_uri(&g->n, "vol", uri, sizeof(uri)), NULL};
	run_ok(json, &r);
	assert_non_null(strstr(r.out, "\"export-size\": 16777216"));
	assert_non_null(strstr(r.out, "\"can_multi_conn\": true"));
	assert_non_null(strstr(r.out, "\"can_fua\": true"));
	assert_non_null(strstr(r.out, "\"can_zero\": true"));
	assert_non_null(strstr(r.out, "\"can_trim\": true"));
	assert_non_null(strstr(r.out, "\"block_size_maximum\": 33554432"));
	hx_run_free(&r);
	/* the unix socket, owner-only by default */
	const char *usize[] = {"nbdinfo", "--size", nt_unix_uri(&g->n, "vol", uuri, sizeof(uuri)),
			       NULL};
	run_ok(usize, &r);
	assert_int_equal(strtoull(r.out, NULL, 10), VOL_SIZE);
	hx_run_free(&r);
	struct stat st;
	assert_int_equal(lstat(g->n.sock_path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
}

static void nbdsh__options(void **state)
{
	char base[128], e_size[64];
	snprintf(base, sizeof(base), "NT_BASE=%s", g->n.nbd_base);
	snprintf(e_size, sizeof(e_size), "NT_VOL_SIZE=%llu", (unsigned long long)VOL_SIZE);
	const char *env[] = {base, "NT_VOL=vol", e_size, NULL};
	struct hx_run r;
	assert_int_equal(nt_nbdsh("scripts/options.py", env, &r), 0);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "options: ok"));
	hx_run_free(&r);
}

/* nbdsh_io -- scripts/io.py over @uri */
static void nbdsh_io(const char *uri, bool structured)
{
	char e_uri[300], e_size[64];
	snprintf(e_uri, sizeof(e_uri), "NT_URI=%s", uri);
	snprintf(e_size, sizeof(e_size), "NT_VOL_SIZE=%llu", (unsigned long long)VOL_SIZE);
	const char *env[] = {e_uri, e_size, structured ? "NT_STRUCTURED=1" : "NT_STRUCTURED=0",
			     NULL};
	struct hx_run r;
	assert_int_equal(nt_nbdsh("scripts/io.py", env, &r), 0);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "io: ok"));
	hx_run_free(&r);
}

static void nbdsh__io_structured(void **state)
{
	char uri[128];
	nbdsh_io(nt_uri(&g->n, "vol", uri, sizeof(uri)), true);
}

static void nbdsh__io_simple_replies_unix(void **state)
{
	char uri[256];
	nbdsh_io(nt_unix_uri(&g->n, "vol", uri, sizeof(uri)), false);
}

/* fio -- run fio with the nbd engine on @uri and the extra job options; the run */
static void fio(const char *uri, const char *const opts[], struct hx_run *r)
{
	char e_uri[300];
	snprintf(e_uri, sizeof(e_uri), "--uri=%s", uri);
	const char *argv[32] = {"fio",
				"--name=nbd",
				"--ioengine=nbd",
				e_uri,
				"--verify=crc32c",
				"--verify_fatal=1",
				"--output-format=terse",
				"--terse-version=3"};
	size_t n = 8;
	for (size_t i = 0; opts[i] && n < 31; i++)
		argv[n++] = opts[i];
	argv[n] = NULL;
	assert_int_equal(nt_run(argv, r, false), 0);
}

static void fio__verify_every_block(void **state)
{
	char uri[128], uuri[256];
	struct hx_run r;
	/* random 4 KiB writes at queue depth 16, then every block read back and checked */
	const char *rand[] = {"--rw=randwrite", "--bs=4k",	 "--iodepth=16",
			      "--size=16M",	"--do_verify=1", NULL};
	fio(nt_uri(&g->n, "fio", uri, sizeof(uri)), rand, &r);
	assert_int_equal(r.status, 0);
	hx_run_free(&r);
	/* two jobs, two connections (multi-conn), 64 KiB sequential, over the unix socket */
	const char *seq[] = {"--rw=write",    "--bs=64k",   "--iodepth=8",
			     "--numjobs=2",   "--size=8M",  "--offset_increment=8M",
			     "--do_verify=1", "--fsync=16", NULL};
	fio(nt_unix_uri(&g->n, "fio2", uuri, sizeof(uuri)), seq, &r);
	assert_int_equal(r.status, 0);
	hx_run_free(&r);
}

static void fio__verify_control_sees_corruption(void **state)
{
	char uri[128];
	struct hx_run r;
	nt_uri(&g->n, "ctl", uri, sizeof(uri));
	const char *wr[] = {"--rw=write", "--bs=4k", "--size=1M", "--do_verify=0", NULL};
	fio(uri, wr, &r);
	assert_int_equal(r.status, 0);
	hx_run_free(&r);
	const char *vo[] = {"--rw=write", "--bs=4k", "--size=1M", "--verify_only", NULL};
	fio(uri, vo, &r);
	assert_int_equal(r.status, 0);
	hx_run_free(&r);
	/* one byte in the data of block 100 changed: the same verification must fail */
	poke("ctl", 100 * 4096 + 2000, 1, 0x5a);
	printf("control: fio must now report a verify failure at offset %u\n", 100 * 4096);
	fio(uri, vo, &r);
	assert_int_not_equal(r.status, 0);
	hx_run_free(&r);
}

/* bind_stale -- a unix socket file nobody accepts on (its socket closed) */
static void bind_stale(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	assert_true(strlen(path) < sizeof(sun.sun_path));
	memcpy(sun.sun_path, path, strlen(path) + 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
}

/* log_has -- the daemon's log contains @what */
static bool log_has(const struct hx_daemon *d, const char *what)
{
	uint8_t *log;
	size_t len;
	if (nt_read_file(d->log_path, &log, &len))
		return false;
	log[len] = '\0';
	bool found = strstr((char *)log, what) != NULL;
	free(log);
	return found;
}

static void unix_socket__stale_replaced_live_refused(void **state)
{
	char dir[256], path[300], other[360], file[300];
	assert_int_equal(hx_tmpdir_make("nbd-unix", dir, sizeof(dir)), 0);
	struct nt_daemon n2;
	memset(&n2, 0, sizeof(n2));

	/* a live socket (the first daemon's) is not taken over */
	char live[400];
	snprintf(live, sizeof(live), "nbd+unix://%s", g->n.sock_path);
	struct hx_daemon_opts o = {.ns_size = "16M", .extra_args = {"--listen", live}};
	assert_int_equal(nt_daemon_start(&n2, dir, &o), -ECHILD);
	assert_true(log_has(&n2.d, "a live socket is there"));
	/* nor is a path that is not a socket */
	snprintf(file, sizeof(file), "%s/plain", dir);
	assert_int_equal(hx_write_file(file, "x", 1), 0);
	snprintf(other, sizeof(other), "nbd+unix://%s?mode=0660", file);
	o.extra_args[1] = other;
	assert_int_equal(nt_daemon_start(&n2, dir, &o), -ECHILD);
	assert_true(log_has(&n2.d, "is not a socket"));
	assert_int_equal(access(file, F_OK), 0);

	/* a stale one is replaced, with the mode asked for, and removed at exit */
	snprintf(path, sizeof(path), "%s/stale.sock", dir);
	bind_stale(path);
	snprintf(other, sizeof(other), "nbd+unix://%s?mode=0660", path);
	o.extra_args[1] = other;
	assert_int_equal(nt_daemon_start(&n2, dir, &o), 0);
	assert_int_equal(nt_volume_create(&n2, "v", MiB), 0);
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	char uri[400];
	snprintf(uri, sizeof(uri), "nbd+unix:///v?socket=%s", path);
	const char *size[] = {"nbdinfo", "--size", uri, NULL};
	struct hx_run r;
	run_ok(size, &r);
	assert_int_equal(strtoull(r.out, NULL, 10), MiB);
	hx_run_free(&r);
	assert_int_equal(hx_daemon_stop(&n2.d), 0);
	assert_int_not_equal(lstat(path, &st), 0);
	assert_int_not_equal(lstat(n2.sock_path, &st), 0);
	hx_tmpdir_remove(dir);
}

static void token__nbd_only_on_loopback(void **state)
{
	char dir[256], tok[320];
	assert_int_equal(hx_tmpdir_make("nbd-token", dir, sizeof(dir)), 0);
	snprintf(tok, sizeof(tok), "%s/token", dir);
	assert_int_equal(hx_write_file(tok, "s3cret\n", 7), 0);
	struct nt_daemon n2;
	memset(&n2, 0, sizeof(n2));

	/* with a token, a listener on every address is refused with the reason */
	struct hx_daemon_opts o = {
	    .ns_size = "16M", .token_file = tok, .extra_args = {"--listen", "nbd://0.0.0.0:0"}};
	assert_int_equal(nt_daemon_start(&n2, dir, &o), -ECHILD);
	assert_true(log_has(&n2.d, "must be bound to a loopback address"));

	/* loopback (and the unix socket) are fine; NBD then needs no token */
	o.extra_args[0] = NULL;
	o.extra_args[1] = NULL;
	assert_int_equal(nt_daemon_start(&n2, dir, &o), 0);
	assert_int_equal(nt_volume_create(&n2, "v", MiB), 0);
	char uri[128];
	const char *size[] = {"nbdinfo", "--size", nt_uri(&n2, "v", uri, sizeof(uri)), NULL};
	struct hx_run r;
	run_ok(size, &r);
	assert_int_equal(strtoull(r.out, NULL, 10), MiB);
	hx_run_free(&r);
	assert_int_equal(hx_daemon_stop(&n2.d), 0);
	hx_tmpdir_remove(dir);
}

static void help__names_nbd_and_the_token_rule(void **state)
{
	const char *argv[] = {RDAXD_PATH, "--help", NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "nbd://HOST:PORT"));
	assert_non_null(strstr(r.out, "nbd+unix:///PATH"));
	assert_non_null(strstr(r.out, "loopback"));
	hx_run_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(qemu_img__info_convert_compare),
	    cmocka_unit_test(nbdcopy__both_ways_and_between_exports),
	    cmocka_unit_test(nbdinfo__list_and_json),
	    cmocka_unit_test(nbdsh__options),
	    cmocka_unit_test(nbdsh__io_structured),
	    cmocka_unit_test(nbdsh__io_simple_replies_unix),
	    cmocka_unit_test(fio__verify_every_block),
	    cmocka_unit_test(fio__verify_control_sees_corruption),
	    cmocka_unit_test(unix_socket__stale_replaced_live_refused),
	    cmocka_unit_test(token__nbd_only_on_loopback),
	    cmocka_unit_test(help__names_nbd_and_the_token_rule),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
