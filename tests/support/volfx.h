/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * volfx.h -- a sim namespace with one open volume, and its file read back
 *
 * The fixture of the fsync engine's tests: a fresh directory, a namespace
 * in the power-fail simulator's mode (the file is the persistence domain)
 * holding one volume "vol", opened, and a read-only descriptor on the file,
 * so a test sees what a power cut would leave (pattern_durable,
 * volfx_durable_zero). The fault switches start and end cleared.
 *
 * Thread safety: volfx_new() and volfx_delete() on the test's main thread;
 * volfx_durable_zero() from any thread. Failures of the set-up are cmocka
 * assertions (fixture steps, not results).
 */
#ifndef RDAX_TEST_VOLFX_H
#define RDAX_TEST_VOLFX_H

#include <stdbool.h>
#include <stdint.h>

#include "namespace.h"
#include "volume.h"

struct volfx {
	char dir[256];
	char path[512];
	struct ns *ns;
	struct volume *v;
	int fd; /* read-only: what is in the persistence domain */
};

/*
 * volfx_new -- the fixture: directory "rdax-<tag>-*", a sim namespace of
 * @ns_size bytes with id @ns_id, volume "vol" of @vol_size bytes, 2 MiB
 * aligned in the namespace (asserted: huge entries need it), opened
 */
struct volfx *volfx_new(const char *tag, uint64_t ns_size, uint64_t vol_size, uint32_t ns_id);

/*
 * volfx_delete -- close and remove everything, the fault switches and the
 * fsync test hooks cleared. Returns what dtree_check() said of the volume's
 * tree before it closed (0: whole), for the caller to assert after the
 * clean-up, which a failed assertion would skip.
 */
int volfx_delete(struct volfx *fx);

/* volfx_durable_zero -- whether the file holds zeros at volume bytes [off, off + len) */
bool volfx_durable_zero(const struct volfx *fx, uint64_t off, uint64_t len);

#endif
