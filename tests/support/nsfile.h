/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nsfile.h -- a namespace file seen from outside the engine
 *
 * In sim mode the file is the persistence domain, so reading it shows what
 * a power cut would leave, and writing it is damage done to the media
 * behind the engine's back.
 *
 * Thread safety: every function may be called from any thread. None uses a
 * cmocka assertion (they also run in helper threads and forked children): a
 * file that cannot be read or written aborts the test with a message, rather
 * than answer wrongly.
 */
#ifndef RDAX_TEST_NSFILE_H
#define RDAX_TEST_NSFILE_H

#include <stddef.h>
#include <stdint.h>

/* nsfile_read -- @len bytes of @path at @off into @buf */
void nsfile_read(const char *path, uint64_t off, void *buf, size_t len);

/* nsfile_pread -- the same through an open descriptor */
void nsfile_pread(int fd, uint64_t off, void *buf, size_t len);

/* nsfile_write -- overwrite @len bytes of @path at @off (damage, outside the engine) */
void nsfile_write(const char *path, uint64_t off, const void *buf, size_t len);

/* nsfile_create -- a new plain file of @size bytes (sparse, zeros), not formatted */
void nsfile_create(const char *path, uint64_t size);

#endif
