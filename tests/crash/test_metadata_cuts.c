/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_metadata_cuts.c -- a power cut at any instant of a metadata update
 * leaves the old state or the new one, never a mix, never a refusal
 *
 * Every cut point is enumerated with the simulator's power budget
 * (persist.h): run the update with a budget of k cache lines for
 * k = 0, 1, 2, ... until it completes within its budget; after each run the
 * namespace is opened again from the file (the persistence domain) and its
 * volume list must equal the state before or the state after the update.
 * Multi-line flushes are torn at every line this way. A commit writes both
 * metadata copies, the second after the first is durable (vol_table.h), so
 * the cuts fall in the first copy, between the two, and in the second; after
 * the open that follows any of them both copies must hold the same state
 * again (the open repairs the other), so that damage to one copy later
 * cannot undo anything.
 *
 * The updates: create and delete a volume, a forced and a fresh format,
 * and clearing unsafe-shutdown marks (one volume's, a namespace's with all
 * of its volumes').
 *
 * Controls: the same enumeration with both copies written line by line
 * together (faults.h meta_copies_together) must find a cut whose state is
 * neither; a real kill -9 of a process mid-update must leave a state the
 * process had reached or was reaching.
 */
#include <endian.h>
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "checked.h"
#include "errors.h"
#include "faults.h"
#include "fsync.h"
#include "log.h"
#include "namespace.h"
#include "vol_table.h"
#include "volume.h"

#include "logcap.h"
#include "nsfile.h"
#include "pattern.h"
#include "tmpdir.h"

#define MiB	      (1ULL << 20)
#define NS_SIZE	      (16 * MiB)
#define PAGE	      RDAX_PAGE_SIZE
#define SETUP_VOLUMES 8 /* enough entries that a commit spans 20+ cache lines */
#define X_SIZE	      (4 * PAGE)
#define MAX_VOLS      256

struct fx {
	char dir[256];
	char path[512];
	uint64_t x_offset; /* where the deleted volume "x" was */
};

/* A namespace as seen after a reopen: the refusal code, or its volumes. */
struct vol_rec {
	char name[NS_VOLUME_NAME_MAX + 1];
	uint64_t size, off;
	bool unsafe; /* marked by an unsafe shutdown */
};
struct snap {
	int open_ret;
	bool ns_unsafe; /* the namespace's unsafe-shutdown mark */
	unsigned n;
	struct vol_rec v[MAX_VOLS];
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "test-cuts");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	persist_sim_set_budget(-1);
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	persist_sim_set_budget(-1);
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

static int cmp_rec(const void *a, const void *b)
{
	return strcmp(((const struct vol_rec *)a)->name, ((const struct vol_rec *)b)->name);
}

/* snap_take -- open the namespace from the file and record what it holds */
static void snap_take(const char *path, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	struct ns *ns;
	s->open_ret = ns_open(path, PERSIST_SIM, 1, &ns);
	if (s->open_ret)
		return;
	static struct volume_info vi[MAX_VOLS];
	assert_int_equal(ns_volume_list(ns, vi, MAX_VOLS, &s->n), 0);
	assert_true(s->n <= MAX_VOLS);
	for (unsigned i = 0; i < s->n; i++) {
		memcpy(s->v[i].name, vi[i].name, sizeof(s->v[i].name));
		s->v[i].size = vi[i].size;
		s->v[i].off = vi[i].ns_offset;
		s->v[i].unsafe = vi[i].unsafe_shutdown;
	}
	struct media_health_info mh;
	media_health_get(&ns->health, &mh);
	s->ns_unsafe = mh.unsafe_shutdown;
	qsort(s->v, s->n, sizeof(s->v[0]), cmp_rec);
	ns_close(&ns);
}

static bool snap_equal(const struct snap *a, const struct snap *b)
{
	if (a->open_ret != b->open_ret || a->ns_unsafe != b->ns_unsafe || a->n != b->n)
		return false;
	return memcmp(a->v, b->v, a->n * sizeof(a->v[0])) == 0;
}

static void snap_print(const char *what, const struct snap *s)
{
	if (s->open_ret) {
		print_message("  %s: refused (%s)\n", what, rdax_strerror(s->open_ret));
		return;
	}
	print_message("  %s: %s%u volumes:", what, s->ns_unsafe ? "marked, " : "", s->n);
	for (unsigned i = 0; i < s->n; i++)
		print_message(" %s@%llu%s", s->v[i].name, (unsigned long long)s->v[i].off,
			      s->v[i].unsafe ? "(marked)" : "");
	print_message("\n");
}

/* fresh_file -- remove the namespace file left by the previous run */
static void fresh_file(struct fx *fx)
{
	unlink(fx->path);
}

/*
 * setup_volumes -- a namespace with SETUP_VOLUMES small volumes and the
 * space of a deleted volume "x" whose data (a pattern) was made durable
 */
static void setup_volumes(struct fx *fx)
{
	struct ns *ns;
	char name[16];
	assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &ns), 0);
	for (unsigned i = 0; i < SETUP_VOLUMES; i++) {
		snprintf(name, sizeof(name), "v%u", i);
		assert_int_equal(ns_volume_create(ns, name, PAGE), 0);
	}
	assert_int_equal(ns_volume_create(ns, "x", X_SIZE), 0);
	struct volume *v;
	assert_int_equal(ns_volume_open(ns, "x", &v), 0);
	fx->x_offset = v->ns_offset;
	uint8_t buf[X_SIZE];
	memset(buf, 0xd7, sizeof(buf));
	assert_int_equal(volume_write(v, 0, buf, sizeof(buf)), 0);
	assert_int_equal(fsync_range(v, 0, 0, FLUSH_DEFAULT, NULL), 0);
	ns_volume_close(ns, &v);
	assert_int_equal(ns_volume_delete(ns, "x"), 0);
	ns_close(&ns);
}

/* setup_volumes_and_b -- setup_volumes() plus "b" over x's old space */
static void setup_volumes_and_b(struct fx *fx)
{
	setup_volumes(fx);
	struct ns *ns;
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &ns), 0);
	assert_int_equal(ns_volume_create(ns, "b", X_SIZE), 0);
	ns_close(&ns);
}

/*
 * setup_volumes_marked -- setup_volumes() with the namespace and every
 * volume marked by an unsafe shutdown, as media_health_open() marks them
 */
static void setup_volumes_marked(struct fx *fx)
{
	setup_volumes(fx);
	struct persist p;
	struct vol_table *t;
	assert_int_equal(persist_map(fx->path, PERSIST_SIM, &p), 0);
	assert_int_equal(vol_table_load(&p, &t), 0);
	struct vt_shutdown sds = {.usc = 3, .flags = VT_SDS_KNOWN | VT_SDS_UNSAFE};
	assert_int_equal(vol_table_shutdown_set(t, &sds, true), 0);
	vol_table_delete(&t);
	persist_unmap(&p);
}

/* setup_plain_file -- a file of zeros, not formatted */
static void setup_plain_file(struct fx *fx)
{
	nsfile_create(fx->path, NS_SIZE);
}

/*
 * The update under test, run with a power budget of @budget lines (-1 =
 * none). The namespace is opened before the budget is set and closed after
 * the cut with the power still off. Returns the lines dropped by the update
 * itself (0: it completed within the budget).
 */
typedef uint64_t (*op_fn)(struct fx *fx, long budget);

static uint64_t op_create_b(struct fx *fx, long budget)
{
	struct ns *ns;
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &ns), 0);
	persist_sim_set_budget(budget);
	assert_int_equal(ns_volume_create(ns, "b", X_SIZE), 0); /* it cannot know */
	uint64_t dropped = persist_sim_dropped();
	ns_close(&ns);
	persist_sim_set_budget(-1);
	return dropped;
}

/* op_create_b_together -- op_create_b() with the control switched on for the update only */
static uint64_t op_create_b_together(struct fx *fx, long budget)
{
	struct ns *ns;
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &ns), 0);
	rdax_faults.meta_copies_together = true;
	persist_sim_set_budget(budget);
	assert_int_equal(ns_volume_create(ns, "b", X_SIZE), 0);
	uint64_t dropped = persist_sim_dropped();
	ns_close(&ns);
	persist_sim_set_budget(-1);
	rdax_faults.meta_copies_together = false;
	return dropped;
}

static uint64_t op_delete_b(struct fx *fx, long budget)
{
	struct ns *ns;
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &ns), 0);
	persist_sim_set_budget(budget);
	assert_int_equal(ns_volume_delete(ns, "b"), 0);
	uint64_t dropped = persist_sim_dropped();
	ns_close(&ns);
	persist_sim_set_budget(-1);
	return dropped;
}

/* op_clear -- an operator's clear of v3's mark (@name) or of the namespace's and all (NULL) */
static uint64_t op_clear(struct fx *fx, long budget, const char *name)
{
	struct ns *ns;
	struct ns_unsafe_cleared c;
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &ns), 0);
	persist_sim_set_budget(budget);
	assert_int_equal(ns_unsafe_clear(ns, name, &c), 0);
	assert_int_equal(c.nvolumes, name ? 1 : SETUP_VOLUMES);
	ns_unsafe_cleared_free(&c);
	uint64_t dropped = persist_sim_dropped();
	ns_close(&ns);
	persist_sim_set_budget(-1);
	return dropped;
}

static uint64_t op_clear_volume(struct fx *fx, long budget)
{
	return op_clear(fx, budget, "v3");
}

static uint64_t op_clear_namespace(struct fx *fx, long budget)
{
	return op_clear(fx, budget, NULL);
}

static uint64_t op_format_force(struct fx *fx, long budget)
{
	persist_sim_set_budget(budget);
	assert_int_equal(ns_format_mode(fx->path, PERSIST_SIM, true, NULL, 0), 0);
	uint64_t dropped = persist_sim_dropped();
	persist_sim_set_budget(-1);
	return dropped;
}

static uint64_t op_format_fresh(struct fx *fx, long budget)
{
	persist_sim_set_budget(budget);
	assert_int_equal(ns_format_mode(fx->path, PERSIST_SIM, false, NULL, 0), 0);
	uint64_t dropped = persist_sim_dropped();
	persist_sim_set_budget(-1);
	return dropped;
}

/* check_b_zero -- in the new state of create, "b" lies over x's old data and reads zeros */
static bool check_b_zero(struct fx *fx)
{
	struct ns *ns;
	struct volume *v;
	assert_int_equal(ns_open(fx->path, PERSIST_SIM, 1, &ns), 0);
	assert_int_equal(ns_volume_open(ns, "b", &v), 0);
	assert_int_equal(v->ns_offset, fx->x_offset);
	uint8_t buf[X_SIZE];
	assert_int_equal(volume_read(v, 0, buf, sizeof(buf)), 0);
	ns_volume_close(ns, &v);
	ns_close(&ns);
	return all_zero(buf, sizeof(buf));
}

struct cut_result {
	unsigned cuts;	      /* cut points enumerated */
	unsigned bad;	      /* neither old nor new */
	unsigned back_to_old; /* old after new had been seen */
	unsigned first_new;   /* first cut showing the new state */
	unsigned disagreed;   /* cuts that left the two copies different */
	unsigned unrepaired;  /* ... and still different after an open */
};

/* copies_identical -- the file's two metadata copies hold the same bytes */
static bool copies_identical(const char *path)
{
	static uint8_t a[VT_SLOT_SIZE], b[VT_SLOT_SIZE];
	nsfile_read(path, 0, a, sizeof(a));
	nsfile_read(path, VT_SLOT_SIZE, b, sizeof(b));
	uint32_t count; /* entries in use, little-endian at offset 28 (vol_table.h) */
	memcpy(&count, a + 28, sizeof(count));
	count = le32toh(count);
	if (count > VT_CAPACITY)
		return false;
	return memcmp(a, b, VT_HEADER_SIZE + (size_t)count * VT_ENTRY_SIZE) == 0;
}

/*
 * enumerate_cuts -- run @op after @setup with budgets 0, 1, 2, ... until it
 * completes; classify the state each cut leaves
 */
static struct cut_result enumerate_cuts(struct fx *fx, void (*setup)(struct fx *), op_fn op,
					bool (*check_new)(struct fx *))
{
	static struct snap old, new, cur;
	struct cut_result r = {0};

	fresh_file(fx);
	setup(fx);
	snap_take(fx->path, &old);
	assert_int_equal(op(fx, -1), 0);
	snap_take(fx->path, &new);
	assert_false(snap_equal(&old, &new));

	bool seen_new = false;
	for (long k = 0;; k++) {
		fresh_file(fx);
		setup(fx);
		uint64_t dropped = op(fx, k);
		bool disagreed = !copies_identical(fx->path);
		snap_take(fx->path, &cur);
		r.cuts++;
		if (disagreed && cur.open_ret == 0) {
			r.disagreed++;
			if (!copies_identical(fx->path)) /* the open must have repaired them */
				r.unrepaired++;
		}
		if (snap_equal(&cur, &new)) {
			if (!seen_new)
				r.first_new = (unsigned)k;
			seen_new = true;
			if (check_new && !check_new(fx)) {
				print_message(
				    "cut %ld: new state, but its new volume is not zero\n", k);
				r.bad++;
			}
		} else if (snap_equal(&cur, &old)) {
			if (seen_new)
				r.back_to_old++;
		} else {
			print_message("cut %ld (%llu lines dropped): neither old nor new\n", k,
				      (unsigned long long)dropped);
			snap_print("old", &old);
			snap_print("new", &new);
			snap_print("found", &cur);
			r.bad++;
		}
		if (dropped == 0) {
			assert_true(snap_equal(&cur, &new)); /* completed: the new state */
			break;
		}
		assert_true(k < 100000); /* an update of bounded size */
	}
	return r;
}

static void assert_atomic(struct cut_result r)
{
	print_message("%u cut points, new state from cut %u on, %u left the copies different\n",
		      r.cuts, r.first_new, r.disagreed);
	assert_int_equal(r.bad, 0);
	assert_int_equal(r.back_to_old, 0);
	assert_true(r.cuts > 20); /* the table really was torn at many lines */
	assert_true(r.first_new > 0);
	assert_true(r.disagreed > 0); /* cuts fell between and within the two writes */
	assert_int_equal(r.unrepaired, 0);
}

static void ns_volume_create__every_cut_old_or_new(void **state)
{
	assert_atomic(enumerate_cuts(*state, setup_volumes, op_create_b, check_b_zero));
}

static void ns_volume_delete__every_cut_old_or_new(void **state)
{
	assert_atomic(enumerate_cuts(*state, setup_volumes_and_b, op_delete_b, NULL));
}

/*
 * Clearing unsafe-shutdown marks: every cut leaves all of them or none of
 * those cleared. Each open of a marked namespace logs an error per marked
 * volume, as it should: hundreds of them here, captured and dropped (the
 * classification is printed on stdout).
 */
static void assert_atomic_quiet(struct fx *fx, op_fn op)
{
	struct logcap lc;
	logcap_begin(&lc);
	struct cut_result r = enumerate_cuts(fx, setup_volumes_marked, op, NULL);
	free(logcap_end(&lc));
	assert_atomic(r);
}

static void ns_unsafe_clear__volume_every_cut_old_or_new(void **state)
{
	assert_atomic_quiet(*state, op_clear_volume);
}

static void ns_unsafe_clear__namespace_every_cut_old_or_new(void **state)
{
	assert_atomic_quiet(*state, op_clear_namespace);
}

static void ns_format__forced_every_cut_old_or_new(void **state)
{
	struct cut_result r = enumerate_cuts(*state, setup_volumes, op_format_force, NULL);
	print_message("%u cut points, new state from cut %u on\n", r.cuts, r.first_new);
	assert_int_equal(r.bad, 0);
	assert_int_equal(r.back_to_old, 0);
	assert_true(r.first_new > 0);
	assert_int_equal(r.unrepaired, 0);
}

static void ns_format__fresh_every_cut_unformatted_or_formatted(void **state)
{
	/* old = "not rdax" (a refusal is the old state here); never bad metadata */
	struct cut_result r = enumerate_cuts(*state, setup_plain_file, op_format_fresh, NULL);
	print_message("%u cut points, formatted from cut %u on\n", r.cuts, r.first_new);
	assert_int_equal(r.bad, 0);
	assert_int_equal(r.back_to_old, 0);
	assert_true(r.first_new > 0);
	assert_int_equal(r.unrepaired, 0);
}

static void meta_copies_together__control_is_caught(void **state)
{
	struct cut_result r = enumerate_cuts(*state, setup_volumes, op_create_b_together, NULL);
	print_message("control: %u of %u cut points left neither state\n", r.bad, r.cuts);
	assert_true(r.bad > 0);
}

/*
 * A real power cut: a child creates volumes v0, v1, ... announcing each
 * before it starts; it is killed with SIGKILL after a chosen announcement.
 * The namespace must then hold v0..v(L-1) or v0..vL, L the last announced.
 */
#define KILL_ROUNDS  12
#define KILL_MAX_OPS 120

static void child_create_loop(const char *path, int wfd)
{
	struct ns *ns;
	if (ns_open(path, PERSIST_SIM, 1, &ns) != 0)
		_exit(2);
	char name[16];
	for (unsigned i = 0; i < KILL_MAX_OPS; i++) {
		if (write(wfd, &i, sizeof(i)) != (ssize_t)sizeof(i))
			_exit(3);
		snprintf(name, sizeof(name), "v%u", i);
		if (ns_volume_create(ns, name, PAGE) != 0)
			_exit(4);
	}
	pause(); /* wait for the kill: never close cleanly */
	_exit(5);
}

static void ns_volume_create__kill_9_leaves_old_or_new(void **state)
{
	struct fx *fx = *state;
	srand(1234);
	for (unsigned round = 0; round < KILL_ROUNDS; round++) {
		fresh_file(fx);
		struct ns *ns;
		assert_int_equal(ns_create(fx->path, NS_SIZE, PERSIST_SIM, 1, &ns), 0);
		ns_close(&ns);

		int pfd[2];
		assert_int_equal(pipe(pfd), 0);
		unsigned kill_after = (unsigned)rand() % (KILL_MAX_OPS - 1);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(pfd[0]);
			child_create_loop(fx->path, pfd[1]);
		}
		close(pfd[1]);
		unsigned got, last = 0;
		bool killed = false;
		while (read(pfd[0], &got, sizeof(got)) == (ssize_t)sizeof(got)) {
			last = got;
			if (!killed && got >= kill_after) {
				kill(pid, SIGKILL);
				killed = true;
			}
		}
		close(pfd[0]);
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

		static struct snap s;
		snap_take(fx->path, &s);
		assert_int_equal(s.open_ret, 0);
		/* volumes v0..v(n-1), with n == last or last + 1 */
		assert_true(s.n == last || s.n == last + 1);
		char name[16];
		for (unsigned i = 0; i < s.n; i++) {
			snprintf(name, sizeof(name), "v%u", i);
			bool found = false;
			for (unsigned j = 0; j < s.n; j++)
				found = found || strcmp(s.v[j].name, name) == 0;
			assert_true(found);
		}
	}
}

int main(void)
{
	/* hundreds of opens and closes: keep the log to what goes wrong */
	log_set_level(LOG_LEVEL_ERROR);
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
	    T(ns_volume_create__every_cut_old_or_new),
	    T(ns_volume_delete__every_cut_old_or_new),
	    T(ns_unsafe_clear__volume_every_cut_old_or_new),
	    T(ns_unsafe_clear__namespace_every_cut_old_or_new),
	    T(ns_format__forced_every_cut_old_or_new),
	    T(ns_format__fresh_every_cut_unformatted_or_formatted),
	    T(meta_copies_together__control_is_caught),
	    T(ns_volume_create__kill_9_leaves_old_or_new),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
