/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * resume.h -- a lost connection comes back by itself: reconnect, reopen, resend
 *
 * A connection made with rdax_conn_opts_set_resume() survives the loss of
 * its stream (the server closed or reset it, went silent for the timeout,
 * or answered that it is not the volume's primary any more):
 *
 *   conn_lose (conn.c)          every request dropped, every unfinished
 *                               operation back to its start
 *   conn_resume (here)          HELLO on a new connection, every open volume
 *                               opened again, held writes whose verifier
 *                               changed sent again, then the operations,
 *                               in their order
 *
 * Where it reconnects: first the primary a refusal named (RDAX_E_NOT_PRIMARY
 * carries its address; a volume reopened there must not report an older
 * epoch than already seen), then every address of the connection's list,
 * from the one in use, each name resolved again. Rounds are apart by a
 * backoff (50 ms doubling to 1 s, +-25 %), and the whole resume is bounded:
 * RESUME_TIMEOUT after the first loss, the connection is broken for good and
 * every operation fails with -ETIMEDOUT and a message that names the loss
 * and the last attempt's failure. A refusal no reconnect can cure (the
 * token, the protocol version) ends it at once.
 *
 * What is sent again, and why that is safe: writes carry their offset
 * (idempotent); reads and fsyncs are asked again; a control request that is
 * idempotent (open, list, info, discard, stat) is sent again with the
 * volume's new handle; a close is done (the handle died with the
 * connection); create and delete fail (-ECONNRESET and the like: their fate
 * is unknown). Writes acknowledged before the loss are the verifier's
 * business (held.h): sent again if their copy is held and the server's
 * verifier changed; an fsync over them fails with -EIO if not.
 *
 * Context: called by conn_run with the connection's thread; blocks for up
 * to the remaining resume time (connects, HELLO, opens, backoff sleeps).
 * A connection whose owner set resume_by_owner is resumed by that owner
 * instead, one round at a time (conn_resume_round), so that no loop ever
 * waits in a backoff.
 */
#ifndef RDAX_CLIENT_RESUME_H
#define RDAX_CLIENT_RESUME_H

struct rdax_conn;

/* Backoff between rounds of attempts, and the most one attempt may take. */
#define RESUME_BACKOFF_MIN_MS 50
#define RESUME_BACKOFF_MAX_MS 1000
#define RESUME_ATTEMPT_MAX_MS 2000
/* Primaries followed within one round (a failover may move it meanwhile). */
#define RESUME_MAX_HOPS 4

/*
 * conn_resume -- answer c->lost: reconnect and put the operations back on
 * the new stream (0), or give up when the bound passed or a refusal is final
 * (the connection is then broken: conn_fail; returns its code).
 */
int conn_resume(struct rdax_conn *c);

/*
 * conn_resume_round -- conn_resume for an owner that must not sleep (it runs
 * the connection from an event loop, and this call on a thread of a pool):
 * one round of attempts, no backoff sleep. Returns 0 (resumed); -EINPROGRESS
 * (not yet: the connection is still lost, with no stream, every operation
 * waiting; call again after *@retry_ms); or, once the bound passed or a
 * refusal is final, the code the connection is broken with.
 */
int conn_resume_round(struct rdax_conn *c, int *retry_ms);

#endif
