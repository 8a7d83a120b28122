/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * child.h -- run part of a test in a forked child, to see how it ends
 *
 * For checks whose failure is the death of the process (a SIGBUS that
 * should have been an error, an open that hangs): the parent gets the
 * child's wait status, or a timeout. In the child, cmocka's assertions
 * must not be used (they would unwind into the parent's copy of the test
 * runner): child_check() reports and exits instead, and the signals cmocka
 * catches are back to their default action, so a child dies of the signal
 * a plain process would.
 *
 * Thread safety: call from the test's main thread.
 */
#ifndef RDAX_TEST_CHILD_H
#define RDAX_TEST_CHILD_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* child_check -- in a child: stop with exit status 3 and a message if @cond is false */
#define child_check(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "child: %s:%d: %s failed\n", __FILE__, __LINE__, #cond);   \
			_exit(3);                                                                  \
		}                                                                                  \
	} while (0)

/* Returned by child_run() for a child that did not end within its time. */
#define CHILD_TIMED_OUT (-1)

/*
 * child_run -- fork; the child runs @fn(@arg) and exits 0 when it returns.
 * The parent waits up to @timeout_s seconds (0: for ever); a child still
 * running then is killed and CHILD_TIMED_OUT returned. Returns the wait
 * status otherwise.
 */
int child_run(void (*fn)(void *arg), void *arg, unsigned timeout_s);

/* child_exited_ok -- a wait status of a child that exited with 0 */
#define child_exited_ok(status) ((status) >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)

/* child_died_of -- a wait status of a child killed by @sig */
#define child_died_of(status, sig)                                                                 \
	((status) >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == (sig))

#endif
