/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_tls.c -- RDAX_IT_TLS=psk: every daemon of a run behind TLS (harness.h)
 *
 * The daemon runs with --tls require and a PSK file made for it; a
 * tls_proxy (tests/tls/tls_proxy.c) per listener turns the test's plaintext
 * into TLS, so d->port, d->url and the ready line's nbd:// port name the
 * proxies and every test sends its frames -- bad ones included -- through
 * rdaxd's TLS wire without knowing it.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TLS_PROXY_PATH
#error "TLS_PROXY_PATH (tests/tls/tls_proxy) must be defined by the build"
#endif

bool hx_tls(void)
{
	const char *e = getenv("RDAX_IT_TLS");
	return e && strcmp(e, "psk") == 0;
}

int hx_tls_prepare(struct hx_daemon *d)
{
	snprintf(d->tls_psk, sizeof(d->tls_psk), "%s/tls.psk", d->dir);
	uint8_t key[32];
	uint64_t seed = (uint64_t)hx_now_ms() ^ ((uint64_t)getpid() << 32);
	for (size_t i = 0; i < sizeof(key); i += 8) {
		uint64_t v = hx_splitmix64(&seed);
		memcpy(key + i, &v, 8);
	}
	char line[16 + 2 * sizeof(key) + 2];
	int n = snprintf(line, sizeof(line), "harness:");
	for (size_t i = 0; i < sizeof(key); i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%02x", key[i]);
	line[n++] = '\n';
	return hx_write_file(d->tls_psk, line, (size_t)n);
}

/* proxy_start -- a tls_proxy to 127.0.0.1:@port; its pid in *pid, its port returned (or -errno) */
static int proxy_start(const struct hx_daemon *d, int port, bool nbd, pid_t *pid)
{
	char to[32];
	snprintf(to, sizeof(to), "127.0.0.1:%d", port);
	const char *argv[] = {TLS_PROXY_PATH,	    "--to", to, "--psk", d->tls_psk,
			      nbd ? "--nbd" : NULL, NULL};
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid_t p = fork();
	if (p < 0) {
		int ret = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return ret;
	}
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pipefd[1], 1);
		int log = open(d->log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (log >= 0)
			dup2(log, 2);
		execv(TLS_PROXY_PATH, (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	*pid = p;
	char buf[128];
	size_t have = 0;
	int ret = -ETIMEDOUT;
	int64_t deadline = hx_now_ms() + HX_READY_TIMEOUT_MS;
	while (hx_now_ms() < deadline && have < sizeof(buf) - 1) {
		struct pollfd pf = {.fd = pipefd[0], .events = POLLIN};
		if (poll(&pf, 1, 1000) <= 0)
			continue;
		ssize_t n = read(pipefd[0], buf + have, sizeof(buf) - 1 - have);
		if (n <= 0) {
			ret = -ECHILD;
			break;
		}
		have += (size_t)n;
		buf[have] = '\0';
		const char *r = strstr(buf, "tls_proxy: ready on ");
		if (r && strchr(r, '\n')) {
			ret = atoi(r + strlen("tls_proxy: ready on "));
			break;
		}
	}
	close(pipefd[0]);
	if (ret < 0) {
		kill(p, SIGKILL);
		waitpid(p, NULL, 0);
		*pid = 0;
		fprintf(stderr, "harness: tls_proxy to %s did not start\n", to);
	}
	return ret;
}

int hx_tls_front(struct hx_daemon *d)
{
	int port = proxy_start(d, d->port, false, &d->tls_proxy[0]);
	if (port < 0)
		return port;
	d->port = port;
	snprintf(d->url, sizeof(d->url), "tcp://127.0.0.1:%d", port);
	const char *nbd = strstr(d->ready_line, "nbd://127.0.0.1:");
	if (!nbd)
		return 0;
	int nport = atoi(nbd + strlen("nbd://127.0.0.1:"));
	int pport = proxy_start(d, nport, true, &d->tls_proxy[1]);
	if (pport < 0)
		return pport;
	/* the ready line names the proxy's port, which the NBD tests read */
	char line[sizeof(d->ready_line) + 16];
	const char *after = nbd + strlen("nbd://127.0.0.1:");
	after += strspn(after, "0123456789");
	int n = snprintf(line, sizeof(line), "%.*snbd://127.0.0.1:%d%s", (int)(nbd - d->ready_line),
			 d->ready_line, pport, after);
	if (n < 0 || (size_t)n >= sizeof(d->ready_line))
		return -ENAMETOOLONG;
	memcpy(d->ready_line, line, (size_t)n + 1);
	return 0;
}

void hx_tls_stop(struct hx_daemon *d)
{
	for (int i = 0; i < 2; i++) {
		if (d->tls_proxy[i] <= 0)
			continue;
		kill(d->tls_proxy[i], SIGKILL);
		waitpid(d->tls_proxy[i], NULL, 0);
		d->tls_proxy[i] = 0;
	}
}
