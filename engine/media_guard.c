/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * media_guard.c -- guarded copies into and out of a namespace mapping
 *
 * The contract and the mechanism are in media_guard.h. One function,
 * guard_run(), holds the sigsetjmp point for every kind of operation, so
 * the jump target is always a live frame and the rules about what may be
 * touched after the jump (nothing but the thread's guard record) are
 * checked in one place.
 */
#include "media_guard.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "faults.h"
#include "log.h"

/* One per thread: what the running guarded operation may touch, and where to return. */
struct guard {
	sigjmp_buf jump;
	uintptr_t lo, hi;	      /* the guarded range of the mapping */
	volatile sig_atomic_t active; /* a guarded operation is running */
	void *volatile fault_addr;    /* set by the handler before the jump */
	volatile int fault_code;      /* si_code: BUS_ADRERR, BUS_MCEERR_AR, ... */
};

/* initial-exec: the handler must reach it without calling into the dynamic loader */
static __thread struct guard guard __attribute__((tls_model("initial-exec")));

static struct sigaction prev_action; /* chained to for a SIGBUS that is not ours */
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int install_ret;
static atomic_uint_fast64_t faults_caught;

/* barrier -- keep the compiler from moving the guarded stores out of the window */
#define barrier() __asm__ __volatile__("" ::: "memory")

/*
 * sigbus_handler -- jump back into the guarded operation whose range holds
 * the faulting address; hand any other SIGBUS to what was there before
 */
static void sigbus_handler(int sig, siginfo_t *si, void *uc)
{
	struct guard *g = &guard;
	uintptr_t addr = (uintptr_t)si->si_addr;
	if (g->active && si->si_code > 0 && addr >= g->lo && addr < g->hi) {
		g->active = 0;
		g->fault_addr = si->si_addr;
		g->fault_code = si->si_code;
		siglongjmp(g->jump, 1);
	}
	if ((prev_action.sa_flags & SA_SIGINFO) && prev_action.sa_sigaction) {
		prev_action.sa_sigaction(sig, si, uc);
		return;
	}
	if (prev_action.sa_handler != SIG_DFL && prev_action.sa_handler != SIG_IGN) {
		prev_action.sa_handler(sig);
		return;
	}
	/*
	 * The default action: with it restored, the faulting instruction runs
	 * again on return and the process dies of SIGBUS as it would have (an
	 * ignored SIGBUS from a fault cannot be ignored either). A SIGBUS sent
	 * by kill() does not come back by itself: raise it.
	 */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGBUS, &dfl, NULL);
	if (si->si_code <= 0)
		raise(SIGBUS);
}

/* install -- the pthread_once body of media_guard_init() */
static void install(void)
{
	struct sigaction sa = {.sa_sigaction = sigbus_handler};
	sigemptyset(&sa.sa_mask);
	/* NODEFER: after siglongjmp (no saved mask) SIGBUS must not stay blocked */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	if (sigaction(SIGBUS, &sa, &prev_action) != 0) {
		install_ret = -errno;
		LOG_ERROR("sigaction(SIGBUS) failed: %s; media errors will kill the process",
			  strerror(errno));
	}
}

/* guard_ready -- the handler installed at least once (the per-operation check) */
static int guard_ready(void)
{
	pthread_once(&install_once, install);
	return install_ret;
}

int media_guard_init(void)
{
	int ret = guard_ready();
	struct sigaction cur;
	if (ret == 0 && sigaction(SIGBUS, NULL, &cur) == 0 &&
	    (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != sigbus_handler)) {
		/* replaced since (a test framework, a library): go back on top, chaining to it */
		install();
		ret = install_ret;
	}
	return ret;
}

uint64_t media_guard_errors(void)
{
	return atomic_load(&faults_caught);
}

enum guard_op { OP_COPY, OP_SET, OP_CALL };

/*
 * guard_run -- run one operation under the thread's guard; the only frame
 * that holds the jump point. noinline: the jump must land in a frame that
 * is alive for the whole operation.
 */
static __attribute__((noinline)) int guard_run(const void *lo, size_t len, enum guard_op op,
					       void *dst, const void *src, int c,
					       void (*fn)(void *), void *arg)
{
	if (len == 0) {
		if (op == OP_CALL)
			fn(arg); /* touches nothing of a mapping: nothing to guard */
		return 0;
	}
	bool guarded = !rdax_faults.no_media_guard && guard_ready() == 0;
	struct guard *g = &guard;
	if (guarded) {
		if (sigsetjmp(g->jump, 0)) {
			uint64_t n = atomic_fetch_add(&faults_caught, 1) + 1;
			if ((n & (n - 1)) ==
			    0) /* the 1st, 2nd, 4th, 8th ...: a bad range repeats */
				LOG_ERROR("media error (SIGBUS, code %d) at %p in [%p, +%zu): "
					  "operation failed with EIO (%llu so far)",
					  g->fault_code, g->fault_addr, lo, len,
					  (unsigned long long)n);
			return -EIO;
		}
		g->lo = (uintptr_t)lo;
		g->hi = (uintptr_t)lo + len;
		barrier();
		g->active = 1;
		barrier();
	}
	switch (op) {
	case OP_COPY:
		memcpy(dst, src, len);
		break;
	case OP_SET:
		memset(dst, c, len);
		break;
	case OP_CALL:
		fn(arg);
		break;
	}
	barrier();
	g->active = 0;
	return 0;
}

int media_copy_in(void *dst, const void *src, size_t len)
{
	return guard_run(dst, len, OP_COPY, dst, src, 0, NULL, NULL);
}

int media_copy_out(void *dst, const void *src, size_t len)
{
	return guard_run(src, len, OP_COPY, dst, src, 0, NULL, NULL);
}

int media_set(void *dst, int c, size_t len)
{
	return guard_run(dst, len, OP_SET, dst, NULL, c, NULL, NULL);
}

int media_guarded(const void *addr, size_t len, void (*fn)(void *arg), void *arg)
{
	if (!fn)
		return -EINVAL;
	return guard_run(addr, len, OP_CALL, NULL, NULL, 0, fn, arg);
}
