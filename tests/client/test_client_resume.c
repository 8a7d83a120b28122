/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_resume.c -- librdax's resuming connections against the fake server
 *
 * What rdax_conn_opts_set_resume promises, request by request: a lost
 * connection is made again and what was in flight is sent again; a server
 * whose verifier changed gets the held writes again; an fsync over writes
 * a restart lost and the library no longer holds fails with -EIO (and the
 * control, the client-no-verifier switch, shows that without the check the
 * same fsync succeeds over lost data); a refusal naming the primary is
 * followed; several addresses; a bound after which calls fail.
 *
 * Links the library's objects (not librdax.so) so it can set the fault
 * switch the library reads.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "errors.h"
#include "faults.h"
#include "fake_server.h"
#include "frame.h"
#include "librdax.h"

#define TEST_TIMEOUT_MS 20000
#define RESUME_MS	10000
#define BLOCK		(16U << 10)

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* connect_resuming -- to @url (a list allowed), resuming for @resume_ms, holding @hold bytes */
static struct rdax_conn *connect_resuming(const char *url, int resume_ms, uint64_t hold)
{
	struct rdax_conn_opts *opts;
	assert_int_equal(rdax_conn_opts_new(&opts), 0);
	assert_int_equal(rdax_conn_opts_set_timeout(opts, TEST_TIMEOUT_MS), 0);
	assert_int_equal(rdax_conn_opts_set_resume(opts, resume_ms), 0);
	assert_int_equal(rdax_conn_opts_set_write_hold(opts, hold), 0);
	struct rdax_conn *conn = NULL;
	int ret = rdax_connect(url, opts, &conn);
	if (ret)
		fprintf(stderr, "connect: %s\n", rdax_connect_last_error());
	assert_int_equal(ret, 0);
	rdax_conn_opts_delete(&opts);
	return conn;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed * 13 + 1);
}

/* writes_at -- WRITEs of a block at @off the server received (a request it closed on has none) */
static unsigned writes_at(struct fake_server *fs, uint64_t off)
{
	unsigned n = 0;
	for (unsigned i = 0; i < fake_server_nlog(fs); i++) {
		struct fake_req r = fake_server_req(fs, i);
		if (r.type == FRAME_WRITE && r.offset == off && r.length == BLOCK)
			n++;
	}
	return n;
}

/* The server drops the connection on the 5th request (a write): the writes in flight go again. */
static void resume__lost_connection_sends_in_flight_again(void **state)
{
	(void)state;
	struct fake_cfg cfg = {.close_at = 5, .close_first_only = true};
	struct fake_server *fs;
	assert_int_equal(fake_server_start(&cfg, &fs), 0);
	struct rdax_conn *conn = connect_resuming(fs->url, RESUME_MS, 1 << 20);
	struct rdax_volume *vol;
	assert_int_equal(rdax_volume_open(conn, "vol", &vol), 0);
	static uint8_t data[8][BLOCK];
	for (unsigned i = 0; i < 8; i++) {
		fill(data[i], BLOCK, i);
		assert_int_equal(rdax_submit_write(vol, (uint64_t)i * BLOCK, data[i], BLOCK, 0, i),
				 0);
	}
	unsigned done = 0;
	while (done < 8) {
		struct rdax_completion c[8];
		int n = rdax_wait_completions(conn, c, 8, 1, TEST_TIMEOUT_MS);
		assert_true(n > 0);
		for (int k = 0; k < n; k++)
			assert_int_equal(c[k].status, 0);
		done += (unsigned)n;
	}
	assert_int_equal(rdax_fsync(vol, 0, 0, NULL), 0);
	assert_int_equal(rdax_conn_resumes(conn), 1);
	assert_int_equal(rdax_conn_status(conn), 0);
	for (unsigned i = 0; i < 8; i++)
		assert_true(fake_server_holds(fs, (uint64_t)i * BLOCK, data[i], BLOCK));
	assert_int_equal(rdax_volume_close(&vol), 0);
	assert_int_equal(rdax_disconnect(&conn), 0);
	fake_server_stop(&fs);
}

/*
 * lose_round -- writes A and B acknowledged (requests 3, 4), the server
 * "restarts" at request 5 (write C: connection dropped, A and B lost, a new
 * verifier); then C completes on the new connection and an fsync of the
 * whole volume is asked. Returns the fsync's result; the server is left in
 * *fsp and the bytes in @a, @b.
 */
static int lose_round(uint64_t hold, struct fake_server **fsp, uint8_t *a, uint8_t *b,
		      struct rdax_conn **connp, struct rdax_volume **volp)
{
	struct fake_cfg cfg = {
	    .close_at = 5,
	    .close_first_only = true,
	    .verifier = 0x1000,
	    .verifier_per_conn = true,
	    .lose_unsynced = true,
	};
	assert_int_equal(fake_server_start(&cfg, fsp), 0);
	struct rdax_conn *conn = connect_resuming((*fsp)->url, RESUME_MS, hold);
	struct rdax_volume *vol;
	assert_int_equal(rdax_volume_open(conn, "vol", &vol), 0);
	static uint8_t c[BLOCK];
	fill(a, BLOCK, 1);
	fill(b, BLOCK, 2);
	fill(c, BLOCK, 3);
	assert_int_equal(rdax_write(vol, 0, a, BLOCK, 0), 0);
	assert_int_equal(rdax_write(vol, BLOCK, b, BLOCK, 0), 0);
	/* the caller's buffers are its own again: only the library's copy can restore them */
	assert_int_equal(rdax_write(vol, 2 * BLOCK, c, BLOCK, 0), 0);
	assert_int_equal(rdax_conn_resumes(conn), 1);
	assert_true(fake_server_holds(*fsp, 2 * BLOCK, c, BLOCK));
	*connp = conn;
	*volp = vol;
	return rdax_fsync(vol, 0, 0, NULL);
}

/* A restart lost acknowledged writes; the library held copies: it sends them again. */
static void resume__verifier_change_sends_held_writes_again(void **state)
{
	(void)state;
	static uint8_t a[BLOCK], b[BLOCK];
	struct fake_server *fs;
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	assert_int_equal(lose_round(1 << 20, &fs, a, b, &conn, &vol), 0);
	assert_true(fake_server_holds(fs, 0, a, BLOCK));
	assert_true(fake_server_holds(fs, BLOCK, b, BLOCK));
	assert_int_equal(writes_at(fs, 0), 2); /* once, and again after the restart */
	assert_int_equal(rdax_volume_close(&vol), 0);
	assert_int_equal(rdax_disconnect(&conn), 0);
	fake_server_stop(&fs);
}

/* The same loss without copies: the fsync over the lost writes fails with -EIO, once. */
static void resume__lost_unheld_writes_fail_the_fsync(void **state)
{
	(void)state;
	static uint8_t a[BLOCK], b[BLOCK];
	struct fake_server *fs;
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	assert_int_equal(lose_round(0, &fs, a, b, &conn, &vol), -EIO);
	assert_non_null(strstr(rdax_conn_last_error(conn), "not held to send again"));
	assert_false(fake_server_holds(fs, 0, a, BLOCK)); /* the loss was real */
	/* reported once, as a lost writeback is */
	assert_int_equal(rdax_fsync(vol, 0, 0, NULL), 0);
	assert_int_equal(rdax_volume_close(&vol), 0);
	assert_int_equal(rdax_disconnect(&conn), 0);
	fake_server_stop(&fs);
}

/*
 * A discard over a held write makes it moot: after a restart the write is
 * not sent again over the zeros (the held record is forgotten when the
 * discard is answered). Before, the resume wrote the old bytes back.
 */
static void resume__discard_forgets_held_writes(void **state)
{
	(void)state;
	static uint8_t a[BLOCK], c[BLOCK], zeros[BLOCK];
	struct fake_cfg cfg = {
	    .close_at = 5,
	    .close_first_only = true,
	    .verifier = 0x1000,
	    .verifier_per_conn = true,
	    .lose_unsynced = true,
	};
	struct fake_server *fs;
	assert_int_equal(fake_server_start(&cfg, &fs), 0);
	struct rdax_conn *conn = connect_resuming(fs->url, RESUME_MS, 1 << 20);
	struct rdax_volume *vol;
	assert_int_equal(rdax_volume_open(conn, "vol", &vol), 0);
	fill(a, BLOCK, 1);
	fill(c, BLOCK, 3);
	assert_int_equal(rdax_write(vol, 0, a, BLOCK, 0), 0);	  /* request 3: held */
	assert_int_equal(rdax_discard(vol, 0, BLOCK), 0);	  /* 4: zeros over it */
	assert_int_equal(rdax_write(vol, BLOCK, c, BLOCK, 0), 0); /* 5: the "restart" */
	assert_int_equal(rdax_conn_resumes(conn), 1);
	assert_int_equal(writes_at(fs, 0), 1); /* never sent again */
	assert_true(fake_server_holds(fs, 0, zeros, BLOCK));
	assert_int_equal(rdax_fsync(vol, 0, 0, NULL), 0);
	assert_int_equal(rdax_volume_close(&vol), 0);
	assert_int_equal(rdax_disconnect(&conn), 0);
	fake_server_stop(&fs);
}

/* The control: with the verifier check switched off the fsync succeeds over lost data. */
static void resume__control_no_verifier_loses_silently(void **state)
{
	(void)state;
	static uint8_t a[BLOCK], b[BLOCK];
	struct fake_server *fs;
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	rdax_faults.client_no_verifier = true;
	int ret = lose_round(0, &fs, a, b, &conn, &vol);
	rdax_faults.client_no_verifier = false;
	assert_int_equal(ret, 0);			  /* the fsync says durable ... */
	assert_false(fake_server_holds(fs, 0, a, BLOCK)); /* ... and the write is gone */
	assert_int_equal(rdax_volume_close(&vol), 0);
	assert_int_equal(rdax_disconnect(&conn), 0);
	fake_server_stop(&fs);
}

/* A node that is not the primary names it: the open goes there. */
static void resume__follows_the_primary(void **state)
{
	(void)state;
	struct fake_cfg pcfg = {0};
	struct fake_server *primary;
	assert_int_equal(fake_server_start(&pcfg, &primary), 0);
	struct fake_cfg rcfg = {.not_primary = primary->url};
	struct fake_server *replica;
	assert_int_equal(fake_server_start(&rcfg, &replica), 0);
	struct rdax_conn *conn = connect_resuming(replica->url, RESUME_MS, 0);
	struct rdax_volume *vol;
	assert_int_equal(rdax_volume_open(conn, "vol", &vol), 0);
	assert_string_equal(rdax_conn_url(conn), primary->url);
	static uint8_t a[BLOCK];
	fill(a, BLOCK, 9);
	assert_int_equal(rdax_write(vol, 0, a, BLOCK, RDAX_WRITE_FSYNC), 0);
	assert_true(fake_server_holds(primary, 0, a, BLOCK));
	assert_int_equal(rdax_volume_close(&vol), 0);
	assert_int_equal(rdax_disconnect(&conn), 0);
	fake_server_stop(&replica);
	fake_server_stop(&primary);
}

/* Without resume the refusal is the caller's, with the address (rdax_conn_primary_url). */
static void no_resume__not_primary_is_returned(void **state)
{
	(void)state;
	struct fake_cfg rcfg = {.not_primary = "tcp://192.0.2.77:7470"};
	struct fake_server *replica;
	assert_int_equal(fake_server_start(&rcfg, &replica), 0);
	struct rdax_conn *conn = connect_resuming(replica->url, 0, 0);
	struct rdax_volume *vol = NULL;
	assert_int_equal(rdax_volume_open(conn, "vol", &vol), -RDAX_E_NOT_PRIMARY);
	assert_string_equal(rdax_conn_primary_url(conn), "tcp://192.0.2.77:7470");
	assert_int_equal(rdax_disconnect(&conn), 0);
	fake_server_stop(&replica);
}

/* A list of addresses: the first refuses, the second serves. */
static void resume__several_addresses(void **state)
{
	(void)state;
	struct fake_cfg cfg = {0};
	struct fake_server *fs;
	assert_int_equal(fake_server_start(&cfg, &fs), 0);
	char list[160];
	snprintf(list, sizeof(list), "tcp://127.0.0.1:1,%s", fs->url);
	struct rdax_conn *conn = connect_resuming(list, RESUME_MS, 0);
	assert_string_equal(rdax_conn_url(conn), fs->url);
	assert_int_equal(rdax_disconnect(&conn), 0);
	/* a bad one anywhere in the list is refused before anything is tried */
	snprintf(list, sizeof(list), "%s,nbd://127.0.0.1", fs->url);
	assert_int_equal(rdax_connect(list, NULL, &conn), -EINVAL);
	snprintf(list, sizeof(list), "%s,", fs->url);
	assert_int_equal(rdax_connect(list, NULL, &conn), -EINVAL);
	fake_server_stop(&fs);
}

/* The server is gone for good: calls fail with -ETIMEDOUT once the bound passed. */
static void resume__gives_up_after_the_bound(void **state)
{
	(void)state;
	struct fake_cfg cfg = {0};
	struct fake_server *fs;
	assert_int_equal(fake_server_start(&cfg, &fs), 0);
	struct rdax_conn *conn = connect_resuming(fs->url, 1500, 0);
	struct rdax_volume *vol;
	assert_int_equal(rdax_volume_open(conn, "vol", &vol), 0);
	fake_server_stop(&fs);
	static uint8_t a[BLOCK];
	int64_t t0 = now_ms();
	int ret = rdax_write(vol, 0, a, BLOCK, 0);
	int64_t took = now_ms() - t0;
	assert_int_equal(ret, -ETIMEDOUT);
	assert_non_null(strstr(rdax_conn_last_error(conn), "could not resume"));
	assert_true(took >= 1000); /* it tried for the bound ... */
	assert_true(took < 15000); /* ... and no longer (a generous margin on a loaded machine) */
	assert_int_equal(rdax_conn_status(conn), -ETIMEDOUT);
	assert_int_equal(rdax_volume_close(&vol), 0);
	assert_int_equal(rdax_disconnect(&conn), 0);
}

#include "log.h"
int main(void)
{
	if (getenv("RDAX_TEST_DEBUG"))
		log_current_level = LOG_LEVEL_DEBUG;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(resume__lost_connection_sends_in_flight_again),
	    cmocka_unit_test(resume__verifier_change_sends_held_writes_again),
	    cmocka_unit_test(resume__lost_unheld_writes_fail_the_fsync),
	    cmocka_unit_test(resume__discard_forgets_held_writes),
	    cmocka_unit_test(resume__control_no_verifier_loses_silently),
	    cmocka_unit_test(resume__follows_the_primary),
	    cmocka_unit_test(no_resume__not_primary_is_returned),
	    cmocka_unit_test(resume__several_addresses),
	    cmocka_unit_test(resume__gives_up_after_the_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
