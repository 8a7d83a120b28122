/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_resume.c -- librdax's resume and verifier against a real rdaxd that restarts
 *
 * The daemon runs in sim mode, where a kill -9 is a power cut: what was not
 * written back is gone. Each case restarts it on the same port while a
 * client works:
 *
 *   in_flight_{stop,kill}  a client keeps 8 writes in flight (and an fsync
 *                          every 32) while the daemon is stopped (SIGTERM) or
 *                          killed and started again: every call completes,
 *                          the final fsync succeeds, and every acknowledged
 *                          byte reads back (the held copies were sent again
 *                          where the restart lost them)
 *   lost_write_fsync_eio   writes acknowledged, not held (no budget), the
 *                          daemon killed and started again: the fsync that
 *                          covers them fails with -EIO, and they are indeed
 *                          gone
 *   control                the same with the client-no-verifier switch: the
 *                          fsync succeeds over the lost bytes -- the silent
 *                          loss the check exists for; the case passes when it
 *                          sees it
 *   cli_write_fsync        rdax write --fsync of 96 MiB from a pipe, the
 *                          daemon killed and started again mid-stream: exit
 *                          0 and every byte right
 *
 * Over rdma:// (the VM suite's check sim_resume, RDAX_IT_RDMA) the writes are
 * one-sided, through the memory window the daemon bound to the connection's
 * queue pair when the volume was opened, and the cases check what only RDMA
 * has: the volumes are direct; after the restart the client took the new
 * daemon's window from the open reply (another rkey); the old one is dead
 * even on the queue pair the new one is bound to -- a one-sided write through
 * the old rkey and address fails with a remote access error and does not
 * land, and the client resumes from that (a revoked window is a loss); its
 * control, the same write through the new window, lands. (Soft-RoCE under
 * emulation is slow: half as many writes and bytes there.)
 *
 * Linked with the library's objects so the control can set the switch (and
 * the RDMA checks can reach the connection's transport).
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
#include <unistd.h>

#include <cmocka.h>

#include "conn.h"
#include "faults.h"
#include "harness.h"
#include "librdax.h"
#include "transport_rdma.h"

#define VOL	     "rv"
#define VOL_SIZE     (32ULL << 20)
#define BLOCK	     (64U << 10)
#define NBLOCKS	     (VOL_SIZE / BLOCK)
#define QD	     8
#define RESUME_MS    120000 /* ASan on a loaded 2-core machine: restarts are slow */
#define IO_TIMEOUT   30000
#define CLI_VOL_SIZE (128ULL << 20)
/* rdax write --fsync's stream: 96 MiB, 48 over RDMA (soft-RoCE under emulation is slow) */
#define CLI_BYTES ((uint64_t)hx_scale(96, 48) << 20)

struct fx {
	char dir[256];
	struct hx_daemon d;
};

static struct rdax_conn *conn_to(const struct hx_daemon *d, int resume_ms, uint64_t hold)
{
	struct rdax_conn_opts *o;
	assert_int_equal(rdax_conn_opts_new(&o), 0);
	assert_int_equal(rdax_conn_opts_set_timeout(o, IO_TIMEOUT), 0);
	assert_int_equal(rdax_conn_opts_set_resume(o, resume_ms), 0);
	assert_int_equal(rdax_conn_opts_set_write_hold(o, hold), 0);
	assert_int_equal(rdax_conn_opts_set_queue_depth(o, QD * 2), 0);
	struct rdax_conn *c = NULL;
	int ret = rdax_connect(d->url, o, &c);
	if (ret)
		fail_msg("rdax_connect(%s): %s", d->url, rdax_connect_last_error());
	rdax_conn_opts_delete(&o);
	return c;
}

/* daemon_up -- a sim-mode daemon with volume VOL of @size */
static void daemon_up(struct fx *f, const char *tag, uint64_t size)
{
	memset(f, 0, sizeof(*f));
	assert_int_equal(hx_tmpdir_make(tag, f->dir, sizeof(f->dir)), 0);
	struct hx_daemon_opts o = {.ns_size = "256M", .mode = "sim"};
	assert_int_equal(hx_daemon_start(&f->d, f->dir, &o), 0);
	struct rdax_conn *c = conn_to(&f->d, 0, 0);
	assert_int_equal(rdax_volume_create(c, VOL, size, RDAX_NAMESPACE_ANY), 0);
	assert_int_equal(rdax_disconnect(&c), 0);
}

static void daemon_down(struct fx *f)
{
	if (f->d.pid > 0)
		assert_int_equal(hx_daemon_stop(&f->d), 0);
	hx_tmpdir_remove(f->dir);
}

/* restart -- stop (clean) or kill (a power cut) the daemon and start it on the same port */
static void restart(struct fx *f, bool kill9)
{
	if (kill9)
		assert_int_equal(hx_daemon_kill(&f->d), 0);
	else
		assert_int_equal(hx_daemon_stop(&f->d), 0);
	assert_int_equal(hx_daemon_restart_same_port(&f->d), 0);
}

/* --- a client with writes in flight across a restart --------------------- */

struct writer {
	struct fx *f;
	unsigned nwrites;	 /* how many to make */
	volatile unsigned acked; /* acknowledged so far (read by the main thread) */
	uint32_t version[NBLOCKS];
	int result; /* 0, or the first failure */
	char msg[512];
	unsigned resumes;
	/* rdma://: the connection is left open for rdma_window_check, with the first window */
	struct rdax_conn *c;
	struct rdax_volume *v;
	struct rdma_tp_vol first_window;
};

/* block_fill -- the content of @block at @version */
static void block_fill(uint8_t *buf, uint64_t block, uint32_t version)
{
	hx_pattern(buf, BLOCK, ((uint64_t)version << 32) | block, block * BLOCK);
}

static void *writer_run(void *arg)
{
	struct writer *w = arg;
	struct rdax_conn *c = conn_to(&w->f->d, RESUME_MS, 64ULL << 20);
	struct rdax_volume *v;
	w->result = rdax_volume_open(c, VOL, &v);
	if (w->result)
		goto out;
	if (hx_rdma_addr() && !v->direct) {
		w->result = -EPROTO;
		snprintf(w->msg, sizeof(w->msg), "rdma://, but the volume has no window");
		goto out_close;
	}
	w->first_window = (struct rdma_tp_vol){v->remote_addr, v->rkey, v->imm_base, v->imm_shift};
	static uint8_t bufs[QD][BLOCK];
	uint64_t slot_block[QD];
	uint32_t slot_version[QD];
	bool busy[QD] = {false};
	uint64_t rng = 42;
	unsigned submitted = 0, inflight = 0;
	while ((submitted < w->nwrites || inflight) && !w->result) {
		for (unsigned s = 0; s < QD && submitted < w->nwrites; s++) {
			if (busy[s])
				continue;
			uint64_t b = hx_splitmix64(&rng) % NBLOCKS;
			bool overlap = false; /* in flight at once: never the same block */
			for (unsigned k = 0; k < QD; k++)
				overlap |= busy[k] && slot_block[k] == b;
			if (overlap)
				continue;
			slot_block[s] = b;
			slot_version[s] = ++submitted;
			block_fill(bufs[s], b, slot_version[s]);
			int ret = rdax_submit_write(v, b * BLOCK, bufs[s], BLOCK, 0, s);
			if (ret) {
				w->result = ret;
				break;
			}
			busy[s] = true;
			inflight++;
			if (submitted % 32 == 0 &&
			    (ret = rdax_submit_fsync(v, 0, 0, 0, UINT64_MAX)) != 0) {
				w->result = ret;
				break;
			}
		}
		struct rdax_completion cq[QD + 4];
		int n = rdax_wait_completions(c, cq, QD + 4, 1, -1);
		if (n < 0) {
			w->result = n;
			break;
		}
		for (int k = 0; k < n; k++) {
			if (cq[k].status && !w->result)
				w->result = cq[k].status;
			if (cq[k].cookie == UINT64_MAX)
				continue;
			unsigned s = (unsigned)cq[k].cookie;
			busy[s] = false;
			inflight--;
			if (!cq[k].status) {
				w->version[slot_block[s]] = slot_version[s];
				__atomic_add_fetch(&w->acked, 1, __ATOMIC_SEQ_CST);
			}
		}
	}
	while (rdax_inflight(c) > 0) {
		struct rdax_completion cq[QD + 4];
		if (rdax_wait_completions(c, cq, QD + 4, 1, -1) < 0)
			break;
	}
	if (!w->result)
		w->result = rdax_fsync(v, 0, 0, NULL);
	w->resumes = rdax_conn_resumes(c);
	if (!w->result && hx_rdma_addr()) {
		w->c = c; /* the main thread checks the windows, then closes */
		w->v = v;
		return NULL;
	}
out_close:
	rdax_volume_close(&v);
out:
	if (w->result && !w->msg[0])
		snprintf(w->msg, sizeof(w->msg), "%s", rdax_conn_last_error(c));
	rdax_disconnect(&c);
	return NULL;
}

/* tp_done -- a one-sided write of rdma_write_wait completed */
static void tp_done(void *arg, void *ctx, int status)
{
	(void)ctx;
	*(int *)arg = status ? status : 1;
}

/*
 * rdma_write_wait -- one one-sided write of @buf to @off through @window,
 * posted on the connection's own queue pair (beside the library, which has
 * nothing in flight), and its completion. 0, or the failure (-EACCES: a
 * remote access error).
 */
static int rdma_write_wait(struct rdax_conn *c, const struct rdma_tp_vol *window, uint64_t off,
			   const void *buf, uint32_t len)
{
	int done = 0;
	int ret = rdma_tp_write(c->rdma, window, off, buf, len, NULL);
	int64_t deadline = hx_now_ms() + IO_TIMEOUT;
	while (ret == 0 && !done) {
		ret = rdma_tp_progress(c->rdma, tp_done, &done);
		if (ret > 0)
			ret = 0;
		else if (ret == 0 && hx_now_ms() > deadline)
			ret = -ETIMEDOUT;
		else if (ret == 0)
			usleep(1000);
	}
	return ret;
}

/*
 * rdma_window_check -- over rdma://, after the restart of in_flight_round:
 * the writer's connection took the new daemon's window, the old one is dead
 * on the very queue pair the new one is bound to (a write through it fails
 * and block 0 keeps its bytes), the client resumes from that failure; the
 * control: the same write through the new window lands. Closes the writer's
 * connection.
 */
static void rdma_window_check(struct writer *w)
{
	struct rdax_conn *c = w->c;
	struct rdax_volume *v = w->v;
	struct rdma_tp_vol now = {v->remote_addr, v->rkey, v->imm_base, v->imm_shift};
	const struct rdma_tp_vol *old = &w->first_window;
	printf("# window before the restart: rkey %#x at %#llx; after: rkey %#x at %#llx\n",
	       old->rkey, (unsigned long long)old->remote_addr, now.rkey,
	       (unsigned long long)now.remote_addr);
	assert_true(v->direct);
	assert_true(now.rkey != old->rkey); /* the reopen took the new window */
	static uint8_t keep[BLOCK], stranger[BLOCK], got[BLOCK];
	if (w->version[0])
		block_fill(keep, 0, w->version[0]);
	else
		memset(keep, 0, BLOCK);
	memset(stranger, 0x5a, BLOCK);
	/* the control: through the new window the write lands (the path works) */
	assert_int_equal(rdma_write_wait(c, &now, 0, stranger, BLOCK), 0);
	assert_int_equal(rdax_read(v, 0, got, BLOCK), 0);
	assert_memory_equal(got, stranger, BLOCK);
	assert_int_equal(rdax_write(v, 0, keep, BLOCK, RDAX_WRITE_FSYNC), 0);
	/* the old window, on the same queue pair: a remote access error, nothing lands */
	unsigned resumes = rdax_conn_resumes(c);
	int ret = rdma_write_wait(c, old, 0, stranger, BLOCK);
	printf("# a write through the old window: %d (%s)\n", ret, rdma_tp_error(c->rdma));
	assert_int_equal(ret, -EACCES);
	/* the library finds its queue pair failed: a loss, resumed from; block 0 unchanged */
	assert_int_equal(rdax_read(v, 0, got, BLOCK), 0);
	assert_memory_equal(got, keep, BLOCK);
	printf("# resumes after it: %u (was %u)\n", rdax_conn_resumes(c), resumes);
	assert_int_equal(rdax_conn_resumes(c), resumes + 1);
	rdax_volume_close(&w->v);
	rdax_disconnect(&w->c);
}

/* verify_blocks -- every block reads its last acknowledged version (0: never written) */
static void verify_blocks(struct fx *f, const uint32_t *version)
{
	struct rdax_conn *c = conn_to(&f->d, 0, 0);
	struct rdax_volume *v;
	assert_int_equal(rdax_volume_open(c, VOL, &v), 0);
	static uint8_t got[BLOCK], want[BLOCK];
	unsigned bad = 0;
	for (uint64_t b = 0; b < NBLOCKS; b++) {
		assert_int_equal(rdax_read(v, b * BLOCK, got, BLOCK), 0);
		if (version[b])
			block_fill(want, b, version[b]);
		else
			memset(want, 0, BLOCK);
		if (memcmp(got, want, BLOCK) != 0 && bad++ < 5)
			fprintf(stderr, "block %llu: not its acknowledged version %u\n",
				(unsigned long long)b, version[b]);
	}
	assert_int_equal(bad, 0);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
}

static void in_flight_round(bool kill9)
{
	struct fx f;
	daemon_up(&f, kill9 ? "resume-kill" : "resume-stop", VOL_SIZE);
	static struct writer w;
	memset(&w, 0, sizeof(w));
	w.f = &f;
	w.nwrites = hx_scale(1200, 600);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, writer_run, &w), 0);
	/* the restart comes once the client is well under way */
	while (__atomic_load_n(&w.acked, __ATOMIC_SEQ_CST) < w.nwrites / 4 && !w.result)
		usleep(2000);
	printf("# %s with %u writes acknowledged\n", kill9 ? "kill -9" : "stop",
	       __atomic_load_n(&w.acked, __ATOMIC_SEQ_CST));
	restart(&f, kill9);
	pthread_join(t, NULL);
	if (w.result)
		fail_msg("client: %d %s (%s)", w.result, rdax_strerror(w.result), w.msg);
	printf("# %u writes acknowledged, %u resume(s)\n", w.acked, w.resumes);
	assert_int_equal(w.acked, w.nwrites);
	assert_true(w.resumes >= 1);
	if (w.c)
		rdma_window_check(&w);
	/* and once more, cold: a kill -9 now keeps exactly what the fsyncs made durable */
	assert_int_equal(hx_daemon_kill(&f.d), 0);
	assert_int_equal(hx_daemon_restart_same_port(&f.d), 0);
	verify_blocks(&f, w.version);
	daemon_down(&f);
}

static void in_flight_stop(void **state)
{
	(void)state;
	in_flight_round(false);
}

static void in_flight_kill(void **state)
{
	(void)state;
	in_flight_round(true);
}

/* --- an fsync over writes a kill -9 lost ---------------------------------- */

/*
 * lost_round -- 16 blocks written and acknowledged, nothing held, the daemon
 * killed and started again; then the fsync over them. Returns its result;
 * *lost = how many of the blocks read back as written (0: all lost).
 */
static int lost_round(unsigned *kept)
{
	struct fx f;
	daemon_up(&f, "resume-lost", VOL_SIZE);
	struct rdax_conn *c = conn_to(&f.d, RESUME_MS, 0);
	struct rdax_volume *v;
	assert_int_equal(rdax_volume_open(c, VOL, &v), 0);
	if (hx_rdma_addr())
		assert_true(v->direct); /* the writes below are one-sided */
	static uint8_t buf[BLOCK];
	for (uint64_t b = 0; b < 16; b++) {
		block_fill(buf, b, 7);
		assert_int_equal(rdax_write(v, b * BLOCK, buf, BLOCK, 0), 0);
	}
	restart(&f, true);
	int ret = rdax_fsync(v, 0, 0, NULL);
	if (ret)
		printf("# fsync: %s\n", rdax_conn_last_error(c));
	assert_true(rdax_conn_resumes(c) >= 1);
	*kept = 0;
	static uint8_t got[BLOCK];
	for (uint64_t b = 0; b < 16; b++) {
		assert_int_equal(rdax_read(v, b * BLOCK, got, BLOCK), 0);
		block_fill(buf, b, 7);
		*kept += memcmp(got, buf, BLOCK) == 0;
	}
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	daemon_down(&f);
	return ret;
}

static void lost_write_fsync_eio(void **state)
{
	(void)state;
	unsigned kept;
	int ret = lost_round(&kept);
	printf("# fsync after the kill: %d (%s); %u of 16 blocks kept\n", ret,
	       ret ? rdax_strerror(ret) : "ok", kept);
	assert_true(kept < 16);	     /* the loss was real ... */
	assert_int_equal(ret, -EIO); /* ... and the fsync said so */
}

/* The control: no verifier check -- the test must see the fsync succeed over the lost bytes. */
static void control_no_verifier(void **state)
{
	(void)state;
	unsigned kept;
	rdax_faults.client_no_verifier = true;
	int ret = lost_round(&kept);
	rdax_faults.client_no_verifier = false;
	printf("# control: fsync %d over %u of 16 blocks kept\n", ret, kept);
	assert_int_equal(ret, 0); /* the fsync claims durability ... */
	assert_true(kept < 16);	  /* ... of bytes that are gone: the silent loss, seen */
}

/* --- rdax write --fsync across a kill -9 ----------------------------------- */

struct cli_run {
	struct fx *f;
	uint8_t *data;
	struct hx_run r;
	int ret;
};

static void *cli_thread(void *arg)
{
	struct cli_run *cr = arg;
	cr->ret = hx_cli(&cr->f->d, cr->data, CLI_BYTES, &cr->r, "--timeout", "20", "--resume",
			 "120", "write", VOL, "0", "--fsync", NULL);
	return NULL;
}

static void cli_write_fsync(void **state)
{
	(void)state;
	struct fx f;
	daemon_up(&f, "resume-cli", CLI_VOL_SIZE);
	static struct cli_run cr;
	memset(&cr, 0, sizeof(cr));
	cr.f = &f;
	cr.data = malloc(CLI_BYTES);
	assert_non_null(cr.data);
	hx_pattern(cr.data, CLI_BYTES, 99, 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, cli_thread, &cr), 0);
	/* mid-stream: once an fsync or two of the stream went through */
	struct rdax_conn *c = conn_to(&f.d, 0, 0);
	struct rdax_volume *v;
	assert_int_equal(rdax_volume_open(c, VOL, &v), 0);
	struct rdax_volume_stat st = {0};
	for (int i = 0; i < 60000 && st.fsyncs < 2; i++) {
		assert_int_equal(rdax_stat(v, &st), 0);
		usleep(1000);
	}
	printf("# kill -9 after %llu fsyncs of the stream\n", (unsigned long long)st.fsyncs);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	restart(&f, true);
	pthread_join(t, NULL);
	assert_int_equal(cr.ret, 0);
	if (cr.r.status)
		fprintf(stderr, "rdax: %s\n", cr.r.err);
	assert_int_equal(cr.r.status, 0);
	hx_run_free(&cr.r);
	/* every byte durable: a second kill -9 keeps them */
	assert_int_equal(hx_daemon_kill(&f.d), 0);
	assert_int_equal(hx_daemon_restart_same_port(&f.d), 0);
	c = conn_to(&f.d, 0, 0);
	assert_int_equal(rdax_volume_open(c, VOL, &v), 0);
	uint8_t *got = malloc(CLI_BYTES);
	assert_non_null(got);
	assert_int_equal(rdax_read(v, 0, got, CLI_BYTES), 0);
	size_t first_bad = CLI_BYTES;
	for (size_t i = 0; i < CLI_BYTES && first_bad == CLI_BYTES; i++)
		if (got[i] != cr.data[i])
			first_bad = i;
	if (first_bad != CLI_BYTES)
		fprintf(stderr, "first wrong byte at %zu\n", first_bad);
	assert_int_equal(first_bad, CLI_BYTES);
	free(got);
	free(cr.data);
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	daemon_down(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(in_flight_stop),	    cmocka_unit_test(in_flight_kill),
	    cmocka_unit_test(lost_write_fsync_eio), cmocka_unit_test(control_no_verifier),
	    cmocka_unit_test(cli_write_fsync),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
