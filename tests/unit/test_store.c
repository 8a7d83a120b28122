/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_store.c -- the namespaces of one daemon: adding them (what is
 * refused, and how it is said), volume placement across them, and the
 * reasons a create is refused
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checked.h"
#include "errors.h"
#include "log.h"
#include "store.h"
#include "vol_table.h"

#include "tmpdir.h"

#define MiB  (1ULL << 20)
#define PAGE RDAX_PAGE_SIZE

struct fx {
	char dir[256];
	char path[512];
	char path2[512];
	struct store *s;
	char err[512];
};

static int fx_setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	tmpdir_make(fx->dir, sizeof(fx->dir), "test-store");
	tmpdir_file(fx->path, sizeof(fx->path), fx->dir, "ns");
	tmpdir_file(fx->path2, sizeof(fx->path2), fx->dir, "ns2");
	assert_int_equal(store_new(&fx->s), 0);
	persist_sim_set_budget(-1);
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *fx = *state;
	store_delete(&fx->s);
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

/* add -- store_namespace_add in sim mode; the message goes to fx->err */
static int add(struct fx *fx, const char *path, uint64_t create_size)
{
	fx->err[0] = '\0';
	return store_namespace_add(fx->s, path, create_size, PERSIST_SIM, fx->err, sizeof(fx->err));
}

/* create -- store_volume_create; the message goes to fx->err */
static int create(struct fx *fx, const char *name, uint64_t size, const uint32_t *ns_id)
{
	fx->err[0] = '\0';
	return store_volume_create(fx->s, name, size, ns_id, NULL, fx->err, sizeof(fx->err));
}

/* assert_err_has -- the last message contains @what */
static void assert_err_has(struct fx *fx, const char *what)
{
	if (!strstr(fx->err, what))
		fail_msg("message \"%s\" does not say \"%s\"", fx->err, what);
}

static void assert_err_lacks(struct fx *fx, const char *what)
{
	if (strstr(fx->err, what))
		fail_msg("message \"%s\" should not say \"%s\"", fx->err, what);
}

/* fill_table -- VT_CAPACITY one-page volumes in namespace @id */
static void fill_table(struct fx *fx, uint32_t id)
{
	char name[32];
	for (unsigned i = 0; i < VT_CAPACITY; i++) {
		snprintf(name, sizeof(name), "n%u-v%u", id, i);
		assert_int_equal(create(fx, name, PAGE, &id), 0);
	}
}

static void store_volume_create__full_table_is_not_a_lack_of_space(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(add(fx, fx->path, 16 * MiB), 0);
	uint32_t id = 0;
	fill_table(fx, id);

	assert_int_equal(create(fx, "one-more", PAGE, &id), -ENOSPC);
	assert_err_has(fx, "volume table");
	assert_err_has(fx, "is full (1024 of 1024 entries)");
	assert_err_lacks(fx, "extent");
	assert_int_equal(create(fx, "one-more", PAGE, NULL), -ENOSPC);
	assert_err_has(fx, "is full (1024 of 1024 entries)");
}

static void store_volume_create__no_extent_says_sizes_in_units(void **state)
{
	struct fx *fx = *state;
	/* data area: 8 MiB - 2 MiB of metadata = 6 MiB */
	assert_int_equal(add(fx, fx->path, 8 * MiB), 0);
	assert_int_equal(create(fx, "big", 6 * MiB + PAGE, NULL), -ENOSPC);
	assert_err_has(fx, "of 6.0 MiB");
	assert_err_has(fx, "no free extent that large (largest free: 6.0 MiB, 6.0 MiB free in all)");
	assert_err_lacks(fx, "table");

	uint32_t id = 0;
	assert_int_equal(create(fx, "a", 2 * MiB, &id), 0);
	assert_int_equal(create(fx, "b", 2 * MiB, &id), 0);
	assert_int_equal(create(fx, "c", 2 * MiB - PAGE, &id), 0);
	assert_int_equal(store_volume_delete(fx->s, "b"), 0);
	assert_int_equal(create(fx, "d", 3 * MiB, &id), -ENOSPC);
	assert_err_has(fx, "largest free: 2.0 MiB, 2.0 MiB free in all");
}

/* A namespace whose table is full is passed over, however much space it has. */
static void store_volume_create__placement_skips_full_tables(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(add(fx, fx->path, 64 * MiB), 0);  /* id 0: the larger one */
	assert_int_equal(add(fx, fx->path2, 16 * MiB), 0); /* id 1 */
	fill_table(fx, 0);
	uint32_t placed = 99;
	fx->err[0] = '\0';
	assert_int_equal(
	    store_volume_create(fx->s, "x", PAGE, NULL, &placed, fx->err, sizeof(fx->err)), 0);
	assert_int_equal(placed, 1);

	uint32_t id = 0;
	assert_int_equal(create(fx, "y", PAGE, &id), -ENOSPC); /* named: refused, said why */
	assert_err_has(fx, "is full");
}

static void store_volume_create__other_refusals_explained(void **state)
{
	struct fx *fx = *state;
	assert_int_equal(create(fx, "a", PAGE, NULL), -ENOENT);
	assert_err_has(fx, "no namespace");
	assert_int_equal(add(fx, fx->path, 8 * MiB), 0);
	assert_int_equal(create(fx, "a", PAGE, NULL), 0);
	assert_int_equal(create(fx, "a", PAGE, NULL), -EEXIST);
	assert_err_has(fx, "already exists");
	uint32_t id = 3;
	assert_int_equal(create(fx, "b", PAGE, &id), -ENOENT);
	assert_err_has(fx, "no namespace 3 (this daemon serves 1)");
	assert_int_equal(create(fx, "../b", PAGE, NULL), -EINVAL);
	assert_int_equal(store_volume_create(fx->s, "c", PAGE, NULL, NULL, NULL, 0), 0);
}

int main(void)
{
	/* thousands of creates: keep the log to what goes wrong */
	log_set_level(LOG_LEVEL_ERROR);
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
	    T(store_volume_create__full_table_is_not_a_lack_of_space),
	    T(store_volume_create__no_extent_says_sizes_in_units),
	    T(store_volume_create__placement_skips_full_tables),
	    T(store_volume_create__other_refusals_explained),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
