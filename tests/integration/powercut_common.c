/* SPDX-License-Identifier: BSD-3-Clause */
/* powercut_common.c -- the deterministic content of the power-cut workload */
#include "powercut_common.h"

#include "harness.h"

uint64_t pc_key(uint64_t seed, unsigned loader, uint32_t gen)
{
	uint64_t s = seed ^ ((uint64_t)loader << 56) ^ ((uint64_t)gen << 8);
	return hx_splitmix64(&s);
}

void pc_content(void *buf, size_t len, uint64_t seed, unsigned loader, uint32_t gen, uint64_t off)
{
	hx_pattern(buf, len, pc_key(seed, loader, gen), off);
}
