/* SPDX-License-Identifier: BSD-3-Clause */
/* sock.c -- socket steps the listeners share */
#include "sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

void sock_addr_string(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "(family %d)", sa ? sa->sa_family : -1);
	}
}

int sock_listen(const struct addrinfo *ai)
{
	int fd =
	    socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		return -errno;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* one socket per address family: [::] must not also grab the IPv4 port */
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
		int ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

int sock_accept(int lfd, struct sockaddr_storage *ss)
{
	for (;;) {
		socklen_t sl = sizeof(*ss);
		int fd = accept4(lfd, (struct sockaddr *)ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		}
		int one = 1;
		if (ss->ss_family != AF_UNIX &&
		    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
			LOG_DEBUG("setsockopt(TCP_NODELAY) failed: %s", strerror(errno));
		return fd;
	}
}

int sock_set_keepalive(int fd, unsigned idle)
{
	if (idle == 0)
		return 0;
	int one = 1;
	int intvl = (int)(idle / SOCK_KEEPALIVE_PROBES) ? (int)(idle / SOCK_KEEPALIVE_PROBES) : 1;
	int cnt = SOCK_KEEPALIVE_PROBES;
	int first = (int)idle;
	/* unacknowledged data (replies a vanished peer never took) gives up as late */
	unsigned user_ms = (idle + (unsigned)intvl * SOCK_KEEPALIVE_PROBES) * 1000U;
	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &first, sizeof(first)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms)) < 0)
		return -errno;
	return 0;
}

int sock_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

bool sock_accept_exhausted(int ret)
{
	return ret == -EMFILE || ret == -ENFILE || ret == -ENOBUFS || ret == -ENOMEM;
}

bool sock_addr_is_loopback(const struct sockaddr *sa)
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

bool sock_peer_is_local(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return false;
	return ss.ss_family == AF_UNIX || sock_addr_is_loopback((struct sockaddr *)&ss);
}
