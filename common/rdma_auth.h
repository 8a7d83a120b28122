/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_auth.h -- an RDMA connection request that proves its PSK and cannot be replayed
 *
 * RDMA has no TLS. A client with a pre-shared key (the --tls-psk file's)
 * appends an auth block to the private data of its connection request
 * (rdma_proto.h), and rdaxd checks it before it creates a queue pair for the
 * connection -- so before any memory window or rkey exists for it:
 *
 *   off size field (after the RDMA_CM_DATA_SIZE bytes of struct rdma_cm_data)
 *    0   8   user_id  the first 8 bytes of SHA-256(username)
 *    8   8   nonce    random, new for every request
 *   16   4   time     the client's clock, seconds since the epoch (low 32 bits)
 *   20  16   mac      HMAC-SHA256(key, "rdax rdma auth 1" | cm data | user_id |
 *                     nonce | time), the first 16 bytes
 *
 * 16 + 36 = 52 bytes: within the 56 bytes of private data a connection
 * request carries on InfiniBand and RoCE.
 *
 * The daemon takes a request only if its MAC is right for the user's key,
 * its time is within RDMA_AUTH_WINDOW seconds of the daemon's clock and not
 * before the daemon started, and its nonce was not seen in the window: a
 * captured request replayed (the same bytes) is refused, and so is one
 * whose connection parameters were changed (they are under the MAC). Clocks
 * must agree to within the window (NTP).
 *
 * Thread safety: a verifier belongs to the thread that handles the
 * listeners' connection requests (the accept loop); signing is pure.
 */
#ifndef RDAX_COMMON_RDMA_AUTH_H
#define RDAX_COMMON_RDMA_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "psk_file.h"
#include "rdma_proto.h"

#define RDMA_AUTH_SIZE	 36
#define RDMA_AUTH_WINDOW 60 /* seconds either side of the daemon's clock */
/* Nonces remembered (the requests of two windows): beyond, requests wait for room. */
#define RDMA_AUTH_NONCES 4096

/*
 * rdma_auth_sign -- the auth block of a request whose private data starts
 * with @cm, for @user with @key, at @now with @nonce. Returns 0 or -EIO
 * (the HMAC failed).
 */
int rdma_auth_sign(const uint8_t cm[RDMA_CM_DATA_SIZE], const char *user, const uint8_t *key,
		   size_t key_len, uint32_t now, const uint8_t nonce[8],
		   uint8_t out[RDMA_AUTH_SIZE]);

struct rdma_auth_verifier;

/*
 * rdma_auth_verifier_new -- the keys of @psk_file, and the daemon's start
 * time @started (requests signed before it are refused). Returns 0,
 * -EINVAL (@err says why), -ENOMEM.
 */
int rdma_auth_verifier_new(const char *psk_file, uint32_t started, struct rdma_auth_verifier **out,
			   char *err, size_t errlen);

/* rdma_auth_verifier_delete -- clear the keys and free; accepts NULL, sets *vp to NULL */
void rdma_auth_verifier_delete(struct rdma_auth_verifier **vp);

/*
 * rdma_auth_verify -- check the private data @pd (@len bytes) of a request
 * at @now. Returns 0 and the username in @user (@user_len bytes at least
 * PSK_USER_MAX + 1), or -ENOKEY (no auth block: too short, or zeros -- the
 * padding of a request without one), -EACCES (unknown user or
 * wrong MAC), -ETIME (time outside the window, or before the start),
 * -EALREADY (a replay: the nonce was seen), -EBUSY (the nonce memory is
 * full of requests still in their window). On success the nonce is
 * remembered.
 */
int rdma_auth_verify(struct rdma_auth_verifier *v, const uint8_t *pd, size_t len, uint32_t now,
		     char *user, size_t user_len);

#endif
