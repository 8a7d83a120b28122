/* SPDX-License-Identifier: BSD-3-Clause */
/* metrics_http.c -- the Prometheus endpoint on libmicrohttpd (metrics_http.h) */
#include "metrics_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "errors.h"
#include "log.h"
#include "url.h"

#define HTTP_PREFIX "http://"

struct metrics_http {
	struct MHD_Daemon *mhd;
	const struct metrics_expo_src *src;
	char url[URL_HOST_MAX + 32];
};

/* to_listen_url -- "http://REST" as "tcp://REST" for url_parse_listen's host rules */
static int to_listen_url(const char *url, struct url *u, char *err, size_t errlen)
{
	if (!url || strncmp(url, HTTP_PREFIX, strlen(HTTP_PREFIX)) != 0) {
		rdax_seterr(err, errlen, "'%s': not http://HOST:PORT", url ? url : "");
		return -EINVAL;
	}
	char tcp[URL_HOST_MAX + 64];
	if (snprintf(tcp, sizeof(tcp), "tcp://%s", url + strlen(HTTP_PREFIX)) >= (int)sizeof(tcp)) {
		rdax_seterr(err, errlen, "'%s': too long", url);
		return -EINVAL;
	}
	char why[256];
	if (url_parse_listen(tcp, u, why, sizeof(why))) {
		/* the reason names the tcp:// form: say it of the address given */
		rdax_seterr(err, errlen, "'%s': not http://HOST:PORT (%s)", url, why);
		return -EINVAL;
	}
	return 0;
}

int metrics_http_parse(const char *url, char *err, size_t errlen)
{
	struct url u;
	return to_listen_url(url, &u, err, errlen);
}

/* reply -- queue a response of @len bytes of @body (copied) with @status */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
			     const char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, mode);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* on_request -- one HTTP request (the endpoint's thread) */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	static const char text[] = "text/plain; charset=utf-8";
	struct metrics_http *m = cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
		static const char msg[] = "only GET and HEAD\n";
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, text, msg, sizeof(msg) - 1,
			     MHD_RESPMEM_PERSISTENT);
	}
	if (strcmp(url, "/") == 0) {
		static const char msg[] = "rdaxd: Prometheus metrics at /metrics\n";
		return reply(conn, MHD_HTTP_OK, text, msg, sizeof(msg) - 1, MHD_RESPMEM_PERSISTENT);
	}
	if (strcmp(url, "/metrics") != 0) {
		static const char msg[] = "not found: the metrics are at /metrics\n";
		return reply(conn, MHD_HTTP_NOT_FOUND, text, msg, sizeof(msg) - 1,
			     MHD_RESPMEM_PERSISTENT);
	}
	char *body;
	size_t len;
	if (metrics_expo_render(m->src, &body, &len)) {
		static const char msg[] = "out of memory\n";
		LOG_ERROR("metrics: out of memory rendering a scrape");
		return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, text, msg, sizeof(msg) - 1,
			     MHD_RESPMEM_PERSISTENT);
	}
	return reply(conn, MHD_HTTP_OK, METRICS_EXPO_CONTENT_TYPE, body, len,
		     MHD_RESPMEM_MUST_FREE);
}

/* on_mhd_log -- libmicrohttpd's own messages (a failed bind, a refused connection) */
static void on_mhd_log(void *arg, const char *fmt, va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	LOG_DEBUG("metrics endpoint: %s", msg);
}

int metrics_http_start(const char *url, const struct metrics_expo_src *src,
		       struct metrics_http **out, char *err, size_t errlen)
{
	struct url u;
	int ret = to_listen_url(url, &u, err, errlen);
	if (ret)
		return ret;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
	struct addrinfo *ai;
	int gai = getaddrinfo(u.host, u.port_str, &hints, &ai);
	if (gai) {
		rdax_seterr(err, errlen, "--metrics %s: cannot resolve '%s': %s", url, u.host,
			    gai_strerror(gai));
		return -EINVAL;
	}
	struct metrics_http *m = calloc(1, sizeof(*m));
	if (!m) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	m->src = src;
	unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* the endpoint's thread blocks every signal, as the workers do: main() handles them */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	m->mhd =
	    MHD_start_daemon(flags, 0, NULL, NULL, on_request, m, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
			     MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_HTTP_MAX_CONNS,
			     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_HTTP_TIMEOUT,
			     MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	freeaddrinfo(ai);
	if (!m->mhd) {
		rdax_seterr(err, errlen,
			    "--metrics %s: cannot listen there (the address is in use or not "
			    "this machine's)",
			    url);
		free(m);
		return -EADDRINUSE;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_BIND_PORT);
	unsigned port = di ? di->port : u.port;
	bool v6 = strchr(u.host, ':') != NULL;
	snprintf(m->url, sizeof(m->url), "http://%s%s%s:%u", v6 ? "[" : "", u.host, v6 ? "]" : "",
		 port);
	LOG_INFO("metrics at %s/metrics", m->url);
	*out = m;
	return 0;
}

const char *metrics_http_url(const struct metrics_http *m)
{
	return m->url;
}

void metrics_http_stop(struct metrics_http **mp)
{
	if (!mp || !*mp)
		return;
	MHD_stop_daemon((*mp)->mhd);
	free(*mp);
	*mp = NULL;
}
