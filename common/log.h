/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.h -- the one log module
 *
 * Records go to stderr (journald picks them up) as
 *   "<PRIORITY>level file:line function: message"
 * where PRIORITY is the level's syslog priority (log_level_priority), the
 * prefix journald reads to file the record (sd-daemon(3)).
 * The level is checked before any formatting, so a disabled LOG_DEBUG costs
 * one comparison. Thread-safe: each record is written with a single write(2).
 */
#ifndef RDAX_LOG_H
#define RDAX_LOG_H

enum log_level { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

extern enum log_level log_current_level;

/* log_level_parse -- "error", "warn", "info" or "debug"; 0 or -EINVAL */
int log_level_parse(const char *name, enum log_level *out);
void log_set_level(enum log_level level);

/* log_level_priority -- the syslog priority of @level: 3 (err), 4 (warning), 6 (info), 7 (debug) */
int log_level_priority(enum log_level level);

void log_record(enum log_level level, const char *file, int line, const char *func, const char *fmt,
		...) __attribute__((format(printf, 5, 6)));

#define LOG_AT(level, ...)                                                                         \
	do {                                                                                       \
		if ((level) <= log_current_level)                                                  \
			log_record((level), __FILE__, __LINE__, __func__, __VA_ARGS__);            \
	} while (0)

#define LOG_ERROR(...) LOG_AT(LOG_LEVEL_ERROR, __VA_ARGS__)
#define LOG_WARN(...)  LOG_AT(LOG_LEVEL_WARN, __VA_ARGS__)
#define LOG_INFO(...)  LOG_AT(LOG_LEVEL_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) LOG_AT(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
