/* SPDX-License-Identifier: BSD-3-Clause */
/* listener.c -- listening endpoints on the accept loop: accept, pause, hand over, name */
#include "listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "sock.h"

/* accept() calls per readable event */
#define LISTENER_ACCEPT_BUDGET 64

/* eps_set -- start or stop every watcher */
static void eps_set(struct listener *l, bool on)
{
	for (unsigned i = 0; i < l->neps; i++) {
		struct listener_ep *ep = l->eps[i];
		if (ep->fd < 0)
			continue;
		if (on)
			ev_io_start(l->loop, &ep->io);
		else
			ev_io_stop(l->loop, &ep->io);
	}
}

/* on_accept_pause_end -- try accepting again after running out of descriptors */
static void on_accept_pause_end(struct ev_loop *loop, ev_timer *t, int revents)
{
	eps_set(t->data, true);
}

/* accept_pause -- out of descriptors or memory: stop the socket endpoints for a while */
static void accept_pause(struct listener *l)
{
	for (unsigned i = 0; i < l->neps; i++)
		if (l->eps[i]->fd >= 0 && l->eps[i]->start)
			ev_io_stop(l->loop, &l->eps[i]->io);
	ev_timer_set(&l->accept_pause, LISTENER_ACCEPT_PAUSE, 0.);
	ev_timer_start(l->loop, &l->accept_pause);
}

/* spare_take -- the spare descriptor for the next EMFILE (best effort) */
static void spare_take(struct listener *l)
{
	if (l->spare_fd < 0)
		l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/*
 * out_of_descriptors -- accept() said EMFILE or ENFILE: give up the spare,
 * accept one waiting connection and close it at once (its client learns at
 * least that much), take the spare back
 */
static void out_of_descriptors(struct listener *l, struct listener_ep *ep)
{
	if (l->spare_fd < 0)
		return;
	close(l->spare_fd);
	l->spare_fd = -1;
	struct sockaddr_storage ss;
	int fd = sock_accept(ep->fd, &ss);
	if (fd >= 0) {
		char a[56] = "?";
		if (ss.ss_family != AF_UNIX)
			sock_addr_string((struct sockaddr *)&ss, a, sizeof(a));
		LOG_PEER(LOG_LEVEL_WARN, a, "accept on %s: out of descriptors; closed %s at once",
			 ep->uri, a);
		close(fd);
	}
	spare_take(l);
}

/* on_ready -- an endpoint is readable: accept what is waiting, or let its owner handle it */
static void on_ready(struct ev_loop *loop, ev_io *w, int revents)
{
	struct listener_ep *ep = w->data;
	struct listener *l = ep->l;
	if (ep->on_ready) {
		ep->on_ready(ep->arg);
		return;
	}
	for (int i = 0; i < LISTENER_ACCEPT_BUDGET; i++) {
		struct sockaddr_storage ss;
		int fd = sock_accept(ep->fd, &ss);
		if (fd == -EAGAIN)
			return;
		if (fd < 0) {
			if (sock_accept_exhausted(fd)) {
				LOG_WARN("accept on %s: %s; not accepting for %.1f s", ep->uri,
					 strerror(-fd), LISTENER_ACCEPT_PAUSE);
				if (fd == -EMFILE || fd == -ENFILE)
					out_of_descriptors(l, ep);
				accept_pause(l);
				return;
			}
			LOG_ERROR("accept on %s failed: %s", ep->uri, strerror(-fd));
			return;
		}
		char peer[64];
		if (ss.ss_family == AF_UNIX) {
			/* no address: the scheme and a number */
			snprintf(peer, sizeof(peer), "%.*s#%" PRIu64,
				 (int)(strchr(ep->uri, ':') - ep->uri), ep->uri, l->accepted + 1);
		} else {
			char a[56];
			sock_addr_string((struct sockaddr *)&ss, a, sizeof(a));
			snprintf(peer, sizeof(peer), "%s%s", ep->peer_prefix, a);
		}
		l->accepted++;
		if (ss.ss_family != AF_UNIX && sock_set_keepalive(fd, l->keepalive))
			LOG_DEBUG("%s: keepalive not set: %s", peer, strerror(errno));
		struct conn_slot slot = {0};
		char why[200];
		const char *refusal = NULL;
		if (l->limit &&
		    conn_limit_take(l->limit, (struct sockaddr *)&ss, &slot, why, sizeof(why))) {
			LOG_PEER(LOG_LEVEL_INFO, peer, "%s: refused: %s%s", peer, why,
				 slot.cl ? "" : " (closed at once: too many refusals under way)");
			if (!slot.cl) {
				close(fd);
				continue;
			}
			refusal = why;
		}
		ep->start(ep->arg, conn_sets_next(l->sets), fd, peer, &slot, refusal);
	}
}

int listener_new(struct ev_loop *accept_loop, struct conn_sets *sets, struct listener **out)
{
	if (!accept_loop || !sets || !out)
		return -EINVAL;
	struct listener *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->loop = accept_loop;
	l->sets = sets;
	l->spare_fd = -1;
	spare_take(l);
	ev_timer_init(&l->accept_pause, on_accept_pause_end, LISTENER_ACCEPT_PAUSE, 0.);
	l->accept_pause.data = l;
	*out = l;
	return 0;
}

/* ep_add -- a new endpoint watching @fd (may be -1); NULL if out of memory (fd not closed) */
static struct listener_ep *ep_add(struct listener *l, int fd)
{
	struct listener_ep **a = realloc(l->eps, (l->neps + 1) * sizeof(*a));
	if (!a)
		return NULL;
	l->eps = a;
	struct listener_ep *ep = calloc(1, sizeof(*ep));
	if (!ep)
		return NULL;
	ep->l = l;
	ep->fd = fd;
	ep->peer_prefix = "";
	if (fd >= 0) {
		ev_io_init(&ep->io, on_ready, fd, EV_READ);
		ep->io.data = ep;
	}
	l->eps[l->neps++] = ep;
	return ep;
}

int listener_add_tcp(struct listener *l, const char *scheme, const char *peer_prefix,
		     const char *host, uint16_t port, bool loopback_only, const char *why_loopback,
		     listener_start_fn start, void *arg, char *err, size_t errlen)
{
	if (!l || !scheme || !host || !start)
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
		rdax_seterr(err, errlen, "listen %s://%s:%u: cannot resolve %s: %s", scheme, host,
			    port, host, gai_strerror(gai));
		return -EINVAL;
	}
	if (loopback_only) {
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			if (sock_addr_is_loopback(ai->ai_addr))
				continue;
			char a[64];
			sock_addr_string(ai->ai_addr, a, sizeof(a));
			rdax_seterr(err, errlen,
				    "listen %s://%s:%u: %s (127.0.0.1, [::1]), not %s%s", scheme,
				    host, port, "must be bound to a loopback address", a,
				    why_loopback ? why_loopback : "");
			freeaddrinfo(res);
			return -EACCES;
		}
	}
	int bound = 0, last = 0;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		char want[64];
		sock_addr_string(ai->ai_addr, want, sizeof(want));
		int fd = sock_listen(ai);
		if (fd < 0) {
			last = fd;
			LOG_WARN("listen on %s://%s failed: %s", scheme, want, strerror(-fd));
			continue;
		}
		struct listener_ep *ep = ep_add(l, fd);
		if (!ep) {
			close(fd);
			last = -ENOMEM;
			break;
		}
		ep->start = start;
		ep->arg = arg;
		ep->peer_prefix = peer_prefix ? peer_prefix : "";
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
			sock_addr_string((struct sockaddr *)&ss, want, sizeof(want));
		snprintf(ep->uri, sizeof(ep->uri), "%s://%s", scheme, want);
		bound++;
		LOG_INFO("listening on %s", ep->uri);
	}
	freeaddrinfo(res);
	if (bound == 0) {
		rdax_seterr(err, errlen, "listen %s://%s:%u: %s", scheme, host, port,
			    last ? strerror(-last) : "no address");
		return last ? last : -EADDRNOTAVAIL;
	}
	return 0;
}

/*
 * unix_clear_stale -- make @path free for bind(): nothing there, or a socket
 * nobody accepts on (removed). 0, -EADDRINUSE (live, or not a socket), -errno.
 */
static int unix_clear_stale(const char *scheme, const char *path, const struct sockaddr_un *sun,
			    char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT)
			return 0;
		rdax_seterr(err, errlen, "listen %s://%s: %s", scheme, path, strerror(e));
		return -e;
	}
	if (!S_ISSOCK(st.st_mode)) {
		rdax_seterr(err, errlen, "listen %s://%s: the path exists and is not a socket",
			    scheme, path);
		return -EADDRINUSE;
	}
	int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0) {
		int e = errno;
		rdax_seterr(err, errlen, "listen %s://%s: socket: %s", scheme, path, strerror(e));
		return -e;
	}
	int r = connect(probe, (const struct sockaddr *)sun, sizeof(*sun));
	int e = errno;
	close(probe);
	if (r == 0) {
		rdax_seterr(err, errlen,
			    "listen %s://%s: a live socket is there (another daemon?); not "
			    "replacing it",
			    scheme, path);
		return -EADDRINUSE;
	}
	if (e != ECONNREFUSED) {
		rdax_seterr(err, errlen, "listen %s://%s: cannot tell whether it is stale: %s",
			    scheme, path, strerror(e));
		return -e;
	}
	LOG_INFO("%s://%s: replacing a stale socket (nothing accepts on it)", scheme, path);
	if (unlink(path) < 0 && errno != ENOENT) {
		e = errno;
		rdax_seterr(err, errlen, "listen %s://%s: remove the stale socket: %s", scheme,
			    path, strerror(e));
		return -e;
	}
	return 0;
}

int listener_add_unix(struct listener *l, const char *scheme, const char *path, unsigned mode,
		      listener_start_fn start, void *arg, char *err, size_t errlen)
{
	if (!l || !scheme || !path || path[0] != '/' || mode > 0777 || !start)
		return -EINVAL;
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sun.sun_path)) {
		rdax_seterr(err, errlen, "listen %s://%s: path too long", scheme, path);
		return -ENAMETOOLONG;
	}
	strcpy(sun.sun_path, path);
	int ret = unix_clear_stale(scheme, path, &sun, err, errlen);
	if (ret)
		return ret;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		goto err_msg;
	}
	/* no window in which the socket is more open than asked: umask during bind */
	mode_t old = umask(0777 & ~(mode_t)mode);
	int r = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	int e = errno;
	umask(old);
	if (r < 0) {
		ret = -e;
		goto err_close;
	}
	struct stat st;
	if (chmod(path, (mode_t)mode) < 0 || stat(path, &st) < 0 || listen(fd, SOMAXCONN) < 0) {
		ret = -errno;
		unlink(path);
		goto err_close;
	}
	struct listener_ep *ep = ep_add(l, fd);
	if (!ep) {
		unlink(path);
		ret = -ENOMEM;
		goto err_close;
	}
	ep->start = start;
	ep->arg = arg;
	ep->is_unix = true;
	ep->path = strdup(path);
	ep->dev = st.st_dev;
	ep->ino = st.st_ino;
	snprintf(ep->uri, sizeof(ep->uri), "%s://%s", scheme, path);
	LOG_INFO("listening on %s (mode %04o)", ep->uri, mode);
	return 0;

err_close:
	close(fd);
err_msg:
	rdax_seterr(err, errlen, "listen %s://%s: %s", scheme, path, strerror(-ret));
	return ret;
}

int listener_add_watch(struct listener *l, int fd, void (*ready)(void *arg), void *arg)
{
	struct listener_ep *ep = ep_add(l, fd);
	if (!ep)
		return -ENOMEM;
	ep->on_ready = ready;
	ep->arg = arg;
	return 0;
}

int listener_add_name(struct listener *l, const char *uri)
{
	struct listener_ep *ep = ep_add(l, -1);
	if (!ep)
		return -ENOMEM;
	snprintf(ep->uri, sizeof(ep->uri), "%s", uri);
	return 0;
}

void listener_start(struct listener *l)
{
	eps_set(l, true);
}

void listener_close(struct listener *l)
{
	ev_timer_stop(l->loop, &l->accept_pause);
	for (unsigned i = 0; i < l->neps; i++) {
		struct listener_ep *ep = l->eps[i];
		if (ep->fd >= 0) {
			ev_io_stop(l->loop, &ep->io);
			if (!ep->on_ready) /* a watched descriptor belongs to its owner */
				close(ep->fd);
			ep->fd = -1;
		}
		if (ep->path) {
			struct stat st;
			/* only our own socket: a later daemon may have replaced a file we lost */
			if (lstat(ep->path, &st) == 0 && st.st_dev == ep->dev &&
			    st.st_ino == ep->ino && unlink(ep->path) < 0)
				LOG_WARN("remove %s: %s", ep->path, strerror(errno));
			free(ep->path);
			ep->path = NULL;
		}
	}
}

void listener_set_limits(struct listener *l, struct conn_limit *limit, unsigned keepalive)
{
	l->limit = limit;
	l->keepalive = keepalive;
}

size_t listener_uris(const struct listener *l, char *buf, size_t len)
{
	size_t n = 0;
	if (len)
		buf[0] = '\0';
	for (unsigned i = 0; i < l->neps && n < len; i++) {
		if (!l->eps[i]->uri[0])
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", l->eps[i]->uri);
	}
	return n < len ? n : len;
}

void listener_delete(struct listener **lp)
{
	if (!lp || !*lp)
		return;
	struct listener *l = *lp;
	listener_close(l);
	if (l->spare_fd >= 0)
		close(l->spare_fd);
	for (unsigned i = 0; i < l->neps; i++)
		free(l->eps[i]);
	free(l->eps);
	free(l);
	*lp = NULL;
}
