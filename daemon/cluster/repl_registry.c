/* SPDX-License-Identifier: BSD-3-Clause */
/* repl_registry.c -- which local volumes this node replicates as their primary */
#include "repl_registry.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

static struct {
	const struct volume *v;
	struct repl_volume *rv;
	bool retired; /* read with acquire: the node was deposed (repl_registry_retire) */
} entries[REPL_REGISTRY_MAX];
static unsigned count; /* entries published; read with acquire */

struct repl_volume *repl_registry_get(const struct volume *v)
{
	unsigned n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (entries[i].v == v && !__atomic_load_n(&entries[i].retired, __ATOMIC_ACQUIRE))
			return entries[i].rv;
	return NULL;
}

void repl_registry_retire(const struct volume *v)
{
	unsigned n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (entries[i].v == v)
			__atomic_store_n(&entries[i].retired, true, __ATOMIC_RELEASE);
}

int repl_registry_put(const struct volume *v, struct repl_volume *rv)
{
	if (count >= REPL_REGISTRY_MAX)
		return -ENOSPC;
	entries[count].v = v;
	entries[count].rv = rv;
	/* the entry is complete before it is counted */
	__atomic_store_n(&count, count + 1, __ATOMIC_RELEASE);
	return 0;
}

void repl_registry_each(void (*fn)(void *arg, const char *volume, struct repl_volume *rv),
			void *arg)
{
	unsigned n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (!__atomic_load_n(&entries[i].retired, __ATOMIC_ACQUIRE))
			fn(arg, entries[i].v->name, entries[i].rv);
}

void repl_registry_clear(void (*fn)(struct repl_volume *rv))
{
	unsigned n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
	__atomic_store_n(&count, 0, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < n; i++)
		if (fn)
			fn(entries[i].rv);
}
