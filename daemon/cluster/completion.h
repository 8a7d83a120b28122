/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * completion.h -- wait on one thread for a result another thread delivers
 *
 * The replication callbacks (replica_link.h, repl_volume.h) complete on a
 * link's home loop; a caller that must block until then (the resync's own
 * fsync, a test, the benchmark) embeds a struct completion next to its
 * waiter and waits on it.
 *
 * Thread safety: completion_complete() from any thread, once;
 * completion_wait() from one.
 */
#ifndef RDAXD_COMPLETION_H
#define RDAXD_COMPLETION_H

#include <pthread.h>
#include <stdbool.h>

struct completion {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int status;
};

/* completion_init -- not done */
void completion_init(struct completion *c);

/* completion_complete -- done with @status; wakes the waiter */
void completion_complete(struct completion *c, int status);

/*
 * completion_wait -- until done or @timeout_ms pass (-1: no limit).
 * Returns true when done (*status, may be NULL, gets its status).
 */
bool completion_wait(struct completion *c, int timeout_ms, int *status);

/* completion_destroy -- after the last complete and wait */
void completion_destroy(struct completion *c);

#endif
