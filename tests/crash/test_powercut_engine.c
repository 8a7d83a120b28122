/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_powercut_engine.c -- an acknowledged fsync survives a power cut
 *
 * A child process drives the engine directly (namespace, volume, writes,
 * fsync_range) on a SIM-mode namespace: its stores land in a private copy
 * of the file and only what fsync writes back reaches the file. The parent
 * kills it with SIGKILL -- the power cut -- then opens the namespace again
 * and checks what survived against what the child reported through a pipe:
 *  - powercut__*: pattern A written and fsynced, pattern B written over it
 *    and beside it without fsync. A must be intact, B absent (the bytes of B
 *    read what was there before B: A or zeros), the metadata must load.
 *    Control: the child runs with skip_writeback, and the check must report
 *    the loss.
 *  - powercut_random__*: rounds of random writes, discards and fsyncs, the
 *    child killed at a random point; every byte must hold its value as of
 *    the last acknowledged fsync (or discard) covering it, or a value that a
 *    later, unacknowledged operation put there. Seeded; the seed is printed
 *    and RDAX_TEST_SEED repeats a run.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "checked.h"
#include "errors.h"
#include "faults.h"
#include "fsync.h"
#include "log.h"
#include "namespace.h"
#include "volume.h"

#include "tmpdir.h"

#define NS_SIZE		  (16ULL << 20)
#define VOL_SIZE	  (8ULL << 20)
#define NS_ID		  9
#define VOL_NAME	  "crash"
#define PAGE		  RDAX_PAGE_SIZE
#define PMD		  RDAX_PMD_SIZE
#define REPORT_TIMEOUT_MS 60000

/* ---- the child -> parent reports ---------------------------------------- */

enum rep_type {
	REP_READY = 1,	 /* set-up done (deterministic test: B written) */
	REP_WRITE,	 /* before a write: id, off, len, crc of its bytes */
	REP_DISCARD,	 /* before a discard: off, len */
	REP_DISCARD_ACK, /* the discard returned: [off, off + len) is durably zero */
	REP_FSYNC_ACK,	 /* fsync_range returned 0 for [off, off + len) */
	REP_DONE,	 /* all operations done; the child now waits to be killed */
	REP_FAIL,	 /* the child failed: id = source line, len = -error */
};

/* one report; far below PIPE_BUF, so each write(2) of one is atomic */
struct report {
	uint32_t type;
	uint32_t crc;
	uint64_t id;
	uint64_t off;
	uint64_t len;
};

static void child_send(int fd, uint32_t type, uint64_t id, uint64_t off, uint64_t len, uint32_t crc)
{
	struct report r = {.type = type, .crc = crc, .id = id, .off = off, .len = len};
	if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(3);
}

/* child_check -- in the child a failed step is reported, never asserted */
#define child_check(fd, expr)                                                                      \
	do {                                                                                       \
		long long child_ret_ = (long long)(expr);                                          \
		if (child_ret_ != 0) {                                                             \
			child_send((fd), REP_FAIL, __LINE__, 0, (uint64_t)-child_ret_, 0);         \
			_exit(2);                                                                  \
		}                                                                                  \
	} while (0)

/* child_wait_for_power_cut -- the child's last act: wait for SIGKILL */
static void __attribute__((noreturn)) child_wait_for_power_cut(void)
{
	for (;;)
		pause();
}

/* ---- contents ------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* content_byte -- the byte write @key puts at volume offset @off */
static uint8_t content_byte(uint64_t key, uint64_t off)
{
	uint64_t h = mix64(key ^ ((off >> 3) * 0x9e3779b97f4a7c15ULL));
	return (uint8_t)(h >> ((off & 7) * 8));
}

static void content_fill(uint8_t *buf, uint64_t key, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		buf[i] = content_byte(key, off + i);
}

/* ---- fixture ------------------------------------------------------------- */

struct fx {
	char dir[256];
	char path[512];
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "powercut");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

/* ---- running and killing the child --------------------------------------- */

struct child {
	pid_t pid;
	int rfd;
};

/* child_start -- fork; the child runs @fn(write end, @arg) and never returns */
static void child_start(struct child *c, void (*fn)(int wfd, void *arg), void *arg)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		fn(fds[1], arg);
		child_wait_for_power_cut();
	}
	close(fds[1]);
	c->pid = pid;
	c->rfd = fds[0];
}

/*
 * child_read -- the next report; false at end of file (the child is dead
 * and everything it sent has been read). A child that sends nothing for
 * REPORT_TIMEOUT_MS is killed and the test fails (a hang, not a result).
 */
static bool child_read(struct child *c, struct report *r)
{
	size_t got = 0;
	while (got < sizeof(*r)) {
		struct pollfd pfd = {.fd = c->rfd, .events = POLLIN};
		int n = poll(&pfd, 1, REPORT_TIMEOUT_MS);
		if (n == 0) {
			kill(c->pid, SIGKILL);
			fail_msg("the child sent nothing for %d ms", REPORT_TIMEOUT_MS);
		}
		if (n < 0 && errno == EINTR)
			continue;
		assert_true(n > 0);
		ssize_t k = read(c->rfd, (char *)r + got, sizeof(*r) - got);
		if (k < 0 && errno == EINTR)
			continue;
		assert_true(k >= 0);
		if (k == 0) {
			assert_int_equal(got, 0); /* records are written whole */
			return false;
		}
		got += (size_t)k;
	}
	if (r->type == REP_FAIL) {
		kill(c->pid, SIGKILL);
		fail_msg("the child failed at line %" PRIu64 " with error %" PRId64, r->id,
			 -(int64_t)r->len);
	}
	return true;
}

/* child_power_cut -- SIGKILL, and make sure that is how it ended */
static void child_power_cut(struct child *c)
{
	int status = 0;
	assert_int_equal(kill(c->pid, SIGKILL), 0);
	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
}

/* reopen_and_read -- open the namespace after the cut, read the whole volume */
static void reopen_and_read(const char *path, enum persist_mode mode, uint8_t *out)
{
	struct ns *ns = NULL;
	struct volume *v = NULL;
	int ret = ns_open(path, mode, NS_ID, &ns);
	if (ret)
		fail_msg("metadata does not load after the power cut: %d (%s)", ret,
			 rdax_strerror(ret));
	assert_int_equal(ns_volume_open(ns, VOL_NAME, &v), 0);
	assert_int_equal(v->size, VOL_SIZE);
	assert_int_equal(volume_read(v, 0, out, VOL_SIZE), 0);
	ns_volume_close(ns, &v);
	ns_close(&ns);
}

/* ---- the deterministic A / B test ----------------------------------------- */

struct range {
	uint64_t off, len;
};

/* A: bytes, a range crossing pages, a whole 2 MiB block (a huge entry) */
static const struct range ranges_a[] = {
    {0, 10000},
    {3 * PMD / 2 + 100, 5000},
    {2 * PMD, PMD},
};
/* B: overlapping A, beside it, across the end of A's huge block, a fresh huge block */
static const struct range ranges_b[] = {
    {5000, 15000}, {PMD / 2, PAGE}, {3 * PMD - 100, 8192}, {3 * PMD / 2 + 100, 5000}, {PMD, PMD},
};
#define KEY_A 0xa11ceULL
#define KEY_B 0xb0bULL

struct ab_args {
	const char *path;
	bool skip_writeback;
};

static void write_key_range(int wfd, struct volume *v, uint64_t key, struct range r)
{
	uint8_t *buf = malloc(r.len);
	if (!buf)
		child_check(wfd, -ENOMEM);
	content_fill(buf, key, r.off, r.len);
	child_check(wfd, volume_write(v, r.off, buf, r.len));
	free(buf);
}

/* child_ab -- A, fsync, B without fsync, then wait for the cut */
static void child_ab(int wfd, void *arg)
{
	struct ab_args *a = arg;
	struct ns *ns = NULL;
	struct volume *v = NULL;
	log_set_level(LOG_LEVEL_WARN);
	rdax_faults.skip_writeback = a->skip_writeback;
	child_check(wfd, ns_create(a->path, NS_SIZE, PERSIST_SIM, NS_ID, &ns));
	child_check(wfd, ns_volume_create(ns, VOL_NAME, VOL_SIZE));
	child_check(wfd, ns_volume_open(ns, VOL_NAME, &v));
	for (size_t i = 0; i < sizeof(ranges_a) / sizeof(ranges_a[0]); i++)
		write_key_range(wfd, v, KEY_A, ranges_a[i]);
	uint64_t written = 0;
	child_check(wfd, fsync_range(v, 0, 0, FLUSH_DEFAULT, &written));
	child_send(wfd, REP_FSYNC_ACK, 0, 0, VOL_SIZE, 0);
	for (size_t i = 0; i < sizeof(ranges_b) / sizeof(ranges_b[0]); i++)
		write_key_range(wfd, v, KEY_B, ranges_b[i]);
	child_send(wfd, REP_READY, 0, 0, written, 0);
}

static bool in_ranges(const struct range *r, size_t n, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (off >= r[i].off && off - r[i].off < r[i].len)
			return true;
	return false;
}

struct ab_verdict {
	uint64_t a_lost;   /* bytes of A (not under B) that do not read A */
	uint64_t b_leaked; /* bytes under B that read neither what was there before */
	uint64_t other;	   /* never-written bytes that are not zero */
};

/* check_ab -- compare the volume after the cut with "A durable, B absent" */
static void check_ab(const uint8_t *got, struct ab_verdict *out)
{
	memset(out, 0, sizeof(*out));
	const size_t na = sizeof(ranges_a) / sizeof(ranges_a[0]);
	const size_t nb = sizeof(ranges_b) / sizeof(ranges_b[0]);
	for (uint64_t off = 0; off < VOL_SIZE; off++) {
		bool a = in_ranges(ranges_a, na, off);
		uint8_t before_b = a ? content_byte(KEY_A, off) : 0;
		if (got[off] == before_b)
			continue;
		if (in_ranges(ranges_b, nb, off))
			out->b_leaked++;
		else if (a)
			out->a_lost++;
		else
			out->other++;
	}
}

/* run_ab -- the whole A / B experiment; returns the verdict */
static void run_ab(struct fx *fx, bool skip_writeback, enum persist_mode reopen,
		   struct ab_verdict *verdict, uint64_t *written)
{
	struct ab_args args = {.path = fx->path, .skip_writeback = skip_writeback};
	struct child c;
	struct report r;
	bool acked = false, ready = false;

	child_start(&c, child_ab, &args);
	while (!ready && child_read(&c, &r)) {
		acked = acked || r.type == REP_FSYNC_ACK;
		ready = r.type == REP_READY;
		if (ready)
			*written = r.len;
	}
	assert_true(acked);
	assert_true(ready);
	child_power_cut(&c);
	close(c.rfd);

	uint8_t *got = malloc(VOL_SIZE);
	assert_non_null(got);
	reopen_and_read(fx->path, reopen, got);
	check_ab(got, verdict);
	free(got);
}

static void powercut__fsynced_survives_unsynced_absent_sim(void **state)
{
	struct ab_verdict v;
	uint64_t written = 0;
	run_ab(*state, false, PERSIST_SIM, &v, &written);
	/*
	 * A's written lines: [0, 10000) is pages 0 and 1 and lines 0-28 of
	 * page 2; [3 MiB + 100, + 5000) lines 1-63 of one page and 0-15 of the
	 * next; then one 2 MiB entry, whole
	 */
	assert_int_equal(written, 2 * PAGE + (29 + 63 + 16) * DTREE_LINE_SIZE + PMD);
	assert_int_equal(v.a_lost, 0);
	assert_int_equal(v.b_leaked, 0);
	assert_int_equal(v.other, 0);
}

static void powercut__fsynced_survives_unsynced_absent_auto(void **state)
{
	struct ab_verdict v;
	uint64_t written = 0;
	run_ab(*state, false, PERSIST_AUTO, &v, &written);
	assert_int_equal(v.a_lost, 0);
	assert_int_equal(v.b_leaked, 0);
	assert_int_equal(v.other, 0);
}

/* control: the fsync forgets one write-back; the same check must see the loss */
static void powercut__control_skip_writeback_is_detected(void **state)
{
	struct ab_verdict v;
	uint64_t written = 0;
	run_ab(*state, true, PERSIST_SIM, &v, &written);
	assert_true(v.a_lost > 0);
	assert_int_equal(v.b_leaked, 0);
}

/* ---- the randomised rounds ------------------------------------------------ */

#define RANDOM_ROUNDS 8
#define RANDOM_OPS    300

static uint64_t test_seed;

static uint64_t rng_next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ULL;
	return mix64(*s);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

/* write_key -- the content key of write @id (ids are unique across rounds) */
static uint64_t write_key(uint64_t id)
{
	return mix64(test_seed ^ mix64(id + 1));
}

struct random_args {
	const char *path;
	unsigned round;
	bool skip_writeback;
};

/*
 * child_random -- RANDOM_OPS random operations, reporting each write and
 * discard before it starts and each acknowledgement after it returns; ends
 * with a write and an fsync (so the control always has a last fsync whose
 * skipped write-back nothing repairs), then REP_DONE.
 */
static void child_random(int wfd, void *arg)
{
	struct random_args *a = arg;
	struct ns *ns = NULL;
	struct volume *v = NULL;
	uint64_t rng = test_seed ^ mix64(a->round + 1000);
	uint8_t *buf = malloc(PMD);
	if (!buf)
		child_check(wfd, -ENOMEM);

	log_set_level(LOG_LEVEL_WARN);
	rdax_faults.skip_writeback = a->skip_writeback;
	if (a->round == 0) {
		child_check(wfd, ns_create(a->path, NS_SIZE, PERSIST_SIM, NS_ID, &ns));
		child_check(wfd, ns_volume_create(ns, VOL_NAME, VOL_SIZE));
	} else {
		child_check(wfd, ns_open(a->path, PERSIST_SIM, NS_ID, &ns));
	}
	child_check(wfd, ns_volume_open(ns, VOL_NAME, &v));
	child_send(wfd, REP_READY, 0, 0, 0, 0);

	for (unsigned op = 0; op < RANDOM_OPS; op++) {
		uint64_t pick = rng_below(&rng, 100);
		uint64_t off, len;
		if (pick < 70) {
			/* a write: bytes anywhere, whole pages, or a whole 2 MiB block */
			uint64_t kind = rng_below(&rng, 10);
			if (kind < 6) {
				len = 1 + rng_below(&rng, 3 * PAGE);
				off = rng_below(&rng, VOL_SIZE - len + 1);
			} else if (kind < 9) {
				len = (1 + rng_below(&rng, 16)) * PAGE;
				off = rng_below(&rng, (VOL_SIZE - len) / PAGE + 1) * PAGE;
			} else {
				len = PMD;
				off = rng_below(&rng, VOL_SIZE / PMD) * PMD;
			}
			uint64_t id = ((uint64_t)a->round << 32) | op;
			content_fill(buf, write_key(id), off, len);
			child_send(wfd, REP_WRITE, id, off, len,
				   (uint32_t)crc32(0, buf, (uInt)len));
			child_check(wfd, volume_write(v, off, buf, len));
		} else if (pick < 78) {
			len = 1 + rng_below(&rng, 4 * PAGE);
			off = rng_below(&rng, VOL_SIZE - len + 1);
			child_send(wfd, REP_DISCARD, 0, off, len, 0);
			child_check(wfd, volume_discard(v, off, len));
			child_send(wfd, REP_DISCARD_ACK, 0, off, len, 0);
		} else {
			/* fsync: mostly the whole volume, sometimes a range, rarely the hammer */
			enum flush_mode mode = pick < 80 ? FLUSH_HAMMER : FLUSH_TRACKED;
			if (pick < 90) {
				off = 0;
				len = VOL_SIZE;
			} else {
				len = 1 + rng_below(&rng, VOL_SIZE / 4);
				off = rng_below(&rng, VOL_SIZE - len + 1);
			}
			child_check(wfd, fsync_range(v, off, len, mode, NULL));
			child_send(wfd, REP_FSYNC_ACK, 0, mode == FLUSH_HAMMER ? 0 : off,
				   mode == FLUSH_HAMMER ? VOL_SIZE : len, 0);
		}
	}
	/* the last operations: one more page written, and a tracked fsync of it all */
	uint64_t id = ((uint64_t)a->round << 32) | RANDOM_OPS;
	uint64_t off = rng_below(&rng, VOL_SIZE / PAGE) * PAGE;
	content_fill(buf, write_key(id), off, PAGE);
	child_send(wfd, REP_WRITE, id, off, PAGE, (uint32_t)crc32(0, buf, (uInt)PAGE));
	child_check(wfd, volume_write(v, off, buf, PAGE));
	child_check(wfd, fsync_range(v, 0, 0, FLUSH_TRACKED, NULL));
	child_send(wfd, REP_FSYNC_ACK, 0, 0, VOL_SIZE, 0);
	child_send(wfd, REP_DONE, 0, 0, 0, 0);
	free(buf);
}

/* an operation that may have changed bytes since their last acknowledgement */
struct pending_op {
	uint64_t id; /* UINT64_MAX: a discard (zeros) */
	uint64_t off, len;
};

/* an acknowledgement: [off, off + len) durable as of log position pos */
struct ack {
	uint64_t off, len;
	size_t pos;
};

/*
 * The parent's model of one volume: the value of every byte after every
 * reported operation (cur), the value each byte must hold unless a later
 * operation changed it (acked), the operations in order (log) and the
 * acknowledgements in order (acks), which tell where in the log the
 * operations after a byte's last acknowledgement start.
 */
struct model {
	uint8_t *cur;
	uint8_t *acked;
	struct pending_op *log;
	size_t nlog, log_cap;
	struct ack *acks;
	size_t nacks, acks_cap;
};

static void model_init(struct model *m)
{
	memset(m, 0, sizeof(*m));
	m->cur = calloc(1, VOL_SIZE);
	m->acked = calloc(1, VOL_SIZE);
	m->log_cap = m->acks_cap = RANDOM_OPS + 2;
	m->log = calloc(m->log_cap, sizeof(*m->log));
	m->acks = calloc(m->acks_cap, sizeof(*m->acks));
	assert_non_null(m->cur);
	assert_non_null(m->acked);
	assert_non_null(m->log);
	assert_non_null(m->acks);
}

static void model_free(struct model *m)
{
	free(m->cur);
	free(m->acked);
	free(m->log);
	free(m->acks);
}

/* model_apply -- one report from the child */
static void model_apply(struct model *m, const struct report *r, uint8_t *scratch)
{
	switch (r->type) {
	case REP_WRITE:
	case REP_DISCARD: {
		assert_true(r->len > 0 && r->len <= PMD && r->off + r->len <= VOL_SIZE);
		assert_true(m->nlog < m->log_cap);
		bool write = r->type == REP_WRITE;
		m->log[m->nlog++] = (struct pending_op){write ? r->id : UINT64_MAX, r->off, r->len};
		if (write) {
			content_fill(scratch, write_key(r->id), r->off, r->len);
			/* the child's bytes and the parent's model agree */
			assert_int_equal(crc32(0, scratch, (uInt)r->len), r->crc);
			memcpy(m->cur + r->off, scratch, r->len);
		} else {
			memset(m->cur + r->off, 0, r->len);
		}
		break;
	}
	case REP_DISCARD_ACK:
	case REP_FSYNC_ACK:
		assert_true(r->off + r->len <= VOL_SIZE);
		assert_true(m->nacks < m->acks_cap);
		memcpy(m->acked + r->off, m->cur + r->off, r->len);
		m->acks[m->nacks++] = (struct ack){r->off, r->len, m->nlog};
		break;
	default:
		break;
	}
}

/* model_allows -- whether byte @b may read @got after the cut */
static bool model_allows(const struct model *m, uint64_t b, uint8_t got)
{
	if (got == m->acked[b])
		return true;
	size_t from = 0;
	for (size_t i = m->nacks; i-- > 0;) {
		if (b >= m->acks[i].off && b - m->acks[i].off < m->acks[i].len) {
			from = m->acks[i].pos;
			break;
		}
	}
	for (size_t i = from; i < m->nlog; i++) {
		const struct pending_op *op = &m->log[i];
		if (b < op->off || b - op->off >= op->len)
			continue;
		uint8_t val = op->id == UINT64_MAX ? 0 : content_byte(write_key(op->id), b);
		if (val == got)
			return true;
	}
	return false;
}

/*
 * model_check_and_rebase -- count bytes the model does not allow; then make
 * what was read the acknowledged state the next round starts from.
 */
static uint64_t model_check_and_rebase(struct model *m, const uint8_t *got, unsigned round,
				       uint64_t *later)
{
	uint64_t bad = 0;
	for (uint64_t b = 0; b < VOL_SIZE; b++) {
		if (model_allows(m, b, got[b])) {
			/*
			 * newer than acknowledged: written back beyond an
			 * acknowledged range (whole pages, whole huge entries)
			 * or by an operation the cut interrupted
			 */
			*later += got[b] != m->acked[b];
			continue;
		}
		if (bad++ < 3)
			print_message("round %u: byte %" PRIu64
				      " reads 0x%02x, acknowledged 0x%02x\n",
				      round, b, got[b], m->acked[b]);
	}
	memcpy(m->acked, got, VOL_SIZE);
	memcpy(m->cur, got, VOL_SIZE);
	m->nlog = 0;
	m->nacks = 0;
	return bad;
}

struct random_totals {
	uint64_t bad;	/* bytes not allowed by the model, all rounds */
	uint64_t acks;	/* fsync acknowledgements seen */
	uint64_t later; /* bytes holding an unacknowledged, newer value */
	unsigned killed_before_done;
};

/*
 * run_random -- RANDOM_ROUNDS children on one namespace, each killed after
 * a random number of reports (or once it is done); verified after each.
 * While the child runs, the parent only reads reports (no model work), so
 * the child is never far past the report that triggers the cut: the cut
 * lands inside the operation that follows it, often an fsync.
 */
static void run_random(struct fx *fx, bool skip_writeback, bool kill_early,
		       struct random_totals *tot)
{
	struct model m;
	const size_t max_reports = 3 * RANDOM_OPS + 8;
	struct report *reports = calloc(max_reports, sizeof(*reports));
	uint8_t *scratch = malloc(PMD);
	uint8_t *got = malloc(VOL_SIZE);
	assert_non_null(reports);
	assert_non_null(scratch);
	assert_non_null(got);
	model_init(&m);
	memset(tot, 0, sizeof(*tot));
	uint64_t rng = test_seed ^ 0x5eedULL;

	for (unsigned round = 0; round < RANDOM_ROUNDS; round++) {
		struct random_args args = {
		    .path = fx->path, .round = round, .skip_writeback = skip_writeback};
		/*
		 * A round sends about 1.1 reports per operation: a cut point
		 * drawn below 1.2 per operation lands before the end most times.
		 */
		uint64_t kill_after =
		    kill_early ? 1 + rng_below(&rng, RANDOM_OPS + RANDOM_OPS / 5) : UINT64_MAX;
		struct child c;
		size_t n = 0;
		bool done = false;

		child_start(&c, child_random, &args);
		while (n < kill_after && !done && n < max_reports && child_read(&c, &reports[n]))
			done = reports[n++].type == REP_DONE;
		child_power_cut(&c);
		tot->killed_before_done += !done;
		/* what the child sent before it died: operations that may have started */
		while (n < max_reports && child_read(&c, &reports[n]))
			n++;
		close(c.rfd);
		for (size_t i = 0; i < n; i++) {
			model_apply(&m, &reports[i], scratch);
			tot->acks += reports[i].type == REP_FSYNC_ACK;
		}

		reopen_and_read(fx->path, round % 2 ? PERSIST_AUTO : PERSIST_SIM, got);
		tot->bad += model_check_and_rebase(&m, got, round, &tot->later);
	}
	model_free(&m);
	free(reports);
	free(scratch);
	free(got);
}

static void powercut_random__acknowledged_data_survives(void **state)
{
	struct random_totals tot;
	run_random(*state, false, true, &tot);
	print_message("seed %" PRIu64 ": %u of %u rounds cut before the end, %" PRIu64
		      " fsync acknowledgements checked, %" PRIu64
		      " bytes durable with a newer value than acknowledged\n",
		      test_seed, tot.killed_before_done, RANDOM_ROUNDS, tot.acks, tot.later);
	assert_int_equal(tot.bad, 0);
	assert_true(tot.acks > 0);
}

/*
 * control: with skip_writeback every fsync leaves one entry unwritten, and
 * the last fsync of each round (nothing after it can repair it) is always
 * acknowledged because the child is cut only once it is done.
 */
static void powercut_random__control_skip_writeback_is_detected(void **state)
{
	struct random_totals tot;
	run_random(*state, true, false, &tot);
	assert_int_equal(tot.killed_before_done, 0);
	assert_true(tot.bad > 0);
}

int main(void)
{
	const char *env = getenv("RDAX_TEST_SEED");
	test_seed = env && *env ? strtoull(env, NULL, 0)
				: (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	fprintf(stderr,
		"test_powercut_engine: seed %" PRIu64 " (RDAX_TEST_SEED=%" PRIu64
		" repeats this run)\n",
		test_seed, test_seed);
	log_set_level(LOG_LEVEL_WARN);
	setvbuf(stdout, NULL, _IOLBF, 0); /* reports interleave with the children's output */

	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
	    T(powercut__fsynced_survives_unsynced_absent_sim),
	    T(powercut__fsynced_survives_unsynced_absent_auto),
	    T(powercut__control_skip_writeback_is_detected),
	    T(powercut_random__acknowledged_data_survives),
	    T(powercut_random__control_skip_writeback_is_detected),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
