/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nbd_proto.c -- NBD message encoding, decoding, request validation; nbd listen addresses */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "errors.h"
#include "nbd_proto.h"

#define MiB (1U << 20)

/* be -- @n bytes of @p as a big-endian number */
static uint64_t be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static void nbd_greeting_encode__fixed_newstyle_no_zeroes(void **state)
{
	uint8_t g[NBD_GREETING_SIZE];
	nbd_greeting_encode(g);
	assert_memory_equal(g, "NBDMAGIC", 8);
	assert_memory_equal(g + 8, "IHAVEOPT", 8);
	assert_int_equal(be(g + 16, 2), NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
}

static void nbd_client_flags_check__only_offered_flags(void **state)
{
	assert_int_equal(nbd_client_flags_check(0), 0);
	assert_int_equal(nbd_client_flags_check(NBD_FLAG_C_FIXED_NEWSTYLE), 0);
	assert_int_equal(nbd_client_flags_check(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES),
			 0);
	assert_int_equal(nbd_client_flags_check(1U << 2), -EPROTO);
	assert_int_equal(nbd_client_flags_check(0x80000000U), -EPROTO);
}

static void nbd_opt_header__round_trip(void **state)
{
	uint8_t b[NBD_OPT_HEADER_SIZE];
	nbd_opt_header_encode(b, NBD_OPT_GO, 0xdeadbeef);
	struct nbd_opt_header h;
	nbd_opt_header_decode(b, &h);
	assert_true(h.magic == NBD_OPTS_MAGIC);
	assert_int_equal(h.option, NBD_OPT_GO);
	assert_int_equal(h.len, 0xdeadbeef);
}

static void nbd_opt_reply_encode__layout(void **state)
{
	uint8_t b[NBD_OPT_REPLY_HEADER_SIZE];
	nbd_opt_reply_encode(b, NBD_OPT_LIST, NBD_REP_ERR_UNSUP, 7);
	assert_true(be(b, 8) == 0x3e889045565a9ULL);
	assert_int_equal(be(b + 8, 4), NBD_OPT_LIST);
	assert_int_equal(be(b + 12, 4), 0x80000001U);
	assert_int_equal(be(b + 16, 4), 7);
}

/* go_data -- NBD_OPT_GO data for @name with @n info requests; returns its length */
static uint32_t go_data(uint8_t *b, const char *name, const uint16_t *reqs, uint16_t n)
{
	size_t len = strlen(name);
	b[0] = (uint8_t)(len >> 24);
	b[1] = (uint8_t)(len >> 16);
	b[2] = (uint8_t)(len >> 8);
	b[3] = (uint8_t)len;
	memcpy(b + 4, name, len);
	b[4 + len] = (uint8_t)(n >> 8);
	b[5 + len] = (uint8_t)n;
	for (uint16_t i = 0; i < n; i++) {
		b[6 + len + 2 * i] = (uint8_t)(reqs[i] >> 8);
		b[7 + len + 2 * i] = (uint8_t)reqs[i];
	}
	return (uint32_t)(6 + len + 2U * n);
}

static void nbd_opt_go_parse__valid(void **state)
{
	uint8_t b[64];
	const uint16_t reqs[] = {NBD_INFO_BLOCK_SIZE, NBD_INFO_NAME, 77, NBD_INFO_DESCRIPTION};
	uint32_t len = go_data(b, "vol1", reqs, 4);
	struct nbd_opt_go go;
	const char *why = NULL;
	assert_int_equal(nbd_opt_go_parse(b, len, &go, &why), 0);
	assert_int_equal(go.name_len, 4);
	assert_memory_equal(go.name, "vol1", 4);
	assert_int_equal(go.nreqs, 4);
	assert_true(go.want_block_size && go.want_name && go.want_description);

	len = go_data(b, "", NULL, 0);
	assert_int_equal(nbd_opt_go_parse(b, len, &go, &why), 0);
	assert_int_equal(go.name_len, 0);
	assert_false(go.want_block_size || go.want_name || go.want_description);
}

static void nbd_opt_go_parse__bad_lengths(void **state)
{
	uint8_t b[64];
	struct nbd_opt_go go;
	const char *why = NULL;
	const uint16_t reqs[] = {NBD_INFO_BLOCK_SIZE};
	uint32_t len = go_data(b, "vol", reqs, 1);
	/* too short for the fixed fields */
	assert_int_equal(nbd_opt_go_parse(b, 5, &go, &why), -EINVAL);
	assert_non_null(why);
	/* one byte more or less than the requests say */
	assert_int_equal(nbd_opt_go_parse(b, len - 1, &go, &why), -EINVAL);
	assert_int_equal(nbd_opt_go_parse(b, len + 1, &go, &why), -EINVAL);
	/* a name length running past the data */
	b[3] = 200;
	assert_int_equal(nbd_opt_go_parse(b, len, &go, &why), -EINVAL);
	assert_non_null(strstr(why, "name length"));
	/* a name length near 2^32 must not wrap the checks */
	b[0] = b[1] = b[2] = b[3] = 0xff;
	assert_int_equal(nbd_opt_go_parse(b, len, &go, &why), -EINVAL);
	/* longer than the protocol's string limit */
	uint8_t *big = calloc(1, 4 + 5000 + 2);
	assert_non_null(big);
	big[2] = (uint8_t)(5000 >> 8);
	big[3] = (uint8_t)(5000 & 0xff);
	assert_int_equal(nbd_opt_go_parse(big, 4 + 5000 + 2, &go, &why), -EINVAL);
	assert_non_null(strstr(why, "4096"));
	free(big);
	assert_int_equal(nbd_opt_go_parse(NULL, 6, &go, &why), -EINVAL);
}

static void nbd_export_name_reply_encode__zeroes(void **state)
{
	uint8_t b[NBD_EXPORT_NAME_REPLY_SIZE];
	memset(b, 0xaa, sizeof(b));
	assert_int_equal(nbd_export_name_reply_encode(b, 1ULL << 40, 0x1234, false),
			 NBD_EXPORT_NAME_REPLY_SIZE);
	assert_true(be(b, 8) == 1ULL << 40);
	assert_int_equal(be(b + 8, 2), 0x1234);
	for (size_t i = 10; i < sizeof(b); i++)
		assert_int_equal(b[i], 0);
	memset(b, 0xaa, sizeof(b));
	assert_int_equal(nbd_export_name_reply_encode(b, 4096, 1, true), 10);
	assert_int_equal(b[10], 0xaa);
}

static void nbd_info__payloads(void **state)
{
	uint8_t b[64];
	assert_int_equal(nbd_info_export_encode(b, 0x0102030405060708ULL, 0x0159), 12);
	assert_int_equal(be(b, 2), NBD_INFO_EXPORT);
	assert_true(be(b + 2, 8) == 0x0102030405060708ULL);
	assert_int_equal(be(b + 10, 2), 0x0159);

	assert_int_equal(nbd_info_block_size_encode(b, 1, 4096, 32 * MiB), 14);
	assert_int_equal(be(b, 2), NBD_INFO_BLOCK_SIZE);
	assert_int_equal(be(b + 2, 4), 1);
	assert_int_equal(be(b + 6, 4), 4096);
	assert_int_equal(be(b + 10, 4), 32 * MiB);

	assert_int_equal(nbd_info_string_encode(b, sizeof(b), NBD_INFO_NAME, "vol", 3), 5);
	assert_int_equal(be(b, 2), NBD_INFO_NAME);
	assert_memory_equal(b + 2, "vol", 3);
	/* cut to the room there is */
	assert_int_equal(nbd_info_string_encode(b, 6, NBD_INFO_DESCRIPTION, "abcdefgh", 8), 6);
	assert_memory_equal(b + 2, "abcd", 4);
	assert_int_equal(nbd_info_string_encode(b, 1, NBD_INFO_NAME, "x", 1), 0);
}

static void nbd_rep_server_encode__name_and_description(void **state)
{
	uint8_t b[64];
	size_t n = nbd_rep_server_encode(b, sizeof(b), "vol1", "a disk");
	assert_int_equal(n, 4 + 4 + 6);
	assert_int_equal(be(b, 4), 4);
	assert_memory_equal(b + 4, "vol1", 4);
	assert_memory_equal(b + 8, "a disk", 6);
	assert_int_equal(nbd_rep_server_encode(b, sizeof(b), "vol1", NULL), 8);
	/* the description is cut, never the name */
	assert_int_equal(nbd_rep_server_encode(b, 10, "vol1", "a disk"), 10);
	assert_int_equal(nbd_rep_server_encode(b, 7, "vol1", NULL), 0);
}

static void nbd_transmission_flags__what_is_offered(void **state)
{
	uint16_t f = nbd_transmission_flags(false);
	assert_true(f & NBD_FLAG_HAS_FLAGS);
	assert_true(f & NBD_FLAG_SEND_FLUSH);
	assert_true(f & NBD_FLAG_SEND_FUA);
	assert_true(f & NBD_FLAG_SEND_TRIM);
	assert_true(f & NBD_FLAG_SEND_WRITE_ZEROES);
	assert_true(f & NBD_FLAG_CAN_MULTI_CONN);
	assert_false(f & NBD_FLAG_READ_ONLY);
	assert_false(f & NBD_FLAG_ROTATIONAL);
	assert_false(f & NBD_FLAG_SEND_FAST_ZERO);
	assert_false(f & NBD_FLAG_SEND_CACHE);
	/* DF only where structured replies were negotiated */
	assert_false(f & NBD_FLAG_SEND_DF);
	assert_true(nbd_transmission_flags(true) & NBD_FLAG_SEND_DF);
}

static void nbd_request__round_trip(void **state)
{
	struct nbd_request r = {NBD_REQUEST_MAGIC,     0x0102,
				NBD_CMD_WRITE,	       0x1122334455667788ULL,
				0x8877665544332211ULL, 0xcafef00d};
	uint8_t b[NBD_REQUEST_SIZE];
	nbd_request_encode(b, &r);
	assert_int_equal(be(b, 4), NBD_REQUEST_MAGIC);
	assert_int_equal(be(b + 6, 2), NBD_CMD_WRITE);
	struct nbd_request d;
	nbd_request_decode(b, &d);
	/* field by field: the struct has padding */
	assert_int_equal(d.magic, r.magic);
	assert_int_equal(d.flags, r.flags);
	assert_int_equal(d.type, r.type);
	assert_true(d.handle == r.handle);
	assert_true(d.offset == r.offset);
	assert_int_equal(d.length, r.length);
}

/* check -- validate one request against a 1 MiB export, max block 64 KiB */
static uint32_t check(uint16_t type, uint16_t flags, uint64_t off, uint32_t len, bool structured)
{
	struct nbd_request r = {NBD_REQUEST_MAGIC, flags, type, 1, off, len};
	struct nbd_export_limits e = {.size = MiB, .max_block = 64 << 10, .structured = structured};
	const char *why = NULL;
	uint32_t err = nbd_request_validate(&r, &e, &why);
	if (err)
		assert_non_null(why);
	return err;
}

static void nbd_request_validate__valid(void **state)
{
	assert_int_equal(check(NBD_CMD_READ, 0, 0, 4096, false), 0);
	assert_int_equal(check(NBD_CMD_READ, NBD_CMD_FLAG_FUA, MiB - 1, 1, false), 0);
	assert_int_equal(check(NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 65536, true), 0);
	assert_int_equal(check(NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, MiB - 65536, 65536, false), 0);
	assert_int_equal(
	    check(NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FUA, 512, 512, false),
	    0);
	/* TRIM is not bound by the maximum block size */
	assert_int_equal(check(NBD_CMD_TRIM, NBD_CMD_FLAG_FUA, 0, MiB, false), 0);
	/* FLUSH and DISC ignore their (reserved) offset and length */
	assert_int_equal(check(NBD_CMD_FLUSH, 0, 0, 0, false), 0);
	assert_int_equal(check(NBD_CMD_FLUSH, NBD_CMD_FLAG_FUA, UINT64_MAX, UINT32_MAX, false), 0);
	assert_int_equal(check(NBD_CMD_DISC, 0, 0, 0, false), 0);
	/* a zero length at the very end is inside */
	assert_int_equal(check(NBD_CMD_READ, 0, MiB, 0, false), 0);
}

static void nbd_request_validate__unknown_command(void **state)
{
	assert_int_equal(check(NBD_CMD_CACHE, 0, 0, 4096, false), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_BLOCK_STATUS, 0, 0, 4096, true), NBD_EINVAL);
	assert_int_equal(check(8, 0, 0, 0, false), NBD_EINVAL);
	assert_int_equal(check(0xffff, 0, 0, 0, false), NBD_EINVAL);
}

static void nbd_request_validate__flags(void **state)
{
	/* DF without structured replies, NO_HOLE outside WRITE_ZEROES, never-offered ones */
	assert_int_equal(check(NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 4096, false), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_WRITE, NBD_CMD_FLAG_NO_HOLE, 0, 4096, false), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_WRITE, NBD_CMD_FLAG_DF, 0, 4096, true), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_FAST_ZERO, 0, 4096, false),
			 NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_TRIM, NBD_CMD_FLAG_NO_HOLE, 0, 4096, false), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_READ, NBD_CMD_FLAG_REQ_ONE, 0, 4096, true), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_FLUSH, 1U << 15, 0, 0, false), NBD_EINVAL);
}

static void nbd_request_validate__lengths_and_ranges(void **state)
{
	/* over the maximum block size */
	assert_int_equal(check(NBD_CMD_READ, 0, 0, (64 << 10) + 1, false), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_WRITE, 0, 0, (64 << 10) + 1, false), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_WRITE_ZEROES, 0, 0, (64 << 10) + 1, false), NBD_EINVAL);
	/* past the end: ENOSPC for what writes, EINVAL otherwise */
	assert_int_equal(check(NBD_CMD_READ, 0, MiB - 4095, 4096, false), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_TRIM, 0, MiB, 1, false), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_WRITE, 0, MiB - 4095, 4096, false), NBD_ENOSPC);
	assert_int_equal(check(NBD_CMD_WRITE_ZEROES, 0, MiB, 1, false), NBD_ENOSPC);
	/* offset + length wraps */
	assert_int_equal(check(NBD_CMD_READ, 0, UINT64_MAX - 10, 4096, false), NBD_EINVAL);
	assert_int_equal(check(NBD_CMD_WRITE, 0, UINT64_MAX, 1, false), NBD_ENOSPC);
	assert_int_equal(check(NBD_CMD_TRIM, 0, UINT64_MAX, UINT32_MAX, false), NBD_EINVAL);
}

static void nbd_replies__layout(void **state)
{
	uint8_t b[NBD_CHUNK_HEADER_SIZE + 6 + NBD_MESSAGE_MAX + 16];
	nbd_simple_reply_encode(b, NBD_ENOSPC, 0x0102030405060708ULL);
	assert_int_equal(be(b, 4), NBD_SIMPLE_REPLY_MAGIC);
	assert_int_equal(be(b + 4, 4), NBD_ENOSPC);
	assert_true(be(b + 8, 8) == 0x0102030405060708ULL);

	nbd_data_chunk_prefix_encode(b, 7, 4096, 512, true);
	assert_int_equal(be(b, 4), NBD_STRUCTURED_REPLY_MAGIC);
	assert_int_equal(be(b + 4, 2), NBD_REPLY_FLAG_DONE);
	assert_int_equal(be(b + 6, 2), NBD_REPLY_TYPE_OFFSET_DATA);
	assert_int_equal(be(b + 8, 8), 7);
	assert_int_equal(be(b + 16, 4), 512 + 8);
	assert_int_equal(be(b + 20, 8), 4096);
	nbd_data_chunk_prefix_encode(b, 7, 0, 1, false);
	assert_int_equal(be(b + 4, 2), 0);

	size_t n = nbd_error_chunk_encode(b, sizeof(b), 9, NBD_EINVAL, "bad");
	assert_int_equal(n, NBD_CHUNK_HEADER_SIZE + 6 + 3);
	assert_int_equal(be(b + 4, 2), NBD_REPLY_FLAG_DONE);
	assert_int_equal(be(b + 6, 2), NBD_REPLY_TYPE_ERROR);
	assert_int_equal(be(b + 16, 4), 9);
	assert_int_equal(be(b + 20, 4), NBD_EINVAL);
	assert_int_equal(be(b + 24, 2), 3);
	assert_memory_equal(b + 26, "bad", 3);
	/* an error chunk never says "no error", and long messages are cut */
	char longmsg[400];
	memset(longmsg, 'x', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	n = nbd_error_chunk_encode(b, sizeof(b), 9, 0, longmsg);
	assert_int_equal(be(b + 20, 4), NBD_EIO);
	assert_int_equal(be(b + 24, 2), NBD_MESSAGE_MAX);
	assert_int_equal(n, NBD_CHUNK_HEADER_SIZE + 6 + NBD_MESSAGE_MAX);
	n = nbd_error_chunk_encode(b, NBD_CHUNK_HEADER_SIZE + 8, 9, NBD_EIO, "abcdef");
	assert_int_equal(n, NBD_CHUNK_HEADER_SIZE + 8);
	assert_int_equal(be(b + 16, 4), 8);
}

static void nbd_errno_map__protocol_values(void **state)
{
	assert_int_equal(nbd_errno_map(0), 0);
	assert_int_equal(nbd_errno_map(-EINVAL), NBD_EINVAL);
	assert_int_equal(nbd_errno_map(-ERANGE), NBD_EINVAL);
	assert_int_equal(nbd_errno_map(-ENOSPC), NBD_ENOSPC);
	assert_int_equal(nbd_errno_map(-EFBIG), NBD_ENOSPC);
	assert_int_equal(nbd_errno_map(-EOVERFLOW), NBD_EOVERFLOW);
	assert_int_equal(nbd_errno_map(-EACCES), NBD_EPERM);
	assert_int_equal(nbd_errno_map(-ENOMEM), NBD_EIO);
	assert_int_equal(nbd_errno_map(-EIO), NBD_EIO);
	assert_int_equal(nbd_errno_map(-RDAX_E_TOO_BIG), NBD_EINVAL);
	assert_int_equal(nbd_errno_map(-12345), NBD_EIO);
}

static void nbd_names__known_and_unknown(void **state)
{
	assert_string_equal(nbd_cmd_name(NBD_CMD_WRITE_ZEROES), "write_zeroes");
	assert_string_equal(nbd_cmd_name(99), "unknown");
	assert_string_equal(nbd_opt_name(NBD_OPT_GO), "go");
	assert_string_equal(nbd_opt_name(99), "unknown");
}

static void config_parse_listen__nbd_forms(void **state)
{
	struct config_listen l;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(config_parse_listen("nbd://127.0.0.1:10809", &l, err, sizeof(err)), 0);
	assert_int_equal(l.kind, CONFIG_LISTEN_NBD);
	assert_string_equal(l.host, "127.0.0.1");
	assert_int_equal(l.port, 10809);
	assert_null(l.path);
	free(l.uri);
	free(l.host);
	assert_int_equal(config_parse_listen("nbd://[::1]:0", &l, err, sizeof(err)), 0);
	assert_string_equal(l.host, "::1");
	free(l.uri);
	free(l.host);
	assert_int_equal(config_parse_listen("tcp://h:1", &l, err, sizeof(err)), 0);
	assert_int_equal(l.kind, CONFIG_LISTEN_TCP);
	free(l.uri);
	free(l.host);

	assert_int_equal(config_parse_listen("nbd+unix:///run/rdax/nbd.sock", &l, err, sizeof(err)),
			 0);
	assert_int_equal(l.kind, CONFIG_LISTEN_NBD_UNIX);
	assert_string_equal(l.path, "/run/rdax/nbd.sock");
	assert_int_equal(l.mode, 0600);
	assert_null(l.host);
	free(l.uri);
	free(l.path);
	assert_int_equal(config_parse_listen("nbd+unix:///s?mode=0660", &l, err, sizeof(err)), 0);
	assert_string_equal(l.path, "/s");
	assert_int_equal(l.mode, 0660);
	free(l.uri);
	free(l.path);
}

static void config_parse_listen__nbd_bad(void **state)
{
	struct config_listen l;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(config_parse_listen("nbd://host", &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "nbd://HOST:PORT"));
	assert_int_equal(config_parse_listen("nbd://:10809", &l, err, sizeof(err)), -EINVAL);
	assert_int_equal(config_parse_listen("nbd+unix://relative", &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "absolute"));
	assert_int_equal(config_parse_listen("nbd+unix:///", &l, err, sizeof(err)), -EINVAL);
	assert_int_equal(config_parse_listen("nbd+unix:///s?mode=999", &l, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(config_parse_listen("nbd+unix:///s?mode=01777", &l, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(config_parse_listen("nbd+unix:///s?owner=me", &l, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "mode=OCTAL"));
	char longp[200] = "nbd+unix:///";
	memset(longp + 12, 'a', 150);
	assert_int_equal(config_parse_listen(longp, &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "107"));
	assert_int_equal(config_parse_listen("nbds://h:1", &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not supported"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(nbd_greeting_encode__fixed_newstyle_no_zeroes),
	    cmocka_unit_test(nbd_client_flags_check__only_offered_flags),
	    cmocka_unit_test(nbd_opt_header__round_trip),
	    cmocka_unit_test(nbd_opt_reply_encode__layout),
	    cmocka_unit_test(nbd_opt_go_parse__valid),
	    cmocka_unit_test(nbd_opt_go_parse__bad_lengths),
	    cmocka_unit_test(nbd_export_name_reply_encode__zeroes),
	    cmocka_unit_test(nbd_info__payloads),
	    cmocka_unit_test(nbd_rep_server_encode__name_and_description),
	    cmocka_unit_test(nbd_transmission_flags__what_is_offered),
	    cmocka_unit_test(nbd_request__round_trip),
	    cmocka_unit_test(nbd_request_validate__valid),
	    cmocka_unit_test(nbd_request_validate__unknown_command),
	    cmocka_unit_test(nbd_request_validate__flags),
	    cmocka_unit_test(nbd_request_validate__lengths_and_ranges),
	    cmocka_unit_test(nbd_replies__layout),
	    cmocka_unit_test(nbd_errno_map__protocol_values),
	    cmocka_unit_test(nbd_names__known_and_unknown),
	    cmocka_unit_test(config_parse_listen__nbd_forms),
	    cmocka_unit_test(config_parse_listen__nbd_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
