/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conn_limit.h -- how many connections the daemon holds: in all, and per peer address
 *
 * Every connection of every transport (a TCP or unix socket, an RDMA queue
 * pair) takes a slot before it is served and gives it back when its last
 * descriptor is closed (after a lingering close, linger.h). A slot is
 * refused when the daemon holds max_total connections, or max_per_peer
 * from the same peer address (IPv4, IPv6; an IPv4-mapped IPv6 address
 * counts as its IPv4 one; unix sockets count in the total only).
 *
 * A refused connection is told why, in words meant for the client
 * (conn_limit_take's @why): it is served just long enough to answer its
 * first request with that refusal (HELLO gets EUSERS, an NBD option
 * NBD_REP_ERR_POLICY), then closed. Those refusing connections hold a slot
 * of their own, at most CONN_LIMIT_REFUSING at once; beyond that a refused
 * connection is closed without a word.
 *
 * The counts per address live in an open-addressing table (linear probing,
 * backward-shift deletion) sized at creation for max_total addresses, so
 * taking a slot never allocates.
 *
 * Thread safety: conn_limit_take() and conn_limit_give() from any thread
 * (the accept loop takes, the workers give back); one mutex.
 */
#ifndef RDAXD_CONN_LIMIT_H
#define RDAXD_CONN_LIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Room for an address key: an IPv6 address. */
#define CONN_LIMIT_KEY_MAX 16
/* Refused connections being told so at once (each holds a descriptor for a moment). */
#define CONN_LIMIT_REFUSING 64

struct conn_limit_entry {
	uint8_t key[CONN_LIMIT_KEY_MAX];
	uint8_t key_len; /* 0: free */
	unsigned count;
};

struct conn_limit {
	unsigned max_total;    /* > 0 */
	unsigned max_per_peer; /* > 0, <= max_total */
	pthread_mutex_t lock;
	unsigned total;
	unsigned refusing; /* refusing slots held, <= CONN_LIMIT_REFUSING */
	struct conn_limit_entry *table;
	unsigned mask; /* table size - 1 (a power of two > 2 * max_total) */
	unsigned long refused_total, refused_peer, refused_silently;
};

/* A connection's hold on the limit, given back when its descriptor is closed. */
struct conn_slot {
	struct conn_limit *cl; /* NULL: holds nothing */
	uint8_t key[CONN_LIMIT_KEY_MAX];
	uint8_t key_len; /* 0: no per-peer count (a unix socket) */
	bool refusing;	 /* a refusing slot: the connection only says why it is refused */
};

/* conn_limit_new -- limits of @max_total and @max_per_peer (0 < per-peer <= total); 0, -EINVAL,
 * -ENOMEM */
int conn_limit_new(unsigned max_total, unsigned max_per_peer, struct conn_limit **out);

/* conn_limit_delete -- free; accepts NULL, sets *clp = NULL */
void conn_limit_delete(struct conn_limit **clp);

/*
 * conn_limit_take -- a slot for a connection from @peer (@peer NULL or not
 * an inet address: counted in the total only). Returns 0 with @slot
 * filled, or -EUSERS with a sentence for the client in @why ("too many
 * connections: ..."): then @slot holds a refusing slot (slot->refusing),
 * or nothing (slot->cl NULL) when CONN_LIMIT_REFUSING are refusing already.
 */
int conn_limit_take(struct conn_limit *cl, const struct sockaddr *peer, struct conn_slot *slot,
		    char *why, size_t whylen);

/* conn_limit_give -- give @slot back (a slot holding nothing, or NULL, is fine) */
void conn_limit_give(struct conn_slot *slot);

/* conn_limit_count -- connections held now, in all */
unsigned conn_limit_count(struct conn_limit *cl);

#endif
