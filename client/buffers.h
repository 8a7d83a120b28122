/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * buffers.h -- rdax_buffer_alloc's buffers: memory registered for RDMA once
 *
 * A one-sided write or read goes through the transport's bounce ring: the
 * bytes are copied once on the client, because registering a buffer per
 * operation costs more than copying it (transport_rdma.h). An application
 * that moves much data from the same memory asks librdax for buffers
 * instead: whole pages, registered on the connection's transport when
 * allocated and on every transport a reconnect makes, so writes from them
 * and reads into them go straight to the device. Over tcp:// they are plain
 * memory. The connection keeps them (RDAX_BUFFERS_MAX) and unmaps what is
 * left when it is deleted.
 */
#ifndef RDAX_CLIENT_BUFFERS_H
#define RDAX_CLIENT_BUFFERS_H

#include "conn.h"

/*
 * conn_buffers_register -- register every buffer on the connection's new
 * transport. One that cannot be (the memlock limit) still works, copied
 * through the bounce ring; a warning says so.
 */
void conn_buffers_register(struct rdax_conn *c);

/* conn_buffers_free -- unmap every buffer (the transport is gone: conn_delete) */
void conn_buffers_free(struct rdax_conn *c);

#endif
