/* SPDX-License-Identifier: BSD-3-Clause */
/* tls_server.c -- load the daemon's TLS credentials, make a session per connection */
#include "tls_server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "faults.h"
#include "psk_file.h"

/*
 * TLS 1.2 and 1.3 only; the PSK key exchanges added to GnuTLS's NORMAL set
 * (the string nbdkit and qemu use) when a PSK file is given. The AEAD
 * ciphers in the order of their cost here: GnuTLS 3.7 otherwise picked
 * CHACHA20-POLY1305 for PSK sessions, whose 287 MB/s (gnutls-cli
 * --benchmark-ciphers on this machine) against AES-128-GCM's 4.7 GB/s
 * halved 1 MiB writes over TLS (bench_tcp --tls, 9.5-23 against 30-54 MiB/s
 * on a loaded machine).
 */
#define TLS_PRIO_BASE                                                                              \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"        \
	"+CHACHA20-POLY1305"
#define TLS_PRIO_PSK ":+ECDHE-PSK:+DHE-PSK:+PSK"

const char *tls_mode_name(enum tls_mode mode)
{
	return mode == TLS_REQUIRE ? "require" : mode == TLS_ON ? "on" : "off";
}

/* file_check -- can @path be read? 0 or -errno */
static int file_check(const char *path)
{
	return access(path, R_OK) == 0 ? 0 : -errno;
}

/*
 * psk_file_check -- the file is read by GnuTLS at each handshake, so a
 * mistake in it is found here, at start, not as a failed handshake later.
 * 0 or -EINVAL (@err says where).
 */
static int psk_file_check(const char *path, char *err, size_t errlen)
{
	struct psk_entry *e;
	size_t n;
	char why[512];
	int ret = psk_file_read(path, &e, &n, why, sizeof(why));
	if (ret == 0)
		psk_file_free(&e, n);
	else if (ret == -EINVAL)
		rdax_seterr(err, errlen, "--tls-psk: %s", why);
	return ret;
}

/* x509_load -- the three files of @dir (ca-cert.pem only if present, required to verify peers) */
static int x509_load(struct tls_server *srv, const char *dir, bool verify_peer, char *err,
		     size_t errlen)
{
	char cert[4096], key[4096], ca[4096];
	snprintf(cert, sizeof(cert), "%s/server-cert.pem", dir);
	snprintf(key, sizeof(key), "%s/server-key.pem", dir);
	snprintf(ca, sizeof(ca), "%s/ca-cert.pem", dir);
	const char *missing = file_check(cert) ? cert : file_check(key) ? key : NULL;
	if (missing) {
		rdax_seterr(err, errlen, "--tls-certificates %s: cannot read %s: %s", dir, missing,
			    strerror(errno));
		return -EINVAL;
	}
	if (gnutls_certificate_allocate_credentials(&srv->x509) < 0)
		return -ENOMEM;
	int g = gnutls_certificate_set_x509_key_file(srv->x509, cert, key, GNUTLS_X509_FMT_PEM);
	if (g < 0) {
		rdax_seterr(err, errlen, "--tls-certificates %s: %s / %s: %s", dir, cert, key,
			    gnutls_strerror(g));
		return -EINVAL;
	}
	if (file_check(ca) == 0) {
		g = gnutls_certificate_set_x509_trust_file(srv->x509, ca, GNUTLS_X509_FMT_PEM);
		if (g < 0) {
			rdax_seterr(err, errlen, "--tls-certificates %s: %s: %s", dir, ca,
				    gnutls_strerror(g));
			return -EINVAL;
		}
	} else if (verify_peer) {
		rdax_seterr(err, errlen,
			    "--tls-verify-peer needs the CA that signs client certificates: "
			    "cannot read %s",
			    ca);
		return -EINVAL;
	}
	return 0;
}

int tls_server_new(const struct tls_server_opts *o, struct tls_server **out, char *err,
		   size_t errlen)
{
	if (!o || !out || o->mode == TLS_OFF)
		return -EINVAL;
	if (!o->cert_dir && !o->psk_file) {
		rdax_seterr(err, errlen,
			    "--tls %s needs --tls-certificates DIR or --tls-psk FILE (or both)",
			    tls_mode_name(o->mode));
		return -EINVAL;
	}
	if (o->verify_peer && !o->cert_dir) {
		rdax_seterr(err, errlen, "--tls-verify-peer needs --tls-certificates DIR");
		return -EINVAL;
	}
	struct tls_server *srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->mode = o->mode;
	srv->verify_peer = o->verify_peer;
	srv->handshake_timeout = TLS_HANDSHAKE_TIMEOUT;
	int ret;
	if (o->cert_dir) {
		ret = x509_load(srv, o->cert_dir, o->verify_peer, err, errlen);
		if (ret)
			goto err_delete;
	}
	if (o->psk_file) {
		ret = psk_file_check(o->psk_file, err, errlen);
		if (ret)
			goto err_delete;
		ret = -ENOMEM;
		if (gnutls_psk_allocate_server_credentials(&srv->psk) < 0)
			goto err_delete;
		int g = gnutls_psk_set_server_credentials_file(srv->psk, o->psk_file);
		if (g < 0) {
			rdax_seterr(err, errlen, "--tls-psk %s: %s", o->psk_file,
				    gnutls_strerror(g));
			ret = -EINVAL;
			goto err_delete;
		}
	}
	const char *prio = o->psk_file ? TLS_PRIO_BASE TLS_PRIO_PSK : TLS_PRIO_BASE;
	if (gnutls_priority_init(&srv->prio, prio, NULL) < 0) {
		ret = -ENOMEM;
		goto err_delete;
	}
	*out = srv;
	return 0;

err_delete:
	tls_server_delete(&srv);
	return ret;
}

void tls_server_delete(struct tls_server **sp)
{
	if (!sp || !*sp)
		return;
	struct tls_server *srv = *sp;
	if (srv->prio)
		gnutls_priority_deinit(srv->prio);
	if (srv->x509)
		gnutls_certificate_free_credentials(srv->x509);
	if (srv->psk)
		gnutls_psk_free_server_credentials(srv->psk);
	free(srv);
	*sp = NULL;
}

int tls_server_session_new(const struct tls_server *srv, int fd, gnutls_session_t *out)
{
	gnutls_session_t sess;
	int g = gnutls_init(&sess, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
	if (g < 0)
		return g;
	g = gnutls_priority_set(sess, srv->prio);
	if (g == 0 && srv->x509)
		g = gnutls_credentials_set(sess, GNUTLS_CRD_CERTIFICATE, srv->x509);
	if (g == 0 && srv->psk)
		g = gnutls_credentials_set(sess, GNUTLS_CRD_PSK, srv->psk);
	if (g < 0)
		goto err_deinit;
	if (srv->verify_peer && rdax_faults.tls_no_verify) {
		gnutls_certificate_server_set_request(sess, GNUTLS_CERT_REQUEST);
	} else if (srv->verify_peer) {
		/* the handshake itself fails on a missing, foreign or expired certificate */
		gnutls_certificate_server_set_request(sess, GNUTLS_CERT_REQUIRE);
		gnutls_session_set_verify_cert(sess, NULL, 0);
	}
	gnutls_transport_set_int(sess, fd);
	*out = sess;
	return 0;

err_deinit:
	gnutls_deinit(sess);
	return g;
}
