/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backing.h -- the file or device a namespace lives on: what it is, the
 * exclusive hold on it, and the space it needs reserved
 *
 * A namespace lives on a regular file (emulated PMEM, or a file on a DAX
 * filesystem) or on a device DAX character device (/dev/daxX.Y). Anything
 * else is refused before it is opened, with a reason that says what the path
 * is: a FIFO would block the open forever, /dev/null would map as an empty
 * device, a directory or an empty file cannot hold metadata.
 *
 * Hold: while a namespace is open its path is held with an exclusive
 * flock(2) on a descriptor of its own, opened without blocking. Every
 * opener takes it -- serving (ns_open, ns_create) and formatting (ns_format)
 * alike -- so a second daemon, a second --namespace naming the same file, or
 * rdaxd --format (with or without --force) is refused while it is in use.
 * The lock goes with the descriptor, so a killed daemon never leaves it held.
 *
 * Reservation: a regular file namespace is fully provisioned (docs/nbd.md):
 * every block is allocated (posix_fallocate) when it is created and again
 * whenever it is opened, so a store into its mapping cannot meet a full
 * filesystem -- which would be a SIGBUS, not an error. A namespace whose
 * space cannot be reserved is refused. Discards keep the blocks (persist.h,
 * persist_zero). Copy-on-write filesystems (btrfs, reflinked XFS files)
 * can still fail an overwrite; the engine's copies are guarded for that
 * (media_guard.h) and report -EIO.
 *
 * Thread safety: every function may be called from any thread; they share
 * no state.
 */
#ifndef RDAX_BACKING_H
#define RDAX_BACKING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "persist.h"

/* What a namespace path is. */
enum backing_kind {
	BACKING_FILE = 0, /* a regular file: plain (emulated PMEM) or on a DAX filesystem */
	BACKING_DEVDAX,	  /* a device DAX character device */
};

/* backing_kind_name -- "file" or "devdax" */
const char *backing_kind_name(enum backing_kind kind);

/*
 * backing_check -- whether @path can hold a namespace served in @mode, and
 * what it is: a non-empty regular file (either mode) or a device DAX (auto
 * mode only). Never opens @path. *st (may be NULL) gets its stat.
 * @err (may be NULL) gets one line naming the path, what it is and what to
 * give instead. Returns 0 with *kind set, -ENOENT, -EISDIR (a directory),
 * -ENODEV (a character device that is not device DAX, such as /dev/null;
 * a block device), -EINVAL (a FIFO, a socket, an empty file, sim mode on a
 * device), -errno of stat.
 */
int backing_check(const char *path, enum persist_mode mode, enum backing_kind *kind,
		  struct stat *st, char *err, size_t errlen);

/*
 * backing_hold -- open @path read-only without blocking, check that the
 * descriptor is still what @expect (backing_check's stat) described, and take
 * an exclusive flock. *fd gets the descriptor that holds the lock.
 * Returns 0, -EBUSY (held by another process, or by another open of this
 * one), -ESTALE (@path changed since @expect), -errno of open/flock.
 */
int backing_hold(const char *path, const struct stat *expect, int *fd);

/* backing_release -- drop the hold taken by backing_hold (close); accepts -1; sets *fd = -1 */
void backing_release(int *fd);

/*
 * backing_reserve -- allocate every block of [0, size) of the regular file
 * open (writable) on @fd, so that stores into its mapping never need space
 * from the filesystem. Cheap on a file already allocated. A failure is
 * logged with the path, the size, how much of it was not yet allocated and
 * the filesystem's free space. Returns 0, -ENOSPC, -errno of posix_fallocate.
 */
int backing_reserve(int fd, const char *path, uint64_t size);

/*
 * backing_space_error -- the one-line reason a namespace of @size bytes (0:
 * the size of the file at @path) cannot be reserved at @path, with the free
 * space of its filesystem, into @err (for callers that explain a -ENOSPC
 * from an open or a create)
 */
void backing_space_error(const char *path, uint64_t size, char *err, size_t errlen);

/*
 * backing_free_bytes -- free bytes of the filesystem holding @path, or its
 * directory when @path does not exist (0 if unknown)
 */
uint64_t backing_free_bytes(const char *path);

#endif
