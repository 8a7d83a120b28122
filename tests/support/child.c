/* SPDX-License-Identifier: BSD-3-Clause */
/* child.c -- run part of a test in a forked child, to see how it ends */
#include "child.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

int child_run(void (*fn)(void *arg), void *arg, unsigned timeout_s)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		abort();
	}
	if (pid == 0) {
		static const int sigs[] = {SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGSYS};
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], SIG_DFL);
		fn(arg);
		_exit(0);
	}
	struct timespec tick = {0, 10 * 1000 * 1000};
	for (unsigned long waited = 0;; waited++) {
		int status;
		pid_t r = waitpid(pid, &status, timeout_s ? WNOHANG : 0);
		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR) {
			perror("waitpid");
			abort();
		}
		if (timeout_s && waited >= timeout_s * 100UL) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return CHILD_TIMED_OUT;
		}
		nanosleep(&tick, NULL);
	}
}
