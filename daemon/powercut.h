/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * powercut.h -- power cuts on demand: rdaxd --allow-powercut, rdax powercut
 *
 * A power cut is what a power failure of the daemon's machine would leave,
 * done inside the running process (docs/persistence-testing.md):
 *
 *   1. the gate closes: from this moment no WRITE, DISCARD or FSYNC of any
 *      connection or transport is acknowledged any more, no write or fsync
 *      is recorded in a write log, and no fsync or discard starts
 *      (vol_ack.h, vol_op.c) -- the cut happens here;
 *   2. every connection of every transport fails at once (conn.h,
 *      conn_sets_cut_wait): queued replies are dropped, sockets closed,
 *      RDMA queue pairs destroyed and their memory windows revoked. The cut
 *      waits until each connection's jobs are back from the pools and its
 *      volumes are closed (the teardown), so no thread uses a volume or
 *      the mapping any more; new connections wait in the listen backlog;
 *   3. the RDMA registrations of the namespaces are dropped (they pin the
 *      old mapping's pages), every namespace is cut (store_power_cut: the
 *      private mapping and the dirty trees go, nothing is written back,
 *      the file -- what was flushed -- is mapped afresh, the metadata
 *      loaded from it), and the namespaces are registered again;
 *   4. a new incarnation is drawn (incarnation.h), the gate opens and the
 *      daemon serves again, the same process on the same addresses.
 *
 * Step 1 is what makes a cut exact: a request that completes after the
 * gate closed is not acknowledged (its connection is dropped instead), so
 * every acknowledgement a client received came before the cut, and every
 * fsync and discard that was acknowledged had written back before its
 * acknowledgement. Writes whose stores are in the private mapping and not
 * written back are gone; an fsync that was running when the gate closed
 * may have written back part of its range (a real cut during a write-back
 * leaves the same), without being acknowledged.
 *
 * When: at once, after the Nth acknowledged WRITE, DISCARD or FSYNC from
 * the arming (@after: counted at the gate, over every connection and
 * transport; the Nth is acknowledged, the (N+1)th is not), or after a
 * delay; with both, whichever comes first. One cut may be armed at a time.
 * RDMA one-sided writes are not acknowledged by the daemon (the NIC
 * completes them) and are not counted.
 *
 * Only a daemon whose every namespace is in sim mode may cut
 * (--allow-powercut is refused otherwise, at start): only there is the
 * durable image a file the daemon can map again, and a real namespace
 * cannot lose its CPU caches on demand.
 *
 * Thread safety: powercut_ack_take(), powercut_pending(), powercut_arm(),
 * powercut_allowed() from any thread (the gate is one atomic word: an open
 * gate costs one load per acknowledgement). powercut_setup() and
 * powercut_shutdown() on the main thread; the cut itself runs there, in
 * the accept loop (which accepts nothing meanwhile).
 */
#ifndef RDAXD_POWERCUT_H
#define RDAXD_POWERCUT_H

#include <stdbool.h>
#include <stdint.h>

#include <ev.h>

#include "conn.h"
#include "store.h"

struct server_rdma;

/* The longest --delay of a power cut: a day, in milliseconds. */
#define POWERCUT_MAX_DELAY_MS (24U * 3600U * 1000U)

/* What a cut works on: the daemon's parts (rdaxd.c). */
struct powercut_parts {
	struct ev_loop *loop;	  /* the accept loop, where the cut runs */
	struct store *store;	  /* every namespace: all in sim mode */
	struct conn_sets *sets;	  /* every worker's connections */
	struct server_rdma *rdma; /* NULL without an rdma:// listener */
	/* after a cut, serving again as @incarnation (rdaxd prints and notifies); may be NULL */
	void (*served)(void *arg, uint64_t incarnation, uint64_t cuts);
	void *arg;
};

/*
 * powercut_setup -- allow power cuts of the daemon made of @parts (copied):
 * arms the accept loop's watchers. Context: the main thread, before the
 * listeners accept. Returns 0 or -EINVAL.
 */
int powercut_setup(const struct powercut_parts *parts);

/* powercut_shutdown -- stop the watchers (a cut armed and not done is dropped); idempotent */
void powercut_shutdown(void);

/* powercut_allowed -- was powercut_setup() called (rdaxd --allow-powercut)? */
bool powercut_allowed(void);

/*
 * powercut_failed -- a cut could not bring the namespaces back (logged):
 * the daemon left its loop and must exit non-zero. Context: main thread.
 */
bool powercut_failed(void);

/*
 * powercut_arm -- cut after @after more acknowledged requests (0: not by
 * count), after @delay_ms milliseconds (0: not by time), at once when both
 * are 0; whichever comes first. *@incarnation (may be NULL) gets the
 * incarnation the cut will end. @why gets one line on failure.
 * Context: any thread (a connection's loop). Returns 0; -EPERM (power cuts
 * not allowed), -EBUSY (one is armed or running), -EINVAL (@delay_ms over
 * POWERCUT_MAX_DELAY_MS).
 */
int powercut_arm(uint64_t after, uint32_t delay_ms, uint64_t *incarnation, char *why,
		 size_t whylen);

/*
 * powercut_ack_take -- may a WRITE, DISCARD or FSYNC be acknowledged now?
 * True: yes (and it is counted towards an armed --after); false: the gate
 * is closed -- the caller drops the connection instead of replying.
 * Context: any thread, right before the reply is queued.
 */
bool powercut_ack_take(void);

/* powercut_pending -- is the gate closed (a cut decided, not yet done)? Context: any thread. */
bool powercut_pending(void);

/* powercut_count -- cuts done since the daemon started */
uint64_t powercut_count(void);

#endif
