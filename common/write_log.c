/* SPDX-License-Identifier: BSD-3-Clause */
/* write_log.c -- the write log's format, writer and reader (write_log.h) */
#include "write_log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include "checked.h"
#include "errors.h"
#include "le.h"

/* Field offsets, as in the tables of write_log.h. */
#define H_MAGIC	  0
#define H_VERSION 8
#define H_HSIZE	  12
#define H_UUID	  16
#define H_VSIZE	  32
#define H_NAME	  40
#define H_FLAGS	  104
#define H_RES1	  108
#define H_LIMIT	  112
#define H_RES2	  120
#define H_CRC	  124

#define R_TYPE	0
#define R_FLAGS 2
#define R_HCRC	4
#define R_SEQ	8
#define R_OFF	16
#define R_LEN	24
#define R_MARK	32
#define R_DCRC	40
#define R_RES	44

/* header_crc -- crc32 of the file header's bytes before its crc field */
static uint32_t header_crc(const uint8_t *h)
{
	return (uint32_t)crc32_z(0, h, H_CRC);
}

/* record_hcrc -- the header crc of record header @r (its hcrc field taken as zero) */
static uint32_t record_hcrc(uint32_t file_crc, const uint8_t *r)
{
	uint8_t tmp[WLOG_RECORD_SIZE];
	memcpy(tmp, r, sizeof(tmp));
	le_put32(tmp + R_HCRC, 0);
	return (uint32_t)crc32_z(file_crc, tmp, sizeof(tmp));
}

const char *wlog_type_name(enum wlog_type t)
{
	switch (t) {
	case WLOG_WRITE:
		return "write";
	case WLOG_DISCARD:
		return "discard";
	case WLOG_FSYNC:
		return "fsync";
	case WLOG_END:
		return "end";
	case WLOG_FULL:
		return "full";
	}
	return "unknown";
}

char *wlog_uuid_format(const uint8_t *u, char *buf)
{
	snprintf(buf, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
	return buf;
}

/* --- writer ------------------------------------------------------------- */

struct write_log {
	pthread_mutex_t lock; /* every field below */
	int fd;
	uint64_t size;	   /* bytes in the file: whole records only */
	uint64_t next_seq; /* sequence number of the next record */
	uint64_t limit;
	uint64_t vol_size;
	uint32_t file_crc; /* the header's crc, which seeds each record's */
	int stopped;	   /* 0 while recording; else the error every call returns */
};

/* write_full -- pwritev the whole of @iov at @off; 0 or -errno */
static int write_full(int fd, struct iovec *iov, int iovcnt, uint64_t off)
{
	while (iovcnt > 0) {
		ssize_t n = pwritev(fd, iov, iovcnt, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		off += (uint64_t)n;
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/*
 * __append -- write one record at the end of the file. Needs wl->lock.
 * A failed write cuts the file back to its last whole record and stops
 * the log with the error.
 */
static int __append(struct write_log *wl, enum wlog_type type, unsigned flags, uint64_t off,
		    uint64_t len, uint64_t mark, const void *data)
{
	uint8_t r[WLOG_RECORD_SIZE] = {0};
	uint64_t plen = type == WLOG_WRITE ? len : 0;
	le_put16(r + R_TYPE, (uint16_t)type);
	le_put16(r + R_FLAGS, (uint16_t)flags);
	le_put64(r + R_SEQ, wl->next_seq);
	le_put64(r + R_OFF, off);
	le_put64(r + R_LEN, len);
	le_put64(r + R_MARK, mark);
	le_put32(r + R_DCRC, plen ? (uint32_t)crc32_z(0, data, plen) : 0);
	le_put32(r + R_HCRC, record_hcrc(wl->file_crc, r));
	struct iovec iov[2] = {{r, sizeof(r)}, {(void *)data, plen}};
	int ret = write_full(wl->fd, iov, plen ? 2 : 1, wl->size);
	if (ret) {
		if (ftruncate(wl->fd, (off_t)wl->size) != 0) {
			/* the reader will find the torn record and say so */
		}
		wl->stopped = ret;
		return ret;
	}
	wl->size += sizeof(r) + plen;
	wl->next_seq++;
	return 0;
}

/*
 * __record -- append a record unless the log stopped or it would not fit
 * (then FULL is written and the log stops with -ENOSPC). Needs wl->lock.
 */
static int __record(struct write_log *wl, enum wlog_type type, unsigned flags, uint64_t off,
		    uint64_t len, uint64_t mark, const void *data)
{
	if (wl->stopped)
		return wl->stopped;
	uint64_t need, end;
	if (__builtin_add_overflow(WLOG_RECORD_SIZE * 2, type == WLOG_WRITE ? len : 0, &need) ||
	    __builtin_add_overflow(wl->size, need, &end) || end > wl->limit) {
		int ret = __append(wl, WLOG_FULL, 0, 0, 0, 0, NULL);
		if (ret == 0)
			wl->stopped = -ENOSPC;
		return wl->stopped;
	}
	return __append(wl, type, flags, off, len, mark, data);
}

int write_log_create(const char *path, const struct wlog_volume *vol, uint64_t max_bytes,
		     struct write_log **out)
{
	if (!path || !vol || !out || !vol->name[0] ||
	    strnlen(vol->name, WLOG_NAME_SIZE) == WLOG_NAME_SIZE || vol->size == 0 ||
	    max_bytes < WLOG_MIN_BYTES)
		return -EINVAL;
	struct write_log *wl = calloc(1, sizeof(*wl));
	if (!wl)
		return -ENOMEM;
	int ret = -pthread_mutex_init(&wl->lock, NULL);
	if (ret)
		goto err_free;
	wl->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (wl->fd < 0) {
		ret = -errno;
		goto err_mutex;
	}
	uint8_t h[WLOG_HEADER_SIZE] = {0};
	memcpy(h + H_MAGIC, WLOG_MAGIC, WLOG_MAGIC_LEN);
	le_put32(h + H_VERSION, WLOG_VERSION);
	le_put32(h + H_HSIZE, WLOG_HEADER_SIZE);
	memcpy(h + H_UUID, vol->uuid, WLOG_UUID_SIZE);
	le_put64(h + H_VSIZE, vol->size);
	memcpy(h + H_NAME, vol->name, strlen(vol->name));
	le_put32(h + H_FLAGS, vol->base_zero ? WLOG_F_BASE_ZERO : 0);
	le_put64(h + H_LIMIT, max_bytes);
	wl->file_crc = header_crc(h);
	le_put32(h + H_CRC, wl->file_crc);
	struct iovec iov = {h, sizeof(h)};
	ret = write_full(wl->fd, &iov, 1, 0);
	if (ret)
		goto err_unlink;
	wl->size = sizeof(h);
	wl->limit = max_bytes;
	wl->vol_size = vol->size;
	*out = wl;
	return 0;

err_unlink:
	close(wl->fd);
	unlink(path);
err_mutex:
	pthread_mutex_destroy(&wl->lock);
err_free:
	free(wl);
	return ret;
}

int write_log_write(struct write_log *wl, uint64_t off, const void *data, uint64_t len)
{
	if (!wl || !data || len == 0 || range_check(off, len, wl->vol_size))
		return -EINVAL;
	pthread_mutex_lock(&wl->lock);
	int ret = __record(wl, WLOG_WRITE, 0, off, len, 0, data);
	pthread_mutex_unlock(&wl->lock);
	return ret;
}

int write_log_discard(struct write_log *wl, uint64_t off, uint64_t len, unsigned flags)
{
	if (!wl || len == 0 || range_check(off, len, wl->vol_size) ||
	    (flags & ~(WLOG_DISCARD_DURABLE | WLOG_DISCARD_ZEROES)))
		return -EINVAL;
	pthread_mutex_lock(&wl->lock);
	int ret = __record(wl, WLOG_DISCARD, flags, off, len, 0, NULL);
	pthread_mutex_unlock(&wl->lock);
	return ret;
}

uint64_t write_log_mark(struct write_log *wl)
{
	pthread_mutex_lock(&wl->lock);
	uint64_t m = wl->next_seq;
	pthread_mutex_unlock(&wl->lock);
	return m;
}

int write_log_fsync(struct write_log *wl, uint64_t mark, uint64_t off, uint64_t len, unsigned flags)
{
	if (!wl || off > wl->vol_size || (flags & ~(WLOG_FSYNC_FLUSH | WLOG_FSYNC_FUA)) ||
	    (flags & WLOG_FSYNC_FLUSH && flags & WLOG_FSYNC_FUA))
		return -EINVAL;
	if (len == 0)
		len = wl->vol_size - off;
	if (range_check(off, len, wl->vol_size))
		return -EINVAL;
	pthread_mutex_lock(&wl->lock);
	int ret =
	    mark > wl->next_seq ? -EINVAL : __record(wl, WLOG_FSYNC, flags, off, len, mark, NULL);
	pthread_mutex_unlock(&wl->lock);
	return ret;
}

int write_log_close(struct write_log **wlp)
{
	if (!wlp || !*wlp)
		return 0;
	struct write_log *wl = *wlp;
	int ret = wl->stopped == -ENOSPC ? 0 : wl->stopped;
	if (!wl->stopped)
		ret = __append(wl, WLOG_END, 0, 0, 0, 0, NULL);
	if (fdatasync(wl->fd) != 0 && ret == 0)
		ret = -errno;
	if (close(wl->fd) != 0 && ret == 0)
		ret = -errno;
	pthread_mutex_destroy(&wl->lock);
	free(wl);
	*wlp = NULL;
	return ret;
}

uint64_t write_log_size(struct write_log *wl)
{
	pthread_mutex_lock(&wl->lock);
	uint64_t s = wl->size;
	pthread_mutex_unlock(&wl->lock);
	return s;
}

uint64_t write_log_records(struct write_log *wl)
{
	return write_log_mark(wl);
}

/* --- reader ------------------------------------------------------------- */

/* read_header -- check the file header of @v's mapping and fill v->vol, v->limit */
static int read_header(struct wlog_view *v, uint32_t *file_crc, char *err, size_t errlen)
{
	const uint8_t *h = v->map;
	if (v->map_len < WLOG_MAGIC_LEN || memcmp(h, WLOG_MAGIC, WLOG_MAGIC_LEN) != 0) {
		rdax_seterr(err, errlen, "not an rdax write log (no %s magic at offset 0)",
			    WLOG_MAGIC);
		return -RDAX_E_NOT_RDAX;
	}
	if (v->map_len < WLOG_HEADER_SIZE) {
		rdax_seterr(err, errlen, "truncated: the file has %zu bytes, its header needs %u",
			    v->map_len, WLOG_HEADER_SIZE);
		return -EBADMSG;
	}
	uint32_t version = le_get32(h + H_VERSION);
	if (version != WLOG_VERSION) {
		rdax_seterr(err, errlen,
			    "write log format version %" PRIu32 " (this rdax reads version %u)",
			    version, WLOG_VERSION);
		return -RDAX_E_VERSION;
	}
	if (le_get32(h + H_CRC) != header_crc(h)) {
		rdax_seterr(err, errlen, "header at offset 0: crc mismatch (corrupt)");
		return -EBADMSG;
	}
	uint32_t flags = le_get32(h + H_FLAGS);
	if (le_get32(h + H_HSIZE) != WLOG_HEADER_SIZE || le_get32(h + H_RES1) ||
	    le_get32(h + H_RES2) || (flags & ~WLOG_F_BASE_ZERO) || le_get64(h + H_VSIZE) == 0 ||
	    h[H_NAME] == '\0' || memchr(h + H_NAME, '\0', WLOG_NAME_SIZE) == NULL) {
		rdax_seterr(err, errlen, "header at offset 0: invalid fields (corrupt)");
		return -EBADMSG;
	}
	memcpy(v->vol.name, h + H_NAME, WLOG_NAME_SIZE);
	memcpy(v->vol.uuid, h + H_UUID, WLOG_UUID_SIZE);
	v->vol.size = le_get64(h + H_VSIZE);
	v->vol.base_zero = flags & WLOG_F_BASE_ZERO;
	v->limit = le_get64(h + H_LIMIT);
	*file_crc = le_get32(h + H_CRC);
	return 0;
}

/* record_valid -- the type-specific checks of record @r; NULL, or what is wrong */
static const char *record_invalid(const struct wlog_record *r, uint64_t vol_size)
{
	switch (r->type) {
	case WLOG_WRITE:
	case WLOG_DISCARD:
		if (r->flags &
		    ~(r->type == WLOG_DISCARD ? WLOG_DISCARD_DURABLE | WLOG_DISCARD_ZEROES : 0U))
			return "unknown flags";
		if (r->len == 0)
			return "length 0";
		if (range_check(r->off, r->len, vol_size))
			return "range beyond the end of the volume";
		if (r->mark)
			return "a mark on a write or discard";
		return NULL;
	case WLOG_FSYNC:
		if ((r->flags & ~(WLOG_FSYNC_FLUSH | WLOG_FSYNC_FUA)) ||
		    r->flags == (WLOG_FSYNC_FLUSH | WLOG_FSYNC_FUA))
			return "unknown flags";
		if (range_check(r->off, r->len, vol_size))
			return "range beyond the end of the volume";
		if (r->mark > r->seq)
			return "mark after the fsync itself";
		return NULL;
	case WLOG_END:
	case WLOG_FULL:
		if (r->flags || r->off || r->len || r->mark)
			return "fields set on an end record";
		return NULL;
	}
	return "unknown record type";
}

/* append_record -- add @r to v->records, growing the array; 0 or -ENOMEM */
static int append_record(struct wlog_view *v, uint64_t *cap, const struct wlog_record *r)
{
	if (v->count == *cap) {
		uint64_t ncap = *cap ? *cap * 2 : 1024;
		struct wlog_record *n = realloc(v->records, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		v->records = n;
		*cap = ncap;
	}
	v->records[v->count++] = *r;
	return 0;
}

/* read_records -- check every record after the header; the last must be END or FULL */
static int read_records(struct wlog_view *v, uint32_t file_crc, char *err, size_t errlen)
{
	const uint8_t *base = v->map;
	uint64_t off = WLOG_HEADER_SIZE, cap = 0, seq = 0;
	while (off < v->map_len) {
		uint64_t left = v->map_len - off;
		const uint8_t *p = base + off;
		if (left < WLOG_RECORD_SIZE) {
			rdax_seterr(err, errlen,
				    "record %" PRIu64 " at offset %" PRIu64 ": truncated (%" PRIu64
				    " bytes left, a record header takes %u)",
				    seq, off, left, WLOG_RECORD_SIZE);
			return -EBADMSG;
		}
		if (le_get32(p + R_HCRC) != record_hcrc(file_crc, p)) {
			rdax_seterr(err, errlen,
				    "record %" PRIu64 " at offset %" PRIu64
				    ": header crc mismatch (corrupt, or a record of another log)",
				    seq, off);
			return -EBADMSG;
		}
		struct wlog_record r = {
		    .type = le_get16(p + R_TYPE),
		    .flags = le_get16(p + R_FLAGS),
		    .seq = le_get64(p + R_SEQ),
		    .off = le_get64(p + R_OFF),
		    .len = le_get64(p + R_LEN),
		    .mark = le_get64(p + R_MARK),
		    .file_off = off,
		};
		if (r.seq != seq) {
			rdax_seterr(err, errlen,
				    "record %" PRIu64 " at offset %" PRIu64
				    ": sequence number %" PRIu64
				    " (records missing or out of order)",
				    seq, off, r.seq);
			return -EBADMSG;
		}
		const char *bad = record_invalid(&r, v->vol.size);
		if (bad || le_get32(p + R_RES)) {
			rdax_seterr(err, errlen,
				    "record %" PRIu64 " at offset %" PRIu64 " (%s): %s", seq, off,
				    wlog_type_name(r.type), bad ? bad : "reserved field set");
			return -EBADMSG;
		}
		uint64_t plen = r.type == WLOG_WRITE ? r.len : 0;
		if (plen > left - WLOG_RECORD_SIZE) {
			rdax_seterr(err, errlen,
				    "record %" PRIu64 " at offset %" PRIu64 " (write of %" PRIu64
				    " bytes): truncated, only %" PRIu64
				    " bytes of its data in the file",
				    seq, off, r.len, left - WLOG_RECORD_SIZE);
			return -EBADMSG;
		}
		if (plen) {
			r.data = p + WLOG_RECORD_SIZE;
			if (le_get32(p + R_DCRC) != (uint32_t)crc32_z(0, r.data, plen)) {
				rdax_seterr(err, errlen,
					    "record %" PRIu64 " at offset %" PRIu64
					    " (write of %" PRIu64 " bytes at %" PRIu64
					    "): data crc mismatch (corrupt)",
					    seq, off, r.len, r.off);
				return -EBADMSG;
			}
		} else if (le_get32(p + R_DCRC)) {
			rdax_seterr(err, errlen,
				    "record %" PRIu64 " at offset %" PRIu64
				    ": data crc without data",
				    seq, off);
			return -EBADMSG;
		}
		uint64_t next = off + WLOG_RECORD_SIZE + plen;
		if (r.type == WLOG_END || r.type == WLOG_FULL) {
			if (next != v->map_len) {
				rdax_seterr(err, errlen,
					    "record %" PRIu64 " at offset %" PRIu64 ": %" PRIu64
					    " bytes after the %s record",
					    seq, off, (uint64_t)v->map_len - next,
					    wlog_type_name(r.type));
				return -EBADMSG;
			}
			v->full = r.type == WLOG_FULL;
			return 0;
		}
		int ret = append_record(v, &cap, &r);
		if (ret)
			return ret;
		off = next;
		seq++;
	}
	rdax_seterr(err, errlen,
		    "truncated: no end record after record %" PRIu64 " (offset %" PRIu64
		    "); the log was not closed -- rdaxd still writing it, or stopped uncleanly",
		    seq, off);
	return -EBADMSG;
}

int write_log_open(const char *path, struct wlog_view **out, char *err, size_t errlen)
{
	if (!path || !out)
		return -EINVAL;
	struct wlog_view *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	int ret;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		rdax_seterr(err, errlen, "%s", strerror(errno));
		goto err_free;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		ret = -errno;
		rdax_seterr(err, errlen, "stat: %s", strerror(errno));
		goto err_close;
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		ret = S_ISREG(st.st_mode) ? -RDAX_E_NOT_RDAX : -EINVAL;
		rdax_seterr(err, errlen, "%s",
			    S_ISREG(st.st_mode) ? "empty file, not a write log"
						: "not a regular file");
		goto err_close;
	}
	v->map_len = (size_t)st.st_size;
	v->map = mmap(NULL, v->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (v->map == MAP_FAILED) {
		ret = -errno;
		v->map = NULL;
		rdax_seterr(err, errlen, "mmap: %s", strerror(errno));
		goto err_close;
	}
	close(fd);
	uint32_t file_crc;
	ret = read_header(v, &file_crc, err, errlen);
	if (ret == 0)
		ret = read_records(v, file_crc, err, errlen);
	if (ret) {
		if (ret == -ENOMEM)
			rdax_seterr(err, errlen, "out of memory reading the log");
		write_log_view_delete(&v);
		return ret;
	}
	*out = v;
	return 0;

err_close:
	close(fd);
err_free:
	free(v);
	return ret;
}

int write_log_check_volume(const struct wlog_view *v, const char *name, const uint8_t *uuid,
			   char *err, size_t errlen)
{
	char a[37], b[37];
	if (strcmp(v->vol.name, name) != 0) {
		rdax_seterr(err, errlen,
			    "the log is of volume '%s' (uuid %s, %" PRIu64 " bytes), not of '%s'",
			    v->vol.name, wlog_uuid_format(v->vol.uuid, a), v->vol.size, name);
		return -EXDEV;
	}
	if (uuid && memcmp(uuid, v->vol.uuid, WLOG_UUID_SIZE) != 0) {
		rdax_seterr(err, errlen,
			    "the log is of an earlier or other volume named '%s' (uuid %s, not %s)",
			    name, wlog_uuid_format(v->vol.uuid, a), wlog_uuid_format(uuid, b));
		return -EXDEV;
	}
	return 0;
}

void write_log_view_delete(struct wlog_view **vp)
{
	if (!vp || !*vp)
		return;
	struct wlog_view *v = *vp;
	if (v->map)
		munmap(v->map, v->map_len);
	free(v->records);
	free(v);
	*vp = NULL;
}
