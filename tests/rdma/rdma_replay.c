/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_replay.c -- a signed RDMA connection request, sent twice byte for byte
 *
 *   rdma_replay ADDR PORT PSK_FILE USER
 *
 * What an attacker on the fabric who captured a client's connection
 * request would do: the request (rdax private data with the auth block of
 * rdma_auth.h, signed once with USER's key) is sent in a first connection,
 * which rdaxd must accept, and again unchanged in a second, which it must
 * reject. Exit 0 only if that is what happened; 1 otherwise, saying which.
 * Runs in the RDMA VM (guest-suite.sh, check rdma_auth).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "psk_file.h"
#include "rdma_auth.h"

/* attempt -- connect with @pd; 0 established (then disconnected), or -errno */
static int attempt(const char *addr, const char *port, const uint8_t *pd, size_t len)
{
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res;
	if (rdma_getaddrinfo(addr, port, &hints, &res))
		return -errno;
	struct ibv_qp_init_attr attr = {
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	    .sq_sig_all = 1,
	};
	struct rdma_cm_id *id;
	int ret = 0;
	if (rdma_create_ep(&id, res, NULL, &attr)) {
		ret = -errno;
		rdma_freeaddrinfo(res);
		return ret;
	}
	rdma_freeaddrinfo(res);
	struct rdma_conn_param cp = {
	    .private_data = pd,
	    .private_data_len = (uint8_t)len,
	    .initiator_depth = 1,
	    .retry_count = 7,
	    .rnr_retry_count = 7,
	};
	if (rdma_connect(id, &cp))
		ret = -errno;
	else
		rdma_disconnect(id);
	rdma_destroy_ep(id);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: rdma_replay ADDR PORT PSK_FILE USER\n");
		return 2;
	}
	struct psk_entry *e;
	size_t n;
	char err[512];
	if (psk_file_read(argv[3], &e, &n, err, sizeof(err))) {
		fprintf(stderr, "rdma_replay: %s\n", err);
		return 2;
	}
	size_t i = 0;
	while (i < n && strcmp(e[i].user, argv[4]) != 0)
		i++;
	if (i == n) {
		fprintf(stderr, "rdma_replay: no user %s\n", argv[4]);
		return 2;
	}
	uint8_t pd[RDMA_CM_DATA_SIZE + RDMA_AUTH_SIZE];
	struct rdma_cm_data cd = {RDMA_CM_MAGIC, RDMA_CM_VERSION, 16, 4096};
	rdma_cm_data_encode(&cd, pd);
	uint8_t nonce[8];
	for (int k = 0; k < 8; k++)
		nonce[k] = (uint8_t)(rand() ^ time(NULL) >> (k * 3));
	if (rdma_auth_sign(pd, e[i].user, e[i].key, e[i].key_len, (uint32_t)time(NULL), nonce,
			   pd + RDMA_CM_DATA_SIZE)) {
		fprintf(stderr, "rdma_replay: cannot sign\n");
		return 2;
	}
	psk_file_free(&e, n);
	int first = attempt(argv[1], argv[2], pd, sizeof(pd));
	if (first) {
		printf("rdma_replay: the signed request was refused: %s\n", strerror(-first));
		return 1;
	}
	printf("rdma_replay: the signed request was accepted\n");
	int second = attempt(argv[1], argv[2], pd, sizeof(pd));
	if (second == 0) {
		printf("rdma_replay: the replay was ACCEPTED\n");
		return 1;
	}
	printf("rdma_replay: the replay was refused (%s)\n", strerror(-second));
	return 0;
}
