/* SPDX-License-Identifier: BSD-3-Clause */
/* log.c -- leveled records on stderr */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum log_level log_current_level = LOG_LEVEL_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/*
 * The syslog priority of each level, sent as the "<N>" prefix sd-daemon(3)
 * defines: journald (SyslogLevelPrefix=yes, the default for a unit's stderr)
 * files the record at that priority and strips the prefix. The numbers are
 * <syslog.h>'s, written out because its LOG_INFO and LOG_DEBUG would clash
 * with this module's macros of the same names.
 */
static const int level_priorities[] = {
    [LOG_LEVEL_ERROR] = 3, /* LOG_ERR */
    [LOG_LEVEL_WARN] = 4,  /* LOG_WARNING */
    [LOG_LEVEL_INFO] = 6,  /* LOG_INFO (5 is LOG_NOTICE) */
    [LOG_LEVEL_DEBUG] = 7, /* LOG_DEBUG */
};

int log_level_priority(enum log_level level)
{
	return level <= LOG_LEVEL_DEBUG ? level_priorities[level] : 7;
}

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

void log_record(enum log_level level, const char *file, int line, const char *func, const char *fmt,
		...)
{
	char buf[1024];
	const char *base = strrchr(file, '/');
	int saved_errno = errno;
	int n = snprintf(buf, sizeof(buf), "<%d>%s %s:%d %s: ", log_level_priority(level),
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
