/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness.h -- run the real rdaxd and the real rdax command from a test
 *
 * A test makes a temporary directory (hx_tmpdir_make), starts rdaxd on an
 * emulated namespace inside it on a free loopback port (hx_daemon_start,
 * which waits, bounded, for the "rdaxd: ready" line), drives it, and stops
 * it with SIGTERM (hx_daemon_stop), which fails unless the daemon exits 0
 * within a bound. hx_daemon_kill is the power cut (SIGKILL).
 *
 * The daemon's stderr (its log) goes to a file in the directory and is
 * printed by hx_daemon_dump_log when something fails. The environment
 * variable RDAXD_WRAPPER (e.g. "valgrind --error-exitcode=99 -q") is put
 * in front of the daemon's command line, so a run can check the daemon
 * under a tool; a tool's non-zero exit then fails hx_daemon_stop.
 *
 * The transport and namespace of a run come from the environment, so the
 * same tests run over RDMA inside the VM (tests/rdma):
 *   RDAX_IT_RDMA=ADDR  the daemon also listens on rdma://ADDR:PORT (the
 *                      same port number as its tcp:// one) and d->url is
 *                      that address: librdax, the rdax command and wire.c
 *                      then talk RDMA.
 *   RDAX_IT_NS=PATH    a devdax namespace, formatted by hx_daemon_start, for
 *                      the daemons whose test names neither a mode nor a
 *                      namespace file -- one struct hx_daemon at a time: the
 *                      first to take it keeps it, a second daemon running
 *                      meanwhile gets a file namespace as without it.
 *   RDAX_IT_MODE=MODE  the mode ("sim") of daemons whose test names none.
 *   RDAX_IT_RDMA_BUSY_POLL=USEC  with RDAX_IT_RDMA: daemons run with
 *                      --rdma-busy-poll USEC (their loops spin on the CQs).
 *   RDAX_IT_LOG=LEVEL  the log level of daemons whose test names none.
 *   RDAX_IT_TCP_HOST=ADDR  the tcp:// listener's address (default
 *                      127.0.0.1): the RDMA address too where a daemon must
 *                      advertise both to others (the cluster's RDMA links).
 *   RDAX_IT_TLS=psk    daemons run with --tls require and a PSK, each
 *                      listener behind a tls_proxy (harness_tls.c): d->port,
 *                      d->url and the ready line's nbd:// port are the
 *                      proxies', so the tests' plaintext reaches rdaxd in TLS.
 *
 * Thread safety: a struct hx_daemon belongs to one thread. hx_daemon_start
 * must be called from the main thread: the daemon gets PR_SET_PDEATHSIG,
 * which fires when the forking *thread* exits, so a test that crashes never
 * leaves a daemon behind. hx_cli may be called from any thread.
 */
#ifndef RDAX_TEST_HARNESS_H
#define RDAX_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef RDAXD_PATH
#error "RDAXD_PATH (the rdaxd binary) must be defined by the build"
#endif
#ifndef RDAX_CLI_PATH
#error "RDAX_CLI_PATH (the rdax command) must be defined by the build"
#endif

/* Bounds; generous because ASan + UBSan on a shared 2-core machine is slow. */
#define HX_READY_TIMEOUT_MS 60000
#define HX_STOP_TIMEOUT_MS  60000
#define HX_CLI_TIMEOUT_MS   120000

struct hx_daemon_opts {
	const char *ns_name;	 /* file in the directory; default "ns0" */
	const char *ns_size;	 /* default "256M" */
	const char *mode;	 /* "auto" (default) or "sim" */
	const char *token_file;	 /* NULL: no token */
	const char *flush_mode;	 /* NULL: the daemon's default */
	const char *max_payload; /* NULL: the daemon's default */
	const char *faults;	 /* RDAX_FAULTS of the daemon, NULL: none */
	const char *log_level;	 /* default "warn" */
	unsigned threads;	 /* 0: 2 */
	unsigned long cpu_mask;	 /* pin the daemon (all its threads) to these CPUs; 0: no pinning */
	const char *extra_args[8]; /* more flags, NULL-terminated */
};

struct hx_daemon {
	pid_t pid; /* 0 when not running */
	int port;
	char url[96]; /* tcp://127.0.0.1:PORT, or rdma://ADDR:PORT (RDAX_IT_RDMA) */
	char dir[256];
	char ns_path[320];
	char log_path[320];
	char token_file[320]; /* empty: none */
	char ready_line[256];
	int out_fd;	 /* the daemon's stdout (a pipe), -1 when closed */
	bool devdax;	 /* ns_path is RDAX_IT_NS */
	int exit_status; /* wait status of the last exit, -1 if none */
	struct hx_daemon_opts opts;
	char tls_psk[320];   /* RDAX_IT_TLS: the daemon's PSK file */
	pid_t tls_proxy[2];  /* RDAX_IT_TLS: the proxies of tcp:// and nbd:// (0: none) */
};

/* hx_tls -- RDAX_IT_TLS=psk: daemons behind TLS proxies (harness_tls.c) */
bool hx_tls(void);
/* hx_tls_prepare -- write the daemon's PSK file in d->dir; 0 or -errno */
int hx_tls_prepare(struct hx_daemon *d);
/* hx_tls_front -- the daemon is ready: put the proxies in front; 0 or -errno */
int hx_tls_front(struct hx_daemon *d);
/* hx_tls_stop -- end the proxies (with the daemon) */
void hx_tls_stop(struct hx_daemon *d);

/* hx_tcp_host -- RDAX_IT_TCP_HOST: the tcp:// listeners' address, "127.0.0.1" by default */
const char *hx_tcp_host(void);

/* hx_rdma_addr -- RDAX_IT_RDMA: the RDMA address of this run, NULL over TCP */
const char *hx_rdma_addr(void);

/* hx_scale -- @n for a TCP run, @rdma_n over RDMA (soft-RoCE under emulation is slow) */
unsigned hx_scale(unsigned n, unsigned rdma_n);

/* hx_tmpdir_make -- a fresh directory under $TMPDIR (or /tmp); 0 or -errno */
int hx_tmpdir_make(const char *tag, char *out, size_t len);

/* hx_tmpdir_remove -- remove the directory and everything in it (best effort) */
void hx_tmpdir_remove(const char *dir);

/* hx_free_port -- a loopback TCP port that was free a moment ago; > 0, or -errno */
int hx_free_port(void);

/*
 * hx_daemon_start -- start rdaxd on DIR/ns_name with @opts (NULL: defaults)
 * and wait for its ready line. A daemon that exits before it is ready is
 * retried on another port once if its log says the address was in use.
 * Returns 0, -ETIMEDOUT (no ready line within HX_READY_TIMEOUT_MS: killed),
 * -ECHILD (it exited: its log is printed), -errno.
 */
int hx_daemon_start(struct hx_daemon *d, const char *dir, const struct hx_daemon_opts *opts);

/* hx_daemon_restart -- start again with the same directory and options (new port) */
int hx_daemon_restart(struct hx_daemon *d);

/*
 * hx_daemon_restart_same_port -- start again on the port it had (and the
 * same d->url), for clients that reconnect by themselves; a port still in
 * use is tried again for up to 10 s
 */
int hx_daemon_restart_same_port(struct hx_daemon *d);

/*
 * hx_daemon_stop -- SIGTERM, then wait up to HX_STOP_TIMEOUT_MS. Returns 0
 * if it exited with status 0; -ETIMEDOUT (it was then killed), -ECHILD
 * (exited non-zero or by a signal: the status is printed with its log).
 */
int hx_daemon_stop(struct hx_daemon *d);

/*
 * hx_daemon_wait_stopped -- wait for a daemon the test sent SIGTERM itself
 * (a second SIGTERM during its shutdown would find the default action):
 * returns as hx_daemon_stop.
 */
int hx_daemon_wait_stopped(struct hx_daemon *d);

/* hx_daemon_kill -- SIGKILL (a power cut in sim mode) and reap; 0 or -errno */
int hx_daemon_kill(struct hx_daemon *d);

/* hx_daemon_alive -- true while the process has not exited (reaps it if it has) */
bool hx_daemon_alive(struct hx_daemon *d);

/* hx_daemon_dump_log -- print the last @max_bytes of the daemon's log on stderr */
void hx_daemon_dump_log(const struct hx_daemon *d, size_t max_bytes);

/* hx_write_file -- create @path with @len bytes of @data; 0 or -errno */
int hx_write_file(const char *path, const void *data, size_t len);

struct hx_run {
	int status; /* exit code; 128 + signal number if killed by a signal */
	char *out;  /* stdout, NUL-terminated (malloc'd) */
	size_t out_len;
	char *err; /* stderr, NUL-terminated (malloc'd) */
	size_t err_len;
};

/* hx_run_free -- release the buffers of @r */
void hx_run_free(struct hx_run *r);

/*
 * hx_run_argv -- run @argv (argv[0] is the program path) with @in_len bytes
 * of @in on stdin, capturing stdout and stderr, bounded by
 * HX_CLI_TIMEOUT_MS (killed after). Returns 0 (r filled) or -errno.
 */
int hx_run_argv(const char *const argv[], const void *in, size_t in_len, struct hx_run *r);

/*
 * hx_cli -- run "rdax --server URL [--token-file F] ARGS..." against @d;
 * the argument list ends with NULL. The token file of the daemon, if any,
 * is passed. Returns as hx_run_argv.
 */
int hx_cli(const struct hx_daemon *d, const void *in, size_t in_len, struct hx_run *r, ...)
    __attribute__((sentinel));

/* hx_cli_tok -- hx_cli with an explicit token file (NULL: none) instead of the daemon's */
int hx_cli_tok(const struct hx_daemon *d, const char *token_file, const void *in, size_t in_len,
	       struct hx_run *r, ...) __attribute__((sentinel));

/* hx_pattern -- fill @buf with bytes that depend on @seed and on each byte's offset @off + i */
void hx_pattern(void *buf, size_t len, uint64_t seed, uint64_t off);

/* hx_splitmix64 -- the next value of a splitmix64 generator (state advanced) */
uint64_t hx_splitmix64(uint64_t *state);

/* hx_now_ms -- CLOCK_MONOTONIC in milliseconds */
int64_t hx_now_ms(void);

#endif
