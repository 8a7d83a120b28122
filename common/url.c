/* SPDX-License-Identifier: BSD-3-Clause */
/* url.c -- parse server and listen addresses (the rules are in url.h) */
#include "url.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"

/*
 * One row per scheme. A TLS scheme has the same host rules; it is for
 * clients only: TLS is served on the tcp:// listeners (rdaxd --tls).
 */
static const struct scheme {
	const char *name;
	enum url_scheme scheme;
	uint16_t default_port; /* 0: a unix socket path, no host */
	bool tls;	       /* a client's TLS form of another scheme: not a listen address */
} schemes[] = {
    {"tcp", URL_TCP, RDAX_DEFAULT_PORT, false},	  {"rdaxs", URL_RDAXS, RDAX_DEFAULT_PORT, true},
    {"rdma", URL_RDMA, RDAX_DEFAULT_PORT, false}, {"nbd", URL_NBD, URL_NBD_PORT, false},
    {"nbd+unix", URL_NBD_UNIX, 0, false},
};
#define NSCHEMES    (sizeof(schemes) / sizeof(schemes[0]))
#define SCHEME_LIST "tcp://, rdaxs://, rdma://, nbd://, nbd+unix://"

/* fail -- format the reason @s was refused into @err (may be NULL); returns -EINVAL */
#define fail(err, errlen, ...) (rdax_seterr((err), (errlen), __VA_ARGS__), -EINVAL)

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_hex(char c)
{
	return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9');
}

/* name_valid -- a host name, IPv4 address or zone id: letters, digits, '.', '-', '_' */
static bool name_valid(const char *h, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!is_alnum(h[i]) && h[i] != '.' && h[i] != '-' && h[i] != '_')
			return false;
	return true;
}

/* ipv6_valid -- the inside of "[...]": hex digits, ':' and '.', one ':' at least, an optional %zone
 */
static bool ipv6_valid(const char *h, size_t len)
{
	bool colon = false;
	size_t i = 0;
	for (; i < len && h[i] != '%'; i++) {
		if (h[i] == ':')
			colon = true;
		else if (!is_hex(h[i]) && h[i] != '.')
			return false;
	}
	if (i < len && (i + 1 == len || !name_valid(h + i + 1, len - i - 1)))
		return false; /* an empty or malformed zone id */
	return colon;
}

/* port_parse -- @min..65535, decimal digits only; 0 or -EINVAL */
static int port_parse(const char *p, unsigned min, uint16_t *out)
{
	unsigned v = 0;
	if (!*p || strlen(p) > 5)
		return -EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(*p - '0');
	}
	if (v < min || v > 65535)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

/* parse_unix -- "/PATH[?mode=OCTAL]" (@rest: what follows "nbd+unix://") into @u */
static int parse_unix(const char *s, const char *rest, bool listen, struct url *u, char *err,
		      size_t errlen)
{
	const char *q = strchr(rest, '?');
	size_t plen = q ? (size_t)(q - rest) : strlen(rest);
	if (plen < 2 || rest[0] != '/')
		return fail(err, errlen,
			    "'%s': not of the form nbd+unix:///PATH (an absolute path)", s);
	if (plen > URL_PATH_MAX)
		return fail(err, errlen, "'%s': socket path longer than %d bytes", s, URL_PATH_MAX);
	memcpy(u->path, rest, plen);
	u->path[plen] = '\0';
	u->mode = URL_UNIX_MODE;
	if (!q)
		return 0;
	const char *m = q + 1;
	unsigned mode = 0;
	bool ok = listen && strncmp(m, "mode=", 5) == 0 && m[5] != '\0';
	for (m += 5; ok && *m; m++) {
		ok = *m >= '0' && *m <= '7' && mode <= 0777;
		mode = mode * 8 + (unsigned)(*m - '0');
	}
	if (!ok || mode > 0777)
		return fail(err, errlen,
			    listen ? "'%s': the only option is ?mode=OCTAL (file mode, e.g. "
				     "mode=0660)"
				   : "'%s': a server address takes no '?' options",
			    s);
	u->mode = mode;
	return 0;
}

/* parse_host -- "HOST" or "[IPV6]" at @h into u->host; *rest = what follows it */
static int parse_host(const char *s, const char *h, const struct scheme *sc, bool listen,
		      struct url *u, const char **rest, char *err, size_t errlen)
{
	size_t hlen;
	if (*h == '[') {
		const char *close = strchr(h, ']');
		if (!close)
			return fail(err, errlen, "'%s': missing ']' after the IPv6 address", s);
		h++;
		hlen = (size_t)(close - h);
		if (hlen == 0 || !ipv6_valid(h, hlen))
			return fail(err, errlen, "'%s': bad IPv6 address '%.*s'", s,
				    (int)(hlen > 64 ? 64 : hlen), h);
		*rest = close + 1;
	} else {
		hlen = strcspn(h, ":/?#");
		if (h[hlen] == ':' && strchr(h + hlen + 1, ':'))
			return fail(err, errlen,
				    "'%s': an IPv6 address must be in brackets, as in "
				    "%s://[::1]:%u",
				    s, sc->name, (unsigned)sc->default_port);
		if (hlen == 0) {
			if (listen)
				return fail(err, errlen,
					    "'%s': no host (%s://HOST:PORT, e.g. "
					    "%s://0.0.0.0:%u)",
					    s, sc->name, sc->name, (unsigned)sc->default_port);
			return fail(err, errlen, "'%s': no host", s);
		}
		if (!name_valid(h, hlen))
			return fail(err, errlen, "'%s': bad host name", s);
		*rest = h + hlen;
	}
	if (hlen > URL_HOST_MAX)
		return fail(err, errlen, "'%s': host longer than %d characters", s, URL_HOST_MAX);
	memcpy(u->host, h, hlen);
	u->host[hlen] = '\0';
	return 0;
}

/* parse -- the rules of url.h; @listen selects the listener's port rules */
static int parse(const char *s, bool listen, struct url *out, char *err, size_t errlen)
{
	if (!s || !out)
		return fail(err, errlen, "no URL");
	const char *sep = strstr(s, "://");
	if (!sep)
		return fail(err, errlen, "'%s': missing '://' (expected tcp://HOST:PORT)", s);
	size_t slen = (size_t)(sep - s);
	const struct scheme *sc = NULL;
	for (size_t i = 0; i < NSCHEMES && !sc; i++)
		if (strlen(schemes[i].name) == slen && strncmp(s, schemes[i].name, slen) == 0)
			sc = &schemes[i];
	if (!sc) {
		int shown = (int)(slen > 16 ? 16 : slen);
		return fail(err, errlen,
			    "'%s': unknown scheme '%.*s' (transport '%.*s' is not supported; "
			    "use " SCHEME_LIST ")",
			    s, shown, s, shown, s);
	}

	if (listen && sc->tls)
		return fail(err, errlen,
			    "'%s': TLS is served on tcp:// listeners (rdaxd --tls on|require); "
			    "listen on tcp://HOST:PORT",
			    s);
	struct url u;
	memset(&u, 0, sizeof(u));
	u.scheme = sc->scheme;
	const char *rest = sep + 3;
	int ret;
	if (sc->default_port == 0) {
		if ((ret = parse_unix(s, rest, listen, &u, err, errlen)))
			return ret;
		*out = u;
		return 0;
	}
	if ((ret = parse_host(s, rest, sc, listen, &u, &rest, err, errlen)))
		return ret;
	if (*rest == '\0' && listen) {
		return fail(err, errlen, "'%s': no port (%s://HOST:PORT; port 0 picks a free one)",
			    s, sc->name);
	} else if (*rest == '\0') {
		u.port = sc->default_port;
	} else if (*rest == ':') {
		if (port_parse(rest + 1, listen ? 0 : 1, &u.port))
			return fail(err, errlen, "'%s': bad port '%.16s' (%s..65535)", s, rest + 1,
				    listen ? "0" : "1");
	} else {
		return fail(err, errlen, "'%s': unexpected '%.16s' after the host", s, rest);
	}
	snprintf(u.port_str, sizeof(u.port_str), "%u", (unsigned)u.port);
	*out = u;
	return 0;
}

int url_parse(const char *s, struct url *out, char *err, size_t errlen)
{
	return parse(s, false, out, err, errlen);
}

int url_parse_listen(const char *s, struct url *out, char *err, size_t errlen)
{
	return parse(s, true, out, err, errlen);
}

int url_parse_endpoint(const char *s, size_t len, const char *scheme, uint16_t example_port,
		       struct url *out, char *err, size_t errlen)
{
	char buf[URL_HOST_MAX + 16];
	if (!s || !scheme || !out)
		return fail(err, errlen, "no address");
	if (len == 0)
		return fail(err, errlen, "an empty address (HOST:PORT)");
	if (len >= sizeof(buf))
		return fail(err, errlen, "'%.32s...': address longer than %zu characters", s,
			    sizeof(buf) - 1);
	memcpy(buf, s, len);
	buf[len] = '\0';
	const struct scheme sc = {scheme, 0, example_port, false};
	struct url u;
	memset(&u, 0, sizeof(u));
	const char *rest;
	int ret = parse_host(buf, buf, &sc, false, &u, &rest, err, errlen);
	if (ret)
		return ret;
	if (*rest == '\0')
		return fail(err, errlen, "'%s': no port (HOST:PORT, e.g. %s:%u)", buf, buf,
			    (unsigned)example_port);
	if (*rest != ':')
		return fail(err, errlen, "'%s': unexpected '%.16s' after the host", buf, rest);
	if (port_parse(rest + 1, 1, &u.port))
		return fail(err, errlen, "'%s': bad port '%.16s' (1..65535)", buf, rest + 1);
	snprintf(u.port_str, sizeof(u.port_str), "%u", (unsigned)u.port);
	*out = u;
	return 0;
}

const char *url_scheme_name(enum url_scheme scheme)
{
	for (size_t i = 0; i < NSCHEMES; i++)
		if (schemes[i].scheme == scheme)
			return schemes[i].name;
	return "?";
}
