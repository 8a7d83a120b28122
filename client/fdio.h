/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fdio.h -- whole reads and writes on a file descriptor, retrying EINTR and short counts
 *
 * The rdax command's stdin/stdout streams (write, read) and its file copies
 * (import, export) move data through these two functions. @off < 0 means the
 * file position (read/write), else that offset (pread/pwrite).
 *
 * Thread safety: as the underlying system calls.
 */
#ifndef RDAX_CLIENT_FDIO_H
#define RDAX_CLIENT_FDIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* fdio_read -- read until @len bytes or end of file; the count, or -errno */
ssize_t fdio_read(int fd, void *buf, size_t len, int64_t off);

/* fdio_write -- write all @len bytes; 0 or -errno */
int fdio_write(int fd, const void *buf, size_t len, int64_t off);

#endif
