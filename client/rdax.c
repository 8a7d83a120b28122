/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdax.c -- the rdax command: manage volumes, write, read, fsync, discard
 *
 * Exit status: 0 success, 1 the operation failed (one line on stderr,
 * "rdax: <command> <volume>: <why>"), 2 usage error.
 * Data moves in chunks of at most one request (rdax_conn_max_payload, at
 * most CHUNK_MAX) with CHUNKS of them in flight, so "write" and "read"
 * stream any length through a fixed amount of memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"
#include "crash_cmd.h"
#include "fdio.h"
#include "json.h"
#include "librdax.h"
#include "rdax_cluster.h"
#include "size.h"

#define EXIT_FAIL  1
#define EXIT_USAGE 2

/* Chunk of stdin/stdout per request, and how many are in flight: 16 MiB at most. */
#define CHUNK_MAX    (4U << 20)
#define CHUNKS	     4
#define COOKIE_FSYNC UINT64_MAX

/*
 * Resuming (docs/librdax.md): a lost connection is resumed for this long by
 * default, and the library keeps copies of up to WRITE_HOLD bytes of writes
 * not yet covered by an fsync, to send them again if the server lost them.
 * write --fsync fsyncs every FSYNC_EVERY bytes, so what it holds stays
 * within the budget (FSYNC_EVERY + the CHUNKS in flight + the fsync's own
 * window) and a stream of any length survives a restart.
 */
#define RESUME_DEFAULT_S 30
#define WRITE_HOLD	 (64ULL << 20)
#define FSYNC_EVERY	 (16ULL << 20)

struct ctx {
	const char *server;
	bool server_given;		 /* --server or $RDAX_SERVER */
	struct rdax_cluster_ctx cluster; /* --cluster: rdax_cluster.h */
	const char *volume;		 /* the command's volume name, if it has one */
	const char *token_file;
	const char *tls_cert_dir; /* rdaxs:// credentials */
	const char *tls_psk_file;
	const char *tls_username;
	int timeout_ms;
	int resume_ms; /* --resume */
	struct rdax_conn *conn;
	char what[320]; /* "write vol1": what failure messages name */
};

/* Options of commands, one bit each; a command lists those it takes. */
enum cmd_opt {
	OPT_FSYNC = 1 << 0,	/* --fsync */
	OPT_NAMESPACE = 1 << 1, /* --namespace ID */
	OPT_JSON = 1 << 2,	/* --json: one JSON object on stdout (docs/cli.md) */
	OPT_OWN = 1 << 3,	/* the command parses its own arguments and options */
	OPT_POWERCUT = 1 << 4,	/* --after N, --delay SECONDS, --wait */
};

struct command {
	const char *name;  /* "volume create", "write", ... */
	const char *usage; /* arguments and options */
	unsigned min_args, max_args;
	unsigned options; /* enum cmd_opt bits */
	const char *help;
	int (*run)(struct ctx *ctx, char **args, unsigned nargs);
};

/* Values of the options given to the command being run. */
struct cmd_opts {
	bool fsync;
	bool json;
	const char *namespace_id;
	const char *after, *delay; /* powercut */
	bool wait;
};

static struct cmd_opts g_opts;

static void fail_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail_msg(const char *fmt, ...)
{
	va_list ap;
	fputs("rdax: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* fail -- report a failed librdax call on ctx->what and return EXIT_FAIL */
static int fail(struct ctx *ctx, int code)
{
	const char *msg = ctx->conn ? rdax_conn_last_error(ctx->conn) : "";
	fail_msg("%s: %s", ctx->what, msg[0] ? msg : rdax_strerror(code));
	return EXIT_FAIL;
}

/* parse_size_arg -- a size/offset argument, or a usage error naming it */
static int parse_size_arg(const char *cmd, const char *what, const char *s, uint64_t *out)
{
	int ret = size_parse(s, out);
	if (ret == -ERANGE) {
		fail_msg("%s: %s '%s' is too large", cmd, what, s);
		return EXIT_USAGE;
	}
	if (ret) {
		char hint[128];
		fail_msg("%s: bad %s '%s' (%s)", cmd, what, s,
			 size_syntax_hint(s, hint, sizeof(hint)));
		return EXIT_USAGE;
	}
	return 0;
}

/* connect_server -- connect per --server (or the volume's primary, with --cluster) */
static int connect_server(struct ctx *ctx)
{
	char primary[256], why[512];
	if (ctx->cluster.etcd && !ctx->server_given && ctx->volume) {
		if (rdax_cluster_primary_url(&ctx->cluster, ctx->volume, primary, sizeof(primary),
					     why, sizeof(why))) {
			fail_msg("%s: %s", ctx->what, why);
			return EXIT_FAIL;
		}
		ctx->server = primary;
	}
	struct rdax_conn_opts *opts;
	int ret = rdax_conn_opts_new(&opts);
	if (ret) {
		fail_msg("%s", rdax_strerror(ret));
		return EXIT_FAIL;
	}
	if (ctx->token_file && (ret = rdax_conn_opts_set_token_file(opts, ctx->token_file))) {
		fail_msg("token file %s: %s", ctx->token_file,
			 ret == -EINVAL ? "empty" : rdax_strerror(ret));
		rdax_conn_opts_delete(&opts);
		return EXIT_FAIL;
	}
	if ((ctx->tls_cert_dir &&
	     (ret = rdax_conn_opts_set_tls_certificates(opts, ctx->tls_cert_dir))) ||
	    (ctx->tls_psk_file &&
	     (ret = rdax_conn_opts_set_tls_psk(opts, ctx->tls_psk_file, ctx->tls_username)))) {
		fail_msg("TLS options: %s", rdax_strerror(ret));
		rdax_conn_opts_delete(&opts);
		return EXIT_FAIL;
	}
	rdax_conn_opts_set_client_name(opts, "rdax");
	if (ctx->timeout_ms)
		rdax_conn_opts_set_timeout(opts, ctx->timeout_ms);
	rdax_conn_opts_set_resume(opts, ctx->resume_ms);
	rdax_conn_opts_set_write_hold(opts, WRITE_HOLD);
	ret = rdax_connect(ctx->server, opts, &ctx->conn);
	rdax_conn_opts_delete(&opts);
	if (ret) {
		const char *msg = rdax_connect_last_error();
		fail_msg("%s", msg[0] ? msg : rdax_strerror(ret));
		return EXIT_FAIL;
	}
	return 0;
}

/* open_volume -- connect and open @name; a failure names ctx->what */
static int open_volume(struct ctx *ctx, const char *name, struct rdax_volume **volp)
{
	int ret = connect_server(ctx);
	if (ret)
		return ret;
	ret = rdax_volume_open(ctx->conn, name, volp);
	/*
	 * A cluster node that is not the volume's primary names the one that is:
	 * follow it (a few hops at most: a failover may move it meanwhile).
	 */
	static char followed[3][128];
	for (unsigned hop = 0;
	     ret == -RDAX_E_NOT_PRIMARY && hop < 3 && rdax_conn_primary_url(ctx->conn)[0]; hop++) {
		snprintf(followed[hop], sizeof(followed[hop]), "%s",
			 rdax_conn_primary_url(ctx->conn));
		rdax_disconnect(&ctx->conn);
		ctx->server = followed[hop];
		ctx->server_given = true; /* connect_server: this address, not a lookup */
		if ((ret = connect_server(ctx)))
			return ret;
		ret = rdax_volume_open(ctx->conn, name, volp);
	}
	return ret ? fail(ctx, ret) : 0;
}

/* print_bytes -- "key: 67108864 (64 MiB)" */
static void print_bytes(const char *key, uint64_t bytes)
{
	char h[32];
	printf("%s: %" PRIu64 " (%s)\n", key, bytes, size_format(bytes, h, sizeof(h)));
}

/* namespace_label -- "ID (PATH)" when HELLO named the namespace, else "ID" */
static const char *namespace_label(struct ctx *ctx, uint32_t id, char *buf, size_t len)
{
	struct rdax_namespace_info ns;
	for (unsigned i = 0; i < rdax_conn_namespace_count(ctx->conn); i++) {
		if (rdax_conn_namespace_get(ctx->conn, i, &ns) == 0 && ns.id == id) {
			snprintf(buf, len, "%" PRIu32 " (%s)", id, ns.path);
			return buf;
		}
	}
	snprintf(buf, len, "%" PRIu32, id);
	return buf;
}

/* json_namespace -- "namespace": {"id": N, "path": "..." or null} */
static void json_namespace(struct ctx *ctx, struct json *j, uint32_t id)
{
	struct rdax_namespace_info ns;
	const char *path = NULL;
	for (unsigned i = 0; i < rdax_conn_namespace_count(ctx->conn) && !path; i++)
		if (rdax_conn_namespace_get(ctx->conn, i, &ns) == 0 && ns.id == id)
			path = ns.path;
	json_object(j, "namespace");
	json_u64(j, "id", id);
	json_str(j, "path", path);
	json_end(j);
}

/* json_volume -- the members of one volume: name, size, namespace, namespace_offset */
static void json_volume(struct ctx *ctx, struct json *j, const struct rdax_volume_info *v)
{
	json_str(j, "name", v->name);
	json_u64(j, "size", v->size);
	json_namespace(ctx, j, v->namespace_id);
	json_u64(j, "namespace_offset", v->namespace_offset);
}

/* --- commands ----------------------------------------------------------- */

/* cmd_volume_create -- rdax volume create NAME SIZE [--namespace ID] */
static int cmd_volume_create(struct ctx *ctx, char **args, unsigned nargs)
{
	uint64_t size;
	uint32_t ns = RDAX_NAMESPACE_ANY;
	int ret = parse_size_arg("volume create", "size", args[1], &size);
	if (ret)
		return ret;
	if (g_opts.namespace_id) {
		uint64_t v;
		if (size_parse(g_opts.namespace_id, &v) || v >= RDAX_NAMESPACE_ANY ||
		    strspn(g_opts.namespace_id, "0123456789") != strlen(g_opts.namespace_id)) {
			fail_msg("volume create: bad namespace id '%s'", g_opts.namespace_id);
			return EXIT_USAGE;
		}
		ns = (uint32_t)v;
	}
	if ((ret = connect_server(ctx)))
		return ret;
	ret = rdax_volume_create(ctx->conn, args[0], size, ns);
	if (ret)
		return fail(ctx, ret);
	return 0;
}

/* cmd_volume_delete -- rdax volume delete NAME */
static int cmd_volume_delete(struct ctx *ctx, char **args, unsigned nargs)
{
	int ret = connect_server(ctx);
	if (ret)
		return ret;
	ret = rdax_volume_delete(ctx->conn, args[0]);
	if (ret)
		return fail(ctx, ret);
	return 0;
}

/* cmd_volume_list -- rdax volume list: a table, one volume a line */
static int cmd_volume_list(struct ctx *ctx, char **args, unsigned nargs)
{
	int ret = connect_server(ctx);
	if (ret)
		return ret;
	struct rdax_volume_info *v;
	size_t n;
	ret = rdax_volume_list(ctx->conn, &v, &n);
	if (ret)
		return fail(ctx, ret);
	if (g_opts.json) {
		struct json j;
		json_begin(&j, stdout);
		json_array(&j, "volumes");
		for (size_t i = 0; i < n; i++) {
			json_object(&j, NULL);
			json_volume(ctx, &j, &v[i]);
			json_end(&j);
		}
		json_finish(&j);
		rdax_volume_info_free(&v);
		return 0;
	}
	int wname = 4, wsize = 4;
	char buf[32], ns[512];
	for (size_t i = 0; i < n; i++) {
		int l = (int)strlen(v[i].name);
		wname = l > wname ? l : wname;
		l = (int)strlen(size_format_compact(v[i].size, buf, sizeof(buf)));
		wsize = l > wsize ? l : wsize;
	}
	printf("%-*s  %-*s  %s\n", wname, "NAME", wsize, "SIZE", "NAMESPACE");
	for (size_t i = 0; i < n; i++)
		printf("%-*s  %-*s  %s\n", wname, v[i].name, wsize,
		       size_format_compact(v[i].size, buf, sizeof(buf)),
		       namespace_label(ctx, v[i].namespace_id, ns, sizeof(ns)));
	rdax_volume_info_free(&v);
	return 0;
}

/* method_name -- a persistence method as rdaxd names it */
static const char *method_name(enum rdax_persist_method m)
{
	switch (m) {
	case RDAX_PERSIST_CPU_CACHE_FLUSH:
		return "cpu-cache-flush";
	case RDAX_PERSIST_FENCE_ONLY:
		return "fence-only";
	case RDAX_PERSIST_MSYNC:
		return "msync";
	case RDAX_PERSIST_SIM:
		return "sim";
	}
	return "unknown";
}

/* print_namespaces_json -- rdax namespace list --json */
static void print_namespaces_json(const struct rdax_namespace_status *l, size_t n)
{
	struct json j;
	json_begin(&j, stdout);
	json_array(&j, "namespaces");
	for (size_t i = 0; i < n; i++) {
		json_object(&j, NULL);
		json_u64(&j, "id", l[i].id);
		json_str(&j, "path", l[i].path);
		json_str(&j, "kind", l[i].kind);
		json_str(&j, "mode", l[i].mode);
		json_str(&j, "method", method_name(l[i].persist_method));
		json_u64(&j, "size", l[i].size);
		json_u64(&j, "free_bytes", l[i].free_bytes);
		json_str(&j, "health", l[i].health);
		if (l[i].usc_supported)
			json_u64(&j, "unsafe_shutdown_count", l[i].unsafe_shutdown_count);
		else
			json_str(&j, "unsafe_shutdown_count", NULL);
		json_bool(&j, "unsafe_shutdown", l[i].unsafe_shutdown);
		json_bool(&j, "badblocks_supported", l[i].badblocks_supported);
		json_array(&j, "bad_blocks");
		for (size_t k = 0; k < l[i].nbad; k++) {
			json_object(&j, NULL);
			json_u64(&j, "offset", l[i].bad[k].offset);
			json_u64(&j, "length", l[i].bad[k].length);
			json_str(&j, "volume", l[i].bad[k].volume);
			json_u64(&j, "volume_offset", l[i].bad[k].volume_offset);
			json_end(&j);
		}
		json_end(&j);
		json_array(&j, "marked_volumes");
		for (size_t k = 0; k < l[i].nmarked; k++)
			json_str(&j, NULL, l[i].marked_volumes[k]);
		json_end(&j);
		json_end(&j);
	}
	json_finish(&j);
}

/* cmd_namespace_list -- rdax namespace list: a table, one namespace a line, then its troubles */
static int cmd_namespace_list(struct ctx *ctx, char **args, unsigned nargs)
{
	int ret = connect_server(ctx);
	if (ret)
		return ret;
	struct rdax_namespace_status *l;
	size_t n;
	ret = rdax_namespace_list(ctx->conn, &l, &n);
	if (ret == -RDAX_E_PROTOCOL) {
		fail_msg("namespace list: %s (a daemon older than this command closes the "
			 "connection: upgrade rdaxd)",
			 rdax_conn_last_error(ctx->conn));
		return EXIT_FAIL;
	}
	if (ret)
		return fail(ctx, ret);
	if (g_opts.json) {
		print_namespaces_json(l, n);
		rdax_namespace_list_free(&l);
		return 0;
	}
	int wpath = 4;
	for (size_t i = 0; i < n; i++) {
		int w = (int)strlen(l[i].path);
		wpath = w > wpath ? w : wpath;
	}
	printf("%-3s %-*s  %-6s  %-15s  %-9s  %-9s  %s\n", "ID", wpath, "PATH", "KIND", "METHOD",
	       "SIZE", "FREE", "HEALTH");
	for (size_t i = 0; i < n; i++) {
		char sz[SIZE_FORMAT_MAX], fr[SIZE_FORMAT_MAX];
		printf("%-3" PRIu32 " %-*s  %-6s  %-15s  %-9s  %-9s  %s\n", l[i].id, wpath,
		       l[i].path, l[i].kind[0] ? l[i].kind : "?", method_name(l[i].persist_method),
		       size_format(l[i].size, sz, sizeof(sz)),
		       size_format(l[i].free_bytes, fr, sizeof(fr)),
		       l[i].health[0] ? l[i].health : "?");
		for (size_t k = 0; k < l[i].nbad; k++) {
			char len[SIZE_FORMAT_MAX];
			const struct rdax_bad_range *b = &l[i].bad[k];
			size_format(b->length, len, sizeof(len));
			if (b->volume)
				printf("    bad block: offset %" PRIu64
				       ", %s: volume %s at %" PRIu64 "\n",
				       b->offset, len, b->volume, b->volume_offset);
			else
				printf("    bad block: offset %" PRIu64 ", %s: in no volume\n",
				       b->offset, len);
		}
		for (size_t k = 0; k < l[i].nmarked; k++)
			printf("    unsafe shutdown: volume %s may have lost acknowledged writes\n",
			       l[i].marked_volumes[k]);
	}
	rdax_namespace_list_free(&l);
	return 0;
}

/* clear_unsafe_failed -- a refused clear; an older daemon closes the connection: say so */
static int clear_unsafe_failed(struct ctx *ctx, int ret)
{
	if (ret != -RDAX_E_PROTOCOL)
		return fail(ctx, ret);
	fail_msg("%s: %s (a daemon older than this command closes the connection: upgrade "
		 "rdaxd)",
		 ctx->what, rdax_conn_last_error(ctx->conn));
	return EXIT_FAIL;
}

/* cmd_volume_clear_unsafe -- rdax volume clear-unsafe NAME: acknowledge its unsafe-shutdown mark */
static int cmd_volume_clear_unsafe(struct ctx *ctx, char **args, unsigned nargs)
{
	int ret = connect_server(ctx);
	if (ret)
		return ret;
	struct rdax_unsafe_cleared *c;
	ret = rdax_volume_clear_unsafe(ctx->conn, args[0], &c);
	if (ret)
		return clear_unsafe_failed(ctx, ret);
	bool cleared = c->nvolumes > 0;
	if (g_opts.json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "name", args[0]);
		json_bool(&j, "cleared", cleared);
		json_finish(&j);
	} else {
		printf("volume %s: %s\n", args[0],
		       cleared ? "unsafe-shutdown mark cleared" : "not marked, nothing to clear");
	}
	rdax_unsafe_cleared_free(&c);
	return 0;
}

/*
 * cmd_namespace_clear_unsafe -- rdax namespace clear-unsafe PATH|ID: the
 * namespace's mark and its volumes'. Digits alone are an id (as namespace
 * list and the metrics show it); anything else is the path on the server.
 */
static int cmd_namespace_clear_unsafe(struct ctx *ctx, char **args, unsigned nargs)
{
	const char *arg = args[0];
	uint64_t id = 0;
	bool by_id = arg[0] && strspn(arg, "0123456789") == strlen(arg);
	if (by_id && (size_parse(arg, &id) || id > UINT32_MAX)) {
		fail_msg("namespace clear-unsafe: bad namespace id '%s'", arg);
		return EXIT_USAGE;
	}
	if (!arg[0]) {
		fail_msg("namespace clear-unsafe: an empty namespace path");
		return EXIT_USAGE;
	}
	int ret = connect_server(ctx);
	if (ret)
		return ret;
	struct rdax_unsafe_cleared *c;
	ret = rdax_namespace_clear_unsafe(ctx->conn, by_id ? NULL : arg, (uint32_t)id, &c);
	if (ret)
		return clear_unsafe_failed(ctx, ret);
	if (g_opts.json) {
		struct json j;
		json_begin(&j, stdout);
		json_namespace(ctx, &j, c->namespace_id);
		json_bool(&j, "cleared", c->namespace_cleared);
		json_array(&j, "cleared_volumes");
		for (size_t i = 0; i < c->nvolumes; i++)
			json_str(&j, NULL, c->volumes[i]);
		json_finish(&j);
		rdax_unsafe_cleared_free(&c);
		return 0;
	}
	char ns[512];
	namespace_label(ctx, c->namespace_id, ns, sizeof(ns));
	if (!c->namespace_cleared && c->nvolumes == 0)
		printf("namespace %s: not marked, nothing to clear\n", ns);
	else
		printf("namespace %s: unsafe-shutdown mark%s cleared\n", ns,
		       c->namespace_cleared ? "" : "s of its volumes");
	for (size_t i = 0; i < c->nvolumes; i++)
		printf("    volume %s: mark cleared\n", c->volumes[i]);
	rdax_unsafe_cleared_free(&c);
	return 0;
}

/* cmd_volume_info -- rdax volume info NAME: key: value lines */
static int cmd_volume_info(struct ctx *ctx, char **args, unsigned nargs)
{
	int ret = connect_server(ctx);
	if (ret)
		return ret;
	struct rdax_volume_info *v;
	ret = rdax_volume_info(ctx->conn, args[0], &v);
	if (ret)
		return fail(ctx, ret);
	if (g_opts.json) {
		struct json j;
		json_begin(&j, stdout);
		json_volume(ctx, &j, v);
		json_finish(&j);
	} else {
		char ns[512];
		printf("name: %s\n", v->name);
		print_bytes("size", v->size);
		printf("namespace: %s\n", namespace_label(ctx, v->namespace_id, ns, sizeof(ns)));
		print_bytes("namespace_offset", v->namespace_offset);
	}
	rdax_volume_info_free(&v);
	return 0;
}

/* beyond_end -- the failure of a range that does not fit in @vol */
static int beyond_end(struct ctx *ctx, struct rdax_volume *vol)
{
	char h[SIZE_FORMAT_MAX];
	uint64_t size = rdax_volume_size(vol);
	fail_msg("%s: offset+length beyond the end of the volume (%" PRIu64 " bytes, %s)",
		 ctx->what, size, size_format(size, h, sizeof(h)));
	return EXIT_FAIL;
}

/* chunk_size -- bytes per request and buffer */
static size_t chunk_size(struct ctx *ctx)
{
	uint32_t mp = rdax_conn_max_payload(ctx->conn);
	return mp < CHUNK_MAX ? mp : CHUNK_MAX;
}

/* drain -- wait for every asynchronous operation still in flight (after a failure) */
static void drain(struct ctx *ctx)
{
	struct rdax_completion c[CHUNKS + 1];
	while (rdax_inflight(ctx->conn) > 0)
		if (rdax_wait_completions(ctx->conn, c, CHUNKS + 1, 1, -1) < 0)
			break;
}

/*
 * stream_write -- stdin to @vol at @offset, CHUNKS requests in flight.
 * Durable (--fsync): all but a one-chunk input go as plain writes plus one
 * fsync of the whole range submitted right behind the last of them (the
 * library's reasoning for rdax_write, applied to a stream whose length is
 * known only at EOF); a one-chunk input is a single write with fsync set.
 */
static int stream_write(struct ctx *ctx, struct rdax_volume *vol, uint64_t offset, bool durable)
{
	size_t chunk = chunk_size(ctx);
	uint8_t *bufs[CHUNKS] = {NULL};
	bool busy[CHUNKS] = {false};
	int ret = 0, rc = 0;
	for (unsigned i = 0; i < CHUNKS; i++) {
		if (!(bufs[i] = malloc(chunk))) {
			fail_msg("%s: %s", ctx->what, strerror(ENOMEM));
			rc = EXIT_FAIL;
			goto out_free;
		}
	}
	uint64_t total = 0, synced = 0; /* bytes written, and covered by an fsync sent */
	bool eof = false, single = false, fsync_sent = false;
	while (!eof || rdax_inflight(ctx->conn) > 0) {
		for (unsigned i = 0; i < CHUNKS && !eof; i++) {
			if (busy[i])
				continue;
			ssize_t n = fdio_read(STDIN_FILENO, bufs[i], chunk, -1);
			if (n < 0) {
				fail_msg("%s: reading stdin: %s", ctx->what, strerror((int)-n));
				rc = EXIT_FAIL;
				eof = true;
				break;
			}
			if ((size_t)n < chunk)
				eof = true;
			if (n == 0)
				break;
			single = durable && eof && total == 0;
			uint64_t off;
			if (__builtin_add_overflow(offset, total, &off))
				ret = -EOVERFLOW;
			else
				ret = rdax_submit_write(vol, off, bufs[i], (size_t)n,
							single ? RDAX_WRITE_FSYNC : 0, i);
			if (ret) {
				rc = fail(ctx, ret);
				eof = true;
				break;
			}
			busy[i] = true;
			total += (uint64_t)n;
			if (durable && !eof && total - synced >= FSYNC_EVERY && !rc) {
				/*
				 * an fsync of what went since the last one, behind it:
				 * the writes it covers need not be held any more
				 */
				if ((ret = rdax_submit_fsync(vol, offset + synced, total - synced,
							     0, COOKIE_FSYNC))) {
					rc = fail(ctx, ret);
					eof = true;
					break;
				}
				synced = total;
			}
		}
		if (eof && durable && !single && total > 0 && !fsync_sent && !rc) {
			/* right behind the last write: the server handles them in order */
			fsync_sent = true;
			if ((ret = rdax_submit_fsync(vol, offset, total, 0, COOKIE_FSYNC)))
				rc = fail(ctx, ret);
		}
		if (rdax_inflight(ctx->conn) == 0)
			continue;
		struct rdax_completion c[CHUNKS + 1];
		int n = rdax_wait_completions(ctx->conn, c, CHUNKS + 1, 1, -1);
		if (n < 0) {
			if (!rc)
				rc = fail(ctx, n);
			break;
		}
		for (int k = 0; k < n; k++) {
			if (c[k].cookie != COOKIE_FSYNC)
				busy[c[k].cookie] = false;
			if (c[k].status && !rc) {
				rc = fail(ctx, c[k].status);
				eof = true; /* stop reading; wait for what is in flight */
			}
		}
	}
out_free:
	drain(ctx);
	for (unsigned i = 0; i < CHUNKS; i++)
		free(bufs[i]);
	return rc;
}

/* cmd_write -- rdax write NAME OFFSET [--fsync]: stdin into the volume */
static int cmd_write(struct ctx *ctx, char **args, unsigned nargs)
{
	uint64_t offset;
	int ret = parse_size_arg("write", "offset", args[1], &offset);
	if (ret)
		return ret;
	struct rdax_volume *vol;
	if ((ret = open_volume(ctx, args[0], &vol)))
		return ret;
	/* a regular file on stdin: refuse before writing anything if it cannot fit */
	struct stat st;
	off_t pos;
	uint64_t end;
	if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode) &&
	    (pos = lseek(STDIN_FILENO, 0, SEEK_CUR)) >= 0 && st.st_size > pos &&
	    (__builtin_add_overflow(offset, (uint64_t)(st.st_size - pos), &end) ||
	     end > rdax_volume_size(vol))) {
		ret = beyond_end(ctx, vol);
	} else {
		ret = stream_write(ctx, vol, offset, g_opts.fsync);
	}
	rdax_volume_close(&vol);
	return ret;
}

/* stream_read -- @length bytes of @vol at @offset to stdout, in order, CHUNKS in flight */
static int stream_read(struct ctx *ctx, struct rdax_volume *vol, uint64_t offset, uint64_t length)
{
	size_t chunk = chunk_size(ctx);
	uint8_t *bufs[CHUNKS] = {NULL};
	size_t lens[CHUNKS] = {0};
	bool done[CHUNKS] = {false};
	int rc = 0;
	for (unsigned i = 0; i < CHUNKS; i++) {
		if (!(bufs[i] = malloc(chunk))) {
			fail_msg("%s: %s", ctx->what, strerror(ENOMEM));
			rc = EXIT_FAIL;
			goto out_free;
		}
	}
	/* chunk number k lives in buffer k % CHUNKS; out: next to print, sub: next to submit */
	uint64_t nchunks = (length + chunk - 1) / chunk, out = 0, sub = 0;
	while (out < nchunks && !rc) {
		while (sub < nchunks && sub < out + CHUNKS) {
			unsigned b = (unsigned)(sub % CHUNKS);
			uint64_t rel = sub * chunk;
			lens[b] = length - rel < chunk ? (size_t)(length - rel) : chunk;
			done[b] = false;
			int ret = rdax_submit_read(vol, offset + rel, bufs[b], lens[b], sub);
			if (ret) {
				rc = fail(ctx, ret);
				break;
			}
			sub++;
		}
		if (rc)
			break;
		struct rdax_completion c[CHUNKS];
		int n = rdax_wait_completions(ctx->conn, c, CHUNKS, 1, -1);
		if (n < 0) {
			rc = fail(ctx, n);
			break;
		}
		for (int k = 0; k < n; k++) {
			if (c[k].status && !rc)
				rc = fail(ctx, c[k].status);
			done[c[k].cookie % CHUNKS] = true;
		}
		while (!rc && out < sub && done[out % CHUNKS]) {
			unsigned b = (unsigned)(out % CHUNKS);
			int ret = fdio_write(STDOUT_FILENO, bufs[b], lens[b], -1);
			if (ret) {
				fail_msg("%s: writing stdout: %s", ctx->what, strerror(-ret));
				rc = EXIT_FAIL;
			}
			out++;
		}
	}
out_free:
	drain(ctx);
	for (unsigned i = 0; i < CHUNKS; i++)
		free(bufs[i]);
	return rc;
}

/* cmd_read -- rdax read NAME OFFSET LENGTH: the volume to stdout */
static int cmd_read(struct ctx *ctx, char **args, unsigned nargs)
{
	uint64_t offset, length;
	int ret = parse_size_arg("read", "offset", args[1], &offset);
	if (!ret)
		ret = parse_size_arg("read", "length", args[2], &length);
	if (ret)
		return ret;
	struct rdax_volume *vol;
	if ((ret = open_volume(ctx, args[0], &vol)))
		return ret;
	uint64_t end;
	if (__builtin_add_overflow(offset, length, &end) || end > rdax_volume_size(vol)) {
		ret = beyond_end(ctx, vol);
	} else if (length > 0) {
		ret = stream_read(ctx, vol, offset, length);
	}
	rdax_volume_close(&vol);
	return ret;
}

/* cmd_fsync -- rdax fsync NAME [OFFSET LENGTH]: prints the bytes written back */
static int cmd_fsync(struct ctx *ctx, char **args, unsigned nargs)
{
	uint64_t offset = 0, length = 0;
	int ret = 0;
	if (nargs == 2) {
		fail_msg("fsync: give both OFFSET and LENGTH, or neither (see 'rdax help fsync')");
		return EXIT_USAGE;
	}
	if (nargs == 3) {
		ret = parse_size_arg("fsync", "offset", args[1], &offset);
		if (!ret)
			ret = parse_size_arg("fsync", "length", args[2], &length);
		if (ret)
			return ret;
	}
	struct rdax_volume *vol;
	if ((ret = open_volume(ctx, args[0], &vol)))
		return ret;
	uint64_t wb = 0;
	ret = rdax_fsync(vol, offset, length, &wb);
	if (ret) {
		ret = fail(ctx, ret);
	} else if (g_opts.json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "name", args[0]);
		json_u64(&j, "written_back", wb);
		json_finish(&j);
	} else {
		print_bytes("written_back", wb);
	}
	rdax_volume_close(&vol);
	return ret;
}

/* cmd_discard -- rdax discard NAME OFFSET LENGTH */
static int cmd_discard(struct ctx *ctx, char **args, unsigned nargs)
{
	uint64_t offset, length;
	int ret = parse_size_arg("discard", "offset", args[1], &offset);
	if (!ret)
		ret = parse_size_arg("discard", "length", args[2], &length);
	if (ret)
		return ret;
	if (length == 0) {
		fail_msg("discard: LENGTH must not be 0");
		return EXIT_USAGE;
	}
	struct rdax_volume *vol;
	if ((ret = open_volume(ctx, args[0], &vol)))
		return ret;
	ret = rdax_discard(vol, offset, length);
	if (ret)
		ret = fail(ctx, ret);
	rdax_volume_close(&vol);
	return ret;
}

/* print_stat_json -- rdax stat --json: the counters of rdax_volume_stat by their names */
static void print_stat_json(const char *name, const struct rdax_volume_stat *st)
{
	struct json j;
	json_begin(&j, stdout);
	json_str(&j, "name", name);
	json_u64(&j, "size", st->size);
	json_u64(&j, "dirty_bytes", st->dirty_bytes);
	json_u64(&j, "entries_4k", st->entries_4k);
	json_u64(&j, "entries_2m", st->entries_2m);
	json_u64(&j, "entries_1g", st->entries_1g);
	json_u64(&j, "tree_bytes", st->tree_bytes);
	json_u64(&j, "fsyncs", st->fsyncs);
	json_u64(&j, "fsync_bytes", st->fsync_bytes);
	json_finish(&j);
}

/* cmd_stat -- rdax stat NAME: the counters as key: value lines */
static int cmd_stat(struct ctx *ctx, char **args, unsigned nargs)
{
	struct rdax_volume *vol;
	int ret = open_volume(ctx, args[0], &vol);
	if (ret)
		return ret;
	struct rdax_volume_stat st;
	ret = rdax_stat(vol, &st);
	if (ret) {
		ret = fail(ctx, ret);
	} else if (g_opts.json) {
		print_stat_json(args[0], &st);
	} else {
		printf("name: %s\n", args[0]);
		print_bytes("size", st.size);
		print_bytes("dirty_bytes", st.dirty_bytes);
		printf("entries_4k: %" PRIu64 "\n", st.entries_4k);
		printf("entries_2m: %" PRIu64 "\n", st.entries_2m);
		printf("entries_1g: %" PRIu64 "\n", st.entries_1g);
		print_bytes("tree_bytes", st.tree_bytes);
		printf("fsyncs: %" PRIu64 "\n", st.fsyncs);
		print_bytes("fsync_bytes", st.fsync_bytes);
	}
	rdax_volume_close(&vol);
	return ret;
}

/* copy_done -- after an import or export: the failure, or "N bytes of data, M of holes" */
static int copy_done(struct ctx *ctx, int ret, const char *err, const struct copy_stats *st)
{
	if (ret) {
		fail_msg("%s: %s", ctx->what, err);
		return EXIT_FAIL;
	}
	if (isatty(STDERR_FILENO)) {
		char d[SIZE_FORMAT_MAX], h[SIZE_FORMAT_MAX];
		fprintf(stderr, "%s: %s of data, %s of holes\n", ctx->what,
			size_format(st->data_bytes, d, sizeof(d)),
			size_format(st->hole_bytes, h, sizeof(h)));
	}
	return 0;
}

/* cmd_import -- rdax import FILE VOLUME [OFFSET] [--fsync] */
static int cmd_import(struct ctx *ctx, char **args, unsigned nargs)
{
	uint64_t offset = 0, end;
	int ret = nargs == 3 ? parse_size_arg("import", "offset", args[2], &offset) : 0;
	if (ret)
		return ret;
	snprintf(ctx->what, sizeof(ctx->what), "import %.150s -> %.80s", args[0], args[1]);
	int fd = open(args[0], O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		fail_msg("%s: %s", ctx->what, fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return EXIT_FAIL;
	}
	struct rdax_volume *vol;
	if ((ret = open_volume(ctx, args[1], &vol))) {
		close(fd);
		return ret;
	}
	uint64_t len = (uint64_t)st.st_size;
	if (__builtin_add_overflow(offset, len, &end) || end > rdax_volume_size(vol)) {
		char f[SIZE_FORMAT_MAX], v[SIZE_FORMAT_MAX];
		fail_msg("%s: the file (%" PRIu64 " bytes, %s) at offset %" PRIu64
			 " does not fit in the volume (%" PRIu64 " bytes, %s)",
			 ctx->what, len, size_format(len, f, sizeof(f)), offset,
			 rdax_volume_size(vol), size_format(rdax_volume_size(vol), v, sizeof(v)));
		ret = EXIT_FAIL;
	} else {
		char err[512] = "";
		struct copy_stats cs;
		ret = copy_import(ctx->conn, vol, fd, len, offset, "import", &cs, err, sizeof(err));
		if (!ret && g_opts.fsync && len > 0 && (ret = rdax_fsync(vol, offset, len, NULL)))
			snprintf(err, sizeof(err), "fsync: %s", rdax_conn_last_error(ctx->conn));
		ret = copy_done(ctx, ret, err, &cs);
	}
	rdax_volume_close(&vol);
	close(fd);
	return ret;
}

/* cmd_export -- rdax export VOLUME FILE [--fsync] */
static int cmd_export(struct ctx *ctx, char **args, unsigned nargs)
{
	snprintf(ctx->what, sizeof(ctx->what), "export %.80s -> %.150s", args[0], args[1]);
	struct rdax_volume *vol;
	int ret = open_volume(ctx, args[0], &vol);
	if (ret)
		return ret;
	int fd = open(args[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		fail_msg("%s: %s", ctx->what, strerror(errno));
		if (fd >= 0)
			close(fd);
		rdax_volume_close(&vol);
		return EXIT_FAIL;
	}
	/* a regular file is cut to the volume's size first: what is not written is a hole */
	bool holes = S_ISREG(st.st_mode);
	char err[512] = "";
	struct copy_stats cs = {0};
	if (holes && (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)rdax_volume_size(vol)) != 0)) {
		ret = -errno;
		snprintf(err, sizeof(err), "ftruncate: %s", strerror(errno));
	} else {
		ret = copy_export(ctx->conn, vol, fd, holes, "export", &cs, err, sizeof(err));
	}
	if (!ret && g_opts.fsync && fsync(fd) != 0) {
		ret = -errno;
		snprintf(err, sizeof(err), "fsync: %s", strerror(errno));
	}
	if (close(fd) != 0 && !ret) {
		ret = -errno;
		snprintf(err, sizeof(err), "close: %s", strerror(errno));
	}
	rdax_volume_close(&vol);
	return copy_done(ctx, ret, err, &cs);
}

/* How long "rdax powercut" waits for the new incarnation unless --timeout says. */
#define POWERCUT_WAIT_MS 120000
/* Between two attempts to reach the daemon after a cut. */
#define POWERCUT_POLL_MS 100

/* parse_delay -- --delay SECONDS (a decimal fraction allowed) as milliseconds; 0 or EXIT_USAGE */
static int parse_delay(const char *v, unsigned *ms)
{
	char *end;
	errno = 0;
	double s = strtod(v, &end);
	if (errno || end == v || *end || !isfinite(s) || s <= 0 ||
	    s * 1000.0 > RDAX_POWERCUT_MAX_DELAY_MS) {
		fail_msg("powercut: bad --delay '%s' (seconds, more than 0 and at most %u)", v,
			 RDAX_POWERCUT_MAX_DELAY_MS / 1000);
		return EXIT_USAGE;
	}
	*ms = (unsigned)(s * 1000.0 + 0.5);
	if (*ms == 0)
		*ms = 1; /* the shortest delay there is */
	return 0;
}

/* mono_ms -- CLOCK_MONOTONIC in milliseconds */
static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * wait_incarnation -- reconnect until the daemon answers HELLO with an
 * incarnation other than @old, for at most @limit_ms (< 0: no limit);
 * *now gets it. 0, or EXIT_FAIL with the reason said.
 */
static int wait_incarnation(struct ctx *ctx, uint64_t old, int64_t limit_ms, uint64_t *now)
{
	int64_t deadline = limit_ms < 0 ? INT64_MAX : mono_ms() + limit_ms;
	int ret = 0;
	for (;;) {
		struct rdax_conn_opts *opts = NULL;
		struct rdax_conn *c = NULL;
		ret = rdax_conn_opts_new(&opts);
		if (ret == 0 && ctx->token_file)
			ret = rdax_conn_opts_set_token_file(opts, ctx->token_file);
		if (ret == 0) {
			rdax_conn_opts_set_client_name(opts, "rdax");
			/* a HELLO waits while the cut runs; a daemon gone quiet is a failure */
			rdax_conn_opts_set_timeout(
			    opts,
			    (int)(limit_ms < 0 || limit_ms > 60000 ? 60000 : limit_ms + 1000));
			ret = rdax_connect(ctx->server, opts, &c);
		}
		rdax_conn_opts_delete(&opts);
		if (ret == 0) {
			*now = rdax_conn_incarnation(c);
			rdax_disconnect(&c);
			if (*now != old)
				return 0;
		}
		if (mono_ms() >= deadline)
			break;
		struct timespec ts = {0, POWERCUT_POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
	fail_msg(
	    "powercut: %s after %.0f s (%s)",
	    ret ? "the daemon does not answer" : "the incarnation did not change",
	    limit_ms / 1000.0,
	    ret ? (rdax_connect_last_error()[0] ? rdax_connect_last_error() : rdax_strerror(ret))
		: "is the cut armed for later?");
	return EXIT_FAIL;
}

/* cmd_powercut -- rdax powercut [--after N] [--delay SECONDS] [--wait] [--json] */
static int cmd_powercut(struct ctx *ctx, char **args, unsigned nargs)
{
	uint64_t after = 0;
	unsigned delay_ms = 0;
	int ret;
	if (g_opts.after) {
		if (strspn(g_opts.after, "0123456789") != strlen(g_opts.after) ||
		    size_parse(g_opts.after, &after) || after == 0) {
			fail_msg("powercut: bad --after '%s' (a count of acknowledged requests, at "
				 "least 1)",
				 g_opts.after);
			return EXIT_USAGE;
		}
	}
	if (g_opts.delay && (ret = parse_delay(g_opts.delay, &delay_ms)))
		return ret;
	if ((ret = connect_server(ctx)))
		return ret;
	uint64_t old = rdax_conn_incarnation(ctx->conn), ended = 0;
	if (old == 0) {
		fail_msg("powercut: %s does not report an incarnation: an rdaxd without power cuts",
			 ctx->server);
		return EXIT_FAIL;
	}
	ret = rdax_powercut(ctx->conn, after, delay_ms, &ended);
	bool now = after == 0 && delay_ms == 0;
	if (ret == -EPERM || ret == -EBUSY || ret == -EINVAL || ret == -RDAX_E_PROTOCOL ||
	    (ret && !now))
		return fail(ctx, ret);
	/* at once: the reply may be lost with the connection, which the cut drops either way */
	rdax_disconnect(&ctx->conn);
	uint64_t inc = 0;
	if (now || g_opts.wait) {
		int64_t limit = ctx->timeout_ms ? ctx->timeout_ms : now ? POWERCUT_WAIT_MS : -1;
		if ((ret = wait_incarnation(ctx, old, limit, &inc)))
			return ret;
	}
	char before[17], after_s[17];
	snprintf(before, sizeof(before), "%016" PRIx64, old);
	snprintf(after_s, sizeof(after_s), "%016" PRIx64, inc);
	if (g_opts.json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "server", ctx->server);
		json_bool(&j, "done", inc != 0);
		json_str(&j, "incarnation_before", before);
		json_str(&j, "incarnation_after", inc ? after_s : NULL);
		json_finish(&j);
	} else if (inc) {
		printf("power cut: incarnation %s ended; %s serves again as incarnation %s\n",
		       before, ctx->server, after_s);
	} else {
		printf("power cut armed on %s (incarnation %s): ", ctx->server, before);
		if (after)
			printf("after %" PRIu64 " more acknowledged requests%s", after,
			       delay_ms ? " or " : "\n");
		if (delay_ms)
			printf("in %.3f s\n", delay_ms / 1000.0);
	}
	return 0;
}

/* crash_connect -- crash_cmd_env.connect: the command's one connection */
static int crash_connect(void *arg, struct rdax_conn **connp)
{
	struct ctx *ctx = arg;
	int ret = ctx->conn ? 0 : connect_server(ctx);
	*connp = ctx->conn;
	return ret;
}

/* cmd_crash_states -- rdax crash-states LOG VOLUME ... (client/crash_cmd.c) */
static int cmd_crash_states(struct ctx *ctx, char **args, unsigned nargs)
{
	struct crash_cmd_env env = {ctx->server, ctx->token_file, crash_connect, ctx};
	return crash_cmd_run((int)nargs, args, &env);
}

/* --- the command table and help ----------------------------------------- */

static const struct command commands[] = {
    {"volume create", "NAME SIZE [--namespace ID]", 2, 2, OPT_NAMESPACE,
     "Create volume NAME of SIZE bytes (K/M/G/T suffixes: 64M, 1G; rdaxd wants a\n"
     "multiple of 4K, and names of 1 to 63 characters of A-Z a-z 0-9 . _ -).\n"
     "The server places it in the namespace with the most free space unless\n"
     "--namespace names one (an id as 'rdax volume list' shows it).\n",
     cmd_volume_create},
    {"volume delete", "NAME", 1, 1, 0,
     "Delete volume NAME and its data. Fails while a client has it open. A cluster\n"
     "volume is deleted through the cluster (every copy), whichever node is asked.\n",
     cmd_volume_delete},
    {"volume list", "[--json]", 0, 0, OPT_JSON,
     "List the volumes: NAME, SIZE (exact, in the largest unit that divides it)\n"
     "and NAMESPACE (id and path on the server).\n"
     "--json: {\"volumes\": [{name, size, namespace: {id, path}, namespace_offset}]}.\n",
     cmd_volume_list},
    {"volume info", "NAME [--json]", 1, 1, OPT_JSON,
     "Show volume NAME as 'key: value' lines: name, size, namespace,\n"
     "namespace_offset; sizes in bytes with a human form in parentheses.\n"
     "--json: {name, size, namespace: {id, path}, namespace_offset}, sizes in bytes.\n",
     cmd_volume_info},
    {"volume clear-unsafe", "NAME [--json]", 1, 1, OPT_JSON,
     "Clear the unsafe-shutdown mark of volume NAME (rdax namespace list shows\n"
     "the marked volumes), once its data was checked or restored: the mark says\n"
     "that writes acknowledged as durable may have been lost. Needs the create\n"
     "right on the volume under rdaxd's --acl. A volume not marked: nothing\n"
     "changes, and the command succeeds. --json: {name, cleared} (cleared: it\n"
     "was marked).\n",
     cmd_volume_clear_unsafe},
    {"write", "NAME OFFSET [--fsync]", 2, 2, OPT_FSYNC,
     "Write standard input, to its end, into volume NAME starting at OFFSET.\n"
     "Any length; it is streamed in chunks, never held in memory whole.\n"
     "--fsync: succeed only once all of the data is durable.\n"
     "Without --fsync the data is durable after a later 'rdax fsync'.\n",
     cmd_write},
    {"read", "NAME OFFSET LENGTH", 3, 3, 0,
     "Write LENGTH bytes of volume NAME from OFFSET to standard output.\n"
     "Bytes never written read as zeros.\n",
     cmd_read},
    {"fsync", "NAME [OFFSET LENGTH] [--json]", 1, 3, OPT_JSON,
     "Make what was written to volume NAME durable: the whole volume, or\n"
     "LENGTH bytes from OFFSET (LENGTH 0: to the end). Prints how many bytes\n"
     "the server wrote back (--json: {name, written_back}).\n",
     cmd_fsync},
    {"discard", "NAME OFFSET LENGTH", 3, 3, 0,
     "Discard LENGTH bytes of volume NAME from OFFSET: they read as zeros\n"
     "afterwards.\n",
     cmd_discard},
    {"import", "FILE VOLUME [OFFSET] [--fsync]", 2, 3, OPT_FSYNC,
     "Copy the regular file FILE into VOLUME at OFFSET (default 0), with many\n"
     "requests in flight. The file's holes (SEEK_HOLE) are not sent: they are\n"
     "discarded on the volume, which then reads zeros there as the file does.\n"
     "--fsync: the copy is durable when the command succeeds. A progress bar\n"
     "is drawn when standard error is a terminal.\n",
     cmd_import},
    {"export", "VOLUME FILE [--fsync]", 2, 2, OPT_FSYNC,
     "Copy all of VOLUME into FILE (created if missing, else overwritten), with\n"
     "many requests in flight. A regular file is sized to the volume and its\n"
     "all-zero 4 KiB blocks are left as holes. --fsync: fsync(2) FILE at the\n"
     "end. A progress bar is drawn when standard error is a terminal.\n",
     cmd_export},
    {"stat", "NAME [--json]", 1, 1, OPT_JSON,
     "Show the counters of volume NAME as 'key: value' lines: size, dirty_bytes\n"
     "(written, not yet fsynced), dirty-tree entries by size, tree_bytes, fsyncs\n"
     "and fsync_bytes (written back by them). --json: one object with those\n"
     "names and name, every value in bytes or a count.\n",
     cmd_stat},
    {"namespace list", "[--json]", 0, 0, OPT_JSON,
     "List the server's namespaces: ID, PATH (on the server), KIND (devdax,\n"
     "fsdax or file), METHOD (how a flush reaches persistence), SIZE, FREE and\n"
     "HEALTH: ok, bad-blocks (reads of them get EIO; each range and the volume\n"
     "it falls in follows on its own line) or unsafe-shutdown (the platform lost\n"
     "power without flushing while the namespace was in use: acknowledged writes\n"
     "may be lost; the marked volumes follow). The server reads the bad blocks\n"
     "again for this. --json: {\"namespaces\": [{id, path, kind, mode, method,\n"
     "size, free_bytes, health, unsafe_shutdown_count (null: not reported),\n"
     "unsafe_shutdown, badblocks_supported, bad_blocks: [{offset, length, volume\n"
     "(null: none), volume_offset}], marked_volumes: [NAME]}]}, sizes in bytes.\n",
     cmd_namespace_list},
    {"namespace clear-unsafe", "PATH|ID [--json]", 1, 1, OPT_JSON,
     "Clear the unsafe-shutdown mark of a namespace, named by its PATH on the\n"
     "server or its ID as 'rdax namespace list' shows them (digits alone are an\n"
     "ID), and the mark of every volume in it, in one commit: once all of its data\n"
     "was checked or restored. Needs the create right on every volume (a rule\n"
     "for *) under rdaxd's --acl. Nothing marked: nothing changes, and the\n"
     "command succeeds. --json: {namespace: {id, path}, cleared (the\n"
     "namespace's own mark was set), cleared_volumes: [NAME]}.\n",
     cmd_namespace_clear_unsafe},
    {"crash-states", CRASH_CMD_USAGE, 0, 0, OPT_OWN, crash_cmd_help, cmd_crash_states},
    {"powercut", "[--after N] [--delay SECONDS] [--wait] [--json]", 0, 0, OPT_POWERCUT | OPT_JSON,
     "Cut the power of the server (an rdaxd started with --allow-powercut, every\n"
     "namespace in mode=sim): every connection is dropped, everything not made\n"
     "durable is lost, and the daemon serves again, the same process, as a new\n"
     "incarnation (docs/persistence-testing.md).\n"
     "Without options: at once; the command returns once the daemon serves again\n"
     "and prints both incarnations (waiting at most --timeout, default 120 s).\n"
     "--after N: after N more acknowledged writes, discards and fsyncs of any\n"
     "client (the Nth is acknowledged, nothing after it). --delay SECONDS: after\n"
     "that long (fractions allowed). Both: whichever comes first. These return\n"
     "once the cut is armed, or with --wait once it happened.\n"
     "--json: {server, done, incarnation_before, incarnation_after} (hex strings;\n"
     "incarnation_after null while the cut is only armed).\n",
     cmd_powercut},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* usage -- the overview of rdax --help */
static void usage(FILE *f)
{
	fprintf(f, "usage: rdax [--server URL] [--token-file PATH] [--tls-certificates DIR] "
		   "[--tls-psk FILE [--tls-username NAME]] [--timeout SECONDS] [--resume SECONDS] "
		   "[--cluster URL] COMMAND [ARGS]\n\ncommands:\n");
	for (unsigned i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %s%s%s\n", commands[i].name, commands[i].usage[0] ? " " : "",
			commands[i].usage);
	fprintf(f,
		"  help [COMMAND]\n"
		"\noptions:\n"
		"  --server URL        the rdaxd to talk to: tcp://HOST[:PORT], IPv6 as\n"
		"                      tcp://[::1]:7470, rdaxs://HOST[:PORT] in TLS, or\n"
		"                      rdma://HOST[:PORT] over RDMA\n"
		"                      (default: $RDAX_SERVER, else %s)\n"
		"  --token-file PATH   send this file's contents (trailing newline stripped)\n"
		"                      as the access token (default: $RDAX_TOKEN_FILE)\n"
		"  --tls-certificates DIR  rdaxs://: DIR/ca-cert.pem checks the server;\n"
		"                      DIR/client-cert.pem and client-key.pem, if there,\n"
		"                      prove the client (default: the system's CAs)\n"
		"  --tls-psk FILE      rdaxs://: a pre-shared key from psktool's FILE\n"
		"                      (rdma://: it signs the connection request)\n"
		"  --tls-username NAME the PSK user (default: the file's first)\n"
		"  --timeout SECONDS   give up when the server is silent this long (default:\n"
		"                      wait)\n"
		"  --resume SECONDS    when the connection is lost (the server restarted, a\n"
		"                      node failed over), reconnect and go on for up to this\n"
		"                      long (default: %d; 0: fail at once). --server may\n"
		"                      name several nodes: URL,URL,...\n"
		"  --cluster etcd://HOST:PORT[,...]  the cluster's etcd (default:\n"
		"                      $RDAX_CLUSTER): cluster commands below\n"
		"  --cluster-name NAME the cluster's name in etcd (default: $RDAX_CLUSTER_NAME,\n"
		"                      else default)\n"
		"  -h, --help          this text; 'rdax help COMMAND' for one command\n"
		"\nSizes and offsets: bytes, or with a binary suffix K, M, G, T (1K = 1024).\n"
		"Exit status: 0 success, 1 failure, 2 usage error.\n",
		RDAX_DEFAULT_URL, RESUME_DEFAULT_S);
	rdax_cluster_usage(f);
}

/* command_help -- rdax help COMMAND */
static void command_help(const struct command *cmd)
{
	printf("usage: rdax [OPTIONS] %s%s%s\n\n%s", cmd->name, cmd->usage[0] ? " " : "",
	       cmd->usage, cmd->help);
}

/* group_of -- @word names a group of subcommands ("volume", "namespace") */
static bool group_of(const char *word)
{
	return strcmp(word, "volume") == 0 || strcmp(word, "namespace") == 0;
}

/* in_group -- @cmd is a subcommand of group @word ("volume create" of "volume") */
static bool in_group(const struct command *cmd, const char *word)
{
	size_t n = strlen(word);
	return strncmp(cmd->name, word, n) == 0 && cmd->name[n] == ' ';
}

/*
 * find_command -- match the words at @argv against the table; *nwords = how
 * many words the name took. A group word alone ("volume", "namespace")
 * matches nothing (*group = true).
 */
static const struct command *find_command(char **argv, int argc, int *nwords, bool *group)
{
	*group = false;
	if (argc < 1)
		return NULL;
	if (group_of(argv[0])) {
		*group = true;
		if (argc < 2)
			return NULL;
		for (unsigned i = 0; i < NCOMMANDS; i++)
			if (in_group(&commands[i], argv[0]) &&
			    strcmp(commands[i].name + strlen(argv[0]) + 1, argv[1]) == 0) {
				*nwords = 2;
				return &commands[i];
			}
		return NULL;
	}
	for (unsigned i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, argv[0]) == 0) {
			*nwords = 1;
			return &commands[i];
		}
	return NULL;
}

/* group_help -- the subcommands of group @word */
static void group_help(FILE *f, const char *word)
{
	fprintf(f, "usage: rdax [OPTIONS] %s SUBCOMMAND\n\nsubcommands:\n", word);
	for (unsigned i = 0; i < NCOMMANDS; i++)
		if (in_group(&commands[i], word))
			fprintf(f, "  %s%s%s\n", commands[i].name, commands[i].usage[0] ? " " : "",
				commands[i].usage);
}

/* cmd_help -- "rdax help [COMMAND...]" */
static int cmd_help(char **argv, int argc)
{
	if (argc == 0) {
		usage(stdout);
		return 0;
	}
	int nwords;
	bool group;
	const struct command *cmd = find_command(argv, argc, &nwords, &group);
	if (cmd) {
		command_help(cmd);
		return 0;
	}
	if (group && argc == 1) {
		group_help(stdout, argv[0]);
		return 0;
	}
	fail_msg("help: unknown command '%s%s%s' (see 'rdax --help')", argv[0],
		 argc > 1 && group ? " " : "", argc > 1 && group ? argv[1] : "");
	return EXIT_USAGE;
}

/* The options of commands; enum cmd_opt bits pick those a command takes. */
static const struct {
	struct option opt;
	unsigned bit;
} cmd_options[] = {
    {{"fsync", no_argument, NULL, 'f'}, OPT_FSYNC},
    {{"namespace", required_argument, NULL, 'n'}, OPT_NAMESPACE},
    {{"json", no_argument, NULL, 'j'}, OPT_JSON},
    {{"after", required_argument, NULL, 'a'}, OPT_POWERCUT},
    {{"delay", required_argument, NULL, 'd'}, OPT_POWERCUT},
    {{"wait", no_argument, NULL, 'w'}, OPT_POWERCUT},
};
#define NCMD_OPTIONS (sizeof(cmd_options) / sizeof(cmd_options[0]))

/*
 * run_command -- parse the arguments and options after the command name
 * (options anywhere among the arguments, "--" ends them) and run it
 */
static int run_command(struct ctx *ctx, const struct command *cmd, char **argv, int argc)
{
	if (cmd->options & OPT_OWN)
		return cmd->run(ctx, argv, (unsigned)argc);
	struct option longopts[NCMD_OPTIONS + 2];
	unsigned n = 0;
	for (unsigned i = 0; i < NCMD_OPTIONS; i++)
		if (cmd->options & cmd_options[i].bit)
			longopts[n++] = cmd_options[i].opt;
	longopts[n++] = (struct option){"help", no_argument, NULL, 'h'};
	longopts[n] = (struct option){NULL, 0, NULL, 0};
	/* argv[0] is the command's last word, as getopt expects a program name there */
	optind = 0;
	opterr = 0;
	int opt;
	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			command_help(cmd);
			return 0;
		case 'f':
			g_opts.fsync = true;
			break;
		case 'n':
			g_opts.namespace_id = optarg;
			break;
		case 'j':
			g_opts.json = true;
			break;
		case 'a':
			g_opts.after = optarg;
			break;
		case 'd':
			g_opts.delay = optarg;
			break;
		case 'w':
			g_opts.wait = true;
			break;
		case ':':
			fail_msg("%s: %s needs a value", cmd->name, argv[optind - 1]);
			return EXIT_USAGE;
		default: /* '?': "-5" lands here too: no size or offset is negative */
			if (optopt)
				fail_msg("%s: unknown option '-%c' (see 'rdax help %s')", cmd->name,
					 optopt, cmd->name);
			else
				fail_msg("%s: unknown option '%.*s' (see 'rdax help %s')",
					 cmd->name, (int)strcspn(argv[optind - 1], "="),
					 argv[optind - 1], cmd->name);
			return EXIT_USAGE;
		}
	}
	char **args = argv + optind;
	unsigned nargs = (unsigned)(argc - optind);
	if (nargs < cmd->min_args || nargs > cmd->max_args) {
		fail_msg("%s: %s arguments (usage: rdax %s %s)", cmd->name,
			 nargs < cmd->min_args ? "missing" : "too many", cmd->name, cmd->usage);
		return EXIT_USAGE;
	}
	snprintf(ctx->what, sizeof(ctx->what), "%s%s%.256s", cmd->name, nargs ? " " : "",
		 nargs ? args[0] : "");
	/* the volume a command names (--cluster: sent to its primary); a namespace is none */
	ctx->volume = nargs && strcmp(cmd->name, "volume create") != 0 &&
			      strncmp(cmd->name, "namespace ", 10) != 0
			  ? args[0]
			  : NULL;
	return cmd->run(ctx, args, nargs);
}

/* parse_timeout -- --timeout (or --resume) SECONDS: whole seconds into *ms; 0 or EXIT_USAGE */
static int parse_timeout(const char *opt, const char *v, int *ms)
{
	uint64_t s;
	if (!v[0] || strspn(v, "0123456789") != strlen(v) || size_parse(v, &s) ||
	    s > INT32_MAX / 1000) {
		fail_msg("bad %s '%s' (whole seconds)", opt, v);
		return EXIT_USAGE;
	}
	*ms = (int)s * 1000;
	return 0;
}

/* main -- global options, then the command (see usage) */
int main(int argc, char **argv)
{
	struct ctx ctx = {.server = getenv("RDAX_SERVER"),
			  .token_file = getenv("RDAX_TOKEN_FILE"),
			  .resume_ms = RESUME_DEFAULT_S * 1000};
	ctx.server_given = ctx.server && ctx.server[0];
	if (!ctx.server || !ctx.server[0])
		ctx.server = RDAX_DEFAULT_URL;
	ctx.cluster.etcd = getenv("RDAX_CLUSTER");
	ctx.cluster.name = getenv("RDAX_CLUSTER_NAME");
	if (ctx.cluster.etcd && !ctx.cluster.etcd[0])
		ctx.cluster.etcd = NULL;
	if (ctx.token_file && !ctx.token_file[0])
		ctx.token_file = NULL;

	static const struct option global[] = {
	    {"server", required_argument, NULL, 's'},
	    {"token-file", required_argument, NULL, 't'},
	    {"tls-certificates", required_argument, NULL, 'X'},
	    {"tls-psk", required_argument, NULL, 'P'},
	    {"tls-username", required_argument, NULL, 'U'},
	    {"timeout", required_argument, NULL, 'T'},
	    {"resume", required_argument, NULL, 'R'},
	    {"cluster", required_argument, NULL, 'C'},
	    {"cluster-name", required_argument, NULL, 'N'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	opterr = 0;
	int opt;
	/* '+': the options before the command are rdax's; the command parses the rest */
	while ((opt = getopt_long(argc, argv, "+:h", global, NULL)) != -1) {
		switch (opt) {
		case 'h':
			usage(stdout);
			return 0;
		case 's':
			ctx.server = optarg;
			ctx.server_given = true;
			break;
		case 'C':
			ctx.cluster.etcd = optarg;
			break;
		case 'N':
			ctx.cluster.name = optarg;
			break;
		case 't':
			ctx.token_file = optarg;
			break;
		case 'X':
			ctx.tls_cert_dir = optarg;
			break;
		case 'P':
			ctx.tls_psk_file = optarg;
			break;
		case 'U':
			ctx.tls_username = optarg;
			break;
		case 'T':
			if (parse_timeout("--timeout", optarg, &ctx.timeout_ms))
				return EXIT_USAGE;
			break;
		case 'R':
			if (parse_timeout("--resume", optarg, &ctx.resume_ms))
				return EXIT_USAGE;
			break;
		case ':':
			fail_msg("%s needs a value (see 'rdax --help')", argv[optind - 1]);
			return EXIT_USAGE;
		default:
			if (optopt)
				fail_msg("unknown option '-%c' (see 'rdax --help')", optopt);
			else
				fail_msg("unknown option '%.*s' (see 'rdax --help')",
					 (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	if (ctx.tls_username && !ctx.tls_psk_file) {
		fail_msg("--tls-username names a user of --tls-psk FILE (see 'rdax --help')");
		return EXIT_USAGE;
	}
	int i = optind;
	if (i >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[i], "help") == 0)
		return cmd_help(argv + i + 1, argc - i - 1);
	ctx.cluster.timeout_ms = ctx.timeout_ms;
	int cluster_rc;
	if (rdax_cluster_run(&ctx.cluster, argc - i, argv + i, &cluster_rc))
		return cluster_rc;

	int nwords;
	bool group;
	const struct command *cmd = find_command(argv + i, argc - i, &nwords, &group);
	if (!cmd) {
		if (group && (i + 1 >= argc || strcmp(argv[i + 1], "--help") == 0 ||
			      strcmp(argv[i + 1], "-h") == 0)) {
			group_help(i + 1 >= argc ? stderr : stdout, argv[i]);
			return i + 1 >= argc ? EXIT_USAGE : 0;
		}
		if (group)
			fail_msg("%s: unknown subcommand '%s' (see 'rdax help %s')", argv[i],
				 argv[i + 1], argv[i]);
		else
			fail_msg("unknown command '%s' (see 'rdax --help')", argv[i]);
		return EXIT_USAGE;
	}
	int rc = run_command(&ctx, cmd, argv + i + nwords - 1, argc - i - nwords + 1);
	if (ctx.conn && rdax_disconnect(&ctx.conn))
		fail_msg("disconnect: %s", rdax_conn_last_error(ctx.conn));
	if (fflush(stdout) != 0 && rc == 0) {
		fail_msg("writing stdout: %s", strerror(errno));
		rc = EXIT_FAIL;
	}
	return rc;
}
