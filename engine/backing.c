/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backing.c -- the file or device a namespace lives on: kind, hold, reservation
 *
 * The rules are in backing.h. Device DAX is recognised the way libpmem2
 * does it: the character device's sysfs node /sys/dev/char/MAJ:MIN has its
 * subsystem link pointing at the dax class or bus.
 */
#include "backing.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "size.h"

const char *backing_kind_name(enum backing_kind kind)
{
	switch (kind) {
	case BACKING_FILE:
		return "file";
	case BACKING_DEVDAX:
		return "devdax";
	}
	return "unknown";
}

/* is_devdax -- whether the character device @rdev belongs to the dax subsystem */
static bool is_devdax(dev_t rdev)
{
	char link[64], target[256];
	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u/subsystem", major(rdev), minor(rdev));
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	const char *base = strrchr(target, '/');
	return strcmp(base ? base + 1 : target, "dax") == 0;
}

int backing_check(const char *path, enum persist_mode mode, enum backing_kind *kind,
		  struct stat *st_out, char *err, size_t errlen)
{
	struct stat st;
	if (!path || !kind)
		return -EINVAL;
	if (stat(path, &st) != 0) {
		int ret = -errno;
		rdax_seterr(err, errlen, "namespace %s: %s", path, strerror(errno));
		return ret;
	}
	if (st_out)
		*st_out = st;

	if (S_ISREG(st.st_mode)) {
		if (st.st_size == 0) {
			rdax_seterr(err, errlen,
				    "namespace %s is an empty file; remove it (PATH,size=SIZE "
				    "creates a namespace where no file exists) or give it a size "
				    "and format it (rdaxd --format)",
				    path);
			return -EINVAL;
		}
		*kind = BACKING_FILE;
		return 0;
	}
	if (S_ISCHR(st.st_mode) && is_devdax(st.st_rdev)) {
		if (mode == PERSIST_SIM) {
			rdax_seterr(err, errlen,
				    "namespace %s is a device DAX; mode=sim needs a regular file "
				    "(serve the device with mode=auto)",
				    path);
			return -EINVAL;
		}
		*kind = BACKING_DEVDAX;
		return 0;
	}

	const char *what = "neither a regular file nor a device DAX";
	int ret = -EINVAL;
	if (S_ISDIR(st.st_mode)) {
		what = "a directory";
		ret = -EISDIR;
	} else if (S_ISCHR(st.st_mode)) {
		what = "a character device that is not a device DAX (/dev/daxX.Y)";
		ret = -ENODEV;
	} else if (S_ISBLK(st.st_mode)) {
		what = "a block device (for fsdax, mount it with -o dax and give a file on it)";
		ret = -ENODEV;
	} else if (S_ISFIFO(st.st_mode)) {
		what = "a FIFO";
	} else if (S_ISSOCK(st.st_mode)) {
		what = "a socket";
	}
	rdax_seterr(err, errlen,
		    "namespace %s is %s; a namespace is a regular file or a device DAX "
		    "(/dev/daxX.Y)",
		    path, what);
	return ret;
}

int backing_hold(const char *path, const struct stat *expect, int *fd_out)
{
	if (!path || !expect || !fd_out)
		return -EINVAL;
	/* O_NONBLOCK: whatever the path has become, the open cannot wait */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int ret = -errno;
		LOG_ERROR("open(%s) for the namespace lock failed: %s", path, strerror(errno));
		return ret;
	}
	int ret;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		ret = -errno;
		goto err_close;
	}
	if (st.st_dev != expect->st_dev || st.st_ino != expect->st_ino ||
	    (st.st_mode & S_IFMT) != (expect->st_mode & S_IFMT)) {
		LOG_ERROR("namespace %s changed while it was being opened", path);
		ret = -ESTALE;
		goto err_close;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		if (ret != -EBUSY) /* in use: the caller says so, in its own words */
			LOG_ERROR("flock(%s) failed: %s", path, strerror(-ret));
		goto err_close;
	}
	*fd_out = fd;
	return 0;

err_close:
	close(fd);
	return ret;
}

void backing_release(int *fd)
{
	if (!fd || *fd < 0)
		return;
	close(*fd); /* drops the flock */
	*fd = -1;
}

uint64_t backing_free_bytes(const char *path)
{
	struct statvfs sv;
	if (!path)
		return 0;
	if (statvfs(path, &sv) != 0) {
		/* a file not (or no longer) there: the directory it would be in */
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s", path);
		char *slash = strrchr(dir, '/');
		if (slash == dir)
			slash[1] = '\0';
		else if (slash)
			*slash = '\0';
		else
			snprintf(dir, sizeof(dir), ".");
		if (statvfs(dir, &sv) != 0)
			return 0;
	}
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

int backing_reserve(int fd, const char *path, uint64_t size)
{
	struct stat st;
	uint64_t allocated = 0;
	if (fstat(fd, &st) == 0)
		allocated = (uint64_t)st.st_blocks * 512;
	int ret = -posix_fallocate(fd, 0, (off_t)size);
	if (ret == 0)
		return 0;
	char want[SIZE_FORMAT_MAX], missing[SIZE_FORMAT_MAX], avail[SIZE_FORMAT_MAX];
	LOG_ERROR("namespace %s: reserving its %s (%s of it not yet allocated) failed: %s; its "
		  "filesystem has %s free",
		  path, size_format(size, want, sizeof(want)),
		  size_format(size > allocated ? size - allocated : 0, missing, sizeof(missing)),
		  strerror(-ret), size_format(backing_free_bytes(path), avail, sizeof(avail)));
	return ret;
}

void backing_space_error(const char *path, uint64_t size, char *err, size_t errlen)
{
	char want[SIZE_FORMAT_MAX], avail[SIZE_FORMAT_MAX];
	struct stat st;
	if (size == 0 && stat(path, &st) == 0)
		size = (uint64_t)st.st_size;
	rdax_seterr(err, errlen,
		    "namespace %s: its %s cannot be reserved, its filesystem has %s free; "
		    "volumes are fully provisioned, so free space there or use a smaller "
		    "namespace",
		    path, size_format(size, want, sizeof(want)),
		    size_format(backing_free_bytes(path), avail, sizeof(avail)));
}
