/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_rdma.c -- rdax over rdma:// as the application sees it (librdax)
 *
 *   bench_rdma --url rdma://ADDR:PORT [--lat-iters N] [--bw-mib M] [--depth D]
 *              [--busy-poll USEC] [--tag NAME] [--daemon-pid PID] [--latency-only]
 *              [--bandwidth-only] [--keep-volume] [--reuse] [--registered]
 *
 * Measures, on a fresh volume:
 *  - 4 KiB write + fsync: rdax_write(RDAX_WRITE_FSYNC) of one page, i.e. a
 *    one-sided WRITE_WITH_IMM whose notice is durable and the daemon's
 *    FSYNC reply (with a daemon that does not offer durable notices, the
 *    write, an FSYNC request and its reply), one at a time (latency:
 *    median and mean, microseconds);
 *  - 4 KiB one-sided write alone (rdax_write without fsync);
 *  - the parts of a write+fsync: a STAT request (a SEND and its reply,
 *    answered on the daemon's event loop) and an fsync of a clean page (the
 *    same plus the daemon's fsync path with nothing to write back);
 *  - 64 KiB write bandwidth: D asynchronous one-sided writes in flight, M MiB
 *    in all (MiB/s until the last completion), then one fsync (MiB/s with
 *    the fsync included: durable bandwidth).
 * With each latency, what it cost in CPU: the client's own CPU time per
 * operation (getrusage) and, given --daemon-pid, the daemon's (its utime +
 * stime from /proc), and each as a share of the elapsed time -- what
 * polling instead of sleeping costs.
 * --busy-poll USEC: the client's spin cap (rdax_conn_opts_set_busy_poll;
 * without it the library's default, adaptive polling); --tag NAME is
 * appended to every name ("rdax_write_fsync_4k_NAME_median_us");
 * --latency-only skips the write-alone latency and the bandwidth;
 * --bandwidth-only measures the bandwidth alone (run-bench.sh takes it in
 * turns with ib_write_bw).
 * --registered writes the bandwidth's data from rdax_buffer_alloc's memory,
 * registered once: no copy through librdax's bounce ring (as perftest sends
 * from its registered buffer).
 * --keep-volume leaves the volume "bench" behind; --reuse opens it instead of
 * creating it: a profile of the daemon then sees no volume creation (which
 * zeroes the whole volume on a registered namespace).
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
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "librdax.h"
#include "spin_window.h"
#include "wake_cost.h"

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

static const char *tag = ""; /* "_NAME" of --tag */
static int daemon_pid;	     /* --daemon-pid; 0: the daemon's CPU is not measured */

/* self_cpu_us -- this process's user + system CPU time, microseconds */
static double self_cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 +
	       ru.ru_stime.tv_usec;
}

/* daemon_cpu_us -- the daemon's utime + stime (fields 14 and 15 of /proc/PID/stat); -1: unknown */
static double daemon_cpu_us(void)
{
	if (!daemon_pid)
		return -1;
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", daemon_pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the name may hold spaces */
	unsigned long long ut, st;
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

/* report -- median and mean of @n samples */
static void report(const char *name, double *s, unsigned n)
{
	double sum = 0;
	for (unsigned i = 0; i < n; i++)
		sum += s[i];
	qsort(s, n, sizeof(*s), cmp_double);
	printf("%s%s_median_us %.1f\n%s%s_mean_us %.1f\n", name, tag, s[n / 2], name, tag, sum / n);
}

/* report_cpu -- CPU per operation of the client and the daemon over @wall us of @n operations */
static void report_cpu(const char *name, double client, double daemon, double wall, unsigned n)
{
	printf("%s%s_client_cpu_us %.1f\n%s%s_client_cpu_share %.2f\n", name, tag, client / n, name,
	       tag, client / wall);
	if (daemon >= 0)
		printf("%s%s_daemon_cpu_us %.1f\n%s%s_daemon_cpu_share %.2f\n", name, tag,
		       daemon / n, name, tag, daemon / wall);
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
	double w0 = now_us(), c0 = self_cpu_us(), d0 = daemon_cpu_us();
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
	double d1 = daemon_cpu_us();
	report_cpu(name, self_cpu_us() - c0, d0 >= 0 && d1 >= 0 ? d1 - d0 : -1, now_us() - w0,
		   iters);
	report(name, s, iters);
	return 0;
}

/*
 * bandwidth -- @total bytes of 64 KiB one-sided writes, @depth in flight,
 * then an fsync: MiB/s of the writes until their last completion (what
 * ib_write_bw measures), and with the fsync that makes them durable
 */
static int bandwidth(struct rdax_conn *c, struct rdax_volume *v, uint64_t size, uint64_t total,
		     unsigned depth, bool registered)
{
	enum { BS = 65536 };
	uint8_t *buf = NULL;
	int ret = 0;
	if (registered) {
		void *p;
		if ((ret = rdax_buffer_alloc(c, (size_t)depth * BS, &p)))
			return die("rdax_buffer_alloc", ret, c);
		buf = p;
	} else if (!(buf = malloc((size_t)depth * BS))) {
		return 1;
	}
	memset(buf, 0x3c, (size_t)depth * BS);
	uint64_t submitted = 0, done = 0;
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
	/* the writes alone, as ib_write_bw times them: until the last completion */
	double secs = (now_us() - t0) / 1e6;
	if ((ret = rdax_fsync(v, 0, 0, NULL)))
		goto out;
	double durable_secs = (now_us() - t0) / 1e6;
	/* MiB/s: perftest's "MB/sec" are 2^20 bytes */
	printf("rdax_write_64k_bw%s_MiBps %.1f\n", tag, total / secs / 1048576.0);
	printf("rdax_write_64k_durable_bw%s_MiBps %.1f\n", tag, total / durable_secs / 1048576.0);
out:
	if (registered)
		rdax_buffer_free(c, buf);
	else
		free(buf);
	return ret ? die("bandwidth", ret, c) : 0;
}

/*
 * open_bench -- connect (@busy_poll_us as rdax_conn_opts_set_busy_poll; < 0: the
 * library's default) and open "bench"
 */
static int open_bench(const char *url, long busy_poll_us, uint64_t create_size,
		      struct rdax_conn **c, struct rdax_volume **v)
{
	struct rdax_conn_opts *o;
	if (rdax_conn_opts_new(&o) ||
	    (busy_poll_us >= 0 && rdax_conn_opts_set_busy_poll(o, (unsigned)busy_poll_us)))
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
	long busy_poll = -1;
	bool latency_only = false, bandwidth_only = false, keep = false, reuse = false;
	bool registered = false;
	static char tagbuf[64];
	static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
					     {"lat-iters", required_argument, NULL, 'n'},
					     {"bw-mib", required_argument, NULL, 'b'},
					     {"depth", required_argument, NULL, 'd'},
					     {"busy-poll", required_argument, NULL, 'p'},
					     {"tag", required_argument, NULL, 't'},
					     {"daemon-pid", required_argument, NULL, 'P'},
					     {"latency-only", no_argument, NULL, 'l'},
					     {"bandwidth-only", no_argument, NULL, 'B'},
					     {"keep-volume", no_argument, NULL, 'k'},
					     {"reuse", no_argument, NULL, 'r'},
					     {"registered", no_argument, NULL, 'R'},
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
		case 'p':
			busy_poll = atol(optarg);
			break;
		case 't':
			snprintf(tagbuf, sizeof(tagbuf), "_%s", optarg);
			tag = tagbuf;
			break;
		case 'P':
			daemon_pid = atoi(optarg);
			break;
		case 'l':
			latency_only = true;
			break;
		case 'B':
			bandwidth_only = true;
			break;
		case 'k':
			keep = true;
			break;
		case 'r':
			reuse = true;
			break;
		case 'R':
			registered = true;
			break;
		default:
			return 2;
		}
	}
	if (!url || (latency_only && bandwidth_only) || iters == 0 || bw_mib == 0 || depth == 0 || depth > 64 || busy_poll < -1 ||
	    busy_poll > (long)RDAX_MAX_BUSY_POLL_US) {
		fprintf(stderr, "usage: bench_rdma --url rdma://ADDR:PORT [--lat-iters N] "
				"[--bw-mib M] [--depth D<=64] [--busy-poll USEC] [--tag NAME] "
				"[--daemon-pid PID] [--latency-only | --bandwidth-only] "
				"[--keep-volume] [--reuse]\n");
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
	bool lat = !bandwidth_only;
	/* what librdax's auto cap is made of here (its own measurement, the same rule) */
	printf("host_wake_us%s %u\nauto_cap_us%s %u\n", tag, wake_cost_us(), tag,
	       busy_poll_cap(SPIN_WINDOW_CAP_AUTO));
	if (open_bench(url, busy_poll, reuse ? 0 : size, &c, &v) ||
	    (lat && latency(c, v, LAT_WRITE_FSYNC, "rdax_write_fsync_4k", s, iters)) ||
	    (lat && !latency_only && latency(c, v, LAT_WRITE, "rdax_write_4k", s, iters)) ||
	    (lat && latency(c, v, LAT_STAT, "rdax_stat_rpc", s, iters)) ||
	    (lat && latency(c, v, LAT_FSYNC_CLEAN, "rdax_fsync_clean", s, iters)) ||
	    (!latency_only && bandwidth(c, v, size, (uint64_t)bw_mib << 20, depth, registered)))
		return 1;
	rdax_volume_close(&v);
	if (!keep)
		rdax_volume_delete(c, "bench");
	rdax_disconnect(&c);
	free(s);
	return 0;
}
