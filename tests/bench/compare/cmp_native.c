/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmp_native.c -- the comparison's shapes through rdax's own protocol (librdax)
 *
 *   cmp_native --url tcp://HOST:PORT --volume NAME [--size SIZE] [--seconds S]
 *              [--shapes write,wflush,durable,qd32,seq1m,read,rqd32,rseq1m]
 *              [--cpu C] [--prefill]
 *              [--ops N] [--server-pid PID] [--no-flush]
 *
 * Connects to a running rdaxd, creates the volume if it does not exist
 * (--size, default 1G), opens it and runs the shapes of cmp_shapes.h:
 * write = rdax_write (one request, not durable); wflush = rdax_write +
 * rdax_fsync of the whole volume (two requests, like an NBD WRITE + FLUSH);
 * durable = rdax_write with RDAX_WRITE_FSYNC (one request, like an NBD
 * WRITE with FUA); read = rdax_read; qd32, seq1m, rqd32 and rseq1m through
 * the asynchronous API on one connection. --prefill writes the whole volume once before anything is
 * timed; --ops N counts operations instead of time (for instruction and
 * system-call counts per operation); --server-pid adds the server's CPU use
 * per shape (from its /proc stat) beside this client's; --no-flush skips
 * the untimed flush after each shape. Prints one JSON
 * object on stdout, including how the server's namespace persists (from
 * HELLO). A benchmark, never a test.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cmp_shapes.h"
#include "cmp_util.h"
#include "librdax.h"

struct native {
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	char msg[512];
};

static int n_write(void *ctx, uint64_t off, const void *buf, uint32_t len, bool durable)
{
	struct native *n = ctx;
	return rdax_write(n->vol, off, buf, len, durable ? RDAX_WRITE_FSYNC : 0);
}

static int n_flush(void *ctx)
{
	struct native *n = ctx;
	return rdax_fsync(n->vol, 0, 0, NULL);
}

static int n_submit(void *ctx, uint64_t off, const void *buf, uint32_t len, uint64_t tag)
{
	struct native *n = ctx;
	return rdax_submit_write(n->vol, off, buf, len, 0, tag);
}

static int n_read(void *ctx, uint64_t off, void *buf, uint32_t len)
{
	struct native *n = ctx;
	return rdax_read(n->vol, off, buf, len);
}

static int n_submit_read(void *ctx, uint64_t off, void *buf, uint32_t len, uint64_t tag)
{
	struct native *n = ctx;
	return rdax_submit_read(n->vol, off, buf, len, tag);
}

static int n_reap(void *ctx, uint64_t *tags, unsigned max)
{
	struct native *n = ctx;
	struct rdax_completion c[64];
	int got = rdax_wait_completions(n->conn, c, max < 64 ? max : 64, 1, -1);
	for (int i = 0; i < got; i++) {
		if (c[i].status)
			return c[i].status;
		tags[i] = c[i].cookie;
	}
	return got;
}

static const char *n_error(void *ctx, int code)
{
	struct native *n = ctx;
	snprintf(n->msg, sizeof(n->msg), "%s (%s)", rdax_strerror(code),
		 rdax_conn_last_error(n->conn));
	return n->msg;
}

static const char *method_name(enum rdax_persist_method m)
{
	switch (m) {
	case RDAX_PERSIST_CPU_CACHE_FLUSH:
		return "cpu-cache-flush (CLWB/CLFLUSHOPT + SFENCE)";
	case RDAX_PERSIST_FENCE_ONLY:
		return "fence-only (eADR)";
	case RDAX_PERSIST_MSYNC:
		return "msync";
	case RDAX_PERSIST_SIM:
		return "sim (power-fail simulator)";
	}
	return "unknown";
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: cmp_native --url URL --volume NAME [--size SIZE] [--seconds S] "
	    "[--shapes LIST] [--cpu C] [--prefill] [--ops N] [--server-pid PID] [--no-flush]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"url", required_argument, NULL, 'u'},
	    {"volume", required_argument, NULL, 'v'},
	    {"size", required_argument, NULL, 'z'},
	    {"seconds", required_argument, NULL, 's'},
	    {"shapes", required_argument, NULL, 'S'},
	    {"cpu", required_argument, NULL, 'c'},
	    {"prefill", no_argument, NULL, 'p'},
	    {"ops", required_argument, NULL, 'o'},
	    {"server-pid", required_argument, NULL, 'P'},
	    {"no-flush", no_argument, NULL, 'F'},
	    {NULL, 0, NULL, 0},
	};
	const char *url = NULL, *name = NULL;
	uint64_t size = 1ULL << 30;
	struct cmp_shape_opts so = {.seconds = 3, .shapes = CMP_ALL_SHAPES};
	bool prefill = false;
	int cpu = -1, c, ret;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'u':
			url = optarg;
			break;
		case 'v':
			name = optarg;
			break;
		case 'z':
			size = cmp_parse_size(optarg);
			break;
		case 's':
			so.seconds = atof(optarg);
			break;
		case 'S':
			so.shapes = optarg;
			break;
		case 'c':
			cpu = atoi(optarg);
			break;
		case 'p':
			prefill = true;
			break;
		case 'o':
			so.ops = strtoull(optarg, NULL, 0);
			break;
		case 'P':
			so.server_pid = atoi(optarg);
			break;
		case 'F':
			so.no_flush = true;
			break;
		default:
			usage();
		}
	}
	if (!url || !name || size < CMP_BIG || so.seconds <= 0)
		usage();
	if (cmp_pin(cpu))
		fprintf(stderr, "cmp_native: cannot pin to CPU %d\n", cpu);

	struct native n = {0};
	struct rdax_conn_opts *co = NULL;
	if ((ret = rdax_conn_opts_new(&co)) || (ret = rdax_conn_opts_set_queue_depth(co, 64)) ||
	    (ret = rdax_conn_opts_set_client_name(co, "cmp_native"))) {
		fprintf(stderr, "cmp_native: options: %s\n", rdax_strerror(ret));
		return 1;
	}
	ret = rdax_connect(url, co, &n.conn);
	rdax_conn_opts_delete(&co);
	if (ret) {
		fprintf(stderr, "cmp_native: connect %s: %s\n", url, rdax_connect_last_error());
		return 1;
	}
	ret = rdax_volume_create(n.conn, name, size, RDAX_NAMESPACE_ANY);
	if (ret && ret != -EEXIST) {
		fprintf(stderr, "cmp_native: create %s: %s\n", name, n_error(&n, ret));
		return 1;
	}
	struct rdax_volume_info *info = NULL;
	if ((ret = rdax_volume_open(n.conn, name, &n.vol)) ||
	    (ret = rdax_volume_info(n.conn, name, &info))) {
		fprintf(stderr, "cmp_native: open %s: %s\n", name, n_error(&n, ret));
		return 1;
	}
	const char *method = "unknown", *mode = "unknown";
	for (unsigned i = 0; i < rdax_conn_namespace_count(n.conn); i++) {
		struct rdax_namespace_info ni;
		if (rdax_conn_namespace_get(n.conn, i, &ni) == 0 && ni.id == info->namespace_id) {
			method = method_name(ni.persist_method);
			mode = ni.mode;
		}
	}
	struct cmp_target t = {.ctx = &n,
			       .size = rdax_volume_size(n.vol),
			       .write = n_write,
			       .flush = n_flush,
			       .submit = n_submit,
			       .read = n_read,
			       .submit_read = n_submit_read,
			       .reap = n_reap,
			       .error = n_error};
	if (prefill) {
		fprintf(stderr, "cmp_native: prefilling %s ...\n", name);
		if (cmp_prefill(&t))
			return 1;
	}
	printf("{\"tool\": \"cmp_native\"");
	cmp_json_str(stdout, "url", url, true);
	cmp_json_str(stdout, "volume", name, true);
	cmp_json_num(stdout, "volume_bytes", (double)t.size, true);
	cmp_json_str(stdout, "namespace_mode", mode, true);
	cmp_json_str(stdout, "persist_method", method, true);
	cmp_json_str(stdout, "server_version", rdax_conn_server_version(n.conn), true);
	cmp_json_num(stdout, "cpu", cpu, true);
	rdax_volume_info_free(&info);
	ret = cmp_run_shapes(&t, &so, stdout);
	cmp_json_num(stdout, "ran_on_cpu", cmp_cpu_now(), true);
	printf("}\n");
	rdax_volume_close(&n.vol);
	rdax_disconnect(&n.conn);
	return ret ? 1 : 0;
}
