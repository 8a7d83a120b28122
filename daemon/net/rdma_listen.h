/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_listen.h -- rdma:// listeners: accept RDMA connections, spread them over workers
 *
 * The listeners' rdma_cm ids share one event channel, watched by the accept
 * loop (rdaxd's main thread) as an endpoint of the daemon's listener
 * (listener.h), which also names every bound address for the ready line.
 * A CONNECT_REQUEST whose private data is an rdax one (rdma_proto.h) goes to
 * the next worker round-robin (conn_sets_next, shared with every other
 * transport): the new id is migrated to that worker's own event channel and
 * the worker sets up the queue pair and accepts (rdma_conn.h). Anything
 * else is rejected. The drain is the connection sets' (conn.h): all
 * transports at once.
 *
 * Devices are set up when a listener binds (rdma_dev.h): the device of its
 * address, or every device for a wildcard address. Before that, the
 * namespaces are checked: one on an fsdax filesystem refuses the listener
 * with a message that recommends devdax -- rdaxd then does not start.
 *
 * Asynchronous device events (a QP or CQ error, a port change) are read on
 * the accept loop and logged.
 *
 * Thread safety: all functions run on the accept loop's thread.
 */
#ifndef RDAXD_RDMA_LISTEN_H
#define RDAXD_RDMA_LISTEN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>
#include <rdma/rdma_cma.h>

#include "conn.h"
#include "listener.h"
#include "rdma_auth.h"
#include "rdma_conn.h"
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
	struct listener *listener; /* watches ch, names the listeners */
	struct conn_sets *sets;
	struct rdma_worker **rws; /* one per connection set */
	struct rdma_event_channel *ch;
	struct server_rdma_listener *listeners;
	unsigned nlisteners;
	struct rdma_dev *devs;
	struct server_rdma_async *asyncs[16];
	unsigned nasyncs;
	struct ibv_context **dev_list; /* rdma_get_devices(), for wildcard listeners */
	uint64_t accepted, refused;
	struct rdma_auth_verifier *auth; /* NULL: requests are not authenticated */
	bool auth_required;		 /* a request without an auth block is refused */
};

/*
 * server_rdma_set_auth -- connection requests are checked with @auth
 * (rdma_auth.h; the server owns it from now on) before any queue pair is
 * made for them; with @required, a request without an auth block is
 * refused too. Context: before the accept loop runs.
 */
void server_rdma_set_auth(struct server_rdma *s, struct rdma_auth_verifier *auth, bool required);

/*
 * server_rdma_new -- a server over the connection sets @sets (workers not
 * yet started) serving @store, its event channel watched by @listener.
 * Returns 0, -EINVAL, -ENOMEM, -errno (no rdma_cm event channel).
 */
int server_rdma_new(struct listener *listener, struct conn_sets *sets,
		    const struct conn_rdma_shared *shared, struct store *store,
		    struct server_rdma **out);

/*
 * server_rdma_listen -- check the namespaces, bind and listen on @host:@port
 * (port 0: a free one), and set up the devices it reaches. Before the
 * workers start. @err gets one line on failure. Returns 0 or a negative code.
 */
int server_rdma_listen(struct server_rdma *s, const char *host, uint16_t port, char *err,
		       size_t errlen);

/* server_rdma_close -- destroy the listeners (after listener_close: accept nothing more) */
void server_rdma_close(struct server_rdma *s);

/*
 * server_rdma_ns_release -- deregister the namespaces on every device (the
 * power cut, powercut.h: no connection may exist; their memory windows
 * were revoked when they ended)
 */
void server_rdma_ns_release(struct server_rdma *s);

/*
 * server_rdma_ns_register -- register the namespaces again on every device
 * (after the power cut mapped them afresh). Returns 0, or -errno with @err.
 */
int server_rdma_ns_register(struct server_rdma *s, char *err, size_t errlen);

/*
 * server_rdma_delete -- free everything (after shutdown, with the workers
 * stopped and before the store is closed: the namespaces are deregistered
 * here). Accepts NULL.
 */
void server_rdma_delete(struct server_rdma **sp);

#endif
