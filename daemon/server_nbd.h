/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server_nbd.h -- NBD listeners: TCP and unix sockets, accept, hand over
 *
 * Like server_tcp.h, but for NBD (conn_nbd.h): the listening sockets are
 * watched by the accept loop (rdaxd's main thread); each accepted socket is
 * made non-blocking (TCP_NODELAY on TCP, as the protocol document asks) and
 * handed round-robin to a worker, whose loop alone serves it from then on.
 *
 * Access: NBD has no token. A daemon with a token (--token-file) only
 * binds nbd:// listeners whose every address is a loopback address, so
 * only local users reach the export; a unix socket is guarded by its file
 * mode (0600 unless the listen address says otherwise), and owner.
 *
 * Unix sockets: a socket file left by a dead daemon (connect() is refused)
 * is replaced; one where something still accepts is refused (-EADDRINUSE),
 * and so is any path that is not a socket. The socket file is removed at
 * shutdown if it is still the one this daemon created.
 *
 * Thread safety: all functions run on the accept loop's thread;
 * server_nbd_shutdown() blocks it until every NBD connection is closed.
 */
#ifndef RDAXD_SERVER_NBD_H
#define RDAXD_SERVER_NBD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

#include "conn_nbd.h"
#include "worker.h"

#define SERVER_NBD_ACCEPT_PAUSE 0.5
#define SERVER_NBD_URI_MAX	160

struct server_nbd;

struct server_nbd_listener {
	struct server_nbd *srv;
	int fd;
	ev_io io;
	char uri[SERVER_NBD_URI_MAX]; /* nbd://ADDR:PORT as bound, or nbd+unix:///PATH */
	char *path;		      /* unix: the socket file, removed at shutdown; else NULL */
	dev_t dev;		      /* unix: the socket file we created */
	ino_t ino;
};

struct server_nbd {
	struct ev_loop *loop; /* the accept loop */
	struct worker **workers;
	unsigned nworkers;
	struct conn_nbd_set **sets; /* one per worker */
	unsigned next;		    /* round-robin position */
	struct server_nbd_listener *listeners;
	unsigned nlisteners;
	ev_timer accept_pause;
	pthread_mutex_t lock; /* idle_sets, during the drain */
	pthread_cond_t cond;
	unsigned idle_sets;
	uint64_t accepted;
};

/*
 * server_nbd_new -- an NBD server over @nworkers workers (not yet started:
 * the connection sets hook into them). Returns 0, -EINVAL, -ENOMEM, -ENOSPC.
 */
int server_nbd_new(struct ev_loop *accept_loop, struct worker **workers, unsigned nworkers,
		   const struct conn_nbd_shared *shared, struct server_nbd **out);

/*
 * server_nbd_listen_tcp -- bind and listen on every address @host resolves
 * to, at @port (0: a free port). With @loopback_only, every address must be
 * a loopback address or nothing is bound. @err gets one line on failure.
 * Returns 0, -EACCES (not loopback), -errno, -EINVAL.
 */
int server_nbd_listen_tcp(struct server_nbd *s, const char *host, uint16_t port, bool loopback_only,
			  char *err, size_t errlen);

/*
 * server_nbd_listen_unix -- a unix socket at @path with file mode @mode
 * (see the top of this file for stale sockets). Returns 0, -EADDRINUSE
 * (live socket, or not a socket), -ENAMETOOLONG, -errno.
 */
int server_nbd_listen_unix(struct server_nbd *s, const char *path, unsigned mode, char *err,
			   size_t errlen);

/* server_nbd_start -- start accepting on every listener */
void server_nbd_start(struct server_nbd *s);

/*
 * server_nbd_shutdown -- close the listeners (removing unix socket files),
 * drain every worker's NBD connections and wait until all are closed.
 */
void server_nbd_shutdown(struct server_nbd *s);

/* server_nbd_delete -- close listeners and free (after shutdown); accepts NULL */
void server_nbd_delete(struct server_nbd **sp);

#endif
