/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_notify.c -- rdaxd's sd_notify messages, as systemd (Type=notify) sees them
 *
 * The test plays the service manager: it binds the datagram socket named by
 * NOTIFY_SOCKET, starts the real rdaxd with it and reads what arrives.
 * READY=1 must come with a STATUS= naming the listener, and that listener
 * must accept a connection the moment READY=1 is read (a READY sent before
 * listen() would be refused). SIGTERM must bring STOPPING=1, then exit 0.
 * A NOTIFY_SOCKET nobody listens on must not keep the daemon from serving.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

/* notify_bind -- the manager's end: a datagram socket at @path; the descriptor */
static int notify_bind(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	assert_true(strlen(path) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* notify_recv -- the next message into @buf (NUL-terminated); false after @timeout_ms */
static bool notify_recv(int fd, char *buf, size_t len, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, timeout_ms) != 1)
		return false;
	ssize_t n = recv(fd, buf, len - 1, 0);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* spawn -- rdaxd on DIR/ns, port 0, with NOTIFY_SOCKET=@sock; stdout and stderr to DIR/log */
static pid_t spawn(const char *dir, const char *sock)
{
	char ns[320], log[320];
	snprintf(ns, sizeof(ns), "%s/ns,size=64M", dir);
	snprintf(log, sizeof(log), "%s/log", dir);
	pid_t parent = getpid();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a crashed test */
		if (getppid() != parent)
			_exit(127);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		setenv("NOTIFY_SOCKET", sock, 1);
		execl(RDAXD_PATH, RDAXD_PATH, "--namespace", ns, "--listen", "tcp://127.0.0.1:0",
		      "--threads", "1", "--log-level", "warn", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* wait_exit -- the wait status of @pid, or -1 if it is still running after @timeout_ms */
static int wait_exit(pid_t pid, int timeout_ms)
{
	int64_t end = hx_now_ms() + timeout_ms;
	int status;
	while (hx_now_ms() < end) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		usleep(20 * 1000);
	}
	return -1;
}

static void dump_log(const char *dir)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "tail -c 4000 '%s/log' >&2", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "(no log)\n");
}

static void notify__ready_when_serving_stopping_at_sigterm(void **state)
{
	(void)state;
	char dir[256], sock[320], msg[4096];
	assert_int_equal(hx_tmpdir_make("notify", dir, sizeof(dir)), 0);
	snprintf(sock, sizeof(sock), "%s/notify", dir);
	int fd = notify_bind(sock);
	pid_t pid = spawn(dir, sock);

	/* the first message is READY=1, with the ready line as STATUS= */
	bool got = notify_recv(fd, msg, sizeof(msg), HX_READY_TIMEOUT_MS);
	if (!got)
		dump_log(dir);
	assert_true(got);
	assert_non_null(strstr(msg, "READY=1\n"));
	const char *status = strstr(msg, "STATUS=rdaxd: ready on tcp://127.0.0.1:");
	if (!status)
		fprintf(stderr, "message: %s\n", msg);
	assert_non_null(status);
	int port = atoi(status + strlen("STATUS=rdaxd: ready on tcp://127.0.0.1:"));
	assert_true(port > 0 && port < 65536);

	/* ready means serving: the listener takes a connection right now */
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(connect(c, (struct sockaddr *)&sin, sizeof(sin)), 0);
	close(c);

	/* SIGTERM: STOPPING=1 (with a STATUS=) before the daemon exits 0 */
	assert_int_equal(kill(pid, SIGTERM), 0);
	got = notify_recv(fd, msg, sizeof(msg), HX_STOP_TIMEOUT_MS);
	assert_true(got);
	assert_non_null(strstr(msg, "STOPPING=1\n"));
	assert_non_null(strstr(msg, "STATUS=shutting down"));
	int st = wait_exit(pid, HX_STOP_TIMEOUT_MS);
	if (st == -1)
		kill(pid, SIGKILL);
	assert_true(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fd);
	hx_tmpdir_remove(dir);
}

static void notify__unreachable_socket_not_fatal(void **state)
{
	(void)state;
	char dir[256], sock[320];
	struct hx_daemon d = {0};
	assert_int_equal(hx_tmpdir_make("notify-none", dir, sizeof(dir)), 0);
	snprintf(sock, sizeof(sock), "%s/nobody-listens", dir);
	setenv("NOTIFY_SOCKET", sock, 1); /* the daemon inherits it */
	int ret = hx_daemon_start(&d, dir, NULL);
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(ret, 0);

	/* it serves, and says why systemd would not hear of it */
	struct hx_run r;
	assert_int_equal(hx_cli(&d, NULL, 0, &r, "volume", "list", NULL), 0);
	assert_int_equal(r.status, 0);
	hx_run_free(&r);
	assert_int_equal(hx_daemon_stop(&d), 0);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "grep -q 'sd_notify(READY=1) failed' '%s'", d.log_path);
	if (system(cmd) != 0) {
		hx_daemon_dump_log(&d, 4000);
		fail_msg("no warning about the failed READY=1 in the log");
	}
	hx_tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(notify__ready_when_serving_stopping_at_sigterm),
	    cmocka_unit_test(notify__unreachable_socket_not_fatal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
