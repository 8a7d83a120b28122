/* SPDX-License-Identifier: BSD-3-Clause */
/* url.c -- parse server addresses */
#include "url.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "librdax.h"

/* seterr -- format the reason a URL was refused into @err (may be NULL); returns -EINVAL */
static int seterr(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_hex(char c)
{
	return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9');
}

/* name_valid -- a host name or IPv4 address: letters, digits, '.', '-', '_' */
static bool name_valid(const char *h, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!is_alnum(h[i]) && h[i] != '.' && h[i] != '-' && h[i] != '_')
			return false;
	return true;
}

/* ipv6_valid -- the inside of "[...]": hex digits, ':' and '.', an optional %zone; one ':' at least
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
	if (i < len) { /* zone id: an interface name or number */
		if (i + 1 == len)
			return false;
		for (i++; i < len; i++)
			if (!is_alnum(h[i]) && h[i] != '.' && h[i] != '-' && h[i] != '_')
				return false;
	}
	return colon;
}

/* port_parse -- 1..65535, decimal digits only; 0 or -EINVAL */
static int port_parse(const char *p, uint16_t *out)
{
	unsigned v = 0;
	if (!*p || strlen(p) > 5)
		return -EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(*p - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

int url_parse(const char *s, struct url *out, char *err, size_t errlen)
{
	if (!s || !out)
		return seterr(err, errlen, "no URL");
	struct url u;
	memset(&u, 0, sizeof(u));

	const char *sep = strstr(s, "://");
	if (!sep)
		return seterr(err, errlen, "'%s': missing '://' (expected tcp://HOST:PORT)", s);
	size_t slen = (size_t)(sep - s);
	if (slen == 3 && strncmp(s, "tcp", 3) == 0)
		u.scheme = URL_TCP;
	else if (slen == 4 && strncmp(s, "rdma", 4) == 0)
		u.scheme = URL_RDMA;
	else
		return seterr(err, errlen, "'%s': unknown scheme '%.*s' (expected tcp or rdma)", s,
			      (int)(slen > 16 ? 16 : slen), s);

	const char *h = sep + 3, *rest;
	size_t hlen;
	if (*h == '[') {
		const char *close = strchr(h, ']');
		if (!close)
			return seterr(err, errlen, "'%s': missing ']' after the IPv6 address", s);
		h++;
		hlen = (size_t)(close - h);
		if (hlen == 0 || !ipv6_valid(h, hlen))
			return seterr(err, errlen, "'%s': bad IPv6 address '%.*s'", s,
				      (int)(hlen > 64 ? 64 : hlen), h);
		rest = close + 1;
	} else {
		hlen = strcspn(h, ":/?#");
		if (h[hlen] == ':' && strchr(h + hlen + 1, ':'))
			return seterr(
			    err, errlen,
			    "'%s': an IPv6 address must be in brackets, as in tcp://[::1]:%d", s,
			    RDAX_DEFAULT_PORT);
		if (hlen == 0)
			return seterr(err, errlen, "'%s': no host", s);
		if (!name_valid(h, hlen))
			return seterr(err, errlen, "'%s': bad host name", s);
		rest = h + hlen;
	}
	if (hlen > URL_HOST_MAX)
		return seterr(err, errlen, "'%s': host longer than %d characters", s, URL_HOST_MAX);
	memcpy(u.host, h, hlen);
	u.host[hlen] = '\0';

	if (*rest == '\0') {
		u.port = RDAX_DEFAULT_PORT;
	} else if (*rest == ':') {
		if (port_parse(rest + 1, &u.port))
			return seterr(err, errlen, "'%s': bad port '%.16s' (1..65535)", s,
				      rest + 1);
	} else {
		return seterr(err, errlen, "'%s': unexpected '%.16s' after the host", s, rest);
	}
	snprintf(u.port_str, sizeof(u.port_str), "%u", (unsigned)u.port);
	*out = u;
	return 0;
}
