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
 * Over RDMA (RDAX_IT_RDMA, harness.h) the same bytes travel in the
 * message stream of an RDMA connection (client/transport_rdma.h) instead
 * of a socket; "closed" is then the daemon's disconnect.
 *
 * Thread safety: a struct wconn belongs to one thread.
 */
#ifndef RDAX_TEST_WIRE_H
#define RDAX_TEST_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "frame.h"

#define WIRE_TIMEOUT_MS 60000

struct rdma_tp;

struct wconn {
	int fd;		    /* TCP; -1 over RDMA */
	struct rdma_tp *tp; /* RDMA (RDAX_IT_RDMA) */
	uint64_t next_id;
	uint32_t max_payload; /* from the HelloReply, 0 before */
	uint32_t max_body;
};

struct wreply {
	struct frame_header h;
	uint8_t *body;	  /* h.body_len bytes, malloc'd */
	uint8_t *payload; /* h.payload_len bytes, malloc'd */
};

/* wire_connect -- TCP connection to 127.0.0.1:@port (RDMA: to RDAX_IT_RDMA:@port); 0 or -errno */
int wire_connect(struct wconn *c, int port);

/*
 * wire_connect_from -- wire_connect from the loopback address @src
 * ("127.0.0.2"; NULL: any), so a test can be several peers. TCP only.
 */
int wire_connect_from(struct wconn *c, int port, const char *src);

/* wire_close -- close (accepts a closed connection) */
void wire_close(struct wconn *c);

/* wire_send_all -- send exactly @len bytes; 0 or -errno (-EPIPE if closed) */
int wire_send_all(struct wconn *c, const void *buf, size_t len);

/*
 * wire_send_some -- send what the connection takes of @len bytes within
 * @timeout_ms: the count (0: nothing taken in that time, the daemon stopped
 * reading), or -errno.
 */
ssize_t wire_send_some(struct wconn *c, const void *buf, size_t len, int timeout_ms);

/*
 * wire_send_frame -- header (magic/version/type/@id, lengths from the body
 * and @payload_len) + @body (packed protobuf, may be NULL) + @payload
 * (@payload may be NULL with @payload_len > 0: then only the header
 * announces it). 0 or -errno.
 */
int wire_send_frame(struct wconn *c, uint16_t type, uint64_t id, const void *body, size_t body_len,
		    const void *payload, uint32_t payload_len);

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

/* ---- RDMA only (RDAX_IT_RDMA): one-sided access, as a client with direct access does ---- */

/* Where a volume is for one-sided access (its VOLUME_OPEN reply over RDMA). */
struct wire_direct {
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm_base;  /* the volume's first unit in the connection's notice space */
	uint32_t imm_shift; /* its unit (rdma_proto.h): pages, this client never asks for lines */
	bool durable;	    /* the daemon takes durable notices for it (imm_durable) */
};

/* wire_connect_direct -- wire_connect over RDMA, able to post one-sided writes and reads */
int wire_connect_direct(struct wconn *c, int port);

/*
 * wire_open_direct -- wire_open that also returns the direct-access fields;
 * -EBADMSG without. Like a client older than line notices, it does not ask
 * for them (VolumeOpenRequest.imm_line_units), so its notices name pages.
 */
int wire_open_direct(struct wconn *c, const char *name, uint32_t *handle, struct wire_direct *d);

/*
 * wire_rdma_write / wire_rdma_read -- one one-sided operation (<= 1 MiB)
 * through @d, waited for: 0, or the failure of the connection (-EACCES for
 * a remote access error: the rkey does not reach that memory from this
 * queue pair; -EPIPE when the daemon closed it). A failed operation leaves
 * the connection unusable, as RDMA does.
 */
int wire_rdma_write(struct wconn *c, const struct wire_direct *d, uint64_t off, const void *buf,
		    uint32_t len);
int wire_rdma_read(struct wconn *c, const struct wire_direct *d, uint64_t off, void *buf,
		   uint32_t len);

/*
 * wire_rdma_write_durable -- one one-sided write through @d with a durable
 * notice (rdma_proto.h, D), and the daemon's answer: its FsyncReply, which
 * must carry the notice's reply id. 0 with *@written_back (the reply's), the
 * reply's failure (-RDAX_E_*), -EBADMSG for a reply of another id or type,
 * or the connection's failure.
 */
int wire_rdma_write_durable(struct wconn *c, const struct wire_direct *d, uint64_t off,
			    const void *buf, uint32_t len, uint64_t *written_back);

/* wire_body_* -- packed bodies for crafting frames by hand; *len set, malloc'd */
uint8_t *wire_body_write(uint32_t handle, uint64_t off, bool fsync, size_t *len);
uint8_t *wire_body_read(uint32_t handle, uint64_t off, uint32_t length, size_t *len);
uint8_t *wire_body_fsync(uint32_t handle, uint64_t off, uint64_t length, size_t *len);
uint8_t *wire_body_discard(uint32_t handle, uint64_t off, uint64_t length, size_t *len);
uint8_t *wire_body_open(const char *name, size_t *len);
uint8_t *wire_body_hello(const void *token, size_t token_len, uint32_t version, size_t *len);

#endif
