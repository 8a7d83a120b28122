/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * media_health.c -- unsafe-shutdown count and bad blocks of a namespace
 *
 * The contract is in media_health.h, the on-media record in vol_table.h.
 * One function reads the device (health_read: libpmem2, or the fake source
 * of the tests); open compares and records, refresh only reads again.
 */
#include "media_health.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpmem2.h>

#include "faults.h"
#include "log.h"
#include "size.h"
#include "vol_table.h"

/* What one read of the device found. */
struct health_sample {
	bool usc_supported;
	uint64_t usc;
	bool badblocks_supported;
	unsigned nbad;
	struct media_bad_range bad[MEDIA_BAD_MAX];
	const char *source;
};

/* sample_add_bad -- one bad range; past MEDIA_BAD_MAX the last one grows to cover it */
static void sample_add_bad(struct health_sample *s, uint64_t off, uint64_t len)
{
	if (len == 0)
		return;
	if (s->nbad < MEDIA_BAD_MAX) {
		s->bad[s->nbad++] = (struct media_bad_range){off, len};
		return;
	}
	struct media_bad_range *last = &s->bad[MEDIA_BAD_MAX - 1];
	uint64_t lo = off < last->off ? off : last->off;
	uint64_t hi = off + len > last->off + last->len ? off + len : last->off + last->len;
	*last = (struct media_bad_range){lo, hi - lo};
}

/*
 * read_fake -- the test source (faults.h fake-media): PATH.media, lines
 * "usc N" and "badblock OFFSET LENGTH"; no file: nothing supported
 */
static void read_fake(const char *path, struct health_sample *s)
{
	char name[4096];
	s->source = "fake";
	if (snprintf(name, sizeof(name), "%s.media", path) >= (int)sizeof(name))
		return;
	FILE *f = fopen(name, "re");
	if (!f)
		return;
	s->badblocks_supported = true;
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		uint64_t a, b;
		if (sscanf(line, "usc %" SCNu64, &a) == 1) {
			s->usc_supported = true;
			s->usc = a;
		} else if (sscanf(line, "badblock %" SCNu64 " %" SCNu64, &a, &b) == 2) {
			sample_add_bad(s, a, b);
		}
	}
	fclose(f);
}

/* read_pmem2 -- the device's own report through libpmem2 */
static void read_pmem2(const char *path, int fd, struct health_sample *s)
{
	struct pmem2_source *src;
	s->source = "pmem2";
	int ret = pmem2_source_from_fd(&src, fd);
	if (ret) {
		LOG_DEBUG("%s: pmem2_source_from_fd failed: %s", path, pmem2_errormsg());
		return;
	}
	ret = pmem2_source_device_usc(src, &s->usc);
	if (ret == 0)
		s->usc_supported = true;
	else
		LOG_DEBUG("%s: no unsafe-shutdown count: %s", path, pmem2_errormsg());

	struct pmem2_badblock_context *bbctx;
	ret = pmem2_badblock_context_new(&bbctx, src);
	if (ret == 0) {
		s->badblocks_supported = true;
		struct pmem2_badblock bb;
		while ((ret = pmem2_badblock_next(bbctx, &bb)) == 0)
			sample_add_bad(s, bb.offset, bb.length);
		if (ret != PMEM2_E_NO_BAD_BLOCK_FOUND)
			LOG_WARN("%s: reading the bad blocks failed after %u: %s", path, s->nbad,
				 pmem2_errormsg());
		pmem2_badblock_context_delete(&bbctx);
	} else {
		LOG_DEBUG("%s: no bad-block list: %s", path, pmem2_errormsg());
	}
	pmem2_source_delete(&src);
}

/* health_read -- one reading of the namespace's device */
static void health_read(const char *path, int fd, struct health_sample *s)
{
	memset(s, 0, sizeof(*s));
	if (rdax_faults.fake_media)
		read_fake(path, s);
	else
		read_pmem2(path, fd, s);
}

/* health_set_bad -- publish the bad ranges of @s (under h->lock) */
static void health_set_bad(struct media_health *h, const struct health_sample *s)
{
	pthread_mutex_lock(&h->lock);
	memcpy(h->bad, s->bad, s->nbad * sizeof(s->bad[0]));
	atomic_store(&h->nbad, s->nbad);
	h->badblocks_supported = s->badblocks_supported;
	h->usc_supported = s->usc_supported;
	h->usc = s->usc;
	h->source = s->source;
	pthread_mutex_unlock(&h->lock);
}

/* log_bad -- each bad range once, with the volumes it hits (at open) */
static void log_bad(const char *path, const struct health_sample *s, struct vol_table *t)
{
	for (unsigned i = 0; i < s->nbad; i++) {
		const struct media_bad_range *b = &s->bad[i];
		char hit[256] = "";
		size_t n = 0;
		for (unsigned k = 0; t && k < vol_table_count(t) && n < sizeof(hit); k++) {
			const struct vt_volume *v = vol_table_get(t, k);
			if (b->off >= v->ns_offset + v->size || v->ns_offset >= b->off + b->len)
				continue;
			uint64_t lo = b->off > v->ns_offset ? b->off - v->ns_offset : 0;
			uint64_t hi = b->off + b->len - v->ns_offset;
			if (hi > v->size)
				hi = v->size;
			n += (size_t)snprintf(hit + n, sizeof(hit) - n,
					      "%svolume \"%s\" [%" PRIu64 ", +%" PRIu64 ")",
					      n ? ", " : "", v->name, lo, hi - lo);
		}
		LOG_WARN("namespace %s: bad block at offset %" PRIu64 ", %" PRIu64
			 " bytes (%s): reads of it get EIO; rewrite the data from a copy, "
			 "then clear the poison (ndctl clear-errors) or replace the module",
			 path, b->off, b->len, n ? hit : "in no volume");
	}
}

int media_health_open(struct media_health *h, const char *path, int fd, struct vol_table *t)
{
	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->lock, NULL);
	struct health_sample s;
	health_read(path, fd, &s);
	health_set_bad(h, &s);
	log_bad(path, &s, t);

	struct vt_shutdown sds;
	vol_table_shutdown_get(t, &sds);
	h->unsafe_shutdown = (sds.flags & VT_SDS_UNSAFE) != 0;
	if (h->unsafe_shutdown)
		LOG_ERROR(
		    "namespace %s: marked by an earlier unsafe shutdown (data acknowledged as "
		    "durable before it may be lost): check every volume's data or restore "
		    "it from a replica or backup",
		    path);
	if (!s.usc_supported)
		return 0;

	bool changed = (sds.flags & VT_SDS_KNOWN) && sds.usc != s.usc;
	bool was_in_use = (sds.flags & VT_SDS_IN_USE) != 0;
	bool hit = changed && was_in_use && !rdax_faults.usc_no_compare;
	if (hit)
		LOG_ERROR(
		    "namespace %s: unsafe shutdown while it was in use (unsafe-shutdown count "
		    "%" PRIu64 ", recorded %" PRIu64 "): the platform lost power without "
		    "flushing the memory's write buffers, so writes acknowledged as durable "
		    "may be lost. Every volume of it is marked (rdax namespace list): check "
		    "their data, or restore them from a replica or backup",
		    path, s.usc, sds.usc);
	else if (changed)
		LOG_INFO("namespace %s: unsafe-shutdown count %" PRIu64 " (was %" PRIu64
			 "), while the namespace was closed: nothing of it was at risk",
			 path, s.usc, sds.usc);
	struct vt_shutdown next = {
	    .usc = s.usc,
	    .flags = sds.flags | VT_SDS_KNOWN | VT_SDS_IN_USE | (hit ? VT_SDS_UNSAFE : 0),
	};
	int ret = vol_table_shutdown_set(t, &next, hit);
	if (ret) {
		LOG_ERROR("namespace %s: recording the unsafe-shutdown count failed: %s", path,
			  strerror(-ret));
		return ret;
	}
	h->unsafe_shutdown = h->unsafe_shutdown || hit;
	h->recorded = true;
	return 0;
}

void media_health_close(struct media_health *h, struct vol_table *t)
{
	if (!h->recorded || !t) /* no table: a power cut's reload failed (ns_power_cut) */
		return;
	struct vt_shutdown sds;
	vol_table_shutdown_get(t, &sds);
	sds.flags &= ~VT_SDS_IN_USE;
	int ret = vol_table_shutdown_set(t, &sds, false);
	if (ret)
		LOG_ERROR("clearing the namespace's in-use mark failed: %s (the next start may "
			  "take a later unsafe shutdown for one in use)",
			  strerror(-ret));
	h->recorded = false;
}

void media_health_refresh(struct media_health *h, const char *path, int fd)
{
	struct health_sample s;
	health_read(path, fd, &s);
	unsigned before = atomic_load(&h->nbad);
	health_set_bad(h, &s);
	if (s.nbad != before)
		LOG_WARN("namespace %s: %u bad block range%s now (was %u)", path, s.nbad,
			 s.nbad == 1 ? "" : "s", before);
}

bool media_health_range_bad(struct media_health *h, uint64_t off, uint64_t len)
{
	if (__builtin_expect(atomic_load_explicit(&h->nbad, memory_order_acquire) == 0, 1))
		return false;
	if (rdax_faults.no_badblock_check)
		return false;
	bool bad = false;
	pthread_mutex_lock(&h->lock);
	unsigned n = atomic_load(&h->nbad);
	for (unsigned i = 0; i < n && !bad; i++)
		bad = off < h->bad[i].off + h->bad[i].len && h->bad[i].off < off + len;
	pthread_mutex_unlock(&h->lock);
	return bad;
}

void media_health_mark_set(struct media_health *h, bool marked)
{
	pthread_mutex_lock(&h->lock);
	h->unsafe_shutdown = marked;
	pthread_mutex_unlock(&h->lock);
}

void media_health_get(struct media_health *h, struct media_health_info *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&h->lock);
	out->badblocks_supported = h->badblocks_supported;
	out->usc_supported = h->usc_supported;
	out->usc = h->usc;
	out->unsafe_shutdown = h->unsafe_shutdown;
	out->nbad = atomic_load(&h->nbad);
	memcpy(out->bad, h->bad, out->nbad * sizeof(h->bad[0]));
	for (unsigned i = 0; i < out->nbad; i++)
		out->bad_bytes += h->bad[i].len;
	pthread_mutex_unlock(&h->lock);
}

void media_health_destroy(struct media_health *h)
{
	pthread_mutex_destroy(&h->lock);
}
