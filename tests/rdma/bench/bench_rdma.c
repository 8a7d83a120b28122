/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_rdma.c -- rdax over rdma:// as the application sees it (librdax)
 *
 *   bench_rdma --url rdma://ADDR:PORT [--lat-iters N] [--bw-mib M] [--depth D]
 *
 * Measures, on a fresh volume:
 *  - 4 KiB write + fsync: rdax_write(RDAX_WRITE_FSYNC) of one page, i.e. a
 *    one-sided WRITE_WITH_IMM followed by the FSYNC request and its reply,
 *    one at a time (latency: median and mean, microseconds);
 *  - 4 KiB one-sided write alone (rdax_write without fsync);
 *  - the parts of a write+fsync: a STAT request (a SEND and its reply,
 *    answered on the daemon's event loop) and an fsync of a clean page (the
 *    same plus the daemon's fsync path with nothing to write back);
 *  - 64 KiB write bandwidth: D asynchronous one-sided writes in flight, M MiB
 *    in all, then one fsync (MiB/s, the fsync included);
 *  - the write+fsync and the STAT again on a connection that busy-polls
 *    (rdax_conn_opts_set_busy_poll): what the client's sleep and wake-up
 *    cost, since perftest polls. --only-poll: only these (run.sh's second
 *    daemon, whose loops busy-poll too).
 * Prints "name value" lines for tests/rdma/run-bench.sh, which runs perftest
 * beside it in the same VM boot and prints the ratios. Under emulation
 * (soft-RoCE in a TCG VM) only such ratios mean anything.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "librdax.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* report -- median and mean of @n samples */
static void report(const char *name, double *s, unsigned n)
{
	double sum = 0;
	for (unsigned i = 0; i < n; i++)
		sum += s[i];
	qsort(s, n, sizeof(*s), cmp_double);
	printf("%s_median_us %.1f\n%s_mean_us %.1f\n", name, s[n / 2], name, sum / n);
}

static int die(const char *what, int ret, struct rdax_conn *c)
{
	fprintf(stderr, "bench_rdma: %s: %s (%s)\n", what, rdax_strerror(ret),
		c ? rdax_conn_last_error(c) : rdax_connect_last_error());
	return 1;
}

enum lat_op { LAT_WRITE_FSYNC, LAT_WRITE, LAT_STAT, LAT_FSYNC_CLEAN };

/* latency -- @iters timed operations of kind @op on @v, reported as @name; 0 or 1 */
static int latency(struct rdax_conn *c, struct rdax_volume *v, enum lat_op op, const char *name,
		   double *s, unsigned iters)
{
	static uint8_t page[4096];
	memset(page, 0xa5, sizeof(page));
	struct rdax_volume_stat st;
	for (unsigned i = 0; i < iters; i++) {
		uint64_t off = (uint64_t)(i % 4096) * 4096;
		double t0 = now_us();
		int ret;
		switch (op) {
		case LAT_WRITE_FSYNC:
			ret = rdax_write(v, off, page, sizeof(page), RDAX_WRITE_FSYNC);
			break;
		case LAT_WRITE:
			ret = rdax_write(v, off, page, sizeof(page), 0);
			break;
		case LAT_STAT:
			ret = rdax_stat(v, &st);
			break;
		default:
			ret = rdax_fsync(v, 0, 4096, NULL);
			break;
		}
		s[i] = now_us() - t0;
		if (ret)
			return die(name, ret, c);
	}
	report(name, s, iters);
	return 0;
}

/* bandwidth -- @total bytes of 64 KiB one-sided writes, @depth in flight, then an fsync */
static int bandwidth(struct rdax_conn *c, struct rdax_volume *v, uint64_t size, uint64_t total,
		     unsigned depth)
{
	enum { BS = 65536 };
	uint8_t *buf = malloc((size_t)depth * BS);
	if (!buf)
		return 1;
	memset(buf, 0x3c, (size_t)depth * BS);
	uint64_t submitted = 0, done = 0;
	int ret = 0;
	double t0 = now_us();
	while (done < total) {
		while (submitted < total && rdax_inflight(c) < depth) {
			unsigned slot = (unsigned)((submitted / BS) % depth);
			ret = rdax_submit_write(v, submitted % size, buf + (size_t)slot * BS, BS, 0,
						submitted);
			if (ret)
				goto out;
			submitted += BS;
		}
		struct rdax_completion comp[64];
		int n = rdax_wait_completions(c, comp, 64, 1, -1);
		if (n < 0) {
			ret = n;
			goto out;
		}
		for (int i = 0; i < n; i++) {
			if ((ret = comp[i].status))
				goto out;
			done += BS;
		}
	}
	if ((ret = rdax_fsync(v, 0, 0, NULL)))
		goto out;
	double secs = (now_us() - t0) / 1e6;
	/* MiB/s: perftest's "MB/sec" are 2^20 bytes */
	printf("rdax_write_64k_bw_MiBps %.1f\n", total / secs / 1048576.0);
out:
	free(buf);
	return ret ? die("bandwidth", ret, c) : 0;
}

/* open_bench -- connect (@busy_poll_us as rdax_conn_opts_set_busy_poll) and open "bench" */
static int open_bench(const char *url, unsigned busy_poll_us, uint64_t create_size,
		      struct rdax_conn **c, struct rdax_volume **v)
{
	struct rdax_conn_opts *o;
	if (rdax_conn_opts_new(&o) || rdax_conn_opts_set_busy_poll(o, busy_poll_us))
		return 1;
	int ret = rdax_connect(url, o, c);
	rdax_conn_opts_delete(&o);
	if (ret)
		return die("connect", ret, NULL);
	if (create_size) {
		rdax_volume_delete(*c, "bench");
		if ((ret = rdax_volume_create(*c, "bench", create_size, RDAX_NAMESPACE_ANY)))
			return die("volume create", ret, *c);
	}
	if ((ret = rdax_volume_open(*c, "bench", v)))
		return die("volume open", ret, *c);
	/* warm-up: first touches of pages and of the path */
	static uint8_t page[4096];
	for (unsigned i = 0; i < 20; i++)
		rdax_write(*v, (uint64_t)i * 4096, page, sizeof(page), RDAX_WRITE_FSYNC);
	return 0;
}

int main(int argc, char **argv)
{
	const char *url = NULL;
	unsigned iters = 200, bw_mib = 64, depth = 16;
	bool only_poll = false;
	static const struct option opts[] = {
	    {"url", required_argument, NULL, 'u'},    {"lat-iters", required_argument, NULL, 'n'},
	    {"bw-mib", required_argument, NULL, 'b'}, {"depth", required_argument, NULL, 'd'},
	    {"only-poll", no_argument, NULL, 'p'},    {NULL, 0, NULL, 0}};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'u':
			url = optarg;
			break;
		case 'n':
			iters = (unsigned)atoi(optarg);
			break;
		case 'b':
			bw_mib = (unsigned)atoi(optarg);
			break;
		case 'd':
			depth = (unsigned)atoi(optarg);
			break;
		case 'p':
			only_poll = true;
			break;
		default:
			return 2;
		}
	}
	if (!url || iters == 0 || bw_mib == 0 || depth == 0 || depth > 64) {
		fprintf(stderr, "usage: bench_rdma --url rdma://ADDR:PORT [--lat-iters N] "
				"[--bw-mib M] [--depth D<=64] [--only-poll]\n");
		return 2;
	}
	double *s = calloc(iters, sizeof(*s));
	if (!s)
		return 1;
	uint64_t size = (uint64_t)bw_mib << 20;
	if (size < (64ULL << 20))
		size = 64ULL << 20;
	struct rdax_conn *c;
	struct rdax_volume *v;
	if (!only_poll) {
		if (open_bench(url, 0, size, &c, &v) ||
		    latency(c, v, LAT_WRITE_FSYNC, "rdax_write_fsync_4k", s, iters) ||
		    latency(c, v, LAT_WRITE, "rdax_write_4k", s, iters) ||
		    latency(c, v, LAT_STAT, "rdax_stat_rpc", s, iters) ||
		    latency(c, v, LAT_FSYNC_CLEAN, "rdax_fsync_clean", s, iters) ||
		    bandwidth(c, v, size, (uint64_t)bw_mib << 20, depth))
			return 1;
		rdax_volume_close(&v);
		rdax_disconnect(&c);
	}
	/* the latencies again with a client that spins instead of sleeping */
	if (open_bench(url, 20000, only_poll ? size : 0, &c, &v) ||
	    latency(c, v, LAT_WRITE_FSYNC, "rdax_write_fsync_4k_poll", s, iters) ||
	    latency(c, v, LAT_STAT, "rdax_stat_rpc_poll", s, iters))
		return 1;
	rdax_volume_close(&v);
	rdax_volume_delete(c, "bench");
	rdax_disconnect(&c);
	free(s);
	return 0;
}
