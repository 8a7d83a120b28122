/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmp_nbd.c -- the comparison's shapes against any NBD server (libnbd)
 *
 *   cmp_nbd --uri nbd://HOST:PORT/EXPORT [--seconds S]
 *           [--shapes write,wflush,durable,qd32,seq1m,read,rqd32,rseq1m] [--cpu C] [--prefill]
 *           [--ops N] [--server-pid PID] [--no-flush]
 *
 * Why not fio for everything: fio's nbd engine passes no flags to
 * nbd_aio_pwrite(), so it cannot send a write with FUA. This helper runs
 * the shapes of cmp_shapes.h through libnbd on one connection: write =
 * NBD_CMD_WRITE; wflush = NBD_CMD_WRITE then NBD_CMD_FLUSH; durable =
 * NBD_CMD_WRITE with NBD_CMD_FLAG_FUA; qd32 and seq1m with nbd_aio_pwrite;
 * read = NBD_CMD_READ; rqd32 and rseq1m with nbd_aio_pread.
 * The same loop times rdax's NBD export and nbdkit, so their figures
 * compare directly. "durable" is skipped where the server does not
 * advertise FUA (can_fua in the JSON says so). --ops N counts operations
 * instead of time; --server-pid adds the server's CPU use per shape beside
 * this client's; --no-flush skips the untimed flush after each shape.
 * Prints one JSON object on stdout. A benchmark, never a test.
 */
#include <errno.h>
#include <getopt.h>
#include <libnbd.h>
#include <stdlib.h>
#include <string.h>

#include "cmp_shapes.h"
#include "cmp_util.h"

#define DONE_CAP 4096

struct nbdc {
	struct nbd_handle *h;
	uint64_t done[DONE_CAP]; /* tags of completed commands not yet reaped */
	unsigned ndone;
	int failed; /* first error of a completed command (positive errno) */
	char msg[512];
};

struct cb_arg {
	struct nbdc *n;
	uint64_t tag;
};

static int nerr(void)
{
	int e = nbd_get_errno();
	return e ? -e : -EIO;
}

static int b_write(void *ctx, uint64_t off, const void *buf, uint32_t len, bool durable)
{
	struct nbdc *n = ctx;
	return nbd_pwrite(n->h, buf, len, off, durable ? LIBNBD_CMD_FLAG_FUA : 0) ? nerr() : 0;
}

static int b_flush(void *ctx)
{
	struct nbdc *n = ctx;
	return nbd_flush(n->h, 0) ? nerr() : 0;
}

/* completed -- libnbd's completion callback: queue the tag (the command is then retired) */
static int completed(void *user_data, int *error)
{
	struct cb_arg *a = user_data;
	if (*error && !a->n->failed)
		a->n->failed = *error;
	if (a->n->ndone < DONE_CAP)
		a->n->done[a->n->ndone++] = a->tag;
	return 1;
}

/* on_done -- a completion callback that queues @tag (libnbd frees its argument); 0 or -ENOMEM */
static int on_done(struct nbdc *n, uint64_t tag, nbd_completion_callback *cb)
{
	struct cb_arg *a = malloc(sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->n = n;
	a->tag = tag;
	*cb = (nbd_completion_callback){.callback = completed, .user_data = a, .free = free};
	return 0;
}

static int b_submit(void *ctx, uint64_t off, const void *buf, uint32_t len, uint64_t tag)
{
	struct nbdc *n = ctx;
	nbd_completion_callback cb;
	if (on_done(n, tag, &cb))
		return -ENOMEM;
	return nbd_aio_pwrite(n->h, buf, len, off, cb, 0) < 0 ? nerr() : 0;
}

static int b_read(void *ctx, uint64_t off, void *buf, uint32_t len)
{
	struct nbdc *n = ctx;
	return nbd_pread(n->h, buf, len, off, 0) ? nerr() : 0;
}

static int b_submit_read(void *ctx, uint64_t off, void *buf, uint32_t len, uint64_t tag)
{
	struct nbdc *n = ctx;
	nbd_completion_callback cb;
	if (on_done(n, tag, &cb))
		return -ENOMEM;
	return nbd_aio_pread(n->h, buf, len, off, cb, 0) < 0 ? nerr() : 0;
}

static int b_reap(void *ctx, uint64_t *tags, unsigned max)
{
	struct nbdc *n = ctx;
	while (n->ndone == 0)
		if (nbd_poll(n->h, -1) < 0)
			return nerr();
	if (n->failed)
		return -n->failed;
	unsigned k = n->ndone < max ? n->ndone : max;
	memcpy(tags, n->done, k * sizeof(*tags));
	memmove(n->done, n->done + k, (n->ndone - k) * sizeof(*tags));
	n->ndone -= k;
	return (int)k;
}

static const char *b_error(void *ctx, int code)
{
	struct nbdc *n = ctx;
	const char *e = nbd_get_error();
	snprintf(n->msg, sizeof(n->msg), "%s (%s)", strerror(code < 0 ? -code : code), e ? e : "");
	return n->msg;
}

static void usage(void)
{
	fprintf(stderr, "usage: cmp_nbd --uri URI [--seconds S] [--shapes LIST] [--cpu C] "
			"[--prefill] [--ops N] [--server-pid PID] [--no-flush]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"uri", required_argument, NULL, 'u'},
	    {"seconds", required_argument, NULL, 's'},
	    {"shapes", required_argument, NULL, 'S'},
	    {"cpu", required_argument, NULL, 'c'},
	    {"prefill", no_argument, NULL, 'p'},
	    {"ops", required_argument, NULL, 'o'},
	    {"server-pid", required_argument, NULL, 'P'},
	    {"no-flush", no_argument, NULL, 'F'},
	    {NULL, 0, NULL, 0},
	};
	const char *uri = NULL;
	struct cmp_shape_opts so = {.seconds = 3, .shapes = CMP_ALL_SHAPES};
	bool prefill = false;
	int cpu = -1, c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'u':
			uri = optarg;
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
	if (!uri || so.seconds <= 0)
		usage();
	if (cmp_pin(cpu))
		fprintf(stderr, "cmp_nbd: cannot pin to CPU %d\n", cpu);

	struct nbdc n = {0};
	n.h = nbd_create();
	if (!n.h || nbd_connect_uri(n.h, uri) < 0) {
		fprintf(stderr, "cmp_nbd: connect %s: %s\n", uri, nbd_get_error());
		return 1;
	}
	int64_t size = nbd_get_size(n.h);
	int can_fua = nbd_can_fua(n.h), can_flush = nbd_can_flush(n.h);
	if (size < (int64_t)CMP_BIG) {
		fprintf(stderr, "cmp_nbd: export size %lld is too small\n", (long long)size);
		return 1;
	}
	/* the durable shape needs FUA: leave it out (and say so) where there is none */
	char shapes[128];
	snprintf(shapes, sizeof(shapes), "%s", so.shapes);
	if (can_fua != 1) {
		char *d = strstr(shapes, "durable");
		if (d)
			memset(d, 'x', strlen("durable"));
	}
	so.shapes = shapes;
	struct cmp_target t = {.ctx = &n,
			       .size = (uint64_t)size,
			       .write = b_write,
			       .flush = b_flush,
			       .submit = b_submit,
			       .read = b_read,
			       .submit_read = b_submit_read,
			       .reap = b_reap,
			       .error = b_error};
	if (prefill) {
		fprintf(stderr, "cmp_nbd: prefilling %s ...\n", uri);
		if (cmp_prefill(&t))
			return 1;
	}
	printf("{\"tool\": \"cmp_nbd\"");
	cmp_json_str(stdout, "uri", uri, true);
	cmp_json_num(stdout, "volume_bytes", (double)size, true);
	cmp_json_num(stdout, "can_fua", can_fua, true);
	cmp_json_num(stdout, "can_flush", can_flush, true);
	cmp_json_num(stdout, "can_multi_conn", nbd_can_multi_conn(n.h), true);
	cmp_json_num(stdout, "block_min", (double)nbd_get_block_size(n.h, LIBNBD_SIZE_MINIMUM),
		     true);
	cmp_json_num(stdout, "block_preferred",
		     (double)nbd_get_block_size(n.h, LIBNBD_SIZE_PREFERRED), true);
	cmp_json_num(stdout, "block_max", (double)nbd_get_block_size(n.h, LIBNBD_SIZE_MAXIMUM),
		     true);
	const char *proto = nbd_get_protocol(n.h);
	cmp_json_str(stdout, "protocol", proto ? proto : "", true);
	cmp_json_num(stdout, "structured_replies", nbd_get_structured_replies_negotiated(n.h),
		     true);
	cmp_json_num(stdout, "cpu", cpu, true);
	int ret = cmp_run_shapes(&t, &so, stdout);
	cmp_json_num(stdout, "ran_on_cpu", cmp_cpu_now(), true);
	printf("}\n");
	nbd_shutdown(n.h, 0);
	nbd_close(n.h);
	return ret ? 1 : 0;
}
