/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd_handshake.c -- the NBD handshake: client flags, option haggling, the export lookup
 *
 * The first phase of an NBD connection (nbd_conn.h): everything between the
 * greeting and NBD_OPT_GO / NBD_OPT_EXPORT_NAME, after which the connection
 * is in transmission (nbd_transmission.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"
#include "size.h"
#include "log.h"
#include "cluster_dir.h"
#include "cluster_gate.h"
#include "nbd_conn.h"
#include "tls_wire.h"

/* The namespace of a cluster volume in a list or a description: its primary's, on another node. */
#define NBD_NS_CLUSTER UINT32_MAX

/* volume_description -- "rdax volume, 64.0 MiB, namespace 0", or "rdax cluster volume, ..." */
static void volume_description(char *buf, size_t len, uint64_t size, uint32_t ns_id)
{
	char sz[32];
	if (ns_id == NBD_NS_CLUSTER)
		snprintf(buf, len, "rdax cluster volume, %s", size_format(size, sz, sizeof(sz)));
	else
		snprintf(buf, len, "rdax volume, %s, namespace %" PRIu32,
			 size_format(size, sz, sizeof(sz)), ns_id);
}

/*
 * export_flags -- the transmission flags, read-only for a client with ro
 * rights. A forwarded export does not offer CAN_MULTI_CONN: each connection
 * forwards on a connection of its own, and after a failover one's FLUSH may
 * reach the new primary before another's held writes were sent to it again
 * (docs/nbd.md, "Clusters").
 */
static uint16_t export_flags(const struct nbd_conn *c, bool forwarded)
{
	uint16_t f = nbd_transmission_flags(c->structured);
	if (forwarded)
		f &= (uint16_t)~NBD_FLAG_CAN_MULTI_CONN;
	return (uint16_t)(f | (c->ro ? NBD_FLAG_READ_ONLY : 0));
}

/* export_reply -- the NBD_REP_INFO replies and the ACK of a successful INFO / GO */
static void export_reply(struct nbd_conn *c, const struct nbd_job *j, uint64_t size, uint32_t ns_id)
{
	uint8_t buf[NBD_OUT_INLINE];
	uint16_t tflags = export_flags(c, ns_id == NBD_NS_CLUSTER);
	size_t n = nbd_info_export_encode(buf, size, tflags);
	nbd_opt_reply(c, j->option, NBD_REP_INFO, buf, n);
	if (j->want_name) {
		n = nbd_info_string_encode(buf, sizeof(buf), NBD_INFO_NAME, j->name,
					   strlen(j->name));
		nbd_opt_reply(c, j->option, NBD_REP_INFO, buf, n);
	}
	if (j->want_description) {
		char desc[96];
		volume_description(desc, sizeof(desc), size, ns_id);
		n = nbd_info_string_encode(buf, sizeof(buf), NBD_INFO_DESCRIPTION, desc,
					   strlen(desc));
		nbd_opt_reply(c, j->option, NBD_REP_INFO, buf, n);
	}
	/* always: a client that did not ask may ignore it, the limits hold anyway */
	n = nbd_info_block_size_encode(buf, NBD_MIN_BLOCK, NBD_PREFERRED_BLOCK, c->sh->max_block);
	nbd_opt_reply(c, j->option, NBD_REP_INFO, buf, n);
	nbd_opt_reply(c, j->option, NBD_REP_ACK, NULL, 0);
}

/* export_done -- the lookup of INFO / GO / EXPORT_NAME came back */
static void export_done(struct nbd_conn *c, struct nbd_job *j)
{
	c->phase = PH_OPT_HEADER;
	if (j->op.code) {
		if (j->option == NBD_OPT_EXPORT_NAME) {
			/* no way to send an error: the document says terminate */
			LOG_DEBUG("%s: export_name \"%s\": %s; closing", c->s.conn.peer, j->name,
				  strerror(-j->op.code));
			conn_close(&c->s.conn, "unknown export");
			return;
		}
		char msg[2 * NBD_MESSAGE_MAX]; /* cut to what a reply holds when sent */
		snprintf(msg, sizeof(msg), "export \"%s\": %s", j->name,
			 j->why[0]		 ? j->why
			 : j->op.code == -ENOENT ? "no such volume"
						 : rdax_strerror(j->op.code));
		if (j->kind == JOB_FORWARD && j->op.code != -ENOENT)
			LOG_WARN("%s: %s", c->s.conn.peer, msg);
		nbd_opt_error(c, j->option,
			      j->op.code == -ENOENT || j->op.code == -EINVAL ? NBD_REP_ERR_UNKNOWN
									     : NBD_REP_ERR_INVALID,
			      msg);
		return;
	}
	if (j->option == NBD_OPT_INFO) {
		export_reply(c, j, j->op.info.size,
			     j->forwarded ? NBD_NS_CLUSTER : j->op.info.ns_id);
		return;
	}
	uint32_t ns_id;
	if (j->fwd) {
		c->fwd = j->fwd;
		j->fwd = NULL;
		c->size = nbd_forward_size(c->fwd);
		ns_id = NBD_NS_CLUSTER;
	} else {
		c->v = j->op.v;
		j->op.v = NULL;
		c->size = c->v->size;
		ns_id = c->v->ns->id;
		c->gate = cluster_gate_find(c->v->name); /* a cluster volume served here */
	}
	if (c->s.conn.closing) /* drained meanwhile: the teardown closes the volume */
		return;
	if (c->fwd)
		nbd_forward_start(c->fwd, c->s.conn.set->worker, c->sh->forward, nbd_forward_kick,
				  c);
	if (j->option == NBD_OPT_GO) {
		export_reply(c, j, c->size, ns_id);
	} else {
		uint8_t buf[NBD_EXPORT_NAME_REPLY_SIZE];
		size_t n = nbd_export_name_reply_encode(
		    buf, c->size, export_flags(c, ns_id == NBD_NS_CLUSTER), c->no_zeroes);
		nbd_queue_bytes(c, buf, n);
	}
	c->phase = PH_REQ_HEADER;
	conn_handshake_done(&c->s.conn); /* option haggling is over: the handshake limit too */
	LOG_DEBUG("%s: exporting \"%s\" (%" PRIu64 " bytes, %s, structured replies %s)",
		  c->s.conn.peer, j->name, c->size, c->fwd ? "forwarded to its primary" : "local",
		  c->structured ? "on" : "off");
}

/* list_done -- one NBD_REP_SERVER per volume, then the ACK */
static void list_done(struct nbd_conn *c, struct nbd_job *j)
{
	c->phase = PH_OPT_HEADER;
	if (j->op.code) {
		nbd_opt_error(c, NBD_OPT_LIST, NBD_REP_ERR_TOO_BIG, "cannot list the volumes");
		return;
	}
	for (unsigned i = 0; i < j->op.count; i++) {
		/* a volume the client may not read is invisible (acl.h); so are change records */
		if (!(acl_rights(c->sh->acl, &c->who, j->op.list[i].name) & ACL_READ) ||
		    cluster_gate_reserved(j->op.list[i].name))
			continue;
		uint8_t buf[NBD_OUT_INLINE];
		char desc[96];
		volume_description(desc, sizeof(desc), j->op.list[i].size, j->op.list[i].ns_id);
		size_t n = nbd_rep_server_encode(buf, sizeof(buf) - NBD_OPT_REPLY_HEADER_SIZE,
						 j->op.list[i].name, desc);
		nbd_opt_reply(c, NBD_OPT_LIST, NBD_REP_SERVER, buf, n);
	}
	nbd_opt_reply(c, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

/*
 * cluster_list -- the forwarding pool: the volumes of this node that are no
 * cluster volume's copy (nor its record), then every ready volume of the
 * cluster (ns_id NBD_NS_CLUSTER), for NBD_OPT_LIST on a cluster node
 */
static void cluster_list(struct vol_op *op)
{
	struct nbd_job *j = (struct nbd_job *)((char *)op - offsetof(struct nbd_job, op));
	const struct nbd_shared *sh = j->c->sh;
	struct volume_info *local = NULL;
	struct cluster_dir_vol *cl = NULL;
	unsigned nlocal = 0, ncl = 0;
	op->code = store_volume_list(op->store, &local, &nlocal);
	if (op->code == 0)
		op->code =
		    cluster_dir_list(sh->etcd, sh->cluster_name, &cl, &ncl, j->why, sizeof(j->why));
	if (op->code == 0) {
		op->list = calloc((size_t)nlocal + ncl + 1, sizeof(*op->list));
		op->code = op->list ? 0 : -ENOMEM;
	}
	if (op->code) {
		if (op->code != -ENOMEM)
			LOG_WARN("%s: list: %s", j->c->s.conn.peer, j->why);
		goto out;
	}
	op->count = 0;
	for (unsigned i = 0; i < nlocal; i++)
		if (!cluster_gate_find(local[i].name) && !cluster_gate_reserved(local[i].name))
			op->list[op->count++] = local[i];
	for (unsigned i = 0; i < ncl; i++) {
		struct volume_info *v = &op->list[op->count++];
		memset(v, 0, sizeof(*v));
		snprintf(v->name, sizeof(v->name), "%s", cl[i].name);
		v->size = cl[i].size;
		v->ns_id = NBD_NS_CLUSTER;
	}
out:
	free(local);
	free(cl);
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
	case NBD_OPT_STARTTLS:
		return true;
	default:
		return false;
	}
}

/*
 * who_from_wire -- the client's subject: a name proved by its TLS handshake
 * (once done), else what it was at the start (local or not)
 */
static void who_from_wire(struct nbd_conn *c)
{
	struct tls_peer p;
	tls_wire_peer(&c->s, &p);
	if (p.authenticated)
		snprintf(c->who.user, sizeof(c->who.user), "%s", p.identity);
}

/*
 * refused_before_tls -- --tls require and no TLS yet: every option but
 * STARTTLS and ABORT is refused with NBD_REP_ERR_TLS_REQD, as the protocol
 * says (EXPORT_NAME has no error reply: the connection closes). True if @c's
 * option was refused.
 */
static bool refused_before_tls(struct nbd_conn *c)
{
	if (!c->sh->tls || c->sh->tls->mode != TLS_REQUIRE || rdax_faults.tls_plain_ok ||
	    tls_wire_active(&c->s) || c->opt == NBD_OPT_STARTTLS || c->opt == NBD_OPT_ABORT)
		return false;
	LOG_WARN("%s: option %s before STARTTLS, and this server requires TLS", c->s.conn.peer,
		 nbd_opt_name(c->opt));
	if (c->opt == NBD_OPT_EXPORT_NAME) {
		conn_close(&c->s.conn, "TLS required");
		return true;
	}
	nbd_opt_error(c, c->opt, NBD_REP_ERR_TLS_REQD,
		      "this server requires TLS: send NBD_OPT_STARTTLS first");
	return true;
}

/*
 * opt_starttls -- NBD_OPT_STARTTLS: the ACK leaves in plain, then the TLS
 * handshake; option haggling goes on inside TLS. Bytes the client sent
 * after STARTTLS, before its handshake, would be served as if they were
 * protected: the connection closes instead.
 */
static void opt_starttls(struct nbd_conn *c, uint32_t len)
{
	if (len) {
		nbd_opt_error(c, c->opt, NBD_REP_ERR_INVALID, "starttls takes no data");
		return;
	}
	if (!c->sh->tls) {
		/* as nbdkit --tls=off: the option is not supported */
		nbd_opt_error(c, c->opt, NBD_REP_ERR_UNSUP,
			      "TLS is off on this server (rdaxd --tls)");
		return;
	}
	if (tls_wire_active(&c->s)) {
		nbd_opt_error(c, c->opt, NBD_REP_ERR_INVALID, "TLS is on already");
		return;
	}
	if (stream_in_avail(&c->s) > 0) {
		LOG_WARN("%s: bytes after NBD_OPT_STARTTLS before the TLS handshake; closing",
			 c->s.conn.peer);
		conn_close(&c->s.conn, "plaintext after STARTTLS");
		return;
	}
	nbd_opt_reply(c, c->opt, NBD_REP_ACK, NULL, 0);
	int ret = tls_wire_upgrade(&c->s);
	if (ret) {
		LOG_ERROR("%s: cannot start TLS: %d", c->s.conn.peer, ret);
		conn_fail(&c->s.conn, "cannot start TLS");
	}
}

/* opt_skipped -- the data of an option not read into memory is gone: refuse it */
static void opt_skipped(struct nbd_conn *c)
{
	if (c->refusal && c->opt != NBD_OPT_EXPORT_NAME && c->opt != NBD_OPT_ABORT) {
		/* over a connection limit: every option learns why, until the client gives up */
		nbd_opt_error(c, c->opt, NBD_REP_ERR_POLICY, c->refusal);
		return;
	}
	if (refused_before_tls(c))
		return;
	switch (c->opt) {
	case NBD_OPT_EXPORT_NAME:
		LOG_PEER(LOG_LEVEL_INFO, c->s.conn.peer,
			 "%s: export_name of %" PRIu32 " bytes; closing", c->s.conn.peer,
			 c->opt_len);
		conn_close(&c->s.conn, "export name too long");
		return;
	case NBD_OPT_ABORT: /* data is to be ignored */
		nbd_opt_reply(c, c->opt, NBD_REP_ACK, NULL, 0);
		conn_close(&c->s.conn, "client aborted");
		return;
	case NBD_OPT_LIST:
	case NBD_OPT_STRUCTURED_REPLY:
		nbd_opt_error(c, c->opt, NBD_REP_ERR_INVALID, "this option takes no data");
		return;
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		nbd_opt_error(c, c->opt, NBD_REP_ERR_TOO_BIG, "option data too long");
		return;
	case NBD_OPT_STARTTLS:
		nbd_opt_error(c, c->opt, NBD_REP_ERR_INVALID, "starttls takes no data");
		return;
	default:
		nbd_opt_error(c, c->opt, NBD_REP_ERR_UNSUP, "option not supported by this server");
		return;
	}
}

int nbd_handshake_name_check(const char *name, size_t len, char copy[NS_VOLUME_NAME_MAX + 1])
{
	if (len == 0 || len > NS_VOLUME_NAME_MAX)
		return -EINVAL;
	memcpy(copy, name, len);
	copy[len] = '\0';
	/* also refuses NUL bytes inside the name */
	if (ns_volume_name_valid(copy) != 0 || strlen(copy) != len)
		return -EINVAL;
	return 0;
}

/*
 * forward_lookup -- the forwarding pool: a cluster volume not served here
 * (or, on a node holding no copy of it, maybe a plain local volume): look it
 * up in etcd, then for GO / EXPORT_NAME connect to its primary
 * (nbd_forward_open). Blocks: etcd's call deadline, the connect, and a
 * failover under way (the resume bound).
 */
static void forward_lookup(struct vol_op *op)
{
	struct nbd_job *j = (struct nbd_job *)((char *)op - offsetof(struct nbd_job, op));
	const struct nbd_shared *sh = j->c->sh;
	struct cluster_dir_vol d;
	int ret =
	    cluster_dir_lookup(sh->etcd, sh->cluster_name, j->name, &d, j->why, sizeof(j->why));
	if (ret == -ENOENT && j->local_first) {
		/* not the cluster's: a volume of this node alone, served as before */
		j->why[0] = '\0';
		j->fwd = NULL;
		op->code = j->option == NBD_OPT_INFO
			       ? store_volume_info(op->store, j->name, &op->info)
			       : store_volume_open(op->store, j->name, &op->v);
		return;
	}
	if (ret) {
		op->code = ret;
		return;
	}
	if (j->option == NBD_OPT_INFO) {
		j->forwarded = true;
		op->info.size = d.size;
		op->info.ns_id = NBD_NS_CLUSTER;
		op->code = 0;
		return;
	}
	const struct fwd_opts o = {
	    .volume = j->name,
	    .urls = d.urls,
	    .token_file = sh->token_file,
	    .peer = j->c->s.conn.peer,
	};
	op->code = nbd_forward_open(&o, &j->fwd, j->why, sizeof(j->why));
}

/* opt_lookup -- start the export lookup of INFO / GO / EXPORT_NAME for @name */
static void opt_lookup(struct nbd_conn *c, const char *name, size_t len, bool want_name,
		       bool want_description)
{
	char copy[NS_VOLUME_NAME_MAX + 1];
	if (nbd_handshake_name_check(name, len, copy)) {
		if (c->opt == NBD_OPT_EXPORT_NAME) {
			LOG_DEBUG("%s: export_name: not a volume name; closing", c->s.conn.peer);
			conn_close(&c->s.conn, "unknown export");
			return;
		}
		nbd_opt_error(c, c->opt, NBD_REP_ERR_UNKNOWN,
			      len == 0 ? "no default export: name a volume"
				       : "no such export (not a volume name)");
		return;
	}
	/* a volume the client may not read does not exist for it: export_done's answer */
	who_from_wire(c);
	unsigned rights = acl_rights(c->sh->acl, &c->who, copy);
	c->ro = !(rights & ACL_WRITE);
	if (!(rights & ACL_READ)) {
		if (c->opt == NBD_OPT_EXPORT_NAME) {
			conn_close(&c->s.conn, "unknown export");
			return;
		}
		char msg[NBD_MESSAGE_MAX];
		snprintf(msg, sizeof(msg), "export \"%s\": no such volume", copy);
		nbd_opt_error(c, c->opt, NBD_REP_ERR_UNKNOWN, msg);
		return;
	}
	/*
	 * A cluster volume is served here by its primary, and by every other
	 * node through forwarding (nbd_forward.h); records never
	 */
	char url[CLUSTER_URL_MAX + 1] = "", why[NBD_MESSAGE_MAX] = "";
	uint64_t epoch;
	struct gate_vol *g = cluster_gate_find(copy);
	bool cluster = c->sh->etcd && c->sh->forward;
	bool forward = cluster && (!g || cluster_gate_client(g, url, sizeof(url), &epoch));
	if (cluster_gate_reserved(copy))
		snprintf(why, sizeof(why), "no such export (a cluster volume's change record)");
	else if (!cluster && g && cluster_gate_client(g, url, sizeof(url), &epoch))
		snprintf(why, sizeof(why), "not this node's to serve (the primary is at %.100s)",
			 url[0] ? url : "an unknown address");
	if (why[0]) {
		if (c->opt == NBD_OPT_EXPORT_NAME) {
			LOG_DEBUG("%s: export_name: %s; closing", c->s.conn.peer, why);
			conn_close(&c->s.conn, "export not served here");
			return;
		}
		nbd_opt_error(c, c->opt, NBD_REP_ERR_UNKNOWN, why);
		return;
	}
	struct nbd_job *j = nbd_job_new(c, forward ? JOB_FORWARD : JOB_EXPORT);
	if (!j) {
		conn_close(&c->s.conn, "out of memory");
		return;
	}
	j->option = c->opt;
	if (j->option == NBD_OPT_INFO && !forward)
		j->op.kind = VOL_OP_INFO; /* a look-up: nothing is opened */
	memcpy(j->name, copy, len + 1);
	j->want_name = want_name;
	j->want_description = want_description;
	j->local_first = !g; /* no copy here: maybe a plain volume of this node */
	c->phase = PH_OPT_WAIT;
	if (forward)
		nbd_job_run_in(c, j, c->sh->forward, forward_lookup);
	else
		nbd_job_submit(c, j);
}

/* opt_handle -- an option whose @len bytes of data are in memory */
static void opt_handle(struct nbd_conn *c, const uint8_t *data, uint32_t len)
{
	if (refused_before_tls(c))
		return;
	switch (c->opt) {
	case NBD_OPT_STARTTLS:
		opt_starttls(c, len);
		return;
	case NBD_OPT_EXPORT_NAME:
		opt_lookup(c, (const char *)data, len, false, false);
		return;
	case NBD_OPT_ABORT:
		nbd_opt_reply(c, c->opt, NBD_REP_ACK, NULL, 0);
		conn_close(&c->s.conn, "client aborted");
		return;
	case NBD_OPT_LIST: {
		if (len) {
			nbd_opt_error(c, c->opt, NBD_REP_ERR_INVALID, "list takes no data");
			return;
		}
		who_from_wire(c);
		struct nbd_job *j = nbd_job_new(c, JOB_LIST);
		if (!j) {
			nbd_opt_error(c, c->opt, NBD_REP_ERR_TOO_BIG, "server out of memory");
			return;
		}
		j->option = c->opt;
		c->phase = PH_OPT_WAIT;
		if (c->sh->etcd && c->sh->forward)
			nbd_job_run_in(c, j, c->sh->forward, cluster_list);
		else
			nbd_job_submit(c, j);
		return;
	}
	case NBD_OPT_STRUCTURED_REPLY:
		if (len) {
			nbd_opt_error(c, c->opt, NBD_REP_ERR_INVALID,
				      "structured_reply takes no data");
			return;
		}
		c->structured = true;
		nbd_opt_reply(c, c->opt, NBD_REP_ACK, NULL, 0);
		return;
	case NBD_OPT_INFO:
	case NBD_OPT_GO: {
		struct nbd_opt_go go;
		const char *why;
		if (nbd_opt_go_parse(data, len, &go, &why)) {
			nbd_opt_error(c, c->opt, NBD_REP_ERR_INVALID, why);
			return;
		}
		opt_lookup(c, go.name, go.name_len, go.want_name, go.want_description);
		return;
	}
	default:
		nbd_opt_error(c, c->opt, NBD_REP_ERR_UNSUP, "option not supported by this server");
		return;
	}
}

int nbd_handshake_opt_check(const struct nbd_opt_header *h, unsigned noptions, bool *read)
{
	if (h->magic != NBD_OPTS_MAGIC)
		return -EPROTO;
	if (noptions > NBD_MAX_OPTIONS)
		return -E2BIG;
	if (h->len > NBD_OPT_SKIP_MAX)
		return -EMSGSIZE;
	*read = opt_is_read(h->option) && h->len <= NBD_OPT_MAX_LEN;
	return 0;
}

/* get32be -- a big-endian 32-bit value */
static uint32_t get32be(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* nbd_handshake_input -- one step of the handshake over the buffered input */
bool nbd_handshake_input(struct nbd_conn *c)
{
	struct stream *s = &c->s;
	size_t avail = stream_in_avail(s);
	const uint8_t *p = stream_in_data(s);
	switch (c->phase) {
	case PH_FLAGS: {
		if (avail < NBD_CLIENT_FLAGS_SIZE)
			return false;
		uint32_t flags = get32be(p);
		stream_in_consume(s, NBD_CLIENT_FLAGS_SIZE);
		if (nbd_client_flags_check(flags)) {
			LOG_PEER(LOG_LEVEL_INFO, s->conn.peer,
				 "%s: unknown client flags 0x%08" PRIx32 "; closing", s->conn.peer,
				 flags);
			conn_close(&s->conn, "unknown client flags");
			return false;
		}
		c->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
		c->phase = PH_OPT_HEADER;
		return true;
	}
	case PH_OPT_HEADER: {
		if (avail < NBD_OPT_HEADER_SIZE)
			return false;
		struct nbd_opt_header h;
		bool read;
		nbd_opt_header_decode(p, &h);
		stream_in_consume(s, NBD_OPT_HEADER_SIZE);
		switch (nbd_handshake_opt_check(&h, ++c->noptions, &read)) {
		case 0:
			break;
		case -EPROTO:
			LOG_PEER(LOG_LEVEL_INFO, s->conn.peer,
				 "%s: bad option magic 0x%016" PRIx64 "; closing", s->conn.peer,
				 h.magic);
			conn_close(&s->conn, "bad option magic");
			return false;
		case -E2BIG:
			LOG_PEER(LOG_LEVEL_INFO, s->conn.peer, "%s: more than %d options; closing",
				 s->conn.peer, NBD_MAX_OPTIONS);
			conn_close(&s->conn, "too many options");
			return false;
		default:
			LOG_PEER(LOG_LEVEL_INFO, s->conn.peer,
				 "%s: option %s (%" PRIu32 ") with %" PRIu32
				 " bytes of data (limit %u); closing",
				 s->conn.peer, nbd_opt_name(h.option), h.option, h.len,
				 NBD_OPT_SKIP_MAX);
			conn_close(&s->conn, "option too long");
			return false;
		}
		c->opt = h.option;
		c->opt_len = h.len;
		c->opt_got = 0;
		/* a refusing connection reads no option: each is answered with the refusal */
		c->phase = read && !c->refusal ? PH_OPT_DATA : PH_OPT_SKIP;
		return true;
	}
	case PH_OPT_DATA:
		if (avail < c->opt_len) {
			/* opt_len <= NBD_OPT_MAX_LEN < NBD_INBUF_SIZE: it fits once moved */
			stream_in_reserve(s, c->opt_len);
			return false;
		}
		c->phase = PH_OPT_HEADER;
		/* the data stays in the buffer while the option is handled */
		opt_handle(c, p, c->opt_len);
		stream_in_consume(s, c->opt_len);
		return true;
	case PH_OPT_SKIP: {
		size_t n = c->opt_len - c->opt_got;
		if (n > avail)
			n = avail;
		stream_in_consume(s, n);
		c->opt_got += (uint32_t)n;
		if (c->opt_got < c->opt_len)
			return false;
		c->phase = PH_OPT_HEADER;
		opt_skipped(c);
		return true;
	}
	case PH_OPT_WAIT:
	case PH_REQ_HEADER:
		return false;
	}
	return false;
}

bool nbd_handshake_usable(const struct nbd_conn *c, size_t avail)
{
	switch (c->phase) {
	case PH_FLAGS:
		return avail >= NBD_CLIENT_FLAGS_SIZE;
	case PH_OPT_HEADER:
		return avail >= NBD_OPT_HEADER_SIZE;
	case PH_OPT_DATA:
		return avail >= c->opt_len;
	case PH_OPT_WAIT:
		return true; /* the job's answer may still be processed */
	case PH_OPT_SKIP:
		return avail > 0;
	case PH_REQ_HEADER:
		return avail >= NBD_REQUEST_SIZE;
	}
	return false;
}

void nbd_handshake_job_done(struct nbd_conn *c, struct nbd_job *j)
{
	if (j->kind == JOB_LIST) {
		list_done(c, j);
		free(j->op.list);
	} else {
		export_done(c, j);
	}
}
