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

/*
 * What a client caused -- a refused or broken request, a limit it ran
 * into -- is not an error of the daemon: it is logged at info (or debug)
 * with LOG_PEER, naming the client's address, and rate-limited per address
 * (the port does not count: a client that reconnects is the same client).
 * At most LOG_PEER_BURST such records per LOG_PEER_WINDOW seconds pass for
 * one address; the ones held back are counted, and the next record that
 * passes says how many. One misbehaving client then costs a few lines a
 * minute, not one per request, and other clients' records still pass.
 */
#define LOG_PEER_BURST	10
#define LOG_PEER_WINDOW 60.0
/* Addresses whose rate is tracked at once (more share slots and may pass more). */
#define LOG_PEER_SLOTS 256

/*
 * log_peer_pass -- may a record about @peer ("ADDR:PORT", "[V6]:PORT",
 * "scheme#N") be written now? *held gets the count held back since the
 * last one that passed. Thread-safe.
 */
int log_peer_pass(const char *peer, unsigned *held);

void log_peer_record(enum log_level level, const char *file, int line, const char *func,
		     unsigned held, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#define LOG_PEER(level, peer, ...)                                                                 \
	do {                                                                                       \
		unsigned log_held_;                                                                \
		if ((level) <= log_current_level && log_peer_pass((peer), &log_held_))             \
			log_peer_record((level), __FILE__, __LINE__, __func__, log_held_,          \
					__VA_ARGS__);                                              \
	} while (0)

#endif
