/* SPDX-License-Identifier: BSD-3-Clause */
/* wal.c -- the example write-ahead log's format and start-up (wal.h) */
#include "wal.h"

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t wal_sum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t h = 2166136261U;
	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 16777619U;
	return h;
}

void wal_data(unsigned txn, uint8_t out[WAL_DATA_LEN])
{
	for (unsigned i = 0; i < WAL_DATA_LEN; i++)
		out[i] = (uint8_t)(txn * 31 + i * 7 + 1);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

uint32_t wal_get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return le32toh(v);
}

uint64_t wal_get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

void wal_commit(unsigned txn, uint8_t out[WAL_COMMIT_SIZE])
{
	uint8_t data[WAL_DATA_LEN];
	wal_data(txn, data);
	memset(out, 0, WAL_COMMIT_SIZE);
	memcpy(out, "WALC", 4);
	put32(out + 4, txn);
	put64(out + 8, WAL_DATA_OFF(txn));
	put32(out + 16, WAL_DATA_LEN);
	put32(out + 20, wal_sum(data, sizeof(data)));
	put32(out + 60, wal_sum(out, 60));
}

int wal_main(int argc, char **argv, wal_txn_fn txn)
{
	const char *server = getenv("RDAX_SERVER");
	int i = 1;
	if (i + 1 < argc && strcmp(argv[i], "--server") == 0) {
		server = argv[i + 1];
		i += 2;
	}
	if (argc - i < 1 || argc - i > 2) {
		fprintf(stderr, "usage: %s [--server URL] VOLUME [TRANSACTIONS]\n", argv[0]);
		return 2;
	}
	const char *name = argv[i];
	unsigned ntx = argc - i == 2 ? (unsigned)strtoul(argv[i + 1], NULL, 10) : 3;
	if (ntx == 0 || ntx > WAL_SLOTS) {
		fprintf(stderr, "%s: 1 to %d transactions\n", argv[0], WAL_SLOTS);
		return 2;
	}
	struct rdax_conn *conn;
	int ret = rdax_connect(server && server[0] ? server : RDAX_DEFAULT_URL, NULL, &conn);
	if (ret) {
		fprintf(stderr, "%s: %s\n", argv[0], rdax_connect_last_error());
		return 1;
	}
	struct rdax_volume *vol = NULL;
	ret = rdax_volume_create(conn, name, WAL_VOLUME_SIZE, RDAX_NAMESPACE_ANY);
	if (!ret)
		ret = rdax_volume_open(conn, name, &vol);
	if (ret)
		fprintf(stderr, "%s: volume %s: %s\n", argv[0], name, rdax_conn_last_error(conn));
	for (unsigned t = 0; !ret && t < ntx; t++) {
		uint8_t data[WAL_DATA_LEN], commit[WAL_COMMIT_SIZE];
		wal_data(t, data);
		wal_commit(t, commit);
		ret = txn(vol, t, data, commit);
		if (ret)
			fprintf(stderr, "%s: transaction %u: %s\n", argv[0], t,
				rdax_conn_last_error(conn)[0] ? rdax_conn_last_error(conn)
							      : rdax_strerror(ret));
		else
			printf("committed transaction %u\n", t);
	}
	int cret = rdax_volume_close(&vol);
	if (cret && !ret)
		fprintf(stderr, "%s: close: %s\n", argv[0], rdax_strerror(cret));
	rdax_disconnect(&conn);
	return ret || cret ? 1 : 0;
}
