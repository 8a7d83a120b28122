/* SPDX-License-Identifier: BSD-3-Clause */
/* member.c -- read a replica's copy directly, as its primary's link would */
#include "member.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "etcd.h"

int nx_volume_key(const char *etcd_spec, const char *volume, struct cluster_volume_rec *v)
{
	struct etcd_client *e;
	char err[256], key[CLUSTER_KEY_MAX];
	int ret = etcd_client_new(etcd_spec, NULL, &e, err, sizeof(err));
	if (ret)
		return ret;
	cluster_key(key, sizeof(key), "default", "volumes", volume, NULL);
	struct etcd_range_result r;
	ret = etcd_get(e, key, false, &r);
	if (ret == 0) {
		if (r.count != 1 ||
		    cluster_volume_decode(r.kvs[0].value, r.kvs[0].value_len, v, err, sizeof(err)))
			ret = -ENOENT;
		etcd_range_result_free(&r);
	}
	etcd_client_delete(&e);
	return ret;
}

int nx_member_open(const char *etcd_spec, const char *node, const char *url, const char *volume,
		   struct rdax_conn **cp, struct rdax_volume **vp)
{
	struct cluster_volume_rec v;
	int ret = nx_volume_key(etcd_spec, volume, &v);
	if (ret)
		return ret;
	if ((ret = rdax_connect(url, NULL, cp)))
		return ret;
	if (strcmp(node, v.primary) == 0)
		ret = rdax_volume_open(*cp, volume, vp);
	else
		ret = conn_volume_open_replica(*cp, volume, v.epoch, v.primary, 0, vp);
	if (ret) {
		fprintf(stderr, "  open %s on %s as %s's link at epoch %llu: %s\n", volume, url,
			v.primary, (unsigned long long)v.epoch, rdax_conn_last_error(*cp));
		rdax_disconnect(cp);
	}
	return ret;
}
