/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * incarnation.h -- which life of the daemon this is
 *
 * A daemon's incarnation is a random 64-bit number drawn when rdaxd starts
 * and drawn again at every power cut (powercut.h): each time the daemon
 * comes back having lost what was not durable, it is a new incarnation.
 * HELLO replies carry it (HelloReply.incarnation, docs/protocol.md), so a
 * client that reconnects can tell "the same server, my unfsynced writes
 * may still be pending" from "a server that restarted or lost power since":
 * the use NFS makes of its write verifier. Random rather than counted so a
 * daemon restarted from scratch never repeats an earlier life's number
 * (2^-64 aside); never 0, which a client reads as "not sent".
 *
 * Thread safety: incarnation_get() from any thread (an atomic load);
 * incarnation_new() from the thread that owns the daemon's life cycle
 * (rdaxd's main thread), once at start and once per power cut, with no
 * request in flight that could see the change half-way.
 */
#ifndef RDAXD_INCARNATION_H
#define RDAXD_INCARNATION_H

#include <stdint.h>

/* incarnation_get -- the current incarnation; 0 before the first incarnation_new() */
uint64_t incarnation_get(void);

/*
 * incarnation_new -- draw a new incarnation (getrandom; never 0, never the
 * current one) and return it. Context: rdaxd's main thread.
 */
uint64_t incarnation_new(void);

#endif
