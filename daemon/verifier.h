/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verifier.h -- the write verifier of replies (NFS WRITE/COMMIT style)
 *
 * A plain WRITE is acknowledged before it is durable. A restart, a power
 * cut or a failover between that acknowledgement and the fsync that should
 * cover it can lose the write, while the fsync, run by the new server,
 * succeeds. So WriteReply, FsyncReply and VolumeOpenReply carry a verifier
 * (docs/cluster.md, "The verifier"): a 64-bit value that changes whenever
 * acknowledged-but-unflushed writes may have been lost. A client compares
 * the verifier of an fsync's reply with those of the writes it covers, sends
 * again what it still holds, and otherwise fails the fsync with -EIO.
 *
 *   a volume of this node alone     the daemon's incarnation (incarnation.h:
 *                                   new at every start and power cut)
 *   a cluster volume it serves      the incarnation mixed with the epoch it
 *                                   serves the volume at: a failover (or this
 *                                   node serving again at a later epoch,
 *                                   after a reconcile that may have undone
 *                                   its unacknowledged writes) changes it
 *
 * Never 0 once the daemon started (0 is "no verifier" on the wire).
 *
 * Thread safety: any thread; two atomic loads.
 */
#ifndef RDAXD_VERIFIER_H
#define RDAXD_VERIFIER_H

#include <stdint.h>

struct gate_vol;

/* verifier_of -- the verifier of replies about a volume whose gate is @g (NULL: not a cluster one)
 */
uint64_t verifier_of(const struct gate_vol *g);

#endif
