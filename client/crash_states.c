/* SPDX-License-Identifier: BSD-3-Clause */
/* crash_states.c -- crash states of a write log (crash_states.h) */
#include "crash_states.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"

/* Bytes of line content handed to cs_state_lines' callback at once. */
#define RUN_MAX (1U << 20)
#define NONE	UINT32_MAX

/*
 * A piece: one record's store into one line. Sorted by (line, record), so
 * the pieces of a line are contiguous and in record order: "version v" of
 * the line is its base content with its first v pieces applied.
 */
struct piece {
	uint64_t line; /* line number: byte offset / CS_LINE */
	uint32_t rec;
	uint8_t start; /* first byte within the line */
	uint8_t len;   /* 1 .. CS_LINE */
};

/* A line some record touches, with its pieces[first .. first + n). */
struct mline {
	uint64_t line;
	uint32_t first, n;
};

struct cs_model {
	const struct wlog_view *log;
	enum cs_granularity gran;
	struct piece *pieces;
	uint64_t npieces;
	struct mline *lines;
	uint32_t nlines;
	uint32_t *rec_line; /* per record: index in lines[] of its first line; NONE: no store */
	uint64_t nintervals;
};

static bool rec_is_store(const struct wlog_record *r)
{
	return r->type == WLOG_WRITE || r->type == WLOG_DISCARD;
}

/* rec_is_point -- a durability point: an fsync, or a discard durable at its acknowledgement */
static bool rec_is_point(const struct wlog_record *r)
{
	if (r->type == WLOG_FSYNC)
		return !rdax_faults.crash_states_no_fsync;
	return r->type == WLOG_DISCARD && (r->flags & WLOG_DISCARD_DURABLE);
}

/* rec_lines -- the line numbers [*first, *first + *n) a store touches */
static void rec_lines(const struct wlog_record *r, uint64_t *first, uint64_t *n)
{
	*first = r->off / CS_LINE;
	*n = (r->off + r->len - 1) / CS_LINE - *first + 1;
}

static int piece_cmp(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->rec < y->rec ? -1 : x->rec > y->rec;
}

/* find_line -- index in m->lines of line number @line, or NONE */
static uint32_t find_line(const struct cs_model *m, uint64_t line)
{
	uint32_t lo = 0, hi = m->nlines;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (m->lines[mid].line < line)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->nlines && m->lines[lo].line == line ? lo : NONE;
}

/* pieces_before -- how many pieces of line @li come from records < @rec */
static uint32_t pieces_before(const struct cs_model *m, uint32_t li, uint64_t rec)
{
	const struct piece *p = m->pieces + m->lines[li].first;
	uint32_t lo = 0, hi = m->lines[li].n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (p[mid].rec < rec)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int cs_model_new(const struct wlog_view *log, enum cs_granularity gran, struct cs_model **out)
{
	if (!log || !out || (gran != CS_GRAN_LINE && gran != CS_GRAN_WRITE))
		return -EINVAL;
	if (log->count >= NONE)
		return -E2BIG;
	struct cs_model *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->log = log;
	m->gran = gran;
	m->nintervals = 1;
	for (uint64_t i = 0; i < log->count; i++) {
		const struct wlog_record *r = &log->records[i];
		if (rec_is_point(r))
			m->nintervals++;
		if (rec_is_store(r)) {
			uint64_t first, n;
			rec_lines(r, &first, &n);
			m->npieces += n;
		}
	}
	int ret = -E2BIG;
	if (m->npieces >= NONE)
		goto err;
	ret = -ENOMEM;
	m->pieces = malloc((m->npieces ? m->npieces : 1) * sizeof(*m->pieces));
	m->rec_line = malloc((log->count ? log->count : 1) * sizeof(*m->rec_line));
	if (!m->pieces || !m->rec_line)
		goto err;
	uint64_t k = 0;
	for (uint64_t i = 0; i < log->count; i++) {
		const struct wlog_record *r = &log->records[i];
		if (!rec_is_store(r))
			continue;
		uint64_t first, n;
		rec_lines(r, &first, &n);
		for (uint64_t l = first; l < first + n; l++) {
			uint64_t s = l * CS_LINE > r->off ? l * CS_LINE : r->off;
			uint64_t e = (l + 1) * CS_LINE < r->off + r->len ? (l + 1) * CS_LINE
									 : r->off + r->len;
			m->pieces[k++] = (struct piece){.line = l,
							.rec = (uint32_t)i,
							.start = (uint8_t)(s - l * CS_LINE),
							.len = (uint8_t)(e - s)};
		}
	}
	qsort(m->pieces, m->npieces, sizeof(*m->pieces), piece_cmp);
	for (uint64_t i = 0; i < m->npieces; i++)
		if (i == 0 || m->pieces[i].line != m->pieces[i - 1].line)
			m->nlines++;
	m->lines = malloc((m->nlines ? m->nlines : 1) * sizeof(*m->lines));
	if (!m->lines)
		goto err;
	uint32_t li = 0;
	for (uint64_t i = 0; i < m->npieces; i++) {
		if (i == 0 || m->pieces[i].line != m->pieces[i - 1].line)
			m->lines[li++] =
			    (struct mline){.line = m->pieces[i].line, .first = (uint32_t)i};
		m->lines[li - 1].n++;
	}
	for (uint64_t i = 0; i < log->count; i++)
		m->rec_line[i] = rec_is_store(&log->records[i])
				     ? find_line(m, log->records[i].off / CS_LINE)
				     : NONE;
	*out = m;
	return 0;

err:
	cs_model_delete(&m);
	return ret;
}

void cs_model_delete(struct cs_model **mp)
{
	if (!mp || !*mp)
		return;
	free((*mp)->pieces);
	free((*mp)->lines);
	free((*mp)->rec_line);
	free(*mp);
	*mp = NULL;
}

/* --- the walk: the log record by record, one interval at a time --------- */

/* A line not durable at its newest version in the current interval. */
struct lunit {
	uint32_t li;   /* index in m->lines */
	uint32_t lo;   /* durable floor: versions lo .. hi are possible */
	uint32_t hi;   /* newest version written before the interval closes */
	uint32_t next; /* the floor after the closing point (lo if it does not cover the line) */
};

/* A record with pieces in lunits, and the records it needs (write granularity). */
struct op {
	struct cs_op pub;
	uint32_t pred_first, npred; /* indices into it->preds: ops that must be present first */
	bool fstar;		    /* needed by the closing point's floor (see build_ops) */
};

struct walk {
	uint64_t rec;	   /* the next record to process */
	uint32_t *cnt;	   /* per line: pieces from the records processed */
	uint32_t *floor;   /* per line: the durable version */
	uint64_t *pending; /* bitmap over lines: floor < cnt */
	int64_t last_point;
	uint64_t interval; /* the next interval's index */
	bool done;
};

struct cs_iter {
	const struct cs_model *m;
	struct cs_opts opts;
	struct walk w;
	uint64_t *count; /* per interval: distinct states (write granularity: capped) */
	uint64_t *alloc; /* per interval: states to produce */
	struct cs_summary sum;

	/* the current interval */
	bool in_interval, has_next, exhaustive, started;
	struct cs_state st;
	struct lunit *lu;
	uint32_t nlu, nlf;    /* lines; the first nlf of order_l are those the point covers */
	uint32_t *order_l;    /* lunit indices, covered lines first */
	uint32_t *lu_of_line; /* per line: lunit index, valid where lu_stamp == interval + 1 */
	uint64_t *lu_stamp;
	struct op *ops;
	uint32_t nops, nof; /* the first nof of order_w are the fstar ops */
	uint32_t *order_w;
	uint32_t *preds;
	uint32_t *op_of_rec; /* per record: op index, valid where op_stamp == interval + 1 */
	uint64_t *op_stamp;
	uint32_t *val;	     /* the odometer: lunit versions or op presence */
	uint32_t *ver;	     /* per lunit: the version in this state */
	uint32_t *present;   /* sample()'s ops at line granularity */
	uint64_t next_index; /* of the next state produced */
	uint64_t produced, attempts, rng;
	uint64_t *seen; /* sampled intervals: hashes of states produced */
	uint64_t seen_cap;
	uint8_t *buf; /* cs_state_lines */
};

static void bit_put(uint64_t *b, uint64_t i, bool on)
{
	if (on)
		b[i / 64] |= 1ULL << (i % 64);
	else
		b[i / 64] &= ~(1ULL << (i % 64));
}

static int walk_init(const struct cs_model *m, struct walk *w)
{
	memset(w, 0, sizeof(*w));
	size_t n = m->nlines ? m->nlines : 1;
	w->cnt = calloc(n, sizeof(*w->cnt));
	w->floor = calloc(n, sizeof(*w->floor));
	w->pending = calloc((n + 63) / 64, sizeof(*w->pending));
	w->last_point = -1;
	return w->cnt && w->floor && w->pending ? 0 : -ENOMEM;
}

static void walk_fini(struct walk *w)
{
	free(w->cnt);
	free(w->floor);
	free(w->pending);
}

/*
 * walk_advance -- apply stores up to the next durability point (its own
 * store too, for a discard) or the end of the log, and describe the
 * interval that closes there in it->st. Returns false when the walk is done.
 */
static bool walk_advance(struct cs_iter *it)
{
	const struct cs_model *m = it->m;
	struct walk *w = &it->w;
	if (w->done)
		return false;
	const struct wlog_view *log = m->log;
	for (; w->rec < log->count; w->rec++) {
		const struct wlog_record *r = &log->records[w->rec];
		if (rec_is_store(r)) {
			uint64_t first, n;
			rec_lines(r, &first, &n);
			for (uint32_t li = m->rec_line[w->rec]; li < m->rec_line[w->rec] + n;
			     li++) {
				w->cnt[li]++;
				bit_put(w->pending, li, true);
			}
		}
		if (rec_is_point(r))
			break;
	}
	memset(&it->st, 0, sizeof(it->st));
	it->st.interval = w->interval++;
	it->st.after_record = w->last_point;
	if (w->rec < log->count) {
		it->st.before_record = (int64_t)w->rec;
		it->st.acked = w->rec;
		it->has_next = true;
	} else {
		it->st.before_record = -1;
		it->st.acked = log->count;
		it->has_next = false;
		w->done = true;
	}
	return true;
}

/* point_floor -- the floor of line @li after durability point @rec (>= @lo) */
static uint32_t point_floor(const struct cs_model *m, uint64_t rec, uint32_t li, uint32_t lo,
			    uint32_t cnt)
{
	const struct wlog_record *r = &m->log->records[rec];
	uint64_t a = m->lines[li].line * CS_LINE;
	if (r->len == 0 || a >= r->off + r->len || a + CS_LINE <= r->off)
		return lo;
	/* a durable discard: its own zeros, the newest piece of the line, are durable */
	uint32_t f = r->type == WLOG_FSYNC ? pieces_before(m, li, r->mark) : cnt;
	return f > lo ? f : lo;
}

/*
 * build_lines -- the lunits of the current interval: every pending line,
 * with the floor the closing point gives it; order_l lists the lines the
 * point raises (the only ones that tell this interval's states from the
 * next interval's) first.
 */
static int build_lines(struct cs_iter *it)
{
	const struct cs_model *m = it->m;
	struct walk *w = &it->w;
	it->nlu = it->nlf = 0;
	for (uint64_t word = 0; word < (m->nlines + 63ULL) / 64; word++) {
		for (uint64_t bits = w->pending[word]; bits; bits &= bits - 1) {
			uint32_t li = (uint32_t)(word * 64 + (uint64_t)__builtin_ctzll(bits));
			struct lunit u = {.li = li, .lo = w->floor[li], .hi = w->cnt[li]};
			u.next = it->has_next ? point_floor(m, it->w.rec, li, u.lo, u.hi) : u.lo;
			it->lu_stamp[li] = it->st.interval + 1;
			it->lu_of_line[li] = it->nlu;
			it->lu[it->nlu++] = u;
		}
	}
	uint32_t k = 0;
	for (uint32_t i = 0; i < it->nlu; i++)
		if (it->lu[i].next > it->lu[i].lo)
			it->order_l[k++] = i;
	it->nlf = k;
	for (uint32_t i = 0; i < it->nlu; i++)
		if (it->lu[i].next == it->lu[i].lo)
			it->order_l[k++] = i;
	return 0;
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* op_at -- the op of the piece at position @q of lunit @u */
static uint32_t op_at(const struct cs_iter *it, const struct lunit *u, uint32_t q)
{
	uint32_t rec = it->m->pieces[it->m->lines[u->li].first + q].rec;
	return it->op_of_rec[rec];
}

/*
 * build_ops -- the records with pending pieces, in record order, and for
 * each the records it needs: in a line, a piece reaches media only with
 * every earlier piece of that line (versions are cumulative), so an op is
 * present (all its pending lines reached) only if the op of the previous
 * pending piece in each of its lines is. "fstar": the ops whose pieces the
 * closing point makes durable, and everything they need; a state with all
 * of them present is one the next interval leaves too. order_w lists them
 * first, each block in record order, so an op always comes after the ops
 * it needs.
 */
static int build_ops(struct cs_iter *it)
{
	const struct cs_model *m = it->m;
	uint64_t stamp = it->st.interval + 1;
	uint32_t n = 0;
	uint32_t *recs = it->order_w; /* scratch: the records, then the order */
	for (uint32_t i = 0; i < it->nlu; i++) {
		const struct lunit *u = &it->lu[i];
		for (uint32_t q = u->lo; q < u->hi; q++) {
			uint32_t rec = m->pieces[m->lines[u->li].first + q].rec;
			if (it->op_stamp[rec] != stamp) {
				it->op_stamp[rec] = stamp;
				recs[n++] = rec;
			}
		}
	}
	qsort(recs, n, sizeof(*recs), u32_cmp);
	for (uint32_t i = 0; i < n; i++) {
		it->op_of_rec[recs[i]] = i;
		it->ops[i] = (struct op){.pub = {.record = recs[i]}};
	}
	it->nops = n;
	/* pieces per op, and how many ops each op needs (one per line at most) */
	for (uint32_t i = 0; i < it->nlu; i++) {
		const struct lunit *u = &it->lu[i];
		for (uint32_t q = u->lo; q < u->hi; q++) {
			struct op *o = &it->ops[op_at(it, u, q)];
			o->pub.lines++;
			if (q > u->lo)
				o->npred++;
		}
	}
	uint32_t acc = 0;
	for (uint32_t i = 0; i < n; i++) {
		it->ops[i].pred_first = acc;
		acc += it->ops[i].npred;
		it->ops[i].npred = 0;
	}
	for (uint32_t i = 0; i < it->nlu; i++) {
		const struct lunit *u = &it->lu[i];
		for (uint32_t q = u->lo + 1; q < u->hi; q++) {
			struct op *o = &it->ops[op_at(it, u, q)];
			it->preds[o->pred_first + o->npred++] = op_at(it, u, q - 1);
		}
		for (uint32_t q = u->lo; q < u->next; q++)
			it->ops[op_at(it, u, q)].fstar = true;
	}
	/* close fstar under "needs": the needed ops have smaller records */
	for (uint32_t i = n; i-- > 0;)
		if (it->ops[i].fstar)
			for (uint32_t p = 0; p < it->ops[i].npred; p++)
				it->ops[it->preds[it->ops[i].pred_first + p]].fstar = true;
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (it->ops[i].fstar)
			it->order_w[k++] = i;
	it->nof = k;
	for (uint32_t i = 0; i < n; i++)
		if (!it->ops[i].fstar)
			it->order_w[k++] = i;
	return 0;
}

/* walk_apply -- the closing point of the current interval takes effect */
static void walk_apply(struct cs_iter *it)
{
	struct walk *w = &it->w;
	for (uint32_t i = 0; i < it->nlu; i++) {
		const struct lunit *u = &it->lu[i];
		w->floor[u->li] = u->next;
		if (u->next == u->hi)
			bit_put(w->pending, u->li, false);
	}
	if (it->has_next) {
		w->last_point = (int64_t)w->rec;
		w->rec++;
	}
}

/* --- states of one interval: an odometer over units ---------------------- */

/*
 * Units are lunits (line granularity: a version lo .. hi each) or ops
 * (write granularity: absent 0 or present 1, present only when the ops it
 * needs are). The odometer visits every valid assignment once, the units
 * the closing point covers first, and skips each assignment of those that
 * would make a state the next interval leaves too.
 */

static bool gran_line(const struct cs_iter *it)
{
	return it->m->gran == CS_GRAN_LINE;
}

static uint32_t nunits(const struct cs_iter *it)
{
	return gran_line(it) ? it->nlu : it->nops;
}

static uint32_t nfirst(const struct cs_iter *it)
{
	return gran_line(it) ? it->nlf : it->nof;
}

/* unit -- the lunit or op index at odometer position @pos */
static uint32_t unit(const struct cs_iter *it, uint32_t pos)
{
	return gran_line(it) ? it->order_l[pos] : it->order_w[pos];
}

static uint32_t unit_min(const struct cs_iter *it, uint32_t u)
{
	return gran_line(it) ? it->lu[u].lo : 0;
}

/* op_can_be_present -- every op that op @u needs is present in @present */
static bool op_can_be_present(const struct cs_iter *it, const uint32_t *present, uint32_t u)
{
	const struct op *o = &it->ops[u];
	for (uint32_t p = 0; p < o->npred; p++)
		if (!present[it->preds[o->pred_first + p]])
			return false;
	return true;
}

static bool unit_can_inc(const struct cs_iter *it, uint32_t u)
{
	if (gran_line(it))
		return it->val[u] < it->lu[u].hi;
	return it->val[u] == 0 && op_can_be_present(it, it->val, u);
}

/* first_block_dup -- the covered units are all at or above the next interval's floor */
static bool first_block_dup(const struct cs_iter *it)
{
	if (!it->has_next)
		return false;
	for (uint32_t pos = 0; pos < nfirst(it); pos++) {
		uint32_t u = unit(it, pos);
		if (gran_line(it) ? it->val[u] < it->lu[u].next : it->val[u] == 0)
			return false;
	}
	return true;
}

/* odo_reset -- the floor state: every unit at its minimum; false if it is not a new state */
static bool odo_reset(struct cs_iter *it)
{
	for (uint32_t pos = 0; pos < nunits(it); pos++)
		it->val[unit(it, pos)] = unit_min(it, unit(it, pos));
	return !first_block_dup(it);
}

/* odo_next -- the next valid, new assignment; false after the last */
static bool odo_next(struct cs_iter *it)
{
	int64_t pos = (int64_t)nunits(it) - 1;
	for (;;) {
		while (pos >= 0 && !unit_can_inc(it, unit(it, (uint32_t)pos)))
			pos--;
		if (pos < 0)
			return false;
		it->val[unit(it, (uint32_t)pos)]++;
		for (uint32_t j = (uint32_t)pos + 1; j < nunits(it); j++)
			it->val[unit(it, j)] = unit_min(it, unit(it, j));
		if ((uint32_t)pos < nfirst(it) && first_block_dup(it)) {
			pos = (int64_t)nfirst(it) -
			      1; /* every completion repeats the next interval */
			continue;
		}
		return true;
	}
}

/* derive -- line versions (it->ver) and op counts of the assignment in it->val */
static void derive(struct cs_iter *it)
{
	for (uint32_t i = 0; i < it->nops; i++)
		it->ops[i].pub.lines_present = 0;
	for (uint32_t i = 0; i < it->nlu; i++) {
		const struct lunit *u = &it->lu[i];
		uint32_t v = u->lo;
		if (gran_line(it))
			v = it->val[i];
		else
			while (v < u->hi && it->val[op_at(it, u, v)])
				v++;
		it->ver[i] = v;
		for (uint32_t q = u->lo; q < v; q++)
			it->ops[op_at(it, u, q)].pub.lines_present++;
	}
}

/* --- counting and sampling ----------------------------------------------- */

typedef unsigned __int128 u128;
#define SAT ((u128)1 << 100)

static u128 mul_sat(u128 a, u128 b)
{
	if (a == 0 || b == 0)
		return 0;
	if (a >= SAT || b >= SAT || a > SAT / b)
		return SAT;
	return a * b;
}

/*
 * count_lines -- distinct states at line granularity: every combination,
 * less those with each covered line at or above its next floor (counted
 * by the next interval). Exact below 2^64; CS_COUNT_MANY above (the
 * difference of two products of at most 2^32-sized factors is at least
 * 2^68 when the larger one passes 2^100).
 */
static uint64_t count_lines(const struct cs_iter *it)
{
	u128 all_f = 1, dup_f = 1, rest = 1;
	for (uint32_t i = 0; i < it->nlu; i++) {
		const struct lunit *u = &it->lu[i];
		if (u->next > u->lo) {
			all_f = mul_sat(all_f, u->hi - u->lo + 1);
			dup_f = mul_sat(dup_f, u->hi - u->next + 1);
		} else {
			rest = mul_sat(rest, u->hi - u->lo + 1);
		}
	}
	if (it->has_next && it->nlf == 0)
		return 0;
	u128 n = it->has_next ? (all_f >= SAT ? SAT : mul_sat(all_f - dup_f, rest))
			      : mul_sat(all_f, rest);
	return n >= ((u128)1 << 64) ? CS_COUNT_MANY : (uint64_t)n;
}

/* count_ops -- distinct states at write granularity, counted up to @cap */
static uint64_t count_ops(struct cs_iter *it, uint64_t cap)
{
	if (it->has_next && it->nof == 0)
		return 0;
	uint64_t n = odo_reset(it) ? 1 : 0;
	while (n < cap && odo_next(it))
		n++;
	return n;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* state_hash -- of the line versions in it->ver (never 0) */
static uint64_t state_hash(const struct cs_iter *it)
{
	uint64_t h = 0x243f6a8885a308d3ULL;
	for (uint32_t i = 0; i < it->nlu; i++) {
		uint64_t s = h ^ it->ver[i];
		h = splitmix64(&s);
	}
	return h ? h : 1;
}

/* seen_add -- false if @h was already produced in this interval */
static bool seen_add(struct cs_iter *it, uint64_t h)
{
	uint64_t mask = it->seen_cap - 1;
	for (uint64_t i = h & mask;; i = (i + 1) & mask) {
		if (it->seen[i] == h)
			return false;
		if (it->seen[i] == 0) {
			it->seen[i] = h;
			return true;
		}
	}
}

/* ver_dup -- the state in it->ver is one the next interval leaves too */
static bool ver_dup(const struct cs_iter *it)
{
	if (!it->has_next)
		return false;
	for (uint32_t i = 0; i < it->nlf; i++) {
		const struct lunit *u = &it->lu[it->order_l[i]];
		if (it->ver[it->order_l[i]] < u->next)
			return false;
	}
	return true;
}

/*
 * sample -- draw a state into it->val. Write granularity, and every other
 * draw at line granularity: each op, in an order where the ops it needs
 * come first, is present with probability 1/2 when it may be (whole writes
 * present or absent: states a per-line draw almost never makes for a write
 * of many lines). The other line-granularity draws: each line's version
 * uniformly from lo .. hi.
 */
static void sample(struct cs_iter *it)
{
	bool per_line = gran_line(it) && (it->attempts & 1);
	if (per_line) {
		for (uint32_t i = 0; i < it->nlu; i++)
			it->val[i] = it->lu[i].lo + (uint32_t)(splitmix64(&it->rng) %
							       (it->lu[i].hi - it->lu[i].lo + 1));
		return;
	}
	/* at line granularity it->val holds versions: draw the ops into it->present */
	uint32_t *present = gran_line(it) ? it->present : it->val;
	for (uint32_t pos = 0; pos < it->nops; pos++) {
		uint32_t u = it->order_w[pos];
		present[u] = op_can_be_present(it, present, u) && (splitmix64(&it->rng) & 1);
	}
	if (gran_line(it)) {
		for (uint32_t i = 0; i < it->nlu; i++) {
			const struct lunit *u = &it->lu[i];
			uint32_t v = u->lo;
			while (v < u->hi && present[op_at(it, u, v)])
				v++;
			it->val[i] = v;
		}
	}
}

/* --- the iterator -------------------------------------------------------- */

/* interval_begin -- build the units of the interval just reached */
static void interval_begin(struct cs_iter *it)
{
	build_lines(it);
	build_ops(it);
	it->st.nops = it->nops;
}

/* interval_begin_count -- the units pass 1 needs to count the interval's states */
static void interval_begin_count(struct cs_iter *it)
{
	build_lines(it);
	if (!gran_line(it))
		build_ops(it);
}

/* plan -- count every interval (pass 1) and share out max_states */
static int plan(struct cs_iter *it)
{
	const struct cs_model *m = it->m;
	uint64_t n = m->nintervals, max = it->opts.max_states;
	bool capped = false;
	while (walk_advance(it)) {
		interval_begin_count(it);
		uint64_t c = gran_line(it) ? count_lines(it) : count_ops(it, max + 1);
		if (!gran_line(it) && c > max)
			capped = true;
		it->count[it->st.interval] = c;
		walk_apply(it);
	}
	uint64_t total = 0;
	for (uint64_t i = 0; i < n; i++)
		total = __builtin_add_overflow(total, it->count[i], &total) ? CS_COUNT_MANY : total;
	it->sum.intervals = n;
	it->sum.total = capped ? CS_COUNT_MANY : total;
	if (total <= max && !capped) {
		memcpy(it->alloc, it->count, n * sizeof(*it->alloc));
		it->sum.planned = total;
		it->sum.exhaustive = true;
		return 0;
	}
	/* water-filling: intervals in ascending count get all they have while it fits a fair share
	 */
	uint64_t *idx = malloc(n * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	uint64_t r = 0;
	for (uint64_t i = 0; i < n; i++)
		if (it->count[i])
			idx[r++] = i;
	for (uint64_t i = 1; i < r; i++) /* insertion sort by count, stable */
		for (uint64_t j = i; j > 0 && it->count[idx[j - 1]] > it->count[idx[j]]; j--) {
			uint64_t t = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
	uint64_t budget = max, k = 0;
	for (; k < r && it->count[idx[k]] <= budget / (r - k); k++) {
		it->alloc[idx[k]] = it->count[idx[k]];
		budget -= it->count[idx[k]];
	}
	uint64_t left = r - k;
	if (left) {
		/* the remainder, one each, goes to intervals drawn from the seed */
		uint64_t s = it->opts.seed ^ 0x5851f42d4c957f2dULL;
		for (uint64_t i = left; i > 1; i--) {
			uint64_t j = splitmix64(&s) % i, t = idx[k + i - 1];
			idx[k + i - 1] = idx[k + j];
			idx[k + j] = t;
		}
		for (uint64_t i = 0; i < left; i++) {
			it->alloc[idx[k + i]] = budget / left + (i < budget % left);
			it->sum.intervals_sampled++;
		}
	}
	free(idx);
	for (uint64_t i = 0; i < n; i++)
		it->sum.planned += it->alloc[i];
	return 0;
}

int cs_iter_new(const struct cs_model *m, const struct cs_opts *opts, struct cs_iter **out)
{
	if (!m || !opts || !out || opts->max_states == 0)
		return -EINVAL;
	struct cs_iter *it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->m = m;
	it->opts = *opts;
	size_t nl = m->nlines ? m->nlines : 1;
	size_t nr = m->log->count ? m->log->count : 1;
	size_t np = m->npieces ? m->npieces : 1;
	it->count = calloc(m->nintervals, sizeof(*it->count));
	it->alloc = calloc(m->nintervals, sizeof(*it->alloc));
	it->lu = malloc(nl * sizeof(*it->lu));
	it->order_l = malloc(nl * sizeof(*it->order_l));
	it->lu_of_line = malloc(nl * sizeof(*it->lu_of_line));
	it->lu_stamp = calloc(nl, sizeof(*it->lu_stamp));
	it->ops = malloc(nr * sizeof(*it->ops));
	it->order_w = malloc(nr * sizeof(*it->order_w));
	it->present = malloc(nr * sizeof(*it->present));
	it->preds = malloc(np * sizeof(*it->preds));
	it->op_of_rec = malloc(nr * sizeof(*it->op_of_rec));
	it->op_stamp = calloc(nr, sizeof(*it->op_stamp));
	it->val = malloc((nl > nr ? nl : nr) * sizeof(*it->val));
	it->ver = malloc(nl * sizeof(*it->ver));
	int ret = -ENOMEM;
	if (!it->count || !it->alloc || !it->lu || !it->order_l || !it->lu_of_line ||
	    !it->lu_stamp || !it->ops || !it->order_w || !it->preds || !it->op_of_rec ||
	    !it->op_stamp || !it->val || !it->ver || !it->present)
		goto err;
	if ((ret = walk_init(m, &it->w)))
		goto err;
	if ((ret = plan(it)))
		goto err;
	/* pass 2 starts from the beginning; the stamps of pass 1 must not match */
	walk_fini(&it->w);
	if ((ret = walk_init(m, &it->w)))
		goto err;
	memset(it->lu_stamp, 0, nl * sizeof(*it->lu_stamp));
	memset(it->op_stamp, 0, nr * sizeof(*it->op_stamp));
	*out = it;
	return 0;

err:
	cs_iter_delete(&it);
	return ret;
}

void cs_iter_delete(struct cs_iter **itp)
{
	if (!itp || !*itp)
		return;
	struct cs_iter *it = *itp;
	walk_fini(&it->w);
	free(it->count);
	free(it->alloc);
	free(it->lu);
	free(it->order_l);
	free(it->lu_of_line);
	free(it->lu_stamp);
	free(it->ops);
	free(it->order_w);
	free(it->preds);
	free(it->op_of_rec);
	free(it->op_stamp);
	free(it->val);
	free(it->ver);
	free(it->present);
	free(it->seen);
	free(it->buf);
	free(it);
	*itp = NULL;
}

void cs_iter_summary(const struct cs_iter *it, struct cs_summary *out)
{
	*out = it->sum;
}

/* interval_next -- the next state of the current interval into it->ver; false when done */
static int interval_next(struct cs_iter *it)
{
	uint64_t want = it->alloc[it->st.interval];
	if (it->produced >= want)
		return 0;
	if (it->exhaustive) {
		bool ok = it->started ? odo_next(it)
				      : (it->started = true, odo_reset(it) || odo_next(it));
		if (!ok)
			return 0;
		derive(it);
		return 1;
	}
	if (!it->started) {
		it->started = true;
		uint64_t cap = 4;
		while (cap < 2 * want + 2)
			cap *= 2;
		free(it->seen);
		it->seen = calloc(cap, sizeof(*it->seen));
		if (!it->seen)
			return -ENOMEM;
		it->seen_cap = cap;
		it->rng = it->opts.seed ^ (0x9e3779b97f4a7c15ULL * (it->st.interval + 1));
		it->attempts = 0;
		odo_reset(it); /* the floor state: never a repeat in a sampled interval */
		derive(it);
		seen_add(it, state_hash(it));
		return 1;
	}
	uint64_t max_attempts = 64 * want + 1024;
	while (it->attempts < max_attempts) {
		it->attempts++;
		sample(it);
		derive(it);
		if (!ver_dup(it) && seen_add(it, state_hash(it)))
			return 1;
	}
	return 0;
}

int cs_iter_next(struct cs_iter *it, const struct cs_state **out)
{
	for (;;) {
		if (it->in_interval) {
			int r = interval_next(it);
			if (r < 0)
				return r;
			if (r == 1) {
				it->produced++;
				it->st.index = it->next_index++;
				*out = &it->st;
				return 1;
			}
			walk_apply(it);
			it->in_interval = false;
		}
		if (!walk_advance(it))
			return 0;
		interval_begin(it);
		it->in_interval = true;
		it->exhaustive = it->alloc[it->st.interval] == it->count[it->st.interval];
		it->st.sampled = !it->exhaustive;
		it->started = false;
		it->produced = 0;
	}
}

/* --- what the current state holds ---------------------------------------- */

const struct cs_op *cs_state_op(const struct cs_iter *it, uint64_t i)
{
	return i < it->nops ? &it->ops[i].pub : NULL;
}

bool cs_state_record_pending(const struct cs_iter *it, uint64_t record)
{
	return record < it->m->log->count && it->op_stamp[record] == it->st.interval + 1;
}

int cs_state_op_ranges(const struct cs_iter *it, uint64_t i,
		       int (*fn)(uint64_t off, uint64_t len, bool present, void *arg), void *arg)
{
	if (i >= it->nops)
		return -EINVAL;
	const struct cs_model *m = it->m;
	uint64_t rec = it->ops[i].pub.record, stamp = it->st.interval + 1;
	uint64_t first, n;
	rec_lines(&m->log->records[rec], &first, &n);
	uint64_t run_off = 0, run_len = 0;
	bool run_present = false;
	for (uint32_t li = m->rec_line[rec]; li < m->rec_line[rec] + n; li++) {
		if (it->lu_stamp[li] != stamp)
			continue; /* durable before the interval began */
		uint32_t ui = it->lu_of_line[li];
		const struct lunit *u = &it->lu[ui];
		uint32_t q = pieces_before(m, li, rec);
		if (q < u->lo)
			continue;
		const struct piece *p = &m->pieces[m->lines[li].first + q];
		uint64_t off = p->line * CS_LINE + p->start;
		bool present = q < it->ver[ui];
		if (run_len && present == run_present && run_off + run_len == off) {
			run_len += p->len;
			continue;
		}
		int ret = run_len ? fn(run_off, run_len, run_present, arg) : 0;
		if (ret)
			return ret;
		run_off = off;
		run_len = p->len;
		run_present = present;
	}
	return run_len ? fn(run_off, run_len, run_present, arg) : 0;
}

uint32_t cs_state_line_version(const struct cs_iter *it, uint64_t line)
{
	uint32_t li = find_line(it->m, line);
	if (li == NONE)
		return 0;
	if (it->lu_stamp[li] == it->st.interval + 1)
		return it->ver[it->lu_of_line[li]];
	return it->w.cnt[li];
}

/* line_content -- line @li at version @v into @out (CS_LINE bytes) */
static void line_content(const struct cs_iter *it, uint32_t li, uint32_t v, uint8_t *out)
{
	const struct cs_model *m = it->m;
	uint64_t a = m->lines[li].line * CS_LINE;
	uint64_t len = m->log->vol.size - a < CS_LINE ? m->log->vol.size - a : CS_LINE;
	if (it->opts.base)
		memcpy(out, it->opts.base + a, len);
	else
		memset(out, 0, len);
	for (uint32_t q = 0; q < v; q++) {
		const struct piece *p = &m->pieces[m->lines[li].first + q];
		const struct wlog_record *r = &m->log->records[p->rec];
		if (r->type == WLOG_WRITE)
			memcpy(out + p->start, r->data + (a + p->start - r->off), p->len);
		else
			memset(out + p->start, 0, p->len);
	}
}

int cs_state_lines(const struct cs_iter *it,
		   int (*fn)(uint64_t off, const uint8_t *data, uint64_t len, void *arg), void *arg)
{
	struct cs_iter *w = (struct cs_iter *)it; /* the buffer is the iterator's scratch */
	const struct cs_model *m = it->m;
	if (!w->buf && !(w->buf = malloc(RUN_MAX)))
		return -ENOMEM;
	uint64_t stamp = it->st.interval + 1, run_off = 0, run_len = 0;
	for (uint32_t li = 0; li < m->nlines; li++) {
		uint32_t cnt = it->w.cnt[li];
		if (cnt == 0)
			continue;
		uint32_t v = it->lu_stamp[li] == stamp ? it->ver[it->lu_of_line[li]] : cnt;
		uint64_t a = m->lines[li].line * CS_LINE;
		uint64_t len = m->log->vol.size - a < CS_LINE ? m->log->vol.size - a : CS_LINE;
		if (run_len && (run_off + run_len != a || run_len + CS_LINE > RUN_MAX)) {
			int ret = fn(run_off, w->buf, run_len, arg);
			if (ret)
				return ret;
			run_len = 0;
		}
		if (!run_len)
			run_off = a;
		line_content(it, li, v, w->buf + run_len);
		run_len += len;
	}
	return run_len ? fn(run_off, w->buf, run_len, arg) : 0;
}
