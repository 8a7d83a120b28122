/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rdma_auth.c -- signed RDMA connection requests: accepted once, replays and forgeries refused
 *
 * The daemon checks the private data of a connection request with
 * rdma_auth_verify before it makes a queue pair for it; these are the
 * requests a client (or an attacker on the fabric) can send it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "faults.h"
#include "rdma_auth.h"

#define T0 1700000000U /* the daemon's start, seconds */

static char dir[64], psk[128];
static const uint8_t alice_key[4] = {0xde, 0xad, 0xbe, 0xef};

/* request -- the private data of a connection request by @user with @key at @t, nonce @n */
static void request(uint8_t pd[RDMA_CM_DATA_SIZE + RDMA_AUTH_SIZE], const char *user,
		    const uint8_t *key, size_t key_len, uint32_t t, uint64_t n)
{
	struct rdma_cm_data cd = {RDMA_CM_MAGIC, RDMA_CM_VERSION, 16, 4096};
	rdma_cm_data_encode(&cd, pd);
	uint8_t nonce[8];
	memcpy(nonce, &n, 8);
	assert_int_equal(rdma_auth_sign(pd, user, key, key_len, t, nonce, pd + RDMA_CM_DATA_SIZE),
			 0);
}

static int verify(struct rdma_auth_verifier *v, const uint8_t *pd, size_t len, uint32_t now)
{
	char user[PSK_USER_MAX + 1] = "";
	int ret = rdma_auth_verify(v, pd, len, now, user, sizeof(user));
	if (ret == 0)
		assert_string_equal(user, "alice");
	return ret;
}

static void rdma_auth_verify__once_and_never_again(void **state)
{
	struct rdma_auth_verifier *v;
	char err[256];
	assert_int_equal(rdma_auth_verifier_new(psk, T0, &v, err, sizeof(err)), 0);
	uint8_t pd[RDMA_CM_DATA_SIZE + RDMA_AUTH_SIZE];
	request(pd, "alice", alice_key, sizeof(alice_key), T0 + 5, 1);
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 6), 0);
	/* the captured request replayed, at once and later in the window */
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 6), -EALREADY);
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 50), -EALREADY);
	/* replayed after the window: too old */
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 5 + RDMA_AUTH_WINDOW + 1), -ETIME);
	/* padded to 56 bytes as the transport delivers it: still the same request */
	uint8_t padded[56] = {0};
	request(padded, "alice", alice_key, sizeof(alice_key), T0 + 7, 2);
	assert_int_equal(verify(v, padded, sizeof(padded), T0 + 7), 0);
	rdma_auth_verifier_delete(&v);
	assert_null(v);
}

/* the control: without the nonce memory the same replay passes, so it is what refuses it */
static void rdma_auth_verify__control_replay_passes_without_check(void **state)
{
	struct rdma_auth_verifier *v;
	char err[256];
	assert_int_equal(rdma_auth_verifier_new(psk, T0, &v, err, sizeof(err)), 0);
	uint8_t pd[RDMA_CM_DATA_SIZE + RDMA_AUTH_SIZE];
	request(pd, "alice", alice_key, sizeof(alice_key), T0 + 5, 1);
	rdax_faults.rdma_auth_no_replay_check = true;
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 6), 0);
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 6), 0);
	rdax_faults.rdma_auth_no_replay_check = false;
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 6), -EALREADY);
	rdma_auth_verifier_delete(&v);
}

static void rdma_auth_verify__forgeries(void **state)
{
	struct rdma_auth_verifier *v;
	char err[256];
	assert_int_equal(rdma_auth_verifier_new(psk, T0, &v, err, sizeof(err)), 0);
	uint8_t pd[RDMA_CM_DATA_SIZE + RDMA_AUTH_SIZE];
	static const uint8_t wrong[4] = {0xde, 0xad, 0xbe, 0xee};
	request(pd, "alice", wrong, sizeof(wrong), T0 + 5, 10);
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 5), -EACCES);
	request(pd, "mallory", alice_key, sizeof(alice_key), T0 + 5, 11);
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 5), -EACCES);
	/* a byte of the connection parameters or of the block changed: the MAC fails */
	for (size_t i = 0; i < sizeof(pd); i++) {
		request(pd, "alice", alice_key, sizeof(alice_key), T0 + 5, 100 + i);
		pd[i] ^= 0x01;
		int ret = verify(v, pd, sizeof(pd), T0 + 5);
		if (ret != -EACCES && ret != -ETIME)
			fail_msg("byte %zu flipped: %d", i, ret);
	}
	/* a request signed before the daemon started, or too far ahead */
	request(pd, "alice", alice_key, sizeof(alice_key), T0 - 1, 20);
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 1), -ETIME);
	request(pd, "alice", alice_key, sizeof(alice_key), T0 + 200, 21);
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 100), -ETIME);
	/* no block: too short, or the transport's zero padding */
	assert_int_equal(verify(v, pd, RDMA_CM_DATA_SIZE, T0 + 5), -ENOKEY);
	uint8_t zeros[56] = {0};
	memcpy(zeros, pd, RDMA_CM_DATA_SIZE);
	assert_int_equal(verify(v, zeros, sizeof(zeros), T0 + 5), -ENOKEY);
	rdma_auth_verifier_delete(&v);
}

static void rdma_auth_verify__nonce_memory_bounded(void **state)
{
	struct rdma_auth_verifier *v;
	char err[256];
	assert_int_equal(rdma_auth_verifier_new(psk, T0, &v, err, sizeof(err)), 0);
	uint8_t pd[RDMA_CM_DATA_SIZE + RDMA_AUTH_SIZE];
	for (unsigned i = 0; i < RDMA_AUTH_NONCES; i++) {
		request(pd, "alice", alice_key, sizeof(alice_key), T0 + 10, 1000 + i);
		assert_int_equal(verify(v, pd, sizeof(pd), T0 + 10), 0);
	}
	request(pd, "alice", alice_key, sizeof(alice_key), T0 + 10, 999);
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 10), -EBUSY);
	/* once those left the window, there is room again */
	request(pd, "alice", alice_key, sizeof(alice_key), T0 + 200, 999);
	assert_int_equal(verify(v, pd, sizeof(pd), T0 + 200), 0);
	rdma_auth_verifier_delete(&v);
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/rdax-test-rdma-auth-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(psk, sizeof(psk), "%s/keys.psk", dir);
	FILE *f = fopen(psk, "w");
	if (!f)
		return -1;
	fprintf(f, "bob:0102\nalice:deadbeef\n");
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	unlink(psk);
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(rdma_auth_verify__once_and_never_again),
	    cmocka_unit_test(rdma_auth_verify__forgeries),
	    cmocka_unit_test(rdma_auth_verify__control_replay_passes_without_check),
	    cmocka_unit_test(rdma_auth_verify__nonce_memory_bounded),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
