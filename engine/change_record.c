/* SPDX-License-Identifier: BSD-3-Clause */
/* change_record.c -- what changed on a volume while a replica was away, durably */
#include "change_record.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include "faults.h"

#define MAGIC	     "RDAXRREC"
#define VERSION	     1
#define OFF_VERSION  8
#define OFF_SHIFT    12
#define OFF_VOLSIZE  16
#define OFF_EPOCH    24
#define OFF_FLAGS    32
#define HEADER_BYTES 64
#define SLOT_BYTES   128
#define SLOT_STATE   64 /* within a slot: after the name */
#define SLOT_EPOCH   72
#define BITMAPS_AT   4096
#define PAGE	     4096ULL

enum { SLOT_FREE = 0, SLOT_RECORDING = 1 };

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return le32toh(v);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static uint8_t *slot_at(const struct change_record *r, int slot)
{
	return r->base + HEADER_BYTES + (uint64_t)slot * SLOT_BYTES;
}

/* bitmap -- slot @slot's bitmap as 64-bit words (little-endian bit order within a word) */
static uint64_t *bitmap(const struct change_record *r, int slot)
{
	return (uint64_t *)(r->base + BITMAPS_AT + (uint64_t)slot * r->bitmap_bytes);
}

/* geometry -- regions and bitmap size of a @vol_size volume */
static void geometry(uint64_t vol_size, uint64_t *nregions, uint64_t *bitmap_bytes)
{
	*nregions = (vol_size + CHANGE_RECORD_REGION - 1) >> CHANGE_RECORD_REGION_SHIFT;
	*bitmap_bytes = ((*nregions + 7) / 8 + PAGE - 1) / PAGE * PAGE;
}

uint64_t change_record_size(uint64_t vol_size)
{
	uint64_t n, b;
	geometry(vol_size, &n, &b);
	return BITMAPS_AT + CHANGE_RECORD_SLOTS * b;
}

static int describe(struct change_record *r, void *base, uint64_t len, const struct persist *p,
		    uint64_t vol_size)
{
	if (!r || !base || !p || vol_size == 0 || len < change_record_size(vol_size))
		return -EINVAL;
	*r = (struct change_record){.base = base, .len = len, .p = p, .vol_size = vol_size};
	geometry(vol_size, &r->nregions, &r->bitmap_bytes);
	return 0;
}

int change_record_format(struct change_record *r, void *base, uint64_t len, const struct persist *p,
			 uint64_t vol_size, uint64_t epoch)
{
	int ret = describe(r, base, len, p, vol_size);
	if (ret)
		return ret;
	uint64_t size = change_record_size(vol_size);
	memset(r->base, 0, size);
	persist_range(p, r->base, size);
	/* the magic last: a record half written is not one */
	put32(r->base + OFF_VERSION, VERSION);
	put32(r->base + OFF_SHIFT, CHANGE_RECORD_REGION_SHIFT);
	put64(r->base + OFF_VOLSIZE, vol_size);
	put64(r->base + OFF_EPOCH, epoch);
	persist_range(p, r->base, HEADER_BYTES);
	memcpy(r->base, MAGIC, 8);
	persist_range(p, r->base, 8);
	return 0;
}

int change_record_open(struct change_record *r, void *base, uint64_t len, const struct persist *p,
		       uint64_t vol_size)
{
	int ret = describe(r, base, len, p, vol_size);
	if (ret)
		return ret;
	if (memcmp(r->base, MAGIC, 8) != 0 || get32(r->base + OFF_VERSION) != VERSION ||
	    get32(r->base + OFF_SHIFT) != CHANGE_RECORD_REGION_SHIFT ||
	    get64(r->base + OFF_VOLSIZE) != vol_size)
		return -EINVAL;
	return 0;
}

uint64_t change_record_epoch(const struct change_record *r)
{
	return get64(r->base + OFF_EPOCH);
}

int change_record_raise_epoch(struct change_record *r, uint64_t epoch)
{
	uint64_t have = change_record_epoch(r);
	if (epoch < have)
		return -ESTALE;
	if (epoch > have) {
		put64(r->base + OFF_EPOCH, epoch);
		persist_range(r->p, r->base + OFF_EPOCH, 8);
	}
	return 0;
}

uint64_t change_record_flags(const struct change_record *r)
{
	return get64(r->base + OFF_FLAGS);
}

void change_record_set_flags(struct change_record *r, uint64_t flags)
{
	put64(r->base + OFF_FLAGS, flags);
	persist_range(r->p, r->base + OFF_FLAGS, 8);
}

int change_record_slot_find(const struct change_record *r, const char *node)
{
	for (int i = 0; i < CHANGE_RECORD_SLOTS; i++) {
		const uint8_t *s = slot_at(r, i);
		if (get32(s + SLOT_STATE) == SLOT_RECORDING &&
		    strncmp((const char *)s, node, CHANGE_RECORD_NODE_MAX + 1) == 0)
			return i;
	}
	return -ENOENT;
}

int change_record_slot_open(struct change_record *r, const char *node, uint64_t epoch)
{
	size_t n = node ? strlen(node) : 0;
	if (n == 0 || n > CHANGE_RECORD_NODE_MAX)
		return -EINVAL;
	int slot = change_record_slot_find(r, node);
	if (slot >= 0)
		return slot;
	for (int i = 0; i < CHANGE_RECORD_SLOTS; i++) {
		uint8_t *s = slot_at(r, i);
		if (get32(s + SLOT_STATE) != SLOT_FREE)
			continue;
		memset(bitmap(r, i), 0, r->bitmap_bytes);
		persist_range(r->p, bitmap(r, i), r->bitmap_bytes);
		memset(s, 0, SLOT_BYTES);
		memcpy(s, node, n);
		put64(s + SLOT_EPOCH, epoch);
		persist_range(r->p, s, SLOT_BYTES);
		/* the state last: a slot is recording only once its name and bits are in place */
		put32(s + SLOT_STATE, SLOT_RECORDING);
		persist_range(r->p, s + SLOT_STATE, 4);
		return i;
	}
	return -ENOSPC;
}

void change_record_slot_close(struct change_record *r, int slot)
{
	uint8_t *s = slot_at(r, slot);
	put32(s + SLOT_STATE, SLOT_FREE);
	persist_range(r->p, s + SLOT_STATE, 4);
	memset(bitmap(r, slot), 0, r->bitmap_bytes);
	persist_range(r->p, bitmap(r, slot), r->bitmap_bytes);
}

/*
 * set_bits -- set @slot's bits for regions [first, last]; flush each word that
 * changed (no fence). Returns whether anything changed.
 */
static bool set_bits(struct change_record *r, int slot, uint64_t first, uint64_t last)
{
	uint64_t *bm = bitmap(r, slot);
	bool changed = false;
	for (uint64_t w = first / 64; w <= last / 64; w++) {
		uint64_t lo = w * 64 > first ? w * 64 : first;
		uint64_t hi = w * 64 + 63 < last ? w * 64 + 63 : last;
		uint64_t mask = (hi - lo == 63 ? ~0ULL : ((1ULL << (hi - lo + 1)) - 1))
				<< (lo % 64);
		mask = htole64(mask);
		/* a bit already set costs this one load */
		if ((__atomic_load_n(&bm[w], __ATOMIC_ACQUIRE) & mask) == mask)
			continue;
		__atomic_fetch_or(&bm[w], mask, __ATOMIC_ACQ_REL);
		if (!rdax_faults.change_record_no_persist)
			persist_flush(r->p, &bm[w], sizeof(bm[w]));
		changed = true;
	}
	return changed;
}

/* region_span -- the regions [off, off + len) touches, clipped to the volume; false if none */
static bool region_span(const struct change_record *r, uint64_t off, uint64_t len, uint64_t *first,
			uint64_t *last)
{
	if (len == 0 || off >= r->vol_size)
		return false;
	uint64_t end = len > r->vol_size - off ? r->vol_size : off + len;
	*first = off >> CHANGE_RECORD_REGION_SHIFT;
	*last = (end - 1) >> CHANGE_RECORD_REGION_SHIFT;
	return true;
}

void change_record_mark(struct change_record *r, uint64_t off, uint64_t len)
{
	uint64_t first, last;
	if (!region_span(r, off, len, &first, &last))
		return;
	bool changed = false;
	for (int i = 0; i < CHANGE_RECORD_SLOTS; i++)
		if (get32(slot_at(r, i) + SLOT_STATE) == SLOT_RECORDING)
			changed = set_bits(r, i, first, last) || changed;
	if (changed)
		persist_drain(r->p);
}

void change_record_mark_slot(struct change_record *r, int slot, uint64_t off, uint64_t len)
{
	uint64_t first, last;
	if (region_span(r, off, len, &first, &last) && set_bits(r, slot, first, last))
		persist_drain(r->p);
}

bool change_record_test(const struct change_record *r, int slot, uint64_t region)
{
	if (region >= r->nregions)
		return false;
	uint64_t w = le64toh(__atomic_load_n(&bitmap(r, slot)[region / 64], __ATOMIC_ACQUIRE));
	return (w >> (region % 64)) & 1;
}

void change_record_clear(struct change_record *r, int slot, uint64_t region)
{
	if (region >= r->nregions)
		return;
	uint64_t *bm = bitmap(r, slot);
	__atomic_fetch_and(&bm[region / 64], ~htole64(1ULL << (region % 64)), __ATOMIC_ACQ_REL);
	persist_range(r->p, &bm[region / 64], sizeof(uint64_t));
}

uint64_t change_record_next(const struct change_record *r, int slot, uint64_t from)
{
	const uint64_t *bm = bitmap(r, slot);
	for (uint64_t region = from; region < r->nregions;) {
		uint64_t w = le64toh(__atomic_load_n(&bm[region / 64], __ATOMIC_ACQUIRE));
		w &= ~0ULL << (region % 64);
		if (w)
			return region / 64 * 64 + (uint64_t)__builtin_ctzll(w) < r->nregions
				   ? region / 64 * 64 + (uint64_t)__builtin_ctzll(w)
				   : r->nregions;
		region = (region / 64 + 1) * 64;
	}
	return r->nregions;
}

uint64_t change_record_count(const struct change_record *r, int slot)
{
	const uint64_t *bm = bitmap(r, slot);
	uint64_t n = 0;
	for (uint64_t w = 0; w < (r->nregions + 63) / 64; w++)
		n += (uint64_t)__builtin_popcountll(__atomic_load_n(&bm[w], __ATOMIC_ACQUIRE));
	return n;
}
