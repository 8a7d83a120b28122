/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * url.h -- addresses of rdax servers and listeners, one set of rules for both
 *
 *   tcp://HOST[:PORT]     the rdax protocol over TCP       (default port 7470)
 *   rdaxs://HOST[:PORT]   the same in TLS (a client's address only: rdaxd serves
 *                         TLS on its tcp:// listeners with --tls)
 *   rdma://HOST[:PORT]    the rdax protocol over RDMA      (default port 7470)
 *   nbd://HOST[:PORT]     NBD over TCP                     (default port 10809)
 *   nbd+unix:///PATH      NBD on a unix socket (PATH absolute, at most 107 bytes)
 *
 * HOST is a name or an IPv4 address (letters, digits, '.', '-', '_'), or an
 * IPv6 address in brackets with an optional zone: "[::1]", "[fe80::1%eth0]".
 * Schemes are lower case. Nothing follows the port: no path, query or user.
 *
 * Two uses differ only where they must (docs/cli.md):
 *  - a server to connect to (url_parse): PORT may be left out (the scheme's
 *    default) and is 1..65535;
 *  - an address to listen on (url_parse_listen, rdaxd --listen): PORT must be
 *    written out and may be 0 (the kernel picks a free one); nbd+unix takes
 *    "?mode=OCTAL", the socket's file mode (default URL_UNIX_MODE).
 * nbds:// is libnbd's and qemu's form of NBD in TLS; rdaxd serves it on its
 * nbd:// listeners (NBD_OPT_STARTTLS), so it is no scheme of this table.
 *
 * Thread safety: pure functions; @out and @err are the caller's.
 */
#ifndef RDAX_COMMON_URL_H
#define RDAX_COMMON_URL_H

#include <stddef.h>
#include <stdint.h>

/* Longest host accepted (a DNS name is at most 253 characters). */
#define URL_HOST_MAX 255
/* Longest unix socket path: sun_path holds 108 bytes with the terminating NUL. */
#define URL_PATH_MAX 107
/* File mode of an nbd+unix listening socket without ?mode=: the daemon's user only. */
#define URL_UNIX_MODE 0600
/* The default port of nbd:// (the IANA port of NBD); tcp:// and rdma:// use RDAX_DEFAULT_PORT. */
#define URL_NBD_PORT 10809

enum url_scheme { URL_TCP = 1, URL_RDMA, URL_NBD, URL_NBD_UNIX, URL_RDAXS };

struct url {
	enum url_scheme scheme;
	char host[URL_HOST_MAX + 1]; /* without the brackets of an IPv6 address; "" for unix */
	uint16_t port;		     /* 0 for unix (and for a listener's "any port") */
	char port_str[6];	     /* the port in decimal, for getaddrinfo */
	char path[URL_PATH_MAX + 1]; /* nbd+unix: the socket path; else "" */
	unsigned mode;		     /* nbd+unix listener: file mode of the socket */
};

/*
 * url_parse -- parse the address of a server to connect to into *out
 * (written only on success).
 * Returns 0, or -EINVAL with a reason in @err ("missing '://'", "bad port
 * '99999'", ...); @err may be NULL.
 */
int url_parse(const char *s, struct url *out, char *err, size_t errlen);

/* url_parse_listen -- the same for an address to listen on (rules above) */
int url_parse_listen(const char *s, struct url *out, char *err, size_t errlen);

/*
 * url_parse_endpoint -- one "HOST:PORT" of a list with a scheme of its own
 * (the endpoints of etcd://HOST:PORT[,HOST:PORT...]): the first @len bytes
 * of @s, the host rules above, PORT written out and 1..65535. @scheme and
 * @example_port only word the messages. Fills out->host, port, port_str
 * (the scheme is 0). Returns 0, or -EINVAL with a reason in @err.
 */
int url_parse_endpoint(const char *s, size_t len, const char *scheme, uint16_t example_port,
		       struct url *out, char *err, size_t errlen);

/* url_scheme_name -- "tcp", "rdaxs", "rdma", "nbd", "nbd+unix" */
const char *url_scheme_name(enum url_scheme scheme);

#endif
