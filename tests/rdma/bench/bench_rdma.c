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
 *    cost, since perftest polls.
 * Prints "name value" lines for tests/rdma/run-bench.sh, which runs perftest
 * beside it in the same VM boot and prints the ratios. Under emulation
 * (soft-RoCE in a TCG VM) only such ratios mean anything.
 */
#include <errno.h>
#include <getopt.h>
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

int main(int argc, char **argv)
{
	const char *url = NULL;
	unsigned iters = 200, bw_mib = 64, depth = 16;
	static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
					     {"lat-iters", required_argument, NULL, 'n'},
					     {"bw-mib", required_argument, NULL, 'b'},
					     {"depth", required_argument, NULL, 'd'},
					     {NULL, 0, NULL, 0}};
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
		default:
			return 2;
		}
	}
	if (!url || iters == 0 || bw_mib == 0 || depth == 0 || depth > 64) {
		fprintf(stderr, "usage: bench_rdma --url rdma://ADDR:PORT [--lat-iters N] "
				"[--bw-mib M] [--depth D<=64]\n");
		return 2;
	}
	struct rdax_conn *c;
	struct rdax_volume *v;
	int ret = rdax_connect(url, NULL, &c);
	if (ret)
		return die("connect", ret, NULL);
	uint64_t size = (uint64_t)bw_mib << 20;
	if (size < (64ULL << 20))
		size = 64ULL << 20;
	rdax_volume_delete(c, "bench");
	if ((ret = rdax_volume_create(c, "bench", size, RDAX_NAMESPACE_ANY)) ||
	    (ret = rdax_volume_open(c, "bench", &v)))
		return die("volume", ret, c);

	static uint8_t page[4096];
	memset(page, 0xa5, sizeof(page));
	double *s = calloc(iters, sizeof(*s));
	if (!s)
		return 1;
	/* warm-up: first touches of pages and of the path */
	for (unsigned i = 0; i < 20; i++)
		rdax_write(v, (uint64_t)i * 4096, page, sizeof(page), RDAX_WRITE_FSYNC);

	for (unsigned i = 0; i < iters; i++) {
		double t0 = now_us();
		ret = rdax_write(v, (uint64_t)(i % 4096) * 4096, page, sizeof(page),
				 RDAX_WRITE_FSYNC);
		s[i] = now_us() - t0;
		if (ret)
			return die("write+fsync", ret, c);
	}
	report("rdax_write_fsync_4k", s, iters);

	for (unsigned i = 0; i < iters; i++) {
		double t0 = now_us();
		ret = rdax_write(v, (uint64_t)(i % 4096) * 4096, page, sizeof(page), 0);
		s[i] = now_us() - t0;
		if (ret)
			return die("write", ret, c);
	}
	report("rdax_write_4k", s, iters);
	if ((ret = rdax_fsync(v, 0, 0, NULL)))
		return die("fsync", ret, c);

	struct rdax_volume_stat st;
	for (unsigned i = 0; i < iters; i++) {
		double t0 = now_us();
		ret = rdax_stat(v, &st);
		s[i] = now_us() - t0;
		if (ret)
			return die("stat", ret, c);
	}
	report("rdax_stat_rpc", s, iters);

	for (unsigned i = 0; i < iters; i++) {
		double t0 = now_us();
		ret = rdax_fsync(v, 0, 4096, NULL);
		s[i] = now_us() - t0;
		if (ret)
			return die("clean fsync", ret, c);
	}
	report("rdax_fsync_clean", s, iters);

	/* bandwidth: 64 KiB writes, depth in flight */
	enum { BS = 65536 };
	uint8_t *buf = malloc((size_t)depth * BS);
	if (!buf)
		return 1;
	memset(buf, 0x3c, (size_t)depth * BS);
	uint64_t total = (uint64_t)bw_mib << 20, submitted = 0, done = 0;
	double t0 = now_us();
	while (done < total) {
		while (submitted < total && rdax_inflight(c) < depth) {
			unsigned slot = (unsigned)((submitted / BS) % depth);
			ret = rdax_submit_write(v, submitted % size, buf + (size_t)slot * BS, BS, 0,
						submitted);
			if (ret)
				return die("submit", ret, c);
			submitted += BS;
		}
		struct rdax_completion comp[64];
		int n = rdax_wait_completions(c, comp, 64, 1, -1);
		if (n < 0)
			return die("wait", n, c);
		for (int i = 0; i < n; i++) {
			if (comp[i].status)
				return die("async write", comp[i].status, c);
			done += BS;
		}
	}
	if ((ret = rdax_fsync(v, 0, 0, NULL)))
		return die("fsync", ret, c);
	double secs = (now_us() - t0) / 1e6;
	/* MiB/s: perftest's "MB/sec" are 2^20 bytes */
	printf("rdax_write_64k_bw_MiBps %.1f\n", total / secs / 1048576.0);

	/* the same latencies with a client that spins instead of sleeping */
	struct rdax_conn_opts *po;
	struct rdax_conn *pc;
	struct rdax_volume *pv;
	if (rdax_conn_opts_new(&po) || rdax_conn_opts_set_busy_poll(po, 20000))
		return 1;
	if ((ret = rdax_connect(url, po, &pc)))
		return die("connect (busy poll)", ret, NULL);
	rdax_conn_opts_delete(&po);
	if ((ret = rdax_volume_open(pc, "bench", &pv)))
		return die("volume (busy poll)", ret, pc);
	for (unsigned i = 0; i < iters; i++) {
		double t1 = now_us();
		ret = rdax_write(pv, (uint64_t)(i % 4096) * 4096, page, sizeof(page),
				 RDAX_WRITE_FSYNC);
		s[i] = now_us() - t1;
		if (ret)
			return die("write+fsync (busy poll)", ret, pc);
	}
	report("rdax_write_fsync_4k_poll", s, iters);
	for (unsigned i = 0; i < iters; i++) {
		double t1 = now_us();
		ret = rdax_stat(pv, &st);
		s[i] = now_us() - t1;
		if (ret)
			return die("stat (busy poll)", ret, pc);
	}
	report("rdax_stat_rpc_poll", s, iters);
	rdax_volume_close(&pv);
	rdax_disconnect(&pc);

	free(buf);
	free(s);
	rdax_volume_close(&v);
	rdax_volume_delete(c, "bench");
	rdax_disconnect(&c);
	return 0;
}
