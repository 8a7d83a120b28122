/* SPDX-License-Identifier: BSD-3-Clause */
/* tls_client.c -- client credentials and a handshake with a deadline (rules in tls_client.h) */
#include "tls_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "psk_file.h"

/* The daemon's set (daemon/net/tls_server.c): TLS 1.2 and 1.3, PSK exchanges when used. */
#define TLS_PRIO_BASE                                                                              \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"        \
	"+CHACHA20-POLY1305"
#define TLS_PRIO_PSK ":+ECDHE-PSK:+DHE-PSK:+PSK"

/* psk_load -- @user's key (or the first user's) from psktool's file into c->psk */
static int psk_load(struct tls_client *c, const char *path, const char *user, char *err,
		    size_t errlen)
{
	struct psk_entry *e;
	size_t n;
	int ret = psk_file_read(path, &e, &n, err, errlen);
	if (ret)
		return ret;
	size_t i = 0;
	while (user && i < n && strcmp(e[i].user, user) != 0)
		i++;
	if (i == n) {
		rdax_seterr(err, errlen, "PSK file %s: no user %s in it", path, user);
		ret = -EINVAL;
		goto out;
	}
	snprintf(c->username, sizeof(c->username), "%s", e[i].user);
	ret = -ENOMEM;
	if (gnutls_psk_allocate_client_credentials(&c->psk) < 0)
		goto out;
	gnutls_datum_t key = {e[i].key, (unsigned)e[i].key_len};
	int g = gnutls_psk_set_client_credentials(c->psk, c->username, &key, GNUTLS_PSK_KEY_RAW);
	ret = 0;
	if (g < 0) {
		rdax_seterr(err, errlen, "PSK file %s, user %s: %s", path, c->username,
			    gnutls_strerror(g));
		ret = -EINVAL;
	}
out:
	psk_file_free(&e, n);
	return ret;
}

/* x509_load -- the CA to check the server with, and a client certificate if there is one */
static int x509_load(struct tls_client *c, const char *dir, char *err, size_t errlen)
{
	if (gnutls_certificate_allocate_credentials(&c->x509) < 0)
		return -ENOMEM;
	if (!dir) {
		gnutls_certificate_set_x509_system_trust(c->x509);
		return 0;
	}
	char ca[4096], cert[4096], key[4096];
	snprintf(ca, sizeof(ca), "%s/ca-cert.pem", dir);
	snprintf(cert, sizeof(cert), "%s/client-cert.pem", dir);
	snprintf(key, sizeof(key), "%s/client-key.pem", dir);
	int g = gnutls_certificate_set_x509_trust_file(c->x509, ca, GNUTLS_X509_FMT_PEM);
	if (g < 0) {
		rdax_seterr(err, errlen, "TLS certificates %s: %s: %s", dir, ca,
			    access(ca, R_OK) ? strerror(errno) : gnutls_strerror(g));
		return -EINVAL;
	}
	if (access(cert, R_OK) == 0) {
		g = gnutls_certificate_set_x509_key_file(c->x509, cert, key, GNUTLS_X509_FMT_PEM);
		if (g < 0) {
			rdax_seterr(err, errlen, "TLS certificates %s: %s / %s: %s", dir, cert, key,
				    gnutls_strerror(g));
			return -EINVAL;
		}
	}
	return 0;
}

int tls_client_new(const struct tls_client_opts *o, struct tls_client **out, char *err,
		   size_t errlen)
{
	if (!o || !out)
		return -EINVAL;
	if (err && errlen)
		err[0] = '\0';
	struct tls_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	int ret = x509_load(c, o->cert_dir, err, errlen);
	if (ret == 0 && o->psk_file)
		ret = psk_load(c, o->psk_file, o->username, err, errlen);
	if (ret)
		goto err_delete;
	ret = -ENOMEM;
	if (gnutls_priority_init(&c->prio, c->psk ? TLS_PRIO_BASE TLS_PRIO_PSK : TLS_PRIO_BASE,
				 NULL) < 0)
		goto err_delete;
	*out = c;
	return 0;

err_delete:
	tls_client_delete(&c);
	return ret;
}

void tls_client_delete(struct tls_client **cp)
{
	if (!cp || !*cp)
		return;
	struct tls_client *c = *cp;
	if (c->prio)
		gnutls_priority_deinit(c->prio);
	if (c->x509)
		gnutls_certificate_free_credentials(c->x509);
	if (c->psk)
		gnutls_psk_free_client_credentials(c->psk);
	free(c);
	*cp = NULL;
}

/* now_ms -- a monotonic clock in milliseconds */
static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* refused -- a handshake failure that is the server's (or our) verdict on the credentials */
static bool refused(int g)
{
	return g == GNUTLS_E_FATAL_ALERT_RECEIVED || g == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR ||
	       g == GNUTLS_E_CERTIFICATE_ERROR || g == GNUTLS_E_DECRYPTION_FAILED;
}

int tls_client_handshake(const struct tls_client *c, int fd, const char *host, int timeout_ms,
			 gnutls_session_t *out, char *err, size_t errlen)
{
	gnutls_session_t s;
	int g = gnutls_init(&s, GNUTLS_CLIENT | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
	if (g < 0)
		return -ENOMEM;
	g = gnutls_priority_set(s, c->prio);
	if (g == 0)
		g = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, c->x509);
	if (g == 0 && c->psk)
		g = gnutls_credentials_set(s, GNUTLS_CRD_PSK, c->psk);
	if (g == 0 && host && !c->psk) {
		/* SNI, and the server's certificate must name @host */
		gnutls_server_name_set(s, GNUTLS_NAME_DNS, host, strlen(host));
		gnutls_session_set_verify_cert(s, host, 0);
	}
	if (g < 0) {
		rdax_seterr(err, errlen, "TLS session: %s", gnutls_strerror(g));
		gnutls_deinit(s);
		return -ENOMEM;
	}
	gnutls_transport_set_int(s, fd);
	long long deadline = timeout_ms > 0 ? now_ms() + timeout_ms : -1;
	int ret;
	for (;;) {
		g = gnutls_handshake(s);
		if (g == GNUTLS_E_SUCCESS) {
			*out = s;
			return 0;
		}
		if (g != GNUTLS_E_AGAIN && g != GNUTLS_E_INTERRUPTED && gnutls_error_is_fatal(g)) {
			const char *alert = g == GNUTLS_E_FATAL_ALERT_RECEIVED
						? gnutls_alert_get_name(gnutls_alert_get(s))
						: NULL;
			rdax_seterr(
			    err, errlen, "TLS handshake failed: %s%s%s%s", gnutls_strerror(g),
			    alert ? " " : "", alert ? alert : "",
			    alert ? " (the server refused this client: a wrong key for its "
				    "PSK username, a username it does not know, or a protocol "
				    "it does not allow)"
				  : "");
			ret = refused(g) ? -ECONNREFUSED : -EPROTO;
			break;
		}
		int wait = -1;
		if (deadline >= 0) {
			long long left = deadline - now_ms();
			if (left <= 0) {
				rdax_seterr(err, errlen, "TLS handshake: no answer within %d ms",
					    timeout_ms);
				ret = -ETIMEDOUT;
				break;
			}
			wait = (int)left;
		}
		struct pollfd p = {
		    .fd = fd,
		    .events = gnutls_record_get_direction(s) ? POLLOUT : POLLIN,
		};
		if (poll(&p, 1, wait) < 0 && errno != EINTR) {
			ret = -errno;
			rdax_seterr(err, errlen, "TLS handshake: poll: %s", strerror(errno));
			break;
		}
	}
	gnutls_deinit(s);
	return ret;
}
