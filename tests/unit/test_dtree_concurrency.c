/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_dtree_concurrency.c -- writers marking while fsync walks run
 *
 * The rule checked ("never neither", docs/architecture.md): every page ever marked
 * was either claimed by a walk after its last mark, or is still DIRTY.
 *
 * Each thread keeps its own per-page record, so no record is shared:
 *  - a marker takes a ticket from a global clock just BEFORE it calls
 *    dtree_mark_dirty() and stores it as the page's mark ticket;
 *  - a walker takes a ticket just AFTER dtree_claim_towrite() returns and
 *    stores it as the claim ticket of every page of every entry claimed.
 * A claim that saw a mark (its critical section came after the mark's)
 * returned after the mark started, so its ticket is larger. When all
 * threads have stopped, a page whose latest mark ticket is not below some
 * claim ticket must be covered by a DIRTY entry. A discard waives the
 * rule for its range (only the discarding thread marks there).
 *
 * The control runs the same bookkeeping in one thread in the order that
 * breaks the fault rdax_faults.clear_after_writeback (claim, mark,
 * release) and asserts the check reports the lost page, deterministically.
 *
 * Iteration counts, not time, bound the runs; RDAX_SEED repeats one.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
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

#include "checked.h"
#include "dirty_tree.h"
#include "faults.h"

#define PG	    RDAX_PAGE_SIZE
#define PMD_PAGES   512ULL
#define PUD_PAGES   (1ULL << 18)
#define NO_TICKET   0ULL
#define MAX_THREADS 2
#define CLAIM_BATCH 8U

static uint64_t seed;

static uint64_t rnd_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t *s, uint64_t n)
{
	return rnd_next(s) % n;
}

struct harness {
	struct dtree *t;
	uint64_t npages;
	atomic_uint_fast64_t clock;
	atomic_bool stop;
	uint64_t *marked[MAX_THREADS];	/* per marker: latest mark ticket per page */
	uint64_t *claimed[MAX_THREADS]; /* per walker: latest claim ticket per page */
	uint64_t marks_done[MAX_THREADS];
	uint64_t walks_done[MAX_THREADS];
	uint64_t claims_done[MAX_THREADS];
	uint64_t saw_waiter[MAX_THREADS]; /* claimed batches during which someone waited */
};

static void harness_init(struct harness *h, uint64_t npages, uint64_t base)
{
	memset(h, 0, sizeof(*h));
	assert_int_equal(dtree_new(npages, base, &h->t), 0);
	h->npages = npages;
	atomic_init(&h->clock, 1);
	atomic_init(&h->stop, false);
	for (int i = 0; i < MAX_THREADS; i++) {
		h->marked[i] = calloc(npages, sizeof(uint64_t));
		h->claimed[i] = calloc(npages, sizeof(uint64_t));
		assert_true(h->marked[i] && h->claimed[i]);
	}
}

static void harness_fini(struct harness *h)
{
	assert_int_equal(dtree_check(h->t), 0);
	dtree_delete(&h->t);
	for (int i = 0; i < MAX_THREADS; i++) {
		free(h->marked[i]);
		free(h->claimed[i]);
	}
}

static uint64_t ticket(struct harness *h)
{
	return atomic_fetch_add(&h->clock, 1);
}

/* harness_mark -- marker @id writes bytes [off, off + len) */
static void harness_mark(struct harness *h, int id, uint64_t off, uint64_t len)
{
	uint64_t tk = ticket(h);
	assert_int_equal(dtree_mark_dirty(h->t, off, len), 0);
	for (uint64_t p = off / PG; p <= (off + len - 1) / PG; p++)
		h->marked[id][p] = tk;
	h->marks_done[id]++;
}

/* harness_discard -- marker @id discards pages [first, end): waives their marks */
static void harness_discard(struct harness *h, int id, uint64_t first, uint64_t end)
{
	dtree_remove_range(h->t, first, end);
	for (uint64_t p = first; p < end; p++)
		h->marked[id][p] = NO_TICKET;
}

/* harness_claim -- walker @id claims; records a ticket for every page claimed */
static unsigned harness_claim(struct harness *h, int id, uint64_t *idx, uint64_t end,
			      struct dtree_item *items, unsigned max)
{
	unsigned n = dtree_claim_towrite(h->t, idx, end, items, max);
	uint64_t tk = ticket(h);
	for (unsigned i = 0; i < n; i++) {
		assert_true(dentry_is_locked(items[i].entry));
		uint64_t pages = dentry_bytes(items[i].entry) / PG;
		for (uint64_t p = items[i].index; p < items[i].index + pages; p++)
			h->claimed[id][p] = tk;
	}
	h->claims_done[id] += n;
	return n;
}

/* harness_claim_dirty -- like harness_claim(), with the one-pass dtree_claim_dirty() */
static long harness_claim_dirty(struct harness *h, int id, uint64_t *idx, uint64_t end,
				struct dtree_item *items, unsigned max)
{
	long n = dtree_claim_dirty(h->t, idx, end, items, max);
	uint64_t tk = ticket(h);
	for (long i = 0; i < n; i++) {
		assert_true(dentry_is_locked(items[i].entry));
		uint64_t pages = dentry_bytes(items[i].entry) / PG;
		for (uint64_t p = items[i].index; p < items[i].index + pages; p++)
			h->claimed[id][p] = tk;
	}
	if (n > 0)
		h->claims_done[id] += (uint64_t)n;
	return n;
}

/* harness_lost -- pages that break the rule; prints the first few */
static uint64_t harness_lost(struct harness *h)
{
	uint64_t lost = 0;
	for (uint64_t p = 0; p < h->npages; p++) {
		uint64_t m = 0, c = 0;
		for (int i = 0; i < MAX_THREADS; i++) {
			if (h->marked[i][p] > m)
				m = h->marked[i][p];
			if (h->claimed[i][p] > c)
				c = h->claimed[i][p];
		}
		if (m == NO_TICKET || c > m || dtree_get_mark(h->t, p, DTREE_DIRTY))
			continue;
		if (lost++ < 5)
			fprintf(stderr,
				"# lost: page %" PRIu64 " marked at %" PRIu64
				", last claimed at %" PRIu64 ", not DIRTY (seed %" PRIu64 ")\n",
				p, m, c, seed);
	}
	return lost;
}

/*
 * harness_fsync -- one walk over [first, end) by walker @id, as fsync does
 * it: half of the walks start with the one-pass claim, which either does
 * it all or tags a first batch for the batched walk
 */
static void harness_fsync(struct harness *h, int id, uint64_t *rs, uint64_t first, uint64_t end)
{
	uint64_t idx = first;
	unsigned batch = 1 + (unsigned)rnd(rs, 64);
	struct dtree_item items[CLAIM_BATCH];
	uint64_t total = 0;
	if (rnd(rs, 2)) {
		long got = harness_claim_dirty(h, id, &idx, end, items,
					       1 + (unsigned)rnd(rs, CLAIM_BATCH));
		if (got >= 0) {
			if (rnd(rs, 4) == 0)
				sched_yield();
			if (got > 0 && dtree_waiters(h->t))
				h->saw_waiter[id]++;
			dtree_release(h->t, items, (unsigned)got);
			h->walks_done[id]++;
			if (got == 0)
				sched_yield(); /* nothing dirty: let the markers run */
			return;
		}
		assert_int_equal(got, -EAGAIN);
	}
	while (dtree_tag_towrite(h->t, &idx, end, batch) > 0)
		;
	idx = first;
	unsigned n;
	while ((n = harness_claim(h, id, &idx, end, items, 1 + (unsigned)rnd(rs, CLAIM_BATCH))) >
	       0) {
		/* "write back": sometimes let the markers run into the locked entries */
		if (rnd(rs, 4) == 0)
			sched_yield();
		if (dtree_waiters(h->t))
			h->saw_waiter[id]++;
		dtree_release(h->t, items, n);
		total += n;
	}
	h->walks_done[id]++;
	if (total == 0)
		sched_yield(); /* nothing dirty: let the markers run */
}

struct thread_arg {
	struct harness *h;
	int id;
	uint64_t iterations;
	uint64_t region_first, region_end; /* pages this marker writes and discards */
	uint64_t rng;
};

static void *marker_thread(void *p)
{
	struct thread_arg *a = p;
	struct harness *h = a->h;
	uint64_t *rs = &a->rng;
	uint64_t first = a->region_first, pages = a->region_end - a->region_first;
	for (uint64_t i = 0; i < a->iterations; i++) {
		uint64_t r = rnd(rs, 1000);
		if (r < 600) { /* small writes */
			uint64_t off = (first + rnd(rs, pages)) * PG + rnd(rs, PG);
			uint64_t len = 1 + rnd(rs, 8 * PG);
			if (off + len > a->region_end * PG)
				len = a->region_end * PG - off;
			harness_mark(h, a->id, off, len);
		} else if (r < 950 && pages >= PMD_PAGES) { /* whole 2 MiB blocks */
			uint64_t b0 = align_up(first, PMD_PAGES) / PMD_PAGES;
			uint64_t nb = (a->region_end / PMD_PAGES) - b0;
			if (nb == 0)
				continue;
			uint64_t b = b0 + rnd(rs, nb);
			harness_mark(h, a->id, b * RDAX_PMD_SIZE, RDAX_PMD_SIZE);
		} else if (r < 952 && pages >= PUD_PAGES && is_aligned(first, PUD_PAGES)) {
			harness_mark(h, a->id, first * PG, RDAX_PUD_SIZE);
		} else if (r < 990) { /* discard */
			uint64_t f = first + rnd(rs, pages);
			uint64_t e = f + 1 + rnd(rs, rnd(rs, 2) ? PMD_PAGES : 16);
			if (e > a->region_end)
				e = a->region_end;
			harness_discard(h, a->id, f, e);
		} else {
			sched_yield();
		}
	}
	return NULL;
}

static void *walker_thread(void *p)
{
	struct thread_arg *a = p;
	struct harness *h = a->h;
	uint64_t *rs = &a->rng;
	while (!atomic_load(&h->stop)) {
		uint64_t f = 0, e = h->npages;
		if (rnd(rs, 3) == 0) {
			f = rnd(rs, h->npages);
			e = f + 1 + rnd(rs, 2 * PMD_PAGES);
			if (e > h->npages)
				e = h->npages;
		}
		harness_fsync(h, a->id, rs, f, e);
	}
	return NULL;
}

static uint64_t seed_from_env(void)
{
	const char *env = getenv("RDAX_SEED");
	uint64_t s =
	    env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	printf("# dtree concurrency: seed=%" PRIu64 " (RDAX_SEED repeats)\n", s);
	fflush(stdout);
	return s;
}

/*
 * run_threads -- @nm markers over equal regions, @nw walkers over the whole
 * volume; then the rule, then a final walk that must empty the tree.
 */
static void run_threads(uint64_t npages, uint64_t base, int nm, int nw, uint64_t iterations)
{
	struct harness h;
	harness_init(&h, npages, base);
	struct thread_arg ma[MAX_THREADS], wa[MAX_THREADS];
	pthread_t mt[MAX_THREADS], wt[MAX_THREADS];
	uint64_t region = npages / (uint64_t)nm;
	if (nm > 1)
		region = align_down(region, PMD_PAGES);
	for (int i = 0; i < nw; i++) {
		wa[i] = (struct thread_arg){.h = &h, .id = i, .rng = seed + 100 + (uint64_t)i};
		assert_int_equal(pthread_create(&wt[i], NULL, walker_thread, &wa[i]), 0);
	}
	for (int i = 0; i < nm; i++) {
		ma[i] = (struct thread_arg){.h = &h,
					    .id = i,
					    .iterations = iterations,
					    .region_first = region * (uint64_t)i,
					    .region_end =
						i == nm - 1 ? npages : region * (uint64_t)(i + 1),
					    .rng = seed + (uint64_t)i};
		assert_int_equal(pthread_create(&mt[i], NULL, marker_thread, &ma[i]), 0);
	}
	for (int i = 0; i < nm; i++)
		assert_int_equal(pthread_join(mt[i], NULL), 0);
	atomic_store(&h.stop, true);
	for (int i = 0; i < nw; i++)
		assert_int_equal(pthread_join(wt[i], NULL), 0);

	uint64_t marks = 0, walks = 0, claims = 0, waits = 0;
	for (int i = 0; i < MAX_THREADS; i++) {
		marks += h.marks_done[i];
		walks += h.walks_done[i];
		claims += h.claims_done[i];
		waits += h.saw_waiter[i];
	}
	struct dtree_stats st;
	dtree_stats_get(h.t, &st);
	printf("# %d marker(s), %d walker(s), %" PRIu64 " pages: %" PRIu64 " marks, %" PRIu64
	       " walks, %" PRIu64 " entries claimed, %" PRIu64
	       " claimed batches seen with a thread waiting; at the end %" PRIu64 "/%" PRIu64
	       "/%" PRIu64 " entries\n",
	       nm, nw, npages, marks, walks, claims, waits, st.entries[0], st.entries[1],
	       st.entries[2]);
	assert_int_equal(dtree_check(h.t), 0);
	assert_int_equal(harness_lost(&h), 0);

	/* a final walk takes everything; nothing may be left behind, locked or not */
	uint64_t rs = seed;
	harness_fsync(&h, 0, &rs, 0, npages);
	dtree_stats_get(h.t, &st);
	for (int i = 0; i < DTREE_NR_SIZES; i++)
		assert_int_equal(st.entries[i], 0);
	assert_int_equal(st.nodes, 1);
	assert_int_equal(harness_lost(&h), 0);
	harness_fini(&h);
}

static void dtree_concurrency__marker_and_walker(void **state)
{
	(void)state;
	seed = seed_from_env();
	/* 3 whole 2 MiB blocks and a tail: conversions meet claimed entries often */
	run_threads(3 * PMD_PAGES + 100, dloc_make(2, 40 * PMD_PAGES), 1, 1, 500000);
}

static void dtree_concurrency__marker_and_walker_1g(void **state)
{
	(void)state;
	seed = seed_from_env();
	run_threads(PUD_PAGES + 2 * PMD_PAGES, dloc_make(1, 4 * PUD_PAGES), 1, 1, 40000);
}

/* beyond the promise: two markers on their own halves, two unserialised walkers */
static void dtree_concurrency__two_markers_two_walkers(void **state)
{
	(void)state;
	seed = seed_from_env();
	run_threads(8 * PMD_PAGES + 33, dloc_make(2, 0), 2, 2, 250000);
}

/*
 * interleave -- claim, then mark, then release, in one thread; returns the
 * pages the check reports lost. @one_pass: claim with dtree_claim_dirty()
 * instead of tagging and dtree_claim_towrite().
 */
static uint64_t interleave(bool one_pass)
{
	seed = 0; /* no randomness in this one */
	struct harness h;
	harness_init(&h, 64, 0);
	uint64_t rs = 1;
	harness_mark(&h, 0, 7 * PG, 100);
	uint64_t idx = 0;
	struct dtree_item items[1];
	if (one_pass) {
		assert_int_equal(harness_claim_dirty(&h, 0, &idx, 64, items, 1), 1);
	} else {
		assert_int_equal(dtree_tag_towrite(h.t, &idx, 64, 16), 1);
		idx = 0;
		assert_int_equal(harness_claim(&h, 0, &idx, 64, items, 1), 1);
	}
	harness_mark(&h, 0, 7 * PG + 200, 10); /* lands during the write-back */
	dtree_release(h.t, items, 1);
	uint64_t lost = harness_lost(&h);
	/* and the next fsync must still write it back */
	harness_fsync(&h, 1, &rs, 0, 64);
	lost += harness_lost(&h);
	harness_fini(&h);
	return lost;
}

static void dtree_concurrency__write_during_writeback_kept(void **state)
{
	(void)state;
	assert_int_equal(interleave(false), 0);
}

/* control: DIRTY cleared on release instead of on claim loses the write, and it is seen */
static void dtree_concurrency__clear_after_writeback_control(void **state)
{
	(void)state;
	rdax_faults.clear_after_writeback = true;
	uint64_t lost = interleave(false);
	rdax_faults.clear_after_writeback = false;
	assert_true(lost >= 1);
}

/* the same with the one-pass claim */
static void dtree_concurrency__write_during_writeback_kept_one_pass(void **state)
{
	(void)state;
	assert_int_equal(interleave(true), 0);
}

static void dtree_concurrency__clear_after_writeback_control_one_pass(void **state)
{
	(void)state;
	rdax_faults.clear_after_writeback = true;
	uint64_t lost = interleave(true);
	rdax_faults.clear_after_writeback = false;
	assert_true(lost >= 1);
}

static int reset_faults(void **state)
{
	(void)state;
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(dtree_concurrency__write_during_writeback_kept),
	    cmocka_unit_test_teardown(dtree_concurrency__clear_after_writeback_control,
				      reset_faults),
	    cmocka_unit_test(dtree_concurrency__write_during_writeback_kept_one_pass),
	    cmocka_unit_test_teardown(dtree_concurrency__clear_after_writeback_control_one_pass,
				      reset_faults),
	    cmocka_unit_test(dtree_concurrency__marker_and_walker),
	    cmocka_unit_test(dtree_concurrency__marker_and_walker_1g),
	    cmocka_unit_test(dtree_concurrency__two_markers_two_walkers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
