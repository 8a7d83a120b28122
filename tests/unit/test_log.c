/* SPDX-License-Identifier: BSD-3-Clause */
/* test_log.c -- each level's record carries its syslog priority, as journald reads it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

/* capture -- the record that LOG_AT(@level, "hello %d", 42) writes to stderr */
static void capture(enum log_level level, char *out, size_t len)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	int saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(p[1], STDERR_FILENO) >= 0);
	LOG_AT(level, "hello %d", 42);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(p[1]);
	ssize_t n = read(p[0], out, len - 1);
	close(p[0]);
	out[n > 0 ? n : 0] = '\0';
}

static void log_record__syslog_priority_prefix(void **state)
{
	static const struct {
		enum log_level level;
		const char *prefix;
	} cases[] = {
	    /* <3> err, <4> warning, <6> info, <7> debug: syslog.h's numbers, not level + 3 */
	    {LOG_LEVEL_ERROR, "<3>error "},
	    {LOG_LEVEL_WARN, "<4>warn "},
	    {LOG_LEVEL_INFO, "<6>info "},
	    {LOG_LEVEL_DEBUG, "<7>debug "},
	};
	log_set_level(LOG_LEVEL_DEBUG);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[512];
		capture(cases[i].level, buf, sizeof(buf));
		assert_memory_equal(buf, cases[i].prefix, strlen(cases[i].prefix));
		assert_non_null(strstr(buf, "test_log.c:"));
		assert_non_null(strstr(buf, "hello 42\n"));
	}
	/* <syslog.h> cannot be included beside log.h (LOG_INFO, LOG_DEBUG): its numbers */
	assert_int_equal(log_level_priority(LOG_LEVEL_ERROR), 3);
	assert_int_equal(log_level_priority(LOG_LEVEL_WARN), 4);
	assert_int_equal(log_level_priority(LOG_LEVEL_INFO), 6);
	assert_int_equal(log_level_priority(LOG_LEVEL_DEBUG), 7);
}

static void log_record__below_the_level_writes_nothing(void **state)
{
	char buf[512];
	log_set_level(LOG_LEVEL_WARN);
	capture(LOG_LEVEL_INFO, buf, sizeof(buf));
	assert_string_equal(buf, "");
	capture(LOG_LEVEL_WARN, buf, sizeof(buf));
	assert_memory_equal(buf, "<4>warn ", 8);
}

/*
 * A client's records pass LOG_PEER_BURST times per window, per address
 * (the port does not count); the ones held back are counted into the next
 * that passes; another address is not held back by the first one's.
 */
static void log_peer_pass__burst_per_address(void **state)
{
	unsigned held = 99, passed = 0;
	for (unsigned i = 0; i < 3 * LOG_PEER_BURST; i++) {
		char peer[64];
		snprintf(peer, sizeof(peer), "192.0.2.7:%u", 40000 + i); /* a new port each time */
		passed += log_peer_pass(peer, &held) != 0;
	}
	assert_int_equal(passed, LOG_PEER_BURST);
	/* another address, IPv6 and a unix socket's name: their own windows */
	assert_true(log_peer_pass("[2001:db8::1]:5000", &held));
	assert_int_equal(held, 0);
	assert_true(log_peer_pass("nbd+unix#3", &held));
	assert_true(log_peer_pass("nbd+unix#4", &held)); /* the same socket file's peers */
	for (unsigned i = 2; i < LOG_PEER_BURST; i++)
		assert_true(log_peer_pass("nbd+unix#9", &held));
	assert_false(log_peer_pass("nbd+unix#10", &held));

	/* the record that passes says how many were held back */
	int p[2];
	assert_int_equal(pipe(p), 0);
	int saved = dup(STDERR_FILENO);
	assert_true(dup2(p[1], STDERR_FILENO) >= 0);
	log_set_level(LOG_LEVEL_INFO);
	log_peer_record(LOG_LEVEL_INFO, __FILE__, __LINE__, __func__, 20, "refused %d", 7);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(p[1]);
	char buf[512];
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	buf[n > 0 ? n : 0] = '\0';
	assert_non_null(strstr(buf, "<6>info "));
	assert_non_null(strstr(buf, "refused 7 (and 20 records about this address held back"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(log_record__syslog_priority_prefix),
	    cmocka_unit_test(log_record__below_the_level_writes_nothing),
	    cmocka_unit_test(log_peer_pass__burst_per_address),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
