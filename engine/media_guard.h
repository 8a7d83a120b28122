/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * media_guard.h -- copies into and out of a namespace mapping that report a
 * bad page as -EIO instead of killing the process
 *
 * A store into or a load from a mapped namespace can raise SIGBUS: a page of
 * a file that has no block behind it and cannot get one (a full filesystem,
 * a copy-on-write filesystem out of space), or poisoned persistent memory (a
 * bad block: the kernel sends SIGBUS with BUS_MCEERR_AR). Uncaught, one bad
 * page kills the daemon and every client with it. Every copy the engine
 * makes into or out of a mapping goes through this module; so must every
 * copy a transport makes (a payload that arrived with its header, a read
 * reply built in a buffer).
 *
 * Mechanism: a process-wide SIGBUS handler, installed on first use and
 * chained to the handler that was there before, and a per-thread guard
 * record. A guarded operation records the byte range of the mapping it may
 * touch and a sigsetjmp point, then runs. The handler, for a SIGBUS whose
 * faulting address lies inside the range of the interrupted thread's active
 * guard, siglongjmps back and the operation returns -EIO. Any other SIGBUS
 * -- outside a guarded operation, at an address outside its range, or sent
 * by kill() -- goes to the previous handler or, if that was the default,
 * kills the process with SIGBUS as before: a bug still dies loudly.
 *
 * Cost: sigsetjmp without saving the signal mask (no system call; the
 * handler is installed with SA_NODEFER so SIGBUS is not left blocked after
 * the jump) plus a thread-local store before and after: about 5 ns, 58 ns
 * against 53 ns for a cache-hot 4 KiB memcpy in a release build
 * (test_media_guard prints the ratio on every run).
 *
 * Not covered: copies the kernel makes (recv() into, send() from the
 * mapping) fail with EFAULT instead and are their caller's to handle; DMA by
 * a NIC. After a failed operation the good pages of the range hold new
 * bytes, old ones or a mix (memcpy stores in an order of its own): the
 * caller reports the whole operation failed.
 *
 * Control (faults.h): no_media_guard runs every operation unguarded.
 *
 * Thread safety: any thread, any number at once; guarded operations do not
 * nest (none calls another). The handler is async-signal-safe: it reads its
 * own thread's guard record and nothing else.
 */
#ifndef RDAX_MEDIA_GUARD_H
#define RDAX_MEDIA_GUARD_H

#include <stddef.h>
#include <stdint.h>

/*
 * media_guard_init -- install the SIGBUS handler: once per process (every
 * operation below does that on first use), and again if another handler
 * has replaced it since (a test framework, a library), chaining to that one.
 * Context: start-up, before the threads that copy exist (it swaps the
 * handler a concurrent SIGBUS would run). Returns 0 or -errno of sigaction.
 */
int media_guard_init(void);

/*
 * media_copy_in -- memcpy(@dst, @src, @len) with @dst in a namespace
 * mapping. Returns 0, or -EIO if a page of [dst, dst + len) raised SIGBUS.
 */
int media_copy_in(void *dst, const void *src, size_t len);

/*
 * media_copy_out -- memcpy(@dst, @src, @len) with @src in a namespace
 * mapping. Returns 0, or -EIO if a page of [src, src + len) raised SIGBUS.
 */
int media_copy_out(void *dst, const void *src, size_t len);

/* media_set -- memset(@dst, @c, @len) with @dst in a mapping; 0 or -EIO */
int media_set(void *dst, int c, size_t len);

/*
 * media_guarded -- run @fn(@arg), which touches no more of a mapping than
 * [addr, addr + len), under the guard (for operations other than the copies
 * above: pmem_memset_nodrain, a flush that may fault). @fn must not take
 * locks or allocate: it may be abandoned halfway. Returns 0 or -EIO.
 */
int media_guarded(const void *addr, size_t len, void (*fn)(void *arg), void *arg);

/* media_guard_errors -- SIGBUS faults turned into -EIO since the start */
uint64_t media_guard_errors(void);

#endif
