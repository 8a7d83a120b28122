/* SPDX-License-Identifier: BSD-3-Clause */
/* conn.c -- the engine of a librdax connection: window, send queue, replies */
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "buffers.h"
#include "faults.h"
#include "frame.h"
#include "log.h"
#include "pb_arena.h"
#include "rdax.pb-c.h"
#include "psk_file.h"
#include "resume.h"
#include "transport_rdma.h"
#include "wake_cost.h"

/* iovecs gathered for one sendmsg (two per request: header+body, payload) */
#define TX_IOV_MAX 64

/* The body of each reply type (type 0: the error reply to a frame the server refused). */
static const ProtobufCMessageDescriptor *const reply_desc[FRAME_TYPE_MAX] = {
    [0] = &rdax__status_reply__descriptor,
    [FRAME_HELLO] = &rdax__hello_reply__descriptor,
    [FRAME_VOLUME_CREATE] = &rdax__status_reply__descriptor,
    [FRAME_VOLUME_DELETE] = &rdax__status_reply__descriptor,
    [FRAME_VOLUME_LIST] = &rdax__volume_list_reply__descriptor,
    [FRAME_VOLUME_INFO] = &rdax__volume_info_reply__descriptor,
    [FRAME_VOLUME_OPEN] = &rdax__volume_open_reply__descriptor,
    [FRAME_VOLUME_CLOSE] = &rdax__status_reply__descriptor,
    [FRAME_WRITE] = &rdax__write_reply__descriptor,
    [FRAME_READ] = &rdax__read_reply__descriptor,
    [FRAME_FSYNC] = &rdax__fsync_reply__descriptor,
    [FRAME_DISCARD] = &rdax__status_reply__descriptor,
    [FRAME_STAT] = &rdax__stat_reply__descriptor,
    [FRAME_NAMESPACE_LIST] = &rdax__namespace_list_reply__descriptor,
    [FRAME_REPLICA_DIGEST] = &rdax__replica_digest_reply__descriptor,
    [FRAME_POWERCUT] = &rdax__powercut_reply__descriptor,
    [FRAME_UNSAFE_CLEAR] = &rdax__unsafe_clear_reply__descriptor,
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int conn_set_error(struct rdax_conn *c, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
	return code;
}

const char *conn_op_message(const struct rdax_conn *c, const struct conn_op *op)
{
	if (op->errmsg && op->errmsg[0])
		return op->errmsg;
	if (c->broken && op->status == c->broken)
		return c->broken_msg;
	return rdax_strerror(op->status);
}

int conn_new(const struct rdax_conn_opts *opts, struct rdax_conn **out)
{
	struct rdax_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = -1;
	c->queue_depth = opts ? opts->queue_depth : RDAX_DEFAULT_QUEUE_DEPTH;
	c->timeout_ms = opts ? opts->timeout_ms : 0;
	spin_window_init(&c->spin, 0); /* tcp:// does not spin; conn_connect_rdma sets the cap */
	c->max_body = FRAME_DEFAULT_MAX_BODY;
	c->max_inflight_bytes = CONN_MIN_INFLIGHT_BYTES;
	c->next_id = 1;
	c->rx_state = RX_HEADER;
	c->cq = calloc(c->queue_depth, sizeof(*c->cq));
	if (!c->cq)
		goto err_free_conn;
	c->rx_buf = malloc(CONN_RX_BUF_SIZE);
	if (!c->rx_buf)
		goto err_free_cq;
	*out = c;
	return 0;

err_free_cq:
	free(c->cq);
err_free_conn:
	free(c);
	return -ENOMEM;
}

/* req_clear -- free what @req owns (its frame if not inline, message, control reply) */
static void req_clear(struct conn_req *req)
{
	if (req->buf != req->inline_buf)
		free(req->buf);
	free(req->errmsg);
	if (req->reply)
		protobuf_c_message_free_unpacked(req->reply, NULL);
}

static void req_free(struct conn_req *req)
{
	req_clear(req);
	free(req);
}

/*
 * Finished requests are kept for reuse, instead of a calloc and a free per
 * request: enough for the default queue depth twice over. With the arena
 * and the plain forms below, librdax went from 3,608 to 1,589 instructions
 * per 4 KiB write at QD32 (callgrind; libnbd: 2,318).
 */
#define CONN_REQ_SPARE_MAX 64

/* req_alloc -- a zeroed request: a spare one, or calloc'd; NULL if out of memory */
static struct conn_req *req_alloc(struct rdax_conn *c)
{
	struct conn_req *req = c->req_spare;
	if (!req)
		return calloc(1, sizeof(*req));
	c->req_spare = req->next_send;
	c->nreq_spare--;
	memset(req, 0, offsetof(struct conn_req, inline_buf));
	return req;
}

/* req_put -- a finished request: free what it owns, keep it for reuse (or free it) */
static void req_put(struct rdax_conn *c, struct conn_req *req)
{
	if (c->nreq_spare >= CONN_REQ_SPARE_MAX) {
		req_free(req);
		return;
	}
	req_clear(req);
	req->next_send = c->req_spare;
	c->req_spare = req;
	c->nreq_spare++;
}

/* Data replies (WRITE, READ, FSYNC) are read and dropped at once: unpacked in a pb_arena. */
#define RX_ARENA_SIZE 512

void conn_op_free(struct conn_op *op)
{
	if (!op)
		return;
	held_buf_put(op->hbuf);
	free(op->ctl_frame);
	free(op->ctl_own);
	free(op->errmsg);
	if (op->reply)
		protobuf_c_message_free_unpacked(op->reply, NULL);
	free(op);
}

void conn_delete(struct rdax_conn **cp)
{
	struct rdax_conn *c = cp ? *cp : NULL;
	if (!c)
		return;
	if (c->tls) {
		tls_io_release(c->tls);
		free(c->tls);
	}
	tls_client_delete(&c->tls_creds);
	if (c->fd >= 0)
		close(c->fd);
	/* the QP goes first: nothing may land in a buffer after it is freed */
	rdma_tp_delete(&c->rdma);
	conn_buffers_free(c);
	/* answered but not fully sent: only on the send queue */
	for (struct conn_req *req = c->sendq_head, *next; req; req = next) {
		next = req->next_send;
		if (req->replied)
			req_free(req);
	}
	for (struct conn_req *req = c->inflight_head, *next; req; req = next) {
		next = req->next;
		req_free(req);
	}
	for (struct conn_op *op = c->ops_head, *next; op; op = next) {
		next = op->next;
		conn_op_free(op);
	}
	for (struct conn_req *req = c->req_spare, *next; req; req = next) {
		next = req->next_send;
		free(req);
	}
	for (unsigned i = 0; i < c->cq_count; i++)
		free(c->cq[(c->cq_head + i) % c->queue_depth].errmsg);
	for (unsigned i = 0; i < c->nnamespaces; i++) {
		free(c->namespaces[i].path);
		free(c->namespaces[i].mode);
	}
	free(c->namespaces);
	free(c->server_version);
	free(c->closing_msg);
	free(c->urls);
	rdax_conn_opts_delete(&c->opts);
	free(c->rx_body);
	free(c->rx_buf);
	free(c->cq);
	free(c);
	*cp = NULL;
}

/*
 * Before HELLO is answered, a TLS connection the server ends has most likely
 * been refused: TLS 1.3 lets a client finish its handshake before the
 * server has checked the client's certificate.
 */
#define TLS_REFUSED_HINT                                                                           \
	" (the server ended the connection after the TLS handshake: it may not accept this "       \
	"client's certificate -- another CA, expired -- or require one)"

/* --- connecting --------------------------------------------------------- */

/* connect_one -- connect a non-blocking socket to @ai within the timeout; the fd or -errno */
static int connect_one(const struct rdax_conn *c, const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int ret = 0;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS && errno != EINTR) {
		ret = -errno;
		goto err_close;
	}
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int64_t deadline = c->timeout_ms > 0 ? now_ms() + c->timeout_ms : -1;
	for (;;) {
		int wait = -1;
		if (deadline >= 0) {
			int64_t left = deadline - now_ms();
			wait = left > 0 ? (int)left : 0;
		}
		int n = poll(&p, 1, wait);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto err_close;
		}
		if (n == 0) {
			ret = -ETIMEDOUT;
			goto err_close;
		}
		break;
	}
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0) {
		ret = -errno;
		goto err_close;
	}
	if (soerr) {
		ret = -soerr;
		goto err_close;
	}
	return fd;

err_close:
	close(fd);
	return ret;
}

int conn_connect(struct rdax_conn *c, const char *host, const char *port, bool numeric_host,
		 char *err, size_t errlen)
{
	snprintf(c->peer, sizeof(c->peer), numeric_host ? "[%s]:%s" : "%s:%s", host, port);
	struct addrinfo hints;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (numeric_host ? AI_NUMERICHOST : 0);
	struct addrinfo *res = NULL;
	int r = getaddrinfo(host, port, &hints, &res);
	if (r) {
		int ret = r == EAI_AGAIN    ? -EAGAIN
			  : r == EAI_MEMORY ? -ENOMEM
			  : r == EAI_SYSTEM ? -errno
					    : -EHOSTUNREACH;
		snprintf(err, errlen, "resolve %s: %s", host,
			 r == EAI_SYSTEM ? strerror(-ret) : gai_strerror(r));
		return ret;
	}
	int ret = -EHOSTUNREACH;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = connect_one(c, ai);
		if (fd < 0) {
			ret = fd;
			continue;
		}
		int one = 1;
		if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
			LOG_DEBUG("setsockopt(TCP_NODELAY) on %s: %s", c->peer, strerror(errno));
		c->fd = fd;
		ret = 0;
		break;
	}
	freeaddrinfo(res);
	if (ret == -ETIMEDOUT)
		snprintf(err, errlen, "connect %s: no answer within %d ms", c->peer, c->timeout_ms);
	else if (ret)
		snprintf(err, errlen, "connect %s: %s", c->peer, strerror(-ret));
	return ret;
}

int conn_start_tls(struct rdax_conn *c, const struct rdax_conn_opts *opts, const char *host,
		   char *err, size_t errlen)
{
	struct tls_client_opts o = {
	    .cert_dir = opts ? opts->tls_cert_dir : NULL,
	    .psk_file = opts ? opts->tls_psk_file : NULL,
	    .username = opts ? opts->tls_username : NULL,
	};
	int ret = tls_client_new(&o, &c->tls_creds, err, errlen);
	if (ret)
		return ret;
	c->tls = calloc(1, sizeof(*c->tls));
	if (!c->tls) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	char why[CONN_ERR_MAX];
	gnutls_session_t sess;
	ret =
	    tls_client_handshake(c->tls_creds, c->fd, host, c->timeout_ms, &sess, why, sizeof(why));
	if (ret == 0 && tls_io_start(c->tls, sess, c->fd) < 0) {
		gnutls_deinit(sess);
		snprintf(why, sizeof(why), "%s", strerror(ENOMEM));
		ret = -ENOMEM;
	}
	if (ret) {
		free(c->tls);
		c->tls = NULL;
		snprintf(err, errlen, "%s: %s", c->peer, why);
	}
	return ret;
}

/* connect_rdma -- the transport, with the PSK's signature if the options name one */
static int connect_rdma(struct rdax_conn *c, const struct rdax_conn_opts *opts, const char *host,
			const char *port, char *err, size_t errlen)
{
	if (!opts || !opts->tls_psk_file)
		return rdma_tp_connect(host, port, c->timeout_ms, RDMA_TP_BOUNCE, &c->rdma, err,
				       errlen);
	/* a PSK signs the connection request (rdma_auth.h) */
	struct psk_entry *e;
	size_t n;
	int ret = psk_file_read(opts->tls_psk_file, &e, &n, err, errlen);
	if (ret)
		return ret;
	size_t i = 0;
	while (opts->tls_username && i < n && strcmp(e[i].user, opts->tls_username) != 0)
		i++;
	if (i == n) {
		snprintf(err, errlen, "PSK file %s: no user %s in it", opts->tls_psk_file,
			 opts->tls_username);
		psk_file_free(&e, n);
		return -EINVAL;
	}
	struct rdma_tp_auth auth = {e[i].user, e[i].key, e[i].key_len};
	ret = rdma_tp_connect_auth(host, port, c->timeout_ms, RDMA_TP_BOUNCE, &auth, &c->rdma, err,
				   errlen);
	psk_file_free(&e, n);
	return ret;
}

int conn_connect_rdma(struct rdax_conn *c, const struct rdax_conn_opts *opts, const char *host,
		      const char *port, bool numeric_host, char *err, size_t errlen)
{
	snprintf(c->peer, sizeof(c->peer), numeric_host ? "[%s]:%s" : "%s:%s", host, port);
	spin_window_init(&c->spin, busy_poll_cap(opts ? opts->busy_poll_us : RDAX_BUSY_POLL_AUTO));
	int ret = connect_rdma(c, opts, host, port, err, errlen);
	if (ret == 0)
		conn_buffers_register(c);
	return ret;
}

/* --- operations and their requests -------------------------------------- */

struct conn_op *conn_op_new(enum conn_op_kind kind)
{
	struct conn_op *op = calloc(1, sizeof(*op));
	if (op)
		op->kind = kind;
	return op;
}

int conn_op_new_control(struct rdax_conn *c, uint16_t type, const ProtobufCMessage *msg,
			struct conn_op **out)
{
	size_t size = protobuf_c_message_get_packed_size(msg);
	if (size > c->max_body)
		return conn_set_error(c, -RDAX_E_TOO_BIG,
				      "%s request of %zu bytes exceeds the server's limit of %u",
				      frame_type_name(type), size, c->max_body);
	struct conn_op *op = conn_op_new(OP_CONTROL);
	if (!op)
		return conn_set_error(c, -ENOMEM, "%s", strerror(ENOMEM));
	op->ctl_frame = malloc(FRAME_HEADER_SIZE + size);
	if (!op->ctl_frame) {
		free(op);
		return conn_set_error(c, -ENOMEM, "%s", strerror(ENOMEM));
	}
	protobuf_c_message_pack(msg, op->ctl_frame + FRAME_HEADER_SIZE);
	op->ctl_len = FRAME_HEADER_SIZE + size;
	op->ctl_type = type;
	*out = op;
	return 0;
}

/* ctl_repack -- pack a control op's request again (op->ctl_msg, with the volume's handle) */
static int ctl_repack(struct rdax_conn *c, struct conn_op *op)
{
	if (op->ctl_handle && op->vol)
		*op->ctl_handle = op->vol->handle;
	size_t size = protobuf_c_message_get_packed_size(op->ctl_msg);
	if (size > c->max_body)
		return -RDAX_E_TOO_BIG;
	op->ctl_frame = malloc(FRAME_HEADER_SIZE + size);
	if (!op->ctl_frame)
		return -ENOMEM;
	protobuf_c_message_pack(op->ctl_msg, op->ctl_frame + FRAME_HEADER_SIZE);
	op->ctl_len = FRAME_HEADER_SIZE + size;
	return 0;
}

/* op_fail -- record the first error of @op (taking @msg, may be NULL) and stop issuing parts */
static void op_fail(struct conn_op *op, int code, char *msg)
{
	if (!op->status) {
		op->status = code;
		op->errmsg = msg;
	} else {
		free(msg);
	}
	op->all_issued = true;
	op->tail_fsync = false;
}

/* Times one operation is sent again because the server's verifier changed under it. */
#define CONN_MAX_REDO 4

/* op_fail_msg -- op_fail with a formatted message */
static void op_fail_msg(struct conn_op *op, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void op_fail_msg(struct conn_op *op, int code, const char *fmt, ...)
{
	char *m = malloc(CONN_ERR_MAX);
	if (m) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(m, CONN_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	op_fail(op, code, m);
}

static void op_rewind(struct conn_op *op);

/* op_redo -- @op must go again on a new connection (c->reverify); false past CONN_MAX_REDO */
static bool op_redo(struct rdax_conn *c, struct conn_op *op)
{
	if (++op->redo > CONN_MAX_REDO) {
		op_fail_msg(op, -EIO,
			    "volume \"%s\": the server's verifier changed %u times during this "
			    "request (restarts or failovers one after another); giving up",
			    op->vol->name, CONN_MAX_REDO);
		return false;
	}
	op_rewind(op);
	c->reverify = true;
	return true;
}

/*
 * op_verify -- a finished write or fsync against the verifier (held.h): a
 * plain write is remembered as held; a durable write or an fsync checks the
 * writes it covers. Returns true when @op must be sent again after a resume
 * (c->reverify is set), false when it is finished (op->status may now be
 * -EIO: acknowledged writes were lost and are not held to send again).
 */
static bool op_verify(struct rdax_conn *c, struct conn_op *op)
{
	struct rdax_volume *v = op->vol;
	if (v && op->kind == OP_CONTROL && op->ctl_type == FRAME_DISCARD && c->resume_ms) {
		/* durable zeros now: an older held write resent there would bring its bytes back */
		held_forget(&v->held, op->offset, op->length, op->seq);
		return false;
	}
	if (!v || op->internal || (op->kind != OP_WRITE && op->kind != OP_FSYNC))
		return false;
	if (!op->has_verifier)
		op->verifier = v->verifier; /* one-sided writes, an older server: the volume's */
	uint64_t was = v->verifier;
	bool durable = op->kind == OP_FSYNC || op->durable;
	if (durable && rdax_faults.client_no_verifier) {
		v->verifier = op->verifier; /* the control: nothing compared, the fsync succeeds */
		return false;
	}
	if (!c->resume_ms) {
		/* nothing is held: a change can only be reported, never repaired */
		if (durable && (op->verifier_mixed || (was && op->verifier != was)))
			op_fail_msg(op, -EIO,
				    "volume \"%s\": the server's verifier changed (%016" PRIx64
				    " to %016" PRIx64 "): writes it acknowledged before may be "
				    "lost",
				    v->name, was, op->verifier);
		v->verifier = op->verifier;
		return false;
	}
	if (op->verifier_mixed)
		return op_redo(c, op);
	if (op->kind == OP_WRITE) {
		if (op->durable)
			held_forget(&v->held, op->offset, op->length, op->seq);
		else
			held_note(&v->held, &c->budget, op->offset, op->length, op->wbuf, op->seq,
				  op->verifier);
		v->verifier = op->verifier;
		return false;
	}
	/* an fsync; rdax_fsync's length 0 (to the end) and the whole volume are alike */
	uint64_t len = op->offset == 0 && op->length >= v->size ? 0 : op->length;
	struct held_verdict vd;
	held_check(&v->held, op->offset, len, op->seq, op->verifier, &vd);
	if (!vd.lost_bytes && !vd.overflow && vd.resend_bytes)
		return op_redo(c, op);
	if (vd.lost_bytes)
		op_fail_msg(op, -EIO,
			    "volume \"%s\": %" PRIu64 " bytes from offset %" PRIu64
			    " were acknowledged by an earlier run of the server (verifier "
			    "%016" PRIx64 ", now %016" PRIx64 ") and are not held to send again: "
			    "they may be lost",
			    v->name, vd.lost_bytes, vd.lost_off, vd.lost_verifier, op->verifier);
	else if (vd.overflow)
		op_fail_msg(op, -EIO,
			    "volume \"%s\": writes acknowledged by an earlier run of the server "
			    "(more than %u unsynced writes: not each remembered) may be lost",
			    v->name, HELD_MAX_RECORDS);
	held_settle(&v->held, &c->budget, op->offset, len, op->seq, op->verifier);
	v->verifier = op->verifier;
	return false;
}

/* internal_done -- a resend of held bytes ended: on success its records take the new verifier */
static void internal_done(struct rdax_conn *c, struct conn_op *op)
{
	if (!op->status && !c->lost && op->all_issued) {
		if (!op->has_verifier)
			op->verifier = op->vol->verifier;
		if (!op->verifier_mixed)
			held_resent(&op->vol->held, op->hbuf, op->offset, op->length, op->verifier);
	}
	held_buf_put(op->hbuf);
	op->hbuf = NULL;
	conn_op_free(op);
}

/* op_finish -- @op has no request left: take it off the active list and report it */
static void op_finish(struct rdax_conn *c, struct conn_op *op)
{
	if (!op->status && !c->lost && op_verify(c, op))
		return; /* sent again after the resume that c->reverify asks for */
	if (c->issue_cursor == op)
		c->issue_cursor = op->next;
	if (op->prev)
		op->prev->next = op->next;
	else
		c->ops_head = op->next;
	if (op->next)
		op->next->prev = op->prev;
	else
		c->ops_tail = op->prev;
	op->prev = op->next = NULL;
	op->done = true;
	if (op->internal) {
		internal_done(c, op);
		return;
	}
	if (!op->async)
		return; /* its caller is waiting for it in conn_op_wait */

	struct conn_completion *e = &c->cq[(c->cq_head + c->cq_count) % c->queue_depth];
	c->cq_count++; /* room: nasync <= queue_depth counts every unreaped async op */
	e->c.cookie = op->cookie;
	e->c.status = op->status;
	e->c.op = op->kind == OP_WRITE	? RDAX_OP_WRITE
		  : op->kind == OP_READ ? RDAX_OP_READ
					: RDAX_OP_FSYNC;
	e->c.bytes = op->kind == OP_FSYNC ? op->written_back : op->bytes;
	e->errmsg = NULL;
	if (op->status)
		e->errmsg = strdup(conn_op_message(c, op)); /* NULL: rdax_strerror at reap time */
	op->vol->ops_active--;
	c->nasync_active--;
	conn_op_free(op);
}

void conn_op_end(struct rdax_conn *c, struct conn_op *op)
{
	op_finish(c, op);
}

static void inflight_unlink(struct rdax_conn *c, struct conn_req *req)
{
	if (req->prev)
		req->prev->next = req->next;
	else
		c->inflight_head = req->next;
	if (req->next)
		req->next->prev = req->prev;
	else
		c->inflight_tail = req->prev;
	req->prev = req->next = NULL;
}

/* req_finish -- @req is sent and answered: account its result to its op, free it */
static void req_finish(struct rdax_conn *c, struct conn_req *req)
{
	struct conn_op *op = req->op;
	c->ninflight--;
	c->inflight_bytes -= req->window_bytes;
	if (req->status) {
		op_fail(op, req->status, req->errmsg);
		req->errmsg = NULL;
	} else {
		if (req->type == FRAME_WRITE)
			op->bytes += req->payload_len;
		else if (req->type == FRAME_READ)
			op->bytes += req->read_len;
		op->written_back += req->written_back;
		if (req->has_verifier) {
			if (!op->has_verifier)
				op->verifier = req->verifier;
			else if (op->verifier != req->verifier)
				op->verifier_mixed = true;
			op->has_verifier = true;
		}
		if (req->reply) {
			op->reply = req->reply;
			req->reply = NULL;
		}
	}
	op->parts_left--;
	req_put(c, req);
	if (op->all_issued && op->parts_left == 0)
		op_finish(c, op);
}

/* req_new -- a request of @type whose header + @body (packed) is in req->buf */
static struct conn_req *req_new(struct rdax_conn *c, uint16_t type, const ProtobufCMessage *body)
{
	struct conn_req *req = req_alloc(c);
	if (!req)
		return NULL;
	size_t size = protobuf_c_message_get_packed_size(body);
	req->buf_len = FRAME_HEADER_SIZE + size;
	req->buf = req->buf_len <= sizeof(req->inline_buf) ? req->inline_buf : malloc(req->buf_len);
	if (!req->buf) {
		req_put(c, req);
		return NULL;
	}
	protobuf_c_message_pack(body, req->buf + FRAME_HEADER_SIZE);
	req->type = type;
	return req;
}

/*
 * The WRITE and READ requests are encoded by hand, as protobuf-c would
 * encode them (proto/rdax.proto: handle = 1, offset = 2, then fsync or
 * length = 3, all varints, in field order): sizing and packing them
 * through protobuf-c's descriptors was ~400 instructions per request.
 */

/* varint_put -- @v as a varint at @p; returns its length (at most 10) */
static size_t varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/*
 * req_new_data -- a WRITE (@third: fsync, if @has_third) or READ (@third:
 * length) request with its body encoded in the request's inline buffer
 */
static struct conn_req *req_new_data(struct rdax_conn *c, uint16_t type, uint32_t handle,
				     uint64_t offset, uint32_t third, bool has_third)
{
	/* header + 3 keys + varints of 5, 10 and 5 bytes: 55 bytes at most */
	_Static_assert(FRAME_HEADER_SIZE + 3 + 5 + 10 + 5 <=
			   sizeof(((struct conn_req *)0)->inline_buf),
		       "inline_buf holds a data request");
	struct conn_req *req = req_alloc(c);
	if (!req)
		return NULL;
	uint8_t *p = req->inline_buf + FRAME_HEADER_SIZE;
	size_t n = 0;
	p[n++] = 1 << 3; /* field 1, varint */
	n += varint_put(p + n, handle);
	p[n++] = 2 << 3;
	n += varint_put(p + n, offset);
	if (has_third) {
		p[n++] = 3 << 3;
		n += varint_put(p + n, third);
	}
	req->buf = req->inline_buf;
	req->buf_len = FRAME_HEADER_SIZE + n;
	req->type = type;
	return req;
}

/* op_direct -- are the WRITE/READ requests of @op one-sided RDMA operations? */
static bool op_direct(const struct rdax_conn *c, const struct conn_op *op)
{
	return c->rdma && op->vol && op->vol->direct &&
	       (op->kind == OP_WRITE || op->kind == OP_READ);
}

/* part_size -- payload bytes of the next WRITE/READ request of @op (0 for other requests) */
static uint32_t part_size(const struct rdax_conn *c, const struct conn_op *op)
{
	if ((op->kind != OP_WRITE && op->kind != OP_READ) || op->issued >= op->length)
		return 0;
	uint64_t left = op->length - op->issued;
	uint32_t max = c->max_payload;
	if (op_direct(c, op)) {
		/*
		 * one-sided parts end at RDMA_TP_PART_MAX (2 MiB) boundaries of the
		 * volume: an aligned 2 MiB write is one notice, one huge dirty entry
		 */
		uint64_t pos = op->offset + op->issued;
		max = RDMA_TP_PART_MAX - (uint32_t)(pos % RDMA_TP_PART_MAX);
	}
	return left < max ? (uint32_t)left : max;
}

/* fsync_req -- an FSYNC request for [offset, offset + length) (length 0: to the end) */
static struct conn_req *fsync_req(struct rdax_conn *c, uint32_t handle, uint64_t offset,
				  uint64_t length, bool hammer)
{
	Rdax__FsyncRequest f = RDAX__FSYNC_REQUEST__INIT;
	f.handle = handle;
	f.has_offset = true;
	f.offset = offset;
	f.has_length = length > 0;
	f.length = length;
	f.has_hammer = hammer;
	f.hammer = hammer;
	return req_new(c, FRAME_FSYNC, &f.base);
}

/*
 * issue_part -- make the next request of @op and queue it.
 *
 * A durable write of more than one request goes as plain WRITEs followed by
 * one FSYNC of the whole range, sent right behind them without waiting:
 * the server handles a connection's requests in order, so the FSYNC covers
 * every WRITE before it. That is N + 1 requests, one write-back pass and
 * one fence, in one pipelined round trip -- where fsync=true on each WRITE
 * would cost N fences, each serialised per volume on the server. A write
 * that fits one request simply sets fsync=true (one request, one trip).
 */
static int issue_part(struct rdax_conn *c, struct conn_op *op)
{
	struct conn_req *req = NULL;
	uint32_t n = part_size(c, op);
	uint32_t handle = op->vol ? op->vol->handle : 0;

	switch (op->kind) {
	case OP_CONTROL:
		if (!op->ctl_frame && op->ctl_msg) {
			/* sent again after a reconnect: packed anew, with the new handle */
			int ret = ctl_repack(c, op);
			if (ret)
				return ret;
		}
		req = req_alloc(c);
		if (!req)
			return -ENOMEM;
		req->buf = op->ctl_frame;
		req->buf_len = op->ctl_len;
		req->type = op->ctl_type;
		op->ctl_frame = NULL;
		op->all_issued = true;
		break;
	case OP_WRITE:
		if (op->tail_fsync) {
			req = fsync_req(c, handle, op->offset, op->length, false);
			if (!req)
				return -ENOMEM;
			op->tail_fsync = false;
			op->all_issued = true;
			break;
		}
		if (op_direct(c, op)) {
			/*
			 * one-sided: no frame. A durable write of one part whose
			 * volume takes durable notices is that notice alone (its
			 * FSYNC reply answers it); else it ends with an FSYNC of
			 * the range.
			 */
			req = req_alloc(c);
			if (!req)
				return -ENOMEM;
			req->type = FRAME_WRITE;
			req->direct = true;
			req->offset = op->offset + op->issued;
			req->durable_notice = op->durable && op->issued == 0 && n == op->length &&
					      op->vol->imm_durable;
		} else {
			/* WriteRequest: fsync present for a durable write, true if one request */
			req =
			    req_new_data(c, FRAME_WRITE, handle, op->offset + op->issued,
					 op->durable && op->length <= c->max_payload, op->durable);
			if (!req)
				return -ENOMEM;
		}
		req->payload = op->wbuf + op->issued;
		req->payload_len = n;
		req->window_bytes = n;
		op->issued += n;
		if (op->issued == op->length) {
			if (op->durable && !req->durable_notice &&
			    (op->length > c->max_payload || req->direct))
				op->tail_fsync = true;
			else
				op->all_issued = true;
		}
		break;
	case OP_READ: {
		if (op_direct(c, op)) {
			req = req_alloc(c);
			if (!req)
				return -ENOMEM;
			req->type = FRAME_READ;
			req->direct = true;
			req->offset = op->offset + op->issued;
		} else {
			req = req_new_data(c, FRAME_READ, handle, op->offset + op->issued, n, true);
			if (!req)
				return -ENOMEM;
		}
		req->read_dest = op->rbuf + op->issued;
		req->read_len = n;
		req->window_bytes = n;
		op->issued += n;
		op->all_issued = op->issued == op->length;
		break;
	}
	case OP_FSYNC:
		req = fsync_req(c, handle, op->offset, op->length, op->hammer);
		if (!req)
			return -ENOMEM;
		op->all_issued = true;
		break;
	}

	req->op = op;
	req->id = c->next_id++;
	if (!req->direct) {
		struct frame_header h = {
		    .magic = FRAME_MAGIC,
		    .version = FRAME_VERSION,
		    .type = req->type,
		    .request_id = req->id,
		    .body_len = (uint32_t)(req->buf_len - FRAME_HEADER_SIZE),
		    .payload_len = req->payload_len,
		};
		frame_header_encode(&h, req->buf);
	}

	if (c->sendq_tail)
		c->sendq_tail->next_send = req;
	else
		c->sendq_head = req;
	c->sendq_tail = req;
	req->prev = c->inflight_tail;
	if (c->inflight_tail)
		c->inflight_tail->next = req;
	else
		c->inflight_head = req;
	c->inflight_tail = req;
	c->ninflight++;
	c->inflight_bytes += req->window_bytes;
	op->parts_left++;
	return 0;
}

/* fill_window -- make requests of the ops in submission order while the window has room */
static void fill_window(struct rdax_conn *c)
{
	struct conn_op *op;
	if (c->lost || c->broken)
		return; /* no stream: the requests are made on the next one */
	while ((op = c->issue_cursor)) {
		if (op->all_issued) {
			c->issue_cursor = op->next;
			continue;
		}
		if (c->ninflight >= c->queue_depth)
			return;
		uint32_t n = part_size(c, op);
		if (c->ninflight > 0 && c->inflight_bytes + n > c->max_inflight_bytes)
			return;
		int ret = issue_part(c, op);
		if (ret) {
			op_fail(op, ret, NULL);
			if (op->parts_left == 0)
				op_finish(c, op);
		}
	}
}

/* --- the broken state --------------------------------------------------- */

void conn_transport_close(struct rdax_conn *c)
{
	if (c->tls) {
		tls_io_release(c->tls);
		free(c->tls);
		c->tls = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	/* no more DMA into our buffers, and the daemon learns at once */
	rdma_tp_delete(&c->rdma);
	c->rx_state = RX_HEADER;
	c->rx_req = NULL;
	c->rx_got = 0;
	c->rx_start = c->rx_end = 0;
}

/*
 * conn_may_resume -- does losing the stream with @code call for a new
 * connection rather than failing? Only on a connection that resumes, after
 * its HELLO, outside a resume attempt, and for what a new connection may
 * cure: the server went away, went silent or is no longer the primary --
 * never for a reply that does not parse (a server that is broken, not gone).
 */
static bool conn_may_resume(const struct rdax_conn *c, int code)
{
	if (!c->resume_ms || !c->max_payload || c->resuming)
		return false;
	switch (-code) {
	case ECONNRESET:
	case ECONNREFUSED:
	case ECONNABORTED:
	case EPIPE:
	case ETIMEDOUT:
	case ENETDOWN:
	case ENETUNREACH:
	case ENETRESET:
	case EHOSTDOWN:
	case EHOSTUNREACH:
	case ENOTCONN:
	case EIO:
	case ESTALE:
	case RDAX_E_NOT_PRIMARY:
	case RDAX_E_NO_QUORUM:
		return true;
	default:
		return false;
	}
}

/*
 * op_rewind -- @op goes back to its start, to be sent again in full on the
 * next connection (writes are idempotent; a read or fsync is asked again)
 */
static void op_rewind(struct conn_op *op)
{
	op->issued = 0;
	op->tail_fsync = false;
	op->all_issued = false;
	op->parts_left = 0;
	op->bytes = 0;
	op->written_back = 0;
	op->has_verifier = false;
	op->verifier_mixed = false;
	if (op->kind == OP_CONTROL) {
		free(op->ctl_frame); /* packed again when issued, with the new handle */
		op->ctl_frame = NULL;
		if (op->reply)
			protobuf_c_message_free_unpacked(op->reply, NULL);
		op->reply = NULL;
	}
}

int conn_lose(struct rdax_conn *c, int code, const char *msg, const char *follow)
{
	if (!c->lost_at)
		c->lost_at = now_ms(); /* the bound runs from the first loss until a resume works */
	c->lost = code;
	snprintf(c->lost_msg, sizeof(c->lost_msg), "%s", msg);
	if (follow && follow[0])
		snprintf(c->follow_url, sizeof(c->follow_url), "%s", follow);
	c->reverify = false;
	LOG_DEBUG("connection to %s lost (%s): resuming", c->peer, msg);
	conn_transport_close(c);

	/* every request goes: what they carried is asked again on the next connection */
	struct conn_req *req, *next;
	for (req = c->sendq_head; req; req = next) {
		next = req->next_send;
		if (req->replied) /* answered, not all sent: on the send queue only */
			req_put(c, req);
	}
	c->sendq_head = c->sendq_tail = NULL;
	while ((req = c->inflight_head)) {
		inflight_unlink(c, req);
		req_put(c, req);
	}
	c->ninflight = 0;
	c->inflight_bytes = 0;

	for (struct conn_op *op = c->ops_head, *onext; op; op = onext) {
		onext = op->next;
		op->parts_left = 0;
		if (op->internal) {
			/* a resend: the next resume sends what is still stale again */
			op->all_issued = true;
			op_finish(c, op);
		} else if (op->status) {
			op->all_issued = true; /* failed already (a refusal): it ends so */
			op_finish(c, op);
		} else if (op->kind == OP_CONTROL && op->ctl_resume == CTL_DONE_ON_LOSS) {
			op->all_issued = true;
			op_finish(c, op);
		} else if (op->kind == OP_CONTROL && op->ctl_resume != CTL_RESEND) {
			char *m = malloc(CONN_ERR_MAX);
			if (m)
				snprintf(m, CONN_ERR_MAX,
					 "%s; the connection was lost before the answer: the "
					 "request may or may not have been carried out",
					 msg);
			op_fail(op, code, m);
			op_finish(c, op);
		} else {
			op_rewind(op);
		}
	}
	c->issue_cursor = c->ops_head;
	return code;
}

int conn_give_up(struct rdax_conn *c, int code, const char *msg)
{
	if (c->broken)
		return c->broken;
	c->broken = code;
	snprintf(c->broken_msg, sizeof(c->broken_msg), "%s", msg);
	LOG_DEBUG("connection to %s broken: %s", c->peer, c->broken_msg);
	conn_transport_close(c);

	/* nothing more will be sent: a request already answered is finished now */
	struct conn_req *req, *next;
	for (req = c->sendq_head; req; req = next) {
		next = req->next_send;
		req->sent_all = true;
		if (req->replied)
			req_finish(c, req);
	}
	c->sendq_head = c->sendq_tail = NULL;
	while ((req = c->inflight_head)) {
		inflight_unlink(c, req);
		req->replied = true;
		if (!req->status)
			req->status = code;
		req_finish(c, req);
	}
	/* operations that still had requests to make */
	for (struct conn_op *op = c->ops_head, *onext; op; op = onext) {
		onext = op->next;
		op_fail(op, code, NULL);
		if (op->parts_left == 0)
			op_finish(c, op);
	}
	return code;
}

/*
 * conn_break -- the stream cannot be trusted any more (EOF, reset, a reply
 * that does not parse or match). A connection that resumes (resume.h) and
 * lost it for a reason a new connection may cure puts its operations back
 * to be sent again (conn_lose); otherwise every request and operation fails
 * with @code (conn_give_up). Returns @code, or the code already in force.
 */
static int conn_break(struct rdax_conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int conn_break(struct rdax_conn *c, int code, const char *fmt, ...)
{
	if (c->broken)
		return c->broken;
	if (c->lost)
		return c->lost;
	char msg[CONN_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (conn_may_resume(c, code))
		return conn_lose(c, code, msg, NULL);
	return conn_give_up(c, code, msg);
}

/*
 * rx_is_nbd -- the header received so far starts with "NBDMAGIC": the peer is
 * an NBD server, which greets every connection with that (docs/nbd.md)
 * before it reads anything, and then waits for or drops this client's HELLO
 */
static bool rx_is_nbd(const struct rdax_conn *c)
{
	return c->rx_state == RX_HEADER && c->rx_got >= 8 && memcmp(c->rx_hdr, "NBDMAGIC", 8) == 0;
}

/* nbd_break -- say what rx_is_nbd found instead of "bad magic" or "closed" */
static int nbd_break(struct rdax_conn *c)
{
	return conn_break(c, -RDAX_E_PROTOCOL,
			  "%s is an NBD server (it greeted with NBDMAGIC): rdax needs rdaxd's own "
			  "protocol (its tcp:// or rdma:// listener); NBD clients use nbd://",
			  c->peer);
}

/*
 * conn_closed -- the server went away (EOF, or a reset/EPIPE: a close with
 * our data unread); one code and one message for all of them, naming the
 * error reply that announced the close, if there was one
 */
static int conn_closed(struct rdax_conn *c)
{
	if (rx_is_nbd(c))
		return nbd_break(c);
	if (c->rx_state != RX_HEADER || c->rx_got > 0)
		return conn_break(c, -ECONNRESET,
				  "%s closed the connection in the middle of a reply", c->peer);
	if (c->closing_msg)
		return conn_break(c, -ECONNRESET, "%s closed the connection: %s", c->peer,
				  c->closing_msg);
	return conn_break(c, -ECONNRESET, "%s closed the connection", c->peer);
}

/* --- sending ------------------------------------------------------------ */

/* sendq_pop -- the head of the send queue is all sent */
static void sendq_pop(struct rdax_conn *c)
{
	struct conn_req *req = c->sendq_head;
	c->sendq_head = req->next_send;
	if (!c->sendq_head)
		c->sendq_tail = NULL;
	req->sent_all = true;
	if (req->replied)
		req_finish(c, req);
}

/*
 * rdma_broken -- the RDMA transport failed: break the connection with its
 * reason. A remote access error of a one-sided operation (-EACCES) means the
 * daemon revoked the volume's window under it -- the only one it has, over
 * the whole volume, as a deposed cluster primary does (docs/rdma.md): a
 * loss a new connection may cure, so -ECONNABORTED (resume.h follows the
 * primary); the operation was not acknowledged, it is sent again there.
 */
static int rdma_broken(struct rdax_conn *c, int code)
{
	if (code == -ECONNRESET)
		return conn_closed(c);
	if (code == -EACCES)
		return conn_break(c, -ECONNABORTED,
				  "%s: %s: the daemon revoked the volume's window (a deposed "
				  "primary, or a newer epoch seen)",
				  c->peer, rdma_tp_error(c->rdma));
	return conn_break(c, code, "%s: %s", c->peer, rdma_tp_error(c->rdma));
}

/*
 * tx_post_rdma -- post queued requests in order: frame bytes into the
 * message stream, direct ones as one-sided operations; stop at the first
 * that has to wait (credits, buffers). 0 or the broken code.
 */
static int tx_post_rdma(struct rdax_conn *c)
{
	while (c->sendq_head) {
		struct conn_req *req = c->sendq_head;
		if (req->direct) {
			struct rdma_tp_vol vol = {
			    .remote_addr = req->op->vol->remote_addr,
			    .rkey = req->op->vol->rkey,
			    .imm_base = req->op->vol->imm_base,
			    .imm_shift = req->op->vol->imm_shift,
			};
			/* a durable notice's reply comes under the id the transport gives it */
			int ret = req->durable_notice
				      ? rdma_tp_write_durable(c->rdma, &vol, req->offset,
							      req->payload, req->payload_len,
							      &req->id)
				  : req->type == FRAME_WRITE
				      ? rdma_tp_write(c->rdma, &vol, req->offset, req->payload,
						      req->payload_len, req)
				      : rdma_tp_read(c->rdma, &vol, req->offset, req->read_dest,
						     req->read_len, req);
			if (ret == -EAGAIN)
				return 0;
			if (ret < 0)
				return rdma_broken(c, ret);
			c->last_activity = now_ms();
			/* sent; its completion answers it (rdma_done), or its FSYNC reply */
			sendq_pop(c);
			continue;
		}
		struct iovec iov[TX_IOV_MAX];
		int n = 0;
		for (struct conn_req *r = c->sendq_head; r && !r->direct && n + 2 <= TX_IOV_MAX;
		     r = r->next_send) {
			if (r->sent < r->buf_len)
				iov[n++] = (struct iovec){r->buf + r->sent, r->buf_len - r->sent};
			size_t poff = r->sent > r->buf_len ? r->sent - r->buf_len : 0;
			if (r->payload_len > poff)
				iov[n++] = (struct iovec){(void *)(r->payload + poff),
							  r->payload_len - poff};
		}
		ssize_t w = rdma_tp_send(c->rdma, iov, n);
		if (w < 0)
			return rdma_broken(c, (int)w);
		if (w == 0)
			return 0;
		c->last_activity = now_ms();
		size_t left = (size_t)w;
		while (left > 0) {
			struct conn_req *r = c->sendq_head;
			size_t total = r->buf_len + r->payload_len;
			size_t take = total - r->sent < left ? total - r->sent : left;
			r->sent += take;
			left -= take;
			if (r->sent == total)
				sendq_pop(c);
		}
	}
	return 0;
}

/*
 * tx_flush_rdma -- tx_post_rdma in one batch: a durable write's one-sided
 * part and its FSYNC reach the device with one doorbell. 0 or the broken code.
 */
static int tx_flush_rdma(struct rdax_conn *c)
{
	rdma_tp_batch_begin(c->rdma);
	int ret = tx_post_rdma(c);
	/* a connection that broke meanwhile closed its transport, and the batch with it */
	int rang = c->rdma ? rdma_tp_batch_end(c->rdma) : 0;
	if (ret == 0 && rang < 0)
		ret = rdma_broken(c, rang);
	return ret;
}

/* tx_flush -- send queued requests until the socket is full; 0 or the broken code */
static int tx_flush(struct rdax_conn *c)
{
	if (c->lost || c->broken)
		return c->lost ? c->lost : c->broken;
	if (c->rdma)
		return tx_flush_rdma(c);
	while (c->sendq_head) {
		struct iovec iov[TX_IOV_MAX];
		int n = 0;
		for (struct conn_req *req = c->sendq_head; req && n + 2 <= TX_IOV_MAX;
		     req = req->next_send) {
			if (req->sent < req->buf_len)
				iov[n++] =
				    (struct iovec){req->buf + req->sent, req->buf_len - req->sent};
			size_t poff = req->sent > req->buf_len ? req->sent - req->buf_len : 0;
			if (req->payload_len > poff)
				iov[n++] = (struct iovec){(void *)(req->payload + poff),
							  req->payload_len - poff};
		}
		ssize_t r;
		if (c->tls) {
			r = tls_io_sendv(c->tls, iov, n);
			if (r == -EAGAIN)
				return 0;
			if (r < 0)
				return conn_break(c, -EPIPE, "TLS send to %s: %s%s", c->peer,
						  gnutls_strerror(c->tls->last_error),
						  c->max_payload ? "" : TLS_REFUSED_HINT);
		} else {
			struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
			r = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (r < 0 && (errno == EPIPE || errno == ECONNRESET))
			return conn_closed(c);
		if (r < 0) {
			int err = errno;
			return conn_break(c, -err, "send to %s: %s", c->peer, strerror(err));
		}
		c->last_activity = now_ms();
		size_t left = (size_t)r;
		while (left > 0) {
			struct conn_req *req = c->sendq_head;
			size_t total = req->buf_len + req->payload_len;
			size_t take = total - req->sent < left ? total - req->sent : left;
			req->sent += take;
			left -= take;
			if (req->sent == total) {
				c->sendq_head = req->next_send;
				if (!c->sendq_head)
					c->sendq_tail = NULL;
				req->sent_all = true;
				if (req->replied)
					req_finish(c, req);
			}
		}
	}
	return 0;
}

/* --- receiving ---------------------------------------------------------- */

/* status_code -- a Status as a librdax return value: 0, or a negative errno / RDAX_E_* */
static int status_code(const Rdax__Status *st)
{
	if (!st || st->code == 0)
		return 0;
	if (st->code > INT_MAX)
		return -RDAX_E_PROTOCOL;
	return -(int)st->code;
}

/* reply_status -- the Status every reply body starts with (field "status") */
static const Rdax__Status *reply_status(const ProtobufCMessage *msg)
{
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, "status");
	if (!f)
		return NULL;
	return *(Rdax__Status *const *)((const char *)msg + f->offset);
}

/* find_inflight -- the unanswered request @id (replies come mostly in order: from the head) */
static struct conn_req *find_inflight(struct rdax_conn *c, uint64_t id)
{
	for (struct conn_req *req = c->inflight_head; req; req = req->next)
		if (req->id == id)
			return req;
	return NULL;
}

/*
 * rx_fill -- move received bytes into @dst until @need are there. Small
 * reads go through the receive buffer (a header and a small body in one
 * recv); large ones straight into @dst. Returns 1 (complete), 0 (the socket
 * has nothing more now, or had nothing at the last look and poll() has not
 * reported input since: c->rx_sock_empty), or the broken code.
 */
static int rx_fill(struct rdax_conn *c, uint8_t *dst, size_t need)
{
	while (c->rx_got < need) {
		size_t avail = c->rx_end - c->rx_start;
		if (avail) {
			size_t n = need - c->rx_got < avail ? need - c->rx_got : avail;
			memcpy(dst + c->rx_got, c->rx_buf + c->rx_start, n);
			c->rx_start += n;
			c->rx_got += n;
			continue;
		}
		c->rx_start = c->rx_end = 0;
		size_t want = need - c->rx_got;
		bool direct = want >= CONN_RX_BUF_SIZE / 2;
		if (c->rdma) {
			ssize_t r = rdma_tp_recv(c->rdma, direct ? dst + c->rx_got : c->rx_buf,
						 direct ? want : CONN_RX_BUF_SIZE);
			if (r == 0)
				return 0;
			if (r < 0)
				return rdma_broken(c, (int)r);
			c->last_activity = now_ms();
			if (direct)
				c->rx_got += (size_t)r;
			else
				c->rx_end = (size_t)r;
			continue;
		}
		size_t ask = direct ? want : CONN_RX_BUF_SIZE;
		ssize_t r;
		if (c->tls) {
			/* decrypted straight into the destination of a large read */
			r = tls_io_recv(c->tls, direct ? dst + c->rx_got : c->rx_buf, ask);
			if (r == -EAGAIN)
				return 0;
			if (r == 0 && c->max_payload)
				return conn_closed(c);
			if (r <= 0)
				return conn_break(
				    c, r ? -EPROTO : -ECONNREFUSED, "TLS receive from %s: %s%s",
				    c->peer, r ? gnutls_strerror(c->tls->last_error) : "closed",
				    c->max_payload ? "" : TLS_REFUSED_HINT);
		} else {
			/* not over TLS: GnuTLS may hold decrypted bytes of an empty socket */
			if (c->rx_sock_empty)
				return 0; /* as EAGAIN: the caller polls before it sleeps */
			r = recv(c->fd, direct ? dst + c->rx_got : c->rx_buf, ask, MSG_DONTWAIT);
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			c->rx_sock_empty = true;
			return 0;
		}
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return conn_closed(c);
		if (r < 0) {
			int err = errno;
			return conn_break(c, -err, "receive from %s: %s", c->peer, strerror(err));
		}
		c->last_activity = now_ms();
		/* a stream socket hands over what it holds: a short read emptied it */
		c->rx_sock_empty = !c->tls && (size_t)r < ask;
		if (direct)
			c->rx_got += (size_t)r;
		else
			c->rx_end = (size_t)r;
	}
	return 1;
}

/* rx_header -- check a reply header against what is in flight; 0 or the broken code */
static int rx_header(struct rdax_conn *c)
{
	struct frame_header h;
	frame_header_decode(c->rx_hdr, &h);
	if (h.magic != FRAME_MAGIC)
		return conn_break(
		    c, -RDAX_E_PROTOCOL,
		    "%s sent a frame with a bad magic number 0x%08x: not an rdax server?", c->peer,
		    h.magic);
	if (h.version != FRAME_VERSION)
		return conn_break(c, -RDAX_E_VERSION,
				  "%s speaks protocol version %u, this client version %u", c->peer,
				  h.version, FRAME_VERSION);
	uint16_t base = h.type & (uint16_t)~FRAME_REPLY;
	if (!(h.type & FRAME_REPLY) || base >= FRAME_TYPE_MAX)
		return conn_break(c, -RDAX_E_PROTOCOL,
				  "%s sent a frame of type 0x%04x, not a reply", c->peer, h.type);
	if (h.body_len > CONN_MAX_REPLY_BODY)
		return conn_break(c, -RDAX_E_PROTOCOL,
				  "%s sent a %s reply body of %u bytes (limit %u)", c->peer,
				  frame_type_name(base), h.body_len, CONN_MAX_REPLY_BODY);
	struct conn_req *req = find_inflight(c, h.request_id);
	if (!req && base != 0)
		return conn_break(c, -RDAX_E_PROTOCOL,
				  "%s sent a %s reply to request %llu, which is not in flight",
				  c->peer, frame_type_name(base), (unsigned long long)h.request_id);
	if (req && base != 0 && base != (req->durable_notice ? FRAME_FSYNC : req->type))
		return conn_break(c, -RDAX_E_PROTOCOL, "%s sent a %s reply to %s request %llu",
				  c->peer, frame_type_name(base), frame_type_name(req->type),
				  (unsigned long long)h.request_id);
	if (h.payload_len && (!req || base != FRAME_READ || h.payload_len != req->read_len))
		return conn_break(c, -RDAX_E_PROTOCOL,
				  "%s sent a payload of %u bytes with a %s reply (request %llu)",
				  c->peer, h.payload_len, frame_type_name(base),
				  (unsigned long long)h.request_id);
	if (h.body_len > c->rx_body_cap) {
		uint8_t *b = realloc(c->rx_body, h.body_len);
		if (!b)
			return conn_break(c, -ENOMEM, "no memory for a reply body of %u bytes",
					  h.body_len);
		c->rx_body = b;
		c->rx_body_cap = h.body_len;
	}
	c->rx_req = req;
	c->rx_type = base;
	c->rx_id = h.request_id;
	c->rx_body_len = h.body_len;
	c->rx_payload_len = h.payload_len;
	return 0;
}

/* reply_done -- the reply to @req is complete */
static void reply_done(struct rdax_conn *c, struct conn_req *req)
{
	inflight_unlink(c, req);
	req->replied = true;
	if (req->sent_all)
		req_finish(c, req);
}

/*
 * reply_plain_ok -- is @b (@len bytes) a data reply of type @base in the
 * plain success form: Status {code = 0} alone -- 0a 02 08 00, the bytes
 * protobuf-c packs it to, and the body rdaxd sends for every status-only
 * success -- optionally followed, for a WRITE or FSYNC, by written_back
 * (field 2, varint) and the verifier (field 3, fixed64), in that order? Then
 * *wb / *has_wb and *ver / *has_ver hold them and no unpacking is needed
 * (that was ~700 instructions a reply); anything else is unpacked.
 */
static bool reply_plain_ok(const uint8_t *b, uint32_t len, uint16_t base, uint64_t *wb,
			   bool *has_wb, uint64_t *ver, bool *has_ver)
{
	static const uint8_t ok[] = {0x0a, 0x02, 0x08, 0x00};
	if (len < sizeof(ok) || memcmp(b, ok, sizeof(ok)) != 0)
		return false;
	*has_wb = false;
	*has_ver = false;
	uint32_t i = sizeof(ok);
	if (i == len)
		return true;
	if (base != FRAME_WRITE && base != FRAME_FSYNC)
		return false;
	if (b[i] == (2 << 3)) {
		uint64_t v = 0;
		unsigned shift = 0;
		for (i++;; i++, shift += 7) {
			if (i >= len || shift > 63)
				return false;
			v |= (uint64_t)(b[i] & 0x7f) << shift;
			if (!(b[i] & 0x80))
				break;
		}
		i++;
		*wb = v;
		*has_wb = true;
	}
	if (i < len && b[i] == ((3 << 3) | 1) && len - i - 1 >= 8) {
		uint64_t v = 0;
		for (unsigned k = 0; k < 8; k++)
			v |= (uint64_t)b[i + 1 + k] << (8 * k);
		i += 9;
		*ver = v;
		*has_ver = true;
	}
	return i == len;
}

/* reply_drop -- free an unpacked reply: in @a (may hold nothing to free) or, without, malloc'd */
static void reply_drop(ProtobufCMessage *msg, struct pb_arena *a)
{
	if (a)
		pb_arena_drop(a, msg);
	else
		protobuf_c_message_free_unpacked(msg, NULL);
}

/*
 * req_follows -- is a refusal of @req with RDAX_E_NOT_PRIMARY a reason to
 * follow the primary (a resuming connection, outside a resume attempt, and
 * a request that is sent again after a reconnect)?
 */
static bool req_follows(const struct rdax_conn *c, const struct conn_req *req)
{
	const struct conn_op *op = req->op;
	return c->resume_ms && !c->resuming && c->max_payload && !op->internal &&
	       (op->kind != OP_CONTROL || op->ctl_resume == CTL_RESEND);
}

/* rx_body -- unpack a complete reply body and record it in its request; 0 or the broken code */
static int rx_body(struct rdax_conn *c)
{
	struct conn_req *req = c->rx_req;
	uint16_t base = c->rx_type;
	/* a control reply is kept (req->reply): only data replies use the arena */
	bool keep = !req || req->op->kind == OP_CONTROL;
	uint64_t wb = 0, ver = 0;
	bool has_wb, has_ver;
	if (!keep && base != 0 &&
	    reply_plain_ok(c->rx_body, c->rx_body_len, base, &wb, &has_wb, &ver, &has_ver)) {
		if (base == FRAME_READ && c->rx_payload_len != req->read_len)
			return conn_break(c, -RDAX_E_PROTOCOL,
					  "%s sent %u bytes for a read of %u (request %llu)",
					  c->peer, c->rx_payload_len, req->read_len,
					  (unsigned long long)c->rx_id);
		req->status = 0;
		if (has_wb)
			req->written_back = wb;
		req->verifier = ver;
		req->has_verifier = has_ver;
		if (c->rx_payload_len)
			return 0; /* the data follows */
		c->rx_req = NULL;
		reply_done(c, req);
		return 0;
	}
	_Alignas(16) uint8_t arena_buf[RX_ARENA_SIZE];
	struct pb_arena arena;
	pb_arena_init(&arena, arena_buf, sizeof(arena_buf));
	struct pb_arena *a = keep ? NULL : &arena;
	ProtobufCAllocator *alloc = a ? &a->alloc : NULL;
	ProtobufCMessage *msg =
	    protobuf_c_message_unpack(reply_desc[base], alloc, c->rx_body_len, c->rx_body);
	if (!msg)
		return conn_break(c, -RDAX_E_PROTOCOL,
				  "%s sent a malformed %s reply body (%u bytes, request %llu)",
				  c->peer, frame_type_name(base), c->rx_body_len,
				  (unsigned long long)c->rx_id);
	const Rdax__Status *st = reply_status(msg);
	int code = status_code(st);
	const char *text = st && st->message && st->message[0] ? st->message : NULL;

	if (base == 0) {
		/* the server refused a frame and closes the connection after this reply */
		if (!code)
			code = -RDAX_E_PROTOCOL;
		free(c->closing_msg);
		c->closing_msg = strdup(text ? text : rdax_strerror(code));
		if (!req) {
			int ret = conn_break(c, code, "%s closed the connection: %s", c->peer,
					     text ? text : rdax_strerror(code));
			reply_drop(msg, a);
			return ret;
		}
	}
	if (base == FRAME_READ && code && c->rx_payload_len) {
		reply_drop(msg, a);
		return conn_break(c, -RDAX_E_PROTOCOL,
				  "%s sent data with a failed read reply (request %llu)", c->peer,
				  (unsigned long long)c->rx_id);
	}
	if (base == FRAME_READ && !code && c->rx_payload_len != req->read_len) {
		reply_drop(msg, a);
		return conn_break(c, -RDAX_E_PROTOCOL,
				  "%s sent %u bytes for a read of %u (request %llu)", c->peer,
				  c->rx_payload_len, req->read_len, (unsigned long long)c->rx_id);
	}
	if (code == -RDAX_E_NOT_PRIMARY)
		snprintf(c->primary_url, sizeof(c->primary_url), "%s",
			 st->primary_url ? st->primary_url : "");
	if (code == -RDAX_E_NOT_PRIMARY && req && req_follows(c, req)) {
		/* another node serves the volume now: go there and send it all again */
		char m[CONN_ERR_MAX];
		snprintf(m, sizeof(m), "%s: %s", c->peer, text ? text : rdax_strerror(code));
		if (st->has_epoch && req->op->vol && st->epoch > req->op->vol->epoch)
			req->op->vol->epoch = st->epoch;
		reply_drop(msg, a);
		return conn_lose(c, code, m, c->primary_url);
	}
	req->status = code;
	if (code && text)
		req->errmsg = strdup(text);
	if (base == FRAME_WRITE) {
		const Rdax__WriteReply *w = (const Rdax__WriteReply *)msg;
		if (w->has_written_back)
			req->written_back = w->written_back;
		req->has_verifier = w->has_verifier;
		req->verifier = w->verifier;
	}
	if (base == FRAME_FSYNC) {
		const Rdax__FsyncReply *f = (const Rdax__FsyncReply *)msg;
		if (f->has_written_back)
			req->written_back = f->written_back;
		req->has_verifier = f->has_verifier;
		req->verifier = f->verifier;
	}
	if (!code && req->op->kind == OP_CONTROL)
		req->reply = msg;
	else
		reply_drop(msg, a);

	if (c->rx_payload_len)
		return 0; /* the data follows */
	c->rx_req = NULL;
	reply_done(c, req);
	return 0;
}

/* rx_drain -- receive and dispatch replies until the socket has nothing more; 0 or broken code */
static int rx_drain(struct rdax_conn *c)
{
	for (;;) {
		int r;
		switch (c->rx_state) {
		case RX_HEADER:
			r = rx_fill(c, c->rx_hdr, FRAME_HEADER_SIZE);
			if (r == 0 && rx_is_nbd(c))
				return nbd_break(c); /* 18 bytes of greeting, then it waits */
			if (r <= 0)
				return r;
			if (rx_is_nbd(c))
				return nbd_break(c);
			if ((r = rx_header(c)))
				return r;
			c->rx_got = 0;
			c->rx_state = RX_BODY;
			break;
		case RX_BODY:
			r = rx_fill(c, c->rx_body, c->rx_body_len);
			if (r <= 0)
				return r;
			c->rx_got = 0;
			c->rx_state = c->rx_payload_len ? RX_PAYLOAD : RX_HEADER;
			if ((r = rx_body(c)))
				return r;
			break;
		case RX_PAYLOAD:
			r = rx_fill(c, c->rx_req->read_dest, c->rx_payload_len);
			if (r <= 0)
				return r;
			c->rx_got = 0;
			c->rx_state = RX_HEADER;
			struct conn_req *req = c->rx_req;
			c->rx_req = NULL;
			reply_done(c, req);
			break;
		}
	}
}

/* --- the loop ----------------------------------------------------------- */

/* rdma_done -- a one-sided operation completed: it is the answer to its request */
static void rdma_done(void *arg, void *ctx, int status)
{
	struct rdax_conn *c = arg;
	struct conn_req *req = ctx;
	c->last_activity = now_ms();
	if (!req)
		return; /* a durable notice's write: its FSYNC reply answers it */
	inflight_unlink(c, req);
	req->replied = true;
	req->status = status;
	if (req->sent_all)
		req_finish(c, req);
}

void conn_rdma_settle(struct rdax_conn *c)
{
	int64_t deadline = now_ms() + 5000;
	while (c->rdma && rdma_tp_direct_posted(c->rdma) > 0 && now_ms() < deadline) {
		int ret = rdma_tp_poll(c->rdma, rdma_done, c);
		if (ret < 0)
			return; /* failed: its work requests are flushed, nothing reads the memory */
		if (ret == 0)
			usleep(50);
	}
}

/* rdma_progress -- handle RDMA completions and events; 0 or the broken code */
static int rdma_progress(struct rdax_conn *c)
{
	int ret = rdma_tp_progress(c->rdma, rdma_done, c);
	return ret < 0 ? rdma_broken(c, ret) : 0;
}

/* now_us -- CLOCK_MONOTONIC in microseconds */
static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * busy_poll -- the call is about to sleep: spin on the completion queue
 * for the adaptive window first (spin_window.h: about twice the recent
 * waits, at most the cap of rdax_conn_opts_set_busy_poll; none while the
 * waits are longer). True if anything came (completions, input, a
 * failure): do not sleep.
 */
static bool busy_poll(struct rdax_conn *c)
{
	int64_t now = now_us();
	unsigned us = spin_window_idle(&c->spin, now);
	if (!us)
		return false;
	int64_t end = now + us;
	unsigned turn = 0;
	do {
		/*
		 * the CQ alone, in user space; the channel and the CM events every
		 * 64 turns, the clock every 16 (in the emulated VM a clock read
		 * costs more than a poll: perf, docs/rdma.md "Benchmark")
		 */
		for (unsigned i = 0; i < 16; i++) {
			int ret = ++turn % 64 ? rdma_tp_poll(c->rdma, rdma_done, c)
					      : rdma_tp_progress(c->rdma, rdma_done, c);
			if (ret < 0) {
				rdma_broken(c, ret);
				return true;
			}
			if (ret > 0 || rdma_tp_has_input(c->rdma)) {
				spin_window_activity(&c->spin, now_us());
				return true;
			}
		}
	} while (now_us() < end);
	return false;
}

/*
 * conn_run -- send and receive until done(c, arg), the connection breaks, or
 * @timeout_ms passes (-1: no limit). Each turn makes requests while the
 * window has room, sends what the socket takes, receives what it has, and
 * only then sleeps in poll(). Returns 0 (done), -ETIMEDOUT (this call's
 * time is up; the connection is fine), or the broken code.
 */
static int conn_run(struct rdax_conn *c, bool (*done)(struct rdax_conn *, void *), void *arg,
		    int timeout_ms)
{
	int64_t start = now_ms();
	int64_t deadline = timeout_ms >= 0 ? start + timeout_ms : -1;
	bool try_rx = true; /* a first non-blocking look even when only polling */
	c->last_activity = start;
	for (;;) {
		if (c->reverify && !c->lost && !c->broken)
			conn_lose(c, -ESTALE,
				  "the server's verifier changed: writes acknowledged before may "
				  "be lost; sending what is held again",
				  NULL);
		if (c->lost && !c->broken) {
			if (c->resume_by_owner)
				return c->lost; /* the owner resumes it, off its loop */
			conn_resume(c);		/* resumed, or broken for good */
			c->last_activity = now_ms();
			try_rx = true;
			continue;
		}
		if (c->broken)
			return c->broken;
		if (c->rdma && rdma_progress(c) < 0)
			continue;
		fill_window(c);
		if (c->sendq_head && tx_flush(c) < 0)
			continue;
		if (try_rx && rx_drain(c) < 0)
			continue;
		if (done(c, arg))
			return 0;
		/* replies just received may have opened the window: fill it before sleeping */
		fill_window(c);
		if (c->sendq_head && tx_flush(c) < 0)
			continue;
		if (!c->inflight_head && !c->sendq_head) {
			/* cannot happen: an unfinished op always has requests out */
			conn_break(c, -EIO, "internal error: waiting with nothing in flight");
			continue;
		}
		if (c->tls && tls_io_pending(c->tls)) {
			/* decrypted bytes GnuTLS holds: poll() would not see them */
			try_rx = true;
			continue;
		}
		if (c->rdma && (rdma_tp_has_input(c->rdma) || busy_poll(c) ||
				rdma_tp_arm(c->rdma, rdma_done, c))) {
			/* completions or bytes came meanwhile: no sleep */
			try_rx = true;
			continue;
		}
		int64_t now = now_ms();
		int64_t wait = deadline >= 0 ? (deadline > now ? deadline - now : 0) : -1;
		if (c->timeout_ms > 0) {
			int64_t idle = c->last_activity + c->timeout_ms - now;
			if (idle < 0)
				idle = 0;
			if (wait < 0 || idle < wait)
				wait = idle;
		}
		struct pollfd pfd[2] = {{
		    .fd = c->fd,
		    .events = (short)(POLLIN | (c->sendq_head ? POLLOUT : 0)),
		}};
		struct pollfd *p = pfd;
		int nfds = 1;
		if (c->rdma) {
			/* completions (which also free credits and buffers) and disconnects */
			rdma_tp_pollfds(c->rdma, pfd);
			nfds = 2;
		}
		int n = poll(pfd, (nfds_t)nfds, (int)(wait > INT_MAX ? INT_MAX : wait));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;
			conn_break(c, -err, "poll on %s: %s", c->peer, strerror(err));
			continue;
		}
		if (n == 0) {
			now = now_ms();
			if (c->timeout_ms > 0 && now - c->last_activity >= c->timeout_ms) {
				conn_break(c, -ETIMEDOUT, "no answer from %s for %d ms", c->peer,
					   c->timeout_ms);
				continue;
			}
			if (deadline >= 0 && now >= deadline)
				return -ETIMEDOUT;
			try_rx = false;
			continue;
		}
		if (c->rdma)
			spin_window_activity(&c->spin, now_us()); /* woken: the wait closes */
		try_rx = c->rdma || (p->revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL)) != 0;
		if (try_rx)
			c->rx_sock_empty = false;
	}
}

int conn_poll_prepare(struct rdax_conn *c, struct pollfd fds[2])
{
	if (c->broken)
		return 0;
	if (c->tls && tls_io_pending(c->tls))
		return 0; /* decrypted bytes GnuTLS holds: no descriptor announces them */
	if (c->rdma) {
		if (rdma_tp_has_input(c->rdma) || rdma_tp_arm(c->rdma, rdma_done, c))
			return 0;
		rdma_tp_pollfds(c->rdma, fds);
		return 2;
	}
	fds[0] =
	    (struct pollfd){.fd = c->fd, .events = (short)(POLLIN | (c->sendq_head ? POLLOUT : 0))};
	/*
	 * the owner's loop polls the socket next, and reaps when it is readable:
	 * the next reap must recv again (conn_run clears this after its own poll;
	 * left set, a reap driven from a loop never read another reply)
	 */
	c->rx_sock_empty = false;
	return 1;
}

void conn_op_submit(struct rdax_conn *c, struct conn_op *op)
{
	op->seq = ++c->next_seq;
	op->prev = c->ops_tail;
	op->next = NULL;
	if (c->ops_tail)
		c->ops_tail->next = op;
	else
		c->ops_head = op;
	c->ops_tail = op;
	if (!c->issue_cursor)
		c->issue_cursor = op;
	if (op->async) {
		c->nasync++;
		c->nasync_active++;
		op->vol->ops_active++;
	}
	fill_window(c);
	if (c->sendq_head && !c->corked)
		tx_flush(c); /* a failure breaks the connection and finishes the op */
}

void conn_cork(struct rdax_conn *c)
{
	c->corked = true;
}

int conn_uncork(struct rdax_conn *c)
{
	c->corked = false;
	return c->sendq_head ? tx_flush(c) : 0;
}

static bool op_is_done(struct rdax_conn *c, void *arg)
{
	return ((struct conn_op *)arg)->done;
}

int conn_op_wait(struct rdax_conn *c, struct conn_op *op)
{
	if (!op->done)
		conn_run(c, op_is_done, op, -1);
	if (!op->done) /* only a broken connection ends conn_run early, and it finishes every op */
		conn_break(c, -EIO, "internal error: an operation outlived its connection");
	if (op->status)
		conn_set_error(c, op->status, "%s", conn_op_message(c, op));
	return op->status;
}

static bool reap_ready(struct rdax_conn *c, void *arg)
{
	return c->cq_count >= *(unsigned *)arg || c->nasync_active == 0;
}

int conn_reap(struct rdax_conn *c, struct rdax_completion *out, unsigned max, unsigned min,
	      int timeout_ms)
{
	if (!c->broken)
		conn_run(c, reap_ready, &min, timeout_ms);
	unsigned n = 0;
	while (n < max && c->cq_count > 0) {
		struct conn_completion *e = &c->cq[c->cq_head];
		out[n] = e->c;
		if (e->c.status) {
			const char *msg = e->errmsg ? e->errmsg : rdax_strerror(e->c.status);
			conn_set_error(c, e->c.status, "%s", msg);
		}
		free(e->errmsg);
		e->errmsg = NULL;
		c->cq_head = (c->cq_head + 1) % c->queue_depth;
		c->cq_count--;
		c->nasync--;
		n++;
	}
	if (n == 0 && c->broken)
		return conn_set_error(c, c->broken, "%s", c->broken_msg);
	return (int)n;
}
