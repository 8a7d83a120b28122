/* SPDX-License-Identifier: BSD-3-Clause */
/* rdma_conn.c -- RDMA connections on the worker loops: messages, notices, windows, teardown */
#include "rdma_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checked.h"
#include "cluster_gate.h"
#include "errors.h"
#include "faults.h"
#include "frame.h"
#include "log.h"
#include "rdax.pb-c.h"
#include "rdma_notice.h"
#include "repl_registry.h"
#include "sock.h"
#include "vol_ack.h"
#include "spin_window.h"

/* Work request ids: the kind in the top byte, an index below. */
#define WRID_KIND_SHIFT 56
enum wrid_kind { WRID_RX = 0, WRID_TX = 1, WRID_GRANT = 2, WRID_BIND = 3 };
/* Send queue slots kept free of messages: memory-window binds use them. */
#define SQ_RESERVE 4U
/* First size of the input buffer. */
#define CONN_RDMA_INBUF_MIN (16U << 10)
/* Completions taken per poll call; CQ rounds per event before other connections get a turn. */
#define CQ_BATCH  32
#define CQ_ROUNDS 8
/*
 * While spinning, the CQ is polled in bursts of up to this many
 * microseconds before the loop gets a turn: a turn of the loop is an
 * epoll_wait() system call, which costs more than the poll itself (in the
 * emulated VM ~20 us, docs/rdma.md "Benchmark"); the loop's other
 * connections wait at most this long.
 */
#define SPIN_BURST_US 10

/*
 * A window over a cluster volume's copy, known to the copy's gate
 * (cluster_gate.h, struct gate_window): a replica link's, which a raise of
 * the epoch revokes, or a client's, which the end of this node's serving
 * revokes -- on any thread, under the gate's lock, after which only the
 * gate's word says it is gone.
 */
struct fenced_window {
	struct gate_window gw;
	struct gate_vol *gate;
	struct ibv_mw *mw;
	char peer[64]; /* for the log of a failed revoke */
};

/* A volume reachable over RDMA on this connection: a window and a notice range. */
struct direct {
	struct rdma_notice_range nr; /* its units in the notice space (first: rdma_notice.h) */
	uint32_t handle;
	struct volume *v;
	struct ibv_mw *mw;
	uint32_t rkey;
	/* a cluster volume's window, known to its gate (its mw is @mw); NULL otherwise */
	struct fenced_window *fw;
	bool link; /* a replica link's handle: its writes are the primary's, not replicated again */
};

struct conn_rdma {
	struct native_conn nc; /* the stream and the native protocol on it */
	struct rdma_worker *rw;
	struct conn_rdma_port *port;
	bool started;	    /* the worker took it over (conn_started) */
	bool poll_more;	    /* its CQ had more than one turn's worth: poll again before sleeping */
	bool armed;	    /* its CQ raises an event on its next completion (cq_arm) */
	int64_t spin_until; /* busy poll: CLOCK_MONOTONIC us until which its CQ is polled */
	struct spin_window spin;       /* how long to spin after activity (spin_window.h) */
	struct rdma_cm_data client_cd; /* the client's private data */

	/* verbs */
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t sq_depth, sq_used;
	uint32_t max_inline; /* replies up to this long are sent inline */
	uint32_t msg_size; /* of our messages to the client */
	struct rdma_credits cr;
	uint8_t initiator_depth; /* the client's wish (RDMA READs in flight) */
	uint32_t *tx_ring;	 /* send buffers posted, in posting order (sq_depth) */
	uint32_t tx_head, tx_n;

	/* protocol */
	struct dispatch_env env; /* the shared env with this connection's hooks */
	struct direct *dir;	 /* sorted by base */
	unsigned ndir, dir_cap;
	uint32_t held; /* messages with frame bytes whose grants are held back */
	uint64_t durable_notices; /* durable notices taken: the next one's reply id (rdma_proto.h) */

	bool accepted;	/* rdma_accept done */
	bool peer_gone; /* disconnected / connection error: no more sends */
	uint64_t notices, notice_bytes;
};

static const struct conn_ops rdma_conn_ops;

/* rc_of -- the RDMA connection around its lifecycle part */
static struct conn_rdma *rc_of(const struct conn *c)
{
	return (struct conn_rdma *)((char *)c - offsetof(struct conn_rdma, nc.s.conn));
}

static bool conn_poll(struct conn_rdma *c, bool ending);
static bool rdma_input_done(const struct conn *cc);

static const struct dispatch_hooks rdma_hooks;

/* ---- work request ids ---- */

static uint64_t wrid(enum wrid_kind kind, uint32_t idx)
{
	return (uint64_t)kind << WRID_KIND_SHIFT | idx;
}

static enum wrid_kind wrid_kind(uint64_t id)
{
	return (enum wrid_kind)(id >> WRID_KIND_SHIFT);
}

/* ---- send buffers ---- */

static int tx_get(struct conn_rdma_port *p, uint32_t *idx)
{
	if (p->tx_nfree == 0) {
		p->tx_wanted = true;
		return -ENOBUFS;
	}
	*idx = p->tx_free[--p->tx_nfree];
	return 0;
}

/* tx_put -- a send buffer is free again; connections that waited for one get a turn */
static void tx_put(struct conn_rdma_port *p, uint32_t idx)
{
	p->tx_free[p->tx_nfree++] = idx;
	if (p->tx_wanted) {
		p->tx_wanted = false;
		for (struct conn *c = p->rw->set->conns; c; c = c->next)
			if (c->ops == &rdma_conn_ops && rc_of(c)->port == p &&
			    rc_of(c)->nc.s.out_head)
				conn_flush_add(c);
	}
}

static uint8_t *tx_buf(const struct conn_rdma_port *p, uint32_t idx)
{
	return p->tx_slab + (size_t)idx * p->dev->msg_size;
}

/* tx_ring_pop -- the oldest send buffer posted by c completed */
static void tx_ring_pop(struct conn_rdma *c, uint32_t idx)
{
	if (c->tx_n == 0 || c->tx_ring[c->tx_head] != idx) {
		/* send completions of one QP come in order: this is a bug */
		LOG_ERROR("%s: send completion for buffer %" PRIu32 " out of order",
			  c->nc.s.conn.peer, idx);
		abort();
	}
	c->tx_head = (c->tx_head + 1) % c->sq_depth;
	c->tx_n--;
	tx_put(c->port, idx);
}

/* post_send -- one SEND_WITH_IMM of @len bytes of buffer @idx (none for a grant); 0 or -errno */
static int post_send(struct conn_rdma *c, bool with_buf, uint32_t idx, uint32_t len)
{
	struct ibv_sge sge = {
	    .addr = with_buf ? (uintptr_t)tx_buf(c->port, idx) : 0,
	    .length = len,
	    .lkey = c->port->tx_mr->lkey,
	};
	uint32_t grant = rdma_credits_send(&c->cr, true);
	struct ibv_send_wr wr = {
	    .wr_id = with_buf ? wrid(WRID_TX, idx) : wrid(WRID_GRANT, 0),
	    .sg_list = &sge,
	    .num_sge = len ? 1 : 0,
	    .opcode = IBV_WR_SEND_WITH_IMM,
	    .send_flags = IBV_SEND_SIGNALED | (len && len <= c->max_inline ? IBV_SEND_INLINE : 0),
	    .imm_data = htonl(grant),
	};
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(c->qp, &wr, &bad);
	if (ret) {
		LOG_WARN("%s: ibv_post_send(SEND, len=%" PRIu32 ") failed: %s", c->nc.s.conn.peer,
			 len, strerror(ret));
		return -ret;
	}
	c->sq_used++;
	if (with_buf) {
		c->tx_ring[(c->tx_head + c->tx_n) % c->sq_depth] = idx;
		c->tx_n++;
	}
	return 0;
}

/*
 * conn_flush -- send queued replies as the client's credits, the send queue
 * and the worker's send buffers allow, then a grant if one is due.
 * Returns true if replies were freed.
 */
static bool conn_flush(struct conn_rdma *c)
{
	bool freed = false;
	if (c->nc.s.conn.dead || c->peer_gone || !c->qp)
		return false;
	while (c->nc.s.out_head && rdma_credits_can_send(&c->cr) &&
	       c->sq_used + SQ_RESERVE < c->sq_depth) {
		uint32_t idx;
		if (tx_get(c->port, &idx))
			break;
		unsigned before = c->nc.s.out_count;
		size_t n = stream_out_copy(&c->nc.s, tx_buf(c->port, idx), c->msg_size);
		freed |= c->nc.s.out_count != before;
		if (post_send(c, true, idx, (uint32_t)n)) {
			tx_put(c->port, idx);
			conn_fail(&c->nc.s.conn, "send failed");
			return freed;
		}
	}
	if (rdma_credits_grant_due(&c->cr) && c->sq_used + SQ_RESERVE < c->sq_depth) {
		if (post_send(c, false, 0, 0))
			conn_fail(&c->nc.s.conn, "send failed");
	}
	return freed;
}

/*
 * release_held -- the grants of buffered messages go back once the parser
 * waits for bytes, not for room to dispatch (backpressure, see the header)
 */
static void release_held(struct conn_rdma *c)
{
	if (!c->held || native_conn_blocked(&c->nc))
		return;
	rdma_credits_handled(&c->cr, c->held);
	c->held = 0;
	conn_flush_add(&c->nc.s.conn);
}

/* ---- write notices and windows ---- */

/* What a durable notice asks to make durable: bytes of volume entry @d (NULL: nothing). */
struct durable_ask {
	const struct direct *d;
	uint64_t off, len;
};

/*
 * notice -- a WRITE_WITH_IMM landed: mark the lines (or pages) it touched
 * written. Returns 0, with *@ask the bytes marked when the notice is
 * durable (D), or -EPROTO (no volume of this connection has those units,
 * or a durable notice of no bytes), or the mark's error.
 */
static int notice(struct conn_rdma *c, uint32_t imm, uint32_t byte_len, struct durable_ask *ask)
{
	struct rdma_notice_hit hit;
	*ask = (struct durable_ask){0};
	if (rdma_notice_resolve(c->dir, sizeof(*c->dir), c->ndir, imm, byte_len, &hit) ||
	    (hit.len == 0 && rdma_imm_durable(imm))) {
		LOG_PEER(LOG_LEVEL_INFO, c->nc.s.conn.peer,
			 "%s: write notice %#" PRIx32 " (%" PRIu32 " bytes) names unit %" PRIu64
			 " outside every volume of the connection (or runs past its volume, or "
			 "asks a write of no bytes to be made durable)",
			 c->nc.s.conn.peer, imm, byte_len, rdma_imm_unit(imm));
		return -EPROTO;
	}
	if (hit.len == 0)
		return 0;
	struct direct *d = &c->dir[hit.index];
	uint64_t off = hit.off;
	uint64_t len = hit.len;
	if (rdax_faults.rdma_notice_pages) {
		/* the control of the line tests: whole pages again, as before lines */
		uint64_t end = align_up(off + len, RDAX_PAGE_SIZE);
		off = align_down(off, RDAX_PAGE_SIZE);
		len = (end < d->v->size ? end : d->v->size) - off;
	}
	/*
	 * A replicated volume: recorded for absent replicas and forwarded, as a
	 * TCP write is. The bytes landed before this notice, so a primary that
	 * loses power in between may miss the record's mark (docs/cluster.md,
	 * "The change record", RDMA).
	 */
	struct repl_volume *rv = d->link ? NULL : repl_registry_get(d->v); /* a link's: not again */
	if (rv)
		repl_before_write(rv, off, len);
	bool unmarked = rdax_faults.rdma_durable_unmarked && rdma_imm_durable(imm); /* control */
	int ret = unmarked ? 0 : volume_mark_written(d->v, off, len);
	if (ret == 0 && rv)
		repl_write(rv, off, len);
	if (ret) {
		LOG_ERROR("%s: volume_mark_written(%s, %" PRIu64 ", %" PRIu64 ") failed: %s",
			  c->nc.s.conn.peer, d->v->name, off, len, rdax_strerror(ret));
		return ret;
	}
	/* the daemon learns of the write now: its place in the write log (vol_ack.h) */
	vol_ack_record_write(d->v, off, len);
	c->notices++;
	c->notice_bytes += byte_len;
	if (rdma_imm_durable(imm))
		*ask = (struct durable_ask){d, off, len};
	return 0;
}

/*
 * input_append -- frame bytes for the parser; their message's grant is
 * held back until it is through (release_held). The connection fails
 * when they would pass the input's bound (more than the credits allow) or
 * memory ran out.
 */
static void input_append(struct conn_rdma *c, const uint8_t *b, size_t n)
{
	int ret = stream_in_append(&c->nc.s, b, n);
	if (ret) {
		LOG_PEER(LOG_LEVEL_INFO, c->nc.s.conn.peer, "%s: %s; closing", c->nc.s.conn.peer,
			 ret == -EPROTO ? "sent more than its credits allow"
					: "out of memory for its input");
		conn_fail(&c->nc.s.conn, ret == -EPROTO ? "credit violation" : "out of memory");
		return;
	}
	c->held++;
}

/*
 * durable_request -- a durable notice stands for an FSYNC request of the
 * bytes it marked: put that request's frame into the connection's input,
 * behind every frame the client sent before the notice, so the parser
 * dispatches it as any other FSYNC (the same checks, the same cluster
 * rules, the same reply) under the id rdma_proto.h gives it. The notice
 * arrives between the client's frames (a client posts nothing inside a
 * frame); one that did not only garbles that client's own stream. Its
 * grant is held back as a message's is (backpressure).
 */
static void durable_request(struct conn_rdma *c, const struct durable_ask *ask)
{
	Rdax__FsyncRequest f = RDAX__FSYNC_REQUEST__INIT;
	f.handle = ask->d->handle;
	f.has_offset = f.has_length = 1;
	f.offset = ask->off;
	f.length = ask->len; /* > 0: notice() refuses a durable notice of no bytes */
	/* three varints: at most 1 + 5, 1 + 10 and 1 + 10 bytes */
	uint8_t frame[FRAME_HEADER_SIZE + 32];
	size_t body = rdax__fsync_request__pack(&f, frame + FRAME_HEADER_SIZE);
	struct frame_header h = {
	    .magic = FRAME_MAGIC,
	    .version = FRAME_VERSION,
	    .type = FRAME_FSYNC,
	    .request_id = rdma_durable_reply_id(c->durable_notices++),
	    .body_len = (uint32_t)body,
	};
	frame_header_encode(&h, frame);
	input_append(c, frame, FRAME_HEADER_SIZE + body);
}

/*
 * mw_dealloc -- deallocate a bound window: remote access through it ends at
 * once. A failure aborts: the window may still be usable, and a client (or
 * a fenced-off primary) must never keep access behind the daemon's back.
 */
static void mw_dealloc(struct ibv_mw *mw, uint32_t rkey, const char *peer)
{
	int ret = ibv_dealloc_mw(mw);
	if (ret) {
		LOG_ERROR("%s: ibv_dealloc_mw(rkey %#" PRIx32 ") failed: %s", peer, rkey,
			  strerror(ret));
		abort();
	}
}

/* fenced_revoke -- the gate saw a newer epoch than the window's link (any thread, gate lock) */
static void fenced_revoke(struct gate_window *gw)
{
	struct fenced_window *fw = (struct fenced_window *)gw;
	mw_dealloc(fw->mw, fw->mw->rkey, fw->peer);
}

/*
 * notice_range_place -- a range for @v in the connection's notice space:
 * lines when @want_lines and the volume is small enough for them and they
 * fit, else pages (common/rdma_proto.h). 0 with *nr and *pos (its place in
 * c->dir), or -ENOSPC.
 */
static int notice_range_place(const struct conn_rdma *c, const struct volume *v, bool want_lines,
			      struct rdma_notice_range *nr, unsigned *pos)
{
	if (want_lines && v->size <= RDMA_IMM_LINE_VOLUME_MAX) {
		nr->shift = RDMA_IMM_SHIFT_LINE;
		nr->nunits = v->size >> RDMA_IMM_SHIFT_LINE;
		if (rdma_notice_place(c->dir, sizeof(*c->dir), c->ndir, nr->nunits, &nr->base,
				      pos) == 0)
			return 0;
	}
	nr->shift = RDMA_IMM_SHIFT_PAGE;
	nr->nunits = v->size >> RDMA_IMM_SHIFT_PAGE;
	if (nr->nunits > RDMA_IMM_SPACE_UNITS)
		return -ENOSPC;
	return rdma_notice_place(c->dir, sizeof(*c->dir), c->ndir, nr->nunits, &nr->base, pos);
}

/* hook_volume_opened -- bind a window over the new handle's volume to this QP */
static int hook_volume_opened(void *arg, uint32_t handle, struct volume *v, struct gate_vol *gate,
			      uint64_t epoch, bool want_lines, struct dispatch_direct *out)
{
	struct conn_rdma *c = arg;
	if (!c->qp || c->nc.s.conn.dead || c->peer_gone)
		return -ENOTCONN;
	struct rdma_dev *dev = c->port->dev;
	struct ibv_mr *mr = rdma_dev_ns_mr(dev, v->ns->id);
	if (!mr)
		return -EOPNOTSUPP;
	struct rdma_notice_range nr;
	unsigned pos;
	if (notice_range_place(c, v, want_lines, &nr, &pos)) {
		LOG_WARN("%s: no room for volume %s (%" PRIu64 " pages) in the connection's notice "
			 "space",
			 c->nc.s.conn.peer, v->name, v->size >> RDAX_PAGE_SHIFT);
		return -ENOSPC;
	}
	if (c->sq_used >= c->sq_depth)
		return -EAGAIN;
	if (c->ndir == c->dir_cap) {
		unsigned cap = c->dir_cap ? c->dir_cap * 2 : 8;
		struct direct *d = realloc(c->dir, cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		c->dir = d;
		c->dir_cap = cap;
	}
	struct fenced_window *fw = NULL;
	if (gate) {
		/*
		 * a replica link's window goes when a newer epoch is seen, a client's
		 * when this node stops serving the volume (cluster_gate.h)
		 */
		fw = calloc(1, sizeof(*fw));
		if (!fw)
			return -ENOMEM;
		fw->gw = (struct gate_window){
		    .epoch = epoch, .client = epoch == 0, .revoke = fenced_revoke};
		fw->gate = gate;
		snprintf(fw->peer, sizeof(fw->peer), "%s", c->nc.s.conn.peer);
	}
	struct ibv_mw *mw = ibv_alloc_mw(dev->pd, IBV_MW_TYPE_2);
	if (!mw) {
		int ret = -errno;
		LOG_ERROR("%s: ibv_alloc_mw failed: %s", c->nc.s.conn.peer, strerror(errno));
		free(fw);
		return ret;
	}
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	struct ibv_send_wr wr = {
	    .wr_id = wrid(WRID_BIND, 0),
	    .opcode = IBV_WR_BIND_MW,
	    .send_flags = IBV_SEND_SIGNALED,
	    .bind_mw =
		{
		    .mw = mw,
		    .rkey = rkey,
		    .bind_info =
			{
			    .mr = mr,
			    .addr = (uintptr_t)v->data,
			    .length = v->size,
			    .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			},
		},
	};
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(c->qp, &wr, &bad);
	if (ret) {
		LOG_ERROR("%s: ibv_post_send(BIND_MW, %s) failed: %s", c->nc.s.conn.peer, v->name,
			  strerror(ret));
		ibv_dealloc_mw(mw);
		free(fw);
		return -ret;
	}
	c->sq_used++;
	if (fw) {
		fw->mw = mw;
		ret = cluster_gate_window_add(gate, &fw->gw);
		if (ret) {
			/* deposed or raised since the open's check: no window for this handle */
			mw_dealloc(mw, rkey, c->nc.s.conn.peer);
			free(fw);
			return ret;
		}
	}
	memmove(&c->dir[pos + 1], &c->dir[pos], (c->ndir - pos) * sizeof(*c->dir));
	c->dir[pos] = (struct direct){
	    .nr = nr,
	    .handle = handle,
	    .v = v,
	    .mw = mw,
	    .rkey = rkey,
	    .fw = fw,
	    .link = gate && epoch,
	};
	c->ndir++;
	out->remote_addr = (uintptr_t)v->data;
	out->rkey = rkey;
	out->imm_volume_id = (uint32_t)nr.base;
	out->imm_unit_shift = nr.shift;
	out->imm_durable = true;
	LOG_DEBUG("%s: volume %s (handle %#" PRIx32 ") reachable: rkey %#" PRIx32
		  ", notice units of %u bytes [%" PRIu64 ", +%" PRIu64 ")",
		  c->nc.s.conn.peer, v->name, handle, rkey, 1U << nr.shift, nr.base, nr.nunits);
	return 0;
}

/* dir_revoke -- deallocate entry @i's window: remote access through it ends at once */
static void dir_revoke(struct conn_rdma *c, unsigned i)
{
	struct direct *d = &c->dir[i];
	if (!d->mw)
		return;
	/* a replica link's window a raise revoked already: the gate freed the mw */
	bool gone = d->fw && cluster_gate_window_remove(d->fw->gate, &d->fw->gw);
	if (!gone)
		mw_dealloc(d->mw, d->rkey, c->nc.s.conn.peer);
	free(d->fw);
	d->fw = NULL;
	d->mw = NULL;
}

/* dir_remove -- revoke entry @i and forget it (its notice range is free again) */
static void dir_remove(struct conn_rdma *c, unsigned i)
{
	dir_revoke(c, i);
	memmove(&c->dir[i], &c->dir[i + 1], (c->ndir - i - 1) * sizeof(*c->dir));
	c->ndir--;
}

/* hook_volume_closed -- the client closed @handle: its window goes now */
static void hook_volume_closed(void *arg, uint32_t handle)
{
	struct conn_rdma *c = arg;
	for (unsigned i = 0; i < c->ndir; i++)
		if (c->dir[i].handle == handle) {
			dir_remove(c, i);
			return;
		}
}

static const struct dispatch_hooks rdma_hooks = {
    .volume_opened = hook_volume_opened,
    .volume_closed = hook_volume_closed,
};

/* ---- completions ---- */

/* wc_fail -- a completion failed: the connection is over (unless it is already) */
static void wc_fail(struct conn_rdma *c, const struct ibv_wc *wc)
{
	if (c->nc.s.conn.dead || c->peer_gone)
		return;
	LOG_DEBUG("%s: completion error: %s (opcode %d, wr %#" PRIx64 ")", c->nc.s.conn.peer,
		  ibv_wc_status_str(wc->status), wc->opcode, (uint64_t)wc->wr_id);
	if (wc->status != IBV_WC_WR_FLUSH_ERR)
		LOG_PEER(LOG_LEVEL_INFO, c->nc.s.conn.peer, "%s: %s; closing the connection",
			 c->nc.s.conn.peer, ibv_wc_status_str(wc->status));
	c->peer_gone = true;
	conn_fail(&c->nc.s.conn, "completion error");
}

/*
 * handle_wc -- one completion. Receive buffers to repost go to @repost.
 * @ending: the QP is gone, only give back buffers and mark notices.
 */
static void handle_wc(struct conn_rdma *c, const struct ibv_wc *wc, uint64_t *repost,
		      unsigned *nrepost, bool ending)
{
	switch (wrid_kind(wc->wr_id)) {
	case WRID_RX:
		repost[(*nrepost)++] = wc->wr_id;
		break;
	case WRID_TX:
		c->sq_used--;
		tx_ring_pop(c, (uint32_t)wc->wr_id);
		if (wc->status != IBV_WC_SUCCESS && !ending)
			wc_fail(c, wc);
		return;
	case WRID_GRANT:
	case WRID_BIND:
		c->sq_used--;
		if (wc->status != IBV_WC_SUCCESS && !ending)
			wc_fail(c, wc);
		return;
	default:
		LOG_ERROR("%s: completion with unknown work request id %#" PRIx64,
			  c->nc.s.conn.peer, (uint64_t)wc->wr_id);
		return;
	}

	/* a receive: a message or a write notice of the client */
	if (wc->status != IBV_WC_SUCCESS) {
		if (!ending)
			wc_fail(c, wc);
		return;
	}
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		/* the data landed: mark it even when ending (a later fsync covers it) */
		conn_input_seen(&c->nc.s.conn);
		struct durable_ask ask;
		int ret = notice(c, ntohl(wc->imm_data), wc->byte_len, &ask);
		if (ending)
			return;
		if (ret == 0)
			ret = rdma_credits_received(&c->cr, 0);
		if (ret) {
			c->nc.s.conn.why =
			    ret == -EPROTO ? "bad write notice" : "write not recorded";
			conn_fail(&c->nc.s.conn, c->nc.s.conn.why);
			return;
		}
		if (ask.d && !(c->nc.s.conn.closing && !c->nc.s.conn.unit_open))
			durable_request(c, &ask);
		else
			rdma_credits_handled(&c->cr, 1);
		return;
	}
	if (ending || c->nc.s.conn.dead)
		return;
	uint32_t grant = (wc->wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc->imm_data) : 0;
	if (rdma_credits_received(&c->cr, grant)) {
		LOG_PEER(LOG_LEVEL_INFO, c->nc.s.conn.peer,
			 "%s: broke the credit rules (grant %" PRIu32 "); closing",
			 c->nc.s.conn.peer, grant);
		conn_fail(&c->nc.s.conn, "credit violation");
		return;
	}
	if (wc->byte_len == 0 || (c->nc.s.conn.closing && !c->nc.s.conn.unit_open)) {
		/* a grant only, or bytes nobody will parse any more */
		rdma_credits_handled(&c->cr, 1);
		return;
	}
	conn_input_seen(&c->nc.s.conn);
	input_append(c, rdma_dev_rx(c->port->dev, wc->wr_id), wc->byte_len);
}

/* conn_poll -- take every completion of c's CQ; true if any */
static bool conn_poll(struct conn_rdma *c, bool ending)
{
	struct ibv_wc wc[CQ_BATCH];
	uint64_t repost[CQ_BATCH];
	bool any = false;
	for (int round = 0; round < CQ_ROUNDS || ending; round++) {
		int n = ibv_poll_cq(c->cq, CQ_BATCH, wc);
		if (n < 0) {
			LOG_ERROR("%s: ibv_poll_cq failed (%d)", c->nc.s.conn.peer, n);
			conn_fail(&c->nc.s.conn, "poll failed");
			break;
		}
		if (n == 0)
			break;
		any = true;
		unsigned nrepost = 0;
		for (int i = 0; i < n; i++)
			handle_wc(c, &wc[i], repost, &nrepost, ending);
		if (nrepost) {
			rdma_dev_rx_taken(c->port->dev, nrepost);
			rdma_dev_srq_repost(c->port->dev, repost, nrepost);
		}
		if (n < CQ_BATCH)
			break;
		if (!ending && round + 1 == CQ_ROUNDS) {
			/* more may be waiting, and they raise no new event: come back */
			c->poll_more = true;
			conn_flush_add(&c->nc.s.conn);
		}
	}
	return any;
}

/* now_us -- CLOCK_MONOTONIC in microseconds */
static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * cq_arm -- c's CQ is to raise an event on its next completion, as it must
 * before the loop sleeps with nothing polling it. Not while c spins: each
 * completion of an armed CQ also raises an event, which costs the kernel
 * its signalling and the loop a wake, a read and a re-arm per completion,
 * for nothing a poll does not already see (the pattern of NAPI: no
 * interrupts while polling). True if completions came before the arm (they
 * raise no event): the caller handles them.
 */
static bool cq_arm(struct conn_rdma *c)
{
	if (c->armed || !c->cq)
		return false;
	if (ibv_req_notify_cq(c->cq, 0))
		LOG_ERROR("%s: ibv_req_notify_cq failed", c->nc.s.conn.peer);
	c->armed = true;
	return conn_poll(c, false);
}

/*
 * spin_on -- c had completions: keep polling its CQ before the loop sleeps
 * (set_before_sleep) for the adaptive window (spin_window.h: about twice
 * the connection's recent gap between activity, at most --rdma-busy-poll;
 * none while its gaps are longer), restarted by each completion. A CQ that
 * is not to be spun on and is not armed gets armed before the loop sleeps
 * (rdma_flush).
 */
static void spin_on(struct conn_rdma *c)
{
	int64_t now = now_us();
	spin_window_activity(&c->spin, now);
	unsigned us = rdma_input_done(&c->nc.s.conn) ? 0 : spin_window_idle(&c->spin, now);
	c->spin_until = us ? now + us : 0;
	if (us || !c->armed) {
		c->poll_more = true;
		conn_flush_add(&c->nc.s.conn);
	}
}

/*
 * spin_burst -- while c spins: poll its CQ (user space, no system call) for
 * up to SPIN_BURST_US, never more than 16 polls past its window. True if
 * completions came.
 */
static bool spin_burst(struct conn_rdma *c)
{
	int64_t end = now_us() + SPIN_BURST_US;
	if (end > c->spin_until)
		end = c->spin_until;
	do {
		/* the clock every 16 polls: in the emulated VM a read costs more than a poll */
		for (unsigned i = 0; i < 16 && !c->nc.s.conn.dead; i++)
			if (conn_poll(c, false))
				return true;
	} while (!c->nc.s.conn.dead && now_us() < end);
	return false;
}

/* port_on_event -- a CQ of this worker on this device has completions */
static void port_on_event(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn_rdma_port *p = w->data;
	for (int i = 0; i < 64; i++) {
		struct ibv_cq *cq;
		void *ctx;
		if (ibv_get_cq_event(p->channel, &cq, &ctx))
			break; /* EAGAIN: the channel is non-blocking */
		ibv_ack_cq_events(cq, 1);
		struct conn_rdma *c = ctx;
		c->armed = false; /* an event disarms: rdma_flush arms again unless c spins */
		if (conn_poll(c, false)) {
			spin_on(c);
		} else {
			c->poll_more = true;
			conn_flush_add(&c->nc.s.conn);
		}
		conn_kick(&c->nc.s.conn);
	}
}

/* ---- lifecycle: the RDMA connection's conn_ops (conn.h) ---- */

/* rdma_input_done -- no more requests will be handled: the peer is gone */
static bool rdma_input_done(const struct conn *cc)
{
	return rc_of(cc)->peer_gone;
}

/* rdma_output_pending -- queued replies, or sends not yet completed, while the peer is there */
static bool rdma_output_pending(const struct conn *cc)
{
	const struct conn_rdma *c = rc_of(cc);
	/* a closing connection first sends its queued replies, and sees them leave */
	return !c->peer_gone && (c->nc.s.out_head || c->tx_n);
}

/* rdma_drop -- nothing more can be sent: drop output, end once the jobs are done */
static void rdma_drop(struct conn *cc)
{
	stream_out_drop(&rc_of(cc)->nc.s);
}

/* rdma_progress -- dispatch what became possible, then the grants held back */
static void rdma_progress(struct conn *cc)
{
	struct conn_rdma *c = rc_of(cc);
	if (c->nc.s.parked)
		native_proto.unpark(&c->nc.s);
	stream_process(&c->nc.s);
	release_held(c);
	conn_flush_add(cc);
}

/*
 * rdma_flush -- before the loop sleeps: poll the CQ again if it had more
 * than a turn's worth (or the loop spins on it), then send.
 */
static bool rdma_flush(struct conn *cc)
{
	struct conn_rdma *c = rc_of(cc);
	if (c->poll_more && c->cq) {
		c->poll_more = false;
		bool spinning = c->spin_until && now_us() < c->spin_until && !rdma_input_done(cc) &&
				!cc->closing && !cc->dead;
		if (conn_poll(c, false) || (spinning && spin_burst(c))) {
			spin_on(c);
		} else if (spinning) {
			c->poll_more =
			    true; /* still spinning: poll again after a turn of the loop */
			conn_flush_add(cc);
		} else {
			c->spin_until = 0;
			if (cq_arm(c))
				spin_on(c); /* came before the arm: no event will tell */
		}
		conn_kick(cc);
		if (cc->in_dead)
			return false;
	}
	return conn_flush(c);
}

/*
 * conn_destroy_verbs -- revoke windows, destroy QP and CQ (polling what is
 * left), the id
 *
 * A one-sided write the client saw complete may have its completion still
 * on the CQ: the connection can end (a disconnect event, a drain) before the
 * loop polled it. Its data is in the volume, so it must be marked dirty like
 * any other, or no later fsync and no clean stop writes it back. So the
 * windows are revoked first (no write lands after that), the QP is put in
 * the error state (rdma_disconnect), and the CQ is polled while the notice
 * ranges still name their volumes -- before the QP is destroyed, since a
 * provider may drop a destroyed QP's completions from its CQ. Only then are
 * the entries forgotten.
 */
static void conn_destroy_verbs(struct conn_rdma *c)
{
	for (unsigned i = 0; i < c->ndir; i++)
		dir_revoke(c, i);
	if (c->id && c->accepted)
		rdma_disconnect(c->id); /* fails harmlessly if the peer disconnected first */
	if (c->cq)
		conn_poll(c, true); /* notices that landed are marked */
	while (c->ndir)
		dir_remove(c, c->ndir - 1);
	if (c->qp) {
		rdma_destroy_qp(c->id);
		c->qp = NULL;
	}
	if (c->cq) {
		/* flushed receives give their buffers back */
		conn_poll(c, true);
		while (c->tx_n)
			tx_ring_pop(c, c->tx_ring[c->tx_head]);
		if (ibv_destroy_cq(c->cq))
			LOG_WARN("%s: ibv_destroy_cq failed", c->nc.s.conn.peer);
		c->cq = NULL;
	}
	if (c->id) {
		rdma_destroy_id(c->id);
		c->id = NULL;
	}
}

/* rdma_end -- everything is over: give back what the connection holds, then the session */
static bool rdma_end(struct conn *cc)
{
	struct conn_rdma *c = rc_of(cc);
	stream_end_io(&c->nc.s);
	conn_destroy_verbs(c);
	LOG_DEBUG("%s: connection closed (%s; %" PRIu64 " write notices, %" PRIu64 " bytes)",
		  cc->peer, cc->why ? cc->why : "end", c->notices, c->notice_bytes);
	return native_proto.end(&c->nc.s);
}

/* rdma_free -- the stream, the native core, then the connection (conn_free) */
static void rdma_free(struct conn *cc)
{
	struct conn_rdma *c = rc_of(cc);
	conn_limit_give(&cc->slot); /* the queue pair and its id are gone (rdma_end) */
	stream_release(&c->nc.s);
	native_proto.free(&c->nc.s);
}

/* rdma_transport_free -- what the native core hands back: the connection itself */
static void rdma_transport_free(struct native_conn *nc)
{
	struct conn_rdma *c = (struct conn_rdma *)((char *)nc - offsetof(struct conn_rdma, nc));
	free(c->dir);
	free(c->tx_ring);
	free(c);
}

static const struct native_transport rdma_native = {
    .snapshot_reads = true,
    .metrics = METRICS_RDMA,
    .free = rdma_transport_free,
};

/* conn_setup -- CQ, QP and buffers of a new connection; 0 or -errno */
static int conn_setup(struct conn_rdma *c, const struct rdma_cm_data *cd)
{
	struct rdma_dev *dev = c->port->dev;
	uint32_t send_window = cd->credits;
	if (send_window > CONN_RDMA_SEND_WINDOW_MAX)
		send_window = CONN_RDMA_SEND_WINDOW_MAX;
	rdma_credits_init(&c->cr, send_window, CONN_RDMA_CREDITS);
	c->msg_size = cd->msg_size < dev->msg_size ? cd->msg_size : dev->msg_size;
	c->sq_depth = send_window + SQ_RESERVE + 4;
	c->tx_ring = calloc(c->sq_depth, sizeof(*c->tx_ring));
	if (!c->tx_ring)
		return -ENOMEM;
	/* the frame being parsed, then one window of messages (see release_held) */
	c->nc.s.in_max += (size_t)(CONN_RDMA_CREDITS + 1) * dev->msg_size;

	int cqe = (int)(c->sq_depth + CONN_RDMA_CREDITS + 16);
	c->cq = ibv_create_cq(c->id->verbs, cqe, c, c->port->channel, 0);
	if (!c->cq) {
		LOG_ERROR("%s: ibv_create_cq(%d) failed: %s", c->nc.s.conn.peer, cqe,
			  strerror(errno));
		return -errno;
	}
	struct ibv_qp_init_attr qa = {
	    .send_cq = c->cq,
	    .recv_cq = c->cq,
	    .srq = dev->srq,
	    .qp_type = IBV_QPT_RC,
	    .sq_sig_all = 1,
	    .cap = {.max_send_wr = c->sq_depth, .max_send_sge = 1},
	};
	/* inline replies if the device has them (RDMA_INLINE_MAX), else none */
	qa.cap.max_inline_data = RDMA_INLINE_MAX;
	if (rdma_create_qp(c->id, dev->pd, &qa)) {
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(c->id, dev->pd, &qa)) {
			LOG_ERROR("%s: rdma_create_qp(send %u) failed: %s", c->nc.s.conn.peer,
				  c->sq_depth, strerror(errno));
			return -errno;
		}
	}
	c->max_inline = qa.cap.max_inline_data < RDMA_INLINE_MAX ? qa.cap.max_inline_data
								 : RDMA_INLINE_MAX;
	c->qp = c->id->qp;
	return 0;
}

/* conn_accept -- answer the connection request with our private data; 0 or -errno */
static int conn_accept(struct conn_rdma *c)
{
	struct rdma_dev *dev = c->port->dev;
	uint8_t pd[RDMA_CM_DATA_SIZE];
	struct rdma_cm_data cd = {
	    .magic = RDMA_CM_MAGIC,
	    .version = RDMA_CM_VERSION,
	    .credits = CONN_RDMA_CREDITS,
	    .msg_size = dev->msg_size,
	};
	rdma_cm_data_encode(&cd, pd);
	uint32_t rd = c->initiator_depth;
	if (rd > dev->max_rd_atom)
		rd = dev->max_rd_atom;
	if (rd > CONN_RDMA_MAX_RD_ATOM)
		rd = CONN_RDMA_MAX_RD_ATOM;
	struct rdma_conn_param cp = {
	    .private_data = pd,
	    .private_data_len = sizeof(pd),
	    .responder_resources = (uint8_t)rd,
	    .initiator_depth = 0,
	    .rnr_retry_count = 7, /* an empty SRQ slows a client down, never fails it */
	};
	if (rdma_accept(c->id, &cp)) {
		int ret = -errno;
		LOG_WARN("%s: rdma_accept failed: %s", c->nc.s.conn.peer, strerror(errno));
		return ret;
	}
	c->accepted = true;
	return 0;
}

/* rdma_start -- the start message: set up and accept on the worker thread */
static void rdma_start(struct conn *cc)
{
	struct conn_rdma *c = rc_of(cc);
	struct rdma_worker *rw = c->rw;
	c->started = true;
	for (unsigned i = 0; i < rw->nports; i++)
		if (rw->ports[i]->dev->verbs == c->id->verbs)
			c->port = rw->ports[i];
	int ret = -ENOTCONN;
	if (c->peer_gone) {
		LOG_DEBUG("%s: gone before it was accepted", cc->peer);
		goto err_reject;
	}
	ret = -ENODEV;
	if (!c->port) {
		LOG_WARN("%s: connection on a device rdaxd did not set up; refused", cc->peer);
		goto err_reject;
	}
	ret = conn_setup(c, &c->client_cd);
	if (ret)
		goto err_reject;
	conn_link(cc);
	ret = conn_accept(c);
	if (ret) {
		c->peer_gone = true;
		conn_fail(cc, "accept failed");
		conn_kick(cc);
		return;
	}
	cq_arm(c); /* and polls what came before the arm */
	LOG_DEBUG("%s: connected over RDMA on %s (worker %u; credits %u in, %u out; messages of "
		  "%u bytes)",
		  cc->peer, c->port->dev->name, cc->set->worker->id, CONN_RDMA_CREDITS,
		  c->cr.send_window, c->msg_size);
	conn_kick(cc);
	return;

err_reject:
	rdma_reject(c->id, NULL, 0);
	conn_destroy_verbs(c);
	session_delete(&c->nc.session);
	rdma_free(cc); /* never linked: nothing else refers to it */
}

/* rdma_input_state -- the stream's, as over a socket (the time limits, conn.h) */
static enum conn_input_state rdma_input_state(const struct conn *cc)
{
	return stream_input_state(&rc_of(cc)->nc.s);
}

/* rdma_trim -- an idle connection gives back its empty input buffer */
static void rdma_trim(struct conn *cc)
{
	stream_trim(&rc_of(cc)->nc.s);
}

static const struct conn_ops rdma_conn_ops = {
    .start = rdma_start,
    .flush = rdma_flush,
    .progress = rdma_progress,
    .input_done = rdma_input_done,
    .output_pending = rdma_output_pending,
    .drop = rdma_drop,
    .end = rdma_end,
    .input_state = rdma_input_state,
    .trim = rdma_trim,
    .free = rdma_free,
};

int conn_rdma_start(struct rdma_worker *rw, struct rdma_cm_id *id, const struct rdma_cm_data *cd,
		    uint8_t initiator_depth, const char *peer, const char *identity,
		    struct conn_slot *slot)
{
	struct conn_rdma *c = calloc(1, sizeof(*c));
	if (!c) {
		LOG_ERROR("%s: out of memory for a new connection; refused", peer);
		goto err_reject;
	}
	if (native_conn_init(&c->nc, rw->set, &rdma_conn_ops, &rdma_native, &rw->shared->native,
			     CONN_RDMA_INBUF_MIN, 0, peer)) {
		LOG_ERROR("%s: out of memory for a new connection; refused", peer);
		free(c);
		goto err_reject;
	}
	if (identity) /* proved by the signed request: the ACL's user:NAME */
		snprintf(c->nc.session->access.who.user, sizeof(c->nc.session->access.who.user),
			 "%s", identity);
	c->nc.session->access.rdma = true;
	c->rw = rw;
	c->id = id;
	c->client_cd = *cd;
	c->initiator_depth = initiator_depth;
	spin_window_init(&c->spin, rw->shared->busy_poll_us);
	c->env = *rw->shared->native.env;
	c->env.hooks = &rdma_hooks;
	c->env.hook_arg = c;
	c->nc.env = &c->env;
	id->context = c;
	/* from now on the worker receives this id's events: it alone handles the connection */
	if (rdma_migrate_id(id, rw->cm)) {
		LOG_ERROR("%s: rdma_migrate_id failed: %s; refused", peer, strerror(errno));
		id->context = NULL;
		session_delete(&c->nc.session);
		stream_release(&c->nc.s);
		native_proto.free(&c->nc.s);
		goto err_reject;
	}
	conn_take_slot(&c->nc.s.conn, slot);
	conn_post_start(&c->nc.s.conn);
	return 0;

err_reject:
	rdma_reject(id, NULL, 0);
	rdma_destroy_id(id);
	conn_limit_give(slot);
	return -ENOMEM;
}

/* rw_on_cm_event -- rdma_cm events of this worker's connections */
static void rw_on_cm_event(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_worker *rw = w->data;
	for (int i = 0; i < 64; i++) {
		struct rdma_cm_event *e;
		if (rdma_get_cm_event(rw->cm, &e))
			break; /* EAGAIN: non-blocking */
		struct conn_rdma *c = e->id->context;
		enum rdma_cm_event_type type = e->event;
		int status = e->status;
		rdma_ack_cm_event(e);
		if (!c || c->nc.s.conn.in_dead)
			continue;
		if (!c->started) {
			/* before the worker took it over: conn_started refuses it */
			if (type != RDMA_CM_EVENT_ESTABLISHED)
				c->peer_gone = true;
			continue;
		}
		switch (type) {
		case RDMA_CM_EVENT_ESTABLISHED:
			LOG_DEBUG("%s: established", c->nc.s.conn.peer);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			c->peer_gone = true;
			if (!c->nc.s.conn.why)
				c->nc.s.conn.why = "disconnected by the peer";
			conn_fail(&c->nc.s.conn, c->nc.s.conn.why);
			break;
		case RDMA_CM_EVENT_REJECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			LOG_WARN("%s: %s (status %d)", c->nc.s.conn.peer, rdma_event_str(type),
				 status);
			c->peer_gone = true;
			conn_fail(&c->nc.s.conn, rdma_event_str(type));
			break;
		default:
			LOG_DEBUG("%s: rdma_cm event %s", c->nc.s.conn.peer, rdma_event_str(type));
			break;
		}
		conn_kick(&c->nc.s.conn);
	}
}

int rdma_worker_new(struct conn_set *cs, const struct conn_rdma_shared *shared,
		    struct rdma_worker **out)
{
	if (!cs || !shared || !out)
		return -EINVAL;
	struct rdma_worker *set = calloc(1, sizeof(*set));
	if (!set)
		return -ENOMEM;
	int ret;
	struct worker *w = cs->worker;
	set->set = cs;
	set->shared = shared;
	set->cm = rdma_create_event_channel();
	if (!set->cm) {
		ret = errno ? -errno : -ENODEV;
		LOG_ERROR("rdma_create_event_channel failed: %s", strerror(-ret));
		goto err_free;
	}
	ret = sock_set_nonblock(set->cm->fd);
	if (ret)
		goto err_channel;
	ev_io_init(&set->cm_io, rw_on_cm_event, set->cm->fd, EV_READ);
	set->cm_io.data = set;
	ev_io_start(w->loop, &set->cm_io);
	*out = set;
	return 0;

err_channel:
	rdma_destroy_event_channel(set->cm);
err_free:
	free(set);
	return ret;
}

int rdma_worker_add_dev(struct rdma_worker *set, struct rdma_dev *dev)
{
	if (!set || !dev)
		return -EINVAL;
	struct conn_rdma_port **ports = realloc(set->ports, (set->nports + 1) * sizeof(*ports));
	if (!ports)
		return -ENOMEM;
	set->ports = ports;
	struct conn_rdma_port *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	int ret;
	p->rw = set;
	p->dev = dev;
	p->channel = ibv_create_comp_channel(dev->verbs);
	if (!p->channel) {
		ret = -errno;
		LOG_ERROR("ibv_create_comp_channel(%s) failed: %s", dev->name, strerror(errno));
		goto err_free;
	}
	ret = sock_set_nonblock(p->channel->fd);
	if (ret)
		goto err_channel;
	size_t bytes = (size_t)CONN_RDMA_TX_BUFS * dev->msg_size;
	if (posix_memalign((void **)&p->tx_slab, 4096, bytes)) {
		p->tx_slab = NULL;
		ret = -ENOMEM;
		goto err_channel;
	}
	p->tx_mr = ibv_reg_mr(dev->pd, p->tx_slab, bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!p->tx_mr) {
		ret = -errno;
		LOG_ERROR("ibv_reg_mr(%zu bytes of send buffers) on %s failed: %s", bytes,
			  dev->name, strerror(errno));
		goto err_slab;
	}
	for (unsigned i = 0; i < CONN_RDMA_TX_BUFS; i++)
		p->tx_free[i] = CONN_RDMA_TX_BUFS - 1 - i;
	p->tx_nfree = CONN_RDMA_TX_BUFS;
	ev_io_init(&p->io, port_on_event, p->channel->fd, EV_READ);
	p->io.data = p;
	ev_io_start(set->set->worker->loop, &p->io);
	set->ports[set->nports++] = p;
	return 0;

err_slab:
	free(p->tx_slab);
err_channel:
	ibv_destroy_comp_channel(p->channel);
err_free:
	free(p);
	return ret;
}

void rdma_worker_delete(struct rdma_worker **setp)
{
	if (!setp || !*setp)
		return;
	struct rdma_worker *set = *setp;
	struct ev_loop *loop = set->set->worker->loop;
	for (unsigned i = 0; i < set->nports; i++) {
		struct conn_rdma_port *p = set->ports[i];
		ev_io_stop(loop, &p->io);
		if (p->tx_nfree != CONN_RDMA_TX_BUFS)
			LOG_WARN("worker %u: %u send buffers on %s still in use",
				 set->set->worker->id, CONN_RDMA_TX_BUFS - p->tx_nfree,
				 p->dev->name);
		ibv_dereg_mr(p->tx_mr);
		free(p->tx_slab);
		if (ibv_destroy_comp_channel(p->channel))
			LOG_WARN("worker %u: ibv_destroy_comp_channel(%s) failed",
				 set->set->worker->id, p->dev->name);
		free(p);
	}
	free(set->ports);
	ev_io_stop(loop, &set->cm_io);
	rdma_destroy_event_channel(set->cm);
	free(set);
	*setp = NULL;
}
