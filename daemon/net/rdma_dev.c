/* SPDX-License-Identifier: BSD-3-Clause */
/* rdma_dev.c -- protection domain, shared receive queue and namespace registrations */
#include "rdma_dev.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "errors.h"
#include "log.h"
#include "rdma_proto.h"

#ifndef STATX_ATTR_DAX
#define STATX_ATTR_DAX 0x00200000
#endif

/* ns_is_fsdax -- is the namespace a file on a DAX filesystem? */
static bool ns_is_fsdax(const struct ns *ns)
{
	const struct persist *p = &ns->persist;
	if (p->is_devdax || !p->is_regular_file)
		return false;
	/* libpmem's verdict on the mapping (AUTO mode only) */
	if (p->mode == PERSIST_AUTO && p->is_pmem)
		return true;
	/* the file's DAX state, whatever the mode (SIM maps a DAX file privately, still refused) */
	struct statx stx;
	if (p->fd >= 0 && statx(p->fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) == 0 &&
	    (stx.stx_attributes_mask & STATX_ATTR_DAX) && (stx.stx_attributes & STATX_ATTR_DAX))
		return true;
	return false;
}

int rdma_dev_check_namespaces(const struct store *store, char *err, size_t errlen)
{
	for (unsigned i = 0; i < store_namespace_count(store); i++) {
		const struct ns *ns = store_namespace(store, i);
		if (!ns_is_fsdax(ns))
			continue;
		rdax_seterr(
		    err, errlen,
		    "namespace %s is a file on a DAX filesystem (fsdax): Linux refuses to pin "
		    "its pages for RDMA (ibv_reg_mr fails with EOPNOTSUPP), so it cannot be "
		    "served over rdma://; use a devdax namespace (ndctl create-namespace -m "
		    "devdax, then --namespace /dev/daxX.Y) or serve this one over tcp:// only",
		    ns->path);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* mtu_bytes -- an ibv_mtu as bytes */
static uint32_t mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128U << mtu : 1024U;
}

/* dev_msg_size -- the smallest active MTU of the device's ports, within the protocol's bounds */
static uint32_t dev_msg_size(struct ibv_context *verbs, uint8_t nports)
{
	uint32_t size = RDMA_MSG_MAX;
	bool any = false;
	for (uint8_t port = 1; port <= nports; port++) {
		struct ibv_port_attr pa;
		if (ibv_query_port(verbs, port, &pa) != 0 || pa.state != IBV_PORT_ACTIVE)
			continue;
		uint32_t m = mtu_bytes(pa.active_mtu);
		if (m < size)
			size = m;
		any = true;
	}
	if (!any)
		size = 1024; /* no active port yet: the RoCE MTU of a 1500-byte netdev */
	return size < RDMA_MSG_MIN ? RDMA_MSG_MIN : size;
}

void rdma_dev_srq_repost(struct rdma_dev *dev, const uint64_t *ids, unsigned n)
{
	struct ibv_recv_wr wr[32];
	struct ibv_sge sge[32];
	while (n > 0) {
		unsigned k = n < 32 ? n : 32;
		for (unsigned i = 0; i < k; i++) {
			sge[i] = (struct ibv_sge){
			    .addr = (uintptr_t)rdma_dev_rx(dev, ids[i]),
			    .length = dev->msg_size,
			    .lkey = dev->rx_mr->lkey,
			};
			wr[i] = (struct ibv_recv_wr){
			    .wr_id = ids[i],
			    .next = i + 1 < k ? &wr[i + 1] : NULL,
			    .sg_list = &sge[i],
			    .num_sge = 1,
			};
		}
		struct ibv_recv_wr *bad = NULL;
		int ret = ibv_post_srq_recv(dev->srq, wr, &bad);
		unsigned lost = 0;
		if (ret)
			lost = bad ? (unsigned)(k - (unsigned)(bad - wr)) : k;
		atomic_fetch_add(&dev->rx_posted, (int)(k - lost));
		if (ret) {
			LOG_ERROR("%s: ibv_post_srq_recv(%u buffers) failed: %s; %u receive "
				  "buffers lost",
				  dev->name, k, strerror(ret), lost);
		}
		ids += k;
		n -= k;
	}
}

int rdma_dev_ns_register(struct rdma_dev *dev, struct store *store, char *err, size_t errlen)
{
	rdma_dev_ns_release(dev);
	dev->nns = store_namespace_count(store);
	dev->ns_mr = calloc(dev->nns ? dev->nns : 1, sizeof(*dev->ns_mr));
	if (!dev->ns_mr) {
		rdax_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < dev->nns; i++) {
		struct ns *ns = store_namespace(store, i);
		struct persist *p = &ns->persist;
		/* no remote access through the region itself: only through windows */
		dev->ns_mr[i] = ibv_reg_mr(dev->pd, p->base, p->size,
					   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
		if (!dev->ns_mr[i]) {
			int ret = -errno;
			if (ret == -EOPNOTSUPP)
				rdax_seterr(
				    err, errlen,
				    "rdma: cannot register namespace %s on %s: %s (a file on a "
				    "DAX filesystem cannot be pinned for RDMA; use a devdax "
				    "namespace)",
				    ns->path, dev->name, strerror(-ret));
			else
				rdax_seterr(
				    err, errlen,
				    "rdma: cannot register namespace %s (%zu bytes) on %s: %s%s",
				    ns->path, p->size, dev->name, strerror(-ret),
				    ret == -ENOMEM || ret == -EAGAIN
					? " (raise the memlock limit: ulimit -l, or LimitMEMLOCK= "
					  "in the unit)"
					: "");
			return ret;
		}
		p->pinned = true;
		LOG_INFO("rdma: registered namespace %s (%zu bytes) on %s", ns->path, p->size,
			 dev->name);
	}
	return 0;
}

/* setup_srq -- the shared receive queue with all its buffers posted; 0 or -errno */
static int setup_srq(struct rdma_dev *dev, const struct ibv_device_attr *da, char *err,
		     size_t errlen)
{
	dev->nrx = RDMA_DEV_SRQ_BUFS;
	if ((uint32_t)da->max_srq_wr < dev->nrx)
		dev->nrx = (uint32_t)da->max_srq_wr;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = dev->nrx, .max_sge = 1}};
	dev->srq = ibv_create_srq(dev->pd, &sa);
	if (!dev->srq) {
		int ret = -errno;
		rdax_seterr(err, errlen, "rdma: ibv_create_srq(%u) on %s failed: %s", dev->nrx,
			    dev->name, strerror(errno));
		return ret;
	}
	size_t bytes = (size_t)dev->nrx * dev->msg_size;
	if (posix_memalign((void **)&dev->rx_slab, 4096, bytes) != 0) {
		dev->rx_slab = NULL;
		rdax_seterr(err, errlen, "out of memory for %zu bytes of receive buffers", bytes);
		return -ENOMEM;
	}
	memset(dev->rx_slab, 0, bytes);
	dev->rx_mr = ibv_reg_mr(dev->pd, dev->rx_slab, bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!dev->rx_mr) {
		int ret = -errno;
		rdax_seterr(err, errlen,
			    "rdma: cannot register %zu bytes of receive buffers on %s: %s", bytes,
			    dev->name, strerror(errno));
		return ret;
	}
	uint64_t *ids = malloc(dev->nrx * sizeof(*ids));
	if (!ids) {
		rdax_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < dev->nrx; i++)
		ids[i] = i;
	rdma_dev_srq_repost(dev, ids, dev->nrx);
	free(ids);
	return 0;
}

int rdma_dev_new(struct ibv_context *verbs, struct store *store, struct rdma_dev **out, char *err,
		 size_t errlen)
{
	if (!verbs || !store || !out)
		return -EINVAL;
	struct rdma_dev *dev = calloc(1, sizeof(*dev));
	if (!dev) {
		rdax_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int ret;
	dev->verbs = verbs;
	snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(verbs->device));

	struct ibv_device_attr da;
	ret = ibv_query_device(verbs, &da);
	if (ret) {
		rdax_seterr(err, errlen, "rdma: ibv_query_device(%s) failed: %s", dev->name,
			    strerror(ret));
		ret = -ret;
		goto err_delete;
	}
	if (!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B)) {
		rdax_seterr(
		    err, errlen,
		    "rdma: device %s has no type-2B memory windows, which rdaxd needs to give "
		    "each connection access to exactly the volumes it opened",
		    dev->name);
		ret = -EOPNOTSUPP;
		goto err_delete;
	}
	dev->max_rd_atom = (uint32_t)da.max_qp_rd_atom;
	dev->max_qp_wr = (uint32_t)da.max_qp_wr;
	dev->msg_size = dev_msg_size(verbs, da.phys_port_cnt);

	dev->pd = ibv_alloc_pd(verbs);
	if (!dev->pd) {
		ret = -errno;
		rdax_seterr(err, errlen, "rdma: ibv_alloc_pd(%s) failed: %s", dev->name,
			    strerror(errno));
		goto err_delete;
	}
	ret = setup_srq(dev, &da, err, errlen);
	if (ret)
		goto err_delete;
	ret = rdma_dev_ns_register(dev, store, err, errlen);
	if (ret)
		goto err_delete;
	LOG_INFO("rdma: device %s ready: %u shared receives of %u bytes, %u RDMA READs per "
		 "connection",
		 dev->name, dev->nrx, dev->msg_size, dev->max_rd_atom);
	*out = dev;
	return 0;

err_delete:
	rdma_dev_delete(&dev);
	return ret;
}

void rdma_dev_ns_release(struct rdma_dev *dev)
{
	for (unsigned i = 0; dev->ns_mr && i < dev->nns; i++)
		if (dev->ns_mr[i] && ibv_dereg_mr(dev->ns_mr[i]))
			LOG_WARN("rdma: ibv_dereg_mr(namespace %u) on %s failed", i, dev->name);
	free(dev->ns_mr);
	dev->ns_mr = NULL;
	dev->nns = 0;
}

void rdma_dev_delete(struct rdma_dev **devp)
{
	if (!devp || !*devp)
		return;
	struct rdma_dev *dev = *devp;
	int posted = atomic_load(&dev->rx_posted);
	if (dev->srq && posted != (int)dev->nrx)
		LOG_WARN("rdma: %s: %d of %u shared receive buffers lost", dev->name,
			 (int)dev->nrx - posted, dev->nrx);
	rdma_dev_ns_release(dev);
	if (dev->srq && ibv_destroy_srq(dev->srq))
		LOG_WARN("rdma: ibv_destroy_srq on %s failed", dev->name);
	if (dev->rx_mr)
		ibv_dereg_mr(dev->rx_mr);
	free(dev->rx_slab);
	if (dev->pd && ibv_dealloc_pd(dev->pd))
		LOG_WARN("rdma: ibv_dealloc_pd on %s failed (objects still use it)", dev->name);
	free(dev);
	*devp = NULL;
}
