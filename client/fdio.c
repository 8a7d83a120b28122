/* SPDX-License-Identifier: BSD-3-Clause */
/* fdio.c -- whole reads and writes on a file descriptor */
#include "fdio.h"

#include <errno.h>
#include <unistd.h>

ssize_t fdio_read(int fd, void *buf, size_t len, int64_t off)
{
	size_t got = 0;
	while (got < len) {
		char *p = (char *)buf + got;
		ssize_t r = off < 0 ? read(fd, p, len - got)
				    : pread(fd, p, len - got, (off_t)(off + (int64_t)got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

int fdio_write(int fd, const void *buf, size_t len, int64_t off)
{
	size_t done = 0;
	while (done < len) {
		const char *p = (const char *)buf + done;
		ssize_t r = off < 0 ? write(fd, p, len - done)
				    : pwrite(fd, p, len - done, (off_t)(off + (int64_t)done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		done += (size_t)r;
	}
	return 0;
}
