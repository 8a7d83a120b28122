/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_resync.c -- a returning replica of a 1 GiB volume gets only the delta
 *
 * etcd and two nodes (1200 MiB namespaces, sim mode) in namespaces; "big" is
 * a 1 GiB volume with --replicas 2. The replica is killed (kill -9); while it
 * is away X MiB are written through the primary (durable writes: 8 MiB
 * aligned at 100 MiB, 3 MiB at 301 MiB, which touches two 2 MiB regions
 * with 1 MiB of them unwritten, and 64 scattered 4 KiB blocks, one in each
 * of 64 other regions); it is restarted and rdaxd resyncs it while a client
 * keeps writing. Checked: it rejoins etcd's ISR; the bytes its resync
 * shipped (status key, shown by `rdax volume info --json`) are at least X
 * and at most X + 1 MiB of a 1 GiB volume -- the record marks 70 regions
 * (140 MiB), and the 4 KiB digests inside them leave only what differs; and
 * its whole copy equals the primary's (FNV-1a of both whole volumes, and the
 * bytes). The primary's metrics (rdaxd --metrics) show the resync while it
 * runs: state resync with the bytes to compare (the 70 marked regions, or
 * 71 when a write of the client landed before the resync began) and the
 * bytes left falling to 0; afterwards the bytes shipped equal the status
 * key's.
 *
 *   test_cluster_resync [--seed N]
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster_fixture.h"
#include "cluster_meta.h"
#include "librdax.h"
#include "member.h"

#define NODES	 2
#define VOL	 "big"
#define VOL_SIZE (1ULL << 30)
#define MIB	 ((uint64_t)1 << 20)

static uint64_t seed = 1;
static struct nx_cluster cl;

static int setup(void **state)
{
	(void)state;
	nx_node_ns_size = "1200M";
	nx_cluster_metrics = true;
	return nx_cluster_start(&cl, "clrsy", NODES, seed, true, NULL) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	return nx_cluster_stop(&cl);
}

static bool in_isr(const char *nd)
{
	struct cluster_volume_rec rec;
	assert_int_equal(nx_volume_key(cl.etcd.spec, VOL, &rec), 0);
	return cluster_name_in(rec.isr, rec.nisr, nd);
}

/* fill -- @len bytes from the seed and @off */
static void fill(uint8_t *buf, size_t len, uint64_t off)
{
	uint64_t s = seed ^ (off * 0x9e3779b97f4a7c15ULL);
	for (size_t i = 0; i < len; i += 8) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		memcpy(buf + i, &s, 8);
	}
}

/* durable -- a durable write of @len seeded bytes at @off through the primary's volume */
static void durable(struct rdax_volume *v, uint64_t off, uint64_t len)
{
	uint8_t *buf = malloc(len);
	assert_non_null(buf);
	fill(buf, len, off);
	assert_int_equal(rdax_write(v, off, buf, len, RDAX_WRITE_FSYNC), 0);
	free(buf);
}

/* whole -- FNV-1a of node @nd's whole copy, and the bytes into @out (VOL_SIZE) */
static uint64_t whole(const char *nd, unsigned i, uint8_t *out)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	assert_int_equal(nx_member_open(cl.etcd.spec, nd, cl.node[i].url, VOL, &c, &v), 0);
	uint64_t h = 0xcbf29ce484222325ULL;
	for (uint64_t off = 0; off < VOL_SIZE; off += 16 * MIB) {
		assert_int_equal(rdax_read(v, off, out + off, 16 * MIB), 0);
		for (uint64_t k = 0; k < 16 * MIB; k++)
			h = (h ^ out[off + k]) * 0x100000001b3ULL;
	}
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	return h;
}

/* shipped -- resync_bytes_shipped of replica @nd, from rdax volume info --json */
static uint64_t shipped(const char *nd)
{
	const char *argv[] = {RDAX_CLI_PATH, "--cluster", cl.etcd.spec, "volume",
			      "info",	     VOL,	  "--json",	NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	assert_int_equal(r.status, 0);
	char pat[32];
	snprintf(pat, sizeof(pat), "\"node\": \"%s\"", nd);
	const char *at = strstr(r.out, pat);
	assert_non_null(at);
	const char *sh = strstr(at, "\"resync_bytes_shipped\": ");
	assert_non_null(sh);
	uint64_t n = strtoull(sh + strlen("\"resync_bytes_shipped\": "), NULL, 10);
	hx_run_free(&r);
	return n;
}

/*
 * replica_metric -- the value of @family{volume="big",node="@nd"@more} in
 * the primary's scrape @text; UINT64_MAX if absent
 */
static uint64_t replica_metric(const char *text, const char *family, const char *nd,
			       const char *more)
{
	char pat[160];
	snprintf(pat, sizeof(pat), "\n%s{volume=\"" VOL "\",node=\"%s\"%s} ", family, nd, more);
	const char *at = strstr(text, pat);
	return at ? strtoull(at + strlen(pat), NULL, 10) : UINT64_MAX;
}

/* The resync as the primary's metrics show it. */
struct resync_seen {
	unsigned scrapes, during; /* scrapes, and those that saw state resync */
	uint64_t total, left_min, left_max;
};

/* scrape -- one look at the primary @p's metrics for replica @nd */
static void scrape(unsigned p, const char *nd, struct resync_seen *rs, char *text, size_t len)
{
	long n = nx_http_get(cl.node[p].metrics, text, len);
	if (n < 0)
		fail_msg("GET %s: %s", cl.node[p].metrics, strerror((int)-n));
	rs->scrapes++;
	if (replica_metric(text, "rdax_replica_state", nd, ",state=\"resync\"") != 1)
		return;
	uint64_t total = replica_metric(text, "rdax_replica_resync_bytes", nd, "");
	uint64_t left = replica_metric(text, "rdax_replica_resync_left_bytes", nd, "");
	assert_true(total != UINT64_MAX && left != UINT64_MAX && left <= total);
	if (rs->during++ == 0)
		rs->left_min = rs->left_max = left;
	rs->total = total;
	rs->left_min = left < rs->left_min ? left : rs->left_min;
	rs->left_max = left > rs->left_max ? left : rs->left_max;
}

static void test_delta_1g(void **state)
{
	(void)state;
	const char *argv[] = {RDAX_CLI_PATH, "--cluster",  cl.etcd.spec, "--timeout",
			      "60",	     "volume",	   "create",	 VOL,
			      "1G",	     "--replicas", "2",		 NULL};
	struct hx_run r;
	assert_int_equal(hx_run_argv(argv, NULL, 0, &r), 0);
	if (r.status)
		fail_msg("volume create: %s", r.err);
	hx_run_free(&r);
	struct cluster_volume_rec rec;
	assert_int_equal(nx_volume_key(cl.etcd.spec, VOL, &rec), 0);
	unsigned p = (unsigned)(rec.primary[1] - '1'), q = 1 - p;
	char pn[8], qn[8];
	snprintf(pn, sizeof(pn), "n%u", p + 1);
	snprintf(qn, sizeof(qn), "n%u", q + 1);

	struct rdax_conn *c;
	struct rdax_volume *v;
	assert_int_equal(rdax_connect(cl.node[p].url, NULL, &c), 0);
	assert_int_equal(rdax_volume_open(c, VOL, &v), 0);
	durable(v, 0, 4 * MIB); /* before: both copies have it */

	printf("  kill -9 %s (the replica)\n", qn);
	assert_int_equal(nx_node_kill(&cl.node[q]), 0);
	const uint64_t x = 8 * MIB + 3 * MIB + 64 * 4096;
	durable(v, 100 * MIB, 8 * MIB);
	durable(v, 301 * MIB, 3 * MIB);
	for (uint64_t k = 0; k < 64; k++) /* regions 256, 259, ...: none of the above */
		durable(v, (512 + 6 * k) * MIB + (k % 7) * 4096, 4096);
	assert_false(in_isr(qn));
	printf("  %.2f MiB written while %s was away (70 regions of 2 MiB touched)\n",
	       (double)x / MIB, qn);

	uint64_t before = shipped(qn);
	assert_int_equal(nx_node_restart(&cl.node[q]), 0);
	/* a client writes on (the first 2 MiB, already shipped-equal) while it resyncs */
	unsigned n = 0;
	size_t tlen = 1 << 20;
	char *text = malloc(tlen);
	assert_non_null(text);
	struct resync_seen rs = {0};
	while (!in_isr(qn)) {
		if (n++ > 1200)
			fail_msg("%s did not rejoin the ISR", qn);
		durable(v, (n % 512) * 4096, 4096);
		scrape(p, qn, &rs, text, tlen);
		usleep(20 * 1000);
	}
	for (unsigned i = 0; i < 20; i++)
		durable(v, (uint64_t)i * 4096, 4096);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	/* the status key follows within a tick (1 s): read until two reads a tick apart agree */
	uint64_t sh = 0, last = UINT64_MAX;
	for (unsigned i = 0; i < 20; i++) {
		sh = shipped(qn) - before;
		if (sh && sh == last)
			break;
		last = sh;
		usleep(1200 * 1000);
	}
	printf("  %s rejoined after %u writes during its resync; the resync shipped %" PRIu64
	       " bytes (%.2f MiB) for %.2f MiB written, of a 1 GiB volume\n",
	       qn, n, sh, (double)sh / MIB, (double)x / MIB);
	assert_true(sh >= x);
	assert_true(sh <= x + MIB);

	/* the metrics: seen during the resync, and its end */
	printf("  metrics: %u of %u scrapes saw the resync: %" PRIu64
	       " bytes to compare, left from %" PRIu64 " down to %" PRIu64 "\n",
	       rs.during, rs.scrapes, rs.total, rs.left_max, rs.left_min);
	assert_true(rs.during > 0);
	/* the 70 regions the record marks, and region 0 if a client write marked it first */
	assert_true(rs.total == 140 * MIB || rs.total == 142 * MIB);
	scrape(p, qn, &rs, text, tlen);
	uint64_t m_total = replica_metric(text, "rdax_replica_resync_bytes", qn, "");
	uint64_t m_left = replica_metric(text, "rdax_replica_resync_left_bytes", qn, "");
	uint64_t m_shipped =
	    replica_metric(text, "rdax_replica_resync_shipped_bytes_total", qn, "");
	printf("  metrics after: state live %" PRIu64 ", %" PRIu64 " to compare, %" PRIu64
	       " left, %" PRIu64 " shipped (status key: %" PRIu64 ")\n",
	       replica_metric(text, "rdax_replica_state", qn, ",state=\"live\""), m_total, m_left,
	       m_shipped, sh + before);
	assert_int_equal(replica_metric(text, "rdax_replica_state", qn, ",state=\"live\""), 1);
	assert_int_equal(m_total, rs.total);
	assert_int_equal(m_left, 0);
	assert_int_equal(m_shipped, sh + before);
	free(text);

	uint8_t *a = malloc(VOL_SIZE), *b = malloc(VOL_SIZE);
	assert_non_null(a);
	assert_non_null(b);
	uint64_t ha = whole(pn, p, a), hb = whole(qn, q, b);
	printf("  whole-volume FNV-1a: %s %016" PRIx64 ", %s %016" PRIx64 "\n", pn, ha, qn, hb);
	assert_true(ha == hb);
	assert_memory_equal(a, b, VOL_SIZE);
	free(a);
	free(b);
}

int main(int argc, char **argv)
{
	seed = nx_seed(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_delta_1g)};
	return cmocka_run_group_tests(tests, setup, teardown);
}
