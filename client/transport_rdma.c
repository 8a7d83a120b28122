/* SPDX-License-Identifier: BSD-3-Clause */
/* transport_rdma.c -- one RC queue pair to rdaxd: message stream, one-sided data, credits */
#include "transport_rdma.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "log.h"
#include "rdma_auth.h"
#include "rdma_proto.h"

/* Send buffers (messages in flight) and the largest send window we use. */
#define TP_TX_BUFS 64U
/* Send queue: messages and notices within the window, grants, reads. */
#define TP_SQ_DEPTH (2 * TP_TX_BUFS + RDMA_TP_MAX_READS + 8)
/* A resolution step without a timeout of the caller's. */
#define TP_RESOLVE_MS 30000
/* Receive work requests are tagged: the opcode of a failed completion is undefined. */
#define TP_WRID_RECV (1ULL << 63)

enum sq_kind { SQ_MSG, SQ_GRANT, SQ_WRITE, SQ_READ };

/* A posted send-queue work request, in posting order (completions come in that order). */
struct sq_ent {
	enum sq_kind kind;
	uint32_t tx; /* SQ_MSG: send buffer */
	void *ctx;   /* SQ_WRITE, SQ_READ: the caller's */
	uint8_t *rbuf;
	uint32_t len;
	bool direct;		/* from or into a registered caller's buffer: no bounce */
	uint32_t b_off, b_span; /* bounce ring space */
};

/* A caller's buffer registered for one-sided operations (rdma_tp_register). */
struct tp_user_mr {
	uintptr_t addr;
	size_t len;
	struct ibv_mr *mr;
};

/*
 * Work requests gathered between rdma_tp_batch_begin() and _end(), posted in
 * one ibv_post_send: one doorbell for a write and the FSYNC behind it (with
 * soft-RoCE a doorbell is a system call; on hardware, an MMIO write).
 */
#define TP_BATCH_MAX 16

struct sq_batch {
	struct ibv_send_wr wr[TP_BATCH_MAX];
	struct ibv_sge sge[TP_BATCH_MAX];
	unsigned n;
	bool open;
};

/* A received message not yet read whole. */
struct rx_msg {
	uint32_t idx, len, pos;
};

struct rdma_tp {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t msg_size; /* of our messages; our receives are rx_size */
	uint32_t max_inline; /* messages up to this long are sent inline */
	uint32_t rx_size;
	struct rdma_credits cr;
	unsigned max_reads, reads_out;

	uint8_t *rx_slab;
	struct ibv_mr *rx_mr;
	struct rx_msg rxq[RDMA_TP_RECV_CREDITS];
	unsigned rxq_head, rxq_n;

	uint8_t *tx_slab;
	struct ibv_mr *tx_mr;
	uint32_t tx_free[TP_TX_BUFS];
	unsigned tx_nfree;

	uint8_t *bounce;
	struct ibv_mr *bounce_mr;
	struct tp_user_mr umr[RDMA_TP_USER_MRS];
	unsigned numr;
	uint64_t copied; /* bytes copied through the bounce ring */
	uint64_t durable_notices; /* durable notices posted: the next one's reply id (rdma_proto.h) */
	uint32_t direct_posted;	  /* one-sided writes and reads posted, not yet completed */
	uint32_t b_cap; /* 0: no one-sided operations */
	uint32_t b_head, b_tail, b_used;

	struct sq_ent sq[TP_SQ_DEPTH];
	uint64_t sq_seq; /* wr_id of the next post */
	unsigned sq_head, sq_n;
	struct sq_batch batch;

	bool connected;
	bool peer_closed;
	bool ignore_credits; /* rdma_tp_test_ignore_credits() */
	int error;
	char errmsg[256];
};

/* tp_fail -- the connection failed: remember the first reason; returns the code */
static int tp_fail(struct rdma_tp *tp, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int tp_fail(struct rdma_tp *tp, int code, const char *fmt, ...)
{
	if (tp->error)
		return tp->error;
	tp->error = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tp->errmsg, sizeof(tp->errmsg), fmt, ap);
	va_end(ap);
	LOG_DEBUG("rdma: connection failed: %s", tp->errmsg);
	return code;
}

const char *rdma_tp_error(const struct rdma_tp *tp)
{
	return tp->errmsg;
}

void rdma_tp_test_ignore_credits(struct rdma_tp *tp)
{
	tp->ignore_credits = true;
}

uint32_t rdma_tp_msg_size(const struct rdma_tp *tp)
{
	return tp->msg_size;
}

bool rdma_tp_has_input(const struct rdma_tp *tp)
{
	return tp->rxq_n > 0;
}

void rdma_tp_pollfds(const struct rdma_tp *tp, struct pollfd fds[2])
{
	fds[0] = (struct pollfd){.fd = tp->cc->fd, .events = POLLIN};
	fds[1] = (struct pollfd){.fd = tp->ch->fd, .events = POLLIN};
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* ---- receives ---- */

/* post_recv -- give receive buffer @idx back to the QP; 0 or -errno */
static int post_recv(struct rdma_tp *tp, uint32_t idx)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)(tp->rx_slab + (size_t)idx * tp->rx_size),
	    .length = tp->rx_size,
	    .lkey = tp->rx_mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = TP_WRID_RECV | idx, .sg_list = &sge, .num_sge = 1}, *bad;
	int ret = ibv_post_recv(tp->qp, &wr, &bad);
	return ret ? -ret : 0;
}

/* ---- send queue ---- */

/* sq_room -- may another work request be posted? */
static bool sq_room(const struct rdma_tp *tp)
{
	return tp->sq_n < TP_SQ_DEPTH;
}

/* sq_ring -- post the gathered batch; 0 or a failure code */
static int sq_ring(struct rdma_tp *tp)
{
	struct sq_batch *b = &tp->batch;
	if (b->n == 0)
		return 0;
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(tp->qp, &b->wr[0], &bad);
	b->n = 0;
	/*
	 * Their entries are recorded already and some may have gone: the
	 * connection fails as a whole (its completions never match again).
	 */
	return ret ? tp_fail(tp, -EIO, "ibv_post_send: %s", strerror(ret)) : 0;
}

/*
 * sq_post -- post @wr (one SGE at most) and remember @e for its completion;
 * in a batch, gather it to post at the batch's end. 0 or a failure code.
 */
static int sq_post(struct rdma_tp *tp, struct ibv_send_wr *wr, const struct sq_ent *e)
{
	wr->wr_id = tp->sq_seq;
	wr->send_flags |= IBV_SEND_SIGNALED;
	wr->next = NULL;
	struct sq_batch *b = &tp->batch;
	if (b->open) {
		if (b->n == TP_BATCH_MAX) {
			int ret = sq_ring(tp);
			if (ret)
				return ret;
		}
		b->wr[b->n] = *wr;
		if (wr->num_sge) {
			b->sge[b->n] = wr->sg_list[0];
			b->wr[b->n].sg_list = &b->sge[b->n];
		}
		if (b->n)
			b->wr[b->n - 1].next = &b->wr[b->n];
		b->n++;
	} else {
		struct ibv_send_wr *bad;
		int ret = ibv_post_send(tp->qp, wr, &bad);
		if (ret)
			return tp_fail(tp, -EIO, "ibv_post_send: %s", strerror(ret));
	}
	tp->sq[(tp->sq_head + tp->sq_n) % TP_SQ_DEPTH] = *e;
	tp->sq_n++;
	tp->sq_seq++;
	return 0;
}

void rdma_tp_batch_begin(struct rdma_tp *tp)
{
	tp->batch.open = true;
}

int rdma_tp_batch_end(struct rdma_tp *tp)
{
	tp->batch.open = false;
	int ret = sq_ring(tp);
	return ret ? ret : tp->error;
}

/* post_msg -- a SEND_WITH_IMM of @len bytes in send buffer @tx (none for a grant) */
static int post_msg(struct rdma_tp *tp, bool with_buf, uint32_t tx, uint32_t len)
{
	struct ibv_sge sge = {
	    .addr = with_buf ? (uintptr_t)(tp->tx_slab + (size_t)tx * tp->msg_size) : 0,
	    .length = len,
	    .lkey = tp->tx_mr->lkey,
	};
	/* beyond the window (tests only) the message is not counted: no credit to take */
	uint32_t grant = tp->ignore_credits && !rdma_credits_can_send(&tp->cr)
			     ? 0
			     : rdma_credits_send(&tp->cr, true);
	struct ibv_send_wr wr = {
	    .sg_list = &sge,
	    .num_sge = len ? 1 : 0,
	    .opcode = IBV_WR_SEND_WITH_IMM,
	    .send_flags = len && len <= tp->max_inline ? IBV_SEND_INLINE : 0,
	    .imm_data = htonl(grant),
	};
	struct sq_ent e = {.kind = with_buf ? SQ_MSG : SQ_GRANT, .tx = tx};
	return sq_post(tp, &wr, &e);
}

/* maybe_grant -- a grant-only message when the daemon runs low on our credits */
static void maybe_grant(struct rdma_tp *tp)
{
	if (tp->error || tp->peer_closed || !rdma_credits_grant_due(&tp->cr) || !sq_room(tp))
		return;
	post_msg(tp, false, 0, 0);
}

ssize_t rdma_tp_send(struct rdma_tp *tp, const struct iovec *iov, int n)
{
	if (tp->error)
		return tp->error;
	if (tp->peer_closed)
		return -ECONNRESET;
	size_t taken = 0;
	int i = 0;
	size_t off = 0; /* into iov[i] */
	while (i < n && (tp->ignore_credits || rdma_credits_can_send(&tp->cr)) &&
	       tp->tx_nfree > 0 && sq_room(tp)) {
		uint32_t tx = tp->tx_free[--tp->tx_nfree];
		uint8_t *buf = tp->tx_slab + (size_t)tx * tp->msg_size;
		uint32_t len = 0;
		while (i < n && len < tp->msg_size) {
			size_t k = iov[i].iov_len - off;
			if (k > tp->msg_size - len)
				k = tp->msg_size - len;
			memcpy(buf + len, (const uint8_t *)iov[i].iov_base + off, k);
			len += (uint32_t)k;
			off += k;
			if (off == iov[i].iov_len) {
				i++;
				off = 0;
			}
		}
		if (len == 0) {
			tp->tx_free[tp->tx_nfree++] = tx;
			break;
		}
		int ret = post_msg(tp, true, tx, len);
		if (ret) {
			tp->tx_free[tp->tx_nfree++] = tx;
			return ret;
		}
		taken += len;
	}
	return (ssize_t)taken;
}

ssize_t rdma_tp_recv(struct rdma_tp *tp, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len && tp->rxq_n > 0) {
		struct rx_msg *m = &tp->rxq[tp->rxq_head];
		uint32_t k = m->len - m->pos;
		if (k > len - got)
			k = (uint32_t)(len - got);
		memcpy((uint8_t *)buf + got, tp->rx_slab + (size_t)m->idx * tp->rx_size + m->pos,
		       k);
		m->pos += k;
		got += k;
		if (m->pos < m->len)
			break;
		/* read whole: the receive goes back, its credit to the daemon */
		tp->rxq_head = (tp->rxq_head + 1) % RDMA_TP_RECV_CREDITS;
		tp->rxq_n--;
		if (!tp->peer_closed && !tp->error) {
			int ret = post_recv(tp, m->idx);
			if (ret)
				return tp_fail(tp, -EIO, "ibv_post_recv: %s", strerror(-ret));
			rdma_credits_handled(&tp->cr, 1);
		}
	}
	if (got)
		return (ssize_t)got;
	if (tp->error)
		return tp->error;
	if (tp->peer_closed)
		return -ECONNRESET;
	return 0;
}

/* ---- one-sided operations ---- */

/* bounce_alloc -- @len contiguous bytes of the ring; 0 or -EAGAIN (full until completions) */
static int bounce_alloc(struct rdma_tp *tp, uint32_t len, uint32_t *off, uint32_t *span)
{
	const uint32_t cap = tp->b_cap;
	if (tp->b_used == 0)
		tp->b_head = tp->b_tail = 0;
	if (tp->b_used == cap)
		return -EAGAIN;
	if (tp->b_head >= tp->b_tail) {
		if (cap - tp->b_head >= len) {
			*off = tp->b_head;
			*span = len;
		} else if (tp->b_tail >= len) {
			*off = 0; /* the end of the ring is skipped */
			*span = cap - tp->b_head + len;
		} else {
			return -EAGAIN;
		}
	} else if (tp->b_tail - tp->b_head >= len) {
		*off = tp->b_head;
		*span = len;
	} else {
		return -EAGAIN;
	}
	tp->b_head = *off + len;
	tp->b_used += *span;
	return 0;
}

/* bounce_free -- the oldest allocation is done (completions come in posting order) */
static void bounce_free(struct rdma_tp *tp, uint32_t off, uint32_t len, uint32_t span)
{
	tp->b_tail = off + len;
	tp->b_used -= span;
}

/* user_mr -- the registration holding [@p, @p + @len) whole, or NULL (the bounce ring then) */
static const struct ibv_mr *user_mr(const struct rdma_tp *tp, const void *p, uint32_t len)
{
	uintptr_t a = (uintptr_t)p;
	for (unsigned i = 0; i < tp->numr; i++)
		if (a >= tp->umr[i].addr && a - tp->umr[i].addr <= tp->umr[i].len &&
		    len <= tp->umr[i].len - (a - tp->umr[i].addr))
			return tp->umr[i].mr;
	return NULL;
}

int rdma_tp_register(struct rdma_tp *tp, void *addr, size_t len)
{
	if (tp->numr == RDMA_TP_USER_MRS)
		return -ENOSPC;
	struct ibv_mr *mr = ibv_reg_mr(tp->pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return errno ? -errno : -ENOMEM;
	tp->umr[tp->numr++] = (struct tp_user_mr){(uintptr_t)addr, len, mr};
	return 0;
}

uint64_t rdma_tp_copied(const struct rdma_tp *tp)
{
	return tp->copied;
}

uint64_t rdma_tp_durable_notices(const struct rdma_tp *tp)
{
	return tp->durable_notices;
}

uint32_t rdma_tp_direct_posted(const struct rdma_tp *tp)
{
	return tp->direct_posted;
}

void rdma_tp_unregister(struct rdma_tp *tp, void *addr)
{
	for (unsigned i = 0; i < tp->numr; i++)
		if (tp->umr[i].addr == (uintptr_t)addr) {
			if (ibv_dereg_mr(tp->umr[i].mr))
				LOG_WARN("rdma: ibv_dereg_mr of a caller's buffer failed");
			tp->umr[i] = tp->umr[--tp->numr];
			return;
		}
}

/*
 * post_rdma -- a WRITE_WITH_IMM or a READ: straight from or into a
 * registered caller's buffer, else through the bounce ring
 */
static int post_rdma(struct rdma_tp *tp, bool write, bool durable, const struct rdma_tp_vol *vol,
		     uint64_t off, const void *wbuf, uint8_t *rbuf, uint32_t len, void *ctx)
{
	if (tp->error)
		return tp->error;
	if (tp->peer_closed)
		return -ECONNRESET;
	if (len == 0 || len > RDMA_TP_PART_MAX || len > tp->b_cap)
		return -EINVAL;
	if (write && !rdma_imm_shift_valid(vol->imm_shift))
		return -EINVAL;
	if (!sq_room(tp) || (write && !rdma_credits_can_send(&tp->cr)) ||
	    (!write && tp->reads_out >= tp->max_reads))
		return -EAGAIN;
	const void *user = write ? wbuf : rbuf;
	const struct ibv_mr *umr = user_mr(tp, user, len);
	uint32_t b_off = 0, b_span = 0;
	if (!umr && bounce_alloc(tp, len, &b_off, &b_span))
		return -EAGAIN;
	if (write && !umr) {
		memcpy(tp->bounce + b_off, wbuf, len);
		tp->copied += len;
	}
	struct ibv_sge sge = {
	    .addr = umr ? (uintptr_t)user : (uintptr_t)(tp->bounce + b_off),
	    .length = len,
	    .lkey = umr ? umr->lkey : tp->bounce_mr->lkey,
	};
	struct ibv_send_wr wr = {
	    .sg_list = &sge,
	    .num_sge = 1,
	    .opcode = write ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_READ,
	    /* a write after a read still in flight waits for it: the read sees older data */
	    .send_flags = write && tp->reads_out ? IBV_SEND_FENCE : 0,
	    .wr.rdma = {.remote_addr = vol->remote_addr + off, .rkey = vol->rkey},
	};
	if (write)
		wr.imm_data = htonl(rdma_imm_encode(vol->imm_base, vol->imm_shift, off, len) |
				    (durable ? RDMA_IMM_DURABLE : 0));
	struct sq_ent e = {
	    .kind = write ? SQ_WRITE : SQ_READ,
	    .ctx = ctx,
	    .rbuf = rbuf,
	    .len = len,
	    .direct = umr != NULL,
	    .b_off = b_off,
	    .b_span = b_span,
	};
	int ret = sq_post(tp, &wr, &e);
	if (ret) {
		if (!umr) {
			/* the newest allocation: undo it */
			tp->b_used -= b_span;
			tp->b_head = b_off;
		}
		return ret;
	}
	if (write)
		rdma_credits_send(&tp->cr, false); /* a notice takes a receive, grants nothing */
	else
		tp->reads_out++;
	if (durable)
		tp->durable_notices++;
	tp->direct_posted++;
	return 0;
}

int rdma_tp_write(struct rdma_tp *tp, const struct rdma_tp_vol *vol, uint64_t off, const void *buf,
		  uint32_t len, void *ctx)
{
	return post_rdma(tp, true, false, vol, off, buf, NULL, len, ctx);
}

int rdma_tp_write_durable(struct rdma_tp *tp, const struct rdma_tp_vol *vol, uint64_t off,
			  const void *buf, uint32_t len, uint64_t *reply_id)
{
	uint64_t n = tp->durable_notices;
	int ret = post_rdma(tp, true, true, vol, off, buf, NULL, len, NULL);
	if (ret == 0)
		*reply_id = rdma_durable_reply_id(n);
	return ret;
}

int rdma_tp_read(struct rdma_tp *tp, const struct rdma_tp_vol *vol, uint64_t off, void *buf,
		 uint32_t len, void *ctx)
{
	return post_rdma(tp, false, false, vol, off, NULL, buf, len, ctx);
}

int rdma_tp_test_empty_notice(struct rdma_tp *tp, const struct rdma_tp_vol *vol, uint32_t imm)
{
	if (tp->error)
		return tp->error;
	if (!sq_room(tp) || !rdma_credits_can_send(&tp->cr))
		return -EAGAIN;
	struct ibv_send_wr wr = {
	    .num_sge = 0,
	    .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
	    .imm_data = htonl(imm),
	    .wr.rdma = {.remote_addr = vol->remote_addr, .rkey = vol->rkey},
	};
	struct sq_ent e = {.kind = SQ_WRITE, .direct = true};
	int ret = sq_post(tp, &wr, &e);
	if (ret == 0) {
		rdma_credits_send(&tp->cr, false);
		tp->direct_posted++;
	}
	return ret;
}

/* ---- completions and events ---- */

/* status_code -- the code of a failed completion */
static int status_code(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_WR_FLUSH_ERR:
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ECONNRESET;
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	default:
		return -EIO;
	}
}

/* handle_send_wc -- the oldest send-queue request completed */
static void handle_send_wc(struct rdma_tp *tp, const struct ibv_wc *wc,
			   void (*done)(void *, void *, int), void *arg)
{
	if (tp->sq_n == 0) {
		tp_fail(tp, -EIO, "a send completion with nothing posted");
		return;
	}
	struct sq_ent e = tp->sq[tp->sq_head];
	tp->sq_head = (tp->sq_head + 1) % TP_SQ_DEPTH;
	tp->sq_n--;
	switch (e.kind) {
	case SQ_MSG:
		tp->tx_free[tp->tx_nfree++] = e.tx;
		break;
	case SQ_GRANT:
		break;
	case SQ_READ:
		tp->reads_out--;
		if (wc->status == IBV_WC_SUCCESS && !e.direct) {
			memcpy(e.rbuf, tp->bounce + e.b_off, e.len);
			tp->copied += e.len;
		}
		/* fall through */
	case SQ_WRITE:
		tp->direct_posted--;
		if (!e.direct)
			bounce_free(tp, e.b_off, e.len, e.b_span);
		if (wc->status == IBV_WC_SUCCESS && done)
			done(arg, e.ctx, 0);
		break;
	}
	if (wc->status != IBV_WC_SUCCESS && !tp->peer_closed)
		tp_fail(tp, status_code(wc->status), "RDMA %s failed: %s",
			e.kind == SQ_WRITE  ? "write"
			: e.kind == SQ_READ ? "read"
					    : "send",
			ibv_wc_status_str(wc->status));
}

/* handle_recv_wc -- a message of the daemon arrived */
static void handle_recv_wc(struct rdma_tp *tp, const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS) {
		if (!tp->peer_closed)
			tp_fail(tp, status_code(wc->status), "receive failed: %s",
				ibv_wc_status_str(wc->status));
		return;
	}
	uint32_t grant = (wc->wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc->imm_data) : 0;
	if (rdma_credits_received(&tp->cr, grant)) {
		if (!tp->ignore_credits) {
			tp_fail(tp, -EPROTO, "the daemon broke the credit rules (grant %u)", grant);
			return;
		}
		/* (tests) sends beyond the window went uncounted: grants for them do not add up */
		tp->cr.recv_unreturned++;
	}
	uint32_t idx = (uint32_t)(wc->wr_id & ~TP_WRID_RECV);
	if (wc->byte_len == 0) {
		/* a grant only: the receive goes back at once */
		int ret = post_recv(tp, idx);
		if (ret)
			tp_fail(tp, -EIO, "ibv_post_recv: %s", strerror(-ret));
		rdma_credits_handled(&tp->cr, 1);
		return;
	}
	struct rx_msg *m = &tp->rxq[(tp->rxq_head + tp->rxq_n) % RDMA_TP_RECV_CREDITS];
	*m = (struct rx_msg){.idx = idx, .len = wc->byte_len, .pos = 0};
	tp->rxq_n++;
}

/* poll_cq -- everything the CQ holds; the number of completions */
static int poll_cq(struct rdma_tp *tp, void (*done)(void *, void *, int), void *arg)
{
	struct ibv_wc wc[16];
	int n, total = 0;
	while ((n = ibv_poll_cq(tp->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id & TP_WRID_RECV)
				handle_recv_wc(tp, &wc[i]);
			else
				handle_send_wc(tp, &wc[i], done, arg);
		}
		total += n;
	}
	if (n < 0)
		tp_fail(tp, -EIO, "ibv_poll_cq failed");
	return total;
}

/* cm_events -- the connection's rdma_cm events (a disconnect) */
static void cm_events(struct rdma_tp *tp, void (*done)(void *, void *, int), void *arg)
{
	struct rdma_cm_event *e;
	while (rdma_get_cm_event(tp->ch, &e) == 0) {
		enum rdma_cm_event_type type = e->event;
		rdma_ack_cm_event(e);
		switch (type) {
		case RDMA_CM_EVENT_DISCONNECTED:
			/* what the daemon sent before it left is in the CQ: take it first */
			poll_cq(tp, done, arg);
			tp->peer_closed = true;
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			tp_fail(tp, -ENODEV, "the RDMA device was removed");
			break;
		default:
			break;
		}
	}
}

int rdma_tp_progress(struct rdma_tp *tp, void (*done)(void *arg, void *ctx, int status), void *arg)
{
	struct ibv_cq *cq;
	void *ctx;
	/* the channel is non-blocking: take the events that woke us */
	while (ibv_get_cq_event(tp->cc, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
	bool was_closed = tp->peer_closed;
	int n = poll_cq(tp, done, arg);
	cm_events(tp, done, arg);
	maybe_grant(tp);
	if (tp->error)
		return tp->error;
	return n + (tp->peer_closed != was_closed);
}

int rdma_tp_poll(struct rdma_tp *tp, void (*done)(void *arg, void *ctx, int status), void *arg)
{
	int n = poll_cq(tp, done, arg);
	maybe_grant(tp);
	if (tp->error)
		return tp->error;
	return n;
}

bool rdma_tp_arm(struct rdma_tp *tp, void (*done)(void *arg, void *ctx, int status), void *arg)
{
	if (ibv_req_notify_cq(tp->cq, 0))
		tp_fail(tp, -EIO, "ibv_req_notify_cq failed");
	/* completions that came before the request raise no event: look once more */
	int n = poll_cq(tp, done, arg);
	return n > 0 || tp->error != 0;
}

/* ---- connecting ---- */

/* wait_event -- the next rdma_cm event within @timeout_ms (-1: none); 0 or -errno */
static int wait_event(struct rdma_tp *tp, int timeout_ms, struct rdma_cm_event **out)
{
	int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : -1;
	for (;;) {
		if (rdma_get_cm_event(tp->ch, out) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		int wait = -1;
		if (deadline >= 0) {
			int64_t left = deadline - now_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			wait = (int)left;
		}
		struct pollfd p = {.fd = tp->ch->fd, .events = POLLIN};
		if (poll(&p, 1, wait) < 0 && errno != EINTR)
			return -errno;
	}
}

/* expect_event -- wait for @want; a failure event or status becomes an error with @err */
static int expect_event(struct rdma_tp *tp, enum rdma_cm_event_type want, int timeout_ms,
			struct rdma_cm_data *peer, const char *what, char *err, size_t errlen)
{
	struct rdma_cm_event *e;
	int ret = wait_event(tp, timeout_ms, &e);
	if (ret) {
		snprintf(err, errlen, "%s: %s", what,
			 ret == -ETIMEDOUT ? "no answer in time" : strerror(-ret));
		return ret;
	}
	enum rdma_cm_event_type got = e->event;
	int status = e->status;
	if (got == want && peer)
		ret = rdma_cm_data_decode(e->param.conn.private_data,
					  e->param.conn.private_data_len, peer);
	/* a daemon that refuses with a reason (a connection limit) says it in the rejection */
	char reason[RDMA_REJECT_REASON_MAX];
	uint32_t refused =
	    got == RDMA_CM_EVENT_REJECTED
		? rdma_reject_decode(e->param.conn.private_data, e->param.conn.private_data_len,
				     reason, sizeof(reason))
		: 0;
	rdma_ack_cm_event(e);
	if (got == want) {
		if (ret)
			snprintf(err, errlen,
				 "%s: the server is not an rdax daemon of this version", what);
		return ret ? -EPROTO : 0;
	}
	switch (got) {
	case RDMA_CM_EVENT_REJECTED:
		if (refused) {
			snprintf(err, errlen, "%s: refused by the daemon: %s", what, reason);
			return refused < 4096 ? -(int)refused : -ECONNREFUSED;
		}
		snprintf(err, errlen, "%s: refused (nothing listens there, or not an rdax daemon)",
			 what);
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
		snprintf(err, errlen, "%s: no RDMA device reaches this address (status %d)", what,
			 status);
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		snprintf(err, errlen, "%s: unreachable (status %d)", what, status);
		return -EHOSTUNREACH;
	default:
		snprintf(err, errlen, "%s: %s (status %d)", what, rdma_event_str(got), status);
		return status < 0 ? status : -ECONNREFUSED;
	}
}

/* mtu_bytes -- an ibv_mtu as bytes */
static uint32_t mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128U << mtu : 1024U;
}

/* alloc_mr -- @bytes of page-aligned memory registered on the PD; 0 or -errno */
static int alloc_mr(struct rdma_tp *tp, size_t bytes, uint8_t **mem, struct ibv_mr **mr)
{
	if (posix_memalign((void **)mem, 4096, bytes)) {
		*mem = NULL;
		return -ENOMEM;
	}
	memset(*mem, 0, bytes);
	*mr = ibv_reg_mr(tp->pd, *mem, bytes, IBV_ACCESS_LOCAL_WRITE);
	return *mr ? 0 : -errno;
}

/* setup_qp -- PD, CQ, QP and registered buffers once the route is known; 0 or -errno */
static int setup_qp(struct rdma_tp *tp, char *err, size_t errlen)
{
	struct ibv_context *verbs = tp->id->verbs;
	struct ibv_port_attr pa;
	tp->rx_size = 1024;
	if (ibv_query_port(verbs, tp->id->port_num, &pa) == 0)
		tp->rx_size = mtu_bytes(pa.active_mtu);
	if (tp->rx_size < RDMA_MSG_MIN)
		tp->rx_size = RDMA_MSG_MIN;
	if (tp->rx_size > RDMA_MSG_MAX)
		tp->rx_size = RDMA_MSG_MAX;
	struct ibv_device_attr da;
	tp->max_reads = RDMA_TP_MAX_READS;
	if (ibv_query_device(verbs, &da) == 0 && (unsigned)da.max_qp_init_rd_atom < tp->max_reads)
		tp->max_reads = (unsigned)da.max_qp_init_rd_atom;

	int ret;
	tp->pd = ibv_alloc_pd(verbs);
	tp->cc = tp->pd ? ibv_create_comp_channel(verbs) : NULL;
	if (!tp->pd || !tp->cc) {
		ret = -errno;
		snprintf(err, errlen, "rdma: cannot allocate a protection domain or channel: %s",
			 strerror(errno));
		return ret;
	}
	ret = set_nonblock(tp->cc->fd);
	if (ret)
		return ret;
	int cqe = TP_SQ_DEPTH + RDMA_TP_RECV_CREDITS + 8;
	tp->cq = ibv_create_cq(verbs, cqe, tp, tp->cc, 0);
	if (!tp->cq) {
		ret = -errno;
		snprintf(err, errlen, "rdma: ibv_create_cq(%d): %s", cqe, strerror(errno));
		return ret;
	}
	struct ibv_qp_init_attr qa = {
	    .send_cq = tp->cq,
	    .recv_cq = tp->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = TP_SQ_DEPTH,
		    .max_recv_wr = RDMA_TP_RECV_CREDITS,
		    .max_send_sge = 1,
		    .max_recv_sge = 1},
	};
	/* inline sends if the device has them (RDMA_INLINE_MAX), else none */
	qa.cap.max_inline_data = RDMA_INLINE_MAX;
	if (rdma_create_qp(tp->id, tp->pd, &qa)) {
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(tp->id, tp->pd, &qa)) {
			ret = -errno;
			snprintf(err, errlen, "rdma: rdma_create_qp: %s", strerror(errno));
			return ret;
		}
	}
	tp->max_inline = qa.cap.max_inline_data < RDMA_INLINE_MAX ? qa.cap.max_inline_data
								   : RDMA_INLINE_MAX;
	tp->qp = tp->id->qp;
	ret = alloc_mr(tp, (size_t)RDMA_TP_RECV_CREDITS * tp->rx_size, &tp->rx_slab, &tp->rx_mr);
	if (ret == 0)
		ret = alloc_mr(tp, (size_t)TP_TX_BUFS * RDMA_MSG_MAX, &tp->tx_slab, &tp->tx_mr);
	if (ret == 0 && tp->b_cap)
		ret = alloc_mr(tp, tp->b_cap, &tp->bounce, &tp->bounce_mr);
	if (ret) {
		snprintf(err, errlen, "rdma: cannot register buffers: %s%s", strerror(-ret),
			 ret == -ENOMEM || ret == -EAGAIN ? " (memlock limit: ulimit -l)" : "");
		return ret;
	}
	for (uint32_t i = 0; i < TP_TX_BUFS; i++)
		tp->tx_free[i] = TP_TX_BUFS - 1 - i;
	tp->tx_nfree = TP_TX_BUFS;
	for (uint32_t i = 0; i < RDMA_TP_RECV_CREDITS; i++) {
		ret = post_recv(tp, i);
		if (ret) {
			snprintf(err, errlen, "rdma: ibv_post_recv: %s", strerror(-ret));
			return ret;
		}
	}
	if (ibv_req_notify_cq(tp->cq, 0))
		return -EIO;
	return 0;
}

int rdma_tp_connect(const char *host, const char *port, int timeout_ms, uint32_t bounce_bytes,
		    struct rdma_tp **out, char *err, size_t errlen)
{
	return rdma_tp_connect_auth(host, port, timeout_ms, bounce_bytes, NULL, out, err, errlen);
}

int rdma_tp_connect_auth(const char *host, const char *port, int timeout_ms, uint32_t bounce_bytes,
			 const struct rdma_tp_auth *auth, struct rdma_tp **out, char *err,
			 size_t errlen)
{
	struct rdma_tp *tp = calloc(1, sizeof(*tp));
	if (!tp) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	int ret;
	int step_ms = timeout_ms > 0 ? timeout_ms : TP_RESOLVE_MS;
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res = NULL;
	tp->ch = rdma_create_event_channel();
	if (!tp->ch) {
		ret = errno == ENODEV || errno == ENOENT || !errno ? -ENODEV : -errno;
		snprintf(err, errlen, "rdma: no RDMA devices (%s)", strerror(-ret));
		goto err_delete;
	}
	ret = set_nonblock(tp->ch->fd);
	if (ret)
		goto err_delete;
	if (rdma_getaddrinfo(host, port, &hints, &res)) {
		ret = -EHOSTUNREACH;
		snprintf(err, errlen, "resolve %s: %s", host, strerror(errno));
		goto err_delete;
	}
	if (rdma_create_id(tp->ch, &tp->id, tp, RDMA_PS_TCP)) {
		ret = -errno;
		snprintf(err, errlen, "rdma_create_id: %s", strerror(errno));
		goto err_delete;
	}
	if (rdma_resolve_addr(tp->id, res->ai_src_addr, res->ai_dst_addr, step_ms)) {
		ret = -errno;
		snprintf(err, errlen, "resolve %s:%s: %s", host, port, strerror(errno));
		goto err_delete;
	}
	ret = expect_event(tp, RDMA_CM_EVENT_ADDR_RESOLVED, step_ms + 1000, NULL, "resolve address",
			   err, errlen);
	if (ret)
		goto err_delete;
	if (rdma_resolve_route(tp->id, step_ms)) {
		ret = -errno;
		snprintf(err, errlen, "resolve route to %s: %s", host, strerror(errno));
		goto err_delete;
	}
	ret = expect_event(tp, RDMA_CM_EVENT_ROUTE_RESOLVED, step_ms + 1000, NULL, "resolve route",
			   err, errlen);
	if (ret)
		goto err_delete;
	tp->b_cap = bounce_bytes;
	ret = setup_qp(tp, err, errlen);
	if (ret)
		goto err_delete;

	uint8_t pdata[RDMA_CM_DATA_SIZE + RDMA_AUTH_SIZE];
	struct rdma_cm_data mine =
				{
				    .magic = RDMA_CM_MAGIC,
				    .version = RDMA_CM_VERSION,
				    .credits = RDMA_TP_RECV_CREDITS,
				    .msg_size = tp->rx_size,
				},
			    theirs;
	rdma_cm_data_encode(&mine, pdata);
	if (auth) {
		/* a fresh nonce, and the time: a replay of this request is refused */
		uint8_t nonce[8];
		if (gnutls_rnd(GNUTLS_RND_NONCE, nonce, sizeof(nonce)) < 0 ||
		    rdma_auth_sign(pdata, auth->user, auth->key, auth->key_len,
				   (uint32_t)time(NULL), nonce, pdata + RDMA_CM_DATA_SIZE)) {
			ret = -EIO;
			snprintf(err, errlen, "rdma: cannot sign the connection request");
			goto err_delete;
		}
	}
	struct rdma_conn_param cp = {
	    .private_data = pdata,
	    .private_data_len = auth ? sizeof(pdata) : RDMA_CM_DATA_SIZE,
	    .initiator_depth = (uint8_t)tp->max_reads,
	    .responder_resources = 0,
	    .retry_count = 7,
	    .rnr_retry_count =
		7, /* the daemon's shared receives may run short: wait, do not fail */
	};
	if (rdma_connect(tp->id, &cp)) {
		ret = -errno;
		snprintf(err, errlen, "rdma_connect to %s:%s: %s", host, port, strerror(errno));
		goto err_delete;
	}
	ret = expect_event(tp, RDMA_CM_EVENT_ESTABLISHED, timeout_ms > 0 ? timeout_ms : -1, &theirs,
			   "connect", err, errlen);
	if (ret)
		goto err_delete;
	tp->connected = true;
	uint32_t window = theirs.credits < TP_TX_BUFS ? theirs.credits : TP_TX_BUFS;
	rdma_credits_init(&tp->cr, window, RDMA_TP_RECV_CREDITS);
	tp->msg_size = theirs.msg_size < tp->rx_size ? theirs.msg_size : tp->rx_size;
	rdma_freeaddrinfo(res);
	LOG_DEBUG("rdma: connected to %s:%s (messages of %u bytes, %u credits, %u reads)", host,
		  port, tp->msg_size, window, tp->max_reads);
	*out = tp;
	return 0;

err_delete:
	if (res)
		rdma_freeaddrinfo(res);
	rdma_tp_delete(&tp);
	return ret;
}

void rdma_tp_abort(struct rdma_tp *tp)
{
	if (!tp)
		return;
	if (tp->qp) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		int ret = ibv_modify_qp(tp->qp, &a, IBV_QP_STATE);
		if (ret)
			LOG_WARN("rdma: ibv_modify_qp(ERR) failed: %s", strerror(ret));
	}
	tp_fail(tp, -ECONNABORTED, "aborted by its owner");
}

void rdma_tp_delete(struct rdma_tp **tpp)
{
	if (!tpp || !*tpp)
		return;
	struct rdma_tp *tp = *tpp;
	if (tp->connected && !tp->peer_closed)
		rdma_disconnect(tp->id);
	if (tp->qp)
		rdma_destroy_qp(tp->id);
	if (tp->cq) {
		struct ibv_cq *cq;
		void *ctx;
		while (ibv_get_cq_event(tp->cc, &cq, &ctx) == 0)
			ibv_ack_cq_events(cq, 1);
		ibv_destroy_cq(tp->cq);
	}
	if (tp->rx_mr)
		ibv_dereg_mr(tp->rx_mr);
	if (tp->tx_mr)
		ibv_dereg_mr(tp->tx_mr);
	if (tp->bounce_mr)
		ibv_dereg_mr(tp->bounce_mr);
	for (unsigned i = 0; i < tp->numr; i++)
		ibv_dereg_mr(tp->umr[i].mr);
	free(tp->rx_slab);
	free(tp->tx_slab);
	free(tp->bounce);
	if (tp->cc)
		ibv_destroy_comp_channel(tp->cc);
	if (tp->pd)
		ibv_dealloc_pd(tp->pd);
	if (tp->id)
		rdma_destroy_id(tp->id);
	if (tp->ch)
		rdma_destroy_event_channel(tp->ch);
	free(tp);
	*tpp = NULL;
}
