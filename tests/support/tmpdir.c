/* SPDX-License-Identifier: BSD-3-Clause */
/* tmpdir.c -- a temporary directory per test, and the files in it */
#include "tmpdir.h"

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

void tmpdir_make(char *dir, size_t len, const char *tag)
{
	const char *tmp = getenv("TMPDIR");
	int n = snprintf(dir, len, "%s/rdax-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
	assert_true(n > 0 && (size_t)n < len);
	assert_non_null(mkdtemp(dir));
}

void tmpdir_file(char *out, size_t len, const char *dir, const char *name)
{
	int n = snprintf(out, len, "%s/%s", dir, name);
	assert_true(n > 0 && (size_t)n < len);
}

void tmpdir_remove(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char path[4096];
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (unlink(path) != 0 && errno == EISDIR)
			rmdir(path);
	}
	closedir(d);
	rmdir(dir);
}
