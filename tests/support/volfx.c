/* SPDX-License-Identifier: BSD-3-Clause */
/* volfx.c -- a sim namespace with one open volume, and its file read back (volfx.h) */
#include "volfx.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "checked.h"
#include "dirty_tree.h"
#include "faults.h"
#include "fsync.h"
#include "nsfile.h"
#include "tmpdir.h"

struct volfx *volfx_new(const char *tag, uint64_t ns_size, uint64_t vol_size, uint32_t ns_id)
{
	struct volfx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), tag);
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	assert_int_equal(ns_create(fx->path, ns_size, PERSIST_SIM, ns_id, &fx->ns), 0);
	assert_int_equal(ns_volume_create(fx->ns, "vol", vol_size), 0);
	assert_int_equal(ns_volume_open(fx->ns, "vol", &fx->v), 0);
	assert_int_equal(fx->v->ns_offset % RDAX_PMD_SIZE, 0);
	fx->fd = open(fx->path, O_RDONLY);
	assert_true(fx->fd >= 0);
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	return fx;
}

int volfx_delete(struct volfx *fx)
{
	int check = dtree_check(fx->v->tree);
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	fsync_set_test_hooks(NULL);
	close(fx->fd);
	ns_volume_close(fx->ns, &fx->v);
	ns_close(&fx->ns);
	tmpdir_remove(fx->dir);
	free(fx);
	return check;
}

bool volfx_durable_zero(const struct volfx *fx, uint64_t off, uint64_t len)
{
	uint8_t *got = malloc(len);
	assert_non_null(got);
	nsfile_pread(fx->fd, fx->v->ns_offset + off, got, len);
	bool zero = true;
	for (uint64_t i = 0; i < len && zero; i++)
		zero = got[i] == 0;
	free(got);
	return zero;
}
