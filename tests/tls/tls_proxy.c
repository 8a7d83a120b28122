/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls_proxy.c -- plaintext in, TLS to rdaxd out: every test suite over the TLS wire
 *
 *   tls_proxy --to 127.0.0.1:PORT --psk FILE [--nbd]
 *
 * Listens on a free loopback port (printed as "tls_proxy: ready on PORT")
 * and relays each connection to the daemon in TLS (PSK, the first user of
 * FILE). With --nbd it first does the plaintext part of NBD the protocol
 * wants before TLS: the greeting and the client's flags are passed on, then
 * the proxy sends NBD_OPT_STARTTLS itself and relays the rest inside TLS.
 *
 * The harness (RDAX_IT_TLS=psk, tests/integration/harness.h) puts it in
 * front of every daemon, so the bad-input suites and the power cuts send
 * their frames, garbage included, through rdaxd's TLS wire unchanged. The
 * TLS side uses the same client code as librdax (common/tls_client.c).
 *
 * Two threads per connection, one per direction (GnuTLS allows a send and
 * a receive on one session at once), so a client that does not read does
 * not stop the other direction, as with a direct connection. An end in one
 * direction is passed on as an end in that direction (close_notify, or
 * shutdown(SHUT_WR)); a failure ends both. The listening socket's buffers
 * are set before accept, so accepted sockets inherit the small receive buffer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tls_client.h"

#define RELAY_BUF (64U << 10)
/*
 * The socket buffers of the proxy's own hop are kept small: the backpressure
 * tests count what a client could send before rdaxd stopped reading, and a
 * second pair of full-size buffers (several MiB each) would hide it.
 */
static const int hop_buf = 64 << 10;

static struct tls_client *creds;
static struct sockaddr_in target;
static bool nbd_mode;

struct relay {
	int cfd, sfd;
	gnutls_session_t sess;
};

/* full_read -- exactly @len bytes from a blocking fd; 0 or -1 */
static int full_read(int fd, void *buf, size_t len)
{
	for (size_t got = 0; got < len;) {
		ssize_t n = read(fd, (uint8_t *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* full_write -- all of @buf to a blocking fd; 0 or -1 */
static int full_write(int fd, const void *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = send(fd, (const uint8_t *)buf + done, len - done, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static uint64_t get64be(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get32be(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * nbd_starttls -- the plaintext part of NBD: greeting to the client, its
 * flags to the daemon, then NBD_OPT_STARTTLS and its ACK. 0 or -1 (the
 * daemon refused or ended: the client's connection just closes).
 */
static int nbd_starttls(struct relay *r)
{
	uint8_t greet[18], flags[4];
	if (full_read(r->sfd, greet, sizeof(greet)) || full_write(r->cfd, greet, sizeof(greet)) ||
	    full_read(r->cfd, flags, sizeof(flags)) || full_write(r->sfd, flags, sizeof(flags)))
		return -1;
	static const uint8_t opt[16] = {'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T',
					0,   0,	  0,   5,   0,	 0,   0,   0};
	uint8_t rep[20];
	if (full_write(r->sfd, opt, sizeof(opt)) || full_read(r->sfd, rep, sizeof(rep)))
		return -1;
	if (get64be(rep) != 0x3e889045565a9ULL || get32be(rep + 8) != 5 || get32be(rep + 12) != 1 ||
	    get32be(rep + 16) != 0) {
		fprintf(stderr, "tls_proxy: NBD_OPT_STARTTLS not acknowledged\n");
		return -1;
	}
	return 0;
}

/* up -- client to daemon: plaintext in, records out; the client's end is a close_notify */
static void *up(void *arg)
{
	struct relay *r = arg;
	uint8_t *buf = malloc(RELAY_BUF);
	for (;;) {
		ssize_t n = buf ? read(r->cfd, buf, RELAY_BUF) : -1;
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			gnutls_bye(r->sess, GNUTLS_SHUT_WR);
			break;
		}
		if (n < 0)
			goto fail;
		for (ssize_t done = 0; done < n;) {
			ssize_t w = gnutls_record_send(r->sess, buf + done, (size_t)(n - done));
			if (w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED)
				continue;
			if (w < 0)
				goto fail;
			done += w;
		}
	}
	free(buf);
	return NULL;
fail:
	shutdown(r->cfd, SHUT_RDWR);
	shutdown(r->sfd, SHUT_RDWR);
	free(buf);
	return NULL;
}

/* down -- daemon to client: records in, plaintext out; the daemon's end is passed on */
static void down(struct relay *r)
{
	uint8_t *buf = malloc(RELAY_BUF);
	for (;;) {
		ssize_t n = buf ? gnutls_record_recv(r->sess, buf, RELAY_BUF) : -1;
		if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
			continue;
		if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
			shutdown(r->cfd, SHUT_WR);
			break;
		}
		if (n < 0 || full_write(r->cfd, buf, (size_t)n)) {
			shutdown(r->cfd, SHUT_RDWR);
			shutdown(r->sfd, SHUT_RDWR);
			break;
		}
	}
	free(buf);
}

/* serve -- one client connection, from connecting to the daemon until both directions ended */
static void *serve(void *arg)
{
	struct relay *r = arg;
	char err[512];
	r->sfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (r->sfd < 0 || connect(r->sfd, (struct sockaddr *)&target, sizeof(target)) < 0)
		goto out;
	int one = 1;
	setsockopt(r->sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(r->sfd, SOL_SOCKET, SO_SNDBUF, &hop_buf, sizeof(hop_buf));
	if (nbd_mode && nbd_starttls(r))
		goto out;
	/* the handshake wants a non-blocking socket; the relay blocks */
	int fl = fcntl(r->sfd, F_GETFL);
	fcntl(r->sfd, F_SETFL, fl | O_NONBLOCK);
	if (tls_client_handshake(creds, r->sfd, NULL, 30000, &r->sess, err, sizeof(err))) {
		fprintf(stderr, "tls_proxy: %s\n", err);
		goto out;
	}
	fcntl(r->sfd, F_SETFL, fl);
	pthread_t t;
	if (pthread_create(&t, NULL, up, r) == 0) {
		down(r);
		pthread_join(t, NULL);
	}
	gnutls_deinit(r->sess);
out:
	if (r->sfd >= 0)
		close(r->sfd);
	close(r->cfd);
	free(r);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *to = NULL, *psk = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--to") == 0 && i + 1 < argc)
			to = argv[++i];
		else if (strcmp(argv[i], "--psk") == 0 && i + 1 < argc)
			psk = argv[++i];
		else if (strcmp(argv[i], "--nbd") == 0)
			nbd_mode = true;
		else {
			fprintf(stderr,
				"usage: tls_proxy --to 127.0.0.1:PORT --psk FILE [--nbd]\n");
			return 2;
		}
	}
	const char *colon = to ? strrchr(to, ':') : NULL;
	if (!colon || !psk) {
		fprintf(stderr, "usage: tls_proxy --to 127.0.0.1:PORT --psk FILE [--nbd]\n");
		return 2;
	}
	char host[64];
	snprintf(host, sizeof(host), "%.*s", (int)(colon - to), to);
	target.sin_family = AF_INET;
	target.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &target.sin_addr) != 1) {
		fprintf(stderr, "tls_proxy: %s: not an IPv4 address\n", host);
		return 2;
	}
	char err[512] = "";
	struct tls_client_opts o = {.psk_file = psk};
	if (tls_client_new(&o, &creds, err, sizeof(err))) {
		fprintf(stderr, "tls_proxy: %s\n", err);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (lfd >= 0)
		setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &hop_buf, sizeof(hop_buf));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 128) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &al) < 0) {
		perror("tls_proxy: listen");
		return 1;
	}
	printf("tls_proxy: ready on %u\n", ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("tls_proxy: accept");
			return 1;
		}
		int one = 1;
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct relay *r = calloc(1, sizeof(*r));
		pthread_t t;
		if (!r) {
			close(cfd);
			continue;
		}
		r->cfd = cfd;
		r->sfd = -1;
		if (pthread_create(&t, NULL, serve, r) != 0) {
			close(cfd);
			free(r);
			continue;
		}
		pthread_detach(t);
	}
}
