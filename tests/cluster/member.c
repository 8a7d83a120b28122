/* SPDX-License-Identifier: BSD-3-Clause */
/* member.c -- copies read as the primary's link would; volume keys; clients that follow */
#include "member.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

int nx_volume_key_retry(const char *etcd_spec, const char *volume, unsigned tries,
			unsigned gap_ms, struct cluster_volume_rec *v)
{
	int ret = -EINVAL;
	for (unsigned n = 0; n < tries; n++) {
		if (n)
			usleep(gap_ms * 1000);
		if ((ret = nx_volume_key(etcd_spec, volume, v)) == 0)
			break;
	}
	return ret;
}

unsigned nx_node_index(const char *node)
{
	return (unsigned)(node[1] - '1');
}

int nx_resuming_open(const char *who, const char *urls, const char *volume, int timeout_ms,
		     int resume_ms, uint64_t hold_bytes, struct rdax_conn **cp,
		     struct rdax_volume **vp)
{
	struct rdax_conn_opts *o;
	*cp = NULL;
	int ret = rdax_conn_opts_new(&o);
	if (ret)
		return ret;
	rdax_conn_opts_set_timeout(o, timeout_ms);
	rdax_conn_opts_set_resume(o, resume_ms);
	if (hold_bytes)
		rdax_conn_opts_set_write_hold(o, hold_bytes);
	ret = rdax_connect(urls, o, cp);
	rdax_conn_opts_delete(&o);
	if (ret) {
		printf("  %s: connect %s: %s\n", who, urls, rdax_connect_last_error());
		return ret;
	}
	ret = rdax_volume_open(*cp, volume, vp);
	if (ret) {
		printf("  %s: open %s: %s\n", who, volume, rdax_conn_last_error(*cp));
		rdax_disconnect(cp);
	}
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
