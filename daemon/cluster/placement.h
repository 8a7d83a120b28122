/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * placement.h -- which nodes get the replicas of a new volume
 *
 * A node can take a replica when it is up (its key exists: it holds its
 * lease) and one of its namespaces has a free extent of at least the volume's
 * size. Among those, placement takes first one node per zone (the zone with
 * the node of most free space first, the nodes of one zone by free space, ties
 * by name), then, if the count is not reached, the rest by free space: so the
 * replicas are in as many distinct zones as exist, and a node without a zone
 * label counts as a zone of its own ("" is one zone).
 *
 * The first chosen node is the volume's primary at creation.
 *
 * Thread safety: none needed (works on its arguments only).
 */
#ifndef RDAXD_PLACEMENT_H
#define RDAXD_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "cluster_meta.h"

/*
 * placement_choose -- pick @want of the @n nodes for a volume of @size bytes;
 * chosen[0..want) get indexes into @nodes, in the volume's replica order.
 * Returns 0, or -ENOSPC when fewer than @want nodes can take it (@err then
 * says how many nodes there are, how many have room, and the most free
 * space any has), -EINVAL for @want 0 or above CLUSTER_MAX_REPLICAS.
 */
int placement_choose(const struct cluster_node_rec *nodes, unsigned n, uint64_t size, unsigned want,
		     unsigned *chosen, char *err, size_t errlen);

#endif
