/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_volumes.c -- nodes join a cluster; replicated volumes are placed
 *
 * etcd and three rdaxd nodes started with --cluster, each in its own network
 * namespace (tests/cluster/net.h), zones za, za, zb. Checks, through the
 * rdax command as a script would use it:
 *
 *   - rdax node list: every node up with its address, zone and free space;
 *   - volume create --replicas 2: the replicas go to distinct zones (so zb's
 *     node is one of them), each chosen node creates its local volume and
 *     the command returns once the volume is ready; the node not chosen has
 *     no such volume;
 *   - volume info NAME and --json: the fields the interface names (the
 *     primary in-sync, the other replica out-of-sync: no link forwards
 *     writes yet);
 *   - placement errors: more replicas than nodes, a size no node has, a name
 *     that exists: a clear message and exit 1, nothing written;
 *   - a node that cannot reach etcd says so and exits non-zero;
 *   - kill -9 of a node: it is "down" in node list and volume info once its
 *     lease ran out; restarted, it is up again and its replica is still there;
 *   - a command with --cluster and no --server reaches the volume's primary;
 *   - volume delete sent to the node without a copy (--server) deletes every
 *     copy and record through the cluster (test_cluster_delete.c has more).
 *
 *   test_cluster_volumes [--seed N]   (the seed only picks which node is killed)
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "cluster_fixture.h"
#include "member.h"
#include "etcd_fixture.h"
#include "harness.h"
#include "net.h"
#include "node.h"

#define NODES 3

static uint64_t seed = 1;
static struct nx_cluster cl;
static const char *const zones[NODES] = {"za", "za", "zb"};

static int setup(void **state)
{
	(void)state;
	if (nx_cluster_start(&cl, "clvol", NODES, seed, true, zones) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return nx_cluster_stop(&cl);
}

/* rdax_cl -- "rdax --cluster SPEC --timeout 20 ARGS..." into @r; returns the exit status */
static int rdax_cl(struct hx_run *r, ...)
{
	const char *argv[24] = {RDAX_CLI_PATH, "--cluster", cl.etcd.spec, "--timeout", "20"};
	int n = 5;
	va_list ap;
	va_start(ap, r);
	const char *a;
	while ((a = va_arg(ap, const char *)) != NULL && n < 23)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	assert_int_equal(hx_run_argv(argv, NULL, 0, r), 0);
	return r->status;
}

/* info_json -- volume info NAME --json, parsed */
static json_object *info_json(const char *name)
{
	struct hx_run r;
	int st = rdax_cl(&r, "volume", "info", name, "--json", NULL);
	if (st != 0)
		fail_msg("volume info %s --json: exit %d: %s", name, st, r.err);
	json_object *o = json_tokener_parse(r.out);
	hx_run_free(&r);
	assert_non_null(o);
	return o;
}

static const char *jstr(json_object *o, const char *k)
{
	json_object *v;
	assert_true(json_object_object_get_ex(o, k, &v));
	assert_true(json_object_is_type(v, json_type_string));
	return json_object_get_string(v);
}

static int64_t jint(json_object *o, const char *k)
{
	json_object *v;
	assert_true(json_object_object_get_ex(o, k, &v));
	assert_true(json_object_is_type(v, json_type_int));
	return json_object_get_int64(v);
}

/* replica_state -- the state volume info gives replica @nd of @vol, or NULL */
static char *replica_state(const char *vol, const char *nd)
{
	json_object *o = info_json(vol), *reps;
	char *state = NULL;
	assert_true(json_object_object_get_ex(o, "replicas", &reps));
	for (size_t i = 0; i < json_object_array_length(reps); i++) {
		json_object *e = json_object_array_get_idx(reps, i);
		if (strcmp(jstr(e, "node"), nd) == 0)
			state = strdup(jstr(e, "state"));
	}
	json_object_put(o);
	return state;
}

/* has_volume -- node @i holds a local volume @name (asked of it directly) */
static bool has_volume(unsigned i, const char *name)
{
	struct hx_run r;
	assert_int_equal(nx_node_cli(&cl.node[i], 20, NULL, 0, &r, "volume", "info", name, NULL),
			 0);
	bool yes = r.status == 0;
	hx_run_free(&r);
	return yes;
}

/* node_line -- node list's line for @name (static buffer), or NULL */
static const char *node_line(const char *name)
{
	static char line[512];
	struct hx_run r;
	assert_int_equal(rdax_cl(&r, "node", "list", NULL), 0);
	const char *found = NULL;
	for (char *p = r.out, *save = NULL, *l; (l = strtok_r(p, "\n", &save)); p = NULL) {
		size_t n = strlen(name);
		if (strncmp(l, name, n) == 0 && l[n] == ' ') {
			snprintf(line, sizeof(line), "%s", l);
			found = line;
		}
	}
	hx_run_free(&r);
	return found;
}

static void test_node_list(void **state)
{
	(void)state;
	for (unsigned i = 0; i < NODES; i++) {
		char name[8];
		snprintf(name, sizeof(name), "n%u", i + 1);
		const char *l = node_line(name);
		if (!l)
			fail_msg("node list has no line for %s", name);
		printf("  %s\n", l);
		assert_non_null(strstr(l, cl.node[i].listen));
		assert_non_null(strstr(l, zones[i]));
		assert_non_null(strstr(l, " up"));
	}
}

static void test_create_and_info(void **state)
{
	(void)state;
	struct hx_run r;
	int st = rdax_cl(&r, "volume", "create", "rv1", "8M", "--replicas", "2", NULL);
	if (st != 0)
		fail_msg("volume create: exit %d: %s", st, r.err);
	hx_run_free(&r);

	json_object *o = info_json("rv1"), *reps;
	assert_string_equal(jstr(o, "name"), "rv1");
	assert_int_equal(jint(o, "size"), 8 << 20);
	assert_int_equal(jint(o, "epoch"), 1);
	const char *primary = jstr(o, "primary");
	assert_true(json_object_object_get_ex(o, "replicas", &reps));
	assert_int_equal(json_object_array_length(reps), 2);
	bool zb = false, chosen[NODES] = {0};
	for (size_t k = 0; k < 2; k++) {
		json_object *e = json_object_array_get_idx(reps, k);
		const char *nd = jstr(e, "node");
		assert_string_equal(jstr(e, "state"), "in-sync");
		assert_int_equal(jint(e, "resync_bytes_left"), 0);
		assert_int_equal(jint(e, "resync_bytes_total"), 0);
		assert_true(nd[0] == 'n' && nd[1] >= '1' && nd[1] <= '0' + NODES);
		chosen[nd[1] - '1'] = true;
		zb = zb || strcmp(nd, "n3") == 0;
	}
	printf("  rv1: primary %s, replicas on %s%s%s\n", primary, chosen[0] ? "n1 " : "",
	       chosen[1] ? "n2 " : "", chosen[2] ? "n3" : "");
	assert_true(zb); /* distinct zones first: za has two nodes, zb one */
	assert_true(chosen[primary[1] - '1']);
	json_object_put(o);
	for (unsigned i = 0; i < NODES; i++)
		assert_int_equal(has_volume(i, "rv1"), chosen[i]);

	/* the text form names the same things */
	assert_int_equal(rdax_cl(&r, "volume", "info", "rv1", NULL), 0);
	assert_non_null(strstr(r.out, "name: rv1\n"));
	assert_non_null(strstr(r.out, "epoch: 1\n"));
	assert_non_null(strstr(r.out, "primary: "));
	hx_run_free(&r);
}

/* other_replica -- rv1's replica that is not its primary (index), and the primary's */
static unsigned other_replica(unsigned *primary)
{
	json_object *o = info_json("rv1"), *reps;
	unsigned other = 0;
	*primary = (unsigned)(jstr(o, "primary")[1] - '1');
	assert_true(json_object_object_get_ex(o, "replicas", &reps));
	for (size_t k = 0; k < json_object_array_length(reps); k++) {
		unsigned i = (unsigned)(jstr(json_object_array_get_idx(reps, k), "node")[1] - '1');
		if (i != *primary)
			other = i;
	}
	json_object_put(o);
	return other;
}

static void test_replicated_write(void **state)
{
	(void)state;
	/* through the primary; then the other replica, asked directly, has the same bytes */
	static uint8_t data[256 << 10];
	uint64_t rng = 99;
	for (size_t i = 0; i < sizeof(data); i += 8) {
		uint64_t v = hx_splitmix64(&rng);
		memcpy(data + i, &v, 8);
	}
	unsigned primary, other = other_replica(&primary);
	struct hx_run r;
	assert_int_equal(nx_node_cli(&cl.node[primary], 20, data, sizeof(data), &r, "write", "rv1",
				     "1M", "--fsync", NULL),
			 0);
	if (r.status)
		fail_msg("write --fsync to the primary: %s", r.err);
	hx_run_free(&r);
	char len[16];
	snprintf(len, sizeof(len), "%zu", sizeof(data));
	/* the replica's own copy, read as the primary's link would (member.h) */
	char other_name[8];
	snprintf(other_name, sizeof(other_name), "n%u", other + 1);
	struct rdax_conn *c;
	struct rdax_volume *v;
	static uint8_t back[sizeof(data)];
	assert_int_equal(
	    nx_member_open(cl.etcd.spec, other_name, cl.node[other].url, "rv1", &c, &v), 0);
	assert_int_equal(rdax_read(v, 1 << 20, back, sizeof(back)), 0);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	assert_memory_equal(back, data, sizeof(data));
	printf("  256 KiB written --fsync through n%u read back from replica n%u's copy\n",
	       primary + 1, other + 1);
	/* a client asking the replica is told where the primary is, and rdax follows it */
	assert_int_equal(
	    nx_node_cli(&cl.node[other], 20, NULL, 0, &r, "read", "rv1", "1M", len, NULL), 0);
	if (r.status)
		fail_msg("read through replica n%u: %s", other + 1, r.err);
	assert_int_equal(r.out_len, sizeof(data));
	assert_memory_equal(r.out, data, sizeof(data));
	hx_run_free(&r);
	printf("  rdax --server n%u (a replica) read it through the primary it was sent to\n",
	       other + 1);
}

static void test_placement_errors(void **state)
{
	(void)state;
	struct hx_run r;
	assert_int_equal(rdax_cl(&r, "volume", "create", "big", "8M", "--replicas", "4", NULL), 1);
	printf("  4 replicas: %s", r.err);
	assert_non_null(strstr(r.err, "cannot place 4 replicas"));
	hx_run_free(&r);
	assert_int_equal(rdax_cl(&r, "volume", "create", "big", "1G", "--replicas", "1", NULL), 1);
	printf("  1G: %s", r.err);
	assert_non_null(strstr(r.err, "cannot place"));
	hx_run_free(&r);
	assert_int_equal(rdax_cl(&r, "volume", "info", "big", NULL), 1);
	assert_non_null(strstr(r.err, "no such volume"));
	hx_run_free(&r);
	assert_int_equal(rdax_cl(&r, "volume", "create", "rv1", "8M", "--replicas", "2", NULL), 1);
	assert_non_null(strstr(r.err, "exists"));
	hx_run_free(&r);
	assert_int_equal(rdax_cl(&r, "volume", "create", "rv9", "8M", "--replicas", "2",
				 "--min-replicas", "3", NULL),
			 2);
	hx_run_free(&r);
}

static void test_no_etcd(void **state)
{
	(void)state;
	char ns[400];
	int port = hx_free_port();
	assert_true(port > 0);
	char spec[64];
	snprintf(spec, sizeof(spec), "etcd://127.0.0.1:%d", port);
	snprintf(ns, sizeof(ns), "%s/lonely.ns,size=16M,mode=sim", cl.dir);
	const char *argv[] = {RDAXD_PATH,  "--namespace", ns,	    "--listen", "tcp://127.0.0.1:0",
			      "--cluster", spec,	  "--node", "lonely",	NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	printf("  rdaxd without etcd: exit %d: %s", r.status,
	       r.err + (r.err_len > 200 ? r.err_len - 200 : 0));
	assert_int_not_equal(r.status, 0);
	assert_non_null(strstr(r.err, "cannot reach etcd"));
	hx_run_free(&r);
}

/* wait_state -- until volume info shows @want for @nd (at most @ms); true if it did */
static bool wait_state(const char *vol, const char *nd, const char *want, int ms)
{
	for (int t = 0; t < ms; t += 250) {
		char *s = replica_state(vol, nd);
		bool ok = s && strcmp(s, want) == 0;
		free(s);
		if (ok)
			return true;
		usleep(250 * 1000);
	}
	return false;
}

static void test_down_and_back(void **state)
{
	(void)state;
	/* a replica of rv1 other than the primary */
	json_object *o = info_json("rv1"), *reps;
	char primary[16], victim[16] = "";
	snprintf(primary, sizeof(primary), "%s", jstr(o, "primary"));
	assert_true(json_object_object_get_ex(o, "replicas", &reps));
	for (size_t k = 0; k < 2; k++)
		if (strcmp(jstr(json_object_array_get_idx(reps, k), "node"), primary) != 0)
			snprintf(victim, sizeof(victim), "%s",
				 jstr(json_object_array_get_idx(reps, k), "node"));
	json_object_put(o);
	unsigned vi = (unsigned)(victim[1] - '1');
	printf("  kill -9 %s\n", victim);
	assert_int_equal(nx_node_kill(&cl.node[vi]), 0);
	/* its lease (5 s) runs out: the node key goes */
	assert_true(wait_state("rv1", victim, "down", 15000));
	const char *l = node_line(victim);
	assert_non_null(l);
	assert_non_null(strstr(l, "down"));
	assert_int_equal(nx_node_restart(&cl.node[vi]), 0);
	l = node_line(victim);
	assert_non_null(l);
	assert_non_null(strstr(l, " up"));
	assert_true(has_volume(vi, "rv1"));
}

static void test_primary_routing(void **state)
{
	(void)state;
	/* no --server: rdax asks etcd for rv1's primary and talks to it */
	static const char data[] = "routed to the primary";
	const char *w[] = {RDAX_CLI_PATH, "--cluster", cl.etcd.spec, "--timeout", "20",
			   "write",	  "rv1",       "0",	     "--fsync",	  NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(w, data, sizeof(data), &r), 0);
	if (r.status != 0)
		fail_msg("write via --cluster: exit %d: %s", r.status, r.err);
	hx_run_free(&r);
	char len[16];
	snprintf(len, sizeof(len), "%zu", sizeof(data));
	assert_int_equal(rdax_cl(&r, "read", "rv1", "0", len, NULL), 0);
	assert_int_equal(r.out_len, sizeof(data));
	assert_memory_equal(r.out, data, sizeof(data));
	hx_run_free(&r);
	assert_int_equal(rdax_cl(&r, "read", "nosuch", "0", "1", NULL), 1);
	assert_non_null(strstr(r.err, "no volume nosuch"));
	hx_run_free(&r);
}

static void test_delete_any_node(void **state)
{
	(void)state;
	/*
	 * --server of the node that holds no copy of rv1: it runs the Delete txn
	 * (never a local delete) and answers once every copy is gone
	 */
	unsigned outside = NODES;
	for (unsigned i = 0; i < NODES; i++)
		if (!has_volume(i, "rv1"))
			outside = i;
	assert_true(outside < NODES);
	struct hx_run r;
	assert_int_equal(
	    nx_node_cli(&cl.node[outside], 20, NULL, 0, &r, "volume", "delete", "rv1", NULL), 0);
	if (r.status)
		fail_msg("volume delete rv1 via n%u: exit %d: %s", outside + 1, r.status, r.err);
	hx_run_free(&r);
	printf("  volume delete rv1 via n%u (no copy there): done\n", outside + 1);
	assert_int_equal(rdax_cl(&r, "volume", "info", "rv1", NULL), 1);
	hx_run_free(&r);
	for (unsigned i = 0; i < NODES; i++) {
		assert_false(has_volume(i, "rv1"));
		assert_false(has_volume(i, "rv1.rrec"));
	}
	/* a volume the cluster does not have: the same clear message as before */
	assert_int_equal(rdax_cl(&r, "volume", "delete", "nosuch", NULL), 1);
	assert_non_null(strstr(r.err, "no volume nosuch"));
	hx_run_free(&r);
}

int main(int argc, char **argv)
{
	seed = nx_seed(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_node_list),	     cmocka_unit_test(test_create_and_info),
	    cmocka_unit_test(test_replicated_write), cmocka_unit_test(test_placement_errors),
	    cmocka_unit_test(test_no_etcd),	     cmocka_unit_test(test_down_and_back),
	    cmocka_unit_test(test_primary_routing),  cmocka_unit_test(test_delete_any_node),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
