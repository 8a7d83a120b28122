/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * persist.h -- the mapping of a namespace and the one flush wrapper
 *
 * Every write-back and fence in rdax goes through persist_flush() and
 * persist_drain(), so how data becomes durable is a property of the
 * namespace (its mode), never of a call site.
 *
 * Modes:
 *  PERSIST_AUTO  pmem_map_file(); CLWB/CLFLUSHOPT + SFENCE (pmem_flush /
 *                pmem_drain) where pmem_is_pmem() says the mapping is
 *                persistent memory, msync() otherwise.
 *  PERSIST_SIM   the power-fail simulator: the file is mapped MAP_PRIVATE, so
 *                stores land in a volatile copy; persist_flush() copies the
 *                flushed cache lines (whole 64-byte lines) into the file with
 *                pwrite(). A kill -9 of the process is then a power cut:
 *                exactly what was flushed survives. The fence is a no-op:
 *                the page cache outlives the process, it is the simulated
 *                power domain.
 *
 * Method (PERSIST_AUTO): CPU_CACHE_FLUSH where pmem_is_pmem(), FENCE_ONLY
 * where additionally pmem_has_auto_flush() reports eADR (libpmem then skips
 * the cache flushes itself), MSYNC for a mapping that is not PMEM.
 *
 * Thread safety: after persist_map() returns, every function may be called
 * from any thread concurrently. Only the simulator takes a lock: its
 * write-backs and zero ranges exclude each other (persist.c says why).
 */
#ifndef RDAX_PERSIST_H
#define RDAX_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum persist_mode { PERSIST_AUTO = 0, PERSIST_SIM };

/* How a flush reaches the persistence domain; reported to clients. */
enum persist_method {
	PERSIST_METHOD_CPU_CACHE_FLUSH, /* CLWB/CLFLUSHOPT + SFENCE */
	PERSIST_METHOD_FENCE_ONLY,	/* eADR: caches are persistent, SFENCE only */
	PERSIST_METHOD_MSYNC,		/* not PMEM: msync(2) */
	PERSIST_METHOD_SIM,		/* simulator: pwrite of flushed lines */
};

struct persist {
	void *base;  /* start of the mapping */
	size_t size; /* bytes mapped */
	int fd;	     /* regular files: open O_RDWR (SIM: written on flush; both
		      * modes: zero range, fdatasync); devdax: -1 */
	enum persist_mode mode;
	enum persist_method method;
	bool is_pmem;	/* pmem_is_pmem() of the mapping (AUTO only) */
	bool is_devdax; /* a device dax character device */
	bool is_regular_file;
	/*
	 * Registered for RDMA (set before the mapping is shared): a NIC holds
	 * its pages pinned, so persist_zero() never zeroes through the
	 * filesystem or drops pages (the NIC would keep writing the old ones),
	 * and an msync flush
	 * first dirties the pages itself (the kernel does not see DMA writes).
	 */
	bool pinned;
};

/* persist_mode_parse -- "auto" or "sim"; 0 or -EINVAL */
int persist_mode_parse(const char *name, enum persist_mode *out);
const char *persist_mode_name(enum persist_mode mode);
const char *persist_method_name(enum persist_method method);

/*
 * persist_map -- map an existing namespace path (devdax, DAX file or plain file)
 * whole, in the given mode. PERSIST_SIM needs a regular file. What the path
 * may be is backing_check()'s rule; a regular file is reserved first
 * (backing_reserve: every block allocated).
 * Returns 0, -ENOSPC (cannot be reserved), the codes of backing_check, -errno.
 */
int persist_map(const char *path, enum persist_mode mode, struct persist *out);

/*
 * persist_create -- create a plain file of @size bytes (reads zeros, every
 * block reserved) and map it. Fails with -EEXIST if the path exists,
 * -ENOSPC if the filesystem cannot hold it (nothing is left behind).
 */
int persist_create(const char *path, uint64_t size, enum persist_mode mode, struct persist *out);

/* persist_unmap -- unmap and close; safe on a zeroed struct */
void persist_unmap(struct persist *p);

/*
 * persist_flush -- start write-back of the cache lines covering
 * [addr, addr + len) without ordering them (no fence). @addr must lie
 * inside the mapping. Context: any thread; blocks only in SIM mode, on the
 * simulator's lock.
 * A flush that fails (SIM pwrite, msync) cannot be reported to a client
 * before an acknowledgement that depends on it, so it aborts the process.
 */
void persist_flush(const struct persist *p, const void *addr, size_t len);

/*
 * Test hooks (tests only): sim_zero_range_done runs inside a SIM zero range,
 * after the file range is zeroed and before the private pages are dropped,
 * holding the simulator's lock, so a test can try a write-back in that
 * window (it must wait for the lock).
 */
struct persist_test_hooks {
	void (*sim_zero_range_done)(void *arg);
	void *arg;
};

/* persist_set_test_hooks -- install @hooks (NULL: none); call while no persist call runs */
void persist_set_test_hooks(const struct persist_test_hooks *hooks);

/* persist_drain -- fence: every earlier persist_flush() of this thread is durable */
void persist_drain(const struct persist *p);

/* persist_range -- persist_flush() + persist_drain() */
void persist_range(const struct persist *p, const void *addr, size_t len);

/*
 * persist_zero -- make [off, off + len) of the mapping read as zeros, durably,
 * keeping its blocks allocated (a namespace is fully provisioned, backing.h).
 * Regular files zero whole pages with FALLOC_FL_ZERO_RANGE (and, in SIM
 * mode, drop the private copies of those pages); everything else, the
 * unaligned edges, and filesystems without zero range (tmpfs) are written
 * with zeros (guarded, media_guard.h) and flushed. Ends with a fence.
 * Returns 0, -EIO (a page could not be written: media error, no block),
 * -EINVAL, -ERANGE.
 */
int persist_zero(const struct persist *p, uint64_t off, uint64_t len);

/*
 * The simulator's power budget (tests only; PERSIST_SIM mappings only).
 *
 * persist_sim_set_budget(n) with n >= 0: from now on only the next n cache
 * lines flushed (process-wide, all SIM mappings) reach the file; every later
 * line is silently dropped, as if the power failed after the n-th line. A
 * flush of several lines that crosses the limit is torn: its first lines
 * persist, the rest do not. -1 (the default) = unlimited. Setting the budget
 * also resets the dropped-lines counter.
 *
 * persist_zero() models a zero range as one unit of the budget: the whole
 * range persists if one unit is left, else none of it does (the mapping
 * still reads zeros, as the volatile copy would). A real zero range is a
 * filesystem transaction, all or nothing; its unaligned edges are ordinary
 * flushed lines and count line by line.
 */
void persist_sim_set_budget(long lines);
/* persist_sim_budget -- lines left in the budget, -1 when unlimited */
long persist_sim_budget(void);
/* persist_sim_dropped -- lines (and punches) dropped since the budget was last set */
uint64_t persist_sim_dropped(void);

#endif
