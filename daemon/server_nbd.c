/* SPDX-License-Identifier: BSD-3-Clause */
/* server_nbd.c -- NBD listeners (TCP, unix), accept, hand connections to workers */
#include "server_nbd.h"

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
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "sock.h"

/* accept() calls per readable event */
#define SERVER_NBD_ACCEPT_BUDGET 64

/* is_loopback -- 127.0.0.0/8, ::1, or an IPv4-mapped 127.x address */
static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

/* on_set_idle -- a worker's NBD connections are all closed (worker thread) */
static void on_set_idle(struct conn_nbd_set *set, void *arg)
{
	struct server_nbd *s = arg;
	pthread_mutex_lock(&s->lock);
	s->idle_sets++;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* listeners_set -- start or stop every accept watcher */
static void listeners_set(struct server_nbd *s, bool on)
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
	struct server_nbd_listener *l = w->data;
	struct server_nbd *s = l->srv;
	for (int i = 0; i < SERVER_NBD_ACCEPT_BUDGET; i++) {
		struct sockaddr_storage ss;
		int fd = sock_accept(l->fd, &ss);
		if (fd == -EAGAIN)
			return;
		if (fd < 0) {
			if (sock_accept_exhausted(fd)) {
				LOG_WARN("accept on %s: %s; not accepting for %.1f s", l->uri,
					 strerror(-fd), SERVER_NBD_ACCEPT_PAUSE);
				listeners_set(s, false);
				ev_timer_set(&s->accept_pause, SERVER_NBD_ACCEPT_PAUSE, 0.);
				ev_timer_start(loop, &s->accept_pause);
				return;
			}
			LOG_ERROR("accept on %s failed: %s", l->uri, strerror(-fd));
			return;
		}
		char peer[64];
		if (ss.ss_family == AF_UNIX) {
			snprintf(peer, sizeof(peer), "nbd+unix#%" PRIu64, s->accepted + 1);
		} else {
			char a[56];
			sock_addr_string((struct sockaddr *)&ss, a, sizeof(a));
			snprintf(peer, sizeof(peer), "nbd:%s", a);
		}
		struct conn_nbd_set *set = s->sets[s->next];
		s->next = (s->next + 1) % s->nworkers;
		s->accepted++;
		conn_nbd_start(set, fd, peer);
	}
}

int server_nbd_new(struct ev_loop *accept_loop, struct worker **workers, unsigned nworkers,
		   const struct conn_nbd_shared *shared, struct server_nbd **out)
{
	if (!accept_loop || !workers || nworkers == 0 || !shared || !out)
		return -EINVAL;
	struct server_nbd *s = calloc(1, sizeof(*s));
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
	ev_timer_init(&s->accept_pause, on_accept_pause_end, SERVER_NBD_ACCEPT_PAUSE, 0.);
	s->accept_pause.data = s;
	for (unsigned i = 0; i < nworkers; i++) {
		int ret = conn_nbd_set_new(workers[i], shared, on_set_idle, s, &s->sets[i]);
		if (ret) {
			server_nbd_delete(&s);
			return ret;
		}
	}
	*out = s;
	return 0;
}

/* listener_add -- keep @fd as a listener; the entry, or NULL (out of memory: fd closed) */
static struct server_nbd_listener *listener_add(struct server_nbd *s, int fd)
{
	struct server_nbd_listener *a = realloc(s->listeners, (s->nlisteners + 1) * sizeof(*a));
	if (!a) {
		close(fd);
		return NULL;
	}
	s->listeners = a;
	struct server_nbd_listener *l = &s->listeners[s->nlisteners++];
	memset(l, 0, sizeof(*l));
	l->srv = s;
	l->fd = fd;
	/* the array may have moved: point every watcher at its entry again */
	for (unsigned i = 0; i < s->nlisteners; i++) {
		ev_io_init(&s->listeners[i].io, on_accept, s->listeners[i].fd, EV_READ);
		s->listeners[i].io.data = &s->listeners[i];
	}
	return l;
}

int server_nbd_listen_tcp(struct server_nbd *s, const char *host, uint16_t port, bool loopback_only,
			  char *err, size_t errlen)
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
		rdax_seterr(err, errlen, "listen nbd://%s:%u: cannot resolve %s: %s", host, port,
			    host, gai_strerror(gai));
		return -EINVAL;
	}
	if (loopback_only) {
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			if (is_loopback(ai->ai_addr))
				continue;
			char a[64];
			sock_addr_string(ai->ai_addr, a, sizeof(a));
			rdax_seterr(
			    err, errlen,
			    "listen nbd://%s:%u: NBD has no access token, and this daemon has "
			    "--token-file: an nbd:// listener must be bound to a loopback "
			    "address (127.0.0.1, [::1]), not %s; or use nbd+unix:///PATH "
			    "(guarded by file permissions); see docs/nbd.md",
			    host, port, a);
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
			LOG_WARN("listen on nbd://%s failed: %s", want, strerror(-fd));
			continue;
		}
		struct server_nbd_listener *l = listener_add(s, fd);
		if (!l) {
			last = -ENOMEM;
			break;
		}
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
			sock_addr_string((struct sockaddr *)&ss, want, sizeof(want));
		snprintf(l->uri, sizeof(l->uri), "nbd://%s", want);
		bound++;
		LOG_INFO("listening on %s", l->uri);
	}
	freeaddrinfo(res);
	if (bound == 0) {
		rdax_seterr(err, errlen, "listen nbd://%s:%u: %s", host, port,
			    last ? strerror(-last) : "no address");
		return last ? last : -EADDRNOTAVAIL;
	}
	return 0;
}

/*
 * unix_clear_stale -- make @path free for bind(): nothing there, or a socket
 * nobody accepts on (removed). 0, -EADDRINUSE (live, or not a socket), -errno.
 */
static int unix_clear_stale(const char *path, const struct sockaddr_un *sun, char *err,
			    size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT)
			return 0;
		rdax_seterr(err, errlen, "listen nbd+unix://%s: %s", path, strerror(e));
		return -e;
	}
	if (!S_ISSOCK(st.st_mode)) {
		rdax_seterr(err, errlen,
			    "listen nbd+unix://%s: the path exists and is not a socket", path);
		return -EADDRINUSE;
	}
	int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0) {
		int e = errno;
		rdax_seterr(err, errlen, "listen nbd+unix://%s: socket: %s", path, strerror(e));
		return -e;
	}
	int r = connect(probe, (const struct sockaddr *)sun, sizeof(*sun));
	int e = errno;
	close(probe);
	if (r == 0) {
		rdax_seterr(err, errlen,
			    "listen nbd+unix://%s: a live socket is there (another daemon?); not "
			    "replacing it",
			    path);
		return -EADDRINUSE;
	}
	if (e != ECONNREFUSED) {
		rdax_seterr(err, errlen,
			    "listen nbd+unix://%s: cannot tell whether it is stale: %s", path,
			    strerror(e));
		return -e;
	}
	LOG_INFO("nbd+unix://%s: replacing a stale socket (nothing accepts on it)", path);
	if (unlink(path) < 0 && errno != ENOENT) {
		e = errno;
		rdax_seterr(err, errlen, "listen nbd+unix://%s: remove the stale socket: %s", path,
			    strerror(e));
		return -e;
	}
	return 0;
}

int server_nbd_listen_unix(struct server_nbd *s, const char *path, unsigned mode, char *err,
			   size_t errlen)
{
	if (!s || !path || path[0] != '/' || mode > 0777)
		return -EINVAL;
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sun.sun_path)) {
		rdax_seterr(err, errlen, "listen nbd+unix://%s: path too long", path);
		return -ENAMETOOLONG;
	}
	strcpy(sun.sun_path, path);
	int ret = unix_clear_stale(path, &sun, err, errlen);
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
	struct server_nbd_listener *l = listener_add(s, fd);
	if (!l) {
		unlink(path);
		ret = -ENOMEM;
		goto err_msg;
	}
	l->path = strdup(path);
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	snprintf(l->uri, sizeof(l->uri), "nbd+unix://%s", path);
	LOG_INFO("listening on %s (mode %04o)", l->uri, mode);
	return 0;

err_close:
	close(fd);
err_msg:
	rdax_seterr(err, errlen, "listen nbd+unix://%s: %s", path, strerror(-ret));
	return ret;
}

void server_nbd_start(struct server_nbd *s)
{
	listeners_set(s, true);
}

/* listeners_close -- stop accepting for good; remove the unix socket files we made */
static void listeners_close(struct server_nbd *s)
{
	ev_timer_stop(s->loop, &s->accept_pause);
	for (unsigned i = 0; i < s->nlisteners; i++) {
		struct server_nbd_listener *l = &s->listeners[i];
		if (l->fd >= 0) {
			ev_io_stop(s->loop, &l->io);
			close(l->fd);
			l->fd = -1;
		}
		if (l->path) {
			struct stat st;
			/* only our own socket: a later daemon may have replaced a file we lost */
			if (lstat(l->path, &st) == 0 && st.st_dev == l->dev &&
			    st.st_ino == l->ino && unlink(l->path) < 0)
				LOG_WARN("remove %s: %s", l->path, strerror(errno));
			free(l->path);
			l->path = NULL;
		}
	}
}

void server_nbd_shutdown(struct server_nbd *s)
{
	listeners_close(s);
	LOG_INFO("draining NBD connections (%" PRIu64 " accepted in all)", s->accepted);
	for (unsigned i = 0; i < s->nworkers; i++)
		conn_nbd_set_drain(s->sets[i]);
	pthread_mutex_lock(&s->lock);
	while (s->idle_sets < s->nworkers)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
}

void server_nbd_delete(struct server_nbd **sp)
{
	if (!sp || !*sp)
		return;
	struct server_nbd *s = *sp;
	listeners_close(s);
	for (unsigned i = 0; i < s->nworkers; i++)
		conn_nbd_set_delete(&s->sets[i]);
	free(s->sets);
	free(s->listeners);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
	*sp = NULL;
}
