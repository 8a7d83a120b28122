/* SPDX-License-Identifier: BSD-3-Clause */
/* linger.c -- shut the write side, drop what still arrives, close on EOF or timeout */
#include "linger.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "faults.h"
#include "log.h"

struct lingering {
	struct linger_set *ls;
	struct lingering *prev, *next;
	int fd;
	ev_io io;
	ev_tstamp deadline;
	struct conn_slot slot;
};

/* linger_end -- close the socket, give back its slot, free the record */
static void linger_end(struct lingering *lg)
{
	struct linger_set *ls = lg->ls;
	ev_io_stop(ls->loop, &lg->io);
	close(lg->fd);
	conn_limit_give(&lg->slot);
	if (lg->prev)
		lg->prev->next = lg->next;
	else
		ls->head = lg->next;
	if (lg->next)
		lg->next->prev = lg->prev;
	else
		ls->tail = lg->prev;
	ls->count--;
	free(lg);
	if (ls->count == 0) {
		ev_timer_stop(ls->loop, &ls->timer);
		if (ls->on_empty)
			ls->on_empty(ls->arg);
	}
}

/* timer_arm -- the set's one timer at the oldest record's deadline */
static void timer_arm(struct linger_set *ls)
{
	ev_timer_stop(ls->loop, &ls->timer);
	if (!ls->head)
		return;
	ev_tstamp in = ls->head->deadline - ev_now(ls->loop);
	ev_timer_set(&ls->timer, in > 0 ? in : 0., 0.);
	ev_timer_start(ls->loop, &ls->timer);
}

/* on_timer -- every record past its deadline is closed (a reset, if input still comes) */
static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct linger_set *ls = t->data;
	ev_tstamp now = ev_now(loop);
	while (ls->head && ls->head->deadline <= now) {
		ls->cut++;
		linger_end(ls->head);
	}
	timer_arm(ls);
}

/* on_read -- drop what arrived; the peer's end of file (or an error) ends the linger */
static void on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct lingering *lg = w->data;
	static char sink[16384];
	size_t got = 0;
	while (got < LINGER_READ_MAX) {
		ssize_t n = recv(lg->fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return; /* more later, or the timeout */
		/* 0: the peer closed too; < 0: it is gone. (The timer may fire for it: harmless.)
		 */
		linger_end(lg);
		return;
	}
}

void linger_set_init(struct linger_set *ls, struct ev_loop *loop, void (*on_empty)(void *arg),
		     void *arg)
{
	*ls = (struct linger_set){.loop = loop, .on_empty = on_empty, .arg = arg};
	ev_timer_init(&ls->timer, on_timer, LINGER_TIMEOUT, 0.);
	ls->timer.data = ls;
}

void linger_socket(struct linger_set *ls, int fd, struct conn_slot *slot)
{
	struct lingering *lg = NULL;
	if (!rdax_faults.linger_off && ls->count < LINGER_MAX)
		lg = calloc(1, sizeof(*lg));
	if (!lg || shutdown(fd, SHUT_WR) < 0) {
		/* not lingering: the old close, a reset if input is unread */
		free(lg);
		close(fd);
		conn_limit_give(slot);
		return;
	}
	lg->ls = ls;
	lg->fd = fd;
	if (slot) {
		lg->slot = *slot;
		slot->cl = NULL; /* the record holds it now */
	}
	lg->deadline = ev_now(ls->loop) + LINGER_TIMEOUT;
	lg->prev = ls->tail;
	if (ls->tail)
		ls->tail->next = lg;
	else
		ls->head = lg;
	ls->tail = lg;
	ls->count++;
	ls->lingered++;
	ev_io_init(&lg->io, on_read, fd, EV_READ);
	lg->io.data = lg;
	ev_io_start(ls->loop, &lg->io);
	if (!ev_is_active(&ls->timer))
		timer_arm(ls);
}

void linger_set_close_all(struct linger_set *ls)
{
	while (ls->head)
		linger_end(ls->head);
}
