/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * linger.h -- the end of a socket whose peer may still be sending: a FIN, not a reset
 *
 * close() of a TCP socket with unread input makes the kernel answer with a
 * reset instead of a FIN (RFC 1122, 4.2.2.13), and a reset makes the
 * peer's kernel throw away what it received but the peer has not read yet:
 * the replies queued just before the close -- the error frame that says why
 * a connection ends, the replies a shutdown drain promised. A client still
 * sending (pipelining writes) is exactly such a peer.
 *
 * So a socket whose peer has not closed its side is handed to a linger set
 * instead of being closed: its write side is shut (shutdown(SHUT_WR): the
 * kernel sends what is queued, then the FIN), and what still arrives is
 * read and dropped until the peer closes too (end of file), an error, or
 * LINGER_TIMEOUT seconds; then the socket is closed. Lingering costs a
 * descriptor and a small record; at most LINGER_MAX sockets linger per set,
 * beyond that a socket is closed at once. Each lingering socket keeps its
 * connection slot (conn_limit.h) until it is closed, since it still holds
 * a descriptor.
 *
 * (This is the lingering close of web servers, Apache's lingering_close()
 * and nginx's lingering_close, for the same reason.)
 *
 * Thread safety: a linger set belongs to the thread of its loop.
 */
#ifndef RDAXD_LINGER_H
#define RDAXD_LINGER_H

#include <stdbool.h>

#include <ev.h>

#include "conn_limit.h"

/* Seconds a closed socket's input is read and dropped at most. */
#define LINGER_TIMEOUT 3.0
/* Sockets lingering at once per set; more are closed at once. */
#define LINGER_MAX 1024
/* Bytes read and dropped per readable event. */
#define LINGER_READ_MAX (256U << 10)

struct lingering;

struct linger_set {
	struct ev_loop *loop;
	struct lingering *head, *tail; /* oldest first: the head's deadline is the earliest */
	unsigned count;
	ev_timer timer;
	void (*on_empty)(void *arg); /* the last lingering socket was closed (may be NULL) */
	void *arg;
	unsigned long lingered, cut; /* sockets handed over; closed by the timeout */
};

/* linger_set_init -- an empty set on @loop; @on_empty(@arg) when it empties (NULL: none) */
void linger_set_init(struct linger_set *ls, struct ev_loop *loop, void (*on_empty)(void *arg),
		     void *arg);

/*
 * linger_socket -- end @fd (a connected socket whose output is all written
 * to the kernel) without a reset: shut its write side and read until the
 * peer closes or LINGER_TIMEOUT, then close it and give back @slot (may be
 * NULL). Takes @fd and @slot in every case (closed at once when the set is
 * full, out of memory, or the fault linger_off is on).
 */
void linger_socket(struct linger_set *ls, int fd, struct conn_slot *slot);

/* linger_set_close_all -- close every lingering socket now (the loop is stopping) */
void linger_set_close_all(struct linger_set *ls);

#endif
