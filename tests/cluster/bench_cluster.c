/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_cluster.c -- replication costs beside their floors, as ratios in one run
 *
 * Four rdaxd nodes in network namespaces (tests/cluster/net.h) on one bridge,
 * and this program in the hub. Measured, in this order, in one run:
 *
 *   floor     TCP round trip hub <-> n1 (1-byte ping-pong, TCP_NODELAY), p50,
 *             and TCP bandwidth hub -> n1 (a sink in n1's namespace)
 *   unrepl    a client's durable 4 KiB write to n1 (rdax_write RDAX_WRITE_FSYNC),
 *             p50, and durable 1 MiB writes, MiB/s
 *   repl k    the replication stage with k = 1, 2, 3 replicas (n2, n3, n4): this
 *             process plays the primary (its memory is the primary's copy, so no
 *             local flush), repl_volume forwards the write and waits for every
 *             replica's fsync: durable 4 KiB p50, durable 1 MiB MiB/s
 *   ship      a resync's shipping: 192 MiB (four passes over a 48 MiB volume)
 *             streamed over one replica link from memory, then an fsync, MiB/s
 *             against the TCP bandwidth
 *
 *   rdaxd     a client's durable 4 KiB p50 and 1 MiB throughput through rdaxd to
 *             cluster volumes of 1, 2 and 3 replicas (its primary forwards),
 *             against the aim: within 1.3x of (1 replica + one link round trip)
 *
 * Beside the times, what a loaded machine does not blur: per durable 4 KiB
 * write, the context switches of every rdaxd thread of the four nodes
 * (/proc/PID/task/TID/status) and their CPU time (schedstat), this client's
 * CPU time, and the bound they set on the mean write (CPU over the CPUs);
 * and the load average and the CPU steal over the run (/proc/loadavg,
 * /proc/stat).
 *
 *   shaped    the floor's TCP stream and the resync's shipping again over links
 *             shaped to a network's bandwidth (tbf on the hub's veths to n1 and
 *             n2, --shaped-mbit, default 2000): unshaped, the veth "link" is a
 *             memory copy on the same two CPUs the receiver's own copies need,
 *             so that ratio measures CPU sharing as much as the protocol; a
 *             shaped link shows whether the shipping keeps a real link full
 *
 *   bench_cluster [--iterations N] [--shaped-mbit M] [--replica-busy-poll USEC]
 *             (default 2000 iterations for the 4 KiB figures, 2000 Mbit/s, the
 *             daemon's default spin cap; 0: the primaries sleep at once)
 *
 * Timings are this machine's at this moment: ratios, never a pass/fail.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "completion.h"
#include "librdax.h"
#include "repl_volume.h"
#include "replica_link.h"
#include "spin_window.h"

#define NODES	   4
#define VOL_SIZE   (48ULL << 20) /* the nodes' namespaces are 64 MiB */
#define SINK_PORT  7600
#define SHIP	   (192ULL << 20) /* four passes over the volume */
#define MIB_ROUNDS 64

static struct nx_cluster cl;
static unsigned iters = 2000;
static unsigned shaped_mbit = 2000;
/* the nodes' and the replication stage's --replica-busy-poll (spin cap, us) */
static unsigned busy_poll_us = SPIN_WINDOW_DEFAULT_CAP_US;

/* What the nodes' rdaxd processes did: context switches of all threads, CPU time. */
struct usage {
	uint64_t ctx;	 /* voluntary + involuntary, every thread */
	uint64_t cpu_ns; /* user + system */
	uint64_t node_cpu_ns[NODES];
};

/* task_add -- one thread's context switches (status) and CPU time (schedstat, in ns) */
static void task_add(const char *task_dir, struct usage *u)
{
	char path[96 + 256 + 2 + 16], line[256];
	snprintf(path, sizeof(path), "%s/status", task_dir);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long v;
		if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1 ||
		    sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
			u->ctx += v;
	}
	if (f)
		fclose(f);
	/* schedstat's first field: time on a CPU in ns (stat's utime/stime are in ticks) */
	snprintf(path, sizeof(path), "%s/schedstat", task_dir);
	f = fopen(path, "r");
	unsigned long long run_ns;
	if (f && fscanf(f, "%llu", &run_ns) == 1)
		u->cpu_ns += run_ns;
	if (f)
		fclose(f);
}

/*
 * nodes_usage -- the sum over the nodes' rdaxd processes (their threads live
 * as long as the daemon, so summing the live threads loses nothing)
 */
static void nodes_usage(struct usage *u)
{
	memset(u, 0, sizeof(*u));
	for (unsigned i = 0; i < NODES; i++) {
		pid_t pid = cl.node[i].d.pid;
		if (pid <= 0)
			continue;
		char path[96];
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		DIR *d = opendir(path);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char td[96 + 256 + 2];
			snprintf(td, sizeof(td), "%s/%s", path, e->d_name);
			uint64_t before = u->cpu_ns;
			task_add(td, u);
			u->node_cpu_ns[i] += u->cpu_ns - before;
		}
		if (d)
			closedir(d);
	}
}

/* own_cpu_ns -- this process's CPU time (the client's side of a write) */
static uint64_t own_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* cpu_steal -- the machine's steal and total jiffies so far (/proc/stat) */
static void cpu_steal(uint64_t *steal, uint64_t *total)
{
	*steal = *total = 0;
	FILE *f = fopen("/proc/stat", "r");
	unsigned long long v[8] = {0};
	if (f && fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			&v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
		for (unsigned i = 0; i < 8; i++)
			*total += v[i];
		*steal = v[7];
	}
	if (f)
		fclose(f);
}

static void loadavg(char *out, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");
	out[0] = '\0';
	if (f && fgets(out, (int)len, f))
		out[strcspn(out, " ")] = '\0';
	if (f)
		fclose(f);
}

/*
 * Per durable 4 KiB write of the client() last run: the nodes' context
 * switches and CPU us, this process's CPU us, and the mean latency.
 */
static double last_ctx, last_cpu_us, last_client_cpu_us, last_mean_us;

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

static double p50_us(uint64_t *ns, unsigned n)
{
	qsort(ns, n, sizeof(*ns), cmp_u64);
	return (double)ns[n / 2] / 1000.0;
}

/* --- the floor: a sink / echo server in n1's namespace -------------------- */

struct server {
	int mode; /* 0 echo, 1 sink */
	pthread_t thread;
	int code;
};

static int serve(void *arg)
{
	struct server *s = arg;
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(SINK_PORT)};
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0)
		return 1;
	int c = accept(l, NULL, NULL);
	if (c < 0)
		return 2;
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	static char buf[1 << 20];
	for (;;) {
		ssize_t n = read(c, buf, s->mode ? sizeof(buf) : 1);
		if (n <= 0)
			break;
		if (!s->mode && write(c, buf, (size_t)n) != n)
			break;
	}
	close(c);
	close(l);
	return 0;
}

static void *server_thread(void *arg)
{
	struct server *s = arg;
	s->code = nx_run_in(&cl.net, 0, serve, s);
	return NULL;
}

/* connect_n1 -- to the server, retried while it starts */
static int connect_n1(void)
{
	for (int t = 0; t < 200; t++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(SINK_PORT)};
		inet_pton(AF_INET, nx_node_addr(&cl.net, 0), &a.sin_addr);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		close(fd);
		usleep(10000);
	}
	return -1;
}

static double floor_rtt_us(void)
{
	struct server s = {.mode = 0};
	pthread_create(&s.thread, NULL, server_thread, &s);
	int fd = connect_n1();
	uint64_t *t = calloc(iters, sizeof(*t));
	char b = 'x';
	for (unsigned i = 0; i < iters && fd >= 0; i++) {
		uint64_t t0 = now_ns();
		if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1)
			break;
		t[i] = now_ns() - t0;
	}
	close(fd);
	pthread_join(s.thread, NULL);
	double r = p50_us(t, iters);
	free(t);
	return r;
}

static double floor_bandwidth_mibs(void)
{
	struct server s = {.mode = 1};
	pthread_create(&s.thread, NULL, server_thread, &s);
	int fd = connect_n1();
	static char buf[1 << 20];
	uint64_t t0 = now_ns(), sent = 0;
	while (fd >= 0 && sent < SHIP) {
		ssize_t n = write(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		sent += (uint64_t)n;
	}
	shutdown(fd, SHUT_WR);
	/* the sink closes after the last byte: the time includes the drain */
	char c;
	while (read(fd, &c, 1) > 0)
		;
	double secs = (double)(now_ns() - t0) / 1e9;
	close(fd);
	pthread_join(s.thread, NULL);
	return (double)sent / (1 << 20) / secs;
}

/* --- unreplicated: a client of n1 ------------------------------------------ */

/* client -- a client's durable 4 KiB p50 and durable 1 MiB throughput to @vol at @url */
static void client(const char *url, const char *vol, unsigned span_mib, double *p50, double *mibs)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	if (rdax_connect(url, NULL, &c) || rdax_volume_open(c, vol, &v)) {
		*p50 = *mibs = 0;
		return;
	}
	static uint8_t buf[1 << 20];
	memset(buf, 0xab, sizeof(buf));
	uint64_t *t = calloc(iters, sizeof(*t));
	/*
	 * Every page of the span written once, untimed: the first write to a
	 * page of a sim-mode namespace faults it in and allocates its block in
	 * the namespace file, a cost of the first pass only. Without this the
	 * unreplicated figure (the aim's base) paid it and the cluster volumes,
	 * written over the same span again and again, mostly did not.
	 */
	for (unsigned i = 0; i < span_mib * 256; i++)
		rdax_write(v, (uint64_t)i * 4096, buf, 4096, RDAX_WRITE_FSYNC);
	struct usage u0, u1;
	nodes_usage(&u0);
	uint64_t own0 = own_cpu_ns(), sum = 0;
	for (unsigned i = 0; i < iters; i++) {
		uint64_t t0 = now_ns();
		rdax_write(v, (uint64_t)(i % (span_mib * 256)) * 4096, buf, 4096, RDAX_WRITE_FSYNC);
		t[i] = now_ns() - t0;
		sum += t[i];
	}
	last_client_cpu_us = (double)(own_cpu_ns() - own0) / 1000.0 / iters;
	nodes_usage(&u1);
	last_ctx = (double)(u1.ctx - u0.ctx) / iters;
	last_cpu_us = (double)(u1.cpu_ns - u0.cpu_ns) / 1000.0 / iters;
	last_mean_us = (double)sum / 1000.0 / iters;
	if (getenv("BENCH_CLUSTER_NODES")) {
		fprintf(stderr, "bench_cluster: %s: CPU per write by node:", vol);
		for (unsigned i = 0; i < NODES; i++)
			fprintf(stderr, " n%u %.1f us", i + 1,
				(double)(u1.node_cpu_ns[i] - u0.node_cpu_ns[i]) / 1000.0 / iters);
		fprintf(stderr, "\n");
	}
	*p50 = p50_us(t, iters);
	uint64_t t0 = now_ns();
	for (unsigned i = 0; i < MIB_ROUNDS; i++)
		rdax_write(v, (uint64_t)(i % span_mib) << 20, buf, sizeof(buf), RDAX_WRITE_FSYNC);
	*mibs = MIB_ROUNDS / ((double)(now_ns() - t0) / 1e9);
	free(t);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
}

/* primary_url -- the tcp:// URL of cluster volume @vol's primary (rdax --cluster volume info) */
static int primary_url(const char *vol, char *url, size_t len)
{
	const char *argv[] = {RDAX_CLI_PATH, "--cluster", cl.etcd.spec, "volume",
			      "info",	     vol,	  NULL};
	struct hx_run r;
	if (hx_run_argv(argv, NULL, 0, &r) || r.status) {
		hx_run_free(&r);
		return -1;
	}
	const char *p = strstr(r.out, "primary: n");
	int ret = -1;
	if (p) {
		unsigned i = (unsigned)(p[10] - '1');
		if (i < NODES) {
			snprintf(url, len, "%s", cl.node[i].url);
			ret = 0;
		}
	}
	hx_run_free(&r);
	return ret;
}

/* What a client's durable 4 KiB writes cost, per write (client() and e2e()). */
struct fig {
	double p50, mean, mibs; /* us, us, durable 1 MiB MiB/s */
	double ctx, cpu_us;	/* the nodes' context switches and CPU */
	double client_cpu_us;	/* this process's CPU */
};

/* e2e -- a cluster volume of @k replicas through rdaxd: a client of its primary */
static void e2e(unsigned k, struct fig *f)
{
	char name[8], n[4], url[128];
	snprintf(name, sizeof(name), "c%u", k);
	snprintf(n, sizeof(n), "%u", k);
	const char *argv[] = {
	    RDAX_CLI_PATH, "--cluster", cl.etcd.spec, "--timeout",  "30", "volume",
	    "create",	   name,	"4M",	      "--replicas", n,	  NULL};
	struct hx_run r;
	memset(f, 0, sizeof(*f));
	if (hx_run_argv(argv, NULL, 0, &r) || r.status || primary_url(name, url, sizeof(url))) {
		fprintf(stderr, "bench_cluster: volume %s: %s\n", name, r.err ? r.err : "");
		hx_run_free(&r);
		return;
	}
	hx_run_free(&r);
	client(url, name, 4, &f->p50, &f->mibs);
	f->mean = last_mean_us;
	f->ctx = last_ctx;
	f->cpu_us = last_cpu_us;
	f->client_cpu_us = last_client_cpu_us;
}

/* --- replicated: this process as the primary -------------------------------- */

struct wait {
	struct repl_wait w;
	struct completion c;
};

static void wait_done(struct repl_wait *w, int status)
{
	completion_complete(&((struct wait *)w)->c, status);
}

/* durable -- write @len at @off through @rv and wait for every replica's fsync */
static int durable(struct repl_volume *rv, uint8_t *mapping, uint64_t off, uint64_t len)
{
	struct wait x = {.w = {.done = wait_done}};
	completion_init(&x.c);
	mapping[off] ^= 1;
	repl_write_durable(rv, off, len, &x.w);
	int status;
	completion_wait(&x.c, -1, &status);
	completion_destroy(&x.c);
	return status;
}

static void repl(unsigned k, uint8_t *mapping, double *p50, double *mibs)
{
	struct repl_member_spec m[3];
	static const char *names[] = {"n2", "n3", "n4"};
	for (unsigned i = 0; i < k; i++)
		m[i] = (struct repl_member_spec){names[i], cl.node[i + 1].url, NULL};
	/* the links spin for their answers as rdaxd's do by default (--replica-busy-poll) */
	struct repl_opts o = {.volume = "bench",
			      .mapping = mapping,
			      .size = VOL_SIZE,
			      .epoch = 1,
			      .spin_cap_us = busy_poll_us};
	struct repl_volume *rv;
	*p50 = *mibs = 0;
	if (repl_start(&o, m, k, &rv))
		return;
	uint64_t *t = calloc(iters, sizeof(*t));
	for (unsigned i = 0; i < iters; i++) {
		uint64_t t0 = now_ns();
		if (durable(rv, mapping, (uint64_t)(i % 8192) * 4096, 4096))
			break;
		t[i] = now_ns() - t0;
	}
	*p50 = p50_us(t, iters);
	uint64_t t0 = now_ns();
	for (unsigned i = 0; i < MIB_ROUNDS; i++)
		durable(rv, mapping, (uint64_t)(i % 40) << 20, 1 << 20);
	*mibs = MIB_ROUNDS / ((double)(now_ns() - t0) / 1e9);
	free(t);
	repl_stop(&rv);
}

/* An fsync waiter on one link. */
struct lwait {
	struct rlink_waiter lw;
	struct completion c;
};

static void lwait_done(struct rlink_waiter *w, int status)
{
	completion_complete(&((struct lwait *)w)->c, status);
}

/*
 * Of the last ship(): the share of its time until every forwarded write was
 * answered (the rest is the final fsync's flush on the replica).
 */
static double ship_writes_share;

/* ship -- SHIP bytes over one link, then an fsync: what a resync's shipping costs; MiB/s */
static double ship(uint8_t *mapping)
{
	struct rlink_opts o = {
	    .url = cl.node[1].url, .volume = "bench", .mapping = mapping, .size = VOL_SIZE};
	struct replica_link *l;
	char err[256];
	if (rlink_start(&o, &l, err, sizeof(err)))
		return 0;
	struct lwait x = {.lw = {.done = lwait_done}};
	completion_init(&x.c);
	uint64_t t0 = now_ns();
	for (uint64_t sent = 0; sent < SHIP; sent += 4 << 20)
		rlink_forward(l, sent % VOL_SIZE, 4 << 20);
	rlink_fsync(l, 0, 0, &x.lw);
	/* the writes' answers, polled: when they were all in (200 us steps) */
	uint64_t t_writes = 0;
	struct rlink_stats st;
	for (;;) {
		rlink_stats(l, &st);
		if (st.failed || st.write_bytes >= SHIP)
			break;
		usleep(200);
	}
	t_writes = now_ns() - t0;
	int status;
	completion_wait(&x.c, -1, &status);
	double secs = (double)(now_ns() - t0) / 1e9;
	ship_writes_share = (double)t_writes / 1e9 / secs;
	rlink_stop(&l);
	return status ? 0 : (double)SHIP / (1 << 20) / secs;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc)
			iters = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--shaped-mbit") == 0 && i + 1 < argc)
			shaped_mbit = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--replica-busy-poll") == 0 && i + 1 < argc)
			busy_poll_us = (unsigned)strtoul(argv[++i], NULL, 0);
	static char busy_arg[48];
	snprintf(busy_arg, sizeof(busy_arg), "--replica-busy-poll=%u", busy_poll_us);
	nx_cluster_extra_arg = busy_arg;
	if (nx_cluster_start(&cl, "bench", NODES, 1, true, NULL) != 0)
		return 1;
	if (!cl.net.isolated) {
		fprintf(stderr, "bench_cluster: needs network namespaces (%s)\n", cl.net.why);
		nx_cluster_stop(&cl);
		return 1;
	}
	for (unsigned i = 0; i < NODES; i++) {
		struct hx_run r;
		nx_node_cli(&cl.node[i], 60, NULL, 0, &r, "volume", "create", "bench", "48M", NULL);
		hx_run_free(&r);
	}
	uint8_t *mapping = calloc(1, VOL_SIZE);
	char load0[32], load1[32];
	uint64_t steal0, total0, steal1, total1;
	loadavg(load0, sizeof(load0));
	cpu_steal(&steal0, &total0);
	double rtt = floor_rtt_us(), bw = floor_bandwidth_mibs();
	struct fig u;
	client(cl.node[0].url, "bench", 4, &u.p50, &u.mibs);
	u.ctx = last_ctx;
	u.cpu_us = last_cpu_us;
	struct fig e[4] = {0};
	for (unsigned k = 1; k <= 3; k++)
		e2e(k, &e[k]);
	double r4[4] = {0}, r1m[4] = {0};
	for (unsigned k = 1; k <= 3; k++)
		repl(k, mapping, &r4[k], &r1m[k]);
	double sh = ship(mapping), sh_share = ship_writes_share;
	/* the same shipping and its floor over links of a network's bandwidth (nx_rate_set) */
	double bw_shaped = 0, sh_shaped = 0, sh_shaped_share = 0;
	if (nx_rate_set(&cl.net, 0, shaped_mbit) == 0 && nx_rate_set(&cl.net, 1, shaped_mbit) == 0) {
		bw_shaped = floor_bandwidth_mibs();
		sh_shaped = ship(mapping);
		sh_shaped_share = ship_writes_share;
	}
	loadavg(load1, sizeof(load1));
	cpu_steal(&steal1, &total1);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	double aim_us = 1.3 * (u.p50 + rtt);
	printf(
	    "bench_cluster: %u iterations of 4 KiB, %d x 1 MiB; load average %s at the start, %s "
	    "at the end; CPU steal %.1f%% over the run; %ld CPUs; --replica-busy-poll %u\n",
	    iters, MIB_ROUNDS, load0, load1,
	    total1 > total0 ? 100.0 * (double)(steal1 - steal0) / (double)(total1 - total0) : 0.0,
	    cpus, busy_poll_us);
	printf("  link round trip (TCP ping-pong) p50     %8.1f us\n", rtt);
	printf("  link bandwidth (TCP stream)             %8.1f MiB/s\n", bw);
	printf("  unreplicated durable 4 KiB p50           %8.1f us\n", u.p50);
	printf("  unreplicated durable 1 MiB               %8.1f MiB/s\n", u.mibs);
	printf("  unreplicated durable 4 KiB: %.2f context switches, %.1f us CPU of the nodes per "
	       "write\n",
	       u.ctx, u.cpu_us);
	for (unsigned k = 1; k <= 3; k++)
		printf("  replication stage, %u replica%s: 4 KiB p50 %8.1f us (%.2fx RTT), 1 MiB "
		       "%7.1f MiB/s (%.2fx unreplicated)\n",
		       k, k == 1 ? " " : "s", r4[k], r4[k] / rtt, r1m[k], r1m[k] / u.mibs);
	printf("  the aim for a replicated durable 4 KiB write: 1.3 x (unreplicated + RTT) = %.1f "
	       "us\n",
	       aim_us);
	for (unsigned k = 1; k <= 3; k++)
		printf("  through rdaxd, %u replica%s: durable 4 KiB p50 %8.1f us = %.2fx the aim (aim "
		       "<= 1), mean %.1f us; 1 MiB %7.1f MiB/s (%.2fx unreplicated)\n",
		       k, k == 1 ? " " : "s", e[k].p50, e[k].p50 / aim_us, e[k].mean, e[k].mibs,
		       e[k].mibs / u.mibs);
	/*
	 * A floor the machine sets: the writes are one at a time, so over the
	 * loop the CPU time spent (the nodes' and this client's) fits in
	 * (CPUs x the time taken): the mean write takes at least the CPU per
	 * write over the CPUs, however well the nodes' work overlaps. Above
	 * the aim's time, no overlap of the replicas' flushes can meet the aim
	 * here: the cost must come down first.
	 */
	for (unsigned k = 1; k <= 3; k++) {
		double need = (e[k].cpu_us + e[k].client_cpu_us) / (double)cpus;
		printf("  through rdaxd, %u replica%s: %.2f context switches, CPU per durable 4 KiB "
		       "write %.1f us in the nodes + %.1f us in the client = at least %.1f us a "
		       "write on %ld CPUs (%.2fx the aim's time)\n",
		       k, k == 1 ? " " : "s", e[k].ctx, e[k].cpu_us, e[k].client_cpu_us, need,
		       cpus, need / aim_us);
	}
	printf("  resync shipping, 192 MiB over one link   %8.1f MiB/s = %.2fx the link (aim >= "
	       "0.8); the writes answered after %.0f%% of its time, the final fsync the rest\n",
	       sh, sh / bw, 100.0 * sh_share);
	if (bw_shaped > 0)
		printf("  over links shaped to %u Mbit/s: TCP stream %.1f MiB/s, resync shipping %.1f "
		       "MiB/s = %.2fx the link (aim >= 0.8); the writes answered after %.0f%% of its "
		       "time\n",
		       shaped_mbit, bw_shaped, sh_shaped, sh_shaped / bw_shaped,
		       100.0 * sh_shaped_share);
	else
		printf("  links shaped to %u Mbit/s: not measured (tc tbf failed)\n", shaped_mbit);
	free(mapping);
	return nx_cluster_stop(&cl) ? 1 : 0;
}
