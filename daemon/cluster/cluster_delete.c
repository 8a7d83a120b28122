/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster_delete.c -- the Delete transaction of a replicated volume, and its end */
#include "cluster_delete.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster_meta.h"
#include "errors.h"

/* A compare that fails means another writer moved the key: read and decide again. */
#define DELETE_RETRIES 8
/* How often a waiter reads the key again (a delete takes a few watch round trips). */
#define DELETE_POLL_MS 100

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * read_volume -- volumes/<name> into *v and *rev; 0, -ENOENT (absent),
 * -EINVAL (unusable), an etcd code; @err says why
 */
static int read_volume(struct etcd_client *e, const char *key, const char *name,
		       struct cluster_volume_rec *v, int64_t *rev, char *err, size_t errlen)
{
	struct etcd_range_result r;
	char why[256];
	int ret = etcd_get(e, key, false, &r);
	if (ret) {
		rdax_seterr(err, errlen, "cannot reach etcd: %s", etcd_client_last_error(e));
		return ret;
	}
	if (r.count != 1) {
		rdax_seterr(err, errlen, "no volume %s in the cluster", name);
		ret = -ENOENT;
	} else if (cluster_volume_decode(r.kvs[0].value, r.kvs[0].value_len, v, why, sizeof(why))) {
		rdax_seterr(err, errlen, "the key of volume %s is unusable: %s", name, why);
		ret = -EINVAL;
	} else {
		*rev = r.kvs[0].mod_revision;
	}
	etcd_range_result_free(&r);
	return ret;
}

int cluster_delete_begin(struct etcd_client *e, const char *cluster, const char *name, char *err,
			 size_t errlen)
{
	char key[CLUSTER_KEY_MAX];
	if (!e || !cluster || !name || !cluster_name_valid(name) ||
	    cluster_key(key, sizeof(key), cluster, "volumes", name, NULL) < 0) {
		rdax_seterr(err, errlen, "invalid volume name");
		return -EINVAL;
	}
	for (unsigned attempt = 0; attempt < DELETE_RETRIES; attempt++) {
		struct cluster_volume_rec v;
		int64_t rev;
		int ret = read_volume(e, key, name, &v, &rev, err, errlen);
		if (ret)
			return ret;
		if (v.state == CLUSTER_VOL_DELETING)
			return 0; /* asked before: waiting for it is all there is to do */
		v.state = CLUSTER_VOL_DELETING;
		char *json;
		if (cluster_volume_encode(&v, &json))
			return -ENOMEM;
		struct etcd_cmp cmp = {
		    .key = key, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .number = rev};
		struct etcd_op put = {
		    .type = ETCD_OP_PUT, .key = key, .value = json, .value_len = strlen(json)};
		struct etcd_txn_result t;
		ret = etcd_txn(e, &cmp, 1, &put, 1, NULL, 0, &t);
		free(json);
		if (ret) {
			/* maybe applied: the caller's wait (or a repeat) reads the key again */
			rdax_seterr(err, errlen, "the Delete transaction: %s",
				    etcd_client_last_error(e));
			return ret;
		}
		bool won = t.succeeded;
		etcd_txn_result_free(&t);
		if (won)
			return 0;
	}
	rdax_seterr(err, errlen, "volume %s changes too often to be deleted now: try again", name);
	return -EAGAIN;
}

/* node_up -- does node @node's key exist (its lease alive)? 1, 0, or an etcd code */
static int node_up(struct etcd_client *e, const char *cluster, const char *node)
{
	char key[CLUSTER_KEY_MAX];
	struct etcd_range_result r;
	if (cluster_key(key, sizeof(key), cluster, "nodes", node, NULL) < 0)
		return 0;
	int ret = etcd_get(e, key, false, &r);
	if (ret)
		return ret;
	ret = r.count > 0;
	etcd_range_result_free(&r);
	return ret;
}

/* appendf -- add to @buf at *pos, cut at its end */
static void appendf(char *buf, size_t len, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	if (*pos >= len)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *pos, len - *pos, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos += (size_t)n;
}

int cluster_delete_left(struct etcd_client *e, const char *cluster, const char *name, char *left,
			size_t len)
{
	char key[CLUSTER_KEY_MAX], prefix[CLUSTER_KEY_MAX], err[256];
	struct cluster_volume_rec v;
	int64_t rev;
	cluster_key(key, sizeof(key), cluster, "volumes", name, NULL);
	cluster_key(prefix, sizeof(prefix), cluster, "volumes", name, "members", "", NULL);
	int ret = read_volume(e, key, name, &v, &rev, err, sizeof(err));
	if (ret == -ENOENT)
		return 0;
	if (ret == -EINVAL) {
		rdax_seterr(left, len, "%s", err);
		return 1;
	}
	if (ret) {
		rdax_seterr(left, len, "%s", err);
		return ret;
	}
	if (v.state != CLUSTER_VOL_DELETING) {
		rdax_seterr(left, len, "volume %s is %s again (a new volume of that name?)", name,
			    cluster_vol_state_name(v.state));
		return 1;
	}
	struct etcd_range_result m;
	if ((ret = etcd_get(e, prefix, true, &m))) {
		rdax_seterr(left, len, "cannot reach etcd: %s", etcd_client_last_error(e));
		return ret;
	}
	size_t pos = 0;
	if (m.count == 0) {
		/* every member is done: the last step is anybody's (a member died before it) */
		bool done = false;
		etcd_range_result_free(&m);
		if ((ret = cluster_delete_finish(e, cluster, name, rev, &done))) {
			rdax_seterr(left, len, "cannot reach etcd: %s", etcd_client_last_error(e));
			return ret;
		}
		if (done)
			return 0;
		rdax_seterr(left, len, "volume %s: no copy is left; its keys go next", name);
		return 1;
	}
	appendf(left, len, &pos, "volume %s is deleting; copies left on", name);
	for (size_t i = 0; i < m.count; i++) {
		const char *node = m.kvs[i].key + strlen(prefix);
		int up = node_up(e, cluster, node);
		appendf(left, len, &pos, "%s %s (%s)", i ? "," : "", node,
			up == 1	  ? "up: deleted once no client or NBD export holds it open"
			: up == 0 ? "down: deleted when it comes back"
				  : "unknown: etcd did not answer");
	}
	etcd_range_result_free(&m);
	return 1;
}

int cluster_delete_wait(struct etcd_client *e, const char *cluster, const char *name, unsigned ms,
			char *left, size_t len)
{
	uint64_t end = now_ms() + ms;
	for (;;) {
		int ret = cluster_delete_left(e, cluster, name, left, len);
		if (ret == 0)
			return 0;
		if (now_ms() >= end)
			return ret < 0 ? ret : -ETIMEDOUT;
		usleep(DELETE_POLL_MS * 1000);
	}
}

int cluster_delete_finish(struct etcd_client *e, const char *cluster, const char *name, int64_t rev,
			  bool *done)
{
	char key[CLUSTER_KEY_MAX], sub[CLUSTER_KEY_MAX], members[CLUSTER_KEY_MAX];
	*done = false;
	if (cluster_key(key, sizeof(key), cluster, "volumes", name, NULL) < 0 ||
	    cluster_key(sub, sizeof(sub), cluster, "volumes", name, "", NULL) < 0 ||
	    cluster_key(members, sizeof(members), cluster, "volumes", name, "members", "", NULL) <
		0)
		return -EINVAL;
	struct etcd_range_result m;
	int ret = etcd_get(e, members, true, &m);
	if (ret)
		return ret;
	size_t left = m.count;
	etcd_range_result_free(&m);
	if (left)
		return 0;
	/*
	 * A member puts its key comparing the volume key's create_revision (cluster.c), so
	 * none appears after this: the key and everything under it go together.
	 */
	struct etcd_cmp cmp = {
	    .key = key, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .number = rev};
	struct etcd_op ops[] = {
	    {.type = ETCD_OP_DELETE, .key = key},
	    {.type = ETCD_OP_DELETE, .key = sub, .prefix = true},
	};
	struct etcd_txn_result t;
	ret = etcd_txn(e, &cmp, 1, ops, 2, NULL, 0, &t);
	if (ret)
		return ret;
	*done = t.succeeded;
	etcd_txn_result_free(&t);
	return 0;
}
