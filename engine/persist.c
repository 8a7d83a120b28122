/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * persist.c -- the mapping of a namespace and the one flush wrapper
 *
 * PERSIST_AUTO hands the mapping to libpmem; PERSIST_SIM maps the file
 * MAP_PRIVATE and makes "flushed" mean "copied to the file" (persist.h).
 */
#include "persist.h"

#include <errno.h>
#include <fcntl.h>
#include <libpmem.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "checked.h"
#include "faults.h"
#include "log.h"
#include "media_guard.h"

/* The simulator's power budget (persist.h): -1 = unlimited. */
static atomic_long sim_budget = -1;
static atomic_uint_fast64_t sim_dropped;

void persist_sim_set_budget(long lines)
{
	atomic_store(&sim_dropped, 0);
	atomic_store(&sim_budget, lines < 0 ? -1 : lines);
}

long persist_sim_budget(void)
{
	return atomic_load(&sim_budget);
}

uint64_t persist_sim_dropped(void)
{
	return atomic_load(&sim_dropped);
}

/*
 * sim_budget_take -- take up to @want units from the budget; returns how
 * many may persist (the rest are counted as dropped)
 */
static uint64_t sim_budget_take(uint64_t want)
{
	long cur = atomic_load(&sim_budget);
	uint64_t take;
	do {
		if (cur < 0)
			return want;
		take = want < (uint64_t)cur ? want : (uint64_t)cur;
	} while (!atomic_compare_exchange_weak(&sim_budget, &cur, cur - (long)take));
	if (take < want)
		atomic_fetch_add(&sim_dropped, want - take);
	return take;
}

int persist_mode_parse(const char *name, enum persist_mode *out)
{
	if (!name || !out)
		return -EINVAL;
	if (strcmp(name, "auto") == 0)
		*out = PERSIST_AUTO;
	else if (strcmp(name, "sim") == 0)
		*out = PERSIST_SIM;
	else
		return -EINVAL;
	return 0;
}

const char *persist_mode_name(enum persist_mode mode)
{
	switch (mode) {
	case PERSIST_AUTO:
		return "auto";
	case PERSIST_SIM:
		return "sim";
	}
	return "unknown";
}

const char *persist_method_name(enum persist_method method)
{
	switch (method) {
	case PERSIST_METHOD_CPU_CACHE_FLUSH:
		return "cpu-cache-flush";
	case PERSIST_METHOD_FENCE_ONLY:
		return "fence-only";
	case PERSIST_METHOD_MSYNC:
		return "msync";
	case PERSIST_METHOD_SIM:
		return "sim";
	}
	return "unknown";
}

/* persist_map_sim -- MAP_PRIVATE mapping of the regular file open on @fd */
static int persist_map_sim(const char *path, int fd, size_t size, struct persist *out)
{
	/* MAP_NORESERVE: private copies are made only for the pages written */
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
	if (base == MAP_FAILED) {
		int ret = -errno;
		LOG_ERROR("mmap(%s, size=%zu, MAP_PRIVATE) failed: %s", path, size,
			  strerror(errno));
		return ret;
	}
	out->base = base;
	out->size = size;
	out->method = PERSIST_METHOD_SIM;
	out->is_pmem = false;
	return 0;
}

/* persist_map_auto -- libpmem mapping of @path (devdax, DAX file or plain file) */
static int persist_map_auto(const char *path, struct persist *out)
{
	size_t mapped = 0;
	int is_pmem = 0;
	void *base = pmem_map_file(path, 0, 0, 0, &mapped, &is_pmem);
	if (!base) {
		int ret = errno ? -errno : -EIO;
		LOG_ERROR("pmem_map_file(%s) failed: %s", path, pmem_errormsg());
		return ret;
	}
	out->base = base;
	out->size = mapped;
	out->is_pmem = is_pmem != 0;
	if (!out->is_pmem)
		out->method = PERSIST_METHOD_MSYNC;
	else if (pmem_has_auto_flush() == 1)
		out->method = PERSIST_METHOD_FENCE_ONLY;
	else
		out->method = PERSIST_METHOD_CPU_CACHE_FLUSH;
	return 0;
}

int persist_map(const char *path, enum persist_mode mode, struct persist *out)
{
	if (!path || !out || (mode != PERSIST_AUTO && mode != PERSIST_SIM))
		return -EINVAL;

	struct persist p = {.fd = -1, .mode = mode};
	struct stat st;
	enum backing_kind kind;
	char why[512];
	int ret = backing_check(path, mode, &kind, &st, why, sizeof(why));
	if (ret) {
		LOG_ERROR("persist_map: %s", why);
		return ret;
	}
	p.is_devdax = kind == BACKING_DEVDAX;
	p.is_regular_file = kind == BACKING_FILE;
	if (p.is_regular_file) {
		p.fd = open(path, O_RDWR | O_CLOEXEC);
		if (p.fd < 0) {
			ret = -errno;
			LOG_ERROR("open(%s, O_RDWR) failed: %s", path, strerror(errno));
			return ret;
		}
		/* fully provisioned (backing.h): no store into the mapping can find no space */
		if (!rdax_faults.no_reserve) {
			ret = backing_reserve(p.fd, path, (uint64_t)st.st_size);
			if (ret)
				goto err_close;
		}
	}

	if (mode == PERSIST_SIM)
		ret = persist_map_sim(path, p.fd, (size_t)st.st_size, &p);
	else
		ret = persist_map_auto(path, &p);
	if (ret)
		goto err_close;

	LOG_INFO("mapped %s: size=%zu mode=%s method=%s%s", path, p.size, persist_mode_name(mode),
		 persist_method_name(p.method), p.is_devdax ? " (device dax)" : "");
	*out = p;
	return 0;

err_close:
	if (p.fd >= 0)
		close(p.fd);
	return ret;
}

int persist_create(const char *path, uint64_t size, enum persist_mode mode, struct persist *out)
{
	if (!path || !out || size == 0 || size > (uint64_t)SIZE_MAX || size > (uint64_t)INT64_MAX ||
	    (mode != PERSIST_AUTO && mode != PERSIST_SIM))
		return -EINVAL;

	int ret;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		LOG_ERROR("create %s failed: %s", path, strerror(errno));
		return ret;
	}
	if (ftruncate(fd, (off_t)size) != 0) {
		ret = -errno;
		LOG_ERROR("ftruncate(%s, %llu) failed: %s", path, (unsigned long long)size,
			  strerror(errno));
		goto err_unlink;
	}
	close(fd);
	fd = -1;

	ret = persist_map(path, mode, out);
	if (ret)
		goto err_unlink;
	return 0;

err_unlink:
	if (fd >= 0)
		close(fd);
	unlink(path);
	return ret;
}

void persist_unmap(struct persist *p)
{
	if (!p || !p->base)
		return;
	if (p->mode == PERSIST_SIM) {
		munmap(p->base, p->size);
	} else if (pmem_unmap(p->base, p->size) != 0) {
		LOG_WARN("pmem_unmap(size=%zu) failed: %s", p->size, strerror(errno));
	}
	if (p->fd >= 0)
		close(p->fd);
	memset(p, 0, sizeof(*p));
	p->fd = -1;
}

/* persist_check_inside -- a flush outside the mapping is a bug in the caller: abort */
static uint64_t persist_check_inside(const struct persist *p, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, b = (uintptr_t)p->base;
	if (a < b || range_check(a - b, len, p->size) != 0) {
		LOG_ERROR("flush(addr=%p, len=%zu) outside the mapping [%p, +%zu)", addr, len,
			  p->base, p->size);
		abort();
	}
	return a - b;
}

/*
 * The simulator's write-backs and zero ranges exclude each other (all SIM
 * mappings share one lock: the simulator is a test tool, and a pwrite
 * already costs a system call). A real write-back of a cache line is
 * atomic with respect to the stores and write-backs of that line; the
 * simulator's is a copy from the private mapping to the file, which takes
 * time. Without the lock a flush that read old data before a discard's
 * zero range could write it into the file after the zero range, and the
 * drop of the private pages that follows would then read the old data
 * back too: a discarded range, acknowledged, returning its old content
 * after a cut (and even before one).
 */
static pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct persist_test_hooks *test_hooks;

void persist_set_test_hooks(const struct persist_test_hooks *hooks)
{
	test_hooks = hooks;
}

/* sim_lock_take / sim_lock_drop -- the simulator's lock (a control turns it off) */
static bool sim_lock_take(void)
{
	if (rdax_faults.sim_no_flush_lock)
		return false;
	pthread_mutex_lock(&sim_lock);
	return true;
}

static void sim_lock_drop(bool taken)
{
	if (taken)
		pthread_mutex_unlock(&sim_lock);
}

/*
 * sim_write_lines -- copy the whole cache lines covering [off, off + len) of
 * the private mapping into the file, minus what the power budget drops
 */
static void sim_write_lines(const struct persist *p, uint64_t off, uint64_t len)
{
	uint64_t start = align_down(off, RDAX_CACHELINE);
	uint64_t end = align_up(off + len, RDAX_CACHELINE);
	if (end > p->size)
		end = p->size; /* a file size that is not a multiple of 64 */

	uint64_t lines = (end - start + RDAX_CACHELINE - 1) / RDAX_CACHELINE;
	uint64_t keep = sim_budget_take(lines);
	if (keep < lines)
		end = start + keep * RDAX_CACHELINE;

	const uint8_t *src = (const uint8_t *)p->base + start;
	uint64_t pos = start;
	bool locked = sim_lock_take();
	while (pos < end) {
		ssize_t n = pwrite(p->fd, src + (pos - start), end - pos, (off_t)pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			LOG_ERROR("sim flush: pwrite(off=%llu, len=%llu) failed: %s",
				  (unsigned long long)pos, (unsigned long long)(end - pos),
				  n < 0 ? strerror(errno) : "wrote nothing");
			abort();
		}
		pos += (uint64_t)n;
	}
	sim_lock_drop(locked);
}

/*
 * pinned_dirty -- make msync() write [addr, addr + len) of a pinned mapping:
 * an RDMA write lands in the page without a CPU store, so a page already
 * written back stays clean to the kernel. An atomic add of 0 to one word of
 * each page dirties it without losing a concurrent write (the word is
 * updated in one locked read-modify-write).
 */
static void pinned_dirty(const void *addr, size_t len)
{
	uintptr_t a = align_down((uintptr_t)addr, RDAX_PAGE_SIZE);
	uintptr_t end = (uintptr_t)addr + len;
	for (; a < end; a += RDAX_PAGE_SIZE)
		__atomic_fetch_add((uint64_t *)a, 0, __ATOMIC_RELAXED);
}

void persist_flush(const struct persist *p, const void *addr, size_t len)
{
	if (len == 0)
		return;
	uint64_t off = persist_check_inside(p, addr, len);

	if (p->mode == PERSIST_SIM) {
		sim_write_lines(p, off, len);
	} else if (p->is_pmem) {
		pmem_flush(addr, len);
	} else {
		if (p->pinned)
			pinned_dirty(addr, len);
		if (pmem_msync(addr, len) != 0) {
			LOG_ERROR("pmem_msync(addr=%p, len=%zu) failed: %s", addr, len,
				  strerror(errno));
			abort();
		}
	}
}

void persist_drain(const struct persist *p)
{
	/* SIM: pwrite() already reached the page cache; msync() is synchronous */
	if (p->mode == PERSIST_AUTO && p->is_pmem)
		pmem_drain();
}

void persist_range(const struct persist *p, const void *addr, size_t len)
{
	persist_flush(p, addr, len);
	persist_drain(p);
}

/* pmem_zero_nodrain -- the guarded body of zero_by_writing() on PMEM */
struct pmem_zero_arg {
	void *addr;
	size_t len;
};

static void pmem_zero_nodrain(void *arg)
{
	struct pmem_zero_arg *z = arg;
	/* non-temporal stores for large ranges, flushed, not fenced */
	pmem_memset_nodrain(z->addr, 0, z->len);
}

/*
 * zero_by_writing -- memset + flush (no fence): devdax, edges, filesystems
 * that cannot zero a range. The stores are guarded (media_guard.h): a page
 * that cannot be written is -EIO, not the end of the process.
 */
static int zero_by_writing(const struct persist *p, uint64_t off, uint64_t len)
{
	if (len == 0)
		return 0;
	uint8_t *addr = (uint8_t *)p->base + off;
	if (p->mode == PERSIST_AUTO && p->is_pmem) {
		struct pmem_zero_arg z = {addr, len};
		return media_guarded(addr, len, pmem_zero_nodrain, &z);
	}
	int ret = media_set(addr, 0, len);
	if (ret == 0)
		persist_flush(p, addr, len);
	return ret;
}

/*
 * zero_range_pages -- make the page-aligned [off, off + len) of a regular
 * file read as zeros without giving its blocks back: FALLOC_FL_ZERO_RANGE
 * turns them into allocated, unwritten extents (ext4, XFS), and the mapping
 * reads zeros. A punched hole would hand the blocks to the filesystem, and
 * the next write into the range could then find none: a SIGBUS, not an
 * error (backing.h). Measured on 256 MiB: ext4 zero range 0.03 s, writing
 * zeros + msync 0.35 s; tmpfs has no zero range, and writing is 0.01 s
 * there. Returns 0, or -errno when the filesystem cannot (the caller
 * writes zeros; the blocks are re-reserved first, in case a filesystem
 * that zeroes by punch + allocate stopped half way).
 */
static int zero_range_pages(const struct persist *p, uint64_t off, uint64_t len)
{
	uint8_t *addr = (uint8_t *)p->base + off;

	if (p->pinned)
		return -EOPNOTSUPP; /* the NIC keeps the pages it pinned: write zeros */
	if (p->mode == PERSIST_SIM && sim_budget_take(1) == 0) {
		/* power already lost: the volatile copy reads zeros, the file keeps its data */
		memset(addr, 0, len);
		return 0;
	}
	/* control (faults.h): the old discard, which gave the blocks back */
	int mode = rdax_faults.zero_punches ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
					    : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
	/* SIM: no write-back between the zero range and the drop of the private pages */
	bool locked = p->mode == PERSIST_SIM && sim_lock_take();
	if (fallocate(p->fd, mode, (off_t)off, (off_t)len) != 0) {
		sim_lock_drop(locked);
		int ret = -errno;
		LOG_DEBUG("fallocate(ZERO_RANGE, off=%llu, len=%llu) failed: %s",
			  (unsigned long long)off, (unsigned long long)len, strerror(errno));
		if (ret != -EOPNOTSUPP && posix_fallocate(p->fd, (off_t)off, (off_t)len) != 0)
			LOG_ERROR("re-reserving [%llu, +%llu) after a failed zero range failed: "
				  "that range may have no blocks",
				  (unsigned long long)off, (unsigned long long)len);
		return ret;
	}
	if (p->mode == PERSIST_SIM) {
		/*
		 * MAP_PRIVATE: the private copies of these pages still hold the
		 * old data; dropping them makes the pages read the file (zeros)
		 * again. A shared mapping (AUTO) sees the zeros at once: the
		 * filesystem dropped the pages from the page cache and from every
		 * mapping.
		 */
		if (test_hooks && test_hooks->sim_zero_range_done)
			test_hooks->sim_zero_range_done(test_hooks->arg);
		if (madvise(addr, len, MADV_DONTNEED) != 0) {
			LOG_WARN("madvise(DONTNEED, len=%llu) failed: %s", (unsigned long long)len,
				 strerror(errno));
			memset(addr, 0, len); /* the file holds zeros already */
		}
		sim_lock_drop(locked);
		return 0;
	}
	/* AUTO: the extent change is metadata, durable only once the file is synced */
	if (fdatasync(p->fd) != 0) {
		LOG_ERROR("fdatasync after zero range (off=%llu, len=%llu) failed: %s",
			  (unsigned long long)off, (unsigned long long)len, strerror(errno));
		abort();
	}
	return 0;
}

int persist_zero(const struct persist *p, uint64_t off, uint64_t len)
{
	if (!p || !p->base || len == 0)
		return -EINVAL;
	int ret = range_check(off, len, p->size);
	if (ret) {
		LOG_ERROR("persist_zero(off=%llu, len=%llu) outside the mapping (size=%zu)",
			  (unsigned long long)off, (unsigned long long)len, p->size);
		return ret;
	}

	uint64_t end = off + len;
	uint64_t mid_start = align_up(off, RDAX_PAGE_SIZE);
	uint64_t mid_end = align_down(end, RDAX_PAGE_SIZE);

	if (p->is_regular_file && p->fd >= 0 && mid_start < mid_end) {
		ret = zero_by_writing(p, off, mid_start - off);
		if (zero_range_pages(p, mid_start, mid_end - mid_start) != 0) {
			int r = zero_by_writing(p, mid_start, mid_end - mid_start);
			ret = ret ? ret : r;
		}
		int r = zero_by_writing(p, mid_end, end - mid_end);
		ret = ret ? ret : r;
	} else {
		ret = zero_by_writing(p, off, len);
	}
	persist_drain(p);
	return ret;
}
