/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * namespace.c -- a PMEM namespace: mapping, metadata, volume placement
 *
 * Lock discipline and placement rules are in namespace.h; the on-media
 * format and its commit protocol in vol_table.h.
 */
#include "namespace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "checked.h"
#include "dirty_tree.h"
#include "errors.h"
#include "faults.h"
#include "fsync.h"
#include "log.h"
#include "media_guard.h"
#include "size.h"
#include "vol_table.h"
#include "volume.h"

int ns_volume_name_valid(const char *name)
{
	return vt_name_valid(name);
}

/*
 * ns_hold -- check what @path is (backing.h) and take the namespace lock
 * on it; the reason for a refusal goes to @err, or to the log when @err is
 * NULL. Returns 0 with
 * *fd holding the lock, or the codes of backing_check and backing_hold.
 */
static int ns_hold(const char *path, enum persist_mode mode, int *fd, char *err, size_t errlen)
{
	enum backing_kind kind;
	struct stat st;
	char why[512];
	int ret = backing_check(path, mode, &kind, &st, why, sizeof(why));
	if (ret) {
		if (ret == -ENOENT)
			snprintf(why, sizeof(why), "namespace %s does not exist", path);
		if (err) /* said once: by the caller that asked for the reason, or here */
			rdax_seterr(err, errlen, "%s", why);
		else
			LOG_ERROR("%s", why);
		return ret;
	}
	ret = backing_hold(path, &st, fd);
	if (ret == -EBUSY) {
		rdax_seterr(err, errlen,
			    "namespace %s is in use (a running rdaxd, or another process, "
			    "holds its lock)",
			    path);
		if (!err)
			LOG_ERROR("namespace %s is in use (another opener holds its lock)", path);
	} else if (ret) {
		rdax_seterr(err, errlen, "namespace %s: %s", path, rdax_strerror(ret));
	}
	return ret;
}

int ns_format_mode(const char *path, enum persist_mode mode, bool force, char *err, size_t errlen)
{
	if (!path) {
		rdax_seterr(err, errlen, "format: no path");
		return -EINVAL;
	}
	int fd = -1;
	int ret = ns_hold(path, mode, &fd, err, errlen);
	if (ret == -EBUSY && rdax_faults.format_no_lock)
		ret = 0; /* control (faults.h): the format that ignored the lock */
	if (ret == -ENOENT)
		rdax_seterr(err, errlen,
			    "%s does not exist; --format needs a devdax device or an existing "
			    "file (to create an emulated namespace: rdaxd --namespace "
			    "%s,size=SIZE)",
			    path, path);
	else if (ret == -EBUSY)
		rdax_seterr(err, errlen,
			    "%s is in use: a running rdaxd (or another process) holds its lock; "
			    "stop it first (--force does not override this)",
			    path);
	if (ret)
		return ret;

	struct persist p;
	ret = persist_map(path, mode, &p);
	if (ret) {
		if (ret == -ENOSPC)
			backing_space_error(path, 0, err, errlen);
		else
			rdax_seterr(err, errlen, "format %s: %s", path, rdax_strerror(ret));
		goto out_release;
	}
	if (p.size < NS_MIN_SIZE) {
		char have[SIZE_FORMAT_MAX];
		rdax_seterr(err, errlen,
			    "%s cannot be formatted: %s is too small (at least %llu MiB)", path,
			    size_format(p.size, have, sizeof(have)), NS_MIN_SIZE >> 20);
		ret = -EINVAL;
		goto out_unmap;
	}
	ret = vol_table_format(&p, force);
	if (ret == -EEXIST)
		rdax_seterr(err, errlen,
			    "%s holds rdax data; add --force to format it anyway (this destroys "
			    "all its volumes)",
			    path);
	else if (ret)
		rdax_seterr(err, errlen, "format %s: %s", path, rdax_strerror(ret));
	if (ret == 0) /* a failure is logged once, where its reason is known (vol_table.c) */
		LOG_INFO("formatted %s", path);
out_unmap:
	persist_unmap(&p);
out_release:
	backing_release(&fd);
	return ret;
}

int ns_format(const char *path, bool force, char *err, size_t errlen)
{
	return ns_format_mode(path, PERSIST_AUTO, force, err, errlen);
}

/* ns_volumes_reserve -- room for one more volume pointer in ns->volumes */
static int ns_volumes_reserve(struct ns *ns)
{
	if (ns->nvolumes < ns->volumes_cap)
		return 0;
	unsigned cap = ns->volumes_cap ? ns->volumes_cap * 2 : 16;
	struct volume **v = realloc(ns->volumes, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	ns->volumes = v;
	ns->volumes_cap = cap;
	return 0;
}

/* ns_volumes_free -- delete every in-memory volume (no write-back) */
static void ns_volumes_free(struct ns *ns)
{
	for (unsigned i = 0; i < ns->nvolumes; i++)
		volume_delete(&ns->volumes[i]);
	free(ns->volumes);
	ns->volumes = NULL;
	ns->nvolumes = ns->volumes_cap = 0;
}

/*
 * ns_load_metadata -- load the metadata from ns->persist (mapped), make the
 * in-memory volumes and repair a metadata copy left behind: what ns_open()
 * and ns_power_cut() share. On failure no table and no volume is left (the
 * mapping is the caller's). Needs the namespace lock (ns->hold_fd) held.
 */
static int ns_load_metadata(struct ns *ns)
{
	int ret = vol_table_load(&ns->persist, &ns->table);
	if (ret) /* logged by vol_table_load with its reason; the caller names the path */
		return ret;
	ns->data_offset = vol_table_data_offset(ns->table);
	ns->data_size = vol_table_data_size(ns->table);

	for (unsigned i = 0; i < vol_table_count(ns->table); i++) {
		const struct vt_volume *tv = vol_table_get(ns->table, i);
		struct volume *v;
		ret = ns_volumes_reserve(ns);
		if (ret)
			goto err_free_volumes;
		ret = volume_new(ns, tv->name, tv->ns_offset, tv->size, &v);
		if (ret) {
			LOG_ERROR("open %s: volume \"%s\": %s", ns->path, tv->name,
				  rdax_strerror(ret));
			goto err_free_volumes;
		}
		ns->volumes[ns->nvolumes++] = v;
	}

	if (!vol_table_copies_agree(ns->table)) {
		/* one copy holds the state: give it its twin back before anything else can fail */
		LOG_WARN("open %s: rewriting the metadata copy that does not hold the latest state",
			 ns->path);
		ret = vol_table_repair(ns->table);
		if (ret)
			goto err_free_volumes;
	}
	return 0;

err_free_volumes:
	ns_volumes_free(ns);
	vol_table_delete(&ns->table);
	return ret;
}

int ns_open(const char *path, enum persist_mode mode, uint32_t id, struct ns **out)
{
	if (!path || !out || id > DLOC_NS_MAX || (mode != PERSIST_AUTO && mode != PERSIST_SIM))
		return -EINVAL;

	int ret;
	struct ns *ns = calloc(1, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	ns->persist.fd = -1;
	ns->hold_fd = -1;
	ns->id = id;
	ns->path = strdup(path);
	if (!ns->path) {
		ret = -ENOMEM;
		goto err_free_ns;
	}
	ret = pthread_mutex_init(&ns->lock, NULL);
	if (ret) {
		ret = -ret;
		goto err_free_path;
	}
	/* stores into the mapping fail with -EIO, not SIGBUS, from here on */
	media_guard_init();
	/* what it is, then the lock, then the mapping: a FIFO never reaches an open that blocks */
	ret = ns_hold(path, mode, &ns->hold_fd, NULL, 0);
	if (ret)
		goto err_destroy_lock;
	ret = persist_map(path, mode, &ns->persist);
	if (ret)
		goto err_release;
	ret = ns_load_metadata(ns);
	if (ret)
		goto err_unmap;
	ns->kind = ns_kind_of(&ns->persist, path);
	ret = media_health_open(&ns->health, path, ns->hold_fd, ns->table);
	if (ret) {
		media_health_destroy(&ns->health);
		goto err_free_metadata;
	}
	for (unsigned i = 0; i < ns->nvolumes; i++) {
		int idx = vol_table_find(ns->table, ns->volumes[i]->name);
		if (idx >= 0 && vol_table_get(ns->table, (unsigned)idx)->unsafe_shutdown)
			LOG_ERROR("open %s: volume \"%s\" is marked by an unsafe shutdown", path,
				  ns->volumes[i]->name);
	}

	LOG_INFO("opened namespace %s: id=%" PRIu32 ", %u volumes, data %" PRIu64 " bytes", path,
		 id, ns->nvolumes, ns->data_size);
	*out = ns;
	return 0;

err_free_metadata:
	ns_volumes_free(ns);
	vol_table_delete(&ns->table);
err_unmap:
	persist_unmap(&ns->persist);
err_release:
	backing_release(&ns->hold_fd);
err_destroy_lock:
	pthread_mutex_destroy(&ns->lock);
err_free_path:
	free(ns->path);
err_free_ns:
	free(ns);
	return ret;
}

int ns_power_cut(struct ns *ns)
{
	if (!ns)
		return -EINVAL;
	if (ns->persist.mode != PERSIST_SIM)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&ns->lock);
	for (unsigned i = 0; i < ns->nvolumes; i++) {
		if (ns->volumes[i]->open_count) {
			LOG_ERROR("power cut of %s refused: volume \"%s\" has %u openers", ns->path,
				  ns->volumes[i]->name, ns->volumes[i]->open_count);
			pthread_mutex_unlock(&ns->lock);
			return -EBUSY;
		}
	}
	unsigned dropped = ns->nvolumes;
	/* what is volatile goes: the dirty trees, unwritten, and the in-memory table */
	ns_volumes_free(ns);
	vol_table_delete(&ns->table);
	int ret = 0;
	/* the private copies go with the mapping; the file holds what was written back */
	if (!rdax_faults.powercut_keep_mapping) { /* the control (faults.h) keeps them */
		persist_unmap(&ns->persist);
		ret = persist_map(ns->path, PERSIST_SIM, &ns->persist);
	}
	if (ret == 0)
		ret = ns_load_metadata(ns);
	if (ret == 0) { /* the namespace's mark as the file holds it (a clear may be undone) */
		struct vt_shutdown sds;
		vol_table_shutdown_get(ns->table, &sds);
		media_health_mark_set(&ns->health, (sds.flags & VT_SDS_UNSAFE) != 0);
	}
	if (ret) /* left for ns_close(): nothing loaded, nothing mapped */
		persist_unmap(&ns->persist);
	pthread_mutex_unlock(&ns->lock);
	if (ret)
		LOG_ERROR("power cut of %s: the namespace does not load again: %s", ns->path,
			  rdax_strerror(ret));
	else
		LOG_INFO("power cut of %s: %u volumes dropped with everything not written back; "
			 "%u loaded from the file",
			 ns->path, dropped, ns->nvolumes);
	return ret;
}

int ns_create(const char *path, uint64_t size, enum persist_mode mode, uint32_t id, struct ns **out)
{
	if (!path || !out || id > DLOC_NS_MAX || (mode != PERSIST_AUTO && mode != PERSIST_SIM))
		return -EINVAL;
	if (size < NS_MIN_SIZE) {
		LOG_ERROR("create %s: size %" PRIu64 " below the minimum %llu", path, size,
			  (unsigned long long)NS_MIN_SIZE);
		return -EINVAL;
	}

	struct persist p;
	int ret = persist_create(path, size, mode, &p);
	if (ret)
		return ret;
	ret = vol_table_format(&p, false);
	persist_unmap(&p);
	if (ret)
		goto err_unlink;
	ret = ns_open(path, mode, id, out);
	if (ret)
		goto err_unlink;
	return 0;

err_unlink:
	unlink(path);
	return ret;
}

void ns_close(struct ns **nsp)
{
	if (!nsp || !*nsp)
		return;
	struct ns *ns = *nsp;

	for (unsigned i = 0; i < ns->nvolumes; i++) {
		struct volume *v = ns->volumes[i];
		if (v->open_count) {
			LOG_WARN("close %s: volume \"%s\" still has %u openers", ns->path, v->name,
				 v->open_count);
			if (ns->observer.last_close)
				ns->observer.last_close(ns->observer.arg, v);
		}
		uint64_t written = 0;
		int ret = fsync_range(v, 0, 0, FLUSH_TRACKED, &written);
		if (ret)
			LOG_ERROR("close %s: fsync of volume \"%s\" failed: %s", ns->path, v->name,
				  rdax_strerror(ret));
		else if (written)
			LOG_DEBUG("close %s: volume \"%s\": %" PRIu64 " bytes written back",
				  ns->path, v->name, written);
	}
	media_health_close(&ns->health, ns->table); /* a clean close: after the write-back */
	media_health_destroy(&ns->health);
	ns_volumes_free(ns);
	vol_table_delete(&ns->table);
	persist_unmap(&ns->persist);
	backing_release(&ns->hold_fd); /* after the unmap: nobody else maps it before */
	pthread_mutex_destroy(&ns->lock);
	LOG_INFO("closed namespace %s", ns->path);
	free(ns->path);
	free(ns);
	*nsp = NULL;
}

/* A byte range of the namespace. */
struct extent {
	uint64_t off;
	uint64_t len;
};

static int cmp_extent(const void *a, const void *b)
{
	const struct extent *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * __ns_free_extents -- the gaps between the table's volumes, in offset
 * order, into a malloc'ed array (*out, *n). Needs ns->lock.
 * Returns 0 or -ENOMEM.
 */
static int __ns_free_extents(struct ns *ns, struct extent **out, unsigned *n)
{
	unsigned count = vol_table_count(ns->table);
	struct extent *used = malloc((count + 1) * sizeof(*used));
	struct extent *free_ext = malloc((count + 1) * sizeof(*free_ext));
	if (!used || !free_ext) {
		free(used);
		free(free_ext);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < count; i++) {
		const struct vt_volume *tv = vol_table_get(ns->table, i);
		used[i] = (struct extent){tv->ns_offset, tv->size};
	}
	qsort(used, count, sizeof(*used), cmp_extent);

	unsigned nfree = 0;
	uint64_t pos = ns->data_offset, end = ns->data_offset + ns->data_size;
	for (unsigned i = 0; i <= count; i++) {
		uint64_t next = i < count ? used[i].off : end;
		if (next > pos)
			free_ext[nfree++] = (struct extent){pos, next - pos};
		if (i < count)
			pos = used[i].off + used[i].len;
	}
	free(used);
	*out = free_ext;
	*n = nfree;
	return 0;
}

/*
 * ns_place_aligned -- best fit: the smallest free extent that holds @size
 * bytes starting at an @align-aligned offset. Returns true and *off if found.
 */
static bool ns_place_aligned(const struct extent *ext, unsigned n, uint64_t size, uint64_t align,
			     uint64_t *off)
{
	bool found = false;
	uint64_t best_len = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t start = align_up(ext[i].off, align);
		uint64_t ext_end = ext[i].off + ext[i].len;
		if (start >= ext_end || ext_end - start < size)
			continue;
		if (!found || ext[i].len < best_len) {
			found = true;
			best_len = ext[i].len;
			*off = start;
		}
	}
	return found;
}

/* ns_largest -- total and largest of @n free extents */
static void ns_largest(const struct extent *ext, unsigned n, uint64_t *total, uint64_t *largest,
		       uint64_t *largest_off)
{
	*total = *largest = *largest_off = 0;
	for (unsigned i = 0; i < n; i++) {
		*total += ext[i].len;
		if (ext[i].len > *largest) {
			*largest = ext[i].len;
			*largest_off = ext[i].off;
		}
	}
}

/*
 * __ns_place -- where a new volume of @size bytes goes (namespace.h,
 * "Placement"). Needs ns->lock. Returns 0, -ENOSPC (logged), -ENOMEM.
 */
static int __ns_place(struct ns *ns, const char *name, uint64_t size, uint64_t *off)
{
	static const uint64_t aligns[] = {RDAX_PUD_SIZE, RDAX_PMD_SIZE, RDAX_PAGE_SIZE};
	unsigned first = size >= RDAX_PUD_SIZE ? 0 : (size >= RDAX_PMD_SIZE ? 1 : 2);
	struct extent *ext;
	unsigned n;
	int ret = __ns_free_extents(ns, &ext, &n);
	if (ret)
		return ret;

	ret = -ENOSPC;
	for (unsigned a = first; a < sizeof(aligns) / sizeof(aligns[0]); a++) {
		if (ns_place_aligned(ext, n, size, aligns[a], off)) {
			if (a != first)
				LOG_INFO("volume \"%s\" (%" PRIu64 " bytes): no %" PRIu64
					 "-aligned room, placed %" PRIu64 "-aligned at %" PRIu64,
					 name, size, aligns[first], aligns[a], *off);
			ret = 0;
			break;
		}
	}
	if (ret) {
		uint64_t total, largest, largest_off;
		ns_largest(ext, n, &total, &largest, &largest_off);
		/* the client's mistake, answered with ENOSPC: not an error of the daemon */
		char sz[SIZE_FORMAT_MAX], lg[SIZE_FORMAT_MAX], tot[SIZE_FORMAT_MAX];
		LOG_DEBUG("create volume \"%s\" of %s in %s refused: no free extent that large "
			  "(largest free extent %s at offset %" PRIu64 ", %s free in total)",
			  name, size_format(size, sz, sizeof(sz)), ns->path,
			  size_format(largest, lg, sizeof(lg)), largest_off,
			  size_format(total, tot, sizeof(tot)));
	}
	free(ext);
	return ret;
}

/* __ns_volume_find -- index in ns->volumes of @name, or -ENOENT. Needs ns->lock. */
static int __ns_volume_find(struct ns *ns, const char *name)
{
	for (unsigned i = 0; i < ns->nvolumes; i++)
		if (strcmp(ns->volumes[i]->name, name) == 0)
			return (int)i;
	return -ENOENT;
}

int ns_volume_create(struct ns *ns, const char *name, uint64_t size)
{
	if (!ns || ns_volume_name_valid(name) != 0) {
		LOG_DEBUG("create volume refused: invalid name \"%s\"", name ? name : "(null)");
		return -EINVAL;
	}
	if (size == 0 || !is_aligned(size, RDAX_PAGE_SIZE)) {
		LOG_DEBUG("create volume \"%s\" refused: size %" PRIu64
			  " is not a non-zero multiple of 4 KiB",
			  name, size);
		return -EINVAL;
	}

	int ret;
	uint64_t off = 0; /* set by __ns_place; initialised for -Wmaybe-uninitialized at -O2 */
	struct volume *v;
	pthread_mutex_lock(&ns->lock);
	if (__ns_volume_find(ns, name) >= 0) {
		/* the client's request, refused: the protocol layer logs it (once, per client) */
		LOG_DEBUG("create volume \"%s\" in %s: exists", name, ns->path);
		ret = -EEXIST;
		goto out_unlock;
	}
	if (vol_table_count(ns->table) >= VT_CAPACITY) {
		/* the client's request, answered with ENOSPC: not an error of the daemon */
		LOG_DEBUG("create volume \"%s\" in %s refused: the volume table is full (%u of %u "
			  "entries)",
			  name, ns->path, vol_table_count(ns->table), VT_CAPACITY);
		ret = -ENOSPC;
		goto out_unlock;
	}
	ret = __ns_place(ns, name, size, &off);
	if (ret)
		goto out_unlock;
	ret = ns_volumes_reserve(ns);
	if (ret)
		goto out_unlock;
	ret = volume_new(ns, name, off, size, &v);
	if (ret)
		goto out_unlock;

	/* zero first: once the table names the volume, its blocks must read zeros */
	ret = persist_zero(&ns->persist, off, size);
	if (ret) {
		LOG_ERROR("create volume \"%s\": zeroing %" PRIu64 " bytes at %" PRIu64
			  " failed: %s",
			  name, size, off, rdax_strerror(ret));
		goto err_delete_volume;
	}
	ret = vol_table_add(ns->table, name, off, size, NULL);
	if (ret)
		goto err_delete_volume;
	v->pristine = true; /* zeroed above: it reads zeros until someone opens it */
	ns->volumes[ns->nvolumes++] = v;
	LOG_INFO("created volume \"%s\" in %s: %" PRIu64 " bytes at offset %" PRIu64, name,
		 ns->path, size, off);
	pthread_mutex_unlock(&ns->lock);
	return 0;

err_delete_volume:
	volume_delete(&v);
out_unlock:
	pthread_mutex_unlock(&ns->lock);
	return ret;
}

int ns_volume_delete(struct ns *ns, const char *name)
{
	if (!ns || ns_volume_name_valid(name) != 0)
		return -EINVAL;

	int ret;
	pthread_mutex_lock(&ns->lock);
	int idx = __ns_volume_find(ns, name);
	if (idx < 0) {
		ret = idx;
		goto out_unlock;
	}
	struct volume *v = ns->volumes[idx];
	if (v->open_count > 0) {
		LOG_DEBUG("delete volume \"%s\" in %s: open (%u openers)", name, ns->path,
			  v->open_count);
		ret = -EBUSY;
		goto out_unlock;
	}
	ret = vol_table_remove(ns->table, name);
	if (ret)
		goto out_unlock;
	ns->volumes[idx] = ns->volumes[--ns->nvolumes];
	pthread_mutex_unlock(&ns->lock);

	/* unreachable now: its dirty state is dropped with it, not written back */
	volume_delete(&v);
	LOG_INFO("deleted volume \"%s\" in %s", name, ns->path);
	return 0;

out_unlock:
	pthread_mutex_unlock(&ns->lock);
	return ret;
}

/*
 * unsafe_marked -- what vol_table_unsafe_clear(@name) would clear, into @out
 * (names malloc'd). Needs ns->lock. 0, -ENOENT, -ENOMEM.
 */
static int unsafe_marked(struct ns *ns, const char *name, struct ns_unsafe_cleared *out)
{
	memset(out, 0, sizeof(*out));
	out->ns_id = ns->id;
	unsigned n = vol_table_count(ns->table);
	if (name) {
		int idx = vol_table_find(ns->table, name);
		if (idx < 0)
			return idx;
		n = 1;
	} else {
		struct vt_shutdown sds;
		vol_table_shutdown_get(ns->table, &sds);
		out->namespace_mark = (sds.flags & VT_SDS_UNSAFE) != 0;
	}
	out->names = n ? calloc(n, sizeof(*out->names)) : NULL;
	if (n && !out->names)
		return -ENOMEM;
	for (unsigned i = 0; i < vol_table_count(ns->table); i++) {
		const struct vt_volume *v = vol_table_get(ns->table, i);
		if (v->unsafe_shutdown && (!name || strcmp(v->name, name) == 0))
			memcpy(out->names[out->nvolumes++], v->name, sizeof(out->names[0]));
	}
	return 0;
}

int ns_unsafe_clear(struct ns *ns, const char *name, struct ns_unsafe_cleared *out)
{
	if (!ns || !out || (name && ns_volume_name_valid(name) != 0))
		return -EINVAL;
	pthread_mutex_lock(&ns->lock);
	int ret = unsafe_marked(ns, name, out);
	if (ret == 0 && (out->namespace_mark || out->nvolumes))
		ret = vol_table_unsafe_clear(ns->table, name);
	if (ret == 0 && !name)
		media_health_mark_set(&ns->health, false);
	pthread_mutex_unlock(&ns->lock);
	if (ret)
		ns_unsafe_cleared_free(out);
	return ret;
}

void ns_unsafe_cleared_free(struct ns_unsafe_cleared *c)
{
	if (!c)
		return;
	free(c->names);
	c->names = NULL;
	c->nvolumes = 0;
}

/* __ns_volume_info -- fill @out from @v. Needs ns->lock. */
static void __ns_volume_info(struct ns *ns, const struct volume *v, struct volume_info *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->name, v->name, sizeof(out->name));
	out->size = v->size;
	out->ns_offset = v->ns_offset;
	out->ns_id = ns->id;
	out->open_count = v->open_count;
	int idx = vol_table_find(ns->table, v->name);
	if (idx >= 0) {
		const struct vt_volume *tv = vol_table_get(ns->table, (unsigned)idx);
		memcpy(out->uuid, tv->uuid, sizeof(out->uuid));
		out->unsafe_shutdown = tv->unsafe_shutdown;
	}
}

const char *ns_kind_of(const struct persist *p, const char *path)
{
	if (p->is_devdax)
		return "devdax";
	struct statx stx;
	if (statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &stx) == 0 &&
	    (stx.stx_attributes_mask & STATX_ATTR_DAX) && (stx.stx_attributes & STATX_ATTR_DAX))
		return "fsdax";
	return "file";
}

int ns_volume_stats(struct ns *ns, struct ns_volume_stats **out, unsigned *count)
{
	if (!ns || !out || !count)
		return -EINVAL;
	struct media_health_info mh;
	media_health_get(&ns->health, &mh);
	pthread_mutex_lock(&ns->lock);
	unsigned n = ns->nvolumes;
	struct ns_volume_stats *a = n ? calloc(n, sizeof(*a)) : NULL;
	if (n && !a) {
		pthread_mutex_unlock(&ns->lock);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		struct volume *v = ns->volumes[i];
		struct volume_stats vs;
		volume_stats_get(v, &vs);
		memcpy(a[i].name, v->name, sizeof(a[i].name));
		a[i].size = v->size;
		a[i].ns_offset = v->ns_offset;
		a[i].dirty_bytes = vs.dirty_bytes;
		memcpy(a[i].entries, vs.entries, sizeof(a[i].entries));
		a[i].fsyncs = vs.fsyncs;
		a[i].fsync_bytes = vs.fsync_bytes;
		for (unsigned b = 0; b < mh.nbad; b++) {
			uint64_t lo = mh.bad[b].off > v->ns_offset ? mh.bad[b].off : v->ns_offset;
			uint64_t hi = mh.bad[b].off + mh.bad[b].len;
			if (hi > v->ns_offset + v->size)
				hi = v->ns_offset + v->size;
			if (hi > lo)
				a[i].bad_bytes += hi - lo;
		}
		int idx = vol_table_find(ns->table, v->name);
		a[i].unsafe_shutdown =
		    idx >= 0 && vol_table_get(ns->table, (unsigned)idx)->unsafe_shutdown;
	}
	pthread_mutex_unlock(&ns->lock);
	*out = a;
	*count = n;
	return 0;
}

int ns_volume_list(struct ns *ns, struct volume_info *out, unsigned max, unsigned *count)
{
	if (!ns || !count || (max > 0 && !out))
		return -EINVAL;
	pthread_mutex_lock(&ns->lock);
	unsigned n = vol_table_count(ns->table);
	for (unsigned i = 0; i < n && i < max; i++) {
		const struct vt_volume *tv = vol_table_get(ns->table, i);
		int idx = __ns_volume_find(ns, tv->name);
		if (idx >= 0)
			__ns_volume_info(ns, ns->volumes[idx], &out[i]);
	}
	*count = n;
	pthread_mutex_unlock(&ns->lock);
	return 0;
}

int ns_volume_info(struct ns *ns, const char *name, struct volume_info *out)
{
	if (!ns || !name || !out)
		return -EINVAL;
	pthread_mutex_lock(&ns->lock);
	int ret = __ns_volume_find(ns, name);
	if (ret >= 0) {
		__ns_volume_info(ns, ns->volumes[ret], out);
		ret = 0;
	}
	pthread_mutex_unlock(&ns->lock);
	return ret;
}

void ns_free_bytes(struct ns *ns, uint64_t *total, uint64_t *largest)
{
	uint64_t t = 0, l = 0, l_off = 0;
	struct extent *ext;
	unsigned n;
	if (!ns)
		goto out;
	pthread_mutex_lock(&ns->lock);
	if (__ns_free_extents(ns, &ext, &n) == 0) {
		ns_largest(ext, n, &t, &l, &l_off);
		free(ext);
	}
	pthread_mutex_unlock(&ns->lock);
out:
	if (total)
		*total = t;
	if (largest)
		*largest = l;
}

int ns_volume_open(struct ns *ns, const char *name, struct volume **out)
{
	if (!ns || !name || !out)
		return -EINVAL;
	pthread_mutex_lock(&ns->lock);
	int ret = __ns_volume_find(ns, name);
	if (ret >= 0) {
		struct volume *v = ns->volumes[ret];
		if (v->open_count++ == 0 && ns->observer.first_open) {
			int idx = vol_table_find(ns->table, v->name);
			static const uint8_t no_uuid[16];
			ns->observer.first_open(
			    ns->observer.arg, v,
			    idx >= 0 ? vol_table_get(ns->table, (unsigned)idx)->uuid : no_uuid);
		}
		*out = v;
		ret = 0;
	}
	pthread_mutex_unlock(&ns->lock);
	return ret;
}

void ns_set_observer(struct ns *ns, const struct ns_observer *obs)
{
	if (!ns)
		return;
	if (obs)
		ns->observer = *obs;
	else
		memset(&ns->observer, 0, sizeof(ns->observer));
}

void ns_volume_close(struct ns *ns, struct volume **vp)
{
	if (!ns || !vp || !*vp)
		return;
	struct volume *v = *vp;
	pthread_mutex_lock(&ns->lock);
	if (v->ns != ns)
		LOG_ERROR("close volume \"%s\": not a volume of %s", v->name, ns->path);
	else if (v->open_count == 0)
		LOG_ERROR("close volume \"%s\": not open", v->name);
	else if (--v->open_count == 0 && ns->observer.last_close)
		ns->observer.last_close(ns->observer.arg, v);
	pthread_mutex_unlock(&ns->lock);
	*vp = NULL;
}
