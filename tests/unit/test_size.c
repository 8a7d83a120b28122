/* SPDX-License-Identifier: BSD-3-Clause */
/* test_size.c -- the one size rule of rdax and rdaxd (common/size.h): parsing and both formats */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "size.h"

static uint64_t parse_ok(const char *s)
{
	uint64_t v = 0;
	assert_int_equal(size_parse(s, &v), 0);
	return v;
}

static void size_parse__plain_numbers(void **state)
{
	assert_int_equal(parse_ok("0"), 0);
	assert_int_equal(parse_ok("1"), 1);
	assert_int_equal(parse_ok("4096"), 4096);
	assert_int_equal(parse_ok("007"), 7);
	assert_true(parse_ok("18446744073709551615") == UINT64_MAX);
}

static void size_parse__binary_suffixes(void **state)
{
	assert_int_equal(parse_ok("1K"), 1024);
	assert_int_equal(parse_ok("4k"), 4096);
	assert_int_equal(parse_ok("64M"), 64ULL << 20);
	assert_true(parse_ok("2G") == 2ULL << 30);
	assert_true(parse_ok("3T") == 3ULL << 40);
	assert_int_equal(parse_ok("4KiB"), 4096);
	assert_int_equal(parse_ok("1mib"), 1 << 20);
	assert_int_equal(parse_ok("0G"), 0);
}

static void size_parse__refuses_garbage(void **state)
{
	const char *bad[] = {"", "-1", "+1", " 1", "1 ", "1.5G", "0x10", "K", "1KK", "1Q", "1Ki",
			     "1KiBB", "1 K", "abc", "1e3", "1,000", "1B", "1iB", "1Kb ", "--5",
			     "1\n",
			     /* ambiguous: dd(1) reads these as powers of 1000 */
			     "4KB", "4kb", "64MB", "1GB", "2TB"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 12345;
		assert_int_equal(size_parse(bad[i], &v), -EINVAL);
		assert_int_equal(v, 12345); /* untouched */
	}
	uint64_t v;
	assert_int_equal(size_parse(NULL, &v), -EINVAL);
	assert_int_equal(size_parse("1", NULL), -EINVAL);
}

static void size_parse__refuses_overflow(void **state)
{
	uint64_t v = 7;
	assert_int_equal(size_parse("18446744073709551616", &v), -ERANGE);
	assert_int_equal(size_parse("99999999999999999999999", &v), -ERANGE);
	/* 2^24 T = 2^64 */
	assert_int_equal(size_parse("16777216T", &v), -ERANGE);
	assert_int_equal(size_parse("17179869184G", &v), -ERANGE);
	assert_int_equal(v, 7);
	assert_true(parse_ok("16777215T") == 16777215ULL << 40);
	/* garbage wins over overflow: it is a different mistake */
	assert_int_equal(size_parse("99999999999999999999999x", &v), -EINVAL);
}

static void size_format__human(void **state)
{
	char b[32];
	assert_string_equal(size_format(0, b, sizeof(b)), "0 B");
	assert_string_equal(size_format(1023, b, sizeof(b)), "1023 B");
	assert_string_equal(size_format(4096, b, sizeof(b)), "4.0 KiB");
	assert_string_equal(size_format(64ULL << 20, b, sizeof(b)), "64.0 MiB");
	assert_string_equal(size_format(3ULL << 19, b, sizeof(b)), "1.5 MiB");
	assert_string_equal(size_format(1ULL << 40, b, sizeof(b)), "1.0 TiB");
	assert_string_equal(size_format(UINT64_MAX, b, sizeof(b)), "16.0 EiB");
}

static void size_format_compact__exact_and_parsable(void **state)
{
	char b[32];
	assert_string_equal(size_format_compact(0, b, sizeof(b)), "0");
	assert_string_equal(size_format_compact(4097, b, sizeof(b)), "4097");
	assert_string_equal(size_format_compact(4096, b, sizeof(b)), "4K");
	assert_string_equal(size_format_compact(3ULL << 19, b, sizeof(b)), "1536K");
	assert_string_equal(size_format_compact(64ULL << 20, b, sizeof(b)), "64M");
	assert_string_equal(size_format_compact(1ULL << 30, b, sizeof(b)), "1G");
	assert_string_equal(size_format_compact(5ULL << 40, b, sizeof(b)), "5T");
	assert_string_equal(size_format_compact(1ULL << 50, b, sizeof(b)), "1024T");
	/* round trip */
	const uint64_t values[] = {1, 512, 4096, 12345, 3ULL << 19, 7ULL << 30, UINT64_MAX};
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		assert_true(parse_ok(size_format_compact(values[i], b, sizeof(b))) == values[i]);
}

static void size_parse__daemon_forms(void **state)
{
	uint64_t v;
	assert_int_equal(size_parse("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(size_parse("64K", &v), 0);
	assert_int_equal(v, 64ULL << 10);
	assert_int_equal(size_parse("3m", &v), 0);
	assert_int_equal(v, 3ULL << 20);
	assert_int_equal(size_parse("1G", &v), 0);
	assert_int_equal(v, 1ULL << 30);
	assert_int_equal(size_parse("2T", &v), 0);
	assert_int_equal(v, 2ULL << 40);
	assert_int_equal(size_parse("1GiB", &v), 0);
	assert_int_equal(v, 1ULL << 30);
	assert_int_equal(size_parse("0", &v), 0);
	assert_int_equal(v, 0);
}

static void size_parse__daemon_refusals(void **state)
{
	uint64_t v = 77;
	const char *bad[] = {"",     "G",  "abc", "-1",	 "+1",	" 1",  "1 ",
			     "1.5G", "1X", "1GB", "1Gi", "1KK", "0x10"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(size_parse(bad[i], &v), -EINVAL);
	assert_int_equal(size_parse("16777216T", &v), -ERANGE); /* 2^64 */
	assert_int_equal(size_parse("18446744073709551616", &v), -ERANGE);
	assert_int_equal(size_parse(NULL, &v), -EINVAL);
	assert_int_equal(v, 77); /* untouched on error */
	assert_int_equal(size_parse("16777215T", &v), 0);
	assert_int_equal(v, 16777215ULL << 40);
}

static void size_format__daemon_forms(void **state)
{
	char buf[32];
	assert_string_equal(size_format(1ULL << 30, buf, sizeof(buf)), "1.0 GiB");
	assert_string_equal(size_format(256ULL << 20, buf, sizeof(buf)), "256.0 MiB");
	assert_string_equal(size_format(1536, buf, sizeof(buf)), "1.5 KiB");
	assert_string_equal(size_format(100, buf, sizeof(buf)), "100 B");
	assert_string_equal(size_format(3ULL << 40, buf, sizeof(buf)), "3.0 TiB");
}

static void size_syntax_hint__names_the_spelling(void **state)
{
	char b[128];
	assert_string_equal(size_syntax_hint("4MB", b, sizeof(b)),
			    "write 4M or 4MiB: units are powers of 1024");
	assert_string_equal(size_syntax_hint("64kb", b, sizeof(b)),
			    "write 64k or 64kiB: units are powers of 1024");
	assert_string_equal(size_syntax_hint("lots", b, sizeof(b)), SIZE_SYNTAX);
	assert_string_equal(size_syntax_hint("4XB", b, sizeof(b)), SIZE_SYNTAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(size_parse__plain_numbers),
	    cmocka_unit_test(size_parse__binary_suffixes),
	    cmocka_unit_test(size_parse__refuses_garbage),
	    cmocka_unit_test(size_parse__refuses_overflow),
	    cmocka_unit_test(size_format__human),
	    cmocka_unit_test(size_format_compact__exact_and_parsable),
	    cmocka_unit_test(size_parse__daemon_forms),
	    cmocka_unit_test(size_parse__daemon_refusals),
	    cmocka_unit_test(size_format__daemon_forms),
	    cmocka_unit_test(size_syntax_hint__names_the_spelling),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
