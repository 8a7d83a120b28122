/* SPDX-License-Identifier: BSD-3-Clause */
/* repl_volume.c -- one volume's replication on its primary */
#include "repl_volume.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../client/conn.h" /* conn_volume_open_replica, conn_replica_digest */
#include "completion.h"
#include "faults.h"
#include "librdax.h"
#include "log.h"
#include "xxhash.h"

struct member {
	char node[CLUSTER_NAME_MAX + 1];
	char url[CLUSTER_URL_MAX + 1];	   /* where its link goes */
	char alt_url[CLUSTER_URL_MAX + 1]; /* and where else ("" none): TCP behind RDMA */
	struct replica_link *link;
	enum repl_member_state state;
	uint64_t *last_fwd;  /* per region: sequence of the last write forwarded */
	uint64_t *confirmed; /* per region: every write up to this sequence is flushed there */
	struct repl_wait_part *held;		/* waits that need this member's removal */
	int slot;				/* its change-record slot while away, -1: none */
	uint64_t rs_total, rs_left, rs_shipped; /* resync progress (repl_member_info) */
	bool trusted; /* its copy equals this one but for what the record says (repl_reconcile) */
	int refused;  /* FAILED, and the owner refused its removal (repl_removed): its error */
	struct repl_volume *rv;
	unsigned index;
};

struct repl_volume {
	struct repl_opts o;
	char volume[CLUSTER_NAME_MAX + 1];
	char primary[CLUSTER_NAME_MAX + 1];
	pthread_mutex_t lock;
	struct member m[CLUSTER_MAX_REPLICAS];
	unsigned n;
	uint64_t nregions;
	uint64_t seq; /* of the last write forwarded */
	/* repl_prefer: the worker the last requests came from, and how many in a row */
	struct worker *pref;
	unsigned pref_streak;
};

static uint64_t region_of(uint64_t off)
{
	return off >> CHANGE_RECORD_REGION_SHIFT;
}

/* part_done -- one member's share of a wait is over; the wait completes with the last */
static void part_done_locked(struct repl_wait *w, int status, bool *complete)
{
	if (status && !w->status)
		w->status = status;
	*complete = --w->pending == 0;
}

static void finish(struct repl_wait *w)
{
	w->done(w, w->status);
}

/*
 * __hold -- under the lock: @p needs FAILED member @m, whose removal from the
 * ISR is not answered yet: held until it is (repl_removed). A member whose
 * removal was refused (this node is no longer the primary, or the ISR may
 * not shrink) will never be answered again: the wait fails at once (-EIO)
 * instead of hanging. Returns true if held (counted in w->pending).
 */
static bool __hold(struct member *m, struct repl_wait_part *p)
{
	if (m->refused) {
		if (!p->w->status)
			p->w->status = -EIO;
		return false;
	}
	p->w->pending++;
	p->held_next = m->held;
	m->held = p;
	return true;
}

/*
 * member_failed -- under the lock: the member's link failed. Open its record
 * slot with every region it has not confirmed, before the shrink is asked
 * (so a primary that dies now still knows what the member lacks).
 */
static void member_failed_locked(struct repl_volume *rv, struct member *m)
{
	if (m->state != REPL_LIVE)
		return;
	m->state = REPL_FAILED;
	if (!rv->o.rec)
		return;
	if (!m->trusted) {
		/* not reconciled since a failover: nothing tells what it lacks, a full resync */
		int old = change_record_slot_find(rv->o.rec, m->node);
		if (old >= 0)
			change_record_slot_close(rv->o.rec, old);
		return;
	}
	int slot = change_record_slot_open(rv->o.rec, m->node, rv->o.epoch);
	m->slot = slot < 0 ? -1 : slot;
	if (slot < 0) {
		/* no slot: the member will need a full resync; nothing else is at risk */
		LOG_WARN("volume %s: no change-record slot for %s (%d): its return needs a full "
			 "resync",
			 rv->volume, m->node, slot);
		return;
	}
	for (uint64_t r = 0; r < rv->nregions; r++)
		if (m->last_fwd[r] > m->confirmed[r])
			change_record_mark_slot(rv->o.rec, slot, r << CHANGE_RECORD_REGION_SHIFT,
						1);
}

/* on_member_fsync -- a member answered (or its link failed) for a wait */
static void on_member_fsync(struct rlink_waiter *lw, int status)
{
	struct repl_wait_part *p = (struct repl_wait_part *)lw;
	struct repl_wait *w = p->w;
	struct repl_volume *rv = w->rv;
	struct member *m = &rv->m[p->member];
	bool complete = false, ask = false;
	pthread_mutex_lock(&rv->lock);
	if (status == 0) {
		/* confirmed: every region wholly inside the range is flushed up to w->seq */
		uint64_t end = w->len ? w->off + w->len : rv->o.size;
		uint64_t first = (w->off + CHANGE_RECORD_REGION - 1) >> CHANGE_RECORD_REGION_SHIFT;
		uint64_t last_excl = end >= rv->o.size ? rv->nregions : region_of(end);
		for (uint64_t r = first; r < last_excl; r++)
			if (m->confirmed[r] < w->seq)
				m->confirmed[r] = w->seq;
		part_done_locked(w, 0, &complete);
	} else if (m->state == REPL_REMOVED || m->state == REPL_RESYNC) {
		/* not in etcd's ISR: nothing acknowledged depends on it */
		m->state = REPL_REMOVED;
		part_done_locked(w, 0, &complete);
	} else {
		ask = m->state == REPL_LIVE;
		member_failed_locked(rv, m);
		/* released by repl_removed(), or failed now if its removal was refused */
		w->pending--;
		if (!__hold(m, p)) {
			w->pending++;
			part_done_locked(w, 0, &complete);
		}
	}
	pthread_mutex_unlock(&rv->lock);
	if (ask && rv->o.shrink)
		rv->o.shrink(rv->o.arg, rv, m->node);
	if (complete)
		finish(w);
}

/* on_link_fail -- a link's failure (its thread): ask for the shrink at once */
static void on_link_fail(void *arg, int code, const char *why)
{
	struct member *m = arg;
	struct repl_volume *rv = m->rv;
	(void)code;
	pthread_mutex_lock(&rv->lock);
	bool ask = m->state == REPL_LIVE;
	if (m->state == REPL_RESYNC)
		m->state = REPL_REMOVED; /* a resync that failed: not in the ISR, no shrink */
	member_failed_locked(rv, m);
	pthread_mutex_unlock(&rv->lock);
	if (ask) {
		LOG_WARN("volume %s: replica %s failed (%s): leaving the ISR", rv->volume, m->node,
			 why);
		if (rv->o.shrink)
			rv->o.shrink(rv->o.arg, rv, m->node);
	}
}

/* link_opts -- the options of a link to member @m at @url */
static void link_opts(struct repl_volume *rv, struct member *m, const char *url,
		      struct rlink_opts *lo)
{
	*lo = (struct rlink_opts){.url = url,
				  .volume = rv->volume,
				  .mapping = rv->o.mapping,
				  .size = rv->o.size,
				  .token_file = rv->o.token_file,
				  .timeout_ms = rv->o.timeout_ms,
				  .home = rv->o.home,
				  .spin_cap_us = rv->o.spin_cap_us,
				  .epoch = rv->o.fence ? rv->o.epoch : 0,
				  .primary = rv->primary,
				  .incarnation = rv->o.incarnation,
				  .on_fail = on_link_fail,
				  .arg = m};
}

/*
 * link_start -- a link to member @m: at @url, or at @alt ("" or NULL: none)
 * if that one cannot be made (an RDMA link falls back to TCP, said in the
 * log and in the link's transport). 0, or the first URL's error in @err.
 */
static int link_start(struct repl_volume *rv, struct member *m, const char *url, const char *alt,
		      struct replica_link **out, char *err, size_t errlen)
{
	struct rlink_opts lo;
	link_opts(rv, m, url, &lo);
	int ret = rlink_start(&lo, out, err, errlen);
	if (ret == 0 || !alt || !alt[0])
		return ret;
	char why[512];
	link_opts(rv, m, alt, &lo);
	if (rlink_start(&lo, out, why, sizeof(why)) != 0)
		return ret;
	LOG_WARN("volume %s: replica %s: %s; linked over %s instead", rv->volume, m->node, err,
		 alt);
	return 0;
}

int repl_start(const struct repl_opts *o, const struct repl_member_spec *members, unsigned n,
	       struct repl_volume **out)
{
	if (!o || n > CLUSTER_MAX_REPLICAS || !o->mapping || !o->size)
		return -EINVAL;
	struct repl_volume *rv = calloc(1, sizeof(*rv));
	if (!rv)
		return -ENOMEM;
	rv->o = *o;
	snprintf(rv->volume, sizeof(rv->volume), "%s", o->volume);
	rv->o.volume = rv->volume;
	snprintf(rv->primary, sizeof(rv->primary), "%s", o->primary ? o->primary : "");
	rv->o.primary = rv->primary;
	rv->nregions = (o->size + CHANGE_RECORD_REGION - 1) >> CHANGE_RECORD_REGION_SHIFT;
	pthread_mutex_init(&rv->lock, NULL);
	for (unsigned i = 0; i < n; i++) {
		struct member *m = &rv->m[i];
		snprintf(m->node, sizeof(m->node), "%s", members[i].node);
		snprintf(m->url, sizeof(m->url), "%s", members[i].url);
		snprintf(m->alt_url, sizeof(m->alt_url), "%s",
			 members[i].alt_url ? members[i].alt_url : "");
		m->rv = rv;
		m->index = i;
		m->slot = -1;
		m->trusted = !o->untrusted;
		m->last_fwd = calloc(rv->nregions, sizeof(uint64_t));
		m->confirmed = calloc(rv->nregions, sizeof(uint64_t));
		if (!m->last_fwd || !m->confirmed) {
			rv->n = i + 1;
			repl_stop(&rv);
			return -ENOMEM;
		}
	}
	rv->n = n;
	for (unsigned i = 0; i < n; i++) {
		struct member *m = &rv->m[i];
		char err[512];
		if (link_start(rv, m, m->url, m->alt_url, &m->link, err, sizeof(err)) == 0)
			continue;
		LOG_WARN("volume %s: no link to replica %s: %s", rv->volume, m->node, err);
		pthread_mutex_lock(&rv->lock);
		member_failed_locked(rv, m);
		pthread_mutex_unlock(&rv->lock);
		if (o->shrink)
			o->shrink(o->arg, rv, m->node);
	}
	*out = rv;
	return 0;
}

void repl_before_write(struct repl_volume *rv, uint64_t off, uint64_t len)
{
	if (rv->o.rec)
		change_record_mark(rv->o.rec, off, len);
}

void repl_write(struct repl_volume *rv, uint64_t off, uint64_t len)
{
	if (len == 0 || off >= rv->o.size)
		return;
	if (len > rv->o.size - off)
		len = rv->o.size - off;
	pthread_mutex_lock(&rv->lock);
	uint64_t seq = ++rv->seq;
	for (unsigned i = 0; i < rv->n; i++) {
		struct member *m = &rv->m[i];
		if (m->state != REPL_LIVE && m->state != REPL_RESYNC) {
			/*
			 * Away: recorded. repl_before_write() marked it already unless the
			 * slot was opened between the two calls; this closes that gap.
			 */
			if (m->slot >= 0)
				change_record_mark_slot(rv->o.rec, m->slot, off, len);
			continue;
		}
		for (uint64_t r = region_of(off); r <= region_of(off + len - 1); r++)
			m->last_fwd[r] = seq;
		/* under the lock: every link gets the writes in the same order */
		rlink_forward(m->link, off, len);
	}
	pthread_mutex_unlock(&rv->lock);
}

void repl_prefer(struct repl_volume *rv, struct worker *w)
{
	pthread_mutex_lock(&rv->lock);
	if (w != rv->pref) {
		rv->pref = w;
		rv->pref_streak = 0;
	}
	if (rv->pref_streak < REPL_PREFER_STREAK)
		rv->pref_streak++;
	bool move = w && rv->pref_streak == REPL_PREFER_STREAK;
	for (unsigned i = 0; move && i < rv->n; i++) {
		struct member *m = &rv->m[i];
		if (m->link && (m->state == REPL_LIVE || m->state == REPL_RESYNC) &&
		    !rlink_home_is(m->link, w))
			rlink_move(m->link, w);
	}
	pthread_mutex_unlock(&rv->lock);
}

struct fsync_waiter {
	struct repl_wait w;
	struct completion c;
};

static void fsync_waiter_done(struct repl_wait *w, int status)
{
	completion_complete(&((struct fsync_waiter *)w)->c, status);
}

int repl_fsync_wait(struct repl_volume *rv, uint64_t off, uint64_t len)
{
	if (!rv)
		return 0;
	struct fsync_waiter f = {.w = {.done = fsync_waiter_done}};
	completion_init(&f.c);
	repl_fsync(rv, off, len, &f.w);
	int status = -EIO;
	completion_wait(&f.c, -1, &status);
	completion_destroy(&f.c);
	return status;
}

/* release_hold -- drop the hold a wait starts with (every part is queued now) */
static void release_hold(struct repl_volume *rv, struct repl_wait *w)
{
	pthread_mutex_lock(&rv->lock);
	bool complete;
	part_done_locked(w, 0, &complete);
	pthread_mutex_unlock(&rv->lock);
	if (complete)
		finish(w);
}

void repl_fsync(struct repl_volume *rv, uint64_t off, uint64_t len, struct repl_wait *w)
{
	w->rv = rv;
	w->off = off;
	w->len = len;
	w->status = 0;
	if (rdax_faults.repl_ack_early) {
		/* control: acknowledge before the replicas answered (must be caught) */
		w->done(w, 0);
		return;
	}
	pthread_mutex_lock(&rv->lock);
	w->seq = rv->seq;
	w->pending = 1; /* held until every part is queued */
	struct replica_link *send[CLUSTER_MAX_REPLICAS];
	struct repl_wait_part *parts[CLUSTER_MAX_REPLICAS];
	unsigned nsend = 0;
	for (unsigned i = 0; i < rv->n; i++) {
		struct member *m = &rv->m[i];
		struct repl_wait_part *p = &w->part[i];
		*p = (struct repl_wait_part){.lw = {.done = on_member_fsync}, .w = w, .member = i};
		if (m->state == REPL_REMOVED)
			continue;
		if (m->state == REPL_FAILED) {
			__hold(m, p);
			continue;
		}
		w->pending++;
		send[nsend] = m->link;
		parts[nsend++] = p;
	}
	pthread_mutex_unlock(&rv->lock);
	/*
	 * Queued after the lock is dropped (a failed link completes at once, and
	 * its callback takes the lock): a write forwarded meanwhile goes before
	 * the fsync and is covered too; w->seq, read under the lock, stays a
	 * lower bound of what the fsync covers.
	 */
	for (unsigned i = 0; i < nsend; i++)
		rlink_fsync(send[i], off, len, &parts[i]->lw);
	release_hold(rv, w);
}

void repl_write_durable(struct repl_volume *rv, uint64_t off, uint64_t len, struct repl_wait *w)
{
	if (len == 0 || off >= rv->o.size || len > (1U << 20) || len > rv->o.size - off ||
	    rdax_faults.repl_ack_early) {
		repl_write(rv, off, len);
		repl_fsync(rv, off, len, w);
		return;
	}
	w->rv = rv;
	w->off = off;
	w->len = len;
	w->status = 0;
	struct repl_wait_part *refused[CLUSTER_MAX_REPLICAS];
	struct replica_link *sent[CLUSTER_MAX_REPLICAS];
	unsigned nrefused = 0, nsend = 0;
	/* all under the lock, as repl_write: the write's sequence is covered by its own fsync */
	pthread_mutex_lock(&rv->lock);
	uint64_t seq = ++rv->seq;
	w->seq = seq;
	w->pending = 1;
	for (unsigned i = 0; i < rv->n; i++) {
		struct member *m = &rv->m[i];
		struct repl_wait_part *p = &w->part[i];
		*p = (struct repl_wait_part){.lw = {.done = on_member_fsync}, .w = w, .member = i};
		if (m->state != REPL_LIVE && m->state != REPL_RESYNC) {
			if (m->slot >= 0)
				change_record_mark_slot(rv->o.rec, m->slot, off, len);
			if (m->state == REPL_FAILED)
				__hold(m, p);
			continue;
		}
		for (uint64_t r = region_of(off); r <= region_of(off + len - 1); r++)
			m->last_fwd[r] = seq;
		w->pending++;
		if (!rlink_forward_fsync(m->link, off, len, &p->lw))
			refused[nrefused++] = p; /* its link failed: handled as its answer, below */
		else
			sent[nsend++] = m->link;
	}
	pthread_mutex_unlock(&rv->lock);
	for (unsigned i = 0; i < nrefused; i++)
		on_member_fsync(&refused[i]->lw, -EPIPE);
	/* every member has it queued: out now, on the links' thread (rlink_push) */
	for (unsigned i = 0; i < nsend; i++)
		rlink_push(sent[i]);
	release_hold(rv, w);
}

void repl_removed(struct repl_volume *rv, const char *node, int status)
{
	struct repl_wait *done = NULL;
	pthread_mutex_lock(&rv->lock);
	for (unsigned i = 0; i < rv->n; i++) {
		struct member *m = &rv->m[i];
		if (strcmp(m->node, node) != 0 || m->state != REPL_FAILED)
			continue;
		if (status == 0)
			m->state = REPL_REMOVED;
		else
			m->refused = status;
		for (struct repl_wait_part *p = m->held, *next; p; p = next) {
			next = p->held_next;
			bool complete;
			part_done_locked(p->w, status ? -EIO : 0, &complete);
			if (complete) {
				p->w->done_next = done;
				done = p->w;
			}
		}
		m->held = NULL;
		if (status)
			LOG_ERROR(
			    "volume %s: replica %s cannot leave the ISR (%d): fsyncs that need "
			    "it fail",
			    rv->volume, node, status);
		else
			LOG_INFO("volume %s: replica %s left the ISR", rv->volume, node);
	}
	pthread_mutex_unlock(&rv->lock);
	while (done) {
		struct repl_wait *next = done->done_next;
		finish(done);
		done = next;
	}
}

/* region_len -- bytes of region @r (the last may be short) */
static uint64_t region_len(const struct repl_volume *rv, uint64_t r)
{
	uint64_t off = r << CHANGE_RECORD_REGION_SHIFT;
	return rv->o.size - off < CHANGE_RECORD_REGION ? rv->o.size - off : CHANGE_RECORD_REGION;
}

/*
 * Digests (docs/cluster.md, "Rejoin"): the resync asks the member for the
 * XXH3-128 of each 4 KiB block of a region it would ship (REPLICA_DIGEST, on
 * a connection of its own: the link's belongs to the link's loop) and
 * ships only the blocks whose digests differ from its own, computed after
 * the member's answer; a full resync first compares whole regions, 32 at a
 * time. Sound while writes go on: the member is in catch-up already, so
 * every write that lands after the member's digest is sent to it later, with
 * the bytes the mapping holds at send time; a block whose digests match
 * either stays as it is there and here, or is sent again by such a write.
 * Without the digest connection (an older peer, an error) whole regions go.
 */
#define DIGEST_BLOCK 4096
#define DIGEST_BATCH 32 /* regions per region-level request: 64 MiB */

struct digest_peer {
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	uint8_t region_equal[DIGEST_BATCH]; /* a full resync's batch: 1 = whole region equal */
	uint64_t batch_first;
	bool batch_valid;
};

/*
 * member_digest_url -- where digests are asked: a request and its answer,
 * so the TCP address where the link is RDMA (nothing one-sided to gain)
 */
static const char *member_digest_url(const struct member *m)
{
	return m->alt_url[0] ? m->alt_url : m->url;
}

/* digest_peer_open -- the member's copy, opened as this primary's link for digests */
static void digest_peer_open(struct repl_volume *rv, const char *url, struct digest_peer *dp)
{
	memset(dp, 0, sizeof(*dp));
	struct rdax_conn_opts *co;
	if (rdax_conn_opts_new(&co))
		return;
	rdax_conn_opts_set_client_name(co, "replica-digest");
	rdax_conn_opts_set_timeout(co, (int)(rv->o.timeout_ms ? rv->o.timeout_ms : 2000));
	if (rv->o.token_file)
		rdax_conn_opts_set_token_file(co, rv->o.token_file);
	int ret = rdax_connect(url, co, &dp->conn);
	rdax_conn_opts_delete(&co);
	if (ret == 0)
		ret = rv->o.fence
			  ? conn_volume_open_replica(dp->conn, rv->volume, rv->o.epoch, rv->primary,
						     rv->o.incarnation, &dp->vol)
			  : -ENOTSUP; /* REPLICA_DIGEST needs a replica link's handle */
	if (ret) {
		LOG_INFO("volume %s: no digests from %s (%s): whole regions are shipped",
			 rv->volume, url,
			 dp->conn ? rdax_conn_last_error(dp->conn) : rdax_strerror(ret));
		if (dp->vol)
			rdax_volume_close(&dp->vol);
		rdax_disconnect(&dp->conn);
	}
}

static void digest_peer_close(struct digest_peer *dp)
{
	if (dp->vol)
		rdax_volume_close(&dp->vol);
	rdax_disconnect(&dp->conn);
}

/* digest_local -- XXH3-128 (canonical) of @len bytes of the primary's mapping at @off */
static void digest_local(const struct repl_volume *rv, uint64_t off, uint64_t len, uint8_t out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(rv->o.mapping + off, len));
	memcpy(out, c.digest, 16);
}

/* digest_drop -- the digest connection failed: go on without it (whole regions) */
static void digest_drop(struct repl_volume *rv, struct digest_peer *dp)
{
	LOG_WARN("volume %s: digests: %s; whole regions are shipped from here on", rv->volume,
		 rdax_conn_last_error(dp->conn));
	digest_peer_close(dp);
}

/* digest_regions -- a full resync: which of the DIGEST_BATCH regions from @first are equal */
static void digest_regions(struct repl_volume *rv, struct digest_peer *dp, uint64_t first)
{
	dp->batch_valid = false;
	uint64_t n = rv->nregions - first < DIGEST_BATCH ? rv->nregions - first : DIGEST_BATCH;
	/* whole regions only: a short last region is compared block by block */
	if (first + n == rv->nregions && region_len(rv, rv->nregions - 1) < CHANGE_RECORD_REGION)
		n--;
	if (!dp->vol || n == 0)
		return;
	uint8_t theirs[DIGEST_BATCH * 16], mine[16];
	uint64_t off = first << CHANGE_RECORD_REGION_SHIFT;
	if (conn_replica_digest(dp->vol, off, n << CHANGE_RECORD_REGION_SHIFT, CHANGE_RECORD_REGION,
				theirs, sizeof(theirs))) {
		digest_drop(rv, dp);
		return;
	}
	memset(dp->region_equal, 0, sizeof(dp->region_equal));
	for (uint64_t i = 0; i < n; i++) {
		digest_local(rv, off + (i << CHANGE_RECORD_REGION_SHIFT), CHANGE_RECORD_REGION,
			     mine);
		/* the control resync-digest-equal takes every region as equal */
		dp->region_equal[i] =
		    memcmp(mine, theirs + i * 16, 16) == 0 || rdax_faults.resync_digest_equal;
	}
	dp->batch_first = first;
	dp->batch_valid = true;
}

/*
 * ship_region -- queue region @r's blocks that differ on the member (all of
 * it without digests) on link @l; returns the bytes queued
 */
static uint64_t ship_region(struct repl_volume *rv, struct replica_link *l, struct digest_peer *dp,
			    uint64_t r, bool full)
{
	uint64_t off = r << CHANGE_RECORD_REGION_SHIFT, len = region_len(rv, r);
	if (full && dp->batch_valid && r >= dp->batch_first && r < dp->batch_first + DIGEST_BATCH &&
	    dp->region_equal[r - dp->batch_first])
		return 0;
	uint8_t theirs[(CHANGE_RECORD_REGION / DIGEST_BLOCK) * 16], mine[16];
	if (!dp->vol ||
	    conn_replica_digest(dp->vol, off, len, DIGEST_BLOCK, theirs, sizeof(theirs))) {
		if (dp->vol)
			digest_drop(rv, dp);
		rlink_forward(l, off, len);
		return len;
	}
	uint64_t sent = 0, run_at = 0, run_len = 0;
	for (uint64_t b = 0; b < len / DIGEST_BLOCK; b++) {
		uint64_t at = off + b * DIGEST_BLOCK;
		digest_local(rv, at, DIGEST_BLOCK, mine);
		bool same =
		    memcmp(mine, theirs + b * 16, 16) == 0 || rdax_faults.resync_digest_equal;
		if (!same && run_len && run_at + run_len == at) {
			run_len += DIGEST_BLOCK;
			continue;
		}
		if (run_len) {
			rlink_forward(l, run_at, run_len);
			sent += run_len;
			run_len = 0;
		}
		if (!same) {
			run_at = at;
			run_len = DIGEST_BLOCK;
		}
	}
	if (run_len) {
		rlink_forward(l, run_at, run_len);
		sent += run_len;
	}
	return sent;
}

/* An fsync waiter of one link, for the resync's own fsync. */
struct sync_wait {
	struct rlink_waiter lw;
	struct completion c;
};

static void sync_done(struct rlink_waiter *w, int status)
{
	completion_complete(&((struct sync_wait *)w)->c, status);
}

int repl_resync(struct repl_volume *rv, const char *node, const char *url, const char *alt_url,
		int (*grow)(void *arg, const char *node), void *arg, struct repl_resync_result *res)
{
	struct member *m = NULL;
	for (unsigned i = 0; i < rv->n; i++)
		if (strcmp(rv->m[i].node, node) == 0)
			m = &rv->m[i];
	memset(res, 0, sizeof(*res));
	pthread_mutex_lock(&rv->lock);
	bool removed = m && m->state == REPL_REMOVED;
	pthread_mutex_unlock(&rv->lock);
	if (!removed)
		return -EINVAL;
	rlink_stop(&m->link); /* the failed one: its thread is over */
	char err[512];
	struct replica_link *l;
	int ret = link_start(rv, m, url, alt_url, &l, err, sizeof(err));
	if (ret) {
		LOG_WARN("volume %s: resync of %s: %s", rv->volume, node, err);
		return ret;
	}
	int slot = rv->o.rec ? change_record_slot_find(rv->o.rec, node) : -ENOENT;
	pthread_mutex_lock(&rv->lock);
	snprintf(m->url, sizeof(m->url), "%s", url);
	snprintf(m->alt_url, sizeof(m->alt_url), "%s", alt_url ? alt_url : "");
	m->link = l;
	memset(m->last_fwd, 0, rv->nregions * sizeof(uint64_t));
	memset(m->confirmed, 0, rv->nregions * sizeof(uint64_t));
	/* from here on live writes go to it too: every later write is covered by them */
	m->state = REPL_RESYNC;
	pthread_mutex_unlock(&rv->lock);

	/* ship what the record marks (everything without one), from the mapping */
	res->full = slot < 0;
	uint64_t total = 0;
	for (uint64_t r = 0; r < rv->nregions; r++)
		if (slot < 0 || change_record_test(rv->o.rec, slot, r))
			total += region_len(rv, r);
	pthread_mutex_lock(&rv->lock);
	m->rs_total = m->rs_left = total;
	pthread_mutex_unlock(&rv->lock);
	struct digest_peer dp;
	digest_peer_open(rv, member_digest_url(m), &dp);
	for (uint64_t r = 0; r < rv->nregions; r++) {
		if (slot >= 0 && !change_record_test(rv->o.rec, slot, r))
			continue;
		uint64_t len = region_len(rv, r), sent;
		if (slot < 0 && (r % DIGEST_BATCH) == 0)
			digest_regions(rv, &dp,
				       r); /* a full resync: whole regions compared first */
		sent = ship_region(rv, l, &dp, r, slot < 0);
		res->regions += sent > 0;
		res->bytes += sent;
		pthread_mutex_lock(&rv->lock);
		m->rs_left = m->rs_left > len ? m->rs_left - len : 0;
		m->rs_shipped += sent;
		pthread_mutex_unlock(&rv->lock);
	}
	digest_peer_close(&dp);
	struct sync_wait x = {.lw = {.done = sync_done}};
	completion_init(&x.c);
	rlink_fsync(l, 0, 0, &x.lw);
	completion_wait(&x.c, -1, &ret);
	completion_destroy(&x.c);
	pthread_mutex_lock(&rv->lock);
	if (ret == 0 && m->state != REPL_RESYNC)
		ret = -EIO; /* its link failed meanwhile */
	pthread_mutex_unlock(&rv->lock);
	/* caught up and flushed: it may rejoin the ISR (fsyncs wait for it already) */
	if (ret == 0)
		ret = grow(arg, node);
	pthread_mutex_lock(&rv->lock);
	if (ret == 0 && m->state == REPL_RESYNC) {
		m->state = REPL_LIVE;
		m->trusted = true;
	} else {
		if (m->state == REPL_RESYNC)
			m->state = REPL_REMOVED;
		if (ret == 0)
			ret = -EIO;
	}
	pthread_mutex_unlock(&rv->lock);
	if (ret == 0 && slot >= 0) {
		change_record_slot_close(rv->o.rec, slot);
		pthread_mutex_lock(&rv->lock);
		m->slot = -1;
		pthread_mutex_unlock(&rv->lock);
	}
	LOG_INFO("volume %s: resync of %s %s: %" PRIu64 " region(s), %" PRIu64 " bytes shipped%s",
		 rv->volume, node, ret ? "failed" : "done, back in the ISR", res->regions,
		 res->bytes, res->full ? " (no record: everything)" : "");
	return ret;
}

int repl_reconcile(struct repl_volume *rv)
{
	int result = 0;
	for (unsigned i = 0; i < rv->n; i++) {
		struct member *m = &rv->m[i];
		pthread_mutex_lock(&rv->lock);
		bool live = m->state == REPL_LIVE;
		struct replica_link *l = m->link;
		pthread_mutex_unlock(&rv->lock);
		if (!live)
			continue;
		struct digest_peer dp;
		digest_peer_open(rv, member_digest_url(m), &dp);
		uint64_t shipped = 0;
		for (uint64_t r = 0; r < rv->nregions; r++) {
			if (r % DIGEST_BATCH == 0)
				digest_regions(rv, &dp, r);
			shipped += ship_region(rv, l, &dp, r, true);
		}
		digest_peer_close(&dp);
		struct sync_wait x = {.lw = {.done = sync_done}};
		completion_init(&x.c);
		rlink_fsync(l, 0, 0, &x.lw);
		int ret = -EIO;
		completion_wait(&x.c, -1, &ret);
		completion_destroy(&x.c);
		pthread_mutex_lock(&rv->lock);
		if (ret == 0 && m->state == REPL_LIVE)
			m->trusted = true;
		else
			result = -EIO;
		pthread_mutex_unlock(&rv->lock);
		LOG_INFO("volume %s: %s reconciled after the failover: %" PRIu64 " bytes shipped%s",
			 rv->volume, m->node, shipped, ret ? " (failed)" : "");
	}
	return result;
}

void repl_resync_cancel(struct repl_volume *rv)
{
	pthread_mutex_lock(&rv->lock);
	for (unsigned i = 0; i < rv->n; i++)
		if (rv->m[i].state == REPL_RESYNC && rv->m[i].link)
			rlink_abort(rv->m[i].link, -ECANCELED);
	pthread_mutex_unlock(&rv->lock);
}

void repl_close(struct repl_volume *rv)
{
	pthread_mutex_lock(&rv->lock);
	for (unsigned i = 0; i < rv->n; i++)
		if (rv->m[i].link)
			rlink_abort(rv->m[i].link, -ECANCELED);
	pthread_mutex_unlock(&rv->lock);
}

unsigned repl_members(struct repl_volume *rv, struct repl_member_info *out, unsigned max)
{
	unsigned n = 0;
	pthread_mutex_lock(&rv->lock);
	for (unsigned i = 0; i < rv->n && n < max; i++, n++) {
		snprintf(out[n].node, sizeof(out[n].node), "%s", rv->m[i].node);
		out[n].state = rv->m[i].state;
		out[n].resync_total = rv->m[i].rs_total;
		out[n].resync_left = rv->m[i].rs_left;
		out[n].resync_shipped = rv->m[i].rs_shipped;
		memset(&out[n].link, 0, sizeof(out[n].link));
		if (rv->m[i].link)
			rlink_stats(rv->m[i].link, &out[n].link);
	}
	pthread_mutex_unlock(&rv->lock);
	return n;
}

void repl_stop(struct repl_volume **rvp)
{
	struct repl_volume *rv = rvp ? *rvp : NULL;
	if (!rv)
		return;
	for (unsigned i = 0; i < rv->n; i++)
		rlink_stop(&rv->m[i].link); /* completes its waits with -ECANCELED */
	for (unsigned i = 0; i < rv->n; i++) {
		struct member *m = &rv->m[i];
		while (m->held) {
			struct repl_wait_part *p = m->held;
			m->held = p->held_next;
			bool complete;
			part_done_locked(p->w, -ECANCELED, &complete);
			if (complete)
				finish(p->w);
		}
		free(m->last_fwd);
		free(m->confirmed);
	}
	pthread_mutex_destroy(&rv->lock);
	free(rv);
	*rvp = NULL;
}
