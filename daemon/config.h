/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config.h -- rdaxd settings: command-line flags and the config file
 *
 * Both sources use the same names. The config file has one "key = value"
 * per line (keys are the long flag names without "--"), '#' starts a comment
 * (a whole line, or the rest of a line after whitespace). Flags given on the
 * command line add to the file's list settings (namespace, listen) and
 * override its single-valued ones. One table in config.c names every setting
 * for both; flags are read with getopt_long (so "--name=value" and an
 * unambiguous prefix of a name work too). Sizes follow size.h, listen
 * addresses url.h, the token file token.h.
 *
 * Thread safety: none; used by main() before any thread starts, and by tests.
 */
#ifndef RDAXD_CONFIG_H
#define RDAXD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "log.h"
#include "spin_window.h"
#include "url.h"
#include "persist.h"
#include "tls_server.h"
#include "volume.h"

#define CONFIG_DEFAULT_PORT    7470
#define CONFIG_DEFAULT_LISTEN  "tcp://127.0.0.1:7470"
#define CONFIG_DEFAULT_NS_NAME "default.ns"
#define CONFIG_DEFAULT_NS_SIZE (1ULL << 30)
#define CONFIG_MAX_THREADS     1024
/* Longest --rdma-busy-poll, microseconds (one second). */
#define CONFIG_MAX_BUSY_POLL_US	    1000000
/* --lease-ttl: bounds of the node lease's TTL, in seconds */
#define CONFIG_MIN_LEASE_TTL_S	    2
#define CONFIG_MAX_LEASE_TTL_S	    60
/*
 * --rdma-busy-poll and --replica-busy-poll when not given, or "auto":
 * adaptive polling capped by this host's measured wake-up (wake_cost.h)
 */
#define CONFIG_DEFAULT_BUSY_POLL_US SPIN_WINDOW_CAP_AUTO
#define CONFIG_MAX_NAMESPACES	    256
#define CONFIG_MAX_LISTENS	    64
#define CONFIG_MAX_ADVERTISE	    16
#define CONFIG_DEFAULT_CLUSTER_NAME "default"
/* Connection limits (docs/limits.md). Seconds; 0: none. */
#define CONFIG_DEFAULT_HANDSHAKE_TIMEOUT 10
#define CONFIG_DEFAULT_REQUEST_TIMEOUT	 30
#define CONFIG_DEFAULT_IDLE_TIMEOUT	 0
#define CONFIG_DEFAULT_KEEPALIVE	 60
#define CONFIG_MAX_TIMEOUT		 86400
#define CONFIG_MAX_KEEPALIVE		 32767 /* TCP_KEEPIDLE's limit */
#define CONFIG_DEFAULT_MAX_CONNS	 1024
#define CONFIG_DEFAULT_MAX_CONNS_PEER	 512
#define CONFIG_MAX_CONNS		 (1U << 20)
#define CONFIG_DEFAULT_REPLY_MEMORY	 (256ULL << 20)
/* Room for one error message: "<source>: <flag> '<value>': <reason>". */
#define CONFIG_ERR_MAX 512

/* One --namespace PATH[,size=SIZE][,mode=auto|sim]. */
struct config_namespace {
	char *path;
	uint64_t size; /* 0: the namespace must exist; else create it at this size if missing */
	enum persist_mode mode;
};

/* What a --listen address serves. */
enum config_listen_kind {
	CONFIG_LISTEN_TCP,	/* tcp://HOST:PORT: the rdax protocol */
	CONFIG_LISTEN_NBD,	/* nbd://HOST:PORT: NBD (docs/nbd.md) */
	CONFIG_LISTEN_NBD_UNIX, /* nbd+unix:///PATH[?mode=OCTAL]: NBD on a unix socket */
	CONFIG_LISTEN_RDMA,	/* rdma://ADDR:PORT: the rdax protocol over RDMA (docs/rdma.md) */
};

/* One --listen tcp://HOST:PORT, rdma://ADDR:PORT, nbd://HOST:PORT or nbd+unix:///PATH. */
struct config_listen {
	char *uri;  /* as given */
	char *host; /* without the brackets of an IPv6 literal; NULL for nbd+unix */
	uint16_t port;
	enum config_listen_kind kind;
	char *path;    /* nbd+unix: the socket path; else NULL */
	unsigned mode; /* nbd+unix: file mode of the socket */
};

struct config {
	struct config_namespace *namespaces;
	unsigned nnamespaces;
	struct config_listen *listens;
	unsigned nlistens;
	unsigned threads; /* 0 until config_finish(): the number of CPUs */
	enum log_level log_level;
	char *pidfile;		    /* NULL: none */
	char *token_file;	    /* NULL: clients need no token */
	enum flush_mode flush_mode; /* FLUSH_TRACKED or FLUSH_HAMMER */
	uint32_t max_payload;
	/* spin cap; 0: rdma:// loops sleep at once (rdma_conn.h); SPIN_WINDOW_CAP_AUTO */
	unsigned rdma_busy_poll_us;
	/* spin cap while a replica's answer is awaited; 0: sleep at once (replica_link.h) */
	unsigned replica_busy_poll_us;
	/* the time limits of a connection, seconds (0: none; net/conn.h) */
	unsigned handshake_timeout, request_timeout, idle_timeout;
	unsigned keepalive;		   /* TCP keepalive idle seconds, 0: off */
	unsigned max_connections;	   /* in all, every transport */
	unsigned max_connections_per_peer; /* from one address; <= max_connections */
	uint64_t max_reply_memory;	   /* reply bytes queued on all connections; 0: none */
	char *config_path;		   /* --config, NULL if none */
	char *metrics; /* --metrics http://HOST:PORT (metrics_http.h); NULL: none */

	/* TLS and access (docs/security.md) */
	enum tls_mode tls;    /* --tls off (default), on, require */
	char *tls_cert_dir;   /* --tls-certificates DIR; NULL: no x509 */
	char *tls_psk_file;   /* --tls-psk FILE; NULL: no PSK */
	bool tls_verify_peer; /* --tls-verify-peer */
	char *acl_file;	      /* --acl FILE; NULL: every client has every right */

	/* --cluster etcd://H:P[,H:P...]: join a cluster (docs/cluster.md); NULL: a single node */
	char *cluster;
	char *cluster_name; /* config_finish(): CONFIG_DEFAULT_CLUSTER_NAME if not given */
	char *node_name;    /* config_finish(): the host name if not given */
	char *zone;	    /* NULL: no zone label */
	unsigned lease_ttl_s; /* the node lease's TTL in etcd; 0: the default (5 s) */
	char **advertise;   /* URLs other nodes and clients use; none: the listen ones */
	unsigned nadvertise;
	bool ns_defaulted; /* config_finish() added the default namespace (its directory may need
			      creating) */

	/* persistence testing (docs/persistence-testing.md) */
	char *write_log; /* --write-log DIR: a write log per volume open period; NULL: none */
	uint64_t write_log_max; /* --write-log-max SIZE: bytes per log */
	bool allow_powercut;	/* --allow-powercut: POWERCUT requests (every namespace sim) */

	/* rdaxd --format PATH [--force]: format and exit */
	char *format_path;
	bool force;

	bool help;
	bool version;
};

/* config_init -- empty lists and the default single values */
void config_init(struct config *c);

/* config_free -- release everything config_* allocated; leaves an empty config */
void config_free(struct config *c);

/*
 * config_parse_args -- apply argv (argv[0] is skipped): first the file named
 * by --config (if any), then every flag in order on top of it. Stops early
 * for --help and --version. Does not fill in defaults (config_finish()).
 * On error, @err gets one line naming the flag, the value and the reason.
 * Returns 0 or -EINVAL (also for an unreadable config file).
 */
int config_parse_args(struct config *c, int argc, char *const argv[], char *err, size_t errlen);

/*
 * config_load_file -- apply every "key = value" line of @path. Errors name
 * the file and the line. Returns 0, -EINVAL, or -errno if @path cannot be read.
 */
int config_load_file(struct config *c, const char *path, char *err, size_t errlen);

/*
 * config_load_stream -- what config_load_file() does once the file is open:
 * apply every "key = value" line read from @f, errors naming @name and the
 * line (the config-file fuzzer feeds it from memory). Returns 0, -EINVAL,
 * -EIO (a read error).
 */
int config_load_stream(struct config *c, FILE *f, const char *name, char *err, size_t errlen);

/*
 * config_set -- apply one setting by its long name ("namespace", "threads",
 * ...; '_' is accepted for '-'). @from names the source in errors ("--" for
 * a flag, "FILE:LINE: " for the config file). Returns 0 or -EINVAL.
 */
int config_set(struct config *c, const char *key, const char *value, const char *from, char *err,
	       size_t errlen);

/*
 * config_finish -- fill in what was not given: the default namespace
 * (<datadir>/default.ns, size=1G, mode=auto), the default listen address
 * and the thread count (number of CPUs). Checks the combination of
 * settings (e.g. --force only with --format). Creates nothing on disk.
 * Returns 0 or -EINVAL (@err says why).
 */
int config_finish(struct config *c, char *err, size_t errlen);

/*
 * config_default_datadir -- $RDAX_DATA_DIR, else /var/lib/rdax for root,
 * else $XDG_DATA_HOME/rdax or $HOME/.local/share/rdax. *out is malloc'd.
 * Returns 0, -ENOENT (no HOME for a non-root user), -ENOMEM.
 */
int config_default_datadir(char **out);

/* config_parse_namespace -- "PATH[,size=SIZE][,mode=auto|sim]"; 0 or -EINVAL (@err says why) */
int config_parse_namespace(const char *spec, struct config_namespace *out, char *err,
			   size_t errlen);

/*
 * config_parse_listen -- a listen address by url_parse_listen's rules (url.h):
 * "tcp://HOST:PORT", "rdma://ADDR:PORT" or "nbd://HOST:PORT" (HOST may be
 * [IPv6], PORT 0 picks a free one), or "nbd+unix:///PATH[?mode=OCTAL]" (an
 * absolute socket path, mode default URL_UNIX_MODE).
 * Returns 0, -EINVAL (@err says why), -ENOMEM.
 */
int config_parse_listen(const char *uri, struct config_listen *out, char *err, size_t errlen);

/* config_usage -- the --help text */
void config_usage(FILE *f);

#endif
