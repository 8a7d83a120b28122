/* SPDX-License-Identifier: BSD-3-Clause */
/* store.c -- the namespaces of one daemon, and volume names across them */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "errors.h"
#include "log.h"
#include "size.h"
#include "vol_table.h"

int store_new(struct store **out)
{
	if (!out)
		return -EINVAL;
	struct store *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

void store_delete(struct store **sp)
{
	if (!sp || !*sp)
		return;
	struct store *s = *sp;
	for (unsigned i = 0; i < s->count; i++)
		ns_close(&s->nss[i].ns); /* releases its lock */
	free(s->nss);
	pthread_mutex_destroy(&s->lock);
	free(s);
	*sp = NULL;
}

unsigned store_namespace_count(const struct store *s)
{
	return s ? s->count : 0;
}

struct ns *store_namespace(const struct store *s, uint32_t id)
{
	if (!s || id >= s->count)
		return NULL;
	return s->nss[id].ns;
}

/*
 * open_error -- the engine's reason for refusing @path, and what to do about
 * it; @size is the size asked for (0: the file's own)
 */
static void open_error(int ret, const char *path, uint64_t size, char *err, size_t errlen)
{
	switch (ret) {
	case -EBUSY:
		rdax_seterr(err, errlen,
			    "namespace %s is in use by another process (another rdaxd?)", path);
		break;
	case -ENOSPC:
		backing_space_error(path, size, err, errlen);
		break;
	case -RDAX_E_NOT_RDAX:
		rdax_seterr(
		    err, errlen,
		    "namespace %s: not an rdax namespace (no rdax superblock); format it with "
		    "rdaxd --format %s",
		    path, path);
		break;
	case -RDAX_E_BAD_METADATA:
		rdax_seterr(
		    err, errlen,
		    "namespace %s: its metadata fails its checks (see the log); it was left "
		    "untouched. rdaxd --format %s --force reformats it and destroys its volumes",
		    path, path);
		break;
	case -RDAX_E_VERSION:
		rdax_seterr(err, errlen,
			    "namespace %s: written by an rdax version this rdaxd does not support; "
			    "serve it with a matching rdaxd",
			    path);
		break;
	case -EACCES:
	case -EPERM:
		rdax_seterr(err, errlen,
			    "namespace %s: %s; run rdaxd as a user that may read and write it",
			    path, strerror(-ret));
		break;
	case -EINVAL:
	case -EISDIR:
	case -ENODEV:
		/* what the path is: backing_check's reason, which names it */
		if (backing_check(path, PERSIST_AUTO, &(enum backing_kind){0}, NULL, err, errlen) ==
		    0)
			rdax_seterr(err, errlen,
				    "namespace %s: invalid argument (a namespace needs at least "
				    "%llu MiB)",
				    path, NS_MIN_SIZE >> 20);
		break;
	default:
		rdax_seterr(err, errlen, "namespace %s: %s", path, rdax_strerror(ret));
		break;
	}
}

/* same_file -- do @a and @b name the same file or device? */
static bool same_file(const struct stat *a, const struct stat *b)
{
	if (S_ISCHR(a->st_mode) && S_ISCHR(b->st_mode))
		return a->st_rdev == b->st_rdev;
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* ns_list_all -- the volumes of one namespace in a malloc'd array */
static int ns_list_all(struct ns *ns, struct volume_info **out, unsigned *count)
{
	unsigned n = 0;
	int ret = ns_volume_list(ns, NULL, 0, &n);
	if (ret)
		return ret;
	*out = NULL;
	*count = 0;
	if (n == 0)
		return 0;
	struct volume_info *v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	unsigned got;
	ret = ns_volume_list(ns, v, n, &got);
	if (ret) {
		free(v);
		return ret;
	}
	*out = v;
	*count = got < n ? got : n;
	return 0;
}

/* __store_find -- the id of the namespace holding @name, or -ENOENT. Needs s->lock. */
static int __store_find(struct store *s, const char *name, struct volume_info *info)
{
	for (unsigned i = 0; i < s->count; i++) {
		struct volume_info tmp;
		int ret = ns_volume_info(s->nss[i].ns, name, info ? info : &tmp);
		if (ret == 0)
			return (int)i;
		if (ret != -ENOENT)
			return ret;
	}
	return -ENOENT;
}

/* check_unique -- no volume of @ns may share a name with one already served */
static int check_unique(struct store *s, struct ns *ns, char *err, size_t errlen)
{
	struct volume_info *vols;
	unsigned n;
	int ret = ns_list_all(ns, &vols, &n);
	if (ret) {
		rdax_seterr(err, errlen, "namespace %s: listing its volumes: %s", ns->path,
			    rdax_strerror(ret));
		return ret;
	}
	for (unsigned i = 0; i < n; i++) {
		int id = __store_find(s, vols[i].name, NULL);
		if (id >= 0) {
			rdax_seterr(
			    err, errlen,
			    "namespace %s: volume \"%s\" also exists in namespace %s; volume "
			    "names must be unique across the daemon (serve the namespaces with "
			    "separate daemons, or delete one of the volumes)",
			    ns->path, vols[i].name, s->nss[id].ns->path);
			ret = -EEXIST;
			break;
		}
	}
	free(vols);
	return ret;
}

int store_namespace_add(struct store *s, const char *path, uint64_t create_size,
			enum persist_mode mode, char *err, size_t errlen)
{
	if (!s || !path || !*path)
		return -EINVAL;
	uint32_t id = s->count;
	struct store_ns sn = {0};
	struct stat st;
	int ret;

	if (stat(path, &st) < 0) {
		ret = -errno;
		if (ret != -ENOENT || create_size == 0) {
			if (ret == -ENOENT)
				rdax_seterr(
				    err, errlen,
				    "namespace %s does not exist; add ,size=SIZE to create it as "
				    "an emulated namespace (a file), or give a devdax device",
				    path);
			else
				open_error(ret, path, create_size, err, errlen);
			return ret;
		}
		ret = ns_create(path, create_size, mode, id, &sn.ns);
		if (ret) {
			if (ret == -EEXIST)
				rdax_seterr(
				    err, errlen,
				    "namespace %s appeared while it was being created; start "
				    "again",
				    path);
			else
				open_error(ret, path, create_size, err, errlen);
			return ret;
		}
		if (stat(path, &st) < 0) {
			ret = -errno;
			open_error(ret, path, 0, err, errlen);
			goto err_close_ns;
		}
	} else {
		/* what it is first: a FIFO or /dev/null is refused before anything opens it */
		enum backing_kind kind;
		ret = backing_check(path, mode, &kind, &st, err, errlen);
		if (ret)
			return ret;
		if (create_size && kind == BACKING_FILE && (uint64_t)st.st_size != create_size)
			LOG_WARN("namespace %s exists (%" PRIu64 " bytes): size=%" PRIu64
				 " only applies when it is created; serving it as it is",
				 path, (uint64_t)st.st_size, create_size);
	}

	for (unsigned i = 0; i < s->count; i++) {
		struct stat other;
		if (stat(s->nss[i].ns->path, &other) == 0 && same_file(&st, &other)) {
			rdax_seterr(err, errlen, "namespace %s is the same file as namespace %s",
				    path, s->nss[i].ns->path);
			ret = -EEXIST;
			goto err_close_ns;
		}
	}

	if (!sn.ns) {
		/* takes the namespace lock (backing.h): -EBUSY while another process serves it */
		ret = ns_open(path, mode, id, &sn.ns);
		if (ret) {
			open_error(ret, path, 0, err, errlen);
			return ret;
		}
	}

	ret = check_unique(s, sn.ns, err, errlen);
	if (ret)
		goto err_close_ns;

	struct store_ns *a = realloc(s->nss, (s->count + 1) * sizeof(*a));
	if (!a) {
		ret = -ENOMEM;
		rdax_seterr(err, errlen, "namespace %s: out of memory", path);
		goto err_close_ns;
	}
	s->nss = a;
	s->nss[s->count++] = sn;
	return 0;

err_close_ns:
	ns_close(&sn.ns);
	return ret;
}

/* ns_table_full -- whether the volume table of @ns has no entry left */
static bool ns_table_full(struct ns *ns)
{
	unsigned n = 0;
	ns_volume_list(ns, NULL, 0, &n);
	return n >= VT_CAPACITY;
}

/*
 * no_room_error -- why namespace @id has no room for volume @name of @size
 * bytes: a full table and a lack of space are different troubles with
 * different cures, so they read differently. Needs s->lock (no create or
 * delete can run between the refusal and this account of it).
 */
static void no_room_error(struct store *s, uint32_t id, const char *name, uint64_t size, char *err,
			  size_t errlen)
{
	struct ns *ns = s->nss[id].ns;
	char want[SIZE_FORMAT_MAX], largest_s[SIZE_FORMAT_MAX], total_s[SIZE_FORMAT_MAX];
	if (ns_table_full(ns)) {
		rdax_seterr(err, errlen,
			    "no room for volume \"%s\": the volume table of namespace %" PRIu32
			    " (%s) is full (%u of %u entries); delete a volume first",
			    name, id, ns->path, VT_CAPACITY, VT_CAPACITY);
		return;
	}
	uint64_t total = 0, largest = 0;
	ns_free_bytes(ns, &total, &largest);
	rdax_seterr(err, errlen,
		    "no room for volume \"%s\" of %s in namespace %" PRIu32
		    " (%s): no free extent that large (largest free: %s, %s free in all)",
		    name, size_format(size, want, sizeof(want)), id, ns->path,
		    size_format(largest, largest_s, sizeof(largest_s)),
		    size_format(total, total_s, sizeof(total_s)));
}

/*
 * __store_place -- the namespace for a new volume when the request names
 * none: the largest free extent among namespaces whose table has room.
 * Needs s->lock. Returns 0, -ENOENT (no namespace), -ENOSPC (every table full).
 */
static int __store_place(struct store *s, uint32_t *id)
{
	if (s->count == 0)
		return -ENOENT;
	bool found = false;
	uint64_t best = 0;
	for (uint32_t i = 0; i < s->count; i++) {
		if (ns_table_full(s->nss[i].ns))
			continue;
		uint64_t l = 0;
		ns_free_bytes(s->nss[i].ns, NULL, &l);
		if (!found || l > best) {
			found = true;
			best = l;
			*id = i;
		}
	}
	if (!found)
		*id = 0; /* every table is full: the refusal names the first */
	return found ? 0 : -ENOSPC;
}

int store_volume_create(struct store *s, const char *name, uint64_t size, const uint32_t *ns_id,
			uint32_t *placed, char *err, size_t errlen)
{
	if (!s || !name || ns_volume_name_valid(name) || size == 0) {
		rdax_seterr(err, errlen, "create volume: invalid name or size 0");
		return -EINVAL;
	}
	pthread_mutex_lock(&s->lock);
	int ret = __store_find(s, name, NULL);
	if (ret >= 0) {
		rdax_seterr(err, errlen, "volume \"%s\" already exists", name);
		ret = -EEXIST;
		goto out_unlock;
	}
	if (ret != -ENOENT)
		goto out_unlock;

	uint32_t id = 0;
	if (ns_id) {
		if (*ns_id >= s->count) {
			rdax_seterr(err, errlen, "no namespace %" PRIu32 " (this daemon serves %u)",
				    *ns_id, s->count);
			ret = -ENOENT;
			goto out_unlock;
		}
		id = *ns_id;
	} else {
		ret = __store_place(s, &id);
		if (ret == -ENOENT) {
			rdax_seterr(err, errlen, "no namespace to create volume \"%s\" in", name);
			goto out_unlock;
		}
		if (ret) {
			no_room_error(s, id, name, size, err, errlen);
			goto out_unlock;
		}
	}
	ret = ns_volume_create(s->nss[id].ns, name, size);
	if (ret == -ENOSPC)
		no_room_error(s, id, name, size, err, errlen);
	else if (ret == -EOVERFLOW)
		rdax_seterr(err, errlen,
			    "namespace %" PRIu32 " (%s): its metadata has taken its last change "
			    "(generation 2^64-1); copy the volumes off and reformat it",
			    id, s->nss[id].ns->path);
	else if (ret)
		rdax_seterr(err, errlen, "create volume \"%s\": %s", name, rdax_strerror(ret));
	if (ret == 0 && placed)
		*placed = id;
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int store_volume_delete(struct store *s, const char *name)
{
	if (!s || !name || ns_volume_name_valid(name))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	int ret = __store_find(s, name, NULL);
	if (ret >= 0)
		ret = ns_volume_delete(s->nss[ret].ns, name);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int store_volume_unsafe_clear(struct store *s, const char *name, struct ns_unsafe_cleared *out)
{
	if (!s || !name || !out || ns_volume_name_valid(name))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	int ret = __store_find(s, name, NULL);
	if (ret >= 0)
		ret = ns_unsafe_clear(s->nss[ret].ns, name, out);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int store_namespace_unsafe_clear(struct store *s, uint32_t id, struct ns_unsafe_cleared *out)
{
	if (!s || !out)
		return -EINVAL;
	struct ns *ns = store_namespace(s, id);
	return ns ? ns_unsafe_clear(ns, NULL, out) : -ENOENT;
}

int store_volume_open(struct store *s, const char *name, struct volume **out)
{
	if (!s || !name || !out || ns_volume_name_valid(name))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	int ret = __store_find(s, name, NULL);
	if (ret >= 0)
		ret = ns_volume_open(s->nss[ret].ns, name, out);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void store_volume_close(struct store *s, struct volume **vp)
{
	if (!s || !vp || !*vp)
		return;
	ns_volume_close((*vp)->ns, vp);
}

int store_volume_info(struct store *s, const char *name, struct volume_info *out)
{
	if (!s || !name || !out || ns_volume_name_valid(name))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	int ret = __store_find(s, name, out);
	pthread_mutex_unlock(&s->lock);
	return ret < 0 ? ret : 0;
}

int store_volume_list(struct store *s, struct volume_info **out, unsigned *count)
{
	if (!s || !out || !count)
		return -EINVAL;
	struct volume_info *all = NULL;
	unsigned total = 0;
	int ret = 0;
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->count; i++) {
		struct volume_info *v;
		unsigned n;
		ret = ns_list_all(s->nss[i].ns, &v, &n);
		if (ret)
			break;
		if (n == 0)
			continue;
		struct volume_info *a = realloc(all, (total + n) * sizeof(*a));
		if (!a) {
			free(v);
			ret = -ENOMEM;
			break;
		}
		all = a;
		memcpy(all + total, v, n * sizeof(*v));
		total += n;
		free(v);
	}
	pthread_mutex_unlock(&s->lock);
	if (ret) {
		free(all);
		return ret;
	}
	*out = all;
	*count = total;
	return 0;
}

void store_largest_free(struct store *s, uint64_t *largest, uint32_t *ns_id)
{
	uint64_t best = 0;
	uint32_t best_id = 0;
	for (unsigned i = 0; s && i < s->count; i++) {
		uint64_t l = 0;
		ns_free_bytes(s->nss[i].ns, NULL, &l);
		if (l > best) {
			best = l;
			best_id = i;
		}
	}
	if (largest)
		*largest = best;
	if (ns_id)
		*ns_id = best_id;
}

int store_power_cut(struct store *s, char *err, size_t errlen)
{
	if (!s)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	int ret = 0;
	for (unsigned i = 0; i < s->count && ret == 0; i++) {
		ret = ns_power_cut(s->nss[i].ns);
		if (ret)
			rdax_seterr(err, errlen, "power cut of namespace %s: %s",
				    s->nss[i].ns->path,
				    ret == -EOPNOTSUPP ? "not in sim mode" : rdax_strerror(ret));
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

bool store_all_sim(const struct store *s)
{
	if (!s || s->count == 0)
		return false;
	for (unsigned i = 0; i < s->count; i++)
		if (s->nss[i].ns->persist.mode != PERSIST_SIM)
			return false;
	return true;
}

void store_set_observer(struct store *s, const struct ns_observer *obs)
{
	for (unsigned i = 0; s && i < s->count; i++)
		ns_set_observer(s->nss[i].ns, obs);
}
