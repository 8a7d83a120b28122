/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * crash_states.h -- every state a power cut could leave, from a write log
 *
 * Input: a checked write log (write_log.h). Output: crash states, one at a
 * time, each the content of the volume after a power cut at some moment of
 * the logged run, with what it holds of each write.
 *
 * The model (docs/persistence-testing.md gives it in full):
 *
 *  - The unit of persistence is the 64-byte line (CS_LINE): a line reaches
 *    media whole, holding whatever the cache held when it was written back.
 *    A store is one record's part of one line (a "piece"); discards are
 *    stores of zeros. The pieces of a line are ordered by record: version
 *    v of a line is its content at the start of the log (zeros, or the
 *    base image) with its first v pieces applied, so a line's versions are
 *    cumulative -- a version holding a later store holds every earlier
 *    store of that line too (a later store cannot reach media without the
 *    line, and the line holds the earlier one).
 *  - Durability points: an FSYNC record, and a DISCARD marked durable (its
 *    zeros were written back and fenced before its acknowledgement). An
 *    fsync with mark c makes every line its range touches durable at least
 *    at the version holding all of that line's pieces from records < c; a
 *    durable discard, at the version holding its own zeros. Lines outside
 *    the range gain nothing.
 *  - A crash interval runs from one durability point (or the start) to the
 *    completion of the next (or the end of the log). A power cut in it
 *    leaves, in each line, any version from the line's durable floor to
 *    its newest version written before the interval's closing point
 *    (including the closing point's own zeros, for a discard in flight).
 *    Lines choose independently: cache lines are written back in any order.
 *    A cut earlier in the interval leaves a subset of these states, so the
 *    states at the interval's end are all there are.
 *  - Granularity CS_GRAN_LINE: every combination of line versions.
 *    CS_GRAN_WRITE: each write not yet durable reached media whole or not
 *    at all (all its pending lines, or none) -- fewer states, for a coarse
 *    first check; every such state is also a line-granularity state.
 *  - States are distinct across intervals: a state that a later interval
 *    can also leave is produced there only (it is the same image).
 *
 * Enumeration: the distinct states of every interval are counted. When
 * their total is at most opts.max_states all of them are produced
 * (exhaustive); otherwise max_states of them, shared out so that every
 * interval whose count fits its share is still enumerated whole and the
 * rest are sampled from opts.seed (each sampled interval starts with its
 * floor state, "nothing since the last durability point reached media").
 * The same log, options and seed give the same states in the same order.
 *
 * Not modelled (docs/persistence-testing.md): writes in flight but not yet
 * acknowledged (not in the log), the order of overlapping writes that were
 * in flight at once (the log's order is taken), torn stores inside a line.
 *
 * Thread safety: a model is read-only once built and may be shared by
 * iterators in several threads; an iterator belongs to one thread.
 */
#ifndef RDAX_CRASH_STATES_H
#define RDAX_CRASH_STATES_H

#include <stdbool.h>
#include <stdint.h>

#include "write_log.h"

#define CS_LINE 64ULL

enum cs_granularity {
	CS_GRAN_LINE = 0,
	CS_GRAN_WRITE = 1,
};

/* Counts above this are reported as "at least" (CS_COUNT_MANY). */
#define CS_COUNT_MANY UINT64_MAX

struct cs_model;
struct cs_iter;

/*
 * cs_model_new -- index the stores of @log by line. The model points into
 * @log, which must outlive it.
 * Returns 0; -EINVAL; -E2BIG (more than 2^32 - 1 records or pieces); -ENOMEM.
 */
int cs_model_new(const struct wlog_view *log, enum cs_granularity gran, struct cs_model **out);

/* cs_model_delete -- free; accepts NULL; sets *mp = NULL */
void cs_model_delete(struct cs_model **mp);

struct cs_opts {
	uint64_t max_states; /* > 0 */
	uint64_t seed;
	/* the volume's content when the log began (vol.size bytes); NULL: zeros */
	const uint8_t *base;
};

/*
 * cs_iter_new -- count every interval's states, decide which are produced
 * (see "Enumeration" above) and stand before the first.
 * Context: may take a while for a large log (one pass over it, plus for
 * write granularity a count of up to max_states + 1 states per interval).
 * Returns 0; -EINVAL (NULL, max_states 0); -ENOMEM.
 */
int cs_iter_new(const struct cs_model *m, const struct cs_opts *opts, struct cs_iter **out);

/* cs_iter_delete -- free; accepts NULL; sets *itp = NULL */
void cs_iter_delete(struct cs_iter **itp);

/* What cs_iter_new decided. */
struct cs_summary {
	uint64_t intervals;	    /* crash intervals in the log */
	uint64_t total;		    /* distinct states in all (CS_COUNT_MANY: more than counted) */
	uint64_t planned;	    /* states that will be produced */
	uint64_t intervals_sampled; /* intervals not produced whole */
	bool exhaustive;	    /* planned == total */
};

void cs_iter_summary(const struct cs_iter *it, struct cs_summary *out);

/* The current state (valid until the next cs_iter_next). */
struct cs_state {
	uint64_t index;	       /* 0, 1, ... in production order */
	uint64_t interval;     /* which crash interval */
	int64_t after_record;  /* the durability point opening it; -1: the log's start */
	int64_t before_record; /* the one closing it; -1: the end of the log */
	uint64_t acked;	       /* records [0, acked) had completed at the cut */
	bool sampled;	       /* its interval is sampled, not enumerated whole */
	uint64_t nops;	       /* records with lines not yet durable in this interval */
};

/*
 * cs_iter_next -- advance to the next state: 1 and *out set; 0 when every
 * planned state was produced (a sampled interval may yield fewer than its
 * share when it has few distinct states left to draw); -ENOMEM.
 */
int cs_iter_next(struct cs_iter *it, const struct cs_state **out);

/* One record that is not yet durable in the current interval. */
struct cs_op {
	uint64_t record;
	uint32_t lines;		/* its lines not durable by the interval's start */
	uint32_t lines_present; /* how many of them reached media in this state */
};

/* cs_state_op -- the @i'th (< nops) such record, in record order */
const struct cs_op *cs_state_op(const struct cs_iter *it, uint64_t i);

/*
 * cs_state_record_pending -- whether @record (< acked) has lines that are
 * not durable in the current interval (else all of it is durable: a store
 * whose every line a durability point covered)
 */
bool cs_state_record_pending(const struct cs_iter *it, uint64_t record);

/*
 * cs_state_op_ranges -- call @fn for the byte ranges of op @i's pending
 * lines, in order, merged into runs of equal @present (reached media in
 * this state or not); clipped to the record's own bytes. Stops at, and
 * returns, the first non-zero return of @fn; else 0.
 */
int cs_state_op_ranges(const struct cs_iter *it, uint64_t i,
		       int (*fn)(uint64_t off, uint64_t len, bool present, void *arg), void *arg);

/*
 * cs_state_line_version -- which version line number @line (byte offset /
 * CS_LINE) has in this state: how many of the stores to it, counted in
 * record order from the log's start, it holds (0: none, its base content)
 */
uint32_t cs_state_line_version(const struct cs_iter *it, uint64_t line);

/*
 * cs_state_lines -- the state's content: @fn gets every line any record
 * before the cut touched, in runs of contiguous lines (at most 1 MiB each,
 * clipped to the volume's size), with their content in this state. Every
 * other byte of the volume is the base's (zeros, or opts.base). Stops at,
 * and returns, the first non-zero return of @fn; -ENOMEM; else 0.
 */
int cs_state_lines(const struct cs_iter *it,
		   int (*fn)(uint64_t off, const uint8_t *data, uint64_t len, void *arg),
		   void *arg);

#endif
