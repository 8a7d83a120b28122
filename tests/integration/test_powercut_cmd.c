/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_powercut_cmd.c -- `rdax powercut` against the real daemon, writes in flight
 *
 * rdaxd runs in sim mode with --allow-powercut. The scenario (cut_scenario):
 *  - A: pages written and fsynced before the load starts: must survive;
 *  - B: pages written and never fsynced: must be gone;
 *  - D: a writer thread overwrites pages one at a time with a new
 *    generation and makes each durable (fsync of the page over the rdax
 *    protocol; a FUA write over NBD), noting every acknowledgement;
 *  - U: a second writer overwrites other pages, never made durable; no
 *    fsync of anybody covers them;
 * and while both write, `rdax powercut` (the command) cuts the power.
 * Afterwards: the daemon is the same process and serves (a new connection,
 * a write, an fsync, a read), HELLO reports a new incarnation, every D
 * page holds the generation of its last acknowledged durable write or a
 * later one of the writer (an unacknowledged fsync may have run), every U
 * and B byte reads zero, every A byte is there.
 *
 * Transports: the rdax protocol over the harness's URL (tcp://, or
 * rdma:// when RDAX_IT_RDMA is set: then D and U are one-sided RDMA writes,
 * fsynced over the connection; tests/rdma runs this binary in the VM), and
 * NBD (a raw NBD client: FUA writes for D, plain writes for U).
 *
 * Controls, the same check with a fault that breaks the mechanism:
 *  - skip-writeback (the fsync engine skips a write-back): A and D pages
 *    must be reported lost;
 *  - powercut-keep-mapping (the cut keeps the private mapping): B and U
 *    must be reported as surviving.
 *
 * Also: --after N cuts exactly after the Nth acknowledgement (the next one
 * never comes, its fsync never runs); --delay cuts after a time; the
 * refusals (no --allow-powercut, a namespace not in sim mode, a second cut
 * armed, bad arguments) say why and destroy nothing.
 */
#include <errno.h>
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

#include "librdax.h"
#include "nbdtest.h"

#define VOL	 "pc"
#define VOL_SIZE (8ULL << 20)
#define PAGE	 4096U
#define NPAGES	 32U	       /* pages of D, and of U */
#define D_BASE	 0ULL	       /* D: pages 0 .. NPAGES - 1, 64 KiB apart */
#define U_BASE	 (2ULL << 20)  /* U */
#define A_BASE	 (4ULL << 20)  /* A: NPAGES pages back to back, fsynced */
#define B_BASE	 (5ULL << 20)  /* B: NPAGES pages, never fsynced */
#define STRIDE	 (64ULL << 10) /* D and U pages: each in its own dirty-tree leaf */
#define MIN_ACKS 16	       /* durable acknowledgements before the cut */

/* Rules the state after a cut broke (bits). */
#define LOST	 1 /* something acknowledged as durable is not there */
#define SURVIVED 2 /* something never made durable is there */

enum transport { T_NATIVE, T_NBD };

/* What a writer thread shares with the test. */
struct writer {
	const struct nt_daemon *n;
	enum transport t;
	bool durable; /* D (each write made durable) or U */
	uint64_t base;
	uint32_t acked[NPAGES]; /* D: the last generation acknowledged durable per page */
	uint32_t sent[NPAGES];	/* the last generation sent per page */
	atomic_uint progress;	/* acknowledgements so far */
	atomic_bool stop;
	int end; /* why it stopped: 0 (asked), or the error */
	pthread_t th;
};

/* gen_fill -- the bytes of generation @gen of page @page (never all zero) */
static void gen_fill(uint8_t *buf, uint32_t gen, unsigned page, bool durable)
{
	hx_pattern(buf, PAGE, ((uint64_t)gen << 20) | ((uint64_t)page << 1) | durable, 0);
	buf[0] = 0xa5; /* a pattern page never reads as zeros */
}

/* writer_native -- the rdax protocol: D writes then fsyncs the page, U only writes */
static void writer_native(struct writer *w)
{
	struct rdax_conn *c = NULL;
	struct rdax_volume *v = NULL;
	uint8_t buf[PAGE];
	int ret = rdax_connect(w->n->d.url, NULL, &c);
	if (ret == 0)
		ret = rdax_volume_open(c, VOL, &v);
	for (uint32_t gen = 1; ret == 0 && !atomic_load(&w->stop); gen++) {
		for (unsigned p = 0; p < NPAGES && ret == 0 && !atomic_load(&w->stop); p++) {
			uint64_t off = w->base + p * STRIDE;
			gen_fill(buf, gen, p, w->durable);
			w->sent[p] = gen;
			ret = rdax_write(v, off, buf, PAGE, 0);
			if (ret == 0 && w->durable)
				ret = rdax_fsync(v, off, PAGE, NULL);
			if (ret == 0) {
				if (w->durable)
					w->acked[p] = gen;
				atomic_fetch_add(&w->progress, 1);
			}
		}
	}
	w->end = ret;
	if (v)
		rdax_volume_close(&v);
	rdax_disconnect(&c);
}

/* writer_nbd -- NBD: D writes with FUA (durable when acknowledged), U plain writes */
static void writer_nbd(struct writer *w)
{
	struct nt_raw c = {.fd = -1};
	uint8_t buf[PAGE];
	const uint8_t flags[4] = {0, 0, 0, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES};
	int ret = nt_raw_connect(&c, w->n->nbd_port);
	if (ret == 0)
		ret = nt_raw_send(&c, flags, sizeof(flags));
	if (ret == 0)
		ret = nt_raw_go(&c, VOL, false, NULL);
	uint64_t handle = 1;
	for (uint32_t gen = 1; ret == 0 && !atomic_load(&w->stop); gen++) {
		for (unsigned p = 0; p < NPAGES && ret == 0 && !atomic_load(&w->stop); p++) {
			uint64_t off = w->base + p * STRIDE;
			gen_fill(buf, gen, p, w->durable);
			w->sent[p] = gen;
			struct nt_reply r;
			ret = nt_raw_request(&c, NBD_CMD_WRITE, w->durable ? NBD_CMD_FLAG_FUA : 0,
					     handle++, off, PAGE, buf, PAGE);
			if (ret == 0)
				ret = nt_raw_reply(&c, &r, NULL, 0, 0);
			if (ret == 0 && r.error)
				ret = -(int)r.error;
			if (ret == 0) {
				if (w->durable)
					w->acked[p] = gen;
				atomic_fetch_add(&w->progress, 1);
			}
		}
	}
	w->end = ret;
	nt_raw_close(&c);
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	if (w->t == T_NBD)
		writer_nbd(w);
	else
		writer_native(w);
	return NULL;
}

/* conn_open -- a librdax connection and volume handle (asserts) */
static struct rdax_volume *conn_open(const struct nt_daemon *n, struct rdax_conn **c)
{
	struct rdax_volume *v = NULL;
	int ret = rdax_connect(n->d.url, NULL, c);
	if (ret)
		fprintf(stderr, "connect: %s\n", rdax_connect_last_error());
	assert_int_equal(ret, 0);
	assert_int_equal(rdax_volume_open(*c, VOL, &v), 0);
	return v;
}

/* incarnation -- HELLO's incarnation now (a fresh connection) */
static uint64_t incarnation(const struct nt_daemon *n)
{
	struct rdax_conn *c = NULL;
	assert_int_equal(rdax_connect(n->d.url, NULL, &c), 0);
	uint64_t inc = rdax_conn_incarnation(c);
	rdax_disconnect(&c);
	return inc;
}

/* start -- a sim daemon that allows power cuts (@faults may be NULL), volume VOL created */
static void start(struct nt_daemon *n, char *dir, size_t dirlen, const char *faults, bool allow)
{
	assert_int_equal(hx_tmpdir_make("pcut", dir, dirlen), 0);
	memset(n, 0, sizeof(*n));
	struct hx_daemon_opts o = {.ns_size = "64M", .mode = "sim", .faults = faults};
	o.extra_args[0] = allow ? "--allow-powercut" : NULL;
	assert_int_equal(nt_daemon_start(n, dir, &o), 0);
	if (allow)
		assert_non_null(strstr(n->d.ready_line, "power cuts allowed"));
	else
		assert_null(strstr(n->d.ready_line, "power cuts allowed"));
	assert_int_equal(nt_volume_create(n, VOL, VOL_SIZE), 0);
}

/* stop -- SIGTERM must end it with 0 */
static void stop(struct nt_daemon *n, const char *dir)
{
	int ret = hx_daemon_stop(&n->d);
	if (ret)
		hx_daemon_dump_log(&n->d, 16384);
	assert_int_equal(ret, 0);
	hx_tmpdir_remove(dir);
}

/* cli_powercut -- rdax powercut [ARGS...] against @n; its exit status, output in @r */
static int cli_powercut(const struct nt_daemon *n, struct hx_run *r, const char *a1, const char *a2,
			const char *a3)
{
	assert_int_equal(hx_cli(&n->d, NULL, 0, r, "powercut", a1, a2, a3, NULL), 0);
	return r->status;
}

/* check_after -- the volume after a cut against the writers and A/B; LOST/SURVIVED bits */
static int check_after(const struct nt_daemon *n, const struct writer *d)
{
	struct rdax_conn *c;
	struct rdax_volume *v = conn_open(n, &c);
	uint8_t *img = malloc(VOL_SIZE), want[PAGE];
	assert_non_null(img);
	assert_int_equal(rdax_read(v, 0, img, VOL_SIZE), 0);
	int broken = 0;
	unsigned lost_pages = 0, surviving_pages = 0;
	for (unsigned p = 0; p < NPAGES; p++) {
		/* A: generation 1 of the durable kind, back to back */
		gen_fill(want, 1, p, true);
		if (memcmp(img + A_BASE + (uint64_t)p * PAGE, want, PAGE) != 0)
			lost_pages++;
		/* B: never made durable */
		for (unsigned i = 0; i < PAGE; i++)
			if (img[B_BASE + (uint64_t)p * PAGE + i]) {
				surviving_pages++;
				break;
			}
		/* D: the last acknowledged generation or a later one sent; anything if none was */
		const uint8_t *got = img + D_BASE + p * STRIDE;
		bool ok = d->acked[p] == 0;
		for (uint32_t g = d->acked[p]; !ok && g <= d->sent[p]; g++) {
			gen_fill(want, g, p, true);
			ok = memcmp(got, want, PAGE) == 0;
		}
		if (!ok) {
			if (lost_pages < 4)
				fprintf(stderr,
					"page %u of D: generation %u acknowledged, not there\n", p,
					d->acked[p]);
			lost_pages++;
		}
		/* U: zeros */
		for (unsigned i = 0; i < PAGE; i++)
			if (img[U_BASE + p * STRIDE + i]) {
				surviving_pages++;
				break;
			}
	}
	if (lost_pages)
		broken |= LOST;
	if (surviving_pages)
		broken |= SURVIVED;
	printf("after the cut: %u pages lost, %u pages that were never durable survived\n",
	       lost_pages, surviving_pages);
	free(img);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	return broken;
}

/* serves -- a write, an fsync and a read on a fresh connection work */
static void serves(const struct nt_daemon *n)
{
	struct rdax_conn *c;
	struct rdax_volume *v = conn_open(n, &c);
	uint8_t buf[512], got[512];
	hx_pattern(buf, sizeof(buf), 77, 0);
	assert_int_equal(rdax_write(v, 7ULL << 20, buf, sizeof(buf), RDAX_WRITE_FSYNC), 0);
	assert_int_equal(rdax_read(v, 7ULL << 20, got, sizeof(got)), 0);
	assert_memory_equal(buf, got, sizeof(buf));
	rdax_volume_close(&v);
	rdax_disconnect(&c);
}

/*
 * cut_scenario -- the scenario at the top of this file over @t with
 * @faults; returns the LOST / SURVIVED bits of what the check found
 */
static int cut_scenario(enum transport t, const char *faults)
{
	char dir[256];
	struct nt_daemon n;
	start(&n, dir, sizeof(dir), faults, true);
	pid_t pid = n.d.pid;
	uint64_t inc0 = incarnation(&n);
	assert_int_not_equal(inc0, 0);

	/* A durable, B not */
	struct rdax_conn *c;
	struct rdax_volume *v = conn_open(&n, &c);
	uint8_t page[PAGE];
	for (unsigned p = 0; p < NPAGES; p++) {
		gen_fill(page, 1, p, true);
		assert_int_equal(rdax_write(v, A_BASE + (uint64_t)p * PAGE, page, PAGE, 0), 0);
		gen_fill(page, 2, p, false);
		assert_int_equal(rdax_write(v, B_BASE + (uint64_t)p * PAGE, page, PAGE, 0), 0);
	}
	assert_int_equal(rdax_fsync(v, A_BASE, (uint64_t)NPAGES * PAGE, NULL), 0);
	rdax_volume_close(&v);
	rdax_disconnect(&c);

	/* the writers, then the cut while they write */
	struct writer d = {.n = &n, .t = t, .durable = true, .base = D_BASE};
	struct writer u = {.n = &n, .t = t, .durable = false, .base = U_BASE};
	assert_int_equal(pthread_create(&d.th, NULL, writer_main, &d), 0);
	assert_int_equal(pthread_create(&u.th, NULL, writer_main, &u), 0);
	int64_t deadline = hx_now_ms() + 120000;
	while ((atomic_load(&d.progress) < MIN_ACKS || atomic_load(&u.progress) < MIN_ACKS) &&
	       hx_now_ms() < deadline && !d.end && !u.end) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (atomic_load(&d.progress) < MIN_ACKS)
		fprintf(stderr, "writers: %u and %u acknowledgements, ended with %d / %d\n",
			atomic_load(&d.progress), atomic_load(&u.progress), d.end, u.end);
	assert_true(atomic_load(&d.progress) >= MIN_ACKS);
	struct hx_run r;
	int status = cli_powercut(&n, &r, NULL, NULL, NULL);
	if (status)
		fprintf(stderr, "rdax powercut: %s%s", r.out, r.err);
	assert_int_equal(status, 0);
	assert_non_null(strstr(r.out, "serves again as incarnation"));
	hx_run_free(&r);

	/* the writers see their connections dropped (a real reboot, to them) */
	atomic_store(&d.stop, true);
	atomic_store(&u.stop, true);
	pthread_join(d.th, NULL);
	pthread_join(u.th, NULL);
	printf("%s, faults %s: %u durable and %u plain writes acknowledged before the cut; the "
	       "writers ended with: %s / %s\n",
	       t == T_NBD ? "nbd" : n.d.url, faults ? faults : "none", atomic_load(&d.progress),
	       atomic_load(&u.progress), rdax_strerror(d.end), rdax_strerror(u.end));
	assert_int_not_equal(d.end, 0);
	assert_int_not_equal(u.end, 0);

	/* the same process, serving, a new incarnation */
	assert_true(hx_daemon_alive(&n.d));
	assert_int_equal(n.d.pid, pid);
	uint64_t inc1 = incarnation(&n);
	assert_int_not_equal(inc1, 0);
	assert_int_not_equal(inc1, inc0);
	int broken = check_after(&n, &d);
	serves(&n);
	stop(&n, dir);
	return broken;
}

static void cut__native_in_flight(void **state)
{
	assert_int_equal(cut_scenario(T_NATIVE, NULL), 0);
}

static void cut__native_control_skip_writeback(void **state)
{
	assert_true(cut_scenario(T_NATIVE, "skip-writeback") & LOST);
}

static void cut__native_control_keep_mapping(void **state)
{
	assert_true(cut_scenario(T_NATIVE, "powercut-keep-mapping") & SURVIVED);
}

static void cut__nbd_in_flight(void **state)
{
	assert_int_equal(cut_scenario(T_NBD, NULL), 0);
}

static void cut__nbd_control_skip_writeback(void **state)
{
	assert_true(cut_scenario(T_NBD, "skip-writeback") & LOST);
}

static void cut__nbd_control_keep_mapping(void **state)
{
	assert_true(cut_scenario(T_NBD, "powercut-keep-mapping") & SURVIVED);
}

/*
 * after__exactly_n -- armed with --after 5, one client alternates write and
 * fsync on separate pages: acknowledgements 1 to 5 arrive (w1, fsync w1, w2,
 * fsync w2, w3), the 6th (the fsync of w3) never does and never runs: w1
 * and w2 survive, w3 does not
 */
static void after__exactly_n(void **state)
{
	char dir[256];
	struct nt_daemon n;
	start(&n, dir, sizeof(dir), NULL, true);
	uint64_t inc0 = incarnation(&n);
	struct hx_run r;
	assert_int_equal(cli_powercut(&n, &r, "--after", "5", NULL), 0);
	assert_non_null(strstr(r.out, "after 5 more acknowledged requests"));
	hx_run_free(&r);
	/* the count has not run out: the incarnation is the same */
	assert_int_equal(incarnation(&n), inc0);

	struct rdax_conn *c;
	struct rdax_volume *v = conn_open(&n, &c);
	uint8_t page[PAGE];
	int acks = 0, ret = 0;
	for (unsigned w = 0; w < 4 && ret == 0; w++) {
		gen_fill(page, 9, w, true);
		ret = rdax_write(v, (uint64_t)w * STRIDE, page, PAGE, 0);
		acks += ret == 0;
		if (ret == 0) {
			ret = rdax_fsync(v, (uint64_t)w * STRIDE, PAGE, NULL);
			acks += ret == 0;
		}
	}
	printf("%d requests acknowledged, then: %s\n", acks, rdax_strerror(ret));
	assert_int_equal(acks, 5);
	assert_int_not_equal(ret, 0);
	rdax_volume_close(&v);
	rdax_disconnect(&c);

	/* wait for the new incarnation (the cut runs on the daemon's main thread) */
	int64_t deadline = hx_now_ms() + 60000;
	uint64_t inc1;
	while ((inc1 = incarnation(&n)) == inc0 && hx_now_ms() < deadline)
		usleep(50000);
	assert_int_not_equal(inc1, inc0);
	v = conn_open(&n, &c);
	uint8_t got[PAGE];
	for (unsigned w = 0; w < 3; w++) {
		gen_fill(page, 9, w, true);
		assert_int_equal(rdax_read(v, (uint64_t)w * STRIDE, got, PAGE), 0);
		if (w < 2)
			assert_memory_equal(got, page, PAGE);
		else
			for (unsigned i = 0; i < PAGE; i++)
				assert_int_equal(got[i], 0);
	}
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	stop(&n, dir);
}

/* delay__cut_after_a_time -- --delay 0.3 --wait: returns once the cut happened */
static void delay__cut_after_a_time(void **state)
{
	char dir[256];
	struct nt_daemon n;
	start(&n, dir, sizeof(dir), NULL, true);
	uint64_t inc0 = incarnation(&n);
	pid_t pid = n.d.pid;
	struct hx_run r;
	assert_int_equal(cli_powercut(&n, &r, "--delay", "0.3", "--wait"), 0);
	assert_non_null(strstr(r.out, "serves again as incarnation"));
	hx_run_free(&r);
	assert_int_not_equal(incarnation(&n), inc0);
	assert_int_equal(n.d.pid, pid);
	/* --json, armed for later (a day) and so not done: the second one is refused */
	assert_int_equal(cli_powercut(&n, &r, "--delay", "86400", "--json"), 0);
	assert_non_null(strstr(r.out, "\"done\":false"));
	assert_non_null(strstr(r.out, "\"incarnation_after\":null"));
	hx_run_free(&r);
	assert_int_equal(cli_powercut(&n, &r, "--after", "3", NULL), 1);
	assert_non_null(strstr(r.err, "already armed"));
	hx_run_free(&r);
	serves(&n);
	stop(&n, dir);
}

/* refused__not_allowed -- no --allow-powercut: a clear refusal, the data untouched */
static void refused__not_allowed(void **state)
{
	char dir[256];
	struct nt_daemon n;
	start(&n, dir, sizeof(dir), NULL, false);
	uint64_t inc0 = incarnation(&n);
	struct rdax_conn *c;
	struct rdax_volume *v = conn_open(&n, &c);
	assert_false(rdax_conn_powercut_allowed(c));
	uint8_t buf[100], got[100];
	hx_pattern(buf, sizeof(buf), 5, 0);
	/* written, not fsynced: a cut would lose it; a refused one must not */
	assert_int_equal(rdax_write(v, 0, buf, sizeof(buf), 0), 0);
	uint64_t inc = 0;
	assert_int_equal(rdax_powercut(c, 0, 0, &inc), -EPERM);
	assert_non_null(strstr(rdax_conn_last_error(c), "--allow-powercut"));
	/* the connection goes on */
	assert_int_equal(rdax_read(v, 0, got, sizeof(got)), 0);
	assert_memory_equal(buf, got, sizeof(buf));
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	struct hx_run r;
	assert_int_equal(cli_powercut(&n, &r, NULL, NULL, NULL), 1);
	assert_non_null(strstr(r.err, "--allow-powercut"));
	hx_run_free(&r);
	assert_int_equal(incarnation(&n), inc0);
	stop(&n, dir);
}

/* refused__bad_arguments -- usage errors of the command: exit 2, nothing sent */
static void refused__bad_arguments(void **state)
{
	char dir[256];
	struct nt_daemon n;
	start(&n, dir, sizeof(dir), NULL, true);
	uint64_t inc0 = incarnation(&n);
	static const char *const bad[][2] = {
	    {"--after", "0"},  {"--after", "-3"},  {"--after", "x"},	{"--delay", "0"},
	    {"--delay", "-1"}, {"--delay", "1e9"}, {"--delay", "soon"}, {"--bogus", "1"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hx_run r;
		assert_int_equal(cli_powercut(&n, &r, bad[i][0], bad[i][1], NULL), 2);
		assert_non_null(strstr(r.err, "powercut"));
		hx_run_free(&r);
	}
	assert_int_equal(incarnation(&n), inc0);
	stop(&n, dir);
}

/* refused__not_sim -- --allow-powercut over a namespace in auto mode: rdaxd does not start */
static void refused__not_sim(void **state)
{
	char dir[256], ns[320];
	assert_int_equal(hx_tmpdir_make("pcut-auto", dir, sizeof(dir)), 0);
	snprintf(ns, sizeof(ns), "%s/ns0,size=16M,mode=auto", dir);
	const char *argv[] = {RDAXD_PATH,	   "--namespace",      ns,  "--listen",
			      "tcp://127.0.0.1:0", "--allow-powercut", NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "--allow-powercut needs every namespace in sim mode"));
	assert_null(strstr(r.out, "rdaxd: ready"));
	hx_run_free(&r);
	/* and with --cluster: a usage error */
	const char *argv2[] = {RDAXD_PATH, "--allow-powercut", "--cluster", "etcd://127.0.0.1:1",
			       NULL};
	assert_int_equal(hx_run_argv(argv2, NULL, 0, &r), 0);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--allow-powercut does not go with --cluster"));
	hx_run_free(&r);
	hx_tmpdir_remove(dir);
}

int main(int argc, char **argv)
{
	nt_env_init();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(cut__native_in_flight),
	    cmocka_unit_test(cut__native_control_skip_writeback),
	    cmocka_unit_test(cut__native_control_keep_mapping),
	    cmocka_unit_test(cut__nbd_in_flight),
	    cmocka_unit_test(cut__nbd_control_skip_writeback),
	    cmocka_unit_test(cut__nbd_control_keep_mapping),
	    cmocka_unit_test(after__exactly_n),
	    cmocka_unit_test(delay__cut_after_a_time),
	    cmocka_unit_test(refused__not_allowed),
	    cmocka_unit_test(refused__bad_arguments),
	    cmocka_unit_test(refused__not_sim),
	};
	/* RDAX_IT_ONLY=NAME: one test (the VM suite runs the rdma:// ones) */
	const char *only = getenv("RDAX_IT_ONLY");
	if (only && *only)
		cmocka_set_test_filter(only);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
