/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster.c -- the cluster thread: this node's membership and its replicas */
#include "cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "etcd.h"
#include "faults.h"
#include "log.h"
#include "namespace.h"
#include "persist.h"
#include "cluster_delete.h"
#include "cluster_gate.h"
#include "cluster_txn.h"
#include "completion.h"
#include "repl_registry.h"
#include "repl_volume.h"

/* How often the node key's free space is refreshed (also after every local create). */
#define CLUSTER_REFRESH_MS 5000
/*
 * How often a primary looks at its members: a member out of the ISR whose
 * node is up gets a resync (at most one per volume at a time; a failed try
 * waits CLUSTER_RESYNC_RETRY_MS for that member), and status/<node> keys
 * are put when they changed (at most once per tick: they are informational).
 */
#define CLUSTER_TICK_MS 1000
/* A failover candidate waits this long per ISR member before it in line. */
#define CLUSTER_FAILOVER_STEP_MS 300
#define CLUSTER_RESYNC_RETRY_MS	 2000
/* Most volume names waiting to be looked at after a watch event. */
#define CLUSTER_MAX_PENDING 256

/* A volume this node is the primary of: its local copy and its replication. */
struct primary {
	struct cluster *c;
	char name[CLUSTER_NAME_MAX + 1];
	uint64_t epoch;
	struct gate_vol *g; /* the local copy (held open by its gate) and its record */
	struct repl_volume *rv;
	/*
	 * the resync running (one at a time), and when each member may try again;
	 * the same thread slot runs the reconcile after a failover (to_serve)
	 */
	pthread_t rs_thread;
	bool rs_started;       /* cluster thread: a thread to join */
	atomic_bool rs_active; /* cleared by the resync thread when it ends */
	bool to_serve;	       /* taken over: serve once its reconcile (rs_thread) ends */
	char rs_node[CLUSTER_NAME_MAX + 1];
	char rs_url[CLUSTER_URL_MAX + 1], rs_alt[CLUSTER_URL_MAX + 1];
	uint64_t rs_next_ms[CLUSTER_MAX_REPLICAS];
	bool deposed;	   /* another node is the primary now: this one serves nothing of it */
	bool closing;	   /* the volume is being deleted: its links are closed */
	bool gone;	   /* the slot is free (the volume was deleted here): reused */
	unsigned nmembers; /* the other ISR members when it took over (for the log) */
	char status_last[CLUSTER_MAX_REPLICAS][256]; /* status/<node> as last put */
};

/* A replica to add back to a volume's ISR after its resync (asked by the resync thread). */
struct grow {
	struct primary *p;
	const char *node;
	struct completion done;
	uint64_t deadline_ms;
	struct grow *next;
};

/* A replica to remove from a volume's ISR (asked from a link's loop). */
struct shrink {
	struct primary *p;
	char node[CLUSTER_NAME_MAX + 1];
};

#define CLUSTER_MAX_SHRINKS 64

struct cluster {
	struct cluster_opts o;
	struct primary prim[REPL_REGISTRY_MAX];
	unsigned nprim;
	pthread_mutex_t shrink_lock;
	struct shrink shrinks[CLUSTER_MAX_SHRINKS]; /* under shrink_lock */
	unsigned nshrinks;
	struct grow *grows; /* under shrink_lock */
	uint64_t next_tick_ms;
	char *etcd_spec, *cluster_name, *node, *zone, *version;
	char **addrs;
	struct etcd_client *etcd;
	struct etcd_watch *watch;
	int64_t lease;
	unsigned ttl_s;
	uint64_t incarnation;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	uint64_t next_keepalive_ms, next_refresh_ms;
	uint64_t lease_until_ms; /* a primary serves until then (the lease bound less a margin) */
	bool refresh_now;
	char node_json_last[4096]; /* the node key's last value put, to skip equal puts */
	/* volumes seen in watch events, looked at after etcd_client_poll() returns */
	char pending[CLUSTER_MAX_PENDING][CLUSTER_NAME_MAX + 1];
	unsigned npending;
	bool rescan; /* a watch restarted or the pending list overflowed: look at every volume */
	/* failovers this node will try (its volumes' leader key is gone), when due */
	struct {
		char name[CLUSTER_NAME_MAX + 1];
		uint64_t due_ms;
	} fo[CLUSTER_MAX_PENDING];
	unsigned nfo;
	/* volumes being deleted whose local part is not done (a handle holds the copy) */
	char del[CLUSTER_MAX_PENDING][CLUSTER_NAME_MAX + 1];
	unsigned ndel;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* key -- a key under this cluster's prefix into @buf (CLUSTER_KEY_MAX) */
#define KEY(c, buf, ...) cluster_key((buf), sizeof(buf), (c)->cluster_name, __VA_ARGS__, NULL)

uint64_t cluster_incarnation(const struct cluster *c)
{
	return c->incarnation;
}

/* node_record -- this node's key as it is now: addresses, namespaces and free space */
static void node_record(struct cluster *c, struct cluster_node_rec *r)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->node, sizeof(r->node), "%s", c->node);
	snprintf(r->zone, sizeof(r->zone), "%s", c->zone ? c->zone : "");
	snprintf(r->version, sizeof(r->version), "%s", c->version ? c->version : "");
	r->incarnation = c->incarnation;
	for (unsigned i = 0; i < c->o.naddrs && r->naddrs < CLUSTER_MAX_ADDRS; i++)
		snprintf(r->addrs[r->naddrs++], CLUSTER_URL_MAX + 1, "%s", c->addrs[i]);
	unsigned count = store_namespace_count(c->o.store);
	for (unsigned i = 0; i < count && r->nnamespaces < CLUSTER_MAX_NAMESPACES; i++) {
		struct ns *ns = store_namespace(c->o.store, i);
		struct cluster_ns_rec *n = &r->namespaces[r->nnamespaces++];
		n->id = ns->id;
		n->size = ns->data_size;
		ns_free_bytes(ns, NULL, &n->free);
		snprintf(n->persist_method, sizeof(n->persist_method), "%s",
			 persist_method_name(ns->persist.method));
	}
}

/* put_node -- put the node key on the lease if it changed (or @force); 0 or an etcd code */
static int put_node(struct cluster *c, bool force)
{
	struct cluster_node_rec r;
	char key[CLUSTER_KEY_MAX], *json;
	node_record(c, &r);
	int ret = cluster_node_encode(&r, &json);
	if (ret)
		return ret;
	if (!force && strcmp(json, c->node_json_last) == 0) {
		free(json);
		return 0;
	}
	KEY(c, key, "nodes", c->node);
	ret = etcd_put(c->etcd, key, json, strlen(json), c->lease, NULL);
	if (ret == 0)
		snprintf(c->node_json_last, sizeof(c->node_json_last), "%s", json);
	free(json);
	return ret;
}

/*
 * lease_renewed -- a keepalive sent at @t0 (before the call) was answered:
 * etcd holds the lease at least until t0 + TTL, so a primary may serve until
 * then, less 1 % for clock rates and 200 ms for replies already queued
 * (Patroni's rule): it stops before any other node could take its leader key
 */
static void lease_renewed(struct cluster *c, uint64_t t0)
{
	c->lease_until_ms = t0 + (uint64_t)c->ttl_s * 990 - 200;
	for (unsigned i = 0; i < c->nprim; i++)
		if (c->prim[i].g && !c->prim[i].deposed)
			cluster_gate_lease(c->prim[i].g, c->lease_until_ms);
}

/* join -- a new lease and the node key on it */
static int join(struct cluster *c)
{
	int64_t granted;
	uint64_t t0 = now_ms();
	int ret = etcd_lease_grant(c->etcd, c->ttl_s, &c->lease, &granted);
	if (ret)
		return ret;
	c->lease_until_ms = t0 + (uint64_t)c->ttl_s * 990 - 200;
	c->next_keepalive_ms = now_ms() + c->ttl_s * 1000 / 3;
	return put_node(c, true);
}

static void serve_as_primary(struct cluster *c, const struct cluster_volume_rec *v);
static int keepalive(struct cluster *c);
static void another_primary(struct cluster *c, const struct cluster_volume_rec *v);
static void node_addrs(struct cluster *c, const char *name, char *tcp, char *rdma, size_t len);

/*
 * become_primary -- a "creating" volume whose primary is this node: once
 * every replica's member key exists, set it "ready" and take the leader key
 * on this node's lease, comparing the volume key's mod_revision (@rev) and
 * the leader key's absence, so a concurrent change makes it fail harmlessly
 */
static void become_primary(struct cluster *c, const struct cluster_volume_rec *v, int64_t rev)
{
	char prefix[CLUSTER_KEY_MAX], vkey[CLUSTER_KEY_MAX], lkey[CLUSTER_KEY_MAX];
	KEY(c, prefix, "volumes", v->name, "members", "");
	KEY(c, vkey, "volumes", v->name);
	KEY(c, lkey, "volumes", v->name, "leader");
	struct etcd_range_result m;
	if (etcd_get(c->etcd, prefix, true, &m))
		return; /* the next event or rescan tries again */
	unsigned have = 0;
	for (unsigned i = 0; i < v->nreplicas; i++)
		for (size_t k = 0; k < m.count; k++)
			if (strcmp(m.kvs[k].key + strlen(prefix), v->replicas[i]) == 0)
				have++;
	etcd_range_result_free(&m);
	if (have < v->nreplicas)
		return;

	struct cluster_volume_rec ready = *v;
	ready.state = CLUSTER_VOL_READY;
	/*
	 * Replicate before the volume is ready: a client that sees it ready and
	 * writes at once must find every write forwarded (a write taken before
	 * the replication existed would be acknowledged without the replicas).
	 */
	serve_as_primary(c, &ready);
	char *vjson = NULL, ljson[256], inc[17];
	snprintf(inc, sizeof(inc), "%016" PRIx64, c->incarnation);
	snprintf(ljson, sizeof(ljson),
		 "{\"node\":\"%s\",\"epoch\":%" PRIu64 ",\"incarnation\":\"%s\"}", c->node,
		 v->epoch, inc);
	if (cluster_volume_encode(&ready, &vjson))
		return;
	struct etcd_cmp cmps[] = {
	    {.key = vkey, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .number = rev},
	    {.key = lkey, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL, .number = 0},
	};
	struct etcd_op ops[] = {
	    {.type = ETCD_OP_PUT, .key = vkey, .value = vjson, .value_len = strlen(vjson)},
	    {.type = ETCD_OP_PUT,
	     .key = lkey,
	     .value = ljson,
	     .value_len = strlen(ljson),
	     .lease = c->lease},
	};
	struct etcd_txn_result t;
	int ret = etcd_txn(c->etcd, cmps, 2, ops, 2, NULL, 0, &t);
	free(vjson);
	if (ret) {
		LOG_WARN("volume %s: cannot make it ready: %s", v->name,
			 etcd_client_last_error(c->etcd));
		return;
	}
	if (t.succeeded)
		LOG_INFO("volume %s: ready, primary %s, epoch %" PRIu64 ", %u replica%s", v->name,
			 c->node, v->epoch, v->nreplicas, v->nreplicas == 1 ? "" : "s");
	etcd_txn_result_free(&t);
}

/*
 * member_key_put -- put @json at the member key @key unless it holds that
 * already, comparing the volume key @vkey's mod_revision with @rev (as read,
 * not "deleting"): a member key never appears after the Delete txn, so the
 * member that finds none left may delete the volume's keys
 * (cluster_delete.h). A failed compare is -ESTALE: the change is a watch
 * event, whose look tries again.
 *
 * Unless it holds that already: every node with a copy watches
 * volumes/<name>/members/ and looks
 * at the volume again on each event there (on_watch), which ends here: an
 * unconditional put was a new revision, hence an event, for every node of
 * the volume, whose look put its own key again -- a loop that kept etcd
 * and every node's cluster thread busy as long as the volume existed (about
 * 30 puts a second per node, seen with strace on a 4-node cluster at rest).
 * Returns 0, -ESTALE or an etcd code.
 */
static int member_key_put(struct cluster *c, const char *key, const char *json, const char *vkey,
			  int64_t rev)
{
	struct etcd_range_result r;
	if (etcd_get(c->etcd, key, false, &r) == 0) {
		bool same = r.count == 1 && r.kvs[0].value_len == strlen(json) &&
			    memcmp(r.kvs[0].value, json, r.kvs[0].value_len) == 0;
		etcd_range_result_free(&r);
		if (same)
			return 0;
	}
	struct etcd_cmp cmp = {
	    .key = vkey, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .number = rev};
	struct etcd_op put = {
	    .type = ETCD_OP_PUT, .key = key, .value = json, .value_len = strlen(json)};
	struct etcd_txn_result t;
	int ret = etcd_txn(c->etcd, &cmp, 1, &put, 1, NULL, 0, &t);
	if (ret)
		return ret;
	ret = t.succeeded ? 0 : -ESTALE;
	etcd_txn_result_free(&t);
	return ret;
}

/*
 * local_replica -- make sure this node's copy of @v exists: create it (the
 * store zeroes a new volume) or check that the one there has the right size;
 * then put the member key. Returns 0, or a negative code (logged).
 */
static int local_replica(struct cluster *c, const struct cluster_volume_rec *v, int64_t rev)
{
	struct volume_info info;
	char why[256] = "";
	int ret = store_volume_info(c->o.store, v->name, &info);
	if (ret == -ENOENT) {
		ret =
		    store_volume_create(c->o.store, v->name, v->size, NULL, NULL, why, sizeof(why));
		if (ret == 0) {
			LOG_INFO("volume %s: local replica created (%" PRIu64 " bytes)", v->name,
				 v->size);
			c->refresh_now = true;
		}
		if (ret == 0)
			ret = store_volume_info(c->o.store, v->name, &info);
	}
	if (ret) {
		LOG_ERROR("volume %s: cannot create the local replica: %s", v->name,
			  why[0] ? why : rdax_strerror(ret));
		return ret;
	}
	if (info.size != v->size) {
		LOG_ERROR("volume %s: a local volume of that name has %" PRIu64
			  " bytes, the cluster's has %" PRIu64 ": not used as a replica",
			  v->name, info.size, v->size);
		return -EEXIST;
	}
	struct gate_vol *g;
	why[0] = '\0';
	ret = cluster_gate_open(c->o.store, v->name, v->epoch, why, sizeof(why), &g);
	if (ret && ret != -EEXIST) {
		LOG_ERROR("volume %s: the local replica cannot be used: %s", v->name,
			  why[0] ? why : rdax_strerror(ret));
		return ret;
	}
	char url[CLUSTER_URL_MAX + 1] = "", rdma[CLUSTER_URL_MAX + 1] = "";
	if (strcmp(v->primary, c->node) != 0)
		node_addrs(c, v->primary, url, rdma, sizeof(url));
	cluster_gate_set_primary(g, v->primary, url, rdma, v->epoch);
	char key[CLUSTER_KEY_MAX], vkey[CLUSTER_KEY_MAX], *json;
	struct cluster_member_rec m = {.ns_id = info.ns_id, .offset = info.ns_offset};
	KEY(c, key, "volumes", v->name, "members", c->node);
	KEY(c, vkey, "volumes", v->name);
	if ((ret = cluster_member_encode(&m, &json)))
		return ret;
	ret = member_key_put(c, key, json, vkey, rev);
	free(json);
	if (ret == -ESTALE)
		LOG_INFO("volume %s: its key changed before the member key was put: looked at "
			 "again",
			 v->name);
	else if (ret)
		LOG_WARN("volume %s: cannot write the member key: %s", v->name,
			 etcd_client_last_error(c->etcd));
	return ret;
}

/* link_home -- the worker whose loop runs volume number @i's links (NULL: their own) */
static struct worker *link_home(const struct cluster *c, unsigned i)
{
	return c->o.nworkers ? c->o.workers[i % c->o.nworkers] : NULL;
}

/* on_shrink -- a replica's link failed (its loop): queue its ISR shrink for this thread */
static void on_shrink(void *arg, struct repl_volume *rv, const char *node)
{
	struct primary *p = arg;
	struct cluster *c = p->c;
	(void)rv;
	pthread_mutex_lock(&c->shrink_lock);
	if (c->nshrinks < CLUSTER_MAX_SHRINKS) {
		c->shrinks[c->nshrinks].p = p;
		snprintf(c->shrinks[c->nshrinks].node, CLUSTER_NAME_MAX + 1, "%.*s",
			 CLUSTER_NAME_MAX, node);
		c->nshrinks++;
	}
	/* no room: never released, so nothing it lacks is acknowledged (logged below) */
	pthread_mutex_unlock(&c->shrink_lock);
	etcd_client_wakeup(c->etcd);
}

/*
 * node_addrs -- the first tcp:// and rdma:// addresses of node @name's key
 * into @tcp and @rdma (either NULL: not wanted; "" if none or the key is gone)
 */
static void node_addrs(struct cluster *c, const char *name, char *tcp, char *rdma, size_t len)
{
	char key[CLUSTER_KEY_MAX], why[128];
	struct etcd_range_result r;
	struct cluster_node_rec n;
	if (tcp)
		tcp[0] = '\0';
	if (rdma)
		rdma[0] = '\0';
	KEY(c, key, "nodes", name);
	if (etcd_get(c->etcd, key, false, &r))
		return;
	if (r.count == 1 &&
	    cluster_node_decode(r.kvs[0].value, r.kvs[0].value_len, &n, why, sizeof(why)) == 0) {
		if (tcp && cluster_node_addr(&n, "tcp"))
			snprintf(tcp, len, "%s", cluster_node_addr(&n, "tcp"));
		if (rdma && cluster_node_addr(&n, "rdma"))
			snprintf(rdma, len, "%s", cluster_node_addr(&n, "rdma"));
	}
	etcd_range_result_free(&r);
}

/*
 * link_urls -- where a replica link to node @name goes (docs/cluster.md,
 * "RDMA links"): its rdma:// address where this node serves RDMA too (one-
 * sided writes), with its tcp:// one in @alt to fall back to; else its
 * tcp:// one and @alt "". @url "" when its key is gone (the node is down).
 */
static void link_urls(struct cluster *c, const char *name, char *url, char *alt, size_t len)
{
	char tcp[CLUSTER_URL_MAX + 1], rdma[CLUSTER_URL_MAX + 1];
	node_addrs(c, name, tcp, rdma, sizeof(tcp));
	bool here = false;
	for (unsigned i = 0; i < c->o.naddrs; i++)
		here = here || strncmp(c->addrs[i], "rdma://", 7) == 0;
	if (here && rdma[0]) {
		snprintf(url, len, "%s", rdma);
		snprintf(alt, len, "%s", tcp);
	} else {
		snprintf(url, len, "%s", tcp);
		alt[0] = '\0';
	}
}

/*
 * prim_new -- a zeroed primary slot: a free one (its volume deleted) or the
 * next; still free (gone) until prim_keep(), so an early return leaves it so
 */
static struct primary *prim_new(struct cluster *c)
{
	struct primary *p = NULL;
	for (unsigned i = 0; i < c->nprim && !p; i++)
		if (c->prim[i].gone)
			p = &c->prim[i];
	if (!p && c->nprim < REPL_REGISTRY_MAX)
		p = &c->prim[c->nprim];
	if (p) {
		memset(p, 0, sizeof(*p));
		p->c = c;
		p->gone = true;
		p->deposed = true; /* so the loops over the slots pass it by */
	}
	return p;
}

/* prim_keep -- slot @p (prim_new) is in use from now on */
static void prim_keep(struct cluster *c, struct primary *p)
{
	p->gone = false;
	p->deposed = false;
	if (p == &c->prim[c->nprim])
		c->nprim++;
}

/*
 * serve_as_primary -- a ready volume whose primary is this node: open the
 * local copy and start replicating it to the other ISR members; from then on
 * the protocol layer's writes and fsyncs go through it (repl_registry.h)
 */
static void serve_as_primary(struct cluster *c, const struct cluster_volume_rec *v)
{
	for (unsigned i = 0; i < c->nprim; i++)
		if (!c->prim[i].gone && strcmp(c->prim[i].name, v->name) == 0)
			return;
	struct primary *p = prim_new(c);
	if (!p)
		return;
	snprintf(p->name, sizeof(p->name), "%s", v->name);
	p->epoch = v->epoch;
	p->g = cluster_gate_find(v->name);
	if (!p->g) {
		LOG_ERROR("volume %s: no local copy to serve it from", v->name);
		return;
	}
	cluster_gate_lease(p->g, c->lease_until_ms); /* served while the lease bound holds */
	if (cluster_gate_serve(p->g, v->epoch))
		return; /* this copy has seen a newer epoch: the key is behind, a watch event
			   follows */
	struct repl_member_spec m[CLUSTER_MAX_REPLICAS];
	char urls[CLUSTER_MAX_REPLICAS][CLUSTER_URL_MAX + 1];
	char alts[CLUSTER_MAX_REPLICAS][CLUSTER_URL_MAX + 1];
	unsigned n = 0;
	for (unsigned i = 0; i < v->nisr; i++) {
		if (strcmp(v->isr[i], c->node) == 0)
			continue;
		link_urls(c, v->isr[i], urls[n], alts[n], sizeof(urls[n]));
		m[n] = (struct repl_member_spec){v->isr[i],
						 urls[n][0] ? urls[n] : "tcp://0.0.0.0:1", alts[n]};
		n++;
	}
	if (n == 0) {
		/* nothing to forward to: the volume is served as a local one (fsyncs may run
		 * inline) */
		prim_keep(c, p); /* remembered, so later events do not look again */
		LOG_INFO("volume %s: primary with no other replica", v->name);
		return;
	}
	struct repl_opts o = {.volume = v->name,
			      .mapping = p->g->v->data,
			      .size = p->g->v->size,
			      .epoch = v->epoch,
			      .primary = c->node,
			      .incarnation = c->incarnation,
			      .fence = true,
			      .rec = &p->g->rec,
			      .token_file = NULL,
			      .home = link_home(c, (unsigned)(p - c->prim)),
			      .spin_cap_us = c->o.replica_busy_poll_us,
			      .shrink = on_shrink,
			      .arg = p};
	prim_keep(c, p); /* before the links start: on_shrink may run at once */
	int ret = repl_start(&o, m, n, &p->rv);
	if (ret == 0)
		ret = repl_registry_put(p->g->v, p->rv);
	if (ret) {
		LOG_ERROR("volume %s: cannot start its replication: %s", v->name,
			  rdax_strerror(ret));
		return;
	}
	LOG_INFO("volume %s: serving as primary, epoch %" PRIu64 ", replicating to %u replica%s",
		 v->name, v->epoch, n, n == 1 ? "" : "s");
}

/* shrinks -- run the queued ISR shrinks; one etcd cannot answer stays queued. True if any stays. */
static bool shrinks(struct cluster *c)
{
	struct shrink q[CLUSTER_MAX_SHRINKS];
	pthread_mutex_lock(&c->shrink_lock);
	unsigned n = c->nshrinks;
	memcpy(q, c->shrinks, n * sizeof(q[0]));
	c->nshrinks = 0;
	pthread_mutex_unlock(&c->shrink_lock);
	unsigned left = 0;
	/*
	 * A shrink releases held acknowledgements, and the clients' next
	 * requests meet the gate: with the lease bound passed (etcd was away),
	 * they would be refused though this node still leads. Renew first.
	 */
	bool lapsed = n && now_ms() >= c->lease_until_ms && keepalive(c) != 0;
	for (unsigned i = 0; i < n; i++) {
		char why[256];
		if (q[i].p->closing) {
			/* being deleted: nothing is acknowledged any more, etcd is not asked */
			repl_removed(q[i].p->rv, q[i].node, -ECANCELED);
			continue;
		}
		if (lapsed) {
			q[left++] = q[i];
			continue;
		}
		int ret =
		    cluster_isr_change(c->etcd, c->cluster_name, q[i].p->name, c->node,
				       q[i].p->epoch, q[i].node, false, NULL, why, sizeof(why));
		if (ret == 0 || ret == -ESTALE || ret == -EDQUOT || ret == -ENOENT ||
		    ret == -EINVAL) {
			if (ret)
				LOG_ERROR("volume %s: %s", q[i].p->name, why);
			repl_removed(q[i].p->rv, q[i].node, ret);
			continue;
		}
		/* etcd did not answer: nothing the replica lacks is acknowledged; again soon */
		LOG_WARN("volume %s: ISR shrink of %s waits for etcd: %s", q[i].p->name, q[i].node,
			 why);
		q[left++] = q[i];
	}
	if (left) {
		pthread_mutex_lock(&c->shrink_lock);
		for (unsigned i = 0; i < left && c->nshrinks < CLUSTER_MAX_SHRINKS; i++)
			c->shrinks[c->nshrinks++] = q[i];
		pthread_mutex_unlock(&c->shrink_lock);
	}
	return left > 0;
}

/*
 * grows -- run the queued ISR grows (after a member's resync); one etcd
 * cannot answer stays queued until its deadline. True if any stays.
 */
static bool grows(struct cluster *c)
{
	pthread_mutex_lock(&c->shrink_lock);
	struct grow *q = c->grows, *left = NULL;
	c->grows = NULL;
	pthread_mutex_unlock(&c->shrink_lock);
	bool waiting = false;
	while (q) {
		struct grow *g = q;
		q = q->next;
		char why[256];
		if (g->p->closing) {
			completion_complete(&g->done, -ECANCELED); /* being deleted */
			continue;
		}
		int ret = cluster_isr_change(c->etcd, c->cluster_name, g->p->name, c->node,
					     g->p->epoch, g->node, true, NULL, why, sizeof(why));
		bool definite = ret == 0 || ret == -ESTALE || ret == -ENOENT || ret == -EINVAL;
		if (definite || now_ms() >= g->deadline_ms) {
			if (ret)
				LOG_WARN("volume %s: %s cannot rejoin the ISR: %s", g->p->name,
					 g->node, why);
			completion_complete(&g->done, ret);
			continue;
		}
		g->next = left;
		left = g;
		waiting = true;
	}
	if (left) {
		pthread_mutex_lock(&c->shrink_lock);
		struct grow *last = left;
		while (last->next)
			last = last->next;
		last->next = c->grows;
		c->grows = left;
		pthread_mutex_unlock(&c->shrink_lock);
	}
	return waiting;
}

/* grow_ask -- repl_resync's grow: the cluster thread runs the txn; this waits for it */
static int grow_ask(void *arg, const char *node)
{
	struct primary *p = arg;
	struct cluster *c = p->c;
	struct grow g = {.p = p, .node = node, .deadline_ms = now_ms() + 10000};
	completion_init(&g.done);
	pthread_mutex_lock(&c->shrink_lock);
	if (atomic_load(&c->stop)) {
		/* the daemon stops: cluster_stop has answered every grow already */
		pthread_mutex_unlock(&c->shrink_lock);
		completion_destroy(&g.done);
		return -ECANCELED;
	}
	g.next = c->grows;
	c->grows = &g;
	pthread_mutex_unlock(&c->shrink_lock);
	etcd_client_wakeup(c->etcd);
	int ret = -ETIMEDOUT;
	completion_wait(&g.done, -1, &ret);
	completion_destroy(&g.done);
	return ret;
}

/* resync_thread -- one member's resync (it blocks until shipped, flushed and grown) */
static void *resync_thread(void *arg)
{
	struct primary *p = arg;
	struct repl_resync_result res;
	int ret = repl_resync(p->rv, p->rs_node, p->rs_url, p->rs_alt, grow_ask, p, &res);
	if (ret)
		LOG_WARN("volume %s: resync of %s failed: %s (tried again later)", p->name,
			 p->rs_node, rdax_strerror(ret));
	atomic_store(&p->rs_active, false);
	etcd_client_wakeup(p->c->etcd);
	return NULL;
}

/* reconcile_thread -- after a failover, every live member made equal to this copy */
static void *reconcile_thread(void *arg)
{
	struct primary *p = arg;
	if (rdax_faults.reconcile_slow)
		sleep(3 * p->c->ttl_s); /* longer than the lease: keepalives must go on meanwhile */
	if (repl_reconcile(p->rv))
		LOG_WARN("volume %s: a member could not be reconciled (it leaves the ISR)",
			 p->name);
	atomic_store(&p->rs_active, false);
	etcd_client_wakeup(p->c->etcd);
	return NULL;
}

/* primary_thread_start -- @fn(@p) in @p's thread slot, signals blocked; 0 or -errno */
static int primary_thread_start(struct primary *p, void *(*fn)(void *))
{
	atomic_store(&p->rs_active, true);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int ret = pthread_create(&p->rs_thread, NULL, fn, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		atomic_store(&p->rs_active, false);
		return -ret;
	}
	p->rs_started = true;
	return 0;
}

static const char *member_state_name(enum repl_member_state s)
{
	switch (s) {
	case REPL_LIVE:
		return "in-sync";
	case REPL_RESYNC:
		return "resync";
	case REPL_FAILED:
	case REPL_REMOVED:
		break;
	}
	return "out-of-sync";
}

/*
 * tend -- a primary's members, every tick: put their status/<node> keys
 * where they changed; start the resync of a member out of the ISR whose node
 * is up (its key exists), one per volume at a time
 */
static void tend(struct cluster *c, struct primary *p)
{
	if (!p->rv || p->deposed || p->to_serve)
		return;
	if (p->rs_started && !atomic_load(&p->rs_active)) {
		pthread_join(p->rs_thread, NULL);
		p->rs_started = false;
	}
	struct repl_member_info mi[CLUSTER_MAX_REPLICAS];
	unsigned n = repl_members(p->rv, mi, CLUSTER_MAX_REPLICAS);
	uint64_t now = now_ms();
	for (unsigned i = 0; i < n; i++) {
		struct cluster_status_rec st = {.resync_bytes_left = mi[i].resync_left,
						.resync_bytes_total = mi[i].resync_total,
						.resync_bytes_shipped = mi[i].resync_shipped};
		snprintf(st.state, sizeof(st.state), "%s", member_state_name(mi[i].state));
		snprintf(st.link, sizeof(st.link), "%s",
			 mi[i].link.transport[0] ? mi[i].link.transport : "none");
		char *json, key[CLUSTER_KEY_MAX];
		if (cluster_status_encode(&st, &json) == 0) {
			KEY(c, key, "volumes", p->name, "status", mi[i].node);
			if (strcmp(json, p->status_last[i]) != 0 &&
			    etcd_put(c->etcd, key, json, strlen(json), 0, NULL) == 0)
				snprintf(p->status_last[i], sizeof(p->status_last[i]), "%s", json);
			free(json);
		}
		if (mi[i].state != REPL_REMOVED || p->rs_started || now < p->rs_next_ms[i])
			continue;
		char url[CLUSTER_URL_MAX + 1], alt[CLUSTER_URL_MAX + 1];
		link_urls(c, mi[i].node, url, alt, sizeof(url));
		if (!url[0])
			continue; /* its node is down: nothing to resync to */
		p->rs_next_ms[i] = now + CLUSTER_RESYNC_RETRY_MS;
		/* names are validated to CLUSTER_NAME_MAX: the precision only tells the compiler */
		snprintf(p->rs_node, sizeof(p->rs_node), "%.*s", CLUSTER_NAME_MAX, mi[i].node);
		snprintf(p->rs_url, sizeof(p->rs_url), "%.*s", CLUSTER_URL_MAX, url);
		snprintf(p->rs_alt, sizeof(p->rs_alt), "%.*s", CLUSTER_URL_MAX, alt);
		int ret = primary_thread_start(p, resync_thread);
		if (ret) {
			LOG_WARN("volume %s: cannot start the resync of %s: %s", p->name,
				 mi[i].node, strerror(-ret));
			continue;
		}
		LOG_INFO("volume %s: %s is up again at %s: resync", p->name, mi[i].node, url);
	}
}

/*
 * prim_of -- this node's newest primary entry of volume @name, or NULL (a
 * node deposed and then primary again has an older, deposed entry too)
 */
static struct primary *prim_of(struct cluster *c, const char *name)
{
	for (unsigned i = c->nprim; i-- > 0;)
		if (!c->prim[i].gone && strcmp(c->prim[i].name, name) == 0)
			return &c->prim[i];
	return NULL;
}

/*
 * another_primary -- a ready volume whose primary is another node: if this
 * node served it, it is deposed (its clients are refused from now on; its
 * links are fenced at the replicas already); if the leader key is gone and
 * this node is in the ISR, it will try the failover txn after
 * rank x CLUSTER_FAILOVER_STEP_MS (rank: its place in the ISR, the old
 * primary left out), so the first in line usually wins without a race
 */
static void another_primary(struct cluster *c, const struct cluster_volume_rec *v)
{
	struct primary *p = prim_of(c, v->name);
	if (p) {
		if (!p->deposed) {
			p->deposed = true;
			cluster_gate_serve(p->g, 0);
			repl_registry_retire(p->g->v); /* a replica now, fenced at the others */
			LOG_WARN("volume %s: %s is its primary at epoch %" PRIu64
				 ": this node serves it no more",
				 v->name, v->primary, v->epoch);
			return;
		}
		/*
		 * deposed before: a replica like any other now -- in the ISR again once
		 * the new primary resynced it -- so it may take over again below (else
		 * after two failovers that depose running nodes nobody could)
		 */
	}
	bool in_isr = cluster_name_in(v->isr, v->nisr, c->node);
	if (!in_isr && !rdax_faults.failover_any_replica)
		return; /* invariant 3 */
	char lkey[CLUSTER_KEY_MAX];
	KEY(c, lkey, "volumes", v->name, "leader");
	struct etcd_range_result r;
	if (etcd_get(c->etcd, lkey, false, &r))
		return; /* the next event or rescan looks again */
	bool leader = r.count > 0;
	etcd_range_result_free(&r);
	if (leader)
		return;
	unsigned rank = 0;
	for (unsigned i = 0; i < v->nisr && in_isr && strcmp(v->isr[i], c->node) != 0; i++)
		if (strcmp(v->isr[i], v->primary) != 0)
			rank++;
	for (unsigned i = 0; i < c->nfo; i++)
		if (strcmp(c->fo[i].name, v->name) == 0)
			return;
	if (c->nfo == CLUSTER_MAX_PENDING)
		return;
	snprintf(c->fo[c->nfo].name, CLUSTER_NAME_MAX + 1, "%.*s", CLUSTER_NAME_MAX, v->name);
	c->fo[c->nfo++].due_ms = now_ms() + rank * CLUSTER_FAILOVER_STEP_MS;
	LOG_INFO("volume %s: no leader (primary %s at epoch %" PRIu64 "): failover in %u ms",
		 v->name, v->primary, v->epoch, rank * CLUSTER_FAILOVER_STEP_MS);
}

/* serve_taken_over -- a volume taken over (and reconciled) is served under the lease */
static void serve_taken_over(struct cluster *c, struct primary *p)
{
	cluster_gate_lease(p->g, c->lease_until_ms);
	if (cluster_gate_serve(p->g, p->epoch) == 0)
		LOG_INFO("volume %s: primary after the failover, epoch %" PRIu64 ", %u replica%s",
			 p->name, p->epoch, p->nmembers, p->nmembers == 1 ? "" : "s");
}

/*
 * take_over -- the failover txn won: this node is the primary at the new
 * epoch. Before it serves: the copy's epoch is raised (the old primary's
 * links to it are refused from now on), the links open at the new epoch
 * (raising it on every member), and every live member is reconciled to this
 * copy (repl_reconcile, on the primary's thread); then clients are served
 * (serve_taken_over, from take_overs_finish).
 */
static void take_over(struct cluster *c, const struct cluster_volume_rec *v)
{
	struct gate_vol *g = cluster_gate_find(v->name);
	if (!g || cluster_gate_retired(g))
		return;
	if (cluster_gate_raise_epoch(g, v->epoch)) {
		LOG_ERROR("volume %s: this copy has seen an epoch past %" PRIu64 ": not serving",
			  v->name, v->epoch);
		return;
	}
	struct primary *p = prim_new(c);
	if (!p)
		return;
	p->g = g;
	p->epoch = v->epoch;
	snprintf(p->name, sizeof(p->name), "%s", v->name);
	struct repl_member_spec m[CLUSTER_MAX_REPLICAS];
	char urls[CLUSTER_MAX_REPLICAS][CLUSTER_URL_MAX + 1];
	char alts[CLUSTER_MAX_REPLICAS][CLUSTER_URL_MAX + 1];
	unsigned n = 0;
	for (unsigned i = 0; i < v->nisr; i++) {
		if (strcmp(v->isr[i], c->node) == 0)
			continue;
		link_urls(c, v->isr[i], urls[n], alts[n], sizeof(urls[n]));
		m[n] = (struct repl_member_spec){v->isr[i],
						 urls[n][0] ? urls[n] : "tcp://0.0.0.0:1", alts[n]};
		n++;
	}
	prim_keep(c, p);
	p->nmembers = n;
	if (n) {
		struct repl_opts o = {.volume = v->name,
				      .mapping = g->v->data,
				      .size = g->v->size,
				      .epoch = v->epoch,
				      .primary = c->node,
				      .incarnation = c->incarnation,
				      .fence = true,
				      .untrusted = true,
				      .rec = &g->rec,
				      .home = link_home(c, (unsigned)(p - c->prim)),
				      .spin_cap_us = c->o.replica_busy_poll_us,
				      .shrink = on_shrink,
				      .arg = p};
		if (repl_start(&o, m, n, &p->rv) || repl_registry_put(g->v, p->rv)) {
			LOG_ERROR("volume %s: cannot start its replication after the failover",
				  v->name);
			return;
		}
		/*
		 * the reconcile reads the whole copy: on a thread of its own, so that
		 * this thread keeps the lease alive meanwhile (a big volume's reconcile
		 * may take longer than the lease); take_overs_finish serves after it
		 */
		int ret = rdax_faults.reconcile_inline ? -EAGAIN
						       : primary_thread_start(p, reconcile_thread);
		if (ret == 0) {
			p->to_serve = true;
			return;
		}
		LOG_WARN("volume %s: no thread for the reconcile (%s): it runs here", v->name,
			 strerror(-ret));
		if (rdax_faults.reconcile_slow)
			sleep(3 * c->ttl_s);
		repl_reconcile(p->rv);
	}
	serve_taken_over(c, p);
}

/*
 * take_overs_finish -- the primaries whose reconcile ended: shrinks of the
 * members it failed, then served (unless deposed meanwhile)
 */
static void take_overs_finish(struct cluster *c)
{
	for (unsigned i = 0; i < c->nprim; i++) {
		struct primary *p = &c->prim[i];
		if (p->gone || p->closing || !p->to_serve || atomic_load(&p->rs_active))
			continue; /* one being deleted is joined by local_delete */
		pthread_join(p->rs_thread, NULL);
		p->rs_started = false;
		p->to_serve = false;
		shrinks(c);
		if (p->deposed)
			LOG_WARN("volume %s: deposed during its reconcile: not served", p->name);
		else
			serve_taken_over(c, p);
	}
}

/* failovers -- the failover txns that are due; one etcd cannot answer is tried again */
static void failovers(struct cluster *c)
{
	uint64_t now = now_ms();
	for (unsigned i = 0; i < c->nfo;) {
		if (c->fo[i].due_ms > now) {
			i++;
			continue;
		}
		char why[256];
		struct cluster_volume_rec v;
		int ret = cluster_failover(c->etcd, c->cluster_name, c->fo[i].name, c->node,
					   c->lease, c->incarnation, &v, why, sizeof(why));
		if (ret == -ENOTCONN || ret == -ETIMEDOUT || ret == -ECONNRESET) {
			c->fo[i].due_ms = now + 300; /* etcd away: again soon (the txn compares) */
			i++;
			continue;
		}
		if (ret == 0) {
			LOG_WARN("volume %s: took over as primary at epoch %" PRIu64, v.name,
				 v.epoch);
			take_over(c, &v);
		} else {
			LOG_INFO("volume %s: no failover by this node: %s", c->fo[i].name, why);
		}
		c->fo[i] = c->fo[--c->nfo];
	}
}

/* del_note -- volume @name's local part of a delete is to be tried again (@again) or done */
static void del_note(struct cluster *c, const char *name, bool again)
{
	for (unsigned i = 0; i < c->ndel; i++)
		if (strcmp(c->del[i], name) == 0) {
			if (!again)
				memcpy(c->del[i], c->del[--c->ndel], sizeof(c->del[i]));
			return;
		}
	if (again && c->ndel < CLUSTER_MAX_PENDING)
		snprintf(c->del[c->ndel++], CLUSTER_NAME_MAX + 1, "%.*s", CLUSTER_NAME_MAX, name);
	/* no room: the next watch event of the volume (or a rescan) looks again */
}

/*
 * prim_close -- volume @p is being deleted: no more acknowledgements (its
 * shrinks are answered with an error), its links closed (the members' copies
 * are held open by them no more), its resync or reconcile told to end
 */
static void prim_close(struct primary *p)
{
	if (p->closing)
		return;
	p->closing = true;
	p->deposed = true;
	if (p->rv) {
		repl_close(p->rv);
		repl_resync_cancel(p->rv);
	}
}

/*
 * prim_free -- @p's volume is deleted here (no request can hold its
 * replication: each holds an opener of the copy): stop it, forget the
 * shrinks queued for it, free the slot. -EAGAIN while its resync or
 * reconcile thread has not ended (the next tick tries again).
 */
static int prim_free(struct cluster *c, struct primary *p)
{
	if (p->rs_started) {
		if (atomic_load(&p->rs_active))
			return -EAGAIN;
		pthread_join(p->rs_thread, NULL);
		p->rs_started = false;
	}
	repl_stop(&p->rv);
	pthread_mutex_lock(&c->shrink_lock);
	for (unsigned i = 0; i < c->nshrinks;)
		if (c->shrinks[i].p == p)
			c->shrinks[i] = c->shrinks[--c->nshrinks];
		else
			i++;
	pthread_mutex_unlock(&c->shrink_lock);
	p->g = NULL;
	p->name[0] = '\0';
	p->gone = true;
	return 0;
}

/* is_copy -- is @name a cluster copy here: a gate entry, or a change record (after a restart) */
static bool is_copy(struct cluster *c, const char *name, struct gate_vol *g)
{
	char rname[NS_VOLUME_NAME_MAX + 1];
	struct volume_info info;
	if (g)
		return true; /* found: not dead */
	return cluster_record_name(name, rname, sizeof(rname)) == 0 &&
	       store_volume_info(c->o.store, rname, &info) == 0;
}

/*
 * local_delete -- this node's part of deleting volume @name: stop serving
 * and applying it, close its links, then delete the copy and its change
 * record. Only a cluster copy is deleted (a local volume of that name that
 * never was one stays). Returns 0 (done, or nothing here), -EBUSY (a handle
 * -- a client's, an NBD export's, a link's from a primary -- still holds
 * the copy: tried again every tick), -EAGAIN (a resync thread has not ended
 * yet), another store code.
 */
static int local_delete(struct cluster *c, const char *name)
{
	struct gate_vol *g = cluster_gate_find(name);
	if (g) {
		cluster_gate_retire(g);
		for (unsigned i = 0; i < c->nprim; i++)
			if (!c->prim[i].gone && strcmp(c->prim[i].name, name) == 0)
				prim_close(&c->prim[i]);
		if (g->v)
			repl_registry_remove(g->v); /* before release: keyed by the volume */
	}
	for (unsigned i = 0; i < c->nprim; i++)
		if (!c->prim[i].gone && strcmp(c->prim[i].name, name) == 0 &&
		    c->prim[i].rs_started && atomic_load(&c->prim[i].rs_active))
			return -EAGAIN; /* it reads the copy: it ends first */
	if (!is_copy(c, name, g))
		return 0;
	if (rdax_faults.delete_keep_copy) {
		LOG_WARN("volume %s: control delete-keep-copy: the local copy is kept", name);
		return 0;
	}
	if (g)
		cluster_gate_release(c->o.store, g);
	int ret = store_volume_delete(c->o.store, name);
	if (ret == -EBUSY)
		return ret;
	if (ret && ret != -ENOENT) {
		LOG_ERROR("volume %s: cannot delete the local copy: %s", name, rdax_strerror(ret));
		return ret;
	}
	for (unsigned i = 0; i < c->nprim; i++)
		if (!c->prim[i].gone && strcmp(c->prim[i].name, name) == 0 &&
		    (ret = prim_free(c, &c->prim[i])))
			return ret;
	char rname[NS_VOLUME_NAME_MAX + 1];
	if (cluster_record_name(name, rname, sizeof(rname)) == 0) {
		ret = store_volume_delete(c->o.store, rname);
		if (ret && ret != -ENOENT) {
			LOG_ERROR("volume %s: cannot delete its change record: %s", name,
				  rdax_strerror(ret));
			return ret;
		}
	}
	if (g)
		cluster_gate_bury(g);
	c->refresh_now = true; /* the space is free: the node key says so */
	LOG_INFO("volume %s: the local copy and its change record are deleted", name);
	return 0;
}

/*
 * member_delete -- volume @name is "deleting" (its key at @rev; 0: the key
 * is gone, only the local part is left): the local part, then this node's
 * member key, then -- if no member key is left -- the volume's keys
 * (cluster_delete_finish). What cannot be done now is tried again (del_note).
 */
static void member_delete(struct cluster *c, const char *name, int64_t rev)
{
	int ret = local_delete(c, name);
	if (ret) {
		if (ret != -EBUSY && ret != -EAGAIN)
			LOG_WARN("volume %s: the local copy stays for now: %s", name,
				 rdax_strerror(ret));
		del_note(c, name, true);
		return;
	}
	if (rev == 0) {
		del_note(c, name, false);
		return;
	}
	char key[CLUSTER_KEY_MAX];
	bool done = false;
	KEY(c, key, "volumes", name, "members", c->node);
	ret = etcd_delete(c->etcd, key, false, NULL);
	if (ret == 0)
		ret = cluster_delete_finish(c->etcd, c->cluster_name, name, rev, &done);
	if (ret) {
		LOG_WARN("volume %s: the delete waits for etcd: %s", name,
			 etcd_client_last_error(c->etcd));
		del_note(c, name, true);
		return;
	}
	if (done)
		LOG_INFO("volume %s: deleted (no copy left: its keys are removed)", name);
	del_note(c, name, false);
}

/* look_at -- one volume key (@json at @rev): what this node must do for it */
static void look_at(struct cluster *c, const char *json, size_t len, int64_t rev)
{
	struct cluster_volume_rec v;
	char why[256];
	if (cluster_volume_decode(json, len, &v, why, sizeof(why))) {
		LOG_WARN("a volume key is unusable (%s): left as it is", why);
		return;
	}
	bool member = cluster_name_in(v.replicas, v.nreplicas, c->node);
	if (v.state == CLUSTER_VOL_DELETING) {
		if (member || cluster_gate_find(v.name))
			member_delete(c, v.name, rev);
		return;
	}
	if (!member)
		return;
	if (cluster_gate_retired(cluster_gate_find(v.name))) {
		/* a copy of a volume of this name deleted before (its handles held it): first */
		if (local_delete(c, v.name)) {
			del_note(c, v.name, true);
			return;
		}
		del_note(c, v.name, false);
	}
	if (local_replica(c, &v, rev))
		return;
	if (v.state == CLUSTER_VOL_CREATING && strcmp(v.primary, c->node) == 0)
		become_primary(c, &v, rev);
	else if (v.state == CLUSTER_VOL_READY && strcmp(v.primary, c->node) == 0)
		serve_as_primary(c, &v);
	else if (v.state == CLUSTER_VOL_READY)
		another_primary(c, &v);
}

/* del_pending -- is @name's local delete still to be done */
static bool del_pending(const struct cluster *c, const char *name)
{
	for (unsigned i = 0; i < c->ndel; i++)
		if (strcmp(c->del[i], name) == 0)
			return true;
	return false;
}

/* look_at_name -- read volumes/<name> and look at it */
static void look_at_name(struct cluster *c, const char *name)
{
	char key[CLUSTER_KEY_MAX];
	struct etcd_range_result r;
	KEY(c, key, "volumes", name);
	if (etcd_get(c->etcd, key, false, &r)) {
		c->rescan = true; /* etcd away: try every volume again later */
		return;
	}
	if (r.count == 1) {
		look_at(c, r.kvs[0].value, r.kvs[0].value_len, r.kvs[0].mod_revision);
	} else {
		/*
		 * No key: a copy still served here is of a volume deleted without this
		 * node (it made its copy while the others finished): it goes too
		 */
		if (cluster_gate_find(name) || del_pending(c, name))
			member_delete(c, name, 0);
	}
	etcd_range_result_free(&r);
}

/*
 * scan -- look at every volume key; *rev gets the revision read, so a watch
 * from rev + 1 misses nothing. Returns 0 or an etcd code.
 */
static int scan(struct cluster *c, int64_t *rev)
{
	char prefix[CLUSTER_KEY_MAX];
	struct etcd_range_result r;
	KEY(c, prefix, "volumes", "");
	int ret = etcd_get(c->etcd, prefix, true, &r);
	if (ret)
		return ret;
	for (size_t i = 0; i < r.count; i++) {
		char kind[CLUSTER_KEY_MAX], name[CLUSTER_KEY_MAX], sub[CLUSTER_KEY_MAX],
		    leaf[CLUSTER_KEY_MAX];
		if (cluster_key_parse(r.kvs[i].key, c->cluster_name, kind, name, sub, leaf) == 0 &&
		    sub[0] == '\0')
			look_at(c, r.kvs[i].value, r.kvs[i].value_len, r.kvs[i].mod_revision);
	}
	if (rev)
		*rev = r.revision;
	etcd_range_result_free(&r);
	return 0;
}

/* pend -- remember volume @name for after the poll */
static void pend(struct cluster *c, const char *name)
{
	for (unsigned i = 0; i < c->npending; i++)
		if (strcmp(c->pending[i], name) == 0)
			return;
	if (c->npending == CLUSTER_MAX_PENDING || !cluster_name_valid(name)) {
		c->rescan = c->rescan || c->npending == CLUSTER_MAX_PENDING;
		return;
	}
	/* valid names fit: the precision only tells the compiler */
	snprintf(c->pending[c->npending++], CLUSTER_NAME_MAX + 1, "%.*s", CLUSTER_NAME_MAX, name);
}

/* on_watch -- events under volumes/: note the volumes they concern (no etcd call here) */
static void on_watch(void *arg, const struct etcd_watch_update *u)
{
	struct cluster *c = arg;
	if (u->kind == ETCD_WATCH_CANCELED) {
		LOG_WARN("the volume watch ended (%s): reading every volume again", u->message);
		c->rescan = true;
		return;
	}
	if (u->kind != ETCD_WATCH_EVENTS)
		return;
	for (size_t i = 0; i < u->count; i++) {
		char kind[CLUSTER_KEY_MAX], name[CLUSTER_KEY_MAX], sub[CLUSTER_KEY_MAX],
		    leaf[CLUSTER_KEY_MAX];
		if (cluster_key_parse(u->events[i].kv.key, c->cluster_name, kind, name, sub,
				      leaf) == 0 &&
		    (sub[0] == '\0' || strcmp(sub, "members") == 0 || strcmp(sub, "leader") == 0))
			pend(c, name);
	}
}

/* start_watch -- watch volumes/ from @from (a canceled watch is replaced) */
static int start_watch(struct cluster *c, int64_t from)
{
	char prefix[CLUSTER_KEY_MAX];
	KEY(c, prefix, "volumes", "");
	etcd_watch_cancel(&c->watch);
	return etcd_watch_start(c->etcd, prefix, true, from, on_watch, c, &c->watch);
}

/*
 * keepalive -- renew the node lease now; if etcd forgot it (away longer than
 * the TTL), the volumes this node led are served no more and it joins again.
 * The next keepalive is set: soon after a failure, a third of the TTL after a
 * renewal. Returns 0 if the lease was renewed.
 */
static int keepalive(struct cluster *c)
{
	uint64_t now = now_ms();
	int ret = etcd_lease_keepalive(c->etcd, c->lease, NULL);
	if (ret == 0)
		lease_renewed(c, now);
	if (ret == -ENOENT) {
		LOG_WARN("the node lease expired (etcd was away longer than %u s): "
			 "joining again; the volumes it led are served no more",
			 c->ttl_s);
		for (unsigned i = 0; i < c->nprim; i++)
			if (!c->prim[i].deposed) {
				c->prim[i].deposed = true;
				cluster_gate_serve(c->prim[i].g, 0);
				repl_registry_retire(c->prim[i].g->v);
			}
		ret = join(c);
		if (ret == 0)
			ret = -ENOENT; /* joined anew: the old lease's volumes stay deposed */
	}
	if (ret && ret != -ENOENT)
		LOG_WARN("lease keepalive: %s", etcd_client_last_error(c->etcd));
	/* on failure try again soon: the lease still has most of its TTL */
	c->next_keepalive_ms = now + (ret && ret != -ENOENT ? 300 : c->ttl_s * 1000 / 3);
	return ret;
}

/* timers -- lease keepalive and node key refresh, when due */
static void timers(struct cluster *c)
{
	uint64_t now = now_ms();
	if (now >= c->next_keepalive_ms)
		keepalive(c);
	if (c->refresh_now || now >= c->next_refresh_ms) {
		if (put_node(c, false) == 0)
			c->refresh_now = false;
		c->next_refresh_ms = now + CLUSTER_REFRESH_MS;
	}
}

static void *cluster_thread(void *arg)
{
	struct cluster *c = arg;
	while (!atomic_load(&c->stop)) {
		timers(c);
		if (c->rescan) {
			int64_t rev;
			c->rescan = false;
			if (scan(c, &rev) == 0)
				start_watch(c, rev + 1);
			else
				c->rescan = true;
		}
		bool waiting = shrinks(c);
		waiting = grows(c) || waiting;
		failovers(c);
		take_overs_finish(c);
		waiting = waiting || c->nfo > 0;
		if (now_ms() >= c->next_tick_ms) {
			for (unsigned i = 0; i < c->nprim; i++)
				tend(c, &c->prim[i]);
			/* deletes a handle held up: look again (look_at_name re-reads the key) */
			char del[CLUSTER_MAX_PENDING][CLUSTER_NAME_MAX + 1];
			unsigned ndel = c->ndel;
			memcpy(del, c->del, ndel * sizeof(del[0]));
			for (unsigned i = 0; i < ndel && !atomic_load(&c->stop); i++)
				look_at_name(c, del[i]);
			c->next_tick_ms = now_ms() + CLUSTER_TICK_MS;
		}
		unsigned n = c->npending;
		c->npending = 0;
		for (unsigned i = 0; i < n && !atomic_load(&c->stop); i++)
			look_at_name(c, c->pending[i]);
		uint64_t now = now_ms(), next = c->next_keepalive_ms;
		next = c->next_refresh_ms < next ? c->next_refresh_ms : next;
		next = c->next_tick_ms < next ? c->next_tick_ms : next;
		int wait = next > now ? (int)(next - now) : 0;
		if (c->rescan || waiting)
			wait = wait > 300 ? 300 : wait;
		etcd_client_poll(c->etcd, wait);
	}
	return NULL;
}

/* cluster_free -- everything cluster_start allocated */
static void cluster_free(struct cluster *c)
{
	etcd_watch_cancel(&c->watch);
	etcd_client_delete(&c->etcd);
	for (unsigned i = 0; i < c->o.naddrs; i++)
		free(c->addrs[i]);
	free(c->addrs);
	free(c->etcd_spec);
	free(c->cluster_name);
	free(c->node);
	free(c->zone);
	free(c->version);
	free(c);
}

/* copy_opts -- the options, with strings of our own */
static int copy_opts(struct cluster *c, const struct cluster_opts *o)
{
	c->o = *o;
	c->etcd_spec = strdup(o->etcd);
	c->cluster_name = strdup(o->cluster_name);
	c->node = strdup(o->node);
	c->zone = o->zone ? strdup(o->zone) : NULL;
	c->version = o->version ? strdup(o->version) : NULL;
	c->addrs = calloc(o->naddrs ? o->naddrs : 1, sizeof(*c->addrs));
	if (!c->etcd_spec || !c->cluster_name || !c->node || (o->zone && !c->zone) ||
	    (o->version && !c->version) || !c->addrs)
		return -ENOMEM;
	for (unsigned i = 0; i < o->naddrs; i++)
		if (!(c->addrs[i] = strdup(o->addrs[i])))
			return -ENOMEM;
	return 0;
}

int cluster_start(const struct cluster_opts *o, struct cluster **out, char *err, size_t errlen)
{
	struct cluster *c = calloc(1, sizeof(*c));
	if (c)
		pthread_mutex_init(&c->shrink_lock, NULL);
	if (!c || copy_opts(c, o)) {
		if (c)
			cluster_free(c);
		rdax_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->ttl_s = o->lease_ttl_s ? o->lease_ttl_s : CLUSTER_DEFAULT_LEASE_S;
	cluster_gate_enable(); /* record names are reserved from now on */
	if (getrandom(&c->incarnation, sizeof(c->incarnation), 0) != sizeof(c->incarnation))
		c->incarnation = ((uint64_t)now_ms() << 20) ^ (uint64_t)getpid();
	char why[512];
	int ret = etcd_client_new(o->etcd, NULL, &c->etcd, why, sizeof(why));
	if (ret) {
		rdax_seterr(err, errlen, "--cluster %s: %s", o->etcd, why);
		cluster_free(c);
		return ret;
	}
	int64_t rev = 0;
	ret = join(c);
	if (ret == 0)
		ret = scan(c, &rev);
	if (ret == 0)
		ret = start_watch(c, rev + 1);
	if (ret) {
		rdax_seterr(err, errlen, "cannot reach etcd at %s: %s", o->etcd,
			    etcd_client_last_error(c->etcd)[0] ? etcd_client_last_error(c->etcd)
							       : rdax_strerror(ret));
		if (c->lease)
			etcd_lease_revoke(c->etcd, c->lease);
		cluster_free(c);
		return ret;
	}
	c->next_refresh_ms = now_ms() + CLUSTER_REFRESH_MS;
	/* the thread gets no signals: main handles them */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&c->thread, NULL, cluster_thread, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		rdax_seterr(err, errlen, "cannot start the cluster thread: %s", strerror(-ret));
		etcd_lease_revoke(c->etcd, c->lease);
		cluster_free(c);
		return ret;
	}
	c->started = true;
	LOG_INFO("cluster %s: node %s (incarnation %016" PRIx64 ") joined via %s, lease %u s",
		 c->cluster_name, c->node, c->incarnation, etcd_client_endpoint(c->etcd), c->ttl_s);
	*out = c;
	return 0;
}

void cluster_stop(struct cluster **cp)
{
	struct cluster *c = cp ? *cp : NULL;
	if (!c)
		return;
	if (c->started) {
		atomic_store(&c->stop, true);
		etcd_client_wakeup(c->etcd);
		pthread_join(c->thread, NULL);
	}
	/* a resync waiting for its grow gets an answer, and its link is stopped below */
	pthread_mutex_lock(&c->shrink_lock);
	for (struct grow *g = c->grows, *next; g; g = next) {
		next = g->next;
		completion_complete(&g->done, -ECANCELED);
	}
	c->grows = NULL;
	pthread_mutex_unlock(&c->shrink_lock);
	for (unsigned i = 0; i < c->nprim; i++)
		if (c->prim[i].rs_started)
			repl_resync_cancel(c->prim[i].rv);
	for (unsigned i = 0; i < c->nprim; i++)
		if (c->prim[i].rs_started)
			pthread_join(c->prim[i].rs_thread, NULL);
	/* the workers and pools have stopped: nothing writes or fsyncs through these now */
	repl_registry_clear(NULL);
	for (unsigned i = 0; i < c->nprim; i++)
		repl_stop(&c->prim[i].rv);
	cluster_gate_close_all(c->o.store);
	int ret = etcd_lease_revoke(c->etcd, c->lease);
	if (ret && ret != -ENOENT)
		LOG_WARN("cannot revoke the node lease (its keys go when it expires): %s",
			 etcd_client_last_error(c->etcd));
	cluster_free(c);
	*cp = NULL;
}
