/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * frame.h -- the fixed binary frame header of the rdax wire protocol
 *
 * Every message is: header (32 bytes, little-endian) | body | payload
 *
 *   off size field
 *    0   4   magic        "RDAX" (0x58414452 read as little-endian u32)
 *    4   2   version      FRAME_VERSION
 *    6   2   type         enum frame_type; FRAME_REPLY set on replies
 *    8   8   request_id   chosen by the client, echoed in the reply
 *   16   4   body_len     bytes of protobuf-c body that follow
 *   20   4   payload_len  bytes of raw payload after the body
 *   24   8   reserved     zero
 *
 * Limits are enforced from the header alone, before any memory is touched
 * for the body or payload (frame_header_check).
 */
#ifndef RDAX_FRAME_H
#define RDAX_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define FRAME_MAGIC 0x58414452U
#define FRAME_VERSION 1
#define FRAME_HEADER_SIZE 32
#define FRAME_REPLY 0x8000

/* Defaults; the daemon may configure max payload (>= 1 MiB). */
#define FRAME_DEFAULT_MAX_BODY (64U << 10)
#define FRAME_DEFAULT_MAX_PAYLOAD (4U << 20)
#define FRAME_MAX_PAYLOAD_LIMIT (64U << 20)

enum frame_type {
	FRAME_HELLO = 1,
	FRAME_VOLUME_CREATE,
	FRAME_VOLUME_DELETE,
	FRAME_VOLUME_LIST,
	FRAME_VOLUME_INFO,
	FRAME_VOLUME_OPEN,
	FRAME_VOLUME_CLOSE,
	FRAME_WRITE,
	FRAME_READ,
	FRAME_FSYNC,
	FRAME_DISCARD,
	FRAME_STAT,
	FRAME_NAMESPACE_LIST, /* added later: a daemon before it answers "unknown request type" */
	FRAME_REPLICA_DIGEST, /* cluster: block digests of a replica link's volume */
	FRAME_POWERCUT,	      /* rdaxd --allow-powercut only */
	FRAME_UNSAFE_CLEAR,   /* clear unsafe-shutdown marks (media_health.h) */
	FRAME_TYPE_MAX	      /* one past the last */
};

struct frame_header {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint64_t request_id;
	uint32_t body_len;
	uint32_t payload_len;
};

/* frame_header_encode -- write @h as FRAME_HEADER_SIZE bytes into @buf */
void frame_header_encode(const struct frame_header *h, uint8_t buf[FRAME_HEADER_SIZE]);

/* frame_header_decode -- parse FRAME_HEADER_SIZE bytes; performs no checks */
void frame_header_decode(const uint8_t buf[FRAME_HEADER_SIZE], struct frame_header *h);

/*
 * frame_header_check -- validate a decoded request header against the limits:
 * magic, version, known request type without the reply bit, body_len <=
 * max_body, payload only on WRITE and <= max_payload. Returns 0,
 * -RDAX_E_PROTOCOL (magic/type), -RDAX_E_VERSION, -RDAX_E_TOO_BIG.
 */
int frame_header_check(const struct frame_header *h, uint32_t max_body, uint32_t max_payload);

/* frame_type_name -- "write", "fsync", ... or "unknown" */
const char *frame_type_name(uint16_t type);

#endif
