/* SPDX-License-Identifier: BSD-3-Clause */
/* config.c -- rdaxd flags and config file */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster_meta.h"
#include "errors.h"
#include "frame.h"
#include "metrics_http.h"
#include "namespace.h"
#include "size.h"
#include "url.h"
#include "write_recorder.h"

/* Every setting, in the order of --help. */
enum config_key {
	KEY_NAMESPACE,
	KEY_LISTEN,
	KEY_THREADS,
	KEY_LOG_LEVEL,
	KEY_PIDFILE,
	KEY_TOKEN_FILE,
	KEY_TLS,
	KEY_TLS_CERTIFICATES,
	KEY_TLS_PSK,
	KEY_TLS_VERIFY_PEER,
	KEY_ACL,
	KEY_FLUSH_MODE,
	KEY_MAX_PAYLOAD,
	KEY_RDMA_BUSY_POLL,
	KEY_REPLICA_BUSY_POLL,
	KEY_HANDSHAKE_TIMEOUT,
	KEY_REQUEST_TIMEOUT,
	KEY_IDLE_TIMEOUT,
	KEY_KEEPALIVE,
	KEY_MAX_CONNECTIONS,
	KEY_MAX_CONNECTIONS_PER_PEER,
	KEY_MAX_REPLY_MEMORY,
	KEY_METRICS,
	KEY_CLUSTER,
	KEY_CLUSTER_NAME,
	KEY_NODE,
	KEY_ADVERTISE,
	KEY_ZONE,
	KEY_LEASE_TTL,
	KEY_WRITE_LOG,
	KEY_WRITE_LOG_MAX,
	KEY_ALLOW_POWERCUT,
	KEY_CONFIG,
	KEY_FORMAT,
	KEY_FORCE,
	KEY_HELP,
	KEY_VERSION,
	KEY_COUNT
};

/*
 * The one table of settings: a setting's name is its long flag and, where
 * IN_FILE is set, its config-file key. getopt_long's option table is built
 * from it (config_parse_args), and so is the config file's lookup.
 */
#define IN_FILE 1 /* a "key = value" of the config file too */
static const struct setting {
	const char *name;
	int has_arg; /* getopt_long's required_argument / no_argument */
	unsigned flags;
} settings[KEY_COUNT] = {
    [KEY_NAMESPACE] = {"namespace", required_argument, IN_FILE},
    [KEY_LISTEN] = {"listen", required_argument, IN_FILE},
    [KEY_THREADS] = {"threads", required_argument, IN_FILE},
    [KEY_LOG_LEVEL] = {"log-level", required_argument, IN_FILE},
    [KEY_PIDFILE] = {"pidfile", required_argument, IN_FILE},
    [KEY_TOKEN_FILE] = {"token-file", required_argument, IN_FILE},
    [KEY_TLS] = {"tls", required_argument, IN_FILE},
    [KEY_TLS_CERTIFICATES] = {"tls-certificates", required_argument, IN_FILE},
    [KEY_TLS_PSK] = {"tls-psk", required_argument, IN_FILE},
    [KEY_TLS_VERIFY_PEER] = {"tls-verify-peer", no_argument, IN_FILE},
    [KEY_ACL] = {"acl", required_argument, IN_FILE},
    [KEY_FLUSH_MODE] = {"flush-mode", required_argument, IN_FILE},
    [KEY_MAX_PAYLOAD] = {"max-payload", required_argument, IN_FILE},
    [KEY_RDMA_BUSY_POLL] = {"rdma-busy-poll", required_argument, IN_FILE},
    [KEY_REPLICA_BUSY_POLL] = {"replica-busy-poll", required_argument, IN_FILE},
    [KEY_HANDSHAKE_TIMEOUT] = {"handshake-timeout", required_argument, IN_FILE},
    [KEY_REQUEST_TIMEOUT] = {"request-timeout", required_argument, IN_FILE},
    [KEY_IDLE_TIMEOUT] = {"idle-timeout", required_argument, IN_FILE},
    [KEY_KEEPALIVE] = {"keepalive", required_argument, IN_FILE},
    [KEY_MAX_CONNECTIONS] = {"max-connections", required_argument, IN_FILE},
    [KEY_MAX_CONNECTIONS_PER_PEER] = {"max-connections-per-peer", required_argument, IN_FILE},
    [KEY_MAX_REPLY_MEMORY] = {"max-reply-memory", required_argument, IN_FILE},
    [KEY_METRICS] = {"metrics", required_argument, IN_FILE},
    [KEY_CLUSTER] = {"cluster", required_argument, IN_FILE},
    [KEY_CLUSTER_NAME] = {"cluster-name", required_argument, IN_FILE},
    [KEY_NODE] = {"node", required_argument, IN_FILE},
    [KEY_ADVERTISE] = {"advertise", required_argument, IN_FILE},
    [KEY_ZONE] = {"zone", required_argument, IN_FILE},
    [KEY_LEASE_TTL] = {"lease-ttl", required_argument, IN_FILE},
    [KEY_WRITE_LOG] = {"write-log", required_argument, IN_FILE},
    [KEY_WRITE_LOG_MAX] = {"write-log-max", required_argument, IN_FILE},
    [KEY_ALLOW_POWERCUT] = {"allow-powercut", no_argument, IN_FILE},
    [KEY_CONFIG] = {"config", required_argument, 0},
    [KEY_FORMAT] = {"format", required_argument, 0},
    [KEY_FORCE] = {"force", no_argument, 0},
    [KEY_HELP] = {"help", no_argument, 0},
    [KEY_VERSION] = {"version", no_argument, 0},
};

/* getopt_long returns OPT_BASE + key for a long option: above every short option's char */
#define OPT_BASE 256

void config_init(struct config *c)
{
	memset(c, 0, sizeof(*c));
	c->log_level = LOG_LEVEL_INFO;
	c->flush_mode = FLUSH_TRACKED;
	c->max_payload = FRAME_DEFAULT_MAX_PAYLOAD;
	c->handshake_timeout = CONFIG_DEFAULT_HANDSHAKE_TIMEOUT;
	c->request_timeout = CONFIG_DEFAULT_REQUEST_TIMEOUT;
	c->idle_timeout = CONFIG_DEFAULT_IDLE_TIMEOUT;
	c->keepalive = CONFIG_DEFAULT_KEEPALIVE;
	c->max_connections = CONFIG_DEFAULT_MAX_CONNS;
	c->max_connections_per_peer = 0; /* config_finish: the default, within max_connections */
	c->max_reply_memory = CONFIG_DEFAULT_REPLY_MEMORY;
	c->write_log_max = WRITE_RECORDER_DEFAULT_MAX;
	c->rdma_busy_poll_us = CONFIG_DEFAULT_BUSY_POLL_US;
	c->replica_busy_poll_us = CONFIG_DEFAULT_BUSY_POLL_US;
}

static void config_namespace_free(struct config_namespace *n)
{
	free(n->path);
	n->path = NULL;
}

static void config_listen_free(struct config_listen *l)
{
	free(l->uri);
	free(l->host);
	free(l->path);
	l->uri = NULL;
	l->host = NULL;
	l->path = NULL;
}

void config_free(struct config *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->nnamespaces; i++)
		config_namespace_free(&c->namespaces[i]);
	for (unsigned i = 0; i < c->nlistens; i++)
		config_listen_free(&c->listens[i]);
	free(c->namespaces);
	free(c->listens);
	free(c->pidfile);
	free(c->token_file);
	free(c->tls_cert_dir);
	free(c->tls_psk_file);
	free(c->acl_file);
	free(c->config_path);
	free(c->metrics);
	free(c->format_path);
	free(c->write_log);
	free(c->cluster);
	free(c->cluster_name);
	free(c->node_name);
	free(c->zone);
	for (unsigned i = 0; i < c->nadvertise; i++)
		free(c->advertise[i]);
	free(c->advertise);
	config_init(c);
}

/* parse_uint -- a decimal number in [min, max]; 0 or -EINVAL */
static int parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end != '\0' || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int config_parse_namespace(const char *spec, struct config_namespace *out, char *err, size_t errlen)
{
	if (!spec || !out)
		return -EINVAL;
	char *copy = strdup(spec);
	if (!copy)
		return -ENOMEM;
	struct config_namespace ns = {.mode = PERSIST_AUTO};
	int ret = -EINVAL;
	char *save = NULL;
	char *path = strtok_r(copy, ",", &save);
	if (!path || spec[0] == ',') {
		rdax_seterr(err, errlen, "'%s': no path (PATH[,size=SIZE][,mode=auto|sim])", spec);
		goto err_free_copy;
	}
	for (char *opt = strtok_r(NULL, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		if (strncmp(opt, "size=", 5) == 0) {
			int r = size_parse(opt + 5, &ns.size);
			if (r == 0 && ns.size == 0)
				r = -EINVAL;
			if (r) {
				char hint[128];
				rdax_seterr(err, errlen, "'%s': size '%s' is not a size (%s)", spec,
					    opt + 5, size_syntax_hint(opt + 5, hint, sizeof(hint)));
				goto err_free_copy;
			}
			if (ns.size < NS_MIN_SIZE) {
				char have[SIZE_FORMAT_MAX], min[SIZE_FORMAT_MAX];
				rdax_seterr(err, errlen, "'%s': size %s is below the minimum %s",
					    spec, size_format(ns.size, have, sizeof(have)),
					    size_format(NS_MIN_SIZE, min, sizeof(min)));
				goto err_free_copy;
			}
		} else if (strncmp(opt, "mode=", 5) == 0) {
			if (persist_mode_parse(opt + 5, &ns.mode)) {
				rdax_seterr(err, errlen, "'%s': mode '%s' is not auto or sim", spec,
					    opt + 5);
				goto err_free_copy;
			}
		} else {
			rdax_seterr(err, errlen,
				    "'%s': unknown option '%s' (size=SIZE, mode=auto|sim)", spec,
				    opt);
			goto err_free_copy;
		}
	}
	ns.path = strdup(path);
	if (!ns.path) {
		ret = -ENOMEM;
		goto err_free_copy;
	}
	free(copy);
	*out = ns;
	return 0;

err_free_copy:
	free(copy);
	return ret;
}

/* listen_kinds -- what each URL scheme serves */
static enum config_listen_kind listen_kind(enum url_scheme scheme)
{
	switch (scheme) {
	case URL_RDMA:
		return CONFIG_LISTEN_RDMA;
	case URL_NBD:
		return CONFIG_LISTEN_NBD;
	case URL_NBD_UNIX:
		return CONFIG_LISTEN_NBD_UNIX;
	case URL_TCP:
	default:
		return CONFIG_LISTEN_TCP;
	}
}

int config_parse_listen(const char *uri, struct config_listen *out, char *err, size_t errlen)
{
	if (!uri || !out)
		return -EINVAL;
	struct url u;
	int ret = url_parse_listen(uri, &u, err, errlen);
	if (ret)
		return ret;
	struct config_listen l = {.port = u.port, .kind = listen_kind(u.scheme), .mode = u.mode};
	l.uri = strdup(uri);
	if (u.scheme == URL_NBD_UNIX)
		l.path = strdup(u.path);
	else
		l.host = strdup(u.host);
	if (!l.uri || (!l.path && !l.host)) {
		config_listen_free(&l);
		return -ENOMEM;
	}
	*out = l;
	return 0;
}

/*
 * parse_flag_bool -- a flag's value: "" (the flag given on the command line),
 * yes/true/1 or no/false/0 (the config file). Returns 0 or -EINVAL.
 */
static int parse_flag_bool(const char *value, bool *out)
{
	static const char *const yes[] = {"", "yes", "true", "1"}, *const no[] = {"no", "false", "0"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (strcmp(value, yes[i]) == 0)
			return *out = true, 0;
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (strcmp(value, no[i]) == 0)
			return *out = false, 0;
	return -EINVAL;
}

/* replace_string -- *dst = strdup(value), freeing the old one; 0 or -ENOMEM */
static int replace_string(char **dst, const char *value)
{
	char *s = strdup(value);
	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

/* key_lookup -- the setting with a value named @key ('_' accepted for '-'), or KEY_COUNT */
static enum config_key key_lookup(const char *key)
{
	char norm[32];
	size_t n = strlen(key);
	if (n == 0 || n >= sizeof(norm))
		return KEY_COUNT;
	for (size_t i = 0; i <= n; i++)
		norm[i] = key[i] == '_' ? '-' : key[i];
	for (unsigned k = 0; k < KEY_COUNT; k++) {
		/* flags without a value (--force) are no keys, unless they are file keys too */
		if ((settings[k].has_arg == required_argument || (settings[k].flags & IN_FILE)) &&
		    strcmp(norm, settings[k].name) == 0)
			return (enum config_key)k;
	}
	return KEY_COUNT;
}

/* apply_key -- one setting; @from prefixes the key in errors ("--" or "FILE:LINE: ") */
static int apply_key(struct config *c, enum config_key key, const char *value, const char *from,
		     char *err, size_t errlen)
{
	char why[CONFIG_ERR_MAX];
	const char *name = settings[key].name;
	unsigned long n;
	uint64_t size;
	int ret;

	why[0] = '\0';
	switch (key) {
	case KEY_NAMESPACE: {
		if (c->nnamespaces >= CONFIG_MAX_NAMESPACES) {
			rdax_seterr(err, errlen, "%s%s: more than %d namespaces", from, name,
				    CONFIG_MAX_NAMESPACES);
			return -EINVAL;
		}
		struct config_namespace ns;
		ret = config_parse_namespace(value, &ns, why, sizeof(why));
		if (ret)
			goto err_why;
		struct config_namespace *a =
		    realloc(c->namespaces, (c->nnamespaces + 1) * sizeof(*a));
		if (!a) {
			config_namespace_free(&ns);
			return -ENOMEM;
		}
		c->namespaces = a;
		c->namespaces[c->nnamespaces++] = ns;
		return 0;
	}
	case KEY_LISTEN: {
		if (c->nlistens >= CONFIG_MAX_LISTENS) {
			rdax_seterr(err, errlen, "%s%s: more than %d listen addresses", from, name,
				    CONFIG_MAX_LISTENS);
			return -EINVAL;
		}
		struct config_listen l;
		ret = config_parse_listen(value, &l, why, sizeof(why));
		if (ret)
			goto err_why;
		struct config_listen *a = realloc(c->listens, (c->nlistens + 1) * sizeof(*a));
		if (!a) {
			config_listen_free(&l);
			return -ENOMEM;
		}
		c->listens = a;
		c->listens[c->nlistens++] = l;
		return 0;
	}
	case KEY_THREADS:
		if (parse_uint(value, 1, CONFIG_MAX_THREADS, &n)) {
			rdax_seterr(err, errlen, "%s%s '%s': not a number from 1 to %d", from, name,
				    value, CONFIG_MAX_THREADS);
			return -EINVAL;
		}
		c->threads = (unsigned)n;
		return 0;
	case KEY_RDMA_BUSY_POLL:
	case KEY_REPLICA_BUSY_POLL:
		if (strcmp(value, "auto") == 0) {
			n = CONFIG_DEFAULT_BUSY_POLL_US;
		} else if (parse_uint(value, 0, CONFIG_MAX_BUSY_POLL_US, &n)) {
			rdax_seterr(err, errlen,
				    "%s%s '%s': not 'auto' nor a number of microseconds from 0 to %d",
				    from, name, value, CONFIG_MAX_BUSY_POLL_US);
			return -EINVAL;
		}
		if (key == KEY_RDMA_BUSY_POLL)
			c->rdma_busy_poll_us = (unsigned)n;
		else
			c->replica_busy_poll_us = (unsigned)n;
		return 0;
	case KEY_HANDSHAKE_TIMEOUT:
	case KEY_REQUEST_TIMEOUT:
	case KEY_IDLE_TIMEOUT:
		if (parse_uint(value, 0, CONFIG_MAX_TIMEOUT, &n)) {
			rdax_seterr(err, errlen,
				    "%s%s '%s': not a number of seconds from 0 (none) to %d", from,
				    name, value, CONFIG_MAX_TIMEOUT);
			return -EINVAL;
		}
		*(key == KEY_HANDSHAKE_TIMEOUT ? &c->handshake_timeout
		  : key == KEY_REQUEST_TIMEOUT ? &c->request_timeout
					       : &c->idle_timeout) = (unsigned)n;
		return 0;
	case KEY_KEEPALIVE:
		if (parse_uint(value, 0, CONFIG_MAX_KEEPALIVE, &n)) {
			rdax_seterr(err, errlen,
				    "%s%s '%s': not a number of seconds from 0 (off) to %d", from,
				    name, value, CONFIG_MAX_KEEPALIVE);
			return -EINVAL;
		}
		c->keepalive = (unsigned)n;
		return 0;
	case KEY_MAX_CONNECTIONS:
	case KEY_MAX_CONNECTIONS_PER_PEER:
		if (parse_uint(value, 1, CONFIG_MAX_CONNS, &n)) {
			rdax_seterr(err, errlen, "%s%s '%s': not a number from 1 to %u", from, name,
				    value, CONFIG_MAX_CONNS);
			return -EINVAL;
		}
		*(key == KEY_MAX_CONNECTIONS ? &c->max_connections : &c->max_connections_per_peer) =
		    (unsigned)n;
		return 0;
	case KEY_MAX_REPLY_MEMORY:
		ret = size_parse(value, &size);
		if (ret || (size && size < (1U << 20))) {
			rdax_seterr(err, errlen, "%s%s '%s': not 0 (none) or a size of 1M or more",
				    from, name, value);
			return -EINVAL;
		}
		c->max_reply_memory = size;
		return 0;
	case KEY_LEASE_TTL:
		if (parse_uint(value, CONFIG_MIN_LEASE_TTL_S, CONFIG_MAX_LEASE_TTL_S, &n)) {
			rdax_seterr(err, errlen, "%s%s '%s': not a number of seconds from %d to %d",
				    from, name, value, CONFIG_MIN_LEASE_TTL_S,
				    CONFIG_MAX_LEASE_TTL_S);
			return -EINVAL;
		}
		c->lease_ttl_s = (unsigned)n;
		return 0;
	case KEY_LOG_LEVEL:
		if (log_level_parse(value, &c->log_level)) {
			rdax_seterr(err, errlen, "%s%s '%s': not one of error, warn, info, debug",
				    from, name, value);
			return -EINVAL;
		}
		return 0;
	case KEY_FLUSH_MODE:
		if (strcmp(value, "tracked") == 0) {
			c->flush_mode = FLUSH_TRACKED;
		} else if (strcmp(value, "hammer") == 0) {
			c->flush_mode = FLUSH_HAMMER;
		} else {
			rdax_seterr(err, errlen, "%s%s '%s': not tracked or hammer", from, name,
				    value);
			return -EINVAL;
		}
		return 0;
	case KEY_MAX_PAYLOAD:
		ret = size_parse(value, &size);
		if (ret || size < (1U << 20) || size > FRAME_MAX_PAYLOAD_LIMIT) {
			rdax_seterr(err, errlen, "%s%s '%s': not a size from 1M to %uM", from, name,
				    value, FRAME_MAX_PAYLOAD_LIMIT >> 20);
			return -EINVAL;
		}
		c->max_payload = (uint32_t)size;
		return 0;
	case KEY_METRICS:
		ret = metrics_http_parse(value, why, sizeof(why));
		if (ret)
			goto err_why;
		return replace_string(&c->metrics, value);
	case KEY_CLUSTER:
		if (strncmp(value, "etcd://", 7) != 0 || value[7] == '\0') {
			rdax_seterr(err, errlen, "%s%s '%s': not etcd://HOST:PORT[,HOST:PORT...]",
				    from, name, value);
			return -EINVAL;
		}
		return replace_string(&c->cluster, value);
	case KEY_CLUSTER_NAME:
	case KEY_NODE:
	case KEY_ZONE:
		if (!cluster_name_valid(value)) {
			rdax_seterr(err, errlen,
				    "%s%s '%s': not 1 to %d characters of A-Z a-z 0-9 . _ -", from,
				    name, value, CLUSTER_NAME_MAX);
			return -EINVAL;
		}
		return replace_string(key == KEY_CLUSTER_NAME ? &c->cluster_name
				      : key == KEY_NODE	      ? &c->node_name
							      : &c->zone,
				      value);
	case KEY_ADVERTISE: {
		struct url u;
		if (c->nadvertise >= CONFIG_MAX_ADVERTISE) {
			rdax_seterr(err, errlen, "%s%s: more than %d addresses", from, name,
				    CONFIG_MAX_ADVERTISE);
			return -EINVAL;
		}
		ret = url_parse(value, &u, why, sizeof(why));
		if (ret == 0 && (u.scheme == URL_NBD_UNIX || u.port == 0)) {
			snprintf(why, sizeof(why), "'%s': not tcp://, rdma:// or nbd://HOST:PORT",
				 value);
			ret = -EINVAL;
		}
		if (ret)
			goto err_why;
		char **a = realloc(c->advertise, (c->nadvertise + 1) * sizeof(*a));
		if (!a)
			return -ENOMEM;
		c->advertise = a;
		if (!(a[c->nadvertise] = strdup(value)))
			return -ENOMEM;
		c->nadvertise++;
		return 0;
	}
	case KEY_TLS:
		if (strcmp(value, "off") == 0)
			c->tls = TLS_OFF;
		else if (strcmp(value, "on") == 0)
			c->tls = TLS_ON;
		else if (strcmp(value, "require") == 0)
			c->tls = TLS_REQUIRE;
		else {
			rdax_seterr(err, errlen, "%s%s '%s': not off, on or require", from, name,
				    value);
			return -EINVAL;
		}
		return 0;
	case KEY_WRITE_LOG_MAX:
		ret = size_parse(value, &size);
		if (ret || size < WRITE_RECORDER_MIN_MAX) {
			char hint[128];
			rdax_seterr(err, errlen, "%s%s '%s': not a size of at least %lluK (%s)",
				    from, name, value, WRITE_RECORDER_MIN_MAX >> 10,
				    ret ? size_syntax_hint(value, hint, sizeof(hint))
					: "too small");
			return -EINVAL;
		}
		c->write_log_max = size;
		return 0;
	case KEY_TLS_VERIFY_PEER:
	case KEY_ALLOW_POWERCUT:
		/* a flag on the command line (value ""), a boolean in the file */
		if (parse_flag_bool(value, key == KEY_TLS_VERIFY_PEER ? &c->tls_verify_peer
								      : &c->allow_powercut)) {
			rdax_seterr(err, errlen, "%s%s '%s': not yes or no (true or false)", from,
				    name, value);
			return -EINVAL;
		}
		return 0;
	case KEY_PIDFILE:
	case KEY_TOKEN_FILE:
	case KEY_TLS_CERTIFICATES:
	case KEY_TLS_PSK:
	case KEY_ACL:
	case KEY_CONFIG:
	case KEY_FORMAT:
	case KEY_WRITE_LOG:
		if (*value == '\0') {
			rdax_seterr(err, errlen, "%s%s: empty path", from, name);
			return -EINVAL;
		}
		return replace_string(key == KEY_PIDFILE	    ? &c->pidfile
				      : key == KEY_TOKEN_FILE	    ? &c->token_file
				      : key == KEY_TLS_CERTIFICATES ? &c->tls_cert_dir
				      : key == KEY_TLS_PSK	    ? &c->tls_psk_file
				      : key == KEY_ACL		    ? &c->acl_file
				      : key == KEY_CONFIG	    ? &c->config_path
				      : key == KEY_WRITE_LOG	    ? &c->write_log
								    : &c->format_path,
				      value);
	case KEY_FORCE:
		c->force = true;
		return 0;
	case KEY_HELP:
		c->help = true;
		return 0;
	case KEY_VERSION:
		c->version = true;
		return 0;
	case KEY_COUNT:
		break;
	}
	return -EINVAL;

err_why:
	if (ret == -EINVAL)
		rdax_seterr(err, errlen, "%s%s %s", from, name, why);
	return ret;
}

int config_set(struct config *c, const char *key, const char *value, const char *from, char *err,
	       size_t errlen)
{
	if (!c || !key || !value || !from)
		return -EINVAL;
	enum config_key k = key_lookup(key);
	if (k == KEY_COUNT) {
		rdax_seterr(err, errlen, "%sunknown setting '%s'", from, key);
		return -EINVAL;
	}
	return apply_key(c, k, value, from, err, errlen);
}

/* trim -- strip leading and trailing white space in place */
static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* strip_comment -- cut at a '#' that starts the line or follows white space */
static void strip_comment(char *s)
{
	for (char *p = s; *p; p++) {
		if (*p == '#' && (p == s || isspace((unsigned char)p[-1]))) {
			*p = '\0';
			return;
		}
	}
}

int config_load_stream(struct config *c, FILE *f, const char *name, char *err, size_t errlen)
{
	if (!c || !f || !name)
		return -EINVAL;
	char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	int ret = 0;
	while (getline(&line, &cap, f) >= 0) {
		lineno++;
		strip_comment(line);
		char *s = trim(line);
		if (*s == '\0')
			continue;
		char from[CONFIG_ERR_MAX / 2];
		snprintf(from, sizeof(from), "%s:%u: ", name, lineno);
		char *eq = strchr(s, '=');
		if (!eq) {
			rdax_seterr(err, errlen, "%sexpected 'key = value', got '%s'", from, s);
			ret = -EINVAL;
			break;
		}
		*eq = '\0';
		char *key = trim(s), *value = trim(eq + 1);
		enum config_key k = key_lookup(key);
		if (k == KEY_COUNT || !(settings[k].flags & IN_FILE)) {
			rdax_seterr(err, errlen, "%sunknown setting '%s'", from, key);
			ret = -EINVAL;
			break;
		}
		if (*value == '\0') {
			rdax_seterr(err, errlen, "%s%s: no value", from, key);
			ret = -EINVAL;
			break;
		}
		ret = apply_key(c, k, value, from, err, errlen);
		if (ret)
			break;
	}
	if (ret == 0 && ferror(f)) {
		ret = -EIO;
		rdax_seterr(err, errlen, "config file %s: read error", name);
	}
	free(line);
	return ret;
}

int config_load_file(struct config *c, const char *path, char *err, size_t errlen)
{
	if (!c || !path)
		return -EINVAL;
	FILE *f = fopen(path, "re");
	if (!f) {
		int ret = -errno;
		rdax_seterr(err, errlen, "config file %s: %s", path, strerror(errno));
		return ret;
	}
	int ret = config_load_stream(c, f, path, err, errlen);
	fclose(f);
	return ret;
}

/* bad_option -- the message for getopt_long's '?' or ':' at argv[optind - 1] */
static int bad_option(int opt, char *const argv[], char *err, size_t errlen)
{
	if (opt == ':')
		rdax_seterr(err, errlen, "--%s needs a value", settings[optopt - OPT_BASE].name);
	else if (optopt >= OPT_BASE)
		rdax_seterr(err, errlen, "--%s takes no value", settings[optopt - OPT_BASE].name);
	else if (optopt)
		rdax_seterr(err, errlen, "unknown option '-%c'", optopt);
	else /* an unknown or ambiguous long option, possibly with "=VALUE" */
		rdax_seterr(err, errlen, "unknown option '%.*s'",
			    (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
	return -EINVAL;
}

/*
 * walk_args -- one getopt_long pass over argv. Pass 1 (@apply false) finds
 * --config, --help and --version and checks the flag syntax; pass 2 applies
 * everything except --config. Options stop at the first non-option ('+'),
 * which is an error: rdaxd takes no operands.
 */
static int walk_args(struct config *c, int argc, char *const argv[], bool apply, char *err,
		     size_t errlen)
{
	struct option longopts[KEY_COUNT + 1];
	for (unsigned k = 0; k < KEY_COUNT; k++)
		longopts[k] =
		    (struct option){settings[k].name, settings[k].has_arg, NULL, OPT_BASE + (int)k};
	longopts[KEY_COUNT] = (struct option){NULL, 0, NULL, 0};
	optind = 0; /* glibc: 0 starts a fresh scan of a new argv */
	opterr = 0; /* messages are ours, in @err */
	int opt;
	while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		if (opt == '?' || opt == ':')
			return bad_option(opt, argv, err, errlen);
		enum config_key k = opt == 'h' ? KEY_HELP : (enum config_key)(opt - OPT_BASE);
		int ret = 0;
		if (!apply && (k == KEY_CONFIG || k == KEY_HELP || k == KEY_VERSION))
			ret = apply_key(c, k, optarg ? optarg : "", "--", err, errlen);
		else if (apply && k != KEY_CONFIG)
			ret = apply_key(c, k, optarg ? optarg : "", "--", err, errlen);
		if (ret)
			return ret;
	}
	if (optind < argc) {
		rdax_seterr(err, errlen, "unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

int config_parse_args(struct config *c, int argc, char *const argv[], char *err, size_t errlen)
{
	if (!c || argc < 0 || (argc > 0 && !argv))
		return -EINVAL;
	int ret = walk_args(c, argc, argv, false, err, errlen);
	if (ret || c->help || c->version)
		return ret;
	if (c->config_path) {
		ret = config_load_file(c, c->config_path, err, errlen);
		if (ret)
			return -EINVAL;
	}
	return walk_args(c, argc, argv, true, err, errlen);
}

int config_default_datadir(char **out)
{
	if (!out)
		return -EINVAL;
	const char *env = getenv("RDAX_DATA_DIR");
	char *dir = NULL;
	if (env && *env) {
		dir = strdup(env);
	} else if (geteuid() == 0) {
		dir = strdup("/var/lib/rdax");
	} else {
		const char *xdg = getenv("XDG_DATA_HOME");
		const char *home = getenv("HOME");
		if (xdg && *xdg) {
			if (asprintf(&dir, "%s/rdax", xdg) < 0)
				dir = NULL;
		} else if (home && *home) {
			if (asprintf(&dir, "%s/.local/share/rdax", home) < 0)
				dir = NULL;
		} else {
			return -ENOENT;
		}
	}
	if (!dir)
		return -ENOMEM;
	*out = dir;
	return 0;
}

/*
 * config_finish_cluster -- the cluster settings need --cluster; fill in the
 * cluster name and the node name (the host name, which must then be a valid
 * node name)
 */
static int config_finish_cluster(struct config *c, char *err, size_t errlen)
{
	if (!c->cluster) {
		const char *alone = c->cluster_name  ? "--cluster-name"
				    : c->node_name   ? "--node"
				    : c->zone	     ? "--zone"
				    : c->nadvertise  ? "--advertise"
				    : c->lease_ttl_s ? "--lease-ttl"
				    : c->replica_busy_poll_us != CONFIG_DEFAULT_BUSY_POLL_US
					? "--replica-busy-poll"
					: NULL;
		if (alone) {
			rdax_seterr(err, errlen, "%s only goes with --cluster etcd://HOST:PORT",
				    alone);
			return -EINVAL;
		}
		return 0;
	}
	if (!c->cluster_name && replace_string(&c->cluster_name, CONFIG_DEFAULT_CLUSTER_NAME))
		return -ENOMEM;
	if (!c->node_name) {
		char host[256];
		if (gethostname(host, sizeof(host)) < 0)
			host[0] = '\0';
		host[sizeof(host) - 1] = '\0';
		host[strcspn(host, ".")] = '\0'; /* the short name */
		if (!cluster_name_valid(host)) {
			rdax_seterr(err, errlen,
				    "the host name '%s' is not a node name (1 to %d characters of "
				    "A-Z a-z 0-9 . _ -): give --node NAME",
				    host, CLUSTER_NAME_MAX);
			return -EINVAL;
		}
		if (replace_string(&c->node_name, host))
			return -ENOMEM;
	}
	return 0;
}

int config_finish(struct config *c, char *err, size_t errlen)
{
	if (!c)
		return -EINVAL;
	if (c->format_path) {
		if (c->nnamespaces || c->nlistens || c->threads || c->pidfile || c->token_file ||
		    c->tls || c->tls_cert_dir || c->tls_psk_file || c->tls_verify_peer ||
		    c->acl_file || c->config_path || c->max_payload != FRAME_DEFAULT_MAX_PAYLOAD ||
		    c->flush_mode != FLUSH_TRACKED || c->rdma_busy_poll_us != CONFIG_DEFAULT_BUSY_POLL_US ||
		    c->replica_busy_poll_us != CONFIG_DEFAULT_BUSY_POLL_US || c->metrics || c->cluster ||
		    c->cluster_name || c->node_name || c->zone || c->nadvertise || c->lease_ttl_s ||
		    c->write_log || c->write_log_max != WRITE_RECORDER_DEFAULT_MAX ||
		    c->allow_powercut || c->handshake_timeout != CONFIG_DEFAULT_HANDSHAKE_TIMEOUT ||
		    c->request_timeout != CONFIG_DEFAULT_REQUEST_TIMEOUT ||
		    c->idle_timeout != CONFIG_DEFAULT_IDLE_TIMEOUT ||
		    c->keepalive != CONFIG_DEFAULT_KEEPALIVE ||
		    c->max_connections != CONFIG_DEFAULT_MAX_CONNS || c->max_connections_per_peer ||
		    c->max_reply_memory != CONFIG_DEFAULT_REPLY_MEMORY) {
			rdax_seterr(
			    err, errlen,
			    "--format takes only --force and --log-level (rdaxd --format PATH "
			    "[--force])");
			return -EINVAL;
		}
		return 0;
	}
	if (c->force) {
		rdax_seterr(err, errlen, "--force only goes with --format PATH");
		return -EINVAL;
	}
	if (c->tls == TLS_OFF && (c->tls_cert_dir || c->tls_psk_file || c->tls_verify_peer)) {
		rdax_seterr(err, errlen,
			    "--tls-certificates, --tls-psk and --tls-verify-peer need --tls on or "
			    "--tls require");
		return -EINVAL;
	}
	if (c->tls != TLS_OFF && !c->tls_cert_dir && !c->tls_psk_file) {
		rdax_seterr(err, errlen, "--tls %s needs --tls-certificates DIR or --tls-psk FILE",
			    tls_mode_name(c->tls));
		return -EINVAL;
	}
	if (c->tls_verify_peer && !c->tls_cert_dir) {
		rdax_seterr(err, errlen, "--tls-verify-peer needs --tls-certificates DIR");
		return -EINVAL;
	}
	if (c->allow_powercut && c->cluster) {
		rdax_seterr(err, errlen,
			    "--allow-powercut does not go with --cluster: a power cut is a test of "
			    "one daemon (a cluster's nodes are cut with kill -9, docs/cluster.md)");
		return -EINVAL;
	}
	int cluster_ret = config_finish_cluster(c, err, errlen);
	if (cluster_ret)
		return cluster_ret;
	if (c->max_connections_per_peer > c->max_connections) {
		rdax_seterr(err, errlen,
			    "--max-connections-per-peer %u exceeds --max-connections %u: one "
			    "address cannot hold more than all",
			    c->max_connections_per_peer, c->max_connections);
		return -EINVAL;
	}
	if (c->max_connections_per_peer == 0)
		c->max_connections_per_peer = c->max_connections < CONFIG_DEFAULT_MAX_CONNS_PEER
						  ? c->max_connections
						  : CONFIG_DEFAULT_MAX_CONNS_PEER;
	if (c->write_log_max != WRITE_RECORDER_DEFAULT_MAX && !c->write_log) {
		rdax_seterr(err, errlen, "--write-log-max only goes with --write-log DIR");
		return -EINVAL;
	}
	if (c->threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		c->threads = n < 1 ? 1 : n > CONFIG_MAX_THREADS ? CONFIG_MAX_THREADS : (unsigned)n;
	}
	if (c->nlistens == 0) {
		char why[CONFIG_ERR_MAX];
		c->listens = calloc(1, sizeof(*c->listens));
		if (!c->listens)
			return -ENOMEM;
		int ret =
		    config_parse_listen(CONFIG_DEFAULT_LISTEN, &c->listens[0], why, sizeof(why));
		if (ret)
			return ret;
		c->nlistens = 1;
	}
	if (c->nnamespaces == 0) {
		char *dir;
		int ret = config_default_datadir(&dir);
		if (ret == -ENOENT) {
			rdax_seterr(err, errlen,
				    "no --namespace given and no data directory (set HOME or "
				    "RDAX_DATA_DIR)");
			return -EINVAL;
		}
		if (ret)
			return ret;
		c->namespaces = calloc(1, sizeof(*c->namespaces));
		if (!c->namespaces ||
		    asprintf(&c->namespaces[0].path, "%s/%s", dir, CONFIG_DEFAULT_NS_NAME) < 0) {
			free(dir);
			return -ENOMEM;
		}
		free(dir);
		c->namespaces[0].size = CONFIG_DEFAULT_NS_SIZE;
		c->namespaces[0].mode = PERSIST_AUTO;
		c->nnamespaces = 1;
		c->ns_defaulted = true;
	}
	return 0;
}

void config_usage(FILE *f)
{
	fprintf(f,
		"Usage: rdaxd [OPTION]...\n"
		"       rdaxd --format PATH [--force]\n"
		"Serve volumes carved out of persistent-memory namespaces over TCP.\n"
		"\n"
		"  --namespace PATH[,size=SIZE][,mode=auto|sim]\n"
		"                        serve this namespace (repeatable). With size=, a\n"
		"                        missing PATH is created as a file of SIZE and\n"
		"                        formatted; an existing one is opened as it is.\n"
		"                        mode=sim is the power-fail simulator.\n"
		"  --listen tcp://HOST:PORT  listen here (repeatable; default %s;\n"
		"                        port 0 picks a free port, shown in the ready line)\n"
		"  --listen rdma://ADDR:PORT  the rdax protocol over RDMA (librdmacm; ADDR\n"
		"                        an address of an RDMA device; clients write\n"
		"                        one-sided; namespaces must be devdax or plain\n"
		"                        files, not fsdax files; docs/rdma.md)\n"
		"  --listen nbd://HOST:PORT  export every volume over NBD (export name =\n"
		"                        volume name). NBD has no token: with --token-file\n"
		"                        HOST must be a loopback address (docs/nbd.md)\n"
		"  --listen nbd+unix:///PATH[?mode=OCTAL]  NBD on a unix socket (mode\n"
		"                        default 0600; a stale socket is replaced)\n"
		"  --threads N           event-loop threads (default: number of CPUs)\n"
		"  --log-level LEVEL     error, warn, info (default) or debug\n"
		"  --pidfile PATH        write the daemon's pid here, removed at exit\n"
		"  --token-file PATH     clients must send this file's contents (trailing\n"
		"                        newline stripped) in HELLO\n"
		"  --tls MODE            off (default), on (TLS offered: rdaxs:// clients on\n"
		"                        tcp:// listeners, NBD STARTTLS; plaintext served too)\n"
		"                        or require (plaintext clients refused)\n"
		"  --tls-certificates DIR  x509: DIR/ca-cert.pem, server-cert.pem,\n"
		"                        server-key.pem (the layout of qemu and nbdkit)\n"
		"  --tls-psk FILE        pre-shared keys, psktool's 'username:hexkey' lines;\n"
		"                        the username is the client's identity\n"
		"  --tls-verify-peer     require a client certificate signed by\n"
		"                        DIR/ca-cert.pem; its common name is the identity\n"
		"  --acl FILE            which identities see, read, write, create which\n"
		"                        volumes (docs/security.md); default: all of them\n"
		"  --flush-mode MODE     tracked (default: write back what was written) or\n"
		"                        hammer (write back the whole volume; a baseline)\n"
		"  --max-payload SIZE    largest WRITE/READ per request (1M..%uM, default %uM)\n"
		"  --rdma-busy-poll USEC after a completion, an rdma:// connection's loop\n"
		"                        spins on its completion queue for twice the\n"
		"                        connection's recent gaps, at most USEC, before it\n"
		"                        sleeps again (none while its gaps are longer):\n"
		"                        lower latency for some CPU (default auto: %u\n"
		"                        wake-ups of this host as measured at start, %u to\n"
		"                        %u; 0: sleep at once)\n"
		"  --max-connections N   connections served at once, every transport\n"
		"                        together (default %u; lowered to fit the\n"
		"                        descriptor limit). One more is refused: its first\n"
		"                        request is answered with the reason\n"
		"  --max-connections-per-peer N  connections from one address (default\n"
		"                        %u, at most --max-connections)\n"
		"  --max-reply-memory SIZE  replies queued for clients that do not read\n"
		"                        them, all connections together (default %lluM; 0:\n"
		"                        none beyond each connection's 4M)\n"
		"  --handshake-timeout SECS  a connection must finish its handshake (HELLO,\n"
		"                        NBD option haggling) this soon (default %u; 0: never)\n"
		"  --request-timeout SECS  a request whose bytes stop arriving half way is\n"
		"                        given this long, then the connection ends (default\n"
		"                        %u; 0: never)\n"
		"  --idle-timeout SECS   close a connection with nothing under way that sent\n"
		"                        nothing this long (default %u: never)\n"
		"  --keepalive SECS      TCP keepalive: a silent peer is probed after SECS,\n"
		"                        a dead one is dropped about 2 x SECS after its last\n"
		"                        word (default %u; 0: off)\n"
		"  --metrics http://HOST:PORT  serve Prometheus metrics at /metrics there\n"
		"                        (HOST a loopback or monitoring address; port 0\n"
		"                        picks a free one, shown in the log; default: none;\n"
		"                        docs/metrics.md)\n"
		"  --cluster etcd://HOST:PORT[,HOST:PORT...]  join the cluster whose state\n"
		"                        this etcd keeps: volumes replicated on several\n"
		"                        nodes (docs/cluster.md); without it rdaxd is\n"
		"                        a single node with local volumes only\n"
		"  --cluster-name NAME   the cluster's key prefix in etcd (default %s)\n"
		"  --node NAME           this node's name (default: the short host name)\n"
		"  --advertise URL       where other nodes and clients reach this node:\n"
		"                        tcp://, rdma:// or nbd://HOST:PORT (repeatable;\n"
		"                        default: the --listen addresses, loopback ones\n"
		"                        only if every one is)\n"
		"  --zone LABEL          failure-domain label; placement puts replicas in\n"
		"                        distinct zones first\n"
		"  --lease-ttl SECONDS   the node's lease in etcd: a node silent this long\n"
		"                        is down and its keys go (2 to 60, default 5)\n"
		"  --replica-busy-poll USEC while a primary awaits its replicas' answers\n"
		"                        (a replicated fsync), its loop polls instead of\n"
		"                        sleeping for twice the recent waits, at most USEC\n"
		"                        (default auto, as --rdma-busy-poll; 0: sleep at\n"
		"                        once)\n"
		"  --write-log DIR       record every acknowledged write, discard and fsync\n"
		"                        of each volume, in acknowledgement order, into\n"
		"                        DIR/VOLUME.N.wlog (one log from a volume's first\n"
		"                        open to its last close; DIR created if missing)\n"
		"                        for rdax crash-states (docs/persistence-testing.md)\n"
		"  --write-log-max SIZE  largest write log (default 1G, at least 64K); a full\n"
		"                        log ends with a FULL record, the volume is served\n"
		"                        on, its later requests unrecorded (one error logged)\n"
		"  --allow-powercut      accept power cuts on demand (rdax powercut): every\n"
		"                        connection dropped, everything not written back\n"
		"                        lost, served again as a new incarnation. Every\n"
		"                        namespace must be in mode=sim; not with --cluster\n"
		"  --config PATH         read settings from PATH first: one 'key = value' per\n"
		"                        line, keys as the long options, '#' comments;\n"
		"                        options on the command line add to / override it\n"
		"  --format PATH         write fresh rdax metadata to a devdax device or an\n"
		"                        existing file and exit; refuses one that holds rdax\n"
		"                        data unless --force is given (which destroys it)\n"
		"  --help, --version\n"
		"\n"
		"SIZE is a number of bytes with an optional K, M, G or T suffix, powers of\n"
		"1024 (4K = 4KiB = 4096); KB, MB, ... are refused as ambiguous.\n"
		"Without --namespace: %s in $RDAX_DATA_DIR, else /var/lib/rdax (root),\n"
		"else $XDG_DATA_HOME/rdax or ~/.local/share/rdax, with size=1G,mode=auto.\n"
		"SIGTERM or SIGINT: stop accepting, finish requests in flight, write back\n"
		"everything dirty and exit 0.\n",
		CONFIG_DEFAULT_LISTEN, FRAME_MAX_PAYLOAD_LIMIT >> 20,
		FRAME_DEFAULT_MAX_PAYLOAD >> 20, SPIN_WINDOW_WAKES_PER_CAP, SPIN_WINDOW_DEFAULT_CAP_US,
		SPIN_WINDOW_AUTO_CAP_MAX_US, CONFIG_DEFAULT_MAX_CONNS,
		CONFIG_DEFAULT_MAX_CONNS_PEER, CONFIG_DEFAULT_REPLY_MEMORY >> 20,
		CONFIG_DEFAULT_HANDSHAKE_TIMEOUT, CONFIG_DEFAULT_REQUEST_TIMEOUT,
		CONFIG_DEFAULT_IDLE_TIMEOUT, CONFIG_DEFAULT_KEEPALIVE, CONFIG_DEFAULT_CLUSTER_NAME,
		CONFIG_DEFAULT_NS_NAME);
}
