/* SPDX-License-Identifier: BSD-3-Clause */
/* metrics_expo.c -- render the Prometheus text format (metrics_expo.h) */
#include "metrics_expo.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "media_guard.h"
#include "metrics.h"
#include "repl_registry.h"

/* A growing output buffer; a failed growth sticks (the render then fails). */
struct out {
	char *p;
	size_t len, cap;
	bool oom;
};

/* put -- printf onto @o */
static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	for (int tries = 0; tries < 2 && !o->oom; tries++) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->oom = true;
			return;
		}
		if ((size_t)n < o->cap - o->len) {
			o->len += (size_t)n;
			return;
		}
		size_t cap =
		    o->cap * 2 > o->len + (size_t)n + 1 ? o->cap * 2 : o->len + (size_t)n + 1;
		char *p = realloc(o->p, cap);
		if (!p) {
			o->oom = true;
			return;
		}
		o->p = p;
		o->cap = cap;
	}
}

/* family -- the HELP and TYPE lines of a metric family */
static void family(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * label_value -- @s escaped for a label value (backslash, double quote and
 * newline, as the text format requires) into @buf
 */
static const char *label_value(const char *s, char *buf, size_t len)
{
	size_t n = 0;
	for (; *s && n + 3 < len; s++) {
		if (*s == '\\' || *s == '"') {
			buf[n++] = '\\';
			buf[n++] = *s;
		} else if (*s == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
		} else {
			buf[n++] = *s;
		}
	}
	buf[n] = '\0';
	return buf;
}

/* err_label -- the "code" label of an error slot: "EIO", "RDAX_E_PROTOCOL", "other" */
static const char *err_label(unsigned slot, char *buf, size_t len)
{
	static const char *const rdax_names[] = {
	    "RDAX_E_NOT_RDAX", "RDAX_E_BAD_METADATA", "RDAX_E_VERSION", "RDAX_E_PROTOCOL",
	    "RDAX_E_NOT_OPEN", "RDAX_E_ACCESS",	      "RDAX_E_TOO_BIG",
	};
	int code = metrics_err_code(slot);
	if (code == 0)
		return "other";
	if (code >= RDAX_E_FIRST) {
		unsigned i = (unsigned)(code - RDAX_E_FIRST);
		if (i < sizeof(rdax_names) / sizeof(rdax_names[0]))
			return rdax_names[i];
		snprintf(buf, len, "RDAX_E_%d", code);
		return buf;
	}
	const char *name = strerrorname_np(code);
	if (name)
		return name;
	snprintf(buf, len, "E%d", code);
	return buf;
}

/* render_requests -- requests, bytes, errors, connections (counters of metrics.h) */
static void render_requests(struct out *o, const struct metrics_totals *m)
{
	family(o, "rdax_requests_total", "counter",
	       "Requests answered, by operation and transport (NBD commands by the nearest "
	       "operation).");
	for (unsigned t = 0; t < METRICS_TRANSPORT_COUNT; t++)
		for (unsigned op = 0; op < METRICS_OP_COUNT; op++)
			if (m->requests[t][op])
				put(o,
				    "rdax_requests_total{op=\"%s\",transport=\"%s\"} %" PRIu64 "\n",
				    metrics_op_name(op), metrics_transport_name(t),
				    m->requests[t][op]);
	family(o, "rdax_request_bytes_total", "counter",
	       "Data bytes read and written by requests, by operation and transport (RDMA "
	       "one-sided writes are not requests: see rdax_volume_written_back_bytes_total).");
	for (unsigned t = 0; t < METRICS_TRANSPORT_COUNT; t++) {
		put(o, "rdax_request_bytes_total{op=\"read\",transport=\"%s\"} %" PRIu64 "\n",
		    metrics_transport_name(t), m->bytes[t][METRICS_OP_READ]);
		put(o, "rdax_request_bytes_total{op=\"write\",transport=\"%s\"} %" PRIu64 "\n",
		    metrics_transport_name(t), m->bytes[t][METRICS_OP_WRITE]);
	}
	family(o, "rdax_errors_total", "counter",
	       "Error replies, by error code (errno name or RDAX_E_*) and transport.");
	for (unsigned t = 0; t < METRICS_TRANSPORT_COUNT; t++)
		for (unsigned e = 0; e < METRICS_ERR_SLOTS; e++)
			if (m->errors[t][e]) {
				char buf[32];
				put(o,
				    "rdax_errors_total{code=\"%s\",transport=\"%s\"} %" PRIu64 "\n",
				    err_label(e, buf, sizeof(buf)), metrics_transport_name(t),
				    m->errors[t][e]);
			}
	family(o, "rdax_connections_opened_total", "counter",
	       "Connections accepted, by transport.");
	for (unsigned t = 0; t < METRICS_TRANSPORT_COUNT; t++)
		put(o, "rdax_connections_opened_total{transport=\"%s\"} %" PRIu64 "\n",
		    metrics_transport_name(t), m->conns_opened[t]);
	family(o, "rdax_connections", "gauge", "Connections open now, by transport.");
	for (unsigned t = 0; t < METRICS_TRANSPORT_COUNT; t++) {
		uint64_t open = m->conns_opened[t] >= m->conns_closed[t]
				    ? m->conns_opened[t] - m->conns_closed[t]
				    : 0; /* a scrape between two shards' bumps */
		put(o, "rdax_connections{transport=\"%s\"} %" PRIu64 "\n",
		    metrics_transport_name(t), open);
	}
}

/* render_fsync -- the fsync latency histogram and the bytes written back */
static void render_fsync(struct out *o, const struct metrics_totals *m)
{
	family(o, "rdax_fsync_duration_seconds", "histogram",
	       "Time to make a volume range durable (write-back and fence, and the replicas' "
	       "acknowledgement of a replicated volume), every protocol.");
	uint64_t cum = 0;
	for (unsigned b = 0; b < METRICS_FSYNC_BUCKETS; b++) {
		cum += m->fsync_buckets[b];
		put(o, "rdax_fsync_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
		    metrics_fsync_bounds[b], cum);
	}
	cum += m->fsync_buckets[METRICS_FSYNC_BUCKETS];
	put(o, "rdax_fsync_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", cum);
	put(o, "rdax_fsync_duration_seconds_sum %.9f\n", (double)m->fsync_ns / 1e9);
	put(o, "rdax_fsync_duration_seconds_count %" PRIu64 "\n", cum);
	family(o, "rdax_fsync_written_back_bytes_total", "counter",
	       "Bytes written back from the CPU caches by the fsyncs of requests.");
	put(o, "rdax_fsync_written_back_bytes_total %" PRIu64 "\n", m->fsync_written_back);
}

/* render_namespaces -- size, free space, kind, method and media health of each namespace */
static void render_namespaces(struct out *o, struct store *st)
{
	unsigned n = store_namespace_count(st);
	char path[1024];
	family(o, "rdax_namespace_info", "gauge",
	       "1 for each namespace served, with what it is in its labels.");
	for (unsigned i = 0; i < n; i++) {
		struct ns *ns = store_namespace(st, i);
		put(o,
		    "rdax_namespace_info{namespace=\"%u\",path=\"%s\",kind=\"%s\",mode=\"%s\","
		    "method=\"%s\"} 1\n",
		    ns->id, label_value(ns->path, path, sizeof(path)), ns->kind,
		    persist_mode_name(ns->persist.mode), persist_method_name(ns->persist.method));
	}
	family(o, "rdax_namespace_size_bytes", "gauge", "Size of the namespace's mapping.");
	for (unsigned i = 0; i < n; i++) {
		struct ns *ns = store_namespace(st, i);
		put(o, "rdax_namespace_size_bytes{namespace=\"%u\"} %zu\n", ns->id,
		    ns->persist.size);
	}
	family(o, "rdax_namespace_free_bytes", "gauge", "Bytes of the data area no volume holds.");
	for (unsigned i = 0; i < n; i++) {
		struct ns *ns = store_namespace(st, i);
		uint64_t total = 0;
		ns_free_bytes(ns, &total, NULL);
		put(o, "rdax_namespace_free_bytes{namespace=\"%u\"} %" PRIu64 "\n", ns->id, total);
	}
	struct media_health_info *mh = malloc(n ? n * sizeof(*mh) : 1);
	if (!mh) {
		o->oom = true;
		return;
	}
	for (unsigned i = 0; i < n; i++)
		media_health_get(&store_namespace(st, i)->health, &mh[i]);
	family(o, "rdax_namespace_media_health_supported", "gauge",
	       "1 where the device reports that part of its health: the unsafe-shutdown count "
	       "(part=\"usc\") or its bad blocks (part=\"badblocks\").");
	for (unsigned i = 0; i < n; i++) {
		uint32_t id = store_namespace(st, i)->id;
		put(o, "rdax_namespace_media_health_supported{namespace=\"%u\",part=\"usc\"} %d\n",
		    id, mh[i].usc_supported);
		put(o,
		    "rdax_namespace_media_health_supported{namespace=\"%u\",part=\"badblocks\"} "
		    "%d\n",
		    id, mh[i].badblocks_supported);
	}
	family(o, "rdax_namespace_unsafe_shutdowns", "gauge",
	       "The device's unsafe-shutdown count (where supported).");
	for (unsigned i = 0; i < n; i++)
		if (mh[i].usc_supported)
			put(o, "rdax_namespace_unsafe_shutdowns{namespace=\"%u\"} %" PRIu64 "\n",
			    store_namespace(st, i)->id, mh[i].usc);
	family(o, "rdax_namespace_unsafe_shutdown", "gauge",
	       "1 if an unsafe shutdown hit the namespace while it was in use: acknowledged "
	       "writes may be lost.");
	for (unsigned i = 0; i < n; i++)
		put(o, "rdax_namespace_unsafe_shutdown{namespace=\"%u\"} %d\n",
		    store_namespace(st, i)->id, mh[i].unsafe_shutdown);
	family(o, "rdax_namespace_bad_blocks", "gauge", "Bad-block ranges known in the namespace.");
	for (unsigned i = 0; i < n; i++)
		put(o, "rdax_namespace_bad_blocks{namespace=\"%u\"} %u\n",
		    store_namespace(st, i)->id, mh[i].nbad);
	family(o, "rdax_namespace_bad_block_bytes", "gauge",
	       "Bytes of the namespace in known bad blocks.");
	for (unsigned i = 0; i < n; i++)
		put(o, "rdax_namespace_bad_block_bytes{namespace=\"%u\"} %" PRIu64 "\n",
		    store_namespace(st, i)->id, mh[i].bad_bytes);
	free(mh);
}

/* The per-volume families, in output order. */
enum vol_family {
	VF_SIZE,
	VF_DIRTY,
	VF_ENTRIES,
	VF_WRITTEN_BACK,
	VF_BAD,
	VF_UNSAFE,
	VF_COUNT,
};

/* render_volumes -- every volume's dirty state and health, one family after the other */
static void render_volumes(struct out *o, struct store *st)
{
	static const struct {
		const char *name, *type, *help;
	} fams[VF_COUNT] = {
	    [VF_SIZE] = {"rdax_volume_size_bytes", "gauge", "Size of the volume."},
	    [VF_DIRTY] = {"rdax_volume_dirty_bytes", "gauge",
			  "Bytes written and not yet made durable by an fsync (dirty lines)."},
	    [VF_ENTRIES] = {"rdax_volume_dirty_entries", "gauge",
			    "Entries of the volume's dirty tree, by the size they cover."},
	    [VF_WRITTEN_BACK] = {"rdax_volume_written_back_bytes_total", "counter",
				 "Bytes written back by the volume's fsyncs since it was opened "
				 "by this daemon."},
	    [VF_BAD] = {"rdax_volume_bad_block_bytes", "gauge",
			"Bytes of the volume in known bad blocks (reads of them get EIO)."},
	    [VF_UNSAFE] = {"rdax_volume_unsafe_shutdown", "gauge",
			   "1 if the volume is marked by an unsafe shutdown."},
	};
	static const char *const sizes[3] = {"4KiB", "2MiB", "1GiB"};
	unsigned nns = store_namespace_count(st);
	struct ns_volume_stats **vs = calloc(nns ? nns : 1, sizeof(*vs));
	unsigned *cnt = calloc(nns ? nns : 1, sizeof(*cnt));
	if (!vs || !cnt) {
		o->oom = true;
		goto out_free;
	}
	for (unsigned i = 0; i < nns; i++)
		if (ns_volume_stats(store_namespace(st, i), &vs[i], &cnt[i]))
			o->oom = true;
	for (unsigned f = 0; f < VF_COUNT; f++) {
		family(o, fams[f].name, fams[f].type, fams[f].help);
		for (unsigned i = 0; i < nns; i++) {
			uint32_t id = store_namespace(st, i)->id;
			for (unsigned k = 0; k < cnt[i]; k++) {
				const struct ns_volume_stats *v = &vs[i][k];
				const char *name = fams[f].name;
				switch (f) {
				case VF_SIZE:
				case VF_DIRTY:
				case VF_WRITTEN_BACK:
				case VF_BAD:
				case VF_UNSAFE:
					put(o, "%s{namespace=\"%u\",volume=\"%s\"} %" PRIu64 "\n",
					    name, id, v->name,
					    f == VF_SIZE	   ? v->size
					    : f == VF_DIRTY	   ? v->dirty_bytes
					    : f == VF_WRITTEN_BACK ? v->fsync_bytes
					    : f == VF_BAD	   ? v->bad_bytes
								   : (uint64_t)v->unsafe_shutdown);
					break;
				case VF_ENTRIES:
					for (unsigned s = 0; s < 3; s++)
						put(o,
						    "%s{namespace=\"%u\",volume=\"%s\",size=\"%s\"}"
						    " "
						    "%" PRIu64 "\n",
						    name, id, v->name, sizes[s], v->entries[s]);
					break;
				}
			}
		}
	}
out_free:
	for (unsigned i = 0; vs && i < nns; i++)
		free(vs[i]);
	free(vs);
	free(cnt);
}

/*
 * The replica families, one pass per family (the text format wants a
 * family's samples together); each pass calls render_repl_one once per
 * replicated volume (repl_registry_each).
 */
enum repl_family {
	RF_STATE,	   /* rdax_replica_state */
	RF_FORWARDED,	   /* rdax_replica_forwarded_bytes_total */
	RF_LINK,	   /* rdax_replica_link_info */
	RF_RESYNC_TOTAL,   /* rdax_replica_resync_bytes */
	RF_RESYNC_LEFT,	   /* rdax_replica_resync_left_bytes */
	RF_RESYNC_SHIPPED, /* rdax_replica_resync_shipped_bytes_total */
	RF_COUNT,
};

static const struct {
	const char *name, *type, *help;
} repl_families[RF_COUNT] = {
    [RF_STATE] = {"rdax_replica_state", "gauge",
		  "1 for the state each replica of a volume this node is primary of is in "
		  "(live, failed, removed, resync)."},
    [RF_FORWARDED] = {"rdax_replica_forwarded_bytes_total", "counter",
		      "Bytes of writes forwarded to each replica by its current link."},
    [RF_LINK] = {"rdax_replica_link_info", "gauge",
		 "1 for the transport of each replica's current link (tcp, rdma; none before "
		 "the first)."},
    [RF_RESYNC_TOTAL] = {"rdax_replica_resync_bytes", "gauge",
			 "Bytes the current (or last) resync of each replica compares and ships "
			 "where they differ."},
    [RF_RESYNC_LEFT] = {"rdax_replica_resync_left_bytes", "gauge",
			"Of those, bytes not yet compared and queued (0 once it is done)."},
    [RF_RESYNC_SHIPPED] = {"rdax_replica_resync_shipped_bytes_total", "counter",
			   "Bytes every resync of each replica shipped so far (since this node "
			   "became primary)."},
};

struct repl_render {
	struct out *o;
	enum repl_family family;
};

/* render_repl_one -- one volume's members, for the family of this pass */
static void render_repl_one(void *arg, const char *volume, struct repl_volume *rv)
{
	static const char *const states[] = {"live", "failed", "removed", "resync"};
	struct repl_render *r = arg;
	const char *name = repl_families[r->family].name;
	struct repl_member_info m[CLUSTER_MAX_REPLICAS];
	unsigned n = repl_members(rv, m, CLUSTER_MAX_REPLICAS);
	for (unsigned i = 0; i < n; i++) {
		uint64_t value = 0;
		switch (r->family) {
		case RF_STATE:
			for (unsigned s = 0; s < 4; s++)
				put(r->o, "%s{volume=\"%s\",node=\"%s\",state=\"%s\"} %d\n", name,
				    volume, m[i].node, states[s], (unsigned)m[i].state == s);
			continue;
		case RF_LINK:
			put(r->o, "%s{volume=\"%s\",node=\"%s\",link=\"%s\"} 1\n", name, volume,
			    m[i].node, m[i].link.transport[0] ? m[i].link.transport : "none");
			continue;
		case RF_FORWARDED:
			value = m[i].link.write_bytes;
			break;
		case RF_RESYNC_TOTAL:
			value = m[i].resync_total;
			break;
		case RF_RESYNC_LEFT:
			value = m[i].resync_left;
			break;
		case RF_RESYNC_SHIPPED:
			value = m[i].resync_shipped;
			break;
		case RF_COUNT:
			break;
		}
		put(r->o, "%s{volume=\"%s\",node=\"%s\"} %" PRIu64 "\n", name, volume, m[i].node,
		    value);
	}
}

/*
 * render_replicas -- the replicas of the volumes this node is primary of
 * (none: the families are empty). A resync publishes its progress region by
 * region (repl_resync), so a scrape while it runs sees the bytes left fall.
 */
static void render_replicas(struct out *o)
{
	struct repl_render r = {.o = o};
	for (r.family = 0; r.family < RF_COUNT; r.family++) {
		family(o, repl_families[r.family].name, repl_families[r.family].type,
		       repl_families[r.family].help);
		repl_registry_each(render_repl_one, &r);
	}
}

int metrics_expo_render(const struct metrics_expo_src *src, char **out, size_t *len)
{
	struct out o = {.cap = 16384};
	o.p = malloc(o.cap);
	if (!o.p)
		return -ENOMEM;
	o.p[0] = '\0';
	struct metrics_totals *m = malloc(sizeof(*m));
	if (!m) {
		free(o.p);
		return -ENOMEM;
	}
	metrics_sum(m);
	render_requests(&o, m);
	render_fsync(&o, m);
	free(m);
	if (src->store) {
		render_namespaces(&o, src->store);
		render_volumes(&o, src->store);
	}
	family(&o, "rdax_media_errors_total", "counter",
	       "Faults of the media (SIGBUS) caught in a copy and answered with EIO.");
	put(&o, "rdax_media_errors_total %" PRIu64 "\n", media_guard_errors());
	render_replicas(&o);
	family(&o, "rdax_build_info", "gauge", "1, with the daemon's version as a label.");
	char version[128];
	put(&o, "rdax_build_info{version=\"%s\"} 1\n",
	    label_value(src->version ? src->version : "unknown", version, sizeof(version)));
	if (o.oom) {
		free(o.p);
		return -ENOMEM;
	}
	*out = o.p;
	*len = o.len;
	return 0;
}
