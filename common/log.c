/* SPDX-License-Identifier: BSD-3-Clause */
/* log.c -- leveled records on stderr */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum log_level log_current_level = LOG_LEVEL_INFO;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int log_level_parse(const char *name, enum log_level *out)
{
	for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (name && strcmp(name, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void log_set_level(enum log_level level)
{
	log_current_level = level;
}

void log_record(enum log_level level, const char *file, int line, const char *func,
		const char *fmt, ...)
{
	char buf[1024];
	const char *base = strrchr(file, '/');
	int saved_errno = errno;
	int n = snprintf(buf, sizeof(buf), "<%d>%s %s:%d %s: ", 3 + (int)level,
			 level_names[level], base ? base + 1 : file, line, func);
	if (n < 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	if ((size_t)n < sizeof(buf))
		n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if ((size_t)n >= sizeof(buf) - 1)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	ssize_t unused = write(STDERR_FILENO, buf, (size_t)n);
	(void)unused;
	errno = saved_errno;
}
