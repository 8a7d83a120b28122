/* SPDX-License-Identifier: BSD-3-Clause */
/* test_token.c -- token_file_read: the token file as client and daemon both read it */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "errors.h"
#include "token.h"

static char last_path[256]; /* the file write_file made last, "" if none */

/* remove_file -- unlink the last file write_file made */
static int remove_file(void **state)
{
	if (last_path[0])
		unlink(last_path);
	last_path[0] = '\0';
	return 0;
}

/* write_file -- a fresh temporary file holding @text (the previous one is removed); its path */
static const char *write_file(const char *name, const char *text, size_t len)
{
	remove_file(NULL);
	const char *tmp = getenv("TMPDIR");
	snprintf(last_path, sizeof(last_path), "%s/rdax-test-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
		 name);
	int fd = mkstemp(last_path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return last_path;
}

static void token_file_read__strips_newline(void **state)
{
	uint8_t *tok;
	size_t len;
	char err[256];
	const char *path = write_file("t1", "s3cret\n", 7);
	assert_int_equal(token_file_read(path, &tok, &len, err, sizeof(err)), 0);
	assert_int_equal(len, 6);
	assert_memory_equal(tok, "s3cret", 6);
	free(tok);
	path = write_file("t2", "abc\r\n", 5);
	assert_int_equal(token_file_read(path, &tok, &len, err, sizeof(err)), 0);
	assert_int_equal(len, 3);
	free(tok);
	/* inner white space and binary bytes are part of the token */
	path = write_file("t3", "a b\0c", 5);
	assert_int_equal(token_file_read(path, &tok, &len, err, sizeof(err)), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(tok, "a b\0c", 5);
	free(tok);
}

static void token_file_read__bad(void **state)
{
	uint8_t *tok = NULL;
	size_t len;
	char err[256];
	const char *path = write_file("t4", "\n", 1);
	assert_int_equal(token_file_read(path, &tok, &len, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "is empty"));
	char big[RDAX_TOKEN_MAX + 1];
	memset(big, 'x', sizeof(big));
	path = write_file("t5", big, sizeof(big));
	assert_int_equal(token_file_read(path, &tok, &len, err, sizeof(err)), -RDAX_E_TOO_BIG);
	path = write_file("t6", big, RDAX_TOKEN_MAX);
	assert_int_equal(token_file_read(path, &tok, &len, err, sizeof(err)), 0);
	assert_int_equal(len, RDAX_TOKEN_MAX);
	free(tok);
	tok = NULL;
	assert_int_equal(token_file_read("/nonexistent/token", &tok, &len, err, sizeof(err)),
			 -ENOENT);
	assert_null(tok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(token_file_read__strips_newline),
	    cmocka_unit_test(token_file_read__bad),
	};
	return cmocka_run_group_tests(tests, NULL, remove_file);
}
