/* SPDX-License-Identifier: BSD-3-Clause */
/* rdax_cluster.c -- the rdax commands that talk to a cluster's etcd */
#include "rdax_cluster.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cluster_delete.h"
#include "cluster_meta.h"
#include "errors.h"
#include "etcd.h"
#include "placement.h"
#include "size.h"

#define EXIT_FAIL  1
#define EXIT_USAGE 2
/* How long "volume create" waits for every replica to exist, without --timeout. */
#define CREATE_WAIT_MS 10000

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	fputs("rdax: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The records of one cluster as read at one revision. */
struct view {
	struct cluster_node_rec *nodes;
	unsigned nnodes;
	struct cluster_volume_rec *vols;
	unsigned nvols;
};

static void view_free(struct view *v)
{
	free(v->nodes);
	free(v->vols);
	memset(v, 0, sizeof(*v));
}

static int connect_etcd(const struct rdax_cluster_ctx *ctx, struct etcd_client **out)
{
	char why[512];
	int ret = etcd_client_new(ctx->etcd, NULL, out, why, sizeof(why));
	if (ret)
		say("--cluster %s: %s", ctx->etcd, why);
	return ret;
}

static const char *cname(const struct rdax_cluster_ctx *ctx)
{
	return ctx->name ? ctx->name : "default";
}

/* read_view -- every node key, and every volume key (not their sub-keys) */
static int read_view(const struct rdax_cluster_ctx *ctx, struct etcd_client *e, struct view *v)
{
	char key[CLUSTER_KEY_MAX], why[256];
	struct etcd_range_result r;
	memset(v, 0, sizeof(*v));
	cluster_key(key, sizeof(key), cname(ctx), "nodes", "", NULL);
	int ret = etcd_get(e, key, true, &r);
	if (ret)
		goto unreachable;
	v->nodes = calloc(r.count ? r.count : 1, sizeof(*v->nodes));
	for (size_t i = 0; v->nodes && i < r.count; i++) {
		if (cluster_node_decode(r.kvs[i].value, r.kvs[i].value_len, &v->nodes[v->nnodes],
					why, sizeof(why)) == 0)
			v->nnodes++;
		else
			say("warning: node key %s is unusable: %s", r.kvs[i].key, why);
	}
	etcd_range_result_free(&r);
	cluster_key(key, sizeof(key), cname(ctx), "volumes", "", NULL);
	ret = etcd_get(e, key, true, &r);
	if (ret)
		goto unreachable;
	v->vols = calloc(r.count ? r.count : 1, sizeof(*v->vols));
	for (size_t i = 0; v->vols && i < r.count; i++) {
		char kind[CLUSTER_KEY_MAX], name[CLUSTER_KEY_MAX], sub[CLUSTER_KEY_MAX],
		    leaf[CLUSTER_KEY_MAX];
		if (cluster_key_parse(r.kvs[i].key, cname(ctx), kind, name, sub, leaf) || sub[0])
			continue;
		if (cluster_volume_decode(r.kvs[i].value, r.kvs[i].value_len, &v->vols[v->nvols],
					  why, sizeof(why)) == 0)
			v->nvols++;
		else
			say("warning: volume key %s is unusable: %s", r.kvs[i].key, why);
	}
	etcd_range_result_free(&r);
	if (!v->nodes || !v->vols) {
		view_free(v);
		say("out of memory");
		return -ENOMEM;
	}
	return 0;

unreachable:
	say("cannot reach etcd at %s: %s", ctx->etcd, etcd_client_last_error(e));
	view_free(v);
	return ret;
}

static const struct cluster_node_rec *find_node(const struct view *v, const char *name)
{
	for (unsigned i = 0; i < v->nnodes; i++)
		if (strcmp(v->nodes[i].node, name) == 0)
			return &v->nodes[i];
	return NULL;
}

/* --- node list ----------------------------------------------------------- */

static int node_list(const struct rdax_cluster_ctx *ctx, struct etcd_client *e)
{
	struct view v;
	if (read_view(ctx, e, &v))
		return EXIT_FAIL;
	printf("%-16s  %-28s  %-10s  %-10s  %s\n", "NODE", "ADDRESS", "ZONE", "FREE", "STATE");
	char f[SIZE_FORMAT_MAX];
	for (unsigned i = 0; i < v.nnodes; i++) {
		const struct cluster_node_rec *n = &v.nodes[i];
		const char *a = cluster_node_addr(n, "tcp");
		printf("%-16s  %-28s  %-10s  %-10s  %s\n", n->node, a ? a : "-",
		       n->zone[0] ? n->zone : "-", size_format(cluster_node_free(n), f, sizeof(f)),
		       "up");
	}
	/* a node is known while a volume names it; without its key (its lease) it is down */
	for (unsigned i = 0; i < v.nvols; i++)
		for (unsigned r = 0; r < v.vols[i].nreplicas; r++) {
			const char *name = v.vols[i].replicas[r];
			bool listed = find_node(&v, name) != NULL;
			for (unsigned j = 0; j < i && !listed; j++)
				listed =
				    cluster_name_in(v.vols[j].replicas, v.vols[j].nreplicas, name);
			for (unsigned q = 0; q < r && !listed; q++)
				listed = strcmp(v.vols[i].replicas[q], name) == 0;
			if (!listed)
				printf("%-16s  %-28s  %-10s  %-10s  %s\n", name, "-", "-", "-",
				       "down");
		}
	view_free(&v);
	return 0;
}

/* --- volume create ------------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* wait_ready -- until volumes/<name> is "ready" or @ms pass; 0 or EXIT_FAIL */
static int wait_ready(const struct rdax_cluster_ctx *ctx, struct etcd_client *e, const char *name,
		      int ms)
{
	char key[CLUSTER_KEY_MAX], why[256];
	cluster_key(key, sizeof(key), cname(ctx), "volumes", name, NULL);
	uint64_t end = now_ms() + (uint64_t)ms;
	struct cluster_volume_rec v = {0};
	for (;;) {
		struct etcd_range_result r;
		if (etcd_get(e, key, false, &r) == 0) {
			bool ok = r.count == 1 &&
				  cluster_volume_decode(r.kvs[0].value, r.kvs[0].value_len, &v, why,
							sizeof(why)) == 0;
			etcd_range_result_free(&r);
			if (ok && v.state == CLUSTER_VOL_READY)
				return 0;
		}
		if (now_ms() >= end)
			break;
		usleep(50 * 1000);
	}
	say("volume create %s: placed on %s%s%s%s%s but not ready after %d ms (a node that "
	    "cannot create its replica says why in its log)",
	    name, v.replicas[0], v.nreplicas > 1 ? ", " : "", v.nreplicas > 1 ? v.replicas[1] : "",
	    v.nreplicas > 2 ? ", " : "", v.nreplicas > 2 ? "..." : "", ms);
	return EXIT_FAIL;
}

/* parse_count -- a decimal count in [1, CLUSTER_MAX_REPLICAS] */
static int parse_count(const char *opt, const char *s, unsigned *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v < 1 || v > CLUSTER_MAX_REPLICAS) {
		say("volume create: %s '%s' is not a number from 1 to %d", opt, s,
		    CLUSTER_MAX_REPLICAS);
		return EXIT_USAGE;
	}
	*out = (unsigned)v;
	return 0;
}

static int volume_create(const struct rdax_cluster_ctx *ctx, struct etcd_client *e, int argc,
			 char **argv)
{
	static const struct option opts[] = {
	    {"replicas", required_argument, NULL, 'r'},
	    {"min-replicas", required_argument, NULL, 'm'},
	    {NULL, 0, NULL, 0},
	};
	unsigned replicas = 1, min = 0;
	int opt;
	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		int ret = 0;
		if (opt == 'r')
			ret = parse_count("--replicas", optarg, &replicas);
		else if (opt == 'm')
			ret = parse_count("--min-replicas", optarg, &min);
		else {
			say("volume create: bad option '%s' (with --cluster: NAME SIZE --replicas "
			    "N "
			    "[--min-replicas M])",
			    argv[optind - 1]);
			ret = EXIT_USAGE;
		}
		if (ret)
			return ret;
	}
	if (argc - optind != 2) {
		say("volume create: usage: rdax --cluster URL volume create NAME SIZE --replicas N "
		    "[--min-replicas M]");
		return EXIT_USAGE;
	}
	const char *name = argv[optind];
	uint64_t size;
	char hint[128];
	size_t nlen = strlen(name);
	if (!cluster_name_valid(name) || name[0] == '.' || name[0] == '-' ||
	    nlen > CLUSTER_VOLUME_NAME_MAX ||
	    (nlen > CLUSTER_RECORD_SUFFIX_LEN &&
	     strcmp(name + nlen - CLUSTER_RECORD_SUFFIX_LEN, CLUSTER_RECORD_SUFFIX) == 0)) {
		say("volume create: bad name '%s' (1 to %d of A-Z a-z 0-9 . _ -, not starting with "
		    ". or -, not ending in %s: a cluster volume's change record is NAME%s)",
		    name, CLUSTER_VOLUME_NAME_MAX, CLUSTER_RECORD_SUFFIX, CLUSTER_RECORD_SUFFIX);
		return EXIT_USAGE;
	}
	if (size_parse(argv[optind + 1], &size) || size == 0 || size % 4096) {
		say("volume create: bad size '%s' (%s; a multiple of 4K)", argv[optind + 1],
		    size_syntax_hint(argv[optind + 1], hint, sizeof(hint)));
		return EXIT_USAGE;
	}
	if (min == 0)
		min = 1; /* the primary alone may go on when every other copy failed (Kafka's
			    default) */
	if (min > replicas) {
		say("volume create: --min-replicas %u is more than --replicas %u", min, replicas);
		return EXIT_USAGE;
	}

	struct view v;
	if (read_view(ctx, e, &v))
		return EXIT_FAIL;
	unsigned chosen[CLUSTER_MAX_REPLICAS];
	char why[512];
	int ret = placement_choose(v.nodes, v.nnodes, size, replicas, chosen, why, sizeof(why));
	if (ret) {
		say("volume create %s: %s", name, why);
		view_free(&v);
		return EXIT_FAIL;
	}
	struct cluster_volume_rec rec = {.size = size,
					 .nreplicas = replicas,
					 .min_replicas = min,
					 .nisr = replicas,
					 .epoch = 1,
					 .state = CLUSTER_VOL_CREATING};
	snprintf(rec.name, sizeof(rec.name), "%s", name);
	for (unsigned i = 0; i < replicas; i++) {
		snprintf(rec.replicas[i], sizeof(rec.replicas[i]), "%s", v.nodes[chosen[i]].node);
		snprintf(rec.isr[i], sizeof(rec.isr[i]), "%s", v.nodes[chosen[i]].node);
	}
	snprintf(rec.primary, sizeof(rec.primary), "%s", rec.replicas[0]);
	view_free(&v);

	/* create if absent: two creates of one name cannot both win */
	char key[CLUSTER_KEY_MAX], *json;
	cluster_key(key, sizeof(key), cname(ctx), "volumes", name, NULL);
	if (cluster_volume_encode(&rec, &json)) {
		say("out of memory");
		return EXIT_FAIL;
	}
	struct etcd_cmp cmp = {.key = key, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL};
	struct etcd_op put = {
	    .type = ETCD_OP_PUT, .key = key, .value = json, .value_len = strlen(json)};
	struct etcd_txn_result t;
	ret = etcd_txn(e, &cmp, 1, &put, 1, NULL, 0, &t);
	free(json);
	if (ret) {
		say("volume create %s: %s", name, etcd_client_last_error(e));
		return EXIT_FAIL;
	}
	bool won = t.succeeded;
	etcd_txn_result_free(&t);
	if (!won) {
		char left[1024];
		if (cluster_delete_left(e, cname(ctx), name, left, sizeof(left)) == 1 &&
		    strstr(left, " is deleting"))
			say("volume create %s: a volume of that name is still being deleted (%s); "
			    "create it again once it is gone",
			    name, left);
		else
			say("volume create %s: a volume of that name exists", name);
		return EXIT_FAIL;
	}
	return wait_ready(ctx, e, name, ctx->timeout_ms ? ctx->timeout_ms : CREATE_WAIT_MS);
}

/* --- volume delete ------------------------------------------------------- */

/*
 * volume_delete -- the Delete txn, then wait (up to --timeout) until the
 * volume's key is gone; if it is not, say what is left and fail: the delete
 * goes on without this command
 */
static int volume_delete(const struct rdax_cluster_ctx *ctx, struct etcd_client *e, int argc,
			 char **argv)
{
	if (argc != 2) {
		say("volume delete: usage: rdax --cluster URL volume delete NAME");
		return EXIT_USAGE;
	}
	const char *name = argv[1];
	char why[1024];
	int ret = cluster_delete_begin(e, cname(ctx), name, why, sizeof(why));
	if (ret) {
		say("volume delete %s: %s", name, why);
		return EXIT_FAIL;
	}
	int ms = ctx->timeout_ms ? ctx->timeout_ms : CLUSTER_DELETE_WAIT_MS;
	ret = cluster_delete_wait(e, cname(ctx), name, (unsigned)ms, why, sizeof(why));
	if (ret == 0)
		return 0;
	if (ret == -ETIMEDOUT)
		say("volume delete %s: not done after %d ms: %s (the delete goes on; 'volume "
		    "delete' again waits for it)",
		    name, ms, why);
	else
		say("volume delete %s: %s", name, why);
	return EXIT_FAIL;
}

/* --- volume info --------------------------------------------------------- */

/* replica_state -- what volume info says of replica @node */
static void replica_state(const struct cluster_volume_rec *v, const char *node, bool up,
			  const struct cluster_status_rec *st, bool have_status, char out[16])
{
	if (!up)
		snprintf(out, 16, "down");
	else if (have_status &&
		 !(strcmp(st->state, "in-sync") == 0 && !cluster_name_in(v->isr, v->nisr, node)))
		snprintf(out, 16, "%.15s", st->state); /* the states are short words */
	else
		snprintf(out, 16, "%s",
			 cluster_name_in(v->isr, v->nisr, node) ? "in-sync" : "out-of-sync");
}

static int volume_info(const struct rdax_cluster_ctx *ctx, struct etcd_client *e, int argc,
		       char **argv)
{
	bool json = false;
	const char *name = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else {
			say("volume info: usage: rdax --cluster URL volume info NAME [--json]");
			return EXIT_USAGE;
		}
	}
	if (!name) {
		say("volume info: usage: rdax --cluster URL volume info NAME [--json]");
		return EXIT_USAGE;
	}
	char key[CLUSTER_KEY_MAX], why[256];
	struct etcd_range_result r;
	cluster_key(key, sizeof(key), cname(ctx), "volumes", name, NULL);
	/* the volume key and everything under it (status, members, leader), in one read */
	if (etcd_get(e, key, true, &r)) {
		say("cannot reach etcd at %s: %s", ctx->etcd, etcd_client_last_error(e));
		return EXIT_FAIL;
	}
	struct cluster_volume_rec v;
	struct cluster_status_rec st[CLUSTER_MAX_REPLICAS];
	bool have_st[CLUSTER_MAX_REPLICAS] = {0}, found = false;
	for (size_t i = 0; i < r.count; i++) {
		char kind[CLUSTER_KEY_MAX], vn[CLUSTER_KEY_MAX], sub[CLUSTER_KEY_MAX],
		    leaf[CLUSTER_KEY_MAX];
		if (cluster_key_parse(r.kvs[i].key, cname(ctx), kind, vn, sub, leaf) ||
		    strcmp(vn, name) != 0)
			continue;
		if (sub[0] == '\0') {
			if (cluster_volume_decode(r.kvs[i].value, r.kvs[i].value_len, &v, why,
						  sizeof(why))) {
				say("volume info %s: the volume key is unusable: %s", name, why);
				etcd_range_result_free(&r);
				return EXIT_FAIL;
			}
			found = true;
		}
	}
	for (size_t i = 0; found && i < r.count; i++) {
		char kind[CLUSTER_KEY_MAX], vn[CLUSTER_KEY_MAX], sub[CLUSTER_KEY_MAX],
		    leaf[CLUSTER_KEY_MAX];
		if (cluster_key_parse(r.kvs[i].key, cname(ctx), kind, vn, sub, leaf) ||
		    strcmp(vn, name) != 0 || strcmp(sub, "status") != 0)
			continue;
		for (unsigned k = 0; k < v.nreplicas; k++)
			if (strcmp(v.replicas[k], leaf) == 0)
				have_st[k] =
				    cluster_status_decode(r.kvs[i].value, r.kvs[i].value_len,
							  &st[k], why, sizeof(why)) == 0;
	}
	etcd_range_result_free(&r);
	if (!found) {
		say("volume info %s: no such volume in cluster %s", name, cname(ctx));
		return EXIT_FAIL;
	}
	struct view view;
	if (read_view(ctx, e, &view))
		return EXIT_FAIL;

	json_object *o = json_object_new_object(), *reps = json_object_new_array();
	if (!json) {
		char h[SIZE_FORMAT_MAX];
		printf("name: %s\n", v.name);
		printf("size: %" PRIu64 " (%s)\n", v.size, size_format(v.size, h, sizeof(h)));
		printf("primary: %s\n", v.primary);
		printf("epoch: %" PRIu64 "\n", v.epoch);
		printf("state: %s\n", cluster_vol_state_name(v.state));
		printf("min_replicas: %u\n", v.min_replicas);
	}
	for (unsigned k = 0; k < v.nreplicas; k++) {
		char state[16];
		bool up = find_node(&view, v.replicas[k]) != NULL;
		replica_state(&v, v.replicas[k], up, &st[k], have_st[k], state);
		struct cluster_status_rec s = have_st[k] ? st[k] : (struct cluster_status_rec){0};
		const char *link = s.link[0] ? s.link : "none";
		if (!json) {
			printf("replica: %s state %s link %s resync_bytes_left %" PRIu64
			       " resync_bytes_total %" PRIu64 " resync_bytes_shipped %" PRIu64 "\n",
			       v.replicas[k], state, link, s.resync_bytes_left,
			       s.resync_bytes_total, s.resync_bytes_shipped);
			continue;
		}
		json_object *e1 = json_object_new_object();
		json_object_object_add(e1, "node", json_object_new_string(v.replicas[k]));
		json_object_object_add(e1, "state", json_object_new_string(state));
		json_object_object_add(e1, "link", json_object_new_string(link));
		json_object_object_add(e1, "resync_bytes_left",
				       json_object_new_int64((int64_t)s.resync_bytes_left));
		json_object_object_add(e1, "resync_bytes_total",
				       json_object_new_int64((int64_t)s.resync_bytes_total));
		json_object_object_add(e1, "resync_bytes_shipped",
				       json_object_new_int64((int64_t)s.resync_bytes_shipped));
		json_object_array_add(reps, e1);
	}
	if (json) {
		json_object_object_add(o, "name", json_object_new_string(v.name));
		json_object_object_add(o, "size", json_object_new_int64((int64_t)v.size));
		json_object_object_add(o, "primary", json_object_new_string(v.primary));
		json_object_object_add(o, "epoch", json_object_new_int64((int64_t)v.epoch));
		json_object_object_add(o, "state",
				       json_object_new_string(cluster_vol_state_name(v.state)));
		json_object_object_add(o, "min_replicas", json_object_new_int64(v.min_replicas));
		json_object_object_add(o, "replicas", json_object_get(reps));
		printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
								     JSON_C_TO_STRING_SPACED));
	}
	json_object_put(reps);
	json_object_put(o);
	view_free(&view);
	return 0;
}

/* --- the entry points ---------------------------------------------------- */

int rdax_cluster_primary_url(const struct rdax_cluster_ctx *ctx, const char *volume, char *buf,
			     size_t len, char *err, size_t errlen)
{
	struct etcd_client *e;
	char why[512], key[CLUSTER_KEY_MAX];
	int ret = etcd_client_new(ctx->etcd, NULL, &e, why, sizeof(why));
	if (ret) {
		rdax_seterr(err, errlen, "--cluster %s: %s", ctx->etcd, why);
		return ret;
	}
	struct etcd_range_result r = {0};
	struct cluster_volume_rec v;
	struct cluster_node_rec n;
	cluster_key(key, sizeof(key), cname(ctx), "volumes", volume, NULL);
	ret = etcd_get(e, key, false, &r);
	if (ret) {
		rdax_seterr(err, errlen, "cannot reach etcd at %s: %s", ctx->etcd,
			    etcd_client_last_error(e));
		goto out;
	}
	ret = -ENOENT;
	if (r.count != 1) {
		rdax_seterr(err, errlen, "no volume %s in cluster %s", volume, cname(ctx));
		goto out;
	}
	if (cluster_volume_decode(r.kvs[0].value, r.kvs[0].value_len, &v, why, sizeof(why))) {
		rdax_seterr(err, errlen, "the key of volume %s is unusable: %s", volume, why);
		ret = -EINVAL;
		goto out;
	}
	etcd_range_result_free(&r);
	cluster_key(key, sizeof(key), cname(ctx), "nodes", v.primary, NULL);
	if ((ret = etcd_get(e, key, false, &r)) == 0 && r.count == 1 &&
	    cluster_node_decode(r.kvs[0].value, r.kvs[0].value_len, &n, why, sizeof(why)) == 0 &&
	    cluster_node_addr(&n, "tcp")) {
		snprintf(buf, len, "%s", cluster_node_addr(&n, "tcp"));
		ret = 0;
	} else {
		rdax_seterr(err, errlen,
			    "the primary of %s, node %s, is down or has no tcp:// address", volume,
			    v.primary);
		ret = -ENOENT;
	}
out:
	etcd_range_result_free(&r);
	etcd_client_delete(&e);
	return ret;
}

bool rdax_cluster_run(const struct rdax_cluster_ctx *ctx, int argc, char **argv, int *rc)
{
	bool node_list_cmd =
	    argc >= 2 && strcmp(argv[0], "node") == 0 && strcmp(argv[1], "list") == 0;
	bool vol = argc >= 2 && strcmp(argv[0], "volume") == 0;
	bool create = vol && strcmp(argv[1], "create") == 0;
	bool info = vol && strcmp(argv[1], "info") == 0;
	bool del = vol && strcmp(argv[1], "delete") == 0;
	if (argc >= 1 && strcmp(argv[0], "node") == 0 && !node_list_cmd) {
		say("node: the subcommand is 'node list'");
		*rc = EXIT_USAGE;
		return true;
	}
	if (!node_list_cmd && !(ctx->etcd && (create || info || del)))
		return false;
	if (!ctx->etcd) {
		say("node list: needs --cluster etcd://HOST:PORT (or RDAX_CLUSTER)");
		*rc = EXIT_USAGE;
		return true;
	}
	struct etcd_client *e;
	if (connect_etcd(ctx, &e)) {
		*rc = EXIT_USAGE;
		return true;
	}
	if (node_list_cmd)
		*rc = argc == 2 ? node_list(ctx, e)
				: (say("node list takes no arguments"), EXIT_USAGE);
	else if (create)
		*rc = volume_create(ctx, e, argc - 1, argv + 1);
	else if (del)
		*rc = volume_delete(ctx, e, argc - 1, argv + 1);
	else
		*rc = volume_info(ctx, e, argc - 1, argv + 1);
	etcd_client_delete(&e);
	return true;
}

void rdax_cluster_usage(FILE *f)
{
	fprintf(f, "\ncluster (with --cluster etcd://HOST:PORT[,...] or $RDAX_CLUSTER):\n"
		   "  node list                       nodes, address, zone, free space, up/down\n"
		   "  volume create NAME SIZE --replicas N [--min-replicas M]\n"
		   "                                  place N replicas (distinct zones first)\n"
		   "                                  and wait until every one exists\n"
		   "  volume info NAME [--json]       size, primary, epoch, each replica's state\n"
		   "  volume delete NAME              delete every copy; wait (--timeout) until\n"
		   "                                  they are gone, else say what is left\n"
		   "  any other command naming a volume goes to that volume's primary\n"
		   "  (unless --server is given)\n");
}
