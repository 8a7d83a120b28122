/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster_meta.c -- the cluster's records in etcd: key names and JSON values */
#include "cluster_meta.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "errors.h"
#include "etcd.h"

bool cluster_name_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n >= 1 && n <= CLUSTER_NAME_MAX &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

int cluster_key(char *buf, size_t len, const char *cluster, ...)
{
	int n = snprintf(buf, len, "/rdax/%s", cluster);
	va_list ap;
	va_start(ap, cluster);
	for (const char *p; n >= 0 && (size_t)n < len && (p = va_arg(ap, const char *));)
		n += snprintf(buf + n, len - (size_t)n, "/%s", p);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

/* copy_part -- the next '/'-separated part of *p into @out; advances *p */
static void copy_part(const char **p, char out[CLUSTER_KEY_MAX])
{
	size_t n = strcspn(*p, "/");
	if (n >= CLUSTER_KEY_MAX)
		n = CLUSTER_KEY_MAX - 1;
	memcpy(out, *p, n);
	out[n] = '\0';
	*p += strcspn(*p, "/");
	if (**p == '/')
		(*p)++;
}

int cluster_key_parse(const char *key, const char *cluster, char kind[CLUSTER_KEY_MAX],
		      char name[CLUSTER_KEY_MAX], char sub[CLUSTER_KEY_MAX],
		      char leaf[CLUSTER_KEY_MAX])
{
	char prefix[CLUSTER_KEY_MAX];
	int n = cluster_key(prefix, sizeof(prefix), cluster, "", NULL);
	if (n < 0 || strncmp(key, prefix, (size_t)n) != 0)
		return -EINVAL;
	const char *p = key + n;
	copy_part(&p, kind);
	copy_part(&p, name);
	copy_part(&p, sub);
	copy_part(&p, leaf);
	return 0;
}

const char *cluster_vol_state_name(enum cluster_vol_state s)
{
	switch (s) {
	case CLUSTER_VOL_CREATING:
		return "creating";
	case CLUSTER_VOL_READY:
		return "ready";
	case CLUSTER_VOL_DELETING:
		return "deleting";
	}
	return "?";
}

bool cluster_name_in(const char (*list)[CLUSTER_NAME_MAX + 1], unsigned n, const char *node)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(list[i], node) == 0)
			return true;
	return false;
}

uint64_t cluster_node_free(const struct cluster_node_rec *r)
{
	uint64_t best = 0;
	for (unsigned i = 0; i < r->nnamespaces; i++)
		if (r->namespaces[i].free > best)
			best = r->namespaces[i].free;
	return best;
}

const char *cluster_node_addr(const struct cluster_node_rec *r, const char *scheme)
{
	size_t n = strlen(scheme);
	for (unsigned i = 0; i < r->naddrs; i++)
		if (strncmp(r->addrs[i], scheme, n) == 0 && strncmp(r->addrs[i] + n, "://", 3) == 0)
			return r->addrs[i];
	return NULL;
}

/* --- encoding ------------------------------------------------------------ */

/* finish -- the object as a malloc'd JSON text; drops the object */
static int finish(json_object *o, bool ok, char **out)
{
	const char *s = ok ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL;
	*out = s ? strdup(s) : NULL;
	json_object_put(o);
	return *out ? 0 : -ENOMEM;
}

/* add -- o[name] = v; false if either is missing or the add failed (v is dropped then) */
static bool add(json_object *o, const char *name, json_object *v)
{
	if (!o || !v || json_object_object_add(o, name, v) != 0) {
		json_object_put(v);
		return false;
	}
	return true;
}

static bool add_str(json_object *o, const char *name, const char *s)
{
	return add(o, name, json_object_new_string(s));
}

static bool add_u64(json_object *o, const char *name, uint64_t v)
{
	return add(o, name, json_object_new_int64((int64_t)v));
}

/* names_array -- a JSON array of @n names */
static json_object *names_array(const char (*names)[CLUSTER_NAME_MAX + 1], unsigned n)
{
	json_object *a = json_object_new_array();
	for (unsigned i = 0; a && i < n; i++) {
		json_object *s = json_object_new_string(names[i]);
		if (!s || json_object_array_add(a, s) != 0) {
			json_object_put(s);
			json_object_put(a);
			return NULL;
		}
	}
	return a;
}

int cluster_node_encode(const struct cluster_node_rec *r, char **out)
{
	char inc[17];
	snprintf(inc, sizeof(inc), "%016" PRIx64, r->incarnation);
	json_object *o = json_object_new_object();
	bool ok = add_str(o, "node", r->node) && add_str(o, "incarnation", inc) &&
		  add_str(o, "zone", r->zone) && add_str(o, "version", r->version);
	json_object *addrs = json_object_new_object();
	static const char *const schemes[] = {"tcp", "nbd", "rdma"};
	for (unsigned s = 0; ok && s < 3; s++) {
		json_object *a = json_object_new_array();
		size_t n = strlen(schemes[s]);
		for (unsigned i = 0; a && i < r->naddrs; i++) {
			if (strncmp(r->addrs[i], schemes[s], n) != 0 ||
			    strncmp(r->addrs[i] + n, "://", 3) != 0)
				continue;
			json_object *u = json_object_new_string(r->addrs[i]);
			if (!u || json_object_array_add(a, u) != 0) {
				json_object_put(u);
				ok = false;
			}
		}
		ok = ok && add(addrs, schemes[s], a);
	}
	ok = add(o, "addrs", addrs) && ok;
	json_object *nss = json_object_new_array();
	for (unsigned i = 0; ok && nss && i < r->nnamespaces; i++) {
		const struct cluster_ns_rec *n = &r->namespaces[i];
		json_object *e = json_object_new_object();
		ok = add_u64(e, "id", n->id) && add_u64(e, "size", n->size) &&
		     add_u64(e, "free", n->free) && add_str(e, "persist_method", n->persist_method);
		if (!ok || json_object_array_add(nss, e) != 0) {
			json_object_put(e);
			ok = false;
		}
	}
	ok = add(o, "namespaces", nss) && ok;
	return finish(o, ok, out);
}

int cluster_volume_encode(const struct cluster_volume_rec *r, char **out)
{
	json_object *o = json_object_new_object();
	bool ok = add_str(o, "name", r->name) && add_u64(o, "size", r->size) &&
		  add(o, "replicas", names_array(r->replicas, r->nreplicas)) &&
		  add_u64(o, "min_replicas", r->min_replicas) &&
		  add(o, "isr", names_array(r->isr, r->nisr)) &&
		  add_str(o, "primary", r->primary) && add_u64(o, "epoch", r->epoch) &&
		  add_str(o, "state", cluster_vol_state_name(r->state));
	return finish(o, ok, out);
}

int cluster_status_encode(const struct cluster_status_rec *r, char **out)
{
	json_object *o = json_object_new_object();
	bool ok = add_str(o, "state", r->state) && add_str(o, "link", r->link) &&
		  add_u64(o, "resync_bytes_left", r->resync_bytes_left) &&
		  add_u64(o, "resync_bytes_total", r->resync_bytes_total) &&
		  add_u64(o, "resync_bytes_shipped", r->resync_bytes_shipped);
	return finish(o, ok, out);
}

int cluster_member_encode(const struct cluster_member_rec *r, char **out)
{
	json_object *o = json_object_new_object();
	bool ok = add_u64(o, "namespace", r->ns_id) && add_u64(o, "offset", r->offset);
	return finish(o, ok, out);
}

/* --- decoding ------------------------------------------------------------ */

/* A decoder's state: the object and where to say what is wrong. */
struct dec {
	json_object *o;
	char *err;
	size_t errlen;
	bool bad;
};

static int dec_open(struct dec *d, const char *json, size_t len, char *err, size_t errlen)
{
	const char *why = "";
	*d = (struct dec){.err = err, .errlen = errlen};
	d->o = etcd_json_parse_object(json, len, &why);
	if (!d->o) {
		rdax_seterr(err, errlen, "not a JSON object: %s", why);
		return -EINVAL;
	}
	return 0;
}

static int dec_close(struct dec *d)
{
	json_object_put(d->o);
	return d->bad ? -EINVAL : 0;
}

/* member -- o[name] of @type, or NULL (with the error noted if @required) */
static json_object *member(struct dec *d, json_object *o, const char *name, json_type type,
			   bool required)
{
	json_object *v;
	if (d->bad)
		return NULL;
	if (!json_object_object_get_ex(o, name, &v) || !v) {
		if (required) {
			rdax_seterr(d->err, d->errlen, "no member \"%s\"", name);
			d->bad = true;
		}
		return NULL;
	}
	if (!json_object_is_type(v, type)) {
		rdax_seterr(d->err, d->errlen, "member \"%s\" has the wrong type", name);
		d->bad = true;
		return NULL;
	}
	return v;
}

/* get_str -- a string member into @out of @cap bytes; @name_rule: must be a valid name */
static void get_str(struct dec *d, json_object *o, const char *name, char *out, size_t cap,
		    bool required, bool name_rule)
{
	json_object *v = member(d, o, name, json_type_string, required);
	if (!v)
		return;
	const char *s = json_object_get_string(v);
	if ((size_t)json_object_get_string_len(v) >= cap ||
	    strlen(s) != (size_t)json_object_get_string_len(v) ||
	    (name_rule && !cluster_name_valid(s))) {
		rdax_seterr(d->err, d->errlen, "member \"%s\" is not a valid value", name);
		d->bad = true;
		return;
	}
	snprintf(out, cap, "%s", s);
}

/* get_u64 -- an integer member in [0, max] */
static void get_u64(struct dec *d, json_object *o, const char *name, uint64_t max, uint64_t *out,
		    bool required)
{
	json_object *v = member(d, o, name, json_type_int, required);
	if (!v)
		return;
	int64_t n = json_object_get_int64(v);
	if (n < 0 || (uint64_t)n > max) {
		rdax_seterr(d->err, d->errlen, "member \"%s\" is out of range", name);
		d->bad = true;
		return;
	}
	*out = (uint64_t)n;
}

/* get_names -- an array of at most CLUSTER_MAX_REPLICAS valid names */
static void get_names(struct dec *d, json_object *o, const char *name,
		      char (*out)[CLUSTER_NAME_MAX + 1], unsigned *n)
{
	json_object *a = member(d, o, name, json_type_array, true);
	if (!a)
		return;
	size_t len = json_object_array_length(a);
	if (len > CLUSTER_MAX_REPLICAS) {
		rdax_seterr(d->err, d->errlen, "member \"%s\" has more than %d names", name,
			    CLUSTER_MAX_REPLICAS);
		d->bad = true;
		return;
	}
	for (size_t i = 0; i < len; i++) {
		json_object *s = json_object_array_get_idx(a, i);
		if (!json_object_is_type(s, json_type_string) ||
		    !cluster_name_valid(json_object_get_string(s))) {
			rdax_seterr(d->err, d->errlen, "member \"%s\" holds a bad name", name);
			d->bad = true;
			return;
		}
		snprintf(out[i], CLUSTER_NAME_MAX + 1, "%s", json_object_get_string(s));
	}
	*n = (unsigned)len;
}

int cluster_node_decode(const char *json, size_t len, struct cluster_node_rec *r, char *err,
			size_t errlen)
{
	struct dec d;
	memset(r, 0, sizeof(*r));
	if (dec_open(&d, json, len, err, errlen))
		return -EINVAL;
	char inc[32] = "";
	get_str(&d, d.o, "node", r->node, sizeof(r->node), true, true);
	get_str(&d, d.o, "incarnation", inc, sizeof(inc), true, false);
	get_str(&d, d.o, "zone", r->zone, sizeof(r->zone), false, false);
	get_str(&d, d.o, "version", r->version, sizeof(r->version), false, false);
	if (!d.bad && r->zone[0] && !cluster_name_valid(r->zone)) {
		rdax_seterr(err, errlen, "member \"zone\" is not a valid name");
		d.bad = true;
	}
	char *end = NULL;
	if (!d.bad) {
		r->incarnation = strtoull(inc, &end, 16);
		if (strlen(inc) != 16 || *end) {
			rdax_seterr(err, errlen, "member \"incarnation\" is not 16 hex digits");
			d.bad = true;
		}
	}
	json_object *addrs = member(&d, d.o, "addrs", json_type_object, true);
	static const char *const schemes[] = {"tcp", "nbd", "rdma"};
	for (unsigned s = 0; addrs && !d.bad && s < 3; s++) {
		json_object *a = member(&d, addrs, schemes[s], json_type_array, false);
		size_t n = a ? json_object_array_length(a) : 0;
		for (size_t i = 0; i < n && !d.bad; i++) {
			json_object *u = json_object_array_get_idx(a, i);
			const char *us = json_object_get_string(u);
			size_t sl = strlen(schemes[s]);
			if (!json_object_is_type(u, json_type_string) ||
			    strlen(us) > CLUSTER_URL_MAX || strncmp(us, schemes[s], sl) != 0 ||
			    strncmp(us + sl, "://", 3) != 0 || r->naddrs >= CLUSTER_MAX_ADDRS) {
				rdax_seterr(err, errlen, "member \"addrs\" holds a bad %s address",
					    schemes[s]);
				d.bad = true;
				break;
			}
			snprintf(r->addrs[r->naddrs++], CLUSTER_URL_MAX + 1, "%s", us);
		}
	}
	json_object *nss = member(&d, d.o, "namespaces", json_type_array, true);
	size_t n = nss ? json_object_array_length(nss) : 0;
	if (n > CLUSTER_MAX_NAMESPACES)
		n = CLUSTER_MAX_NAMESPACES;
	for (size_t i = 0; i < n && !d.bad; i++) {
		json_object *e = json_object_array_get_idx(nss, i);
		struct cluster_ns_rec *ns = &r->namespaces[i];
		uint64_t id = 0;
		if (!json_object_is_type(e, json_type_object)) {
			rdax_seterr(err, errlen, "member \"namespaces\" holds a non-object");
			d.bad = true;
			break;
		}
		get_u64(&d, e, "id", UINT32_MAX, &id, true);
		get_u64(&d, e, "size", INT64_MAX, &ns->size, true);
		get_u64(&d, e, "free", INT64_MAX, &ns->free, true);
		get_str(&d, e, "persist_method", ns->persist_method, sizeof(ns->persist_method),
			false, false);
		ns->id = (uint32_t)id;
		r->nnamespaces++;
	}
	return dec_close(&d);
}

int cluster_volume_decode(const char *json, size_t len, struct cluster_volume_rec *r, char *err,
			  size_t errlen)
{
	struct dec d;
	memset(r, 0, sizeof(*r));
	if (dec_open(&d, json, len, err, errlen))
		return -EINVAL;
	uint64_t min = 1;
	char state[16] = "";
	get_str(&d, d.o, "name", r->name, sizeof(r->name), true, true);
	get_u64(&d, d.o, "size", INT64_MAX, &r->size, true);
	get_names(&d, d.o, "replicas", r->replicas, &r->nreplicas);
	get_u64(&d, d.o, "min_replicas", CLUSTER_MAX_REPLICAS, &min, false);
	get_names(&d, d.o, "isr", r->isr, &r->nisr);
	get_str(&d, d.o, "primary", r->primary, sizeof(r->primary), true, true);
	get_u64(&d, d.o, "epoch", INT64_MAX, &r->epoch, true);
	get_str(&d, d.o, "state", state, sizeof(state), true, false);
	r->min_replicas = (unsigned)min;
	if (!d.bad) {
		if (strcmp(state, "creating") == 0)
			r->state = CLUSTER_VOL_CREATING;
		else if (strcmp(state, "ready") == 0)
			r->state = CLUSTER_VOL_READY;
		else if (strcmp(state, "deleting") == 0)
			r->state = CLUSTER_VOL_DELETING;
		else {
			rdax_seterr(err, errlen,
				    "member \"state\" is not creating, ready or deleting");
			d.bad = true;
		}
	}
	/* the rules every writer keeps: the primary is in the ISR, the ISR among the replicas */
	if (!d.bad && (r->nreplicas == 0 || r->epoch == 0 || min < 1 || min > r->nreplicas ||
		       !cluster_name_in(r->isr, r->nisr, r->primary))) {
		rdax_seterr(err, errlen,
			    "inconsistent record (replicas, min_replicas, isr, primary "
			    "or epoch)");
		d.bad = true;
	}
	for (unsigned i = 0; !d.bad && i < r->nisr; i++)
		if (!cluster_name_in(r->replicas, r->nreplicas, r->isr[i])) {
			rdax_seterr(err, errlen, "ISR member %s is not a replica", r->isr[i]);
			d.bad = true;
		}
	return dec_close(&d);
}

int cluster_status_decode(const char *json, size_t len, struct cluster_status_rec *r, char *err,
			  size_t errlen)
{
	struct dec d;
	memset(r, 0, sizeof(*r));
	if (dec_open(&d, json, len, err, errlen))
		return -EINVAL;
	get_str(&d, d.o, "state", r->state, sizeof(r->state), true, false);
	get_str(&d, d.o, "link", r->link, sizeof(r->link), false, false);
	get_u64(&d, d.o, "resync_bytes_left", INT64_MAX, &r->resync_bytes_left, false);
	get_u64(&d, d.o, "resync_bytes_total", INT64_MAX, &r->resync_bytes_total, false);
	get_u64(&d, d.o, "resync_bytes_shipped", INT64_MAX, &r->resync_bytes_shipped, false);
	return dec_close(&d);
}

int cluster_member_decode(const char *json, size_t len, struct cluster_member_rec *r, char *err,
			  size_t errlen)
{
	struct dec d;
	uint64_t id = 0;
	memset(r, 0, sizeof(*r));
	if (dec_open(&d, json, len, err, errlen))
		return -EINVAL;
	get_u64(&d, d.o, "namespace", UINT32_MAX, &id, true);
	get_u64(&d, d.o, "offset", INT64_MAX, &r->offset, true);
	r->ns_id = (uint32_t)id;
	return dec_close(&d);
}
