/* SPDX-License-Identifier: BSD-3-Clause */
/* log.c -- leveled records on stderr */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
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

/* log_vrecord -- one record: the prefix, @fmt, then @suffix (may be ""), in one write(2) */
static void log_vrecord(enum log_level level, const char *file, int line, const char *func,
			const char *suffix, const char *fmt, va_list ap)
{
	char buf[1024];
	const char *base = strrchr(file, '/');
	int saved_errno = errno;
	int n = snprintf(buf, sizeof(buf), "<%d>%s %s:%d %s: ", log_level_priority(level),
			 level_names[level], base ? base + 1 : file, line, func);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(buf))
		n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	if ((size_t)n < sizeof(buf))
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s", suffix);
	if ((size_t)n >= sizeof(buf) - 1)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	ssize_t unused = write(STDERR_FILENO, buf, (size_t)n);
	(void)unused;
	errno = saved_errno;
}

void log_record(enum log_level level, const char *file, int line, const char *func, const char *fmt,
		...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vrecord(level, file, line, func, "", fmt, ap);
	va_end(ap);
}

/* ---- records about a client, rate-limited per address ---- */

#define PEER_KEY_MAX 64

struct peer_rate {
	char key[PEER_KEY_MAX]; /* "" : free */
	double window_start;
	unsigned passed, held;
};

static struct peer_rate peer_rates[LOG_PEER_SLOTS];
static pthread_mutex_t peer_rates_lock = PTHREAD_MUTEX_INITIALIZER;

/* peer_key -- @peer without its port ("ADDR:PORT", "[V6]:PORT", "scheme#N") */
static void peer_key(const char *peer, char key[PEER_KEY_MAX])
{
	snprintf(key, PEER_KEY_MAX, "%s", peer ? peer : "?");
	char *cut = strrchr(key, '#');
	if (!cut) {
		char *bracket = strrchr(key, ']');
		cut = strrchr(bracket ? bracket : key, ':');
	}
	if (cut && cut != key)
		*cut = '\0';
}

/* now_s -- CLOCK_MONOTONIC in seconds */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int log_peer_pass(const char *peer, unsigned *held)
{
	char key[PEER_KEY_MAX];
	peer_key(peer, key);
	uint32_t h = 2166136261u;
	for (const char *p = key; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	double now = now_s();
	int pass;
	pthread_mutex_lock(&peer_rates_lock);
	struct peer_rate *r = &peer_rates[h % LOG_PEER_SLOTS];
	if (strcmp(r->key, key) != 0) {
		/* a new address (or another one sharing the slot): a fresh window */
		memcpy(r->key, key, sizeof(r->key));
		r->window_start = now;
		r->passed = r->held = 0;
	}
	if (now - r->window_start >= LOG_PEER_WINDOW) {
		r->window_start = now;
		r->passed = 0;
	}
	pass = r->passed < LOG_PEER_BURST;
	if (pass) {
		r->passed++;
		*held = r->held;
		r->held = 0;
	} else {
		r->held++;
	}
	pthread_mutex_unlock(&peer_rates_lock);
	return pass;
}

void log_peer_record(enum log_level level, const char *file, int line, const char *func,
		     unsigned held, const char *fmt, ...)
{
	char suffix[96] = "";
	if (held)
		snprintf(suffix, sizeof(suffix),
			 " (and %u record%s about this address held back before this one)", held,
			 held == 1 ? "" : "s");
	va_list ap;
	va_start(ap, fmt);
	log_vrecord(level, file, line, func, suffix, fmt, ap);
	va_end(ap);
}
