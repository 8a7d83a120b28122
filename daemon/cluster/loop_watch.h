/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * loop_watch.h -- a librdax connection driven from a worker's event loop
 *
 * The replica links (replica_link.h) and NBD forwarding (nbd_forward.h) run a
 * librdax connection without a thread of their own: before their loop
 * sleeps they ask librdax which descriptors it waits on (conn_poll_prepare)
 * and watch those, and reap (conn_reap with timeout 0) when one is ready.
 * This is that "before the loop sleeps" step, written once.
 *
 * Thread safety: the loop's thread only.
 */
#ifndef RDAXD_LOOP_WATCH_H
#define RDAXD_LOOP_WATCH_H

#include <stdbool.h>

#include <ev.h>

struct rdax_conn;

struct loop_watch {
	ev_io io[2];   /* the descriptors librdax waits on; callbacks set by the owner */
	bool io_on[2]; /* io[i] started */
	ev_idle *more; /* the owner's idle watcher: started when no sleep is due */
};

/*
 * loop_watch_update -- watch what @conn waits on now (starting, moving or
 * stopping io[0..1]), or, when librdax has work ready already (completions
 * that came before the arm, TLS records held, a broken connection), start
 * @w->more instead so the owner reaps before the loop sleeps.
 */
void loop_watch_update(struct loop_watch *w, struct ev_loop *loop, struct rdax_conn *conn);

/* loop_watch_stop -- stop both descriptors' watchers (the idle one is the owner's) */
void loop_watch_stop(struct loop_watch *w, struct ev_loop *loop);

#endif
