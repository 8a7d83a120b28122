/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * logcap.h -- capture what the engine logs, to check that a refusal says why
 *
 * The log module writes each record to stderr with one write(2)
 * (common/log.h); between logcap_begin() and logcap_end() stderr goes to a
 * temporary file instead, and logcap_end() hands its text back (a test
 * prints it when a check on it fails).
 *
 * Thread safety: none; captures do not nest. Failures are cmocka assertions.
 */
#ifndef RDAX_TEST_LOGCAP_H
#define RDAX_TEST_LOGCAP_H

struct logcap {
	int saved_fd; /* the real stderr */
	int file_fd;  /* the capture */
};

/* logcap_begin -- send stderr to a fresh capture */
void logcap_begin(struct logcap *c);

/* logcap_end -- restore stderr; the captured text, malloc'ed, NUL-terminated */
char *logcap_end(struct logcap *c);

#endif
