/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_engine.c -- what tracked fsync costs, beside the hammer and a raw flush loop
 *
 * One run prints, for a 1 GiB and an 8 GiB emulated namespace (a plain file
 * mapped in AUTO mode, with PMEM_IS_PMEM_FORCE=1 so libpmem flushes with
 * CLWB/CLFLUSHOPT + SFENCE as on real PMEM):
 *  - fsync time with 1, 16, 256, 2048 dirty 4 KiB pages, tracked vs hammer;
 *  - tracked time per dirty page beside a raw pmem_flush() loop over the
 *    same pages and one pmem_drain(): the tree's overhead in ns per page;
 *  - fsync after random 64 B / 256 B / 1 KiB writes: tracked by line, the
 *    page-granular baseline (FLUSH_PAGES: every line of each dirty page)
 *    and a raw flush of exactly the written lines, no tree;
 *  - huge entries: the tree's share of an fsync of 2 MiB written 4 KiB at a
 *    time (512 small entries) against one 2 MiB entry, and of 1 GiB as
 *    512 2 MiB entries against one 1 GiB entry (is promotion worth it?);
 *  - dirty-tree bytes per dirty page, sequential and sparse random writes
 *    (whole pages and 64-byte writes);
 *  - mark-dirty operations per second, fresh and already-dirty pages, and
 *    64-byte writes;
 * and the aims of the issue, met or not. Every figure is a ratio or a
 * difference of times measured in this run (medians of repetitions); this
 * is a program, never a pass/fail test: the machine may be shared.
 *
 * Usage: bench_engine [-d DIR] [-r REPS] [-q]
 *   -d DIR   where the namespace files go ($TMPDIR, else /var/tmp); removed at exit
 *   -r REPS  repetitions of each tracked measurement (default 101; hammer: 5, 3 at 8 GiB)
 *   -q       only the 1 GiB namespace (quick look)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpmem.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "checked.h"
#include "dirty_tree.h"
#include "fsync.h"
#include "log.h"
#include "namespace.h"
#include "volume.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define PAGE RDAX_PAGE_SIZE
#define GIB  ((uint64_t)1 << 30)

/* the aims of the issue */
#define AIM_RATIO_1G	100000.0 /* hammer / tracked, one dirty page, 1 GiB */
#define AIM_OVERHEAD_NS 100.0	 /* tree overhead per dirty page */
#define AIM_SEQ_BYTES	16.0	 /* tree bytes per dirty page, sequential */

static const unsigned dirty_counts[] = {1, 16, 256, 2048};
#define NCOUNTS (sizeof(dirty_counts) / sizeof(dirty_counts[0]))

/* small writes: sizes, and writes per fsync */
static const unsigned small_sizes[] = {64, 256, 1024};
#define NSMALL	      (sizeof(small_sizes) / sizeof(small_sizes[0]))
#define SMALL_WRITES  256
#define AIM_LINES_RAW 1.2 /* tracked by line / raw flush of the written lines */

/* the namespace file being measured, removed at exit and on SIGINT/SIGTERM */
static char ns_path[4096];

static void remove_ns_file(void)
{
	if (ns_path[0])
		unlink(ns_path);
	ns_path[0] = '\0';
}

static void on_signal(int sig)
{
	if (ns_path[0])
		unlink(ns_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static uint64_t rng_next(void)
{
	uint64_t x = (rng_state += 0x9e3779b97f4a7c15ULL);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* pick_pages -- @n distinct random pages below @npages, sorted */
static void pick_pages(uint64_t *pages, unsigned n, uint64_t npages)
{
	for (unsigned i = 0; i < n; i++) {
		bool fresh;
		do {
			pages[i] = rng_next() % npages;
			fresh = true;
			for (unsigned j = 0; j < i && fresh; j++)
				fresh = pages[j] != pages[i];
		} while (!fresh);
	}
	qsort(pages, n, sizeof(*pages), cmp_u64);
}

static void die(const char *what, int ret)
{
	fprintf(stderr, "bench_engine: %s failed: %d (%s)\n", what, ret,
		strerror(ret < 0 ? -ret : ret));
	exit(1);
}

/* format_ns -- a time in the unit that suits it */
static const char *format_ns(char *buf, size_t size, double ns)
{
	if (ns < 10e3)
		snprintf(buf, size, "%.2f us", ns / 1e3);
	else if (ns < 10e6)
		snprintf(buf, size, "%.1f us", ns / 1e3);
	else
		snprintf(buf, size, "%.2f ms", ns / 1e6);
	return buf;
}

struct results {
	uint64_t ns_size, vol_size;
	double tracked_ns[NCOUNTS], hammer_ns[NCOUNTS];
	double clean_ns; /* tracked fsync of a volume with nothing dirty */
	double tracked_per_page[NCOUNTS], raw_per_page[NCOUNTS];
	double seq_bytes_per_page, sparse_bytes_per_page, empty_tree_bytes;
	uint64_t seq_pages, sparse_pages;
	double mark_fresh_ops, mark_dirty_ops, mark_fresh_seq_ops;
	/* small writes: fsync times (ns) and bytes written back per mode */
	double small_lines_ns[NSMALL], small_pages_ns[NSMALL], small_raw_ns[NSMALL];
	double small_walk_ns[NSMALL]; /* the tree's walk alone over the same entries */
	uint64_t small_lines_bytes[NSMALL], small_pages_bytes[NSMALL];
	double sparse64_bytes_per_page, mark64_ops;
	/* huge entries: tree-only walk times (ns) and fsync times */
	double walk_512x4k_ns, walk_1x2m_ns, fsync_512x4k_ns, fsync_1x2m_ns;
	double walk_512x2m_ns, walk_1x1g_ns;
};

/* dirty_pages -- write every line of each page (the lines are then dirty in the cache) */
static void dirty_pages(struct volume *v, const uint64_t *pages, unsigned n, const uint8_t *buf)
{
	for (unsigned i = 0; i < n; i++) {
		int ret = volume_write(v, pages[i] * PAGE, buf, PAGE);
		if (ret)
			die("volume_write", ret);
	}
}

/* time_fsync -- one fsync of the whole volume, in ns; checks the bytes written back */
static uint64_t time_fsync(struct volume *v, enum flush_mode mode, uint64_t expect)
{
	uint64_t written = 0;
	uint64_t t0 = now_ns();
	int ret = fsync_range(v, 0, 0, mode, &written);
	uint64_t t1 = now_ns();
	if (ret)
		die("fsync_range", ret);
	if (written != expect) {
		fprintf(stderr,
			"bench_engine: fsync wrote back %" PRIu64 " bytes, expected %" PRIu64 "\n",
			written, expect);
		exit(1);
	}
	return t1 - t0;
}

/*
 * measure_fsync -- tracked and hammer fsync with n dirty pages, and the raw
 * loop (pmem_flush of the same pages in the same order, one pmem_drain)
 * with the same lines made dirty the same way.
 */
static void measure_fsync(struct volume *v, unsigned ci, unsigned reps, unsigned hammer_reps,
			  struct results *res)
{
	unsigned n = dirty_counts[ci];
	uint64_t npages = v->size / PAGE;
	uint64_t *pages = calloc(n, sizeof(*pages));
	uint64_t *t = calloc(reps > hammer_reps ? reps : hammer_reps, sizeof(*t));
	uint8_t *buf = aligned_alloc(PAGE, PAGE);
	if (!pages || !t || !buf)
		die("allocation", -ENOMEM);
	pick_pages(pages, n, npages);

	for (unsigned r = 0; r < reps; r++) {
		memset(buf, (int)r + 1, PAGE);
		dirty_pages(v, pages, n, buf);
		t[r] = time_fsync(v, FLUSH_TRACKED, (uint64_t)n * PAGE);
	}
	res->tracked_ns[ci] = (double)median(t, reps);

	for (unsigned r = 0; r < reps; r++) {
		memset(buf, (int)r + 2, PAGE);
		for (unsigned i = 0; i < n; i++)
			memcpy(v->data + pages[i] * PAGE, buf, PAGE);
		uint64_t t0 = now_ns();
		for (unsigned i = 0; i < n; i++)
			pmem_flush(v->data + pages[i] * PAGE, PAGE);
		pmem_drain();
		t[r] = now_ns() - t0;
	}
	res->raw_per_page[ci] = (double)median(t, reps) / n;
	res->tracked_per_page[ci] = res->tracked_ns[ci] / n;

	for (unsigned r = 0; r < hammer_reps; r++) {
		memset(buf, (int)r + 3, PAGE);
		dirty_pages(v, pages, n, buf);
		t[r] = time_fsync(v, FLUSH_HAMMER, v->size);
	}
	res->hammer_ns[ci] = (double)median(t, hammer_reps);
	free(pages);
	free(t);
	free(buf);
}

/*
 * measure_tree -- memory per dirty page and mark rates, on a tree of the
 * volume's size (the same structure fsync walks; no data is copied).
 */
static void measure_tree(uint64_t npages, struct results *res)
{
	struct dtree *t = NULL;
	struct dtree_stats st;
	int ret;

	/* sequential 4 KiB writes, one call per page (no huge entries) */
	res->seq_pages = npages < 262144 ? npages : 262144;
	if ((ret = dtree_new(npages, 0, &t)))
		die("dtree_new", ret);
	dtree_stats_get(t, &st);
	res->empty_tree_bytes = (double)st.tree_bytes;
	uint64_t t0 = now_ns();
	for (uint64_t p = 0; p < res->seq_pages; p++)
		if ((ret = dtree_mark_dirty(t, p * PAGE, PAGE)))
			die("dtree_mark_dirty", ret);
	uint64_t t1 = now_ns();
	res->mark_fresh_seq_ops = (double)res->seq_pages * 1e9 / (double)(t1 - t0);
	dtree_stats_get(t, &st);
	res->seq_bytes_per_page = (double)st.tree_bytes / (double)res->seq_pages;
	dtree_delete(&t);

	/* sparse random pages: fresh marks, then the same pages again (already dirty) */
	res->sparse_pages = 65536;
	uint64_t *pages = calloc(res->sparse_pages, sizeof(*pages));
	if (!pages)
		die("allocation", -ENOMEM);
	for (uint64_t i = 0; i < res->sparse_pages; i++)
		pages[i] = rng_next() % npages; /* repeats are rare and only re-mark */
	if ((ret = dtree_new(npages, 0, &t)))
		die("dtree_new", ret);
	t0 = now_ns();
	for (uint64_t i = 0; i < res->sparse_pages; i++)
		if ((ret = dtree_mark_dirty(t, pages[i] * PAGE, PAGE)))
			die("dtree_mark_dirty", ret);
	t1 = now_ns();
	res->mark_fresh_ops = (double)res->sparse_pages * 1e9 / (double)(t1 - t0);
	dtree_stats_get(t, &st);
	uint64_t present = st.entries[DTREE_SIZE_4K];
	res->sparse_bytes_per_page = (double)st.tree_bytes / (double)present;
	t0 = now_ns();
	for (uint64_t i = 0; i < res->sparse_pages; i++)
		if ((ret = dtree_mark_dirty(t, pages[i] * PAGE, PAGE)))
			die("dtree_mark_dirty", ret);
	t1 = now_ns();
	res->mark_dirty_ops = (double)res->sparse_pages * 1e9 / (double)(t1 - t0);
	dtree_delete(&t);

	/* 64-byte writes to the same sparse pages (one line each): line arrays */
	if ((ret = dtree_new(npages, 0, &t)))
		die("dtree_new", ret);
	t0 = now_ns();
	for (uint64_t i = 0; i < res->sparse_pages; i++)
		if ((ret = dtree_mark_dirty(t, pages[i] * PAGE + (i % 64) * 64, 64)))
			die("dtree_mark_dirty", ret);
	t1 = now_ns();
	res->mark64_ops = (double)res->sparse_pages * 1e9 / (double)(t1 - t0);
	dtree_stats_get(t, &st);
	res->sparse64_bytes_per_page = (double)st.tree_bytes / (double)st.entries[DTREE_SIZE_4K];
	dtree_delete(&t);
	free(pages);
}

/* time_fsync_any -- one fsync of the whole volume in ns, its bytes in *bytes */
static uint64_t time_fsync_any(struct volume *v, enum flush_mode mode, uint64_t *bytes)
{
	uint64_t t0 = now_ns();
	int ret = fsync_range(v, 0, 0, mode, bytes);
	uint64_t t1 = now_ns();
	if (ret)
		die("fsync_range", ret);
	return t1 - t0;
}

static double walk_ns(uint64_t npages, void (*mark)(struct dtree *), unsigned reps);

/* the writes of measure_small(), for mark_small() */
static uint64_t small_offs[SMALL_WRITES];
static unsigned small_len;

static void mark_small(struct dtree *t)
{
	for (unsigned i = 0; i < SMALL_WRITES; i++) {
		int ret = dtree_mark_dirty(t, small_offs[i], small_len);
		if (ret)
			die("dtree_mark_dirty", ret);
	}
}

/* count_distinct -- distinct values of sorted @v[0..n) after dividing by @unit */
static uint64_t count_distinct_units(const uint64_t *v, unsigned n, unsigned len, uint64_t unit)
{
	uint64_t count = 0, last = UINT64_MAX;
	for (unsigned i = 0; i < n; i++)
		for (uint64_t u = v[i] / unit; u <= (v[i] + len - 1) / unit; u++)
			if (last == UINT64_MAX || u > last) {
				count++;
				last = u;
			}
	return count;
}

/*
 * measure_small -- SMALL_WRITES random writes of small_sizes[si] bytes
 * (64-byte aligned, sorted), then: a tracked fsync (the written lines), a
 * FLUSH_PAGES fsync (every line of each dirty page), and the raw floor:
 * pmem_flush of exactly each write's bytes, in the same order, one
 * pmem_drain. Each repetition rewrites the same bytes first, so the same
 * lines are dirty in the cache for all three.
 */
static void measure_small(struct volume *v, unsigned si, unsigned reps, struct results *res)
{
	unsigned len = small_sizes[si];
	uint64_t lines = v->size / 64;
	uint64_t offs[SMALL_WRITES];
	uint64_t *t = calloc(reps, sizeof(*t));
	uint8_t buf[1024];
	if (!t)
		die("allocation", -ENOMEM);
	for (unsigned i = 0; i < SMALL_WRITES; i++)
		offs[i] = (rng_next() % (lines - len / 64)) * 64;
	qsort(offs, SMALL_WRITES, sizeof(offs[0]), cmp_u64);
	uint64_t want_lines = count_distinct_units(offs, SMALL_WRITES, len, 64) * 64;
	uint64_t want_pages = count_distinct_units(offs, SMALL_WRITES, len, PAGE) * PAGE;

	for (int mode = 0; mode < 3; mode++) {
		for (unsigned r = 0; r < reps; r++) {
			memset(buf, (int)(r + mode + 5), sizeof(buf));
			uint64_t bytes = 0;
			if (mode == 2) {
				for (unsigned i = 0; i < SMALL_WRITES; i++)
					memcpy(v->data + offs[i], buf, len);
				uint64_t t0 = now_ns();
				for (unsigned i = 0; i < SMALL_WRITES; i++)
					pmem_flush(v->data + offs[i], len);
				pmem_drain();
				t[r] = now_ns() - t0;
				continue;
			}
			for (unsigned i = 0; i < SMALL_WRITES; i++) {
				int ret = volume_write(v, offs[i], buf, len);
				if (ret)
					die("volume_write", ret);
			}
			t[r] = time_fsync_any(v, mode == 0 ? FLUSH_TRACKED : FLUSH_PAGES, &bytes);
			if (bytes != (mode == 0 ? want_lines : want_pages)) {
				fprintf(stderr,
					"bench_engine: %u B writes: fsync wrote back %" PRIu64
					" bytes, expected %" PRIu64 "\n",
					len, bytes, mode == 0 ? want_lines : want_pages);
				exit(1);
			}
		}
		double m = (double)median(t, reps);
		if (mode == 0)
			res->small_lines_ns[si] = m;
		else if (mode == 1)
			res->small_pages_ns[si] = m;
		else
			res->small_raw_ns[si] = m;
	}
	res->small_lines_bytes[si] = want_lines;
	res->small_pages_bytes[si] = want_pages;
	memcpy(small_offs, offs, sizeof(offs));
	small_len = len;
	res->small_walk_ns[si] = walk_ns(v->size / PAGE, mark_small, reps);
	free(t);
}

/*
 * walk_ns -- what fsync asks of the tree, without writing anything back:
 * tag every DIRTY entry, claim and release them in claim batches. The
 * tree is marked again by @mark before each of @reps repetitions; returns
 * the median walk time.
 */
static double walk_ns(uint64_t npages, void (*mark)(struct dtree *), unsigned reps)
{
	struct dtree *t = NULL;
	struct dtree_item items[FSYNC_CLAIM_BATCH];
	uint64_t *v = calloc(reps, sizeof(*v));
	int ret;
	if (!v)
		die("allocation", -ENOMEM);
	if ((ret = dtree_new(npages, 0, &t)))
		die("dtree_new", ret);
	for (unsigned r = 0; r < reps; r++) {
		mark(t);
		uint64_t t0 = now_ns();
		uint64_t index = 0;
		while (dtree_tag_towrite(t, &index, npages, FSYNC_TAG_BATCH) > 0)
			;
		index = 0;
		unsigned n;
		while ((n = dtree_claim_towrite(t, &index, npages, items, FSYNC_CLAIM_BATCH)) > 0)
			dtree_release(t, items, n);
		v[r] = now_ns() - t0;
	}
	dtree_delete(&t);
	double m = (double)median(v, reps);
	free(v);
	return m;
}

static void mark_or_die(struct dtree *t, uint64_t off, uint64_t len)
{
	int ret = dtree_mark_dirty(t, off, len);
	if (ret)
		die("dtree_mark_dirty", ret);
}

static void mark_512x4k(struct dtree *t)
{
	for (uint64_t p = 0; p < 512; p++)
		mark_or_die(t, p * PAGE, PAGE);
}

static void mark_1x2m(struct dtree *t)
{
	mark_or_die(t, 0, RDAX_PMD_SIZE);
}

static void mark_512x2m(struct dtree *t)
{
	for (uint64_t b = 0; b < 512; b++)
		mark_or_die(t, b * RDAX_PMD_SIZE, RDAX_PMD_SIZE);
}

static void mark_1x1g(struct dtree *t)
{
	mark_or_die(t, 0, RDAX_PUD_SIZE);
}

/*
 * measure_huge -- is promoting entries worth it? The tree's share of an
 * fsync of one 2 MiB block written 4 KiB at a time (512 small entries)
 * and written in one call (one 2 MiB entry), beside the whole fsync of
 * each on the volume; and the tree's share for 1 GiB as 512 2 MiB entries
 * and as one 1 GiB entry (the write-back of 1 GiB is the hammer's time).
 */
static void measure_huge(struct volume *v, unsigned reps, struct results *res)
{
	uint64_t *t = calloc(reps, sizeof(*t));
	uint8_t *buf = aligned_alloc(PAGE, RDAX_PMD_SIZE);
	if (!t || !buf)
		die("allocation", -ENOMEM);
	const uint64_t block = RDAX_PMD_SIZE; /* the second 2 MiB block of the volume */
	for (int whole = 0; whole < 2; whole++) {
		for (unsigned r = 0; r < reps; r++) {
			memset(buf, (int)(r + whole + 9), RDAX_PMD_SIZE);
			for (uint64_t off = 0; off < RDAX_PMD_SIZE;
			     off += whole ? RDAX_PMD_SIZE : PAGE) {
				int ret = volume_write(v, block + off, buf + off,
						       whole ? RDAX_PMD_SIZE : PAGE);
				if (ret)
					die("volume_write", ret);
			}
			t[r] = time_fsync(v, FLUSH_TRACKED, RDAX_PMD_SIZE);
		}
		(whole ? &res->fsync_1x2m_ns : &res->fsync_512x4k_ns)[0] = (double)median(t, reps);
	}
	res->walk_512x4k_ns = walk_ns(1024, mark_512x4k, reps);
	res->walk_1x2m_ns = walk_ns(1024, mark_1x2m, reps);
	res->walk_512x2m_ns = walk_ns(1ULL << 18, mark_512x2m, reps);
	res->walk_1x1g_ns = walk_ns(1ULL << 18, mark_1x1g, reps);
	free(t);
	free(buf);
}

/* measure_clean -- a tracked fsync with nothing dirty: the fixed cost of a call */
static void measure_clean(struct volume *v, unsigned reps, struct results *res)
{
	uint64_t *t = calloc(reps, sizeof(*t));
	if (!t)
		die("allocation", -ENOMEM);
	for (unsigned r = 0; r < reps; r++)
		t[r] = time_fsync(v, FLUSH_TRACKED, 0);
	res->clean_ns = (double)median(t, reps);
	free(t);
}

/* prefault -- map every page of the volume before anything is timed */
static void prefault(struct volume *v)
{
	if (madvise(v->data, v->size, MADV_POPULATE_READ) == 0)
		return;
	volatile const uint8_t *p = v->data;
	uint64_t sum = 0;
	for (uint64_t off = 0; off < v->size; off += PAGE)
		sum += p[off];
	(void)sum;
}

/* run_namespace -- everything for one namespace size */
static void run_namespace(const char *dir, uint64_t ns_size, uint32_t id, unsigned reps,
			  unsigned hammer_reps, struct results *res)
{
	struct ns *ns = NULL;
	struct volume *v = NULL;
	uint64_t largest = 0;
	int ret;

	memset(res, 0, sizeof(*res));
	res->ns_size = ns_size;
	snprintf(ns_path, sizeof(ns_path), "%s/rdax-bench-%d-%" PRIu64 "g", dir, (int)getpid(),
		 ns_size / GIB);
	if ((ret = ns_create(ns_path, ns_size, PERSIST_AUTO, id, &ns)))
		die("ns_create", ret);
	if (!ns->persist.is_pmem) {
		fprintf(stderr, "bench_engine: pmem_is_pmem() is 0 despite PMEM_IS_PMEM_FORCE=1\n");
		exit(1);
	}
	ns_free_bytes(ns, NULL, &largest);
	res->vol_size = align_down(largest, RDAX_PMD_SIZE);
	if ((ret = ns_volume_create(ns, "bench", res->vol_size)))
		die("ns_volume_create", ret);
	if ((ret = ns_volume_open(ns, "bench", &v)))
		die("ns_volume_open", ret);
	fprintf(stderr, "  %" PRIu64 " GiB: pre-touching %" PRIu64 " MiB ...\n", ns_size / GIB,
		res->vol_size >> 20);
	prefault(v);
	/* one hammer first: every line of the volume has been through the cache once */
	time_fsync(v, FLUSH_HAMMER, v->size);

	for (unsigned ci = 0; ci < NCOUNTS; ci++) {
		fprintf(stderr, "  %" PRIu64 " GiB: %u dirty pages ...\n", ns_size / GIB,
			dirty_counts[ci]);
		measure_fsync(v, ci, reps, hammer_reps, res);
	}
	measure_clean(v, reps, res);
	for (unsigned si = 0; si < NSMALL; si++) {
		fprintf(stderr, "  %" PRIu64 " GiB: %u random %u B writes ...\n", ns_size / GIB,
			SMALL_WRITES, small_sizes[si]);
		measure_small(v, si, reps, res);
	}
	fprintf(stderr, "  %" PRIu64 " GiB: huge entries ...\n", ns_size / GIB);
	measure_huge(v, reps < 21 ? reps : 21, res);
	fprintf(stderr, "  %" PRIu64 " GiB: tree memory and mark rates ...\n", ns_size / GIB);
	measure_tree(v->size / PAGE, res);

	ns_volume_close(ns, &v);
	ns_close(&ns);
	remove_ns_file();
}

/* cpu_flush_instruction -- what libpmem's pmem_flush() uses here (its order of preference) */
static const char *cpu_flush_instruction(void)
{
	static char flags[8192];
	FILE *f = fopen("/proc/cpuinfo", "r");
	const char *found = "CLFLUSH";
	if (!f)
		return "CLWB, CLFLUSHOPT or CLFLUSH";
	while (fgets(flags, sizeof(flags), f)) {
		if (strncmp(flags, "flags", 5) != 0)
			continue;
		if (strstr(flags, " clwb"))
			found = "CLWB";
		else if (strstr(flags, " clflushopt"))
			found = "CLFLUSHOPT";
		break;
	}
	fclose(f);
	return found;
}

static const char *met(bool ok)
{
	return ok ? "met" : "NOT MET";
}

static void print_results(const struct results *all, unsigned nres, unsigned reps,
			  unsigned hammer_reps_1g, unsigned hammer_reps_8g)
{
	char a[32], b[32], c[32], d[32];

	printf("\nrdax bench_engine: the fsync engine, all figures from this one run\n");
	printf("namespaces: plain files, AUTO mode; PMEM_IS_PMEM_FORCE=1 set by this program\n"
	       "before mapping, so libpmem treats them as PMEM (pmem_is_pmem = 1) and writes\n"
	       "back with %s + SFENCE; mappings pre-touched before timing.\n",
	       cpu_flush_instruction());
	printf("times: medians of %u repetitions (hammer: %u at 1 GiB, %u at 8 GiB).\n", reps,
	       hammer_reps_1g, hammer_reps_8g);

	for (unsigned k = 0; k < nres; k++) {
		const struct results *r = &all[k];
		printf("\n== namespace %" PRIu64 " GiB (volume %" PRIu64 " MiB) ==\n",
		       r->ns_size / GIB, r->vol_size >> 20);
		printf("%12s  %14s  %14s  %14s\n", "dirty pages", "tracked fsync", "hammer fsync",
		       "hammer/tracked");
		for (unsigned ci = 0; ci < NCOUNTS; ci++)
			printf("%12u  %14s  %14s  %13.0fx\n", dirty_counts[ci],
			       format_ns(a, sizeof(a), r->tracked_ns[ci]),
			       format_ns(b, sizeof(b), r->hammer_ns[ci]),
			       r->hammer_ns[ci] / r->tracked_ns[ci]);
		printf("  one dirty page, raw flush of it + pmem_drain: %s; hammer/raw %.0fx\n"
		       "  (the most hammer/tracked can be on this machine)\n",
		       format_ns(a, sizeof(a), r->raw_per_page[0]),
		       r->hammer_ns[0] / r->raw_per_page[0]);
		printf("  clean volume (nothing dirty), tracked fsync: %s\n",
		       format_ns(a, sizeof(a), r->clean_ns));
		printf("\n%12s  %16s  %20s  %16s\n", "dirty pages", "tracked ns/page",
		       "raw flush ns/page", "tree ns/page");
		for (unsigned ci = 1; ci < NCOUNTS; ci++)
			printf("%12u  %16.0f  %20.0f  %16.0f\n", dirty_counts[ci],
			       r->tracked_per_page[ci], r->raw_per_page[ci],
			       r->tracked_per_page[ci] - r->raw_per_page[ci]);
		printf("  (raw flush: pmem_flush of the same pages in the same order + one "
		       "pmem_drain;\n"
		       "   tree = tracked - raw: tag, claim, release, the per-volume lock)\n");
		printf("\ndirty tree memory (empty tree %.0f B):\n", r->empty_tree_bytes);
		printf("  sequential 4 KiB writes: %7.2f B per dirty page (%" PRIu64 " pages)\n",
		       r->seq_bytes_per_page, r->seq_pages);
		printf("  sparse random writes:    %7.2f B per dirty page (%" PRIu64 " pages)\n",
		       r->sparse_bytes_per_page, r->sparse_pages);
		printf("  sparse random 64 B writes: %5.2f B per dirty page (line arrays)\n",
		       r->sparse64_bytes_per_page);
		printf("mark dirty (dtree_mark_dirty, one 4 KiB page per call):\n");
		printf("  fresh pages, sequential: %6.2f M ops/s\n", r->mark_fresh_seq_ops / 1e6);
		printf("  fresh pages, random:     %6.2f M ops/s\n", r->mark_fresh_ops / 1e6);
		printf("  already-dirty pages:     %6.2f M ops/s\n", r->mark_dirty_ops / 1e6);
		printf("  fresh pages, random, 64 B per call: %6.2f M ops/s\n",
		       r->mark64_ops / 1e6);

		printf("\nfsync after %u random writes (64-byte aligned), whole volume:\n",
		       SMALL_WRITES);
		printf("%8s  %10s  %10s  %10s  %9s  %9s  %9s  %10s  %9s\n", "write", "by line",
		       "by page", "raw lines", "line/raw", "page/raw", "page/line", "tree walk",
		       "floor");
		for (unsigned si = 0; si < NSMALL; si++)
			printf("%6u B  %10s  %10s  %10s  %8.2fx  %8.2fx  %8.2fx  %10s  %8.2fx\n",
			       small_sizes[si], format_ns(a, sizeof(a), r->small_lines_ns[si]),
			       format_ns(b, sizeof(b), r->small_pages_ns[si]),
			       format_ns(c, sizeof(c), r->small_raw_ns[si]),
			       r->small_lines_ns[si] / r->small_raw_ns[si],
			       r->small_pages_ns[si] / r->small_raw_ns[si],
			       r->small_pages_ns[si] / r->small_lines_ns[si],
			       format_ns(d, sizeof(d), r->small_walk_ns[si]),
			       (r->small_raw_ns[si] + r->small_walk_ns[si]) / r->small_raw_ns[si]);
		printf(
		    "  (by line: tracked fsync; by page: FLUSH_PAGES, every line of each dirty\n"
		    "   page, the granularity before line tracking; raw lines: pmem_flush of each\n"
		    "   write's bytes + one pmem_drain, no tree; tree walk: tag, claim, release\n"
		    "   of the same entries with no write-back; floor = (raw + walk) / raw, the\n"
		    "   least line/raw can be with a tree walk per dirty page; bytes written\n"
		    "   back by line:");
		for (unsigned si = 0; si < NSMALL; si++)
			printf(" %" PRIu64, r->small_lines_bytes[si]);
		printf(")\n");
		/*
		 * The aim of 1.2x the raw flush leaves the tree a fifth of the raw
		 * time for all its entries: printed per dirty entry beside what
		 * the walk takes per entry. Below ~4 ns no radix tree can go:
		 * finding an entry is a dependent load per level (3 levels of 64
		 * slots above a 1 GiB volume's pages), ~4 cycles each from L1.
		 */
		printf("  what 1.2x the raw flush leaves the tree per dirty page (walk takes):");
		for (unsigned si = 0; si < NSMALL; si++) {
			double entries = (double)r->small_pages_bytes[si] / PAGE;
			printf(" %u B %.2f ns (%.1f ns)", small_sizes[si],
			       0.2 * r->small_raw_ns[si] / entries, r->small_walk_ns[si] / entries);
		}
		printf("\n");

		printf("\nhuge entries, is promotion worth it? (tree walk: tag, claim, release, no "
		       "write-back)\n");
		printf(
		    "  2 MiB written 4 KiB at a time (512 entries, 8 leaves of %zu B): fsync %s, "
		    "tree walk %s\n",
		    dtree_node_size(), format_ns(a, sizeof(a), r->fsync_512x4k_ns),
		    format_ns(b, sizeof(b), r->walk_512x4k_ns));
		printf("  2 MiB in one write (one 2 MiB entry, no leaf):  fsync %s, tree walk %s\n",
		       format_ns(a, sizeof(a), r->fsync_1x2m_ns),
		       format_ns(b, sizeof(b), r->walk_1x2m_ns));
		printf("  -> 512 entries / one entry, whole fsync: %.2fx; the walk is %.1f%% of "
		       "the fsync\n",
		       r->fsync_512x4k_ns / r->fsync_1x2m_ns,
		       100.0 * r->walk_512x4k_ns / r->fsync_512x4k_ns);
		printf("  1 GiB as 512 2 MiB entries: tree walk %s; as one 1 GiB entry: %s;\n"
		       "  the write-back of the whole 1 GiB volume (hammer) %s: the walk is "
		       "%.4f%% of it\n",
		       format_ns(a, sizeof(a), r->walk_512x2m_ns),
		       format_ns(b, sizeof(b), r->walk_1x1g_ns),
		       format_ns(c, sizeof(c), r->hammer_ns[0]),
		       100.0 * r->walk_512x2m_ns / r->hammer_ns[0]);
	}

	const struct results *r1 = &all[0];
	double ratio = r1->hammer_ns[0] / r1->tracked_ns[0];
	double worst_overhead = 0;
	for (unsigned k = 0; k < nres; k++)
		for (unsigned ci = 1; ci < NCOUNTS; ci++) {
			double o = all[k].tracked_per_page[ci] - all[k].raw_per_page[ci];
			worst_overhead = o > worst_overhead ? o : worst_overhead;
		}
	double o2048 = r1->tracked_per_page[NCOUNTS - 1] - r1->raw_per_page[NCOUNTS - 1];
	printf("\naims (from the issue):\n");
	printf("  hammer/tracked >= 100,000x at 1 GiB, one dirty page:  %10.0fx   %s\n", ratio,
	       met(ratio >= AIM_RATIO_1G));
	printf("    (a raw flush of that page alone reaches %.0fx; tracked costs %.0f ns more)\n",
	       r1->hammer_ns[0] / r1->raw_per_page[0], r1->tracked_ns[0] - r1->raw_per_page[0]);
	printf("  tree overhead <= 100 ns per dirty page (1 GiB, 2048):  %7.0f ns   %s\n", o2048,
	       met(o2048 <= AIM_OVERHEAD_NS));
	printf("    (worst over all sizes and counts >= 16: %.0f ns)\n", worst_overhead);
	printf("  tree <= 16 B per dirty page, sequential (1 GiB):      %8.2f B    %s\n",
	       r1->seq_bytes_per_page, met(r1->seq_bytes_per_page <= AIM_SEQ_BYTES));
	for (unsigned si = 0; si < NSMALL; si++) {
		double q = r1->small_lines_ns[si] / r1->small_raw_ns[si];
		printf("  by line <= 1.2x raw flush of the lines, %4u B writes:  %7.2fx   %s\n",
		       small_sizes[si], q, met(q <= AIM_LINES_RAW));
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_engine [-d DIR] [-r REPS] [-q]\n"
			"  -d DIR   directory for the namespace files (default $TMPDIR, else "
			"/var/tmp)\n"
			"  -r REPS  repetitions of each tracked measurement (default 101)\n"
			"  -q       only the 1 GiB namespace\n");
}

int main(int argc, char **argv)
{
	const char *dir = getenv("TMPDIR");
	unsigned reps = 101;
	bool quick = false;
	int c;

	if (!dir || !*dir)
		dir = "/var/tmp";
	while ((c = getopt(argc, argv, "d:r:qh")) != -1) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 'r':
			reps = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'q':
			quick = true;
			break;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (reps < 3 || reps > 100000) {
		usage();
		return 2;
	}

	/* libpmem reads it on the first pmem_is_pmem(), inside pmem_map_file() */
	setenv("PMEM_IS_PMEM_FORCE", "1", 1);
	log_set_level(LOG_LEVEL_WARN);
	atexit(remove_ns_file);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	const unsigned hammer_reps_1g = 5, hammer_reps_8g = 3;
	struct results res[2];
	unsigned nres = 0;
	fprintf(stderr, "bench_engine: namespaces in %s\n", dir);
	run_namespace(dir, 1 * GIB, 1, reps, hammer_reps_1g, &res[nres++]);
	if (!quick)
		run_namespace(dir, 8 * GIB, 2, reps, hammer_reps_8g, &res[nres++]);
	print_results(res, nres, reps, hammer_reps_1g, hammer_reps_8g);
	return 0;
}
