/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * member.h -- read a replica's copy directly, as its primary's link would
 *
 * A cluster node serves a volume's clients only where it is the primary; a
 * copy on any other node refuses ordinary opens (RDAX_E_NOT_PRIMARY,
 * daemon/cluster/cluster_gate.h). The tests still read every ISR member's
 * copy to check the invariants, so they open it the way the primary's
 * replica link does: as a replica link of the primary the volume key names,
 * at the key's epoch -- which the fence accepts and which changes nothing
 * (the epoch is the one the copy has seen).
 *
 * Beside it, what several cluster tests need alike: the volume key read
 * with retries, a node's index from its name, and a resuming client that
 * follows the primary (librdax's resume, docs/cluster.md "Clients that
 * follow").
 *
 * Thread safety: the caller's thread; one connection per call.
 */
#ifndef RDAX_TEST_MEMBER_H
#define RDAX_TEST_MEMBER_H

#include "cluster_meta.h"
#include "librdax.h"

/*
 * nx_volume_key -- volumes/@volume of cluster "default" from the etcd at
 * @etcd_spec into *v. Returns 0 or a negative code.
 */
int nx_volume_key(const char *etcd_spec, const char *volume, struct cluster_volume_rec *v);

/*
 * nx_volume_key_retry -- nx_volume_key(), tried @tries times @gap_ms apart
 * while it fails (etcd slow, or restarting under a test's fault). Returns 0
 * or the last try's negative code.
 */
int nx_volume_key_retry(const char *etcd_spec, const char *volume, unsigned tries,
			unsigned gap_ms, struct cluster_volume_rec *v);

/* nx_node_index -- the index of the test node named @node ("n1" is 0, "n2" 1, ...) */
unsigned nx_node_index(const char *node);

/*
 * nx_resuming_open -- a client that follows the primary: connect to @urls
 * (comma-separated, tried in order) with requests timed out after
 * @timeout_ms (so a silent node is noticed), lost connections resumed for
 * up to @resume_ms, @hold_bytes of acknowledged-but-not-fsynced writes kept
 * for replay (0: none), and open @volume. Returns 0 (*cp, *vp set) or a
 * negative code, what failed printed under @who (nothing left open).
 */
int nx_resuming_open(const char *who, const char *urls, const char *volume, int timeout_ms,
		     int resume_ms, uint64_t hold_bytes, struct rdax_conn **cp,
		     struct rdax_volume **vp);

/*
 * nx_member_open -- connect to node @node at @url and open its copy of
 * @volume: as the replica link of the key's primary at the key's epoch, or
 * as an ordinary client if @node is that primary. Returns 0 (*cp, *vp set)
 * or a negative code (the connection is closed).
 */
int nx_member_open(const char *etcd_spec, const char *node, const char *url, const char *volume,
		   struct rdax_conn **cp, struct rdax_volume **vp);

#endif
