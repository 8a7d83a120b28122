/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_server.h -- a small in-process rdax server for librdax tests
 *
 * One thread, one connection at a time, blocking I/O, one volume "vol" in
 * memory (handle FAKE_HANDLE). It speaks the protocol of proto/rdax.proto
 * well enough for the client, logs every request it reads, and can
 * misbehave on purpose (the knobs of struct fake_cfg) so the tests can show
 * the client copes: hold fsync replies back, close mid-stream, send a bad
 * or unmatched reply, refuse a WRITE before its payload arrived.
 * Request numbers count every frame of a connection, HELLO = 1.
 */
#ifndef RDAX_FAKE_SERVER_H
#define RDAX_FAKE_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_HANDLE  7
#define FAKE_LOG_MAX 4096

struct fake_cfg {
	uint32_t max_payload; /* announced in HELLO; 0: 64 KiB */
	uint64_t volume_size; /* of "vol"; 0: 4 MiB */
	const char *token;    /* required token, or NULL */
	unsigned first_batch; /* read this many WRITEs before replying to any of them */
	bool hold_fsync;   /* reply to FSYNC / durable WRITE only after the next request's reply */
	unsigned close_at; /* close the connection on reading request n's header */
	unsigned bad_magic_at;	  /* answer request n with a header of a wrong magic */
	unsigned wrong_id_at;	  /* answer request n with another request id */
	unsigned refuse_write_at; /* answer WRITE n with TOO_BIG before reading its payload */
	unsigned frame_error_at;  /* answer request n with a type-0 error reply, then close */
	unsigned short_read_at;	  /* answer READ n with one byte less than asked */
	unsigned nvolumes_listed; /* volume list: this many volumes "v0".."vN-1" besides "vol" */
	/* resuming clients (test_client_resume.c) */
	bool close_first_only;	 /* close_at applies to the first connection only */
	uint64_t verifier;	 /* WRITE, FSYNC and VOLUME_OPEN replies carry it (0: none) ... */
	bool verifier_per_conn;	 /* ... plus the connection's number: each one a new "run" */
	bool lose_unsynced;	 /* a connection's end loses what no fsync made durable */
	const char *not_primary; /* VOLUME_OPEN: refused RDAX_E_NOT_PRIMARY naming this URL */
};

struct fake_req {
	uint16_t type;
	uint64_t id;
	uint64_t offset;
	uint64_t length; /* WRITE: payload bytes; READ/FSYNC/DISCARD: the field */
	bool fsync;	 /* WRITE: the fsync flag */
	bool has_length; /* FSYNC: length was sent */
};

struct fake_server {
	struct fake_cfg cfg;
	int listen_fd;
	int conn_fd;
	uint16_t port;
	char url[64];
	pthread_t thread;
	pthread_mutex_t lock; /* guards the log, token_seen, and writes to vol */
	struct fake_req log[FAKE_LOG_MAX];
	unsigned nlog;
	uint8_t *vol;
	uint8_t *durable; /* lose_unsynced: the volume as of the last fsync */
	unsigned conns;	  /* connections accepted */
	uint64_t dirty; /* bytes written since the last fsync (roughly) */
	char token_seen[128];
};

/* fake_server_start -- listen on 127.0.0.1 (ephemeral port) and serve in a thread */
int fake_server_start(const struct fake_cfg *cfg, struct fake_server **out);

/* fake_server_stop -- close everything, join the thread, free */
void fake_server_stop(struct fake_server **fsp);

/* fake_server_nlog -- requests read so far */
unsigned fake_server_nlog(struct fake_server *fs);

/* fake_server_req -- a copy of logged request @i (0 = HELLO) */
struct fake_req fake_server_req(struct fake_server *fs, unsigned i);

/* fake_server_token_is -- the last token a HELLO carried equals @token */
bool fake_server_token_is(struct fake_server *fs, const char *token);

/* fake_server_holds -- the volume holds @data at @off (under the lock writes take) */
bool fake_server_holds(struct fake_server *fs, uint64_t off, const void *data, size_t len);

#endif
