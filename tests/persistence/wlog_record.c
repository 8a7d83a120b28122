/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wlog_record.c -- test only: a write log of a librdax program, recorded
 * on the client side, until rdaxd records its own (rdaxd --write-log)
 *
 * Linked into a copy of an example program with
 *   -Wl,--wrap=rdax_volume_create,--wrap=rdax_volume_open,... (CMakeLists.txt)
 * so the program's own calls come here first and go on to librdax; calls
 * inside librdax are untouched. With RDAX_TEST_WRITE_LOG=PATH set, the one
 * volume the program opens is recorded into PATH through the writer API
 * (common/write_log.h), exactly as the daemon is to call it:
 *  - a write, after it returned 0 (acknowledged); with RDAX_WRITE_FSYNC,
 *    then an fsync of its range, marked after the write;
 *  - an fsync: the mark taken before the call, recorded after it returned 0;
 *  - a discard after it returned 0, durable (rdax_discard's contract).
 * For a program that waits for each call (the examples do) that order is
 * the daemon's acknowledgement order. The volume's uuid is not known to a
 * client: a random one is written. The volume counts as new (zeros) when
 * this process created it.
 * Anything the recorder cannot record faithfully (asynchronous calls, a
 * second volume, a failing log) aborts the program: a test must not pass
 * on a log that is not what happened.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "librdax.h"
#include "write_log.h"

/* WRAP -- declare the real function and its wrapper (-Wmissing-prototypes) */
#define WRAP(name, ...)                                                                            \
	int __real_##name(__VA_ARGS__);                                                            \
	int __wrap_##name(__VA_ARGS__)

WRAP(rdax_volume_create, struct rdax_conn *conn, const char *name, uint64_t size,
     uint32_t namespace_id);
WRAP(rdax_volume_open, struct rdax_conn *conn, const char *name, struct rdax_volume **volp);
WRAP(rdax_volume_close, struct rdax_volume **volp);
WRAP(rdax_write, struct rdax_volume *vol, uint64_t offset, const void *buf, size_t len,
     unsigned flags);
WRAP(rdax_fsync, struct rdax_volume *vol, uint64_t offset, uint64_t length, uint64_t *written_back);
WRAP(rdax_fsync_flags, struct rdax_volume *vol, uint64_t offset, uint64_t length, unsigned flags,
     uint64_t *written_back);
WRAP(rdax_discard, struct rdax_volume *vol, uint64_t offset, uint64_t length);
WRAP(rdax_submit_write, struct rdax_volume *vol, uint64_t offset, const void *buf, size_t len,
     unsigned flags, uint64_t cookie);
WRAP(rdax_submit_fsync, struct rdax_volume *vol, uint64_t offset, uint64_t length, unsigned flags,
     uint64_t cookie);

#define LOG_LIMIT (64ULL << 20)

static char g_created[WLOG_NAME_SIZE]; /* the volume this process created, if any */
static struct write_log *g_log;
static struct rdax_volume *g_vol;

static void die(const char *what, int code)
{
	fprintf(stderr, "write-log recorder: %s: %s\n", what, rdax_strerror(code));
	abort();
}

/* recorded -- the recording of a call succeeded, or the run is void */
static void recorded(const char *what, int code)
{
	if (code)
		die(what, code);
}

int __wrap_rdax_volume_create(struct rdax_conn *conn, const char *name, uint64_t size,
			      uint32_t namespace_id)
{
	int ret = __real_rdax_volume_create(conn, name, size, namespace_id);
	if (ret == 0)
		snprintf(g_created, sizeof(g_created), "%s", name);
	return ret;
}

int __wrap_rdax_volume_open(struct rdax_conn *conn, const char *name, struct rdax_volume **volp)
{
	int ret = __real_rdax_volume_open(conn, name, volp);
	const char *path = getenv("RDAX_TEST_WRITE_LOG");
	if (ret || !path || !path[0])
		return ret;
	if (g_log)
		die("a second volume opened (one is recorded)", -EINVAL);
	struct wlog_volume v = {.size = rdax_volume_size(*volp),
				.base_zero = strcmp(g_created, name) == 0};
	snprintf(v.name, sizeof(v.name), "%s", name);
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, v.uuid, sizeof(v.uuid)) != (ssize_t)sizeof(v.uuid))
		die("/dev/urandom", -EIO);
	close(fd);
	recorded(path, write_log_create(path, &v, LOG_LIMIT, &g_log));
	g_vol = *volp;
	return 0;
}

int __wrap_rdax_volume_close(struct rdax_volume **volp)
{
	if (g_log && volp && *volp == g_vol) {
		recorded("close the log", write_log_close(&g_log));
		g_vol = NULL;
	}
	return __real_rdax_volume_close(volp);
}

int __wrap_rdax_write(struct rdax_volume *vol, uint64_t offset, const void *buf, size_t len,
		      unsigned flags)
{
	int ret = __real_rdax_write(vol, offset, buf, len, flags);
	if (ret || vol != g_vol)
		return ret;
	recorded("record a write", write_log_write(g_log, offset, buf, len));
	if (flags & RDAX_WRITE_FSYNC)
		recorded(
		    "record a durable write's fsync",
		    write_log_fsync(g_log, write_log_mark(g_log), offset, len, WLOG_FSYNC_FUA));
	return 0;
}

int __wrap_rdax_fsync_flags(struct rdax_volume *vol, uint64_t offset, uint64_t length,
			    unsigned flags, uint64_t *written_back)
{
	uint64_t mark = vol == g_vol ? write_log_mark(g_log) : 0;
	int ret = __real_rdax_fsync_flags(vol, offset, length, flags, written_back);
	if (ret == 0 && vol == g_vol)
		recorded("record an fsync", write_log_fsync(g_log, mark, offset, length, 0));
	return ret;
}

int __wrap_rdax_fsync(struct rdax_volume *vol, uint64_t offset, uint64_t length,
		      uint64_t *written_back)
{
	return __wrap_rdax_fsync_flags(vol, offset, length, 0, written_back);
}

int __wrap_rdax_discard(struct rdax_volume *vol, uint64_t offset, uint64_t length)
{
	int ret = __real_rdax_discard(vol, offset, length);
	if (ret == 0 && vol == g_vol)
		recorded("record a discard",
			 write_log_discard(g_log, offset, length, WLOG_DISCARD_DURABLE));
	return ret;
}

int __wrap_rdax_submit_write(struct rdax_volume *vol, uint64_t offset, const void *buf, size_t len,
			     unsigned flags, uint64_t cookie)
{
	if (g_log && vol == g_vol)
		die("rdax_submit_write (only synchronous calls are recorded)", -ENOTSUP);
	return __real_rdax_submit_write(vol, offset, buf, len, flags, cookie);
}

int __wrap_rdax_submit_fsync(struct rdax_volume *vol, uint64_t offset, uint64_t length,
			     unsigned flags, uint64_t cookie)
{
	if (g_log && vol == g_vol)
		die("rdax_submit_fsync (only synchronous calls are recorded)", -ENOTSUP);
	return __real_rdax_submit_fsync(vol, offset, length, flags, cookie);
}
