/* SPDX-License-Identifier: BSD-3-Clause */
/* held.c -- writes acknowledged but not yet covered by an fsync, with their verifiers */
#include "held.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void held_init(struct held *h)
{
	memset(h, 0, sizeof(*h));
}

struct held_buf *held_buf_get(struct held_buf *buf)
{
	if (buf)
		buf->refs++;
	return buf;
}

void held_buf_put(struct held_buf *buf)
{
	if (!buf || --buf->refs > 0)
		return;
	if (buf->budget)
		buf->budget->used -= buf->len;
	free(buf);
}

void held_clear(struct held *h, struct held_budget *b)
{
	(void)b; /* copies give their bytes back to the budget they name */
	for (size_t i = 0; i < h->n; i++)
		held_buf_put(h->recs[i].buf);
	free(h->recs);
	held_init(h);
}

uint64_t held_bytes(const struct held *h)
{
	uint64_t n = 0;
	for (size_t i = 0; i < h->n; i++)
		if (h->recs[i].buf)
			n += h->recs[i].len;
	return n;
}

/* first_ending_after -- index of the first record that ends after @off (binary search) */
static size_t first_ending_after(const struct held *h, uint64_t off)
{
	size_t lo = 0, hi = h->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (h->recs[mid].off + h->recs[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* reserve -- room for @more records; 0 or -ENOMEM */
static int reserve(struct held *h, size_t more)
{
	if (h->n + more <= h->cap)
		return 0;
	size_t cap = h->cap ? h->cap * 2 : 16;
	while (cap < h->n + more)
		cap *= 2;
	struct held_rec *r = realloc(h->recs, cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	h->recs = r;
	h->cap = cap;
	return 0;
}

/* insert_at -- put @rec at index @i (room reserved) */
static void insert_at(struct held *h, size_t i, const struct held_rec *rec)
{
	memmove(&h->recs[i + 1], &h->recs[i], (h->n - i) * sizeof(*h->recs));
	h->recs[i] = *rec;
	h->n++;
}

/* remove_at -- drop the record at index @i and its reference */
static void remove_at(struct held *h, size_t i)
{
	held_buf_put(h->recs[i].buf);
	memmove(&h->recs[i], &h->recs[i + 1], (h->n - i - 1) * sizeof(*h->recs));
	h->n--;
}

/*
 * cut -- remove [a, b) from the record at index @i, which overlaps it;
 * returns the index of the first record after what is left of it. Needs
 * room for one more record (a record around the whole range splits in two).
 */
static size_t cut(struct held *h, size_t i, uint64_t a, uint64_t b)
{
	struct held_rec *r = &h->recs[i];
	uint64_t end = r->off + r->len;
	if (a <= r->off && b >= end) {
		remove_at(h, i);
		return i;
	}
	if (a > r->off && b < end) {
		/* the middle goes: the tail becomes a record of its own, same copy */
		struct held_rec tail = *r;
		tail.off = b;
		tail.len = end - b;
		if (tail.data)
			tail.data = r->data + (b - r->off);
		held_buf_get(tail.buf);
		r->len = a - r->off;
		insert_at(h, i + 1, &tail);
		return i + 2;
	}
	if (a <= r->off) { /* the head goes */
		if (r->data)
			r->data += b - r->off;
		r->len = end - b;
		r->off = b;
		return i + 1;
	}
	r->len = a - r->off; /* the tail goes */
	return i + 1;
}

/*
 * cut_range -- remove [a, b) from every record that @keep does not protect
 * (@keep NULL: all); records kept are skipped. 0 or -ENOMEM.
 */
static int cut_range(struct held *h, uint64_t a, uint64_t b,
		     bool (*keep)(const struct held_rec *r, const void *arg), const void *arg)
{
	size_t i = first_ending_after(h, a);
	while (i < h->n && h->recs[i].off < b) {
		if (keep && keep(&h->recs[i], arg)) {
			i++;
			continue;
		}
		if (reserve(h, 1))
			return -ENOMEM;
		i = cut(h, i, a, b);
	}
	return 0;
}

/* set_overflow -- too many records (or no memory): remember the verifier instead */
static void set_overflow(struct held *h, uint64_t verifier)
{
	if (h->overflow && h->overflow_verifier != verifier)
		h->overflow_mixed = true;
	h->overflow = true;
	h->overflow_verifier = verifier;
}

/* put_piece -- record [a, b) of a write (its copy @buf holding @off onwards, may be NULL) */
static int put_piece(struct held *h, uint64_t a, uint64_t b, struct held_buf *buf, uint64_t off,
		     uint64_t seq, uint64_t verifier)
{
	int ret = cut_range(h, a, b, NULL, NULL);
	if (ret)
		return ret;
	if (h->n >= HELD_MAX_RECORDS || reserve(h, 1))
		return -ENOMEM;
	struct held_rec rec = {
	    .off = a,
	    .len = b - a,
	    .seq = seq,
	    .verifier = verifier,
	    .buf = held_buf_get(buf),
	    .data = buf ? buf->data + (a - off) : NULL,
	};
	insert_at(h, first_ending_after(h, a), &rec);
	return 0;
}

/* next_newer -- the first record newer than @seq overlapping [pos, end), or h->n */
static size_t next_newer(const struct held *h, uint64_t pos, uint64_t end, uint64_t seq)
{
	for (size_t i = first_ending_after(h, pos); i < h->n && h->recs[i].off < end; i++)
		if (h->recs[i].seq > seq)
			return i;
	return h->n;
}

int held_note(struct held *h, struct held_budget *b, uint64_t off, uint64_t len, const void *data,
	      uint64_t seq, uint64_t verifier)
{
	if (len == 0)
		return 0;
	uint64_t end = off + len;
	struct held_buf *buf = NULL;
	if (data && b && b->used + len <= b->limit && (buf = malloc(sizeof(*buf) + len))) {
		buf->refs = 1;
		buf->len = len;
		buf->budget = b;
		b->used += len;
		memcpy(buf->data, data, len);
	}
	/*
	 * The pieces of the write that no newer record covers (a newer write
	 * acknowledged first: its bytes stay), each put over the older ones.
	 */
	int ret = 0;
	uint64_t pos = off;
	while (pos < end && !ret) {
		size_t j = next_newer(h, pos, end, seq);
		if (j == h->n) {
			ret = put_piece(h, pos, end, buf, off, seq, verifier);
			break;
		}
		if (h->recs[j].off > pos)
			ret = put_piece(h, pos, h->recs[j].off, buf, off, seq, verifier);
		pos = h->recs[j].off + h->recs[j].len; /* past the newer record (not moved) */
	}
	held_buf_put(buf); /* the records keep their own references */
	if (ret)
		set_overflow(h, verifier);
	return ret;
}

/* range_end -- the end of an fsync's range; len 0: to the end (any record) */
static uint64_t range_end(uint64_t off, uint64_t len)
{
	return len == 0 || off + len < off ? UINT64_MAX : off + len;
}

void held_check(const struct held *h, uint64_t off, uint64_t len, uint64_t seq, uint64_t verifier,
		struct held_verdict *v)
{
	memset(v, 0, sizeof(*v));
	uint64_t end = range_end(off, len);
	for (size_t i = first_ending_after(h, off); i < h->n && h->recs[i].off < end; i++) {
		const struct held_rec *r = &h->recs[i];
		if (r->seq >= seq || r->verifier == verifier)
			continue;
		uint64_t a = r->off > off ? r->off : off;
		uint64_t b = r->off + r->len < end ? r->off + r->len : end;
		if (r->buf) {
			v->resend_bytes += b - a;
		} else {
			if (!v->lost_bytes) {
				v->lost_off = a;
				v->lost_verifier = r->verifier;
			}
			v->lost_bytes += b - a;
		}
	}
	v->overflow = h->overflow && (h->overflow_mixed || h->overflow_verifier != verifier);
}

/* The records an fsync leaves in place: a copy to send again under another verifier. */
struct settle_arg {
	uint64_t seq, verifier;
};

static bool settle_keep(const struct held_rec *r, const void *arg)
{
	const struct settle_arg *s = arg;
	return r->seq >= s->seq || (r->buf && r->verifier != s->verifier);
}

void held_settle(struct held *h, struct held_budget *b, uint64_t off, uint64_t len, uint64_t seq,
		 uint64_t verifier)
{
	(void)b;
	struct settle_arg s = {seq, verifier};
	/* no memory to split a record: it stays, which only means it is checked again */
	cut_range(h, off, range_end(off, len), settle_keep, &s);
	if (off == 0 && len == 0) {
		h->overflow = false;
		h->overflow_mixed = false;
	}
	if (h->n == 0 && h->cap > 64) {
		free(h->recs);
		h->recs = NULL;
		h->cap = 0;
	}
}

static bool newer_keep(const struct held_rec *r, const void *arg)
{
	return r->seq > *(const uint64_t *)arg;
}

void held_forget(struct held *h, uint64_t off, uint64_t len, uint64_t seq)
{
	if (len && cut_range(h, off, off + len, newer_keep, &seq))
		set_overflow(h, 0); /* no memory to split: unknown state, never a lie */
}

void held_stale(const struct held *h, uint64_t verifier,
		void (*fn)(void *arg, const struct held_rec *rec), void *arg)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->recs[i].buf && h->recs[i].verifier != verifier)
			fn(arg, &h->recs[i]);
}

void held_resent(struct held *h, const struct held_buf *buf, uint64_t off, uint64_t len,
		 uint64_t verifier)
{
	uint64_t end = off + len;
	for (size_t i = first_ending_after(h, off); i < h->n && h->recs[i].off < end; i++)
		if (h->recs[i].buf == buf && h->recs[i].off >= off &&
		    h->recs[i].off + h->recs[i].len <= end)
			h->recs[i].verifier = verifier;
}
