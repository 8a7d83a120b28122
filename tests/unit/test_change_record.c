/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_change_record.c -- the durable per-replica change record
 *
 * Geometry and format; slots (one per absent replica, kept across a reopen
 * of the same node, -ENOSPC past four, zeroed on close); marks clipped to the
 * volume and a superset of every byte range marked; the highest epoch only
 * grows. Durability through the power-fail simulator (PERSIST_SIM: only what
 * was flushed reaches the file, so unmapping without a flush is a power
 * cut): marks, slots and the epoch survive. Its control: with
 * change-record-no-persist the same cut must lose the marks, and the test
 * checks that it does. Concurrent marks from several threads all land.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "change_record.h"
#include "faults.h"
#include "persist.h"

#define GIB	 (1ULL << 30)
#define MIB	 (1ULL << 20)
#define VOL_SIZE GIB

static char path[64];
static struct persist pm;

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/tmp/rdax-chrec-XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	unlink(path);
	return persist_create(path, change_record_size(VOL_SIZE), PERSIST_SIM, &pm);
}

static int teardown(void **state)
{
	(void)state;
	persist_unmap(&pm);
	unlink(path);
	return 0;
}

/* power_cut -- drop the mapping without any flush, map the file again */
static void power_cut(void)
{
	persist_unmap(&pm);
	assert_int_equal(persist_map(path, PERSIST_SIM, &pm), 0);
}

static void test_geometry(void **state)
{
	(void)state;
	/* 1 GiB: 512 regions, 64 bytes of bits, a 4 KiB page per slot */
	assert_int_equal(change_record_size(GIB), 4096 + 4 * 4096);
	/* 1 TiB: 524288 regions, 64 KiB per slot */
	assert_int_equal(change_record_size(1ULL << 40), 4096 + 4 * 65536);
	struct change_record r;
	assert_int_equal(change_record_format(&r, pm.base, pm.size, &pm, VOL_SIZE, 1), 0);
	assert_int_equal(r.nregions, 512);
	assert_int_equal(change_record_epoch(&r), 1);
	struct change_record o;
	assert_int_equal(change_record_open(&o, pm.base, pm.size, &pm, VOL_SIZE), 0);
	/* a record of another volume size, or none at all, is not usable */
	assert_int_equal(change_record_open(&o, pm.base, pm.size, &pm, VOL_SIZE / 2), -EINVAL);
	assert_int_equal(change_record_format(&r, pm.base, 4096, &pm, VOL_SIZE, 1), -EINVAL);
	memset(pm.base, 0xa5, 8);
	assert_int_equal(change_record_open(&o, pm.base, pm.size, &pm, VOL_SIZE), -EINVAL);
}

static void test_slots_and_marks(void **state)
{
	(void)state;
	struct change_record r;
	assert_int_equal(change_record_format(&r, pm.base, pm.size, &pm, VOL_SIZE, 1), 0);
	/* nothing records while no slot is open */
	change_record_mark(&r, 0, VOL_SIZE);
	int s = change_record_slot_open(&r, "n2", 1);
	assert_true(s >= 0);
	assert_int_equal(change_record_count(&r, s), 0);
	/* [3M, 8M) touches regions 1, 2, 3; a 1-byte write at the last byte region 511 */
	change_record_mark(&r, 3 * MIB, 5 * MIB);
	change_record_mark(&r, VOL_SIZE - 1, 100); /* clipped at the end */
	change_record_mark(&r, VOL_SIZE, 4096);	   /* past the end: nothing */
	assert_int_equal(change_record_count(&r, s), 4);
	assert_false(change_record_test(&r, s, 0));
	assert_true(change_record_test(&r, s, 1));
	assert_true(change_record_test(&r, s, 3));
	assert_false(change_record_test(&r, s, 4));
	assert_int_equal(change_record_next(&r, s, 0), 1);
	assert_int_equal(change_record_next(&r, s, 4), 511);
	assert_int_equal(change_record_next(&r, s, 512), 512);
	change_record_clear(&r, s, 2);
	assert_int_equal(change_record_next(&r, s, 2), 3);
	/* the same node's slot again: its bits are kept */
	assert_int_equal(change_record_slot_open(&r, "n2", 2), s);
	assert_int_equal(change_record_count(&r, s), 3);
	/* a second slot sees only what was marked after it opened */
	int s3 = change_record_slot_open(&r, "n3", 2);
	assert_true(s3 >= 0 && s3 != s);
	change_record_mark(&r, 100 * MIB, 1);
	assert_int_equal(change_record_count(&r, s3), 1);
	assert_int_equal(change_record_count(&r, s), 4);
	change_record_mark_slot(&r, s3, 0, 1);
	assert_int_equal(change_record_count(&r, s3), 2);
	assert_int_equal(change_record_count(&r, s), 4);
	/* four slots at most */
	assert_true(change_record_slot_open(&r, "n4", 2) >= 0);
	assert_true(change_record_slot_open(&r, "n5", 2) >= 0);
	assert_int_equal(change_record_slot_open(&r, "n6", 2), -ENOSPC);
	assert_int_equal(change_record_slot_open(&r, "", 2), -EINVAL);
	change_record_slot_close(&r, s);
	assert_int_equal(change_record_slot_find(&r, "n2"), -ENOENT);
	int again = change_record_slot_open(&r, "n6", 3);
	assert_int_equal(again, s);
	assert_int_equal(change_record_count(&r, again), 0);
}

static void test_epoch(void **state)
{
	(void)state;
	struct change_record r;
	assert_int_equal(change_record_format(&r, pm.base, pm.size, &pm, VOL_SIZE, 4), 0);
	assert_int_equal(change_record_raise_epoch(&r, 4), 0);
	assert_int_equal(change_record_raise_epoch(&r, 7), 0);
	assert_int_equal(change_record_raise_epoch(&r, 6), -ESTALE);
	assert_int_equal(change_record_epoch(&r), 7);
	power_cut();
	assert_int_equal(change_record_open(&r, pm.base, pm.size, &pm, VOL_SIZE), 0);
	assert_int_equal(change_record_epoch(&r), 7);
}

/* cut_and_count -- format, open a slot, mark 3 regions, power cut; the marks left */
static uint64_t cut_and_count(void)
{
	struct change_record r;
	assert_int_equal(change_record_format(&r, pm.base, pm.size, &pm, VOL_SIZE, 1), 0);
	assert_true(change_record_slot_open(&r, "n2", 1) >= 0);
	change_record_mark(&r, 0, 1);
	change_record_mark(&r, 10 * MIB, 4096);
	change_record_mark(&r, 1000 * MIB, 8192);
	assert_int_equal(change_record_count(&r, change_record_slot_find(&r, "n2")), 3);
	power_cut();
	assert_int_equal(change_record_open(&r, pm.base, pm.size, &pm, VOL_SIZE), 0);
	int s = change_record_slot_find(&r, "n2");
	assert_true(s >= 0); /* opening a slot is persisted either way */
	return change_record_count(&r, s);
}

static void test_power_cut(void **state)
{
	(void)state;
	assert_int_equal(cut_and_count(), 3);
	/* control: marks that are not persisted are lost by the same cut, and this sees it */
	rdax_faults.change_record_no_persist = true;
	uint64_t left = cut_and_count();
	rdax_faults.change_record_no_persist = false;
	printf("control change-record-no-persist: %llu of 3 marks survived the cut\n",
	       (unsigned long long)left);
	assert_true(left < 3);
}

struct marker {
	struct change_record *r;
	unsigned id;
};

static void *mark_many(void *arg)
{
	struct marker *m = arg;
	for (uint64_t region = m->id; region < 512; region += 4)
		change_record_mark(m->r, region * (2 * MIB) + 4096, 4096);
	return NULL;
}

static void test_concurrent_marks(void **state)
{
	(void)state;
	struct change_record r;
	assert_int_equal(change_record_format(&r, pm.base, pm.size, &pm, VOL_SIZE, 1), 0);
	int s = change_record_slot_open(&r, "n2", 1);
	pthread_t t[4];
	struct marker m[4];
	for (unsigned i = 0; i < 4; i++) {
		m[i] = (struct marker){&r, i};
		assert_int_equal(pthread_create(&t[i], NULL, mark_many, &m[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(change_record_count(&r, s), 512);
	power_cut();
	assert_int_equal(change_record_open(&r, pm.base, pm.size, &pm, VOL_SIZE), 0);
	assert_int_equal(change_record_count(&r, change_record_slot_find(&r, "n2")), 512);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_geometry),
	    cmocka_unit_test(test_slots_and_marks),
	    cmocka_unit_test(test_epoch),
	    cmocka_unit_test(test_power_cut),
	    cmocka_unit_test(test_concurrent_marks),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
