/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd.h -- a client of etcd's v3 JSON gateway (libcurl + json-c)
 *
 * The cluster's agreement (nodes, volumes, in-sync sets, epochs, leaders:
 * docs/cluster.md) lives in etcd; this is the one piece of rdax that talks
 * to it. Every request is an HTTP POST of a JSON body to /v3/<service>/<call>
 * on one of the endpoints of "etcd://HOST:PORT[,HOST:PORT...]"; keys and
 * values travel base64-encoded, 64-bit numbers as decimal strings (the
 * gateway's protobuf JSON mapping). etcd 3.4 (Debian 12) serves the gateway
 * under both /v3/ and the deprecated /v3beta/; 3.5 dropped /v3beta/, so the
 * client uses /v3/.
 *
 * Calls (range, put, delete, txn, lease grant/keepalive/revoke) block the
 * calling thread for at most opts.call_timeout_ms. They are for the
 * cluster's control thread only, never for a worker's event loop: no
 * request of a client ever waits for etcd (docs/cluster.md, "Threads").
 *
 * Endpoints and failover. The client sticks to one endpoint while it
 * answers. A call whose request provably never left (connection refused,
 * unreachable, connect timed out: nothing was sent) moves to the next
 * endpoint and tries again within the call's deadline. A call whose request
 * was sent but got no answer may have been applied: reads (range) and
 * lease keepalive (idempotent) move on and retry;
 * writes (put, delete, txn, grant, revoke) return -ETIMEDOUT (or
 * -ECONNRESET) and leave the
 * endpoint for the next call, because repeating a txn whose first copy was
 * applied would report the compare as failed -- a lie about what happened.
 * The caller re-reads to learn the outcome.
 *
 * Watches are long-lived streaming POSTs (/v3/watch) driven by libcurl's
 * multi interface inside etcd_client_poll(). A watch resumes by itself:
 * when its stream breaks (endpoint down, garbage, a unary call found the
 * endpoint dead) it is re-created on the next endpoint from the revision
 * after the last event it delivered, so the caller sees every event once,
 * in revision order, with no gap -- or ETCD_WATCH_CANCELED if etcd compacted
 * the history it would need (the caller then re-reads and watches anew).
 *
 * Errors: 0 or a negative code, and etcd_client_last_error() says what
 * happened in words (endpoint, HTTP status, etcd's message):
 *   -ENOTCONN   no endpoint could be reached; nothing was sent
 *   -ETIMEDOUT  sent, no answer within the deadline (a write's outcome is
 *               unknown); also etcd's own "request timed out"/"no leader"
 *   -ECONNRESET sent, the connection was lost before the answer (outcome
 *               unknown, as for -ETIMEDOUT)
 *   -ENOENT     etcd said not found (a lease that expired or never was)
 *   -EINVAL     bad arguments, or etcd refused the request as invalid
 *   -ERANGE     the revision asked for was compacted
 *   -ENOSPC     etcd's quota or rate limit
 *   -EACCES     authentication required or refused
 *   -EPROTO     the answer was not the gateway's JSON (or not HTTP)
 *   -EIO        etcd reported an internal error
 *   -ENOMEM
 *
 * Thread safety: an etcd_client and its watches belong to one thread (the
 * cluster thread), which makes every call on them; the sole exception is
 * etcd_client_wakeup(), callable from any thread. Different clients are
 * independent. libcurl's global init runs once, thread-safely, at the
 * first etcd_client_new().
 */
#ifndef RDAXD_ETCD_H
#define RDAXD_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ETCD_MAX_ENDPOINTS 8

struct etcd_client;
struct etcd_watch;

struct etcd_opts {
	/* one TCP connect to one endpoint; 0: 500 ms */
	unsigned connect_timeout_ms;
	/* one HTTP exchange with one endpoint; 0: 1000 ms */
	unsigned attempt_timeout_ms;
	/* a whole call, failover included; 0: 3000 ms */
	unsigned call_timeout_ms;
	/* a broken watch waits this long before it is re-created (doubling to 8x); 0: 100 ms */
	unsigned watch_retry_ms;
};

/* One key-value pair. key and value are NUL-terminated for convenience, and may hold NULs. */
struct etcd_kv {
	char *key;
	size_t key_len;
	char *value;
	size_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
	int64_t lease; /* 0: none */
};

struct etcd_range_result {
	int64_t revision; /* the store's revision when the range was read */
	struct etcd_kv *kvs;
	size_t count;
};

/*
 * etcd_client_new -- a client of the endpoints in @spec ("etcd://H:P[,H:P...]",
 * H a name, an IPv4 address or a bracketed IPv6 one). Makes no request.
 * @opts NULL: defaults. Returns 0, -EINVAL (spec, message in @err),
 * -ENOMEM; sets *out only on success. Context: any thread.
 */
int etcd_client_new(const char *spec, const struct etcd_opts *opts, struct etcd_client **out,
		    char *err, size_t errlen);

/* etcd_client_delete -- cancel every watch, free the client; accepts NULL, sets *cp = NULL */
void etcd_client_delete(struct etcd_client **cp);

/* etcd_client_last_error -- words for the last failed call ("" if none failed) */
const char *etcd_client_last_error(const struct etcd_client *c);

/* etcd_client_endpoint -- "http://H:P" of the endpoint the next call tries first */
const char *etcd_client_endpoint(const struct etcd_client *c);

/* etcd_range_result_free -- free what a range put into @r (not @r itself); zeroes it */
void etcd_range_result_free(struct etcd_range_result *r);

/*
 * etcd_get -- the key @key (0 or 1 result) or, with @prefix, every key
 * starting with @key (an empty @key with @prefix: the whole store), in key
 * order. Linearizable. Returns 0 (out filled, count may be 0), or an error
 * above (out zeroed).
 */
int etcd_get(struct etcd_client *c, const char *key, bool prefix, struct etcd_range_result *out);

/*
 * etcd_put -- set @key to @len bytes of @value, attached to @lease (0: none).
 * *revision (may be NULL) gets the store's revision after the put.
 * Returns 0 or an error above (-ENOENT: no such lease).
 */
int etcd_put(struct etcd_client *c, const char *key, const void *value, size_t len, int64_t lease,
	     int64_t *revision);

/* etcd_delete -- delete @key (with @prefix: every key under it); *deleted (may be NULL) counts them
 */
int etcd_delete(struct etcd_client *c, const char *key, bool prefix, int64_t *deleted);

enum etcd_cmp_target {
	ETCD_CMP_MOD,	 /* the key's mod_revision (0: the key does not exist) */
	ETCD_CMP_CREATE, /* the key's create_revision (0: does not exist) */
	ETCD_CMP_VERSION,
	ETCD_CMP_VALUE,
};

enum etcd_cmp_result { ETCD_CMP_EQUAL, ETCD_CMP_NOT_EQUAL, ETCD_CMP_LESS, ETCD_CMP_GREATER };

/* "key's <target> <result> <revision|value>", e.g. mod_revision EQUAL 42 */
struct etcd_cmp {
	const char *key;
	enum etcd_cmp_target target;
	enum etcd_cmp_result result;
	int64_t number;	   /* MOD, CREATE, VERSION */
	const void *value; /* VALUE */
	size_t value_len;
};

enum etcd_op_type { ETCD_OP_GET, ETCD_OP_PUT, ETCD_OP_DELETE };

struct etcd_op {
	enum etcd_op_type type;
	const char *key;
	bool prefix;	   /* GET, DELETE */
	const void *value; /* PUT */
	size_t value_len;
	int64_t lease; /* PUT; 0: none */
};

struct etcd_op_result {
	enum etcd_op_type type;
	struct etcd_range_result range; /* GET: what it read (revision = the txn's) */
	int64_t deleted;		/* DELETE */
};

struct etcd_txn_result {
	bool succeeded;	  /* every compare held: the success ops ran, else the failure ops */
	int64_t revision; /* the store's revision after the txn */
	struct etcd_op_result *results; /* one per op of the branch that ran */
	size_t count;
};

/* etcd_txn_result_free -- free what etcd_txn put into @r; zeroes it */
void etcd_txn_result_free(struct etcd_txn_result *r);

/*
 * etcd_txn -- if every compare of @cmps holds, run @success, else @failure,
 * atomically (one revision). This is how every state change that matters
 * for safety is made: compare the key's mod_revision as read, then put, so
 * a concurrent writer makes the compare fail instead of being overwritten.
 * A failed compare is not an error: 0 with out->succeeded false (put GETs
 * in @failure to read what changed). Returns 0 or an error above; on
 * -ETIMEDOUT the txn may or may not have been applied.
 */
int etcd_txn(struct etcd_client *c, const struct etcd_cmp *cmps, size_t ncmp,
	     const struct etcd_op *success, size_t nsuccess, const struct etcd_op *failure,
	     size_t nfailure, struct etcd_txn_result *out);

/*
 * etcd_lease_grant -- a new lease of @ttl_s seconds; *id gets its ID,
 * *granted_ttl (may be NULL) the TTL etcd granted. Returns 0 or an error.
 */
int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl);

/*
 * etcd_lease_keepalive -- renew lease @id once; *ttl_s (may be NULL) gets
 * its TTL again. One unary request per renewal, not the gateway's stream:
 * each renewal then has its own deadline and its own answer, so a holder
 * that records the monotonic time *before* the call knows its lease lives
 * at least until that time + ttl (etcd starts the new TTL when it handles
 * the request, which is after it was sent) -- the bound the "stop serving
 * before the lease can run out" rule needs (docs/cluster.md). The gateway's
 * streaming keepalive would need an open-ended request body, and tie
 * answers to requests only by order. Retried on the next endpoint (it is
 * idempotent). Returns 0, -ENOENT (the lease is gone: expired or revoked),
 * or an error above.
 */
int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ttl_s);

/* etcd_lease_revoke -- end lease @id now, deleting its keys. Returns 0, -ENOENT, or an error. */
int etcd_lease_revoke(struct etcd_client *c, int64_t id);

enum etcd_event_type { ETCD_EVENT_PUT, ETCD_EVENT_DELETE };

struct etcd_event {
	enum etcd_event_type type;
	struct etcd_kv kv; /* DELETE: key and mod_revision (the deletion's) only */
};

enum etcd_watch_kind {
	ETCD_WATCH_CREATED,  /* the stream is up (first time, or again after a break) */
	ETCD_WATCH_EVENTS,   /* events, in revision order */
	ETCD_WATCH_LOST,     /* the stream broke; it is re-created by itself (status, message) */
	ETCD_WATCH_CANCELED, /* ended for good: compacted (status -ERANGE) or canceled by etcd */
};

struct etcd_watch_update {
	enum etcd_watch_kind kind;
	const struct etcd_event *events; /* EVENTS */
	size_t count;
	int64_t revision;	  /* the store's revision in etcd's answer (0 if none) */
	int64_t compact_revision; /* CANCELED by compaction: the oldest revision left */
	int status;		  /* LOST, CANCELED: why, as the codes above */
	const char *message;	  /* LOST, CANCELED: words */
};

/*
 * etcd_watch_fn -- called from etcd_client_poll() on the client's thread.
 * @u and what it points to are valid during the call only. The callback
 * may not call etcd_watch_cancel() on its own watch or etcd_client_delete().
 */
typedef void (*etcd_watch_fn)(void *arg, const struct etcd_watch_update *u);

/*
 * etcd_watch_start -- watch @key (with @prefix: every key under it) from
 * @start_revision (0: from now; typically a range's revision + 1, so a read
 * and a watch together miss nothing). Nothing is sent until the next
 * etcd_client_poll(). Returns 0 or -ENOMEM; sets *out only on success.
 */
int etcd_watch_start(struct etcd_client *c, const char *key, bool prefix, int64_t start_revision,
		     etcd_watch_fn fn, void *arg, struct etcd_watch **out);

/* etcd_watch_cancel -- stop and free the watch; accepts NULL, sets *wp = NULL */
void etcd_watch_cancel(struct etcd_watch **wp);

/* etcd_watch_next_revision -- the revision the watch resumes from after a break */
int64_t etcd_watch_next_revision(const struct etcd_watch *w);

/*
 * etcd_client_poll -- drive the watches for up to @timeout_ms: wait for
 * stream data (or etcd_client_wakeup()), deliver updates to the callbacks,
 * re-create broken watches whose retry time has come. Returns early when
 * anything was delivered or on a wakeup. Returns 0 or -ENOMEM.
 */
int etcd_client_poll(struct etcd_client *c, int timeout_ms);

/* etcd_client_wakeup -- make a current or the next etcd_client_poll() return. Context: any thread.
 */
void etcd_client_wakeup(struct etcd_client *c);

/*
 * etcd_json_parse_object -- @len bytes that must be exactly one JSON object
 * (white space around it allowed; nesting at most 32 deep): the gateway's
 * answers, and the JSON values rdax keeps in etcd (cluster_meta.h). Returns
 * the object (json_object_put() it), or NULL with *why saying what is wrong.
 */
struct json_object;
struct json_object *etcd_json_parse_object(const char *buf, size_t len, const char **why);

#endif
