/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * volume.c -- a volume's data path: read, write, discard, counters
 *
 * Data goes straight into (and out of) the namespace mapping; durability is
 * fsync's business (fsync.c), except for discard, which is durable on return.
 */
#include "volume.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "log.h"
#include "media_guard.h"

int volume_new(struct ns *ns, const char *name, uint64_t ns_offset, uint64_t size,
	       struct volume **out)
{
	if (!ns || !out || ns_volume_name_valid(name) != 0)
		return -EINVAL;
	if (size == 0 || !is_aligned(size, RDAX_PAGE_SIZE) ||
	    !is_aligned(ns_offset, RDAX_PAGE_SIZE)) {
		LOG_ERROR("volume \"%s\": offset %" PRIu64 " / size %" PRIu64
			  " not 4 KiB-aligned (or size 0)",
			  name, ns_offset, size);
		return -EINVAL;
	}
	int ret = range_check(ns_offset, size, ns->persist.size);
	if (ret) {
		LOG_ERROR("volume \"%s\": [%" PRIu64 ", +%" PRIu64 ") outside the mapping (%zu)",
			  name, ns_offset, size, ns->persist.size);
		return ret;
	}

	struct volume *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	ret = dtree_new(size / RDAX_PAGE_SIZE, dloc_make(ns->id, ns_offset / RDAX_PAGE_SIZE),
			&v->tree);
	if (ret)
		goto err_free;
	ret = -pthread_mutex_init(&v->fsync_lock, NULL);
	if (ret)
		goto err_delete_tree;
	strcpy(v->name, name); /* length checked by ns_volume_name_valid */
	v->ns = ns;
	v->size = size;
	v->ns_offset = ns_offset;
	v->data = (uint8_t *)ns->persist.base + ns_offset;
	v->flush_mode = FLUSH_TRACKED;
	atomic_init(&v->fsyncs, 0);
	atomic_init(&v->fsync_bytes, 0);
	*out = v;
	return 0;

err_delete_tree:
	dtree_delete(&v->tree);
err_free:
	free(v);
	return ret;
}

void volume_delete(struct volume **vp)
{
	if (!vp || !*vp)
		return;
	struct volume *v = *vp;
	dtree_delete(&v->tree);
	pthread_mutex_destroy(&v->fsync_lock);
	free(v);
	*vp = NULL;
}

/* volume_check -- the common argument checks of the data path: 0 or -errno */
static int volume_check(const struct volume *v, uint64_t off, uint64_t len, const char *op)
{
	if (!v || len == 0)
		return -EINVAL;
	int ret = range_check(off, len, v->size);
	if (ret)
		LOG_DEBUG("%s(\"%s\", off=%" PRIu64 ", len=%" PRIu64
			  "): outside the volume (%" PRIu64 ")",
			  op, v->name, off, len, v->size);
	return ret;
}

int volume_write(struct volume *v, uint64_t off, const void *buf, uint64_t len)
{
	int ret = volume_check(v, off, len, "write");
	if (ret)
		return ret;
	if (!buf)
		return -EINVAL;
	/* stores before the mark: an fsync that misses the mark runs after it */
	ret = media_copy_in(v->data + off, buf, len);
	if (ret) {
		/* a page that cannot be written (media_guard.h): not marked, never flushed */
		LOG_ERROR("write(\"%s\", off=%" PRIu64 ", len=%" PRIu64 "): media error", v->name,
			  off, len);
		return ret;
	}
	ret = dtree_mark_dirty(v->tree, off, len);
	if (ret)
		LOG_ERROR("write(\"%s\", off=%" PRIu64 ", len=%" PRIu64
			  "): marking dirty failed: %d",
			  v->name, off, len, ret);
	return ret;
}

int volume_read(struct volume *v, uint64_t off, void *buf, uint64_t len)
{
	int ret = volume_check(v, off, len, "read");
	if (ret)
		return ret;
	if (!buf)
		return -EINVAL;
	if (volume_range_bad(v, off, len))
		return -EIO; /* a known bad block: never load from poison (media_health.h) */
	ret = media_copy_out(buf, v->data + off, len);
	if (ret)
		LOG_ERROR("read(\"%s\", off=%" PRIu64 ", len=%" PRIu64 "): media error", v->name,
			  off, len);
	return ret;
}

int volume_mark_written(struct volume *v, uint64_t off, uint64_t len)
{
	int ret = volume_check(v, off, len, "mark_written");
	if (ret)
		return ret;
	return dtree_mark_dirty(v->tree, off, len);
}

int volume_discard(struct volume *v, uint64_t off, uint64_t len)
{
	int ret = volume_check(v, off, len, "discard");
	if (ret)
		return ret;

	/*
	 * Entries first, zeros second. dtree_remove_range() waits for an fsync
	 * that holds entries of the range to finish writing them back, so the
	 * zeros cannot be overwritten by a late write-back of old data. A write
	 * racing the discard then either lands before the zeroing (and is
	 * discarded, as if it came first) or after it: its mark is set after
	 * the removal, so it stays DIRTY and the next fsync persists it. The
	 * other order would let the removal drop the mark of a write that
	 * landed after the zeroing: data in the mapping, never written back.
	 * Only whole pages lose their entries; the partial pages at the edges
	 * keep theirs (their other bytes are still dirty), and their zeroed
	 * bytes are flushed by persist_zero() itself.
	 */
	uint64_t first = align_up(off, RDAX_PAGE_SIZE) / RDAX_PAGE_SIZE;
	uint64_t end = align_down(off + len, RDAX_PAGE_SIZE) / RDAX_PAGE_SIZE;
	if (first < end)
		dtree_remove_range(v->tree, first, end);
	ret = persist_zero(&v->ns->persist, v->ns_offset + off, len);
	if (ret)
		LOG_ERROR("discard(\"%s\", off=%" PRIu64 ", len=%" PRIu64 ") failed: %d", v->name,
			  off, len, ret);
	return ret;
}

bool volume_range_bad(struct volume *v, uint64_t off, uint64_t len)
{
	return v->ns && media_health_range_bad(&v->ns->health, v->ns_offset + off, len);
}

void volume_stats_get(struct volume *v, struct volume_stats *out)
{
	if (!v || !out)
		return;
	struct dtree_stats ts;
	dtree_stats_get(v->tree, &ts);
	memset(out, 0, sizeof(*out));
	out->size = v->size;
	out->dirty_bytes = ts.dirty_bytes;
	memcpy(out->entries, ts.entries, sizeof(out->entries));
	out->tree_bytes = ts.tree_bytes;
	out->fsyncs = atomic_load(&v->fsyncs);
	out->fsync_bytes = atomic_load(&v->fsync_bytes);
}

int volume_set_flush_mode(struct volume *v, enum flush_mode mode)
{
	if (!v || (mode != FLUSH_TRACKED && mode != FLUSH_HAMMER))
		return -EINVAL;
	__atomic_store_n(&v->flush_mode, mode, __ATOMIC_RELAXED);
	LOG_INFO("volume \"%s\": flush mode %s", v->name,
		 mode == FLUSH_HAMMER ? "hammer" : "tracked");
	return 0;
}
