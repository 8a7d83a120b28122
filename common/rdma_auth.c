/* SPDX-License-Identifier: BSD-3-Clause */
/* rdma_auth.c -- sign and check RDMA connection requests (layout and rules in rdma_auth.h) */
#include "rdma_auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "faults.h"

#define DOMAIN	 "rdax rdma auth 1"
#define MAC_SIZE 16

struct seen {
	uint8_t nonce[8];
	uint32_t time;
};

struct rdma_auth_verifier {
	struct psk_entry *keys;
	size_t nkeys;
	uint8_t (*ids)[8]; /* user_id of each key */
	uint32_t started;
	struct seen seen[RDMA_AUTH_NONCES];
	size_t nseen;
};

/* user_id -- the first 8 bytes of SHA-256(@user) */
static int user_id(const char *user, uint8_t out[8])
{
	uint8_t h[32];
	if (gnutls_hash_fast(GNUTLS_DIG_SHA256, user, strlen(user), h) < 0)
		return -EIO;
	memcpy(out, h, 8);
	return 0;
}

/* mac -- the MAC of @cm and the first 20 bytes of the auth block @a */
static int mac(const uint8_t *key, size_t key_len, const uint8_t cm[RDMA_CM_DATA_SIZE],
	       const uint8_t a[20], uint8_t out[MAC_SIZE])
{
	uint8_t msg[sizeof(DOMAIN) - 1 + RDMA_CM_DATA_SIZE + 20];
	memcpy(msg, DOMAIN, sizeof(DOMAIN) - 1);
	memcpy(msg + sizeof(DOMAIN) - 1, cm, RDMA_CM_DATA_SIZE);
	memcpy(msg + sizeof(DOMAIN) - 1 + RDMA_CM_DATA_SIZE, a, 20);
	uint8_t full[32];
	if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, key_len, msg, sizeof(msg), full) < 0)
		return -EIO;
	memcpy(out, full, MAC_SIZE);
	return 0;
}

int rdma_auth_sign(const uint8_t cm[RDMA_CM_DATA_SIZE], const char *user, const uint8_t *key,
		   size_t key_len, uint32_t now, const uint8_t nonce[8],
		   uint8_t out[RDMA_AUTH_SIZE])
{
	if (user_id(user, out))
		return -EIO;
	memcpy(out + 8, nonce, 8);
	rdma_put32(out + 16, now);
	return mac(key, key_len, cm, out, out + 20);
}

int rdma_auth_verifier_new(const char *psk_file, uint32_t started, struct rdma_auth_verifier **out,
			   char *err, size_t errlen)
{
	struct rdma_auth_verifier *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	int ret = psk_file_read(psk_file, &v->keys, &v->nkeys, err, errlen);
	if (ret)
		goto err_free;
	ret = -ENOMEM;
	v->ids = calloc(v->nkeys, sizeof(*v->ids));
	if (!v->ids)
		goto err_free;
	for (size_t i = 0; i < v->nkeys; i++)
		if ((ret = user_id(v->keys[i].user, v->ids[i])))
			goto err_free;
	v->started = started;
	*out = v;
	return 0;

err_free:
	rdma_auth_verifier_delete(&v);
	return ret;
}

void rdma_auth_verifier_delete(struct rdma_auth_verifier **vp)
{
	if (!vp || !*vp)
		return;
	struct rdma_auth_verifier *v = *vp;
	psk_file_free(&v->keys, v->nkeys);
	free(v->ids);
	free(v);
	*vp = NULL;
}

/* within -- is @t within the window around @now? (32-bit seconds, wrapping) */
static bool within(uint32_t t, uint32_t now)
{
	uint32_t d = t - now;
	return d <= RDMA_AUTH_WINDOW || (uint32_t)-d <= RDMA_AUTH_WINDOW;
}

/* seen_forget -- drop the nonces whose requests left the window */
static void seen_forget(struct rdma_auth_verifier *v, uint32_t now)
{
	size_t k = 0;
	for (size_t i = 0; i < v->nseen; i++)
		if (within(v->seen[i].time, now))
			v->seen[k++] = v->seen[i];
	v->nseen = k;
}

int rdma_auth_verify(struct rdma_auth_verifier *v, const uint8_t *pd, size_t len, uint32_t now,
		     char *user, size_t user_len)
{
	if (!pd || len < RDMA_CM_DATA_SIZE + RDMA_AUTH_SIZE)
		return -ENOKEY;
	const uint8_t *a = pd + RDMA_CM_DATA_SIZE;
	/* the transport pads private data with zeros: an all-zero block is no block */
	uint8_t any = 0;
	for (int k = 0; k < RDMA_AUTH_SIZE; k++)
		any |= a[k];
	if (!any)
		return -ENOKEY;
	/* several users may share an id prefix: try each whose id matches */
	int ret = -EACCES;
	size_t who = 0;
	for (size_t i = 0; i < v->nkeys && ret; i++) {
		if (memcmp(v->ids[i], a, 8) != 0)
			continue;
		uint8_t want[MAC_SIZE];
		if (mac(v->keys[i].key, v->keys[i].key_len, pd, a, want))
			return -EIO;
		/* constant time in where the MACs differ */
		uint8_t diff = 0;
		for (int k = 0; k < MAC_SIZE; k++)
			diff |= (uint8_t)(want[k] ^ a[20 + k]);
		if (diff == 0) {
			ret = 0;
			who = i;
		}
	}
	if (ret)
		return ret;
	uint32_t t = rdma_get32(a + 16);
	if (!within(t, now) || (int32_t)(t - v->started) < 0)
		return -ETIME;
	seen_forget(v, now);
	for (size_t i = 0; i < v->nseen && !rdax_faults.rdma_auth_no_replay_check; i++)
		if (memcmp(v->seen[i].nonce, a + 8, 8) == 0)
			return -EALREADY;
	if (v->nseen == RDMA_AUTH_NONCES)
		return -EBUSY;
	memcpy(v->seen[v->nseen].nonce, a + 8, 8);
	v->seen[v->nseen].time = t;
	v->nseen++;
	snprintf(user, user_len, "%s", v->keys[who].user);
	return 0;
}
