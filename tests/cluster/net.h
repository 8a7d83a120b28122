/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net.h -- a private network of test nodes: network namespaces, a bridge, faults
 *
 * nx_net_up() builds, for one test run:
 *
 *   hub namespace  "rdaxc<pid>-hub": bridge br0 = 192.0.2.1/24
 *     ├─ veth v1 ── eth0 192.0.2.11/24 in "rdaxc<pid>-n1"
 *     ├─ veth v2 ── eth0 192.0.2.12/24 in "rdaxc<pid>-n2"
 *     └─ ...
 *
 * and moves the calling process into the hub namespace, which plays the
 * host: etcd listens there on 192.0.2.1 (reachable from every node over
 * the bridge) and the test's own clients talk to the nodes' addresses from
 * there. Nothing is added to the machine's own (root) namespace -- no
 * bridge, no address, no route -- so runs of several engineers or CI
 * jobs on one machine never collide, and deleting the run's namespaces
 * removes everything (veths, bridge, filter rules). Addresses are from
 * 192.0.2.0/24 (TEST-NET-1) only.
 *
 * Faults on node i's link, all reversible:
 *  - nx_link_down/up: the hub side of its veth down (a partition of the
 *    node from everything, both directions);
 *  - nx_delay_start/stop: every packet the node sends is held D ms by
 *    nx_delay (an NFQUEUE program) before the kernel sends it;
 *  - nx_loss_start/stop: the node drops every Nth packet it sends,
 *    starting with the Pth (iptables statistic nth: deterministic, so a
 *    seed reproduces it; netem's random loss cannot be seeded).
 * tc netem would be the usual tool for the last two, but this machine's
 * kernel is built without it (CONFIG_NET_SCH_NETEM is not set), so delay
 * and loss go through netfilter, which it has.
 *
 * Fallback: where namespaces cannot be made (not root, no CAP_SYS_ADMIN),
 * nx_net_up() says why, sets isolated = false and every node address is
 * 127.0.0.1 (the nodes then differ by port); link faults return
 * -EOPNOTSUPP. Where iptables or NFQUEUE is missing, delay and loss do.
 *
 * Cleanup: nx_net_down() (idempotent) stops the delayers and deletes the
 * namespaces; it also runs at exit and on SIGINT/SIGTERM/SIGHUP/SIGABRT,
 * and nx_sweep_stale() deletes the namespaces of runs whose process is
 * gone (a SIGKILLed test), which every nx_net_up() and the ctest cleanup
 * fixture do first.
 *
 * Thread safety: one nx_net per process, used from the main thread, which
 * calls nx_net_up() before it starts any thread (setns() moves only the
 * calling thread; later threads and children inherit the namespace).
 */
#ifndef RDAX_TEST_NET_H
#define RDAX_TEST_NET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define NX_MAX_NODES 8
#define NX_HUB_ADDR  "192.0.2.1"

struct nx_link {
	char ns[40];	 /* the node's namespace */
	char hub_if[16]; /* its veth's hub side */
	char addr[16];	 /* its address */
	bool down;
	pid_t delay_pid; /* nx_delay, 0 if none */
	unsigned delay_ms;
	char delay_log[320];
	bool loss;
};

struct nx_net {
	bool isolated;	/* namespaces in use (else loopback fallback) */
	bool netfilter; /* delay and loss available */
	char why[256];	/* what is not available, and why ("" if all is) */
	char prefix[24];
	char hub[40];
	char dir[256];
	unsigned n;
	struct nx_link node[NX_MAX_NODES];
	int orig_ns_fd; /* the namespace the process came from, -1 if not moved */
};

/*
 * nx_net_up -- build the network for @nodes nodes (1..NX_MAX_NODES) and move
 * the process into its hub, or fall back to loopback (x->isolated false,
 * x->why says why). @dir holds helper logs. Returns 0 (either way), or
 * -errno when namespaces could be made but the network could not be
 * completed (then everything made is removed).
 */
int nx_net_up(struct nx_net *x, const char *dir, unsigned nodes);

/* nx_net_down -- stop the delayers, delete the namespaces, return to the original namespace */
void nx_net_down(struct nx_net *x);

/* nx_sweep_stale -- delete namespaces left by runs whose process is gone; the number deleted */
int nx_sweep_stale(void);

/* nx_host_addr -- where the host's services (etcd) listen: 192.0.2.1, or 127.0.0.1 */
const char *nx_host_addr(const struct nx_net *x);

/* nx_node_addr -- node @i's address (0-based): 192.0.2.(11+i), or 127.0.0.1 */
const char *nx_node_addr(const struct nx_net *x, unsigned i);

/* nx_node_ns -- node @i's namespace name, NULL in the loopback fallback */
const char *nx_node_ns(const struct nx_net *x, unsigned i);

/*
 * nx_run_in -- run @fn(@arg) in a child process inside node @i's namespace
 * (the hub's in the fallback); returns its exit code (fn's return value),
 * or -errno. For checks such as "etcd is reachable from this node".
 */
int nx_run_in(const struct nx_net *x, unsigned i, int (*fn)(void *arg), void *arg);

/* Faults on node @i's link; 0, -EOPNOTSUPP (unavailable: x->why), -EALREADY, -errno. */
int nx_link_down(struct nx_net *x, unsigned i);
int nx_link_up(struct nx_net *x, unsigned i);
int nx_delay_start(struct nx_net *x, unsigned i, unsigned ms);
/* *packets (may be NULL): how many packets the delayer held */
int nx_delay_stop(struct nx_net *x, unsigned i, uint64_t *packets);
/*
 * nx_block_start/stop -- node @i's packets to @addr (TCP port @port only; 0:
 * all) are dropped, and those from there: a partition of the node from that
 * peer or service alone (from etcd only, from its replicas only) while others
 * still reach it
 */
int nx_block_start(struct nx_net *x, unsigned i, const char *addr, int port);
int nx_block_stop(struct nx_net *x, unsigned i, const char *addr, int port);
/* drop packet P, P + N, P + 2N, ... of those node @i sends (1 <= @every, @packet < @every) */
int nx_loss_start(struct nx_net *x, unsigned i, unsigned every, unsigned packet);
/* *dropped (may be NULL): how many packets the rule dropped */
int nx_loss_stop(struct nx_net *x, unsigned i, uint64_t *dropped);

/*
 * nx_rate_set -- what the hub sends to node @i (the bridge's traffic to it:
 * the hub's and the other nodes') leaves at most @mbit Mbit/s (a tbf qdisc
 * on the hub side of its veth: a link of that bandwidth, whose floor is the
 * link and not the CPU's copies); @mbit 0 takes the limit away.
 */
int nx_rate_set(struct nx_net *x, unsigned i, unsigned mbit);

/*
 * nx_probe_tcp -- try a TCP connect to @addr:@port from the calling
 * process's namespace within @timeout_ms; 0 if it connected, -errno
 * (-ETIMEDOUT, -ECONNREFUSED, -EHOSTUNREACH ...). *rtt_us (may be NULL)
 * gets the connect time in microseconds.
 */
int nx_probe_tcp(const char *addr, int port, int timeout_ms, int64_t *rtt_us);

#endif
