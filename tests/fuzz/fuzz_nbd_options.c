/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_nbd_options.c -- NBD option haggling through rdaxd's handshake checks
 *
 * Input: what a client sends after the greeting: the 4-byte client flags,
 * then options (16-byte header, data). Each step calls the function the
 * handshake (nbd_handshake.c) calls at that point: nbd_client_flags_check,
 * nbd_opt_header_decode and nbd_handshake_opt_check (read, skip or close),
 * nbd_opt_go_parse for INFO and GO, nbd_handshake_name_check for every
 * export name; the replies that would follow are encoded with the
 * daemon's encoders into buffers of exactly the size the daemon gives them.
 *
 * Checked beyond the sanitizers: an option's data is read into memory only
 * when it is at most NBD_OPT_MAX_LEN bytes (the rest is skipped unread), the
 * connection ends after NBD_MAX_OPTIONS options, a parsed GO/INFO name lies
 * inside the option's data, an accepted export name is a valid volume name
 * of the length sent (no NUL inside), and no encoder writes past the room
 * it is given.
 */
#include "fuzz.h"

#include <errno.h>

#include "log.h"
#include "namespace.h"
#include "nbd_conn.h"
#include "nbd_proto.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_log_init();
	return 0;
}

/* get32be -- the client flags' byte order */
static uint32_t get32be(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* export_replies -- the INFO replies of a found export, in buffers sized as the daemon's */
static void export_replies(const char *name, size_t len, bool structured)
{
	uint8_t *buf = malloc(NBD_OUT_INLINE);
	FUZZ_CHECK(buf);
	size_t n = nbd_info_export_encode(buf, 1ULL << 30, nbd_transmission_flags(structured));
	FUZZ_CHECK(n <= NBD_OUT_INLINE);
	n = nbd_info_string_encode(buf, NBD_OUT_INLINE, NBD_INFO_NAME, name, len);
	FUZZ_CHECK(n <= NBD_OUT_INLINE);
	n = nbd_rep_server_encode(buf, NBD_OUT_INLINE - NBD_OPT_REPLY_HEADER_SIZE, name,
				  "rdax volume, 1.0 GiB, namespace 0");
	FUZZ_CHECK(n <= NBD_OUT_INLINE - NBD_OPT_REPLY_HEADER_SIZE);
	uint8_t *er = malloc(NBD_EXPORT_NAME_REPLY_SIZE);
	FUZZ_CHECK(er);
	n = nbd_export_name_reply_encode(er, 1ULL << 30, nbd_transmission_flags(structured),
					 len & 1);
	FUZZ_CHECK(n <= NBD_EXPORT_NAME_REPLY_SIZE);
	free(er);
	free(buf);
}

/* name_lookup -- an export name as opt_lookup() checks it before looking it up */
static void name_lookup(const char *name, size_t len, bool structured)
{
	char copy[NS_VOLUME_NAME_MAX + 1];
	if (nbd_handshake_name_check(name, len, copy))
		return;
	FUZZ_CHECK(len > 0 && len <= NS_VOLUME_NAME_MAX);
	FUZZ_CHECK(strlen(copy) == len && memcmp(copy, name, len) == 0);
	FUZZ_CHECK(ns_volume_name_valid(copy) == 0);
	export_replies(copy, len, structured);
}

/* option -- an option whose data was read into memory (opt_handle's cases) */
static void option(uint32_t opt, const uint8_t *data, uint32_t len, bool *structured)
{
	switch (opt) {
	case NBD_OPT_EXPORT_NAME:
		name_lookup((const char *)data, len, *structured);
		return;
	case NBD_OPT_STRUCTURED_REPLY:
		if (len == 0)
			*structured = true;
		return;
	case NBD_OPT_INFO:
	case NBD_OPT_GO: {
		struct nbd_opt_go go;
		const char *why = NULL;
		if (nbd_opt_go_parse(data, len, &go, &why)) {
			FUZZ_CHECK(why != NULL);
			return;
		}
		FUZZ_CHECK((const uint8_t *)go.name >= data);
		FUZZ_CHECK((const uint8_t *)go.name + go.name_len <= data + len);
		FUZZ_CHECK(go.name_len <= NBD_STRING_MAX);
		FUZZ_CHECK(4 + go.name_len + 2 + 2 * (size_t)go.nreqs == len);
		name_lookup(go.name, go.name_len, *structured);
		return;
	}
	default:
		return;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	const uint8_t *flags = fuzz_take(&in, NBD_CLIENT_FLAGS_SIZE);
	if (!flags || nbd_client_flags_check(get32be(flags)))
		return 0;
	bool structured = false;
	for (unsigned noptions = 1;; noptions++) {
		const uint8_t *raw = fuzz_take(&in, NBD_OPT_HEADER_SIZE);
		if (!raw)
			return 0;
		struct nbd_opt_header h;
		bool read = false;
		nbd_opt_header_decode(raw, &h);
		FUZZ_CHECK(nbd_opt_name(h.option) != NULL);
		int ret = nbd_handshake_opt_check(&h, noptions, &read);
		if (ret) {
			FUZZ_CHECK(ret == -EPROTO || ret == -E2BIG || ret == -EMSGSIZE);
			FUZZ_CHECK(h.magic != NBD_OPTS_MAGIC || noptions > NBD_MAX_OPTIONS ||
				   h.len > NBD_OPT_SKIP_MAX);
			return 0; /* closed */
		}
		FUZZ_CHECK(noptions <= NBD_MAX_OPTIONS && h.len <= NBD_OPT_SKIP_MAX);
		if (!read) {
			/* skipped unread: the data never reaches memory */
			if (!fuzz_take(&in, h.len))
				return 0;
			continue;
		}
		FUZZ_CHECK(h.len <= NBD_OPT_MAX_LEN);
		const uint8_t *p = fuzz_take(&in, h.len);
		if (!p)
			return 0;
		/* the daemon handles the data in its input buffer: here a copy of exactly h.len */
		uint8_t *copy = malloc(h.len ? h.len : 1);
		FUZZ_CHECK(copy);
		memcpy(copy, p, h.len);
		option(h.option, copy, h.len, &structured);
		free(copy);
		if (h.option == NBD_OPT_ABORT)
			return 0;
	}
}
