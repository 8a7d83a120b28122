/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_frame_header.c -- the native frame header as rdaxd checks it
 *
 * Input: a 32-byte frame header (shorter inputs are zero-padded), then one
 * byte choosing the limits (max_payload between 1 MiB and the 64 MiB cap,
 * max_body the default or 1 byte less). The header goes through
 * dispatch_header(), the daemon's own first step for every frame. Checked:
 * an accepted header is within every limit the rest of the daemon relies
 * on (magic, version, a known request type, body and payload lengths, a
 * payload only on WRITE); a refused one gets a closing error reply that
 * echoes the request id and decodes as a StatusReply with a non-zero code
 * and a message; encode(decode(raw)) gives back the 24 bytes before the
 * reserved field.
 */
#include "fuzz.h"

#include "dispatch.h"
#include "frame.h"
#include "log.h"
#include "rdax.pb-c.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_log_init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t raw[FRAME_HEADER_SIZE] = {0};
	memcpy(raw, data, size < sizeof(raw) ? size : sizeof(raw));
	uint8_t knob = size > FRAME_HEADER_SIZE ? data[FRAME_HEADER_SIZE] : 0;

	struct dispatch_env env = {
	    .max_payload = (knob & 1) ? FRAME_MAX_PAYLOAD_LIMIT : (1U << 20),
	    .max_body = (knob & 2) ? FRAME_DEFAULT_MAX_BODY - 1 : FRAME_DEFAULT_MAX_BODY,
	};
	struct frame_header h;
	struct dispatch_out out;
	memset(&out, 0, sizeof(out));
	int ret = dispatch_header(&env, raw, &h, &out);

	FUZZ_CHECK(frame_type_name(h.type) != NULL);
	uint8_t again[FRAME_HEADER_SIZE];
	frame_header_encode(&h, again);
	FUZZ_CHECK(memcmp(again, raw, 24) == 0);

	if (ret == 0) {
		FUZZ_CHECK(frame_header_check(&h, env.max_body, env.max_payload) == 0);
		FUZZ_CHECK(h.magic == FRAME_MAGIC && h.version == FRAME_VERSION);
		FUZZ_CHECK(h.type > 0 && h.type < FRAME_TYPE_MAX);
		FUZZ_CHECK(h.body_len <= env.max_body);
		FUZZ_CHECK(h.payload_len <= env.max_payload);
		FUZZ_CHECK(h.payload_len == 0 || h.type == FRAME_WRITE);
		return 0;
	}
	FUZZ_CHECK(ret < 0);
	FUZZ_CHECK(out.action == DISPATCH_CLOSE);
	FUZZ_CHECK(out.reply.type == FRAME_REPLY && out.reply.request_id == h.request_id);
	if (out.reply.body) { /* none only when out of memory */
		Rdax__StatusReply *r =
		    rdax__status_reply__unpack(NULL, out.reply.body_len, out.reply.body);
		FUZZ_CHECK(r && r->status && r->status->code != 0 && r->status->message);
		FUZZ_CHECK(r->status->code == (uint32_t)-ret);
		rdax__status_reply__free_unpacked(r, NULL);
	}
	dispatch_reply_release(NULL, &out.reply);
	return 0;
}
