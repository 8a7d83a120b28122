/* SPDX-License-Identifier: BSD-3-Clause */
/* repl_registry.c -- which local volumes this node replicates as their primary */
#include "repl_registry.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * A slot is live (v, rv, !retired), retired (deposed: v and rv kept, found
 * by nobody) or free (retired, rv NULL: removed, reusable). v and rv are
 * written while the slot is retired and read after an acquire of !retired,
 * so a reader that finds a slot live sees the v and rv it was made live with.
 */
static struct {
	const struct volume *v;
	struct repl_volume *rv;
	bool retired; /* read with acquire */
} entries[REPL_REGISTRY_MAX];
static unsigned count; /* entries published; read with acquire */
/* repl_registry_each() against repl_registry_remove(): a walker's rv stays until it is done */
static pthread_mutex_t each_lock = PTHREAD_MUTEX_INITIALIZER;

struct repl_volume *repl_registry_get(const struct volume *v)
{
	unsigned n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (__atomic_load_n(&entries[i].v, __ATOMIC_RELAXED) == v &&
		    !__atomic_load_n(&entries[i].retired, __ATOMIC_ACQUIRE))
			return __atomic_load_n(&entries[i].rv, __ATOMIC_RELAXED);
	return NULL;
}

void repl_registry_retire(const struct volume *v)
{
	unsigned n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (entries[i].v == v)
			__atomic_store_n(&entries[i].retired, true, __ATOMIC_RELEASE);
}

void repl_registry_remove(const struct volume *v)
{
	pthread_mutex_lock(&each_lock);
	for (unsigned i = 0; i < count; i++)
		if (entries[i].v == v) {
			__atomic_store_n(&entries[i].retired, true, __ATOMIC_RELEASE);
			__atomic_store_n(&entries[i].rv, NULL, __ATOMIC_RELAXED);
		}
	pthread_mutex_unlock(&each_lock);
}

int repl_registry_put(const struct volume *v, struct repl_volume *rv)
{
	for (unsigned i = 0; i < count; i++)
		if (entries[i].retired && !entries[i].rv) {
			/* a removed slot: filled while retired, then made live */
			__atomic_store_n(&entries[i].rv, rv, __ATOMIC_RELAXED);
			__atomic_store_n(&entries[i].v, v, __ATOMIC_RELAXED);
			__atomic_store_n(&entries[i].retired, false, __ATOMIC_RELEASE);
			return 0;
		}
	if (count >= REPL_REGISTRY_MAX)
		return -ENOSPC;
	entries[count].v = v;
	entries[count].rv = rv;
	entries[count].retired = false;
	/* the entry is complete before it is counted */
	__atomic_store_n(&count, count + 1, __ATOMIC_RELEASE);
	return 0;
}

void repl_registry_each(void (*fn)(void *arg, const char *volume, struct repl_volume *rv),
			void *arg)
{
	pthread_mutex_lock(&each_lock);
	unsigned n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (!__atomic_load_n(&entries[i].retired, __ATOMIC_ACQUIRE))
			fn(arg, entries[i].v->name, entries[i].rv);
	pthread_mutex_unlock(&each_lock);
}

void repl_registry_clear(void (*fn)(struct repl_volume *rv))
{
	unsigned n = __atomic_load_n(&count, __ATOMIC_ACQUIRE);
	__atomic_store_n(&count, 0, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < n; i++)
		if (fn && entries[i].rv)
			fn(entries[i].rv);
}
