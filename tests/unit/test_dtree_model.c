/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_dtree_model.c -- the dirty tree against a plain model, under long
 * random operation sequences (Linux tools/testing/radix-tree style)
 *
 * The model is per-page arrays: which entry covers each page (its first
 * page), and per entry its size and DIRTY/TOWRITE/locked state, plus a
 * bitmap of entry starts so range walks are cheap. It follows the rules of
 * dirty_tree.h literally (huge entries for whole aligned blocks of one
 * call with an aligned location, marks carried over, overlap semantics of
 * range operations), so after every operation the tree's results (counts,
 * items, the advanced index, counters) must equal the model's.
 *
 * The model also keeps, per 4 KiB entry, its line mask by the rules
 * (OR of the lines marked since it was last claimed), and every item's
 * lines are compared with it.
 *
 * Independently of those rules, a second per-page state W, a line mask
 * ("lines written since the last claim of the entry covering the page,
 * and not discarded"), gives the property fsync relies on, checked on the
 * tree's own entries and claims:
 *   R1  every page with W set is covered by a DIRTY entry, and a 4 KiB
 *       one holds every line of W in its mask (no write lost, per line);
 *   R2  every DIRTY entry covers at least one page with W set, and a
 *       4 KiB entry's mask holds no line outside W (line-exact: nothing
 *       written back that was not written; a huge entry is whole);
 *   R3  every entry present is DIRTY, TOWRITE or locked;
 *   R4  a claim returns, for a 4 KiB entry, exactly the lines of W (what
 *       fsync writes back: every written line, and only those).
 * W gets the lines of a mark_dirty range, is cleared for every page of an
 * entry returned by a claim, and for every page of an entry removed by
 * remove_range (a partly covered huge entry is kept, and so is W under it).
 *
 * Control: with the lines_first_only fault (a write records only its
 * lowest line per page) a short run must be caught by these checks.
 *
 * Cheap checks run after every operation, the full comparison (every
 * entry, marks, R1-R3, node count derived from the entries, dtree_check())
 * every FULL_CHECK_EVERY operations and at the end of each volume.
 *
 * RDAX_SEED=<n> repeats a run; RDAX_MODEL_OPS=<n> sets the operation count
 * (default 1,000,000). The seed is printed at the start and on failure.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "checked.h"
#include "dirty_tree.h"
#include "faults.h"

#define PG		 RDAX_PAGE_SIZE
#define PMD_PAGES	 512ULL
#define PUD_PAGES	 (1ULL << 18)
#define OPS_PER_VOLUME	 25000ULL
#define FULL_CHECK_EVERY 1000ULL
#define MAX_HELD	 8U
#define FIND_ANY	 2U

#define MF_DIRTY   0x1
#define MF_TOWRITE 0x2
#define MF_LOCKED  0x4

static uint64_t seed;
static uint64_t rng_state;
static uint64_t op_no;
static char op_desc[256];

/* the control run: a failed check is the expected outcome, reported here */
static bool control_run;
static bool control_caught;
static char control_what[256]; /* the failed check's message */
static jmp_buf control_jmp;

/* splitmix64: small, fast, good enough to drive the operations */
static uint64_t rnd64(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* rnd -- uniform in [0, n), n > 0 */
static uint64_t rnd(uint64_t n)
{
	return rnd64() % n;
}

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "# %s: seed=%" PRIu64 " op=%" PRIu64 " (%s)\n# ",          \
				control_run ? "control caught" : "FAILED", seed, op_no, op_desc);  \
			if (control_run) {                                                         \
				snprintf(control_what, sizeof(control_what), __VA_ARGS__);         \
				fprintf(stderr, "%s\n", control_what);                             \
				control_caught = true;                                             \
				longjmp(control_jmp, 1);                                           \
			}                                                                          \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, "\n# repeat with RDAX_SEED=%" PRIu64 "\n", seed);          \
			fail_msg("model mismatch, seed %" PRIu64, seed);                           \
		}                                                                                  \
	} while (0)

#define CHECK_EQ(a, b, what)                                                                       \
	CHECK((uint64_t)(a) == (uint64_t)(b), "%s: tree %" PRIu64 ", model %" PRIu64, what,        \
	      (uint64_t)(a), (uint64_t)(b))

/* ------------------------------------------------------------------------ */
/* the model                                                                */

struct model {
	uint64_t npages;
	uint64_t base;
	unsigned root_shift;
	bool huge_ok[DTREE_NR_SIZES];
	uint32_t *cover;   /* per page: first page of the covering entry + 1; 0 = none */
	uint64_t *starts;  /* bitmap: pages where an entry starts */
	uint8_t *size;	   /* per entry start */
	uint8_t *flags;	   /* per entry start: MF_* */
	uint64_t *written; /* per page: W, a line mask */
	uint64_t *lines;   /* per 4 KiB entry start: its line mask by the rules */
	uint64_t entries[DTREE_NR_SIZES];
	uint64_t dirty_bytes;
};

static uint64_t size_pages(unsigned size)
{
	return 1ULL << dtree_size_order((enum dtree_size)size);
}

/* size_node_shift -- shift of the node holding an entry of @size (dirty_tree.h) */
static unsigned size_node_shift(unsigned size)
{
	return size == DTREE_SIZE_4K ? 0 : size == DTREE_SIZE_2M ? 6 : 18;
}

static void model_init(struct model *m, uint64_t npages, uint64_t base)
{
	memset(m, 0, sizeof(*m));
	m->npages = npages;
	m->base = base;
	unsigned shift = 0;
	while ((64ULL << shift) < npages)
		shift += 6;
	if (npages >= PMD_PAGES && shift < 6)
		shift = 6;
	if (npages >= PUD_PAGES && shift < 18)
		shift = 18;
	m->root_shift = shift;
	m->huge_ok[DTREE_SIZE_4K] = true;
	m->huge_ok[DTREE_SIZE_2M] = is_aligned(base, PMD_PAGES);
	m->huge_ok[DTREE_SIZE_1G] = is_aligned(base, PUD_PAGES);
	m->cover = calloc(npages, sizeof(*m->cover));
	m->starts = calloc((npages + 63) / 64, sizeof(uint64_t));
	m->size = calloc(npages, 1);
	m->flags = calloc(npages, 1);
	m->written = calloc(npages, sizeof(*m->written));
	m->lines = calloc(npages, sizeof(*m->lines));
	assert_true(m->cover && m->starts && m->size && m->flags && m->written && m->lines);
}

static void model_fini(struct model *m)
{
	free(m->cover);
	free(m->starts);
	free(m->size);
	free(m->flags);
	free(m->written);
	free(m->lines);
}

static bool m_is_start(const struct model *m, uint64_t p)
{
	return (m->starts[p / 64] >> (p % 64)) & 1;
}

/* m_next_start -- first entry start in [q, end), or end */
static uint64_t m_next_start(const struct model *m, uint64_t q, uint64_t end)
{
	while (q < end) {
		uint64_t w = m->starts[q / 64] >> (q % 64);
		if (w) {
			q += (uint64_t)__builtin_ctzll(w);
			return q < end ? q : end;
		}
		q = (q | 63) + 1;
	}
	return end;
}

static uint64_t m_entry_value(const struct model *m, uint64_t c)
{
	uint64_t e = dentry_make(m->base + c, (enum dtree_size)m->size[c]);
	return (m->flags[c] & MF_LOCKED) ? dentry_lock(e) : e;
}

/* m_dirty_bytes -- what a DIRTY entry at @c counts: its lines, or a huge entry whole */
static uint64_t m_dirty_bytes(const struct model *m, uint64_t c)
{
	if (m->size[c] == DTREE_SIZE_4K)
		return dtree_lines_bytes(m->lines[c]);
	return size_pages(m->size[c]) * PG;
}

/* m_entry_lines -- the lines an item of the entry at @c carries (dirty_tree.h) */
static uint64_t m_entry_lines(const struct model *m, uint64_t c)
{
	if (!(m->flags[c] & MF_DIRTY))
		return 0;
	return m->size[c] == DTREE_SIZE_4K ? m->lines[c] : DTREE_LINES_ALL;
}

/* m_set_flag -- DIRTY on a 4 KiB entry means lines m->lines[c] (set first) */
static void m_set_flag(struct model *m, uint64_t c, uint8_t f)
{
	if ((f & MF_DIRTY) && !(m->flags[c] & MF_DIRTY))
		m->dirty_bytes += m_dirty_bytes(m, c);
	m->flags[c] |= f;
}

/* m_clear_flag -- clearing DIRTY empties the line mask */
static void m_clear_flag(struct model *m, uint64_t c, uint8_t f)
{
	if ((f & MF_DIRTY) && (m->flags[c] & MF_DIRTY)) {
		m->dirty_bytes -= m_dirty_bytes(m, c);
		m->lines[c] = 0;
	}
	m->flags[c] &= (uint8_t)~f;
}

/*
 * m_mark_lines -- lines @w of the 4 KiB entry at @c were marked: OR them
 * into its mask (empty unless DIRTY), set DIRTY
 */
static void m_mark_lines(struct model *m, uint64_t c, uint64_t w)
{
	if (m->flags[c] & MF_DIRTY) {
		m->dirty_bytes += dtree_lines_bytes(w & ~m->lines[c]);
		m->lines[c] |= w;
		return;
	}
	m->lines[c] = w;
	m_set_flag(m, c, MF_DIRTY);
}

/* m_page_lines -- the lines of page @p that bytes [off, end) touch */
static uint64_t m_page_lines(uint64_t p, uint64_t off, uint64_t end)
{
	uint64_t lo = off > p * PG ? off - p * PG : 0;
	uint64_t hi = end < (p + 1) * PG ? end - p * PG : PG;
	uint64_t w = 0;
	for (uint64_t l = lo / DTREE_LINE_SIZE; l <= (hi - 1) / DTREE_LINE_SIZE; l++)
		w |= 1ULL << l;
	return w;
}

static void m_add(struct model *m, uint64_t c, unsigned size, uint8_t flags)
{
	for (uint64_t p = c; p < c + size_pages(size); p++)
		m->cover[p] = (uint32_t)(c + 1);
	m->starts[c / 64] |= 1ULL << (c % 64);
	m->size[c] = (uint8_t)size;
	m->flags[c] = 0;
	m->entries[size]++;
	m_set_flag(m, c, flags);
}

static void m_del(struct model *m, uint64_t c)
{
	m_clear_flag(m, c, MF_DIRTY | MF_TOWRITE | MF_LOCKED);
	for (uint64_t p = c; p < c + size_pages(m->size[c]); p++)
		m->cover[p] = 0;
	m->starts[c / 64] &= ~(1ULL << (c % 64));
	m->entries[m->size[c]]--;
}

static void m_clear_written(struct model *m, uint64_t c)
{
	memset(m->written + c, 0, size_pages(m->size[c]) * sizeof(*m->written));
}

/* W of each 4 KiB entry the last model claim took, by item (R4) */
static uint64_t m_claimed_w[64];

/* m_range_start -- a non-empty range from @idx starts at the entry covering it */
static uint64_t m_range_start(const struct model *m, uint64_t idx, uint64_t end)
{
	return idx < end && m->cover[idx] ? m->cover[idx] - 1 : idx;
}

/* m_choose -- entry size for page @p of a write of bytes [off, end) (dirty_tree.h rule) */
static unsigned m_choose(const struct model *m, uint64_t p, uint64_t off, uint64_t end)
{
	for (unsigned size = DTREE_SIZE_1G; size > DTREE_SIZE_4K; size--) {
		uint64_t n = size_pages(size);
		if (m->huge_ok[size] && p % n == 0 && p * PG >= off && (p + n) * PG <= end)
			return size;
	}
	return DTREE_SIZE_4K;
}

/*
 * m_mark -- the model of dtree_mark_dirty(). With @dry, change nothing and
 * return whether the call would wait for a locked entry.
 */
static bool m_mark(struct model *m, uint64_t off, uint64_t len, bool dry)
{
	uint64_t end = off + len;
	uint64_t first = off / PG, last = (end - 1) / PG;
	for (uint64_t p = first; p <= last;) {
		unsigned size = m_choose(m, p, off, end);
		if (size == DTREE_SIZE_4K) {
			if (!dry) {
				uint64_t c = m->cover[p] ? m->cover[p] - 1 : p;
				if (!m->cover[p])
					m_add(m, p, DTREE_SIZE_4K, 0);
				uint64_t w = m_page_lines(p, off, end);
				/*
				 * The control's fault is followed by the rules too, so
				 * only R1-R4, from W (what was really written), can
				 * catch it.
				 */
				if (rdax_faults.lines_first_only)
					w &= -w;
				if (m->size[c] == DTREE_SIZE_4K)
					m_mark_lines(m, c, w);
				else
					m_set_flag(m, c, MF_DIRTY);
			}
			p++;
			continue;
		}
		uint64_t n = size_pages(size);
		if (m->cover[p] && m->size[m->cover[p] - 1] >= size) {
			uint64_t c = m->cover[p] - 1;
			if (!dry)
				m_set_flag(m, c, MF_DIRTY);
			p = c + size_pages(m->size[c]);
			continue;
		}
		bool towrite = false;
		for (uint64_t q = m_next_start(m, p, p + n); q < p + n;
		     q = m_next_start(m, q + size_pages(m->size[q]), p + n)) {
			if (dry) {
				if (m->flags[q] & MF_LOCKED)
					return true;
				continue;
			}
			assert_false(m->flags[q] & MF_LOCKED);
			towrite |= (m->flags[q] & MF_TOWRITE) != 0;
			m_del(m, q);
		}
		if (!dry)
			m_add(m, p, size, MF_DIRTY | (towrite ? MF_TOWRITE : 0));
		p += n;
	}
	if (!dry)
		for (uint64_t p = first; p <= last; p++)
			m->written[p] |= m_page_lines(p, off, end);
	return false;
}

/* m_walk -- model of tag (@tag), gang lookup (@what) and claim (@claim) */
static unsigned m_walk(struct model *m, uint64_t *idx, uint64_t end, unsigned what, bool tag,
		       bool claim, struct dtree_item *items, unsigned max)
{
	unsigned n = 0;
	uint64_t s = m_range_start(m, *idx, end);
	for (;;) {
		if (n == max)
			break;
		uint64_t c = m_next_start(m, s, end);
		if (c >= end) {
			s = end;
			break;
		}
		s = c + size_pages(m->size[c]);
		bool match = what == FIND_ANY ||
			     (m->flags[c] & (what == DTREE_DIRTY ? MF_DIRTY : MF_TOWRITE));
		if (!match)
			continue;
		if (claim && (m->flags[c] & MF_LOCKED))
			continue; /* held already: skipped, marks kept */
		if (tag)
			m_set_flag(m, c, MF_TOWRITE);
		uint64_t lines = m_entry_lines(m, c);
		if (claim) {
			m->flags[c] |= MF_LOCKED;
			if (lines == 0)
				lines = DTREE_LINES_ALL; /* taken whole (dirty_tree.c) */
			if (n < 64)
				m_claimed_w[n] = m->written[c];
			m_clear_flag(m, c, MF_TOWRITE | MF_DIRTY);
			m_clear_written(m, c);
		}
		if (items) {
			items[n].index = c;
			items[n].entry = m_entry_value(m, c);
			items[n].lines = lines;
		}
		n++;
	}
	*idx = s < end ? s : end;
	return n;
}

/*
 * m_claim_dirty -- model of dtree_claim_dirty(): at most @max DIRTY
 * entries in the range: claim them all (locked ones skipped), index = end;
 * more: tag the first max + 1, index past them, -EAGAIN.
 */
static long m_claim_dirty(struct model *m, uint64_t *idx, uint64_t end, struct dtree_item *items,
			  unsigned max)
{
	uint64_t probe = *idx;
	unsigned found = m_walk(m, &probe, end, DTREE_DIRTY, false, false, NULL, max + 1);
	if (found > max) {
		m_walk(m, idx, end, DTREE_DIRTY, true, false, NULL, max + 1);
		return -EAGAIN;
	}
	unsigned n = m_walk(m, idx, end, DTREE_DIRTY, false, true, items, max);
	*idx = end;
	return n;
}

static void m_release(struct model *m, const struct dtree_item *items, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t c = items[i].index;
		assert_true(m_is_start(m, c) && (m->flags[c] & MF_LOCKED));
		m->flags[c] &= (uint8_t)~MF_LOCKED;
		if (!(m->flags[c] & (MF_DIRTY | MF_TOWRITE)))
			m_del(m, c);
	}
}

/* m_remove -- model of dtree_remove_range(); with @dry: would it wait? */
static uint64_t m_remove(struct model *m, uint64_t first, uint64_t end, bool dry)
{
	uint64_t removed = 0;
	uint64_t s = m_range_start(m, first, end);
	for (uint64_t c = m_next_start(m, s, end); c < end;) {
		uint64_t next = c + size_pages(m->size[c]);
		if (dry) {
			if (m->flags[c] & MF_LOCKED)
				return 1;
		} else if (c >= first && next <= end) {
			m_clear_written(m, c);
			m_del(m, c);
			removed++;
		}
		c = m_next_start(m, next, end);
	}
	return dry ? 0 : removed;
}

/* ------------------------------------------------------------------------ */
/* checks                                                                   */

static void check_stats(struct dtree *t, const struct model *m)
{
	struct dtree_stats st;
	dtree_stats_get(t, &st);
	for (unsigned i = 0; i < DTREE_NR_SIZES; i++)
		CHECK_EQ(st.entries[i], m->entries[i], "entries of a size class");
	CHECK_EQ(st.dirty_bytes, m->dirty_bytes, "dirty_bytes");
}

/* check_page -- lookup and marks of page @p agree with the model */
static void check_page(struct dtree *t, const struct model *m, uint64_t p)
{
	uint64_t first = 0, entry = 0;
	int ret = dtree_lookup(t, p, &first, &entry);
	if (!m->cover[p]) {
		CHECK(ret == -ENOENT, "page %" PRIu64 ": tree has an entry, model none", p);
		return;
	}
	uint64_t c = m->cover[p] - 1;
	CHECK(ret == 0, "page %" PRIu64 ": tree has no entry, model one at %" PRIu64, p, c);
	CHECK_EQ(first, c, "first page of the covering entry");
	CHECK_EQ(entry, m_entry_value(m, c), "entry value");
	CHECK_EQ(dtree_get_mark(t, p, DTREE_DIRTY), (m->flags[c] & MF_DIRTY) != 0, "DIRTY");
	CHECK_EQ(dtree_get_mark(t, p, DTREE_TOWRITE), (m->flags[c] & MF_TOWRITE) != 0, "TOWRITE");
	struct dtree_item item;
	uint64_t idx = p;
	CHECK(dtree_gang_lookup_any(t, &idx, p + 1, &item, 1) == 1 && item.index == c,
	      "page %" PRIu64 ": gang lookup does not find the entry at %" PRIu64, p, c);
	CHECK(item.lines == m_entry_lines(m, c),
	      "page %" PRIu64 ": tree lines %#" PRIx64 ", model %#" PRIx64, p, item.lines,
	      m_entry_lines(m, c));
	if (m->written[p]) {
		CHECK(m->flags[c] & MF_DIRTY, "R1: written page %" PRIu64 " not DIRTY", p);
		if (m->size[c] == DTREE_SIZE_4K)
			CHECK((item.lines & m->written[p]) == m->written[p],
			      "R1: page %" PRIu64 ": written lines %#" PRIx64
			      ", tree has %#" PRIx64,
			      p, m->written[p], item.lines);
	}
}

/*
 * check_claimed -- R4: the 4 KiB items a claim returned carry exactly the
 * lines written since their last claim (m_claimed_w, filled by the model's
 * claim of the same entries)
 */
static void check_claimed(const struct dtree_item *items, unsigned n)
{
	for (unsigned i = 0; i < n && i < 64; i++) {
		if (dentry_size(items[i].entry) != DTREE_SIZE_4K)
			continue;
		CHECK(items[i].lines == m_claimed_w[i],
		      "R4: claim of page %" PRIu64 " returned lines %#" PRIx64
		      ", written since its last claim %#" PRIx64,
		      items[i].index, items[i].lines, m_claimed_w[i]);
	}
}

static void check_items(const struct dtree_item *a, unsigned na, const struct dtree_item *b,
			unsigned nb, uint64_t ia, uint64_t ib, const char *what)
{
	CHECK(na == nb, "%s: tree returned %u entries, model %u", what, na, nb);
	for (unsigned i = 0; i < na; i++) {
		CHECK(a[i].index == b[i].index && a[i].entry == b[i].entry &&
			  a[i].lines == b[i].lines,
		      "%s: item %u tree (%" PRIu64 ", %#" PRIx64 ", lines %#" PRIx64
		      "), model (%" PRIu64 ", %#" PRIx64 ", lines %#" PRIx64 ")",
		      what, i, a[i].index, a[i].entry, a[i].lines, b[i].index, b[i].entry,
		      b[i].lines);
	}
	CHECK(ia == ib, "%s: tree index %" PRIu64 ", model %" PRIu64, what, ia, ib);
}

/*
 * check_full -- every entry of the tree against the model, R1-R3 on the
 * tree's own entries, the node count implied by the entries, dtree_check().
 */
static void check_full(struct dtree *t, const struct model *m)
{
	CHECK(dtree_check(t) == 0, "dtree_check failed (see the log)");
	check_stats(t, m);

	struct dtree_item items[64];
	uint64_t idx = 0, mc = m_next_start(m, 0, m->npages);
	uint64_t w = 0; /* next page to check for R1 */
	uint64_t nodes = 1, last_id[8];
	for (unsigned s = 0; s < 8; s++)
		last_id[s] = UINT64_MAX;
	unsigned n;
	while ((n = dtree_gang_lookup_any(t, &idx, m->npages, items, 64)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			uint64_t c = items[i].index, e = items[i].entry;
			CHECK(c == mc, "entry walk: tree entry at %" PRIu64 ", model at %" PRIu64,
			      c, mc);
			CHECK_EQ(e, m_entry_value(m, c), "entry value in the walk");
			uint64_t pages = dentry_bytes(e) / PG;
			bool dirty = dtree_get_mark(t, c, DTREE_DIRTY);
			bool towrite = dtree_get_mark(t, c, DTREE_TOWRITE);
			CHECK_EQ(dirty, (m->flags[c] & MF_DIRTY) != 0, "DIRTY in the walk");
			CHECK_EQ(towrite, (m->flags[c] & MF_TOWRITE) != 0, "TOWRITE in the walk");
			CHECK(dirty || towrite || dentry_is_locked(e),
			      "R3: entry at %" PRIu64 " clean, unlocked, present", c);
			CHECK(items[i].lines == m_entry_lines(m, c),
			      "entry at %" PRIu64 ": tree lines %#" PRIx64 ", model %#" PRIx64, c,
			      items[i].lines, m_entry_lines(m, c));
			/* R1 and R2 per line: a DIRTY 4 KiB entry holds exactly W */
			if (dirty && pages == 1)
				CHECK(items[i].lines == m->written[c],
				      "R1/R2: page %" PRIu64 ": lines %#" PRIx64
				      ", written since its last claim %#" PRIx64,
				      c, items[i].lines, m->written[c]);
			/* R1 for pages before this entry: none may be written */
			for (; w < c; w++)
				CHECK(!m->written[w], "R1: written page %" PRIu64 " has no entry",
				      w);
			bool any_written = false;
			for (uint64_t q = c; q < c + pages && !any_written; q++)
				any_written = m->written[q] != 0;
			if (dirty)
				CHECK(any_written,
				      "R2: DIRTY entry at %" PRIu64 " (%" PRIu64
				      " pages) has no written page",
				      c, pages);
			else
				CHECK(!any_written,
				      "R1: entry at %" PRIu64 " has written pages "
				      "but is not DIRTY",
				      c);
			w = c + pages;
			/* nodes: one per distinct (level, index >> level span) */
			unsigned ns = size_node_shift(dentry_size(e));
			for (unsigned s = ns; s < m->root_shift; s += 6) {
				uint64_t id = c >> (s + 6);
				if (id != last_id[s / 6]) {
					last_id[s / 6] = id;
					nodes++;
				}
			}
			mc = m_next_start(m, c + pages, m->npages);
		}
	}
	CHECK(mc == m->npages, "entry walk: model has an entry at %" PRIu64 " the tree lacks", mc);
	for (; w < m->npages; w++)
		CHECK(!m->written[w], "R1: written page %" PRIu64 " has no entry", w);
	struct dtree_stats st;
	dtree_stats_get(t, &st);
	CHECK_EQ(st.nodes, nodes, "nodes (empty nodes must be freed)");
}

/* ------------------------------------------------------------------------ */
/* operations                                                               */

struct run {
	struct dtree *t;
	struct model m;
	struct dtree_item held[MAX_HELD];
	unsigned nheld;
};

/* rand_bytes -- a byte range inside the volume, biased to the interesting shapes */
static void rand_bytes(const struct model *m, uint64_t *off, uint64_t *len)
{
	uint64_t size = m->npages * PG;
	uint64_t r = rnd(1000);
	uint64_t o, l;
	if (r < 250) {
		o = rnd(size);
		l = 1 + rnd(16 * PG);
	} else if (r < 450) {
		/* within a page or two, at any byte: the line masks */
		o = rnd(size);
		l = 1 + rnd(rnd(2) ? 2 * DTREE_LINE_SIZE : PG);
	} else if (r < 650) {
		o = rnd(size);
		l = 1 + rnd(600 * PG);
	} else if (r < 900 && m->npages >= PMD_PAGES) {
		uint64_t blocks = m->npages / PMD_PAGES;
		uint64_t b = rnd(blocks);
		o = b * RDAX_PMD_SIZE;
		l = (1 + rnd(3)) * RDAX_PMD_SIZE;
		if (rnd(3) == 0 && o > 0)
			o -= rnd(2 * PG);
		if (rnd(3) == 0)
			l += rnd(3 * PG);
		if (rnd(4) == 0)
			l -= 1 + rnd(PG); /* one block just short */
	} else if (r < 903 && m->npages >= PUD_PAGES) {
		uint64_t b = rnd(m->npages / PUD_PAGES);
		o = b * RDAX_PUD_SIZE - (b && rnd(2) ? rnd(4 * PG) : 0);
		l = RDAX_PUD_SIZE + rnd(2) * rnd(3 * RDAX_PMD_SIZE);
	} else if (m->npages <= 8192) {
		o = rnd(2) ? 0 : rnd(size / 2 + 1);
		l = size;
	} else {
		o = rnd(size);
		l = 1 + rnd(PG);
	}
	if (o >= size)
		o = size - 1;
	if (l > size - o)
		l = size - o;
	if (l == 0)
		l = 1;
	*off = o;
	*len = l;
}

/* rand_pages -- a page range [*first, *end), sometimes starting inside an entry */
static void rand_pages(const struct model *m, uint64_t *first, uint64_t *end)
{
	uint64_t r = rnd(10);
	uint64_t f, e;
	if (r < 3) {
		f = 0;
		e = m->npages;
	} else if (r < 7) {
		f = rnd(m->npages);
		e = f + 1 + rnd(1000);
	} else {
		uint64_t q = rnd(m->npages);
		uint64_t c = m_next_start(m, q, m->npages);
		if (c == m->npages)
			c = m_next_start(m, 0, m->npages);
		f = c == m->npages ? q : c + rnd(size_pages(m->size[c]));
		e = f + 1 + rnd(rnd(2) ? 2 * PMD_PAGES : 20);
	}
	if (e > m->npages)
		e = m->npages;
	*first = f;
	*end = e;
}

static void op_mark(struct run *r)
{
	uint64_t off, len;
	rand_bytes(&r->m, &off, &len);
	snprintf(op_desc, sizeof(op_desc), "mark_dirty(off=%" PRIu64 ", len=%" PRIu64 ")", off,
		 len);
	if (r->nheld && m_mark(&r->m, off, len, true))
		return; /* would wait for an entry this thread holds */
	CHECK(dtree_mark_dirty(r->t, off, len) == 0, "mark_dirty failed");
	m_mark(&r->m, off, len, false);
	uint64_t first = off / PG, last = (off + len - 1) / PG;
	check_page(r->t, &r->m, first);
	check_page(r->t, &r->m, last);
	if (last - first < 64)
		for (uint64_t p = first + 1; p < last; p++)
			check_page(r->t, &r->m, p);
}

static void op_tag(struct run *r)
{
	uint64_t first, end;
	rand_pages(&r->m, &first, &end);
	unsigned batch = rnd(4) ? 1 + (unsigned)rnd(20) : 4096;
	bool loop = rnd(3) == 0;
	snprintf(op_desc, sizeof(op_desc),
		 "tag_towrite(index=%" PRIu64 ", end=%" PRIu64 ", batch=%u, loop=%d)", first, end,
		 batch, loop);
	uint64_t ti = first, mi = first;
	long tn;
	do {
		tn = dtree_tag_towrite(r->t, &ti, end, batch);
		unsigned mn = m_walk(&r->m, &mi, end, DTREE_DIRTY, true, false, NULL, batch);
		CHECK_EQ(tn, mn, "tag_towrite count");
		CHECK_EQ(ti, mi, "tag_towrite index");
	} while (loop && tn > 0);
}

static void op_gang(struct run *r)
{
	uint64_t first, end;
	rand_pages(&r->m, &first, &end);
	unsigned what = (unsigned)rnd(3);
	unsigned max = 1 + (unsigned)rnd(16);
	snprintf(op_desc, sizeof(op_desc),
		 "gang_lookup(index=%" PRIu64 ", end=%" PRIu64 ", what=%u, max=%u)", first, end,
		 what, max);
	struct dtree_item ti[16], mi[16];
	uint64_t tx = first, mx = first;
	unsigned tn = what == FIND_ANY
			  ? dtree_gang_lookup_any(r->t, &tx, end, ti, max)
			  : dtree_gang_lookup(r->t, &tx, end, (enum dtree_mark)what, ti, max);
	unsigned mn = m_walk(&r->m, &mx, end, what, false, false, mi, max);
	check_items(ti, tn, mi, mn, tx, mx, "gang_lookup");
}

static void op_release(struct run *r)
{
	snprintf(op_desc, sizeof(op_desc), "release(n=%u, first=%" PRIu64 ")", r->nheld,
		 r->nheld ? r->held[0].index : 0);
	dtree_release(r->t, r->held, r->nheld);
	m_release(&r->m, r->held, r->nheld);
	for (unsigned i = 0; i < r->nheld; i++)
		check_page(r->t, &r->m, r->held[i].index);
	r->nheld = 0;
}

static void op_claim(struct run *r)
{
	if (r->nheld == MAX_HELD) {
		op_release(r);
		return;
	}
	uint64_t first, end;
	rand_pages(&r->m, &first, &end);
	unsigned max = 1 + (unsigned)rnd(MAX_HELD - r->nheld);
	snprintf(op_desc, sizeof(op_desc),
		 "claim_towrite(index=%" PRIu64 ", end=%" PRIu64 ", max=%u, holding %u)", first,
		 end, max, r->nheld);
	struct dtree_item mi[MAX_HELD];
	uint64_t tx = first, mx = first;
	/* claiming more while holding some: never waits, skips what is held */
	unsigned tn = dtree_claim_towrite(r->t, &tx, end, r->held + r->nheld, max);
	unsigned mn = m_walk(&r->m, &mx, end, DTREE_TOWRITE, false, true, mi, max);
	check_items(r->held + r->nheld, tn, mi, mn, tx, mx, "claim_towrite");
	check_claimed(r->held + r->nheld, tn);
	r->nheld += tn;
	/* often write back at once, else hold them across later operations */
	if (rnd(3) == 0)
		op_release(r);
}

/* op_claim_dirty -- the one-pass claim, held like op_claim()'s */
static void op_claim_dirty(struct run *r)
{
	if (r->nheld == MAX_HELD) {
		op_release(r);
		return;
	}
	uint64_t first, end;
	rand_pages(&r->m, &first, &end);
	unsigned max = 1 + (unsigned)rnd(MAX_HELD - r->nheld);
	snprintf(op_desc, sizeof(op_desc),
		 "claim_dirty(index=%" PRIu64 ", end=%" PRIu64 ", max=%u, holding %u)", first, end,
		 max, r->nheld);
	struct dtree_item mi[MAX_HELD];
	uint64_t tx = first, mx = first;
	long tn = dtree_claim_dirty(r->t, &tx, end, r->held + r->nheld, max);
	long mn = m_claim_dirty(&r->m, &mx, end, mi, max);
	CHECK(tn == mn, "claim_dirty: tree returned %ld, model %ld", tn, mn);
	if (tn < 0) {
		CHECK_EQ(tx, mx, "claim_dirty index after tagging");
		return;
	}
	check_items(r->held + r->nheld, (unsigned)tn, mi, (unsigned)mn, tx, mx, "claim_dirty");
	check_claimed(r->held + r->nheld, (unsigned)tn);
	r->nheld += (unsigned)tn;
	if (rnd(3) == 0)
		op_release(r);
}

static void op_remove(struct run *r)
{
	uint64_t first, end;
	rand_pages(&r->m, &first, &end);
	snprintf(op_desc, sizeof(op_desc), "remove_range(first=%" PRIu64 ", end=%" PRIu64 ")",
		 first, end);
	if (r->nheld && m_remove(&r->m, first, end, true))
		return; /* would wait for an entry this thread holds */
	uint64_t tn = dtree_remove_range(r->t, first, end);
	uint64_t mn = m_remove(&r->m, first, end, false);
	CHECK_EQ(tn, mn, "remove_range count");
	check_page(r->t, &r->m, first);
	check_page(r->t, &r->m, end - 1);
}

static void op_lookup(struct run *r)
{
	uint64_t p = rnd(r->m.npages);
	snprintf(op_desc, sizeof(op_desc), "lookup(%" PRIu64 ")", p);
	check_page(r->t, &r->m, p);
}

/*
 * op_fsync -- a whole fsync walk: tag all, claim and release all; half of
 * them start as fsync does, with the one-pass claim (which may do it all)
 */
static void op_fsync(struct run *r)
{
	if (r->nheld)
		op_release(r);
	snprintf(op_desc, sizeof(op_desc), "fsync walk");
	uint64_t end = r->m.npages, ti = 0, mi = 0;
	unsigned batch = 1 + (unsigned)rnd(64);
	long tn;
	if (rnd(2)) {
		snprintf(op_desc, sizeof(op_desc), "fsync walk, one pass first");
		struct dtree_item mitems[MAX_HELD];
		tn = dtree_claim_dirty(r->t, &ti, end, r->held, MAX_HELD);
		long mn = m_claim_dirty(&r->m, &mi, end, mitems, MAX_HELD);
		CHECK(tn == mn, "fsync claim_dirty: tree returned %ld, model %ld", tn, mn);
		CHECK_EQ(ti, mi, "fsync claim_dirty index");
		if (tn >= 0) {
			check_items(r->held, (unsigned)tn, mitems, (unsigned)mn, ti, mi,
				    "fsync claim_dirty");
			check_claimed(r->held, (unsigned)tn);
			r->nheld = (unsigned)tn;
			op_release(r);
			return;
		}
	}
	do {
		tn = dtree_tag_towrite(r->t, &ti, end, batch);
		unsigned mn = m_walk(&r->m, &mi, end, DTREE_DIRTY, true, false, NULL, batch);
		CHECK_EQ(tn, mn, "fsync tag count");
		CHECK_EQ(ti, mi, "fsync tag index");
	} while (tn > 0);
	uint64_t tx = 0, mx = 0;
	struct dtree_item mitems[MAX_HELD];
	unsigned n;
	do {
		n = dtree_claim_towrite(r->t, &tx, end, r->held, MAX_HELD);
		unsigned mn = m_walk(&r->m, &mx, end, DTREE_TOWRITE, false, true, mitems, MAX_HELD);
		check_items(r->held, n, mitems, mn, tx, mx, "fsync claim");
		check_claimed(r->held, n);
		r->nheld = n;
		op_release(r);
	} while (n > 0);
}

static void op_clear(struct run *r)
{
	if (r->nheld)
		op_release(r);
	snprintf(op_desc, sizeof(op_desc), "clear");
	dtree_clear(r->t);
	m_remove(&r->m, 0, r->m.npages, false);
	CHECK_EQ(r->m.entries[0] + r->m.entries[1] + r->m.entries[2], 0, "entries after clear");
}

/* run_one -- one random operation */
static void run_one(struct run *r)
{
	uint64_t x = rnd(1000);
	if (x < 330)
		op_mark(r);
	else if (x < 460)
		op_tag(r);
	else if (x < 580)
		op_gang(r);
	else if (x < 660)
		op_claim(r);
	else if (x < 720)
		op_claim_dirty(r);
	else if (x < 800)
		op_release(r);
	else if (x < 860)
		op_remove(r);
	else if (x < 985)
		op_lookup(r);
	else if (x < 999)
		op_fsync(r);
	else
		op_clear(r);
	check_stats(r->t, &r->m);
}

/* volume_config -- pages and base location of the k-th volume of a run */
static void volume_config(unsigned k, uint64_t *npages, uint64_t *base)
{
	uint64_t ns = 1 + rnd(5);
	switch (k % 4) {
	case 0: /* tiny: the root is a leaf */
		*npages = 1 + rnd(63);
		*base = dloc_make((uint32_t)ns, rnd(1 << 20));
		break;
	case 1: /* around 2 MiB blocks: root shift 6 or 12 */
		*npages = PMD_PAGES + rnd(4000);
		*base = dloc_make((uint32_t)ns, rnd(3) ? PMD_PAGES * rnd(100) : rnd(1 << 20));
		break;
	case 2: /* a few thousand pages to 40k */
		*npages = 4000 + rnd(36000);
		*base = dloc_make((uint32_t)ns, rnd(3) ? PMD_PAGES * rnd(100) : 1 + rnd(511));
		break;
	default: /* >= 1 GiB: 1 GiB entries happen when the location allows */
		*npages = PUD_PAGES * (1 + rnd(2)) + rnd(3000);
		*base = dloc_make((uint32_t)ns, rnd(4) ? PUD_PAGES * rnd(8) : PMD_PAGES * 3);
		break;
	}
}

static void dtree_model__random_operations(void **state)
{
	(void)state;
	const char *env = getenv("RDAX_SEED");
	seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	env = getenv("RDAX_MODEL_OPS");
	uint64_t total = env ? strtoull(env, NULL, 0) : 1000000ULL;
	rng_state = seed;
	printf("# dtree model: seed=%" PRIu64 " ops=%" PRIu64 " (RDAX_SEED, RDAX_MODEL_OPS)\n",
	       seed, total);
	fflush(stdout);

	uint64_t huge_made[DTREE_NR_SIZES] = {0};
	uint64_t done = 0;
	for (unsigned k = 0; done < total; k++) {
		struct run r = {0};
		uint64_t npages, base;
		volume_config(k, &npages, &base);
		assert_int_equal(dtree_new(npages, base, &r.t), 0);
		model_init(&r.m, npages, base);
		uint64_t n = total - done < OPS_PER_VOLUME ? total - done : OPS_PER_VOLUME;
		for (uint64_t i = 0; i < n; i++, done++) {
			op_no = done;
			run_one(&r);
			for (unsigned s = 1; s < DTREE_NR_SIZES; s++)
				if (r.m.entries[s] > huge_made[s])
					huge_made[s] = r.m.entries[s];
			if ((i + 1) % FULL_CHECK_EVERY == 0)
				check_full(r.t, &r.m);
		}
		if (r.nheld)
			op_release(&r);
		snprintf(op_desc, sizeof(op_desc), "end of volume %u (%" PRIu64 " pages)", k,
			 npages);
		check_full(r.t, &r.m);
		dtree_delete(&r.t);
		model_fini(&r.m);
	}
	printf("# dtree model: %" PRIu64 " ops done; most 2 MiB entries at once %" PRIu64
	       ", most 1 GiB entries %" PRIu64 "\n",
	       done, huge_made[DTREE_SIZE_2M], huge_made[DTREE_SIZE_1G]);
	if (total >= 4 * OPS_PER_VOLUME) {
		assert_true(huge_made[DTREE_SIZE_2M] > 0);
		assert_true(huge_made[DTREE_SIZE_1G] > 0);
	}
}

/* the control's run, static so that a caught check (a longjmp) can still free it */
static struct run control;

/*
 * Control: with lines_first_only a write records only its lowest line in
 * each page, so a line written is missing from its entry's mask. A short
 * run of the same operations on a few thousand pages must be caught. The
 * model's rules follow the fault (m_mark()), so the tree agrees with them
 * and what catches it is R1-R4, the checks against W.
 */
static void dtree_model__control_lines_first_only_caught(void **state)
{
	(void)state;
	seed = 12345;
	rng_state = seed;
	control_run = true;
	control_caught = false;
	memset(&control, 0, sizeof(control));
	rdax_faults.lines_first_only = true;
	assert_int_equal(dtree_new(6000, dloc_make(1, 0), &control.t), 0);
	model_init(&control.m, 6000, dloc_make(1, 0));
	if (setjmp(control_jmp) == 0) {
		for (op_no = 0; op_no < 20000; op_no++) {
			run_one(&control);
			if ((op_no + 1) % FULL_CHECK_EVERY == 0)
				check_full(control.t, &control.m);
		}
		check_full(control.t, &control.m);
	}
	/* the tree is whole under the fault: only lines are missing */
	assert_int_equal(dtree_check(control.t), 0);
	rdax_faults.lines_first_only = false;
	control_run = false;
	dtree_delete(&control.t);
	model_fini(&control.m);
	assert_true(control_caught);
	assert_true(control_what[0] == 'R'); /* an R1-R4 message */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(dtree_model__random_operations),
	    cmocka_unit_test(dtree_model__control_lines_first_only_caught),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
