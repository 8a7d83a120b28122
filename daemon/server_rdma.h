/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server_rdma.h -- rdma:// listeners: accept RDMA connections, spread them over workers
 *
 * The listeners' rdma_cm ids share one event channel, watched by the accept
 * loop (rdaxd's main thread). A CONNECT_REQUEST whose private data is an
 * rdax one (rdma_proto.h) goes to the next worker round-robin: the new id is
 * migrated to that worker's own event channel and the worker sets up the
 * queue pair and accepts (conn_rdma.h). Anything else is rejected.
 *
 * Devices are set up when a listener binds (rdma_dev.h): the device of its
 * address, or every device for a wildcard address. Before that, the
 * namespaces are checked: one on an fsdax filesystem refuses the listener
 * with a message that recommends devdax -- rdaxd then does not start.
 *
 * Asynchronous device events (a QP or CQ error, a port change) are read on
 * the accept loop and logged.
 *
 * Thread safety: all functions run on the accept loop's thread;
 * server_rdma_shutdown() blocks it until every connection is closed.
 */
#ifndef RDAXD_SERVER_RDMA_H
#define RDAXD_SERVER_RDMA_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>
#include <rdma/rdma_cma.h>

#include "conn_rdma.h"
#include "rdma_dev.h"
#include "store.h"
#include "worker.h"

#define SERVER_RDMA_URI_MAX 96
#define SERVER_RDMA_BACKLOG 128

struct server_rdma_listener {
	struct rdma_cm_id *id;
	char uri[SERVER_RDMA_URI_MAX]; /* rdma://ADDR:PORT as bound (the real port for port 0) */
};

/* A device's asynchronous events, watched on the accept loop. */
struct server_rdma_async {
	struct rdma_dev *dev;
	ev_io io;
};

struct server_rdma {
	struct ev_loop *loop;
	struct store *store;
	struct worker **workers;
	unsigned nworkers;
	struct conn_rdma_set **sets; /* one per worker */
	unsigned next;		     /* round-robin position */
	struct rdma_event_channel *ch;
	ev_io io;
	struct server_rdma_listener *listeners;
	unsigned nlisteners;
	struct rdma_dev *devs;
	struct server_rdma_async *asyncs[16];
	unsigned nasyncs;
	struct ibv_context **dev_list; /* rdma_get_devices(), for wildcard listeners */
	pthread_mutex_t lock;	       /* idle_sets, during the drain */
	pthread_cond_t cond;
	unsigned idle_sets;
	uint64_t accepted, refused;
};

/*
 * server_rdma_new -- a server over @nworkers workers (not yet started: the
 * connection sets hook into them) serving @store. Returns 0, -EINVAL,
 * -ENOMEM, -errno (no rdma_cm event channel).
 */
int server_rdma_new(struct ev_loop *accept_loop, struct worker **workers, unsigned nworkers,
		    const struct conn_rdma_shared *shared, struct store *store,
		    struct server_rdma **out);

/*
 * server_rdma_listen -- check the namespaces, bind and listen on @host:@port
 * (port 0: a free one), and set up the devices it reaches. Before the
 * workers start. @err gets one line on failure. Returns 0 or a negative code.
 */
int server_rdma_listen(struct server_rdma *s, const char *host, uint16_t port, char *err,
		       size_t errlen);

/* server_rdma_start -- start accepting */
void server_rdma_start(struct server_rdma *s);

/*
 * server_rdma_shutdown -- destroy the listeners, drain every worker's
 * connections and wait until all are closed.
 */
void server_rdma_shutdown(struct server_rdma *s);

/*
 * server_rdma_delete -- free everything (after shutdown, with the workers
 * stopped and before the store is closed: the namespaces are deregistered
 * here). Accepts NULL.
 */
void server_rdma_delete(struct server_rdma **sp);

#endif
