/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbdtest.h -- helpers of the NBD tests: a daemon with NBD listeners, the
 * real NBD clients (qemu-img, nbdcopy, nbdsh, nbdinfo, fio), a raw client
 *
 * nt_daemon_start() runs rdaxd through the integration harness (harness.h)
 * with a tcp:// listener (the rdax protocol, to create volumes), an
 * nbd://127.0.0.1:0 listener and an nbd+unix:// socket in the test
 * directory, and reads the NBD port from the ready line.
 *
 * The tools are found on PATH (with /usr/bin first: nbdsh runs "python3",
 * which must be the system one that has the nbd module). A missing tool
 * fails the test with the package to install (deploy/install-deps.sh
 * installs them all).
 *
 * The raw client (nt_raw_*) speaks the protocol byte by byte, so a test can
 * send what no real client sends and see exactly what the daemon answers.
 * Every receive is bounded by NT_TIMEOUT_MS.
 *
 * Thread safety: none; one test thread.
 */
#ifndef RDAX_NBDTEST_H
#define RDAX_NBDTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "nbd_proto.h"

#define NT_TIMEOUT_MS 60000

struct nt_daemon {
	struct hx_daemon d;
	int nbd_port;
	char nbd_base[64];     /* nbd://127.0.0.1:PORT */
	char sock_path[320];   /* the nbd+unix socket */
	char unix_listen[400]; /* nbd+unix://PATH as given to --listen */
	char nbd_listen[64];
};

/*
 * nt_daemon_start -- rdaxd in @dir with the NBD listeners above; @opts as
 * for hx_daemon_start (NULL: defaults; extra_args are kept after ours).
 * Returns 0 or the harness's error.
 */
int nt_daemon_start(struct nt_daemon *n, const char *dir, const struct hx_daemon_opts *opts);

/* nt_daemon_restart -- start again after a stop or kill (same namespace, new ports) */
int nt_daemon_restart(struct nt_daemon *n);

/* nt_uri -- "nbd://127.0.0.1:PORT/@export" into @buf */
const char *nt_uri(const struct nt_daemon *n, const char *export, char *buf, size_t len);

/* nt_unix_uri -- "nbd+unix:///@export?socket=PATH" (libnbd's form) into @buf */
const char *nt_unix_uri(const struct nt_daemon *n, const char *export, char *buf, size_t len);

/* nt_volume_create -- create @name of @size bytes over the rdax protocol; 0 or the status */
int nt_volume_create(const struct nt_daemon *n, const char *name, uint64_t size);

/* nt_volume_delete -- delete @name over the rdax protocol; the status (EBUSY, ...) or -errno */
int nt_volume_delete(const struct nt_daemon *n, const char *name);

/*
 * nt_tool -- the full path of @name on PATH into @buf; NULL (with a message
 * naming @package) if missing.
 */
const char *nt_tool(const char *name, const char *package, char *buf, size_t len);

/* nt_env_init -- put /usr/bin first on PATH (once, before running tools) */
void nt_env_init(void);

/*
 * nt_run -- run the tool @argv[0] (a name, looked up with nt_tool) with the
 * rest of @argv; the output is captured in @r (hx_run_free it). The
 * command and its output are printed when it exits non-zero or @verbose.
 * Returns 0 (see r->status) or -errno.
 */
int nt_run(const char *const argv[], struct hx_run *r, bool verbose);

/*
 * nt_nbdsh -- run the nbdsh script tests/nbd/@script (no implicit handle)
 * with the environment variables given as "NAME=VALUE" strings (NULL-
 * terminated); r as nt_run. Returns 0 or -errno.
 */
int nt_nbdsh(const char *script, const char *const env[], struct hx_run *r);

/* nt_read_file -- the whole file into a malloc'd buffer; 0 or -errno */
int nt_read_file(const char *path, uint8_t **buf, size_t *len);

/* ---- raw client ---- */

struct nt_raw {
	int fd;
	bool structured;
};

/* nt_raw_connect -- TCP to 127.0.0.1:@port, read the greeting and check it; 0 or -errno */
int nt_raw_connect(struct nt_raw *c, int port);

/* nt_raw_connect_unix -- the same over the unix socket @path; 0 or -errno */
int nt_raw_connect_unix(struct nt_raw *c, const char *path);

/* nt_raw_close -- close (accepts a closed one) */
void nt_raw_close(struct nt_raw *c);

/* nt_raw_send -- exactly @len bytes; 0 or -errno (-EPIPE when closed) */
int nt_raw_send(struct nt_raw *c, const void *buf, size_t len);

/* nt_raw_recv -- exactly @len bytes; 0, -EPIPE (closed), -ETIMEDOUT */
int nt_raw_recv(struct nt_raw *c, void *buf, size_t len);

/* nt_raw_eof -- true if the daemon closes the connection (no further byte) within the bound */
bool nt_raw_eof(struct nt_raw *c);

/* nt_raw_option -- send an option header (+ @len bytes of @data, may be NULL to send none) */
int nt_raw_option(struct nt_raw *c, uint32_t option, const void *data, uint32_t len);

struct nt_opt_reply {
	uint32_t option;
	uint32_t type;
	uint32_t len;
	uint8_t data[512]; /* the first bytes of the data (the rest is read and dropped) */
};

/* nt_raw_opt_reply -- one option reply; 0 or -errno (-EBADMSG: bad magic) */
int nt_raw_opt_reply(struct nt_raw *c, struct nt_opt_reply *r);

/*
 * nt_raw_go -- (structured replies if @structured, then) NBD_OPT_GO for
 * @export, reading the replies up to the final one. Returns 0 (transmission
 * entered; *size the export size, may be NULL), the final reply type
 * (> 0, an error), or -errno.
 */
int nt_raw_go(struct nt_raw *c, const char *export, bool structured, uint64_t *size);

/* nt_raw_request -- send one request header (and @payload_len bytes of @payload, may be NULL) */
int nt_raw_request(struct nt_raw *c, uint16_t type, uint16_t flags, uint64_t handle,
		   uint64_t offset, uint32_t length, const void *payload, uint32_t payload_len);

struct nt_reply {
	uint64_t handle;
	uint32_t error;	   /* 0 or the NBD error */
	bool structured;   /* came as chunks */
	char message[256]; /* an error chunk's message */
	uint64_t offset;   /* data chunk offset */
	uint32_t data_len; /* bytes stored in the caller's buffer */
	unsigned chunks;
};

/*
 * nt_raw_reply -- one whole reply (every chunk up to the DONE flag, or one
 * simple reply). A READ's data goes to @buf (@buf_len bytes at most; for a
 * simple reply @expect_data bytes are read when the error is 0). Returns 0
 * or -errno (-EBADMSG on a malformed reply).
 */
int nt_raw_reply(struct nt_raw *c, struct nt_reply *r, void *buf, size_t buf_len,
		 uint32_t expect_data);

/*
 * nt_raw_roundtrip -- on an exported connection: WRITE @len pattern bytes
 * at @off, FLUSH, READ back and compare. 0, or -errno / -EIO (mismatch or
 * error reply). The check that a connection is still served.
 */
int nt_raw_roundtrip(struct nt_raw *c, uint64_t off, uint32_t len, uint64_t seed);

#endif
