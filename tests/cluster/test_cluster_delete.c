/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_delete.c -- deleting a replicated volume (docs/cluster.md, "Delete")
 *
 * etcd and three rdaxd nodes (--lease-ttl=2, sim mode, 64 MiB namespaces)
 * in network namespaces. A bystander volume "bv" (--replicas 3) with data
 * of its own lives through every round, and is read back intact after each.
 *
 *   basic     "dv" (40 MiB: two of them do not fit in a node's namespace),
 *             --replicas 3, data written and fsynced; rdax --cluster volume
 *             delete exits 0; then no node has the copy or its change record
 *             (asked of each node directly), no key under volumes/dv is left
 *             in etcd, and creating "dv" again with the same size succeeds
 *             (the space was freed) and reads zeros where the data was
 *   down      "dk", a replica's node (the seed picks which, the primary
 *             too) killed (kill -9) and its lease gone:
 *             delete --timeout 3 exits 1 naming that node as down, the key
 *             stays "deleting", the other copies are gone, and create of the
 *             name is refused saying it is still being deleted; the node
 *             restarted deletes its copy at start and the key goes
 *   open      "dc" held open by a client (librdax) that wrote to it: delete
 *             sent to another node (--server: the node runs the Delete txn
 *             and waits 10 s) exits 1 naming the primary's copy as held open; the
 *             client's next write fails with ENOENT and a message that says
 *             the volume is being deleted (no crash: every node still
 *             serves); once the client closes its handle the delete ends
 *
 * Control (--control, its own ctest): every node runs with delete-keep-copy
 * (a member drops its member key but keeps its copy); the basic round must
 * find copies left on the nodes.
 *
 *   test_cluster_delete [--seed N]     the rounds
 *   test_cluster_delete --control      the control
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "cluster_meta.h"
#include "etcd.h"
#include "librdax.h"
#include "member.h"

#define NODES	 3
#define DATA_OFF (1ULL << 20)
#define DATA_LEN (256U << 10)

static struct nx_cluster cl;
static int failures;
static uint8_t bv_data[DATA_LEN];

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* rdax_cl -- "rdax --cluster SPEC --timeout @timeout ARGS..." into @r; the exit status (-1: not
 * run) */
static int rdax_cl(struct hx_run *r, const char *timeout, const void *in, size_t in_len, ...)
{
	const char *argv[24] = {RDAX_CLI_PATH, "--cluster", cl.etcd.spec, "--timeout", timeout};
	int n = 5;
	va_list ap;
	va_start(ap, in_len);
	const char *a;
	while ((a = va_arg(ap, const char *)) != NULL && n < 23)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	if (hx_run_argv(argv, in, in_len, r) != 0)
		return -1;
	return r->status;
}

/* fill -- @len bytes drawn from @seed */
static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = hx_splitmix64(&seed);
		memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* create -- volume create NAME SIZE --replicas 3; true if it exited 0 */
static bool create(const char *name, const char *size)
{
	struct hx_run r;
	int st =
	    rdax_cl(&r, "20", NULL, 0, "volume", "create", name, size, "--replicas", "3", NULL);
	if (st != 0)
		printf("FAIL: volume create %s %s: exit %d: %s", name, size, st,
		       st >= 0 ? r.err : "");
	if (st >= 0)
		hx_run_free(&r);
	if (st != 0)
		failures++;
	return st == 0;
}

/* write_data -- @len bytes of @buf at @off of @name, fsynced, through the primary */
static bool write_data(const char *name, uint64_t off, const uint8_t *buf, size_t len)
{
	char offs[32];
	struct hx_run r;
	snprintf(offs, sizeof(offs), "%" PRIu64, off);
	int st = rdax_cl(&r, "20", buf, len, "write", name, offs, "--fsync", NULL);
	NX_CHECK(st == 0, "write %s: exit %d: %s", name, st, st >= 0 ? r.err : "");
	if (st >= 0)
		hx_run_free(&r);
	return st == 0;
}

/* read_equal -- do @len bytes at @off of @name (through the primary) equal @want? */
static bool read_equal(const char *name, uint64_t off, const uint8_t *want, size_t len)
{
	char offs[32], lens[32];
	struct hx_run r;
	snprintf(offs, sizeof(offs), "%" PRIu64, off);
	snprintf(lens, sizeof(lens), "%zu", len);
	int st = rdax_cl(&r, "20", NULL, 0, "read", name, offs, lens, NULL);
	bool ok = st == 0 && r.out_len == len && memcmp(r.out, want, len) == 0;
	if (!ok)
		printf("  read %s: exit %d, %zu bytes%s: %s", name, st, st >= 0 ? r.out_len : 0,
		       st == 0 ? " (not the bytes expected)" : "", st >= 0 ? r.err : "\n");
	if (st >= 0)
		hx_run_free(&r);
	return ok;
}

/* has_local -- does node @i hold a local volume @name (its own volume info, not the cluster's)? */
static bool has_local(unsigned i, const char *name)
{
	struct hx_run r;
	if (nx_node_cli(&cl.node[i], 20, NULL, 0, &r, "volume", "info", name, NULL) != 0)
		return true; /* cannot tell: counted as left */
	bool yes = r.status == 0;
	hx_run_free(&r);
	return yes;
}

/* copies_left -- how many copies or change records of @name the nodes hold (each asked) */
static unsigned copies_left(const char *name, bool say)
{
	char rrec[64];
	unsigned n = 0;
	snprintf(rrec, sizeof(rrec), "%s%s", name, CLUSTER_RECORD_SUFFIX);
	for (unsigned i = 0; i < NODES; i++) {
		bool copy = has_local(i, name), rec = has_local(i, rrec);
		if ((copy || rec) && say)
			printf("  n%u still has%s%s%s\n", i + 1, copy ? " the copy" : "",
			       copy && rec ? " and" : "", rec ? " the change record" : "");
		n += copy + rec;
	}
	return n;
}

/* keys_left -- how many keys volumes/@name and volumes/@name/... etcd holds (-1: unreadable) */
static long keys_left(const char *name)
{
	char key[CLUSTER_KEY_MAX], sub[CLUSTER_KEY_MAX], why[256];
	struct etcd_client *e;
	struct etcd_range_result r1, r2;
	cluster_key(key, sizeof(key), "default", "volumes", name, NULL);
	cluster_key(sub, sizeof(sub), "default", "volumes", name, "", NULL);
	if (etcd_client_new(cl.etcd.spec, NULL, &e, why, sizeof(why)))
		return -1;
	long n = -1;
	if (etcd_get(e, key, false, &r1) == 0) {
		if (etcd_get(e, sub, true, &r2) == 0) {
			n = (long)(r1.count + r2.count);
			etcd_range_result_free(&r2);
		}
		etcd_range_result_free(&r1);
	}
	etcd_client_delete(&e);
	return n;
}

/* node_key_gone -- until node @i's key is gone (its lease expired), at most @ms */
static bool node_key_gone(unsigned i, unsigned ms)
{
	char key[CLUSTER_KEY_MAX], name[8], why[256];
	struct etcd_client *e;
	snprintf(name, sizeof(name), "n%u", i + 1);
	cluster_key(key, sizeof(key), "default", "nodes", name, NULL);
	if (etcd_client_new(cl.etcd.spec, NULL, &e, why, sizeof(why)))
		return false;
	bool gone = false;
	for (uint64_t end = now_ms() + ms; !gone && now_ms() < end;) {
		struct etcd_range_result r;
		if (etcd_get(e, key, false, &r) == 0) {
			gone = r.count == 0;
			etcd_range_result_free(&r);
		}
		if (!gone)
			usleep(200 * 1000);
	}
	etcd_client_delete(&e);
	return gone;
}

/* wait_gone -- until no key of @name is left and no node holds its copy, at most @ms */
static bool wait_gone(const char *name, unsigned ms)
{
	for (uint64_t end = now_ms() + ms;;) {
		if (keys_left(name) == 0 && copies_left(name, false) == 0)
			return true;
		if (now_ms() >= end)
			return false;
		usleep(250 * 1000);
	}
}

/* primary_of -- the index of volume @name's primary, or -1 */
static int primary_of(const char *name)
{
	struct cluster_volume_rec v;
	if (nx_volume_key(cl.etcd.spec, name, &v))
		return -1;
	return v.primary[0] == 'n' ? v.primary[1] - '1' : -1;
}

/* bystander_intact -- bv reads back as written (the other volumes keep serving) */
static void bystander_intact(const char *after)
{
	NX_CHECK(read_equal("bv", DATA_OFF, bv_data, sizeof(bv_data)),
	      "the bystander bv does not read back as written after %s", after);
}

/* round_basic -- delete with every node up; the copies, the keys and the space go */
static void round_basic(uint64_t seed)
{
	static uint8_t data[DATA_LEN], zeros[DATA_LEN];
	printf("round basic\n");
	if (!create("dv", "40M"))
		return;
	fill(data, sizeof(data), seed);
	write_data("dv", DATA_OFF, data, sizeof(data));
	NX_CHECK(copies_left("dv", false) == 2 * NODES, "dv: not every node has its copy and record");
	struct hx_run r;
	int st = rdax_cl(&r, "20", NULL, 0, "volume", "delete", "dv", NULL);
	NX_CHECK(st == 0, "volume delete dv: exit %d: %s", st, st >= 0 ? r.err : "");
	if (st >= 0)
		hx_run_free(&r);
	unsigned left = copies_left("dv", true);
	NX_CHECK(left == 0, "after the delete, %u copies or records of dv are left", left);
	long keys = keys_left("dv");
	NX_CHECK(keys == 0, "after the delete, %ld keys of dv are left in etcd", keys);
	printf("  deleted: %u copies or records left, %ld keys left\n", left, keys);
	/* 40 MiB twice does not fit in a node's 64 MiB: the create needs the space freed */
	if (create("dv", "40M")) {
		NX_CHECK(read_equal("dv", DATA_OFF, zeros, sizeof(zeros)),
		      "dv created again does not read zeros where the old data was");
		printf("  created again with the same size: reads zeros\n");
		st = rdax_cl(&r, "20", NULL, 0, "volume", "delete", "dv", NULL);
		NX_CHECK(st == 0, "volume delete dv (again): exit %d", st);
		if (st >= 0)
			hx_run_free(&r);
	}
	bystander_intact("round basic");
}

/* round_down -- a replica's node is down during the delete; it deletes its copy when back */
static void round_down(uint64_t seed)
{
	static uint8_t data[DATA_LEN];
	printf("round down\n");
	if (!create("dk", "8M"))
		return;
	fill(data, sizeof(data), seed ^ 0xd0);
	write_data("dk", DATA_OFF, data, sizeof(data));
	int p = primary_of("dk");
	NX_CHECK(p >= 0, "dk has no primary");
	unsigned victim = (unsigned)(seed % NODES); /* the seed picks it: the primary too */
	printf("  kill -9 n%u (primary n%d)\n", victim + 1, p + 1);
	nx_node_kill(&cl.node[victim]);
	NX_CHECK(node_key_gone(victim, 15000), "n%u's key did not go after its kill", victim + 1);
	struct hx_run r;
	char name[8];
	snprintf(name, sizeof(name), "n%u", victim + 1);
	int st = rdax_cl(&r, "3", NULL, 0, "volume", "delete", "dk", NULL);
	if (st >= 0) {
		printf("  delete --timeout 3: exit %d: %s", st, r.err);
		NX_CHECK(st == 1 && strstr(r.err, name) && strstr(r.err, "down"),
		      "delete with n%u down: exit %d, not naming it as down", victim + 1, st);
		hx_run_free(&r);
	} else {
		NX_CHECK(false, "delete with n%u down: not run", victim + 1);
	}
	struct cluster_volume_rec v;
	NX_CHECK(nx_volume_key(cl.etcd.spec, "dk", &v) == 0 && v.state == CLUSTER_VOL_DELETING,
	      "the key of dk is not kept \"deleting\" while n%u is down", victim + 1);
	for (unsigned i = 0; i < NODES; i++)
		if (i != victim)
			NX_CHECK(!has_local(i, "dk"), "n%u still has dk while n%u is down", i + 1,
			      victim + 1);
	st = rdax_cl(&r, "20", NULL, 0, "volume", "create", "dk", "8M", "--replicas", "2", NULL);
	if (st >= 0) {
		printf("  create meanwhile: exit %d: %s", st, r.err);
		NX_CHECK(st == 1 && strstr(r.err, "still being deleted"),
		      "create of a deleting name: exit %d, not saying it is being deleted", st);
		hx_run_free(&r);
	}
	NX_CHECK(nx_node_restart(&cl.node[victim]) == 0, "n%u does not restart", victim + 1);
	bool gone = wait_gone("dk", 20000);
	NX_CHECK(gone, "dk is not gone 20 s after n%u came back", victim + 1);
	if (!gone)
		copies_left("dk", true);
	else
		printf("  n%u back: it deleted its copy, the keys are gone\n", victim + 1);
	bystander_intact("round down");
}

/* round_open -- a client holds the volume open and writes while it is deleted */
static void round_open(uint64_t seed)
{
	static uint8_t data[DATA_LEN];
	printf("round open\n");
	if (!create("dc", "8M"))
		return;
	int p = primary_of("dc");
	NX_CHECK(p >= 0, "dc has no primary");
	if (p < 0)
		return;
	struct rdax_conn *c = NULL;
	struct rdax_volume *vol = NULL;
	fill(data, sizeof(data), seed ^ 0xc0);
	int ret = rdax_connect(cl.node[p].url, NULL, &c);
	if (ret == 0)
		ret = rdax_volume_open(c, "dc", &vol);
	if (ret == 0)
		ret = rdax_write(vol, DATA_OFF, data, sizeof(data), RDAX_WRITE_FSYNC);
	NX_CHECK(ret == 0, "a client of dc on n%d: %s", p + 1, rdax_strerror(ret));
	if (ret) {
		rdax_volume_close(&vol);
		rdax_disconnect(&c);
		return;
	}
	/* sent to another node: it runs the Delete txn and answers after its 10 s wait */
	struct hx_run r;
	unsigned other = (unsigned)(p + 1) % NODES;
	int st = nx_node_cli(&cl.node[other], 30, NULL, 0, &r, "volume", "delete", "dc", NULL) == 0
		     ? r.status
		     : -1;
	if (st >= 0) {
		printf("  delete via n%u while open: exit %d: %s", other + 1, st, r.err);
		NX_CHECK(st == 1 && strstr(r.err, "holds it open"),
		      "delete of an open volume: exit %d, not saying its copy is held open", st);
		hx_run_free(&r);
	}
	ret = rdax_write(vol, DATA_OFF, data, 4096, RDAX_WRITE_FSYNC);
	const char *msg = rdax_conn_last_error(c);
	printf("  the client's next write: %s: %s\n", rdax_strerror(ret), msg ? msg : "");
	NX_CHECK(ret == -ENOENT && msg && strstr(msg, "being deleted"),
	      "the write after the delete: %s (%s), not a clear ENOENT", rdax_strerror(ret),
	      msg ? msg : "");
	for (unsigned i = 0; i < NODES; i++)
		NX_CHECK(nx_node_state(&cl.node[i]) != '?', "n%u is gone", i + 1);
	bystander_intact("a write to a deleting volume");
	rdax_volume_close(&vol);
	rdax_disconnect(&c);
	bool gone = wait_gone("dc", 20000);
	NX_CHECK(gone, "dc is not gone 20 s after its client closed it");
	if (!gone)
		copies_left("dc", true);
	else
		printf("  the client closed it: every copy and key is gone\n");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	uint64_t seed = nx_seed(argc, argv);
	bool control = false;
	for (int i = 1; i < argc; i++)
		control = control || strcmp(argv[i], "--control") == 0;
	nx_cluster_extra_arg = "--lease-ttl=2";
	if (nx_cluster_start(&cl, "cldel", NODES, seed, true, NULL))
		return 1;
	if (!cl.net.isolated) {
		printf("SKIP: the nodes need network namespaces: %s\n", cl.net.why);
		nx_cluster_stop(&cl);
		return 77;
	}
	if (control && nx_cluster_restart_all(&cl, "delete-keep-copy"))
		return 1;
	sleep(2); /* every node's key is up */
	if (!create("bv", "8M"))
		return 1;
	fill(bv_data, sizeof(bv_data), seed ^ 0xb0);
	write_data("bv", DATA_OFF, bv_data, sizeof(bv_data));
	round_basic(seed);
	if (control) {
		printf("control delete-keep-copy: %s\n",
		       failures ? "caught (copies left after the delete)" : "NOT caught");
		nx_cluster_stop(&cl);
		return failures ? 0 : 1;
	}
	round_down(seed);
	round_open(seed);
	printf("%d finding(s)\n", failures);
	if (nx_cluster_stop(&cl))
		failures++;
	return failures ? 1 : 0;
}
