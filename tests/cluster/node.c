/* SPDX-License-Identifier: BSD-3-Clause */
/* node.c -- an rdaxd node of a test cluster, in its network namespace */
#include "node.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

/* with_wrapper -- run @start(@nd) with RDAXD_WRAPPER entering the node's namespace */
static int with_wrapper(struct nx_node *nd, int (*start)(struct nx_node *nd))
{
	const char *ns = nx_node_ns(nd->net, nd->i);
	if (!ns)
		return start(nd);
	const char *old = getenv("RDAXD_WRAPPER");
	char *saved = old ? strdup(old) : NULL;
	char wrap[512];
	/* a tool the run asked for (valgrind) still wraps rdaxd, inside the namespace */
	snprintf(wrap, sizeof(wrap), "/usr/sbin/ip netns exec %s%s%s", ns, saved ? " " : "",
		 saved ? saved : "");
	setenv("RDAXD_WRAPPER", wrap, 1);
	int ret = start(nd);
	if (saved)
		setenv("RDAXD_WRAPPER", saved, 1);
	else
		unsetenv("RDAXD_WRAPPER");
	free(saved);
	return ret;
}

/* set_url -- the address clients use */
static void set_url(struct nx_node *nd)
{
	if (nx_node_ns(nd->net, nd->i))
		snprintf(nd->url, sizeof(nd->url), "tcp://%s:%d", nx_node_addr(nd->net, nd->i),
			 NX_NODE_PORT);
	else
		snprintf(nd->url, sizeof(nd->url), "%s", nd->d.url);
}

const char *nx_node_ns_size = "64M";

static int first_start(struct nx_node *nd)
{
	struct hx_daemon_opts o = {.mode = "sim", .ns_size = nx_node_ns_size};
	unsigned n = 0;
	if (nx_node_ns(nd->net, nd->i)) {
		o.extra_args[n++] = "--listen";
		o.extra_args[n++] = nd->listen;
	}
	for (unsigned k = 0; k < 6 && nd->args[k][0]; k++)
		o.extra_args[n++] = nd->args[k];
	return hx_daemon_start(&nd->d, nd->ns_dir, &o);
}

static int again(struct nx_node *nd)
{
	return hx_daemon_restart(&nd->d);
}

int nx_node_start(struct nx_node *nd, struct nx_net *x, unsigned i, const char *dir)
{
	return nx_node_start_args(nd, x, i, dir, NULL);
}

int nx_node_start_args(struct nx_node *nd, struct nx_net *x, unsigned i, const char *dir,
		       const char *const *args)
{
	memset(nd, 0, sizeof(*nd));
	for (unsigned k = 0; args && k < 6 && args[k]; k++)
		snprintf(nd->args[k], sizeof(nd->args[k]), "%s", args[k]);
	nd->net = x;
	nd->i = i;
	snprintf(nd->ns_dir, sizeof(nd->ns_dir), "%s", dir);
	snprintf(nd->listen, sizeof(nd->listen), "tcp://%s:%d", nx_node_addr(x, i), NX_NODE_PORT);
	int ret = with_wrapper(nd, first_start);
	if (ret == 0)
		set_url(nd);
	return ret;
}

int nx_node_restart(struct nx_node *nd)
{
	int ret = with_wrapper(nd, again);
	if (ret == 0)
		set_url(nd);
	nd->paused = false;
	return ret;
}

int nx_node_stop(struct nx_node *nd)
{
	if (nd->paused)
		nx_node_resume(nd);
	return hx_daemon_stop(&nd->d);
}

int nx_node_kill(struct nx_node *nd)
{
	nd->paused = false;
	return hx_daemon_kill(&nd->d);
}

int nx_node_pause(struct nx_node *nd)
{
	if (nd->d.pid <= 0 || kill(nd->d.pid, SIGSTOP) < 0)
		return -ESRCH;
	/*
	 * Wait until it has stopped: kill() can return while a thread of a busy
	 * rdaxd still answers a request, and a test that pauses a node relies on
	 * it answering nothing from here on.
	 */
	int st;
	while (waitpid(nd->d.pid, &st, WUNTRACED) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFSTOPPED(st))
		return -ECHILD;
	nd->paused = true;
	return 0;
}

int nx_node_resume(struct nx_node *nd)
{
	if (nd->d.pid <= 0 || kill(nd->d.pid, SIGCONT) < 0)
		return -ESRCH;
	nd->paused = false;
	return 0;
}

char nx_node_state(const struct nx_node *nd)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)nd->d.pid);
	FILE *f = nd->d.pid > 0 ? fopen(path, "r") : NULL;
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "pid (comm) S ...": the state follows the last ')' */
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

int nx_node_cli(const struct nx_node *nd, unsigned timeout_s, const void *in, size_t in_len,
		struct hx_run *r, ...)
{
	const char *argv[40];
	char t[16];
	int n = 0;
	snprintf(t, sizeof(t), "%u", timeout_s);
	argv[n++] = RDAX_CLI_PATH;
	argv[n++] = "--server";
	argv[n++] = nd->url;
	argv[n++] = "--timeout";
	argv[n++] = t;
	va_list ap;
	va_start(ap, r);
	const char *a;
	while ((a = va_arg(ap, const char *)) != NULL && n < 39)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	return hx_run_argv(argv, in, in_len, r);
}

long nx_http_get(const char *url, char *buf, size_t len)
{
	char host[64], path[128] = "/";
	unsigned port;
	if (len < 2 || sscanf(url, "http://%63[0-9.]:%u%127s", host, &port, path) < 2)
		return -EINVAL;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -EINVAL;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct timeval tv = {.tv_sec = 10};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, host);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || write(fd, req, (size_t)n) != n) {
		int err = -errno;
		close(fd);
		return err;
	}
	size_t got = 0;
	ssize_t r;
	while (got + 1 < len && (r = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)r;
	close(fd);
	buf[got] = '\0';
	char *body = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 8, " 200", 4) != 0 || !body)
		return -EPROTO;
	body += 4;
	size_t blen = got - (size_t)(body - buf);
	memmove(buf, body, blen + 1);
	return (long)blen;
}
