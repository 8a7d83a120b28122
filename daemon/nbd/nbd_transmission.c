/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd_transmission.c -- the NBD transmission phase: requests, their validation, their jobs
 *
 * After NBD_OPT_GO / NBD_OPT_EXPORT_NAME (nbd_handshake.c) every request
 * header is validated in one function (nbd_request_validate) and acted on:
 * READ replies are gathered from the mapping, WRITE payloads received into
 * it, FLUSH / FUA / TRIM / WRITE_ZEROES run as jobs (nbd_conn.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "nbd_conn.h"
#include "repl_registry.h"
#include "vol_ack.h"
#include "write_log.h"

static const struct stream_limits nbd_limits = {
    .max_pending = NBD_CONN_MAX_PENDING,
    .max_bytes = SIZE_MAX, /* READ data is gathered from the mapping: only replies count */
};

/* can_dispatch -- may a new request be started? (updates the backpressure state) */
static bool can_dispatch(struct nbd_conn *c)
{
	if (c->s.conn.closing || c->s.conn.dead || c->s.parked)
		return false;
	return stream_can_take(&c->s, &nbd_limits);
}

/* req_job -- a request that runs in the fsync pool; EIO at once if out of memory */
static void req_job(struct nbd_conn *c, const struct nbd_request *r, enum nbd_job_kind kind)
{
	struct nbd_job *j = nbd_job_new(c, kind);
	if (!j) {
		nbd_req_error(c, r->handle, r->type, NBD_EIO, "server out of memory");
		return;
	}
	j->handle = r->handle;
	j->type = r->type;
	j->offset = r->offset;
	j->length = r->length;
	nbd_job_submit(c, j);
}

/* cmd_op -- the metrics' operation of an NBD command */
static enum metrics_op cmd_op(uint16_t type)
{
	switch (type) {
	case NBD_CMD_READ:
		return METRICS_OP_READ;
	case NBD_CMD_WRITE:
		return METRICS_OP_WRITE;
	case NBD_CMD_FLUSH:
		return METRICS_OP_FSYNC;
	case NBD_CMD_TRIM:
		return METRICS_OP_DISCARD;
	case NBD_CMD_WRITE_ZEROES:
		return METRICS_OP_WRITE_ZEROES;
	default:
		return METRICS_OP_OTHER;
	}
}

/* req_handle -- one request header (validated here, acted on or refused) */
static void req_handle(struct nbd_conn *c, const struct nbd_request *r)
{
	if (r->magic != NBD_REQUEST_MAGIC) {
		LOG_WARN("%s: bad request magic 0x%08" PRIx32 "; closing", c->s.conn.peer,
			 r->magic);
		conn_close(&c->s.conn, "bad request magic");
		return;
	}
	if (r->type == NBD_CMD_DISC) {
		/* requests in flight finish and their replies go out, then the socket closes */
		conn_close(&c->s.conn, "client disconnected");
		return;
	}
	const struct nbd_export_limits lim = {
	    .size = c->v->size,
	    .max_block = c->sh->max_block,
	    .structured = c->structured,
	    .read_only = c->ro,
	};
	const char *why;
	uint32_t err = nbd_request_validate(r, &lim, &why);
	if (err == 0 && r->type == NBD_CMD_READ && r->length &&
	    volume_range_bad(c->v, r->offset, r->length)) {
		/* never load from poison: the send would meet a machine check */
		why = "the range overlaps a bad block of the media (rdax namespace list shows it)";
		err = NBD_EIO;
	}
	if (!err && c->ro && r->type == NBD_CMD_FLUSH && vol_op_has_dirty(c->v)) {
		/* a read-only client's flush would write back what others wrote */
		why = "the export is read-only for this client and has unflushed writes";
		err = NBD_EPERM;
	}
	metrics_request(METRICS_NBD, cmd_op(r->type), 0);
	if (err) {
		char msg[NBD_MESSAGE_MAX];
		snprintf(msg, sizeof(msg),
			 "%s (offset %" PRIu64 ", length %" PRIu32 ", flags 0x%x)", why, r->offset,
			 r->length, r->flags);
		nbd_req_error(c, r->handle, r->type, err, msg);
		if (r->type != NBD_CMD_WRITE || r->length == 0)
			return;
		if (r->length > NBD_WRITE_SKIP_MAX) {
			LOG_WARN("%s: refused WRITE with a payload of %" PRIu32
				 " bytes, too large to skip; closing",
				 c->s.conn.peer, r->length);
			conn_close(&c->s.conn, "oversize write");
			return;
		}
		c->req = *r;
		stream_payload_begin(&c->s, NULL, r->length, NULL, 0); /* read and dropped */
		return;
	}
	c->requests++;
	switch (r->type) {
	case NBD_CMD_READ:
		if (r->length == 0)
			nbd_req_ok(c, r);
		else
			nbd_req_read(c, r);
		return;
	case NBD_CMD_WRITE:
		if (r->length == 0) {
			nbd_req_ok(c, r);
			return;
		}
		c->req = *r;
		struct repl_volume *rv = repl_registry_get(c->v);
		if (rv) /* recorded for absent replicas before the bytes land */
			repl_before_write(rv, r->offset, r->length);
		stream_payload_begin(&c->s, c->v->data + r->offset, r->length, c->v, r->offset);
		return;
	case NBD_CMD_FLUSH:
		req_job(c, r, JOB_FLUSH);
		return;
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
		/*
		 * Both zero the range through the engine's discard, which leaves the
		 * space allocated (a volume is always fully provisioned): reads see
		 * zeros after either, and NO_HOLE holds too.
		 */
		if (r->length == 0)
			nbd_req_ok(c, r);
		else
			req_job(c, r, JOB_ZERO);
		return;
	default:
		/* nbd_request_validate refused every other type */
		nbd_req_error(c, r->handle, r->type, NBD_EINVAL, "unknown command");
		return;
	}
}

/* nbd_transmission_payload_done -- a WRITE's payload is all in */
void nbd_transmission_payload_done(struct nbd_conn *c, bool kept)
{
	const struct nbd_request *r = &c->req;
	if (!kept)
		return; /* refused: its reply was queued with the header */
	metrics_bytes(METRICS_NBD, METRICS_OP_WRITE, r->length);
	/* stores first, then the mark, then the reply (or the FUA write-back) */
	int ret = volume_mark_written(c->v, r->offset, r->length);
	if (ret) {
		LOG_ERROR("%s: volume_mark_written(\"%s\", %" PRIu64 ", %" PRIu32 ") failed: %s",
			  c->s.conn.peer, c->v->name, r->offset, r->length, strerror(-ret));
		nbd_req_error(c, r->handle, r->type, NBD_EIO, "server could not track the write");
		return;
	}
	struct repl_volume *rv = repl_registry_get(c->v);
	if (rv) /* forwarded to every in-sync replica, after it landed (docs/cluster.md) */
		repl_write(rv, r->offset, r->length);
	if (r->flags & NBD_CMD_FLAG_FUA) {
		/* recorded now, acknowledged (and its fsync recorded) once durable */
		vol_ack_record_write(c->v, r->offset, r->length);
		req_job(c, r, JOB_FUA);
	} else if (vol_ack_write(c->v, r->offset, r->length)) {
		nbd_req_ok(c, r);
	} else {
		conn_fail(&c->s.conn, "power cut"); /* nothing acknowledged after it */
	}
}

/* nbd_transmission_input -- one request header, when the backlog allows it */
bool nbd_transmission_input(struct nbd_conn *c)
{
	struct stream *s = &c->s;
	/* can_dispatch first: it also lifts the backpressure once drained */
	if (!can_dispatch(c) || stream_in_avail(s) < NBD_REQUEST_SIZE)
		return false;
	struct nbd_request r;
	nbd_request_decode(stream_in_data(s), &r);
	stream_in_consume(s, NBD_REQUEST_SIZE);
	req_handle(c, &r);
	return true;
}

bool nbd_transmission_want_input(const struct nbd_conn *c)
{
	/* blocked (backpressure, a parked job): the next request would wait anyway */
	return !(c->s.parked || c->s.paused || stream_over(&c->s, &nbd_limits));
}

/* job_ack -- through the power cut's gate and into the write log (vol_ack.h); false: drop */
static bool job_ack(const struct nbd_job *j)
{
	const struct vol_op *op = &j->op;
	switch (j->kind) {
	case JOB_FLUSH:
		return vol_ack_fsync(op->v, op->mark, op->off, op->len, WLOG_FSYNC_FLUSH);
	case JOB_FUA:
		return vol_ack_fsync(op->v, op->mark, op->off, op->len, WLOG_FSYNC_FUA);
	case JOB_ZERO:
		return vol_ack_discard(
		    op->v, op->off, op->len,
		    WLOG_DISCARD_DURABLE |
			(j->type == NBD_CMD_WRITE_ZEROES ? WLOG_DISCARD_ZEROES : 0));
	default:
		return true;
	}
}

void nbd_transmission_job_done(struct nbd_conn *c, struct nbd_job *j)
{
	struct nbd_request r = {.type = j->type, .handle = j->handle};
	if (j->op.code == VOL_OP_CUT || (j->op.code == 0 && !job_ack(j))) {
		conn_fail(&c->s.conn, "power cut"); /* nothing acknowledged after it */
		return;
	}
	if (j->op.code) {
		LOG_ERROR("%s: %s(\"%s\", off=%" PRIu64 ", len=%" PRIu32 ") failed: %s",
			  c->s.conn.peer, nbd_cmd_name(j->type), j->op.v->name, j->offset,
			  j->length, strerror(-j->op.code));
		nbd_req_error(c, j->handle, j->type, nbd_errno_map(j->op.code),
			      "writing back failed");
	} else {
		nbd_req_ok(c, &r);
	}
}
