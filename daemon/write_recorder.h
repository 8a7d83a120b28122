/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * write_recorder.h -- rdaxd --write-log DIR: a write log per volume and open period
 *
 * With --write-log, every volume that a client opens gets a write log
 * (common/write_log.h) for as long as it is open: created when its first
 * opener opens it (any transport: a native VOLUME_OPEN, an NBD export, an
 * RDMA connection), ended with its END record and flushed to disk when
 * the last opener closes it -- at the latest when its connection ends,
 * which includes the daemon's stop and a power cut. A program's run is
 * thus one log, complete and readable by `rdax crash-states` as soon as
 * the program let go of the volume. A period that recorded nothing (a
 * client that only read) leaves no file.
 *
 * Files: DIR/NAME.N.wlog, N = 1, 2, ... the first that does not exist (a
 * log is never overwritten; an earlier run's logs stay). The daemon's log
 * says which file a volume's period went to ("write log of volume NAME:
 * PATH"). A log says its volume was new (WLOG_F_BASE_ZERO) when the volume
 * was created by this daemon's incarnation and nobody had opened it yet;
 * otherwise `rdax crash-states --base` needs the volume's content from
 * when the log began.
 *
 * What is recorded and when is vol_ack.h's business (the acknowledgement
 * order); this pair owns the files. Bounded: each log stops at
 * --write-log-max bytes: its last record is FULL, the daemon logs one
 * error naming the volume, the file and the limit, and the volume's later
 * requests are served and acknowledged as before but not recorded -- the
 * log is then a complete record of a prefix of the run, and says so (the
 * choice made in common/write_log.h: refusing the requests would change
 * the program under test). A log file that cannot be written (its file
 * system is full, an I/O error) stops the same way, without a terminal
 * record (the reader calls it truncated), with an error logged.
 *
 * Thread safety: the data-path calls (write_recorder_write & co.) from any
 * thread, on a volume the caller holds open (so its recording exists and
 * stays); a log's mutex orders them (that order is the log's). The
 * observer calls run under the namespace's lock (namespace.h).
 */
#ifndef RDAXD_WRITE_RECORDER_H
#define RDAXD_WRITE_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "volume.h"

/* Default and bounds of --write-log-max, per log. */
#define WRITE_RECORDER_DEFAULT_MAX (1ULL << 30)
#define WRITE_RECORDER_MIN_MAX	   (64ULL << 10)

struct write_recorder;

/*
 * write_recorder_new -- record into the directory @dir (it must exist:
 * rdaxd creates it), each log at most @max_bytes (>= WLOG_MIN_BYTES).
 * Checks that files can be created there. @err gets one line on failure.
 * Returns 0, -EINVAL, -ENOTDIR, -ENOMEM, -errno of stat/access.
 */
int write_recorder_new(const char *dir, uint64_t max_bytes, struct write_recorder **out, char *err,
		       size_t errlen);

/*
 * write_recorder_attach -- record the volumes of every namespace of @s from
 * now on (store_set_observer). Before the namespaces are shared.
 */
void write_recorder_attach(struct write_recorder *r, struct store *s);

/*
 * write_recorder_delete -- free (after the store was detached or deleted:
 * every log has ended by then); accepts NULL, sets *rp = NULL
 */
void write_recorder_delete(struct write_recorder **rp);

/* The data path: each is a no-op for a volume without a recording. */

/* write_recorder_write -- [off, off + len) of @v now holds what its mapping holds there */
void write_recorder_write(struct volume *v, uint64_t off, uint64_t len);

/* write_recorder_discard -- [off, off + len) of @v reads zeros; @flags WLOG_DISCARD_* */
void write_recorder_discard(struct volume *v, uint64_t off, uint64_t len, unsigned flags);

/* write_recorder_mark -- the mark of an fsync of @v about to start (0 without a recording) */
uint64_t write_recorder_mark(struct volume *v);

/* write_recorder_fsync -- an fsync of @v whose mark was @mark completed; @flags WLOG_FSYNC_* */
void write_recorder_fsync(struct volume *v, uint64_t mark, uint64_t off, uint64_t len,
			  unsigned flags);

#endif
