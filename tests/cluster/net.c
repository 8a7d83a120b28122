/* SPDX-License-Identifier: BSD-3-Clause */
/* net.c -- a private network of test nodes: network namespaces, a bridge, faults */
#include "net.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define IP_PATH	       "/usr/sbin/ip"
#define TC_PATH	       "/usr/sbin/tc"
#define IPTABLES_PATH  "/usr/sbin/iptables"
#define NETNS_DIR      "/run/netns"
#define NS_PREFIX      "rdaxc"
#define DELAY_READY_MS 10000

#ifndef NX_DELAY_PATH
#error "NX_DELAY_PATH (the nx_delay program) must be defined by the build"
#endif

/* The namespaces of this process's run, for the signal handler (paths under /run/netns). */
static char cleanup_paths[NX_MAX_NODES + 1][80];
static struct nx_net *cleanup_net;

/* run -- run a command (absolute argv[0], NULL-terminated list); 0 or -EIO (its stderr printed) */
static int run(const char *arg0, ...) __attribute__((sentinel));
static int run(const char *arg0, ...)
{
	const char *argv[32];
	int n = 0;
	va_list ap;
	va_start(ap, arg0);
	for (const char *a = arg0; a && n < 31; a = va_arg(ap, const char *))
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	struct hx_run r;
	int ret = hx_run_argv(argv, NULL, 0, &r);
	if (ret == 0 && r.status != 0) {
		fprintf(stderr, "net:");
		for (int i = 0; argv[i]; i++)
			fprintf(stderr, " %s", argv[i]);
		fprintf(stderr, ": exit %d: %s", r.status, r.err);
		ret = -EIO;
	}
	hx_run_free(&r);
	return ret;
}

/* run_out -- run a command and keep its stdout (malloc'd) in *out; 0 or -EIO */
static int run_out(char **out, const char *const argv[])
{
	struct hx_run r;
	*out = NULL;
	int ret = hx_run_argv(argv, NULL, 0, &r);
	if (ret == 0 && r.status != 0) {
		fprintf(stderr, "net: %s: exit %d: %s", argv[0], r.status, r.err);
		ret = -EIO;
	}
	if (ret == 0) {
		*out = r.out;
		r.out = NULL;
	}
	hx_run_free(&r);
	return ret;
}

/* on_signal -- async-signal-safe cleanup: what "ip netns del" does (detach, unlink), then die */
static void on_signal(int sig)
{
	for (unsigned i = 0; i <= NX_MAX_NODES; i++) {
		if (!cleanup_paths[i][0])
			continue;
		umount2(cleanup_paths[i], MNT_DETACH);
		unlink(cleanup_paths[i]);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void on_exit_cleanup(void)
{
	if (cleanup_net)
		nx_net_down(cleanup_net);
}

/* register_cleanup -- once per process: at exit and on fatal signals */
static void register_cleanup(struct nx_net *x)
{
	static bool done;
	cleanup_net = x;
	if (done)
		return;
	done = true;
	atexit(on_exit_cleanup);
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGABRT, &sa, NULL);
}

int nx_sweep_stale(void)
{
	DIR *d = opendir(NETNS_DIR);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		int pid;
		char rest[64];
		if (sscanf(de->d_name, NS_PREFIX "%d-%63s", &pid, rest) != 2 || pid <= 0)
			continue;
		if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
			continue; /* ours, or its run is still going */
		if (run(IP_PATH, "netns", "del", de->d_name, NULL) == 0) {
			fprintf(stderr, "net: removed namespace %s of a run that is gone\n",
				de->d_name);
			n++;
		}
	}
	closedir(d);
	return n;
}

const char *nx_host_addr(const struct nx_net *x)
{
	return x->isolated ? NX_HUB_ADDR : "127.0.0.1";
}

const char *nx_node_addr(const struct nx_net *x, unsigned i)
{
	return x->isolated ? x->node[i].addr : "127.0.0.1";
}

const char *nx_node_ns(const struct nx_net *x, unsigned i)
{
	return x->isolated ? x->node[i].ns : NULL;
}

/* enter_ns -- move the calling thread into namespace @name; 0 or -errno */
static int enter_ns(const char *name)
{
	char path[128];
	snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int ret = setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
	close(fd);
	return ret;
}

/* ns_add -- create namespace @name and remember it for cleanup in slot @slot */
static int ns_add(const char *name, unsigned slot)
{
	int ret = run(IP_PATH, "netns", "add", name, NULL);
	if (ret == 0)
		snprintf(cleanup_paths[slot], sizeof(cleanup_paths[slot]), NETNS_DIR "/%s", name);
	return ret;
}

/* build -- the hub, its bridge, and one veth per node */
static int build(struct nx_net *x)
{
	int ret = run(IP_PATH, "-n", x->hub, "link", "set", "lo", "up", NULL);
	if (!ret)
		ret = run(IP_PATH, "-n", x->hub, "link", "add", "br0", "type", "bridge", NULL);
	if (!ret)
		ret = run(IP_PATH, "-n", x->hub, "addr", "add", NX_HUB_ADDR "/24", "dev", "br0",
			  NULL);
	if (!ret)
		ret = run(IP_PATH, "-n", x->hub, "link", "set", "br0", "up", NULL);
	for (unsigned i = 0; !ret && i < x->n; i++) {
		struct nx_link *l = &x->node[i];
		char cidr[24];
		snprintf(l->ns, sizeof(l->ns), "%s-n%u", x->prefix, i + 1);
		snprintf(l->hub_if, sizeof(l->hub_if), "v%u", i + 1);
		snprintf(l->addr, sizeof(l->addr), "192.0.2.%u", 11 + i);
		snprintf(cidr, sizeof(cidr), "%s/24", l->addr);
		ret = ns_add(l->ns, i + 1);
		if (!ret)
			ret = run(IP_PATH, "-n", l->ns, "link", "set", "lo", "up", NULL);
		if (!ret)
			ret = run(IP_PATH, "-n", x->hub, "link", "add", l->hub_if, "type", "veth",
				  "peer", "name", "eth0", "netns", l->ns, NULL);
		if (!ret)
			ret = run(IP_PATH, "-n", x->hub, "link", "set", l->hub_if, "master", "br0",
				  "up", NULL);
		if (!ret)
			ret = run(IP_PATH, "-n", l->ns, "addr", "add", cidr, "dev", "eth0", NULL);
		if (!ret)
			ret = run(IP_PATH, "-n", l->ns, "link", "set", "eth0", "up", NULL);
	}
	return ret;
}

int nx_net_up(struct nx_net *x, const char *dir, unsigned nodes)
{
	memset(x, 0, sizeof(*x));
	x->orig_ns_fd = -1;
	if (nodes == 0 || nodes > NX_MAX_NODES)
		return -EINVAL;
	x->n = nodes;
	snprintf(x->dir, sizeof(x->dir), "%s", dir);
	snprintf(x->prefix, sizeof(x->prefix), NS_PREFIX "%d", (int)getpid());
	snprintf(x->hub, sizeof(x->hub), "%s-hub", x->prefix);
	nx_sweep_stale();
	register_cleanup(x);
	if (hx_rdma_addr()) {
		/* soft-RoCE's device is bound to an interface of this namespace (tests/vm) */
		snprintf(x->why, sizeof(x->why),
			 "RDMA run (RDAX_IT_RDMA): the nodes share this namespace's RDMA device, "
			 "on ports; no link, delay or loss faults");
		fprintf(stderr, "net: %s\n", x->why);
		return 0;
	}
	if (access(IP_PATH, X_OK) != 0 || ns_add(x->hub, 0) != 0) {
		snprintf(x->why, sizeof(x->why),
			 "network namespaces cannot be made here (%s): nodes on 127.0.0.1 ports, "
			 "no link, delay or loss faults",
			 geteuid() != 0 ? "not root" : "ip netns add failed");
		fprintf(stderr, "net: %s\n", x->why);
		return 0;
	}
	x->isolated = true;
	int ret = build(x);
	if (!ret) {
		x->orig_ns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		ret = x->orig_ns_fd < 0 ? -errno : enter_ns(x->hub);
	}
	if (ret) {
		nx_net_down(x);
		return ret < 0 ? ret : -EIO;
	}
	x->netfilter = access(IPTABLES_PATH, X_OK) == 0 && access(NX_DELAY_PATH, X_OK) == 0;
	if (!x->netfilter)
		snprintf(x->why, sizeof(x->why), "no %s or %s: no delay or loss faults",
			 IPTABLES_PATH, NX_DELAY_PATH);
	return 0;
}

void nx_net_down(struct nx_net *x)
{
	for (unsigned i = 0; i < x->n; i++)
		if (x->node[i].delay_pid > 0)
			nx_delay_stop(x, i, NULL);
	if (x->orig_ns_fd >= 0) {
		if (setns(x->orig_ns_fd, CLONE_NEWNET) < 0)
			fprintf(stderr, "net: back to the original namespace: %s\n",
				strerror(errno));
		close(x->orig_ns_fd);
		x->orig_ns_fd = -1;
	}
	for (unsigned i = 0; i <= NX_MAX_NODES; i++) {
		if (!cleanup_paths[i][0])
			continue;
		run(IP_PATH, "netns", "del", cleanup_paths[i] + strlen(NETNS_DIR "/"), NULL);
		cleanup_paths[i][0] = '\0';
	}
	x->isolated = false;
	if (cleanup_net == x)
		cleanup_net = NULL;
}

int nx_run_in(const struct nx_net *x, unsigned i, int (*fn)(void *arg), void *arg)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (x->isolated && enter_ns(x->node[i].ns) < 0)
			_exit(126);
		_exit(fn(arg) & 0xff);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int nx_link_down(struct nx_net *x, unsigned i)
{
	if (!x->isolated)
		return -EOPNOTSUPP;
	if (x->node[i].down)
		return -EALREADY;
	int ret = run(IP_PATH, "-n", x->hub, "link", "set", x->node[i].hub_if, "down", NULL);
	if (!ret)
		x->node[i].down = true;
	return ret;
}

int nx_link_up(struct nx_net *x, unsigned i)
{
	if (!x->isolated)
		return -EOPNOTSUPP;
	if (!x->node[i].down)
		return -EALREADY;
	int ret = run(IP_PATH, "-n", x->hub, "link", "set", x->node[i].hub_if, "up", NULL);
	if (!ret)
		x->node[i].down = false;
	return ret;
}

/* log_find -- the first line of @path containing @needle, copied into @line; true if found */
static bool log_find(const char *path, const char *needle, char *line, size_t len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool found = false;
	while (!found && fgets(line, (int)len, f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* iptables_chain -- iptables in node @i's namespace: @op on @chain with the rule arguments that follow */
static int iptables_chain(const struct nx_net *x, unsigned i, const char *op, const char *chain,
			  const char *const *rule)
{
	const char *argv[32] = {IP_PATH,       "netns", "exec", x->node[i].ns,
				IPTABLES_PATH, "-w",	op,	chain};
	int n = 8;
	for (; *rule && n < 31; rule++)
		argv[n++] = *rule;
	argv[n] = NULL;
	char *out;
	int ret = run_out(&out, argv);
	free(out);
	return ret;
}

/* iptables_in -- a rule on what node @i sends (its OUTPUT chain) */
static int iptables_in(const struct nx_net *x, unsigned i, const char *op, const char *const *rule)
{
	return iptables_chain(x, i, op, "OUTPUT", rule);
}

/*
 * block_rule -- the rules of nx_block_*: node @i's TCP to @addr (port @port,
 * 0: any) dropped, and what comes back from there. Both ways: with only the
 * way out dropped, what the peer had already sent (an etcd watch event) still
 * reaches the node's socket, so the node could learn what a partition must
 * keep from it.
 */
static int block_rule(struct nx_net *x, unsigned i, const char *op, const char *addr, int port)
{
	if (!x->isolated || !x->netfilter)
		return -EOPNOTSUPP;
	char p[8];
	snprintf(p, sizeof(p), "%d", port);
	const char *const out_port[] = {"-d", addr, "-p", "tcp", "--dport", p, "-j", "DROP", NULL};
	const char *const in_port[] = {"-s", addr, "-p", "tcp", "--sport", p, "-j", "DROP", NULL};
	const char *const out_any[] = {"-d", addr, "-j", "DROP", NULL};
	const char *const in_any[] = {"-s", addr, "-j", "DROP", NULL};
	int ret = iptables_chain(x, i, op, "OUTPUT", port ? out_port : out_any);
	int in = iptables_chain(x, i, op, "INPUT", port ? in_port : in_any);
	if (in && !ret && strcmp(op, "-A") == 0) /* not half a partition */
		iptables_chain(x, i, "-D", "OUTPUT", port ? out_port : out_any);
	return ret ? ret : in;
}

int nx_block_start(struct nx_net *x, unsigned i, const char *addr, int port)
{
	return block_rule(x, i, "-A", addr, port);
}

int nx_block_stop(struct nx_net *x, unsigned i, const char *addr, int port)
{
	return block_rule(x, i, "-D", addr, port);
}

int nx_rate_set(struct nx_net *x, unsigned i, unsigned mbit)
{
	if (!x->isolated)
		return -EOPNOTSUPP;
	struct nx_link *l = &x->node[i];
	if (mbit == 0)
		return run(IP_PATH, "netns", "exec", x->hub, TC_PATH, "qdisc", "del", "dev",
			   l->hub_if, "root", NULL);
	/*
	 * The bucket holds 4 ms at the rate (tbf refills by the timer; a
	 * smaller one caps the rate below what was asked), at least one
	 * GSO packet (64 KiB).
	 */
	char rate[24], burst[24];
	snprintf(rate, sizeof(rate), "%umbit", mbit);
	unsigned long b = (unsigned long)mbit * 1000000UL / 8 / 250;
	snprintf(burst, sizeof(burst), "%lu", b < 65536 ? 65536 : b);
	return run(IP_PATH, "netns", "exec", x->hub, TC_PATH, "qdisc", "replace", "dev",
		   l->hub_if, "root", "tbf", "rate", rate, "burst", burst, "latency", "50ms",
		   NULL);
}

int nx_delay_start(struct nx_net *x, unsigned i, unsigned ms)
{
	if (!x->isolated || !x->netfilter)
		return -EOPNOTSUPP;
	struct nx_link *l = &x->node[i];
	if (l->delay_pid > 0)
		return -EALREADY;
	char queue[8], delay[16];
	snprintf(queue, sizeof(queue), "%u", i + 1);
	snprintf(delay, sizeof(delay), "%u", ms);
	snprintf(l->delay_log, sizeof(l->delay_log), "%s/nx_delay-n%u.log", x->dir, i + 1);
	unlink(l->delay_log);
	int logfd = open(l->delay_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		close(logfd);
		return -errno;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(logfd, 1);
		dup2(logfd, 2);
		if (enter_ns(l->ns) < 0)
			_exit(126);
		execl(NX_DELAY_PATH, NX_DELAY_PATH, "--queue", queue, "--delay-ms", delay,
		      (char *)NULL);
		_exit(127);
	}
	close(logfd);
	l->delay_pid = pid;
	l->delay_ms = ms;
	char line[256];
	int64_t deadline = hx_now_ms() + DELAY_READY_MS;
	while (!log_find(l->delay_log, "nx_delay: ready", line, sizeof(line))) {
		int status;
		if (waitpid(pid, &status, WNOHANG) == pid || hx_now_ms() > deadline) {
			fprintf(stderr, "net: nx_delay in %s did not start\n", l->ns);
			l->delay_pid = waitpid(pid, &status, WNOHANG) == 0 ? pid : 0;
			nx_delay_stop(x, i, NULL);
			return -EIO;
		}
		poll(NULL, 0, 20);
	}
	/* --queue-bypass: should nx_delay die, packets pass instead of being dropped */
	const char *const rule[] = {"-o",  "eth0",	     "-j", "NFQUEUE", "--queue-num",
				    queue, "--queue-bypass", NULL};
	int ret = iptables_in(x, i, "-A", rule);
	if (ret)
		nx_delay_stop(x, i, NULL);
	return ret;
}

int nx_delay_stop(struct nx_net *x, unsigned i, uint64_t *packets)
{
	struct nx_link *l = &x->node[i];
	if (l->delay_pid <= 0)
		return -EALREADY;
	char queue[8];
	snprintf(queue, sizeof(queue), "%u", i + 1);
	const char *const rule[] = {"-o",  "eth0",	     "-j", "NFQUEUE", "--queue-num",
				    queue, "--queue-bypass", NULL};
	iptables_in(x, i, "-D", rule); /* may not be there if the start failed */
	kill(l->delay_pid, SIGTERM);
	int status;
	while (waitpid(l->delay_pid, &status, 0) < 0 && errno == EINTR)
		;
	l->delay_pid = 0;
	char line[256];
	uint64_t held = 0;
	int ret = 0;
	if (log_find(l->delay_log, "nx_delay: held", line, sizeof(line)))
		sscanf(line, "nx_delay: held %" SCNu64, &held);
	else
		ret = -EIO;
	if (packets)
		*packets = held;
	return ret;
}

int nx_loss_start(struct nx_net *x, unsigned i, unsigned every, unsigned packet)
{
	if (!x->isolated || !x->netfilter)
		return -EOPNOTSUPP;
	struct nx_link *l = &x->node[i];
	if (l->loss)
		return -EALREADY;
	if (every < 1 || packet >= every)
		return -EINVAL;
	char e[12], p[12];
	snprintf(e, sizeof(e), "%u", every);
	snprintf(p, sizeof(p), "%u", packet);
	/* a comment marks the rule, so stop finds it without knowing N and P */
	const char *const rule[] = {
	    "-o", "eth0", "-m",	     "statistic", "--mode",    "nth", "--every", e,   "--packet",
	    p,	  "-m",	  "comment", "--comment", "rdax-loss", "-j",  "DROP",	 NULL};
	int ret = iptables_in(x, i, "-A", rule);
	if (!ret)
		l->loss = true;
	return ret;
}

int nx_loss_stop(struct nx_net *x, unsigned i, uint64_t *dropped)
{
	struct nx_link *l = &x->node[i];
	if (!l->loss)
		return -EALREADY;
	/* the rule with its counters, as iptables-save writes it: [pkts:bytes] -A OUTPUT ... */
	const char *const argv[] = {IP_PATH, "netns", "exec",	l->ns, IPTABLES_PATH,
				    "-w",    "-S",    "OUTPUT", "-v",  NULL};
	char *out;
	int ret = run_out(&out, argv);
	if (ret)
		return ret;
	uint64_t pkts = 0;
	char *line = strstr(out, "rdax-loss");
	char spec[512] = "";
	if (line) {
		while (line > out && line[-1] != '\n')
			line--;
		char *end = strchr(line, '\n');
		snprintf(spec, sizeof(spec), "%.*s", end ? (int)(end - line) : (int)strlen(line),
			 line);
		char *c = strstr(spec, " -c ");
		if (c)
			sscanf(c, " -c %" SCNu64, &pkts);
	}
	free(out);
	if (!spec[0])
		return -ENOENT;
	/* delete by the rule's number: the first OUTPUT rule carrying the comment */
	const char *const list[] = {IP_PATH, "netns", "exec",	l->ns, IPTABLES_PATH,
				    "-w",    "-L",    "OUTPUT", "-n",  "--line-numbers",
				    NULL};
	ret = run_out(&out, list);
	if (ret)
		return ret;
	char num[12] = "";
	for (char *s = strtok(out, "\n"); s; s = strtok(NULL, "\n"))
		if (strstr(s, "rdax-loss")) {
			snprintf(num, sizeof(num), "%u", (unsigned)strtoul(s, NULL, 10));
			break;
		}
	free(out);
	ret = run(IP_PATH, "netns", "exec", l->ns, IPTABLES_PATH, "-w", "-D", "OUTPUT", num, NULL);
	if (!ret)
		l->loss = false;
	if (dropped)
		*dropped = pkts;
	return ret;
}

int nx_probe_tcp(const char *addr, int port, int timeout_ms, int64_t *rtt_us)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		return -EINVAL;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int ret = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : -errno;
	if (ret == -EINPROGRESS) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int r = poll(&p, 1, timeout_ms);
		if (r == 0) {
			ret = -ETIMEDOUT;
		} else if (r < 0) {
			ret = -errno;
		} else {
			int err = 0;
			socklen_t len = sizeof(err);
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
			ret = -err;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fd);
	if (rtt_us)
		*rtt_us = (t1.tv_sec - t0.tv_sec) * 1000000LL + (t1.tv_nsec - t0.tv_nsec) / 1000;
	return ret;
}
