/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * url.h -- server addresses: "tcp://HOST[:PORT]", "rdma://HOST[:PORT]"
 *
 * HOST is a name, an IPv4 address, or an IPv6 address in brackets
 * ("[::1]", "[fe80::1%eth0]"). PORT is 1..65535 in decimal and defaults to
 * RDAX_DEFAULT_PORT. Nothing may follow the port (no path, no query).
 */
#ifndef RDAX_CLIENT_URL_H
#define RDAX_CLIENT_URL_H

#include <stddef.h>
#include <stdint.h>

/* Longest host accepted (a DNS name is at most 253 characters). */
#define URL_HOST_MAX 255

enum url_scheme { URL_TCP = 1, URL_RDMA };

struct url {
	enum url_scheme scheme;
	char host[URL_HOST_MAX + 1]; /* without the brackets of an IPv6 address */
	uint16_t port;
	char port_str[6]; /* the port in decimal, for getaddrinfo */
};

/*
 * url_parse -- parse @s into *out (written only on success).
 * Returns 0, or -EINVAL with a reason in @err ("missing '://'", "bad port
 * '99999'", ...); @err may be NULL.
 */
int url_parse(const char *s, struct url *out, char *err, size_t errlen);

#endif
