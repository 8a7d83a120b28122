/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_backing.c -- what a namespace lives on: the kinds of path refused
 * and how that is said, the namespace lock (also against a forced format),
 * and a full backing filesystem (space reserved, discards keep it, and no
 * store into the mapping kills the process)
 *
 * The full-filesystem cases mount a tmpfs of 8 MiB in a mount namespace of
 * this process (tests/support/tmpfs.h) and run the engine in forked
 * children (child.h): a regression is a child killed by SIGBUS, which the
 * parent sees and reports, instead of a test binary that dies. They are
 * skipped where this process may not mount (not root).
 *
 * Controls (faults.h), each run as a test that must see the loss:
 *  no_reserve      namespaces sparse again: a 64 MiB namespace starts on
 *                  the 8 MiB tmpfs, and 1 MiB writes fail once it is full
 *                  (-EIO, the process lives: the guard)
 *  + no_media_guard the same writes kill the process with SIGBUS (the
 *                  defect as it was reported)
 *  zero_punches    a discard gives its blocks back, another file takes
 *                  them, and a write into the discarded range fails
 *  format_no_lock  a forced format of a namespace in use goes ahead and
 *                  its volumes are gone
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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "backing.h"
#include "errors.h"
#include "faults.h"
#include "log.h"
#include "media_guard.h"
#include "namespace.h"
#include "store.h"
#include "vol_table.h"
#include "volume.h"

#include "child.h"
#include "nsfile.h"
#include "pattern.h"
#include "tmpdir.h"
#include "tmpfs.h"

#define MiB	 (1ULL << 20)
#define TMPFS_SZ (8 * MiB)
#define CHILD_S	 120 /* no case takes more than a second; a hang is a failure */

struct fx {
	char dir[256];
	char path[512];	  /* a namespace file on the disk */
	char mnt[512];	  /* the tmpfs, when a test mounts one */
	char small[512];  /* a namespace file on the tmpfs */
	char filler[512]; /* another file on the tmpfs, to fill it up */
	bool mounted;
	char err[512];
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "test-backing");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	tmpdir_file(fx->mnt, sizeof(fx->mnt), fx->dir, "tmpfs");
	tmpdir_file(fx->small, sizeof(fx->small), fx->mnt, "ns");
	tmpdir_file(fx->filler, sizeof(fx->filler), fx->mnt, "filler");
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	if (fx->mounted) {
		unlink(fx->small);
		unlink(fx->filler);
		tmpfs_umount(fx->mnt);
	}
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

/* mount_small -- the 8 MiB tmpfs on fx->mnt, or skip the test */
static void mount_small(struct fx *fx)
{
	assert_int_equal(mkdir(fx->mnt, 0700), 0);
	int ret = tmpfs_mount(fx->mnt, TMPFS_SZ);
	if (ret) {
		print_message("cannot mount a tmpfs here (%s): skipped\n", strerror(-ret));
		skip();
	}
	fx->mounted = true;
}

static void assert_err_has(const char *err, const char *what)
{
	if (!strstr(err, what))
		fail_msg("message \"%s\" does not say \"%s\"", err, what);
}

/* ---- what a path is ------------------------------------------------------ */

/* add_msg -- store_namespace_add of @path in @mode into a fresh store; its message in fx->err */
static int add_msg(struct fx *fx, const char *path, uint64_t size, enum persist_mode mode)
{
	struct store *s;
	assert_int_equal(store_new(&s), 0);
	fx->err[0] = '\0';
	int ret = store_namespace_add(s, path, size, mode, fx->err, sizeof(fx->err));
	store_delete(&s);
	return ret;
}

static void store_namespace_add__refusals_say_what_the_path_is(void **state)
{
	struct fx *fx = *state;
	char p[600];
	const enum persist_mode modes[] = {PERSIST_AUTO, PERSIST_SIM};
	for (unsigned m = 0; m < 2; m++) {
		enum persist_mode mode = modes[m];
		/* today's message for all of these was "mode=sim needs a regular file" */
		assert_int_equal(add_msg(fx, fx->dir, 0, mode), -EISDIR);
		assert_err_has(fx->err, "is a directory");
		assert_int_equal(add_msg(fx, "/dev/null", 0, mode), -ENODEV);
		assert_err_has(fx->err, "/dev/null is a character device that is not a device DAX");

		snprintf(p, sizeof(p), "%s/empty", fx->dir);
		nsfile_create(p, 0);
		assert_int_equal(add_msg(fx, p, 0, mode), -EINVAL);
		assert_err_has(fx->err, "is an empty file");
		unlink(p);

		snprintf(p, sizeof(p), "%s/sock", fx->dir);
		int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		assert_true(strlen(p) < sizeof(sa.sun_path));
		memcpy(sa.sun_path, p, strlen(p) + 1);
		assert_int_equal(bind(sfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(add_msg(fx, p, 0, mode), -EINVAL);
		assert_err_has(fx->err, "is a socket");
		close(sfd);
		unlink(p);
	}
	/* the same reasons from the engine's own check, which never opens the path */
	enum backing_kind kind;
	assert_int_equal(backing_check(fx->dir, PERSIST_AUTO, &kind, NULL, NULL, 0), -EISDIR);
	assert_int_equal(backing_check("/dev/null", PERSIST_AUTO, &kind, NULL, NULL, 0), -ENODEV);
	assert_int_equal(backing_check(fx->path, PERSIST_AUTO, &kind, NULL, NULL, 0), -ENOENT);
	nsfile_create(fx->path, NS_MIN_SIZE);
	assert_int_equal(backing_check(fx->path, PERSIST_SIM, &kind, NULL, NULL, 0), 0);
	assert_int_equal(kind, BACKING_FILE);
	assert_string_equal(backing_kind_name(BACKING_DEVDAX), "devdax");
}

/* child_add_fifo -- store_namespace_add of a FIFO nobody writes to */
static void child_add_fifo(void *arg)
{
	struct fx *fx = arg;
	child_check(add_msg(fx, fx->path, 0, PERSIST_AUTO) == -EINVAL);
	child_check(strstr(fx->err, "is a FIFO") != NULL);
	struct ns *ns;
	child_check(ns_open(fx->path, PERSIST_AUTO, 0, &ns) == -EINVAL);
	child_check(ns_format(fx->path, true, fx->err, sizeof(fx->err)) == -EINVAL);
}

/* A FIFO as namespace: refused at once (it hung the start for ever: an open that blocked). */
static void store_namespace_add__fifo_refused_without_hanging(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(mkfifo(fx->path, 0600), 0);
	int status = child_run(child_add_fifo, fx, 20);
	if (status == CHILD_TIMED_OUT)
		fail_msg("adding a FIFO as a namespace hung");
	assert_true(child_exited_ok(status));
}

/* ---- the namespace lock -------------------------------------------------- */

static void ns_format__refused_while_open_even_forced(void **state)
{
	struct fx *fx = *state;
	struct ns *ns;
	assert_int_equal(ns_create(fx->path, 16 * MiB, PERSIST_AUTO, 0, &ns), 0);
	assert_int_equal(ns_volume_create(ns, "keep", MiB), 0);

	for (int force = 0; force < 2; force++) {
		fx->err[0] = '\0';
		assert_int_equal(ns_format(fx->path, force, fx->err, sizeof(fx->err)), -EBUSY);
		assert_err_has(fx->err, "is in use");
		assert_err_has(fx->err, "--force does not override");
	}
	struct ns *again;
	assert_int_equal(ns_open(fx->path, PERSIST_AUTO, 1, &again), -EBUSY); /* a second opener */
	assert_int_equal(add_msg(fx, fx->path, 0, PERSIST_AUTO), -EBUSY);
	assert_err_has(fx->err, "in use by another process");
	ns_close(&ns);

	/* closed: the volume survived the refused formats, and a format may go ahead now */
	assert_int_equal(ns_open(fx->path, PERSIST_AUTO, 0, &ns), 0);
	struct volume_info vi;
	assert_int_equal(ns_volume_info(ns, "keep", &vi), 0);
	ns_close(&ns);
	assert_int_equal(ns_format(fx->path, true, NULL, 0), 0);
}

/* child_serve -- hold the namespace open, as a running rdaxd does, until killed */
static int serve_pipe[2];

static void child_serve(void *arg)
{
	struct fx *fx = arg;
	struct ns *ns;
	char ok = ns_open(fx->path, PERSIST_AUTO, 0, &ns) == 0 ? 'y' : 'n';
	child_check(write(serve_pipe[1], &ok, 1) == 1);
	for (;;)
		pause();
}

/* format_while_served -- a forced format against another process serving the namespace */
static int format_while_served(struct fx *fx)
{
	struct ns *ns;
	assert_int_equal(ns_create(fx->path, 16 * MiB, PERSIST_AUTO, 0, &ns), 0);
	assert_int_equal(ns_volume_create(ns, "keep", MiB), 0);
	ns_close(&ns);

	assert_int_equal(pipe(serve_pipe), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		child_serve(fx);
		_exit(0);
	}
	char ok = 0;
	assert_int_equal(read(serve_pipe[0], &ok, 1), 1);
	assert_int_equal(ok, 'y');
	fx->err[0] = '\0';
	int ret = ns_format(fx->path, true, fx->err, sizeof(fx->err));
	kill(pid, SIGKILL); /* the daemon dies: its lock goes with it */
	waitpid(pid, NULL, 0);
	close(serve_pipe[0]);
	close(serve_pipe[1]);
	return ret;
}

static void ns_format__forced_refused_while_another_process_serves(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(format_while_served(fx), -EBUSY);
	assert_err_has(fx->err, "is in use");
	struct ns *ns;
	struct volume_info vi;
	assert_int_equal(ns_open(fx->path, PERSIST_AUTO, 0, &ns), 0); /* the killed one let go */
	assert_int_equal(ns_volume_info(ns, "keep", &vi), 0);
	ns_close(&ns);
}

static void ns_format__control_format_no_lock_destroys_a_served_namespace(void **state)
{
	struct fx *fx = *state;
	rdax_faults.format_no_lock = true;
	assert_int_equal(format_while_served(fx), 0);
	rdax_faults.format_no_lock = false;
	struct ns *ns;
	struct volume_info vi;
	assert_int_equal(ns_open(fx->path, PERSIST_AUTO, 0, &ns), 0);
	assert_int_equal(ns_volume_info(ns, "keep", &vi), -ENOENT); /* what the lock prevents */
	ns_close(&ns);
}

/* ---- a full backing filesystem -------------------------------------------- */

/*
 * child_big_on_small -- the report's case: a 64 MiB namespace on the 8 MiB
 * tmpfs, 1 MiB writes. With the fix the namespace is refused at creation.
 * With the reservation switched off (control) it starts, sparse; then the
 * zeroing of a new 48 MiB volume and 1 MiB writes run out of space, and
 * each store that finds no page must fail with -EIO, the process alive.
 */
static void child_big_on_small(void *arg)
{
	struct fx *fx = arg;
	struct ns *ns;
	int ret = ns_create(fx->small, 64 * MiB, PERSIST_AUTO, 0, &ns);
	if (ret) {
		child_check(ret == -ENOSPC);
		child_check(access(fx->small, F_OK) != 0); /* nothing left behind */
		return;
	}
	unsigned failed = 0;
	ret = ns_volume_create(ns, "v", 48 * MiB); /* zeroes its range: stores */
	child_check(ret == 0 || ret == -EIO);
	failed += ret != 0;
	child_check(ns_volume_create(ns, "w", 2 * MiB) == 0 || failed);

	struct volume *v;
	uint8_t *buf = malloc(MiB);
	child_check(buf != NULL);
	pattern_fill(buf, MiB, 1);
	if (ret == 0 && ns_volume_open(ns, "v", &v) == 0) {
		for (uint64_t off = 0; off < 48 * MiB; off += MiB) {
			int w = volume_write(v, off, buf, MiB);
			child_check(w == 0 || w == -EIO);
			failed += w != 0;
		}
		ns_volume_close(ns, &v);
	}
	child_check(failed > 0); /* the tmpfs really was full */
	free(buf);
	_exit(0); /* not ns_close: its write-back would flush pages the tmpfs never had */
}

static void ns_create__refused_on_a_filesystem_too_small(void **state)
{
	struct fx *fx = *state;
	mount_small(fx);
	assert_true(child_exited_ok(child_run(child_big_on_small, fx, CHILD_S)));
	/* the same through the store, with the reason an operator reads */
	assert_int_equal(add_msg(fx, fx->small, 64 * MiB, PERSIST_AUTO), -ENOSPC);
	assert_err_has(fx->err, fx->small);
	assert_err_has(fx->err, "64.0 MiB cannot be reserved");
	assert_err_has(fx->err, "MiB free");
	assert_int_equal(access(fx->small, F_OK), -1);
}

static void ns_create__control_no_reserve_stores_fail_with_eio(void **state)
{
	struct fx *fx = *state;
	mount_small(fx);
	rdax_faults.no_reserve = true;
	int status = child_run(child_big_on_small, fx, CHILD_S);
	assert_true(child_exited_ok(status)); /* started, writes failed, the process lived */
}

static void ns_create__control_no_reserve_no_guard_dies_of_sigbus(void **state)
{
	struct fx *fx = *state;
	mount_small(fx);
	rdax_faults.no_reserve = true;
	rdax_faults.no_media_guard = true;
	int status = child_run(child_big_on_small, fx, CHILD_S);
	assert_true(child_died_of(status, SIGBUS)); /* the defect as reported */
}

/*
 * A sparse 64 MiB namespace that exists already on the 8 MiB tmpfs (made
 * by an older rdax, or copied there): refused at open, with its path, size
 * and the free space, instead of starting and dying at the first write.
 */
static void ns_open__refused_when_its_space_cannot_be_reserved(void **state)
{
	struct fx *fx = *state;
	mount_small(fx);
	struct ns *ns;
	assert_int_equal(ns_create(fx->path, 64 * MiB, PERSIST_AUTO, 0, &ns), 0);
	ns_close(&ns);
	uint8_t *meta = malloc(VT_META_SIZE);
	assert_non_null(meta);
	nsfile_read(fx->path, 0, meta, VT_META_SIZE);
	nsfile_create(fx->small, 64 * MiB);
	nsfile_write(fx->small, 0, meta, VT_META_SIZE);
	free(meta);

	assert_int_equal(ns_open(fx->small, PERSIST_AUTO, 0, &ns), -ENOSPC);
	assert_int_equal(add_msg(fx, fx->small, 0, PERSIST_AUTO), -ENOSPC);
	assert_err_has(fx->err, fx->small);
	assert_err_has(fx->err, "64.0 MiB cannot be reserved");
	assert_int_equal(add_msg(fx, fx->small, 0, PERSIST_SIM), -ENOSPC);
	char fmt_err[512];
	assert_int_equal(ns_format(fx->small, true, fmt_err, sizeof(fmt_err)), -ENOSPC);
	assert_err_has(fmt_err, "cannot be reserved");
}

/* fill_up -- write @path until its filesystem is full; the bytes it took */
static uint64_t fill_up(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd < 0)
		return 0;
	static uint8_t chunk[64 * 1024];
	memset(chunk, 0x5a, sizeof(chunk));
	uint64_t total = 0;
	for (;;) {
		ssize_t n = write(fd, chunk, sizeof(chunk));
		if (n <= 0)
			break;
		total += (uint64_t)n;
	}
	close(fd);
	return total;
}

/*
 * child_discard_keeps_space -- a namespace that fits the tmpfs, the rest of
 * the tmpfs filled by another file: writes still land (the space is the
 * namespace's), a discard gives nothing back (the filler cannot grow), and
 * the discarded range takes writes again
 */
struct discard_result {
	uint64_t regained; /* bytes the filler could write after the discard */
	int rewrite_ret;   /* volume_write into the discarded range afterwards */
	int discard_ret;
};

static struct discard_result *dres; /* shared with the child (MAP_SHARED) */
static bool punch_on_discard;	    /* the control zero_punches, for the discard alone */

static void child_discard_keeps_space(void *arg)
{
	struct fx *fx = arg;
	struct ns *ns;
	struct volume *v;
	child_check(ns_create(fx->small, 6 * MiB, PERSIST_AUTO, 0, &ns) == 0);
	child_check(ns_volume_create(ns, "v", 4 * MiB) == 0);
	child_check(ns_volume_open(ns, "v", &v) == 0);
	fill_up(fx->filler);
	child_check(tmpfs_free_bytes(fx->mnt) < MiB);

	uint8_t *buf = malloc(MiB);
	child_check(buf != NULL);
	pattern_fill(buf, MiB, 2);
	for (uint64_t off = 0; off < 4 * MiB; off += MiB)
		child_check(volume_write(v, off, buf, MiB) == 0); /* reserved: no space needed */

	rdax_faults.zero_punches = punch_on_discard; /* the control: this discard only */
	dres->discard_ret = volume_discard(v, MiB, 2 * MiB);
	rdax_faults.zero_punches = false;
	dres->regained = fill_up(fx->filler);
	dres->rewrite_ret = volume_write(v, MiB, buf, MiB);
	free(buf);
	ns_volume_close(ns, &v);
	_exit(0);
}

/* discard_on_full_fs -- run child_discard_keeps_space; its results through shared memory */
static struct discard_result discard_on_full_fs(struct fx *fx)
{
	struct discard_result *shared =
	    mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(shared != MAP_FAILED);
	memset(shared, 0, sizeof(*shared));
	dres = shared;
	int status = child_run(child_discard_keeps_space, fx, CHILD_S);
	assert_true(child_exited_ok(status));
	struct discard_result r = *shared;
	munmap(shared, sizeof(*shared));
	return r;
}

static void volume_discard__keeps_the_space_of_a_full_filesystem(void **state)
{
	struct fx *fx = *state;
	mount_small(fx);
	struct discard_result r = discard_on_full_fs(fx);
	print_message("discard of 2 MiB on a full tmpfs: %llu bytes regained by another file\n",
		      (unsigned long long)r.regained);
	assert_int_equal(r.discard_ret, 0);
	assert_int_equal(r.regained, 0);
	assert_int_equal(r.rewrite_ret, 0);
}

static void volume_discard__control_zero_punches_loses_the_space(void **state)
{
	struct fx *fx = *state;
	mount_small(fx);
	punch_on_discard = true;
	struct discard_result r = discard_on_full_fs(fx);
	punch_on_discard = false;
	print_message("control: %llu bytes regained by another file, rewrite: %d\n",
		      (unsigned long long)r.regained, r.rewrite_ret);
	assert_true(r.regained >= MiB);
	assert_int_equal(r.rewrite_ret, -EIO); /* and the guard kept the process alive */
}

int main(void)
{
	/* the media guard under cmocka's own SIGBUS handler: installed first, chained to */
	media_guard_init();
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
	    T(store_namespace_add__refusals_say_what_the_path_is),
	    T(store_namespace_add__fifo_refused_without_hanging),
	    T(ns_format__refused_while_open_even_forced),
	    T(ns_format__forced_refused_while_another_process_serves),
	    T(ns_format__control_format_no_lock_destroys_a_served_namespace),
	    T(ns_create__refused_on_a_filesystem_too_small),
	    T(ns_create__control_no_reserve_stores_fail_with_eio),
	    T(ns_create__control_no_reserve_no_guard_dies_of_sigbus),
	    T(ns_open__refused_when_its_space_cannot_be_reserved),
	    T(volume_discard__keeps_the_space_of_a_full_filesystem),
	    T(volume_discard__control_zero_punches_loses_the_space),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
