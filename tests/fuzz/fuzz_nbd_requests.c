/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_nbd_requests.c -- NBD transmission requests through rdaxd's request check
 *
 * Input: 13 bytes of export (size: 8, largest block: 4, structured replies
 * negotiated: 1), then what a client sends in transmission: 28-byte
 * requests, each WRITE followed by its payload. Each request goes through
 * nbd_request_decode and nbd_request_validate, the one check the daemon
 * makes (nbd_transmission.c) before it acts; the reply headers the daemon
 * would send are encoded by its encoders into a buffer of exactly the room
 * the daemon has for them (NBD_OUT_INLINE).
 *
 * Checked beyond the sanitizers: whatever is accepted stays inside the
 * export (offset + length never past the size, never wrapping), READ,
 * WRITE and WRITE_ZEROES are at most the largest block, only flags the
 * command takes are accepted (DF only with structured replies), unknown
 * commands are refused, and every refusal has a message.
 */
#include "fuzz.h"

#include "log.h"
#include "nbd_conn.h"
#include "nbd_proto.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_log_init();
	return 0;
}

/* flags_allowed -- the flags a command may carry (the NBD document, what rdaxd offers: no
 * FAST_ZERO) */
static uint16_t flags_allowed(uint16_t type, bool structured)
{
	switch (type) {
	case NBD_CMD_READ:
		return NBD_CMD_FLAG_FUA | (structured ? NBD_CMD_FLAG_DF : 0);
	case NBD_CMD_WRITE_ZEROES:
		return NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE;
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
	case NBD_CMD_FLUSH:
		return NBD_CMD_FLAG_FUA;
	default:
		return 0;
	}
}

/* replies -- encode what the daemon would send for @r (error @err) */
static void replies(const struct nbd_request *r, uint32_t err, const char *why, bool structured)
{
	uint8_t *buf = malloc(NBD_OUT_INLINE);
	FUZZ_CHECK(buf);
	if (err && structured) {
		size_t n = nbd_error_chunk_encode(buf, NBD_OUT_INLINE, r->handle, err, why);
		FUZZ_CHECK(n >= NBD_CHUNK_HEADER_SIZE + 6 && n <= NBD_OUT_INLINE);
	} else if (!err && structured && r->type == NBD_CMD_READ && r->length) {
		nbd_data_chunk_prefix_encode(buf, r->handle, r->offset, r->length, true);
	} else if (!err && structured && r->type == NBD_CMD_READ) {
		nbd_chunk_header_encode(buf, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, r->handle,
					0);
	} else {
		nbd_simple_reply_encode(buf, err, r->handle);
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	const uint8_t *ex = fuzz_take(&in, 13);
	if (!ex)
		return 0;
	struct nbd_export_limits lim = {0};
	memcpy(&lim.size, ex, 8);
	memcpy(&lim.max_block, ex + 8, 4);
	/* the daemon's limits: max_block 1 .. NBD_MAX_BLOCK */
	lim.max_block = lim.max_block % NBD_MAX_BLOCK + 1;
	lim.structured = ex[12] & 1;
	lim.read_only = ex[12] & 2; /* a client with ro rights (--acl) */

	for (;;) {
		const uint8_t *raw = fuzz_take(&in, NBD_REQUEST_SIZE);
		if (!raw)
			return 0;
		struct nbd_request r;
		nbd_request_decode(raw, &r);
		FUZZ_CHECK(nbd_cmd_name(r.type) != NULL);
		if (r.magic != NBD_REQUEST_MAGIC || r.type == NBD_CMD_DISC)
			return 0; /* the daemon closes */
		const char *why = NULL;
		uint32_t err = nbd_request_validate(&r, &lim, &why);
		replies(&r, err, why, lim.structured);
		if (err) {
			FUZZ_CHECK(why != NULL);
			if (r.type == NBD_CMD_WRITE && r.length > NBD_WRITE_SKIP_MAX)
				return 0; /* too large to skip: closed */
		} else {
			FUZZ_CHECK(r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE ||
				   r.type == NBD_CMD_FLUSH || r.type == NBD_CMD_TRIM ||
				   r.type == NBD_CMD_WRITE_ZEROES);
			FUZZ_CHECK((r.flags & ~flags_allowed(r.type, lim.structured)) == 0);
			if (r.type != NBD_CMD_FLUSH) {
				FUZZ_CHECK(r.offset <= lim.size);
				FUZZ_CHECK(r.length <= lim.size - r.offset);
			}
			if (r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE ||
			    r.type == NBD_CMD_WRITE_ZEROES)
				FUZZ_CHECK(r.length <= lim.max_block);
		}
		/* a WRITE's payload follows, accepted or not */
		if (r.type == NBD_CMD_WRITE && !fuzz_take(&in, r.length))
			return 0;
	}
}
