/* SPDX-License-Identifier: BSD-3-Clause */
/* nbd_proto.c -- NBD message encoding, decoding and request validation */
#include "nbd_proto.h"

#include <errno.h>
#include <string.h>

#include "errors.h"

/* ---- big-endian helpers ---- */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* ---- handshake ---- */

void nbd_greeting_encode(uint8_t buf[NBD_GREETING_SIZE])
{
	put64(buf, NBD_MAGIC);
	put64(buf + 8, NBD_OPTS_MAGIC);
	put16(buf + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
}

int nbd_client_flags_check(uint32_t flags)
{
	return (flags & ~(uint32_t)(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) ? -EPROTO
										       : 0;
}

void nbd_opt_header_decode(const uint8_t buf[NBD_OPT_HEADER_SIZE], struct nbd_opt_header *h)
{
	h->magic = get64(buf);
	h->option = get32(buf + 8);
	h->len = get32(buf + 12);
}

void nbd_opt_header_encode(uint8_t buf[NBD_OPT_HEADER_SIZE], uint32_t option, uint32_t len)
{
	put64(buf, NBD_OPTS_MAGIC);
	put32(buf + 8, option);
	put32(buf + 12, len);
}

void nbd_opt_reply_encode(uint8_t buf[NBD_OPT_REPLY_HEADER_SIZE], uint32_t option, uint32_t type,
			  uint32_t len)
{
	put64(buf, NBD_REP_MAGIC);
	put32(buf + 8, option);
	put32(buf + 12, type);
	put32(buf + 16, len);
}

int nbd_opt_go_parse(const uint8_t *data, uint32_t len, struct nbd_opt_go *out, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	if (!out || (!data && len)) {
		*why = "no option data";
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	/* name length (4) + request count (2) at least */
	if (len < 6) {
		*why = "option data shorter than 6 bytes";
		return -EINVAL;
	}
	uint32_t name_len = get32(data);
	if (name_len > len - 6) {
		*why = "name length runs past the option data";
		return -EINVAL;
	}
	if (name_len > NBD_STRING_MAX) {
		*why = "export name longer than 4096 bytes";
		return -EINVAL;
	}
	const uint8_t *p = data + 4 + name_len;
	uint16_t nreqs = get16(p);
	p += 2;
	/* 4 + name_len + 2 <= len was checked; the requests must fill the rest exactly */
	uint32_t rest = len - 6 - name_len;
	if (rest != 2U * nreqs) {
		*why = "number of information requests does not match the option length";
		return -EINVAL;
	}
	out->name = (const char *)(data + 4);
	out->name_len = name_len;
	out->nreqs = nreqs;
	for (uint16_t i = 0; i < nreqs; i++, p += 2) {
		switch (get16(p)) {
		case NBD_INFO_NAME:
			out->want_name = true;
			break;
		case NBD_INFO_DESCRIPTION:
			out->want_description = true;
			break;
		case NBD_INFO_BLOCK_SIZE:
			out->want_block_size = true;
			break;
		default: /* NBD_INFO_EXPORT is always sent; unknown ones are ignored */
			break;
		}
	}
	return 0;
}

size_t nbd_export_name_reply_encode(uint8_t buf[NBD_EXPORT_NAME_REPLY_SIZE], uint64_t size,
				    uint16_t flags, bool no_zeroes)
{
	put64(buf, size);
	put16(buf + 8, flags);
	if (no_zeroes)
		return 10;
	memset(buf + 10, 0, NBD_EXPORT_NAME_REPLY_SIZE - 10);
	return NBD_EXPORT_NAME_REPLY_SIZE;
}

size_t nbd_info_export_encode(uint8_t buf[12], uint64_t size, uint16_t flags)
{
	put16(buf, NBD_INFO_EXPORT);
	put64(buf + 2, size);
	put16(buf + 10, flags);
	return 12;
}

size_t nbd_info_block_size_encode(uint8_t buf[14], uint32_t minimum, uint32_t preferred,
				  uint32_t maximum)
{
	put16(buf, NBD_INFO_BLOCK_SIZE);
	put32(buf + 2, minimum);
	put32(buf + 6, preferred);
	put32(buf + 10, maximum);
	return 14;
}

size_t nbd_info_string_encode(uint8_t *buf, size_t cap, uint16_t type, const char *s, size_t len)
{
	if (cap < 2)
		return 0;
	put16(buf, type);
	if (len > cap - 2)
		len = cap - 2;
	if (len)
		memcpy(buf + 2, s, len);
	return 2 + len;
}

size_t nbd_rep_server_encode(uint8_t *buf, size_t cap, const char *name, const char *desc)
{
	size_t nlen = strlen(name);
	if (cap < 4 + nlen)
		return 0;
	put32(buf, (uint32_t)nlen);
	memcpy(buf + 4, name, nlen);
	size_t n = 4 + nlen;
	if (desc) {
		size_t dlen = strlen(desc);
		if (dlen > cap - n)
			dlen = cap - n;
		memcpy(buf + n, desc, dlen);
		n += dlen;
	}
	return n;
}

/* ---- transmission ---- */

uint16_t nbd_transmission_flags(bool structured)
{
	/*
	 * CAN_MULTI_CONN: the dirty tree belongs to the volume, not to a
	 * connection, so a FLUSH on any connection writes back what every
	 * connection wrote, and a FUA write is durable for all of them
	 * (tests/nbd: a write on one connection, FLUSH on another, power cut).
	 */
	uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		     NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_CAN_MULTI_CONN;
	if (structured)
		f |= NBD_FLAG_SEND_DF; /* a READ is always answered with one data chunk */
	return f;
}

void nbd_request_decode(const uint8_t buf[NBD_REQUEST_SIZE], struct nbd_request *r)
{
	r->magic = get32(buf);
	r->flags = get16(buf + 4);
	r->type = get16(buf + 6);
	r->handle = get64(buf + 8);
	r->offset = get64(buf + 16);
	r->length = get32(buf + 24);
}

void nbd_request_encode(uint8_t buf[NBD_REQUEST_SIZE], const struct nbd_request *r)
{
	put32(buf, r->magic);
	put16(buf + 4, r->flags);
	put16(buf + 6, r->type);
	put64(buf + 8, r->handle);
	put64(buf + 16, r->offset);
	put32(buf + 24, r->length);
}

uint32_t nbd_request_validate(const struct nbd_request *r, const struct nbd_export_limits *e,
			      const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	*why = NULL;
	uint16_t allowed;
	bool ranged = true, bounded = true;
	switch (r->type) {
	case NBD_CMD_READ:
		allowed = NBD_CMD_FLAG_FUA | (e->structured ? NBD_CMD_FLAG_DF : 0);
		break;
	case NBD_CMD_WRITE:
		allowed = NBD_CMD_FLAG_FUA;
		break;
	case NBD_CMD_WRITE_ZEROES:
		allowed = NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE;
		break;
	case NBD_CMD_TRIM:
		/* a hint with no payload: any length inside the export */
		allowed = NBD_CMD_FLAG_FUA;
		bounded = false;
		break;
	case NBD_CMD_FLUSH:
	case NBD_CMD_DISC:
		/* offset and length are reserved (zero); nothing depends on them */
		allowed = NBD_CMD_FLAG_FUA;
		ranged = bounded = false;
		break;
	default:
		*why = "unknown or unsupported command";
		return NBD_EINVAL;
	}
	if (r->flags & ~allowed) {
		*why = "command flag not valid for this command";
		return NBD_EINVAL;
	}
	if (e->read_only && (r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES ||
			     r->type == NBD_CMD_TRIM)) {
		*why = "the export is read-only for this client";
		return NBD_EPERM;
	}
	if (bounded && r->length > e->max_block) {
		*why = "length exceeds the maximum block size";
		return NBD_EINVAL;
	}
	if (ranged) {
		uint64_t end;
		bool writes = r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES;
		if (__builtin_add_overflow(r->offset, (uint64_t)r->length, &end) || end > e->size) {
			*why = "range beyond the end of the export";
			return writes ? NBD_ENOSPC : NBD_EINVAL;
		}
	}
	return 0;
}

void nbd_simple_reply_encode(uint8_t buf[NBD_SIMPLE_REPLY_SIZE], uint32_t error, uint64_t handle)
{
	put32(buf, NBD_SIMPLE_REPLY_MAGIC);
	put32(buf + 4, error);
	put64(buf + 8, handle);
}

void nbd_chunk_header_encode(uint8_t buf[NBD_CHUNK_HEADER_SIZE], uint16_t flags, uint16_t type,
			     uint64_t handle, uint32_t len)
{
	put32(buf, NBD_STRUCTURED_REPLY_MAGIC);
	put16(buf + 4, flags);
	put16(buf + 6, type);
	put64(buf + 8, handle);
	put32(buf + 16, len);
}

void nbd_data_chunk_prefix_encode(uint8_t buf[NBD_DATA_CHUNK_PREFIX], uint64_t handle,
				  uint64_t offset, uint32_t len, bool done)
{
	nbd_chunk_header_encode(buf, done ? NBD_REPLY_FLAG_DONE : 0, NBD_REPLY_TYPE_OFFSET_DATA,
				handle, len + 8);
	put64(buf + NBD_CHUNK_HEADER_SIZE, offset);
}

size_t nbd_error_chunk_encode(uint8_t *buf, size_t cap, uint64_t handle, uint32_t error,
			      const char *msg)
{
	size_t mlen = msg ? strlen(msg) : 0;
	if (mlen > NBD_MESSAGE_MAX)
		mlen = NBD_MESSAGE_MAX;
	if (mlen > cap - NBD_CHUNK_HEADER_SIZE - 6)
		mlen = cap - NBD_CHUNK_HEADER_SIZE - 6;
	nbd_chunk_header_encode(buf, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, handle,
				(uint32_t)(6 + mlen));
	put32(buf + NBD_CHUNK_HEADER_SIZE, error ? error : NBD_EIO);
	put16(buf + NBD_CHUNK_HEADER_SIZE + 4, (uint16_t)mlen);
	if (mlen)
		memcpy(buf + NBD_CHUNK_HEADER_SIZE + 6, msg, mlen);
	return NBD_CHUNK_HEADER_SIZE + 6 + mlen;
}

uint32_t nbd_errno_map(int code)
{
	switch (code) {
	case 0:
		return 0;
	case -EPERM:
	case -EACCES:
	case -EROFS:
	case -RDAX_E_ACCESS:
		return NBD_EPERM;
	case -EINVAL:
	case -ERANGE:
	case -RDAX_E_NOT_OPEN:
	case -RDAX_E_TOO_BIG:
		return NBD_EINVAL;
	case -EOVERFLOW:
		return NBD_EOVERFLOW;
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:
		return NBD_ENOSPC;
	case -ENOTSUP:
		return NBD_ENOTSUP;
	case -ESHUTDOWN:
		return NBD_ESHUTDOWN;
	default:
		/* ENOMEM included: the document asks servers not to send it */
		return NBD_EIO;
	}
}

const char *nbd_cmd_name(uint16_t type)
{
	switch (type) {
	case NBD_CMD_READ:
		return "read";
	case NBD_CMD_WRITE:
		return "write";
	case NBD_CMD_DISC:
		return "disc";
	case NBD_CMD_FLUSH:
		return "flush";
	case NBD_CMD_TRIM:
		return "trim";
	case NBD_CMD_CACHE:
		return "cache";
	case NBD_CMD_WRITE_ZEROES:
		return "write_zeroes";
	case NBD_CMD_BLOCK_STATUS:
		return "block_status";
	default:
		return "unknown";
	}
}

const char *nbd_opt_name(uint32_t option)
{
	switch (option) {
	case NBD_OPT_EXPORT_NAME:
		return "export_name";
	case NBD_OPT_ABORT:
		return "abort";
	case NBD_OPT_LIST:
		return "list";
	case NBD_OPT_STARTTLS:
		return "starttls";
	case NBD_OPT_INFO:
		return "info";
	case NBD_OPT_GO:
		return "go";
	case NBD_OPT_STRUCTURED_REPLY:
		return "structured_reply";
	case NBD_OPT_LIST_META_CONTEXT:
		return "list_meta_context";
	case NBD_OPT_SET_META_CONTEXT:
		return "set_meta_context";
	case NBD_OPT_EXTENDED_HEADERS:
		return "extended_headers";
	default:
		return "unknown";
	}
}
