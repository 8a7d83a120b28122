/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_meta.c -- the cluster's records in etcd, placement, and the
 * rdaxd cluster flags
 *
 * Records: every encoder's output decodes to the same record; decoders
 * refuse what a reader must not act on (missing members, wrong types, bad
 * names, a primary outside the ISR, an ISR member that is not a replica) and
 * ignore members they do not know. Placement: distinct zones first, by free
 * space, a clear -ENOSPC. Flags: --cluster and its companions, and that the
 * companions without --cluster are refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_meta.h"
#include "config.h"
#include "placement.h"

static void test_keys(void **state)
{
	(void)state;
	char k[CLUSTER_KEY_MAX], kind[CLUSTER_KEY_MAX], name[CLUSTER_KEY_MAX], sub[CLUSTER_KEY_MAX],
	    leaf[CLUSTER_KEY_MAX];
	assert_int_equal(cluster_key(k, sizeof(k), "c1", "volumes", "v1", "members", "n2", NULL),
			 (int)strlen("/rdax/c1/volumes/v1/members/n2"));
	assert_string_equal(k, "/rdax/c1/volumes/v1/members/n2");
	assert_int_equal(cluster_key_parse(k, "c1", kind, name, sub, leaf), 0);
	assert_string_equal(kind, "volumes");
	assert_string_equal(name, "v1");
	assert_string_equal(sub, "members");
	assert_string_equal(leaf, "n2");
	assert_int_equal(cluster_key_parse("/rdax/c1/volumes/v1", "c1", kind, name, sub, leaf), 0);
	assert_string_equal(sub, "");
	assert_int_equal(cluster_key_parse("/rdax/c10/volumes/v1", "c1", kind, name, sub, leaf),
			 -EINVAL);
	char small[8];
	assert_int_equal(cluster_key(small, sizeof(small), "c1", "volumes", NULL), -ENAMETOOLONG);
}

static struct cluster_volume_rec sample_volume(void)
{
	struct cluster_volume_rec v = {.size = 1 << 30,
				       .nreplicas = 3,
				       .min_replicas = 2,
				       .nisr = 2,
				       .epoch = 7,
				       .state = CLUSTER_VOL_READY};
	strcpy(v.name, "vol1");
	strcpy(v.replicas[0], "n1");
	strcpy(v.replicas[1], "n2");
	strcpy(v.replicas[2], "n3");
	strcpy(v.isr[0], "n1");
	strcpy(v.isr[1], "n3");
	strcpy(v.primary, "n1");
	return v;
}

static void test_volume_roundtrip(void **state)
{
	(void)state;
	struct cluster_volume_rec v = sample_volume(), back;
	char *json, err[256];
	assert_int_equal(cluster_volume_encode(&v, &json), 0);
	assert_int_equal(cluster_volume_decode(json, strlen(json), &back, err, sizeof(err)), 0);
	assert_memory_equal(&v, &back, sizeof(v));
	free(json);
}

static void test_volume_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{\"name\":\"v\",\"size\":1}",
	    /* primary outside the ISR */
	    "{\"name\":\"v\",\"size\":4096,\"replicas\":[\"a\",\"b\"],\"isr\":[\"b\"],"
	    "\"primary\":\"a\",\"epoch\":1,\"state\":\"ready\"}",
	    /* an ISR member that is not a replica */
	    "{\"name\":\"v\",\"size\":4096,\"replicas\":[\"a\"],\"isr\":[\"a\",\"z\"],"
	    "\"primary\":\"a\",\"epoch\":1,\"state\":\"ready\"}",
	    /* wrong type, bad name, epoch 0, unknown state, negative size, trailing bytes */
	    "{\"name\":\"v\",\"size\":\"4096\",\"replicas\":[\"a\"],\"isr\":[\"a\"],"
	    "\"primary\":\"a\",\"epoch\":1,\"state\":\"ready\"}",
	    "{\"name\":\"v/x\",\"size\":4096,\"replicas\":[\"a\"],\"isr\":[\"a\"],"
	    "\"primary\":\"a\",\"epoch\":1,\"state\":\"ready\"}",
	    "{\"name\":\"v\",\"size\":4096,\"replicas\":[\"a\"],\"isr\":[\"a\"],"
	    "\"primary\":\"a\",\"epoch\":0,\"state\":\"ready\"}",
	    "{\"name\":\"v\",\"size\":4096,\"replicas\":[\"a\"],\"isr\":[\"a\"],"
	    "\"primary\":\"a\",\"epoch\":1,\"state\":\"happy\"}",
	    "{\"name\":\"v\",\"size\":-1,\"replicas\":[\"a\"],\"isr\":[\"a\"],"
	    "\"primary\":\"a\",\"epoch\":1,\"state\":\"ready\"}",
	    "{\"name\":\"v\",\"size\":4096,\"replicas\":[\"a\"],\"isr\":[\"a\"],"
	    "\"primary\":\"a\",\"epoch\":1,\"state\":\"ready\"} {}",
	    /* min_replicas above the replica count */
	    "{\"name\":\"v\",\"size\":4096,\"replicas\":[\"a\"],\"isr\":[\"a\"],\"min_replicas\":2,"
	    "\"primary\":\"a\",\"epoch\":1,\"state\":\"ready\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cluster_volume_rec v;
		char err[256] = "";
		assert_int_equal(
		    cluster_volume_decode(bad[i], strlen(bad[i]), &v, err, sizeof(err)), -EINVAL);
		assert_true(err[0] != '\0');
	}
	/* unknown members are ignored */
	const char *ok = "{\"name\":\"v\",\"size\":4096,\"replicas\":[\"a\"],\"isr\":[\"a\"],"
			 "\"primary\":\"a\",\"epoch\":1,\"state\":\"creating\",\"future\":[1,2]}";
	struct cluster_volume_rec v;
	char err[256];
	assert_int_equal(cluster_volume_decode(ok, strlen(ok), &v, err, sizeof(err)), 0);
	assert_int_equal(v.min_replicas, 1);
	assert_int_equal(v.state, CLUSTER_VOL_CREATING);
}

static struct cluster_node_rec sample_node(const char *name, const char *zone, uint64_t free)
{
	struct cluster_node_rec n = {
	    .incarnation = 0x9f1c0e5a7d3b2c41ULL, .naddrs = 2, .nnamespaces = 1};
	snprintf(n.node, sizeof(n.node), "%s", name);
	snprintf(n.zone, sizeof(n.zone), "%s", zone);
	strcpy(n.addrs[0], "tcp://192.0.2.11:7470");
	strcpy(n.addrs[1], "nbd://192.0.2.11:10809");
	n.namespaces[0] = (struct cluster_ns_rec){.id = 0, .size = 8ULL << 30, .free = free};
	strcpy(n.namespaces[0].persist_method, "sim");
	strcpy(n.version, "0.1.0");
	return n;
}

static void test_node_roundtrip(void **state)
{
	(void)state;
	struct cluster_node_rec n = sample_node("n1", "rack1", 4ULL << 30), back;
	char *json, err[256];
	assert_int_equal(cluster_node_encode(&n, &json), 0);
	assert_int_equal(cluster_node_decode(json, strlen(json), &back, err, sizeof(err)), 0);
	assert_memory_equal(&n, &back, sizeof(n));
	assert_string_equal(cluster_node_addr(&back, "tcp"), "tcp://192.0.2.11:7470");
	assert_null(cluster_node_addr(&back, "rdma"));
	free(json);
	const char *bad =
	    "{\"node\":\"n1\",\"incarnation\":\"xyz\",\"addrs\":{},\"namespaces\":[]}";
	assert_int_equal(cluster_node_decode(bad, strlen(bad), &back, err, sizeof(err)), -EINVAL);
	bad = "{\"node\":\"n1\",\"incarnation\":\"0000000000000001\",\"addrs\":{\"tcp\":"
	      "[\"nbd://x:1\"]},\"namespaces\":[]}";
	assert_int_equal(cluster_node_decode(bad, strlen(bad), &back, err, sizeof(err)), -EINVAL);
}

static void test_status_member_roundtrip(void **state)
{
	(void)state;
	struct cluster_status_rec s = {.resync_bytes_left = 5,
				       .resync_bytes_total = 9,
				       .resync_bytes_shipped = 4},
				  sb;
	strcpy(s.state, "resync");
	strcpy(s.link, "tcp");
	char *json, err[256];
	assert_int_equal(cluster_status_encode(&s, &json), 0);
	assert_int_equal(cluster_status_decode(json, strlen(json), &sb, err, sizeof(err)), 0);
	assert_memory_equal(&s, &sb, sizeof(s));
	free(json);
	struct cluster_member_rec m = {.ns_id = 3, .offset = 1ULL << 40}, mb;
	assert_int_equal(cluster_member_encode(&m, &json), 0);
	assert_int_equal(cluster_member_decode(json, strlen(json), &mb, err, sizeof(err)), 0);
	assert_memory_equal(&m, &mb, sizeof(m));
	free(json);
}

static void test_placement(void **state)
{
	(void)state;
	struct cluster_node_rec nodes[] = {
	    sample_node("a1", "za", 10ULL << 30), sample_node("a2", "za", 9ULL << 30),
	    sample_node("b1", "zb", 2ULL << 30),  sample_node("c1", "zc", 512ULL << 20),
	    sample_node("b2", "zb", 8ULL << 30),
	};
	unsigned chosen[CLUSTER_MAX_REPLICAS];
	char err[256];
	/* 3 of 1G: zones za (a1), zb (b2 has more than b1), zc cannot (512M) -> then a2 */
	assert_int_equal(placement_choose(nodes, 5, 1ULL << 30, 3, chosen, err, sizeof(err)), 0);
	assert_string_equal(nodes[chosen[0]].node, "a1");
	assert_string_equal(nodes[chosen[1]].node, "b2");
	assert_string_equal(nodes[chosen[2]].node, "a2");
	/* small: every zone gets one first */
	assert_int_equal(placement_choose(nodes, 5, 4096, 3, chosen, err, sizeof(err)), 0);
	assert_string_equal(nodes[chosen[0]].node, "a1");
	assert_string_equal(nodes[chosen[1]].node, "b2");
	assert_string_equal(nodes[chosen[2]].node, "c1");
	/* too big for enough nodes */
	assert_int_equal(placement_choose(nodes, 5, 9ULL << 30, 3, chosen, err, sizeof(err)),
			 -ENOSPC);
	assert_non_null(strstr(err, "5 nodes up, 2 with room"));
	assert_int_equal(placement_choose(nodes, 5, 4096, 0, chosen, err, sizeof(err)), -EINVAL);
	assert_int_equal(placement_choose(NULL, 0, 4096, 1, chosen, err, sizeof(err)), -ENOSPC);
}

/* parse -- rdaxd ARGS... through config_parse_args and config_finish */
static int parse(struct config *c, char *err, ...)
{
	char *argv[16] = {"rdaxd"};
	int n = 1;
	va_list ap;
	va_start(ap, err);
	for (char *a; (a = va_arg(ap, char *)) != NULL && n < 15;)
		argv[n++] = a;
	va_end(ap);
	config_init(c);
	int ret = config_parse_args(c, n, argv, err, 512);
	if (ret == 0)
		ret = config_finish(c, err, 512);
	return ret;
}

static void test_config_flags(void **state)
{
	(void)state;
	struct config c;
	char err[512];
	setenv("RDAX_DATA_DIR", "/nonexistent-rdax-test", 1);
	assert_int_equal(parse(&c, err, "--cluster", "etcd://127.0.0.1:2379", "--node", "n1",
			       "--zone=rack1", "--advertise", "tcp://192.0.2.11:7470",
			       "--advertise", "rdma://192.0.2.11:7471", "--cluster-name", "c1",
			       NULL),
			 0);
	assert_string_equal(c.cluster, "etcd://127.0.0.1:2379");
	assert_string_equal(c.node_name, "n1");
	assert_string_equal(c.zone, "rack1");
	assert_string_equal(c.cluster_name, "c1");
	assert_int_equal(c.nadvertise, 2);
	config_free(&c);
	/* defaults: cluster name "default", node name from the host */
	if (parse(&c, err, "--cluster", "etcd://h:1", NULL) == 0) {
		assert_string_equal(c.cluster_name, "default");
		assert_true(cluster_name_valid(c.node_name));
	} else {
		assert_non_null(strstr(err, "--node"));
	}
	config_free(&c);
	/* refused */
	assert_int_equal(parse(&c, err, "--node", "n1", NULL), -EINVAL);
	assert_non_null(strstr(err, "--node only goes with --cluster"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--cluster", "http://h:1", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--cluster", "etcd://h:1", "--node", "a/b", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(
	    parse(&c, err, "--cluster", "etcd://h:1", "--advertise", "tcp://h:0", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--format", "/x", "--cluster", "etcd://h:1", NULL),
			 -EINVAL);
	config_free(&c);
	/* --lease-ttl: 2 to 60 seconds, with --cluster only */
	assert_int_equal(
	    parse(&c, err, "--cluster", "etcd://h:1", "--node", "n1", "--lease-ttl", "3", NULL), 0);
	assert_int_equal(c.lease_ttl_s, 3);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--cluster", "etcd://h:1", "--node", "n1", NULL), 0);
	assert_int_equal(c.lease_ttl_s, 0); /* the default, CLUSTER_DEFAULT_LEASE_S */
	config_free(&c);
	assert_int_equal(
	    parse(&c, err, "--cluster", "etcd://h:1", "--node", "n1", "--lease-ttl", "1", NULL),
	    -EINVAL);
	assert_non_null(strstr(err, "from 2 to 60"));
	config_free(&c);
	assert_int_equal(
	    parse(&c, err, "--cluster", "etcd://h:1", "--node", "n1", "--lease-ttl", "5x", NULL),
	    -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--lease-ttl", "5", NULL), -EINVAL);
	assert_non_null(strstr(err, "--lease-ttl only goes with --cluster"));
	config_free(&c);
	/* --replica-busy-poll: 0 to 1000000 us, default the adaptive cap, with --cluster only */
	assert_int_equal(parse(&c, err, "--cluster", "etcd://h:1", "--node", "n1", NULL), 0);
	assert_int_equal(c.replica_busy_poll_us, CONFIG_DEFAULT_BUSY_POLL_US);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--cluster", "etcd://h:1", "--node", "n1",
			       "--replica-busy-poll", "0", NULL),
			 0);
	assert_int_equal(c.replica_busy_poll_us, 0);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--cluster", "etcd://h:1", "--node", "n1",
			       "--replica-busy-poll", "1000001", NULL),
			 -EINVAL);
	assert_non_null(strstr(err, "microseconds from 0 to 1000000"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--replica-busy-poll", "50", NULL), -EINVAL);
	assert_non_null(strstr(err, "--replica-busy-poll only goes with --cluster"));
	config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys),
	    cmocka_unit_test(test_volume_roundtrip),
	    cmocka_unit_test(test_volume_refused),
	    cmocka_unit_test(test_node_roundtrip),
	    cmocka_unit_test(test_status_member_roundtrip),
	    cmocka_unit_test(test_placement),
	    cmocka_unit_test(test_config_flags),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
