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
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_gate.h"
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
	if (c->fwd && !nbd_forward_room(c->fwd))
		return false; /* held writes and buffers at their bound: a completion kicks */
	return stream_can_take(&c->s, &nbd_limits);
}

/* ---- forwarded requests (nbd_forward.h) ---- */

/* A request forwarded to the primary, and what its reply needs. */
struct fwd_io {
	struct fwd_req r;
	struct nbd_conn *c;
	struct nbd_request req;
};

/* fwd_done -- the primary answered (the worker's thread): the reply; the forwarder kicks after */
static void fwd_done(struct fwd_req *fr)
{
	struct fwd_io *io = (struct fwd_io *)((char *)fr - offsetof(struct fwd_io, r));
	struct nbd_conn *c = io->c;
	c->s.conn.jobs--;
	if (fr->status) {
		free(fr->buf);
		nbd_req_error(c, io->req.handle, io->req.type, nbd_errno_map(fr->status),
			      fr->msg[0] ? fr->msg : "the volume's primary did not carry it out");
	} else if (fr->kind == FWD_READ) {
		nbd_req_read_buf(c, &io->req, fr->buf); /* the reply frees it */
	} else {
		if (fr->kind == FWD_WRITE)
			metrics_bytes(METRICS_NBD, METRICS_OP_WRITE, fr->len);
		free(fr->buf);
		nbd_req_ok(c, &io->req);
	}
	free(io);
	conn_flush_add(&c->s.conn); /* replies out before the loop sleeps */
}

/* fwd_send -- forward @r as @kind, @buf (READ: filled, WRITE: sent) taken; EIO if out of memory */
static void fwd_send(struct nbd_conn *c, const struct nbd_request *r, enum fwd_kind kind,
		     uint8_t *buf)
{
	struct fwd_io *io = calloc(1, sizeof(*io));
	if (!io) {
		free(buf);
		nbd_req_error(c, r->handle, r->type, NBD_EIO, "server out of memory");
		return;
	}
	io->c = c;
	io->req = *r;
	io->r.kind = kind;
	io->r.fua = kind == FWD_WRITE && (r->flags & NBD_CMD_FLAG_FUA);
	io->r.off = r->offset;
	io->r.len = kind == FWD_FLUSH ? 0 : r->length;
	io->r.buf = buf;
	io->r.done = fwd_done;
	c->s.conn.jobs++;
	nbd_forward_submit(c->fwd, &io->r);
}

/*
 * fwd_handle -- a valid request of a forwarded export (req_handle's part for
 * it): a WRITE's payload is received into a buffer first (payload_done
 * forwards it)
 */
static void fwd_handle(struct nbd_conn *c, const struct nbd_request *r)
{
	uint8_t *buf = NULL;
	switch (r->type) {
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
		if (r->length == 0) {
			nbd_req_ok(c, r);
			return;
		}
		buf = malloc(r->length);
		if (!buf) {
			LOG_ERROR("%s: out of memory for a forwarded %s of %" PRIu32
				  " bytes; closing",
				  c->s.conn.peer, nbd_cmd_name(r->type), r->length);
			conn_fail(&c->s.conn, "out of memory");
			return;
		}
		if (r->type == NBD_CMD_READ) {
			fwd_send(c, r, FWD_READ, buf);
			return;
		}
		c->req = *r;
		c->wbuf = buf;
		stream_payload_begin(&c->s, buf, r->length, NULL, 0);
		return;
	case NBD_CMD_FLUSH:
		if (c->ro) {
			/* a read-only client wrote nothing its flush could have to cover */
			nbd_req_ok(c, r);
			return;
		}
		fwd_send(c, r, FWD_FLUSH, NULL);
		return;
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
		/* the primary's discard: durable zeros, as on a local export */
		if (r->length == 0)
			nbd_req_ok(c, r);
		else
			fwd_send(c, r, FWD_DISCARD, NULL);
		return;
	default:
		nbd_req_error(c, r->handle, r->type, NBD_EINVAL, "unknown command");
		return;
	}
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
		LOG_PEER(LOG_LEVEL_INFO, c->s.conn.peer,
			 "%s: bad request magic 0x%08" PRIx32 "; closing", c->s.conn.peer,
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
	    .size = c->size,
	    .max_block = c->sh->max_block,
	    .structured = c->structured,
	    .read_only = c->ro,
	};
	const char *why;
	uint32_t err = nbd_request_validate(r, &lim, &why);
	int gate = err == 0 && c->gate ? cluster_gate_check(c->gate, 0) : 0;
	if (gate == -ENOENT) {
		why = "the volume is being deleted from the cluster";
		err = NBD_EIO;
	} else if (gate) {
		/* deposed (or past its lease) since the export began: its copy may be stale */
		why = "this node is no longer the volume's primary: connect again (any node "
		      "forwards to the new one)";
		err = NBD_EIO;
	}
	if (err == 0 && c->v && r->type == NBD_CMD_READ && r->length &&
	    volume_range_bad(c->v, r->offset, r->length)) {
		/* never load from poison: the send would meet a machine check */
		why = "the range overlaps a bad block of the media (rdax namespace list shows it)";
		err = NBD_EIO;
	}
	if (!err && c->v && c->ro && r->type == NBD_CMD_FLUSH && vol_op_has_dirty(c->v)) {
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
		if (r->type != NBD_CMD_WRITE || r->length == 0) {
			nbd_req_error(c, r->handle, r->type, err, msg);
			return;
		}
		if (r->length > NBD_WRITE_SKIP_MAX) {
			/* the hard disconnect: the payload is not read, nothing can match it */
			LOG_INFO("%s: refused WRITE with a payload of %" PRIu32
				 " bytes, too large to skip; closing",
				 c->s.conn.peer, r->length);
			nbd_req_error(c, r->handle, r->type, err, msg);
			conn_close(&c->s.conn, "oversize write");
			return;
		}
		/* the error goes out once the payload is read and dropped (payload_done) */
		c->req = *r;
		c->refused_error = err;
		snprintf(c->refused_msg, sizeof(c->refused_msg), "%s", msg);
		stream_payload_begin(&c->s, NULL, r->length, NULL, 0);
		return;
	}
	c->requests++;
	if (c->fwd) {
		fwd_handle(c, r);
		return;
	}
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
	if (!kept) {
		/* a refused WRITE: its payload is all read, now the client can match the error */
		nbd_req_error(c, r->handle, r->type, c->refused_error, c->refused_msg);
		c->refused_error = 0;
		return;
	}
	if (c->fwd) {
		/* the buffer goes to the forwarded WRITE (fwd_done frees it) */
		uint8_t *buf = c->wbuf;
		c->wbuf = NULL;
		fwd_send(c, r, FWD_WRITE, buf);
		return;
	}
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
	return !(c->s.parked || c->s.paused || stream_over(&c->s, &nbd_limits) ||
		 (c->fwd && !nbd_forward_room(c->fwd)));
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
		LOG_PEER(LOG_LEVEL_ERROR, c->s.conn.peer,
			 "%s: %s(\"%s\", off=%" PRIu64 ", len=%" PRIu32 ") failed: %s",
			 c->s.conn.peer, nbd_cmd_name(j->type), j->op.v->name, j->offset, j->length,
			 strerror(-j->op.code));
		nbd_req_error(c, j->handle, j->type, nbd_errno_map(j->op.code),
			      "writing back failed");
	} else {
		nbd_req_ok(c, &r);
	}
}
