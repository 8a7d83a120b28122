/* SPDX-License-Identifier: BSD-3-Clause */
/* conn_limit.c -- connection slots: a total and a count per peer address */
#include "conn_limit.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* key_of -- the address bytes of @sa (IPv4-mapped IPv6 as IPv4); the length, 0 if none */
static uint8_t key_of(const struct sockaddr *sa, uint8_t key[CONN_LIMIT_KEY_MAX])
{
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET) {
		memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a)) {
			memcpy(key, a->s6_addr + 12, 4);
			return 4;
		}
		memcpy(key, a->s6_addr, 16);
		return 16;
	}
	return 0;
}

/* key_hash -- FNV-1a over the key */
static unsigned key_hash(const uint8_t *key, uint8_t len)
{
	uint32_t h = 2166136261u;
	for (uint8_t i = 0; i < len; i++)
		h = (h ^ key[i]) * 16777619u;
	return h;
}

/* __find -- the entry of @key, or the free one where it would go. Needs cl->lock. */
static struct conn_limit_entry *__find(struct conn_limit *cl, const uint8_t *key, uint8_t len)
{
	for (unsigned i = key_hash(key, len) & cl->mask;; i = (i + 1) & cl->mask) {
		struct conn_limit_entry *e = &cl->table[i];
		if (e->key_len == 0 || (e->key_len == len && memcmp(e->key, key, len) == 0))
			return e;
	}
}

/*
 * __remove -- free @e and shift the entries after it back into the gap, so
 * every lookup still finds its entry before the first free one (linear
 * probing without tombstones). Needs cl->lock.
 */
static void __remove(struct conn_limit *cl, struct conn_limit_entry *e)
{
	unsigned gap = (unsigned)(e - cl->table);
	for (unsigned i = (gap + 1) & cl->mask;; i = (i + 1) & cl->mask) {
		struct conn_limit_entry *n = &cl->table[i];
		if (n->key_len == 0)
			break;
		unsigned home = key_hash(n->key, n->key_len) & cl->mask;
		/* n may move to the gap only if its home is not in (gap, i] (cyclically) */
		bool stays = gap <= i ? (home > gap && home <= i) : (home > gap || home <= i);
		if (stays)
			continue;
		cl->table[gap] = *n;
		gap = i;
	}
	cl->table[gap].key_len = 0;
	cl->table[gap].count = 0;
}

int conn_limit_new(unsigned max_total, unsigned max_per_peer, struct conn_limit **out)
{
	if (!out || max_total == 0 || max_per_peer == 0 || max_per_peer > max_total ||
	    max_total > (1U << 24))
		return -EINVAL;
	struct conn_limit *cl = calloc(1, sizeof(*cl));
	if (!cl)
		return -ENOMEM;
	unsigned size = 16;
	while (size <= 2 * max_total)
		size *= 2;
	cl->table = calloc(size, sizeof(*cl->table));
	if (!cl->table) {
		free(cl);
		return -ENOMEM;
	}
	cl->mask = size - 1;
	cl->max_total = max_total;
	cl->max_per_peer = max_per_peer;
	pthread_mutex_init(&cl->lock, NULL);
	*out = cl;
	return 0;
}

void conn_limit_delete(struct conn_limit **clp)
{
	if (!clp || !*clp)
		return;
	pthread_mutex_destroy(&(*clp)->lock);
	free((*clp)->table);
	free(*clp);
	*clp = NULL;
}

/* __refuse -- a refusing slot into @slot if one is left. Needs cl->lock. Returns -EUSERS. */
static int __refuse(struct conn_limit *cl, struct conn_slot *slot)
{
	if (cl->refusing < CONN_LIMIT_REFUSING) {
		cl->refusing++;
		slot->cl = cl;
		slot->refusing = true;
	} else {
		cl->refused_silently++;
	}
	pthread_mutex_unlock(&cl->lock);
	return -EUSERS;
}

int conn_limit_take(struct conn_limit *cl, const struct sockaddr *peer, struct conn_slot *slot,
		    char *why, size_t whylen)
{
	slot->cl = NULL;
	slot->refusing = false;
	slot->key_len = key_of(peer, slot->key);
	pthread_mutex_lock(&cl->lock);
	if (cl->total >= cl->max_total) {
		cl->refused_total++;
		snprintf(why, whylen,
			 "too many connections: this daemon serves at most %u at once "
			 "(--max-connections); try again later",
			 cl->max_total);
		return __refuse(cl, slot);
	}
	struct conn_limit_entry *e = NULL;
	if (slot->key_len) {
		e = __find(cl, slot->key, slot->key_len);
		if (e->count >= cl->max_per_peer) {
			cl->refused_peer++;
			snprintf(why, whylen,
				 "too many connections from this address: at most %u per address "
				 "(--max-connections-per-peer); close one first",
				 cl->max_per_peer);
			return __refuse(cl, slot);
		}
		if (e->key_len == 0) {
			memcpy(e->key, slot->key, slot->key_len);
			e->key_len = slot->key_len;
		}
		e->count++;
	}
	cl->total++;
	pthread_mutex_unlock(&cl->lock);
	slot->cl = cl;
	return 0;
}

void conn_limit_give(struct conn_slot *slot)
{
	if (!slot || !slot->cl)
		return;
	struct conn_limit *cl = slot->cl;
	pthread_mutex_lock(&cl->lock);
	if (slot->refusing) {
		cl->refusing--;
		pthread_mutex_unlock(&cl->lock);
		slot->cl = NULL;
		return;
	}
	if (slot->key_len) {
		struct conn_limit_entry *e = __find(cl, slot->key, slot->key_len);
		if (e->key_len && e->count > 0 && --e->count == 0)
			__remove(cl, e);
	}
	cl->total--;
	pthread_mutex_unlock(&cl->lock);
	slot->cl = NULL;
}

unsigned conn_limit_count(struct conn_limit *cl)
{
	pthread_mutex_lock(&cl->lock);
	unsigned n = cl->total;
	pthread_mutex_unlock(&cl->lock);
	return n;
}
