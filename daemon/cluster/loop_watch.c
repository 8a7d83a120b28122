/* SPDX-License-Identifier: BSD-3-Clause */
/* loop_watch.c -- a librdax connection driven from a worker's event loop (loop_watch.h) */
#include "loop_watch.h"

#include <poll.h>

#include "../../client/conn.h" /* conn_poll_prepare: librdax's own, for owners with a loop */

void loop_watch_update(struct loop_watch *w, struct ev_loop *loop, struct rdax_conn *conn)
{
	struct pollfd fds[2];
	int n = conn_poll_prepare(conn, fds);
	if (n == 0) {
		ev_idle_start(loop, w->more); /* ready already: reap before sleeping */
		return;
	}
	ev_idle_stop(loop, w->more);
	for (int i = 0; i < 2; i++) {
		int events = i < n ? ((fds[i].events & POLLIN ? EV_READ : 0) |
				      (fds[i].events & POLLOUT ? EV_WRITE : 0))
				   : 0;
		if (w->io_on[i] &&
		    (i >= n || w->io[i].fd != fds[i].fd || w->io[i].events != events)) {
			ev_io_stop(loop, &w->io[i]);
			w->io_on[i] = false;
		}
		if (i < n && !w->io_on[i]) {
			ev_io_set(&w->io[i], fds[i].fd, events);
			ev_io_start(loop, &w->io[i]);
			w->io_on[i] = true;
		}
	}
}

void loop_watch_stop(struct loop_watch *w, struct ev_loop *loop)
{
	for (int i = 0; i < 2; i++)
		if (w->io_on[i]) {
			ev_io_stop(loop, &w->io[i]);
			w->io_on[i] = false;
		}
}
