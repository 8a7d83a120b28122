/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_proto.h -- what the RDMA transport adds to the rdax protocol (docs/rdma.md)
 *
 * Over RDMA the frames of the TCP protocol (frame.h + proto/rdax.proto) are
 * the same; only the way bytes move changes:
 *
 *  - Control stream: SEND/RECV messages. Each direction is one byte stream,
 *    cut into messages of at most the negotiated message size; a frame may
 *    span messages and a message may hold several frames (a receiver just
 *    concatenates message payloads in arrival order, RC keeps the order).
 *    Every SEND is a SEND_WITH_IMM whose immediate value is a credit grant
 *    (below); a message of length 0 carries only a grant.
 *
 *  - Data: the client writes into a volume with one-sided RDMA
 *    WRITE_WITH_IMM through the rkey of its VOLUME_OPEN reply; the immediate
 *    value is a write notice (below) and the completion's byte_len the
 *    length, so the daemon marks the range dirty when it processes that
 *    receive completion -- before any later SEND of the same QP. A durable
 *    notice also stands for an FSYNC request of its range (below). Reads
 *    are one-sided RDMA READs through the same rkey.
 *
 * Connection set-up: rdma_cm private data, struct rdma_cm_data, sent by the
 * client in rdma_connect and answered by the daemon in rdma_accept.
 *
 * Everything here is header-only and verbs-free, so it is unit-tested on
 * machines without RDMA (tests/unit/test_rdma_proto.c).
 */
#ifndef RDAX_RDMA_PROTO_H
#define RDAX_RDMA_PROTO_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "checked.h"

/* ---- connection private data ---- */

#define RDMA_CM_MAGIC	  0x52584452U /* "RDXR" read as little-endian u32 */
#define RDMA_CM_VERSION	  1
#define RDMA_CM_DATA_SIZE 16

/*
 * Layout (little-endian):
 *
 *   off size field
 *    0   4   magic     RDMA_CM_MAGIC
 *    4   2   version   RDMA_CM_VERSION
 *    6   2   credits   receives the sender keeps posted for the peer's
 *                      messages: the peer's send window (RDMA_CREDITS_*)
 *    8   4   msg_size  largest message the sender receives, in bytes
 *   12   4   reserved  zero
 */
struct rdma_cm_data {
	uint32_t magic;
	uint16_t version;
	uint16_t credits;
	uint32_t msg_size;
};

/* Messages are at least this long (a frame header plus a small body) and at most one MTU. */
#define RDMA_MSG_MIN 256U
#define RDMA_MSG_MAX 4096U
/*
 * Messages up to this long are sent inline (IBV_SEND_INLINE): the bytes go
 * in the work request itself, so the device (soft-RoCE: the kernel) does not
 * fetch them from a registered buffer -- a request or reply without payload,
 * as perftest sends its small messages. A device that cannot gets none.
 */
#define RDMA_INLINE_MAX 256U
/* A window of at least 4: a grant-only message then returns >= 2, enough for one data message. */
#define RDMA_CREDITS_MIN 4U
#define RDMA_CREDITS_MAX 1024U

static inline void rdma_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void rdma_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t rdma_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t rdma_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* rdma_cm_data_encode -- @d as RDMA_CM_DATA_SIZE bytes */
static inline void rdma_cm_data_encode(const struct rdma_cm_data *d, uint8_t buf[RDMA_CM_DATA_SIZE])
{
	rdma_put32(buf, d->magic);
	rdma_put16(buf + 4, d->version);
	rdma_put16(buf + 6, d->credits);
	rdma_put32(buf + 8, d->msg_size);
	rdma_put32(buf + 12, 0);
}

/*
 * rdma_cm_data_decode -- parse and check the private data of a connect or
 * accept (@len bytes; the CM may pad it). Returns 0, -EPROTO (too short,
 * wrong magic, message size or credits out of range) or -EPROTONOSUPPORT
 * (another version).
 */
static inline int rdma_cm_data_decode(const void *buf, uint32_t len, struct rdma_cm_data *d)
{
	const uint8_t *p = buf;
	if (!p || len < RDMA_CM_DATA_SIZE)
		return -EPROTO;
	d->magic = rdma_get32(p);
	d->version = rdma_get16(p + 4);
	d->credits = rdma_get16(p + 6);
	d->msg_size = rdma_get32(p + 8);
	if (d->magic != RDMA_CM_MAGIC)
		return -EPROTO;
	if (d->version != RDMA_CM_VERSION)
		return -EPROTONOSUPPORT;
	if (d->msg_size < RDMA_MSG_MIN || d->credits < RDMA_CREDITS_MIN ||
	    d->credits > RDMA_CREDITS_MAX)
		return -EPROTO;
	return 0;
}

/*
 * A refusal: the private data of rdma_reject when the daemon refuses a
 * connection it could serve otherwise (a connection limit), so the client
 * can say why instead of "refused":
 *
 *  off size
 *    0   4   magic     RDMA_REJECT_MAGIC
 *    4   4   code      a positive errno (EUSERS)
 *    8  120  reason    text for humans, NUL-terminated (cut to fit)
 *
 * 128 bytes fit the 148 an InfiniBand/RoCE REJ carries.
 */
#define RDMA_REJECT_MAGIC      0x4a455852U /* "RXEJ" read as little-endian u32 */
#define RDMA_REJECT_SIZE       128
#define RDMA_REJECT_REASON_MAX (RDMA_REJECT_SIZE - 8)

/* rdma_reject_encode -- a refusal with @code and @reason into @buf */
static inline void rdma_reject_encode(uint8_t buf[RDMA_REJECT_SIZE], uint32_t code,
				      const char *reason)
{
	rdma_put32(buf, RDMA_REJECT_MAGIC);
	rdma_put32(buf + 4, code);
	size_t i = 0;
	for (; reason && reason[i] && i + 1 < RDMA_REJECT_REASON_MAX; i++)
		buf[8 + i] = (uint8_t)reason[i];
	for (; i < RDMA_REJECT_REASON_MAX; i++)
		buf[8 + i] = 0;
}

/*
 * rdma_reject_decode -- a refusal in @len bytes of private data: its code
 * (> 0) with the reason copied into @reason (printable bytes only), or 0
 * when it is none (any other rejection).
 */
static inline uint32_t rdma_reject_decode(const void *buf, uint32_t len, char *reason,
					  size_t reason_len)
{
	const uint8_t *p = buf;
	if (!p || len < RDMA_REJECT_SIZE || rdma_get32(p) != RDMA_REJECT_MAGIC || !reason_len)
		return 0;
	size_t i = 0;
	for (; i < RDMA_REJECT_REASON_MAX && p[8 + i] && i + 1 < reason_len; i++)
		reason[i] = p[8 + i] >= 0x20 && p[8 + i] < 0x7f ? (char)p[8 + i] : '?';
	reason[i] = '\0';
	return rdma_get32(p + 4);
}

/* ---- credits: who may send how many messages ---- */

/*
 * Each side posts `window` receives for the other and tells it so in the
 * private data; every SEND and every WRITE_WITH_IMM consumes one of them.
 * The receiver counts receives it has consumed and made ready again (owed)
 * and grants them back in the immediate value of its next SEND.
 *
 * Deadlock freedom: a message that carries data (frame bytes, or a write
 * notice) needs 2 credits -- the last credit is reserved for a grant-only
 * message (length 0), which is sent when owed >= ceil(window / 2) and never
 * with nothing to grant; windows are >= 4, so a grant-only message returns
 * at least 2, enough for the receiver to send data. With `avail + in flight
 * + unreturned = window` for each direction, a side that cannot send data
 * (avail < 2) has its peer owing it at least window - 1 >= ceil(window / 2)
 * once the messages in flight are handled, and the peer either has the
 * reserved credit for the grant or spent it on a grant-only message, which
 * made the first side able to send data and grant back in turn.
 *
 * A receiver may hold back the grants of messages that carry frame bytes,
 * and of durable write notices (each stands for a request), while it cannot
 * take more requests (backpressure: that bounds what it buffers), but must
 * never hold back those of grant-only messages and plain write notices:
 * they cost it nothing, and the argument above needs them.
 */
struct rdma_credits {
	uint32_t send_window;	  /* the peer's receives for our messages (its private data) */
	uint32_t send_avail;	  /* messages we may still post */
	uint32_t recv_window;	  /* our receives for the peer's messages (our private data) */
	uint32_t recv_unreturned; /* the peer's messages received, not yet granted back */
	uint32_t recv_owed;	  /* of those, handled: their receives may be granted back */
};

/* rdma_credits_init -- @send_window from the peer's private data, @recv_window from ours */
static inline void rdma_credits_init(struct rdma_credits *c, uint32_t send_window,
				     uint32_t recv_window)
{
	c->send_window = send_window;
	c->send_avail = send_window;
	c->recv_window = recv_window;
	c->recv_unreturned = 0;
	c->recv_owed = 0;
}

/* rdma_credits_can_send -- may a data message (or a write notice) be posted now? */
static inline bool rdma_credits_can_send(const struct rdma_credits *c)
{
	return c->send_avail >= 2;
}

/* rdma_credits_grant_due -- should a grant-only message go out now? */
static inline bool rdma_credits_grant_due(const struct rdma_credits *c)
{
	return c->send_avail >= 1 && c->recv_owed > 0 && c->recv_owed >= (c->recv_window + 1) / 2;
}

/*
 * rdma_credits_send -- account one SEND (or write notice, @grant false: it
 * has no room for a grant); returns the grant the SEND carries: everything owed
 */
static inline uint32_t rdma_credits_send(struct rdma_credits *c, bool grant)
{
	uint32_t g = grant ? c->recv_owed : 0;
	c->send_avail--;
	c->recv_owed -= g;
	c->recv_unreturned -= g;
	return g;
}

/*
 * rdma_credits_received -- a message or write notice of the peer arrived,
 * carrying @grant credits (0 for a notice). Returns 0, or -EPROTO when the
 * peer broke the rules: it sent beyond our window, or granted back more
 * than we had used.
 */
static inline int rdma_credits_received(struct rdma_credits *c, uint32_t grant)
{
	if (c->recv_unreturned >= c->recv_window)
		return -EPROTO;
	if (grant > c->send_window - c->send_avail)
		return -EPROTO;
	c->recv_unreturned++;
	c->send_avail += grant;
	return 0;
}

/* rdma_credits_handled -- @n of the peer's messages are handled: their receives may go back */
static inline void rdma_credits_handled(struct rdma_credits *c, uint32_t n)
{
	c->recv_owed += n;
}

/* ---- write notices: the immediate value of a WRITE_WITH_IMM ---- */

/*
 * Each volume opened over RDMA gets a range of units in its connection's
 * notice space (2^30 units per connection, first fit); a unit is a 64-byte
 * line or a 4 KiB page, chosen per volume at its open:
 * VolumeOpenReply.imm_volume_id is the first unit of the range and
 * imm_unit_shift the unit (6: lines, 12 or absent: pages). A write of
 * byte_len bytes at volume offset `off` carries
 *
 *    31  30  29                                                   0
 *   | X | D |  imm_volume_id + (off >> shift)  (unit in the space)  |
 *
 * X is set when the write touches one unit more than
 * ceil(byte_len / unit) (it starts inside a unit and ends past a unit
 * boundary that an aligned write of that length would not cross). The
 * daemon marks the units [unit, unit + ceil(byte_len / unit) + X) of the
 * volume -- exactly the units the write touched. The notice does not say
 * where in its first unit the write starts, so lines are the finest the
 * daemon can track, and the dirty tree's granularity too.
 *
 * D (a durable notice) asks the daemon to make those units durable and
 * answer as it answers an FSYNC request of them: with an FsyncReply whose
 * request_id is rdma_durable_reply_id(n), n counting the connection's
 * durable notices from 0 (RC delivers them in order, so both sides count
 * alike). A durable write is then one work request and one reply, where
 * the write and an FSYNC request were two. The daemon offers D per volume
 * (VolumeOpenReply.imm_durable); a client sets it only where offered.
 *
 * Lines are given only to a client that asks (VolumeOpenRequest.
 * imm_line_units) and only for volumes of at most RDMA_IMM_LINE_VOLUME_MAX
 * bytes (2^28 lines, a quarter of the space, so at least four such volumes
 * fit one connection); other volumes and old clients get pages, 2^30 of
 * which are 4 TiB per connection. (Before D the space had 2^31 units; a
 * client still encodes 31 bits, so it works with a daemon of then, which
 * never offers D.)
 */
#define RDMA_IMM_UNIT_BITS	 30
#define RDMA_IMM_SPACE_UNITS	 (1ULL << RDMA_IMM_UNIT_BITS)
#define RDMA_IMM_EXTRA		 (1U << 31)
#define RDMA_IMM_DURABLE	 (1U << RDMA_IMM_UNIT_BITS)
#define RDMA_IMM_UNIT_MASK	 (RDMA_IMM_DURABLE - 1)
#define RDMA_IMM_SHIFT_LINE	 6
#define RDMA_IMM_SHIFT_PAGE	 RDAX_PAGE_SHIFT
#define RDMA_IMM_LINE_VOLUME_MAX (1ULL << (28 + RDMA_IMM_SHIFT_LINE)) /* 16 GiB */

/*
 * The request ids of durable notices' replies: the top bit set, which no
 * client request id reaches (clients count theirs up from 1).
 */
#define RDMA_DURABLE_REPLY_ID_BIT (1ULL << 63)

/* rdma_durable_reply_id -- the request_id of the reply to durable notice @n of a connection */
static inline uint64_t rdma_durable_reply_id(uint64_t n)
{
	return RDMA_DURABLE_REPLY_ID_BIT | n;
}

/* rdma_imm_durable -- does the notice ask for durability (D)? */
static inline bool rdma_imm_durable(uint32_t imm)
{
	return (imm & RDMA_IMM_DURABLE) != 0;
}

/* rdma_imm_shift_valid -- is @shift a unit a notice range may have? */
static inline bool rdma_imm_shift_valid(uint32_t shift)
{
	return shift == RDMA_IMM_SHIFT_LINE || shift == RDMA_IMM_SHIFT_PAGE;
}

/*
 * rdma_imm_encode -- the notice of a write of @len (> 0) bytes at @off of a
 * volume whose notice range starts at @base, in units of 1 << @shift bytes.
 * The caller checked that the write lies inside the volume, and the volume
 * inside the space.
 */
static inline uint32_t rdma_imm_encode(uint32_t base, uint32_t shift, uint64_t off, uint32_t len)
{
	uint64_t first = off >> shift;
	uint64_t last = (off + len - 1) >> shift;
	uint64_t plain = ((uint64_t)len + (1ULL << shift) - 1) >> shift;
	uint32_t extra = last - first + 1 > plain ? RDMA_IMM_EXTRA : 0;
	/* 31 bits: a daemon from before D placed ranges in 2^31 units (the caller sets D) */
	return extra | (uint32_t)((base + first) & (RDMA_IMM_EXTRA - 1));
}

/* rdma_imm_unit -- the first unit a notice names, in the notice space */
static inline uint64_t rdma_imm_unit(uint32_t imm)
{
	return imm & RDMA_IMM_UNIT_MASK;
}

/*
 * rdma_imm_decode -- the units of 1 << @shift bytes a notice covers: *unit
 * (in the notice space) and *nunits (0 for byte_len 0, which marks nothing).
 */
static inline void rdma_imm_decode(uint32_t imm, uint32_t byte_len, uint32_t shift, uint64_t *unit,
				   uint64_t *nunits)
{
	*unit = rdma_imm_unit(imm);
	if (byte_len == 0) {
		*nunits = 0;
		return;
	}
	*nunits = (((uint64_t)byte_len + (1ULL << shift) - 1) >> shift) +
		  ((imm & RDMA_IMM_EXTRA) ? 1 : 0);
}

#endif
