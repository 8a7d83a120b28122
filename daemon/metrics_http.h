/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * metrics_http.h -- the Prometheus endpoint: GET /metrics over HTTP
 *
 * rdaxd --metrics http://HOST:PORT (config key "metrics") serves the text of
 * metrics_expo_render() at /metrics; "/" says where to look; anything else
 * is 404, a method other than GET or HEAD 405.
 *
 * Why libmicrohttpd and not a responder on a worker loop: a scrape takes
 * every namespace's lock (free space, the volumes' dirty state), and a
 * namespace lock is held across the zeroing of a new volume -- seconds for a
 * large one. On a worker loop that wait would stall every connection of
 * the loop; on the endpoint's own thread (MHD_USE_INTERNAL_POLLING_THREAD)
 * it stalls only the scrape. And the endpoint faces the network: the HTTP
 * parsing, limits and timeouts of a maintained library (Debian
 * libmicrohttpd, used by systemd-journal-remote among others) rather than a
 * new parser of our own. Bounds: MHD's default connection memory limit,
 * METRICS_HTTP_MAX_CONNS connections, METRICS_HTTP_TIMEOUT seconds idle.
 *
 * Thread safety: start and stop from the main thread; requests are served
 * on the endpoint's thread.
 */
#ifndef RDAXD_METRICS_HTTP_H
#define RDAXD_METRICS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "metrics_expo.h"

/* Connections at once: scrapers are few (Prometheus keeps one per target). */
#define METRICS_HTTP_MAX_CONNS 16
/* Seconds a connection may stay idle. */
#define METRICS_HTTP_TIMEOUT 30

struct metrics_http;

/*
 * metrics_http_parse -- check an endpoint address "http://HOST:PORT" (HOST a
 * name, an IPv4 address or an [IPv6] address; PORT 0 picks a free one),
 * by the listen rules of url.h. Returns 0 or -EINVAL (@err says why).
 */
int metrics_http_parse(const char *url, char *err, size_t errlen);

/*
 * metrics_http_start -- listen on @url and serve @src (which must outlive
 * the endpoint). Returns 0, or a negative code with @err saying why.
 */
int metrics_http_start(const char *url, const struct metrics_expo_src *src,
		       struct metrics_http **out, char *err, size_t errlen);

/* metrics_http_url -- the address served, with the port the kernel picked ("http://H:P") */
const char *metrics_http_url(const struct metrics_http *m);

/* metrics_http_stop -- close the endpoint, wait for its thread; accepts NULL; sets *mp = NULL */
void metrics_http_stop(struct metrics_http **mp);

#endif
