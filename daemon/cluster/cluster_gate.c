/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster_gate.c -- who may use a clustered volume on this node */
#include "cluster_gate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "namespace.h"
#include "volume.h"

static struct gate_vol *entries[CLUSTER_GATE_MAX];
static unsigned count;	      /* entries published; read with acquire */
static atomic_bool clustered; /* this is a cluster node (cluster_gate_enable) */

int cluster_record_name(const char *volume, char *out, size_t len)
{
	size_t n = volume ? strlen(volume) : 0;
	if (n == 0 || n > CLUSTER_VOLUME_NAME_MAX || len < n + CLUSTER_RECORD_SUFFIX_LEN + 1)
		return -ENAMETOOLONG;
	memcpy(out, volume, n);
	memcpy(out + n, CLUSTER_RECORD_SUFFIX, CLUSTER_RECORD_SUFFIX_LEN + 1);
	return 0;
}

/*
 * name_is -- does @g hold @name? Read under the entry's sequence count (a
 * dead entry's name may be rewritten meanwhile: cluster_gate.h), byte by
 * byte with atomic loads, and read again if the count moved.
 */
static bool name_is(struct gate_vol *g, const char *name)
{
	for (;;) {
		uint32_t s = atomic_load_explicit(&g->seq, memory_order_acquire);
		if (s & 1)
			return false; /* a dead entry getting another name: neither is served */
		bool eq = true;
		for (size_t i = 0; i <= CLUSTER_NAME_MAX; i++) {
			char ch = __atomic_load_n(&g->name[i], __ATOMIC_RELAXED);
			if (ch != name[i]) {
				eq = false;
				break;
			}
			if (ch == '\0')
				break;
		}
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&g->seq, memory_order_relaxed) == s)
			return eq;
	}
}

/* find_entry -- @name's entry; a dead one only if @dead_too (the cluster thread's reuse) */
static struct gate_vol *find_entry(const char *name, bool dead_too)
{
	unsigned n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (name_is(entries[i], name) &&
		    (dead_too || !atomic_load_explicit(&entries[i]->dead, memory_order_acquire)))
			return entries[i];
	return NULL;
}

struct gate_vol *cluster_gate_find(const char *name)
{
	return find_entry(name, false);
}

/* name_set -- rewrite dead entry @g's name (cluster thread), odd count around it */
static void name_set(struct gate_vol *g, const char *name)
{
	uint32_t s = atomic_load_explicit(&g->seq, memory_order_relaxed);
	atomic_store_explicit(&g->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	size_t n = strlen(name);
	for (size_t i = 0; i <= CLUSTER_NAME_MAX; i++)
		__atomic_store_n(&g->name[i], i < n ? name[i] : '\0', __ATOMIC_RELAXED);
	atomic_store_explicit(&g->seq, s + 2, memory_order_release);
}

void cluster_gate_enable(void)
{
	atomic_store(&clustered, true);
}

bool cluster_gate_reserved(const char *name)
{
	size_t n = strlen(name);
	return atomic_load(&clustered) && n > CLUSTER_RECORD_SUFFIX_LEN &&
	       strcmp(name + n - CLUSTER_RECORD_SUFFIX_LEN, CLUSTER_RECORD_SUFFIX) == 0;
}

/*
 * record_attach -- open (or create, next to the copy) @g's record volume and
 * describe its bytes; a record that is not one, or is for another size, is
 * formatted anew with @epoch (its slots are lost: a member away then needs a
 * full resync, which digests keep cheap)
 */
static int record_attach(struct store *store, struct gate_vol *g, uint64_t epoch, char *err,
			 size_t errlen)
{
	char rname[NS_VOLUME_NAME_MAX + 1];
	int ret = cluster_record_name(g->name, rname, sizeof(rname));
	if (ret) {
		rdax_seterr(err, errlen, "the name is too long for its change record (at most %d)",
			    CLUSTER_VOLUME_NAME_MAX);
		return ret;
	}
	uint64_t need = change_record_size(g->v->size);
	ret = store_volume_open(store, rname, &g->recv);
	if (ret == -ENOENT) {
		uint32_t ns_id = g->v->ns->id;
		ret = store_volume_create(store, rname, need, &ns_id, NULL, err, errlen);
		if (ret == 0)
			ret = store_volume_open(store, rname, &g->recv);
	}
	if (ret) {
		if (!err || !err[0])
			rdax_seterr(err, errlen, "change record %s: %s", rname, rdax_strerror(ret));
		return ret;
	}
	if (g->recv->size < need) {
		rdax_seterr(err, errlen, "change record %s has %" PRIu64 " bytes, needs %" PRIu64,
			    rname, g->recv->size, need);
		store_volume_close(store, &g->recv);
		return -ENOSPC;
	}
	const struct persist *p = &g->recv->ns->persist;
	if (change_record_open(&g->rec, g->recv->data, g->recv->size, p, g->v->size) != 0) {
		LOG_INFO("volume %s: a new change record (epoch %" PRIu64 ")", g->name, epoch);
		ret = change_record_format(&g->rec, g->recv->data, g->recv->size, p, g->v->size,
					   epoch);
		if (ret) {
			rdax_seterr(err, errlen, "change record %s: cannot format: %s", rname,
				    rdax_strerror(ret));
			store_volume_close(store, &g->recv);
			return ret;
		}
	}
	return 0;
}

/*
 * slot_for -- the entry @vol gets: its own dead one (a re-create), a new
 * one while there is room, else any dead one (renamed, cluster_gate.h).
 * *fresh: a new allocation (not yet counted). NULL: -ENOSPC or -ENOMEM in *ret.
 */
static struct gate_vol *slot_for(const char *vol, bool *fresh, int *ret)
{
	struct gate_vol *g = find_entry(vol, true);
	*fresh = false;
	if (g)
		return g; /* dead: the caller checked that no live or retired one has the name */
	if (count < CLUSTER_GATE_MAX) {
		g = calloc(1, sizeof(*g));
		if (!g) {
			*ret = -ENOMEM;
			return NULL;
		}
		snprintf(g->name, sizeof(g->name), "%s", vol);
		pthread_mutex_init(&g->lock, NULL);
		*fresh = true;
		return g;
	}
	for (unsigned i = 0; i < count; i++)
		if (atomic_load(&entries[i]->dead)) {
			name_set(entries[i], vol);
			return entries[i];
		}
	*ret = -ENOSPC;
	return NULL;
}

int cluster_gate_open(struct store *store, const char *vol, uint64_t epoch, char *err,
		      size_t errlen, struct gate_vol **out)
{
	struct gate_vol *g = cluster_gate_find(vol);
	if (g && !cluster_gate_retired(g)) {
		*out = g;
		return -EEXIST;
	}
	if (g) {
		rdax_seterr(err, errlen, "the volume's previous copy is still being deleted");
		return -EBUSY;
	}
	bool fresh;
	int ret = 0;
	g = slot_for(vol, &fresh, &ret);
	if (!g) {
		if (ret == -ENOSPC)
			rdax_seterr(err, errlen, "more than %d cluster volumes on this node",
				    CLUSTER_GATE_MAX);
		return ret;
	}
	/* a reused entry is retired (so refused) until the end, where it is live again */
	ret = store_volume_open(store, vol, &g->v);
	if (ret) {
		rdax_seterr(err, errlen, "cannot open the local copy: %s", rdax_strerror(ret));
		goto err_free;
	}
	ret = record_attach(store, g, epoch, err, errlen);
	if (ret)
		goto err_close;
	pthread_mutex_lock(&g->lock);
	atomic_store(&g->serving, 0);
	atomic_store(&g->until_ms, 0);
	atomic_store(&g->epoch, change_record_epoch(&g->rec));
	g->key_epoch = epoch;
	g->primary[0] = g->primary_url[0] = g->primary_rdma[0] = '\0';
	g->windows = NULL; /* retire revoked and unlinked every one */
	g->released = false;
	atomic_store(&g->dead, false); /* still retired: found, and refused, until the end */
	pthread_mutex_unlock(&g->lock);
	if (fresh) {
		entries[count] = g;
		/* the entry is complete before it is counted */
		__atomic_store_n(&count, count + 1, __ATOMIC_RELEASE);
	} else {
		/* complete before the checks stop refusing it */
		atomic_store_explicit(&g->retired, false, memory_order_release);
		LOG_INFO("volume %s: a gate entry reused", vol);
	}
	*out = g;
	return 0;

err_close:
	store_volume_close(store, &g->v);
err_free:
	if (fresh) {
		pthread_mutex_destroy(&g->lock);
		free(g);
	}
	return ret;
}

/*
 * window_stale -- must @w go now (struct gate_window)? A link's of an epoch
 * older than @seen; a client's once this node no longer serves at its epoch.
 * The controls leave them: replica-no-fence every window (as it lets every
 * request through), client-window-keep the clients'.
 */
static bool window_stale(const struct gate_window *w, uint64_t seen, uint64_t serving)
{
	if (!w->client)
		return w->epoch < seen;
	if (rdax_faults.client_window_keep)
		return false;
	return w->epoch < seen || serving != w->epoch;
}

/* __revoke_windows -- under g->lock: revoke every window that window_stale() says must go */
static void __revoke_windows(struct gate_vol *g)
{
	uint64_t seen = atomic_load(&g->epoch);
	uint64_t serving = atomic_load(&g->serving);
	if (rdax_faults.replica_no_fence)
		return;
	for (struct gate_window **wp = &g->windows; *wp;) {
		struct gate_window *w = *wp;
		if (!window_stale(w, seen, serving)) {
			wp = &w->next;
			continue;
		}
		*wp = w->next;
		w->next = NULL;
		w->revoked = true;
		w->revoke(w);
		LOG_INFO("volume %s: the RDMA window of a %s of epoch %" PRIu64
			 " is revoked (epoch %" PRIu64 " seen, served at %" PRIu64 ")",
			 g->name, w->client ? "client" : "link", w->epoch, seen, serving);
	}
}

/* __raise -- under g->lock: persist @epoch if newer; 0 or -RDAX_E_STALE_EPOCH */
static int __raise(struct gate_vol *g, uint64_t epoch)
{
	if (change_record_raise_epoch(&g->rec, epoch) != 0)
		return -RDAX_E_STALE_EPOCH;
	/* durable first, then visible: a request refused for it stays refused after a crash */
	atomic_store_explicit(&g->epoch, change_record_epoch(&g->rec), memory_order_release);
	/* and one-sided writes of older links stop here, before the raise is answered */
	__revoke_windows(g);
	return 0;
}

int cluster_gate_window_add(struct gate_vol *g, struct gate_window *w)
{
	int ret = 0;
	pthread_mutex_lock(&g->lock);
	uint64_t seen = atomic_load(&g->epoch);
	if (atomic_load(&g->retired)) {
		ret = w->client ? -RDAX_E_NOT_PRIMARY : -RDAX_E_STALE_EPOCH; /* being deleted */
	} else if (w->client) {
		/* the epoch it is served at; deposed between the open's check and now: none */
		w->epoch = atomic_load(&g->serving);
		if ((w->epoch == 0 || w->epoch < seen) && !rdax_faults.replica_no_fence &&
		    !rdax_faults.client_window_keep)
			ret = -RDAX_E_NOT_PRIMARY;
	} else if (w->epoch < seen && !rdax_faults.replica_no_fence) {
		ret = -RDAX_E_STALE_EPOCH; /* raised between the open's check and now */
	}
	if (ret == 0) {
		w->revoked = false;
		w->next = g->windows;
		g->windows = w;
	}
	pthread_mutex_unlock(&g->lock);
	return ret;
}

bool cluster_gate_window_remove(struct gate_vol *g, struct gate_window *w)
{
	pthread_mutex_lock(&g->lock);
	bool revoked = w->revoked;
	for (struct gate_window **wp = &g->windows; *wp; wp = &(*wp)->next)
		if (*wp == w) {
			*wp = w->next;
			break;
		}
	pthread_mutex_unlock(&g->lock);
	return revoked;
}

int cluster_gate_serve(struct gate_vol *g, uint64_t epoch)
{
	int ret = 0;
	pthread_mutex_lock(&g->lock);
	if (epoch)
		ret = __raise(g, epoch);
	if (ret == 0) {
		atomic_store_explicit(&g->serving, epoch, memory_order_release);
		/* a deposed primary's clients write into its copy no more (struct gate_window) */
		__revoke_windows(g);
	}
	pthread_mutex_unlock(&g->lock);
	if (ret)
		LOG_ERROR("volume %s: cannot serve it at epoch %" PRIu64
			  ": this copy has seen %" PRIu64,
			  g->name, epoch, atomic_load(&g->epoch));
	return ret;
}

void cluster_gate_set_primary(struct gate_vol *g, const char *primary, const char *url,
			      const char *rdma_url, uint64_t key_epoch)
{
	pthread_mutex_lock(&g->lock);
	snprintf(g->primary, sizeof(g->primary), "%s", primary ? primary : "");
	snprintf(g->primary_url, sizeof(g->primary_url), "%s", url ? url : "");
	snprintf(g->primary_rdma, sizeof(g->primary_rdma), "%s", rdma_url ? rdma_url : "");
	g->key_epoch = key_epoch;
	pthread_mutex_unlock(&g->lock);
}

void cluster_gate_lease(struct gate_vol *g, uint64_t until_ms)
{
	atomic_store_explicit(&g->until_ms, until_ms, memory_order_release);
}

int cluster_gate_raise_epoch(struct gate_vol *g, uint64_t epoch)
{
	pthread_mutex_lock(&g->lock);
	int ret = __raise(g, epoch);
	pthread_mutex_unlock(&g->lock);
	return ret;
}

int cluster_gate_client(struct gate_vol *g, char *url, size_t urllen, uint64_t *epoch)
{
	return cluster_gate_client_over(g, false, url, urllen, epoch);
}

int cluster_gate_client_over(struct gate_vol *g, bool rdma, char *url, size_t urllen,
			     uint64_t *epoch)
{
	int ret = cluster_gate_check(g, 0);
	if (ret == 0)
		return 0;
	if (ret == -ENOENT) {
		url[0] = '\0';
		*epoch = atomic_load(&g->epoch);
		return ret; /* being deleted: no primary to follow */
	}
	pthread_mutex_lock(&g->lock);
	snprintf(url, urllen, "%s", rdma && g->primary_rdma[0] ? g->primary_rdma : g->primary_url);
	*epoch = g->key_epoch > atomic_load(&g->epoch) ? g->key_epoch : atomic_load(&g->epoch);
	pthread_mutex_unlock(&g->lock);
	return -RDAX_E_NOT_PRIMARY;
}

int cluster_gate_replica_open(struct gate_vol *g, uint64_t epoch, const char *primary, char *msg,
			      size_t msglen, uint64_t *seen)
{
	int ret = 0;
	pthread_mutex_lock(&g->lock);
	uint64_t have = atomic_load(&g->epoch);
	if (atomic_load(&g->retired)) {
		rdax_seterr(msg, msglen, "volume \"%s\" is being deleted", g->name);
		ret = -ENOENT;
	} else if (rdax_faults.replica_no_fence) {
		/* control: the fence is off; the open is taken as it comes (must be caught) */
		ret = epoch > have ? __raise(g, epoch) : 0;
	} else if (epoch < have) {
		rdax_seterr(msg, msglen,
			    "volume \"%s\": epoch %" PRIu64
			    " is stale, this replica has seen %" PRIu64,
			    g->name, epoch, have);
		ret = -RDAX_E_STALE_EPOCH;
	} else if (atomic_load(&g->serving) && epoch <= atomic_load(&g->serving)) {
		rdax_seterr(msg, msglen,
			    "volume \"%s\": this node is its primary at epoch %" PRIu64
			    ", not a replica of \"%s\"",
			    g->name, atomic_load(&g->serving), primary);
		ret = -RDAX_E_NOT_PRIMARY;
	} else if (epoch == g->key_epoch && strcmp(primary, g->primary) != 0) {
		/*
		 * An epoch newer than the key as read is believed (this node's watch may
		 * lag the failover that made it); for the epoch it knows, the sender
		 * must be the primary the key names.
		 */
		rdax_seterr(msg, msglen,
			    "volume \"%s\": \"%s\" is not its primary at epoch %" PRIu64
			    " (\"%s\" is)",
			    g->name, primary, epoch, g->primary);
		ret = -RDAX_E_NOT_PRIMARY;
	} else if (epoch > g->key_epoch + 1 && !rdax_faults.replica_no_fence) {
		/*
		 * Believed only one failover ahead of what this node read: a further
		 * epoch would fence the real primary for good on a sender's word.
		 */
		rdax_seterr(msg, msglen,
			    "volume \"%s\": epoch %" PRIu64 " is ahead of the volume's %" PRIu64
			    " by more than one failover: not believed until this node reads it",
			    g->name, epoch, g->key_epoch);
		ret = -EAGAIN;
	} else if (epoch < g->key_epoch) {
		rdax_seterr(msg, msglen,
			    "volume \"%s\": epoch %" PRIu64 " is stale, the volume is at %" PRIu64,
			    g->name, epoch, g->key_epoch);
		ret = -RDAX_E_STALE_EPOCH;
	} else {
		ret = __raise(g, epoch);
		if (ret)
			rdax_seterr(msg, msglen, "volume \"%s\": epoch %" PRIu64 " is stale",
				    g->name, epoch);
	}
	*seen = atomic_load(&g->epoch);
	pthread_mutex_unlock(&g->lock);
	if (ret)
		LOG_WARN("replica open refused: %s", msg);
	return ret;
}

void cluster_gate_retire(struct gate_vol *g)
{
	pthread_mutex_lock(&g->lock);
	bool was = atomic_exchange(&g->retired, true);
	atomic_store_explicit(&g->serving, 0, memory_order_release);
	/* every window goes: a link's or a client's write must not land in a copy being deleted */
	while (g->windows) {
		struct gate_window *w = g->windows;
		g->windows = w->next;
		w->next = NULL;
		w->revoked = true;
		w->revoke(w);
	}
	pthread_mutex_unlock(&g->lock);
	if (!was)
		LOG_INFO("volume %s: being deleted: served and applied no more", g->name);
}

void cluster_gate_release(struct store *store, struct gate_vol *g)
{
	if (g->released)
		return;
	store_volume_close(store, &g->recv);
	store_volume_close(store, &g->v);
	/* g->rec stays as it is: a request in flight may still mark it (its mapping lives
	 * until the record volume is deleted, after the copy, so after every request) */
	g->released = true;
}

void cluster_gate_bury(struct gate_vol *g)
{
	/* the name is free from now on: a local volume of that name is not a cluster copy */
	atomic_store_explicit(&g->dead, true, memory_order_release);
}

void cluster_gate_close_all(struct store *store)
{
	unsigned n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
	__atomic_store_n(&count, 0, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < n; i++) {
		struct gate_vol *g = entries[i];
		store_volume_close(store, &g->recv);
		store_volume_close(store, &g->v);
		pthread_mutex_destroy(&g->lock);
		free(g);
		entries[i] = NULL;
	}
}
