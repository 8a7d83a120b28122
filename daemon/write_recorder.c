/* SPDX-License-Identifier: BSD-3-Clause */
/* write_recorder.c -- a write log per volume and open period (write_recorder.h) */
#include "write_recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "size.h"
#include "write_log.h"

/* Log file numbers tried per open period before giving up (an earlier run's logs stay). */
#define RECORDER_MAX_SEQ 1000000

struct write_recorder {
	char *dir;
	uint64_t max_bytes;
};

/* One open period of one volume: its log. */
struct write_recording {
	struct write_log *wl;
	uint64_t limit;	     /* its size limit, for the message when it is full */
	atomic_bool stopped; /* the log stopped (full, or its file failed): said once */
	char path[];
};

/* recording_stopped -- the log refused a record with @ret: say so once */
static void recording_stopped(struct volume *v, struct write_recording *rec, int ret)
{
	if (ret == -EINVAL || atomic_exchange(&rec->stopped, true))
		return;
	char lim[SIZE_FORMAT_MAX];
	if (ret == -ENOSPC)
		LOG_ERROR("write log %s of volume \"%s\" is full (%s, %" PRIu64
			  " records): it ends with a FULL record, and the volume's later requests "
			  "are served but not recorded (rdaxd --write-log-max sets the limit)",
			  rec->path, v->name, size_format(rec->limit, lim, sizeof(lim)),
			  write_log_records(rec->wl));
	else
		LOG_ERROR("write log %s of volume \"%s\" stopped: %s; it is truncated there, and "
			  "the volume's later requests are not recorded",
			  rec->path, v->name, rdax_strerror(ret));
}

/* on_first_open -- the volume's first opener: a new log */
static void on_first_open(void *arg, struct volume *v, const uint8_t *uuid)
{
	struct write_recorder *r = arg;
	struct wlog_volume wv = {.size = v->size, .base_zero = v->pristine};
	snprintf(wv.name, sizeof(wv.name), "%s", v->name);
	memcpy(wv.uuid, uuid, sizeof(wv.uuid));
	v->pristine = false;

	size_t cap = strlen(r->dir) + strlen(v->name) + 32;
	struct write_recording *rec = calloc(1, sizeof(*rec) + cap);
	if (!rec) {
		LOG_ERROR("write log of volume \"%s\": out of memory; its requests are not "
			  "recorded",
			  v->name);
		return;
	}
	rec->limit = r->max_bytes;
	int ret = -EEXIST;
	for (unsigned n = 1; n <= RECORDER_MAX_SEQ && ret == -EEXIST; n++) {
		snprintf(rec->path, cap, "%s/%s.%u.wlog", r->dir, v->name, n);
		ret = write_log_create(rec->path, &wv, r->max_bytes, &rec->wl);
	}
	if (ret) {
		LOG_ERROR("write log of volume \"%s\": cannot create %s: %s; its requests are not "
			  "recorded",
			  v->name, rec->path, rdax_strerror(ret));
		free(rec);
		return;
	}
	v->recording = rec;
	LOG_INFO("write log of volume \"%s\": %s%s", v->name, rec->path,
		 wv.base_zero ? " (a new volume: the log starts from zeros)" : "");
}

/* on_last_close -- the volume's last opener is gone: the log ends (END, on disk) */
static void on_last_close(void *arg, struct volume *v)
{
	struct write_recording *rec = v->recording;
	if (!rec)
		return;
	v->recording = NULL;
	uint64_t records = write_log_records(rec->wl), bytes = write_log_size(rec->wl);
	int ret = write_log_close(&rec->wl);
	if (ret && !atomic_load(&rec->stopped))
		LOG_ERROR("write log %s of volume \"%s\": ending it failed: %s", rec->path, v->name,
			  rdax_strerror(ret));
	else if (records == 0 && unlink(rec->path) == 0)
		/* an open period that changed nothing (a read, a stat) leaves no log behind */
		LOG_DEBUG("write log of volume \"%s\" ended with no record: %s removed", v->name,
			  rec->path);
	else
		LOG_INFO("write log of volume \"%s\" ended: %s (%" PRIu64 " records, %" PRIu64
			 " bytes)",
			 v->name, rec->path, records, bytes);
	free(rec);
}

int write_recorder_new(const char *dir, uint64_t max_bytes, struct write_recorder **out, char *err,
		       size_t errlen)
{
	if (!dir || !*dir || !out || max_bytes < WLOG_MIN_BYTES) {
		rdax_seterr(err, errlen, "write log: no directory, or a limit below %u bytes",
			    WLOG_MIN_BYTES);
		return -EINVAL;
	}
	struct stat st;
	if (stat(dir, &st) < 0) {
		int ret = -errno;
		rdax_seterr(err, errlen, "--write-log %s: %s", dir, strerror(errno));
		return ret;
	}
	if (!S_ISDIR(st.st_mode)) {
		rdax_seterr(err, errlen, "--write-log %s: not a directory", dir);
		return -ENOTDIR;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		int ret = -errno;
		rdax_seterr(err, errlen, "--write-log %s: cannot create files there: %s", dir,
			    strerror(errno));
		return ret;
	}
	struct write_recorder *r = calloc(1, sizeof(*r));
	if (!r || !(r->dir = strdup(dir))) {
		free(r);
		rdax_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->max_bytes = max_bytes;
	*out = r;
	return 0;
}

void write_recorder_attach(struct write_recorder *r, struct store *s)
{
	const struct ns_observer obs = {
	    .first_open = on_first_open,
	    .last_close = on_last_close,
	    .arg = r,
	};
	store_set_observer(s, &obs);
}

void write_recorder_delete(struct write_recorder **rp)
{
	if (!rp || !*rp)
		return;
	free((*rp)->dir);
	free(*rp);
	*rp = NULL;
}

void write_recorder_write(struct volume *v, uint64_t off, uint64_t len)
{
	struct write_recording *rec = v->recording;
	if (!rec)
		return;
	/* the bytes as they are in the mapping now: what the write put there */
	int ret = write_log_write(rec->wl, off, v->data + off, len);
	if (ret)
		recording_stopped(v, rec, ret);
}

void write_recorder_discard(struct volume *v, uint64_t off, uint64_t len, unsigned flags)
{
	struct write_recording *rec = v->recording;
	if (!rec)
		return;
	int ret = write_log_discard(rec->wl, off, len, flags);
	if (ret)
		recording_stopped(v, rec, ret);
}

uint64_t write_recorder_mark(struct volume *v)
{
	struct write_recording *rec = v->recording;
	return rec ? write_log_mark(rec->wl) : 0;
}

void write_recorder_fsync(struct volume *v, uint64_t mark, uint64_t off, uint64_t len,
			  unsigned flags)
{
	struct write_recording *rec = v->recording;
	if (!rec)
		return;
	int ret = write_log_fsync(rec->wl, mark, off, len, flags);
	if (ret)
		recording_stopped(v, rec, ret);
}
