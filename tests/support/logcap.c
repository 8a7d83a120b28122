/* SPDX-License-Identifier: BSD-3-Clause */
/* logcap.c -- capture what the engine logs (stderr) into a temporary file */
#include "logcap.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

void logcap_begin(struct logcap *c)
{
	FILE *f = tmpfile();
	assert_non_null(f);
	c->file_fd = dup(fileno(f));
	fclose(f); /* the descriptor keeps the unlinked file */
	assert_true(c->file_fd >= 0);
	fflush(stderr);
	c->saved_fd = dup(STDERR_FILENO);
	assert_true(c->saved_fd >= 0);
	assert_true(dup2(c->file_fd, STDERR_FILENO) >= 0);
}

char *logcap_end(struct logcap *c)
{
	fflush(stderr);
	assert_true(dup2(c->saved_fd, STDERR_FILENO) >= 0);
	close(c->saved_fd);
	off_t len = lseek(c->file_fd, 0, SEEK_END);
	assert_true(len >= 0);
	char *text = malloc((size_t)len + 1);
	assert_non_null(text);
	assert_int_equal(pread(c->file_fd, text, (size_t)len, 0), len);
	text[len] = '\0';
	close(c->file_fd);
	return text;
}
