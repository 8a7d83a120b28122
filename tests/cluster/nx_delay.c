/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nx_delay.c -- hold every packet of an NFQUEUE queue for a fixed time (a slow link)
 *
 *   nx_delay --queue N --delay-ms D
 *
 * Run inside a node's network namespace, with an iptables rule sending
 * that node's outgoing packets to queue N (tests/cluster/net.c). Each
 * packet gets its verdict (accept) D ms after it was queued, in arrival
 * order, so the link is slower by D ms one way and nothing is reordered.
 * This stands in for tc netem's delay on a kernel built without netem.
 * Prints "nx_delay: ready" once bound, and on SIGTERM/SIGINT accepts what
 * it still holds and prints "nx_delay: held N packets".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libnetfilter_queue/libnetfilter_queue.h>

/* Packets held at once; beyond this a packet is accepted at once (never dropped). */
#define HOLD_MAX 65536

struct held {
	uint32_t id;
	int64_t due_us;
};

static struct held ring[HOLD_MAX];
static size_t head, count;
static uint64_t total;
static int64_t delay_us;
static struct nfq_q_handle *qh;
static volatile sig_atomic_t stop;

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* on_packet -- queue callback: remember the packet's id and when it may go */
static int on_packet(struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *nfa, void *data)
{
	(void)msg;
	(void)data;
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	if (!ph)
		return 0;
	uint32_t id = ntohl(ph->packet_id);
	total++;
	if (count == HOLD_MAX)
		return nfq_set_verdict(q, id, NF_ACCEPT, 0, NULL);
	ring[(head + count) % HOLD_MAX] = (struct held){id, now_us() + delay_us};
	count++;
	return 0;
}

/* release -- accept every held packet whose time has come (all of them with @all) */
static void release(bool all)
{
	int64_t now = now_us();
	while (count > 0 && (all || ring[head].due_us <= now)) {
		nfq_set_verdict(qh, ring[head].id, NF_ACCEPT, 0, NULL);
		head = (head + 1) % HOLD_MAX;
		count--;
	}
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	unsigned queue = 0, delay_ms = 0;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--queue") == 0)
			queue = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--delay-ms") == 0)
			delay_ms = (unsigned)strtoul(argv[i + 1], NULL, 10);
	}
	if (argc != 5 || delay_ms == 0 || delay_ms > 60000) {
		fprintf(stderr, "usage: nx_delay --queue N --delay-ms D (1..60000)\n");
		return 2;
	}
	delay_us = (int64_t)delay_ms * 1000;
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	struct nfq_handle *h = nfq_open();
	if (!h) {
		fprintf(stderr, "nx_delay: nfq_open: %s\n", strerror(errno));
		return 1;
	}
	qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
	if (!qh) {
		fprintf(stderr, "nx_delay: nfq_create_queue(%u): %s\n", queue, strerror(errno));
		nfq_close(h);
		return 1;
	}
	/* the verdict needs only the id: copy no payload */
	if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 || nfq_set_queue_maxlen(qh, HOLD_MAX) < 0) {
		fprintf(stderr, "nx_delay: queue setup: %s\n", strerror(errno));
		return 1;
	}
	int fd = nfq_fd(h);
	printf("nx_delay: ready (queue %u, %u ms)\n", queue, delay_ms);
	fflush(stdout);
	char buf[65536];
	while (!stop) {
		int timeout = 100;
		if (count > 0) {
			int64_t wait = (ring[head].due_us - now_us() + 999) / 1000;
			timeout = wait < 0 ? 0 : wait < timeout ? (int)wait : timeout;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, timeout) > 0) {
			ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n > 0)
				nfq_handle_packet(h, buf, (int)n);
			else if (n < 0 && errno == ENOBUFS)
				fprintf(stderr,
					"nx_delay: queue overrun (kernel dropped verdicts)\n");
		}
		release(false);
	}
	release(true);
	printf("nx_delay: held %" PRIu64 " packets by %u ms\n", total, delay_ms);
	fflush(stdout);
	nfq_destroy_queue(qh);
	nfq_close(h);
	return 0;
}
