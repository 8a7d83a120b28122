/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd_proto.h -- the NBD protocol's messages: encode, decode, validate
 *
 * Pure functions over byte buffers, no sockets and no volumes, so the unit
 * tests and a fuzzer can drive every branch. The values and layouts are
 * those of the upstream protocol document (NetworkBlockDevice/nbd,
 * doc/proto.md); everything on the wire is big-endian.
 *
 * Handshake (fixed newstyle only):
 *
 *   S: NBD_MAGIC (8) | NBD_OPTS_MAGIC (8) | handshake flags (2)
 *   C: client flags (4)
 *   C: NBD_OPTS_MAGIC (8) | option (4) | length (4) | data      (repeated)
 *   S: NBD_REP_MAGIC (8) | option (4) | reply type (4) | length (4) | data
 *
 * Transmission:
 *
 *   C: NBD_REQUEST_MAGIC (4) | flags (2) | type (2) | handle (8) | offset (8)
 *      | length (4) [| length bytes of data for a WRITE]
 *   S: simple reply: NBD_SIMPLE_REPLY_MAGIC (4) | error (4) | handle (8)
 *      [| data of a successful READ]
 *   S: structured chunk: NBD_STRUCTURED_REPLY_MAGIC (4) | flags (2) |
 *      type (2) | handle (8) | length (4) | payload
 *
 * Thread safety: every function is reentrant.
 */
#ifndef RDAXD_NBD_PROTO_H
#define RDAXD_NBD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- magics ---- */
#define NBD_MAGIC		   0x4e42444d41474943ULL /* "NBDMAGIC" */
#define NBD_OPTS_MAGIC		   0x49484156454f5054ULL /* "IHAVEOPT" */
#define NBD_REP_MAGIC		   0x0003e889045565a9ULL
#define NBD_REQUEST_MAGIC	   0x25609513U
#define NBD_SIMPLE_REPLY_MAGIC	   0x67446698U
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efU

/* ---- handshake ---- */
#define NBD_FLAG_FIXED_NEWSTYLE	  (1U << 0)
#define NBD_FLAG_NO_ZEROES	  (1U << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1U << 0)
#define NBD_FLAG_C_NO_ZEROES	  (1U << 1)

enum nbd_opt {
	NBD_OPT_EXPORT_NAME = 1,
	NBD_OPT_ABORT = 2,
	NBD_OPT_LIST = 3,
	NBD_OPT_STARTTLS = 5,
	NBD_OPT_INFO = 6,
	NBD_OPT_GO = 7,
	NBD_OPT_STRUCTURED_REPLY = 8,
	NBD_OPT_LIST_META_CONTEXT = 9,
	NBD_OPT_SET_META_CONTEXT = 10,
	NBD_OPT_EXTENDED_HEADERS = 11,
};

#define NBD_REP_ACK		    1U
#define NBD_REP_SERVER		    2U
#define NBD_REP_INFO		    3U
#define NBD_REP_FLAG_ERROR	    (1U << 31)
#define NBD_REP_ERR_UNSUP	    (NBD_REP_FLAG_ERROR | 1U)
#define NBD_REP_ERR_POLICY	    (NBD_REP_FLAG_ERROR | 2U)
#define NBD_REP_ERR_INVALID	    (NBD_REP_FLAG_ERROR | 3U)
#define NBD_REP_ERR_PLATFORM	    (NBD_REP_FLAG_ERROR | 4U)
#define NBD_REP_ERR_TLS_REQD	    (NBD_REP_FLAG_ERROR | 5U)
#define NBD_REP_ERR_UNKNOWN	    (NBD_REP_FLAG_ERROR | 6U)
#define NBD_REP_ERR_SHUTDOWN	    (NBD_REP_FLAG_ERROR | 7U)
#define NBD_REP_ERR_BLOCK_SIZE_REQD (NBD_REP_FLAG_ERROR | 8U)
#define NBD_REP_ERR_TOO_BIG	    (NBD_REP_FLAG_ERROR | 9U)

enum nbd_info {
	NBD_INFO_EXPORT = 0,
	NBD_INFO_NAME = 1,
	NBD_INFO_DESCRIPTION = 2,
	NBD_INFO_BLOCK_SIZE = 3,
};

/* ---- transmission flags (sent with the export) ---- */
#define NBD_FLAG_HAS_FLAGS	   (1U << 0)
#define NBD_FLAG_READ_ONLY	   (1U << 1)
#define NBD_FLAG_SEND_FLUSH	   (1U << 2)
#define NBD_FLAG_SEND_FUA	   (1U << 3)
#define NBD_FLAG_ROTATIONAL	   (1U << 4)
#define NBD_FLAG_SEND_TRIM	   (1U << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1U << 6)
#define NBD_FLAG_SEND_DF	   (1U << 7)
#define NBD_FLAG_CAN_MULTI_CONN	   (1U << 8)
#define NBD_FLAG_SEND_CACHE	   (1U << 10)
#define NBD_FLAG_SEND_FAST_ZERO	   (1U << 11)

/* ---- commands ---- */
enum nbd_cmd {
	NBD_CMD_READ = 0,
	NBD_CMD_WRITE = 1,
	NBD_CMD_DISC = 2,
	NBD_CMD_FLUSH = 3,
	NBD_CMD_TRIM = 4,
	NBD_CMD_CACHE = 5,
	NBD_CMD_WRITE_ZEROES = 6,
	NBD_CMD_BLOCK_STATUS = 7,
};

#define NBD_CMD_FLAG_FUA       (1U << 0)
#define NBD_CMD_FLAG_NO_HOLE   (1U << 1)
#define NBD_CMD_FLAG_DF	       (1U << 2)
#define NBD_CMD_FLAG_REQ_ONE   (1U << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1U << 4)

/* ---- structured replies ---- */
#define NBD_REPLY_FLAG_DONE	    (1U << 0)
#define NBD_REPLY_TYPE_NONE	    0U
#define NBD_REPLY_TYPE_OFFSET_DATA  1U
#define NBD_REPLY_TYPE_OFFSET_HOLE  2U
#define NBD_REPLY_TYPE_ERROR	    ((1U << 15) | 1U)
#define NBD_REPLY_TYPE_ERROR_OFFSET ((1U << 15) | 2U)

/* ---- error values (the protocol's own numbering) ---- */
#define NBD_EPERM     1U
#define NBD_EIO	      5U
#define NBD_ENOMEM    12U
#define NBD_EINVAL    22U
#define NBD_ENOSPC    28U
#define NBD_EOVERFLOW 75U
#define NBD_ENOTSUP   95U
#define NBD_ESHUTDOWN 108U

/* ---- sizes ---- */
#define NBD_GREETING_SIZE	   18 /* magic, opts magic, handshake flags */
#define NBD_CLIENT_FLAGS_SIZE	   4
#define NBD_OPT_HEADER_SIZE	   16
#define NBD_OPT_REPLY_HEADER_SIZE  20
#define NBD_EXPORT_NAME_REPLY_SIZE 134 /* size, flags, 124 zeros */
#define NBD_REQUEST_SIZE	   28
#define NBD_SIMPLE_REPLY_SIZE	   16
#define NBD_CHUNK_HEADER_SIZE	   20
#define NBD_DATA_CHUNK_PREFIX	   (NBD_CHUNK_HEADER_SIZE + 8) /* header + offset */

/* Strings (export names, messages) are at most this long (proto.md, "Conventions"). */
#define NBD_STRING_MAX 4096
/* Error messages this daemon sends are cut to this many bytes. */
#define NBD_MESSAGE_MAX 160

/* ---- handshake ---- */

/* nbd_greeting_encode -- the server's first NBD_GREETING_SIZE bytes (fixed newstyle, no zeroes) */
void nbd_greeting_encode(uint8_t buf[NBD_GREETING_SIZE]);

/*
 * nbd_client_flags_check -- the client's flags may only name what the
 * greeting offered; the server must drop the connection otherwise.
 * Returns 0 or -EPROTO.
 */
int nbd_client_flags_check(uint32_t flags);

struct nbd_opt_header {
	uint64_t magic;
	uint32_t option;
	uint32_t len; /* bytes of option data that follow */
};

/* nbd_opt_header_decode -- parse an option header; no checks */
void nbd_opt_header_decode(const uint8_t buf[NBD_OPT_HEADER_SIZE], struct nbd_opt_header *h);

/* nbd_opt_header_encode -- the client side, for tests */
void nbd_opt_header_encode(uint8_t buf[NBD_OPT_HEADER_SIZE], uint32_t option, uint32_t len);

/* nbd_opt_reply_encode -- an option reply header announcing @len bytes of data */
void nbd_opt_reply_encode(uint8_t buf[NBD_OPT_REPLY_HEADER_SIZE], uint32_t option, uint32_t type,
			  uint32_t len);

/* What NBD_OPT_INFO / NBD_OPT_GO ask for. */
struct nbd_opt_go {
	const char *name; /* inside the option data, NOT NUL-terminated */
	uint32_t name_len;
	uint16_t nreqs;
	bool want_name, want_description, want_block_size;
};

/*
 * nbd_opt_go_parse -- decode the data of NBD_OPT_INFO/NBD_OPT_GO:
 * name length (4), name, number of info requests (2), requests (2 each).
 * The lengths must add up to @len exactly and the name be at most
 * NBD_STRING_MAX bytes. Unknown info requests are ignored (as the document
 * says). Returns 0, or -EINVAL (*why says what is wrong).
 */
int nbd_opt_go_parse(const uint8_t *data, uint32_t len, struct nbd_opt_go *out, const char **why);

/*
 * nbd_export_name_reply_encode -- the reply to NBD_OPT_EXPORT_NAME: size,
 * transmission flags and, unless @no_zeroes, 124 zero bytes. Returns the
 * bytes written (10 or NBD_EXPORT_NAME_REPLY_SIZE).
 */
size_t nbd_export_name_reply_encode(uint8_t buf[NBD_EXPORT_NAME_REPLY_SIZE], uint64_t size,
				    uint16_t flags, bool no_zeroes);

/* nbd_info_export_encode -- NBD_INFO_EXPORT payload (12 bytes): type, size, flags */
size_t nbd_info_export_encode(uint8_t buf[12], uint64_t size, uint16_t flags);

/* nbd_info_block_size_encode -- NBD_INFO_BLOCK_SIZE payload (14 bytes) */
size_t nbd_info_block_size_encode(uint8_t buf[14], uint32_t minimum, uint32_t preferred,
				  uint32_t maximum);

/*
 * nbd_info_string_encode -- NBD_INFO_NAME / NBD_INFO_DESCRIPTION payload:
 * type (2) and @len bytes of @s, cut to fit @cap. Returns the bytes written.
 */
size_t nbd_info_string_encode(uint8_t *buf, size_t cap, uint16_t type, const char *s, size_t len);

/*
 * nbd_rep_server_encode -- NBD_REP_SERVER data: name length (4), name,
 * then @desc (may be NULL) as free text; cut to fit @cap (the name never
 * is: the caller sizes @cap for it). Returns the bytes written.
 */
size_t nbd_rep_server_encode(uint8_t *buf, size_t cap, const char *name, const char *desc);

/* ---- transmission ---- */

/* nbd_transmission_flags -- what this server offers; DF only with structured replies */
uint16_t nbd_transmission_flags(bool structured);

struct nbd_request {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t handle;
	uint64_t offset;
	uint32_t length;
};

/* nbd_request_decode -- parse a request header; no checks */
void nbd_request_decode(const uint8_t buf[NBD_REQUEST_SIZE], struct nbd_request *r);

/* nbd_request_encode -- the client side, for tests */
void nbd_request_encode(uint8_t buf[NBD_REQUEST_SIZE], const struct nbd_request *r);

/* What a request is checked against. */
struct nbd_export_limits {
	uint64_t size;	    /* bytes of the export */
	uint32_t max_block; /* largest READ/WRITE/WRITE_ZEROES length */
	bool structured;    /* structured replies negotiated (DF allowed on READ) */
	bool read_only;	    /* WRITE, WRITE_ZEROES, TRIM refused with NBD_EPERM */
};

/*
 * nbd_request_validate -- the one check of a request (magic aside) before
 * anything is done for it, as the document prescribes: an unknown or
 * unsupported command, or a flag not documented for the command (or not
 * negotiated) -> NBD_EINVAL; a length over max_block for READ, WRITE and
 * WRITE_ZEROES -> NBD_EINVAL; a range past the end (or wrapping) ->
 * NBD_ENOSPC for WRITE and WRITE_ZEROES, NBD_EINVAL for READ and TRIM.
 * FLUSH and DISC ignore offset and length. Returns 0 or the NBD error
 * value; *why (may be NULL) gets a message for humans.
 */
uint32_t nbd_request_validate(const struct nbd_request *r, const struct nbd_export_limits *e,
			      const char **why);

/* nbd_simple_reply_encode -- a simple reply header */
void nbd_simple_reply_encode(uint8_t buf[NBD_SIMPLE_REPLY_SIZE], uint32_t error, uint64_t handle);

/* nbd_chunk_header_encode -- a structured reply chunk header announcing @len payload bytes */
void nbd_chunk_header_encode(uint8_t buf[NBD_CHUNK_HEADER_SIZE], uint16_t flags, uint16_t type,
			     uint64_t handle, uint32_t len);

/*
 * nbd_data_chunk_prefix_encode -- the NBD_REPLY_TYPE_OFFSET_DATA chunk
 * header plus its offset, for @len data bytes that follow (len >= 1,
 * len <= UINT32_MAX - 8), marked final if @done.
 */
void nbd_data_chunk_prefix_encode(uint8_t buf[NBD_DATA_CHUNK_PREFIX], uint64_t handle,
				  uint64_t offset, uint32_t len, bool done);

/*
 * nbd_error_chunk_encode -- a final NBD_REPLY_TYPE_ERROR chunk: header,
 * error (non-zero), message length and @msg (may be NULL) cut to
 * NBD_MESSAGE_MAX bytes and to @cap. Returns the bytes written (at least
 * NBD_CHUNK_HEADER_SIZE + 6; @cap must allow that).
 */
size_t nbd_error_chunk_encode(uint8_t *buf, size_t cap, uint64_t handle, uint32_t error,
			      const char *msg);

/* nbd_errno_map -- a negative errno or RDAX_E_* of the engine as an NBD error value */
uint32_t nbd_errno_map(int code);

/* nbd_cmd_name -- "read", "write", ... or "unknown" */
const char *nbd_cmd_name(uint16_t type);

/* nbd_opt_name -- "go", "list", ... or "unknown" */
const char *nbd_opt_name(uint32_t option);

#endif
