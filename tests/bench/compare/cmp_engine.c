/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmp_engine.c -- fsync tracked vs hammer for the comparison report
 *
 *   cmp_engine [--dir DIR] [--sizes 64M,1G,8G] [--reps N] [--hammer-reps N] [--cpu C]
 *
 * For each volume size, an emulated namespace (a plain file in DIR, AUTO
 * mode; PMEM_IS_PMEM_FORCE=1 is set before mapping so libpmem writes back
 * with CLWB/CLFLUSHOPT + SFENCE as on real PMEM) holding one volume of
 * exactly that size. With 1, 16, 256 and 2048 dirty 4 KiB pages (random,
 * distinct), it times:
 *  - a tracked fsync of the whole volume (the dirty tree says what to write back);
 *  - a hammer fsync (every line of the volume written back), its peer;
 *  - the floor: pmem_flush() of exactly those pages and one pmem_drain(),
 *    no tree at all.
 * Medians of repetitions; the whole mapping is pre-touched before timing.
 * The same engine calls as bench_engine (ns_create, volume_write,
 * fsync_range), here with the volume sizes of the comparison and JSON out.
 * Prints one JSON object on stdout. A benchmark, never a test.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libpmem.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checked.h"
#include "cmp_util.h"
#include "fsync.h"
#include "log.h"
#include "namespace.h"
#include "volume.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PAGE RDAX_PAGE_SIZE
/* room for the superblocks and the volume table in front of the volume */
#define NS_SLACK  (16ULL << 20)
#define MAX_SIZES 8

static const unsigned dirty_counts[] = {1, 16, 256, 2048};
#define NCOUNTS (sizeof(dirty_counts) / sizeof(dirty_counts[0]))

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

static void die(const char *what, int ret)
{
	fprintf(stderr, "cmp_engine: %s failed: %d (%s)\n", what, ret,
		strerror(ret < 0 ? -ret : ret));
	exit(1);
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

/* pick_pages -- @n distinct random pages below @npages, sorted */
static void pick_pages(uint64_t *pages, unsigned n, uint64_t npages, uint64_t *rng)
{
	for (unsigned i = 0; i < n; i++) {
		bool fresh;
		do {
			pages[i] = cmp_rng(rng) % npages;
			fresh = true;
			for (unsigned j = 0; j < i && fresh; j++)
				fresh = pages[j] != pages[i];
		} while (!fresh);
	}
	qsort(pages, n, sizeof(*pages), cmp_u64);
}

/* time_fsync -- one fsync of the whole volume, in ns; checks the bytes written back */
static uint64_t time_fsync(struct volume *v, enum flush_mode mode, uint64_t expect)
{
	uint64_t written = 0;
	uint64_t t0 = cmp_now_ns();
	int ret = fsync_range(v, 0, 0, mode, &written);
	uint64_t t1 = cmp_now_ns();
	if (ret)
		die("fsync_range", ret);
	if (written != expect) {
		fprintf(stderr,
			"cmp_engine: fsync wrote back %" PRIu64 " bytes, expected %" PRIu64 "\n",
			written, expect);
		exit(1);
	}
	return t1 - t0;
}

struct point {
	unsigned pages;
	uint64_t tracked_ns, hammer_ns, raw_ns;
};

/* measure -- tracked, hammer and raw flush with @n dirty pages */
static void measure(struct volume *v, unsigned n, unsigned reps, unsigned hammer_reps,
		    uint64_t *rng, struct point *pt)
{
	uint64_t *pages = calloc(n, sizeof(*pages));
	uint64_t *t = calloc(reps > hammer_reps ? reps : hammer_reps, sizeof(*t));
	uint8_t *buf = aligned_alloc(PAGE, PAGE);
	if (!pages || !t || !buf)
		die("allocation", -ENOMEM);
	pick_pages(pages, n, v->size / PAGE, rng);
	pt->pages = n;

	for (unsigned r = 0; r < reps; r++) {
		memset(buf, (int)r + 1, PAGE);
		for (unsigned i = 0; i < n; i++)
			if ((errno = -volume_write(v, pages[i] * PAGE, buf, PAGE)))
				die("volume_write", -errno);
		t[r] = time_fsync(v, FLUSH_TRACKED, (uint64_t)n * PAGE);
	}
	pt->tracked_ns = median(t, reps);

	for (unsigned r = 0; r < reps; r++) {
		memset(buf, (int)r + 2, PAGE);
		for (unsigned i = 0; i < n; i++)
			memcpy(v->data + pages[i] * PAGE, buf, PAGE);
		uint64_t t0 = cmp_now_ns();
		for (unsigned i = 0; i < n; i++)
			pmem_flush(v->data + pages[i] * PAGE, PAGE);
		pmem_drain();
		t[r] = cmp_now_ns() - t0;
	}
	pt->raw_ns = median(t, reps);

	for (unsigned r = 0; r < hammer_reps; r++) {
		memset(buf, (int)r + 3, PAGE);
		for (unsigned i = 0; i < n; i++)
			if ((errno = -volume_write(v, pages[i] * PAGE, buf, PAGE)))
				die("volume_write", -errno);
		t[r] = time_fsync(v, FLUSH_HAMMER, v->size);
	}
	pt->hammer_ns = median(t, hammer_reps);
	free(pages);
	free(t);
	free(buf);
}

/* prefault -- map (and allocate, on tmpfs) every page of the volume before anything is timed */
static void prefault(struct volume *v)
{
	if (madvise(v->data, v->size, MADV_POPULATE_WRITE) == 0)
		return;
	volatile uint8_t *p = v->data;
	for (uint64_t off = 0; off < v->size; off += PAGE)
		p[off] = p[off];
}

/* run_size -- one namespace holding one volume of @size bytes; prints its JSON */
static void run_size(const char *dir, uint64_t size, uint32_t id, unsigned reps,
		     unsigned hammer_reps, uint64_t *rng, bool comma)
{
	struct ns *ns = NULL;
	struct volume *v = NULL;
	struct point pts[NCOUNTS];
	int ret;

	snprintf(ns_path, sizeof(ns_path), "%s/rdax-cmp-engine-%d-%u", dir, (int)getpid(), id);
	if ((ret = ns_create(ns_path, size + NS_SLACK, PERSIST_AUTO, id, &ns)))
		die("ns_create", ret);
	bool is_pmem = ns->persist.is_pmem;
	if ((ret = ns_volume_create(ns, "cmp", size)))
		die("ns_volume_create", ret);
	if ((ret = ns_volume_open(ns, "cmp", &v)))
		die("ns_volume_open", ret);
	fprintf(stderr, "cmp_engine: %" PRIu64 " MiB volume: pre-touching ...\n", size >> 20);
	prefault(v);
	/* one hammer first: every line of the volume has been through the cache once */
	time_fsync(v, FLUSH_HAMMER, v->size);
	unsigned hr = size >= (4ULL << 30) && hammer_reps > 3 ? 3 : hammer_reps;
	for (unsigned ci = 0; ci < NCOUNTS; ci++) {
		fprintf(stderr, "cmp_engine: %" PRIu64 " MiB volume: %u dirty pages ...\n",
			size >> 20, dirty_counts[ci]);
		measure(v, dirty_counts[ci], reps, hr, rng, &pts[ci]);
	}
	ns_volume_close(ns, &v);
	ns_close(&ns);
	remove_ns_file();

	printf("%s{\"volume_bytes\": %" PRIu64 ", \"pmem_is_pmem\": %d, \"reps\": %u, "
	       "\"hammer_reps\": %u, \"points\": [",
	       comma ? ", " : "", size, is_pmem ? 1 : 0, reps, hr);
	for (unsigned ci = 0; ci < NCOUNTS; ci++)
		printf("%s{\"pages\": %u, \"tracked_ns\": %" PRIu64 ", \"hammer_ns\": %" PRIu64
		       ", \"raw_flush_ns\": %" PRIu64 "}",
		       ci ? ", " : "", pts[ci].pages, pts[ci].tracked_ns, pts[ci].hammer_ns,
		       pts[ci].raw_ns);
	printf("]}");
	fflush(stdout);
}

/* cpu_flush_instruction -- what libpmem's pmem_flush() uses here (its order of preference) */
static const char *cpu_flush_instruction(void)
{
	static char flags[8192];
	FILE *f = fopen("/proc/cpuinfo", "r");
	const char *found = "CLFLUSH";
	if (!f)
		return "unknown";
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

static void usage(void)
{
	fprintf(stderr, "usage: cmp_engine [--dir DIR] [--sizes 64M,1G,8G] [--reps N] "
			"[--hammer-reps N] [--cpu C]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"dir", required_argument, NULL, 'D'},  {"sizes", required_argument, NULL, 'S'},
	    {"reps", required_argument, NULL, 'r'}, {"hammer-reps", required_argument, NULL, 'h'},
	    {"cpu", required_argument, NULL, 'c'},  {NULL, 0, NULL, 0},
	};
	const char *dir = "/dev/shm";
	char sizes_arg[256] = "64M,1G,8G";
	unsigned reps = 101, hammer_reps = 5;
	int cpu = -1, c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'D':
			dir = optarg;
			break;
		case 'S':
			snprintf(sizes_arg, sizeof(sizes_arg), "%s", optarg);
			break;
		case 'r':
			reps = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'h':
			hammer_reps = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'c':
			cpu = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	uint64_t sizes[MAX_SIZES];
	unsigned nsizes = 0;
	char *save = NULL;
	for (char *tok = strtok_r(sizes_arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (nsizes == MAX_SIZES)
			usage();
		sizes[nsizes] = cmp_parse_size(tok);
		if (sizes[nsizes] < (4ULL << 20) || sizes[nsizes] % RDAX_PMD_SIZE)
			usage();
		nsizes++;
	}
	if (nsizes == 0 || reps < 3 || reps > 100000 || hammer_reps < 1 || hammer_reps > 1000)
		usage();

	/* libpmem reads it on the first pmem_is_pmem(), inside pmem_map_file() */
	setenv("PMEM_IS_PMEM_FORCE", "1", 1);
	log_set_level(LOG_LEVEL_WARN);
	atexit(remove_ns_file);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (cmp_pin(cpu))
		fprintf(stderr, "cmp_engine: cannot pin to CPU %d\n", cpu);

	uint64_t rng = 0x2545f4914f6cdd1dULL;
	printf("{\"tool\": \"cmp_engine\"");
	cmp_json_str(stdout, "dir", dir, true);
	cmp_json_str(stdout, "flush_instruction", cpu_flush_instruction(), true);
	cmp_json_num(stdout, "cpu", cpu, true);
	printf(", \"volumes\": [");
	for (unsigned i = 0; i < nsizes; i++)
		run_size(dir, sizes[i], i + 1, reps, hammer_reps, &rng, i > 0);
	printf("]");
	cmp_json_num(stdout, "ran_on_cpu", cmp_cpu_now(), true);
	printf("}\n");
	return 0;
}
