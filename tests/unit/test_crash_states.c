/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_crash_states.c -- the crash-state enumerator against the model's
 * definition
 *
 * Synthetic logs are written with the writer API and read back. Small
 * cases have their counts worked out by hand (in each test's comment);
 * random small logs are checked against an oracle written from the
 * definition in docs/persistence-testing.md, independently of the
 * enumerator: a cut after any record, with the next one in flight, leaves
 * in each line any version between the floor that the completed
 * durability points give and the newest version written; the union of
 * those sets over all cut points is the set of crash states. The oracle
 * enumerates it by brute force and compares it with what the enumerator
 * produces, state by state (line versions and image bytes).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "crash_states.h"
#include "faults.h"
#include "write_log.h"
#include "tmpdir.h"

#define MAX_RECS  16
#define MAX_LINES 16

/* One synthetic record, as the test means it. */
struct trec {
	enum wlog_type type;
	uint64_t off, len, mark;
	unsigned flags;
	uint8_t data[MAX_LINES * 64];
};

struct tlog {
	uint64_t vol_size;
	unsigned n;
	struct trec r[MAX_RECS];
};

static char g_dir[256];
static unsigned g_seq;

static int group_setup(void **state)
{
	(void)state;
	tmpdir_make(g_dir, sizeof(g_dir), "crash-states");
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	tmpdir_remove(g_dir);
	return 0;
}

static void add_write(struct tlog *t, uint64_t off, uint64_t len, uint8_t fill)
{
	struct trec *r = &t->r[t->n++];
	*r = (struct trec){.type = WLOG_WRITE, .off = off, .len = len};
	for (uint64_t i = 0; i < len; i++)
		r->data[i] = (uint8_t)(fill + i * 7);
}

static void add_discard(struct tlog *t, uint64_t off, uint64_t len, unsigned flags)
{
	t->r[t->n++] = (struct trec){.type = WLOG_DISCARD, .off = off, .len = len, .flags = flags};
}

/* add_fsync -- an fsync whose mark is @mark (UINT64_MAX: its own position, all before it) */
static void add_fsync(struct tlog *t, uint64_t off, uint64_t len, uint64_t mark)
{
	t->r[t->n] = (struct trec){.type = WLOG_FSYNC,
				   .off = off,
				   .len = len ? len : t->vol_size - off,
				   .mark = mark == UINT64_MAX ? t->n : mark};
	t->n++;
}

/* write_tlog -- the log through the writer API, read back with the reader */
static struct wlog_view *write_tlog(const struct tlog *t)
{
	char path[320];
	snprintf(path, sizeof(path), "%s/log%u", g_dir, g_seq++);
	struct wlog_volume vol = {.name = "vol", .size = t->vol_size, .base_zero = true};
	struct write_log *wl;
	assert_int_equal(write_log_create(path, &vol, 1 << 20, &wl), 0);
	for (unsigned i = 0; i < t->n; i++) {
		const struct trec *r = &t->r[i];
		if (r->type == WLOG_WRITE)
			assert_int_equal(write_log_write(wl, r->off, r->data, r->len), 0);
		else if (r->type == WLOG_DISCARD)
			assert_int_equal(write_log_discard(wl, r->off, r->len, r->flags), 0);
		else
			assert_int_equal(write_log_fsync(wl, r->mark, r->off, r->len, 0), 0);
	}
	assert_int_equal(write_log_close(&wl), 0);
	struct wlog_view *v;
	char err[256] = "";
	int ret = write_log_open(path, &v, err, sizeof(err));
	if (ret)
		fail_msg("write_log_open: %s", err);
	return v;
}

/* --- the oracle: the definition, by brute force --------------------------- */

static bool touches(uint64_t off, uint64_t len, unsigned line)
{
	return len && off < (line + 1) * 64ULL && off + len > line * 64ULL;
}

static bool is_store(const struct trec *r)
{
	return r->type == WLOG_WRITE || r->type == WLOG_DISCARD;
}

/* stores_to -- how many stores to @line among records [0, upto) */
static unsigned stores_to(const struct tlog *t, unsigned line, unsigned upto)
{
	unsigned k = 0;
	for (unsigned i = 0; i < upto && i < t->n; i++)
		k += is_store(&t->r[i]) && touches(t->r[i].off, t->r[i].len, line);
	return k;
}

/* floor_at -- the durable version of @line when records [0, done) have completed */
static unsigned floor_at(const struct tlog *t, unsigned line, unsigned done, bool use_fsync)
{
	unsigned f = 0;
	for (unsigned d = 0; d < done; d++) {
		const struct trec *r = &t->r[d];
		unsigned v = 0;
		if (r->type == WLOG_FSYNC && use_fsync && touches(r->off, r->len, line))
			v = stores_to(t, line, (unsigned)r->mark);
		else if (r->type == WLOG_DISCARD && (r->flags & WLOG_DISCARD_DURABLE) &&
			 touches(r->off, r->len, line))
			v = stores_to(t, line, d + 1);
		if (v > f)
			f = v;
	}
	return f;
}

/* A set of line-version vectors (open addressing; vectors kept in insertion order). */
struct vset {
	unsigned n, cap; /* vectors; cap: size of the table, a power of two */
	uint8_t (*v)[MAX_LINES];
	unsigned *slot; /* table: index + 1 into v, 0 empty */
};

static uint64_t vhash(const uint8_t *v)
{
	uint64_t h = 1469598103934665603ULL;
	for (unsigned i = 0; i < MAX_LINES; i++)
		h = (h ^ v[i]) * 1099511628211ULL;
	return h;
}

static bool vset_has(const struct vset *s, const uint8_t *v)
{
	if (!s->cap)
		return false;
	for (uint64_t i = vhash(v) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (!s->slot[i])
			return false;
		if (memcmp(s->v[s->slot[i] - 1], v, MAX_LINES) == 0)
			return true;
	}
}

static void vset_add(struct vset *s, const uint8_t *v)
{
	if (vset_has(s, v))
		return;
	if (2 * (s->n + 1) > s->cap) {
		unsigned cap = s->cap ? s->cap * 2 : 64;
		s->v = realloc(s->v, cap / 2 * sizeof(*s->v));
		free(s->slot);
		s->slot = calloc(cap, sizeof(*s->slot));
		assert_true(s->v && s->slot);
		s->cap = cap;
		for (unsigned k = 0; k < s->n; k++) {
			uint64_t i = vhash(s->v[k]) & (cap - 1);
			while (s->slot[i])
				i = (i + 1) & (cap - 1);
			s->slot[i] = k + 1;
		}
	}
	memcpy(s->v[s->n], v, MAX_LINES);
	uint64_t i = vhash(v) & (s->cap - 1);
	while (s->slot[i])
		i = (i + 1) & (s->cap - 1);
	s->slot[i] = ++s->n;
}

static void vset_free(struct vset *s)
{
	free(s->v);
	free(s->slot);
	memset(s, 0, sizeof(*s));
}

/*
 * oracle -- every crash state of @t as a vector of line versions: for each
 * cut (records [0, t) complete, record t in flight -- its stores may have
 * landed, it made nothing durable -- or everything complete), every choice
 * of line versions (line granularity), or of which not-yet-durable stores
 * reached media whole (write granularity: a record reaches all its
 * not-yet-durable lines or none, and a line's version is then the number
 * of its stores that reached, which must be a prefix of them).
 */
static void oracle(const struct tlog *t, enum cs_granularity g, bool use_fsync, struct vset *out)
{
	unsigned nl = (unsigned)((t->vol_size + 63) / 64);
	for (unsigned cut = 0; cut <= t->n; cut++) {
		unsigned lo[MAX_LINES], hi[MAX_LINES];
		for (unsigned l = 0; l < nl; l++) {
			lo[l] = floor_at(t, l, cut, use_fsync);
			hi[l] = stores_to(t, l, cut + 1);
		}
		uint8_t v[MAX_LINES] = {0};
		if (g == CS_GRAN_LINE) {
			for (unsigned l = 0; l < nl; l++)
				v[l] = (uint8_t)lo[l];
			for (;;) {
				vset_add(out, v);
				unsigned l = 0;
				while (l < nl && v[l] == hi[l]) {
					v[l] = (uint8_t)lo[l];
					l++;
				}
				if (l == nl)
					break;
				v[l]++;
			}
			continue;
		}
		for (unsigned mask = 0; mask < (1U << (cut < t->n ? cut + 1 : t->n)); mask++) {
			bool ok = true;
			for (unsigned l = 0; l < nl && ok; l++) {
				/* the pending stores of line l, in order: reached iff in mask */
				unsigned q = 0, reached = 0;
				bool gap = false;
				for (unsigned i = 0; i <= cut && i < t->n; i++) {
					if (!is_store(&t->r[i]) ||
					    !touches(t->r[i].off, t->r[i].len, l))
						continue;
					if (q++ < lo[l])
						continue;
					if (mask >> i & 1) {
						ok = !gap;
						reached++;
					} else {
						gap = true;
					}
				}
				v[l] = (uint8_t)(lo[l] + reached);
			}
			/* a record with no pending line is the same whether in the mask or not */
			if (ok)
				vset_add(out, v);
		}
	}
}

/* image_of -- the content of a state from its line versions, store by store */
static void image_of(const struct tlog *t, const uint8_t *v, uint8_t *img)
{
	memset(img, 0, t->vol_size);
	for (unsigned l = 0; l < (t->vol_size + 63) / 64; l++) {
		unsigned q = 0;
		for (unsigned i = 0; i < t->n && q < v[l]; i++) {
			const struct trec *r = &t->r[i];
			if (!is_store(r) || !touches(r->off, r->len, l))
				continue;
			q++;
			for (uint64_t b = l * 64ULL; b < (l + 1) * 64ULL; b++)
				if (b >= r->off && b < r->off + r->len)
					img[b] = r->type == WLOG_WRITE ? r->data[b - r->off] : 0;
		}
	}
}

/* --- running the enumerator ----------------------------------------------- */

struct run {
	struct vset states;
	struct cs_summary sum;
	uint64_t produced;
	uint64_t sampled;
	uint64_t first_hash; /* of the produced sequence, for determinism checks */
};

static int collect_image(uint64_t off, const uint8_t *data, uint64_t len, void *arg)
{
	memcpy((uint8_t *)arg + off, data, len);
	return 0;
}

/*
 * enumerate -- run the enumerator over @t and check each state it produces
 * against the oracle's picture of it: distinct, image bytes as the line
 * versions say, the op counts matching the versions, and the fsynced
 * prefix property (every store a completed durability point covered is held).
 */
static void enumerate(const struct tlog *t, enum cs_granularity g, uint64_t max, uint64_t seed,
		      struct run *out)
{
	struct wlog_view *log = write_tlog(t);
	struct cs_model *m;
	assert_int_equal(cs_model_new(log, g, &m), 0);
	struct cs_iter *it;
	struct cs_opts o = {.max_states = max, .seed = seed};
	assert_int_equal(cs_iter_new(m, &o, &it), 0);
	memset(out, 0, sizeof(*out));
	cs_iter_summary(it, &out->sum);
	unsigned nl = (unsigned)((t->vol_size + 63) / 64);
	assert_true(nl <= MAX_LINES);
	uint8_t img[MAX_LINES * 64], want[MAX_LINES * 64];
	const struct cs_state *st;
	int r;
	uint64_t h = 1469598103934665603ULL;
	while ((r = cs_iter_next(it, &st)) == 1) {
		assert_int_equal(st->index, out->produced);
		uint8_t v[MAX_LINES] = {0};
		for (unsigned l = 0; l < nl; l++) {
			v[l] = (uint8_t)cs_state_line_version(it, l);
			h = (h ^ v[l]) * 1099511628211ULL;
		}
		if (vset_has(&out->states, v))
			fail_msg("state %" PRIu64 " produced twice", st->index);
		vset_add(&out->states, v);
		memset(img, 0, sizeof(img));
		assert_int_equal(cs_state_lines(it, collect_image, img), 0);
		image_of(t, v, want);
		assert_memory_equal(img, want, t->vol_size);
		/* fsynced prefix: completed points (records <= after_record) hold their stores */
		unsigned done = (unsigned)(st->after_record + 1);
		for (unsigned l = 0; l < nl; l++) {
			assert_true(v[l] >=
				    floor_at(t, l, done, !rdax_faults.crash_states_no_fsync));
			assert_true(v[l] <= stores_to(t, l, (unsigned)st->acked + 1));
		}
		/* the ops: lines_present as the versions say */
		for (uint64_t i = 0; i < st->nops; i++) {
			const struct cs_op *op = cs_state_op(it, i);
			const struct trec *tr = &t->r[op->record];
			unsigned lines = 0, present = 0;
			for (unsigned l = 0; l < nl; l++) {
				if (!touches(tr->off, tr->len, l))
					continue;
				unsigned q = stores_to(t, l, (unsigned)op->record);
				if (q < floor_at(t, l, done, !rdax_faults.crash_states_no_fsync))
					continue;
				lines++;
				present += q < v[l];
			}
			assert_int_equal(op->lines, lines);
			assert_int_equal(op->lines_present, present);
			if (g == CS_GRAN_WRITE)
				assert_true(present == 0 || present == lines);
		}
		out->sampled += st->sampled;
		out->produced++;
	}
	assert_int_equal(r, 0);
	out->first_hash = h;
	cs_iter_delete(&it);
	cs_model_delete(&m);
	write_log_view_delete(&log);
}

/* check_exhaustive -- the enumerator's states are exactly the oracle's, @expect of them */
static void check_exhaustive(const struct tlog *t, enum cs_granularity g, uint64_t expect)
{
	struct run run;
	enumerate(t, g, 1000000, 1, &run);
	struct vset want = {0};
	oracle(t, g, !rdax_faults.crash_states_no_fsync, &want);
	if (expect != UINT64_MAX)
		assert_int_equal(want.n, expect);
	assert_int_equal(run.produced, want.n);
	assert_int_equal(run.sum.total, want.n);
	assert_true(run.sum.exhaustive);
	assert_int_equal(run.sampled, 0);
	for (unsigned i = 0; i < want.n; i++)
		assert_true(vset_has(&run.states, want.v[i]));
	vset_free(&want);
	vset_free(&run.states);
}

/* --- hand-worked cases ---------------------------------------------------- */

/* One write of two lines, nothing durable: lines {0,1} x {0,1} = 4; whole: 2. */
static void cs__one_write_no_fsync(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 256};
	add_write(&t, 0, 128, 1);
	check_exhaustive(&t, CS_GRAN_LINE, 4);
	check_exhaustive(&t, CS_GRAN_WRITE, 2);
}

/*
 * W A line 0; fsync all; W B lines 0-1. Before the fsync completes: line 0
 * at 0 or 1, and 1 is also a later state, so 1 new state. After: line 0 at
 * 1 or 2, line 1 at 0 or 1: 4. Total 5. Whole writes: 1 + 2 = 3.
 */
static void cs__fsync_then_write(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 256};
	add_write(&t, 0, 64, 1);
	add_fsync(&t, 0, 0, UINT64_MAX);
	add_write(&t, 0, 128, 2);
	check_exhaustive(&t, CS_GRAN_LINE, 5);
	check_exhaustive(&t, CS_GRAN_WRITE, 3);
}

/*
 * Two writes into the same line, bytes 0-31 then 32-63, nothing durable:
 * the line is at version 0, 1 (A) or 2 (A and B) -- never B without A, as
 * the line that carries B to media carries A too. 3 states either way.
 */
static void cs__same_line_versions_are_cumulative(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 128};
	add_write(&t, 0, 32, 1);
	add_write(&t, 32, 32, 2);
	check_exhaustive(&t, CS_GRAN_LINE, 3);
	check_exhaustive(&t, CS_GRAN_WRITE, 3);
}

/*
 * A line 0, B line 1, fsync of line 0 only, then C line 0. Before the
 * fsync completes: 4 combinations, of which those with line 0 at 1 (2 of
 * them) are later states: 2 new. After: line 0 at 1 or 2, line 1 still at
 * 0 or 1: 4. Total 6 -- the fsync covers only its range (were line 1
 * covered too, there would be 3 + 2 = 5, and no state with C but not B).
 */
static void cs__fsync_covers_only_its_range(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 128};
	add_write(&t, 0, 64, 1);
	add_write(&t, 64, 64, 2);
	add_fsync(&t, 0, 64, UINT64_MAX);
	add_write(&t, 0, 64, 3);
	check_exhaustive(&t, CS_GRAN_LINE, 6);
	check_exhaustive(&t, CS_GRAN_WRITE, 6);
}

/*
 * W A, W B (both line 0), an fsync of everything whose mark (1) was taken
 * before B -- it promises A only -- then W C (line 1). Before the fsync
 * completes: line 0 at 0, 1 or 2, line 1 at 0; 1 and 2 are later states:
 * 1 new. After: line 0 at 1 or 2 (B may still be missing), line 1 at 0 or
 * 1: 4. Total 5 (were B covered, 2 + 2 = 4, and no state with C but not B).
 */
static void cs__fsync_mark_covers_records_before_it(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 128};
	add_write(&t, 0, 64, 1);
	add_write(&t, 0, 64, 2);
	add_fsync(&t, 0, 0, 1);
	add_write(&t, 64, 64, 3);
	check_exhaustive(&t, CS_GRAN_LINE, 5);
	check_exhaustive(&t, CS_GRAN_WRITE, 5);
}

/*
 * W A line 0, then a durable discard of line 0: while the discard is in
 * flight the line is at 0, 1 (A) or 2 (zeros), 2 being a later state: 2
 * new. After it: zeros, durably: 1. Total 3. A discard that is not durable
 * is a store of zeros like any write: 3 states, one interval.
 */
static void cs__discard(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 64};
	add_write(&t, 0, 64, 1);
	add_discard(&t, 0, 64, WLOG_DISCARD_DURABLE);
	check_exhaustive(&t, CS_GRAN_LINE, 3);
	t.r[1].flags = 0;
	check_exhaustive(&t, CS_GRAN_LINE, 3);
	t.r[1].flags = WLOG_DISCARD_DURABLE | WLOG_DISCARD_ZEROES;
	check_exhaustive(&t, CS_GRAN_WRITE, 3);
}

/*
 * The buggy write-ahead log of examples/: per transaction a 256-byte data
 * write (4 lines) and a 64-byte commit record, then one fsync of the whole
 * volume. Per transaction 2^5 combinations less the 1 the fsync leaves:
 * 31; three transactions and the final state: 94. Whole writes: 4 - 1 = 3
 * each, 10 in all.
 */
static void wal_buggy(struct tlog *t)
{
	for (unsigned i = 0; i < 3; i++) {
		add_write(t, 256 + i * 256, 256, (uint8_t)(10 + i));
		add_write(t, i * 64, 64, (uint8_t)(20 + i));
		add_fsync(t, 0, 0, UINT64_MAX);
	}
}

static void cs__wal_buggy_counts(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 1024};
	wal_buggy(&t);
	struct run run;
	enumerate(&t, CS_GRAN_LINE, 100000, 1, &run);
	assert_int_equal(run.produced, 94);
	assert_true(run.sum.exhaustive);
	vset_free(&run.states);
	enumerate(&t, CS_GRAN_WRITE, 100000, 1, &run);
	assert_int_equal(run.produced, 10);
	vset_free(&run.states);
}

/*
 * The correct one: data, fsync of the data, commit, fsync of the commit.
 * Per transaction (2^4 - 1) + (2 - 1) = 16 line states, 48 for three, and
 * the final state: 49. Whole writes: 1 + 1 per transaction, 7 in all.
 */
static void cs__wal_correct_counts(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 1024};
	for (unsigned i = 0; i < 3; i++) {
		add_write(&t, 256 + i * 256, 256, (uint8_t)(10 + i));
		add_fsync(&t, 256 + i * 256, 256, UINT64_MAX);
		add_write(&t, i * 64, 64, (uint8_t)(20 + i));
		add_fsync(&t, i * 64, 64, UINT64_MAX);
	}
	struct run run;
	enumerate(&t, CS_GRAN_LINE, 100000, 1, &run);
	assert_int_equal(run.produced, 49);
	vset_free(&run.states);
	enumerate(&t, CS_GRAN_WRITE, 100000, 1, &run);
	assert_int_equal(run.produced, 7);
	vset_free(&run.states);
}

/* An empty log: one state, the base. */
static void cs__empty_log(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 64};
	check_exhaustive(&t, CS_GRAN_LINE, 1);
	add_fsync(&t, 0, 0, UINT64_MAX);
	check_exhaustive(&t, CS_GRAN_WRITE, 1);
}

/*
 * The control: with the crash-states-no-fsync fault the model forgets the
 * fsyncs, and the fsync-then-write case has one interval with line 0 at
 * 0..2 and line 1 at 0..1: 6 states instead of 5.
 */
static void cs__control_no_fsync(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 256};
	add_write(&t, 0, 64, 1);
	add_fsync(&t, 0, 0, UINT64_MAX);
	add_write(&t, 0, 128, 2);
	rdax_faults.crash_states_no_fsync = true;
	check_exhaustive(&t, CS_GRAN_LINE, 6);
	rdax_faults.crash_states_no_fsync = false;
}

/* --- random logs against the oracle -------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* random_log -- up to 7 records on a volume of up to 8 lines */
static void random_log(struct tlog *t, uint64_t *s)
{
	memset(t, 0, sizeof(*t));
	t->vol_size = 64 * (1 + rng_next(s) % 8);
	if (rng_next(s) % 4 == 0)
		t->vol_size -= rng_next(s) % 63; /* a size that ends inside a line */
	unsigned n = (unsigned)(rng_next(s) % 8);
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = rng_next(s) % t->vol_size;
		uint64_t len = 1 + rng_next(s) % (t->vol_size - off);
		if (len > 150)
			len = 1 + len % 150;
		switch (rng_next(s) % 8) {
		case 0:
			add_discard(t, off, len, rng_next(s) % 2 ? WLOG_DISCARD_DURABLE : 0);
			break;
		case 1:
		case 2:
		case 3: {
			/* a mark up to two records back: writes acknowledged meanwhile */
			uint64_t back = rng_next(s) % 3;
			uint64_t mark = t->n >= back ? t->n - back : 0;
			if (rng_next(s) % 2)
				add_fsync(t, 0, 0, mark);
			else
				add_fsync(t, off, len, mark);
			break;
		}
		default:
			add_write(t, off, len, (uint8_t)(1 + rng_next(s) % 250));
		}
	}
}

/* oracle_small -- the oracle's work stays small: no cut has more than 4096 combinations */
static bool oracle_small(const struct tlog *t)
{
	unsigned nl = (unsigned)((t->vol_size + 63) / 64);
	for (unsigned cut = 0; cut <= t->n; cut++) {
		uint64_t p = 1;
		for (unsigned l = 0; l < nl; l++)
			p *= stores_to(t, l, cut + 1) - floor_at(t, l, cut, true) + 1;
		if (p > 4096)
			return false;
	}
	return true;
}

static void cs__random_logs_match_oracle(void **state)
{
	(void)state;
	uint64_t s = 42;
	unsigned tried = 0;
	for (unsigned i = 0; tried < 400 && i < 4000; i++) {
		struct tlog t;
		random_log(&t, &s);
		if (!oracle_small(&t))
			continue;
		tried++;
		check_exhaustive(&t, CS_GRAN_LINE, UINT64_MAX);
		check_exhaustive(&t, CS_GRAN_WRITE, UINT64_MAX);
	}
	assert_int_equal(tried, 400);
}

/*
 * Sampling: with max below the total, exactly max distinct states (when
 * there are enough to draw), each a real crash state, every interval whose
 * count fits its share produced whole, the same sequence for the same
 * seed and another for another seed.
 */
static void cs__sampled_states_are_crash_states(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 1024};
	add_write(&t, 0, 1024, 3); /* 16 lines: 2^16 - 2^15 new states before the fsync */
	add_fsync(&t, 0, 64, UINT64_MAX);
	add_write(&t, 0, 64, 4);	 /* line 0 at 1..2, the others 0..1: 2^16 - 1 new */
	add_fsync(&t, 0, 0, UINT64_MAX); /* and a final interval of one state */
	struct vset want = {0};
	oracle(&t, CS_GRAN_LINE, true, &want);
	struct run a, b, c;
	enumerate(&t, CS_GRAN_LINE, 50, 7, &a);
	assert_int_equal(a.sum.total, want.n);
	assert_false(a.sum.exhaustive);
	assert_int_equal(a.sum.planned, 50);
	assert_int_equal(a.produced, 50);
	assert_true(a.sampled > 0);
	for (unsigned i = 0; i < a.states.n; i++)
		assert_true(vset_has(&want, a.states.v[i]));
	/* the small interval is whole: the final state is there */
	uint8_t v[MAX_LINES] = {0};
	for (unsigned l = 0; l < 16; l++)
		v[l] = 1;
	v[0] = 2;
	assert_true(vset_has(&a.states, v)); /* the final state */
	enumerate(&t, CS_GRAN_LINE, 50, 7, &b);
	assert_int_equal(a.first_hash, b.first_hash);
	enumerate(&t, CS_GRAN_LINE, 50, 8, &c);
	assert_true(a.first_hash != c.first_hash);
	vset_free(&a.states);
	vset_free(&b.states);
	vset_free(&c.states);
	vset_free(&want);
}

/* Write granularity, sampled: states are still whole-write states of the oracle. */
static void cs__sampled_write_granularity(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 1024};
	for (unsigned i = 0; i < 12; i++)
		add_write(&t, i * 64 + (i % 3) * 8, 40, (uint8_t)i); /* 12 independent writes */
	struct vset want = {0};
	oracle(&t, CS_GRAN_WRITE, true, &want);
	assert_int_equal(want.n, 4096);
	struct run a;
	enumerate(&t, CS_GRAN_WRITE, 100, 3, &a);
	assert_int_equal(a.produced, 100);
	assert_int_equal(a.sum.total, CS_COUNT_MANY); /* counted only up to max + 1 */
	for (unsigned i = 0; i < a.states.n; i++)
		assert_true(vset_has(&want, a.states.v[i]));
	vset_free(&a.states);
	vset_free(&want);
}

/*
 * A base image: bytes no record touched keep the base, a line at version 0
 * is the base's, a write replaces only its own bytes and a discard zeroes
 * only its own.
 */
struct base_check {
	const uint8_t *base;
	uint8_t img[256];
};

static int base_collect(uint64_t off, const uint8_t *data, uint64_t len, void *arg)
{
	memcpy(((struct base_check *)arg)->img + off, data, len);
	return 0;
}

static void cs__base_image(void **state)
{
	(void)state;
	uint8_t base[256];
	for (unsigned i = 0; i < sizeof(base); i++)
		base[i] = (uint8_t)(0x80 | i);
	struct tlog t = {.vol_size = 256};
	add_write(&t, 10, 11, 1);		      /* line 0, bytes 10..20 */
	add_discard(&t, 70, 4, WLOG_DISCARD_DURABLE); /* line 1, bytes 70..73 */
	struct wlog_view *log = write_tlog(&t);
	struct cs_model *m;
	assert_int_equal(cs_model_new(log, CS_GRAN_LINE, &m), 0);
	struct cs_iter *it;
	struct cs_opts o = {.max_states = 100, .base = base};
	assert_int_equal(cs_iter_new(m, &o, &it), 0);
	const struct cs_state *st;
	unsigned n = 0;
	while (cs_iter_next(it, &st) == 1) {
		struct base_check bc = {.base = base};
		memcpy(bc.img, base, sizeof(base));
		assert_int_equal(cs_state_lines(it, base_collect, &bc), 0);
		uint8_t want[256];
		memcpy(want, base, sizeof(base));
		if (cs_state_line_version(it, 0) == 1)
			memcpy(want + 10, t.r[0].data, 11);
		if (cs_state_line_version(it, 1) == 1)
			memset(want + 70, 0, 4);
		assert_memory_equal(bc.img, want, sizeof(want));
		n++;
	}
	/* while the discard is in flight: 2 x 2, less the 2 with its zeros; then 2 */
	assert_int_equal(n, 4);
	cs_iter_delete(&it);
	cs_model_delete(&m);
	write_log_view_delete(&log);
}

/* The ranges of an op: present and missing bytes, clipped to the record. */
struct ranges {
	unsigned n;
	uint64_t off[8], len[8];
	bool present[8];
};

static int add_range(uint64_t off, uint64_t len, bool present, void *arg)
{
	struct ranges *r = arg;
	assert_true(r->n < 8);
	r->off[r->n] = off;
	r->len[r->n] = len;
	r->present[r->n++] = present;
	return 0;
}

static void cs__op_ranges(void **state)
{
	(void)state;
	struct tlog t = {.vol_size = 512};
	add_write(&t, 10, 200, 1); /* lines 0-3, bytes 10..209 */
	struct wlog_view *log = write_tlog(&t);
	struct cs_model *m;
	assert_int_equal(cs_model_new(log, CS_GRAN_LINE, &m), 0);
	struct cs_iter *it;
	struct cs_opts o = {.max_states = 100};
	assert_int_equal(cs_iter_new(m, &o, &it), 0);
	const struct cs_state *st;
	bool seen = false;
	while (cs_iter_next(it, &st) == 1) {
		/* the state with lines 0 and 3 reached, 1 and 2 not */
		if (!(cs_state_line_version(it, 0) == 1 && cs_state_line_version(it, 1) == 0 &&
		      cs_state_line_version(it, 2) == 0 && cs_state_line_version(it, 3) == 1))
			continue;
		seen = true;
		struct ranges r = {0};
		assert_int_equal(cs_state_op_ranges(it, 0, add_range, &r), 0);
		assert_int_equal(r.n, 3);
		assert_true(r.off[0] == 10 && r.len[0] == 54 && r.present[0]);
		assert_true(r.off[1] == 64 && r.len[1] == 128 && !r.present[1]);
		assert_true(r.off[2] == 192 && r.len[2] == 18 && r.present[2]);
		assert_int_equal(cs_state_op(it, 0)->lines_present, 2);
	}
	assert_true(seen);
	cs_iter_delete(&it);
	cs_model_delete(&m);
	write_log_view_delete(&log);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(cs__one_write_no_fsync),
	    cmocka_unit_test(cs__fsync_then_write),
	    cmocka_unit_test(cs__same_line_versions_are_cumulative),
	    cmocka_unit_test(cs__fsync_covers_only_its_range),
	    cmocka_unit_test(cs__fsync_mark_covers_records_before_it),
	    cmocka_unit_test(cs__discard),
	    cmocka_unit_test(cs__wal_buggy_counts),
	    cmocka_unit_test(cs__wal_correct_counts),
	    cmocka_unit_test(cs__empty_log),
	    cmocka_unit_test(cs__control_no_fsync),
	    cmocka_unit_test(cs__random_logs_match_oracle),
	    cmocka_unit_test(cs__sampled_states_are_crash_states),
	    cmocka_unit_test(cs__sampled_write_granularity),
	    cmocka_unit_test(cs__op_ranges),
	    cmocka_unit_test(cs__base_image),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
