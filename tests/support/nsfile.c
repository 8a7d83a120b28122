/* SPDX-License-Identifier: BSD-3-Clause */
/* nsfile.c -- a namespace file seen from outside the engine */
#include "nsfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* nsfile_die -- report a fixture failure and stop the test binary */
static void __attribute__((noreturn)) nsfile_die(const char *what, const char *path)
{
	fprintf(stderr, "nsfile: %s %s: %s\n", what, path, strerror(errno));
	abort();
}

void nsfile_pread(int fd, uint64_t off, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO; /* short file */
			nsfile_die("pread of", "the namespace file");
		}
		got += (size_t)n;
	}
}

void nsfile_read(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		nsfile_die("open", path);
	nsfile_pread(fd, off, buf, len);
	close(fd);
}

void nsfile_write(const char *path, uint64_t off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		nsfile_die("open", path);
	if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
		nsfile_die("pwrite of", path);
	close(fd);
}

void nsfile_create(const char *path, uint64_t size)
{
	int fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		nsfile_die("create", path);
	if (ftruncate(fd, (off_t)size) != 0)
		nsfile_die("ftruncate", path);
	close(fd);
}
