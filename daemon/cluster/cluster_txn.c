/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster_txn.c -- the safety-relevant changes of a volume key, as transactions */
#include "cluster_txn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "faults.h"

/* Compare failures in a row before giving up (each means someone else changed the key). */
#define TXN_RETRIES 8

/* leader_is -- the leader key's value names @primary */
static bool leader_is(const struct etcd_kv *kv, const char *primary)
{
	char want[CLUSTER_NAME_MAX + 16];
	snprintf(want, sizeof(want), "\"node\":\"%s\"", primary);
	return kv->value && strstr(kv->value, want) != NULL;
}

int cluster_isr_change(struct etcd_client *e, const char *cluster, const char *volume,
		       const char *primary, uint64_t epoch, const char *node, bool add,
		       struct cluster_volume_rec *out, char *err, size_t errlen)
{
	char vkey[CLUSTER_KEY_MAX], lkey[CLUSTER_KEY_MAX], why[256];
	if (cluster_key(vkey, sizeof(vkey), cluster, "volumes", volume, NULL) < 0 ||
	    cluster_key(lkey, sizeof(lkey), cluster, "volumes", volume, "leader", NULL) < 0)
		return -EINVAL;
	for (unsigned attempt = 0; attempt < TXN_RETRIES; attempt++) {
		struct etcd_range_result rv, rl;
		int ret = etcd_get(e, vkey, false, &rv);
		if (ret) {
			rdax_seterr(err, errlen, "%s", etcd_client_last_error(e));
			return ret;
		}
		if ((ret = etcd_get(e, lkey, false, &rl))) {
			etcd_range_result_free(&rv);
			rdax_seterr(err, errlen, "%s", etcd_client_last_error(e));
			return ret;
		}
		struct cluster_volume_rec v;
		ret = 0;
		if (rv.count != 1) {
			rdax_seterr(err, errlen, "no volume %s", volume);
			ret = -ENOENT;
		} else if (cluster_volume_decode(rv.kvs[0].value, rv.kvs[0].value_len, &v, why,
						 sizeof(why))) {
			rdax_seterr(err, errlen, "volume %s: unusable key: %s", volume, why);
			ret = -EINVAL;
		} else if (v.state == CLUSTER_VOL_DELETING) {
			rdax_seterr(err, errlen, "volume %s is being deleted", volume);
			ret = -ESTALE;
		} else if (strcmp(v.primary, primary) != 0 || v.epoch != epoch || rl.count != 1 ||
			   !leader_is(&rl.kvs[0], primary)) {
			rdax_seterr(err, errlen,
				    "volume %s: primary %s epoch %" PRIu64
				    " in etcd, not %s epoch %" PRIu64 " (or no leader key of it)",
				    volume, v.primary, v.epoch, primary, epoch);
			ret = -ESTALE;
		} else if (!cluster_name_in(v.replicas, v.nreplicas, node) ||
			   strcmp(node, primary) == 0) {
			rdax_seterr(err, errlen, "volume %s: %s is not another replica", volume,
				    node);
			ret = -EINVAL;
		}
		int64_t vrev = rv.count ? rv.kvs[0].mod_revision : 0;
		int64_t lrev = rl.count ? rl.kvs[0].create_revision : 0;
		etcd_range_result_free(&rv);
		etcd_range_result_free(&rl);
		if (ret)
			return ret;
		bool in = cluster_name_in(v.isr, v.nisr, node);
		if (in == add) { /* already so */
			if (out)
				*out = v;
			return 0;
		}
		struct cluster_volume_rec n = v;
		if (add) {
			snprintf(n.isr[n.nisr++], CLUSTER_NAME_MAX + 1, "%s", node);
		} else {
			if (v.nisr - 1 < v.min_replicas) {
				rdax_seterr(
				    err, errlen,
				    "volume %s: removing %s would leave %u in sync, fewer than "
				    "min_replicas %u",
				    volume, node, v.nisr - 1, v.min_replicas);
				return -EDQUOT;
			}
			n.nisr = 0;
			for (unsigned i = 0; i < v.nisr; i++)
				if (strcmp(v.isr[i], node) != 0)
					snprintf(n.isr[n.nisr++], CLUSTER_NAME_MAX + 1, "%s",
						 v.isr[i]);
		}
		char *json;
		if (cluster_volume_encode(&n, &json))
			return -ENOMEM;
		struct etcd_cmp cmps[] = {
		    {.key = vkey, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .number = vrev},
		    {.key = lkey,
		     .target = ETCD_CMP_CREATE,
		     .result = ETCD_CMP_EQUAL,
		     .number = lrev},
		};
		struct etcd_op put = {
		    .type = ETCD_OP_PUT, .key = vkey, .value = json, .value_len = strlen(json)};
		struct etcd_txn_result t;
		ret = etcd_txn(e, cmps, 2, &put, 1, NULL, 0, &t);
		free(json);
		if (ret) {
			rdax_seterr(err, errlen, "%s", etcd_client_last_error(e));
			return ret;
		}
		bool ok = t.succeeded;
		etcd_txn_result_free(&t);
		if (ok) {
			if (out)
				*out = n;
			return 0;
		}
		/* the key changed under us: read again and decide again */
	}
	rdax_seterr(err, errlen, "volume %s: the key kept changing (%d tries)", volume,
		    TXN_RETRIES);
	return -EAGAIN;
}

int cluster_failover(struct etcd_client *e, const char *cluster, const char *volume,
		     const char *node, int64_t lease, uint64_t incarnation,
		     struct cluster_volume_rec *out, char *err, size_t errlen)
{
	char vkey[CLUSTER_KEY_MAX], lkey[CLUSTER_KEY_MAX], why[256];
	if (cluster_key(vkey, sizeof(vkey), cluster, "volumes", volume, NULL) < 0 ||
	    cluster_key(lkey, sizeof(lkey), cluster, "volumes", volume, "leader", NULL) < 0)
		return -EINVAL;
	struct etcd_range_result rv, rl;
	int ret = etcd_get(e, vkey, false, &rv);
	if (ret) {
		rdax_seterr(err, errlen, "%s", etcd_client_last_error(e));
		return ret;
	}
	if ((ret = etcd_get(e, lkey, false, &rl))) {
		etcd_range_result_free(&rv);
		rdax_seterr(err, errlen, "%s", etcd_client_last_error(e));
		return ret;
	}
	struct cluster_volume_rec v;
	if (rv.count != 1) {
		rdax_seterr(err, errlen, "no volume %s", volume);
		ret = -ENOENT;
	} else if (cluster_volume_decode(rv.kvs[0].value, rv.kvs[0].value_len, &v, why,
					 sizeof(why))) {
		rdax_seterr(err, errlen, "volume %s: unusable key: %s", volume, why);
		ret = -EINVAL;
	} else if (rl.count != 0) {
		rdax_seterr(err, errlen, "volume %s has a leader", volume);
		ret = -EEXIST;
	} else if (v.state != CLUSTER_VOL_READY || strcmp(v.primary, node) == 0) {
		rdax_seterr(err, errlen, "volume %s: not a ready volume of another primary",
			    volume);
		ret = -EINVAL;
	} else if (!cluster_name_in(v.isr, v.nisr, node) &&
		   !(rdax_faults.failover_any_replica &&
		     cluster_name_in(v.replicas, v.nreplicas, node))) {
		/* invariant 3; the control failover-any-replica lets any replica try */
		rdax_seterr(err, errlen, "volume %s: %s is not in the ISR: it may not take over",
			    volume, node);
		ret = -EPERM;
	}
	int64_t vrev = rv.count ? rv.kvs[0].mod_revision : 0;
	etcd_range_result_free(&rv);
	etcd_range_result_free(&rl);
	if (ret)
		return ret;
	struct cluster_volume_rec n = v;
	snprintf(n.primary, sizeof(n.primary), "%s", node);
	n.epoch = v.epoch + 1;
	if (!cluster_name_in(n.isr, n.nisr, node)) /* the control only: keep the key valid */
		snprintf(n.isr[n.nisr++], CLUSTER_NAME_MAX + 1, "%s", node);
	char *json, ljson[256];
	if (cluster_volume_encode(&n, &json))
		return -ENOMEM;
	snprintf(ljson, sizeof(ljson),
		 "{\"node\":\"%s\",\"epoch\":%" PRIu64 ",\"incarnation\":\"%016" PRIx64 "\"}", node,
		 n.epoch, incarnation);
	struct etcd_cmp cmps[] = {
	    {.key = vkey, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .number = vrev},
	    {.key = lkey, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL, .number = 0},
	};
	struct etcd_op ops[] = {
	    {.type = ETCD_OP_PUT, .key = vkey, .value = json, .value_len = strlen(json)},
	    {.type = ETCD_OP_PUT,
	     .key = lkey,
	     .value = ljson,
	     .value_len = strlen(ljson),
	     .lease = lease},
	};
	struct etcd_txn_result t;
	ret = etcd_txn(e, cmps, 2, ops, 2, NULL, 0, &t);
	free(json);
	if (ret) {
		rdax_seterr(err, errlen, "%s", etcd_client_last_error(e));
		return ret;
	}
	bool ok = t.succeeded;
	etcd_txn_result_free(&t);
	if (!ok) {
		rdax_seterr(err, errlen, "volume %s: another node changed it first", volume);
		return -ESTALE;
	}
	if (out)
		*out = n;
	return 0;
}
