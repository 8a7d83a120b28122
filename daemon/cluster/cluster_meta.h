/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_meta.h -- the cluster's records in etcd: key names and JSON values
 *
 * Everything a cluster agrees on lives under one prefix, /rdax/<cluster>/
 * (docs/cluster.md, "Keys and values"):
 *
 *   nodes/<node>                  a node: addresses, zone, free space (on its lease)
 *   volumes/<name>                a volume: size, replicas, ISR, primary, epoch, state
 *   volumes/<name>/leader         the primary, on the primary's node lease
 *   volumes/<name>/members/<node> that node's local replica exists
 *   volumes/<name>/status/<node>  what the primary last saw of that replica (informational)
 *
 * Values are JSON objects. Decoders ignore members they do not know (a newer
 * rdax may add some) and refuse a value that lacks a required member or has
 * one of the wrong type or out of range, with words saying which: such a key
 * is unusable and the caller leaves its volume as it was. 64-bit numbers are
 * JSON integers (json-c reads them exactly); the incarnation is 16 hex digits.
 *
 * Both rdaxd (the cluster thread) and rdax (node list, volume create and info)
 * use this file pair, so the two sides cannot disagree about a spelling.
 *
 * Thread safety: none needed; every function works on its arguments only.
 */
#ifndef RDAXD_CLUSTER_META_H
#define RDAXD_CLUSTER_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLUSTER_NAME_MAX	63 /* node, cluster, zone and volume names */
#define CLUSTER_MAX_REPLICAS	8
#define CLUSTER_MAX_ADDRS	16
#define CLUSTER_MAX_NAMESPACES	16
#define CLUSTER_URL_MAX		127
#define CLUSTER_KEY_MAX		256
#define CLUSTER_DEFAULT_LEASE_S 5
/* A volume's change record is the local volume "<name>.rrec" (cluster_gate.h). */
#define CLUSTER_RECORD_SUFFIX	  ".rrec"
#define CLUSTER_RECORD_SUFFIX_LEN 5
/* The longest cluster volume name: its record's name must fit a volume name. */
#define CLUSTER_VOLUME_NAME_MAX (CLUSTER_NAME_MAX - CLUSTER_RECORD_SUFFIX_LEN)

struct cluster_ns_rec {
	uint32_t id;
	uint64_t size; /* data bytes */
	uint64_t free; /* the largest free extent: the largest volume it can take */
	char persist_method[32];
};

/* nodes/<node> */
struct cluster_node_rec {
	char node[CLUSTER_NAME_MAX + 1];
	char zone[CLUSTER_NAME_MAX + 1];		    /* "" if none */
	uint64_t incarnation;				    /* random at every start of the node */
	char addrs[CLUSTER_MAX_ADDRS][CLUSTER_URL_MAX + 1]; /* tcp://, rdma://, nbd:// URLs */
	unsigned naddrs;
	struct cluster_ns_rec namespaces[CLUSTER_MAX_NAMESPACES];
	unsigned nnamespaces;
	char version[32];
};

enum cluster_vol_state {
	CLUSTER_VOL_CREATING, /* placed; not every replica exists yet */
	CLUSTER_VOL_READY,    /* every replica exists and the primary holds the leader key */
	CLUSTER_VOL_DELETING,
};

/* volumes/<name> */
struct cluster_volume_rec {
	char name[CLUSTER_NAME_MAX + 1];
	uint64_t size;
	char replicas[CLUSTER_MAX_REPLICAS][CLUSTER_NAME_MAX + 1]; /* placement order */
	unsigned nreplicas;
	unsigned min_replicas; /* the ISR may not shrink below this many */
	char isr[CLUSTER_MAX_REPLICAS][CLUSTER_NAME_MAX + 1]; /* always holds primary */
	unsigned nisr;
	char primary[CLUSTER_NAME_MAX + 1];
	uint64_t epoch; /* 1 at creation; +1 at every change of primary */
	enum cluster_vol_state state;
};

/* volumes/<name>/status/<node>: written by the primary, never used for a decision */
struct cluster_status_rec {
	char state[16]; /* in-sync, resync, out-of-sync, down */
	char link[16];	/* tcp or rdma; "" before a link was made */
	uint64_t resync_bytes_left;
	uint64_t resync_bytes_total;
	uint64_t resync_bytes_shipped;
};

/* volumes/<name>/members/<node>: where that node keeps its replica */
struct cluster_member_rec {
	uint32_t ns_id;
	uint64_t offset;
};

/* cluster_name_valid -- 1 to CLUSTER_NAME_MAX characters of A-Z a-z 0-9 . _ - */
bool cluster_name_valid(const char *s);

/*
 * cluster_key -- "/rdax/<cluster>/<part>[/<part>...]" into @buf: @parts
 * NULL-terminated. Returns the length, or -ENAMETOOLONG (@buf too small).
 */
int cluster_key(char *buf, size_t len, const char *cluster, ...) __attribute__((sentinel));

/*
 * cluster_key_parse -- split a key under /rdax/<cluster>/ into its parts
 * after the prefix: "volumes/v1/members/n2" gives kind "volumes", name "v1",
 * sub "members", leaf "n2" (missing parts ""). Each part is copied into a
 * CLUSTER_KEY_MAX buffer. Returns 0, or -EINVAL if @key is not under the prefix.
 */
int cluster_key_parse(const char *key, const char *cluster, char kind[CLUSTER_KEY_MAX],
		      char name[CLUSTER_KEY_MAX], char sub[CLUSTER_KEY_MAX],
		      char leaf[CLUSTER_KEY_MAX]);

/* cluster_vol_state_name -- "creating", "ready", "deleting" */
const char *cluster_vol_state_name(enum cluster_vol_state s);

/*
 * cluster_*_encode -- the record as a JSON text in a malloc'd string (*out).
 * Returns 0, -ENOMEM.
 * cluster_*_decode -- @len bytes of JSON into the record. Returns 0, or
 * -EINVAL with @err saying what is wrong.
 */
int cluster_node_encode(const struct cluster_node_rec *r, char **out);
int cluster_node_decode(const char *json, size_t len, struct cluster_node_rec *r, char *err,
			size_t errlen);
int cluster_volume_encode(const struct cluster_volume_rec *r, char **out);
int cluster_volume_decode(const char *json, size_t len, struct cluster_volume_rec *r, char *err,
			  size_t errlen);
int cluster_status_encode(const struct cluster_status_rec *r, char **out);
int cluster_status_decode(const char *json, size_t len, struct cluster_status_rec *r, char *err,
			  size_t errlen);
int cluster_member_encode(const struct cluster_member_rec *r, char **out);
int cluster_member_decode(const char *json, size_t len, struct cluster_member_rec *r, char *err,
			  size_t errlen);

/* cluster_name_in -- whether @node is one of @list's @n names */
bool cluster_name_in(const char (*list)[CLUSTER_NAME_MAX + 1], unsigned n, const char *node);

/* cluster_node_free -- the node's largest free extent over its namespaces */
uint64_t cluster_node_free(const struct cluster_node_rec *r);

/* cluster_node_addr -- the node's first address of @scheme ("tcp", "rdma", "nbd"), or NULL */
const char *cluster_node_addr(const struct cluster_node_rec *r, const char *scheme);

#endif
