/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client.c -- librdax against the real rdaxd
 *
 * One daemon (auto mode) for most cases; restart and token cases start
 * their own (restart in sim mode, where only what was written back
 * survives, so a clean stop that forgot to write back shows up).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "librdax.h"

struct fx {
	char dir[256];
	struct hx_daemon d;
	struct rdax_conn *conn;
};

static struct fx F;

/* conn_new -- a connection to @d (with its token, if any) */
static struct rdax_conn *conn_new(const struct hx_daemon *d, unsigned qd)
{
	struct rdax_conn_opts *o;
	assert_int_equal(rdax_conn_opts_new(&o), 0);
	if (d->token_file[0])
		assert_int_equal(rdax_conn_opts_set_token_file(o, d->token_file), 0);
	assert_int_equal(rdax_conn_opts_set_timeout(o, 120000), 0);
	if (qd)
		assert_int_equal(rdax_conn_opts_set_queue_depth(o, qd), 0);
	struct rdax_conn *c = NULL;
	int ret = rdax_connect(d->url, o, &c);
	if (ret != 0)
		fail_msg("rdax_connect(%s): %d %s (%s)", d->url, ret, rdax_strerror(ret),
			 rdax_connect_last_error());
	rdax_conn_opts_delete(&o);
	return c;
}

static int group_setup(void **state)
{
	(void)state;
	memset(&F, 0, sizeof(F));
	if (hx_tmpdir_make("client", F.dir, sizeof(F.dir)) < 0)
		return -1;
	struct hx_daemon_opts o = {.ns_size = "256M"};
	if (hx_daemon_start(&F.d, F.dir, &o) != 0)
		return -1;
	struct rdax_conn *c = NULL;
	if (rdax_connect(F.d.url, NULL, &c) != 0) {
		fprintf(stderr, "rdax_connect: %s\n", rdax_connect_last_error());
		return -1;
	}
	F.conn = c;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	rdax_disconnect(&F.conn);
	int ret = hx_daemon_stop(&F.d);
	if (ret == 0)
		hx_tmpdir_remove(F.dir);
	return ret == 0 ? 0 : -1;
}

/* expect -- @expr returns @code; on mismatch name both and the connection's message */
#define expect(expr, code, conn)                                                                   \
	do {                                                                                       \
		int got_ = (expr);                                                                 \
		if (got_ != (code))                                                                \
			fail_msg("%s: got %d (%s), expected %d (%s); last error: %s", #expr, got_, \
				 rdax_strerror(got_), (int)(code), rdax_strerror(code),            \
				 (conn) ? rdax_conn_last_error(conn) : "");                        \
	} while (0)

static uint64_t align_4k(uint64_t v)
{
	return (v + 4095) & ~4095ULL;
}

static struct rdax_volume *vol_new(struct rdax_conn *c, const char *name, uint64_t size)
{
	expect(rdax_volume_create(c, name, size, RDAX_NAMESPACE_ANY), 0, c);
	struct rdax_volume *v = NULL;
	expect(rdax_volume_open(c, name, &v), 0, c);
	assert_int_equal(rdax_volume_size(v), size);
	return v;
}

static void check_range(struct rdax_volume *v, uint64_t off, size_t len, uint64_t seed)
{
	uint8_t *want = malloc(len), *got = malloc(len);
	assert_non_null(want);
	assert_non_null(got);
	hx_pattern(want, len, seed, off);
	memset(got, 0xcd, len);
	expect(rdax_read(v, off, got, len), 0, F.conn);
	if (memcmp(want, got, len) != 0)
		fail_msg("read %zu bytes at %llu differs from what was written (seed %llu)", len,
			 (unsigned long long)off, (unsigned long long)seed);
	free(want);
	free(got);
}

static void write_pattern(struct rdax_volume *v, uint64_t off, size_t len, uint64_t seed,
			  unsigned flags)
{
	uint8_t *buf = malloc(len);
	assert_non_null(buf);
	hx_pattern(buf, len, seed, off);
	expect(rdax_write(v, off, buf, len, flags), 0, F.conn);
	free(buf);
}

static void check_zeros(struct rdax_volume *v, uint64_t off, size_t len)
{
	uint8_t *got = malloc(len);
	assert_non_null(got);
	memset(got, 0xcd, len);
	expect(rdax_read(v, off, got, len), 0, F.conn);
	for (size_t i = 0; i < len; i++)
		if (got[i] != 0)
			fail_msg("byte %llu is 0x%02x, expected zero",
				 (unsigned long long)(off + i), got[i]);
	free(got);
}

static void volume__management(void **state)
{
	(void)state;
	struct rdax_conn *c = F.conn;
	expect(rdax_volume_create(c, "m1", 1 << 20, RDAX_NAMESPACE_ANY), 0, c);
	expect(rdax_volume_create(c, "m2", 2 << 20, RDAX_NAMESPACE_ANY), 0, c);
	expect(rdax_volume_create(c, "m1", 1 << 20, RDAX_NAMESPACE_ANY), -EEXIST, c);
	expect(rdax_volume_create(c, "bad/name", 1 << 20, RDAX_NAMESPACE_ANY), -EINVAL, c);
	expect(rdax_volume_create(c, ".dot", 1 << 20, RDAX_NAMESPACE_ANY), -EINVAL, c);
	expect(rdax_volume_create(c, "big", 1ULL << 40, RDAX_NAMESPACE_ANY), -ENOSPC, c);
	expect(rdax_volume_create(c, "odd", 1000, RDAX_NAMESPACE_ANY), -EINVAL, c);
	expect(rdax_volume_create(c, "ns", 1 << 20, 4242), -ENOENT, c);

	struct rdax_volume_info *infos = NULL;
	size_t n = 0;
	expect(rdax_volume_list(c, &infos, &n), 0, c);
	int found = 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(infos[i].name, "m1") == 0 && infos[i].size == 1 << 20)
			found |= 1;
		if (strcmp(infos[i].name, "m2") == 0 && infos[i].size == 2 << 20)
			found |= 2;
		assert_string_not_equal(infos[i].name, "big");
	}
	assert_int_equal(found, 3);
	rdax_volume_info_free(&infos);
	assert_null(infos);

	struct rdax_volume_info *one = NULL;
	expect(rdax_volume_info(c, "m2", &one), 0, c);
	assert_string_equal(one->name, "m2");
	assert_int_equal(one->size, 2 << 20);
	rdax_volume_info_free(&one);
	expect(rdax_volume_info(c, "nosuch", &one), -ENOENT, c);

	struct rdax_volume *v = NULL;
	expect(rdax_volume_open(c, "nosuch", &v), -ENOENT, c);
	assert_null(v);
	expect(rdax_volume_delete(c, "m2"), 0, c);
	expect(rdax_volume_delete(c, "m2"), -ENOENT, c);
	expect(rdax_volume_info(c, "m2", &one), -ENOENT, c);
}

static void io__round_trips(void **state)
{
	(void)state;
	struct rdax_volume *v = vol_new(F.conn, "io", 32 << 20);
	uint32_t mp = rdax_conn_max_payload(F.conn);
	assert_true(mp >= (1 << 20));
	static const struct {
		uint64_t off;
		size_t len;
	} cases[] = {
	    {0, 1},
	    {1, 63},
	    {63, 2},
	    {4095, 4097},
	    {10000, 123457},
	    {1 << 20, 1 << 20},
	    {(2 << 20) - 1, 3},
	    {5 << 20, (9 << 20) + 17}, /* several max_payload pieces */
	    {(32 << 20) - 4096, 4096},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_pattern(v, cases[i].off, cases[i].len, 200 + i, i % 2 ? RDAX_WRITE_FSYNC : 0);
		check_range(v, cases[i].off, cases[i].len, 200 + i);
	}
	/* exactly max_payload, and one more */
	write_pattern(v, 16 << 20, mp, 300, 0);
	check_range(v, 16 << 20, mp, 300);
	write_pattern(v, 16 << 20, (size_t)mp + 1, 301, 0);
	check_range(v, 16 << 20, (size_t)mp + 1, 301);
	/* never written: zeros */
	check_zeros(v, 28 << 20, 1 << 20);
	/* client-side argument checks: nothing sent */
	uint8_t b[16] = {0};
	expect(rdax_write(v, 32 << 20, b, 1, 0), -ERANGE, F.conn);
	expect(rdax_write(v, UINT64_MAX - 3, b, 16, 0), -EOVERFLOW, F.conn);
	expect(rdax_read(v, (32 << 20) - 8, b, 16), -ERANGE, F.conn);
	expect(rdax_write(v, 0, b, 0, 0), -EINVAL, F.conn);
	expect(rdax_write(v, 0, b, 1, 0x80), -EINVAL, F.conn);
	assert_int_equal(rdax_conn_status(F.conn), 0);
	expect(rdax_volume_close(&v), 0, F.conn);
	assert_null(v);
}

/*
 * buffers__alloc_use_and_limits -- rdax_buffer_alloc over tcp://: zeroed,
 * page-aligned memory that writes and reads like any other; bad arguments,
 * a 65th buffer and a pointer that is not one are refused with the reason
 * (the rdma:// zero-copy path: test_rdma_direct in the VM)
 */
static void buffers__alloc_use_and_limits(void **state)
{
	(void)state;
	struct rdax_volume *v = vol_new(F.conn, "bufs", 4 << 20);
	void *bufs[RDAX_BUFFERS_MAX];
	expect(rdax_buffer_alloc(F.conn, 0, &bufs[0]), -EINVAL, F.conn);
	expect(rdax_buffer_alloc(F.conn, 4096, NULL), -EINVAL, F.conn);
	expect(rdax_buffer_alloc(F.conn, SIZE_MAX, &bufs[0]), -EINVAL, F.conn);
	for (int i = 0; i < RDAX_BUFFERS_MAX; i++) {
		expect(rdax_buffer_alloc(F.conn, 5000, &bufs[i]), 0, F.conn);
		assert_int_equal((uintptr_t)bufs[i] % 4096, 0);
	}
	void *extra = (void *)1;
	expect(rdax_buffer_alloc(F.conn, 4096, &extra), -ENOSPC, F.conn);
	assert_null(extra);
	assert_non_null(strstr(rdax_conn_last_error(F.conn), "buffers already"));
	uint8_t *b = bufs[3], zeros[8192] = {0};
	assert_memory_equal(b, zeros, 8192); /* rounded up to whole pages, zeroed */
	hx_pattern(b, 8192, 77, 0);
	expect(rdax_write(v, 4096, b, 8192, RDAX_WRITE_FSYNC), 0, F.conn);
	uint8_t *r = bufs[4];
	expect(rdax_read(v, 4096, r, 8192), 0, F.conn);
	assert_memory_equal(r, b, 8192);
	uint8_t other[16];
	expect(rdax_buffer_free(F.conn, other), -EINVAL, F.conn);
	assert_non_null(strstr(rdax_conn_last_error(F.conn), "not a buffer"));
	expect(rdax_buffer_free(F.conn, NULL), 0, F.conn);
	for (int i = 0; i < RDAX_BUFFERS_MAX; i += 2)
		expect(rdax_buffer_free(F.conn, bufs[i]), 0, F.conn);
	expect(rdax_buffer_free(F.conn, bufs[0]), -EINVAL, F.conn); /* freed already */
	expect(rdax_buffer_alloc(F.conn, 4096, &bufs[0]), 0, F.conn);
	expect(rdax_buffer_free(F.conn, bufs[0]), 0, F.conn);
	/* the odd ones stay: rdax_disconnect frees them (ASan's leak check would say) */
	assert_int_equal(rdax_conn_status(F.conn), 0);
	expect(rdax_volume_close(&v), 0, F.conn);
}

static void fsync__stat_and_discard(void **state)
{
	(void)state;
	struct rdax_volume *v = vol_new(F.conn, "fsd", 8 << 20);
	struct rdax_volume_stat st;
	expect(rdax_stat(v, &st), 0, F.conn);
	assert_int_equal(st.size, 8 << 20);
	assert_int_equal(st.dirty_bytes, 0);
	uint64_t fsyncs0 = st.fsyncs;

	write_pattern(v, 100, 10000, 1, 0);
	expect(rdax_stat(v, &st), 0, F.conn);
	assert_true(st.dirty_bytes >= 10000);
	assert_true(st.entries_4k >= 3);
	uint64_t wb = 0;
	expect(rdax_fsync(v, 0, 0, &wb), 0, F.conn);
	assert_true(wb >= 10000);
	expect(rdax_stat(v, &st), 0, F.conn);
	assert_int_equal(st.dirty_bytes, 0);
	assert_true(st.fsyncs > fsyncs0);
	assert_true(st.fsync_bytes >= 10000);
	/* nothing dirty: nothing written back */
	expect(rdax_fsync(v, 0, 0, &wb), 0, F.conn);
	assert_int_equal(wb, 0);

	/* range fsync: only its range */
	write_pattern(v, 0, 4096, 2, 0);
	write_pattern(v, 6 << 20, 4096, 3, 0);
	expect(rdax_fsync(v, 6 << 20, 4096, &wb), 0, F.conn);
	assert_true(wb >= 4096 && wb < 8192 + 4096);
	expect(rdax_stat(v, &st), 0, F.conn);
	assert_true(st.dirty_bytes >= 4096);
	expect(rdax_fsync(v, 0, 4096, &wb), 0, F.conn);
	expect(rdax_stat(v, &st), 0, F.conn);
	assert_int_equal(st.dirty_bytes, 0);

	/*
	 * line-exact: 64 bytes at 100 touch lines 1 and 2 of their page, so
	 * stat and fsync count 128 bytes -- over RDMA too, where librdax asks
	 * for write notices in lines (docs/rdma.md)
	 */
	write_pattern(v, 5 * 4096 + 100, 64, 5, 0);
	uint64_t touched = 128;
	expect(rdax_stat(v, &st), 0, F.conn);
	assert_int_equal(st.dirty_bytes, touched);
	expect(rdax_fsync(v, 0, 0, &wb), 0, F.conn);
	assert_int_equal(wb, touched);
	expect(rdax_stat(v, &st), 0, F.conn);
	assert_int_equal(st.dirty_bytes, 0);

	/* a whole aligned 2 MiB write: one huge entry */
	write_pattern(v, 2 << 20, 2 << 20, 4, 0);
	expect(rdax_stat(v, &st), 0, F.conn);
	assert_int_equal(st.dirty_bytes, 2 << 20);
	assert_int_equal(st.entries_2m, 1);
	/* a durable write of it: clean afterwards */
	write_pattern(v, 2 << 20, 2 << 20, 5, RDAX_WRITE_FSYNC);
	expect(rdax_stat(v, &st), 0, F.conn);
	assert_int_equal(st.dirty_bytes, 0);
	check_range(v, 2 << 20, 2 << 20, 5);

	/* discard: zeros, also unaligned, and never through a range error */
	expect(rdax_discard(v, (2 << 20) + 4096, 8192), 0, F.conn);
	check_zeros(v, (2 << 20) + 4096, 8192);
	check_range(v, 2 << 20, 4096, 5);
	check_range(v, (2 << 20) + 12288, 4096, 5 /* pattern is by absolute offset */);
	expect(rdax_discard(v, (3 << 20) + 5, 10), 0, F.conn);
	check_zeros(v, (3 << 20) + 5, 10);
	check_range(v, 3 << 20, 5, 5);
	check_range(v, (3 << 20) + 15, 100, 5);
	expect(rdax_discard(v, 0, 0), -EINVAL, F.conn);
	expect(rdax_discard(v, 8 << 20, 1), -ERANGE, F.conn);
	expect(rdax_fsync(v, 9 << 20, 1, NULL), -ERANGE, F.conn);
	/* hammer mode works as a baseline */
	write_pattern(v, 0, 4096, 6, 0);
	expect(rdax_fsync_flags(v, 0, 0, RDAX_FSYNC_HAMMER, &wb), 0, F.conn);
	assert_true(wb >= 4096);
	expect(rdax_stat(v, &st), 0, F.conn);
	assert_int_equal(st.dirty_bytes, 0);
	expect(rdax_volume_close(&v), 0, F.conn);
}

/* an open volume cannot be deleted, from any connection */
static void volume__delete_open_is_ebusy(void **state)
{
	(void)state;
	struct rdax_volume *v = vol_new(F.conn, "busy", 1 << 20);
	write_pattern(v, 0, 4096, 9, RDAX_WRITE_FSYNC);
	struct rdax_conn *other = conn_new(&F.d, 0);
	expect(rdax_volume_delete(other, "busy"), -EBUSY, other);
	expect(rdax_volume_delete(F.conn, "busy"), -EBUSY, F.conn);
	check_range(v, 0, 4096, 9);
	/* disconnect with a volume open: refused, nothing done */
	struct rdax_conn *c = F.conn;
	expect(rdax_disconnect(&c), -EBUSY, F.conn);
	assert_non_null(c);
	expect(rdax_volume_close(&v), 0, F.conn);
	expect(rdax_volume_delete(other, "busy"), 0, other);
	assert_int_equal(rdax_disconnect(&other), 0);
}

/* asynchronous API: many requests in flight, cookies reported exactly once */
static void async__many_in_flight(void **state)
{
	(void)state;
	enum { QD = 128, OPS = 2048, BS = 4096 };
	struct rdax_conn *c = conn_new(&F.d, QD);
	expect(rdax_volume_create(c, "async", (uint64_t)OPS * BS, RDAX_NAMESPACE_ANY), 0, c);
	struct rdax_volume *v = NULL;
	expect(rdax_volume_open(c, "async", &v), 0, c);
	uint8_t *src = malloc((size_t)OPS * BS), *dst = malloc((size_t)OPS * BS);
	uint8_t *seen = calloc(OPS + 64, 1);
	assert_non_null(src);
	assert_non_null(dst);
	assert_non_null(seen);
	hx_pattern(src, (size_t)OPS * BS, 42, 0);

	/* writes in a scrambled order, an fsync every 256, all pipelined */
	unsigned submitted = 0, completed = 0, max_inflight = 0, fsyncs = 0;
	struct rdax_completion comp[64];
	while (completed < OPS + fsyncs) {
		while (submitted < OPS && rdax_inflight(c) < QD) {
			unsigned blk = (submitted * 1237u) % OPS; /* 1237 is odd: a permutation */
			int ret = rdax_submit_write(v, (uint64_t)blk * BS, src + (size_t)blk * BS,
						    BS, 0, blk);
			if (ret == -EAGAIN)
				break;
			expect(ret, 0, c);
			submitted++;
			if (submitted % 256 == 0 && rdax_inflight(c) < QD) {
				expect(rdax_submit_fsync(v, 0, 0, 0, OPS + fsyncs), 0, c);
				fsyncs++;
			}
		}
		if (rdax_inflight(c) > max_inflight)
			max_inflight = rdax_inflight(c);
		int n = rdax_wait_completions(c, comp, 64, 1, 60000);
		if (n <= 0)
			fail_msg("rdax_wait_completions: %d (%s) with %u in flight", n,
				 rdax_strerror(n), rdax_inflight(c));
		for (int i = 0; i < n; i++) {
			if (comp[i].status != 0)
				fail_msg("op %llu failed: %s", (unsigned long long)comp[i].cookie,
					 rdax_strerror(comp[i].status));
			assert_true(comp[i].cookie < OPS + 64);
			assert_int_equal(seen[comp[i].cookie], 0);
			seen[comp[i].cookie] = 1;
			if (comp[i].cookie < OPS) {
				assert_int_equal(comp[i].op, RDAX_OP_WRITE);
				assert_int_equal(comp[i].bytes, BS);
			} else {
				assert_int_equal(comp[i].op, RDAX_OP_FSYNC);
			}
		}
		completed += (unsigned)n;
	}
	assert_true(max_inflight > 16); /* the pipeline was actually used */
	assert_int_equal(rdax_inflight(c), 0);

	/* read back asynchronously, 16 KiB at a time, and a durable async write */
	memset(seen, 0, OPS + 64);
	memset(dst, 0xcd, (size_t)OPS * BS);
	unsigned rops = OPS / 4;
	submitted = completed = 0;
	while (completed < rops) {
		while (submitted < rops && rdax_inflight(c) < QD) {
			expect(rdax_submit_read(v, (uint64_t)submitted * 4 * BS,
						dst + (size_t)submitted * 4 * BS, 4 * BS,
						submitted),
			       0, c);
			submitted++;
		}
		int n = rdax_wait_completions(c, comp, 64, 1, 60000);
		assert_true(n > 0);
		for (int i = 0; i < n; i++) {
			assert_int_equal(comp[i].status, 0);
			assert_int_equal(comp[i].op, RDAX_OP_READ);
			assert_int_equal(comp[i].bytes, 4 * BS);
			assert_int_equal(seen[comp[i].cookie], 0);
			seen[comp[i].cookie] = 1;
		}
		completed += (unsigned)n;
	}
	assert_memory_equal(src, dst, (size_t)OPS * BS);

	/* an async op larger than max_payload completes once (in a volume of its own) */
	uint32_t mp = rdax_conn_max_payload(c);
	size_t big = (size_t)mp * 2 + 5;
	struct rdax_volume *vb = NULL;
	expect(rdax_volume_create(c, "async-big", align_4k(big), RDAX_NAMESPACE_ANY), 0, c);
	expect(rdax_volume_open(c, "async-big", &vb), 0, c);
	uint8_t *bsrc = malloc(big), *bdst = malloc(big);
	assert_non_null(bsrc);
	assert_non_null(bdst);
	hx_pattern(bsrc, big, 43, 0);
	expect(rdax_submit_write(vb, 0, bsrc, big, RDAX_WRITE_FSYNC, 7777), 0, c);
	int n = rdax_wait_completions(c, comp, 64, 1, 60000);
	assert_int_equal(n, 1);
	assert_int_equal(comp[0].cookie, 7777);
	assert_int_equal(comp[0].status, 0);
	assert_int_equal(comp[0].bytes, big);
	expect(rdax_read(vb, 0, bdst, big), 0, c);
	assert_memory_equal(bsrc, bdst, big);
	struct rdax_volume_stat st;
	expect(rdax_stat(vb, &st), 0, c);
	assert_int_equal(st.dirty_bytes, 0); /* the durable write left nothing dirty */
	expect(rdax_volume_close(&vb), 0, c);
	free(bsrc);
	free(bdst);
	/* an async error is reported per operation; the connection stays usable */
	expect(rdax_submit_read(v, (uint64_t)OPS * BS - 1, dst, 2, 1), -ERANGE, c);
	free(src);
	free(dst);
	free(seen);
	expect(rdax_volume_close(&v), 0, c);
	assert_int_equal(rdax_disconnect(&c), 0);
}

struct thr {
	int idx;
	const struct hx_daemon *d;
	const char *vol;
	uint64_t off, len;
	int rounds;
	int failed;
	char why[256];
};

/* thr_main -- own connection; write, fsync, read back, a few rounds */
static void *thr_main(void *p)
{
	struct thr *t = p;
	struct rdax_conn *c = NULL;
	struct rdax_volume *v = NULL;
	uint8_t *buf = malloc(t->len), *back = malloc(t->len);
	if (rdax_connect(t->d->url, NULL, &c) != 0) {
		snprintf(t->why, sizeof(t->why), "connect: %s", rdax_connect_last_error());
		goto fail;
	}
	int ret = rdax_volume_open(c, t->vol, &v);
	if (ret) {
		snprintf(t->why, sizeof(t->why), "open %s: %s", t->vol, rdax_strerror(ret));
		goto fail;
	}
	for (int r = 0; r < t->rounds; r++) {
		uint64_t seed = (uint64_t)t->idx * 1000 + (uint64_t)r;
		hx_pattern(buf, t->len, seed, t->off);
		ret = rdax_write(v, t->off, buf, t->len, r % 2 ? RDAX_WRITE_FSYNC : 0);
		if (!ret && r % 2 == 0)
			ret = rdax_fsync(v, t->off, t->len, NULL);
		if (!ret)
			ret = rdax_read(v, t->off, back, t->len);
		if (ret) {
			snprintf(t->why, sizeof(t->why), "round %d: %s (%s)", r, rdax_strerror(ret),
				 rdax_conn_last_error(c));
			goto fail;
		}
		if (memcmp(buf, back, t->len) != 0) {
			snprintf(t->why, sizeof(t->why), "round %d: read back differs", r);
			goto fail;
		}
	}
	goto out;
fail:
	t->failed = 1;
out:
	if (v)
		rdax_volume_close(&v);
	rdax_disconnect(&c);
	free(buf);
	free(back);
	return NULL;
}

/* 16 threads, each with its own connection: 8 own volumes, 8 on one shared volume */
static void clients__many_threads_at_once(void **state)
{
	(void)state;
	enum { N = 16 };
	char names[N][16];
	struct thr t[N];
	pthread_t th[N];
	expect(rdax_volume_create(F.conn, "shared16", 16 << 20, RDAX_NAMESPACE_ANY), 0, F.conn);
	for (int i = 0; i < N; i++) {
		t[i] = (struct thr){.idx = i, .d = &F.d, .rounds = 6};
		if (i < N / 2) {
			snprintf(names[i], sizeof(names[i]), "thr%d", i);
			expect(rdax_volume_create(F.conn, names[i], 4 << 20, RDAX_NAMESPACE_ANY), 0,
			       F.conn);
			t[i].vol = names[i];
			t[i].off = (uint64_t)i * 4099;
			t[i].len = (3 << 20) + (uint64_t)i;
		} else {
			t[i].vol = "shared16";
			/* disjoint, unaligned, sharing 4 KiB pages with the neighbours */
			t[i].off = (uint64_t)(i - N / 2) * (2 << 20) + 1000;
			t[i].len = (2 << 20) - 1000;
		}
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(pthread_create(&th[i], NULL, thr_main, &t[i]), 0);
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N; i++)
		if (t[i].failed)
			fail_msg("thread %d (%s): %s", i, t[i].vol, t[i].why);
	/* the shared volume as a whole */
	struct rdax_volume *v = NULL;
	expect(rdax_volume_open(F.conn, "shared16", &v), 0, F.conn);
	for (int i = N / 2; i < N; i++)
		check_range(v, t[i].off, t[i].len, (uint64_t)i * 1000 + 5);
	check_zeros(v, 0, 1000);
	expect(rdax_volume_close(&v), 0, F.conn);
}

/* a clean stop (SIGTERM) writes back what was written and never fsynced */
static void restart__data_intact_after_clean_stop(void **state)
{
	(void)state;
	char dir[256];
	assert_int_equal(hx_tmpdir_make("client-restart", dir, sizeof(dir)), 0);
	struct hx_daemon d;
	struct hx_daemon_opts o = {.ns_size = "64M", .mode = "sim"};
	assert_int_equal(hx_daemon_start(&d, dir, &o), 0);
	struct rdax_conn *c = conn_new(&d, 0);
	struct rdax_volume *v1 = vol_new(c, "r1", 8 << 20);
	struct rdax_volume *v2 = vol_new(c, "r2", 4 << 20);
	uint8_t *buf = malloc(6 << 20);
	assert_non_null(buf);
	hx_pattern(buf, 6 << 20, 61, 777);
	expect(rdax_write(v1, 777, buf, 6 << 20, 0), 0, c); /* never fsynced */
	hx_pattern(buf, 4 << 20, 62, 0);
	expect(rdax_write(v2, 0, buf, 4 << 20, RDAX_WRITE_FSYNC), 0, c);
	expect(rdax_discard(v2, 4096, 4096), 0, c);
	expect(rdax_volume_close(&v1), 0, c);
	expect(rdax_volume_close(&v2), 0, c);
	assert_int_equal(rdax_disconnect(&c), 0);
	assert_int_equal(hx_daemon_stop(&d), 0);

	assert_int_equal(hx_daemon_restart(&d), 0);
	c = conn_new(&d, 0);
	expect(rdax_volume_open(c, "r1", &v1), 0, c);
	expect(rdax_volume_open(c, "r2", &v2), 0, c);
	uint8_t *back = malloc(8 << 20);
	assert_non_null(back);
	expect(rdax_read(v1, 0, back, 8 << 20), 0, c);
	hx_pattern(buf, 6 << 20, 61, 777);
	for (size_t i = 0; i < 777; i++)
		assert_int_equal(back[i], 0);
	if (memcmp(back + 777, buf, 6 << 20) != 0)
		fail_msg("r1: data written (not fsynced) before a clean stop is not intact");
	expect(rdax_read(v2, 0, back, 4 << 20), 0, c);
	hx_pattern(buf, 4 << 20, 62, 0);
	memset(buf + 4096, 0, 4096);
	if (memcmp(back, buf, 4 << 20) != 0)
		fail_msg("r2: durable write + discard not intact after restart");
	expect(rdax_volume_close(&v1), 0, c);
	expect(rdax_volume_close(&v2), 0, c);
	assert_int_equal(rdax_disconnect(&c), 0);
	assert_int_equal(hx_daemon_stop(&d), 0);
	free(buf);
	free(back);
	hx_tmpdir_remove(dir);
}

static void token__checked_on_connect(void **state)
{
	(void)state;
	char dir[256], tok[320];
	assert_int_equal(hx_tmpdir_make("client-token", dir, sizeof(dir)), 0);
	snprintf(tok, sizeof(tok), "%s/token", dir);
	assert_int_equal(hx_write_file(tok, "tok-123\n", 8), 0);
	struct hx_daemon d;
	struct hx_daemon_opts o = {.ns_size = "16M", .token_file = tok};
	assert_int_equal(hx_daemon_start(&d, dir, &o), 0);

	struct rdax_conn *c = NULL;
	assert_int_equal(rdax_connect(d.url, NULL, &c), -RDAX_E_ACCESS);
	assert_null(c);
	struct rdax_conn_opts *opts;
	assert_int_equal(rdax_conn_opts_new(&opts), 0);
	assert_int_equal(rdax_conn_opts_set_token(opts, "tok-124", 7), 0);
	assert_int_equal(rdax_connect(d.url, opts, &c), -RDAX_E_ACCESS);
	assert_int_equal(rdax_conn_opts_set_token(opts, "tok-1234", 8), 0);
	assert_int_equal(rdax_connect(d.url, opts, &c), -RDAX_E_ACCESS);
	assert_int_equal(rdax_conn_opts_set_token(opts, "tok-123", 7), 0);
	assert_int_equal(rdax_connect(d.url, opts, &c), 0);
	struct rdax_volume *v = vol_new(c, "tv", 1 << 20);
	expect(rdax_volume_close(&v), 0, c);
	assert_int_equal(rdax_disconnect(&c), 0);
	assert_int_equal(rdax_conn_opts_set_token_file(opts, tok), 0);
	assert_int_equal(rdax_connect(d.url, opts, &c), 0);
	assert_int_equal(rdax_disconnect(&c), 0);
	rdax_conn_opts_delete(&opts);
	assert_int_equal(hx_daemon_stop(&d), 0);
	hx_tmpdir_remove(dir);
}

/* the daemon's SIGKILL breaks the connection: calls fail, none hangs */
static void conn__daemon_gone(void **state)
{
	(void)state;
	char dir[256];
	assert_int_equal(hx_tmpdir_make("client-gone", dir, sizeof(dir)), 0);
	struct hx_daemon d;
	struct hx_daemon_opts o = {.ns_size = "16M"};
	assert_int_equal(hx_daemon_start(&d, dir, &o), 0);
	struct rdax_conn *c = conn_new(&d, 0);
	struct rdax_volume *v = vol_new(c, "g", 1 << 20);
	assert_int_equal(hx_daemon_kill(&d), 0);
	uint8_t b[4096] = {1};
	int ret = rdax_write(v, 0, b, sizeof(b), RDAX_WRITE_FSYNC);
	assert_true(ret < 0);
	assert_true(rdax_conn_status(c) < 0);
	assert_true(rdax_read(v, 0, b, sizeof(b)) < 0);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	assert_int_equal(rdax_connect(d.url, NULL, &c), -ECONNREFUSED);
	hx_tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(volume__management),
	    cmocka_unit_test(io__round_trips),
	    cmocka_unit_test(buffers__alloc_use_and_limits),
	    cmocka_unit_test(fsync__stat_and_discard),
	    cmocka_unit_test(volume__delete_open_is_ebusy),
	    cmocka_unit_test(async__many_in_flight),
	    cmocka_unit_test(clients__many_threads_at_once),
	    cmocka_unit_test(restart__data_intact_after_clean_stop),
	    cmocka_unit_test(token__checked_on_connect),
	    cmocka_unit_test(conn__daemon_gone),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
