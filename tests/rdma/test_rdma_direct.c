/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rdma_direct.c -- what only RDMA has: one-sided access, its isolation,
 * its write notices, and connections that end with operations in flight
 *
 * Runs inside the VM (tests/rdma/vm-suite.sh) with RDAX_IT_RDMA set; the
 * daemon mode and namespace come from the environment like every harness
 * test (harness.h). Without RDAX_IT_RDMA it exits 77 (skipped) and says why.
 *
 * Isolation: a second client that uses a first client's rkey and address
 * -- with a connection of its own, through its own queue pair -- must fail
 * (remote access error) and change nothing; the control beside it is the
 * second client writing through its own window, which must work, so the
 * failure comes from the isolation and not from a broken path. A closed
 * handle and a disconnected client lose their access the same way.
 *
 * Write notices name 64-byte lines for a client that asks (librdax does):
 * an fsync after a small unaligned one-sided write writes back exactly the
 * lines it touched; a client that does not ask (the raw wire client, as an
 * older librdax) still gets pages. The control: a daemon that marks whole
 * pages again (RDAX_FAULTS=rdma-notice-pages) must fail the line check.
 *
 * Durable write notices (D, rdma_proto.h) stand for an FSYNC of the units
 * they name: each is answered under its reply id having written back
 * exactly those units, and librdax sends a one-part durable write as that
 * one notice. The control: a daemon whose durable notices mark nothing
 * (RDAX_FAULTS=rdma-durable-unmarked) must fail the check.
 *
 * Limits over RDMA: a connection request over --max-connections is
 * rejected with the reason (not just "refused"), and the handshake and
 * request time limits end connections as they do over sockets.
 *
 * After every test the daemon is stopped (exit 0 is required: ASan's leak
 * check runs at exit) and its log must not report lost receive or send
 * buffers.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "conn.h"
#include "harness.h"
#include "librdax.h"
#include "rdax.pb-c.h"
#include "rdma_proto.h"
#include "transport_rdma.h"
#include "wire.h"

#define VOL_SIZE (4ULL << 20)
#define CHUNK	 65536

static struct {
	char dir[256];
	struct hx_daemon d;
} T;

/* setup -- a fresh daemon for each test */
/* start_daemon -- a fresh daemon with @faults (NULL: none; a control's otherwise) */
static int start_daemon(const char *faults)
{
	if (hx_tmpdir_make("rdma", T.dir, sizeof(T.dir)))
		return -1;
	/* info: a client's broken notices and credits are refused at info (LOG_PEER) */
	struct hx_daemon_opts o = {
	    .ns_size = "64M", .threads = 2, .log_level = "info", .faults = faults};
	return hx_daemon_start(&T.d, T.dir, &o) ? -1 : 0;
}

static int setup(void **state)
{
	return start_daemon(NULL);
}

/* log_has -- does the daemon's log mention @what? */
static bool log_has(const char *what)
{
	FILE *f = fopen(T.d.log_path, "r");
	if (!f)
		return false;
	char line[1024];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, what) != NULL;
	fclose(f);
	return found;
}

/* teardown -- stop (exit 0 required) and check that no buffer was lost */
static int teardown(void **state)
{
	int ret = hx_daemon_stop(&T.d);
	bool lost = log_has("receive buffers lost") || log_has("send buffers on");
	if (ret || lost) {
		fprintf(stderr, "teardown: stop %d, buffers lost: %s\n", ret, lost ? "yes" : "no");
		hx_daemon_dump_log(&T.d, 8192);
	}
	hx_tmpdir_remove(T.dir);
	return ret || lost ? -1 : 0;
}

/* client -- a direct-access connection that said HELLO */
static void client(struct wconn *c)
{
	assert_int_equal(wire_connect_direct(c, T.d.port), 0);
	assert_int_equal(wire_hello(c, NULL, 0), 0);
}

/* verify -- read [0, len) of @name on a fresh connection and compare with @want */
static void verify(const char *name, const uint8_t *want, size_t len)
{
	struct wconn c;
	uint32_t h;
	uint8_t *got = malloc(len);
	assert_non_null(got);
	assert_int_equal(wire_connect(&c, T.d.port), 0);
	assert_int_equal(wire_hello(&c, NULL, 0), 0);
	assert_int_equal(wire_open(&c, name, &h, NULL), 0);
	for (size_t off = 0; off < len; off += CHUNK)
		assert_int_equal(wire_read(&c, h, off, CHUNK, got + off), 0);
	assert_memory_equal(got, want, len);
	wire_close(&c);
	free(got);
}

/*
 * isolation__other_clients_rkey_fails -- B uses A's rkey and address over
 * its own QP: remote access error, A's data unchanged, A and the daemon fine
 */
static void isolation__other_clients_rkey_fails(void **state)
{
	struct wconn a, b;
	struct wire_direct da, db;
	uint32_t ha, hb;
	static uint8_t p1[CHUNK], p2[CHUNK], back[CHUNK];
	hx_pattern(p1, sizeof(p1), 1, 0);
	hx_pattern(p2, sizeof(p2), 2, 0);

	client(&a);
	assert_int_equal(wire_create(&a, "iso", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&a, "iso", &ha, &da), 0);
	assert_int_equal(wire_rdma_write(&a, &da, 0, p1, sizeof(p1)), 0);
	assert_int_equal(wire_fsync(&a, ha, 0, 0), 0);

	client(&b);
	assert_int_equal(wire_create(&b, "other", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&b, "other", &hb, &db), 0);
	/* the control: B's own window works, so a failure below is the isolation */
	assert_int_equal(wire_rdma_write(&b, &db, 0, p2, sizeof(p2)), 0);
	assert_int_equal(wire_rdma_read(&b, &db, 0, back, sizeof(back)), 0);
	assert_memory_equal(back, p2, sizeof(p2));
	fprintf(stderr, "A: rkey %#x addr %#llx; B: rkey %#x addr %#llx\n", da.rkey,
		(unsigned long long)da.remote_addr, db.rkey, (unsigned long long)db.remote_addr);

	/* B writes with A's rkey and address: refused by the NIC */
	int ret = wire_rdma_write(&b, &da, 0, p2, sizeof(p2));
	fprintf(stderr, "B writing through A's rkey: %d (%s)\n", ret, strerror(-ret));
	assert_int_equal(ret, -EACCES);
	wire_close(&b);
	/* and reading with it, on a fresh connection of B's */
	client(&b);
	ret = wire_rdma_read(&b, &da, 0, back, sizeof(back));
	fprintf(stderr, "B reading through A's rkey: %d (%s)\n", ret, strerror(-ret));
	assert_int_equal(ret, -EACCES);
	wire_close(&b);

	/* A is untouched and still works, one-sided and through requests */
	assert_int_equal(wire_rdma_read(&a, &da, 0, back, sizeof(back)), 0);
	assert_memory_equal(back, p1, sizeof(p1));
	assert_int_equal(wire_stat(&a, ha, NULL), 0);
	wire_close(&a);
	verify("iso", p1, sizeof(p1));
}

/* isolation__closed_handle_loses_access -- after VOLUME_CLOSE the rkey is dead at once */
static void isolation__closed_handle_loses_access(void **state)
{
	struct wconn a;
	struct wire_direct da;
	uint32_t ha;
	static uint8_t p1[CHUNK], p2[CHUNK];
	hx_pattern(p1, sizeof(p1), 3, 0);
	hx_pattern(p2, sizeof(p2), 4, 0);

	client(&a);
	assert_int_equal(wire_create(&a, "iso", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&a, "iso", &ha, &da), 0);
	assert_int_equal(wire_rdma_write(&a, &da, 0, p1, sizeof(p1)), 0);
	assert_int_equal(wire_close_volume(&a, ha), 0);
	int ret = wire_rdma_write(&a, &da, 0, p2, sizeof(p2));
	fprintf(stderr, "writing through a closed handle's rkey: %d (%s)\n", ret, strerror(-ret));
	assert_int_equal(ret, -EACCES);
	wire_close(&a);
	verify("iso", p1, sizeof(p1));
}

/* isolation__disconnected_clients_rkey_is_dead -- a later client cannot use it either */
static void isolation__disconnected_clients_rkey_is_dead(void **state)
{
	struct wconn a, c;
	struct wire_direct da, dc;
	uint32_t ha, hc;
	static uint8_t p1[CHUNK], p2[CHUNK];
	hx_pattern(p1, sizeof(p1), 5, 0);
	hx_pattern(p2, sizeof(p2), 6, 0);

	client(&a);
	assert_int_equal(wire_create(&a, "iso", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&a, "iso", &ha, &da), 0);
	assert_int_equal(wire_rdma_write(&a, &da, 0, p1, sizeof(p1)), 0);
	assert_int_equal(wire_fsync(&a, ha, 0, 0), 0);
	wire_close(&a);

	/* the same volume, opened again: a new window, the old rkey reaches nothing */
	client(&c);
	assert_int_equal(wire_open_direct(&c, "iso", &hc, &dc), 0);
	assert_int_not_equal(dc.rkey, da.rkey);
	int ret = wire_rdma_write(&c, &da, 0, p2, sizeof(p2));
	fprintf(stderr, "writing through a gone client's rkey: %d (%s)\n", ret, strerror(-ret));
	assert_int_equal(ret, -EACCES);
	wire_close(&c);
	verify("iso", p1, sizeof(p1));
}

/*
 * notice__outside_every_volume_closes_that_connection -- a write whose
 * notice names pages of no volume of the connection: the daemon cannot
 * track it and closes that connection; the others go on
 */
static void notice__outside_every_volume_closes_that_connection(void **state)
{
	struct wconn a, b;
	struct wire_direct da, db;
	uint32_t ha, hb;
	static uint8_t p1[4096];
	hx_pattern(p1, sizeof(p1), 7, 0);

	client(&b);
	assert_int_equal(wire_create(&b, "bystander", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&b, "bystander", &hb, &db), 0);
	assert_int_equal(wire_rdma_write(&b, &db, 0, p1, sizeof(p1)), 0);

	client(&a);
	assert_int_equal(wire_create(&a, "iso", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&a, "iso", &ha, &da), 0);
	struct wire_direct bad = da;
	bad.imm_base = 1U << 29; /* the window is right, the notice names nothing */
	wire_rdma_write(&a, &bad, 0, p1, sizeof(p1)); /* lands; may or may not see the close */
	assert_true(wire_eof(&a));
	assert_true(log_has("outside every volume"));
	wire_close(&a);

	/* the bystander is untouched: its write is tracked and fsyncs */
	uint64_t dirty = 0;
	assert_int_equal(wire_stat(&b, hb, &dirty), 0);
	assert_int_equal(dirty, 4096);
	assert_int_equal(wire_fsync(&b, hb, 0, 0), 0);
	wire_close(&b);
}

/*
 * notice__durable_of_no_bytes_closes_that_connection -- a durable notice of
 * no bytes names no range to make durable: the daemon closes that
 * connection (an empty plain notice marks nothing and is fine); others go on
 */
static void notice__durable_of_no_bytes_closes_that_connection(void **state)
{
	(void)state;
	struct wconn a, b;
	struct wire_direct da, db;
	uint32_t ha, hb;
	uint64_t wb = 0;
	static uint8_t p1[4096];
	hx_pattern(p1, sizeof(p1), 8, 0);
	client(&b);
	assert_int_equal(wire_create(&b, "bystander", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&b, "bystander", &hb, &db), 0);

	client(&a);
	assert_int_equal(wire_create(&a, "empty", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&a, "empty", &ha, &da), 0);
	struct rdma_tp_vol va = {da.remote_addr, da.rkey, da.imm_base, da.imm_shift};
	/* the plain empty notice first: nothing marked, the connection goes on */
	assert_int_equal(rdma_tp_test_empty_notice(a.tp, &va, da.imm_base), 0);
	uint64_t dirty = 1;
	assert_int_equal(wire_stat(&a, ha, &dirty), 0);
	assert_int_equal(dirty, 0);
	assert_int_equal(rdma_tp_test_empty_notice(a.tp, &va, da.imm_base | RDMA_IMM_DURABLE), 0);
	assert_true(wire_eof(&a));
	assert_true(log_has("asks a write of no bytes to be made durable"));
	wire_close(&a);

	assert_int_equal(wire_rdma_write_durable(&b, &db, 0, p1, sizeof(p1), &wb), 0);
	assert_int_equal(wb, 4096);
	wire_close(&b);
}

/*
 * hello__reports_the_persistence_method -- the HELLO reply over RDMA says how
 * the daemon makes data durable: SIM in sim mode; on the devdax NVDIMM
 * (RDAX_IT_NS) CLWB + fence, since the VM's emulated NVDIMM does not claim
 * persistent CPU caches (its region's persistence_domain is not cpu_cache)
 */
static void hello__reports_the_persistence_method(void **state)
{
	const char *mode = getenv("RDAX_IT_MODE"), *ns = getenv("RDAX_IT_NS");
	enum rdax_persist_method want;
	if (mode && strcmp(mode, "sim") == 0)
		want = RDAX_PERSIST_SIM;
	else if (ns && *ns)
		want = RDAX_PERSIST_CPU_CACHE_FLUSH;
	else
		want = RDAX_PERSIST_MSYNC; /* a plain file in auto mode */
	struct rdax_conn *c;
	struct rdax_namespace_info ni;
	assert_int_equal(rdax_connect(T.d.url, NULL, &c), 0);
	assert_int_equal(rdax_conn_namespace_count(c), 1);
	assert_int_equal(rdax_conn_namespace_get(c, 0, &ni), 0);
	fprintf(stderr, "namespace %s, mode %s: persist method %d (want %d)\n", ni.path, ni.mode,
		(int)ni.persist_method, (int)want);
	assert_int_equal(ni.persist_method, want);
	assert_int_equal(rdax_disconnect(&c), 0);
}

/*
 * credits__client_beyond_its_window_is_closed -- a client that sends more
 * messages than the daemon granted room for (and never reads a reply, so
 * no grant reaches it) would take the shared receive queue's buffers from
 * everyone: the daemon closes that connection, serves the bystander on, and
 * gets every receive buffer back (teardown checks the count at shutdown)
 */
static void credits__client_beyond_its_window_is_closed(void **state)
{
	struct wconn a, b;
	uint32_t hb;
	static uint8_t p1[4096];
	hx_pattern(p1, sizeof(p1), 11, 0);

	client(&b);
	assert_int_equal(wire_create(&b, "bystander", VOL_SIZE), 0);
	assert_int_equal(wire_open(&b, "bystander", &hb, NULL), 0);

	client(&a);
	rdma_tp_test_ignore_credits(a.tp);
	/* STAT of a handle it does not have: small, valid frames */
	Rdax__StatRequest req = RDAX__STAT_REQUEST__INIT;
	req.handle = 12345;
	uint8_t body[32];
	size_t blen = rdax__stat_request__pack(&req, body);
	int ret = 0;
	unsigned sent = 0;
	/* far more than any window: the daemon grants at most its window per reply it can send */
	while (sent < 4000 &&
	       (ret = wire_send_frame(&a, FRAME_STAT, sent + 1, body, blen, NULL, 0)) == 0)
		sent++;
	fprintf(stderr, "sent %u messages, credits ignored, before the connection failed (%d)\n",
		sent, ret);
	assert_true(ret < 0 || wire_eof(&a));
	/* the daemon's reason (rdma_conn.c: handle_wc) */
	assert_true(log_has("sent more than its credits allow") ||
		    log_has("broke the credit rules"));
	wire_close(&a);

	/* the bystander is served */
	assert_int_equal(wire_write(&b, hb, 0, p1, sizeof(p1), false), 0);
	assert_int_equal(wire_fsync(&b, hb, 0, 0), 0);
	static uint8_t got[4096];
	assert_int_equal(wire_read(&b, hb, 0, sizeof(got), got), 0);
	assert_memory_equal(got, p1, sizeof(p1));
	wire_close(&b);
}

/* open_lib -- a librdax connection over RDMA with volume @name created and opened */
static void open_lib(struct rdax_conn **c, struct rdax_volume **v, const char *name, bool create)
{
	assert_int_equal(rdax_connect(T.d.url, NULL, c), 0);
	if (create)
		assert_int_equal(rdax_volume_create(*c, name, VOL_SIZE, RDAX_NAMESPACE_ANY), 0);
	assert_int_equal(rdax_volume_open(*c, name, v), 0);
}

/*
 * buffers__registered_memory_moves_without_a_copy -- a registered buffer is
 * used in place. On the transport: a one-sided write from within a buffer
 * given to rdma_tp_register and a read into one copy nothing through the
 * bounce ring (rdma_tp_copied stays), while the same write from other
 * memory is copied (the counter moves: the check can fail); the bytes land
 * either way. Through librdax: rdax_buffer_alloc's memory, written (a
 * whole 1 MiB and an unaligned piece inside) and read back into another,
 * gives the bytes written, fsynced and as a TCP reader sees them.
 */
static void buffers__registered_memory_moves_without_a_copy(void **state)
{
	(void)state;
	struct wconn a;
	struct wire_direct d;
	uint32_t h;
	client(&a);
	assert_int_equal(wire_create(&a, "zc", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&a, "zc", &h, &d), 0);
	size_t len = 65536;
	uint8_t *reg = aligned_alloc(4096, 2 * len), *plain = malloc(len);
	assert_non_null(reg);
	assert_non_null(plain);
	assert_int_equal(rdma_tp_register(a.tp, reg, 2 * len), 0);
	hx_pattern(reg, len, 21, 0);
	uint64_t before = rdma_tp_copied(a.tp);
	assert_int_equal(wire_rdma_write(&a, &d, 0, reg, (uint32_t)len), 0);
	assert_int_equal(wire_rdma_read(&a, &d, 0, reg + len, (uint32_t)len), 0);
	uint64_t registered = rdma_tp_copied(a.tp) - before;
	assert_memory_equal(reg + len, reg, len);
	hx_pattern(plain, len, 22, len);
	before = rdma_tp_copied(a.tp);
	assert_int_equal(wire_rdma_write(&a, &d, len, plain, (uint32_t)len), 0);
	uint64_t unregistered = rdma_tp_copied(a.tp) - before;
	fprintf(stderr, "bytes copied: %llu for a registered write and read, %llu for a write "
			"from other memory\n",
		(unsigned long long)registered, (unsigned long long)unregistered);
	assert_int_equal(registered, 0);
	assert_int_equal(unregistered, len);
	assert_int_equal(wire_fsync(&a, h, 0, 0), 0);
	uint8_t *both = malloc(2 * len);
	assert_non_null(both);
	memcpy(both, reg, len);
	memcpy(both + len, plain, len);
	verify("zc", both, 2 * len);
	rdma_tp_unregister(a.tp, reg);
	wire_close(&a);
	free(both);
	free(plain);
	free(reg);

	struct rdax_conn *c;
	struct rdax_volume *v;
	open_lib(&c, &v, "zcl", true);
	void *w, *r;
	size_t big = 1U << 20;
	assert_int_equal(rdax_buffer_alloc(c, big, &w), 0);
	assert_int_equal(rdax_buffer_alloc(c, big, &r), 0);
	hx_pattern(w, big, 23, 0);
	assert_int_equal(rdax_write(v, 0, w, big, RDAX_WRITE_FSYNC), 0);
	/* an unaligned piece from inside the buffer, at an unaligned offset */
	assert_int_equal(rdax_write(v, 5000, (uint8_t *)w + 777, 10000, RDAX_WRITE_FSYNC), 0);
	assert_int_equal(rdax_read(v, 0, r, big), 0);
	uint8_t *want = malloc(big);
	assert_non_null(want);
	memcpy(want, w, big);
	memmove(want + 5000, (uint8_t *)w + 777, 10000);
	assert_memory_equal(r, want, big);
	assert_int_equal(rdax_read(v, 5000, (uint8_t *)r + 3, 10000), 0);
	assert_memory_equal((uint8_t *)r + 3, want + 5000, 10000);
	assert_int_equal(rdax_buffer_free(c, r), 0);
	assert_int_equal(rdax_volume_close(&v), 0);
	assert_int_equal(rdax_disconnect(&c), 0); /* frees w */
	verify("zcl", want, big);

	/*
	 * A resuming connection across a daemon restart: the buffer is
	 * registered on the new transport (its queue pair, protection domain
	 * and keys are new: a registration carried over would fail the write)
	 */
	struct rdax_conn_opts *o;
	assert_int_equal(rdax_conn_opts_new(&o), 0);
	assert_int_equal(rdax_conn_opts_set_resume(o, 20000), 0);
	assert_int_equal(rdax_connect(T.d.url, o, &c), 0);
	rdax_conn_opts_delete(&o);
	assert_int_equal(rdax_volume_open(c, "zcl", &v), 0);
	assert_int_equal(rdax_buffer_alloc(c, big, &w), 0);
	assert_int_equal(rdax_stat(v, &(struct rdax_volume_stat){0}), 0);
	assert_int_equal(hx_daemon_stop(&T.d), 0);
	assert_int_equal(hx_daemon_restart_same_port(&T.d), 0);
	hx_pattern(w, big, 24, 0);
	assert_int_equal(rdax_write(v, 0, w, big, RDAX_WRITE_FSYNC), 0);
	assert_true(rdax_conn_resumes(c) >= 1);
	memset(w, 0, big);
	assert_int_equal(rdax_read(v, 0, w, big), 0);
	hx_pattern(want, big, 24, 0);
	assert_memory_equal(w, want, big);
	assert_int_equal(rdax_volume_close(&v), 0);
	assert_int_equal(rdax_disconnect(&c), 0);
	verify("zcl", want, big);
	free(want);
}

/*
 * durable_check -- durable notices on the wire: each is answered by an
 * FsyncReply under the next reply id (wire_rdma_write_durable checks it)
 * that wrote back exactly its own units -- not a plain write's beside it,
 * which stays dirty -- and leaves them clean. True when every figure is
 * right (the control's daemon must make it false); the bytes read back
 * either way.
 */
static bool durable_check(void)
{
	struct wconn a;
	struct wire_direct d;
	uint32_t h;
	static uint8_t p[3][4096];
	client(&a);
	assert_int_equal(wire_create(&a, "dn", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&a, "dn", &h, &d), 0);
	assert_true(d.durable);
	bool ok = true;
	uint64_t wb = 0, dirty = 0;
	for (int i = 0; i < 3; i++)
		hx_pattern(p[i], 4096, 31 + i, 0);
	/* a plain write, then two durable ones (the second unaligned: two pages) */
	assert_int_equal(wire_rdma_write(&a, &d, 0, p[0], 4096), 0);
	assert_int_equal(wire_rdma_write_durable(&a, &d, 8192, p[1], 4096, &wb), 0);
	fprintf(stderr, "durable notice of one page: wrote back %llu bytes\n", (unsigned long long)wb);
	ok = ok && wb == 4096;
	assert_int_equal(wire_rdma_write_durable(&a, &d, 16384 + 100, p[2], 4096, &wb), 0);
	fprintf(stderr, "durable notice over two pages: wrote back %llu bytes\n",
		(unsigned long long)wb);
	ok = ok && wb == 8192;
	assert_int_equal(wire_stat(&a, h, &dirty), 0);
	fprintf(stderr, "dirty after them: %llu bytes (the plain write's page)\n",
		(unsigned long long)dirty);
	ok = ok && dirty == 4096;
	assert_int_equal(wire_fsync(&a, h, 0, 0), 0);
	wire_close(&a);
	static uint8_t want[24576];
	memset(want, 0, sizeof(want));
	memcpy(want, p[0], 4096);
	memcpy(want + 8192, p[1], 4096);
	memcpy(want + 16384 + 100, p[2], 4096);
	struct wconn r;
	uint32_t hr;
	static uint8_t got[sizeof(want)];
	assert_int_equal(wire_connect(&r, T.d.port), 0);
	assert_int_equal(wire_hello(&r, NULL, 0), 0);
	assert_int_equal(wire_open(&r, "dn", &hr, NULL), 0);
	assert_int_equal(wire_read(&r, hr, 0, sizeof(got), got), 0);
	assert_memory_equal(got, want, sizeof(want));
	wire_close(&r);
	return ok;
}

/*
 * durable__notice_is_its_own_fsync -- a durable write notice makes its
 * units durable and is answered as their FSYNC (durable_check); librdax
 * sends a durable write of one part as that one notice (no FSYNC request),
 * and one of several parts as plain notices and an FSYNC of the whole; the
 * bytes read back
 */
static void durable__notice_is_its_own_fsync(void **state)
{
	(void)state;
	assert_true(durable_check());

	struct rdax_conn *c;
	struct rdax_volume *v;
	open_lib(&c, &v, "dnl", true);
	static uint8_t page[4096], big[1U << 20];
	hx_pattern(page, sizeof(page), 35, 0);
	hx_pattern(big, sizeof(big), 36, 0);
	uint64_t before = rdma_tp_durable_notices(c->rdma);
	for (int i = 0; i < 8; i++)
		assert_int_equal(rdax_write(v, (uint64_t)i * 4096, page, sizeof(page), RDAX_WRITE_FSYNC),
				 0);
	uint64_t small = rdma_tp_durable_notices(c->rdma) - before;
	before = rdma_tp_durable_notices(c->rdma);
	/* 1 MiB across the 2 MiB boundary: two parts at least */
	assert_int_equal(rdax_write(v, 3U << 19, big, sizeof(big), RDAX_WRITE_FSYNC), 0);
	uint64_t large = rdma_tp_durable_notices(c->rdma) - before;
	fprintf(stderr, "durable notices: %llu for 8 durable 4 KiB writes, %llu for 1 MiB across "
			"a 2 MiB boundary\n",
		(unsigned long long)small, (unsigned long long)large);
	assert_int_equal(small, 8);
	assert_int_equal(large, 0);
	struct rdax_volume_stat st = {0};
	assert_int_equal(rdax_stat(v, &st), 0);
	assert_int_equal(st.dirty_bytes, 0);
	/*
	 * From a registered buffer, freed at once: its reply may come before
	 * the write's completion, and the buffer is unregistered only once no
	 * one-sided operation is posted any more (conn_rdma_settle)
	 */
	void *reg;
	for (int i = 0; i < 8; i++) {
		assert_int_equal(rdax_buffer_alloc(c, 4096, &reg), 0);
		memcpy(reg, page, 4096);
		assert_int_equal(rdax_write(v, 3U << 20, reg, 4096, RDAX_WRITE_FSYNC), 0);
		assert_int_equal(rdax_buffer_free(c, reg), 0);
		assert_int_equal(rdma_tp_direct_posted(c->rdma), 0);
	}
	static uint8_t got[sizeof(big)];
	assert_int_equal(rdax_read(v, 3U << 20, got, 4096), 0);
	assert_memory_equal(got, page, 4096);
	assert_int_equal(rdax_read(v, 3U << 19, got, sizeof(got)), 0);
	assert_memory_equal(got, big, sizeof(big));
	assert_int_equal(rdax_read(v, 7 * 4096, got, 4096), 0);
	assert_memory_equal(got, page, 4096);
	assert_int_equal(rdax_volume_close(&v), 0);
	assert_int_equal(rdax_disconnect(&c), 0);
}

/* setup_durable_unmarked -- a fresh daemon whose durable notices mark nothing (the control) */
static int setup_durable_unmarked(void **state)
{
	return start_daemon("rdma-durable-unmarked");
}

/*
 * durable__control_unmarked_notice_is_caught -- the control: a daemon whose
 * durable notices mark nothing answers them having written nothing back,
 * and durable_check must say so
 */
static void durable__control_unmarked_notice_is_caught(void **state)
{
	(void)state;
	assert_false(durable_check());
}

/*
 * order__fsync_behind_unacknowledged_writes_covers_them -- the rule: writes
 * posted before an FSYNC on the same QP are in the dirty tree when the FSYNC
 * is handled, whether or not their completions came back yet. The writes
 * are submitted, the fsync follows at once; it must write back every page.
 */
static void order__fsync_behind_unacknowledged_writes_covers_them(void **state)
{
	enum { N = 48 };
	struct rdax_conn *c;
	struct rdax_volume *v;
	static uint8_t buf[N][4096];
	open_lib(&c, &v, "order", true);
	for (int i = 0; i < N; i++) {
		hx_pattern(buf[i], 4096, 8, (uint64_t)i * 8192);
		/* every other page, so each write is exactly one dirty page */
		assert_int_equal(rdax_submit_write(v, (uint64_t)i * 8192, buf[i], 4096, 0, i), 0);
	}
	uint64_t wb = 0;
	assert_int_equal(rdax_fsync(v, 0, 0, &wb), 0);
	fprintf(stderr, "fsync right behind %d one-sided writes wrote back %llu bytes\n", N,
		(unsigned long long)wb);
	assert_int_equal(wb, (uint64_t)N * 4096);
	struct rdax_completion done[N];
	int got = 0;
	while (got < N) {
		int n = rdax_wait_completions(c, done, N, 1, -1);
		assert_true(n > 0);
		for (int i = 0; i < n; i++)
			assert_int_equal(done[i].status, 0);
		got += n;
	}
	/* unaligned: one write spanning a page boundary dirties exactly its 65 lines */
	assert_int_equal(rdax_write(v, 3 * 4096 + 100, buf[0], 4096, 0), 0);
	assert_int_equal(rdax_fsync(v, 0, 0, &wb), 0);
	assert_int_equal(wb, 65 * 64);
	assert_int_equal(rdax_volume_close(&v), 0);
	assert_int_equal(rdax_disconnect(&c), 0);
}

/*
 * lines_check -- small one-sided writes through @v, each followed by an
 * fsync that must write back exactly the lines the write touched: true
 * when every one did (each result printed either way, for the control)
 */
static bool lines_check(struct rdax_volume *v)
{
	static const struct {
		uint64_t off;
		uint32_t len;
		uint64_t lines; /* bytes of the lines touched */
	} w[] = {
	    {3 * 4096 + 100, 64, 128},	/* unaligned: lines 1 and 2 of a page */
	    {5 * 4096 + 128, 64, 64},	/* one aligned line */
	    {7 * 4096 - 32, 64, 128},	/* the last line of a page and the first of the next */
	    {9 * 4096 + 1, 1, 64},	/* one byte */
	    {11 * 4096 + 64, 300, 320}, /* five lines from the second */
	};
	static uint8_t buf[512];
	bool all = true;
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		uint64_t wb = 0;
		hx_pattern(buf, w[i].len, 41, w[i].off);
		assert_int_equal(rdax_write(v, w[i].off, buf, w[i].len, 0), 0);
		assert_int_equal(rdax_fsync(v, 0, 0, &wb), 0);
		fprintf(stderr, "%u bytes at %llu: fsync wrote back %llu bytes (the lines: %llu)\n",
			w[i].len, (unsigned long long)w[i].off, (unsigned long long)wb,
			(unsigned long long)w[i].lines);
		all = all && wb == w[i].lines;
	}
	return all;
}

/*
 * lines__fsync_writes_back_the_lines_written -- librdax asks for line
 * notices: after a one-sided write of a few bytes an fsync writes back the
 * lines it touched, not their pages, as over TCP; the bytes read back
 */
static void lines__fsync_writes_back_the_lines_written(void **state)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	open_lib(&c, &v, "lines", true);
	assert_true(lines_check(v));
	static uint8_t want[64], got[64];
	hx_pattern(want, 64, 41, 3 * 4096 + 100);
	assert_int_equal(rdax_read(v, 3 * 4096 + 100, got, 64), 0);
	assert_memory_equal(got, want, 64);
	assert_int_equal(rdax_volume_close(&v), 0);
	assert_int_equal(rdax_disconnect(&c), 0);
}

/* setup_notice_pages -- a fresh daemon that marks whole pages for line notices (the control) */
static int setup_notice_pages(void **state)
{
	return start_daemon("rdma-notice-pages");
}

/*
 * lines__control_whole_pages_are_caught -- the control of the line test: a
 * daemon that marks the whole pages of a notice's lines makes every fsync
 * write back 4 KiB or 8 KiB, and the check must say so
 */
static void lines__control_whole_pages_are_caught(void **state)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	open_lib(&c, &v, "lines", true);
	assert_false(lines_check(v));
	assert_int_equal(rdax_volume_close(&v), 0);
	assert_int_equal(rdax_disconnect(&c), 0);
}

/*
 * lines__client_that_does_not_ask_gets_pages -- a client that never asks for
 * line notices (the raw wire client, as an older librdax) is answered in
 * pages and its 64-byte write dirties its whole page; its notices still
 * resolve (the daemon did not take them as lines)
 */
static void lines__client_that_does_not_ask_gets_pages(void **state)
{
	struct wconn a;
	struct wire_direct d;
	uint32_t h;
	static uint8_t p[64];
	hx_pattern(p, sizeof(p), 43, 0);
	client(&a);
	assert_int_equal(wire_create(&a, "old", VOL_SIZE), 0);
	assert_int_equal(wire_open_direct(&a, "old", &h, &d), 0);
	assert_int_equal(d.imm_shift, 12);
	assert_int_equal(wire_rdma_write(&a, &d, 2 * 4096 + 100, p, sizeof(p)), 0);
	uint64_t dirty = 0;
	assert_int_equal(wire_stat(&a, h, &dirty), 0);
	assert_int_equal(dirty, 4096);
	/* across a page boundary: both pages */
	assert_int_equal(wire_rdma_write(&a, &d, 6 * 4096 - 32, p, sizeof(p)), 0);
	assert_int_equal(wire_stat(&a, h, &dirty), 0);
	assert_int_equal(dirty, 3 * 4096);
	assert_int_equal(wire_fsync(&a, h, 0, 0), 0);
	wire_close(&a);
}

/*
 * busy_poll__same_results -- a client that spins on its completion queue
 * instead of sleeping (rdax_conn_opts_set_busy_poll) gets the same answers:
 * durable writes, reads, an fsync that writes back exactly what was written
 */
static void busy_poll__same_results(void **state)
{
	struct rdax_conn_opts *o;
	struct rdax_conn *c;
	struct rdax_volume *v;
	static uint8_t buf[CHUNK], got[CHUNK];
	assert_int_equal(rdax_conn_opts_new(&o), 0);
	assert_int_equal(rdax_conn_opts_set_busy_poll(o, 2000), 0);
	assert_int_equal(rdax_connect(T.d.url, o, &c), 0);
	rdax_conn_opts_delete(&o);
	assert_int_equal(rdax_volume_create(c, "spin", VOL_SIZE, RDAX_NAMESPACE_ANY), 0);
	assert_int_equal(rdax_volume_open(c, "spin", &v), 0);
	for (int i = 0; i < 8; i++) {
		hx_pattern(buf, sizeof(buf), 21, (uint64_t)i * CHUNK);
		assert_int_equal(rdax_write(v, (uint64_t)i * CHUNK, buf, sizeof(buf),
					    i % 2 ? RDAX_WRITE_FSYNC : 0),
				 0);
		assert_int_equal(rdax_read(v, (uint64_t)i * CHUNK, got, sizeof(got)), 0);
		assert_memory_equal(got, buf, sizeof(buf));
	}
	uint64_t wb = 0;
	assert_int_equal(rdax_fsync(v, 0, 0, &wb), 0);
	assert_int_equal(wb, 4ULL * CHUNK); /* the writes without RDAX_WRITE_FSYNC */
	assert_int_equal(rdax_volume_close(&v), 0);
	assert_int_equal(rdax_disconnect(&c), 0);
}

/*
 * writer_child -- a client that keeps many one-sided writes in flight; never
 * returns. A process of its own (exec'd: verbs contexts do not survive fork).
 */
static void writer_child(const char *url, bool disconnect_with_writes_in_flight)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	struct rdax_conn_opts *o;
	static uint8_t buf[256 << 10];
	memset(buf, 0x5a, sizeof(buf));
	if (rdax_conn_opts_new(&o) || rdax_conn_opts_set_queue_depth(o, 64) ||
	    rdax_connect(url, o, &c) || rdax_volume_open(c, "victim", &v))
		_exit(3);
	for (uint64_t i = 0;; i++) {
		int ret =
		    rdax_submit_write(v, (i * sizeof(buf)) % VOL_SIZE, buf, sizeof(buf), 0, i);
		if (ret == -EAGAIN) {
			struct rdax_completion done[64];
			if (rdax_wait_completions(c, done, 64, 1, -1) < 0)
				_exit(4);
			continue;
		}
		if (ret)
			_exit(5);
		if (i == 40) {
			/* the parent may kill us from here on */
			if (write(STDOUT_FILENO, "w", 1) != 1)
				_exit(6);
			if (disconnect_with_writes_in_flight)
				_exit(0); /* the process ends: the kernel tears the QP down */
		}
	}
}

/*
 * disconnect__with_writes_in_flight -- a client ends (exits, or is killed)
 * with dozens of one-sided writes in flight: the daemon cleans up that
 * connection alone, keeps serving, and loses no buffer (checked at stop)
 */
static void disconnect__with_writes_in_flight(void **state)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	open_lib(&c, &v, "victim", true);
	assert_int_equal(rdax_volume_close(&v), 0);
	for (int round = 0; round < 2; round++) {
		int pfd[2];
		assert_int_equal(pipe(pfd), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			dup2(pfd[1], STDOUT_FILENO);
			execl("/proc/self/exe", "test_rdma_direct", "--writer", T.d.url,
			      round == 0 ? "exit" : "wait", (char *)NULL);
			_exit(127);
		}
		close(pfd[1]);
		char ch;
		if (read(pfd[0], &ch, 1) != 1) {
			int status;
			waitpid(pid, &status, 0);
			fail_msg("the writer ended before writing (status %#x)", status);
		}
		close(pfd[0]);
		if (round == 1)
			kill(pid, SIGKILL); /* mid-write */
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		fprintf(stderr, "writer %s\n",
			round == 0 ? "exited with writes in flight" : "killed mid-write");
		/* the daemon serves on: this connection works, fsync included */
		static uint8_t b[4096];
		assert_int_equal(rdax_volume_open(c, "victim", &v), 0);
		assert_int_equal(rdax_write(v, 0, b, sizeof(b), RDAX_WRITE_FSYNC), 0);
		assert_int_equal(rdax_read(v, 0, b, sizeof(b)), 0);
		assert_int_equal(rdax_volume_close(&v), 0);
	}
	/* the writers' volume handles are gone with them: it can be deleted */
	int ret = -EBUSY;
	for (int i = 0; i < 100 && ret == -EBUSY; i++) {
		ret = rdax_volume_delete(c, "victim");
		if (ret == -EBUSY)
			usleep(100000); /* the daemon closes a gone client's handles in its pool */
	}
	assert_int_equal(ret, 0);
	assert_int_equal(rdax_disconnect(&c), 0);
}

/* one-sided pages the gone writer leaves behind, each its own dirty page */
#define GONE_PAGES 12

/*
 * gone_writer_child -- open "gone", say so on stdout, wait for a byte on
 * stdin, then write GONE_PAGES one-sided pages (every other page), each
 * waited for, and exit without fsync or disconnect: the kernel tears the QP
 * down. Never returns.
 */
static void gone_writer_child(const char *url)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	static uint8_t buf[4096];
	char ch;
	if (rdax_connect(url, NULL, &c) || rdax_volume_open(c, "gone", &v))
		_exit(3);
	if (write(STDOUT_FILENO, "r", 1) != 1 || read(STDIN_FILENO, &ch, 1) != 1)
		_exit(4);
	for (int i = 0; i < GONE_PAGES; i++) {
		hx_pattern(buf, sizeof(buf), 31, (uint64_t)i * 8192);
		if (rdax_write(v, (uint64_t)i * 8192, buf, sizeof(buf), 0))
			_exit(5);
	}
	_exit(0);
}

/*
 * notice__gone_clients_completed_writes_are_marked -- a client's one-sided
 * writes completed (the NIC acknowledged them), then the client went away
 * before the daemon polled their completions: the connection ends with the
 * notices still on its CQ. They must be marked dirty all the same, or no
 * later fsync (and no clean stop) writes them back. The daemon is stopped
 * (SIGSTOP) while the writes land and the client exits, so the completions
 * and the disconnect are both waiting when it runs again -- the order in
 * which the end of a connection used to forget what it had not yet polled.
 * A whole-volume fsync from another client must then write back exactly
 * those pages.
 */
static void notice__gone_clients_completed_writes_are_marked(void **state)
{
	struct rdax_conn *c;
	struct rdax_volume *v;
	open_lib(&c, &v, "gone", true);
	int up[2], down[2];
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(up[1], STDOUT_FILENO);
		dup2(down[0], STDIN_FILENO);
		execl("/proc/self/exe", "test_rdma_direct", "--gone-writer", T.d.url, (char *)NULL);
		_exit(127);
	}
	close(up[1]);
	close(down[0]);
	char ch = 'g';
	assert_int_equal(read(up[0], &ch, 1), 1);
	assert_int_equal(kill(T.d.pid, SIGSTOP), 0);
	assert_int_equal(write(down[1], &ch, 1), 1);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	/* let the disconnect reach the stopped daemon's event channel too */
	usleep(500000);
	assert_int_equal(kill(T.d.pid, SIGCONT), 0);
	close(up[0]);
	close(down[1]);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* the gone connection ends on its worker; fsync until its pages are written back */
	uint64_t total = 0, wb = 0;
	for (int i = 0; i < 100 && total < GONE_PAGES * 4096ULL; i++) {
		assert_int_equal(rdax_fsync(v, 0, 0, &wb), 0);
		total += wb;
		if (total < GONE_PAGES * 4096ULL)
			usleep(100000);
	}
	fprintf(stderr, "fsyncs after the writer left wrote back %llu bytes (want %llu)\n",
		(unsigned long long)total, GONE_PAGES * 4096ULL);
	assert_int_equal(total, GONE_PAGES * 4096ULL);
	static uint8_t want[4096], got[4096];
	for (int i = 0; i < GONE_PAGES; i++) {
		hx_pattern(want, sizeof(want), 31, (uint64_t)i * 8192);
		assert_int_equal(rdax_read(v, (uint64_t)i * 8192, got, sizeof(got)), 0);
		assert_memory_equal(got, want, sizeof(want));
	}
	assert_int_equal(rdax_volume_close(&v), 0);
	assert_int_equal(rdax_disconnect(&c), 0);
}

/* setup_limits -- a fresh daemon with small connection and time limits */
static int setup_limits(void **state)
{
	if (hx_tmpdir_make("rdma", T.dir, sizeof(T.dir)))
		return -1;
	struct hx_daemon_opts o = {.ns_size = "64M",
				   .threads = 2,
				   .log_level =
				       "info", /* refusals and time limits are logged at info */
				   .extra_args = {"--max-connections", "3", "--handshake-timeout",
						  "3", "--request-timeout", "3", NULL}};
	return hx_daemon_start(&T.d, T.dir, &o) ? -1 : 0;
}

/*
 * limits__over_the_cap_is_refused_with_the_reason -- at --max-connections,
 * a connection request is rejected with the reason in the rejection
 * (librdax: EUSERS, "refused by the daemon: too many connections"), the
 * connections before are served, and a slot given back is taken again
 */
static void limits__over_the_cap_is_refused_with_the_reason(void **state)
{
	struct wconn c[3], x;
	uint32_t h;
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(wire_connect(&c[i], T.d.port), 0);
		assert_int_equal(wire_hello(&c[i], NULL, 0), 0);
	}
	assert_int_equal(wire_connect(&x, T.d.port), -EUSERS);
	wire_close(&x);
	assert_true(log_has("too many connections"));
	/* the reason reaches librdax's caller too */
	struct rdax_conn *rc = NULL;
	assert_int_equal(rdax_connect(T.d.url, NULL, &rc), -EUSERS);
	assert_null(rc);
	/* those connected before are served */
	assert_int_equal(wire_create(&c[0], "v", VOL_SIZE), 0);
	assert_int_equal(wire_open(&c[1], "v", &h, NULL), 0);
	assert_int_equal(wire_write(&c[1], h, 0, "abc", 3, true), 0);
	/* one leaves: its slot comes back once its connection is torn down */
	wire_close(&c[2]);
	int ret = -EUSERS;
	for (int i = 0; i < 100 && ret == -EUSERS; i++) {
		usleep(100 * 1000);
		ret = wire_connect(&x, T.d.port);
		if (ret == 0)
			assert_int_equal(wire_hello(&x, NULL, 0), 0);
		else
			wire_close(&x);
	}
	assert_int_equal(ret, 0);
	wire_close(&x);
	wire_close(&c[0]);
	wire_close(&c[1]);
}

/*
 * limits__time_limits_over_rdma -- a connection that never says HELLO is
 * ended at the handshake limit, one whose frame header stops half way at
 * the request limit; one that said HELLO outlives both and is served
 */
static void limits__time_limits_over_rdma(void **state)
{
	struct wconn silent, cut, ok;
	assert_int_equal(wire_connect(&silent, T.d.port), 0);
	assert_int_equal(wire_connect(&cut, T.d.port), 0);
	assert_int_equal(wire_hello(&cut, NULL, 0), 0);
	assert_int_equal(wire_connect(&ok, T.d.port), 0);
	assert_int_equal(wire_hello(&ok, NULL, 0), 0);
	uint8_t half[10] = {0};
	assert_int_equal(wire_send_all(&cut, half, sizeof(half)), 0);
	assert_true(wire_eof(&silent));
	assert_true(wire_eof(&cut));
	assert_true(log_has("handshake timeout"));
	assert_true(log_has("request timeout"));
	assert_int_equal(wire_create(&ok, "still", VOL_SIZE), 0);
	wire_close(&silent);
	wire_close(&cut);
	wire_close(&ok);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--writer") == 0)
		writer_child(argv[2], strcmp(argv[3], "exit") == 0);
	if (argc == 3 && strcmp(argv[1], "--gone-writer") == 0)
		gone_writer_child(argv[2]);
	if (!hx_rdma_addr()) {
		fprintf(stderr, "test_rdma_direct: needs RDAX_IT_RDMA=ADDR (an RDMA device's "
				"address); tests/rdma/vm-suite.sh runs it in the VM\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(isolation__other_clients_rkey_fails, setup, teardown),
	    cmocka_unit_test_setup_teardown(isolation__closed_handle_loses_access, setup, teardown),
	    cmocka_unit_test_setup_teardown(isolation__disconnected_clients_rkey_is_dead, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(notice__outside_every_volume_closes_that_connection,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(notice__durable_of_no_bytes_closes_that_connection,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(order__fsync_behind_unacknowledged_writes_covers_them,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(durable__notice_is_its_own_fsync, setup, teardown),
	    cmocka_unit_test_setup_teardown(durable__control_unmarked_notice_is_caught,
					    setup_durable_unmarked, teardown),
	    cmocka_unit_test_setup_teardown(buffers__registered_memory_moves_without_a_copy, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(disconnect__with_writes_in_flight, setup, teardown),
	    cmocka_unit_test_setup_teardown(notice__gone_clients_completed_writes_are_marked, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(hello__reports_the_persistence_method, setup, teardown),
	    cmocka_unit_test_setup_teardown(credits__client_beyond_its_window_is_closed, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(busy_poll__same_results, setup, teardown),
	    cmocka_unit_test_setup_teardown(lines__fsync_writes_back_the_lines_written, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(lines__control_whole_pages_are_caught,
					    setup_notice_pages, teardown),
	    cmocka_unit_test_setup_teardown(lines__client_that_does_not_ask_gets_pages, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(limits__over_the_cap_is_refused_with_the_reason,
					    setup_limits, teardown),
	    cmocka_unit_test_setup_teardown(limits__time_limits_over_rdma, setup_limits, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
