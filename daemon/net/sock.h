/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sock.h -- socket steps of the listeners (listener.c, rdma_listen.c):
 * naming an address, listening on one, accepting from one
 */
#ifndef RDAX_SOCK_H
#define RDAX_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct addrinfo;

/* sock_addr_string -- "ADDR:PORT" or "[ADDR]:PORT" of an inet address (@sa may be NULL) */
void sock_addr_string(const struct sockaddr *sa, char *buf, size_t len);

/*
 * sock_listen -- a non-blocking socket bound to @ai and listening; an IPv6
 * socket takes IPv6 only, so [::] and 0.0.0.0 can both be bound. Returns the
 * descriptor or -errno.
 */
int sock_listen(const struct addrinfo *ai);

/*
 * sock_accept -- one connection waiting on the listening @lfd, non-blocking
 * and close-on-exec, with TCP_NODELAY when it is TCP; its peer in *ss.
 * Aborted handshakes and signals are skipped. Returns the descriptor,
 * -EAGAIN when none is waiting, or another -errno (see sock_accept_exhausted).
 */
int sock_accept(int lfd, struct sockaddr_storage *ss);

/* Keepalive probes a dead peer leaves unanswered before its connection fails. */
#define SOCK_KEEPALIVE_PROBES 3

/*
 * sock_set_keepalive -- TCP keepalive on the connected @fd: the first probe
 * after @idle seconds without traffic, then SOCK_KEEPALIVE_PROBES probes
 * @idle / SOCK_KEEPALIVE_PROBES apart, so a peer that vanished (power off,
 * a cable pulled) fails its connection about 2 * @idle seconds after its
 * last word; the same bound for replies it never acknowledges
 * (TCP_USER_TIMEOUT). @idle 0: nothing set. 0 or -errno.
 */
int sock_set_keepalive(int fd, unsigned idle);
/* sock_addr_is_loopback -- 127.0.0.0/8, ::1, or an IPv4-mapped 127.x address */
bool sock_addr_is_loopback(const struct sockaddr *sa);

/* sock_peer_is_local -- is the peer of the connected @fd on this machine (loopback, unix)? */
bool sock_peer_is_local(int fd);
/* sock_set_nonblock -- O_NONBLOCK on @fd (a channel of librdmacm or libibverbs); 0 or -errno */
int sock_set_nonblock(int fd);

/*
 * sock_accept_exhausted -- is @ret of sock_accept() a lack of descriptors
 * or memory, after which the listener should pause rather than spin?
 */
bool sock_accept_exhausted(int ret);

#endif
