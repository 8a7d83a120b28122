/* SPDX-License-Identifier: BSD-3-Clause */
/* tls_wire.c -- a socket stream's bytes through a GnuTLS session (states in tls_wire.h) */
#include "tls_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <gnutls/x509.h>

#include "faults.h"
#include "log.h"
#include "tls_io.h"

/* The first byte of a TLS record carrying a handshake message (a ClientHello). */
#define TLS_CONTENT_HANDSHAKE 0x16

enum tw_state { TW_DETECT, TW_PLAIN, TW_UPGRADE, TW_HANDSHAKE, TW_OPEN };

struct tls_wire {
	struct stream *s;
	const struct tls_server *srv;
	enum tw_state state;
	size_t plain_left; /* UPGRADE: bytes still to leave in plain */
	bool timer_on;
	ev_timer hs_timer;
	struct tls_peer peer;
	struct tls_io io; /* the session from HANDSHAKE on */
};

static const struct stream_wire tls_wire_ops;

/* tw_of -- the TLS wire of @s, or NULL */
static struct tls_wire *tw_of(const struct stream *s)
{
	return s->wire == &tls_wire_ops ? s->wire_ctx : NULL;
}

/* hs_timer_stop -- the handshake is over one way or the other */
static void hs_timer_stop(struct tls_wire *t)
{
	if (!t->timer_on)
		return;
	ev_timer_stop(t->s->conn.set->worker->loop, &t->hs_timer);
	t->timer_on = false;
}

/* on_hs_timeout -- a handshake that never finishes holds a connection: drop it */
static void on_hs_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tls_wire *t = w->data;
	t->timer_on = false;
	LOG_WARN("%s: TLS handshake not finished after %.0f s; closing", t->s->conn.peer,
		 t->srv->handshake_timeout);
	conn_fail(&t->s->conn, "TLS handshake timed out");
}

/* hs_begin -- a session for the handshake, and its timer. 0 or a negative GnuTLS code. */
static int hs_begin(struct tls_wire *t)
{
	int g = tls_server_session_new(t->srv, t->s->fd, &t->io.sess);
	if (g < 0) {
		LOG_ERROR("%s: cannot make a TLS session: %s", t->s->conn.peer, gnutls_strerror(g));
		return g;
	}
	t->state = TW_HANDSHAKE;
	ev_timer_init(&t->hs_timer, on_hs_timeout, t->srv->handshake_timeout, 0.);
	t->hs_timer.data = t;
	ev_timer_start(t->s->conn.set->worker->loop, &t->hs_timer);
	t->timer_on = true;
	return 0;
}

/* peer_identity -- after the handshake: the PSK username, or the verified certificate's CN */
static void peer_identity(struct tls_wire *t)
{
	struct tls_peer *p = &t->peer;
	p->tls = true;
	p->how = "";
	if (gnutls_auth_get_type(t->io.sess) == GNUTLS_CRD_PSK) {
		const char *u = gnutls_psk_server_get_username(t->io.sess);
		if (u && *u && strlen(u) <= TLS_IDENTITY_MAX) {
			strcpy(p->identity, u);
			p->authenticated = true;
			p->how = "psk";
		}
		return;
	}
	if (!t->srv->verify_peer)
		return; /* a certificate not asked for proves nothing */
	unsigned n = 0;
	const gnutls_datum_t *certs = gnutls_certificate_get_peers(t->io.sess, &n);
	gnutls_x509_crt_t crt;
	if (!certs || n == 0 || gnutls_x509_crt_init(&crt) < 0)
		return;
	size_t len = sizeof(p->identity);
	if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) == 0 &&
	    gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, p->identity,
					  &len) == 0 &&
	    p->identity[0]) {
		p->authenticated = true;
		p->how = "x509";
	} else {
		p->identity[0] = '\0';
	}
	gnutls_x509_crt_deinit(crt);
}

/* hs_step -- drive the handshake: 0 done, -EAGAIN not yet, -EPROTO failed (alert sent) */
static int hs_step(struct tls_wire *t)
{
	int g = gnutls_handshake(t->io.sess);
	if (g == GNUTLS_E_SUCCESS) {
		hs_timer_stop(t);
		tls_io_start(&t->io, t->io.sess, t->s->fd);
		t->state = TW_OPEN;
		peer_identity(t);
		char *desc = gnutls_session_get_desc(t->io.sess);
		if (t->peer.authenticated)
			LOG_INFO("%s: TLS %s, identity %s:%s", t->s->conn.peer, desc ? desc : "",
				 t->peer.how, t->peer.identity);
		else
			LOG_INFO("%s: TLS %s, no identity proved", t->s->conn.peer,
				 desc ? desc : "");
		gnutls_free(desc);
		return 0;
	}
	if (g == GNUTLS_E_AGAIN || g == GNUTLS_E_INTERRUPTED || !gnutls_error_is_fatal(g))
		return -EAGAIN;
	hs_timer_stop(t);
	gnutls_datum_t why = {NULL, 0};
	if (g == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR)
		gnutls_certificate_verification_status_print(
		    gnutls_session_get_verify_cert_status(t->io.sess), GNUTLS_CRT_X509, &why, 0);
	LOG_WARN("%s: TLS handshake failed: %s%s%s", t->s->conn.peer, gnutls_strerror(g),
		 why.data ? " " : "", why.data ? (const char *)why.data : "");
	gnutls_free(why.data);
	gnutls_alert_send_appropriate(t->io.sess, g);
	t->s->conn.why = "TLS handshake failed";
	return -EPROTO;
}

/* detect -- DETECT: look at the first byte without taking it. 0 decided, else recv's return. */
static ssize_t detect(struct tls_wire *t)
{
	uint8_t b;
	ssize_t n;
	do
		n = recv(t->s->fd, &b, 1, MSG_PEEK);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (b != TLS_CONTENT_HANDSHAKE) {
		t->state = TW_PLAIN;
		if (t->srv->mode == TLS_REQUIRE && !rdax_faults.tls_plain_ok) {
			t->peer.plain_refused = true;
			LOG_WARN("%s: a plaintext client, and this daemon requires TLS",
				 t->s->conn.peer);
		}
		return 1;
	}
	return hs_begin(t) < 0 ? -ENOMEM : 1;
}

/*
 * tls_recv -- up to @len decrypted bytes into @buf, record after record
 * until @buf is full or the socket has nothing more: less than asked means
 * the socket is drained (stream.c relies on it), and GnuTLS holds no
 * decrypted bytes that a readable event would not announce.
 */
static ssize_t tls_recv(struct stream *s, void *buf, size_t len)
{
	struct tls_wire *t = s->wire_ctx;
	if (t->state == TW_DETECT) {
		ssize_t d = detect(t);
		if (d <= 0)
			return d;
	}
	switch (t->state) {
	case TW_DETECT:
		return -EAGAIN;
	case TW_PLAIN:
		return stream_socket_wire.recv(s, buf, len);
	case TW_UPGRADE: {
		/*
		 * the client must wait for the ACK before its handshake: a byte now
		 * is plaintext injected ahead of TLS (and, left unread, would spin
		 * the loop while the ACK cannot leave)
		 */
		uint8_t b;
		ssize_t n = recv(s->fd, &b, 1, MSG_PEEK);
		if (n == 0)
			return 0;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN
											 : -errno;
		LOG_WARN("%s: bytes before the STARTTLS reply has left; closing", s->conn.peer);
		s->conn.why = "bytes before TLS";
		return -EPROTO;
	}
	case TW_HANDSHAKE: {
		int r = hs_step(t);
		if (r)
			return r;
		break;
	}
	case TW_OPEN:
		break;
	}
	ssize_t r = tls_io_recv(&t->io, buf, len);
	if (r == -EPROTO) {
		/* a record that fails its check is never handed out: nothing reached @buf */
		LOG_WARN("%s: TLS receive failed: %s; closing", s->conn.peer,
			 gnutls_strerror(t->io.last_error));
		s->conn.why = "TLS record refused";
	}
	return r;
}

/*
 * tls_sendv -- encrypt the pieces, one record per call. A record GnuTLS
 * could not send whole is kept by it (GNUTLS_E_AGAIN): the caller comes
 * back with the same bytes at the head, and they count as taken only once
 * the record has left.
 */
static ssize_t tls_sendv(struct stream *s, const struct iovec *iov, int n)
{
	struct tls_wire *t = s->wire_ctx;
	switch (t->state) {
	case TW_DETECT:
		return -EAGAIN; /* the native protocol sends nothing before the client speaks */
	case TW_PLAIN:
		return stream_socket_wire.sendv(s, iov, n);
	case TW_UPGRADE: {
		struct iovec cut[STREAM_IOV_MAX];
		size_t left = t->plain_left;
		int k = 0;
		for (int i = 0; i < n && left; i++, k++) {
			cut[k] = iov[i];
			if (cut[k].iov_len > left)
				cut[k].iov_len = left;
			left -= cut[k].iov_len;
		}
		ssize_t w = stream_socket_wire.sendv(s, cut, k);
		if (w < 0)
			return w;
		t->plain_left -= (size_t)w;
		if (t->plain_left == 0 && hs_begin(t) < 0)
			return -ENOMEM;
		return w;
	}
	case TW_HANDSHAKE: {
		int r = hs_step(t);
		if (r)
			return r;
		break;
	}
	case TW_OPEN:
		break;
	}
	ssize_t r = tls_io_sendv(&t->io, iov, n);
	if (r == -EPIPE)
		LOG_DEBUG("%s: TLS send failed: %s", s->conn.peer,
			  gnutls_strerror(t->io.last_error));
	return r;
}

/*
 * tls_close -- a close_notify if the socket takes it now, then the session,
 * and the socket unless @keep_socket (it lingers: linger.h)
 */
static void tls_close(struct stream *s, bool keep_socket)
{
	struct tls_wire *t = s->wire_ctx;
	if (t) {
		hs_timer_stop(t);
		if (t->io.sess && t->state == TW_OPEN && !s->conn.dead)
			gnutls_bye(t->io.sess, GNUTLS_SHUT_WR);
		tls_io_release(&t->io);
		free(t);
		s->wire_ctx = NULL;
	}
	stream_socket_wire.close(s, keep_socket);
}

/* tls_pending -- decrypted bytes GnuTLS holds (a record taken only in part) */
static size_t tls_pending(const struct stream *s)
{
	const struct tls_wire *t = s->wire_ctx;
	return t && t->state == TW_OPEN ? tls_io_pending(&t->io) : 0;
}

/* tls_trim -- an idle session gives back tls_io's buffers (mapped again when it speaks) */
static void tls_trim(struct stream *s)
{
	struct tls_wire *t = s->wire_ctx;
	if (t && t->state == TW_OPEN)
		tls_io_trim(&t->io);
}

static const struct stream_wire tls_wire_ops = {
    .recv = tls_recv,
    .sendv = tls_sendv,
    .close = tls_close,
    .pending = tls_pending,
    .trim = tls_trim,
};

int tls_wire_attach(struct stream *s, const struct tls_server *srv, bool detect_first)
{
	struct tls_wire *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->s = s;
	t->srv = srv;
	t->state = detect_first ? TW_DETECT : TW_PLAIN;
	t->peer.how = "";
	s->wire = &tls_wire_ops;
	s->wire_ctx = t;
	return 0;
}

int tls_wire_upgrade(struct stream *s)
{
	struct tls_wire *t = tw_of(s);
	if (!t || t->state != TW_PLAIN)
		return -EINVAL;
	size_t left = 0;
	for (const struct stream_out *o = s->out_head; o; o = o->next)
		left += o->len - o->sent;
	t->state = TW_UPGRADE;
	t->plain_left = left;
	if (left == 0)
		return hs_begin(t);
	return 0;
}

void tls_wire_peer(const struct stream *s, struct tls_peer *out)
{
	const struct tls_wire *t = tw_of(s);
	if (!t) {
		memset(out, 0, sizeof(*out));
		out->how = "";
		return;
	}
	*out = t->peer;
}

bool tls_wire_active(const struct stream *s)
{
	const struct tls_wire *t = tw_of(s);
	return t && t->state != TW_DETECT && t->state != TW_PLAIN;
}

bool tls_wire_can_send(const struct stream *s)
{
	const struct tls_wire *t = tw_of(s);
	return !t || t->state == TW_PLAIN || t->state == TW_OPEN;
}
