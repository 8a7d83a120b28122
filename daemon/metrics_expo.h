/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * metrics_expo.h -- the daemon's state in the Prometheus text format
 *
 * One function renders everything a scrape returns: the counters summed
 * over every thread (metrics.h) and what is read from the engine at that
 * moment -- namespaces (size, free space, kind, persistence method, media
 * health), volumes (dirty bytes, dirty-tree entries, bad bytes, the unsafe-
 * shutdown mark), the media guard's count of caught faults, and the replica
 * links of the volumes this node replicates as primary (repl_registry.h).
 * Names follow Prometheus' conventions: an rdax_ prefix, base units
 * (_bytes, _seconds), _total for counters; docs/metrics.md lists every
 * family with its labels.
 *
 * Thread safety: any thread; it takes each namespace's lock in turn (and
 * each volume's tree lock inside it for a moment), so it may wait behind a
 * volume being created: never call it on an event loop (metrics_http.h
 * runs it on the endpoint's own thread).
 */
#ifndef RDAXD_METRICS_EXPO_H
#define RDAXD_METRICS_EXPO_H

#include <stddef.h>

#include "store.h"

/* The Content-Type of the text format this renders. */
#define METRICS_EXPO_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* What a rendering reads besides the counters. */
struct metrics_expo_src {
	struct store *store;
	const char *version; /* rdax_build_info's label */
};

/*
 * metrics_expo_render -- the whole exposition into a malloc'd string
 * (*out, *len, NUL-terminated). Returns 0 or -ENOMEM.
 */
int metrics_expo_render(const struct metrics_expo_src *src, char **out, size_t *len);

#endif
