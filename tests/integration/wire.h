/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.h -- a raw rdax protocol client for tests (frame.h + protobuf-c)
 *
 * Independent of librdax on purpose: it sends exactly the bytes a test asks
 * for, including frames no correct client would send, and decodes replies
 * itself, so tests can check what the daemon answers on the wire.
 *
 * Every receive is bounded by WIRE_TIMEOUT_MS. Functions that exchange one
 * request and its reply return the reply's Status.code (>= 0), or a negative
 * errno for a transport failure: -EPIPE when the daemon closed the
 * connection, -ETIMEDOUT, -EBADMSG for a reply that does not decode or does
 * not match the request (type or id).
 *
 * Thread safety: a struct wconn belongs to one thread.
 */
#ifndef RDAX_TEST_WIRE_H
#define RDAX_TEST_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"

#define WIRE_TIMEOUT_MS 60000

struct wconn {
	int fd;
	uint64_t next_id;
	uint32_t max_payload; /* from the HelloReply, 0 before */
	uint32_t max_body;
};

struct wreply {
	struct frame_header h;
	uint8_t *body;	  /* h.body_len bytes, malloc'd */
	uint8_t *payload; /* h.payload_len bytes, malloc'd */
};

/* wire_connect -- TCP connection to 127.0.0.1:@port; 0 or -errno */
int wire_connect(struct wconn *c, int port);

/* wire_close -- close (accepts a closed connection) */
void wire_close(struct wconn *c);

/* wire_send_all -- send exactly @len bytes; 0 or -errno (-EPIPE if closed) */
int wire_send_all(struct wconn *c, const void *buf, size_t len);

/*
 * wire_send_frame -- header (magic/version/type/@id, lengths from the body
 * and @payload_len) + @body (packed protobuf, may be NULL) + @payload
 * (@payload may be NULL with @payload_len > 0: then only the header
 * announces it). 0 or -errno.
 */
int wire_send_frame(struct wconn *c, uint16_t type, uint64_t id, const void *body,
		    size_t body_len, const void *payload, uint32_t payload_len);

/* wire_recv -- one reply frame (body and payload read whole); 0, -EPIPE, -ETIMEDOUT, -EBADMSG */
int wire_recv(struct wconn *c, struct wreply *r);

/* wreply_free -- release what wire_recv allocated */
void wreply_free(struct wreply *r);

/*
 * wreply_status -- the Status.code of any reply body (every reply's field 1
 * is a Status); the message is copied into @msg if not NULL. >= 0 or -EBADMSG.
 */
int wreply_status(const struct wreply *r, char *msg, size_t msglen);

/* wire_eof -- true if the daemon closes the connection (no further byte) within the bound */
bool wire_eof(struct wconn *c);

/* requests: each returns the status code (>= 0) or a negative transport error */
int wire_hello(struct wconn *c, const void *token, size_t token_len);
int wire_create(struct wconn *c, const char *name, uint64_t size);
int wire_delete(struct wconn *c, const char *name);
int wire_open(struct wconn *c, const char *name, uint32_t *handle, uint64_t *size);
int wire_close_volume(struct wconn *c, uint32_t handle);
int wire_write(struct wconn *c, uint32_t handle, uint64_t off, const void *buf, uint32_t len,
	       bool fsync);
int wire_read(struct wconn *c, uint32_t handle, uint64_t off, uint32_t len, void *buf);
int wire_fsync(struct wconn *c, uint32_t handle, uint64_t off, uint64_t len);
int wire_discard(struct wconn *c, uint32_t handle, uint64_t off, uint64_t len);
int wire_stat(struct wconn *c, uint32_t handle, uint64_t *dirty_bytes);

/* wire_body_* -- packed bodies for crafting frames by hand; *len set, malloc'd */
uint8_t *wire_body_write(uint32_t handle, uint64_t off, bool fsync, size_t *len);
uint8_t *wire_body_read(uint32_t handle, uint64_t off, uint32_t length, size_t *len);
uint8_t *wire_body_fsync(uint32_t handle, uint64_t off, uint64_t length, size_t *len);
uint8_t *wire_body_discard(uint32_t handle, uint64_t off, uint64_t length, size_t *len);
uint8_t *wire_body_open(const char *name, size_t *len);
uint8_t *wire_body_hello(const void *token, size_t token_len, uint32_t version, size_t *len);

#endif
