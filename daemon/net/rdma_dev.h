/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_dev.h -- what the daemon sets up once per RDMA device
 *
 * One protection domain per device, and in it:
 *  - every namespace registered whole, with LOCAL_WRITE | MW_BIND only: the
 *    region's own rkey grants no remote access at all. A client reaches a
 *    volume only through a type-2 memory window bound to its own QP over
 *    that volume's range, made at VOLUME_OPEN and deallocated at close or
 *    disconnect (rdma_conn.h). One PD is what lets every connection share:
 *  - one shared receive queue (SRQ) of RDMA_DEV_SRQ_BUFS buffers of
 *    msg_size bytes, the receive buffers of every connection's messages and
 *    write notices. msg_size is the port's active MTU (at most 4096): every
 *    message is one packet, so a receive is never taken by a message that
 *    is cut short (a client killed mid-send) and then never completed.
 *
 * The fsdax refusal: Linux refuses long-term pins of pages of a file on a
 * DAX filesystem (ibv_reg_mr fails with EOPNOTSUPP), so such a namespace
 * cannot be served over RDMA; rdma_dev_check_namespaces() says so at start,
 * before any device is touched, and recommends devdax.
 *
 * Thread safety: made and deleted on the main thread while no worker uses
 * the device. Afterwards the verbs objects are used from every worker
 * (verbs calls on one object are thread-safe); rdma_dev_srq_repost() from
 * any thread.
 */
#ifndef RDAXD_RDMA_DEV_H
#define RDAXD_RDMA_DEV_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "store.h"

/* Shared receives per device: 1024 messages in flight from all clients before RNR backoff. */
#define RDMA_DEV_SRQ_BUFS 1024U

struct rdma_dev {
	struct rdma_dev *next;
	struct ibv_context *verbs; /* rdma_cm's context of the device (not ours to close) */
	char name[64];
	struct ibv_pd *pd;
	struct ibv_srq *srq;
	uint32_t msg_size;    /* bytes per message, both directions */
	uint32_t max_rd_atom; /* RDMA READs a client may have in flight per QP */
	uint32_t max_qp_wr;
	uint32_t nrx;	      /* receive buffers in the SRQ */
	atomic_int rx_posted; /* of those, posted now (nrx once every connection is gone) */
	uint8_t *rx_slab;     /* nrx * msg_size */
	struct ibv_mr *rx_mr;
	struct ibv_mr **ns_mr; /* by namespace id */
	unsigned nns;
};

/*
 * rdma_dev_check_namespaces -- refuse namespaces that cannot be registered
 * for RDMA: a file on a DAX filesystem (fsdax). @err gets one line naming
 * the namespace and recommending devdax. Returns 0 or -EOPNOTSUPP.
 */
int rdma_dev_check_namespaces(const struct store *store, char *err, size_t errlen);

/*
 * rdma_dev_new -- protection domain, SRQ with its buffers posted, every
 * namespace of @store registered; marks the namespaces pinned (persist.h).
 * @verbs: the device as rdma_cm knows it. Returns 0, or -errno with @err
 * saying which step failed (a namespace that cannot be registered names
 * itself and the fix).
 */
int rdma_dev_new(struct ibv_context *verbs, struct store *store, struct rdma_dev **out, char *err,
		 size_t errlen);

/*
 * rdma_dev_ns_register -- register every namespace of @store in @dev's PD
 * (LOCAL_WRITE | MW_BIND, see the top of this file) and mark it pinned,
 * replacing any registration @dev had (after a power cut remapped the
 * namespaces: powercut.h). Returns 0, or -errno with @err naming the
 * namespace and the fix.
 */
int rdma_dev_ns_register(struct rdma_dev *dev, struct store *store, char *err, size_t errlen);

/*
 * rdma_dev_ns_release -- deregister every namespace (no memory window may
 * be bound over them: no connection of the device may exist)
 */
void rdma_dev_ns_release(struct rdma_dev *dev);

/* rdma_dev_delete -- deregister and destroy (no connection may use it); accepts NULL */
void rdma_dev_delete(struct rdma_dev **devp);

/* rdma_dev_rx -- the receive buffer of SRQ work request @wr_id */
static inline uint8_t *rdma_dev_rx(const struct rdma_dev *dev, uint64_t wr_id)
{
	return dev->rx_slab + (size_t)wr_id * dev->msg_size;
}

/*
 * rdma_dev_srq_repost -- give receive buffers @ids[0..n) back to the SRQ.
 * A failure cannot be handed to anyone: it is logged and the buffers are
 * lost to the SRQ (the daemon serves on with fewer). Context: any thread.
 */
void rdma_dev_srq_repost(struct rdma_dev *dev, const uint64_t *ids, unsigned n);

/* rdma_dev_rx_taken -- @n receive completions came back from the SRQ (before reposting them) */
static inline void rdma_dev_rx_taken(struct rdma_dev *dev, unsigned n)
{
	atomic_fetch_sub(&dev->rx_posted, (int)n);
}

/* rdma_dev_ns_mr -- the registration of namespace @ns_id, NULL if none */
static inline struct ibv_mr *rdma_dev_ns_mr(const struct rdma_dev *dev, uint32_t ns_id)
{
	return ns_id < dev->nns ? dev->ns_mr[ns_id] : NULL;
}

#endif
