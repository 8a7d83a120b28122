/* SPDX-License-Identifier: BSD-3-Clause */
/* tmpfs.c -- a small filesystem that fills up, in a private mount namespace */
#include "tmpfs.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

static int private_ns; /* this process already has its own mount namespace */

int tmpfs_mount(const char *dir, uint64_t size)
{
	if (!private_ns) {
		if (unshare(CLONE_NEWNS) != 0)
			return -errno;
		/* without this, a shared "/" would propagate the mount back out */
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
			return -errno;
		private_ns = 1;
	}
	char opts[64];
	snprintf(opts, sizeof(opts), "size=%llu,mode=0700", (unsigned long long)size);
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
		return -errno;
	return 0;
}

void tmpfs_umount(const char *dir)
{
	umount2(dir, MNT_DETACH);
}

uint64_t tmpfs_free_bytes(const char *dir)
{
	struct statvfs st;
	if (statvfs(dir, &st) != 0)
		return 0;
	return (uint64_t)st.f_bavail * st.f_frsize;
}
