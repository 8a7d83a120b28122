/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tmpdir.h -- a temporary directory per test, and the files in it
 *
 * Every test that needs a namespace file makes a fresh directory under
 * $TMPDIR (or /tmp) and removes it, with whatever it holds, in its teardown,
 * so tests never share files and a failed run leaves at most one directory.
 *
 * Thread safety: none needed (fixtures run on the test's main thread).
 * Failures are cmocka assertions: these are fixture steps, not results.
 */
#ifndef RDAX_TEST_TMPDIR_H
#define RDAX_TEST_TMPDIR_H

#include <stddef.h>

/* tmpdir_make -- mkdtemp("$TMPDIR/rdax-<tag>-XXXXXX") into @dir (@len bytes) */
void tmpdir_make(char *dir, size_t len, const char *tag);

/* tmpdir_file -- "<dir>/<name>" into @out (@len bytes); asserts it fits */
void tmpdir_file(char *out, size_t len, const char *dir, const char *name);

/*
 * tmpdir_remove -- remove the files directly in @dir, then @dir itself
 * (sub-directories are removed if empty). A missing @dir is not an error.
 */
void tmpdir_remove(const char *dir);

#endif
