/* SPDX-License-Identifier: BSD-3-Clause */
/* frame.c -- encode, decode and check the fixed frame header */
#include "frame.h"

#include <endian.h>
#include <string.h>

#include "errors.h"

/*
 * Little-endian fields at any alignment: memcpy of a host word plus
 * htole/letoh, which compilers turn into one load or store each (this sits
 * on every request and reply).
 */
static void put_le16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static void put_le32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static uint16_t get_le16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

void frame_header_encode(const struct frame_header *h, uint8_t buf[FRAME_HEADER_SIZE])
{
	memset(buf + 24, 0, FRAME_HEADER_SIZE - 24); /* reserved */
	put_le32(buf + 0, h->magic);
	put_le16(buf + 4, h->version);
	put_le16(buf + 6, h->type);
	put_le64(buf + 8, h->request_id);
	put_le32(buf + 16, h->body_len);
	put_le32(buf + 20, h->payload_len);
}

void frame_header_decode(const uint8_t buf[FRAME_HEADER_SIZE], struct frame_header *h)
{
	h->magic = get_le32(buf + 0);
	h->version = get_le16(buf + 4);
	h->type = get_le16(buf + 6);
	h->request_id = get_le64(buf + 8);
	h->body_len = get_le32(buf + 16);
	h->payload_len = get_le32(buf + 20);
}

int frame_header_check(const struct frame_header *h, uint32_t max_body, uint32_t max_payload)
{
	if (h->magic != FRAME_MAGIC)
		return -RDAX_E_PROTOCOL;
	if (h->version != FRAME_VERSION)
		return -RDAX_E_VERSION;
	if (h->type == 0 || h->type >= FRAME_TYPE_MAX)
		return -RDAX_E_PROTOCOL;
	if (h->body_len > max_body)
		return -RDAX_E_TOO_BIG;
	if (h->payload_len > 0 && h->type != FRAME_WRITE)
		return -RDAX_E_PROTOCOL;
	if (h->payload_len > max_payload)
		return -RDAX_E_TOO_BIG;
	return 0;
}

static const char *const type_names[FRAME_TYPE_MAX] = {
	[FRAME_HELLO] = "hello",
	[FRAME_VOLUME_CREATE] = "volume-create",
	[FRAME_VOLUME_DELETE] = "volume-delete",
	[FRAME_VOLUME_LIST] = "volume-list",
	[FRAME_VOLUME_INFO] = "volume-info",
	[FRAME_VOLUME_OPEN] = "volume-open",
	[FRAME_VOLUME_CLOSE] = "volume-close",
	[FRAME_WRITE] = "write",
	[FRAME_READ] = "read",
	[FRAME_FSYNC] = "fsync",
	[FRAME_DISCARD] = "discard",
	[FRAME_STAT] = "stat",
	[FRAME_NAMESPACE_LIST] = "namespace-list",
	[FRAME_REPLICA_DIGEST] = "replica-digest",
	[FRAME_POWERCUT] = "powercut",
	[FRAME_UNSAFE_CLEAR] = "unsafe-clear",
};

const char *frame_type_name(uint16_t type)
{
	type &= (uint16_t)~FRAME_REPLY;
	if (type < FRAME_TYPE_MAX && type_names[type])
		return type_names[type];
	return "unknown";
}
