/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd_fixture.c -- start, stop, pause and restart a real etcd for a test */
#include "etcd_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define EF_ETCD_PATH "/usr/bin/etcd"
/* the line etcd 3.4 logs once it accepts client requests (capnslog and zap alike) */
#define EF_READY_TEXT "ready to serve client requests"

static off_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : 0;
}

/* log_has -- does @path contain @needle after byte @from? */
static bool log_has(const char *path, off_t from, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool found = false;
	char line[4096];
	if (fseeko(f, from, SEEK_SET) == 0)
		while (!found && fgets(line, sizeof(line), f))
			found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* member_spawn -- fork/exec one etcd member; stdout and stderr appended to its log */
static int member_spawn(struct ef_cluster *e, struct ef_member *m, bool fresh)
{
	char listen_client[96], listen_peer[96];
	snprintf(listen_client, sizeof(listen_client), "http://%s:%d", e->host, m->client_port);
	snprintf(listen_peer, sizeof(listen_peer), "http://%s:%d", e->host, m->peer_port);
	const char *argv[] = {EF_ETCD_PATH,
			      "--name",
			      m->name,
			      "--data-dir",
			      m->data_dir,
			      "--listen-client-urls",
			      listen_client,
			      "--advertise-client-urls",
			      listen_client,
			      "--listen-peer-urls",
			      listen_peer,
			      "--initial-advertise-peer-urls",
			      listen_peer,
			      "--initial-cluster",
			      e->initial_cluster,
			      "--initial-cluster-state",
			      fresh ? "new" : "existing",
			      "--initial-cluster-token",
			      "rdax-test",
			      "--heartbeat-interval",
			      "50",
			      "--election-timeout",
			      "500",
			      "--snapshot-count",
			      "10000",
			      NULL};
	int logfd = open(m->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int ret = -errno;
		close(logfd);
		return ret;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int nul = open("/dev/null", O_RDONLY);
		dup2(nul, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		signal(SIGPIPE, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		close_range(3, ~0U, 0);
		/* etcd reads ETCD_* variables as flags: none from the test's environment */
		unsetenv("ETCD_NAME");
		unsetenv("ETCD_DATA_DIR");
		execv(argv[0], (char *const *)argv);
		dprintf(2, "etcd_fixture: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(logfd);
	m->pid = pid;
	m->paused = false;
	return 0;
}

/* reap -- wait up to @ms for @m to exit; 0 or -ETIMEDOUT */
static int reap(struct ef_member *m, int ms)
{
	int64_t deadline = hx_now_ms() + ms;
	for (;;) {
		int status;
		pid_t r = waitpid(m->pid, &status, WNOHANG);
		if (r == m->pid || (r < 0 && errno == ECHILD)) {
			m->pid = 0;
			return 0;
		}
		if (hx_now_ms() >= deadline)
			return -ETIMEDOUT;
		poll(NULL, 0, 10);
	}
}

/* wait_ready -- until every member in @mask has logged readiness since its @from offset */
static int wait_ready(struct ef_cluster *e, unsigned mask, const off_t *from)
{
	int64_t deadline = hx_now_ms() + EF_READY_TIMEOUT_MS;
	unsigned ready = 0;
	while (ready != mask) {
		for (unsigned i = 0; i < e->n; i++) {
			struct ef_member *m = &e->m[i];
			if (!(mask & (1U << i)) || (ready & (1U << i)))
				continue;
			int status;
			if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
				m->pid = 0;
				fprintf(stderr, "etcd_fixture: %s exited before it was ready\n",
					m->name);
				ef_dump_logs(e);
				return -ECHILD;
			}
			if (log_has(m->log_path, from[i], EF_READY_TEXT))
				ready |= 1U << i;
		}
		if (ready == mask)
			break;
		if (hx_now_ms() >= deadline) {
			fprintf(stderr, "etcd_fixture: not ready after %d ms\n",
				EF_READY_TIMEOUT_MS);
			ef_dump_logs(e);
			return -ETIMEDOUT;
		}
		poll(NULL, 0, 20);
	}
	return 0;
}

int ef_start(struct ef_cluster *e, const char *dir, unsigned members, const char *host)
{
	memset(e, 0, sizeof(*e));
	if (members == 0 || members > EF_MAX_MEMBERS)
		return -EINVAL;
	e->n = members;
	snprintf(e->host, sizeof(e->host), "%s", host ? host : "127.0.0.1");
	snprintf(e->dir, sizeof(e->dir), "%s", dir);
	size_t ic = 0, sp = (size_t)snprintf(e->spec, sizeof(e->spec), "etcd://");
	for (unsigned i = 0; i < members; i++) {
		struct ef_member *m = &e->m[i];
		m->client_port = hx_free_port();
		m->peer_port = hx_free_port();
		if (m->client_port < 0 || m->peer_port < 0 || m->client_port == m->peer_port)
			return m->client_port < 0 ? m->client_port : -EADDRINUSE;
		snprintf(m->name, sizeof(m->name), "etcd%u", i);
		snprintf(m->data_dir, sizeof(m->data_dir), "%s/etcd%u.data", dir, i);
		snprintf(m->log_path, sizeof(m->log_path), "%s/etcd%u.log", dir, i);
		snprintf(m->client_url, sizeof(m->client_url), "http://%s:%d", e->host,
			 m->client_port);
		ic += (size_t)snprintf(e->initial_cluster + ic, sizeof(e->initial_cluster) - ic,
				       "%s%s=http://%s:%d", i ? "," : "", m->name, e->host,
				       m->peer_port);
		sp += (size_t)snprintf(e->spec + sp, sizeof(e->spec) - sp, "%s%s:%d", i ? "," : "",
				       e->host, m->client_port);
	}
	off_t from[EF_MAX_MEMBERS] = {0};
	for (unsigned i = 0; i < members; i++) {
		int ret = member_spawn(e, &e->m[i], true);
		if (ret) {
			ef_stop(e);
			return ret;
		}
	}
	int ret = wait_ready(e, (1U << members) - 1, from);
	if (ret)
		ef_stop(e);
	return ret;
}

int ef_member_stop(struct ef_cluster *e, unsigned i)
{
	struct ef_member *m = &e->m[i];
	if (m->pid <= 0)
		return 0;
	if (m->paused)
		kill(m->pid, SIGCONT);
	kill(m->pid, SIGTERM);
	if (reap(m, EF_STOP_TIMEOUT_MS) == 0)
		return 0;
	fprintf(stderr, "etcd_fixture: %s still running after SIGTERM: killing it\n", m->name);
	ef_member_kill(e, i);
	return -ETIMEDOUT;
}

int ef_member_kill(struct ef_cluster *e, unsigned i)
{
	struct ef_member *m = &e->m[i];
	if (m->pid <= 0)
		return 0;
	kill(m->pid, SIGKILL);
	return reap(m, EF_STOP_TIMEOUT_MS);
}

int ef_member_pause(struct ef_cluster *e, unsigned i)
{
	struct ef_member *m = &e->m[i];
	if (m->pid <= 0 || kill(m->pid, SIGSTOP) < 0)
		return -ESRCH;
	/*
	 * Wait until it has stopped: kill() returns before every thread of a busy
	 * member on a loaded machine has, and a request answered meanwhile would
	 * make "paused" untrue for the caller's next call.
	 */
	int st;
	while (waitpid(m->pid, &st, WUNTRACED) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFSTOPPED(st))
		return -ECHILD;
	m->paused = true;
	return 0;
}

int ef_member_resume(struct ef_cluster *e, unsigned i)
{
	struct ef_member *m = &e->m[i];
	if (m->pid <= 0 || kill(m->pid, SIGCONT) < 0)
		return -ESRCH;
	m->paused = false;
	return 0;
}

int ef_member_restart(struct ef_cluster *e, unsigned i)
{
	struct ef_member *m = &e->m[i];
	if (m->pid > 0)
		return -EBUSY;
	off_t from[EF_MAX_MEMBERS] = {0};
	from[i] = file_size(m->log_path);
	int ret = member_spawn(e, m, false);
	return ret ? ret : wait_ready(e, 1U << i, from);
}

void ef_stop(struct ef_cluster *e)
{
	for (unsigned i = 0; i < e->n; i++)
		ef_member_stop(e, i);
}

void ef_dump_logs(const struct ef_cluster *e)
{
	for (unsigned i = 0; i < e->n; i++) {
		const struct ef_member *m = &e->m[i];
		int fd = open(m->log_path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		off_t size = lseek(fd, 0, SEEK_END);
		off_t from = size > 4096 ? size - 4096 : 0;
		lseek(fd, from, SEEK_SET);
		fprintf(stderr, "---- %s log (last %lld bytes) ----\n", m->name,
			(long long)(size - from));
		char buf[4096];
		ssize_t n;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			fwrite(buf, 1, (size_t)n, stderr);
		fprintf(stderr, "---- end of %s log ----\n", m->name);
		close(fd);
	}
}
