/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wal_check.c -- recovery check of the example write-ahead log (wal.h)
 *
 *   wal_check IMAGE                              a raw image of the volume
 *   wal_check [--server URL] --volume NAME       the volume itself, over librdax
 *
 * Does what recovery would: every commit record found names a committed
 * transaction, whose data must be there whole. Exit status 0 when every
 * committed transaction is intact (printing how many there are), 1 naming
 * the first one that is not, 2 for usage or I/O errors. It is the checker
 * `rdax crash-states --check` runs on each crash state of wal_correct and
 * wal_buggy (docs/persistence-testing.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wal.h"

/* read_image -- the first WAL_VOLUME_SIZE bytes of a file; 0 or 2 */
static int read_image(const char *path, uint8_t *buf)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "wal_check: %s: %s\n", path, strerror(errno));
		return 2;
	}
	size_t n = fread(buf, 1, WAL_VOLUME_SIZE, f);
	fclose(f);
	if (n != WAL_VOLUME_SIZE) {
		fprintf(stderr, "wal_check: %s: shorter than the log's %u bytes\n", path,
			WAL_VOLUME_SIZE);
		return 2;
	}
	return 0;
}

/* read_volume -- the same from volume @name on the server; 0 or 2 */
static int read_volume(const char *server, const char *name, uint8_t *buf)
{
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	int ret = rdax_connect(server && server[0] ? server : RDAX_DEFAULT_URL, NULL, &conn);
	if (ret) {
		fprintf(stderr, "wal_check: %s\n", rdax_connect_last_error());
		return 2;
	}
	ret = rdax_volume_open(conn, name, &vol);
	if (!ret) {
		ret = rdax_read(vol, 0, buf, WAL_VOLUME_SIZE);
		rdax_volume_close(&vol);
	}
	if (ret)
		fprintf(stderr, "wal_check: volume %s: %s\n", name, rdax_conn_last_error(conn));
	rdax_disconnect(&conn);
	return ret ? 2 : 0;
}

/* check -- recovery's view of @img: 0 intact, 1 a committed transaction broken */
static int check(const uint8_t *img)
{
	static const uint8_t zero[WAL_COMMIT_SIZE];
	unsigned committed = 0;
	for (unsigned i = 0; i < WAL_SLOTS; i++) {
		const uint8_t *c = img + WAL_COMMIT_OFF(i);
		if (memcmp(c, zero, WAL_COMMIT_SIZE) == 0)
			continue;
		if (memcmp(c, "WALC", 4) != 0 || wal_get32(c + 60) != wal_sum(c, 60)) {
			printf("wal_check: slot %u (offset %" PRIu64
			       "): not a valid commit record\n",
			       i, WAL_COMMIT_OFF(i));
			return 1;
		}
		uint32_t txn = wal_get32(c + 4), len = wal_get32(c + 16);
		uint64_t off = wal_get64(c + 8);
		if (off < WAL_DATA_START || len > WAL_VOLUME_SIZE || off > WAL_VOLUME_SIZE - len) {
			printf("wal_check: transaction %" PRIu32 ": data range outside the log\n",
			       txn);
			return 1;
		}
		if (wal_sum(img + off, len) != wal_get32(c + 20)) {
			printf("wal_check: transaction %" PRIu32 " is committed (commit record at "
			       "offset %" PRIu64 ") but its data at offset %" PRIu64 " (%" PRIu32
			       " bytes) is not all there\n",
			       txn, WAL_COMMIT_OFF(i), off, len);
			return 1;
		}
		committed++;
	}
	printf("wal_check: ok, %u committed transactions intact\n", committed);
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t img[WAL_VOLUME_SIZE];
	const char *server = getenv("RDAX_SERVER"), *volume = NULL, *path = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--server") == 0 && i + 1 < argc)
			server = argv[++i];
		else if (strcmp(argv[i], "--volume") == 0 && i + 1 < argc)
			volume = argv[++i];
		else if (!path && argv[i][0] != '-')
			path = argv[i];
		else
			path = NULL, volume = NULL, i = argc;
	}
	if (!!path == !!volume) {
		fprintf(stderr,
			"usage: wal_check IMAGE | wal_check [--server URL] --volume NAME\n");
		return 2;
	}
	int ret = path ? read_image(path, img) : read_volume(server, volume, img);
	return ret ? ret : check(img);
}
