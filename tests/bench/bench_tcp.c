/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_tcp.c -- rdax over TCP loopback, next to the TCP floor of the same run
 *
 *   bench_tcp [--mode sim|auto] [--iters N] [--seconds S] [--threads N]
 *             [--client-cpu C] [--daemon-cpu D] [--dir DIR] [--tls]
 *
 * Starts its own rdaxd (default: sim mode -- the power-fail simulator, a
 * flush is a pwrite of the flushed lines into the page cache, no disk I/O;
 * --mode auto maps the file with libpmem, which on a plain file means
 * msync, and with PMEM_IS_PMEM_FORCE=1 on /dev/shm CLWB + SFENCE, the
 * flush the comparison in docs/benchmarks.md uses) on a fresh namespace file in a temporary directory, pins the
 * daemon (all its threads) to one CPU and this program to another, and
 * measures over loopback:
 *   - QD1 4 KiB write + fsync, two RPCs: latency p50/p99
 *   - QD1 4 KiB durable write (WRITE with fsync), one RPC: p50/p99
 *   - 4 KiB write IOPS at QD32 (asynchronous API)
 *   - 1 MiB write throughput at QD8 (asynchronous API)
 * and, in the same run with the same pinning, the TCP floor: a 64-byte
 * ping-pong between two threads of this program (round-trip p50/p99, and
 * its rate), and a one-way 1 MiB-message stream (bandwidth). Each rdax
 * figure is printed with its ratio to the matching floor figure. A second
 * table takes the QD1 figures again in turns with the floor's round trips
 * (lat_turns), so that rdax and its floor see the same moments.
 *
 * With --tls the daemon also offers TLS (--tls on, a PSK made for the run)
 * and every rdax figure is measured a second time, in the same run against
 * the same daemon and volume, over an rdaxs:// connection: a second table
 * gives TLS beside plain and their ratio (docs/security.md), with the
 * durable write's p50 also taken with plain and TLS writes in turns
 * (lat_durable_interleaved: both see the same moments). A third gives
 * a ceiling for TLS's 1 MiB throughput from the same run (tls_ceiling):
 * the CPU each side spent per MiB in the plain 1 MiB phase, plus what
 * AES-128-GCM costs per MiB of 16 KiB records on that side's CPU.
 *
 * A benchmark, not a test: it prints one table and never passes or fails
 * on the numbers (exit status only reports that something did not run).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "harness.h"
#include "librdax.h"

#define VOL_SIZE (256ULL << 20)
#define SMALL	 4096
#define BIG	 (1U << 20)

struct opts {
	const char *mode;
	unsigned iters;
	double seconds;
	unsigned threads;
	int client_cpu, daemon_cpu;
	const char *dir;
	bool tls;
	pid_t daemon_pid; /* for the CPU time of its phases */
};

/* The CPU time of one throughput phase: the daemon's process, this thread. */
struct phase_cpu {
	double wall_s;
	double daemon_s; /* utime + stime of every daemon thread (/proc/PID/stat) */
	double client_s; /* this thread (CLOCK_THREAD_CPUTIME_ID): librdax runs on it */
	double mib;	 /* MiB written in the phase */
	/* time runnable but waiting for a CPU (schedstat): the daemon's threads, this thread */
	double daemon_wait_s, client_wait_s;
};

/* The rdax figures of one connection. */
struct figures {
	double wf50, wf99;    /* QD1 write + fsync, two RPCs (us) */
	double dw50, dw99;    /* QD1 durable write, one RPC (us) */
	double iops;	      /* QD32 4 KiB writes */
	double bw;	      /* QD8 1 MiB writes, MiB/s */
	struct phase_cpu big; /* the CPU time of the 1 MiB phase */
};

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* pct -- the @p-th percentile of @n sorted samples */
static double pct(const double *v, unsigned n, double p)
{
	unsigned i = (unsigned)(p / 100.0 * (n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static int pin_self(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) < 0 ? -errno : 0;
}

static void die(const char *what, int ret)
{
	fprintf(stderr, "bench_tcp: %s: %s\n", what, rdax_strerror(ret));
	exit(1);
}

/* --- the TCP floor ------------------------------------------------------ */

struct floor_srv {
	int lfd;
	int cpu;
	int mode; /* 0: ping-pong echo of 64 bytes, 1: sink of a stream, 2: sized echo */
};

/* a sized echo's request header: the request is @in bytes (header included), the answer @out */
struct sized_hdr {
	uint32_t in, out;
};

static int read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* floor_server -- accept one connection; echo 64-byte messages, or sink a stream + ack */
static void *floor_server(void *arg)
{
	struct floor_srv *s = arg;
	pin_self(s->cpu);
	int fd = accept(s->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (s->mode == 0) {
		char b[64];
		while (read_full(fd, b, sizeof(b)) == 0 && write_full(fd, b, sizeof(b)) == 0)
			;
	} else if (s->mode == 2) {
		uint8_t b[SMALL];
		struct sized_hdr h;
		while (read_full(fd, &h, sizeof(h)) == 0 && h.in >= sizeof(h) && h.in <= SMALL &&
		       h.out <= SMALL && read_full(fd, b, h.in - sizeof(h)) == 0 &&
		       write_full(fd, b, h.out) == 0)
			;
	} else {
		uint8_t *b = malloc(BIG);
		/* each 1 MiB message is acknowledged with 64 bytes, like a write reply */
		while (b && read_full(fd, b, BIG) == 0 && write_full(fd, b, 64) == 0)
			;
		free(b);
	}
	close(fd);
	return NULL;
}

static int floor_connect(struct floor_srv *s, pthread_t *th)
{
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->lfd, 1) < 0 ||
	    getsockname(s->lfd, (struct sockaddr *)&a, &alen) < 0)
		return -1;
	pthread_create(th, NULL, floor_server, s);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* floor_pingpong -- 64-byte round trips: p50 and p99 in microseconds, rate = 1 / mean */
static void floor_pingpong(const struct opts *o, double *p50, double *p99, double *rate)
{
	struct floor_srv s = {.cpu = o->daemon_cpu, .mode = 0};
	pthread_t th;
	int fd = floor_connect(&s, &th);
	if (fd < 0) {
		perror("bench_tcp: floor connect");
		exit(1);
	}
	unsigned n = o->iters * 2;
	double *lat = malloc(n * sizeof(double));
	char b[64] = {0};
	for (unsigned i = 0; i < n / 10; i++) /* warm up */
		if (write_full(fd, b, 64) || read_full(fd, b, 64))
			exit(1);
	double t0 = now_us();
	for (unsigned i = 0; i < n; i++) {
		double t = now_us();
		if (write_full(fd, b, 64) || read_full(fd, b, 64))
			exit(1);
		lat[i] = now_us() - t;
	}
	*rate = n / ((now_us() - t0) / 1e6);
	close(fd);
	pthread_join(th, NULL);
	close(s.lfd);
	qsort(lat, n, sizeof(double), cmp_double);
	*p50 = pct(lat, n, 50);
	*p99 = pct(lat, n, 99);
	free(lat);
}

struct acker {
	int fd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned inflight;
	bool done; /* the sender sent its last message */
	uint64_t acked;
};

/* floor_acker -- read the 64-byte acks of the stream while the sender keeps sending */
static void *floor_acker(void *arg)
{
	struct acker *a = arg;
	char ack[64];
	for (;;) {
		pthread_mutex_lock(&a->lock);
		bool finished = a->done && a->inflight == 0;
		pthread_mutex_unlock(&a->lock);
		if (finished || read_full(a->fd, ack, sizeof(ack)))
			break;
		pthread_mutex_lock(&a->lock);
		a->inflight--;
		a->acked++;
		pthread_cond_signal(&a->cond);
		pthread_mutex_unlock(&a->lock);
	}
	return NULL;
}

/*
 * floor_stream -- 1 MiB messages, at most 8 unacknowledged (each acked with
 * 64 bytes, like a write reply), acks read by a second thread on the
 * client's CPU: MiB/s
 */
static double floor_stream(const struct opts *o)
{
	struct floor_srv s = {.cpu = o->daemon_cpu, .mode = 1};
	pthread_t th, ath;
	int fd = floor_connect(&s, &th);
	if (fd < 0)
		exit(1);
	uint8_t *b = calloc(1, BIG);
	struct acker a = {.fd = fd};
	pthread_mutex_init(&a.lock, NULL);
	pthread_cond_init(&a.cond, NULL);
	pthread_create(&ath, NULL, floor_acker, &a);
	double t0 = now_us(), end = t0 + o->seconds * 1e6;
	while (now_us() < end) {
		pthread_mutex_lock(&a.lock);
		while (a.inflight >= 8)
			pthread_cond_wait(&a.cond, &a.lock);
		a.inflight++;
		pthread_mutex_unlock(&a.lock);
		if (write_full(fd, b, BIG))
			exit(1);
	}
	pthread_mutex_lock(&a.lock);
	a.done = true;
	while (a.inflight > 0)
		pthread_cond_wait(&a.cond, &a.lock);
	pthread_mutex_unlock(&a.lock);
	double secs = (now_us() - t0) / 1e6;
	shutdown(fd, SHUT_RDWR); /* wakes the acker if it is already waiting for more */
	pthread_join(ath, NULL);
	close(fd);
	pthread_join(th, NULL);
	close(s.lfd);
	free(b);
	return (double)a.acked * BIG / secs / (1 << 20);
}

/* --- rdax --------------------------------------------------------------- */

static void lat_write_fsync(struct rdax_volume *v, const struct opts *o, bool durable, double *p50,
			    double *p99)
{
	uint8_t buf[SMALL];
	memset(buf, 0x5a, sizeof(buf));
	double *lat = malloc(o->iters * sizeof(double));
	uint64_t rng = 12345;
	for (unsigned i = 0; i < o->iters + o->iters / 10; i++) {
		uint64_t off = (hx_splitmix64(&rng) % (VOL_SIZE / SMALL)) * SMALL;
		double t = now_us();
		int ret;
		if (durable) {
			ret = rdax_write(v, off, buf, SMALL, RDAX_WRITE_FSYNC);
		} else {
			ret = rdax_write(v, off, buf, SMALL, 0);
			if (!ret)
				ret = rdax_fsync(v, off, SMALL, NULL);
		}
		if (ret)
			die("write/fsync", ret);
		if (i >= o->iters / 10) /* the first tenth warms up */
			lat[i - o->iters / 10] = now_us() - t;
	}
	qsort(lat, o->iters, sizeof(double), cmp_double);
	*p50 = pct(lat, o->iters, 50);
	*p99 = pct(lat, o->iters, 99);
	free(lat);
}

/*
 * lat_durable_interleaved -- QD1 4 KiB durable writes taken in turns over
 * @a and @b (the order swapped every turn), p50 of each in microseconds.
 * Measured one after the other, two p50s see different moments of the
 * machine (on the 2-CPU development VM a plain p50 moved from 107 to 130 us
 * between runs minutes apart); in turns, both see the same.
 */
static void lat_durable_interleaved(struct rdax_volume *a, struct rdax_volume *b,
				    const struct opts *o, double *a50, double *b50)
{
	uint8_t buf[SMALL];
	memset(buf, 0x5a, sizeof(buf));
	double *la = malloc(o->iters * sizeof(double)), *lb = malloc(o->iters * sizeof(double));
	uint64_t rng = 54321;
	unsigned warm = o->iters / 10;
	for (unsigned i = 0; i < o->iters + warm; i++) {
		for (unsigned k = 0; k < 2; k++) {
			bool first_a = (i & 1) == 0;
			struct rdax_volume *v = (k == 0) == first_a ? a : b;
			uint64_t off = (hx_splitmix64(&rng) % (VOL_SIZE / SMALL)) * SMALL;
			double t = now_us();
			int ret = rdax_write(v, off, buf, SMALL, RDAX_WRITE_FSYNC);
			if (ret)
				die("durable write", ret);
			if (i >= warm)
				(v == a ? la : lb)[i - warm] = now_us() - t;
		}
	}
	qsort(la, o->iters, sizeof(double), cmp_double);
	qsort(lb, o->iters, sizeof(double), cmp_double);
	*a50 = pct(la, o->iters, 50);
	*b50 = pct(lb, o->iters, 50);
	free(la);
	free(lb);
}

/*
 * The TCP floor and rdax in turns. Measured in phases one after the other,
 * a floor and an rdax p50 see different moments of the machine (a p50
 * moved by more than the gap between them on an idle VM, docs/security.md).
 * Here every turn takes one sample of each, the order rotating each turn:
 * the round trips of the floor that each rdax request matches -- 64 bytes
 * each way (the ping-pong), 4 KiB there and 64 bytes back (what a write
 * carries), 64 bytes there and 4 KiB back (a read) -- and rdax's durable
 * write, write + fsync pair and read.
 */
enum turn_kind { T_PING64, T_PING_W4K, T_PING_R4K, T_DURABLE, T_PAIR, T_READ, T_KINDS };

struct turns {
	double p50[T_KINDS];
};

/* sized_round_trip -- one request of @in bytes answered with @out bytes over @fd */
static void sized_round_trip(int fd, uint8_t *buf, uint32_t in, uint32_t out)
{
	struct sized_hdr h = {.in = in, .out = out};
	memcpy(buf, &h, sizeof(h));
	if (write_full(fd, buf, in) || read_full(fd, buf, out)) {
		perror("bench_tcp: floor round trip");
		exit(1);
	}
}

static void lat_turns(struct rdax_volume *v, const struct opts *o, struct turns *t)
{
	struct floor_srv s = {.cpu = o->daemon_cpu, .mode = 2};
	pthread_t th;
	int fd = floor_connect(&s, &th);
	if (fd < 0) {
		perror("bench_tcp: floor connect");
		exit(1);
	}
	uint8_t buf[SMALL], data[SMALL];
	memset(data, 0x3c, sizeof(data));
	double *lat[T_KINDS];
	for (int k = 0; k < T_KINDS; k++)
		lat[k] = malloc(o->iters * sizeof(double));
	uint64_t rng = 777;
	unsigned warm = o->iters / 10;
	for (unsigned i = 0; i < o->iters + warm; i++) {
		for (int j = 0; j < T_KINDS; j++) {
			int k = (int)((i + (unsigned)j) % T_KINDS);
			uint64_t off = (hx_splitmix64(&rng) % (VOL_SIZE / SMALL)) * SMALL;
			int ret = 0;
			double t0 = now_us();
			switch (k) {
			case T_PING64:
				sized_round_trip(fd, buf, 64, 64);
				break;
			case T_PING_W4K:
				sized_round_trip(fd, buf, SMALL, 64);
				break;
			case T_PING_R4K:
				sized_round_trip(fd, buf, 64, SMALL);
				break;
			case T_DURABLE:
				ret = rdax_write(v, off, data, SMALL, RDAX_WRITE_FSYNC);
				break;
			case T_PAIR:
				ret = rdax_write(v, off, data, SMALL, 0);
				if (!ret)
					ret = rdax_fsync(v, off, SMALL, NULL);
				break;
			case T_READ:
				ret = rdax_read(v, off, buf, SMALL);
				break;
			}
			if (ret)
				die("request in turns", ret);
			if (i >= warm)
				lat[k][i - warm] = now_us() - t0;
		}
	}
	close(fd);
	pthread_join(th, NULL);
	close(s.lfd);
	for (int k = 0; k < T_KINDS; k++) {
		qsort(lat[k], o->iters, sizeof(double), cmp_double);
		t->p50[k] = pct(lat[k], o->iters, 50);
		free(lat[k]);
	}
}

/* turns_table -- each rdax request beside the floor it is aimed at and the one it carries */
static void turns_table(const struct turns *t)
{
	const double *p = t->p50;
	printf("\n%-44s %10s %10s %8s %10s %8s\n", "in turns (one sample each per turn), p50",
	       "rdax (us)", "aim floor", "ratio", "own floor", "ratio");
	printf("%-44s %10s %10.1f %8s %10s %8s\n", "64 B there, 64 B back", "-", p[T_PING64], "1.00",
	       "-", "-");
	printf("%-44s %10s %10.1f %8.2f %10s %8s\n", "4 KiB there, 64 B back", "-", p[T_PING_W4K],
	       p[T_PING_W4K] / p[T_PING64], "-", "-");
	printf("%-44s %10s %10.1f %8.2f %10s %8s\n", "64 B there, 4 KiB back", "-", p[T_PING_R4K],
	       p[T_PING_R4K] / p[T_PING64], "-", "-");
	/* aim floor: 64-byte round trips; own floor: the round trips carrying the same bytes */
	double pair_own = p[T_PING_W4K] + p[T_PING64];
	printf("%-44s %10.1f %10.1f %8.2f %10.1f %8.2f\n", "QD1 4 KiB durable write (1 RPC)",
	       p[T_DURABLE], p[T_PING64], p[T_DURABLE] / p[T_PING64], p[T_PING_W4K],
	       p[T_DURABLE] / p[T_PING_W4K]);
	printf("%-44s %10.1f %10.1f %8.2f %10.1f %8.2f\n", "QD1 4 KiB write + fsync (2 RPCs)",
	       p[T_PAIR], 2 * p[T_PING64], p[T_PAIR] / (2 * p[T_PING64]), pair_own,
	       p[T_PAIR] / pair_own);
	printf("%-44s %10.1f %10.1f %8.2f %10.1f %8.2f\n", "QD1 4 KiB read", p[T_READ], p[T_PING64],
	       p[T_READ] / p[T_PING64], p[T_PING_R4K], p[T_READ] / p[T_PING_R4K]);
	printf("(aim: 1.15x the 64-byte round trips; the own floor's ratio to them is the best any "
	       "server can reach)\n");
}

/* proc_cpu_s -- utime + stime of process @pid so far, seconds (its threads', live and gone) */
static double proc_cpu_s(pid_t pid)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char *ok = fgets(line, sizeof(line), f);
	fclose(f);
	const char *p = ok ? strrchr(line, ')') : NULL;
	unsigned long ut = 0, st = 0;
	/* after the command's ")": state is field 3, utime 14, stime 15 */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/*
 * rq_wait_s -- seconds the threads of @pid (0: this thread) have waited on
 * a run queue, runnable but not running (second field of schedstat)
 */
static double rq_wait_s(pid_t pid)
{
	char path[600];
	unsigned long long run, wait, sum = 0;
	if (pid == 0) {
		FILE *f = fopen("/proc/thread-self/schedstat", "r");
		if (f && fscanf(f, "%llu %llu", &run, &wait) == 2)
			sum = wait;
		if (f)
			fclose(f);
		return (double)sum / 1e9;
	}
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *dir = opendir(path);
	struct dirent *de;
	while (dir && (de = readdir(dir)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", pid, de->d_name);
		FILE *f = fopen(path, "r");
		if (f && fscanf(f, "%llu %llu", &run, &wait) == 2)
			sum += wait;
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	return (double)sum / 1e9;
}

/* thread_cpu_s -- this thread's CPU time so far, seconds */
static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * async_writes -- @qd writes of @bs bytes in flight for o->seconds: ops/s;
 * with @pc, the CPU time of the phase too
 */
static double async_writes(struct rdax_conn *c, struct rdax_volume *v, const struct opts *o,
			   size_t bs, unsigned qd, struct phase_cpu *pc)
{
	double d0 = pc ? proc_cpu_s(o->daemon_pid) : 0, c0 = pc ? thread_cpu_s() : 0;
	double dw0 = pc ? rq_wait_s(o->daemon_pid) : 0, cw0 = pc ? rq_wait_s(0) : 0;
	uint8_t *buf = malloc(bs);
	memset(buf, 0xa5, bs);
	struct rdax_completion comp[64];
	uint64_t done = 0, next = 0, slots = VOL_SIZE / bs;
	double t0 = now_us(), end = t0 + o->seconds * 1e6;
	bool stop = false;
	while (!stop || rdax_inflight(c) > 0) {
		while (!stop && rdax_inflight(c) < qd) {
			uint64_t off =
			    (next++ * 7919 % slots) * bs; /* scattered, no overlap in flight */
			int ret = rdax_submit_write(v, off, buf, bs, 0, next);
			if (ret == -EAGAIN)
				break;
			if (ret)
				die("submit write", ret);
		}
		int n = rdax_wait_completions(c, comp, 64, 1, -1);
		if (n < 0)
			die("wait completions", n);
		for (int i = 0; i < n; i++)
			if (comp[i].status)
				die("async write", comp[i].status);
		done += (uint64_t)n;
		if (!stop && now_us() >= end)
			stop = true;
	}
	double secs = (now_us() - t0) / 1e6;
	if (pc) {
		pc->wall_s = secs;
		pc->daemon_s = proc_cpu_s(o->daemon_pid) - d0;
		pc->client_s = thread_cpu_s() - c0;
		pc->mib = (double)done * (double)bs / (1 << 20);
		pc->daemon_wait_s = rq_wait_s(o->daemon_pid) - dw0;
		pc->client_wait_s = rq_wait_s(0) - cw0;
	}
	free(buf);
	/* leave nothing dirty for the next measurement */
	int ret = rdax_fsync(v, 0, 0, NULL);
	if (ret)
		die("fsync", ret);
	return (double)done / secs;
}

/* measure -- every rdax figure over @c (volume @v) */
static void measure(struct rdax_conn *c, struct rdax_volume *v, const struct opts *o,
		    struct figures *f)
{
	lat_write_fsync(v, o, false, &f->wf50, &f->wf99);
	lat_write_fsync(v, o, true, &f->dw50, &f->dw99);
	f->iops = async_writes(c, v, o, SMALL, 32, NULL);
	f->bw = async_writes(c, v, o, BIG, 8, &f->big) * BIG / (1 << 20);
}

/* tls_table -- TLS beside plain, in the same run */
static void tls_table(const struct figures *p, const struct figures *t, double ip50,
		      double it50)
{
	printf("\n%-44s %14s %14s %9s\n", "rdaxs:// (TLS, PSK) beside tcp://", "TLS", "plain",
	       "TLS/plain");
	printf("%-44s %14.1f %14.1f %9.2f\n", "QD1 4 KiB write + fsync (2 RPCs) p50 (us)", t->wf50,
	       p->wf50, t->wf50 / p->wf50);
	printf("%-44s %14.1f %14.1f %9.2f\n", "QD1 4 KiB durable write (1 RPC) p50 (us)", t->dw50,
	       p->dw50, t->dw50 / p->dw50);
	printf("%-44s %14.1f %14.1f %9.2f\n", "QD1 4 KiB durable write (1 RPC) p99 (us)", t->dw99,
	       p->dw99, t->dw99 / p->dw99);
	printf("%-44s %14.1f %14.1f %9.2f\n", "  the same p50, plain and TLS in turns (us)", it50,
	       ip50, it50 / ip50);
	printf("%-44s %14.0f %14.0f %9.2f\n", "QD32 4 KiB writes (IOPS)", t->iops, p->iops,
	       t->iops / p->iops);
	printf("%-44s %14.0f %14.0f %9.2f\n", "QD8 1 MiB writes (MiB/s)", t->bw, p->bw,
	       t->bw / p->bw);
}

/* --- the ceiling of TLS's 1 MiB throughput ------------------------------- */

struct cipher_run {
	int cpu;
	bool decrypt;
	double ms_per_mib; /* CPU time of AES-128-GCM over 16 KiB records; < 0: failed */
};

/*
 * cipher_cost -- on @arg's CPU: AES-128-GCM encryption, or decryption with
 * its tag check, of 16 KiB records (GnuTLS's AEAD API, the code GnuTLS's
 * records use), this thread's CPU time per MiB of plaintext. One record
 * over and over: it stays in cache, so this is the cipher's best case.
 */
static void *cipher_cost(void *arg)
{
	struct cipher_run *r = arg;
	r->ms_per_mib = -1;
	if (pin_self(r->cpu))
		return NULL;
	static const uint8_t k[16] = {7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
	gnutls_datum_t key = {(unsigned char *)k, sizeof(k)};
	gnutls_aead_cipher_hd_t h;
	if (gnutls_aead_cipher_init(&h, GNUTLS_CIPHER_AES_128_GCM, &key) < 0)
		return NULL;
	enum { REC = 16384, TAG = 16 };
	uint8_t nonce[12] = {0}, aad[5] = {23, 3, 3, 0x40, 0x11};
	uint8_t *pt = calloc(1, REC + TAG), *ct = malloc(REC + TAG);
	size_t clen = REC + TAG;
	if (!pt || !ct ||
	    gnutls_aead_cipher_encrypt(h, nonce, sizeof(nonce), aad, sizeof(aad), TAG, pt, REC, ct,
				       &clen) < 0)
		goto out;
	unsigned long records = 0;
	double t0 = thread_cpu_s(), t;
	do {
		for (int i = 0; i < 64; i++, records++) {
			size_t len = REC + TAG;
			int g =
			    r->decrypt
				? gnutls_aead_cipher_decrypt(h, nonce, sizeof(nonce), aad,
							     sizeof(aad), TAG, ct, clen, pt, &len)
				: gnutls_aead_cipher_encrypt(h, nonce, sizeof(nonce), aad,
							     sizeof(aad), TAG, pt, REC, ct, &len);
			if (g < 0)
				goto out;
		}
		t = thread_cpu_s() - t0;
	} while (t < 0.3);
	r->ms_per_mib = t * 1e3 / ((double)records * REC / (1 << 20));
out:
	free(pt);
	free(ct);
	gnutls_aead_cipher_deinit(h);
	return NULL;
}

/* cipher_on -- cipher_cost on a thread pinned to @cpu: ms per MiB, < 0 if it failed */
static double cipher_on(int cpu, bool decrypt)
{
	struct cipher_run r = {.cpu = cpu, .decrypt = decrypt};
	pthread_t th;
	if (pthread_create(&th, NULL, cipher_cost, &r))
		return -1;
	pthread_join(th, NULL);
	return r.ms_per_mib;
}

/*
 * tls_ceiling -- the most 1 MiB throughput TLS could give on this machine,
 * from this run's plain 1 MiB phase (@p) and the cipher's cost, beside
 * what TLS gave (@t).
 *
 * What it assumes: each side is pinned to one CPU (the daemon's threads all
 * to one, the client's one thread to the other), so each side's work per
 * MiB is done one piece after another on its CPU, and no side can spend
 * more than one CPU-second per second. Over TLS each side does at least
 * what it did per MiB on the plain path (the same requests, replies and
 * payload bytes through the same sockets, the same copy into the volume's
 * mapping -- GnuTLS's instead of the kernel's) plus one AES-128-GCM pass
 * over every byte: the client encrypts, the daemon decrypts and checks the
 * tag (the handful of record headers and the ciphertext's extra 22 bytes
 * per 16 KiB record are left out: they only add work). The two sides run
 * at the same time on different CPUs, so their costs are not added: the
 * side with more CPU per MiB bounds the rate, 1000 / max(daemon, client)
 * MiB/s. Every term is a lower bound on work -- the cipher is timed on a
 * record in cache, softirq time not charged to either process is left
 * out -- so the ceiling is an upper bound on the rate, reached only by a
 * side that has its whole CPU and does nothing TLS does not need.
 */
static void tls_ceiling(const struct opts *o, const struct figures *p, const struct figures *t)
{
	double dec = cipher_on(o->daemon_cpu, true), enc = cipher_on(o->client_cpu, false);
	const struct phase_cpu *pp = &p->big, *tp = &t->big;
	if (dec < 0 || enc < 0 || pp->mib <= 0 || tp->mib <= 0) {
		printf("\nTLS ceiling: not measured (AES-128-GCM or the 1 MiB phase failed)\n");
		return;
	}
	double d_plain = pp->daemon_s * 1e3 / pp->mib, c_plain = pp->client_s * 1e3 / pp->mib;
	double d_tls = tp->daemon_s * 1e3 / tp->mib, c_tls = tp->client_s * 1e3 / tp->mib;
	double d_bound = d_plain + dec, c_bound = c_plain + enc;
	double worst = d_bound > c_bound ? d_bound : c_bound;
	double ceiling = 1e3 / worst;
	printf("\n%-44s %14s %14s\n", "QD8 1 MiB writes: CPU per MiB (ms)", "daemon", "client");
	printf("%-44s %14.3f %14.3f\n", "plain phase", d_plain, c_plain);
	printf("%-44s %14.3f %14.3f\n", "AES-128-GCM, 16 KiB records (dec / enc)", dec, enc);
	printf("%-44s %14.3f %14.3f\n", "TLS at least (plain + cipher)", d_bound, c_bound);
	printf("%-44s %14.3f %14.3f\n", "TLS phase, measured", d_tls, c_tls);
	printf("%-44s %14.2f %14.2f\n", "TLS measured / TLS at least", d_tls / d_bound,
	       c_tls / c_bound);
	printf("%-44s %14.2f %14.2f\n", "share of its CPU used: plain phase",
	       pp->daemon_s / pp->wall_s, pp->client_s / pp->wall_s);
	printf("%-44s %14.2f %14.2f\n", "share of its CPU used: TLS phase",
	       tp->daemon_s / tp->wall_s, tp->client_s / tp->wall_s);
	printf("%-44s %14.2f %14.2f\n", "share waiting for its CPU: plain phase",
	       pp->daemon_wait_s / pp->wall_s, pp->client_wait_s / pp->wall_s);
	printf("%-44s %14.2f %14.2f\n", "share waiting for its CPU: TLS phase",
	       tp->daemon_wait_s / tp->wall_s, tp->client_wait_s / tp->wall_s);
	printf("TLS ceiling (one whole CPU each side, bound by the %s): %.0f MiB/s = %.2f of plain "
	       "(%.0f MiB/s); TLS gave %.0f MiB/s = %.2f of the ceiling\n",
	       d_bound >= c_bound ? "daemon" : "client", ceiling, ceiling / p->bw, p->bw, t->bw,
	       t->bw / ceiling);
}

/* connect_tls -- a second connection to @d over rdaxs:// with the run's PSK, and its volume */
static void connect_tls(const struct hx_daemon *d, const char *psk, struct rdax_conn **c,
			struct rdax_volume **v)
{
	struct rdax_conn_opts *co;
	rdax_conn_opts_new(&co);
	rdax_conn_opts_set_queue_depth(co, 64);
	rdax_conn_opts_set_tls_psk(co, psk, NULL);
	char url[96];
	snprintf(url, sizeof(url), "rdaxs://127.0.0.1:%d", d->port);
	int ret = rdax_connect(url, co, c);
	rdax_conn_opts_delete(&co);
	if (ret) {
		fprintf(stderr, "bench_tcp: %s\n", rdax_connect_last_error());
		die("connect rdaxs://", ret);
	}
	if ((ret = rdax_volume_open(*c, "bench", v)))
		die("volume over TLS", ret);
}

/* daemon_cpus -- the CPUs the daemon's threads last ran on, as a list "1" or "0,1" */
static void daemon_cpus(pid_t pid, char *out, size_t len)
{
	char path[64];
	unsigned long seen = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *dir = opendir(path);
	struct dirent *de;
	unsigned threads = 0;
	while (dir && (de = readdir(dir)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		char sp[600], line[1024];
		snprintf(sp, sizeof(sp), "%s/%s/stat", path, de->d_name);
		FILE *f = fopen(sp, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f)) {
			/* field 39 (processor), counted after the ")" that ends the name */
			char *p = strrchr(line, ')');
			int field = 2, cpu = -1;
			char *save = NULL;
			for (char *t = strtok_r(p ? p + 1 : line, " ", &save); t;
			     t = strtok_r(NULL, " ", &save)) {
				if (++field == 39) {
					cpu = atoi(t);
					break;
				}
			}
			if (cpu >= 0 && cpu < 64)
				seen |= 1UL << cpu;
		}
		fclose(f);
		threads++;
	}
	if (dir)
		closedir(dir);
	size_t o = (size_t)snprintf(out, len, "%u threads, on CPU", threads);
	for (int cpu = 0; cpu < 64 && o < len; cpu++)
		if (seen & (1UL << cpu))
			o += (size_t)snprintf(out + o, len - o, " %d", cpu);
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_tcp [--mode sim|auto] [--iters N] [--seconds S] "
			"[--threads N] [--client-cpu C] [--daemon-cpu D] [--dir DIR] [--tls]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"mode", required_argument, NULL, 'm'},
	    {"iters", required_argument, NULL, 'i'},
	    {"seconds", required_argument, NULL, 's'},
	    {"threads", required_argument, NULL, 't'},
	    {"client-cpu", required_argument, NULL, 'c'},
	    {"daemon-cpu", required_argument, NULL, 'd'},
	    {"dir", required_argument, NULL, 'D'},
	    {"tls", no_argument, NULL, 'T'},
	    {NULL, 0, NULL, 0},
	};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct opts o = {.mode = "sim",
			 .iters = 5000,
			 .seconds = 3,
			 .threads = 1,
			 .client_cpu = 0,
			 .daemon_cpu = ncpu > 1 ? 1 : 0};
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'm':
			o.mode = optarg;
			break;
		case 'i':
			o.iters = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 's':
			o.seconds = atof(optarg);
			break;
		case 't':
			o.threads = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'c':
			o.client_cpu = atoi(optarg);
			break;
		case 'd':
			o.daemon_cpu = atoi(optarg);
			break;
		case 'D':
			o.dir = optarg;
			break;
		case 'T':
			o.tls = true;
			break;
		default:
			usage();
		}
	}
	if ((strcmp(o.mode, "sim") && strcmp(o.mode, "auto")) || o.iters < 10 || o.seconds <= 0 ||
	    o.threads == 0 || o.client_cpu < 0 || o.daemon_cpu < 0 || o.client_cpu >= ncpu ||
	    o.daemon_cpu >= ncpu)
		usage();

	char dir[256];
	int ret = o.dir ? (snprintf(dir, sizeof(dir), "%s", o.dir), 0)
			: hx_tmpdir_make("bench", dir, sizeof(dir));
	if (ret)
		die("temporary directory", ret);
	if (pin_self(o.client_cpu))
		fprintf(stderr, "bench_tcp: cannot pin the client to CPU %d\n", o.client_cpu);
	struct hx_daemon d;
	struct hx_daemon_opts dopts = {
	    .ns_size = "1G", .mode = o.mode, .threads = o.threads, .cpu_mask = 1UL << o.daemon_cpu};
	char psk[320];
	if (o.tls) {
		/* a key for this run: 32 bytes of a splitmix64 stream seeded by the clock */
		uint64_t seed = (uint64_t)hx_now_ms();
		char line[128];
		int n = snprintf(line, sizeof(line), "bench:");
		for (int i = 0; i < 4; i++)
			n += snprintf(line + n, sizeof(line) - (size_t)n, "%016llx",
				      (unsigned long long)hx_splitmix64(&seed));
		line[n++] = '\n';
		snprintf(psk, sizeof(psk), "%s/bench.psk", dir);
		if ((ret = hx_write_file(psk, line, (size_t)n)))
			die("psk file", ret);
		dopts.extra_args[0] = "--tls";
		dopts.extra_args[1] = "on";
		dopts.extra_args[2] = "--tls-psk";
		dopts.extra_args[3] = psk;
	}
	if (hx_daemon_start(&d, dir, &dopts) != 0) {
		fprintf(stderr, "bench_tcp: rdaxd did not start\n");
		return 1;
	}
	o.daemon_pid = d.pid;
	struct rdax_conn_opts *co;
	rdax_conn_opts_new(&co);
	rdax_conn_opts_set_queue_depth(co, 64);
	struct rdax_conn *conn;
	if ((ret = rdax_connect(d.url, co, &conn)))
		die("connect", ret);
	rdax_conn_opts_delete(&co);
	struct rdax_volume *v;
	if ((ret = rdax_volume_create(conn, "bench", VOL_SIZE, RDAX_NAMESPACE_ANY)) ||
	    (ret = rdax_volume_open(conn, "bench", &v)))
		die("volume", ret);
	/* touch the whole volume once so no measurement pays first-touch page faults */
	uint8_t *fill = calloc(1, BIG);
	for (uint64_t off = 0; off < VOL_SIZE; off += BIG)
		if ((ret = rdax_write(v, off, fill, BIG, 0)))
			die("prefill", ret);
	free(fill);
	if ((ret = rdax_fsync(v, 0, 0, NULL)))
		die("prefill fsync", ret);

	double f50, f99, frate;
	floor_pingpong(&o, &f50, &f99, &frate);
	double fbw = floor_stream(&o);

	struct figures pf, tf;
	double inter_plain50 = 0, inter_tls50 = 0;
	measure(conn, v, &o, &pf);
	struct turns turns;
	lat_turns(v, &o, &turns);
	double wf50 = pf.wf50, wf99 = pf.wf99, dw50 = pf.dw50, dw99 = pf.dw99;
	double iops = pf.iops, bw = pf.bw;
	if (o.tls) {
		struct rdax_conn *tc;
		struct rdax_volume *tv;
		connect_tls(&d, psk, &tc, &tv);
		measure(tc, tv, &o, &tf);
		lat_durable_interleaved(v, tv, &o, &inter_plain50, &inter_tls50);
		rdax_volume_close(&tv);
		rdax_disconnect(&tc);
	}

	char where[256];
	daemon_cpus(d.pid, where, sizeof(where));
	int ccpu = sched_getcpu();

	printf("bench_tcp: rdaxd in %s mode on a 1 GiB file namespace (%s), --threads %u, "
	       "TCP loopback, volume of %llu MiB\n",
	       o.mode,
	       strcmp(o.mode, "sim") == 0 ? "flush = pwrite of the lines into the page cache"
	       : getenv("PMEM_IS_PMEM_FORCE") && strcmp(getenv("PMEM_IS_PMEM_FORCE"), "1") == 0
		   ? "libpmem told the file is PMEM: CLWB + SFENCE of the lines"
		   : "libpmem on a plain file: msync",
	       o.threads, (unsigned long long)(VOL_SIZE >> 20));
	printf("bench_tcp: client pinned to CPU %d (running on CPU %d); daemon pinned to CPU %d "
	       "(%s); floor server thread pinned to CPU %d\n",
	       o.client_cpu, ccpu, o.daemon_cpu, where, o.daemon_cpu);
	printf("bench_tcp: %u samples per latency, %.1f s per throughput figure; one run, "
	       "no pass/fail\n\n",
	       o.iters, o.seconds);
	printf("%-44s %14s %14s %9s\n", "measurement", "rdax", "TCP floor", "ratio");
	printf("%-44s %14s %14.1f %9s\n", "64 B ping-pong round trip p50 (us)", "-", f50, "1.00");
	printf("%-44s %14s %14.1f %9s\n", "64 B ping-pong round trip p99 (us)", "-", f99, "1.00");
	printf("%-44s %14.1f %14.1f %9.2f\n", "QD1 4 KiB write + fsync (2 RPCs) p50 (us)", wf50,
	       f50, wf50 / f50);
	printf("%-44s %14.1f %14.1f %9.2f\n", "QD1 4 KiB write + fsync (2 RPCs) p99 (us)", wf99,
	       f99, wf99 / f99);
	printf("%-44s %14.1f %14.1f %9.2f\n", "QD1 4 KiB durable write (1 RPC) p50 (us)", dw50, f50,
	       dw50 / f50);
	printf("%-44s %14.1f %14.1f %9.2f\n", "QD1 4 KiB durable write (1 RPC) p99 (us)", dw99, f99,
	       dw99 / f99);
	printf("%-44s %14.0f %14.0f %9.2f\n", "QD32 4 KiB writes (IOPS; floor: QD1 pings/s)", iops,
	       frate, iops / frate);
	printf("%-44s %14.0f %14.0f %9.2f\n", "QD8 1 MiB writes (MiB/s; floor: 1 MiB stream)", bw,
	       fbw, bw / fbw);
	turns_table(&turns);
	if (o.tls) {
		tls_table(&pf, &tf, inter_plain50, inter_tls50);
		tls_ceiling(&o, &pf, &tf);
	}

	rdax_volume_close(&v);
	rdax_disconnect(&conn);
	ret = hx_daemon_stop(&d);
	if (!o.dir)
		hx_tmpdir_remove(dir);
	return ret == 0 ? 0 : 1;
}
