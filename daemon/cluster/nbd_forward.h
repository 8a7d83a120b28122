/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd_forward.h -- an NBD export served by the volume's primary on another node
 *
 * Every node of a cluster exports every volume over NBD (docs/nbd.md,
 * "Clusters"). A node that is not the volume's primary serves the export by
 * forwarding: each request of the NBD connection becomes an operation of a
 * librdax connection to the primary, made with resume on and given the
 * tcp:// addresses of every node holding a copy (cluster_dir.h), so it
 * follows a failover by itself and sends again what was in flight:
 *
 *   NBD client ──NBD──▶ this node: nbd_conn ──fwd_req──▶ nbd_forward
 *                                                          │ librdax, resume on
 *                                                          ▼
 *                                           the primary (whichever it is now)
 *
 *   READ          rdax_submit_read into the request's buffer
 *   WRITE         rdax_submit_write; with FUA, durable (RDAX_WRITE_FSYNC)
 *   FLUSH         rdax_submit_fsync of the whole volume
 *   TRIM, WRITE_ZEROES  conn_submit_discard (durable zeros, client/conn.h)
 *
 * A request completes once the primary answered it, so a FLUSH (or a FUA
 * write) succeeds only when the primary acknowledged the fsync covering it,
 * which it does once every in-sync copy is durable (docs/cluster.md). The
 * writes acknowledged since their last fsync are held by librdax with a
 * copy of their bytes (client/held.h): after a failover, the new primary's
 * verifier differs and they are sent again before anything else; a write
 * lost with no copy held makes the FLUSH over it fail with -EIO, never
 * succeed. The forwarder keeps that promise within bounded memory: it takes
 * new requests only while the bytes of writes in flight plus those held stay
 * under FWD_HOLD_SOFT (so every held write keeps its copy within the
 * connection's FWD_HOLD_BYTES budget) and the held records under librdax's
 * limit, and it sends an fsync of its own once half is used. Should such an
 * fsync of its own fail (writes reported lost), the next FLUSH or FUA write
 * reports the error, as Linux reports a lost write-back once.
 *
 * On the loop. The connection is run from the NBD connection's worker loop,
 * as a replica link is (replica_link.h): the loop watches the descriptors
 * librdax waits on (conn_poll_prepare) and reaps with a zero timeout. What
 * blocks never runs there: the first connect and open (nbd_forward_open, a
 * pool thread in the handshake) and a resume, which runs a round of attempts
 * at a time in the forwarding pool (conn_resume_round) while the loop waits
 * for it, and for the backoff between rounds, on a timer. Meanwhile new
 * requests queue here, and are sent, after what librdax sends again, once the
 * connection is back. A request unanswered for the timeout (a primary that
 * stopped or was cut off) counts as a lost connection too. When the resume
 * bound passes without a primary, every request then fails (-ETIMEDOUT: the
 * NBD client sees EIO) and a log line says why; so do all later ones.
 *
 * Requests are completed in whatever order librdax completes them (an
 * fsync may end after later writes); the NBD rules that matter hold because
 * librdax sends the operations in submission order on one connection, and
 * the primary serves a connection's requests in order (a READ never sees a
 * later WRITE of the same connection: its read-after-write rule), also when
 * they are sent again after a resume.
 *
 * Thread safety: a forwarder belongs to the thread of its worker after
 * nbd_forward_start(); nbd_forward_open() runs on any thread (it blocks).
 */
#ifndef RDAXD_NBD_FORWARD_H
#define RDAXD_NBD_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsync_pool.h"
#include "worker.h"

/*
 * The copies of acknowledged, unflushed writes one forwarder may hold
 * (librdax's write-hold budget), and the bytes of writes in flight plus
 * held under which it takes another request: a request is at most 32 MiB
 * (NBD_MAX_BLOCK), so what is held never outgrows the budget and every held
 * write keeps its copy. Its own fsync starts at half of the soft bound.
 */
#define FWD_HOLD_BYTES (64ULL << 20)
#define FWD_HOLD_SOFT  (32ULL << 20)
/* READ buffers in flight under which another request is taken. */
#define FWD_READ_SOFT (32ULL << 20)
/* How long a resume may look for the primary before requests fail (a failover takes seconds). */
#define FWD_RESUME_MS 30000
/* A request unanswered this long: the primary is taken as lost (stopped, cut off). */
#define FWD_TIMEOUT_MS 10000
/* Operations in flight in librdax: more than an NBD connection may have (256), and our fsync. */
#define FWD_DEPTH 272

enum fwd_kind {
	FWD_READ,
	FWD_WRITE,
	FWD_FLUSH,
	FWD_DISCARD,
};

/* One forwarded request, embedded in the caller's. */
struct fwd_req {
	struct fwd_req *prev, *next; /* the forwarder's lists */
	enum fwd_kind kind;
	bool fua;     /* WRITE: durable, acknowledged once durable on the in-sync set */
	uint64_t off; /* volume bytes [off, off + len) */
	uint32_t len; /* FLUSH: 0 (the whole volume) */
	uint8_t *buf; /* READ: filled; WRITE: sent. The caller's, live until done */
	/* done -- the worker's thread, exactly once; then the request is the caller's again */
	void (*done)(struct fwd_req *r);
	void *arg; /* the caller's */
	/* the result */
	int status;    /* 0, or a negative code (-EIO: writes lost; -ETIMEDOUT: no primary) */
	char msg[160]; /* why, for the NBD client's error chunk ("" on success) */
	/* the forwarder's own */
	uint64_t sent_ms;
	bool submitted;
};

struct fwd_opts {
	const char *volume;	/* its name */
	const char *urls;	/* tcp:// addresses of the nodes holding copies, comma-separated */
	const char *token_file; /* NULL: none (rdaxd --token-file) */
	const char *peer;	/* the NBD client, for log lines */
	int resume_ms;		/* 0: FWD_RESUME_MS */
	int timeout_ms;		/* 0: FWD_TIMEOUT_MS */
};

struct nbd_forward;

/*
 * nbd_forward_open -- connect to the first of @o->urls that answers and
 * open the volume there, following it to its primary (a resume, if a
 * failover is under way, for at most the resume bound). Blocks: a pool
 * thread, never a loop. Returns 0 (*out set), or a negative code with @err
 * saying why (-ENOENT: no such volume on those nodes).
 */
int nbd_forward_open(const struct fwd_opts *o, struct nbd_forward **out, char *err, size_t errlen);

/* nbd_forward_size -- the volume's size, as the primary reported it at the open */
uint64_t nbd_forward_size(const struct nbd_forward *f);

/*
 * nbd_forward_start -- the forwarder runs on @w's loop from now on; its
 * resumes run in @pool; @kick(@arg) runs (the worker's thread, never inside
 * a call of the owner) after requests completed, when the owner may take
 * requests again. Context: @w's thread.
 */
void nbd_forward_start(struct nbd_forward *f, struct worker *w, struct fsync_pool *pool,
		       void (*kick)(void *arg), void *arg);

/*
 * nbd_forward_room -- may the caller take another request now (the memory
 * bounds at the top)? Context: the worker's thread.
 */
bool nbd_forward_room(const struct nbd_forward *f);

/*
 * nbd_forward_submit -- forward @r; r->done runs later (never inside this
 * call). Context: the worker's thread.
 */
void nbd_forward_submit(struct nbd_forward *f, struct fwd_req *r);

/*
 * nbd_forward_cancel -- the caller no longer wants the answers (its
 * connection failed): every request not yet done completes soon with
 * -ECANCELED. Context: the worker's thread; done runs from the loop, not
 * inside this call.
 */
void nbd_forward_cancel(struct nbd_forward *f);

/*
 * nbd_forward_delete -- close the connection (no request may be pending:
 * cancel and wait for them first) and free; a resume round still running
 * in the pool frees it when it comes back. Accepts NULL; sets *fp = NULL.
 * Context: the worker's thread (or any, before nbd_forward_start).
 */
void nbd_forward_delete(struct nbd_forward **fp);

#endif
