/* SPDX-License-Identifier: BSD-3-Clause */
/* harness.c -- start/stop the real rdaxd, run the real rdax command */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int64_t hx_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t hx_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void hx_pattern(void *buf, size_t len, uint64_t seed, uint64_t off)
{
	uint8_t *p = buf;
	size_t i = 0;
	while (i < len) {
		uint64_t pos = off + i;
		uint64_t s = seed * 0x2545f4914f6cdd1dULL + (pos >> 3);
		uint64_t w = hx_splitmix64(&s);
		for (unsigned b = (unsigned)(pos & 7); b < 8 && i < len; b++, i++)
			p[i] = (uint8_t)(w >> (8 * b));
	}
}

const char *hx_tcp_host(void)
{
	const char *a = getenv("RDAX_IT_TCP_HOST");
	return a && *a ? a : "127.0.0.1";
}

const char *hx_rdma_addr(void)
{
	const char *a = getenv("RDAX_IT_RDMA");
	return a && *a ? a : NULL;
}

unsigned hx_scale(unsigned n, unsigned rdma_n)
{
	return hx_rdma_addr() ? rdma_n : n;
}

/* The daemon struct that has RDAX_IT_NS: one device, one daemon at a time. */
static const struct hx_daemon *devdax_owner;

/*
 * run_devdax -- RDAX_IT_NS applies to daemon @d: the test names no mode or
 * namespace file, and no other daemon struct has the device
 */
static const char *run_devdax(const struct hx_daemon *d, const struct hx_daemon_opts *o)
{
	const char *ns = getenv("RDAX_IT_NS");
	if (!ns || !*ns || o->ns_name || (o->mode && strcmp(o->mode, "auto") != 0))
		return NULL;
	if (devdax_owner && devdax_owner != d)
		return NULL;
	return ns;
}

/* run_mode -- the test's mode, else RDAX_IT_MODE, else auto */
static const char *run_mode(const struct hx_daemon_opts *o)
{
	const char *m = getenv("RDAX_IT_MODE");
	return o->mode ? o->mode : m && *m ? m : "auto";
}

int hx_tmpdir_make(const char *tag, char *out, size_t len)
{
	const char *tmp = getenv("TMPDIR");
	int n = snprintf(out, len, "%s/rdax-it-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (!mkdtemp(out))
		return -errno;
	return 0;
}

/* rm_entry -- nftw callback: remove one entry (depth first) */
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* RDAX_TEST_KEEP=1 keeps a test's directory (daemon logs, etcd's log) to read after it */
void hx_tmpdir_remove(const char *dir)
{
	if (!dir || !*dir)
		return;
	const char *keep = getenv("RDAX_TEST_KEEP");
	if (keep && strcmp(keep, "1") == 0) {
		fprintf(stderr, "harness: RDAX_TEST_KEEP=1: %s kept\n", dir);
		return;
	}
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int hx_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int ret;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	close(fd);
	return ntohs(a.sin_port);
}

int hx_write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	const uint8_t *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int ret = -errno;
			close(fd);
			return ret;
		}
		p += n;
		len -= (size_t)n;
	}
	return close(fd) < 0 ? -errno : 0;
}

/* child_prepare -- in a forked child: default signals, only fds 0-2 kept */
static void child_prepare(void)
{
	signal(SIGPIPE, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	close_range(3, ~0U, 0);
}

/* wait_exit -- wait up to @timeout_ms for @pid to exit; 0 with *status, or -ETIMEDOUT */
static int wait_exit(pid_t pid, int timeout_ms, int *status)
{
	int64_t deadline = hx_now_ms() + timeout_ms;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			if (pfd >= 0)
				close(pfd);
			return -errno;
		}
		int64_t left = deadline - hx_now_ms();
		if (left <= 0) {
			if (pfd >= 0)
				close(pfd);
			return -ETIMEDOUT;
		}
		if (pfd >= 0) {
			struct pollfd p = {.fd = pfd, .events = POLLIN};
			poll(&p, 1, (int)left);
		} else {
			/* no pidfd (old kernel): poll the exit every 10 ms */
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	if (pfd >= 0)
		close(pfd);
	return 0;
}

static off_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : 0;
}

/* log_mentions_since -- does the log, from byte @from on, contain @needle? */
static bool log_mentions_since(const char *path, off_t from, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool found = false;
	char line[1024];
	if (fseeko(f, from, SEEK_SET) == 0) {
		while (!found && fgets(line, sizeof(line), f))
			found = strstr(line, needle) != NULL;
	}
	fclose(f);
	return found;
}

void hx_daemon_dump_log(const struct hx_daemon *d, size_t max_bytes)
{
	int fd = open(d->log_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "harness: no daemon log at %s\n", d->log_path);
		return;
	}
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > (off_t)max_bytes ? size - (off_t)max_bytes : 0;
	lseek(fd, from, SEEK_SET);
	fprintf(stderr, "---- rdaxd log (last %lld bytes) ----\n", (long long)(size - from));
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stderr);
	fprintf(stderr, "---- end of rdaxd log ----\n");
	close(fd);
}

/* describe_status -- "exit 3", "signal 9" */
static const char *describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "status 0x%x", status);
	return buf;
}

/* daemon_spawn -- fork/exec rdaxd on d->port; stdout to a pipe, stderr appended to the log */
static int daemon_spawn(struct hx_daemon *d)
{
	const struct hx_daemon_opts *o = &d->opts;
	char ns_spec[512], listen[64], listen_rdma[96], threads[16], pidfile[320];
	if (d->devdax)
		snprintf(ns_spec, sizeof(ns_spec), "%s", d->ns_path);
	else
		snprintf(ns_spec, sizeof(ns_spec), "%s,size=%s,mode=%s", d->ns_path,
			 o->ns_size ? o->ns_size : "256M", run_mode(o));
	snprintf(listen, sizeof(listen), "tcp://%s:%d", hx_tcp_host(), d->port);
	snprintf(listen_rdma, sizeof(listen_rdma), "rdma://%s:%d",
		 hx_rdma_addr() ? hx_rdma_addr() : "", d->port);
	snprintf(threads, sizeof(threads), "%u", o->threads ? o->threads : 2);
	snprintf(pidfile, sizeof(pidfile), "%s/rdaxd.pid", d->dir);

	const char *argv[64];
	char wrapper[512] = "";
	int n = 0;
	/* RDAXD_WRAPPER="valgrind --error-exitcode=99 ...": run the daemon under a tool */
	const char *wrap = getenv("RDAXD_WRAPPER");
	if (wrap && *wrap) {
		snprintf(wrapper, sizeof(wrapper), "%s", wrap);
		char *save = NULL;
		for (char *t = strtok_r(wrapper, " ", &save); t && n < 16;
		     t = strtok_r(NULL, " ", &save))
			argv[n++] = t;
	}
	int first = n;
	argv[n++] = RDAXD_PATH;
	argv[n++] = "--namespace";
	argv[n++] = ns_spec;
	argv[n++] = "--listen";
	argv[n++] = listen;
	if (hx_rdma_addr()) {
		argv[n++] = "--listen";
		argv[n++] = listen_rdma;
		/* RDAX_IT_RDMA_BUSY_POLL=USEC: the daemon's loops spin instead of sleeping */
		const char *spin = getenv("RDAX_IT_RDMA_BUSY_POLL");
		if (spin && *spin) {
			argv[n++] = "--rdma-busy-poll";
			argv[n++] = spin;
		}
	}
	argv[n++] = "--threads";
	argv[n++] = threads;
	argv[n++] = "--log-level";
	/* RDAX_IT_LOG=debug: a more talkative daemon for a run being debugged */
	const char *env_level = getenv("RDAX_IT_LOG");
	argv[n++] = o->log_level ? o->log_level : env_level && *env_level ? env_level : "warn";
	argv[n++] = "--pidfile";
	argv[n++] = pidfile;
	if (o->token_file) {
		argv[n++] = "--token-file";
		argv[n++] = o->token_file;
	}
	if (o->flush_mode) {
		argv[n++] = "--flush-mode";
		argv[n++] = o->flush_mode;
	}
	if (o->max_payload) {
		argv[n++] = "--max-payload";
		argv[n++] = o->max_payload;
	}
	for (int i = 0; i < 8 && o->extra_args[i]; i++)
		argv[n++] = o->extra_args[i];
	if (hx_tls()) {
		argv[n++] = "--tls";
		argv[n++] = "require";
		argv[n++] = "--tls-psk";
		argv[n++] = d->tls_psk;
	}
	argv[n] = NULL;

	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	int logfd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0) {
		int ret = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return ret;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int ret = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		close(logfd);
		return ret;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (o->cpu_mask) {
			/* before exec: every thread the daemon starts inherits it */
			cpu_set_t set;
			CPU_ZERO(&set);
			for (unsigned cpu = 0; cpu < 8 * sizeof(o->cpu_mask); cpu++)
				if (o->cpu_mask & (1UL << cpu))
					CPU_SET(cpu, &set);
			if (sched_setaffinity(0, sizeof(set), &set) < 0)
				dprintf(logfd, "harness: sched_setaffinity: %s\n", strerror(errno));
		}
		int nul = open("/dev/null", O_RDONLY);
		dup2(nul, 0);
		dup2(pipefd[1], 1);
		dup2(logfd, 2);
		child_prepare();
		if (o->faults)
			setenv("RDAX_FAULTS", o->faults, 1);
		else
			unsetenv("RDAX_FAULTS");
		dprintf(2, "harness: exec");
		for (int i = 0; argv[i]; i++)
			dprintf(2, " %s", argv[i]);
		dprintf(2, "%s%s\n", o->faults ? " with RDAX_FAULTS=" : "",
			o->faults ? o->faults : "");
		if (first > 0)
			execvp(argv[0], (char *const *)argv);
		else
			execv(RDAXD_PATH, (char *const *)argv);
		dprintf(2, "harness: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	close(logfd);
	d->pid = pid;
	d->out_fd = pipefd[0];
	return 0;
}

/* daemon_wait_ready -- read stdout until a line starts with "rdaxd: ready" (bounded) */
static int daemon_wait_ready(struct hx_daemon *d)
{
	char buf[4096];
	size_t have = 0;
	int64_t deadline = hx_now_ms() + HX_READY_TIMEOUT_MS;
	for (;;) {
		/* complete lines in buf */
		char *nl;
		while ((nl = memchr(buf, '\n', have)) != NULL) {
			*nl = '\0';
			if (strncmp(buf, "rdaxd: ready", 12) == 0) {
				snprintf(d->ready_line, sizeof(d->ready_line), "%.*s",
					 (int)sizeof(d->ready_line) - 1, buf);
				return 0;
			}
			size_t used = (size_t)(nl - buf) + 1;
			memmove(buf, nl + 1, have - used);
			have -= used;
		}
		if (have == sizeof(buf))
			have = 0; /* an absurdly long line: drop it */
		int64_t left = deadline - hx_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = d->out_fd, .events = POLLIN};
		int r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		ssize_t n = read(d->out_fd, buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -ECHILD; /* stdout closed: it exited (or closed stdout) */
		have += (size_t)n;
	}
}

static void daemon_close_out(struct hx_daemon *d)
{
	if (d->out_fd >= 0)
		close(d->out_fd);
	d->out_fd = -1;
}

/*
 * restart_on -- start the daemon again: on a new port, or on d->port again
 * (@same_port: what a client that resumes reconnects to; a port still held
 * by the old daemon's connections is tried again for a while)
 */
static int restart_on(struct hx_daemon *d, bool same_port)
{
	if (d->pid > 0)
		return -EBUSY;
	int ret = -EADDRINUSE;
	for (int attempt = 0; attempt < (same_port ? 40 : 4) && ret == -EADDRINUSE; attempt++) {
		int port = same_port ? d->port : hx_free_port();
		if (port < 0)
			return port;
		if (same_port && attempt > 0)
			usleep(250 * 1000);
		d->port = port;
		if (hx_rdma_addr())
			snprintf(d->url, sizeof(d->url), "rdma://%s:%d", hx_rdma_addr(), port);
		else
			snprintf(d->url, sizeof(d->url), "tcp://%s:%d", hx_tcp_host(), port);
		off_t log_from = file_size(d->log_path);
		ret = daemon_spawn(d);
		if (ret < 0)
			return ret;
		ret = daemon_wait_ready(d);
		if (ret == 0 && hx_tls())
			ret = hx_tls_front(d);
		if (ret == 0)
			return 0;
		char why[64];
		if (ret == -ETIMEDOUT) {
			fprintf(stderr,
				"harness: rdaxd (pid %d) not ready after %d ms: killing it\n",
				d->pid, HX_READY_TIMEOUT_MS);
			kill(d->pid, SIGKILL);
		}
		int status = 0;
		if (wait_exit(d->pid, HX_STOP_TIMEOUT_MS, &status) == 0)
			d->exit_status = status;
		daemon_close_out(d);
		d->pid = 0;
		if (ret == -ECHILD && log_mentions_since(d->log_path, log_from, "in use")) {
			ret = -EADDRINUSE; /* someone took the port meanwhile: another one */
			continue;
		}
		fprintf(stderr, "harness: rdaxd did not become ready (%s)\n",
			describe_status(d->exit_status, why, sizeof(why)));
		hx_daemon_dump_log(d, 8192);
	}
	return ret == -EADDRINUSE ? -EADDRINUSE : ret;
}

int hx_daemon_restart(struct hx_daemon *d)
{
	return restart_on(d, false);
}

int hx_daemon_restart_same_port(struct hx_daemon *d)
{
	return restart_on(d, true);
}

int hx_daemon_start(struct hx_daemon *d, const char *dir, const struct hx_daemon_opts *opts)
{
	memset(d, 0, sizeof(*d));
	d->out_fd = -1;
	d->exit_status = -1;
	if (opts)
		d->opts = *opts;
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	const char *devdax = run_devdax(d, &d->opts);
	d->devdax = devdax != NULL;
	if (devdax) {
		devdax_owner = d;
		snprintf(d->ns_path, sizeof(d->ns_path), "%s", devdax);
	} else
		snprintf(d->ns_path, sizeof(d->ns_path), "%s/%s", dir,
			 d->opts.ns_name ? d->opts.ns_name : "ns0");
	snprintf(d->log_path, sizeof(d->log_path), "%s/rdaxd.log", dir);
	if (d->opts.token_file)
		snprintf(d->token_file, sizeof(d->token_file), "%s", d->opts.token_file);
	d->opts.token_file = d->token_file[0] ? d->token_file : NULL;
	if (hx_tls()) {
		int ret = hx_tls_prepare(d);
		if (ret)
			return ret;
	}
	if (devdax) {
		/* a fresh namespace for every daemon the test starts, as a new file would be */
		const char *argv[] = {RDAXD_PATH, "--format", devdax, "--force", NULL};
		struct hx_run r;
		int ret = hx_run_argv(argv, NULL, 0, &r);
		if (ret == 0 && r.status != 0) {
			fprintf(stderr, "harness: rdaxd --format %s failed:\n%s", devdax, r.err);
			ret = -EIO;
		}
		if (ret == 0 || ret == -EIO)
			hx_run_free(&r);
		if (ret)
			return ret;
	}
	return hx_daemon_restart(d);
}

int hx_daemon_stop(struct hx_daemon *d)
{
	if (d->pid <= 0)
		return -ECHILD;
	hx_tls_stop(d);
	kill(d->pid, SIGTERM);
	return hx_daemon_wait_stopped(d);
}

int hx_daemon_wait_stopped(struct hx_daemon *d)
{
	if (d->pid <= 0)
		return -ECHILD;
	char why[64];
	int status = 0;
	hx_tls_stop(d); /* the proxies go with the daemon */
	int ret = wait_exit(d->pid, HX_STOP_TIMEOUT_MS, &status);
	if (ret == -ETIMEDOUT) {
		fprintf(stderr,
			"harness: rdaxd (pid %d) still running %d ms after SIGTERM: killing it\n",
			d->pid, HX_STOP_TIMEOUT_MS);
		hx_daemon_dump_log(d, 8192);
		kill(d->pid, SIGKILL);
		wait_exit(d->pid, HX_STOP_TIMEOUT_MS, &status);
		d->pid = 0;
		daemon_close_out(d);
		return -ETIMEDOUT;
	}
	d->pid = 0;
	daemon_close_out(d);
	if (ret < 0)
		return ret;
	d->exit_status = status;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "harness: rdaxd ended with %s after SIGTERM (expected exit 0)\n",
			describe_status(status, why, sizeof(why)));
		hx_daemon_dump_log(d, 16384);
		return -ECHILD;
	}
	return 0;
}

int hx_daemon_kill(struct hx_daemon *d)
{
	if (d->pid <= 0)
		return -ECHILD;
	int status = 0;
	kill(d->pid, SIGKILL);
	hx_tls_stop(d);
	int ret = wait_exit(d->pid, HX_STOP_TIMEOUT_MS, &status);
	d->pid = 0;
	d->exit_status = status;
	daemon_close_out(d);
	return ret;
}

bool hx_daemon_alive(struct hx_daemon *d)
{
	if (d->pid <= 0)
		return false;
	int status;
	pid_t r = waitpid(d->pid, &status, WNOHANG);
	if (r == 0)
		return true;
	if (r == d->pid) {
		char why[64];
		d->exit_status = status;
		fprintf(stderr, "harness: rdaxd (pid %d) died: %s\n", d->pid,
			describe_status(status, why, sizeof(why)));
		hx_daemon_dump_log(d, 16384);
		d->pid = 0;
		daemon_close_out(d);
	}
	return false;
}

void hx_run_free(struct hx_run *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

/* buf_append -- append @n bytes to a growing NUL-terminated buffer; 0 or -ENOMEM */
static int buf_append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t nc = *cap ? *cap : 4096;
		while (nc < *len + n + 1)
			nc *= 2;
		char *p = realloc(*buf, nc);
		if (!p)
			return -ENOMEM;
		*buf = p;
		*cap = nc;
	}
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

int hx_run_argv(const char *const argv[], const void *in, size_t in_len, struct hx_run *r)
{
	memset(r, 0, sizeof(*r));
	signal(SIGPIPE, SIG_IGN); /* a child that stops reading its stdin must not kill us */
	int pin[2], pout[2], perr[2];
	if (pipe2(pin, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0) {
		int ret = -errno;
		close(pin[0]);
		close(pin[1]);
		return ret;
	}
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		dup2(perr[1], 2);
		child_prepare();
		execv(argv[0], (char *const *)argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	fcntl(pin[1], F_SETFL, O_NONBLOCK);
	int in_fd = pin[1];
	if (in_len == 0) {
		close(in_fd);
		in_fd = -1;
	}
	int out_fd = pout[0], err_fd = perr[0];
	size_t in_off = 0, out_cap = 0, err_cap = 0;
	int ret = 0;
	int64_t deadline = hx_now_ms() + HX_CLI_TIMEOUT_MS;
	buf_append(&r->out, &r->out_len, &out_cap, "", 0);
	buf_append(&r->err, &r->err_len, &err_cap, "", 0);
	while (out_fd >= 0 || err_fd >= 0) {
		struct pollfd p[3];
		int np = 0, iin = -1, iout = -1, ierr = -1;
		if (in_fd >= 0) {
			p[np] = (struct pollfd){.fd = in_fd, .events = POLLOUT};
			iin = np++;
		}
		if (out_fd >= 0) {
			p[np] = (struct pollfd){.fd = out_fd, .events = POLLIN};
			iout = np++;
		}
		if (err_fd >= 0) {
			p[np] = (struct pollfd){.fd = err_fd, .events = POLLIN};
			ierr = np++;
		}
		int64_t left = deadline - hx_now_ms();
		if (left <= 0) {
			fprintf(stderr, "harness: %s did not finish in %d ms: killing it\n",
				argv[0], HX_CLI_TIMEOUT_MS);
			kill(pid, SIGKILL);
			ret = -ETIMEDOUT;
			break;
		}
		if (poll(p, (nfds_t)np, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			kill(pid, SIGKILL);
			break;
		}
		if (iin >= 0 && p[iin].revents) {
			ssize_t n = write(in_fd, (const char *)in + in_off, in_len - in_off);
			if (n > 0)
				in_off += (size_t)n;
			if ((n < 0 && errno != EAGAIN && errno != EINTR) || in_off == in_len) {
				close(in_fd);
				in_fd = -1;
			}
		}
		char buf[65536];
		if (iout >= 0 && p[iout].revents) {
			ssize_t n = read(out_fd, buf, sizeof(buf));
			if (n > 0) {
				if (buf_append(&r->out, &r->out_len, &out_cap, buf, (size_t)n) < 0)
					ret = -ENOMEM;
			} else if (n == 0 || errno != EINTR) {
				close(out_fd);
				out_fd = -1;
			}
		}
		if (ierr >= 0 && p[ierr].revents) {
			ssize_t n = read(err_fd, buf, sizeof(buf));
			if (n > 0) {
				if (buf_append(&r->err, &r->err_len, &err_cap, buf, (size_t)n) < 0)
					ret = -ENOMEM;
			} else if (n == 0 || errno != EINTR) {
				close(err_fd);
				err_fd = -1;
			}
		}
	}
	if (in_fd >= 0)
		close(in_fd);
	if (out_fd >= 0)
		close(out_fd);
	if (err_fd >= 0)
		close(err_fd);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return ret;
}

/* cli_va -- build "rdax --server URL [--token-file F] ARGS..." and run it */
static int cli_va(const struct hx_daemon *d, const char *token_file, const void *in, size_t in_len,
		  struct hx_run *r, va_list ap)
{
	const char *argv[64];
	int n = 0;
	argv[n++] = RDAX_CLI_PATH;
	argv[n++] = "--server";
	argv[n++] = d->url;
	if (token_file) {
		argv[n++] = "--token-file";
		argv[n++] = token_file;
	}
	const char *a;
	while ((a = va_arg(ap, const char *)) != NULL && n < 63)
		argv[n++] = a;
	argv[n] = NULL;
	return hx_run_argv(argv, in, in_len, r);
}

int hx_cli(const struct hx_daemon *d, const void *in, size_t in_len, struct hx_run *r, ...)
{
	va_list ap;
	va_start(ap, r);
	int ret = cli_va(d, d->token_file[0] ? d->token_file : NULL, in, in_len, r, ap);
	va_end(ap);
	return ret;
}

int hx_cli_tok(const struct hx_daemon *d, const char *token_file, const void *in, size_t in_len,
	       struct hx_run *r, ...)
{
	va_list ap;
	va_start(ap, r);
	int ret = cli_va(d, token_file, in, in_len, r, ap);
	va_end(ap);
	return ret;
}
