/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * write_log.h -- a volume's write log: every acknowledged write, discard and
 * fsync, in acknowledgement order, for `rdax crash-states`
 *
 * The daemon records, per volume, what it acknowledged; `rdax crash-states`
 * reads the log back and builds every state a power cut could have left
 * (docs/persistence-testing.md). This pair holds the file format, the
 * writer (called from the daemon's workers) and the reader (the command).
 *
 * File layout, all integers little-endian:
 *
 *   file header (128 B) | record | record | ... | terminal record
 *
 * File header:
 *
 *  off  size  field
 *    0     8  magic "RDAXWLOG"
 *    8     4  format version (WLOG_VERSION)
 *   12     4  header size (128)
 *   16    16  volume uuid: the volume table's, so two volumes that had the
 *             same name (deleted and created again) have different logs
 *   32     8  volume size in bytes
 *   40    64  volume name, NUL-terminated and NUL-padded
 *  104     4  flags: WLOG_F_BASE_ZERO -- the volume read as zeros when the
 *             log began (it was created with the log); otherwise the state
 *             at the start must be supplied as an image
 *  108     4  reserved, zero
 *  112     8  the size limit the log was written with, in bytes
 *  120     4  reserved, zero
 *  124     4  crc32 (zlib) of bytes 0..123
 *
 * Record: a 48-byte record header, then the payload (WRITE only).
 *
 *  off  size  field
 *    0     2  type (enum wlog_type)
 *    2     2  flags (WLOG_DISCARD_*, WLOG_FSYNC_*; zero for the others)
 *    4     4  header crc: crc32 of these 48 bytes with this field zero,
 *             started from the file header's crc, so a record copied from
 *             another log fails its check
 *    8     8  sequence number: 0 for the first record, +1 for each
 *   16     8  offset into the volume, bytes
 *   24     8  length, bytes (WRITE: the payload's length too)
 *   32     8  FSYNC: its mark -- it covers the records with seq < mark
 *   40     4  payload crc: crc32 of the payload (0 without one)
 *   44     4  reserved, zero
 *
 * Two crcs so the reader can tell a torn or corrupt header (whose length
 * cannot be trusted) from a whole header whose payload was cut short.
 *
 * Record types:
 *  - WRITE: [offset, offset + length) now holds the payload.
 *  - DISCARD: the range reads as zeros; WLOG_DISCARD_DURABLE: and it was
 *    durable when acknowledged (rdax's volume_discard writes the zeros back
 *    and fences, engine/volume.h), i.e. an fsync of its range came with it.
 *    WLOG_DISCARD_ZEROES: the request was a write-zeroes (NBD), not a trim.
 *  - FSYNC: the range was made durable; every WRITE/DISCARD with
 *    seq < mark that touched it is durable from this record on. Flags say
 *    which request it was (fsync, NBD flush, a FUA or RDAX_WRITE_FSYNC
 *    write's own range).
 *  - END: the log was closed (write_log_close). FULL: the log stopped
 *    because the next record would have passed the size limit. One of the
 *    two ends every complete log; a log without one is truncated.
 *
 * Why a mark and not just the record's position: an fsync runs while other
 * connections' writes are acknowledged, so a write recorded just before
 * the fsync's own record may have landed after the fsync began and not be
 * covered. The mark, taken before the fsync starts, names exactly the
 * writes the fsync promises (docs/persistence-testing.md, "the model").
 *
 * Size: each record is 48 bytes plus its payload; the writer refuses to
 * pass its limit (see write_log_write, "when full").
 */
#ifndef RDAX_WRITE_LOG_H
#define RDAX_WRITE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WLOG_MAGIC	 "RDAXWLOG"
#define WLOG_MAGIC_LEN	 8
#define WLOG_VERSION	 1
#define WLOG_HEADER_SIZE 128
#define WLOG_RECORD_SIZE 48
#define WLOG_NAME_SIZE	 64
#define WLOG_UUID_SIZE	 16
/* The smallest limit: the header and the terminal record. */
#define WLOG_MIN_BYTES (WLOG_HEADER_SIZE + WLOG_RECORD_SIZE)

#define WLOG_F_BASE_ZERO 0x1U

enum wlog_type {
	WLOG_WRITE = 1,
	WLOG_DISCARD = 2,
	WLOG_FSYNC = 3,
	WLOG_END = 4,
	WLOG_FULL = 5,
};

#define WLOG_DISCARD_DURABLE 0x1U /* durable when acknowledged */
#define WLOG_DISCARD_ZEROES  0x2U /* a write-zeroes request */

/* FSYNC flags: which request made the range durable (for the manifests) */
#define WLOG_FSYNC_FLUSH 0x1U /* a whole-volume flush (NBD FLUSH) */
#define WLOG_FSYNC_FUA	 0x2U /* a FUA / RDAX_WRITE_FSYNC write's own range */

/* The volume a log belongs to. */
struct wlog_volume {
	char name[WLOG_NAME_SIZE];
	uint64_t size;
	uint8_t uuid[WLOG_UUID_SIZE];
	bool base_zero; /* WLOG_F_BASE_ZERO */
};

/* --- writer ------------------------------------------------------------- */

struct write_log;

/*
 * write_log_create -- start a new log at @path for volume @vol, of at most
 * @max_bytes bytes (>= WLOG_MIN_BYTES). The file must not exist: a log is
 * never overwritten (-EEXIST).
 * Context: any thread; blocks on file I/O.
 * Returns 0 and sets *out; -EINVAL (NULL, empty or long name, size 0,
 * max_bytes too small), -EEXIST, -ENOMEM, -errno of open/write.
 */
int write_log_create(const char *path, const struct wlog_volume *vol, uint64_t max_bytes,
		     struct write_log **out);

/*
 * Recording: every call below appends one record and returns once it is in
 * the file (one write(2) to the page cache, no fsync of the log: the log
 * survives the daemon's death, not the machine's).
 *
 * Thread safety and order: any number of threads may call these on one
 * log at once; the log's mutex makes each call atomic, and the order of the
 * records is the order in which the calls took it. That order IS the
 * acknowledgement order the model assumes, so the caller must:
 *  - record a write after its data is in the volume and marked dirty
 *    (volume_write / volume_mark_written returned 0) and before its
 *    acknowledgement is sent; record nothing for a write that failed;
 *  - record a discard after volume_discard returned 0, before its reply;
 *  - take an fsync's mark (write_log_mark) before calling fsync_range and
 *    record it (write_log_fsync) after fsync_range returned 0, before the
 *    reply. A FUA write: record the write, then its mark, then the fsync.
 * Two overlapping writes in flight at once (neither acknowledged before the
 * other was received) land in the volume in an order nobody observes; the
 * log, and so the model, takes them in the order they were recorded.
 *
 * When full: a record that would take the file past its limit (keeping
 * room for the terminal record) is not written; a FULL record is written
 * instead and the call returns -ENOSPC, as does every later call. What was
 * recorded stays a valid log: a prefix of the acknowledged history, whose
 * crash states are crash states of the run. The policy for the daemon is
 * its choice; the one the format is built for is: keep serving, log one
 * error naming the volume and the limit, and record nothing more (refusing
 * the volume's writes instead would change the program under test).
 * A write of the log file that fails (-EIO, -ENOSPC of the file system)
 * also stops the log: the file is cut back to the last whole record, and
 * the call and every later one return that error; the reader then calls
 * the log truncated (it has no terminal record).
 */

/*
 * write_log_write -- record a write of @len bytes of @data at @off (the
 * data is copied into the log during the call; in the daemon, pass the
 * volume's own mapping of the range for a zero-copy receive).
 * Returns 0; -EINVAL (NULL, len 0, range outside the volume: nothing
 * recorded, the log goes on); -ENOSPC (full); the stopping error.
 */
int write_log_write(struct write_log *wl, uint64_t off, const void *data, uint64_t len);

/* write_log_discard -- record a discard of [off, off + len); @flags WLOG_DISCARD_*; as above */
int write_log_discard(struct write_log *wl, uint64_t off, uint64_t len, unsigned flags);

/*
 * write_log_mark -- the mark of an fsync about to start: the sequence
 * number the next record will get. Every record made before it is covered
 * by an fsync that starts after this call. Context: any thread; never fails.
 */
uint64_t write_log_mark(struct write_log *wl);

/*
 * write_log_fsync -- record a completed fsync of [off, off + len) (len 0:
 * to the end of the volume) whose mark was @mark; @flags WLOG_FSYNC_*.
 * Returns 0; -EINVAL (range, mark in the future, unknown flags); -ENOSPC;
 * the stopping error.
 */
int write_log_fsync(struct write_log *wl, uint64_t mark, uint64_t off, uint64_t len,
		    unsigned flags);

/*
 * write_log_close -- write the END record (unless the log stopped), flush
 * the file to disk (fdatasync) and free the log. Nothing may call the log
 * during or after this. Accepts NULL and *wlp == NULL; sets *wlp = NULL.
 * Returns 0, or the error that kept the log from ending cleanly (the file
 * is closed and the memory freed either way).
 */
int write_log_close(struct write_log **wlp);

/* write_log_size -- bytes in the file so far; write_log_records -- records so far */
uint64_t write_log_size(struct write_log *wl);
uint64_t write_log_records(struct write_log *wl);

/* --- reader ------------------------------------------------------------- */

/* One record, as read (host byte order). */
struct wlog_record {
	enum wlog_type type;
	unsigned flags;
	uint64_t seq;
	uint64_t off;
	uint64_t len;
	uint64_t mark;	     /* FSYNC */
	const uint8_t *data; /* WRITE: len bytes inside the mapped log */
	uint64_t file_off;   /* where the record starts in the file */
};

/*
 * A log read whole and checked. The records are WRITE, DISCARD and FSYNC
 * only; how the log ended is in @full.
 */
struct wlog_view {
	struct wlog_volume vol;
	uint64_t limit; /* the writer's size limit */
	struct wlog_record *records;
	uint64_t count;
	bool full; /* ended with FULL: the writer stopped at its limit */
	void *map; /* the file, mapped read-only */
	size_t map_len;
};

/*
 * write_log_open -- map the log at @path and check all of it before
 * returning: magic, version, header crc, then every record in turn (crc,
 * sequence, type, flags, ranges inside the volume, an fsync's mark not in
 * the future), and a terminal record at the very end with nothing after
 * it. @err gets one line naming the record (its sequence number) and its
 * byte offset in the file: "record 7 at offset 1432: crc mismatch".
 * Context: any thread; reads the file.
 * Returns 0 and sets *out; -RDAX_E_NOT_RDAX (not a write log), -RDAX_E_VERSION,
 * -EBADMSG (corrupt or truncated), -ENOMEM, -errno of open/mmap.
 */
int write_log_open(const char *path, struct wlog_view **out, char *err, size_t errlen);

/*
 * write_log_check_volume -- the log is of volume @name (and, unless @uuid
 * is NULL, of that uuid): 0, or -EXDEV with @err naming both volumes.
 */
int write_log_check_volume(const struct wlog_view *v, const char *name, const uint8_t *uuid,
			   char *err, size_t errlen);

/* write_log_view_delete -- unmap and free; accepts NULL; sets *vp = NULL */
void write_log_view_delete(struct wlog_view **vp);

/* wlog_type_name -- "write", "discard", "fsync", "end", "full", or "unknown" */
const char *wlog_type_name(enum wlog_type t);

/* wlog_uuid_format -- the uuid as 36 characters + NUL into @buf (>= 37 bytes) */
char *wlog_uuid_format(const uint8_t *uuid, char *buf);

#endif
