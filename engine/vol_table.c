/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vol_table.c -- a namespace's on-media metadata: two checksummed slots
 *
 * The layout and the commit protocol are described in vol_table.h. Every
 * integer on media is little-endian; the media structs below are packed and
 * only vt_encode()/vt_slot_check() convert between them and host structs.
 */
#include "vol_table.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <zlib.h>

#include "checked.h"
#include "errors.h"
#include "faults.h"
#include "log.h"
#include "media_guard.h"

/* A mapping must hold the metadata area plus one 2 MiB block of data. */
#define VT_MIN_SIZE (VT_META_SIZE + RDAX_PMD_SIZE)

struct vt_header_media {
	uint8_t magic[VT_MAGIC_LEN];
	uint16_t version;
	uint32_t header_size;
	uint32_t entry_size;
	uint64_t generation;
	uint32_t crc;
	uint32_t count;
	uint8_t ns_uuid[VT_UUID_SIZE];
	uint64_t ns_size;
	uint64_t data_offset;
	uint64_t data_size;
	uint32_t capacity;
	uint64_t usc;	    /* shutdown state (vol_table.h): unsafe-shutdown count */
	uint32_t sds_flags; /* VT_SDS_* */
	uint8_t reserved[168];
} __attribute__((packed));

struct vt_entry_media {
	char name[VT_NAME_SIZE];
	uint64_t size;
	uint64_t ns_offset;
	uint32_t flags;
	uint32_t reserved0;
	uint8_t uuid[VT_UUID_SIZE];
	uint64_t create_generation;
	uint8_t reserved1[16];
} __attribute__((packed));

_Static_assert(sizeof(struct vt_header_media) == VT_HEADER_SIZE, "header is 256 bytes");
_Static_assert(sizeof(struct vt_entry_media) == VT_ENTRY_SIZE, "entry is 128 bytes");
_Static_assert(offsetof(struct vt_header_media, generation) == 16, "layout of vol_table.h");
_Static_assert(offsetof(struct vt_header_media, capacity) == 72, "layout of vol_table.h");
_Static_assert(offsetof(struct vt_header_media, usc) == 76, "layout of vol_table.h");
_Static_assert(offsetof(struct vt_header_media, sds_flags) == 84, "layout of vol_table.h");
_Static_assert(offsetof(struct vt_entry_media, create_generation) == 104, "layout");
_Static_assert(VT_HEADER_SIZE + (uint64_t)VT_CAPACITY * VT_ENTRY_SIZE <= VT_SLOT_SIZE,
	       "a full table fits its slot");
_Static_assert(VT_HEADER_SIZE % RDAX_CACHELINE == 0, "line 0 holds magic, generation, crc");
_Static_assert(VT_ENTRY_SIZE % RDAX_CACHELINE == 0, "a slot image is whole cache lines");

/* The state one slot holds, in host byte order. */
struct vt_state {
	uint64_t generation;
	uint8_t ns_uuid[VT_UUID_SIZE];
	uint64_t ns_size;
	uint64_t data_offset;
	uint64_t data_size;
	struct vt_shutdown sds;
	unsigned count;
	struct vt_volume vols[VT_CAPACITY];
};

struct vol_table {
	const struct persist *p;
	unsigned slot;	   /* 0 (A) or 1 (B): the slot st was loaded from */
	bool copies_agree; /* the other slot holds st too */
	struct vt_state st;
};

/*
 * A slot as read from the media: every read of a slot goes through one
 * guarded copy into this (media_guard.h), so a bad page in the metadata makes
 * that copy invalid instead of killing the process, and both copies can be
 * compared byte for byte.
 */
struct vt_image {
	uint8_t bytes[VT_HEADER_SIZE + (size_t)VT_CAPACITY * VT_ENTRY_SIZE];
};

/* What a slot turned out to hold. */
enum vt_slot_result { VT_SLOT_NO_MAGIC, VT_SLOT_BAD_VERSION, VT_SLOT_INVALID, VT_SLOT_VALID };

static char slot_name(unsigned slot)
{
	return slot == 0 ? 'A' : 'B';
}

static uint8_t *slot_base(const struct persist *p, unsigned slot)
{
	return (uint8_t *)p->base + (uint64_t)slot * VT_SLOT_SIZE;
}

int vt_name_valid(const char *name)
{
	if (!name)
		return -EINVAL;
	size_t len = strnlen(name, VT_NAME_SIZE);
	if (len == 0 || len >= VT_NAME_SIZE)
		return -EINVAL;
	if (name[0] == '.' || name[0] == '-')
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		if (!ok)
			return -EINVAL;
	}
	return 0;
}

/* fill_random -- @len random bytes (getrandom, blocking until seeded); 0 or -errno */
static int fill_random(uint8_t *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = getrandom(buf + got, len - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int ret = -errno;
			LOG_ERROR("getrandom(%zu) failed: %s", len - got, strerror(errno));
			return ret;
		}
		got += (size_t)n;
	}
	return 0;
}

/* vt_encoded_len -- bytes of a slot that hold @count entries */
static size_t vt_encoded_len(unsigned count)
{
	return VT_HEADER_SIZE + (size_t)count * VT_ENTRY_SIZE;
}

/* vt_encode -- the media image of @s (header + count entries, crc set) into @buf */
static void vt_encode(const struct vt_state *s, uint8_t *buf)
{
	size_t len = vt_encoded_len(s->count);
	memset(buf, 0, len);

	struct vt_header_media h = {0};
	memcpy(h.magic, VT_MAGIC, VT_MAGIC_LEN);
	h.version = htole16(VT_VERSION);
	h.header_size = htole32(VT_HEADER_SIZE);
	h.entry_size = htole32(VT_ENTRY_SIZE);
	h.generation = htole64(s->generation);
	h.crc = 0;
	h.count = htole32(s->count);
	memcpy(h.ns_uuid, s->ns_uuid, VT_UUID_SIZE);
	h.ns_size = htole64(s->ns_size);
	h.data_offset = htole64(s->data_offset);
	h.data_size = htole64(s->data_size);
	h.capacity = htole32(VT_CAPACITY);
	h.usc = htole64(s->sds.usc);
	h.sds_flags = htole32(s->sds.flags);
	memcpy(buf, &h, sizeof(h));

	for (unsigned i = 0; i < s->count; i++) {
		const struct vt_volume *v = &s->vols[i];
		struct vt_entry_media e = {0};
		memcpy(e.name, v->name, VT_NAME_SIZE);
		e.size = htole64(v->size);
		e.ns_offset = htole64(v->ns_offset);
		e.flags =
		    htole32(VT_ENTRY_IN_USE | (v->unsafe_shutdown ? VT_ENTRY_UNSAFE_SHUTDOWN : 0));
		memcpy(e.uuid, v->uuid, VT_UUID_SIZE);
		e.create_generation = htole64(v->create_generation);
		memcpy(buf + VT_HEADER_SIZE + (size_t)i * VT_ENTRY_SIZE, &e, sizeof(e));
	}

	uint32_t crc = (uint32_t)crc32(0L, buf, (uInt)len);
	h.crc = htole32(crc);
	memcpy(buf + offsetof(struct vt_header_media, crc), &h.crc, sizeof(h.crc));
}

/*
 * vt_slot_write -- write an encoded state into @slot so that the slot never
 * shows the magic unless it is complete (vol_table.h): clear line 0, write
 * and fence the rest, then write and fence line 0. The stores are guarded
 * (media_guard.h). Returns 0, or -EIO: a page of the slot cannot be written,
 * and the slot is left without its magic or as it was.
 */
static int vt_slot_write(const struct persist *p, unsigned slot, const uint8_t *buf, size_t len)
{
	uint8_t *dst = slot_base(p, slot);
	int ret = media_set(dst, 0, RDAX_CACHELINE);
	if (ret)
		goto err;
	persist_range(p, dst, RDAX_CACHELINE);

	ret = media_copy_in(dst + RDAX_CACHELINE, buf + RDAX_CACHELINE, len - RDAX_CACHELINE);
	if (ret)
		goto err;
	persist_range(p, dst + RDAX_CACHELINE, len - RDAX_CACHELINE);

	ret = media_copy_in(dst, buf, RDAX_CACHELINE);
	if (ret)
		goto err;
	persist_range(p, dst, RDAX_CACHELINE);
	return 0;

err:
	LOG_ERROR("writing metadata copy %c failed: media error", slot_name(slot));
	return ret;
}

/*
 * vt_slots_write_together -- the meta_copies_together control: both slots
 * written at once, line by line, so a cut tears both (never used otherwise)
 */
static void vt_slots_write_together(const struct persist *p, const uint8_t *buf, size_t len)
{
	for (unsigned s = 0; s < 2; s++) {
		memset(slot_base(p, s), 0, RDAX_CACHELINE);
		persist_range(p, slot_base(p, s), RDAX_CACHELINE);
	}
	for (size_t off = RDAX_CACHELINE; off < len; off += RDAX_CACHELINE) {
		for (unsigned s = 0; s < 2; s++) {
			memcpy(slot_base(p, s) + off, buf + off, RDAX_CACHELINE);
			persist_range(p, slot_base(p, s) + off, RDAX_CACHELINE);
		}
	}
	for (unsigned s = 0; s < 2; s++) {
		memcpy(slot_base(p, s), buf, RDAX_CACHELINE);
		persist_range(p, slot_base(p, s), RDAX_CACHELINE);
	}
}

/* vt_volume_check -- one volume against the data area of @s; a reason or NULL */
static const char *vt_volume_check(const struct vt_state *s, const struct vt_volume *v)
{
	uint64_t end;
	if (vt_name_valid(v->name) != 0)
		return "invalid name";
	if (v->size == 0 || !is_aligned(v->size, RDAX_PAGE_SIZE))
		return "size not a non-zero multiple of 4 KiB";
	if (!is_aligned(v->ns_offset, RDAX_PAGE_SIZE))
		return "offset not 4 KiB aligned";
	if (__builtin_add_overflow(v->ns_offset, v->size, &end) || v->ns_offset < s->data_offset ||
	    end > s->data_offset + s->data_size)
		return "outside the data area";
	return NULL;
}

static int cmp_by_offset(const void *a, const void *b)
{
	const struct vt_volume *x = *(const struct vt_volume *const *)a;
	const struct vt_volume *y = *(const struct vt_volume *const *)b;
	return x->ns_offset < y->ns_offset ? -1 : x->ns_offset > y->ns_offset;
}

/*
 * vt_state_check -- the sanity checks of a decoded state against a mapping
 * of @map_size bytes; writes the reason into @why. Returns true if sane.
 */
static bool vt_state_check(const struct vt_state *s, size_t map_size, char *why, size_t whylen)
{
	uint64_t data_end;
	if (s->generation == 0) {
		snprintf(why, whylen, "generation 0");
		return false;
	}
	if (s->ns_size > map_size) {
		snprintf(why, whylen, "records a namespace of %" PRIu64 " bytes, only %zu mapped",
			 s->ns_size, map_size);
		return false;
	}
	if (s->data_offset < VT_META_SIZE || !is_aligned(s->data_offset, RDAX_PAGE_SIZE) ||
	    s->data_size == 0 || !is_aligned(s->data_size, RDAX_PAGE_SIZE) ||
	    __builtin_add_overflow(s->data_offset, s->data_size, &data_end) ||
	    data_end > s->ns_size) {
		snprintf(why, whylen,
			 "bad data area (offset %" PRIu64 ", size %" PRIu64 ", namespace %" PRIu64
			 ")",
			 s->data_offset, s->data_size, s->ns_size);
		return false;
	}

	const struct vt_volume *sorted[VT_CAPACITY];
	for (unsigned i = 0; i < s->count; i++) {
		const struct vt_volume *v = &s->vols[i];
		const char *reason = vt_volume_check(s, v);
		if (!reason && v->create_generation > s->generation)
			reason = "created in a later generation";
		if (reason) {
			snprintf(why, whylen,
				 "entry %u (\"%.*s\", offset %" PRIu64 ", size %" PRIu64 "): %s", i,
				 VT_NAME_SIZE - 1, v->name, v->ns_offset, v->size, reason);
			return false;
		}
		for (unsigned j = 0; j < i; j++) {
			if (strcmp(s->vols[j].name, v->name) == 0) {
				snprintf(why, whylen, "entries %u and %u share the name \"%s\"", j,
					 i, v->name);
				return false;
			}
		}
		sorted[i] = v;
	}
	qsort(sorted, s->count, sizeof(sorted[0]), cmp_by_offset);
	for (unsigned i = 1; i < s->count; i++) {
		if (sorted[i - 1]->ns_offset + sorted[i - 1]->size > sorted[i]->ns_offset) {
			snprintf(why, whylen, "volumes \"%s\" and \"%s\" overlap",
				 sorted[i - 1]->name, sorted[i]->name);
			return false;
		}
	}
	return true;
}

/*
 * vt_slot_check -- read @slot of @p into @img (header, then the entries in
 * use), decode and check it into @s; the reason for anything but
 * VT_SLOT_VALID goes to @why
 */
static enum vt_slot_result vt_slot_check(const struct persist *p, unsigned slot,
					 struct vt_image *img, struct vt_state *s, char *why,
					 size_t whylen)
{
	const uint8_t *src = img->bytes;
	struct vt_header_media h;
	if (media_copy_out(img->bytes, slot_base(p, slot), VT_HEADER_SIZE) != 0) {
		snprintf(why, whylen, "unreadable (media error in its header)");
		return VT_SLOT_INVALID;
	}
	memcpy(&h, src, sizeof(h));

	if (memcmp(h.magic, VT_MAGIC, VT_MAGIC_LEN) != 0) {
		snprintf(why, whylen, "no rdax magic");
		return VT_SLOT_NO_MAGIC;
	}
	unsigned version = le16toh(h.version);
	if (version != VT_VERSION) {
		snprintf(why, whylen, "format version %u (this build reads %u)", version,
			 VT_VERSION);
		return VT_SLOT_BAD_VERSION;
	}
	uint32_t header_size = le32toh(h.header_size), entry_size = le32toh(h.entry_size);
	uint32_t capacity = le32toh(h.capacity), count = le32toh(h.count);
	if (header_size != VT_HEADER_SIZE || entry_size != VT_ENTRY_SIZE ||
	    capacity != VT_CAPACITY || count > capacity) {
		snprintf(why, whylen,
			 "bad geometry (header %" PRIu32 " B, entry %" PRIu32
			 " B, capacity %" PRIu32 ", count %" PRIu32 ")",
			 header_size, entry_size, capacity, count);
		return VT_SLOT_INVALID;
	}
	if (media_copy_out(img->bytes + VT_HEADER_SIZE, slot_base(p, slot) + VT_HEADER_SIZE,
			   (size_t)count * VT_ENTRY_SIZE) != 0) {
		snprintf(why, whylen, "unreadable (media error in its %" PRIu32 " entries)", count);
		return VT_SLOT_INVALID;
	}

	uint32_t stored = le32toh(h.crc);
	struct vt_header_media hz = h;
	hz.crc = 0;
	uLong crc = crc32(0L, (const Bytef *)&hz, sizeof(hz));
	crc = crc32(crc, src + VT_HEADER_SIZE, (uInt)((size_t)count * VT_ENTRY_SIZE));
	if ((uint32_t)crc != stored) {
		snprintf(why, whylen,
			 "crc mismatch (stored %08" PRIx32 ", computed %08" PRIx32
			 ", generation %" PRIu64 ")",
			 stored, (uint32_t)crc, le64toh(h.generation));
		return VT_SLOT_INVALID;
	}

	memset(s, 0, offsetof(struct vt_state, vols));
	s->generation = le64toh(h.generation);
	memcpy(s->ns_uuid, h.ns_uuid, VT_UUID_SIZE);
	s->ns_size = le64toh(h.ns_size);
	s->data_offset = le64toh(h.data_offset);
	s->data_size = le64toh(h.data_size);
	s->sds.usc = le64toh(h.usc);
	s->sds.flags = le32toh(h.sds_flags);
	s->count = count;
	for (unsigned i = 0; i < count; i++) {
		struct vt_entry_media e;
		memcpy(&e, src + VT_HEADER_SIZE + (size_t)i * VT_ENTRY_SIZE, sizeof(e));
		struct vt_volume *v = &s->vols[i];
		if (!(le32toh(e.flags) & VT_ENTRY_IN_USE)) {
			snprintf(why, whylen, "entry %u below the count is not in use", i);
			return VT_SLOT_INVALID;
		}
		if (memchr(e.name, '\0', VT_NAME_SIZE) == NULL) {
			snprintf(why, whylen, "entry %u: name not terminated", i);
			return VT_SLOT_INVALID;
		}
		memcpy(v->name, e.name, VT_NAME_SIZE);
		v->unsafe_shutdown = (le32toh(e.flags) & VT_ENTRY_UNSAFE_SHUTDOWN) != 0;
		v->size = le64toh(e.size);
		v->ns_offset = le64toh(e.ns_offset);
		memcpy(v->uuid, e.uuid, VT_UUID_SIZE);
		v->create_generation = le64toh(e.create_generation);
	}
	if (!vt_state_check(s, p->size, why, whylen))
		return VT_SLOT_INVALID;
	return VT_SLOT_VALID;
}

/*
 * vt_has_magic -- whether @slot starts with the rdax magic, valid or not; an
 * unreadable slot counts as one (something is there: format needs force)
 */
static bool vt_has_magic(const struct persist *p, unsigned slot)
{
	uint8_t magic[VT_MAGIC_LEN];
	if (media_copy_out(magic, slot_base(p, slot), sizeof(magic)) != 0)
		return true;
	return memcmp(magic, VT_MAGIC, VT_MAGIC_LEN) == 0;
}

/*
 * vt_write_state -- encode @s and write it into @first, then, once that is
 * durable, into @second (-1: none) -- the commit order of vol_table.h.
 * *written (may be NULL) gets the number of copies written whole.
 * Returns 0, -ENOMEM (nothing written), -EIO (a copy could not be written;
 * a failed first copy stops before the second is touched).
 */
static int vt_write_state(const struct persist *p, int first, int second, const struct vt_state *s,
			  unsigned *written)
{
	if (written)
		*written = 0;
	size_t len = vt_encoded_len(s->count);
	uint8_t *buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	vt_encode(s, buf);
	int ret = 0;
	unsigned n = 0;
	if (second >= 0 && rdax_faults.meta_copies_together) {
		vt_slots_write_together(p, buf, len);
		n = 2;
	} else {
		ret = vt_slot_write(p, (unsigned)first, buf, len);
		if (ret == 0)
			n++;
		if (ret == 0 && second >= 0) {
			ret = vt_slot_write(p, (unsigned)second, buf, len);
			if (ret == 0)
				n++;
		}
	}
	free(buf);
	if (written)
		*written = n;
	return ret;
}

int vol_table_format(const struct persist *p, bool force)
{
	if (!p || !p->base)
		return -EINVAL;
	if (p->size < VT_MIN_SIZE) {
		LOG_ERROR(
		    "format: %zu bytes is too small (at least %llu: metadata + one 2 MiB block)",
		    p->size, (unsigned long long)VT_MIN_SIZE);
		return -EINVAL;
	}

	int ret;
	struct vt_state *s = malloc(sizeof(*s));
	struct vt_image *img = malloc(sizeof(*img));
	if (!s || !img) {
		ret = -ENOMEM;
		goto out_free;
	}

	if (!force && (vt_has_magic(p, 0) || vt_has_magic(p, 1))) {
		/* the operator's choice to make, not a failure of the daemon: info */
		LOG_INFO("format refused: the namespace holds rdax metadata (copy %s); force "
			 "to overwrite it",
			 vt_has_magic(p, 0) ? (vt_has_magic(p, 1) ? "A and B" : "A") : "B");
		ret = -EEXIST;
		goto out_free;
	}

	/* the slot holding the newest valid state is overwritten last */
	uint64_t newest_gen = 0;
	int newest = -1;
	char why[256];
	for (unsigned slot = 0; slot < 2; slot++) {
		if (vt_slot_check(p, slot, img, s, why, sizeof(why)) == VT_SLOT_VALID &&
		    s->generation >= newest_gen) {
			newest_gen = s->generation;
			newest = (int)slot;
		}
	}
	unsigned first = newest == 0 ? 1 : 0;

	memset(s, 0, sizeof(*s));
	ret = fill_random(s->ns_uuid, VT_UUID_SIZE);
	if (ret)
		goto out_free;
	/* at the maximum: start again (a cut before the second copy keeps the old state) */
	s->generation = newest_gen == UINT64_MAX ? 1 : newest_gen + 1;
	s->ns_size = p->size;
	s->data_offset = VT_META_SIZE;
	s->data_size = align_down(p->size, RDAX_PAGE_SIZE) - VT_META_SIZE;

	ret = vt_write_state(p, (int)first, (int)(1 - first), s, NULL);
	if (ret)
		goto out_free;
	LOG_INFO("formatted: size=%zu data_offset=%llu data_size=%llu generation=%" PRIu64 "%s",
		 p->size, (unsigned long long)VT_META_SIZE, (unsigned long long)s->data_size,
		 s->generation, force ? " (forced)" : "");
out_free:
	free(img);
	free(s);
	return ret;
}

int vol_table_load(const struct persist *p, struct vol_table **out)
{
	if (!p || !p->base || !out)
		return -EINVAL;
	if (p->size < VT_META_SIZE) {
		LOG_ERROR("load: %zu bytes cannot hold rdax metadata (%llu)", p->size,
			  (unsigned long long)VT_META_SIZE);
		return -RDAX_E_NOT_RDAX;
	}

	int ret;
	struct vt_state *s[2] = {malloc(sizeof(struct vt_state)), NULL};
	struct vt_image *img = malloc(2 * sizeof(*img));
	struct vol_table *t = malloc(sizeof(*t));
	if (!s[0] || !img || !t) {
		ret = -ENOMEM;
		goto err_free;
	}
	s[1] = &t->st;

	enum vt_slot_result r[2];
	char why[2][256];
	for (unsigned slot = 0; slot < 2; slot++)
		r[slot] = vt_slot_check(p, slot, &img[slot], s[slot], why[slot], sizeof(why[slot]));

	if (r[0] == VT_SLOT_NO_MAGIC && r[1] == VT_SLOT_NO_MAGIC) {
		LOG_ERROR("load: not an rdax namespace (neither metadata copy has the magic)");
		ret = -RDAX_E_NOT_RDAX;
		goto err_free;
	}
	if (r[0] == VT_SLOT_BAD_VERSION || r[1] == VT_SLOT_BAD_VERSION) {
		LOG_ERROR("load: unsupported metadata version: copy A: %s; copy B: %s",
			  r[0] == VT_SLOT_VALID ? "valid" : why[0],
			  r[1] == VT_SLOT_VALID ? "valid" : why[1]);
		ret = -RDAX_E_VERSION;
		goto err_free;
	}
	if (r[0] != VT_SLOT_VALID && r[1] != VT_SLOT_VALID) {
		LOG_ERROR("load: no valid metadata copy: copy A: %s; copy B: %s", why[0], why[1]);
		ret = -RDAX_E_BAD_METADATA;
		goto err_free;
	}

	unsigned use;
	bool agree = false;
	if (r[0] == VT_SLOT_VALID && r[1] == VT_SLOT_VALID) {
		if (s[0]->generation == s[1]->generation) {
			/* one generation is one state: both slots must hold the same bytes */
			if (memcmp(img[0].bytes, img[1].bytes, vt_encoded_len(s[0]->count)) != 0) {
				LOG_ERROR("load: copies A and B both hold generation %" PRIu64
					  " but differ (%u and %u volumes); refusing to guess "
					  "which is right",
					  s[0]->generation, s[0]->count, s[1]->count);
				ret = -RDAX_E_BAD_METADATA;
				goto err_free;
			}
			agree = true;
		}
		use = s[1]->generation > s[0]->generation ? 1 : 0;
	} else {
		use = r[0] == VT_SLOT_VALID ? 0 : 1;
	}
	unsigned other = 1 - use;
	if (r[other] != VT_SLOT_VALID)
		LOG_WARN("load: metadata copy %c is invalid (%s); copy %c holds the state "
			 "(generation %" PRIu64 ")",
			 slot_name(other), why[other], slot_name(use), s[use]->generation);
	else if (!agree)
		LOG_WARN("load: metadata copy %c holds generation %" PRIu64 ", copy %c %" PRIu64
			 ": an update was cut between its two writes; using copy %c",
			 slot_name(other), s[other]->generation, slot_name(use), s[use]->generation,
			 slot_name(use));

	if (use == 0)
		t->st = *s[0];
	t->p = p;
	t->slot = use;
	t->copies_agree = agree;
	free(s[0]);
	free(img);
	LOG_INFO("load: copy %c, generation %" PRIu64 ", %u volumes, data area %" PRIu64
		 " bytes at %" PRIu64,
		 slot_name(use), t->st.generation, t->st.count, t->st.data_size, t->st.data_offset);
	*out = t;
	return 0;

err_free:
	free(s[0]);
	free(img);
	free(t);
	return ret;
}

void vol_table_delete(struct vol_table **tp)
{
	if (!tp || !*tp)
		return;
	free(*tp);
	*tp = NULL;
}

uint64_t vol_table_generation(const struct vol_table *t)
{
	return t->st.generation;
}

uint64_t vol_table_data_offset(const struct vol_table *t)
{
	return t->st.data_offset;
}

uint64_t vol_table_data_size(const struct vol_table *t)
{
	return t->st.data_size;
}

const uint8_t *vol_table_ns_uuid(const struct vol_table *t)
{
	return t->st.ns_uuid;
}

unsigned vol_table_count(const struct vol_table *t)
{
	return t->st.count;
}

const struct vt_volume *vol_table_get(const struct vol_table *t, unsigned i)
{
	return i < t->st.count ? &t->st.vols[i] : NULL;
}

int vol_table_find(const struct vol_table *t, const char *name)
{
	if (!t || !name)
		return -EINVAL;
	for (unsigned i = 0; i < t->st.count; i++)
		if (strcmp(t->st.vols[i].name, name) == 0)
			return (int)i;
	return -ENOENT;
}

bool vol_table_copies_agree(const struct vol_table *t)
{
	return t->copies_agree;
}

/*
 * vt_commit -- commit @next, generation + 1, into both slots (vol_table.h):
 * the slot other than t->slot first, t->slot once that is durable. Once the
 * first copy is whole the change is committed: a second copy that cannot be
 * written (media error) leaves the namespace running on one copy, said in
 * the log, and the next open repairs it if it can.
 * Returns 0, -EOVERFLOW (at the last generation), -ENOMEM (nothing
 * written), -EIO (the first copy could not be written: not committed).
 */
static int vt_commit(struct vol_table *t, struct vt_state *next)
{
	if (t->st.generation == UINT64_MAX) {
		LOG_ERROR("commit refused: the volume table is at its last generation (%" PRIu64
			  "); a further change would wrap to 0. Copy the volumes off and "
			  "reformat the namespace",
			  t->st.generation);
		return -EOVERFLOW;
	}
	unsigned other = 1 - t->slot;
	next->generation = t->st.generation + 1;
	bool one_copy = rdax_faults.meta_one_copy; /* control: the alternating order */
	unsigned written;
	int ret = vt_write_state(t->p, (int)other, one_copy ? -1 : (int)t->slot, next, &written);
	if (written == 0) {
		if (ret == -EIO)
			t->copies_agree = false; /* the other copy may be torn now */
		return ret;
	}
	if (ret) {
		LOG_ERROR("commit: generation %" PRIu64 " is in copy %c only; copy %c cannot be "
			  "written (%s)",
			  next->generation, slot_name(other), slot_name(t->slot),
			  rdax_strerror(ret));
		one_copy = true;
	}
	if (one_copy)
		t->slot = other;
	t->copies_agree = !one_copy;
	memcpy(&t->st, next,
	       offsetof(struct vt_state, vols) + (size_t)next->count * sizeof(next->vols[0]));
	LOG_DEBUG("commit: generation %" PRIu64 ", %u volumes", t->st.generation, t->st.count);
	return 0;
}

/* vt_state_dup -- a heap copy of the current state for building the next one */
static struct vt_state *vt_state_dup(const struct vol_table *t)
{
	struct vt_state *s = malloc(sizeof(*s));
	if (s)
		memcpy(s, &t->st,
		       offsetof(struct vt_state, vols) +
			   (size_t)t->st.count * sizeof(t->st.vols[0]));
	return s;
}

int vol_table_add(struct vol_table *t, const char *name, uint64_t ns_offset, uint64_t size,
		  struct vt_volume *out)
{
	if (!t || vt_name_valid(name) != 0)
		return -EINVAL;

	struct vt_volume v = {0};
	strcpy(v.name, name); /* length checked by vt_name_valid */
	v.size = size;
	v.ns_offset = ns_offset;
	const char *reason = vt_volume_check(&t->st, &v);
	if (reason) {
		LOG_ERROR("add \"%s\" (offset %" PRIu64 ", size %" PRIu64 "): %s", name, ns_offset,
			  size, reason);
		return -EINVAL;
	}
	if (vol_table_find(t, name) >= 0)
		return -EEXIST;
	for (unsigned i = 0; i < t->st.count; i++) {
		const struct vt_volume *o = &t->st.vols[i];
		if (ns_offset < o->ns_offset + o->size && o->ns_offset < ns_offset + size) {
			LOG_ERROR("add \"%s\" (offset %" PRIu64 ", size %" PRIu64
				  "): overlaps \"%s\" (offset %" PRIu64 ", size %" PRIu64 ")",
				  name, ns_offset, size, o->name, o->ns_offset, o->size);
			return -EBUSY;
		}
	}
	if (t->st.count >= VT_CAPACITY) {
		LOG_ERROR("add \"%s\": the volume table is full (%u entries)", name, VT_CAPACITY);
		return -ENOSPC;
	}

	int ret = fill_random(v.uuid, VT_UUID_SIZE);
	if (ret)
		return ret;
	v.create_generation = t->st.generation + 1;

	struct vt_state *next = vt_state_dup(t);
	if (!next)
		return -ENOMEM;
	next->vols[next->count++] = v;
	ret = vt_commit(t, next);
	free(next);
	if (ret == 0 && out)
		*out = v;
	return ret;
}

int vol_table_remove(struct vol_table *t, const char *name)
{
	if (!t || !name)
		return -EINVAL;
	int idx = vol_table_find(t, name);
	if (idx < 0)
		return idx;

	struct vt_state *next = vt_state_dup(t);
	if (!next)
		return -ENOMEM;
	memmove(&next->vols[idx], &next->vols[idx + 1],
		(size_t)(next->count - (unsigned)idx - 1) * sizeof(next->vols[0]));
	next->count--;
	int ret = vt_commit(t, next);
	free(next);
	return ret;
}

void vol_table_shutdown_get(const struct vol_table *t, struct vt_shutdown *out)
{
	*out = t->st.sds;
}

int vol_table_shutdown_set(struct vol_table *t, const struct vt_shutdown *sds, bool mark_volumes)
{
	if (!t || !sds)
		return -EINVAL;
	struct vt_state *next = vt_state_dup(t);
	if (!next)
		return -ENOMEM;
	next->sds = *sds;
	for (unsigned i = 0; mark_volumes && i < next->count; i++)
		next->vols[i].unsafe_shutdown = true;
	int ret = vt_commit(t, next);
	free(next);
	return ret;
}

int vol_table_unsafe_clear(struct vol_table *t, const char *name)
{
	if (!t)
		return -EINVAL;
	int idx = name ? vol_table_find(t, name) : 0;
	if (idx < 0)
		return idx;
	bool marked = name ? t->st.vols[idx].unsafe_shutdown : (t->st.sds.flags & VT_SDS_UNSAFE);
	for (unsigned i = 0; !name && !marked && i < t->st.count; i++)
		marked = t->st.vols[i].unsafe_shutdown;
	if (!marked)
		return 0;

	struct vt_state *next = vt_state_dup(t);
	if (!next)
		return -ENOMEM;
	if (name) {
		next->vols[idx].unsafe_shutdown = false;
	} else {
		next->sds.flags &= ~VT_SDS_UNSAFE;
		for (unsigned i = 0; i < next->count; i++)
			next->vols[i].unsafe_shutdown = false;
	}
	int ret;
	if (rdax_faults.unsafe_clear_no_commit) {
		/* control: the new state in memory only, the media keeps the marks */
		memcpy(&t->st, next,
		       offsetof(struct vt_state, vols) +
			   (size_t)next->count * sizeof(next->vols[0]));
		ret = 0;
	} else {
		ret = vt_commit(t, next);
	}
	free(next);
	return ret;
}

int vol_table_repair(struct vol_table *t)
{
	if (!t)
		return -EINVAL;
	if (t->copies_agree)
		return 0;
	unsigned other = 1 - t->slot;
	int ret = vt_write_state(t->p, (int)other, -1, &t->st, NULL);
	if (ret)
		return ret;
	t->copies_agree = true;
	LOG_INFO("repair: copy %c rewritten from copy %c (generation %" PRIu64 ", %u volumes)",
		 slot_name(other), slot_name(t->slot), t->st.generation, t->st.count);
	return 0;
}
