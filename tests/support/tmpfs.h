/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tmpfs.h -- a small filesystem that fills up, for tests of a full backing
 * filesystem
 *
 * The tmpfs is mounted in a mount namespace private to the test process
 * (unshare(CLONE_NEWNS), propagation made private first), so no other
 * process sees it and it disappears with the process, even after a crash.
 *
 * Thread safety: call from the test's main thread before starting others.
 */
#ifndef RDAX_TEST_TMPFS_H
#define RDAX_TEST_TMPFS_H

#include <stdint.h>

/*
 * tmpfs_mount -- mount a tmpfs of @size bytes on the existing directory @dir.
 * Returns 0, or -errno when this process may not mount (not root, no
 * CAP_SYS_ADMIN, a container without mount rights): the caller skips.
 */
int tmpfs_mount(const char *dir, uint64_t size);

/* tmpfs_umount -- unmount what tmpfs_mount() mounted on @dir (lazily) */
void tmpfs_umount(const char *dir);

/* tmpfs_free_bytes -- bytes still free on the filesystem holding @dir */
uint64_t tmpfs_free_bytes(const char *dir);

#endif
