/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * listener.h -- every listening endpoint of the daemon: accept, spread, pause, name
 *
 * The listening sockets of every protocol -- tcp:// (the native protocol),
 * nbd:// and nbd+unix:// -- are endpoints of one listener, watched by the
 * accept loop (rdaxd's main thread, which also handles the signals). Each
 * accepted socket is made non-blocking (TCP_NODELAY on TCP: replies are
 * small and latency-bound) and handed to the next worker's connection set,
 * round-robin over every transport (conn_sets_next); from then on it lives
 * on that worker's loop only. What it becomes is the endpoint's start
 * function (native_conn_start_socket, nbd_conn_start).
 *
 * Limits (listener_set_limits): every accepted socket takes a slot under
 * the connection limits (conn_limit.h) before it is handed over; one over
 * a limit is handed over as a refusing connection, which answers its first
 * request with the reason and ends, or is closed at once when too many are
 * refusing already. TCP sockets get keepalive (sock_set_keepalive).
 *
 * When accept() runs out of descriptors (EMFILE, ENFILE) the listener
 * gives up a spare descriptor it keeps for this, accepts the waiting
 * connection and closes it at once -- so a client is told, by the end of
 * its connection, instead of waiting in the backlog -- and takes the spare
 * back; then, as when accept() runs out of memory (ENOBUFS, ENOMEM), every
 * socket endpoint pauses for LISTENER_ACCEPT_PAUSE seconds instead of
 * spinning on a readable socket it cannot accept from. The connection
 * limits keep the daemon below its descriptor limit (rdaxd lowers
 * --max-connections to fit), so this is the last line, not the rule.
 *
 * rdma_cm listening fits the same shape as far as it goes: its event
 * channel is a watched endpoint (listener_add_watch) whose readiness the
 * RDMA listener handles itself (connection requests are events, not
 * sockets), and its bound addresses are named here too, so the ready line
 * lists every endpoint in the order they were added (listener_uris).
 *
 * Access (NBD): with @loopback_only, a TCP endpoint is bound only if every
 * address its host resolves to is a loopback address. Unix sockets: a
 * socket file left by a dead daemon (connect() is refused) is replaced;
 * one where something still accepts is refused (-EADDRINUSE), and so is
 * any path that is not a socket. The socket file is removed at
 * listener_close() if it is still the one this listener created.
 *
 * Thread safety: every function runs on the accept loop's thread.
 */
#ifndef RDAXD_LISTENER_H
#define RDAXD_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

#include "conn.h"

#define LISTENER_ACCEPT_PAUSE 0.5
#define LISTENER_URI_MAX      160

/*
 * What an accepted socket becomes: a connection of @set owning @fd from
 * @peer ("ADDR:PORT" or a name) and holding *@slot (moved into it), which
 * when @refusal is not NULL only answers its first request with @refusal
 * and ends. Takes @fd and @slot in every case. Returns 0, or a negative
 * code (@fd closed, @slot given back).
 */
typedef int (*listener_start_fn)(void *arg, struct conn_set *set, int fd, const char *peer,
				 struct conn_slot *slot, const char *refusal);

struct listener;

struct listener_ep {
	struct listener *l;
	int fd; /* -1: a name only (an rdma_cm id), or closed */
	ev_io io;
	char uri[LISTENER_URI_MAX];  /* as bound: the real port for port 0 */
	const char *peer_prefix;     /* before the peer address in log records: "", "nbd:" */
	listener_start_fn start;     /* sockets: what an accepted one becomes */
	void (*on_ready)(void *arg); /* watched endpoints: readable */
	void *arg;
	bool is_unix;
	char *path; /* unix: the socket file, removed at close; else NULL */
	dev_t dev;  /* unix: the socket file we created */
	ino_t ino;
};

struct listener {
	struct ev_loop *loop; /* the accept loop */
	struct conn_sets *sets;
	struct conn_limit *limit; /* NULL: none (tests) */
	unsigned keepalive;	  /* seconds; 0: off */
	int spare_fd;		  /* given up to accept one connection at EMFILE; -1: none */
	struct listener_ep **eps;
	unsigned neps;
	ev_timer accept_pause;
	uint64_t accepted;
};

/* listener_new -- no endpoint yet; 0, -EINVAL, -ENOMEM */
int listener_new(struct ev_loop *accept_loop, struct conn_sets *sets, struct listener **out);

/*
 * listener_set_limits -- the connection limits every accepted socket is
 * held to (owned by the caller, outliving the listener) and the TCP
 * keepalive idle time in seconds (0: off)
 */
void listener_set_limits(struct listener *l, struct conn_limit *limit, unsigned keepalive);

/*
 * listener_add_tcp -- listen on every address @host resolves to, at @port
 * (0: a free port), as @scheme ("tcp", "nbd") whose sockets become
 * @start(@arg, ...). At least one address must bind; the others are
 * logged. With @loopback_only every address must be a loopback address
 * (-EACCES, @why_loopback names the reason in @err). @err gets one line on
 * failure. Returns 0, -EACCES, -EINVAL, -errno.
 */
int listener_add_tcp(struct listener *l, const char *scheme, const char *peer_prefix,
		     const char *host, uint16_t port, bool loopback_only, const char *why_loopback,
		     listener_start_fn start, void *arg, char *err, size_t errlen);

/*
 * listener_add_unix -- a unix socket at @path with file mode @mode, named
 * @scheme://PATH (see the top of this file for stale sockets). Returns 0,
 * -EADDRINUSE (live socket, or not a socket), -ENAMETOOLONG, -EINVAL, -errno.
 */
int listener_add_unix(struct listener *l, const char *scheme, const char *path, unsigned mode,
		      listener_start_fn start, void *arg, char *err, size_t errlen);

/*
 * listener_add_watch -- watch @fd (owned by the caller, non-blocking) and
 * run @on_ready(@arg) when it is readable, from listener_start() to
 * listener_close(). Returns 0 or -ENOMEM.
 */
int listener_add_watch(struct listener *l, int fd, void (*on_ready)(void *arg), void *arg);

/* listener_add_name -- an endpoint bound elsewhere (rdma_cm), for the ready line; 0, -ENOMEM */
int listener_add_name(struct listener *l, const char *uri);

/* listener_start -- start accepting on every endpoint */
void listener_start(struct listener *l);

/* listener_close -- stop accepting for good: close the sockets, remove our unix socket files */
void listener_close(struct listener *l);

/* listener_uris -- "URI, URI, ..." of every endpoint with a name, into @buf; bytes written */
size_t listener_uris(const struct listener *l, char *buf, size_t len);

/* listener_delete -- close and free; accepts NULL, sets *lp = NULL */
void listener_delete(struct listener **lp);

#endif
