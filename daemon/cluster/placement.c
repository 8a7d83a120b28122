/* SPDX-License-Identifier: BSD-3-Clause */
/* placement.c -- which nodes get the replicas of a new volume */
#include "placement.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "size.h"

/* The candidates being sorted (qsort's comparator has no argument of its own). */
struct cand {
	const struct cluster_node_rec *node;
	unsigned index;
	uint64_t free;
};

/* by_free -- most free space first, then by name (a stable, seed-free order) */
static int by_free(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->free != y->free)
		return x->free > y->free ? -1 : 1;
	return strcmp(x->node->node, y->node->node);
}

int placement_choose(const struct cluster_node_rec *nodes, unsigned n, uint64_t size, unsigned want,
		     unsigned *chosen, char *err, size_t errlen)
{
	if (want == 0 || want > CLUSTER_MAX_REPLICAS) {
		rdax_seterr(err, errlen, "the replica count must be 1 to %d", CLUSTER_MAX_REPLICAS);
		return -EINVAL;
	}
	struct cand *c = calloc(n ? n : 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	unsigned nc = 0;
	uint64_t most = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t f = cluster_node_free(&nodes[i]);
		most = f > most ? f : most;
		if (f >= size)
			c[nc++] = (struct cand){.node = &nodes[i], .index = i, .free = f};
	}
	if (nc < want) {
		char sz[SIZE_FORMAT_MAX], mf[SIZE_FORMAT_MAX];
		rdax_seterr(err, errlen,
			    "cannot place %u replica%s of %s: %u node%s up, %u with room (the "
			    "most free space on a node is %s)",
			    want, want == 1 ? "" : "s", size_format(size, sz, sizeof(sz)), n,
			    n == 1 ? "" : "s", nc, size_format(most, mf, sizeof(mf)));
		free(c);
		return -ENOSPC;
	}
	qsort(c, nc, sizeof(*c), by_free);
	bool *taken = calloc(nc, sizeof(*taken));
	if (!taken) {
		free(c);
		return -ENOMEM;
	}
	unsigned got = 0;
	/* pass 1: one per zone, in the order of each zone's best node */
	for (unsigned i = 0; i < nc && got < want; i++) {
		bool seen = false;
		for (unsigned j = 0; j < got && !seen; j++)
			seen = strcmp(nodes[chosen[j]].zone, c[i].node->zone) == 0;
		if (!seen) {
			chosen[got++] = c[i].index;
			taken[i] = true;
		}
	}
	/* pass 2: the rest by free space */
	for (unsigned i = 0; i < nc && got < want; i++)
		if (!taken[i])
			chosen[got++] = c[i].index;
	free(taken);
	free(c);
	return 0;
}
