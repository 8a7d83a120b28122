/* SPDX-License-Identifier: BSD-3-Clause */
/* conn_nbd.c -- NBD handshake and transmission state machine on a worker's libev loop */
#include "conn_nbd.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "config.h"
#include "dispatch.h"
#include "fsync.h"
#include "log.h"
#include "namespace.h"
#include "nbd_proto.h"
#include "size.h"

/* iovecs per sendmsg(): up to this many / 2 replies */
#define NBD_IOV_MAX 64
/* recv() calls per readable event, so one busy connection does not starve the others */
#define NBD_READ_BUDGET 16
/* flush rounds per loop iteration before the loop polls again */
#define NBD_FLUSH_ROUNDS 16
/* Room for a reply's header bytes: option replies (names, messages) and error chunks. */
#define NBD_OUT_INLINE (NBD_OPT_REPLY_HEADER_SIZE + 4 + NS_VOLUME_NAME_MAX + NBD_MESSAGE_MAX)

enum nbd_phase {
	PH_FLAGS,	/* the client's flags */
	PH_OPT_HEADER,	/* option haggling */
	PH_OPT_DATA,	/* an option's data, buffered */
	PH_OPT_SKIP,	/* an option's data, dropped */
	PH_OPT_WAIT,	/* a pool job answers the option */
	PH_REQ_HEADER,	/* transmission */
	PH_REQ_PAYLOAD, /* a WRITE's data */
};

/* One reply on the output queue: header bytes, then (READ) data from the mapping. */
struct nbd_out {
	struct nbd_out *next;
	const uint8_t *payload; /* READ: inside the volume mapping */
	uint32_t payload_len;
	uint64_t offset; /* READ: where, for write-after-read ordering */
	size_t sent;	 /* bytes of hdr + payload already sent */
	uint32_t hdr_len;
	uint8_t hdr[NBD_OUT_INLINE];
};

enum nbd_job_kind {
	JOB_EXPORT, /* meta: GO / EXPORT_NAME opens, INFO looks up */
	JOB_LIST,   /* meta: every volume */
	JOB_CLOSE,  /* meta: close the exported volume (teardown) */
	JOB_FLUSH,  /* fsync: whole volume */
	JOB_FUA,    /* fsync: the range of a WRITE just marked */
	JOB_ZERO,   /* fsync: TRIM / WRITE_ZEROES = volume_discard */
};

struct nbd_job {
	struct fsync_task task;
	struct conn_nbd *c;
	enum nbd_job_kind kind;
	int code; /* result: 0 or -errno */
	const struct conn_nbd_shared *sh;
	struct volume *v;
	/* JOB_EXPORT, JOB_LIST */
	uint32_t option;
	char name[NS_VOLUME_NAME_MAX + 1];
	bool want_name, want_description;
	struct volume_info info;
	struct volume_info *list;
	unsigned count;
	/* request jobs */
	uint64_t handle;
	uint16_t type;
	uint64_t offset;
	uint32_t length;
};

struct conn_nbd {
	struct conn_nbd_set *set;
	struct conn_nbd *prev, *next; /* set->conns */
	struct conn_nbd *flush_next;  /* set->flush */
	struct conn_nbd *dead_next;   /* set->dead */
	bool in_flush, in_dead;
	struct worker_msg start_msg;
	int fd;
	char peer[64];
	ev_io rio, wio;

	/* input: [in_start, in_end) of in[] is unparsed */
	uint8_t in[NBD_INBUF_SIZE];
	size_t in_start, in_end;
	enum nbd_phase phase;

	/* handshake */
	bool no_zeroes;	 /* NBD_FLAG_C_NO_ZEROES */
	bool structured; /* NBD_OPT_STRUCTURED_REPLY acknowledged */
	unsigned noptions;
	uint32_t opt, opt_len, opt_got;

	/* transmission */
	struct volume *v;	/* the export, open while the connection lives */
	struct nbd_request req; /* PH_REQ_PAYLOAD: the WRITE */
	uint8_t *pdst;		/* where its payload goes; NULL: dropped */
	uint32_t pgot;
	struct nbd_job *parked; /* a TRIM/WRITE_ZEROES waiting for READ replies over its range */
	uint64_t requests;

	/* output */
	struct nbd_out *out_head, *out_tail;
	unsigned out_count;
	unsigned out_reads; /* queued replies with READ data */
	unsigned jobs;	    /* in the pools, or parked */
	bool paused;	    /* over NBD_CONN_MAX_PENDING: no new request until half drained */

	bool eof;	   /* the peer closed its side */
	bool closing;	   /* no more input: finish jobs, send what is queued, close */
	bool dead;	   /* the socket failed: drop output */
	bool tearing_down; /* the volume is being closed in the metadata pool */
	const char *why;   /* why it ended, for the log */
};

static void conn_kick(struct conn_nbd *c);

/* ---- set bookkeeping ---- */

/* flush_add -- c has output to send before the loop sleeps */
static void flush_add(struct conn_nbd *c)
{
	if (c->in_flush)
		return;
	c->in_flush = true;
	c->flush_next = c->set->flush;
	c->set->flush = c;
}

/* outs_drop -- free every queued reply */
static void outs_drop(struct conn_nbd *c)
{
	struct nbd_out *o = c->out_head;
	while (o) {
		struct nbd_out *next = o->next;
		free(o);
		o = next;
	}
	c->out_head = c->out_tail = NULL;
	c->out_count = c->out_reads = 0;
}

/* conn_fail -- the socket is unusable: stop everything on it and drop queued output */
static void conn_fail(struct conn_nbd *c, const char *why)
{
	if (c->dead)
		return;
	c->dead = true;
	if (!c->why)
		c->why = why;
	ev_io_stop(c->set->worker->loop, &c->rio);
	ev_io_stop(c->set->worker->loop, &c->wio);
	outs_drop(c);
}

/* conn_close_after -- no more input: what is queued still goes out, then the socket closes */
static void conn_close_after(struct conn_nbd *c, const char *why)
{
	c->closing = true;
	if (!c->why)
		c->why = why;
}

/* conn_free -- unlink and free (worker hook, nothing refers to c any more) */
static void conn_free(struct conn_nbd *c)
{
	struct conn_nbd_set *set = c->set;
	if (c->in_flush) {
		struct conn_nbd **pp = &set->flush;
		while (*pp && *pp != c)
			pp = &(*pp)->flush_next;
		if (*pp)
			*pp = c->flush_next;
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		set->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	set->nconns--;
	set->closed++;
	free(c);
}

/* conn_bury -- c is finished: close its socket, free it before the loop sleeps */
static void conn_bury(struct conn_nbd *c)
{
	if (c->in_dead)
		return;
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	c->in_dead = true;
	c->dead_next = c->set->dead;
	c->set->dead = c;
}

/* ---- output ---- */

/* out_new -- a reply with room for NBD_OUT_INLINE header bytes; NULL (connection failed) */
static struct nbd_out *out_new(struct conn_nbd *c)
{
	if (c->dead)
		return NULL;
	struct nbd_out *o = malloc(sizeof(*o));
	if (!o) {
		LOG_ERROR("%s: out of memory for a reply; closing", c->peer);
		conn_fail(c, "out of memory");
		return NULL;
	}
	o->next = NULL;
	o->payload = NULL;
	o->payload_len = 0;
	o->offset = 0;
	o->sent = 0;
	o->hdr_len = 0;
	return o;
}

/* out_queue -- append @o to the output queue */
static void out_queue(struct conn_nbd *c, struct nbd_out *o)
{
	if (c->out_tail)
		c->out_tail->next = o;
	else
		c->out_head = o;
	c->out_tail = o;
	c->out_count++;
	if (o->payload_len)
		c->out_reads++;
	flush_add(c);
}

/* queue_bytes -- a reply made of @len raw bytes (len <= NBD_OUT_INLINE) */
static void queue_bytes(struct conn_nbd *c, const void *buf, size_t len)
{
	struct nbd_out *o = out_new(c);
	if (!o)
		return;
	memcpy(o->hdr, buf, len);
	o->hdr_len = (uint32_t)len;
	out_queue(c, o);
}

/* opt_reply -- an option reply with @len bytes of @data (a message for errors) */
static void opt_reply(struct conn_nbd *c, uint32_t option, uint32_t type, const void *data,
		      size_t len)
{
	struct nbd_out *o = out_new(c);
	if (!o)
		return;
	if (len > NBD_OUT_INLINE - NBD_OPT_REPLY_HEADER_SIZE)
		len = NBD_OUT_INLINE - NBD_OPT_REPLY_HEADER_SIZE;
	nbd_opt_reply_encode(o->hdr, option, type, (uint32_t)len);
	if (len)
		memcpy(o->hdr + NBD_OPT_REPLY_HEADER_SIZE, data, len);
	o->hdr_len = (uint32_t)(NBD_OPT_REPLY_HEADER_SIZE + len);
	out_queue(c, o);
}

/* opt_error -- an option error reply with a message for humans */
static void opt_error(struct conn_nbd *c, uint32_t option, uint32_t type, const char *msg)
{
	LOG_DEBUG("%s: option %s (%" PRIu32 ") refused: %s", c->peer, nbd_opt_name(option), option,
		  msg);
	opt_reply(c, option, type, msg, strlen(msg));
}

/* req_ok -- a successful reply without data (simple replies are allowed for those) */
static void req_ok(struct conn_nbd *c, const struct nbd_request *r)
{
	struct nbd_out *o = out_new(c);
	if (!o)
		return;
	if (c->structured && r->type == NBD_CMD_READ) {
		/* a READ of length 0: structured replies must be used for READ */
		nbd_chunk_header_encode(o->hdr, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, r->handle,
					0);
		o->hdr_len = NBD_CHUNK_HEADER_SIZE;
	} else {
		nbd_simple_reply_encode(o->hdr, 0, r->handle);
		o->hdr_len = NBD_SIMPLE_REPLY_SIZE;
	}
	out_queue(c, o);
}

/* req_error -- an error reply: a structured error chunk with @msg if negotiated, else simple */
static void req_error(struct conn_nbd *c, uint64_t handle, uint16_t type, uint32_t error,
		      const char *msg)
{
	LOG_DEBUG("%s: %s (handle %" PRIu64 ") failed: error %" PRIu32 ": %s", c->peer,
		  nbd_cmd_name(type), handle, error, msg ? msg : "");
	struct nbd_out *o = out_new(c);
	if (!o)
		return;
	if (c->structured)
		o->hdr_len =
		    (uint32_t)nbd_error_chunk_encode(o->hdr, sizeof(o->hdr), handle, error, msg);
	else {
		nbd_simple_reply_encode(o->hdr, error, handle);
		o->hdr_len = NBD_SIMPLE_REPLY_SIZE;
	}
	out_queue(c, o);
}

/* req_read -- the reply to a valid READ: header, then the data gathered from the mapping */
static void req_read(struct conn_nbd *c, const struct nbd_request *r)
{
	struct nbd_out *o = out_new(c);
	if (!o)
		return;
	if (c->structured) {
		/* one chunk (so NBD_CMD_FLAG_DF always holds), final: nothing can fail later */
		nbd_data_chunk_prefix_encode(o->hdr, r->handle, r->offset, r->length, true);
		o->hdr_len = NBD_DATA_CHUNK_PREFIX;
	} else {
		nbd_simple_reply_encode(o->hdr, 0, r->handle);
		o->hdr_len = NBD_SIMPLE_REPLY_SIZE;
	}
	o->payload = c->v->data + r->offset;
	o->payload_len = r->length;
	o->offset = r->offset;
	out_queue(c, o);
}

/* out_size -- bytes of one reply on the wire */
static size_t out_size(const struct nbd_out *o)
{
	return (size_t)o->hdr_len + o->payload_len;
}

/* iov_add -- the unsent part of [base, base + len), given the bytes of the reply still to skip */
static void iov_add(struct iovec *iov, int *n, size_t *skip, const void *base, size_t len)
{
	if (*skip >= len) {
		*skip -= len;
		return;
	}
	iov[*n].iov_base = (uint8_t *)base + *skip;
	iov[*n].iov_len = len - *skip;
	(*n)++;
	*skip = 0;
}

/*
 * conn_flush -- send queued replies until done or the socket is full;
 * free the sent ones. Returns true if anything was freed.
 */
static bool conn_flush(struct conn_nbd *c)
{
	bool freed = false;
	while (c->out_head && !c->dead) {
		struct iovec iov[NBD_IOV_MAX];
		int n = 0;
		for (struct nbd_out *o = c->out_head; o && n + 2 <= NBD_IOV_MAX; o = o->next) {
			size_t skip = o->sent;
			iov_add(iov, &n, &skip, o->hdr, o->hdr_len);
			if (o->payload_len)
				iov_add(iov, &n, &skip, o->payload, o->payload_len);
		}
		struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ev_io_start(c->set->worker->loop, &c->wio);
				return freed;
			}
			LOG_DEBUG("%s: sendmsg failed: %s", c->peer, strerror(errno));
			conn_fail(c, "send failed");
			return freed;
		}
		size_t left = (size_t)w;
		while (left > 0 && c->out_head) {
			struct nbd_out *o = c->out_head;
			size_t rest = out_size(o) - o->sent;
			if (left < rest) {
				o->sent += left;
				break;
			}
			left -= rest;
			c->out_head = o->next;
			if (!c->out_head)
				c->out_tail = NULL;
			c->out_count--;
			if (o->payload_len)
				c->out_reads--;
			free(o);
			freed = true;
		}
	}
	ev_io_stop(c->set->worker->loop, &c->wio);
	return freed;
}

/* ---- jobs ---- */

/* job_run -- pool thread: the blocking part of a job; touches only the job and its volume */
static void job_run(struct fsync_task *t)
{
	struct nbd_job *j = (struct nbd_job *)((char *)t - offsetof(struct nbd_job, task));
	struct store *store = j->sh->store;
	switch (j->kind) {
	case JOB_EXPORT:
		if (j->option == NBD_OPT_INFO)
			j->code = store_volume_info(store, j->name, &j->info);
		else
			j->code = store_volume_open(store, j->name, &j->v);
		break;
	case JOB_LIST:
		j->code = store_volume_list(store, &j->list, &j->count);
		break;
	case JOB_CLOSE:
		store_volume_close(store, &j->v);
		break;
	case JOB_FLUSH:
		j->code = fsync_range(j->v, 0, 0, j->sh->flush_mode, NULL);
		break;
	case JOB_FUA:
		j->code = fsync_range(j->v, j->offset, j->length, j->sh->flush_mode, NULL);
		break;
	case JOB_ZERO:
		/* zeros, written back and fenced: durable without a FLUSH, so FUA holds too */
		j->code = volume_discard(j->v, j->offset, j->length);
		break;
	}
}

/* range_hazard -- does [off, off + len) overlap the data of a READ reply still queued? */
static bool range_hazard(const struct conn_nbd *c, uint64_t off, uint64_t len)
{
	if (c->out_reads == 0)
		return false;
	/* validated ranges: off + len does not wrap */
	uint64_t wb = off, we = off + len;
	for (const struct nbd_out *o = c->out_head; o; o = o->next) {
		if (!o->payload_len)
			continue;
		uint64_t rb = o->offset, re = o->offset + o->payload_len;
		if (rb < we && wb < re)
			return true;
	}
	return false;
}

static void job_done(struct worker *w, struct worker_msg *m);

/* job_new -- a job of @kind for @c; NULL if out of memory (logged) */
static struct nbd_job *job_new(struct conn_nbd *c, enum nbd_job_kind kind)
{
	struct nbd_job *j = calloc(1, sizeof(*j));
	if (!j) {
		LOG_ERROR("%s: out of memory for a job", c->peer);
		return NULL;
	}
	j->c = c;
	j->kind = kind;
	j->sh = c->set->shared;
	j->v = c->v;
	j->task.run = job_run;
	j->task.owner = c->set->worker;
	j->task.done.fn = job_done;
	return j;
}

/* job_pool -- where a job runs */
static struct fsync_pool *job_pool(const struct nbd_job *j)
{
	switch (j->kind) {
	case JOB_EXPORT:
	case JOB_LIST:
	case JOB_CLOSE:
		return j->sh->pool_meta;
	default:
		return j->sh->pool_fsync;
	}
}

static void job_complete(struct conn_nbd *c, struct nbd_job *j);

/*
 * job_start -- a FUA write's range fsync runs right here when dispatch
 * takes it (dispatch_fsync_try_inline: small, not waiting for another
 * fsync; a FLUSH covers the whole volume and is never taken), its reply
 * queued before this returns; everything else goes to its pool.
 */
static void job_start(struct conn_nbd *c, struct nbd_job *j)
{
	bool fsync = j->kind == JOB_FUA || j->kind == JOB_FLUSH;
	uint64_t off = j->kind == JOB_FUA ? j->offset : 0;
	uint64_t len = j->kind == JOB_FUA ? j->length : 0;
	if (fsync && dispatch_fsync_try_inline(j->v, off, len, j->sh->flush_mode, &j->code, NULL)) {
		job_complete(c, j);
		return;
	}
	fsync_pool_submit(job_pool(j), &j->task);
}

/* job_submit -- start @j (inline or in its pool), or park it behind READ replies over its range */
static void job_submit(struct conn_nbd *c, struct nbd_job *j)
{
	c->jobs++;
	if (j->kind == JOB_ZERO && range_hazard(c, j->offset, j->length)) {
		LOG_DEBUG("%s: %s parked until READ replies over [%" PRIu64 ", +%" PRIu32
			  ") have left",
			  c->peer, nbd_cmd_name(j->type), j->offset, j->length);
		c->parked = j;
		return;
	}
	job_start(c, j);
}

/* unpark -- start the parked job once the READ replies it waited for have left */
static void unpark(struct conn_nbd *c)
{
	struct nbd_job *j = c->parked;
	if (!j || range_hazard(c, j->offset, j->length))
		return;
	c->parked = NULL;
	job_start(c, j);
}

/* req_job -- a request that runs in the fsync pool; EIO at once if out of memory */
static void req_job(struct conn_nbd *c, const struct nbd_request *r, enum nbd_job_kind kind)
{
	struct nbd_job *j = job_new(c, kind);
	if (!j) {
		req_error(c, r->handle, r->type, NBD_EIO, "server out of memory");
		return;
	}
	j->handle = r->handle;
	j->type = r->type;
	j->offset = r->offset;
	j->length = r->length;
	job_submit(c, j);
}

/* volume_description -- "rdax volume, 64.0 MiB, namespace 0" */
static void volume_description(char *buf, size_t len, uint64_t size, uint32_t ns_id)
{
	char sz[32];
	snprintf(buf, len, "rdax volume, %s, namespace %" PRIu32,
		 size_format(size, sz, sizeof(sz)), ns_id);
}

/* export_reply -- the NBD_REP_INFO replies and the ACK of a successful INFO / GO */
static void export_reply(struct conn_nbd *c, const struct nbd_job *j, uint64_t size, uint32_t ns_id)
{
	uint8_t buf[NBD_OUT_INLINE];
	uint16_t tflags = nbd_transmission_flags(c->structured);
	size_t n = nbd_info_export_encode(buf, size, tflags);
	opt_reply(c, j->option, NBD_REP_INFO, buf, n);
	if (j->want_name) {
		n = nbd_info_string_encode(buf, sizeof(buf), NBD_INFO_NAME, j->name,
					   strlen(j->name));
		opt_reply(c, j->option, NBD_REP_INFO, buf, n);
	}
	if (j->want_description) {
		char desc[96];
		volume_description(desc, sizeof(desc), size, ns_id);
		n = nbd_info_string_encode(buf, sizeof(buf), NBD_INFO_DESCRIPTION, desc,
					   strlen(desc));
		opt_reply(c, j->option, NBD_REP_INFO, buf, n);
	}
	/* always: a client that did not ask may ignore it, the limits hold anyway */
	n = nbd_info_block_size_encode(buf, NBD_MIN_BLOCK, NBD_PREFERRED_BLOCK,
				       c->set->shared->max_block);
	opt_reply(c, j->option, NBD_REP_INFO, buf, n);
	opt_reply(c, j->option, NBD_REP_ACK, NULL, 0);
}

/* export_done -- the lookup of INFO / GO / EXPORT_NAME came back */
static void export_done(struct conn_nbd *c, struct nbd_job *j)
{
	c->phase = PH_OPT_HEADER;
	if (j->code) {
		if (j->option == NBD_OPT_EXPORT_NAME) {
			/* no way to send an error: the document says terminate */
			LOG_DEBUG("%s: export_name \"%s\": %s; closing", c->peer, j->name,
				  strerror(-j->code));
			conn_close_after(c, "unknown export");
			return;
		}
		char msg[NBD_MESSAGE_MAX];
		snprintf(msg, sizeof(msg), "export \"%s\": %s", j->name,
			 j->code == -ENOENT ? "no such volume" : strerror(-j->code));
		opt_error(c, j->option,
			  j->code == -ENOENT || j->code == -EINVAL ? NBD_REP_ERR_UNKNOWN
								   : NBD_REP_ERR_INVALID,
			  msg);
		return;
	}
	if (j->option == NBD_OPT_INFO) {
		export_reply(c, j, j->info.size, j->info.ns_id);
		return;
	}
	c->v = j->v;
	j->v = NULL;
	if (c->closing) /* drained meanwhile: the teardown closes the volume */
		return;
	if (j->option == NBD_OPT_GO) {
		export_reply(c, j, c->v->size, c->v->ns->id);
	} else {
		uint8_t buf[NBD_EXPORT_NAME_REPLY_SIZE];
		size_t n = nbd_export_name_reply_encode(
		    buf, c->v->size, nbd_transmission_flags(c->structured), c->no_zeroes);
		queue_bytes(c, buf, n);
	}
	c->phase = PH_REQ_HEADER;
	LOG_DEBUG("%s: exporting \"%s\" (%" PRIu64 " bytes, structured replies %s)", c->peer,
		  c->v->name, c->v->size, c->structured ? "on" : "off");
}

/* list_done -- one NBD_REP_SERVER per volume, then the ACK */
static void list_done(struct conn_nbd *c, struct nbd_job *j)
{
	c->phase = PH_OPT_HEADER;
	if (j->code) {
		opt_error(c, NBD_OPT_LIST, NBD_REP_ERR_TOO_BIG, "cannot list the volumes");
		return;
	}
	for (unsigned i = 0; i < j->count; i++) {
		uint8_t buf[NBD_OUT_INLINE];
		char desc[96];
		volume_description(desc, sizeof(desc), j->list[i].size, j->list[i].ns_id);
		size_t n = nbd_rep_server_encode(buf, sizeof(buf) - NBD_OPT_REPLY_HEADER_SIZE,
						 j->list[i].name, desc);
		opt_reply(c, NBD_OPT_LIST, NBD_REP_SERVER, buf, n);
	}
	opt_reply(c, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

/* job_done -- a pool job ran (worker thread, posted by the pool) */
static void job_done(struct worker *w, struct worker_msg *m)
{
	struct fsync_task *t = (struct fsync_task *)((char *)m - offsetof(struct fsync_task, done));
	struct nbd_job *j = (struct nbd_job *)((char *)t - offsetof(struct nbd_job, task));
	struct conn_nbd *c = j->c;

	job_complete(c, j);
	conn_kick(c);
}

/*
 * job_complete -- a job has run: act on its result and free it. No kick:
 * the caller (a pool completion, or job_start for an inline fsync) decides
 * what runs next.
 */
static void job_complete(struct conn_nbd *c, struct nbd_job *j)
{
	c->jobs--;
	switch (j->kind) {
	case JOB_EXPORT:
		export_done(c, j);
		break;
	case JOB_LIST:
		list_done(c, j);
		free(j->list);
		break;
	case JOB_CLOSE:
		break;
	case JOB_FLUSH:
	case JOB_FUA:
	case JOB_ZERO: {
		struct nbd_request r = {.type = j->type, .handle = j->handle};
		if (j->code) {
			LOG_ERROR("%s: %s(\"%s\", off=%" PRIu64 ", len=%" PRIu32 ") failed: %s",
				  c->peer, nbd_cmd_name(j->type), j->v->name, j->offset, j->length,
				  strerror(-j->code));
			req_error(c, j->handle, j->type, nbd_errno_map(j->code),
				  "writing back failed");
		} else {
			req_ok(c, &r);
		}
		break;
	}
	}
	free(j);
}

/* ---- options ---- */

/* opt_is_read -- options whose data is read into memory (the others are skipped) */
static bool opt_is_read(uint32_t option)
{
	switch (option) {
	case NBD_OPT_EXPORT_NAME:
	case NBD_OPT_ABORT:
	case NBD_OPT_LIST:
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
	case NBD_OPT_STRUCTURED_REPLY:
		return true;
	default:
		return false;
	}
}

/* opt_skipped -- the data of an option not read into memory is gone: refuse it */
static void opt_skipped(struct conn_nbd *c)
{
	switch (c->opt) {
	case NBD_OPT_EXPORT_NAME:
		LOG_WARN("%s: export_name of %" PRIu32 " bytes; closing", c->peer, c->opt_len);
		conn_close_after(c, "export name too long");
		return;
	case NBD_OPT_ABORT: /* data is to be ignored */
		opt_reply(c, c->opt, NBD_REP_ACK, NULL, 0);
		conn_close_after(c, "client aborted");
		return;
	case NBD_OPT_LIST:
	case NBD_OPT_STRUCTURED_REPLY:
		opt_error(c, c->opt, NBD_REP_ERR_INVALID, "this option takes no data");
		return;
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		opt_error(c, c->opt, NBD_REP_ERR_TOO_BIG, "option data too long");
		return;
	default:
		opt_error(c, c->opt, NBD_REP_ERR_UNSUP, "option not supported by this server");
		return;
	}
}

/* opt_lookup -- start the export lookup of INFO / GO / EXPORT_NAME for @name */
static void opt_lookup(struct conn_nbd *c, const char *name, size_t len, bool want_name,
		       bool want_description)
{
	char copy[NS_VOLUME_NAME_MAX + 1];
	bool valid = len > 0 && len <= NS_VOLUME_NAME_MAX;
	if (valid) {
		memcpy(copy, name, len);
		copy[len] = '\0';
		/* also refuses NUL bytes inside the name */
		valid = ns_volume_name_valid(copy) == 0 && strlen(copy) == len;
	}
	if (!valid) {
		if (c->opt == NBD_OPT_EXPORT_NAME) {
			LOG_DEBUG("%s: export_name: not a volume name; closing", c->peer);
			conn_close_after(c, "unknown export");
			return;
		}
		opt_error(c, c->opt, NBD_REP_ERR_UNKNOWN,
			  len == 0 ? "no default export: name a volume"
				   : "no such export (not a volume name)");
		return;
	}
	struct nbd_job *j = job_new(c, JOB_EXPORT);
	if (!j) {
		conn_close_after(c, "out of memory");
		return;
	}
	j->option = c->opt;
	memcpy(j->name, copy, len + 1);
	j->want_name = want_name;
	j->want_description = want_description;
	c->phase = PH_OPT_WAIT;
	job_submit(c, j);
}

/* opt_handle -- an option whose @len bytes of data are in memory */
static void opt_handle(struct conn_nbd *c, const uint8_t *data, uint32_t len)
{
	switch (c->opt) {
	case NBD_OPT_EXPORT_NAME:
		opt_lookup(c, (const char *)data, len, false, false);
		return;
	case NBD_OPT_ABORT:
		opt_reply(c, c->opt, NBD_REP_ACK, NULL, 0);
		conn_close_after(c, "client aborted");
		return;
	case NBD_OPT_LIST: {
		if (len) {
			opt_error(c, c->opt, NBD_REP_ERR_INVALID, "list takes no data");
			return;
		}
		struct nbd_job *j = job_new(c, JOB_LIST);
		if (!j) {
			opt_error(c, c->opt, NBD_REP_ERR_TOO_BIG, "server out of memory");
			return;
		}
		j->option = c->opt;
		c->phase = PH_OPT_WAIT;
		job_submit(c, j);
		return;
	}
	case NBD_OPT_STRUCTURED_REPLY:
		if (len) {
			opt_error(c, c->opt, NBD_REP_ERR_INVALID, "structured_reply takes no data");
			return;
		}
		c->structured = true;
		opt_reply(c, c->opt, NBD_REP_ACK, NULL, 0);
		return;
	case NBD_OPT_INFO:
	case NBD_OPT_GO: {
		struct nbd_opt_go go;
		const char *why;
		if (nbd_opt_go_parse(data, len, &go, &why)) {
			opt_error(c, c->opt, NBD_REP_ERR_INVALID, why);
			return;
		}
		opt_lookup(c, go.name, go.name_len, go.want_name, go.want_description);
		return;
	}
	default:
		opt_error(c, c->opt, NBD_REP_ERR_UNSUP, "option not supported by this server");
		return;
	}
}

/* ---- transmission ---- */

/* req_handle -- one request header (validated here, acted on or refused) */
static void req_handle(struct conn_nbd *c, const struct nbd_request *r)
{
	if (r->magic != NBD_REQUEST_MAGIC) {
		LOG_WARN("%s: bad request magic 0x%08" PRIx32 "; closing", c->peer, r->magic);
		conn_close_after(c, "bad request magic");
		return;
	}
	if (r->type == NBD_CMD_DISC) {
		/* requests in flight finish and their replies go out, then the socket closes */
		conn_close_after(c, "client disconnected");
		return;
	}
	const struct nbd_export_limits lim = {
	    .size = c->v->size,
	    .max_block = c->set->shared->max_block,
	    .structured = c->structured,
	};
	const char *why;
	uint32_t err = nbd_request_validate(r, &lim, &why);
	if (err) {
		char msg[NBD_MESSAGE_MAX];
		snprintf(msg, sizeof(msg),
			 "%s (offset %" PRIu64 ", length %" PRIu32 ", flags 0x%x)", why, r->offset,
			 r->length, r->flags);
		req_error(c, r->handle, r->type, err, msg);
		if (r->type != NBD_CMD_WRITE || r->length == 0)
			return;
		if (r->length > NBD_WRITE_SKIP_MAX) {
			LOG_WARN("%s: refused WRITE with a payload of %" PRIu32
				 " bytes, too large to skip; closing",
				 c->peer, r->length);
			conn_close_after(c, "oversize write");
			return;
		}
		c->req = *r;
		c->pdst = NULL; /* read and dropped */
		c->pgot = 0;
		c->phase = PH_REQ_PAYLOAD;
		return;
	}
	c->requests++;
	switch (r->type) {
	case NBD_CMD_READ:
		if (r->length == 0)
			req_ok(c, r);
		else
			req_read(c, r);
		return;
	case NBD_CMD_WRITE:
		if (r->length == 0) {
			req_ok(c, r);
			return;
		}
		c->req = *r;
		c->pdst = c->v->data + r->offset;
		c->pgot = 0;
		c->phase = PH_REQ_PAYLOAD;
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
			req_ok(c, r);
		else
			req_job(c, r, JOB_ZERO);
		return;
	default:
		/* nbd_request_validate refused every other type */
		req_error(c, r->handle, r->type, NBD_EINVAL, "unknown command");
		return;
	}
}

/* payload_complete -- a WRITE's payload is all in */
static void payload_complete(struct conn_nbd *c)
{
	const struct nbd_request *r = &c->req;
	c->phase = PH_REQ_HEADER;
	if (!c->pdst)
		return; /* refused: its reply was queued with the header */
	c->pdst = NULL;
	/* stores first, then the mark, then the reply (or the FUA write-back) */
	int ret = volume_mark_written(c->v, r->offset, r->length);
	if (ret) {
		LOG_ERROR("%s: volume_mark_written(\"%s\", %" PRIu64 ", %" PRIu32 ") failed: %s",
			  c->peer, c->v->name, r->offset, r->length, strerror(-ret));
		req_error(c, r->handle, r->type, NBD_EIO, "server could not track the write");
		return;
	}
	if (r->flags & NBD_CMD_FLAG_FUA)
		req_job(c, r, JOB_FUA);
	else
		req_ok(c, r);
}

/* ---- input ---- */

/* can_dispatch -- may a new request be started? (updates the backpressure state) */
static bool can_dispatch(struct conn_nbd *c)
{
	if (c->closing || c->dead || c->parked)
		return false;
	unsigned pending = c->out_count + c->jobs;
	if (c->paused) {
		/* hysteresis: resume at half, not at the first freed slot */
		if (pending > NBD_CONN_MAX_PENDING / 2)
			return false;
		c->paused = false;
	}
	if (pending >= NBD_CONN_MAX_PENDING) {
		c->paused = true;
		return false;
	}
	return true;
}

/* write_hazard -- would the pending WRITE's payload land under a READ reply still queued? */
static bool write_hazard(const struct conn_nbd *c)
{
	if (c->phase != PH_REQ_PAYLOAD || !c->pdst)
		return false;
	return range_hazard(c, c->req.offset, c->req.length);
}

/* get32be -- a big-endian 32-bit value */
static uint32_t get32be(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* inbuf_compact -- move the unparsed bytes to the front of the buffer */
static void inbuf_compact(struct conn_nbd *c)
{
	if (c->in_start == 0)
		return;
	memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
	c->in_end -= c->in_start;
	c->in_start = 0;
}

/* conn_process -- parse and act on whatever the input buffer holds, as far as allowed */
static void conn_process(struct conn_nbd *c)
{
	for (;;) {
		if (c->dead || c->closing)
			return;
		size_t avail = c->in_end - c->in_start;
		const uint8_t *p = c->in + c->in_start;
		switch (c->phase) {
		case PH_FLAGS: {
			if (avail < NBD_CLIENT_FLAGS_SIZE)
				return;
			uint32_t flags = get32be(p);
			c->in_start += NBD_CLIENT_FLAGS_SIZE;
			if (nbd_client_flags_check(flags)) {
				LOG_WARN("%s: unknown client flags 0x%08" PRIx32 "; closing",
					 c->peer, flags);
				conn_close_after(c, "unknown client flags");
				return;
			}
			c->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
			c->phase = PH_OPT_HEADER;
			break;
		}
		case PH_OPT_HEADER: {
			if (avail < NBD_OPT_HEADER_SIZE)
				return;
			struct nbd_opt_header h;
			nbd_opt_header_decode(p, &h);
			c->in_start += NBD_OPT_HEADER_SIZE;
			if (h.magic != NBD_OPTS_MAGIC) {
				LOG_WARN("%s: bad option magic 0x%016" PRIx64 "; closing", c->peer,
					 h.magic);
				conn_close_after(c, "bad option magic");
				return;
			}
			if (++c->noptions > NBD_MAX_OPTIONS) {
				LOG_WARN("%s: more than %d options; closing", c->peer,
					 NBD_MAX_OPTIONS);
				conn_close_after(c, "too many options");
				return;
			}
			if (h.len > NBD_OPT_SKIP_MAX) {
				LOG_WARN("%s: option %s (%" PRIu32 ") with %" PRIu32
					 " bytes of data (limit %u); closing",
					 c->peer, nbd_opt_name(h.option), h.option, h.len,
					 NBD_OPT_SKIP_MAX);
				conn_close_after(c, "option too long");
				return;
			}
			c->opt = h.option;
			c->opt_len = h.len;
			c->opt_got = 0;
			c->phase = opt_is_read(h.option) && h.len <= NBD_OPT_MAX_LEN ? PH_OPT_DATA
										     : PH_OPT_SKIP;
			break;
		}
		case PH_OPT_DATA:
			if (avail < c->opt_len) {
				/* opt_len <= NBD_OPT_MAX_LEN < NBD_INBUF_SIZE: it fits once moved
				 */
				if (c->in_start + c->opt_len > NBD_INBUF_SIZE)
					inbuf_compact(c);
				return;
			}
			c->in_start += c->opt_len;
			c->phase = PH_OPT_HEADER;
			opt_handle(c, p, c->opt_len);
			break;
		case PH_OPT_SKIP: {
			size_t n = c->opt_len - c->opt_got;
			if (n > avail)
				n = avail;
			c->in_start += n;
			c->opt_got += (uint32_t)n;
			if (c->opt_got < c->opt_len) {
				c->in_start = c->in_end = 0; /* all of it was dropped */
				return;
			}
			c->phase = PH_OPT_HEADER;
			opt_skipped(c);
			break;
		}
		case PH_OPT_WAIT:
			return;
		case PH_REQ_HEADER: {
			/* can_dispatch first: it also lifts the backpressure once drained */
			if (!can_dispatch(c) || avail < NBD_REQUEST_SIZE)
				return;
			struct nbd_request r;
			nbd_request_decode(p, &r);
			c->in_start += NBD_REQUEST_SIZE;
			req_handle(c, &r);
			break;
		}
		case PH_REQ_PAYLOAD: {
			if (write_hazard(c))
				return;
			size_t n = c->req.length - c->pgot;
			if (n > avail)
				n = avail;
			if (c->pdst && n)
				memcpy(c->pdst + c->pgot, p, n);
			c->in_start += n;
			c->pgot += (uint32_t)n;
			if (c->pgot < c->req.length) {
				c->in_start = c->in_end = 0; /* all of it was taken */
				return;
			}
			payload_complete(c);
			break;
		}
		}
		if (c->in_start == c->in_end)
			c->in_start = c->in_end = 0;
	}
}

/* want_read -- should the read watcher run? */
static bool want_read(struct conn_nbd *c)
{
	if (c->eof || c->closing || c->dead)
		return false;
	switch (c->phase) {
	case PH_OPT_WAIT:
		return false; /* the client must wait for the reply anyway */
	case PH_REQ_HEADER:
		/* blocked (backpressure, a parked job): the next request would wait anyway */
		return !(c->parked || c->paused || c->out_count + c->jobs >= NBD_CONN_MAX_PENDING);
	case PH_REQ_PAYLOAD:
		return !write_hazard(c);
	default:
		return true;
	}
}

/* input_done -- no more input will be handled: ended, or EOF with nothing usable left */
static bool input_done(const struct conn_nbd *c)
{
	if (c->dead || c->closing)
		return true;
	if (!c->eof)
		return false;
	size_t avail = c->in_end - c->in_start;
	switch (c->phase) {
	case PH_FLAGS:
		return avail < NBD_CLIENT_FLAGS_SIZE;
	case PH_OPT_HEADER:
		return avail < NBD_OPT_HEADER_SIZE;
	case PH_OPT_DATA:
		return avail < c->opt_len;
	case PH_OPT_WAIT:
		return false; /* the job's answer may still be processed */
	case PH_REQ_HEADER:
		return avail < NBD_REQUEST_SIZE;
	case PH_OPT_SKIP:
	case PH_REQ_PAYLOAD:
		return avail == 0;
	}
	return true;
}

/* conn_end -- everything is over: give back what the connection holds */
static void conn_end(struct conn_nbd *c)
{
	struct ev_loop *loop = c->set->worker->loop;
	ev_io_stop(loop, &c->rio);
	ev_io_stop(loop, &c->wio);
	if (c->phase == PH_REQ_PAYLOAD && c->pdst && c->pgot) {
		/* in the mapping already: tracked, so a later flush covers it (never acked) */
		volume_mark_written(c->v, c->req.offset, c->pgot);
		LOG_DEBUG("%s: WRITE (handle %" PRIu64 ") cut off after %" PRIu32 " of %" PRIu32
			  " bytes",
			  c->peer, c->req.handle, c->pgot, c->req.length);
	}
	c->pdst = NULL;
	outs_drop(c);
	LOG_DEBUG("%s: NBD connection closed after %" PRIu64 " requests (%s)", c->peer, c->requests,
		  c->why ? c->why : "end");
	if (c->v) {
		/*
		 * Closing a volume takes the namespace lock: not on the loop. The
		 * socket stays open until the volume is closed, so a client that
		 * sees the end of the connection (after NBD_CMD_DISC, say) knows
		 * the export is no longer held and the volume may be deleted.
		 */
		struct nbd_job *j = job_new(c, JOB_CLOSE);
		if (j) {
			c->v = NULL;
			c->tearing_down = true;
			job_submit(c, j);
			return;
		}
		store_volume_close(c->set->shared->store, &c->v);
	}
	conn_bury(c);
}

/* conn_check_end -- end the connection if nothing is left to do on it */
static void conn_check_end(struct conn_nbd *c)
{
	if (c->in_dead)
		return;
	if (c->tearing_down) {
		if (c->jobs == 0)
			conn_bury(c);
		return;
	}
	if (!input_done(c) || c->jobs > 0)
		return;
	if (!c->dead && c->out_head)
		return;
	conn_end(c);
}

/* conn_update_watchers -- start or stop reading as the state allows */
static void conn_update_watchers(struct conn_nbd *c)
{
	struct ev_loop *loop = c->set->worker->loop;
	if (c->in_dead || c->tearing_down || c->fd < 0)
		return;
	if (want_read(c))
		ev_io_start(loop, &c->rio);
	else
		ev_io_stop(loop, &c->rio);
}

/* conn_kick -- after any change: act on what became possible, fix watchers, maybe end */
static void conn_kick(struct conn_nbd *c)
{
	if (c->in_dead || c->tearing_down) {
		conn_check_end(c);
		return;
	}
	unpark(c);
	conn_process(c);
	conn_update_watchers(c);
	conn_check_end(c);
}

/* recv_some -- one recv() into @buf; >0 bytes, 0 nothing now, -1 ended (eof/dead set) */
static ssize_t recv_some(struct conn_nbd *c, void *buf, size_t len)
{
	for (;;) {
		ssize_t n = recv(c->fd, buf, len, 0);
		if (n > 0)
			return n;
		if (n == 0) {
			c->eof = true;
			if (!c->why)
				c->why = "closed by the peer";
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		LOG_DEBUG("%s: recv failed: %s", c->peer, strerror(errno));
		conn_fail(c, "receive failed");
		return -1;
	}
}

/* conn_on_read -- the socket is readable */
static void conn_on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn_nbd *c = w->data;
	for (int i = 0; i < NBD_READ_BUDGET && want_read(c); i++) {
		ssize_t n;
		if (c->phase == PH_REQ_PAYLOAD && c->pdst && c->in_start == c->in_end) {
			/* zero-copy: straight into the validated range of the mapping */
			n = recv_some(c, c->pdst + c->pgot, c->req.length - c->pgot);
			if (n <= 0)
				break;
			c->pgot += (uint32_t)n;
			if (c->pgot == c->req.length)
				payload_complete(c);
		} else {
			if (c->in_start == c->in_end)
				c->in_start = c->in_end = 0;
			if (c->in_end == sizeof(c->in))
				inbuf_compact(c);
			if (c->in_end == sizeof(c->in))
				break; /* full of requests waiting for dispatch */
			n = recv_some(c, c->in + c->in_end, sizeof(c->in) - c->in_end);
			if (n <= 0)
				break;
			c->in_end += (size_t)n;
		}
		conn_process(c);
	}
	conn_kick(c);
}

/* conn_on_write -- the socket takes more output */
static void conn_on_write(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn_nbd *c = w->data;
	conn_flush(c);
	conn_kick(c);
}

/* conn_started -- the start message: the worker takes the connection over */
static void conn_started(struct worker *w, struct worker_msg *m)
{
	struct conn_nbd *c = (struct conn_nbd *)((char *)m - offsetof(struct conn_nbd, start_msg));
	struct conn_nbd_set *set = c->set;
	c->next = set->conns;
	if (set->conns)
		set->conns->prev = c;
	set->conns = c;
	set->nconns++;
	set->accepted++;
	if (set->draining) {
		conn_close_after(c, "shutting down");
	} else {
		uint8_t g[NBD_GREETING_SIZE];
		nbd_greeting_encode(g);
		queue_bytes(c, g, sizeof(g));
	}
	LOG_DEBUG("%s: NBD connection (worker %u)", c->peer, w->id);
	flush_add(c);
	conn_kick(c);
}

int conn_nbd_start(struct conn_nbd_set *set, int fd, const char *peer)
{
	struct conn_nbd *c = calloc(1, sizeof(*c));
	if (!c) {
		LOG_ERROR("%s: out of memory for a new NBD connection; closing it", peer);
		close(fd);
		return -ENOMEM;
	}
	c->set = set;
	c->fd = fd;
	c->phase = PH_FLAGS;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	ev_io_init(&c->rio, conn_on_read, fd, EV_READ);
	c->rio.data = c;
	ev_io_init(&c->wio, conn_on_write, fd, EV_WRITE);
	c->wio.data = c;
	c->start_msg.fn = conn_started;
	worker_post(set->worker, &c->start_msg);
	return 0;
}

/* set_before_sleep -- worker hook: send queued replies, free finished connections */
static void set_before_sleep(struct worker *w, void *arg)
{
	struct conn_nbd_set *set = arg;
	for (int round = 0; set->flush && round < NBD_FLUSH_ROUNDS; round++) {
		struct conn_nbd *c = set->flush;
		set->flush = NULL;
		while (c) {
			struct conn_nbd *next = c->flush_next;
			c->in_flush = false;
			c->flush_next = NULL;
			/* freed replies may unblock input, which may queue more (next round) */
			if (!c->in_dead && conn_flush(c))
				conn_kick(c);
			else if (!c->in_dead)
				conn_check_end(c);
			c = next;
		}
	}
	if (set->flush)
		ev_idle_start(w->loop, &set->more);

	while (set->dead) {
		struct conn_nbd *c = set->dead;
		set->dead = c->dead_next;
		conn_free(c);
	}
	if (set->draining && set->nconns == 0 && !set->idle_reported) {
		set->idle_reported = true;
		ev_timer_stop(w->loop, &set->drain_timer);
		if (set->on_idle)
			set->on_idle(set, set->idle_arg);
	}
}

/* set_more -- the idle watcher: nothing to do but let the prepare hook run again */
static void set_more(struct ev_loop *loop, ev_idle *w, int revents)
{
	ev_idle_stop(loop, w);
}

/* set_drain_timeout -- clients that did not read their replies in time lose them */
static void set_drain_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct conn_nbd_set *set = t->data;
	for (struct conn_nbd *c = set->conns; c; c = c->next) {
		if (c->in_dead || c->tearing_down)
			continue;
		if (c->out_head)
			LOG_WARN("%s: replies not read %.0f s into the shutdown; dropping them",
				 c->peer, NBD_DRAIN_TIMEOUT);
		conn_fail(c, "shutdown timeout");
		conn_check_end(c);
	}
}

/* set_drain -- the drain message (worker thread) */
static void set_drain(struct worker *w, struct worker_msg *m)
{
	struct conn_nbd_set *set =
	    (struct conn_nbd_set *)((char *)m - offsetof(struct conn_nbd_set, drain_msg));
	set->draining = true;
	ev_timer_start(w->loop, &set->drain_timer);
	for (struct conn_nbd *c = set->conns; c; c = c->next) {
		if (c->in_dead || c->tearing_down)
			continue;
		conn_close_after(c, "shutting down");
		flush_add(c); /* so the hook looks at it even with nothing to send */
		conn_kick(c);
	}
	/* no connection at all: the hook reports idle before the loop sleeps */
}

void conn_nbd_set_drain(struct conn_nbd_set *set)
{
	worker_post(set->worker, &set->drain_msg);
}

int conn_nbd_set_new(struct worker *w, const struct conn_nbd_shared *shared,
		     void (*on_idle)(struct conn_nbd_set *set, void *arg), void *arg,
		     struct conn_nbd_set **out)
{
	if (!w || !shared || !out || !shared->store || !shared->pool_fsync || !shared->pool_meta ||
	    shared->max_block == 0 || shared->max_block > NBD_MAX_BLOCK)
		return -EINVAL;
	struct conn_nbd_set *set = calloc(1, sizeof(*set));
	if (!set)
		return -ENOMEM;
	set->worker = w;
	set->shared = shared;
	set->on_idle = on_idle;
	set->idle_arg = arg;
	set->drain_msg.fn = set_drain;
	ev_idle_init(&set->more, set_more);
	ev_timer_init(&set->drain_timer, set_drain_timeout, NBD_DRAIN_TIMEOUT, 0.);
	set->drain_timer.data = set;
	int ret = worker_hook_add(w, set_before_sleep, set);
	if (ret) {
		free(set);
		return ret;
	}
	*out = set;
	return 0;
}

void conn_nbd_set_delete(struct conn_nbd_set **setp)
{
	if (!setp || !*setp)
		return;
	struct conn_nbd_set *set = *setp;
	if (set->nconns)
		LOG_ERROR("worker %u: freeing an NBD connection set with %u connections",
			  set->worker->id, set->nconns);
	free(set);
	*setp = NULL;
}
