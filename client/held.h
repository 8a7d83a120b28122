/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * held.h -- writes acknowledged but not yet covered by an fsync (the verifier's memory)
 *
 * A plain WRITE is acknowledged before it is durable. If the server loses
 * it -- a restart, a power cut, a failover to a replica that never had it --
 * a later FSYNC run by the new incarnation would succeed and lie. So every
 * reply carries the server's verifier (docs/cluster.md, "The verifier"): a
 * 64-bit value that changes whenever acknowledged-but-unflushed writes may
 * have been lost. A resuming connection remembers, per volume, each write
 * acknowledged since the last fsync that covered it, with the verifier of
 * its reply and, while a byte budget allows, a copy of its data:
 *
 *   volume bytes  0        8K        16K       24K       32K
 *                 [--A--)  [----B----)         [-C-)
 *   A: verifier V1, data held  B: V1, data held  C: V1, no data (over budget)
 *
 * After a reconnect to a server whose verifier is V2, A and B are sent again
 * (held_stale), and an fsync covering C fails with -EIO instead of
 * succeeding: C may be gone and cannot be restored (as Linux reports a lost
 * writeback). An fsync answered with the record's own verifier makes it
 * durable: the record is dropped (held_settle).
 *
 * The records never overlap: a newer write over an older record trims it
 * (the bytes there are the newer write's), so resending an old record never
 * undoes a newer write. "Newer" is the submission order of the writes on the
 * connection (@seq), which is the order the server applies them in.
 *
 * Bounds: the data copies of all volumes of a connection share one budget
 * (rdax_conn_opts_set_write_hold); past it a record keeps its range and
 * verifier only. At most HELD_MAX_RECORDS records per volume; past that the
 * volume keeps one "overflow" verifier instead of ranges, and any fsync
 * answered with another verifier fails with -EIO until a whole-volume fsync
 * with the overflow's verifier clears it (conservative, never a lie).
 *
 * Thread safety: none; part of its connection (one thread at a time).
 */
#ifndef RDAX_CLIENT_HELD_H
#define RDAX_CLIENT_HELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Records per volume before it falls back to the overflow verifier. */
#define HELD_MAX_RECORDS 4096

/* A copy of written data, shared by the records cut from one write and the resends of them. */
struct held_budget;
struct held_buf {
	unsigned refs;
	size_t len;
	struct held_budget *budget; /* len is counted in it while the copy lives */
	uint8_t data[];
};

struct held_rec {
	uint64_t off, len;
	uint64_t seq;	      /* the write's submission number on the connection */
	uint64_t verifier;    /* of the reply that acknowledged it */
	struct held_buf *buf; /* NULL: no copy (over budget) */
	const uint8_t *data;  /* inside buf: the byte at off */
};

/* The byte budget of data copies, shared by the volumes of one connection. */
struct held_budget {
	uint64_t limit; /* 0: keep no copies */
	uint64_t used;
};

struct held {
	struct held_rec *recs; /* sorted by off, not overlapping */
	size_t n, cap;
	bool overflow;		    /* too many records: ... */
	bool overflow_mixed;	    /* ... writes acknowledged under several verifiers, or ... */
	uint64_t overflow_verifier; /* ... under this one, may be lost */
};

/* What an fsync reply found among the records it covers (held_check). */
struct held_verdict {
	uint64_t lost_bytes; /* acknowledged under another verifier, no copy: lost for good */
	uint64_t lost_off;   /* the first such byte */
	uint64_t lost_verifier;
	uint64_t resend_bytes; /* acknowledged under another verifier, copy held: send again */
	bool overflow;	       /* the overflow verifier differs: unknown writes may be lost */
};

/* held_init -- an empty set */
void held_init(struct held *h);

/* held_clear -- drop every record and release their copies from @b */
void held_clear(struct held *h, struct held_budget *b);

/*
 * held_note -- a write of [off, off + len) submitted as number @seq was
 * acknowledged under @verifier: record it over what older records it
 * covers, with a copy of @data if @b's budget has room (@data NULL: none).
 * Returns 0 or -ENOMEM (then the volume falls back to overflow: still no lie).
 */
int held_note(struct held *h, struct held_budget *b, uint64_t off, uint64_t len, const void *data,
	      uint64_t seq, uint64_t verifier);

/*
 * held_check -- an fsync of [off, off + len) (len 0: to the end), submitted
 * as number @seq, was answered with @verifier: what among the records of
 * writes submitted before it does not match.
 */
void held_check(const struct held *h, uint64_t off, uint64_t len, uint64_t seq, uint64_t verifier,
		struct held_verdict *v);

/*
 * held_settle -- after held_check of the same fsync: drop the records it
 * made durable (matching verifier) and those reported lost (no copy; an
 * error is reported once, as Linux's writeback errors are), and the
 * overflow if the fsync covered the whole volume (@off 0, @len 0). Records
 * with a copy and another verifier stay, to be sent again.
 */
void held_settle(struct held *h, struct held_budget *b, uint64_t off, uint64_t len, uint64_t seq,
		 uint64_t verifier);

/*
 * held_stale -- call @fn for every record with a copy whose verifier is not
 * @verifier, in volume order (the ones a reconnect sends again). @fn may
 * keep a reference to rec->buf (held_buf_get).
 */
void held_stale(const struct held *h, uint64_t verifier,
		void (*fn)(void *arg, const struct held_rec *rec), void *arg);

/*
 * held_resent -- a resend of the bytes of @buf in [off, off + len) was
 * acknowledged under @verifier: the records still holding those bytes take it
 */
void held_resent(struct held *h, const struct held_buf *buf, uint64_t off, uint64_t len,
		 uint64_t verifier);

/*
 * held_forget -- [off, off + len) was overwritten by write number @seq,
 * made durable at once (RDAX_WRITE_FSYNC): no older record there matters
 */
void held_forget(struct held *h, uint64_t off, uint64_t len, uint64_t seq);

/* held_bytes -- bytes of copies the set holds */
uint64_t held_bytes(const struct held *h);

/* held_buf_get / held_buf_put -- references to a copy; put frees it at the last */
struct held_buf *held_buf_get(struct held_buf *buf);
void held_buf_put(struct held_buf *buf);

#endif
