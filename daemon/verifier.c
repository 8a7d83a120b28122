/* SPDX-License-Identifier: BSD-3-Clause */
/* verifier.c -- the write verifier: the daemon's incarnation, and a cluster volume's epoch */
#include "verifier.h"

#include <stdatomic.h>

#include "cluster_gate.h"
#include "incarnation.h"

/* mix -- splitmix64's finaliser: every input bit moves every output bit */
static uint64_t mix(uint64_t v)
{
	v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ULL;
	v = (v ^ (v >> 27)) * 0x94d049bb133111ebULL;
	return v ^ (v >> 31);
}

uint64_t verifier_of(const struct gate_vol *g)
{
	uint64_t inc = incarnation_get();
	if (!g)
		return inc;
	uint64_t serving = atomic_load_explicit(&g->serving, memory_order_acquire);
	uint64_t v = inc ^ mix(serving + 0x9e3779b97f4a7c15ULL);
	return v ? v : 1;
}
