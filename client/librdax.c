/* SPDX-License-Identifier: BSD-3-Clause */
/* librdax.c -- the public API: argument checks, HELLO, volumes, I/O */
#include "errors.h"

#include "librdax.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "conn.h"
#include "frame.h"
#include "rdax.pb-c.h"
#include "rdma_proto.h"
#include "token.h"
#include "url.h"

#define CLIENT_NAME_DEFAULT "librdax"

/* Each thread's message about its last failed rdax_connect. */
static _Thread_local char connect_error[CONN_ERR_MAX];

/* --- options ------------------------------------------------------------ */

/* the public default is the shared one of both sides */
_Static_assert(RDAX_DEFAULT_BUSY_POLL_US == SPIN_WINDOW_DEFAULT_CAP_US &&
		   RDAX_BUSY_POLL_AUTO == SPIN_WINDOW_CAP_AUTO &&
		   RDAX_MAX_BUSY_POLL_US < RDAX_BUSY_POLL_AUTO,
	       "librdax.h and spin_window.h disagree on the spin cap");

int rdax_conn_opts_new(struct rdax_conn_opts **optsp)
{
	if (!optsp)
		return -EINVAL;
	struct rdax_conn_opts *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->queue_depth = RDAX_DEFAULT_QUEUE_DEPTH;
	o->busy_poll_us = RDAX_BUSY_POLL_AUTO;
	*optsp = o;
	return 0;
}

void rdax_conn_opts_delete(struct rdax_conn_opts **optsp)
{
	if (!optsp || !*optsp)
		return;
	free((*optsp)->token);
	free((*optsp)->client_name);
	free((*optsp)->tls_cert_dir);
	free((*optsp)->tls_psk_file);
	free((*optsp)->tls_username);
	free(*optsp);
	*optsp = NULL;
}

int rdax_conn_opts_set_token(struct rdax_conn_opts *opts, const void *token, size_t len)
{
	if (!opts || !token || len == 0)
		return -EINVAL;
	if (len > RDAX_TOKEN_MAX)
		return -RDAX_E_TOO_BIG;
	uint8_t *copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, token, len);
	free(opts->token);
	opts->token = copy;
	opts->token_len = len;
	return 0;
}

int rdax_conn_opts_set_token_file(struct rdax_conn_opts *opts, const char *path)
{
	if (!opts || !path)
		return -EINVAL;
	uint8_t *token;
	size_t len;
	int ret = token_file_read(path, &token, &len, NULL, 0);
	if (ret)
		return ret;
	free(opts->token);
	opts->token = token;
	opts->token_len = len;
	return 0;
}

/* replace_opt -- *slot = a copy of @value (NULL: none); 0 or -ENOMEM */
static int replace_opt(char **slot, const char *value)
{
	char *copy = NULL;
	if (value && !(copy = strdup(value)))
		return -ENOMEM;
	free(*slot);
	*slot = copy;
	return 0;
}

int rdax_conn_opts_set_tls_certificates(struct rdax_conn_opts *opts, const char *dir)
{
	if (!opts || !dir)
		return -EINVAL;
	return replace_opt(&opts->tls_cert_dir, dir);
}

int rdax_conn_opts_set_tls_psk(struct rdax_conn_opts *opts, const char *path, const char *username)
{
	if (!opts || !path)
		return -EINVAL;
	int ret = replace_opt(&opts->tls_psk_file, path);
	return ret ? ret : replace_opt(&opts->tls_username, username);
}

int rdax_conn_opts_set_client_name(struct rdax_conn_opts *opts, const char *name)
{
	if (!opts || !name)
		return -EINVAL;
	char *copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	free(opts->client_name);
	opts->client_name = copy;
	return 0;
}

int rdax_conn_opts_set_timeout(struct rdax_conn_opts *opts, int timeout_ms)
{
	if (!opts || timeout_ms < 0)
		return -EINVAL;
	opts->timeout_ms = timeout_ms;
	return 0;
}

int rdax_conn_opts_set_resume(struct rdax_conn_opts *opts, int timeout_ms)
{
	if (!opts || timeout_ms < 0)
		return -EINVAL;
	opts->resume_ms = timeout_ms;
	return 0;
}

int rdax_conn_opts_set_write_hold(struct rdax_conn_opts *opts, uint64_t bytes)
{
	if (!opts)
		return -EINVAL;
	opts->write_hold = bytes;
	return 0;
}

/* opts_copy -- a copy of @o (NULL: the defaults) kept by a connection to connect again */
static int opts_copy(const struct rdax_conn_opts *o, struct rdax_conn_opts **out)
{
	struct rdax_conn_opts *n;
	int ret = rdax_conn_opts_new(&n);
	if (ret || !o) {
		if (!ret)
			*out = n;
		return ret;
	}
	n->timeout_ms = o->timeout_ms;
	n->queue_depth = o->queue_depth;
	n->busy_poll_us = o->busy_poll_us;
	n->resume_ms = o->resume_ms;
	n->write_hold = o->write_hold;
	if ((o->token && rdax_conn_opts_set_token(n, o->token, o->token_len)) ||
	    replace_opt(&n->client_name, o->client_name) ||
	    replace_opt(&n->tls_cert_dir, o->tls_cert_dir) ||
	    replace_opt(&n->tls_psk_file, o->tls_psk_file) ||
	    replace_opt(&n->tls_username, o->tls_username)) {
		rdax_conn_opts_delete(&n);
		return -ENOMEM;
	}
	*out = n;
	return 0;
}

int rdax_conn_opts_set_busy_poll(struct rdax_conn_opts *opts, unsigned usec)
{
	if (!opts || (usec > RDAX_MAX_BUSY_POLL_US && usec != RDAX_BUSY_POLL_AUTO))
		return -EINVAL;
	opts->busy_poll_us = usec;
	return 0;
}

int rdax_conn_opts_set_queue_depth(struct rdax_conn_opts *opts, unsigned depth)
{
	if (!opts || depth == 0 || depth > RDAX_MAX_QUEUE_DEPTH)
		return -EINVAL;
	opts->queue_depth = depth;
	return 0;
}

/* --- connecting --------------------------------------------------------- */

/* connect_fail -- record this thread's connect error message; returns @code */
static int connect_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int connect_fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(connect_error, sizeof(connect_error), fmt, ap);
	va_end(ap);
	return code;
}

const char *rdax_connect_last_error(void)
{
	return connect_error;
}

/* hello_keep -- check the HELLO reply and keep its limits and namespaces; 0 or -errno/-RDAX_E_* */
static int hello_keep(struct rdax_conn *c, const Rdax__HelloReply *r)
{
	if (r->has_protocol_version && r->protocol_version != FRAME_VERSION)
		return conn_set_error(c, -RDAX_E_VERSION,
				      "%s speaks protocol version %u, this client version %u",
				      c->peer, r->protocol_version, FRAME_VERSION);
	uint32_t max_payload = r->has_max_payload ? r->max_payload : FRAME_DEFAULT_MAX_PAYLOAD;
	if (max_payload < 4096 || max_payload > FRAME_MAX_PAYLOAD_LIMIT)
		return conn_set_error(c, -RDAX_E_PROTOCOL,
				      "%s announced a max payload of %u bytes (4096..%u expected)",
				      c->peer, max_payload, FRAME_MAX_PAYLOAD_LIMIT);
	uint32_t max_body = r->has_max_body ? r->max_body : FRAME_DEFAULT_MAX_BODY;
	if (max_body < 1024)
		return conn_set_error(
		    c, -RDAX_E_PROTOCOL,
		    "%s announced a max body of %u bytes (1024 at least expected)", c->peer,
		    max_body);
	c->incarnation = r->has_incarnation ? r->incarnation : 0;
	c->powercut_allowed = r->has_powercut_allowed && r->powercut_allowed;
	if (r->server_version && !(c->server_version = strdup(r->server_version)))
		return conn_set_error(c, -ENOMEM, "%s", strerror(ENOMEM));
	if (r->n_namespaces) {
		c->namespaces = calloc(r->n_namespaces, sizeof(*c->namespaces));
		if (!c->namespaces)
			return conn_set_error(c, -ENOMEM, "%s", strerror(ENOMEM));
		for (size_t i = 0; i < r->n_namespaces; i++) {
			const Rdax__NamespaceInfo *n = r->namespaces[i];
			struct conn_namespace *ns = &c->namespaces[c->nnamespaces];
			ns->path = strdup(n->path);
			ns->mode = strdup(n->mode);
			c->nnamespaces++;
			if (!ns->path || !ns->mode)
				return conn_set_error(c, -ENOMEM, "%s", strerror(ENOMEM));
			ns->info = (struct rdax_namespace_info){
			    .id = n->id,
			    .path = ns->path,
			    .size = n->size,
			    .free_bytes = n->free_bytes,
			    .persist_method = (enum rdax_persist_method)n->persist_method,
			    .mode = ns->mode,
			};
		}
	}
	c->max_payload = max_payload;
	c->max_body = max_body;
	uint64_t window = (uint64_t)max_payload * CONN_INFLIGHT_PAYLOADS;
	c->max_inflight_bytes = window > CONN_MIN_INFLIGHT_BYTES ? window : CONN_MIN_INFLIGHT_BYTES;
	return 0;
}

/* hello_forget -- what an earlier HELLO said, before a new one on a resumed connection */
static void hello_forget(struct rdax_conn *c)
{
	for (unsigned i = 0; i < c->nnamespaces; i++) {
		free(c->namespaces[i].path);
		free(c->namespaces[i].mode);
	}
	free(c->namespaces);
	c->namespaces = NULL;
	c->nnamespaces = 0;
	free(c->server_version);
	c->server_version = NULL;
}

int conn_hello(struct rdax_conn *c, const struct rdax_conn_opts *opts)
{
	Rdax__HelloRequest req = RDAX__HELLO_REQUEST__INIT;
	req.protocol_version = FRAME_VERSION;
	if (opts && opts->token) {
		req.has_token = true;
		req.token.data = opts->token;
		req.token.len = opts->token_len;
	}
	req.client_name = opts && opts->client_name ? opts->client_name : CLIENT_NAME_DEFAULT;
	struct conn_op *op = NULL; /* set by conn_op_new_control() on success */
	int ret = conn_op_new_control(c, FRAME_HELLO, &req.base, &op);
	if (ret)
		return ret;
	conn_op_submit(c, op);
	ret = conn_op_wait(c, op);
	if (!ret) {
		hello_forget(c);
		ret = hello_keep(c, (const Rdax__HelloReply *)op->reply);
	}
	conn_op_free(op);
	return ret;
}

/*
 * url_list_parse -- @list, one address or several separated by commas, into
 * c->urls; each a tcp://, rdaxs:// or rdma:// address (the same scheme
 * throughout). 0, or -EINVAL/-ENOMEM with this thread's connect error set.
 */
static int url_list_parse(struct rdax_conn *c, const char *list)
{
	c->urls = calloc(CONN_MAX_URLS, sizeof(*c->urls));
	if (!c->urls)
		return connect_fail(-ENOMEM, "%s", strerror(ENOMEM));
	const char *p = list;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (c->nurls == CONN_MAX_URLS)
			return connect_fail(-EINVAL, "more than %d server addresses in '%s'",
					    CONN_MAX_URLS, list);
		struct conn_url *cu = &c->urls[c->nurls];
		char err[CONN_ERR_MAX];
		if (len == 0 || len >= sizeof(cu->text))
			return connect_fail(-EINVAL, "bad server address '%.*s' in '%s'", (int)len,
					    p, list);
		memcpy(cu->text, p, len);
		cu->text[len] = '\0';
		if (url_parse(cu->text, &cu->u, err, sizeof(err)))
			return connect_fail(-EINVAL, "bad server address %s", err);
		if (cu->u.scheme != URL_TCP && cu->u.scheme != URL_RDMA &&
		    cu->u.scheme != URL_RDAXS)
			return connect_fail(
			    -EINVAL,
			    "'%s' is an NBD address, for NBD clients (nbd-client, qemu-nbd); "
			    "librdax speaks rdaxd's own protocol: tcp://, rdaxs:// or rdma://",
			    cu->text);
		if (c->nurls && cu->u.scheme != c->urls[0].u.scheme)
			return connect_fail(-EINVAL,
					    "server addresses of different schemes in '%s': give "
					    "one scheme for every node",
					    list);
		c->nurls++;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* connect_one -- connect to @cu and say HELLO; 0 or the error (this thread's message set) */
static int connect_one(struct rdax_conn *c, const struct conn_url *cu,
		       const struct rdax_conn_opts *opts)
{
	char err[CONN_ERR_MAX];
	const struct url *u = &cu->u;
	int ret;
	if (u->scheme == URL_RDMA)
		ret = conn_connect_rdma(c, opts, u->host, u->port_str, strchr(u->host, ':') != NULL,
					err, sizeof(err));
	else
		ret = conn_connect(c, u->host, u->port_str, strchr(u->host, ':') != NULL, err,
				   sizeof(err));
	if (ret == 0 && u->scheme == URL_RDAXS)
		ret = conn_start_tls(c, opts, u->host, err, sizeof(err));
	if (ret)
		return connect_fail(ret, "%s", err);
	ret = conn_hello(c, opts);
	if (ret)
		return connect_fail(ret, "%s", rdax_conn_last_error(c));
	snprintf(c->url_now, sizeof(c->url_now), "%s", cu->text);
	return 0;
}

int rdax_connect(const char *url, const struct rdax_conn_opts *opts, struct rdax_conn **connp)
{
	connect_error[0] = '\0';
	if (!url || !connp)
		return connect_fail(-EINVAL, "rdax_connect: %s is NULL", url ? "connp" : "url");
	struct rdax_conn *c;
	int ret = conn_new(opts, &c);
	if (ret)
		return connect_fail(ret, "%s", strerror(-ret));
	if ((ret = url_list_parse(c, url)))
		goto err_delete;
	enum url_scheme scheme = c->urls[0].u.scheme;
	/* a PSK also signs rdma:// connection requests; certificates are TLS only */
	if (scheme == URL_TCP && opts && (opts->tls_cert_dir || opts->tls_psk_file)) {
		ret = connect_fail(-EINVAL,
				   "TLS credentials given for %s: connect to rdaxs://HOST:PORT "
				   "to use TLS",
				   url);
		goto err_delete;
	}
	if (scheme == URL_RDMA && opts && opts->tls_cert_dir) {
		ret =
		    connect_fail(-EINVAL, "rdma:// has no TLS: a certificate cannot be used (a PSK "
					  "signs the connection request)");
		goto err_delete;
	}
	if ((ret = opts_copy(opts, &c->opts))) {
		connect_fail(ret, "%s", strerror(-ret));
		goto err_delete;
	}
	c->resume_ms = c->opts->resume_ms;
	c->budget.limit = c->resume_ms ? c->opts->write_hold : 0;
	/* the first that answers, in the order given; a resume starts from it */
	for (unsigned i = 0; i < c->nurls; i++) {
		if (i > 0) {
			conn_transport_close(c);
			tls_client_delete(&c->tls_creds);
			c->broken = 0;
		}
		ret = connect_one(c, &c->urls[i], c->opts);
		if (ret == 0) {
			c->cur = i;
			break;
		}
		if (ret == -RDAX_E_ACCESS || ret == -RDAX_E_VERSION || ret == -ENOMEM)
			break;
	}
	if (ret)
		goto err_delete;
	*connp = c;
	return 0;

err_delete:
	conn_delete(&c);
	return ret;
}

int rdax_disconnect(struct rdax_conn **connp)
{
	if (!connp || !*connp)
		return 0;
	if ((*connp)->nvolumes)
		return conn_set_error(*connp, -EBUSY, "%u volume(s) still open on the connection",
				      (*connp)->nvolumes);
	conn_delete(connp);
	return 0;
}

const char *rdax_conn_last_error(const struct rdax_conn *conn)
{
	return conn ? conn->last_error : "";
}

int rdax_conn_status(const struct rdax_conn *conn)
{
	return conn ? conn->broken : -EINVAL;
}

uint32_t rdax_conn_max_payload(const struct rdax_conn *conn)
{
	return conn ? conn->max_payload : 0;
}

const char *rdax_conn_server_version(const struct rdax_conn *conn)
{
	return conn && conn->server_version ? conn->server_version : "";
}

const char *rdax_conn_primary_url(const struct rdax_conn *conn)
{
	return conn ? conn->primary_url : "";
}

unsigned rdax_conn_resumes(const struct rdax_conn *conn)
{
	return conn ? conn->resumes : 0;
}

const char *rdax_conn_url(const struct rdax_conn *conn)
{
	return conn ? conn->url_now : "";
}

uint64_t rdax_conn_incarnation(const struct rdax_conn *conn)
{
	return conn ? conn->incarnation : 0;
}

int rdax_conn_powercut_allowed(const struct rdax_conn *conn)
{
	return conn && conn->powercut_allowed;
}

unsigned rdax_conn_namespace_count(const struct rdax_conn *conn)
{
	return conn ? conn->nnamespaces : 0;
}

int rdax_conn_namespace_get(const struct rdax_conn *conn, unsigned index,
			    struct rdax_namespace_info *info)
{
	if (!conn || !info)
		return -EINVAL;
	if (index >= conn->nnamespaces)
		return -ERANGE;
	*info = conn->namespaces[index].info;
	return 0;
}

/* --- control requests --------------------------------------------------- */

/*
 * control_on -- send @msg as a request of @type and wait for its reply; on
 * success *replyp is the unpacked reply (free with
 * protobuf_c_message_free_unpacked). On a resuming connection @how says
 * what a lost connection does to it (conn.h); a request sent again is
 * packed anew with @vol's new handle written into *@handle (may be NULL).
 */
static int control_on(struct rdax_conn *c, uint16_t type, ProtobufCMessage *msg,
		      enum conn_ctl_resume how, struct rdax_volume *vol, uint32_t *handle,
		      ProtobufCMessage **replyp)
{
	if (c->broken)
		return conn_set_error(c, c->broken, "%s", c->broken_msg);
	if (vol && vol->gone)
		return conn_set_error(c, vol->gone,
				      "volume \"%s\" could not be opened again after the "
				      "connection was lost",
				      vol->name);
	struct conn_op *op = NULL; /* set by conn_op_new_control() on success */
	int ret = conn_op_new_control(c, type, msg, &op);
	if (ret)
		return ret;
	op->ctl_resume = how;
	op->ctl_msg = msg;
	op->ctl_handle = handle;
	op->vol = vol;
	conn_op_submit(c, op);
	ret = conn_op_wait(c, op);
	if (!ret && replyp) {
		*replyp = op->reply;
		op->reply = NULL;
	}
	conn_op_free(op);
	return ret;
}

/* control -- control_on for a request that a lost connection fails (not idempotent) */
static int control(struct rdax_conn *c, uint16_t type, ProtobufCMessage *msg,
		   ProtobufCMessage **replyp)
{
	return control_on(c, type, msg, CTL_FAIL, NULL, NULL, replyp);
}

/* control_again -- control_on for an idempotent request without a handle: sent again */
static int control_again(struct rdax_conn *c, uint16_t type, ProtobufCMessage *msg,
			 ProtobufCMessage **replyp)
{
	return control_on(c, type, msg, CTL_RESEND, NULL, NULL, replyp);
}

/* name_check -- a volume name argument: non-NULL and non-empty */
static int name_check(struct rdax_conn *c, const char *name)
{
	if (!name || !name[0])
		return conn_set_error(c, -EINVAL, "no volume name");
	return 0;
}

int rdax_volume_create(struct rdax_conn *conn, const char *name, uint64_t size,
		       uint32_t namespace_id)
{
	if (!conn)
		return -EINVAL;
	int ret = name_check(conn, name);
	if (ret)
		return ret;
	if (size == 0)
		return conn_set_error(conn, -EINVAL, "volume size 0");
	Rdax__VolumeCreateRequest req = RDAX__VOLUME_CREATE_REQUEST__INIT;
	req.name = (char *)name;
	req.size = size;
	req.has_namespace_id = namespace_id != RDAX_NAMESPACE_ANY;
	req.namespace_id = namespace_id;
	ProtobufCMessage *reply = NULL;
	ret = control(conn, FRAME_VOLUME_CREATE, &req.base, &reply);
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
	return ret;
}

int rdax_volume_delete(struct rdax_conn *conn, const char *name)
{
	if (!conn)
		return -EINVAL;
	int ret = name_check(conn, name);
	if (ret)
		return ret;
	Rdax__VolumeDeleteRequest req = RDAX__VOLUME_DELETE_REQUEST__INIT;
	req.name = (char *)name;
	ProtobufCMessage *reply = NULL;
	ret = control(conn, FRAME_VOLUME_DELETE, &req.base, &reply);
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
	return ret;
}

/*
 * The array rdax_namespace_list returns sits at the end of this block, which
 * keeps the unpacked reply (the strings point into it) and the ranges.
 */
struct ns_list_block {
	ProtobufCMessage *msg;
	struct rdax_bad_range *ranges;
	const char **marked;
	struct rdax_namespace_status st[];
};

/* ns_block_of -- the block around a returned array */
static struct ns_list_block *ns_block_of(struct rdax_namespace_status *st)
{
	return (struct ns_list_block *)((char *)st - offsetof(struct ns_list_block, st));
}

/* ns_status_fill -- the array of @b from the reply @r; 0 or -ENOMEM */
static int ns_status_fill(struct ns_list_block *b, const Rdax__NamespaceListReply *r)
{
	size_t nr = 0, nm = 0;
	for (size_t i = 0; i < r->n_namespaces; i++) {
		const Rdax__NamespaceHealth *h = r->namespaces[i]->health;
		nr += h ? h->n_bad_blocks : 0;
		nm += h ? h->n_marked_volumes : 0;
	}
	b->ranges = calloc(nr ? nr : 1, sizeof(*b->ranges));
	b->marked = calloc(nm ? nm : 1, sizeof(*b->marked));
	if (!b->ranges || !b->marked)
		return -ENOMEM;
	size_t ri = 0, mi = 0;
	for (size_t i = 0; i < r->n_namespaces; i++) {
		const Rdax__NamespaceInfo *n = r->namespaces[i];
		const Rdax__NamespaceHealth *h = n->health;
		struct rdax_namespace_status *st = &b->st[i];
		*st = (struct rdax_namespace_status){
		    .id = n->id,
		    .path = n->path,
		    .kind = n->kind ? n->kind : "",
		    .mode = n->mode,
		    .persist_method = (enum rdax_persist_method)n->persist_method,
		    .size = n->size,
		    .free_bytes = n->free_bytes,
		    .health = h ? h->state : "",
		};
		if (!h)
			continue;
		st->usc_supported = h->has_unsafe_shutdown_count;
		st->unsafe_shutdown_count = h->unsafe_shutdown_count;
		st->unsafe_shutdown = h->unsafe_shutdown;
		st->badblocks_supported = h->badblocks_supported;
		st->bad = &b->ranges[ri];
		st->nbad = h->n_bad_blocks;
		for (size_t k = 0; k < h->n_bad_blocks; k++, ri++)
			b->ranges[ri] = (struct rdax_bad_range){
			    .offset = h->bad_blocks[k]->offset,
			    .length = h->bad_blocks[k]->length,
			    .volume = h->bad_blocks[k]->volume,
			    .volume_offset = h->bad_blocks[k]->volume_offset,
			};
		st->marked_volumes = (const char *const *)&b->marked[mi];
		st->nmarked = h->n_marked_volumes;
		for (size_t k = 0; k < h->n_marked_volumes; k++)
			b->marked[mi++] = h->marked_volumes[k];
	}
	return 0;
}

int rdax_namespace_list(struct rdax_conn *conn, struct rdax_namespace_status **listp,
			size_t *countp)
{
	if (!conn)
		return -EINVAL;
	if (!listp || !countp)
		return conn_set_error(conn, -EINVAL, "rdax_namespace_list: NULL result pointer");
	Rdax__NamespaceListRequest req = RDAX__NAMESPACE_LIST_REQUEST__INIT;
	ProtobufCMessage *msg = NULL;
	int ret = control_again(conn, FRAME_NAMESPACE_LIST, &req.base, &msg);
	if (ret)
		return ret;
	const Rdax__NamespaceListReply *r = (const Rdax__NamespaceListReply *)msg;
	struct ns_list_block *b =
	    calloc(1, sizeof(*b) + r->n_namespaces * sizeof(struct rdax_namespace_status));
	if (!b || ns_status_fill(b, r)) {
		if (b) {
			free(b->ranges);
			free(b->marked);
		}
		free(b);
		protobuf_c_message_free_unpacked(msg, NULL);
		return conn_set_error(conn, -ENOMEM, "%s", strerror(ENOMEM));
	}
	b->msg = msg;
	*listp = b->st;
	*countp = r->n_namespaces;
	return 0;
}

void rdax_namespace_list_free(struct rdax_namespace_status **listp)
{
	if (!listp || !*listp)
		return;
	struct ns_list_block *b = ns_block_of(*listp);
	protobuf_c_message_free_unpacked(b->msg, NULL);
	free(b->ranges);
	free(b->marked);
	free(b);
	*listp = NULL;
}

/* The result of a clear: the unpacked reply (the names point into it) before the struct. */
struct unsafe_cleared_block {
	ProtobufCMessage *msg;
	struct rdax_unsafe_cleared r;
};

/* unsafe_clear -- send UNSAFE_CLEAR @req, the reply into *resultp (may be NULL) */
static int unsafe_clear(struct rdax_conn *conn, Rdax__UnsafeClearRequest *req,
			struct rdax_unsafe_cleared **resultp)
{
	ProtobufCMessage *msg = NULL;
	int ret = control(conn, FRAME_UNSAFE_CLEAR, &req->base, &msg);
	if (ret)
		return ret;
	if (!resultp) {
		protobuf_c_message_free_unpacked(msg, NULL);
		return 0;
	}
	const Rdax__UnsafeClearReply *r = (const Rdax__UnsafeClearReply *)msg;
	struct unsafe_cleared_block *b = calloc(1, sizeof(*b));
	if (!b) {
		protobuf_c_message_free_unpacked(msg, NULL);
		return conn_set_error(conn, -ENOMEM, "%s", strerror(ENOMEM));
	}
	b->msg = msg;
	b->r = (struct rdax_unsafe_cleared){
	    .namespace_id = r->namespace_id,
	    .namespace_cleared = r->has_namespace_cleared && r->namespace_cleared,
	    .nvolumes = r->n_cleared_volumes,
	    .volumes = (const char *const *)r->cleared_volumes,
	};
	*resultp = &b->r;
	return 0;
}

int rdax_volume_clear_unsafe(struct rdax_conn *conn, const char *name,
			     struct rdax_unsafe_cleared **resultp)
{
	if (!conn)
		return -EINVAL;
	int ret = name_check(conn, name);
	if (ret)
		return ret;
	Rdax__UnsafeClearRequest req = RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	req.volume = (char *)name;
	return unsafe_clear(conn, &req, resultp);
}

int rdax_namespace_clear_unsafe(struct rdax_conn *conn, const char *path, uint32_t namespace_id,
				struct rdax_unsafe_cleared **resultp)
{
	if (!conn)
		return -EINVAL;
	if (path && !path[0])
		return conn_set_error(conn, -EINVAL, "no namespace path");
	Rdax__UnsafeClearRequest req = RDAX__UNSAFE_CLEAR_REQUEST__INIT;
	req.namespace_path = (char *)path;
	req.has_namespace_id = !path;
	req.namespace_id = namespace_id;
	return unsafe_clear(conn, &req, resultp);
}

void rdax_unsafe_cleared_free(struct rdax_unsafe_cleared **resultp)
{
	if (!resultp || !*resultp)
		return;
	struct unsafe_cleared_block *b =
	    (struct unsafe_cleared_block *)((char *)*resultp -
					    offsetof(struct unsafe_cleared_block, r));
	protobuf_c_message_free_unpacked(b->msg, NULL);
	free(b);
	*resultp = NULL;
}

/* infos_new -- one allocation: @n entries, then their names; NULL on -ENOMEM */
static struct rdax_volume_info *infos_new(Rdax__VolumeInfo *const *v, size_t n)
{
	size_t bytes = n * sizeof(struct rdax_volume_info);
	for (size_t i = 0; i < n; i++)
		bytes += strlen(v[i]->name) + 1;
	struct rdax_volume_info *infos = malloc(bytes ? bytes : 1);
	if (!infos)
		return NULL;
	char *names = (char *)(infos + n);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(v[i]->name) + 1;
		memcpy(names, v[i]->name, len);
		infos[i] = (struct rdax_volume_info){
		    .name = names,
		    .size = v[i]->size,
		    .namespace_id = v[i]->namespace_id,
		    .namespace_offset = v[i]->namespace_offset,
		};
		names += len;
	}
	return infos;
}

int rdax_volume_list(struct rdax_conn *conn, struct rdax_volume_info **infosp, size_t *countp)
{
	if (!conn)
		return -EINVAL;
	if (!infosp || !countp)
		return conn_set_error(conn, -EINVAL, "rdax_volume_list: NULL result pointer");
	Rdax__VolumeListRequest req = RDAX__VOLUME_LIST_REQUEST__INIT;
	ProtobufCMessage *msg = NULL;
	int ret = control_again(conn, FRAME_VOLUME_LIST, &req.base, &msg);
	if (ret)
		return ret;
	const Rdax__VolumeListReply *r = (const Rdax__VolumeListReply *)msg;
	struct rdax_volume_info *infos = NULL;
	if (r->n_volumes && !(infos = infos_new(r->volumes, r->n_volumes)))
		ret = conn_set_error(conn, -ENOMEM, "%s", strerror(ENOMEM));
	if (!ret) {
		*infosp = infos;
		*countp = r->n_volumes;
	}
	protobuf_c_message_free_unpacked(msg, NULL);
	return ret;
}

int rdax_volume_info(struct rdax_conn *conn, const char *name, struct rdax_volume_info **infop)
{
	if (!conn)
		return -EINVAL;
	int ret = name_check(conn, name);
	if (ret)
		return ret;
	if (!infop)
		return conn_set_error(conn, -EINVAL, "rdax_volume_info: NULL result pointer");
	Rdax__VolumeInfoRequest req = RDAX__VOLUME_INFO_REQUEST__INIT;
	req.name = (char *)name;
	ProtobufCMessage *msg = NULL;
	ret = control_again(conn, FRAME_VOLUME_INFO, &req.base, &msg);
	if (ret)
		return ret;
	const Rdax__VolumeInfoReply *r = (const Rdax__VolumeInfoReply *)msg;
	if (!r->volume) {
		ret = conn_set_error(conn, -RDAX_E_PROTOCOL,
				     "%s sent a volume-info reply without the volume", conn->peer);
	} else {
		struct rdax_volume_info *info = infos_new(&r->volume, 1);
		if (info)
			*infop = info;
		else
			ret = conn_set_error(conn, -ENOMEM, "%s", strerror(ENOMEM));
	}
	protobuf_c_message_free_unpacked(msg, NULL);
	return ret;
}

void rdax_volume_info_free(struct rdax_volume_info **infosp)
{
	if (!infosp)
		return;
	free(*infosp);
	*infosp = NULL;
}

/*
 * open_reply_take -- what a VOLUME_OPEN reply says about @v: handle, size,
 * window (rdma://), epoch and verifier. 0 or -RDAX_E_PROTOCOL.
 */
static int open_reply_take(struct rdax_conn *conn, struct rdax_volume *v,
			   const Rdax__VolumeOpenReply *r)
{
	if (!r->has_handle || !r->has_size)
		return conn_set_error(conn, -RDAX_E_PROTOCOL,
				      "%s sent a volume-open reply without handle or size",
				      conn->peer);
	v->handle = r->handle;
	v->size = r->size;
	v->direct = false;
	v->imm_durable = false;
	if (conn->rdma && r->has_remote_addr && r->has_rkey && r->has_imm_volume_id) {
		/* a daemon that names no unit predates lines: its notices name pages */
		uint32_t shift = r->has_imm_unit_shift ? r->imm_unit_shift : RDMA_IMM_SHIFT_PAGE;
		if (!rdma_imm_shift_valid(shift))
			return conn_set_error(conn, -RDAX_E_PROTOCOL,
					      "%s sent a volume-open reply with write notices in "
					      "units of 2^%" PRIu32
					      " bytes (lines or pages expected)",
					      conn->peer, shift);
		/* rdma://: writes and reads go one-sided through the volume's window */
		v->direct = true;
		v->remote_addr = r->remote_addr;
		v->rkey = r->rkey;
		v->imm_base = r->imm_volume_id;
		v->imm_shift = shift;
		/* D only inside the space it fits (rdma_proto.h): else plain notices and FSYNCs */
		v->imm_durable = r->has_imm_durable && r->imm_durable &&
				 (uint64_t)r->imm_volume_id + (r->size >> shift) <= RDMA_IMM_SPACE_UNITS;
	}
	if (r->has_epoch && r->epoch > v->epoch)
		v->epoch = r->epoch;
	/* a server that sends no verifier: its incarnation (HELLO), else nothing to compare */
	v->verifier = r->has_verifier ? r->verifier : conn->incarnation;
	return 0;
}

/*
 * volume_open -- rdax_volume_open, as a replica link when @replica is set
 * (conn_volume_open_replica)
 */
static int volume_open(struct rdax_conn *conn, const char *name, Rdax__ReplicaOpen *replica,
		       struct rdax_volume **volp)
{
	if (!conn)
		return -EINVAL;
	int ret = name_check(conn, name);
	if (ret)
		return ret;
	if (!volp)
		return conn_set_error(conn, -EINVAL, "rdax_volume_open: NULL result pointer");
	struct rdax_volume *v = calloc(1, sizeof(*v));
	if (!v)
		return conn_set_error(conn, -ENOMEM, "%s", strerror(ENOMEM));
	held_init(&v->held);
	v->name = strdup(name);
	if (!v->name) {
		ret = conn_set_error(conn, -ENOMEM, "%s", strerror(ENOMEM));
		goto err_free_vol;
	}
	Rdax__VolumeOpenRequest req = RDAX__VOLUME_OPEN_REQUEST__INIT;
	req.name = (char *)name;
	req.replica = replica;
	/* one-sided writes are then tracked by the lines they touch (docs/rdma.md) */
	req.has_imm_line_units = req.imm_line_units = conn->rdma != NULL;
	ProtobufCMessage *msg = NULL;
	/* an ordinary open is sent again after a reconnect (and follows the primary) */
	ret = control_on(conn, FRAME_VOLUME_OPEN, &req.base, replica ? CTL_FAIL : CTL_RESEND, NULL,
			 NULL, &msg);
	if (ret)
		goto err_free_name;
	v->conn = conn;
	ret = open_reply_take(conn, v, (const Rdax__VolumeOpenReply *)msg);
	protobuf_c_message_free_unpacked(msg, NULL);
	if (ret)
		goto err_free_name;
	conn->nvolumes++;
	v->next = conn->volumes;
	if (conn->volumes)
		conn->volumes->prev = v;
	conn->volumes = v;
	*volp = v;
	return 0;

err_free_name:
	free(v->name);
err_free_vol:
	free(v);
	return ret;
}

int conn_volume_reopen(struct rdax_conn *c, struct rdax_volume *v)
{
	Rdax__VolumeOpenRequest req = RDAX__VOLUME_OPEN_REQUEST__INIT;
	req.name = v->name;
	req.has_imm_line_units = req.imm_line_units = c->rdma != NULL;
	ProtobufCMessage *msg = NULL;
	int ret = control(c, FRAME_VOLUME_OPEN, &req.base, &msg);
	if (ret)
		return ret;
	const Rdax__VolumeOpenReply *r = (const Rdax__VolumeOpenReply *)msg;
	uint64_t size = v->size;
	if (r->has_epoch && r->epoch < v->epoch)
		ret = conn_set_error(c, -RDAX_E_NOT_PRIMARY,
				     "%s serves volume \"%s\" at epoch %" PRIu64
				     ", older than the %" PRIu64
				     " seen: a node a failover left behind",
				     c->peer, v->name, r->epoch, v->epoch);
	else if (r->has_size && r->size != size)
		ret = conn_set_error(c, -ESTALE,
				     "volume \"%s\" is %" PRIu64 " bytes on %s, was %" PRIu64
				     ": not the volume that was open",
				     v->name, r->size, c->peer, size);
	else
		ret = open_reply_take(c, v, r);
	protobuf_c_message_free_unpacked(msg, NULL);
	return ret;
}

int rdax_volume_open(struct rdax_conn *conn, const char *name, struct rdax_volume **volp)
{
	return volume_open(conn, name, NULL, volp);
}

int conn_replica_digest(struct rdax_volume *vol, uint64_t offset, uint64_t length,
			uint32_t block_size, uint8_t *out, size_t outlen)
{
	Rdax__ReplicaDigestRequest req = RDAX__REPLICA_DIGEST_REQUEST__INIT;
	req.handle = vol->handle;
	req.offset = offset;
	req.length = length;
	req.block_size = block_size;
	ProtobufCMessage *msg = NULL;
	int ret = control(vol->conn, FRAME_REPLICA_DIGEST, &req.base, &msg);
	if (ret)
		return ret;
	const Rdax__ReplicaDigestReply *r = (const Rdax__ReplicaDigestReply *)msg;
	if (!r->has_digests || block_size == 0 || r->digests.len != length / block_size * 16 ||
	    r->digests.len > outlen)
		ret = conn_set_error(vol->conn, -RDAX_E_PROTOCOL,
				     "%s sent %zu digest bytes for %llu bytes in blocks of %u",
				     vol->conn->peer, r->has_digests ? r->digests.len : 0,
				     (unsigned long long)length, block_size);
	else
		memcpy(out, r->digests.data, r->digests.len);
	protobuf_c_message_free_unpacked(msg, NULL);
	return ret;
}

int conn_volume_open_replica(struct rdax_conn *conn, const char *name, uint64_t epoch,
			     const char *primary, uint64_t incarnation, struct rdax_volume **volp)
{
	Rdax__ReplicaOpen r = RDAX__REPLICA_OPEN__INIT;
	r.epoch = epoch;
	r.primary = (char *)primary;
	r.has_primary_incarnation = 1;
	r.primary_incarnation = incarnation;
	return volume_open(conn, name, &r, volp);
}

int rdax_volume_close(struct rdax_volume **volp)
{
	if (!volp || !*volp)
		return 0;
	struct rdax_volume *v = *volp;
	struct rdax_conn *c = v->conn;
	if (v->ops_active)
		return conn_set_error(c, -EBUSY,
				      "close %s: %u asynchronous operation(s) not yet completed",
				      v->name, v->ops_active);
	int ret = 0;
	if (!c->broken && !c->lost && !v->gone) {
		Rdax__VolumeCloseRequest req = RDAX__VOLUME_CLOSE_REQUEST__INIT;
		req.handle = v->handle;
		ProtobufCMessage *reply = NULL;
		ret = control_on(c, FRAME_VOLUME_CLOSE, &req.base, CTL_DONE_ON_LOSS, v, &req.handle,
				 &reply);
		if (reply)
			protobuf_c_message_free_unpacked(reply, NULL);
	}
	/* on a broken or lost connection the server has closed the handle already */
	c->nvolumes--;
	if (v->prev)
		v->prev->next = v->next;
	else
		c->volumes = v->next;
	if (v->next)
		v->next->prev = v->prev;
	held_clear(&v->held, &c->budget);
	free(v->name);
	free(v);
	*volp = NULL;
	return ret;
}

uint64_t rdax_volume_size(const struct rdax_volume *vol)
{
	return vol ? vol->size : 0;
}

uint64_t rdax_volume_epoch(const struct rdax_volume *vol)
{
	return vol ? vol->epoch : 0;
}

const char *rdax_volume_name(const struct rdax_volume *vol)
{
	return vol ? vol->name : "";
}

/* --- data operations ---------------------------------------------------- */

/*
 * range_arg -- check [offset, offset + len) of @v before anything is sent.
 * Returns 0, -EINVAL, -EOVERFLOW, -ERANGE.
 */
static int range_arg(struct rdax_volume *v, uint64_t offset, uint64_t len)
{
	struct rdax_conn *c = v->conn;
	int ret = range_check(offset, len, v->size);
	if (ret == -EOVERFLOW)
		return conn_set_error(c, ret, "offset %llu + length %llu overflows",
				      (unsigned long long)offset, (unsigned long long)len);
	if (ret)
		return conn_set_error(c, ret,
				      "offset+length beyond the end of the volume (size %llu)",
				      (unsigned long long)v->size);
	return 0;
}

/*
 * data_op -- check the arguments of a data operation and build it. @len 0 is
 * allowed only for fsync (to the end). Returns 0 with *opp, or the error.
 */
static int data_op(struct rdax_volume *v, enum conn_op_kind kind, uint64_t offset, uint64_t len,
		   const void *buf, unsigned flags, struct conn_op **opp)
{
	if (!v)
		return -EINVAL;
	struct rdax_conn *c = v->conn;
	unsigned known = kind == OP_WRITE   ? RDAX_WRITE_FSYNC
			 : kind == OP_FSYNC ? RDAX_FSYNC_HAMMER
					    : 0;
	if (kind != OP_FSYNC && !buf)
		return conn_set_error(c, -EINVAL, "NULL buffer");
	if (kind != OP_FSYNC && len == 0)
		return conn_set_error(c, -EINVAL, "length 0");
	if (flags & ~known)
		return conn_set_error(c, -EINVAL, "unknown flags 0x%x", flags & ~known);
	int ret;
	if (kind == OP_FSYNC && len == 0)
		ret = offset > v->size
			  ? conn_set_error(c, -ERANGE,
					   "offset beyond the end of the volume (size %llu)",
					   (unsigned long long)v->size)
			  : 0;
	else
		ret = range_arg(v, offset, len);
	if (ret)
		return ret;
	if (c->broken)
		return conn_set_error(c, c->broken, "%s", c->broken_msg);
	if (v->gone)
		return conn_set_error(c, v->gone,
				      "volume \"%s\" could not be opened again after the "
				      "connection was lost",
				      v->name);
	struct conn_op *op = conn_op_new(kind);
	if (!op)
		return conn_set_error(c, -ENOMEM, "%s", strerror(ENOMEM));
	op->vol = v;
	op->offset = offset;
	op->length = len;
	if (kind == OP_WRITE)
		op->wbuf = buf;
	else if (kind == OP_READ)
		op->rbuf = (uint8_t *)buf;
	op->durable = kind == OP_WRITE && (flags & RDAX_WRITE_FSYNC);
	op->hammer = kind == OP_FSYNC && (flags & RDAX_FSYNC_HAMMER);
	*opp = op;
	return 0;
}

/* run_sync -- submit @op and wait for it; *written_back (may be NULL) from its replies */
static int run_sync(struct rdax_conn *c, struct conn_op *op, uint64_t *written_back)
{
	conn_op_submit(c, op);
	int ret = conn_op_wait(c, op);
	if (!ret && written_back)
		*written_back = op->written_back;
	conn_op_free(op);
	return ret;
}

int rdax_write(struct rdax_volume *vol, uint64_t offset, const void *buf, size_t len,
	       unsigned flags)
{
	struct conn_op *op = NULL; /* set by data_op() on success */
	int ret = data_op(vol, OP_WRITE, offset, len, buf, flags, &op);
	return ret ? ret : run_sync(vol->conn, op, NULL);
}

int rdax_read(struct rdax_volume *vol, uint64_t offset, void *buf, size_t len)
{
	struct conn_op *op = NULL; /* set by data_op() on success */
	int ret = data_op(vol, OP_READ, offset, len, buf, 0, &op);
	return ret ? ret : run_sync(vol->conn, op, NULL);
}

int rdax_fsync_flags(struct rdax_volume *vol, uint64_t offset, uint64_t length, unsigned flags,
		     uint64_t *written_back)
{
	struct conn_op *op = NULL; /* set by data_op() on success */
	int ret = data_op(vol, OP_FSYNC, offset, length, NULL, flags, &op);
	return ret ? ret : run_sync(vol->conn, op, written_back);
}

int rdax_fsync(struct rdax_volume *vol, uint64_t offset, uint64_t length, uint64_t *written_back)
{
	return rdax_fsync_flags(vol, offset, length, 0, written_back);
}

/*
 * discard_new -- a DISCARD of [offset, offset + length) of @vol as an op that
 * carries its own message (so it can be sent again after a resume, whoever
 * waits for it). Returns 0 with *out, or the error.
 */
static int discard_new(struct rdax_volume *vol, uint64_t offset, uint64_t length,
		       struct conn_op **out)
{
	struct rdax_conn *c = vol->conn;
	if (length == 0)
		return conn_set_error(c, -EINVAL, "length 0");
	int ret = range_arg(vol, offset, length);
	if (ret)
		return ret;
	if (c->broken)
		return conn_set_error(c, c->broken, "%s", c->broken_msg);
	if (vol->gone)
		return conn_set_error(c, vol->gone,
				      "volume \"%s\" could not be opened again after the "
				      "connection was lost",
				      vol->name);
	Rdax__DiscardRequest *req = malloc(sizeof(*req));
	if (!req)
		return conn_set_error(c, -ENOMEM, "%s", strerror(ENOMEM));
	rdax__discard_request__init(req);
	req->handle = vol->handle;
	req->offset = offset;
	req->length = length;
	struct conn_op *op = NULL; /* set by conn_op_new_control() on success */
	ret = conn_op_new_control(c, FRAME_DISCARD, &req->base, &op);
	if (ret) {
		free(req);
		return ret;
	}
	op->ctl_own = req;
	op->ctl_msg = &req->base;
	op->ctl_handle = &req->handle;
	op->ctl_resume = CTL_RESEND;
	op->vol = vol;
	op->offset = offset; /* the range whose held writes it makes moot (conn.c, op_verify) */
	op->length = length;
	*out = op;
	return 0;
}

int rdax_discard(struct rdax_volume *vol, uint64_t offset, uint64_t length)
{
	if (!vol)
		return -EINVAL;
	struct conn_op *op = NULL; /* set by discard_new() on success */
	int ret = discard_new(vol, offset, length, &op);
	if (ret)
		return ret;
	conn_op_submit(vol->conn, op);
	ret = conn_op_wait(vol->conn, op);
	conn_op_free(op);
	return ret;
}

int rdax_stat(struct rdax_volume *vol, struct rdax_volume_stat *st)
{
	if (!vol)
		return -EINVAL;
	struct rdax_conn *c = vol->conn;
	if (!st)
		return conn_set_error(c, -EINVAL, "rdax_stat: NULL result pointer");
	Rdax__StatRequest req = RDAX__STAT_REQUEST__INIT;
	req.handle = vol->handle;
	ProtobufCMessage *msg = NULL;
	int ret = control_on(c, FRAME_STAT, &req.base, CTL_RESEND, vol, &req.handle, &msg);
	if (ret)
		return ret;
	const Rdax__StatReply *r = (const Rdax__StatReply *)msg;
	*st = (struct rdax_volume_stat){
	    .size = r->has_size ? r->size : vol->size,
	    .dirty_bytes = r->dirty_bytes,
	    .entries_4k = r->entries_4k,
	    .entries_2m = r->entries_2m,
	    .entries_1g = r->entries_1g,
	    .tree_bytes = r->tree_bytes,
	    .fsyncs = r->fsyncs,
	    .fsync_bytes = r->fsync_bytes,
	};
	protobuf_c_message_free_unpacked(msg, NULL);
	return 0;
}

int rdax_powercut(struct rdax_conn *conn, uint64_t after, unsigned delay_ms, uint64_t *incarnation)
{
	if (!conn)
		return -EINVAL;
	if (delay_ms > RDAX_POWERCUT_MAX_DELAY_MS)
		return conn_set_error(conn, -EINVAL, "power cut delay %u ms exceeds %u ms",
				      delay_ms, RDAX_POWERCUT_MAX_DELAY_MS);
	Rdax__PowercutRequest req = RDAX__POWERCUT_REQUEST__INIT;
	if (after) {
		req.has_after = 1;
		req.after = after;
	}
	if (delay_ms) {
		req.has_delay_ms = 1;
		req.delay_ms = delay_ms;
	}
	ProtobufCMessage *msg = NULL;
	int ret = control(conn, FRAME_POWERCUT, &req.base, &msg);
	if (ret)
		return ret;
	const Rdax__PowercutReply *r = (const Rdax__PowercutReply *)msg;
	if (incarnation)
		*incarnation = r->has_incarnation ? r->incarnation : 0;
	protobuf_c_message_free_unpacked(msg, NULL);
	return 0;
}

/* --- asynchronous operations -------------------------------------------- */

/* submit_async -- queue a checked op as asynchronous, if the queue depth allows */
static int submit_async(struct rdax_volume *vol, struct conn_op *op, uint64_t cookie)
{
	struct rdax_conn *c = vol->conn;
	if (c->nasync >= c->queue_depth) {
		conn_op_free(op);
		return conn_set_error(c, -EAGAIN,
				      "%u asynchronous operations in flight (the queue depth): "
				      "reap completions first",
				      c->nasync);
	}
	op->async = true;
	op->cookie = cookie;
	conn_op_submit(c, op);
	return 0;
}

int rdax_submit_write(struct rdax_volume *vol, uint64_t offset, const void *buf, size_t len,
		      unsigned flags, uint64_t cookie)
{
	struct conn_op *op = NULL; /* set by data_op() on success */
	int ret = data_op(vol, OP_WRITE, offset, len, buf, flags, &op);
	return ret ? ret : submit_async(vol, op, cookie);
}

int rdax_submit_read(struct rdax_volume *vol, uint64_t offset, void *buf, size_t len,
		     uint64_t cookie)
{
	struct conn_op *op = NULL; /* set by data_op() on success */
	int ret = data_op(vol, OP_READ, offset, len, buf, 0, &op);
	return ret ? ret : submit_async(vol, op, cookie);
}

int rdax_submit_fsync(struct rdax_volume *vol, uint64_t offset, uint64_t length, unsigned flags,
		      uint64_t cookie)
{
	struct conn_op *op = NULL; /* set by data_op() on success */
	int ret = data_op(vol, OP_FSYNC, offset, length, NULL, flags, &op);
	return ret ? ret : submit_async(vol, op, cookie);
}

int conn_submit_discard(struct rdax_volume *vol, uint64_t offset, uint64_t length, uint64_t cookie)
{
	if (!vol)
		return -EINVAL;
	struct conn_op *op = NULL; /* set by discard_new() on success */
	int ret = discard_new(vol, offset, length, &op);
	return ret ? ret : submit_async(vol, op, cookie);
}

int rdax_wait_completions(struct rdax_conn *conn, struct rdax_completion *out, unsigned max,
			  unsigned min, int timeout_ms)
{
	if (!conn)
		return -EINVAL;
	if (!out || max == 0 || min > max || timeout_ms < -1)
		return conn_set_error(conn, -EINVAL,
				      "wait_completions: bad arguments (out %s, max %u, min %u, "
				      "timeout %d)",
				      out ? "set" : "NULL", max, min, timeout_ms);
	return conn_reap(conn, out, max, min, timeout_ms);
}

unsigned rdax_inflight(const struct rdax_conn *conn)
{
	return conn ? conn->nasync : 0;
}
