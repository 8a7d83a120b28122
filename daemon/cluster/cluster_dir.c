/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster_dir.c -- every volume of the cluster, read from etcd for a node that forwards */
#include "cluster_dir.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "etcd.h"

/* client_open -- an etcd client of our own for this call; 0 or the code (@err says why) */
static int client_open(const char *etcd, struct etcd_client **out, char *err, size_t errlen)
{
	char why[256];
	int ret = etcd_client_new(etcd, NULL, out, why, sizeof(why));
	if (ret)
		rdax_seterr(err, errlen, "etcd %s: %s", etcd, why);
	return ret;
}

/* read_fail -- @what could not be read: the code, @err naming etcd's words */
static int read_fail(struct etcd_client *e, int ret, const char *what, char *err, size_t errlen)
{
	rdax_seterr(err, errlen, "cannot read %s from etcd: %s", what,
		    etcd_client_last_error(e)[0] ? etcd_client_last_error(e) : rdax_strerror(ret));
	return ret;
}

/* url_add -- node @node's tcp:// address (from @nodes) to @out's list, once */
static void url_add(struct cluster_dir_vol *out, const struct etcd_range_result *nodes,
		    const char *cluster, const char *node, bool *seen)
{
	for (size_t i = 0; i < nodes->count; i++) {
		char kind[CLUSTER_KEY_MAX], name[CLUSTER_KEY_MAX], sub[CLUSTER_KEY_MAX],
		    leaf[CLUSTER_KEY_MAX], why[128];
		struct cluster_node_rec n;
		if (seen[i] ||
		    cluster_key_parse(nodes->kvs[i].key, cluster, kind, name, sub, leaf) != 0 ||
		    strcmp(name, node) != 0 ||
		    cluster_node_decode(nodes->kvs[i].value, nodes->kvs[i].value_len, &n, why,
					sizeof(why)) != 0)
			continue;
		seen[i] = true;
		const char *tcp = cluster_node_addr(&n, "tcp");
		size_t have = strlen(out->urls);
		if (!tcp || have + strlen(tcp) + 2 > sizeof(out->urls))
			return;
		snprintf(out->urls + have, sizeof(out->urls) - have, "%s%s", have ? "," : "", tcp);
		out->nurls++;
		return;
	}
}

int cluster_dir_lookup(const char *etcd, const char *cluster, const char *name,
		       struct cluster_dir_vol *out, char *err, size_t errlen)
{
	struct etcd_client *e;
	char key[CLUSTER_KEY_MAX], why[256];
	struct cluster_volume_rec v;
	struct etcd_range_result r = {0}, nodes = {0};
	int ret = client_open(etcd, &e, err, errlen);
	if (ret)
		return ret;
	if (cluster_key(key, sizeof(key), cluster, "volumes", name, NULL) < 0) {
		ret = -ENOENT;
		rdax_seterr(err, errlen, "no such volume");
		goto out;
	}
	ret = etcd_get(e, key, false, &r);
	if (ret) {
		read_fail(e, ret, "the volume", err, errlen);
		goto out;
	}
	if (r.count != 1) {
		ret = -ENOENT;
		rdax_seterr(err, errlen, "no such volume in cluster %s", cluster);
		goto out;
	}
	ret = cluster_volume_decode(r.kvs[0].value, r.kvs[0].value_len, &v, why, sizeof(why));
	if (ret) {
		rdax_seterr(err, errlen, "the volume's key is unusable: %s", why);
		goto out;
	}
	if (v.state != CLUSTER_VOL_READY) {
		ret = v.state == CLUSTER_VOL_CREATING ? -EAGAIN : -ENOENT;
		rdax_seterr(err, errlen, "the volume is %s", cluster_vol_state_name(v.state));
		goto out;
	}
	if (cluster_key(key, sizeof(key), cluster, "nodes", "", NULL) < 0 ||
	    (ret = etcd_get(e, key, true, &nodes))) {
		ret = read_fail(e, ret ? ret : -ENAMETOOLONG, "the nodes", err, errlen);
		goto out;
	}
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", v.name);
	snprintf(out->primary, sizeof(out->primary), "%s", v.primary);
	out->size = v.size;
	out->epoch = v.epoch;
	out->state = v.state;
	bool *seen = calloc(nodes.count ? nodes.count : 1, sizeof(*seen));
	if (!seen) {
		ret = -ENOMEM;
		goto out;
	}
	/* the primary, then the in-sync set (who may take over), then the rest of the copies */
	url_add(out, &nodes, cluster, v.primary, seen);
	for (unsigned i = 0; i < v.nisr; i++)
		url_add(out, &nodes, cluster, v.isr[i], seen);
	for (unsigned i = 0; i < v.nreplicas; i++)
		url_add(out, &nodes, cluster, v.replicas[i], seen);
	free(seen);
	if (out->nurls == 0) {
		ret = -EHOSTDOWN;
		rdax_seterr(err, errlen, "no node holding a copy of it is up (primary %s)",
			    v.primary);
	}
out:
	etcd_range_result_free(&nodes);
	etcd_range_result_free(&r);
	etcd_client_delete(&e);
	return ret;
}

int cluster_dir_list(const char *etcd, const char *cluster, struct cluster_dir_vol **out,
		     unsigned *count, char *err, size_t errlen)
{
	struct etcd_client *e;
	char key[CLUSTER_KEY_MAX];
	struct etcd_range_result r = {0};
	int ret = client_open(etcd, &e, err, errlen);
	if (ret)
		return ret;
	if (cluster_key(key, sizeof(key), cluster, "volumes", "", NULL) < 0 ||
	    (ret = etcd_get(e, key, true, &r))) {
		ret = read_fail(e, ret ? ret : -ENAMETOOLONG, "the volumes", err, errlen);
		goto out;
	}
	struct cluster_dir_vol *list = calloc(r.count ? r.count : 1, sizeof(*list));
	if (!list) {
		ret = -ENOMEM;
		goto out;
	}
	unsigned n = 0;
	for (size_t i = 0; i < r.count; i++) {
		char kind[CLUSTER_KEY_MAX], name[CLUSTER_KEY_MAX], sub[CLUSTER_KEY_MAX],
		    leaf[CLUSTER_KEY_MAX], why[128];
		struct cluster_volume_rec v;
		if (cluster_key_parse(r.kvs[i].key, cluster, kind, name, sub, leaf) != 0 ||
		    sub[0] != '\0' ||
		    cluster_volume_decode(r.kvs[i].value, r.kvs[i].value_len, &v, why,
					  sizeof(why)) != 0 ||
		    v.state != CLUSTER_VOL_READY)
			continue; /* a member, leader or status key; an unusable or unready volume
				   */
		struct cluster_dir_vol *d = &list[n++];
		snprintf(d->name, sizeof(d->name), "%s", v.name);
		snprintf(d->primary, sizeof(d->primary), "%s", v.primary);
		d->size = v.size;
		d->epoch = v.epoch;
		d->state = v.state;
	}
	*out = list;
	*count = n;
out:
	etcd_range_result_free(&r);
	etcd_client_delete(&e);
	return ret;
}
