/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmp_floor.c -- the TCP floors of the comparison: what loopback itself costs
 *
 *   cmp_floor pingpong [--size BYTES] [--reply BYTES] [--seconds S] [--client-cpu C]
 *                      [--server-cpu D]
 *   cmp_floor pipeline [--size BYTES] [--depth N] [--seconds S] [--client-cpu C] [--server-cpu D]
 *
 * A server process (forked, pinned to the server CPU) and this process
 * (pinned to the client CPU) talk over 127.0.0.1 with TCP_NODELAY, like the
 * block servers being compared:
 *  - pingpong: 64-byte messages echoed one at a time: the round trip that
 *    every QD1 request/reply protocol pays at least once per request; with
 *    --size (the request, default 64) and --reply (the answer, default 64)
 *    the round trip of a 4 KiB write (--size 4K: 4 KiB there, 64 B back) or
 *    a 4 KiB read (--reply 4K) without any server behind it;
 *  - pipeline: messages of --size bytes (default 4 KiB), at most --depth
 *    (default 32) unacknowledged, each acknowledged by the server with 64
 *    bytes once it has read all of it, the acks of everything one read
 *    completed sent in one write: the floor of pipelined writes without any
 *    storage behind them. One client thread driven by poll(), as a
 *    block-protocol client library does it.
 * Prints one JSON object on stdout. A benchmark, never a test.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmp_util.h"

#define MSG_SMALL 64

struct opts {
	const char *mode;
	double seconds;
	size_t size;
	size_t reply; /* pingpong: bytes of the answer */
	unsigned depth;
	int client_cpu, server_cpu;
};

static void die(const char *what)
{
	fprintf(stderr, "cmp_floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void set_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * serve_acks -- the pipeline server: read whatever has arrived (up to 4 MiB
 * at a time), and for all the messages of @size it completed send their
 * 64-byte acks in one write -- the batching a good server does, so the
 * figure is a floor and not the cost of one system call per message
 */
static void serve_acks(int fd, size_t size)
{
	size_t cap = 4u << 20, in_msg = 0;
	uint8_t *buf = malloc(cap), *acks = calloc(1, MSG_SMALL * 4096);
	if (!buf || !acks)
		_exit(1);
	for (;;) {
		ssize_t n = read(fd, buf, cap);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t done = (in_msg + (size_t)n) / size;
		in_msg = (in_msg + (size_t)n) % size;
		while (done > 0) {
			size_t k = done < 4096 ? done : 4096;
			if (write_full(fd, acks, k * MSG_SMALL))
				_exit(0);
			done -= k;
		}
	}
	_exit(0);
}

/* serve -- the forked server: echo 64-byte messages one at a time, or serve_acks */
static void serve(int lfd, const struct opts *o)
{
	cmp_pin(o->server_cpu);
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		_exit(1);
	set_nodelay(fd);
	if (strcmp(o->mode, "pingpong") != 0)
		serve_acks(fd, o->size);
	uint8_t *req = calloc(1, o->size), *rep = calloc(1, o->reply);
	if (!req || !rep)
		_exit(1);
	while (read_full(fd, req, o->size) == 0 && write_full(fd, rep, o->reply) == 0)
		;
	_exit(0);
}

/* start_server -- listen on a free loopback port, fork the server, connect; the client fd */
static int start_server(const struct opts *o, pid_t *pid)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen) < 0)
		die("listen");
	*pid = fork();
	if (*pid < 0)
		die("fork");
	if (*pid == 0)
		serve(lfd, o);
	close(lfd);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	set_nodelay(fd);
	return fd;
}

/* pingpong -- round trips of o->size bytes there, o->reply back, for o->seconds after a warm-up */
static void pingpong(int fd, const struct opts *o, struct cmp_lat *lat, double *rate)
{
	uint8_t *req = calloc(1, o->size), *rep = calloc(1, o->reply);
	if (!req || !rep)
		die("allocation");
	uint64_t warm = cmp_now_ns() + (uint64_t)(o->seconds * 1e8);
	while (cmp_now_ns() < warm)
		if (write_full(fd, req, o->size) || read_full(fd, rep, o->reply))
			die("ping-pong");
	uint64_t t0 = cmp_now_ns(), end = t0 + (uint64_t)(o->seconds * 1e9), n = 0, t = t0;
	while (t < end) {
		if (write_full(fd, req, o->size) || read_full(fd, rep, o->reply))
			die("ping-pong");
		uint64_t t1 = cmp_now_ns();
		cmp_lat_add(lat, t1 - t);
		t = t1;
		n++;
	}
	*rate = (double)n / ((double)(t - t0) / 1e9);
	free(req);
	free(rep);
}

/*
 * pipeline -- messages of o->size bytes with at most o->depth unacknowledged;
 * returns messages acknowledged per second
 */
static double pipeline(int fd, const struct opts *o)
{
	uint8_t *msg = calloc(1, o->size);
	uint8_t acks[MSG_SMALL * 64];
	if (!msg)
		die("allocation");
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	uint64_t t0 = cmp_now_ns(), end = t0 + (uint64_t)(o->seconds * 1e9);
	uint64_t acked = 0, sent = 0, ack_bytes = 0;
	size_t off = 0; /* bytes of the current message sent */
	bool stop = false;
	while (!stop || acked < sent) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		bool can_send = !stop && (sent - acked < o->depth || off > 0);
		if (can_send)
			p.events |= POLLOUT;
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			die("poll");
		if (p.revents & POLLOUT) {
			while (!stop && (sent - acked < o->depth || off > 0)) {
				ssize_t n = send(fd, msg + off, o->size - off, MSG_NOSIGNAL);
				if (n < 0 && (errno == EAGAIN || errno == EINTR))
					break;
				if (n <= 0)
					die("send");
				if (off == 0)
					sent++;
				off += (size_t)n;
				if (off == o->size)
					off = 0;
			}
		}
		if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
			ssize_t n = read(fd, acks, sizeof(acks));
			if (n == 0)
				die("server closed");
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				die("read");
			if (n > 0) {
				ack_bytes += (uint64_t)n;
				acked = ack_bytes / MSG_SMALL;
			}
		}
		if (!stop && off == 0 && cmp_now_ns() >= end)
			stop = true;
	}
	double secs = (double)(cmp_now_ns() - t0) / 1e9;
	free(msg);
	return (double)acked / secs;
}

static void usage(void)
{
	fprintf(stderr, "usage: cmp_floor pingpong|pipeline [--seconds S] [--size BYTES] "
			"[--reply BYTES] [--depth N] [--client-cpu C] [--server-cpu D]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"seconds", required_argument, NULL, 's'},
	    {"size", required_argument, NULL, 'b'},
	    {"reply", required_argument, NULL, 'r'},
	    {"depth", required_argument, NULL, 'q'},
	    {"client-cpu", required_argument, NULL, 'c'},
	    {"server-cpu", required_argument, NULL, 'd'},
	    {NULL, 0, NULL, 0},
	};
	struct opts o = {.seconds = 3,
			 .size = 0,
			 .reply = MSG_SMALL,
			 .depth = 32,
			 .client_cpu = -1,
			 .server_cpu = -1};
	int c;
	if (argc < 2)
		usage();
	o.mode = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			o.seconds = atof(optarg);
			break;
		case 'b':
			o.size = (size_t)cmp_parse_size(optarg);
			break;
		case 'r':
			o.reply = (size_t)cmp_parse_size(optarg);
			break;
		case 'q':
			o.depth = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'c':
			o.client_cpu = atoi(optarg);
			break;
		case 'd':
			o.server_cpu = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	bool ping = strcmp(o.mode, "pingpong") == 0;
	if (!o.size)
		o.size = ping ? MSG_SMALL : 4096;
	if ((!ping && strcmp(o.mode, "pipeline")) || o.seconds <= 0 || o.size < MSG_SMALL ||
	    o.size > (256u << 20) || o.reply < 1 || o.reply > (256u << 20) || o.depth == 0 ||
	    o.depth > 4096)
		usage();

	signal(SIGPIPE, SIG_IGN);
	pid_t pid;
	int fd = start_server(&o, &pid);
	cmp_pin(o.client_cpu);

	printf("{\"tool\": \"cmp_floor\"");
	cmp_json_str(stdout, "mode", o.mode, true);
	cmp_json_num(stdout, "client_cpu", o.client_cpu, true);
	cmp_json_num(stdout, "server_cpu", o.server_cpu, true);
	if (ping) {
		struct cmp_lat lat;
		double rate = 0;
		if (cmp_lat_init(&lat, 20u << 20))
			die("allocation");
		pingpong(fd, &o, &lat, &rate);
		cmp_json_lat(stdout, "rtt", &lat, true);
		cmp_json_num(stdout, "ops_per_s", rate, true);
		cmp_json_num(stdout, "size", (double)o.size, true);
		cmp_json_num(stdout, "reply", (double)o.reply, true);
		cmp_lat_free(&lat);
	} else {
		double rate = pipeline(fd, &o);
		cmp_json_num(stdout, "size", (double)o.size, true);
		cmp_json_num(stdout, "depth", o.depth, true);
		cmp_json_num(stdout, "ops_per_s", rate, true);
		cmp_json_num(stdout, "mib_per_s", rate * (double)o.size / 1048576.0, true);
	}
	cmp_json_num(stdout, "client_ran_on_cpu", cmp_cpu_now(), true);
	printf("}\n");
	close(fd);
	int st;
	waitpid(pid, &st, 0);
	return 0;
}
