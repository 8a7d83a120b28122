/* SPDX-License-Identifier: BSD-3-Clause */
/* config.c -- rdaxd flags and config file */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "frame.h"
#include "namespace.h"

/* Keys that take a value; every one is also a long flag. */
enum config_key {
	KEY_NAMESPACE,
	KEY_LISTEN,
	KEY_THREADS,
	KEY_LOG_LEVEL,
	KEY_PIDFILE,
	KEY_TOKEN_FILE,
	KEY_FLUSH_MODE,
	KEY_MAX_PAYLOAD,
	KEY_RDMA_BUSY_POLL,
	KEY_CONFIG, /* flag only */
	KEY_FORMAT, /* flag only */
	KEY_COUNT
};

static const char *const key_names[KEY_COUNT] = {
    [KEY_NAMESPACE] = "namespace",   [KEY_LISTEN] = "listen",
    [KEY_THREADS] = "threads",	     [KEY_LOG_LEVEL] = "log-level",
    [KEY_PIDFILE] = "pidfile",	     [KEY_TOKEN_FILE] = "token-file",
    [KEY_FLUSH_MODE] = "flush-mode", [KEY_MAX_PAYLOAD] = "max-payload",
    [KEY_CONFIG] = "config",	     [KEY_FORMAT] = "format",
    [KEY_RDMA_BUSY_POLL] = "rdma-busy-poll",
};

void config_init(struct config *c)
{
	memset(c, 0, sizeof(*c));
	c->log_level = LOG_LEVEL_INFO;
	c->flush_mode = FLUSH_TRACKED;
	c->max_payload = FRAME_DEFAULT_MAX_PAYLOAD;
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
	free(c->config_path);
	free(c->format_path);
	config_init(c);
}

int config_parse_size(const char *s, uint64_t *out)
{
	if (!s || !out || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	unsigned shift = 0;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	if (shift) {
		end++;
		if (strcmp(end, "iB") == 0 || strcmp(end, "ib") == 0)
			end += 2;
	}
	if (*end != '\0')
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
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
			int r = config_parse_size(opt + 5, &ns.size);
			if (r == 0 && ns.size == 0)
				r = -EINVAL;
			if (r) {
				rdax_seterr(
				    err, errlen,
				    "'%s': size '%s' is not a size (a number with an optional "
				    "K/M/G/T suffix)",
				    spec, opt + 5);
				goto err_free_copy;
			}
			if (ns.size < NS_MIN_SIZE) {
				rdax_seterr(err, errlen,
					    "'%s': size %" PRIu64 " is below the minimum %lluM",
					    spec, ns.size, NS_MIN_SIZE >> 20);
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

/* parse_listen_unix -- "nbd+unix:///PATH[?mode=OCTAL]" (@rest: what follows "nbd+unix://") */
static int parse_listen_unix(const char *uri, const char *rest, struct config_listen *out,
			     char *err, size_t errlen)
{
	const char *q = strchr(rest, '?');
	size_t plen = q ? (size_t)(q - rest) : strlen(rest);
	unsigned long mode = CONFIG_NBD_UNIX_MODE;
	if (plen < 2 || rest[0] != '/') {
		rdax_seterr(err, errlen,
			    "'%s': not of the form nbd+unix:///PATH (an absolute path)", uri);
		return -EINVAL;
	}
	/* sun_path holds 108 bytes with the terminating NUL */
	if (plen > 107) {
		rdax_seterr(err, errlen, "'%s': socket path longer than 107 bytes", uri);
		return -EINVAL;
	}
	if (q) {
		const char *m = q + 1;
		char *end = NULL;
		bool ok = strncmp(m, "mode=", 5) == 0 && m[5] >= '0' && m[5] <= '7';
		if (ok) {
			errno = 0;
			mode = strtoul(m + 5, &end, 8);
			ok = errno == 0 && *end == '\0' && mode <= 0777;
		}
		if (!ok) {
			rdax_seterr(
			    err, errlen,
			    "'%s': the only option is ?mode=OCTAL (file mode, e.g. mode=0660)",
			    uri);
			return -EINVAL;
		}
	}
	struct config_listen l = {.kind = CONFIG_LISTEN_NBD_UNIX, .mode = (unsigned)mode};
	l.uri = strdup(uri);
	l.path = strndup(rest, plen);
	if (!l.uri || !l.path) {
		config_listen_free(&l);
		return -ENOMEM;
	}
	*out = l;
	return 0;
}

int config_parse_listen(const char *uri, struct config_listen *out, char *err, size_t errlen)
{
	static const struct {
		const char *scheme;
		enum config_listen_kind kind;
	} schemes[] = {
	    {"tcp://", CONFIG_LISTEN_TCP},
	    {"nbd://", CONFIG_LISTEN_NBD},
	    {"nbd+unix://", CONFIG_LISTEN_NBD_UNIX},
	    {"rdma://", CONFIG_LISTEN_RDMA},
	};
	if (!uri || !out)
		return -EINVAL;
	const char *scheme = NULL, *hp = NULL;
	enum config_listen_kind kind = CONFIG_LISTEN_TCP;
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t n = strlen(schemes[i].scheme);
		if (strncmp(uri, schemes[i].scheme, n) == 0) {
			scheme = schemes[i].scheme;
			kind = schemes[i].kind;
			hp = uri + n;
			break;
		}
	}
	if (!scheme) {
		const char *sep = strstr(uri, "://");
		if (sep)
			rdax_seterr(err, errlen,
				    "'%s': transport '%.*s' is not supported (tcp://, rdma://, "
				    "nbd://, nbd+unix://)",
				    uri, (int)(sep - uri), uri);
		else
			rdax_seterr(err, errlen, "'%s': not of the form tcp://HOST:PORT", uri);
		return -EINVAL;
	}
	if (kind == CONFIG_LISTEN_NBD_UNIX)
		return parse_listen_unix(uri, hp, out, err, errlen);
	const char *host_start = hp, *host_end, *port;
	if (*hp == '[') {
		host_start = hp + 1;
		host_end = strchr(host_start, ']');
		if (!host_end || host_end[1] != ':') {
			rdax_seterr(err, errlen, "'%s': not of the form %s[IPV6]:PORT", uri,
				    scheme);
			return -EINVAL;
		}
		port = host_end + 2;
	} else {
		host_end = strrchr(hp, ':');
		if (!host_end) {
			rdax_seterr(err, errlen, "'%s': no port (%sHOST:PORT)", uri, scheme);
			return -EINVAL;
		}
		if (memchr(hp, ':', (size_t)(host_end - hp))) {
			rdax_seterr(err, errlen,
				    "'%s': put an IPv6 address in brackets: %s[ADDR]:PORT", uri,
				    scheme);
			return -EINVAL;
		}
		port = host_end + 1;
	}
	if (host_end == host_start) {
		rdax_seterr(err, errlen, "'%s': no host (%sHOST:PORT, e.g. %s0.0.0.0:%d)", uri,
			    scheme, scheme,
			    kind == CONFIG_LISTEN_NBD ? 10809 : CONFIG_DEFAULT_PORT);
		return -EINVAL;
	}
	unsigned long p;
	if (parse_uint(port, 0, 65535, &p)) {
		rdax_seterr(err, errlen, "'%s': port '%s' is not a number from 0 to 65535", uri,
			    port);
		return -EINVAL;
	}
	struct config_listen l = {.port = (uint16_t)p, .kind = kind};
	l.uri = strdup(uri);
	l.host = strndup(host_start, (size_t)(host_end - host_start));
	if (!l.uri || !l.host) {
		config_listen_free(&l);
		return -ENOMEM;
	}
	*out = l;
	return 0;
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

/* key_lookup -- the key named @key ('_' accepted for '-'), or KEY_COUNT */
static enum config_key key_lookup(const char *key)
{
	char norm[32];
	size_t n = strlen(key);
	if (n == 0 || n >= sizeof(norm))
		return KEY_COUNT;
	for (size_t i = 0; i <= n; i++)
		norm[i] = key[i] == '_' ? '-' : key[i];
	for (unsigned k = 0; k < KEY_COUNT; k++) {
		if (strcmp(norm, key_names[k]) == 0)
			return (enum config_key)k;
	}
	return KEY_COUNT;
}

/* apply_key -- one setting; @from prefixes the key in errors ("--" or "FILE:LINE: ") */
static int apply_key(struct config *c, enum config_key key, const char *value, const char *from,
		     char *err, size_t errlen)
{
	char why[CONFIG_ERR_MAX];
	const char *name = key_names[key];
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
		if (parse_uint(value, 0, CONFIG_MAX_BUSY_POLL_US, &n)) {
			rdax_seterr(err, errlen, "%s%s '%s': not a number of microseconds from 0 to %d",
				    from, name, value, CONFIG_MAX_BUSY_POLL_US);
			return -EINVAL;
		}
		c->rdma_busy_poll_us = (unsigned)n;
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
		ret = config_parse_size(value, &size);
		if (ret || size < (1U << 20) || size > FRAME_MAX_PAYLOAD_LIMIT) {
			rdax_seterr(err, errlen, "%s%s '%s': not a size from 1M to %uM", from, name,
				    value, FRAME_MAX_PAYLOAD_LIMIT >> 20);
			return -EINVAL;
		}
		c->max_payload = (uint32_t)size;
		return 0;
	case KEY_PIDFILE:
	case KEY_TOKEN_FILE:
	case KEY_CONFIG:
	case KEY_FORMAT:
		if (*value == '\0') {
			rdax_seterr(err, errlen, "%s%s: empty path", from, name);
			return -EINVAL;
		}
		return replace_string(key == KEY_PIDFILE      ? &c->pidfile
				      : key == KEY_TOKEN_FILE ? &c->token_file
				      : key == KEY_CONFIG     ? &c->config_path
							      : &c->format_path,
				      value);
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
		snprintf(from, sizeof(from), "%s:%u: ", path, lineno);
		char *eq = strchr(s, '=');
		if (!eq) {
			rdax_seterr(err, errlen, "%sexpected 'key = value', got '%s'", from, s);
			ret = -EINVAL;
			break;
		}
		*eq = '\0';
		char *key = trim(s), *value = trim(eq + 1);
		enum config_key k = key_lookup(key);
		if (k == KEY_COUNT || k == KEY_CONFIG || k == KEY_FORMAT) {
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
		rdax_seterr(err, errlen, "config file %s: read error", path);
	}
	free(line);
	fclose(f);
	return ret;
}

/* flag_takes_value -- the key of a long flag that takes a value, or KEY_COUNT */
static enum config_key flag_key(const char *name, size_t len)
{
	for (unsigned k = 0; k < KEY_COUNT; k++) {
		if (strlen(key_names[k]) == len && strncmp(name, key_names[k], len) == 0)
			return (enum config_key)k;
	}
	return KEY_COUNT;
}

/*
 * walk_args -- one pass over argv. Pass 1 (@apply false) only finds
 * --config, --help and --version and checks the flag syntax; pass 2 applies
 * everything except --config.
 */
static int walk_args(struct config *c, int argc, char *const argv[], bool apply, char *err,
		     size_t errlen)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			c->help = true;
			continue;
		}
		if (strcmp(arg, "--version") == 0) {
			c->version = true;
			continue;
		}
		if (strcmp(arg, "--force") == 0) {
			c->force = true;
			continue;
		}
		if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
			rdax_seterr(err, errlen, "unexpected argument '%s'", arg);
			return -EINVAL;
		}
		const char *name = arg + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		enum config_key k = flag_key(name, len);
		if (k == KEY_COUNT) {
			rdax_seterr(err, errlen, "unknown option '--%.*s'", (int)len, name);
			return -EINVAL;
		}
		const char *value;
		if (eq) {
			value = eq + 1;
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			rdax_seterr(err, errlen, "--%s needs a value", key_names[k]);
			return -EINVAL;
		}
		if (!apply && k == KEY_CONFIG) {
			int ret = replace_string(&c->config_path, value);
			if (ret)
				return ret;
		} else if (apply && k != KEY_CONFIG) {
			int ret = apply_key(c, k, value, "--", err, errlen);
			if (ret)
				return ret;
		}
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

int config_finish(struct config *c, char *err, size_t errlen)
{
	if (!c)
		return -EINVAL;
	if (c->format_path) {
		if (c->nnamespaces || c->nlistens || c->threads || c->pidfile || c->token_file ||
		    c->config_path || c->max_payload != FRAME_DEFAULT_MAX_PAYLOAD ||
		    c->flush_mode != FLUSH_TRACKED || c->rdma_busy_poll_us) {
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

int config_token_load(const char *path, uint8_t **out, size_t *len, char *err, size_t errlen)
{
	if (!path || !out || !len)
		return -EINVAL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int ret = -errno;
		rdax_seterr(err, errlen, "token file %s: %s", path, strerror(errno));
		return ret;
	}
	/* one byte more than allowed, plus "\r\n", tells "too long" from "at the limit" */
	size_t cap = CONFIG_TOKEN_MAX + 3, n = 0;
	uint8_t *buf = malloc(cap);
	int ret = 0;
	if (!buf) {
		ret = -ENOMEM;
		goto err_close;
	}
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			rdax_seterr(err, errlen, "token file %s: %s", path, strerror(errno));
			goto err_free;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n == 0) {
		ret = -EINVAL;
		rdax_seterr(err, errlen, "token file %s is empty", path);
		goto err_free;
	}
	if (n > CONFIG_TOKEN_MAX) {
		ret = -RDAX_E_TOO_BIG;
		rdax_seterr(err, errlen, "token file %s: longer than %d bytes", path,
			    CONFIG_TOKEN_MAX);
		goto err_free;
	}
	close(fd);
	*out = buf;
	*len = n;
	return 0;

err_free:
	free(buf);
err_close:
	close(fd);
	return ret;
}

const char *config_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", bytes);
		return buf;
	}
	double v = (double)bytes / 1024.0;
	unsigned u = 0;
	while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
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
		"  --flush-mode MODE     tracked (default: write back what was written) or\n"
		"                        hammer (write back the whole volume; a baseline)\n"
		"  --max-payload SIZE    largest WRITE/READ per request (1M..%uM, default %uM)\n"
		"  --rdma-busy-poll USEC after a completion, an rdma:// connection's loop\n"
		"                        spins on its completion queue this long before it\n"
		"                        sleeps again: lower latency for a busy CPU\n"
		"                        (default 0: sleep at once)\n"
		"  --config PATH         read settings from PATH first: one 'key = value' per\n"
		"                        line, keys as the long options, '#' comments;\n"
		"                        options on the command line add to / override it\n"
		"  --format PATH         write fresh rdax metadata to a devdax device or an\n"
		"                        existing file and exit; refuses one that holds rdax\n"
		"                        data unless --force is given (which destroys it)\n"
		"  --help, --version\n"
		"\n"
		"SIZE is a number of bytes with an optional K, M, G or T suffix (powers of 1024).\n"
		"Without --namespace: %s in $RDAX_DATA_DIR, else /var/lib/rdax (root),\n"
		"else $XDG_DATA_HOME/rdax or ~/.local/share/rdax, with size=1G,mode=auto.\n"
		"SIGTERM or SIGINT: stop accepting, finish requests in flight, write back\n"
		"everything dirty and exit 0.\n",
		CONFIG_DEFAULT_LISTEN, FRAME_MAX_PAYLOAD_LIMIT >> 20,
		FRAME_DEFAULT_MAX_PAYLOAD >> 20, CONFIG_DEFAULT_NS_NAME);
}
