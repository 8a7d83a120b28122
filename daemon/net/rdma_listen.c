/* SPDX-License-Identifier: BSD-3-Clause */
/* rdma_listen.c -- rdma_cm listeners on the accept loop, connections to workers round-robin */
#include "rdma_listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "log.h"
#include "rdma_proto.h"
#include "sock.h"

/* on_connect_request -- hand an rdax connection request to the next worker */
static void on_connect_request(struct server_rdma *s, struct rdma_cm_event *e)
{
	struct rdma_cm_id *id = e->id;
	char peer[64];
	sock_addr_string(rdma_get_peer_addr(id), peer, sizeof(peer));
	struct rdma_cm_data cd;
	int ret =
	    rdma_cm_data_decode(e->param.conn.private_data, e->param.conn.private_data_len, &cd);
	/* the event speaks from our side: its responder_resources are the client's wish */
	uint8_t initiator_depth = e->param.conn.responder_resources;
	char user[PSK_USER_MAX + 1] = "";
	int auth = 0;
	if (ret == 0 && s->auth) {
		/* before the event (and its private data) is given back, before any QP */
		auth = rdma_auth_verify(s->auth, e->param.conn.private_data,
					e->param.conn.private_data_len, (uint32_t)time(NULL), user,
					sizeof(user));
		if (auth == -ENOKEY && !s->auth_required)
			auth = 0;
	}
	rdma_ack_cm_event(e);
	if (auth) {
		LOG_WARN("rdma: connection request from %s refused: %s", peer,
			 auth == -ENOKEY     ? "not signed, and this daemon requires it"
			 : auth == -EACCES   ? "unknown user or wrong key"
			 : auth == -ETIME    ? "signed too long ago (or clocks apart)"
			 : auth == -EALREADY ? "a replay of an earlier request"
			 : auth == -EBUSY    ? "too many requests in the replay window"
					     : "cannot check its signature");
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		s->refused++;
		return;
	}
	if (ret) {
		LOG_WARN("rdma: connection request from %s refused: %s", peer,
			 ret == -EPROTONOSUPPORT ? "another version of the rdax RDMA protocol"
						 : "not an rdax client (private data)");
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		s->refused++;
		return;
	}
	struct conn_set *set = conn_sets_next(s->sets);
	if (conn_rdma_start(s->rws[set->index], id, &cd, initiator_depth, peer,
			    user[0] ? user : NULL) == 0)
		s->accepted++;
	else
		s->refused++;
}

void server_rdma_set_auth(struct server_rdma *s, struct rdma_auth_verifier *auth, bool required)
{
	rdma_auth_verifier_delete(&s->auth);
	s->auth = auth;
	s->auth_required = required;
}

/* on_cm_event -- the listeners' rdma_cm events (the listener saw the channel readable) */
static void on_cm_event(void *arg)
{
	struct server_rdma *s = arg;
	for (int i = 0; i < 64; i++) {
		struct rdma_cm_event *e;
		if (rdma_get_cm_event(s->ch, &e))
			break; /* EAGAIN: non-blocking */
		switch (e->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			on_connect_request(s, e);
			continue;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			LOG_ERROR("rdma: the device of a listener was removed; it accepts no more "
				  "connections");
			break;
		default:
			LOG_DEBUG("rdma: listener event %s (status %d)", rdma_event_str(e->event),
				  e->status);
			break;
		}
		rdma_ack_cm_event(e);
	}
}

/* on_async_event -- a device's asynchronous events: logged */
static void on_async_event(struct ev_loop *loop, ev_io *w, int revents)
{
	struct server_rdma_async *a = w->data;
	for (int i = 0; i < 64; i++) {
		struct ibv_async_event ae;
		if (ibv_get_async_event(a->dev->verbs, &ae))
			break;
		switch (ae.event_type) {
		case IBV_EVENT_QP_LAST_WQE_REACHED:
		case IBV_EVENT_COMM_EST:
		case IBV_EVENT_PORT_ACTIVE:
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			LOG_DEBUG("rdma: %s: %s", a->dev->name, ibv_event_type_str(ae.event_type));
			break;
		default:
			LOG_WARN("rdma: %s: asynchronous event: %s", a->dev->name,
				 ibv_event_type_str(ae.event_type));
			break;
		}
		ibv_ack_async_event(&ae);
	}
}

int server_rdma_new(struct listener *listener, struct conn_sets *sets,
		    const struct conn_rdma_shared *shared, struct store *store,
		    struct server_rdma **out)
{
	if (!listener || !sets || !shared || !store || !out)
		return -EINVAL;
	struct server_rdma *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	int ret = -ENOMEM;
	s->loop = listener->loop;
	s->listener = listener;
	s->store = store;
	s->sets = sets;
	s->rws = calloc(sets->nsets, sizeof(*s->rws));
	if (!s->rws)
		goto err_delete;
	s->ch = rdma_create_event_channel();
	if (!s->ch) {
		ret = errno ? -errno : -ENODEV;
		LOG_ERROR("rdma_create_event_channel failed: %s", strerror(-ret));
		goto err_delete;
	}
	ret = sock_set_nonblock(s->ch->fd);
	if (ret)
		goto err_delete;
	ret = listener_add_watch(listener, s->ch->fd, on_cm_event, s);
	if (ret)
		goto err_delete;
	for (unsigned i = 0; i < sets->nsets; i++) {
		ret = rdma_worker_new(sets->sets[i], shared, &s->rws[i]);
		if (ret)
			goto err_delete;
	}
	*out = s;
	return 0;

err_delete:
	server_rdma_delete(&s);
	return ret;
}

/* dev_add -- set up @verbs for the connection sets, once; 0 or -errno with @err */
static int dev_add(struct server_rdma *s, struct ibv_context *verbs, char *err, size_t errlen)
{
	for (struct rdma_dev *d = s->devs; d; d = d->next)
		if (d->verbs == verbs)
			return 0;
	if (s->nasyncs == sizeof(s->asyncs) / sizeof(s->asyncs[0])) {
		rdax_seterr(err, errlen, "rdma: more than %u devices",
			    (unsigned)(sizeof(s->asyncs) / sizeof(s->asyncs[0])));
		return -ENOSPC;
	}
	struct rdma_dev *dev;
	int ret = rdma_dev_new(verbs, s->store, &dev, err, errlen);
	if (ret)
		return ret;
	dev->next = s->devs;
	s->devs = dev;
	for (unsigned i = 0; i < s->sets->nsets; i++) {
		ret = rdma_worker_add_dev(s->rws[i], dev);
		if (ret) {
			rdax_seterr(err, errlen, "rdma: cannot serve device %s on worker %u: %s",
				    dev->name, i, strerror(-ret));
			return ret;
		}
	}
	struct server_rdma_async *a = calloc(1, sizeof(*a));
	if (!a) {
		rdax_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	a->dev = dev;
	s->asyncs[s->nasyncs++] = a;
	if (sock_set_nonblock(verbs->async_fd) == 0) {
		ev_io_init(&a->io, on_async_event, verbs->async_fd, EV_READ);
		a->io.data = a;
		ev_io_start(s->loop, &a->io);
	}
	return 0;
}

int server_rdma_listen(struct server_rdma *s, const char *host, uint16_t port, char *err,
		       size_t errlen)
{
	if (!s || !host)
		return -EINVAL;
	int ret = rdma_dev_check_namespaces(s->store, err, errlen);
	if (ret)
		return ret;

	char portstr[8];
	snprintf(portstr, sizeof(portstr), "%u", port);
	struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP};
	struct rdma_addrinfo *res;
	if (rdma_getaddrinfo(host, portstr, &hints, &res)) {
		ret = errno ? -errno : -EINVAL;
		rdax_seterr(err, errlen, "listen rdma://%s:%u: cannot resolve %s: %s", host, port,
			    host, strerror(-ret));
		return ret;
	}
	struct rdma_cm_id *id;
	if (rdma_create_id(s->ch, &id, s, RDMA_PS_TCP)) {
		ret = -errno;
		rdax_seterr(err, errlen, "listen rdma://%s:%u: rdma_create_id: %s", host, port,
			    strerror(errno));
		rdma_freeaddrinfo(res);
		return ret;
	}
	if (rdma_bind_addr(id, res->ai_src_addr)) {
		ret = -errno;
		rdax_seterr(err, errlen, "listen rdma://%s:%u: %s%s", host, port, strerror(errno),
			    errno == EADDRNOTAVAIL || errno == ENODEV
				? " (no RDMA device has this address: see `rdma link`)"
				: "");
		goto err_destroy;
	}
	if (rdma_listen(id, SERVER_RDMA_BACKLOG)) {
		ret = -errno;
		rdax_seterr(err, errlen, "listen rdma://%s:%u: %s", host, port, strerror(errno));
		goto err_destroy;
	}
	rdma_freeaddrinfo(res);
	res = NULL;

	if (id->verbs) {
		ret = dev_add(s, id->verbs, err, errlen);
	} else {
		int n = 0;
		if (!s->dev_list)
			s->dev_list = rdma_get_devices(&n);
		for (n = 0; s->dev_list && s->dev_list[n]; n++)
			;
		ret = 0;
		if (n == 0) {
			rdax_seterr(err, errlen, "listen rdma://%s:%u: no RDMA devices", host,
				    port);
			ret = -ENODEV;
		}
		for (int i = 0; i < n && ret == 0; i++)
			ret = dev_add(s, s->dev_list[i], err, errlen);
	}
	if (ret)
		goto err_destroy;

	struct server_rdma_listener *a =
	    realloc(s->listeners, (s->nlisteners + 1) * sizeof(*s->listeners));
	if (!a) {
		ret = -ENOMEM;
		rdax_seterr(err, errlen, "out of memory");
		goto err_destroy;
	}
	s->listeners = a;
	struct server_rdma_listener *l = &s->listeners[s->nlisteners++];
	l->id = id;
	char where[72];
	sock_addr_string(rdma_get_local_addr(id), where, sizeof(where));
	snprintf(l->uri, sizeof(l->uri), "rdma://%s", where);
	LOG_INFO("listening on %s", l->uri);
	if (listener_add_name(s->listener, l->uri)) {
		rdax_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;

err_destroy:
	if (res)
		rdma_freeaddrinfo(res);
	rdma_destroy_id(id);
	return ret;
}

/* listeners_close -- stop accepting for good */
static void listeners_close(struct server_rdma *s)
{
	for (unsigned i = 0; i < s->nlisteners; i++) {
		if (!s->listeners[i].id)
			continue;
		rdma_destroy_id(s->listeners[i].id);
		s->listeners[i].id = NULL;
	}
}

void server_rdma_close(struct server_rdma *s)
{
	listeners_close(s);
	LOG_INFO("rdma: listeners closed (%" PRIu64 " connections accepted, %" PRIu64 " refused)",
		 s->accepted, s->refused);
}

void server_rdma_ns_release(struct server_rdma *s)
{
	for (struct rdma_dev *d = s->devs; d; d = d->next)
		rdma_dev_ns_release(d);
}

int server_rdma_ns_register(struct server_rdma *s, char *err, size_t errlen)
{
	for (struct rdma_dev *d = s->devs; d; d = d->next) {
		int ret = rdma_dev_ns_register(d, s->store, err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

void server_rdma_delete(struct server_rdma **sp)
{
	if (!sp || !*sp)
		return;
	struct server_rdma *s = *sp;
	listeners_close(s);
	for (unsigned i = 0; s->rws && i < s->sets->nsets; i++)
		rdma_worker_delete(&s->rws[i]);
	free(s->rws);
	for (unsigned i = 0; i < s->nasyncs; i++) {
		ev_io_stop(s->loop, &s->asyncs[i]->io);
		free(s->asyncs[i]);
	}
	while (s->devs) {
		struct rdma_dev *d = s->devs;
		s->devs = d->next;
		rdma_dev_delete(&d);
	}
	if (s->dev_list)
		rdma_free_devices(s->dev_list);
	if (s->ch)
		rdma_destroy_event_channel(s->ch);
	free(s->listeners);
	rdma_auth_verifier_delete(&s->auth);
	free(s);
	*sp = NULL;
}
