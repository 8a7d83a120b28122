/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * node.h -- an rdaxd node of a test cluster, in its network namespace
 *
 * A node is the ordinary rdaxd (started and stopped by the integration
 * harness, tests/integration/harness.h) on its own namespace file, run
 * inside node i's network namespace (tests/cluster/net.h) through
 * RDAXD_WRAPPER ("ip netns exec NS", which execs without forking, so the
 * harness's pid, PR_SET_PDEATHSIG and signals reach rdaxd itself) and
 * listening on tcp://ADDR:7470 as well as its namespace's own loopback
 * port. In the loopback fallback the node is a plain harness daemon and
 * its URL is the harness's 127.0.0.1 one.
 *
 * Faults on the process: nx_node_kill (SIGKILL: a power cut in sim mode),
 * nx_node_pause/resume (SIGSTOP/SIGCONT: a hung node); nx_node_restart
 * brings a killed node back on the same namespace file.
 *
 * Thread safety: the main thread only (the harness's rule).
 */
#ifndef RDAX_TEST_NODE_H
#define RDAX_TEST_NODE_H

#include <stdbool.h>

#include "harness.h"
#include "net.h"

#define NX_NODE_PORT 7470

struct nx_node {
	struct hx_daemon d;
	struct nx_net *net;
	unsigned i;
	bool paused;
	char url[96];	 /* what clients use: tcp://ADDR:7470 (fallback: the harness URL) */
	char listen[64]; /* the extra --listen */
	char ns_dir[256];
	char args[6][256]; /* nx_node_start_args: more rdaxd flags */
	char metrics[96];  /* http://ADDR:PORT/metrics where it serves them, "" if not */
	char nbd[96];	   /* nbd://ADDR:PORT where it serves NBD, "" if not (nx_cluster_nbd) */
};

/* The size of a node's namespace file (rdaxd --namespace ...,size=): "64M" unless a test sets it.
 */
extern const char *nx_node_ns_size;

/* nx_node_start -- rdaxd for node @i of @x (sim mode, nx_node_ns_size namespace in @dir); 0 or
 * -errno */
int nx_node_start(struct nx_node *nd, struct nx_net *x, unsigned i, const char *dir);

/*
 * nx_node_start_args -- nx_node_start with more rdaxd flags (@args
 * NULL-terminated, at most 6, each one word such as "--node=n1"; copied),
 * kept for nx_node_restart
 */
int nx_node_start_args(struct nx_node *nd, struct nx_net *x, unsigned i, const char *dir,
		       const char *const *args);

/* nx_node_restart -- start a killed or stopped node again on the same namespace file */
int nx_node_restart(struct nx_node *nd);

/* nx_node_stop -- SIGTERM (SIGCONT first if paused); 0 if it exited 0 (hx_daemon_stop) */
int nx_node_stop(struct nx_node *nd);

/* nx_node_kill -- SIGKILL and reap */
int nx_node_kill(struct nx_node *nd);

/* nx_node_pause, nx_node_resume -- SIGSTOP (returns once it has stopped), SIGCONT */
int nx_node_pause(struct nx_node *nd);
int nx_node_resume(struct nx_node *nd);

/* nx_node_state -- the process state letter from /proc (R, S, T, ...), '?' if gone */
char nx_node_state(const struct nx_node *nd);

/*
 * nx_node_cli -- run "rdax --server URL --timeout @timeout_s ARGS..." from
 * the calling process's namespace (the hub); list ends with NULL. Returns
 * as hx_run_argv.
 */
int nx_node_cli(const struct nx_node *nd, unsigned timeout_s, const void *in, size_t in_len,
		struct hx_run *r, ...) __attribute__((sentinel));

/*
 * nx_http_get -- GET @url (http://IPV4:PORT/PATH) from the calling process's
 * namespace; the body (NUL-terminated, at most @len - 1 bytes) into @buf.
 * Returns the body's length, or -errno (-EPROTO: not an HTTP 200 answer).
 */
long nx_http_get(const char *url, char *buf, size_t len);

#endif
