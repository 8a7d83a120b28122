/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server_tcp.h -- TCP listeners: accept and spread connections over workers
 *
 * The listening sockets are watched by the accept loop (rdaxd's main
 * thread, which also handles the signals). Each accepted socket is made
 * non-blocking with TCP_NODELAY (replies are small and latency-bound) and
 * handed to the next worker, round-robin; from then on it lives on that
 * worker's loop only (conn_tcp.h).
 *
 * When accept() runs out of descriptors (EMFILE, ENFILE) the listeners
 * pause for SERVER_TCP_ACCEPT_PAUSE seconds instead of spinning on a
 * readable socket they cannot accept from.
 *
 * Thread safety: all functions run on the accept loop's thread;
 * server_tcp_shutdown() blocks it until every connection is closed.
 */
#ifndef RDAXD_SERVER_TCP_H
#define RDAXD_SERVER_TCP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "conn_tcp.h"
#include "worker.h"

#define SERVER_TCP_ACCEPT_PAUSE 0.5
#define SERVER_TCP_URI_MAX	80

struct server_tcp;

struct server_tcp_listener {
	struct server_tcp *srv;
	int fd;
	ev_io io;
	char uri[SERVER_TCP_URI_MAX]; /* tcp://ADDR:PORT as bound (the real port for port 0) */
};

struct server_tcp {
	struct ev_loop *loop; /* the accept loop */
	struct worker **workers;
	unsigned nworkers;
	struct conn_tcp_set **sets; /* one per worker */
	unsigned next;		    /* round-robin position */
	struct server_tcp_listener *listeners;
	unsigned nlisteners;
	ev_timer accept_pause;
	pthread_mutex_t lock; /* idle_sets, during the drain */
	pthread_cond_t cond;
	unsigned idle_sets;
	uint64_t accepted;
};

/*
 * server_tcp_new -- a server over @nworkers workers (not yet started: the
 * connection sets hook into them). Returns 0, -EINVAL, -ENOMEM.
 */
int server_tcp_new(struct ev_loop *accept_loop, struct worker **workers, unsigned nworkers,
		   const struct conn_tcp_shared *shared, struct server_tcp **out);

/*
 * server_tcp_listen -- bind and listen on every address @host resolves to,
 * at @port (0: a free port). At least one address must bind; the others
 * are logged. @err gets one line on failure. Returns 0 or -errno/-EINVAL.
 */
int server_tcp_listen(struct server_tcp *s, const char *host, uint16_t port, char *err,
		      size_t errlen);

/* server_tcp_start -- start accepting on every listener */
void server_tcp_start(struct server_tcp *s);

/*
 * server_tcp_shutdown -- close the listeners, drain every worker's
 * connections (conn_tcp_set_drain) and wait until all are closed.
 */
void server_tcp_shutdown(struct server_tcp *s);

/* server_tcp_delete -- close listeners and free (after shutdown); accepts NULL */
void server_tcp_delete(struct server_tcp **sp);

#endif
