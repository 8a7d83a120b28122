/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vol_ack.h -- the acknowledgement of a volume's data requests, for every protocol
 *
 * The native protocol (dispatch.c), NBD (nbd_transmission.c) and RDMA's
 * write notices (rdma_conn.c) call here at the one moment that matters to
 * a client: a WRITE, DISCARD or FSYNC has done its work and its reply is
 * about to be queued. Two things happen there, in this order:
 *
 *   - the power cut's gate (powercut.h): once a cut is decided, nothing is
 *     acknowledged any more -- vol_ack_* returns false and the protocol
 *     drops the connection instead of replying;
 *   - the write log (write_recorder.h): the request is recorded, so the
 *     order of the records is the order of the acknowledgements.
 *
 * The rules of the log (common/write_log.h) and where each call sits:
 *   - a WRITE: after its bytes landed and were marked written
 *     (volume_mark_written), before its reply: vol_ack_write();
 *   - a durable WRITE (the native fsync flag, NBD FUA): the write is
 *     recorded when it landed (vol_ack_record_write), its fsync's mark is
 *     taken when the fsync starts (vol_op_start), and the fsync is
 *     acknowledged and recorded when it returned (vol_ack_fsync, flag FUA):
 *     write, mark, fsync, as the format wants;
 *   - an FSYNC or NBD FLUSH: the mark when it starts (vol_op_start), the
 *     record when it returned, before the reply: vol_ack_fsync();
 *   - a DISCARD, NBD TRIM or WRITE_ZEROES: when volume_discard returned
 *     (zeros written back and fenced): vol_ack_discard(), flag DURABLE;
 *   - an RDMA one-sided write: the daemon acknowledges nothing (the
 *     client's NIC completes it); it is recorded when the daemon handles
 *     its write notice (vol_ack_record_write), which for one connection is
 *     in the order the client posted its writes and messages, so before
 *     any FSYNC the client sent after it. The record holds the whole pages
 *     the notice names, as they are in the mapping at that moment
 *     (docs/persistence-testing.md says what that means for the model).
 * Requests that fail are neither acknowledged nor recorded.
 *
 * Thread safety: any thread; the volume is held open by the caller.
 */
#ifndef RDAXD_VOL_ACK_H
#define RDAXD_VOL_ACK_H

#include <stdbool.h>
#include <stdint.h>

#include "volume.h"

/*
 * vol_ack_write -- may the WRITE of [off, off + len) be acknowledged? Then
 * it is recorded. False: a power cut is decided, drop the connection.
 */
bool vol_ack_write(struct volume *v, uint64_t off, uint64_t len);

/*
 * vol_ack_record_write -- record the write of [off, off + len) whose
 * acknowledgement comes later (a durable write, after its fsync) or never
 * (an RDMA one-sided write); nothing once a power cut is decided
 */
void vol_ack_record_write(struct volume *v, uint64_t off, uint64_t len);

/* vol_ack_fsync_mark -- the log's mark for an fsync of @v about to start (vol_op_start) */
uint64_t vol_ack_fsync_mark(struct volume *v);

/*
 * vol_ack_fsync -- may the fsync of [off, off + len) (0: to the end) whose
 * mark was @mark be acknowledged? Then it is recorded with @flags
 * (WLOG_FSYNC_*). False: drop the connection.
 */
bool vol_ack_fsync(struct volume *v, uint64_t mark, uint64_t off, uint64_t len, unsigned flags);

/*
 * vol_ack_discard -- may the discard of [off, off + len) be acknowledged?
 * Then it is recorded with @flags (WLOG_DISCARD_*). False: drop the connection.
 */
bool vol_ack_discard(struct volume *v, uint64_t off, uint64_t len, unsigned flags);

#endif
