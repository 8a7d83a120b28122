/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * soak.c -- many connections of mixed work against one rdaxd for a bounded time
 *
 *   soak [--seconds N] [--connections N] [--threads N] [--warmup N] [--seed S]
 *        [--control]
 *
 * Starts rdaxd (the build's, sim mode, 2 event-loop threads) and opens
 * --connections (256) connections spread over --threads (16) client
 * threads. Each connection owns a volume and runs, for --seconds (60),
 * writes of 4 KiB at random pages, reads (checked against what the
 * connection wrote: its model of the volume), fsyncs of the volume or a
 * range, discards (the model turns to zeros), stats, and every 64th
 * operation a volume of its own created, opened, written, closed and
 * deleted (volume churn). A witness connection meanwhile writes 4 KiB and
 * fsyncs it, in a loop, timing each pair.
 *
 * Checked: every request is answered (a call that fails or times out is
 * counted and fails the run) with the right data; the daemon's resident
 * memory after the warm-up (--warmup seconds, default a quarter of the run)
 * never grows past 5% over what it was at the warm-up's end; at the end every
 * volume reads back as its model says, and the daemon stops on SIGTERM
 * with status 0 (under ASan: no leak). Reported, not asserted: operations
 * of each kind, the witness's p50 / p99 / max write+fsync latency.
 * Exit 0 "soak: PASS", 1 a check failed, 2 usage or set-up error.
 *
 * --control: the same against a daemon with RDAX_FAULTS=leak-per-request
 * (every request leaks 4 KiB, common/faults.h); the memory check must
 * report the growth ("soak: control PASSED", exit 0), else exit 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "librdax.h"

#define PAGE	       4096U
#define VOL_PAGES      64U /* 256 KiB per connection */
#define CHURN_EVERY    64U
#define RSS_GROWTH_MAX 0.05
#define OP_TIMEOUT_MS  30000
#define WITNESS_MAX    (1U << 20)

enum op { OP_WRITE, OP_READ, OP_FSYNC, OP_DISCARD, OP_STAT, OP_CHURN, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"write",	  "read", "fsync",
					       "discard", "stat", "churn"};

/* One client connection and its model: the pattern seed of each page, 0 for zeros. */
struct client {
	unsigned id;
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	uint64_t seed[VOL_PAGES];
	uint64_t next_seed;
	uint64_t rng;
	unsigned churned;
};

static struct hx_daemon daemon_;
static struct client *clients;
static unsigned nclients = 256, nthreads = 16;
static volatile int stop;
static uint64_t ops[OP_COUNT], failures;
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *witness_us;
static pthread_t *th;
static unsigned witness_n;

/* rng_next -- xorshift64* */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* failed -- a request not answered as it should have been */
static void failed(const struct client *c, const char *what, int ret)
{
	fprintf(stderr, "soak: connection %u: %s: %s (%s)\n", c ? c->id : 0, what,
		rdax_strerror(ret), c && c->conn ? rdax_conn_last_error(c->conn) : "");
	__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
}

/* page_fill -- the bytes of a page with pattern @seed (0: zeros) */
static void page_fill(uint8_t *buf, uint64_t seed, unsigned page)
{
	if (seed == 0)
		memset(buf, 0, PAGE);
	else
		hx_pattern(buf, PAGE, seed, (uint64_t)page * PAGE);
}

/* client_open -- connect, create and open the connection's volume */
static int client_open(struct client *c, struct rdax_conn_opts *opts)
{
	char name[32];
	snprintf(name, sizeof(name), "soak-%u", c->id);
	int ret = rdax_connect(daemon_.url, opts, &c->conn);
	if (ret) {
		fprintf(stderr, "soak: connect %u: %s\n", c->id, rdax_connect_last_error());
		return ret;
	}
	ret = rdax_volume_create(c->conn, name, (uint64_t)VOL_PAGES * PAGE, RDAX_NAMESPACE_ANY);
	if (ret == 0)
		ret = rdax_volume_open(c->conn, name, &c->vol);
	if (ret)
		failed(c, "create/open", ret);
	return ret;
}

/* churn -- a volume of its own created, opened, written, read, closed, deleted */
static bool churn(struct client *c)
{
	char name[48];
	uint8_t buf[PAGE], back[PAGE];
	struct rdax_volume *v = NULL;
	snprintf(name, sizeof(name), "churn-%u-%u", c->id, c->churned++);
	int ret = rdax_volume_create(c->conn, name, 16 * PAGE, RDAX_NAMESPACE_ANY);
	if (ret) {
		failed(c, "churn create", ret);
		return false;
	}
	ret = rdax_volume_open(c->conn, name, &v);
	if (ret == 0) {
		hx_pattern(buf, PAGE, c->next_seed++, 0);
		ret = rdax_write(v, PAGE, buf, PAGE, 0);
	}
	if (ret == 0)
		ret = rdax_read(v, PAGE, back, PAGE);
	if (ret == 0 && memcmp(buf, back, PAGE) != 0)
		ret = -EIO;
	int cret = v ? rdax_volume_close(&v) : 0;
	int dret = rdax_volume_delete(c->conn, name);
	if (ret || cret || dret) {
		failed(c, "churn", ret ? ret : cret ? cret : dret);
		return false;
	}
	return true;
}

/* step -- one operation of @c; false if it failed */
static bool step(struct client *c, enum op *kind)
{
	uint8_t buf[PAGE], want[PAGE];
	uint64_t r = rng_next(&c->rng);
	unsigned page = (unsigned)(r >> 32) % VOL_PAGES;
	unsigned pick = (unsigned)(r & 0xff);
	int ret;
	if (pick == 0 || (r >> 8) % CHURN_EVERY == 0) {
		*kind = OP_CHURN;
		return churn(c);
	}
	if (pick < 100) {
		*kind = OP_WRITE;
		uint64_t seed = c->next_seed++;
		page_fill(buf, seed, page);
		ret = rdax_write(c->vol, (uint64_t)page * PAGE, buf, PAGE, 0);
		if (ret == 0)
			c->seed[page] = seed;
	} else if (pick < 180) {
		*kind = OP_READ;
		ret = rdax_read(c->vol, (uint64_t)page * PAGE, buf, PAGE);
		if (ret == 0) {
			page_fill(want, c->seed[page], page);
			if (memcmp(buf, want, PAGE) != 0) {
				failed(c, "read returned other bytes than written", -EIO);
				return false;
			}
		}
	} else if (pick < 215) {
		*kind = OP_FSYNC;
		uint64_t wb;
		ret = (pick & 1) ? rdax_fsync(c->vol, 0, 0, &wb)
				 : rdax_fsync(c->vol, (uint64_t)page * PAGE, PAGE, &wb);
	} else if (pick < 240) {
		*kind = OP_DISCARD;
		ret = rdax_discard(c->vol, (uint64_t)page * PAGE, PAGE);
		if (ret == 0)
			c->seed[page] = 0;
	} else {
		*kind = OP_STAT;
		struct rdax_volume_stat st;
		ret = rdax_stat(c->vol, &st);
	}
	if (ret) {
		failed(c, op_names[*kind], ret);
		return false;
	}
	return true;
}

/* client_thread -- its share of the connections, round-robin, until stop */
static void *client_thread(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint64_t mine[OP_COUNT] = {0};
	while (!stop) {
		for (unsigned i = t; i < nclients && !stop; i += nthreads) {
			enum op kind;
			if (clients[i].vol && step(&clients[i], &kind))
				mine[kind]++;
		}
	}
	pthread_mutex_lock(&stats_lock);
	for (unsigned k = 0; k < OP_COUNT; k++)
		ops[k] += mine[k];
	pthread_mutex_unlock(&stats_lock);
	return NULL;
}

/* witness_thread -- 4 KiB write + fsync in a loop, each pair timed */
static void *witness_thread(void *arg)
{
	struct client *w = arg;
	uint8_t buf[PAGE];
	unsigned page = 0;
	while (!stop && witness_n < WITNESS_MAX) {
		page_fill(buf, w->next_seed, page);
		uint64_t t0 = now_us();
		int ret = rdax_write(w->vol, (uint64_t)page * PAGE, buf, PAGE, 0);
		uint64_t wb;
		if (ret == 0)
			ret = rdax_fsync(w->vol, (uint64_t)page * PAGE, PAGE, &wb);
		uint64_t dt = now_us() - t0;
		if (ret) {
			failed(w, "witness write+fsync", ret);
			break;
		}
		w->seed[page] = w->next_seed++;
		witness_us[witness_n++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
		page = (page + 1) % VOL_PAGES;
		usleep(2000);
	}
	return NULL;
}

/* rss_kib -- the daemon's resident set (VmRSS), 0 if unreadable */
static unsigned long rss_kib(pid_t pid)
{
	char path[64], line[256];
	unsigned long kib = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lu kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* verify -- every volume reads back as its model says */
static unsigned verify(struct client *c)
{
	uint8_t buf[PAGE], want[PAGE];
	unsigned bad = 0;
	for (unsigned p = 0; p < VOL_PAGES; p++) {
		int ret = rdax_read(c->vol, (uint64_t)p * PAGE, buf, PAGE);
		page_fill(want, c->seed[p], p);
		if (ret || memcmp(buf, want, PAGE) != 0)
			bad++;
	}
	if (bad)
		failed(c, "final read-back differs from what was written", -EIO);
	return bad;
}

static unsigned long parse_num(const char *s, const char *flag)
{
	char *end;
	unsigned long v = strtoul(s, &end, 0);
	if (!*s || *end || v == 0) {
		fprintf(stderr, "soak: %s needs a positive number, not '%s'\n", flag, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	unsigned long seconds = 60, warmup = 0;
	uint64_t seed = (uint64_t)time(NULL);
	bool control = false;
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--seconds") == 0)
			seconds = parse_num(argv[++i], "--seconds");
		else if (i + 1 < argc && strcmp(argv[i], "--connections") == 0)
			nclients = (unsigned)parse_num(argv[++i], "--connections");
		else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
			nthreads = (unsigned)parse_num(argv[++i], "--threads");
		else if (i + 1 < argc && strcmp(argv[i], "--warmup") == 0)
			warmup = parse_num(argv[++i], "--warmup");
		else if (i + 1 < argc && strcmp(argv[i], "--seed") == 0)
			seed = parse_num(argv[++i], "--seed");
		else if (strcmp(argv[i], "--control") == 0)
			control = true;
		else {
			fprintf(stderr, "usage: soak [--seconds N] [--connections N] [--threads N] "
					"[--warmup N] [--seed S] [--control]\n");
			return 2;
		}
	}
	if (!warmup)
		warmup = seconds / 4 ? seconds / 4 : 1;
	if (warmup >= seconds || nthreads > nclients) {
		fprintf(stderr, "soak: --warmup must be below --seconds, --threads at most "
				"--connections\n");
		return 2;
	}
	/* ASan's quarantine of freed memory would read as growth: keep it small */
	setenv("ASAN_OPTIONS", "quarantine_size_mb=16:detect_leaks=1", 0);
	printf("soak: %u connections on %u threads, %lu s (warm-up %lu s), seed %" PRIu64 "%s\n",
	       nclients, nthreads, seconds, warmup, seed,
	       control ? ", CONTROL: daemon with RDAX_FAULTS=leak-per-request" : "");

	char dir[256];
	if (hx_tmpdir_make("soak", dir, sizeof(dir)))
		return 2;
	struct hx_daemon_opts dopts = {.ns_size = "256M", .mode = "sim", .threads = 2};
	if (control)
		dopts.faults = "leak-per-request";
	if (hx_daemon_start(&daemon_, dir, &dopts)) {
		hx_tmpdir_remove(dir);
		return 2;
	}
	int status = 1;
	struct rdax_conn_opts *opts;
	if (rdax_conn_opts_new(&opts) || rdax_conn_opts_set_timeout(opts, OP_TIMEOUT_MS))
		goto out_stop;
	clients = calloc(nclients + 1, sizeof(*clients));
	witness_us = calloc(WITNESS_MAX, sizeof(*witness_us));
	th = calloc(nthreads, sizeof(*th));
	if (!clients || !witness_us || !th)
		goto out_opts;
	for (unsigned i = 0; i <= nclients; i++) {
		clients[i].id = i;
		clients[i].rng = seed * 0x9E3779B97F4A7C15ULL + i + 1;
		clients[i].next_seed = ((uint64_t)i << 40) + 1;
		if (client_open(&clients[i], opts))
			goto out_clients;
	}
	struct client *witness = &clients[nclients];

	pthread_t wt;
	for (unsigned t = 0; t < nthreads; t++)
		pthread_create(&th[t], NULL, client_thread, (void *)(uintptr_t)t);
	pthread_create(&wt, NULL, witness_thread, witness);

	uint64_t t0 = now_us();
	unsigned long rss_start = rss_kib(daemon_.pid), rss_warm = 0, rss_peak = 0;
	while (now_us() - t0 < seconds * 1000000ULL &&
	       !__atomic_load_n(&failures, __ATOMIC_RELAXED)) {
		usleep(500000);
		unsigned long rss = rss_kib(daemon_.pid);
		if (now_us() - t0 < warmup * 1000000ULL)
			rss_warm = rss;
		else if (rss > rss_peak)
			rss_peak = rss;
	}
	stop = 1;
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	pthread_join(wt, NULL);
	double elapsed = (double)(now_us() - t0) / 1e6;

	unsigned bad = 0;
	for (unsigned i = 0; i <= nclients; i++)
		bad += verify(&clients[i]);

	uint64_t total = 0;
	printf("soak: %.1f s:", elapsed);
	for (unsigned k = 0; k < OP_COUNT; k++) {
		printf(" %s %" PRIu64, op_names[k], ops[k]);
		total += ops[k];
	}
	printf(" (%" PRIu64 " operations, %.0f/s), %" PRIu64 " unanswered or wrong\n", total,
	       (double)total / elapsed, failures);
	if (witness_n) {
		qsort(witness_us, witness_n, sizeof(*witness_us), cmp_u32);
		printf(
		    "soak: witness 4 KiB write+fsync: %u pairs, p50 %u us, p99 %u us, max %u us\n",
		    witness_n, witness_us[witness_n / 2], witness_us[(size_t)witness_n * 99 / 100],
		    witness_us[witness_n - 1]);
	}
	double growth = rss_warm ? ((double)rss_peak - (double)rss_warm) / (double)rss_warm : 1.0;
	printf("soak: daemon RSS %lu KiB at start, %lu KiB after the warm-up, peak %lu KiB after "
	       "it: %+.2f%% (limit %.0f%%)\n",
	       rss_start, rss_warm, rss_peak, growth * 100, RSS_GROWTH_MAX * 100);
	status = failures == 0 && bad == 0 && witness_n > 0 && rss_warm && rss_peak &&
			 growth < RSS_GROWTH_MAX
		     ? 0
		     : 1;
	if (control) {
		/* the leak must be caught by the memory check (the rest may pass) */
		bool caught = rss_warm && growth >= RSS_GROWTH_MAX;
		printf("soak: control %s: %s\n", caught ? "PASSED" : "FAILED",
		       caught ? "the leak was reported as growth" : "the leak went unnoticed");
		hx_daemon_stop(&daemon_); /* LeakSanitizer's report makes this fail: expected */
		hx_tmpdir_remove(dir);
		for (unsigned i = 0; clients && i <= nclients; i++) {
			if (clients[i].vol)
				rdax_volume_close(&clients[i].vol);
			if (clients[i].conn)
				rdax_disconnect(&clients[i].conn);
		}
		free(clients);
		free(witness_us);
		free(th);
		rdax_conn_opts_delete(&opts);
		return caught ? 0 : 1;
	}

out_clients:
	for (unsigned i = 0; clients && i <= nclients; i++) {
		if (clients[i].vol)
			rdax_volume_close(&clients[i].vol);
		if (clients[i].conn)
			rdax_disconnect(&clients[i].conn);
	}
out_opts:
	free(clients);
	free(witness_us);
	free(th);
	rdax_conn_opts_delete(&opts);
out_stop:
	if (hx_daemon_stop(&daemon_)) {
		fprintf(stderr, "soak: the daemon did not stop cleanly\n");
		status = 1;
	}
	hx_tmpdir_remove(dir);
	puts(status == 0 ? "soak: PASS" : "soak: FAIL");
	return status;
}
