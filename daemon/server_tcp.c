/* SPDX-License-Identifier: BSD-3-Clause */
/* server_tcp.c -- listen, accept, hand connections to workers round-robin */
#include "server_tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "sock.h"

/* accept() calls per readable event */
#define SERVER_ACCEPT_BUDGET 64

/* on_set_idle -- a worker's connections are all closed (worker thread) */
static void on_set_idle(struct conn_tcp_set *set, void *arg)
{
	struct server_tcp *s = arg;
	pthread_mutex_lock(&s->lock);
	s->idle_sets++;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* listeners_set -- start or stop every accept watcher */
static void listeners_set(struct server_tcp *s, bool on)
{
	for (unsigned i = 0; i < s->nlisteners; i++) {
		if (s->listeners[i].fd < 0)
			continue;
		if (on)
			ev_io_start(s->loop, &s->listeners[i].io);
		else
			ev_io_stop(s->loop, &s->listeners[i].io);
	}
}

/* on_accept_pause_end -- try accepting again after running out of descriptors */
static void on_accept_pause_end(struct ev_loop *loop, ev_timer *t, int revents)
{
	listeners_set(t->data, true);
}

/* on_accept -- a listener is readable: accept what is waiting */
static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct server_tcp_listener *l = w->data;
	struct server_tcp *s = l->srv;
	for (int i = 0; i < SERVER_ACCEPT_BUDGET; i++) {
		struct sockaddr_storage ss;
		int fd = sock_accept(l->fd, &ss);
		if (fd == -EAGAIN)
			return;
		if (fd < 0) {
			if (sock_accept_exhausted(fd)) {
				LOG_WARN("accept on %s: %s; not accepting for %.1f s", l->uri,
					 strerror(-fd), SERVER_TCP_ACCEPT_PAUSE);
				listeners_set(s, false);
				ev_timer_set(&s->accept_pause, SERVER_TCP_ACCEPT_PAUSE, 0.);
				ev_timer_start(loop, &s->accept_pause);
				return;
			}
			LOG_ERROR("accept on %s failed: %s", l->uri, strerror(-fd));
			return;
		}
		char peer[64];
		sock_addr_string((struct sockaddr *)&ss, peer, sizeof(peer));
		struct conn_tcp_set *set = s->sets[s->next];
		s->next = (s->next + 1) % s->nworkers;
		s->accepted++;
		conn_tcp_start(set, fd, peer);
	}
}

int server_tcp_new(struct ev_loop *accept_loop, struct worker **workers, unsigned nworkers,
		   const struct conn_tcp_shared *shared, struct server_tcp **out)
{
	if (!accept_loop || !workers || nworkers == 0 || !shared || !out)
		return -EINVAL;
	struct server_tcp *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->sets = calloc(nworkers, sizeof(*s->sets));
	if (!s->sets) {
		free(s);
		return -ENOMEM;
	}
	s->loop = accept_loop;
	s->workers = workers;
	s->nworkers = nworkers;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	ev_timer_init(&s->accept_pause, on_accept_pause_end, SERVER_TCP_ACCEPT_PAUSE, 0.);
	s->accept_pause.data = s;
	for (unsigned i = 0; i < nworkers; i++) {
		int ret = conn_tcp_set_new(workers[i], shared, on_set_idle, s, &s->sets[i]);
		if (ret) {
			server_tcp_delete(&s);
			return ret;
		}
	}
	*out = s;
	return 0;
}

int server_tcp_listen(struct server_tcp *s, const char *host, uint16_t port, char *err,
		      size_t errlen)
{
	if (!s || !host)
		return -EINVAL;
	char portstr[8];
	snprintf(portstr, sizeof(portstr), "%u", port);
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC,
	    .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res;
	int gai = getaddrinfo(host, portstr, &hints, &res);
	if (gai) {
		rdax_seterr(err, errlen, "listen tcp://%s:%u: cannot resolve %s: %s", host, port,
			    host, gai_strerror(gai));
		return -EINVAL;
	}
	int bound = 0, last = 0;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		char want[64];
		sock_addr_string(ai->ai_addr, want, sizeof(want));
		int fd = sock_listen(ai);
		if (fd < 0) {
			last = fd;
			LOG_WARN("listen on tcp://%s failed: %s", want, strerror(-fd));
			continue;
		}
		struct server_tcp_listener *a =
		    realloc(s->listeners, (s->nlisteners + 1) * sizeof(*a));
		if (!a) {
			close(fd);
			last = -ENOMEM;
			break;
		}
		s->listeners = a;
		struct server_tcp_listener *l = &s->listeners[s->nlisteners++];
		memset(l, 0, sizeof(*l));
		l->srv = s;
		l->fd = fd;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
			sock_addr_string((struct sockaddr *)&ss, want, sizeof(want));
		snprintf(l->uri, sizeof(l->uri), "tcp://%s", want);
		bound++;
		LOG_INFO("listening on %s", l->uri);
	}
	freeaddrinfo(res);
	/* the listeners array may have moved: point the watchers at their entries again */
	for (unsigned i = 0; i < s->nlisteners; i++) {
		ev_io_init(&s->listeners[i].io, on_accept, s->listeners[i].fd, EV_READ);
		s->listeners[i].io.data = &s->listeners[i];
	}
	if (bound == 0) {
		rdax_seterr(err, errlen, "listen tcp://%s:%u: %s", host, port,
			    last ? strerror(-last) : "no address");
		return last ? last : -EADDRNOTAVAIL;
	}
	return 0;
}

void server_tcp_start(struct server_tcp *s)
{
	listeners_set(s, true);
}

/* listeners_close -- stop accepting for good */
static void listeners_close(struct server_tcp *s)
{
	ev_timer_stop(s->loop, &s->accept_pause);
	for (unsigned i = 0; i < s->nlisteners; i++) {
		if (s->listeners[i].fd < 0)
			continue;
		ev_io_stop(s->loop, &s->listeners[i].io);
		close(s->listeners[i].fd);
		s->listeners[i].fd = -1;
	}
}

void server_tcp_shutdown(struct server_tcp *s)
{
	listeners_close(s);
	LOG_INFO("draining connections (%" PRIu64 " accepted in all)", s->accepted);
	for (unsigned i = 0; i < s->nworkers; i++)
		conn_tcp_set_drain(s->sets[i]);
	pthread_mutex_lock(&s->lock);
	while (s->idle_sets < s->nworkers)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
}

void server_tcp_delete(struct server_tcp **sp)
{
	if (!sp || !*sp)
		return;
	struct server_tcp *s = *sp;
	listeners_close(s);
	for (unsigned i = 0; i < s->nworkers; i++)
		conn_tcp_set_delete(&s->sets[i]);
	free(s->sets);
	free(s->listeners);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
	*sp = NULL;
}
