/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_replica_garbage.c -- a replica that answers garbage is dropped, never trusted
 *
 * The primary's replication (repl_volume) with one member whose rdaxd is the
 * misbehaving fake server of the librdax tests (tests/client/fake_server.h):
 * it answers the first forwarded WRITE with a header of a wrong magic, with
 * another request's id, or with a connection-level error reply. Each time
 * the member must fail, its removal from the ISR must be asked, and the
 * fsync must stay unacknowledged until the removal is answered: 0 releases
 * it, a refusal (-ESTALE: no longer primary) fails it with -EIO. Never an
 * acknowledgement the replica did not give (invariant 2). The fsync covers
 * more than the write, so the link sends them as two requests (3 and 4) and
 * a garbage answer to either is seen; a durable write -- the fsync of
 * exactly the write's range -- goes as one WRITE with fsync=true (the link
 * fuses them: replica_link.c), and a garbage answer to that one request is
 * checked too.
 * Control: repl-ack-early (the fsync does not wait for the replica) must be
 * seen acknowledging while the garbage-answering member's removal is unanswered.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "completion.h"
#include "fake_server.h"
#include "faults.h"
#include "repl_volume.h"

#define SIZE (4U << 20)

static uint8_t mapping[SIZE];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned shrinks_asked;

static void on_shrink(void *arg, struct repl_volume *rv, const char *node)
{
	(void)arg;
	(void)rv;
	(void)node;
	pthread_mutex_lock(&lock);
	shrinks_asked++;
	pthread_mutex_unlock(&lock);
}

struct wait {
	struct repl_wait w;
	struct completion c;
};

static void wait_done(struct repl_wait *w, int status)
{
	completion_complete(&((struct wait *)w)->c, status);
}

/*
 * one_case -- the member answers garbage per @cfg; returns whether the fsync
 * was acknowledged before the removal was answered (a violation). @fused:
 * the fsync is of the write's own range (one request), else of twice it.
 */
static bool one_case(const char *what, const struct fake_cfg *cfg, int answer, bool fused)
{
	struct fake_server *fs;
	assert_int_equal(fake_server_start(cfg, &fs), 0);
	struct repl_member_spec m = {"fk", fs->url, NULL};
	struct repl_opts o = {.volume = "vol",
			      .mapping = mapping,
			      .size = SIZE,
			      .epoch = 1,
			      .timeout_ms = 500,
			      .shrink = on_shrink};
	struct repl_volume *rv;
	shrinks_asked = 0;
	assert_int_equal(repl_start(&o, &m, 1, &rv), 0);
	memset(mapping, 0x61, 4096);
	struct wait x = {.w = {.done = wait_done}};
	completion_init(&x.c);
	repl_before_write(rv, 0, 4096);
	repl_write(rv, 0, 4096);
	repl_fsync(rv, 0, fused ? 4096 : 8192, &x.w);
	int status = 1;
	bool early = completion_wait(&x.c, 1500, &status);
	pthread_mutex_lock(&lock);
	unsigned asked = shrinks_asked;
	pthread_mutex_unlock(&lock);
	printf("  %s: removal asked %u time(s); fsync %s before the answer\n", what, asked,
	       early ? (status ? "failed" : "ACKNOWLEDGED") : "held");
	bool violation = early && status == 0;
	if (!rdax_faults.repl_ack_early) {
		assert_int_equal(asked, 1);
		assert_false(early);
		repl_removed(rv, "fk", answer);
		assert_true(completion_wait(&x.c, 5000, &status));
		printf("  %s: removal answered %d: fsync %d\n", what, answer, status);
		assert_int_equal(status, answer ? -EIO : 0);
	} else if (!early) {
		repl_removed(rv, "fk", answer);
		completion_wait(&x.c, 5000, &status);
	}
	completion_destroy(&x.c);
	repl_stop(&rv);
	fake_server_stop(&fs);
	return violation;
}

static void garbage__never_acknowledged(void **state)
{
	(void)state;
	/* requests: 1 HELLO, 2 VOLUME_OPEN, 3 the forwarded WRITE, 4 the FSYNC */
	struct fake_cfg bad_magic = {.bad_magic_at = 3};
	struct fake_cfg wrong_id = {.wrong_id_at = 3};
	struct fake_cfg frame_error = {.frame_error_at = 3};
	struct fake_cfg bad_fsync = {.bad_magic_at = 4};
	assert_false(one_case("a reply of a wrong magic", &bad_magic, 0, false));
	assert_false(one_case("a reply to another request", &wrong_id, 0, false));
	assert_false(one_case("an error reply, then closed", &frame_error, 0, false));
	assert_false(one_case("a garbage fsync reply", &bad_fsync, -ESTALE, false));
	/* a durable write: 3 is the WRITE with fsync=true, the only request */
	assert_false(one_case("a durable write, a reply of a wrong magic", &bad_magic, 0, true));
	assert_false(
	    one_case("a durable write, a reply to another request", &wrong_id, -ESTALE, true));
	assert_false(
	    one_case("a durable write, an error reply, then closed", &frame_error, 0, true));
}

static void garbage__control_ack_early(void **state)
{
	(void)state;
	struct fake_cfg wrong_id = {.wrong_id_at = 3};
	rdax_faults.repl_ack_early = true;
	bool v = one_case("control repl-ack-early", &wrong_id, 0, false);
	rdax_faults.repl_ack_early = false;
	assert_true(v); /* caught: acknowledged while the member's removal was unanswered */
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(garbage__never_acknowledged),
	    cmocka_unit_test(garbage__control_ack_early),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
