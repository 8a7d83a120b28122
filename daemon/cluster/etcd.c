/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd.c -- a client of etcd's v3 JSON gateway (libcurl + json-c)
 *
 * Unary calls go through one curl easy handle, performed on the caller's
 * thread (libcurl keeps the connection for the next call). Watches are
 * easy handles in one multi handle, driven by etcd_client_poll(); their
 * write callbacks only buffer bytes, and the buffered lines (the gateway
 * ends every streamed message with '\n') are parsed and delivered after
 * curl_multi_perform() returns, so a watch callback may call back into the
 * client without re-entering libcurl.
 */
#include "etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "errors.h"
#include "faults.h"
#include "log.h"
#include "url.h"

/* Bounds on what etcd may send: etcd's own request limit is 1.5 MiB, a range or a batch of events
 * may be larger. */
#define ETCD_MAX_RESPONSE    (64U << 20)
#define ETCD_MAX_STREAM_LINE (32U << 20)
#define ETCD_JSON_DEPTH	     32
/* TCP keepalive on every connection: a dead peer is noticed in ~2 s + 9 probes x 1 s */
#define ETCD_KEEPIDLE_S	 2L
#define ETCD_KEEPINTVL_S 1L

struct etcd_endpoint {
	char base[96]; /* "http://host:port" */
};

struct etcd_client {
	struct etcd_opts opts;
	struct etcd_endpoint ep[ETCD_MAX_ENDPOINTS];
	unsigned nep;
	unsigned cur; /* endpoint tried first */
	CURL *easy;   /* unary calls */
	CURLM *multi; /* watches */
	struct curl_slist *headers;
	struct etcd_watch *watches; /* list */
	bool polling; /* inside etcd_client_poll: cancelled watches are freed at its end */
	char last_error[512];
};

/* resp_buf -- bytes received, NUL-terminated, bounded */
struct resp_buf {
	char *data;
	size_t len, cap;
	bool overflow;
};

struct etcd_watch {
	struct etcd_watch *next;
	struct etcd_client *c;
	char *key; /* base64, as sent */
	char *range_end;
	int64_t next_rev; /* resume from here after a break */
	etcd_watch_fn fn;
	void *arg;
	CURL *easy; /* NULL while not connected */
	unsigned endpoint;
	char *body;
	struct resp_buf in; /* stream bytes not yet parsed; overflow: the stream is dropped */
	bool created;	    /* etcd confirmed this stream */
	bool restart;	    /* drop the stream and re-create it (endpoint found dead) */
	bool finished;	    /* CANCELED delivered: never re-created */
	bool dead;	    /* cancelled during a poll: freed at its end */
	unsigned backoff_ms;
	int64_t retry_at_ms;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;

/* curl_global -- libcurl's global init, once per process */
static void curl_global(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_error(struct etcd_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* set_error -- remember the words for the failing call */
static void set_error(struct etcd_client *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
}

/*
 * base64 -- the gateway carries bytes (keys, values) as RFC 4648 base64
 * with padding; on input both the standard and the URL-safe alphabet are
 * accepted, as protobuf's JSON mapping allows.
 */
static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* b64_encode -- a malloc'd NUL-terminated encoding of @len bytes, or NULL */
static char *b64_encode(const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t olen = (len + 2) / 3 * 4;
	char *out = malloc(olen + 1), *o = out;
	if (!out)
		return NULL;
	size_t i = 0;
	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = b64_alphabet[v >> 18];
		*o++ = b64_alphabet[(v >> 12) & 63];
		*o++ = b64_alphabet[(v >> 6) & 63];
		*o++ = b64_alphabet[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
		*o++ = b64_alphabet[v >> 18];
		*o++ = b64_alphabet[(v >> 12) & 63];
		*o++ = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int b64_value(char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+' || ch == '-')
		return 62;
	if (ch == '/' || ch == '_')
		return 63;
	return -1;
}

/* b64_decode -- decode @len chars into a malloc'd NUL-terminated buffer; 0, -EPROTO, -ENOMEM */
static int b64_decode(const char *s, size_t len, char **out, size_t *out_len)
{
	while (len > 0 && s[len - 1] == '=')
		len--;
	if (len % 4 == 1)
		return -EPROTO;
	char *buf = malloc(len / 4 * 3 + 3 + 1);
	if (!buf)
		return -ENOMEM;
	size_t n = 0;
	uint32_t acc = 0;
	unsigned bits = 0;
	for (size_t i = 0; i < len; i++) {
		int v = b64_value(s[i]);
		if (v < 0) {
			free(buf);
			return -EPROTO;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[n++] = (char)(acc >> bits);
			acc &= (1U << bits) - 1;
		}
	}
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
	return 0;
}

/* prefix_end -- the range_end that selects every key starting with @key ("\0" for all keys) */
static size_t prefix_end(const char *key, char *end)
{
	size_t n = strlen(key);
	memcpy(end, key, n);
	while (n > 0) {
		if ((uint8_t)end[n - 1] < 0xff) {
			end[n - 1]++;
			return n;
		}
		n--; /* 0xff: drop it and carry into the byte before */
	}
	end[0] = '\0';
	return 1;
}

/* json_add_str -- add a string member; 0 or -ENOMEM (takes care of @s == NULL) */
static int json_add_str(json_object *o, const char *name, const char *s)
{
	json_object *v = s ? json_object_new_string(s) : NULL;
	if (!v || json_object_object_add(o, name, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

/* json_add_bytes -- add @len bytes as a base64 string member */
static int json_add_bytes(json_object *o, const char *name, const void *data, size_t len)
{
	char *b = b64_encode(data, len);
	int ret = json_add_str(o, name, b);
	free(b);
	return ret;
}

/* json_add_i64 -- add a 64-bit number as the decimal string the gateway expects */
static int json_add_i64(json_object *o, const char *name, int64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%" PRId64, v);
	return json_add_str(o, name, buf);
}

/* json_add_key_range -- "key" and, for a prefix, "range_end" */
static int json_add_key_range(json_object *o, const char *key, bool prefix)
{
	if (json_add_bytes(o, "key", key, strlen(key)) < 0)
		return -ENOMEM;
	if (!prefix)
		return 0;
	char *end = malloc(strlen(key) + 1);
	if (!end)
		return -ENOMEM;
	size_t n = prefix_end(key, end);
	int ret = json_add_bytes(o, "range_end", end, n);
	free(end);
	return ret;
}

/*
 * json_i64 -- member @name as a 64-bit integer: a decimal string (the
 * gateway's form) or a JSON number; absent is 0 (protobuf omits defaults).
 * 0 or -EPROTO.
 */
static int json_i64(json_object *o, const char *name, int64_t *out)
{
	json_object *v;
	*out = 0;
	if (!json_object_object_get_ex(o, name, &v) || !v)
		return 0;
	if (json_object_is_type(v, json_type_int)) {
		*out = json_object_get_int64(v);
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return -EPROTO;
	const char *s = json_object_get_string(v);
	char *end;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return -EPROTO;
	*out = x;
	return 0;
}

static bool json_flag(json_object *o, const char *name)
{
	json_object *v;
	return json_object_object_get_ex(o, name, &v) && v && json_object_get_boolean(v);
}

/* json_bytes -- member @name, base64, decoded (absent: empty); 0, -EPROTO, -ENOMEM */
static int json_bytes(json_object *o, const char *name, char **out, size_t *len)
{
	json_object *v;
	if (!json_object_object_get_ex(o, name, &v) || !v)
		return b64_decode("", 0, out, len);
	if (!json_object_is_type(v, json_type_string))
		return -EPROTO;
	return b64_decode(json_object_get_string(v), (size_t)json_object_get_string_len(v), out,
			  len);
}

/* header_revision -- header.revision of a response (0 if absent) */
static int header_revision(json_object *o, int64_t *rev)
{
	json_object *h;
	*rev = 0;
	if (!json_object_object_get_ex(o, "header", &h) || !h)
		return 0;
	return json_i64(h, "revision", rev);
}

static void kv_free(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

/* kv_parse -- one mvccpb.KeyValue */
static int kv_parse(json_object *o, struct etcd_kv *kv)
{
	memset(kv, 0, sizeof(*kv));
	int ret = json_bytes(o, "key", &kv->key, &kv->key_len);
	if (!ret)
		ret = json_bytes(o, "value", &kv->value, &kv->value_len);
	if (!ret)
		ret = json_i64(o, "create_revision", &kv->create_revision);
	if (!ret)
		ret = json_i64(o, "mod_revision", &kv->mod_revision);
	if (!ret)
		ret = json_i64(o, "version", &kv->version);
	if (!ret)
		ret = json_i64(o, "lease", &kv->lease);
	if (ret)
		kv_free(kv);
	return ret;
}

void etcd_range_result_free(struct etcd_range_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++)
		kv_free(&r->kvs[i]);
	free(r->kvs);
	memset(r, 0, sizeof(*r));
}

/* range_parse -- a RangeResponse into @r */
static int range_parse(json_object *o, struct etcd_range_result *r)
{
	memset(r, 0, sizeof(*r));
	int ret = header_revision(o, &r->revision);
	json_object *kvs;
	if (ret || !json_object_object_get_ex(o, "kvs", &kvs) || !kvs)
		return ret;
	if (!json_object_is_type(kvs, json_type_array))
		return -EPROTO;
	size_t n = json_object_array_length(kvs);
	r->kvs = calloc(n ? n : 1, sizeof(*r->kvs));
	if (!r->kvs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		ret = kv_parse(json_object_array_get_idx(kvs, i), &r->kvs[i]);
		if (ret) {
			etcd_range_result_free(r);
			return ret;
		}
		r->count++;
	}
	return 0;
}

/* grpc_errno -- a gRPC status code (etcd's answer) as one of the header's codes */
static int grpc_errno(int64_t code)
{
	switch (code) {
	case 1: /* CANCELLED */
		return -ECANCELED;
	case 3: /* INVALID_ARGUMENT */
	case 9: /* FAILED_PRECONDITION */
		return -EINVAL;
	case 4:	 /* DEADLINE_EXCEEDED */
	case 14: /* UNAVAILABLE: no leader, request timed out, stopping */
		return -ETIMEDOUT;
	case 5: /* NOT_FOUND */
		return -ENOENT;
	case 6: /* ALREADY_EXISTS */
		return -EEXIST;
	case 7:	 /* PERMISSION_DENIED */
	case 16: /* UNAUTHENTICATED */
		return -EACCES;
	case 8: /* RESOURCE_EXHAUSTED */
		return -ENOSPC;
	case 11: /* OUT_OF_RANGE: compacted */
		return -ERANGE;
	default:
		return -EIO;
	}
}

json_object *etcd_json_parse_object(const char *buf, size_t len, const char **why)
{
	if (len > INT_MAX) {
		*why = "too long";
		return NULL;
	}
	json_tokener *tok = json_tokener_new_ex(ETCD_JSON_DEPTH);
	if (!tok) {
		*why = "out of memory";
		return NULL;
	}
	json_object *o = json_tokener_parse_ex(tok, buf, (int)len);
	enum json_tokener_error e = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!o || e != json_tokener_success) {
		*why = e == json_tokener_continue ? "truncated JSON" : json_tokener_error_desc(e);
		json_object_put(o);
		return NULL;
	}
	while (end < len &&
	       (buf[end] == ' ' || buf[end] == '\n' || buf[end] == '\r' || buf[end] == '\t'))
		end++;
	if (end != len || !json_object_is_type(o, json_type_object)) {
		*why = end != len ? "trailing bytes after the JSON value" : "not a JSON object";
		json_object_put(o);
		return NULL;
	}
	return o;
}

/*
 * error_body -- etcd's error answer: {"error": "...", "message": "...",
 * "code": N} on unary calls, {"error": {"grpc_code": N, "message": "..."}}
 * on streams. Returns the mapped code (0 if @o carries no error) and
 * copies the message into @msg.
 */
static int error_body(json_object *o, char *msg, size_t msglen, int64_t *grpc_code)
{
	json_object *e, *m;
	int64_t code = 0;
	*grpc_code = 0;
	if (!json_object_object_get_ex(o, "error", &e) || !e)
		return 0;
	if (json_object_is_type(e, json_type_object)) {
		json_i64(e, "grpc_code", &code);
		if (!json_object_object_get_ex(e, "message", &m))
			m = NULL;
	} else {
		json_i64(o, "code", &code);
		if (!json_object_object_get_ex(o, "message", &m))
			m = e;
	}
	snprintf(msg, msglen, "%s", m ? json_object_get_string(m) : "(no message)");
	*grpc_code = code;
	return code ? grpc_errno(code) : -EIO;
}

/* buf_append -- append @n bytes, keeping the total below @max; @n, or 0 (full or no memory) */
static size_t buf_append(struct resp_buf *b, const char *ptr, size_t n, size_t max)
{
	if (b->len + n + 1 > max) {
		b->overflow = true;
		return 0; /* curl fails the transfer: CURLE_WRITE_ERROR */
	}
	if (b->len + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 4096;
		while (nc < b->len + n + 1)
			nc *= 2;
		char *p = realloc(b->data, nc);
		if (!p)
			return 0;
		b->data = p;
		b->cap = nc;
	}
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

/* resp_write -- curl write callback of unary calls: collect the body */
static size_t resp_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	return buf_append(userdata, ptr, size * nmemb, ETCD_MAX_RESPONSE);
}

/* easy_common -- options every request of the client shares */
static void easy_common(struct etcd_client *c, CURL *e)
{
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*"); /* etcd is never reached through a proxy */
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->opts.connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, ETCD_KEEPIDLE_S);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, ETCD_KEEPINTVL_S);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
}

/* endpoint_failed -- @ep did not answer: the next call starts at the next one; its watches move too
 */
static void endpoint_failed(struct etcd_client *c, unsigned ep)
{
	if (c->cur == ep && c->nep > 1) {
		c->cur = (ep + 1) % c->nep;
		LOG_WARN("etcd: endpoint %s failed, next: %s", c->ep[ep].base, c->ep[c->cur].base);
	}
	for (struct etcd_watch *w = c->watches; w; w = w->next)
		if (w->easy && w->endpoint == ep)
			w->restart = true;
}

/* How call() treats a request: flags. */
enum call_kind {
	CALL_WRITE = 0,	     /* may have been applied if sent: never repeated */
	CALL_IDEMPOTENT = 1, /* reads, keepalive: repeated on the next endpoint */
	CALL_STREAM = 2,     /* a streaming call: its first line is the answer */
};

/*
 * call -- POST @req to @path on the endpoints, failing over as the header
 * says; *resp gets the parsed answer. @what names the call in errors.
 */
static int call(struct etcd_client *c, const char *what, const char *path, json_object *req,
		unsigned kind, json_object **resp)
{
	*resp = NULL;
	const char *body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	if (!body) {
		set_error(c, "etcd %s: out of memory", what);
		return -ENOMEM;
	}
	int64_t deadline = now_ms() + c->opts.call_timeout_ms;
	int ret = -ENOTCONN;
	char why[384] = "";
	for (unsigned tried = 0; tried < c->nep; tried++) {
		unsigned ep = c->cur;
		int64_t left = deadline - now_ms();
		if (left <= 0)
			break;
		long attempt = left < c->opts.attempt_timeout_ms ? (long)left
								 : (long)c->opts.attempt_timeout_ms;
		char url[160];
		snprintf(url, sizeof(url), "%s%s", c->ep[ep].base, path);
		struct resp_buf b = {0};
		CURL *e = c->easy;
		curl_easy_setopt(e, CURLOPT_URL, url);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, attempt);
		curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
				 attempt < c->opts.connect_timeout_ms
				     ? attempt
				     : (long)c->opts.connect_timeout_ms);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, resp_write);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
		CURLcode rc = curl_easy_perform(e);
		long status = 0, sent = 0;
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &sent);
		if (rc != CURLE_OK) {
			free(b.data);
			bool unsent = sent == 0 || rc == CURLE_COULDNT_CONNECT ||
				      rc == CURLE_COULDNT_RESOLVE_HOST;
			int code = b.overflow || rc == CURLE_WEIRD_SERVER_REPLY ||
					   rc == CURLE_UNSUPPORTED_PROTOCOL
				       ? -EPROTO
				   : rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
								    : -ECONNRESET;
			snprintf(why, sizeof(why), "%s: %s%s", c->ep[ep].base,
				 b.overflow ? "answer too large" : curl_easy_strerror(rc),
				 unsent ? "" : " (after the request was sent)");
			endpoint_failed(c, ep);
			if (unsent)
				continue; /* ret stays what the attempts before made it */
			ret = code;
			if (kind & CALL_IDEMPOTENT)
				continue;
			break;
		}
		const char *perr = NULL;
		if (kind & CALL_STREAM) {
			char *nl = b.len ? memchr(b.data, '\n', b.len) : NULL;
			if (nl)
				b.len = (size_t)(nl - b.data);
		}
		json_object *o = b.len ? etcd_json_parse_object(b.data, b.len, &perr) : NULL;
		if (!o) {
			snprintf(why, sizeof(why),
				 "%s: HTTP %ld, not the gateway's JSON (%s): %.80s", c->ep[ep].base,
				 status, perr ? perr : "empty answer", b.data ? b.data : "");
			free(b.data);
			ret = -EPROTO;
			if (kind & CALL_IDEMPOTENT) {
				endpoint_failed(c, ep);
				continue;
			}
			break;
		}
		free(b.data);
		int64_t gcode;
		char msg[256];
		int eret = error_body(o, msg, sizeof(msg), &gcode);
		if (eret == 0 && status != 200) {
			snprintf(msg, sizeof(msg), "HTTP status %ld", status);
			eret = -EPROTO;
		}
		if (eret == 0) {
			*resp = o;
			return 0;
		}
		json_object_put(o);
		snprintf(why, sizeof(why), "%s: %s (code %" PRId64 ")", c->ep[ep].base, msg, gcode);
		ret = eret;
		if (gcode == 14 && (kind & CALL_IDEMPOTENT)) {
			endpoint_failed(c, ep); /* this member cannot serve: try another */
			continue;
		}
		break;
	}
	if (ret == -ENOTCONN)
		set_error(c, "etcd %s: no endpoint reachable (nothing sent); last: %s", what, why);
	else if (ret == -ETIMEDOUT)
		set_error(c, "etcd %s: no answer within %u ms, outcome unknown: %s", what,
			  c->opts.call_timeout_ms, why[0] ? why : "deadline passed");
	else if (ret == -ECONNRESET)
		set_error(c, "etcd %s: connection lost before the answer, outcome unknown: %s",
			  what, why);
	else
		set_error(c, "etcd %s: %s", what, why);
	return ret;
}

/*
 * parse_endpoint -- one "HOST:PORT" of the list (the address rules of
 * url.h, "[v6]" in brackets) into @ep's base URL; 0 or -EINVAL with a
 * reason in @err
 */
static int parse_endpoint(const char *s, size_t len, struct etcd_endpoint *ep, char *err,
			  size_t errlen)
{
	struct url u;
	int ret = url_parse_endpoint(s, len, "etcd", 2379, &u, err, errlen);
	if (ret)
		return ret;
	bool v6 = strchr(u.host, ':') != NULL;
	int n = snprintf(ep->base, sizeof(ep->base), v6 ? "http://[%s]:%u" : "http://%s:%u", u.host,
			 (unsigned)u.port);
	if (n < 0 || (size_t)n >= sizeof(ep->base)) {
		rdax_seterr(err, errlen, "'%.*s': host too long", (int)(len > 64 ? 64 : len), s);
		return -EINVAL;
	}
	return 0;
}

int etcd_client_new(const char *spec, const struct etcd_opts *opts, struct etcd_client **out,
		    char *err, size_t errlen)
{
	static const char scheme[] = "etcd://";
	if (!spec || strncmp(spec, scheme, sizeof(scheme) - 1) != 0) {
		rdax_seterr(err, errlen, "cluster address must be etcd://HOST:PORT[,HOST:PORT...]");
		return -EINVAL;
	}
	pthread_once(&curl_once, curl_global);
	if (curl_init_rc != CURLE_OK) {
		rdax_seterr(err, errlen, "libcurl init: %s", curl_easy_strerror(curl_init_rc));
		return -ENOMEM;
	}
	struct etcd_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (opts)
		c->opts = *opts;
	if (!c->opts.connect_timeout_ms)
		c->opts.connect_timeout_ms = 500;
	if (!c->opts.attempt_timeout_ms)
		c->opts.attempt_timeout_ms = 1000;
	if (!c->opts.call_timeout_ms)
		c->opts.call_timeout_ms = 3000;
	if (!c->opts.watch_retry_ms)
		c->opts.watch_retry_ms = 100;
	int ret = -EINVAL;
	const char *p = spec + sizeof(scheme) - 1;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (c->nep == ETCD_MAX_ENDPOINTS) {
			rdax_seterr(err, errlen, "cluster address: more than %d endpoints",
				    ETCD_MAX_ENDPOINTS);
			goto err_free;
		}
		char why[160];
		if (parse_endpoint(p, len, &c->ep[c->nep], why, sizeof(why)) < 0) {
			rdax_seterr(err, errlen, "cluster address: bad endpoint: %s", why);
			goto err_free;
		}
		c->nep++;
		if (!comma)
			break;
		p = comma + 1;
	}
	ret = -ENOMEM;
	c->easy = curl_easy_init();
	c->multi = curl_multi_init();
	c->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (!c->easy || !c->multi || !c->headers) {
		rdax_seterr(err, errlen, "out of memory");
		goto err_free;
	}
	easy_common(c, c->easy);
	*out = c;
	return 0;

err_free:
	etcd_client_delete(&c);
	return ret;
}

static void watch_free(struct etcd_watch *w);

void etcd_client_delete(struct etcd_client **cp)
{
	struct etcd_client *c = cp ? *cp : NULL;
	if (!c)
		return;
	while (c->watches) {
		struct etcd_watch *w = c->watches;
		c->watches = w->next;
		watch_free(w);
	}
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	curl_slist_free_all(c->headers);
	free(c);
	*cp = NULL;
}

const char *etcd_client_last_error(const struct etcd_client *c)
{
	return c->last_error;
}

const char *etcd_client_endpoint(const struct etcd_client *c)
{
	return c->ep[c->cur].base;
}

int etcd_get(struct etcd_client *c, const char *key, bool prefix, struct etcd_range_result *out)
{
	memset(out, 0, sizeof(*out));
	if (!key)
		return -EINVAL;
	json_object *req = json_object_new_object(), *resp;
	int ret = req ? json_add_key_range(req, key, prefix) : -ENOMEM;
	if (!ret)
		ret = call(c, "range", "/v3/kv/range", req, CALL_IDEMPOTENT, &resp);
	json_object_put(req);
	if (ret)
		return ret;
	ret = range_parse(resp, out);
	if (ret)
		set_error(c, "etcd range: answer does not parse (%s)", strerror(-ret));
	json_object_put(resp);
	return ret;
}

/* put_body -- the members of a PutRequest */
static int put_body(json_object *o, const char *key, const void *value, size_t len, int64_t lease)
{
	if (json_add_bytes(o, "key", key, strlen(key)) < 0 ||
	    json_add_bytes(o, "value", value, len) < 0)
		return -ENOMEM;
	return lease ? json_add_i64(o, "lease", lease) : 0;
}

int etcd_put(struct etcd_client *c, const char *key, const void *value, size_t len, int64_t lease,
	     int64_t *revision)
{
	if (!key || (!value && len))
		return -EINVAL;
	json_object *req = json_object_new_object(), *resp;
	int ret = req ? put_body(req, key, value ? value : "", len, lease) : -ENOMEM;
	if (!ret)
		ret = call(c, "put", "/v3/kv/put", req, CALL_WRITE, &resp);
	json_object_put(req);
	if (ret)
		return ret;
	int64_t rev;
	ret = header_revision(resp, &rev);
	if (!ret && revision)
		*revision = rev;
	json_object_put(resp);
	return ret;
}

int etcd_delete(struct etcd_client *c, const char *key, bool prefix, int64_t *deleted)
{
	if (!key)
		return -EINVAL;
	json_object *req = json_object_new_object(), *resp;
	int ret = req ? json_add_key_range(req, key, prefix) : -ENOMEM;
	if (!ret)
		ret = call(c, "delete", "/v3/kv/deleterange", req, CALL_WRITE, &resp);
	json_object_put(req);
	if (ret)
		return ret;
	int64_t n;
	ret = json_i64(resp, "deleted", &n);
	if (!ret && deleted)
		*deleted = n;
	json_object_put(resp);
	return ret;
}

void etcd_txn_result_free(struct etcd_txn_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++)
		etcd_range_result_free(&r->results[i].range);
	free(r->results);
	memset(r, 0, sizeof(*r));
}

/* cmp_json -- one Compare */
static json_object *cmp_json(const struct etcd_cmp *cmp)
{
	static const char *const targets[] = {[ETCD_CMP_MOD] = "MOD",
					      [ETCD_CMP_CREATE] = "CREATE",
					      [ETCD_CMP_VERSION] = "VERSION",
					      [ETCD_CMP_VALUE] = "VALUE"};
	static const char *const results[] = {[ETCD_CMP_EQUAL] = "EQUAL",
					      [ETCD_CMP_NOT_EQUAL] = "NOT_EQUAL",
					      [ETCD_CMP_LESS] = "LESS",
					      [ETCD_CMP_GREATER] = "GREATER"};
	if (!cmp->key || (unsigned)cmp->target > ETCD_CMP_VALUE ||
	    (unsigned)cmp->result > ETCD_CMP_GREATER)
		return NULL;
	json_object *o = json_object_new_object();
	int ret = o ? 0 : -ENOMEM;
	if (!ret)
		ret = json_add_bytes(o, "key", cmp->key, strlen(cmp->key));
	if (!ret)
		ret = json_add_str(o, "target", targets[cmp->target]);
	if (!ret)
		ret = json_add_str(o, "result", results[cmp->result]);
	if (!ret) {
		switch (cmp->target) {
		case ETCD_CMP_MOD:
			ret = json_add_i64(o, "mod_revision", cmp->number);
			break;
		case ETCD_CMP_CREATE:
			ret = json_add_i64(o, "create_revision", cmp->number);
			break;
		case ETCD_CMP_VERSION:
			ret = json_add_i64(o, "version", cmp->number);
			break;
		case ETCD_CMP_VALUE:
			ret = json_add_bytes(o, "value", cmp->value ? cmp->value : "",
					     cmp->value_len);
			break;
		}
	}
	if (ret) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* op_json -- one RequestOp */
static json_object *op_json(const struct etcd_op *op)
{
	if (!op->key || (op->type == ETCD_OP_PUT && !op->value && op->value_len))
		return NULL;
	json_object *o = json_object_new_object(), *inner = json_object_new_object();
	int ret = o && inner ? 0 : -ENOMEM;
	const char *name = NULL;
	if (!ret) {
		switch (op->type) {
		case ETCD_OP_GET:
			name = "request_range";
			ret = json_add_key_range(inner, op->key, op->prefix);
			break;
		case ETCD_OP_PUT:
			name = "request_put";
			ret = put_body(inner, op->key, op->value ? op->value : "", op->value_len,
				       op->lease);
			break;
		case ETCD_OP_DELETE:
			name = "request_delete_range";
			ret = json_add_key_range(inner, op->key, op->prefix);
			break;
		default:
			ret = -EINVAL;
		}
	}
	if (!ret && json_object_object_add(o, name, inner) == 0)
		return o;
	json_object_put(inner);
	json_object_put(o);
	return NULL;
}

/* ops_json -- an array of RequestOps; NULL on a bad op or no memory */
static json_object *ops_json(const struct etcd_op *ops, size_t n)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; a && i < n; i++) {
		json_object *op = op_json(&ops[i]);
		if (!op || json_object_array_add(a, op) < 0) {
			json_object_put(op);
			json_object_put(a);
			return NULL;
		}
	}
	return a;
}

/* txn_results -- the ResponseOps of the branch that ran, checked against the ops sent */
static int txn_results(json_object *resp, const struct etcd_op *ops, size_t n,
		       struct etcd_txn_result *out)
{
	json_object *rs;
	size_t got = 0;
	if (json_object_object_get_ex(resp, "responses", &rs) && rs) {
		if (!json_object_is_type(rs, json_type_array))
			return -EPROTO;
		got = json_object_array_length(rs);
	}
	if (got != n)
		return -EPROTO;
	out->results = calloc(n ? n : 1, sizeof(*out->results));
	if (!out->results)
		return -ENOMEM;
	static const char *const names[] = {[ETCD_OP_GET] = "response_range",
					    [ETCD_OP_PUT] = "response_put",
					    [ETCD_OP_DELETE] = "response_delete_range"};
	for (size_t i = 0; i < n; i++) {
		json_object *r = json_object_array_get_idx(rs, i), *inner;
		struct etcd_op_result *res = &out->results[i];
		res->type = ops[i].type;
		out->count = i + 1;
		if (!json_object_object_get_ex(r, names[ops[i].type], &inner) || !inner)
			return -EPROTO;
		int ret = 0;
		if (ops[i].type == ETCD_OP_GET)
			ret = range_parse(inner, &res->range);
		else if (ops[i].type == ETCD_OP_DELETE)
			ret = json_i64(inner, "deleted", &res->deleted);
		if (ret)
			return ret;
		if (ops[i].type == ETCD_OP_GET && !res->range.revision)
			res->range.revision = out->revision;
	}
	return 0;
}

int etcd_txn(struct etcd_client *c, const struct etcd_cmp *cmps, size_t ncmp,
	     const struct etcd_op *success, size_t nsuccess, const struct etcd_op *failure,
	     size_t nfailure, struct etcd_txn_result *out)
{
	memset(out, 0, sizeof(*out));
	if ((ncmp && !cmps) || (nsuccess && !success) || (nfailure && !failure))
		return -EINVAL;
	json_object *req = json_object_new_object(), *resp = NULL;
	json_object *jc = json_object_new_array(), *js = ops_json(success, nsuccess),
		    *jf = ops_json(failure, nfailure);
	int ret = req && jc && js && jf ? 0 : -EINVAL;
	/* the control of the lost-update test: the txn runs its success ops unconditionally */
	if (rdax_faults.etcd_txn_no_compare)
		ncmp = 0;
	for (size_t i = 0; !ret && i < ncmp; i++) {
		json_object *o = cmp_json(&cmps[i]);
		if (!o || json_object_array_add(jc, o) < 0) {
			json_object_put(o);
			ret = -EINVAL;
		}
	}
	if (ret) {
		set_error(c, "etcd txn: bad compare or op (or out of memory)");
		json_object_put(jc);
		json_object_put(js);
		json_object_put(jf);
		json_object_put(req);
		return ret;
	}
	json_object_object_add(req, "compare", jc);
	json_object_object_add(req, "success", js);
	json_object_object_add(req, "failure", jf);
	ret = call(c, "txn", "/v3/kv/txn", req, CALL_WRITE, &resp);
	json_object_put(req);
	if (ret)
		return ret;
	out->succeeded = json_flag(resp, "succeeded");
	ret = header_revision(resp, &out->revision);
	if (!ret)
		ret = out->succeeded ? txn_results(resp, success, nsuccess, out)
				     : txn_results(resp, failure, nfailure, out);
	json_object_put(resp);
	if (ret) {
		set_error(c, "etcd txn: answer does not match the request (%s)", strerror(-ret));
		etcd_txn_result_free(out);
	}
	return ret;
}

int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl)
{
	if (ttl_s <= 0 || !id)
		return -EINVAL;
	json_object *req = json_object_new_object(), *resp;
	int ret = req ? json_add_i64(req, "TTL", ttl_s) : -ENOMEM;
	if (!ret)
		ret = call(c, "lease grant", "/v3/lease/grant", req, CALL_WRITE, &resp);
	json_object_put(req);
	if (ret)
		return ret;
	int64_t got_id, ttl;
	ret = json_i64(resp, "ID", &got_id);
	if (!ret)
		ret = json_i64(resp, "TTL", &ttl);
	json_object_put(resp);
	if (!ret && got_id == 0)
		ret = -EPROTO;
	if (ret) {
		set_error(c, "etcd lease grant: answer without a lease ID");
		return ret;
	}
	*id = got_id;
	if (granted_ttl)
		*granted_ttl = ttl;
	return 0;
}

int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ttl_s)
{
	json_object *req = json_object_new_object(), *resp, *result;
	int ret = req ? json_add_i64(req, "ID", id) : -ENOMEM;
	if (!ret)
		ret = call(c, "lease keepalive", "/v3/lease/keepalive", req,
			   CALL_IDEMPOTENT | CALL_STREAM, &resp);
	json_object_put(req);
	if (ret)
		return ret;
	int64_t ttl = 0;
	/* a streaming call: its one answer is wrapped in "result" */
	if (!json_object_object_get_ex(resp, "result", &result) || !result)
		ret = -EPROTO;
	else
		ret = json_i64(result, "TTL", &ttl);
	json_object_put(resp);
	if (ret) {
		set_error(c, "etcd lease keepalive: answer without a result");
		return ret;
	}
	if (ttl <= 0) {
		set_error(c,
			  "etcd lease keepalive: lease %" PRId64 " not found (expired or revoked)",
			  id);
		return -ENOENT;
	}
	if (ttl_s)
		*ttl_s = ttl;
	return 0;
}

int etcd_lease_revoke(struct etcd_client *c, int64_t id)
{
	json_object *req = json_object_new_object(), *resp;
	int ret = req ? json_add_i64(req, "ID", id) : -ENOMEM;
	if (!ret)
		ret = call(c, "lease revoke", "/v3/lease/revoke", req, CALL_WRITE, &resp);
	json_object_put(req);
	if (!ret)
		json_object_put(resp);
	return ret;
}

/*
 * Watches. A watch is idle (no easy handle, waiting for retry_at_ms),
 * streaming (easy handle in the multi), or finished (CANCELED delivered).
 */

/* watch_write -- curl write callback of a stream: buffer the bytes */
static size_t watch_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct etcd_watch *w = userdata;
	return buf_append(&w->in, ptr, size * nmemb, ETCD_MAX_STREAM_LINE);
}

/* watch_drop_stream -- remove the easy handle, forget buffered bytes */
static void watch_drop_stream(struct etcd_watch *w)
{
	if (w->easy) {
		curl_multi_remove_handle(w->c->multi, w->easy);
		curl_easy_cleanup(w->easy);
		w->easy = NULL;
	}
	w->in.len = 0;
	w->in.overflow = false;
	w->created = false;
	w->restart = false;
}

static void watch_free(struct etcd_watch *w)
{
	watch_drop_stream(w);
	free(w->key);
	free(w->range_end);
	free(w->body);
	free(w->in.data);
	free(w);
}

/* watch_deliver -- call the watch's function unless it was cancelled meanwhile */
static void watch_deliver(struct etcd_watch *w, const struct etcd_watch_update *u)
{
	if (!w->dead)
		w->fn(w->arg, u);
}

/* watch_lost -- the stream broke: tell the owner, try again after the backoff */
static void watch_lost(struct etcd_watch *w, int status, const char *msg)
{
	struct etcd_client *c = w->c;
	unsigned ep = w->endpoint;
	bool was_up = w->created;
	watch_drop_stream(w);
	if (!was_up && c->cur == ep)
		endpoint_failed(c, ep); /* never got a stream from it: try the next one */
	LOG_INFO("etcd watch: stream on %s lost (%s); again from revision %" PRId64 " in %u ms",
		 c->ep[ep].base, msg, w->next_rev, w->backoff_ms);
	w->retry_at_ms = now_ms() + w->backoff_ms;
	if (w->backoff_ms < 8 * c->opts.watch_retry_ms)
		w->backoff_ms *= 2;
	struct etcd_watch_update u = {.kind = ETCD_WATCH_LOST, .status = status, .message = msg};
	watch_deliver(w, &u);
}

/* watch_events -- parse and deliver the events of one answer; advances next_rev */
static int watch_events(struct etcd_watch *w, json_object *events, int64_t revision)
{
	size_t n = json_object_array_length(events);
	struct etcd_event *ev = calloc(n ? n : 1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	size_t got = 0;
	int ret = 0;
	for (size_t i = 0; i < n && !ret; i++) {
		json_object *e = json_object_array_get_idx(events, i), *type, *kv;
		if (!json_object_object_get_ex(e, "kv", &kv) || !kv) {
			ret = -EPROTO;
			break;
		}
		/* "type" is omitted for PUT (the enum's default) */
		const char *t = json_object_object_get_ex(e, "type", &type) && type
				    ? json_object_get_string(type)
				    : "PUT";
		ev[got].type = strcmp(t, "DELETE") == 0 ? ETCD_EVENT_DELETE : ETCD_EVENT_PUT;
		ret = kv_parse(kv, &ev[got].kv);
		if (ret)
			break;
		/* after a resume: nothing below the revision asked for (etcd sends none) */
		if (ev[got].kv.mod_revision < w->next_rev) {
			kv_free(&ev[got].kv);
			continue;
		}
		got++;
	}
	if (!ret && got) {
		w->next_rev = ev[got - 1].kv.mod_revision + 1;
		struct etcd_watch_update u = {
		    .kind = ETCD_WATCH_EVENTS, .events = ev, .count = got, .revision = revision};
		watch_deliver(w, &u);
	}
	for (size_t i = 0; i < got; i++)
		kv_free(&ev[i].kv);
	free(ev);
	return ret;
}

/*
 * watch_line -- one streamed WatchResponse. Returns 0, or < 0 when the
 * stream must be dropped (error, garbage: the caller reports it lost),
 * or 1 when the watch was cancelled by etcd (finished).
 */
static int watch_line(struct etcd_watch *w, const char *line, size_t len, char *msg, size_t msglen)
{
	const char *why = NULL;
	json_object *o = etcd_json_parse_object(line, len, &why), *res, *events;
	if (!o) {
		snprintf(msg, msglen, "garbage in the watch stream (%s)", why);
		return -EPROTO;
	}
	int64_t gcode;
	int ret = error_body(o, msg, msglen, &gcode);
	if (ret) {
		json_object_put(o);
		return ret;
	}
	if (!json_object_object_get_ex(o, "result", &res) || !res ||
	    !json_object_is_type(res, json_type_object)) {
		json_object_put(o);
		snprintf(msg, msglen, "watch answer without a result");
		return -EPROTO;
	}
	int64_t rev, compact;
	ret = header_revision(res, &rev);
	if (!ret)
		ret = json_i64(res, "compact_revision", &compact);
	if (ret) {
		json_object_put(o);
		snprintf(msg, msglen, "watch answer with bad numbers");
		return ret;
	}
	if (json_flag(res, "canceled")) {
		json_object *reason;
		const char *r = json_object_object_get_ex(res, "cancel_reason", &reason) && reason
				    ? json_object_get_string(reason)
				    : "";
		snprintf(msg, msglen, "%s%s",
			 compact ? "the revisions it needs were compacted" : "canceled by etcd",
			 *r ? r : "");
		struct etcd_watch_update u = {.kind = ETCD_WATCH_CANCELED,
					      .revision = rev,
					      .compact_revision = compact,
					      .status = compact ? -ERANGE : -ECANCELED,
					      .message = msg};
		w->finished = true;
		watch_deliver(w, &u);
		json_object_put(o);
		return 1;
	}
	if (json_flag(res, "created")) {
		w->created = true;
		/* "from now" means after this revision: a resume must not skip what follows */
		if (w->next_rev == 0)
			w->next_rev = rev + 1;
		w->backoff_ms = w->c->opts.watch_retry_ms;
		struct etcd_watch_update u = {.kind = ETCD_WATCH_CREATED, .revision = rev};
		watch_deliver(w, &u);
	}
	if (json_object_object_get_ex(res, "events", &events) && events) {
		ret = json_object_is_type(events, json_type_array) ? watch_events(w, events, rev)
								   : -EPROTO;
		if (ret)
			snprintf(msg, msglen, "watch events do not parse (%s)", strerror(-ret));
	}
	json_object_put(o);
	return ret;
}

/* watch_drain -- handle every complete line buffered; 0, < 0 (drop the stream), 1 (finished) */
static int watch_drain(struct etcd_watch *w, char *msg, size_t msglen)
{
	size_t start = 0;
	int ret = 0;
	while (ret == 0 && !w->dead && start < w->in.len) {
		char *nl = memchr(w->in.data + start, '\n', w->in.len - start);
		if (!nl)
			break;
		size_t llen = (size_t)(nl - (w->in.data + start));
		if (llen > 0)
			ret = watch_line(w, w->in.data + start, llen, msg, msglen);
		start += llen + 1;
	}
	if (w->easy && start) {
		memmove(w->in.data, w->in.data + start, w->in.len - start);
		w->in.len -= start;
	}
	return ret;
}

/* watch_connect -- a new stream for @w on the client's current endpoint */
static int watch_connect(struct etcd_watch *w)
{
	struct etcd_client *c = w->c;
	json_object *req = json_object_new_object(), *create = json_object_new_object();
	int ret = req && create ? 0 : -ENOMEM;
	if (!ret)
		ret = json_add_str(create, "key", w->key);
	if (!ret && w->range_end)
		ret = json_add_str(create, "range_end", w->range_end);
	if (!ret && w->next_rev)
		ret = json_add_i64(create, "start_revision", w->next_rev);
	if (!ret && json_object_object_add(req, "create_request", create) == 0)
		create = NULL;
	else
		ret = -ENOMEM;
	free(w->body);
	w->body = NULL;
	if (!ret) {
		const char *s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
		w->body = s ? strdup(s) : NULL;
		ret = w->body ? 0 : -ENOMEM;
	}
	json_object_put(create);
	json_object_put(req);
	if (ret)
		return ret;
	CURL *e = curl_easy_init();
	if (!e)
		return -ENOMEM;
	char url[160];
	w->endpoint = c->cur;
	snprintf(url, sizeof(url), "%s/v3/watch", c->ep[w->endpoint].base);
	easy_common(c, e);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, w->body);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, watch_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(e, CURLOPT_PRIVATE, w);
	if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
		curl_easy_cleanup(e);
		return -ENOMEM;
	}
	w->easy = e;
	w->in.len = 0;
	return 0;
}

int etcd_watch_start(struct etcd_client *c, const char *key, bool prefix, int64_t start_revision,
		     etcd_watch_fn fn, void *arg, struct etcd_watch **out)
{
	if (!key || !fn || start_revision < 0)
		return -EINVAL;
	struct etcd_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->c = c;
	w->fn = fn;
	w->arg = arg;
	w->next_rev = start_revision;
	w->backoff_ms = c->opts.watch_retry_ms;
	w->key = b64_encode(key, strlen(key));
	if (prefix) {
		char *end = malloc(strlen(key) + 1);
		if (end)
			w->range_end = b64_encode(end, prefix_end(key, end));
		free(end);
	}
	if (!w->key || (prefix && !w->range_end)) {
		watch_free(w);
		return -ENOMEM;
	}
	w->next = c->watches;
	c->watches = w;
	*out = w;
	return 0;
}

void etcd_watch_cancel(struct etcd_watch **wp)
{
	struct etcd_watch *w = wp ? *wp : NULL;
	if (!w)
		return;
	*wp = NULL;
	watch_drop_stream(w);
	w->dead = true;
	if (w->c->polling)
		return; /* freed at the end of the poll */
	for (struct etcd_watch **pp = &w->c->watches; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	watch_free(w);
}

int64_t etcd_watch_next_revision(const struct etcd_watch *w)
{
	return w->next_rev;
}

/* poll_start_watches -- connect idle watches whose time has come; the ms until the next is due */
static int64_t poll_start_watches(struct etcd_client *c, int64_t now, int *ret)
{
	int64_t next = INT64_MAX;
	for (struct etcd_watch *w = c->watches; w; w = w->next) {
		if (w->dead || w->finished)
			continue;
		if (w->easy && w->restart)
			watch_lost(w, -ETIMEDOUT, "its endpoint stopped answering calls");
		if (w->easy)
			continue;
		if (w->retry_at_ms <= now) {
			int r = watch_connect(w);
			if (r) {
				*ret = r;
				w->retry_at_ms = now + w->backoff_ms;
			}
		}
		if (!w->easy && w->retry_at_ms - now < next)
			next = w->retry_at_ms - now;
	}
	return next;
}

/* poll_finish -- streams that ended (error, or etcd closed them) */
static void poll_finish(struct etcd_client *c)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct etcd_watch *w = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&w);
		if (!w || w->easy != m->easy_handle)
			continue;
		char msg[384];
		CURLcode rc = m->data.result;
		long status = 0;
		curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
		int r = 0;
		if (!w->in.overflow)
			r = watch_drain(w, msg, sizeof(msg));
		if (r == 1 || w->dead) {
			watch_drop_stream(w);
			continue;
		}
		if (r < 0) {
			watch_lost(w, r, msg);
			continue;
		}
		if (w->in.overflow)
			snprintf(msg, sizeof(msg), "a watch answer longer than %u bytes",
				 ETCD_MAX_STREAM_LINE);
		else if (rc != CURLE_OK)
			snprintf(msg, sizeof(msg), "%s", curl_easy_strerror(rc));
		else
			snprintf(msg, sizeof(msg), "etcd closed the stream (HTTP %ld)", status);
		int status_code = w->in.overflow ? -EPROTO
				  : rc == CURLE_COULDNT_CONNECT || rc == CURLE_OPERATION_TIMEDOUT
				      ? -ENOTCONN
				      : -ECONNRESET;
		watch_lost(w, status_code, msg);
	}
}

int etcd_client_poll(struct etcd_client *c, int timeout_ms)
{
	int ret = 0, running;
	c->polling = true;
	int64_t due = poll_start_watches(c, now_ms(), &ret);
	int wait = timeout_ms < 0 ? 0 : timeout_ms;
	if (due < wait)
		wait = due < 0 ? 0 : (int)due;
	curl_multi_perform(c->multi, &running);
	curl_multi_poll(c->multi, NULL, 0, wait, NULL);
	curl_multi_perform(c->multi, &running);
	for (struct etcd_watch *w = c->watches; w; w = w->next) {
		if (!w->easy || w->dead || w->in.overflow)
			continue;
		char msg[384];
		int r = watch_drain(w, msg, sizeof(msg));
		if (r == 1)
			watch_drop_stream(w);
		else if (r < 0 && !w->dead)
			watch_lost(w, r, msg);
	}
	poll_finish(c);
	c->polling = false;
	for (struct etcd_watch **pp = &c->watches; *pp;) {
		struct etcd_watch *w = *pp;
		if (w->dead) {
			*pp = w->next;
			watch_free(w);
		} else {
			pp = &w->next;
		}
	}
	return ret;
}

void etcd_client_wakeup(struct etcd_client *c)
{
	curl_multi_wakeup(c->multi);
}
