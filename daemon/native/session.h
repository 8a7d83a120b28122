/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * session.h -- the protocol state of one connection: hello, open handles
 *
 * A handle names a volume opened on this connection. Handles are opaque to
 * clients; inside, the low 16 bits are a slot index + 1 and the high 16 bits
 * the slot's generation, so a closed handle is not valid again when its slot
 * is reused:
 *
 *   31              16 15               0
 *   |  generation     |  slot index + 1  |
 *
 * Holds: a request in progress that uses a volume (a READ reply not yet
 * sent, an fsync in the pool, a WRITE receiving its payload) holds the
 * handle's slot. VOLUME_CLOSE makes the handle invalid at once, but the
 * volume itself is closed only when the last hold is dropped, so the
 * mapping stays valid under every reply still in flight.
 *
 * Thread safety: none. A session belongs to one connection and is used only
 * on that connection's event-loop thread -- except session_delete(), which
 * may run on a pool thread once nothing else uses the session.
 */
#ifndef RDAXD_SESSION_H
#define RDAXD_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "acl.h"
#include "store.h"
#include "volume.h"

/* Open handles per connection. */
#define SESSION_MAX_HANDLES 1024

struct gate_vol; /* daemon/cluster/cluster_gate.h */

struct session_slot {
	struct volume *v; /* NULL: the slot is free */
	uint16_t gen;
	bool open; /* false once closed by the client; v lives on while holds > 0 */
	bool ro;   /* opened with read rights only (acl.h): writes, discards refused */
	uint32_t holds;
	/* a cluster volume: its gate, and the epoch of a replica link's open (0: a client) */
	const struct gate_vol *gate;
	uint64_t epoch;
};

/* Who the connection is and what it was refused (set by the transport before HELLO). */
struct session_access {
	struct acl_subject who;
	bool tls;	    /* the connection is encrypted */
	bool rdma;	    /* rdma://: a refusal names the primary's rdma:// address */
	bool plain_refused; /* a plaintext client where TLS is required */
};

struct session {
	struct store *store;
	bool hello_done;
	struct session_access access;
	char peer[64]; /* for log records: "ADDR:PORT" */
	struct session_slot *slots;
	unsigned nslots; /* slots allocated */
	unsigned nopen;	 /* slots with a volume (open or held) */
};

/* session_new -- fresh state for a connection from @peer; 0, -EINVAL, -ENOMEM */
int session_new(struct store *store, const char *peer, struct session **out);

/*
 * session_delete -- close every volume still open (whatever the holds: the
 * caller guarantees nothing uses them any more) and free. Accepts NULL.
 * Context: blocks on namespace locks (ns_volume_close).
 */
void session_delete(struct session **sp);

/*
 * session_handle_add -- give the opened volume @v (ownership passes to the
 * session) a new handle. Returns 0, -RDAX_E_TOO_BIG (SESSION_MAX_HANDLES
 * reached), -ENOMEM; on error the caller still owns @v.
 */
int session_handle_add(struct session *s, struct volume *v, uint32_t *handle);

/* session_handle_set_ro -- @handle (just added) may only be read (acl.h) */
void session_handle_set_ro(struct session *s, uint32_t handle);

/* session_handle_ro -- is @handle open read-only? (false for a handle not open) */
bool session_handle_ro(struct session *s, uint32_t handle);

/*
 * session_handle_fence -- a cluster volume's handle: its gate and the epoch
 * it was opened at (cluster_gate.h), checked on every request of it
 */
void session_handle_fence(struct session *s, uint32_t handle, const struct gate_vol *gate,
			  uint64_t epoch);

/* session_handle_get -- the volume of an open handle; 0 or -RDAX_E_NOT_OPEN */
int session_handle_get(struct session *s, uint32_t handle, struct volume **v);

/* session_handle_slot -- the open slot of @handle, or NULL */
struct session_slot *session_handle_slot(struct session *s, uint32_t handle);

/* session_handle_hold -- like session_handle_get, and keep the volume open until released */
int session_handle_hold(struct session *s, uint32_t handle, struct volume **v);

/*
 * session_handle_release -- drop one hold taken on @handle (open or closed
 * since). The last release of a closed handle closes its volume and
 * returns true: that may block on the namespace lock.
 */
bool session_handle_release(struct session *s, uint32_t handle);

/*
 * session_handle_close -- the client closes @handle: invalid from now on.
 * Returns -RDAX_E_NOT_OPEN for a handle not open, else 0; *vp gets the
 * volume if nothing holds it any more -- the caller then closes it with
 * store_volume_close() -- or NULL if the last hold will close it.
 */
int session_handle_close(struct session *s, uint32_t handle, struct volume **vp);

/* session_holds -- the holds on all handles (0 when nothing is in flight) */
unsigned session_holds(const struct session *s);

#endif
