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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(log_record__syslog_priority_prefix),
	    cmocka_unit_test(log_record__below_the_level_writes_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
