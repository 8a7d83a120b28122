/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdaxd.c -- the rdax daemon: serve PMEM volumes over TCP, NBD and RDMA
 *
 * Threads:
 *  - main: parses the configuration, opens the namespaces, then runs the
 *    accept loop (libev default loop): the listening sockets, the rdma_cm
 *    listening channel and the SIGTERM/SIGINT watchers. Every other thread
 *    blocks all signals.
 *  - N workers (--threads): one libev loop each; every connection lives on
 *    exactly one of them (assigned round-robin) and is never touched by
 *    another thread.
 *  - the fsync pool (max(2, N) threads): fsyncs and discards, which block
 *    on write-back, fences and per-volume serialisation.
 *  - the metadata pool (3 threads, one kept for quick requests): hello,
 *    volume create/delete/open/close/list/info, connection teardown --
 *    everything that takes namespace locks.
 *  - with --cluster, the cluster thread (etcd) and, on a primary, a thread
 *    per resync while one runs; the replica links run on the workers' loops
 *    (daemon/cluster/replica_link.h). With an NBD listener too, the
 *    forwarding pool (4 threads): look-ups, connects and resume rounds of
 *    the exports forwarded to their primary (daemon/cluster/nbd_forward.h).
 *  - with --metrics: the metrics endpoint's thread (metrics_http.h).
 *  Pools hand results back to the connection's worker with ev_async
 *  (docs/architecture.md, "Threads").
 *
 * Persistence testing (docs/persistence-testing.md): with --write-log the
 * write recorder keeps a log per volume (write_recorder.h); with
 * --allow-powercut a POWERCUT request cuts the power in-process
 * (powercut.h): the cut runs on the main thread, which then serves again.
 *
 * Shutdown (SIGTERM/SIGINT): stop accepting on every listener; every
 * connection of every transport stops reading, its requests in flight
 * (fsyncs included) finish and their replies go out -- one drain for all
 * transports at once, bounded by one CONN_DRAIN_TIMEOUT (net/conn.h); then
 * the pools, the cluster (its replica links) and the workers stop, every
 * namespace is closed (ns_close writes back everything dirty), the pidfile
 * is removed, exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "acl.h"
#include "cluster.h"
#include "config.h"
#include "incarnation.h"
#include "conn.h"
#include "dispatch.h"
#include "errors.h"
#include "faults.h"
#include "frame.h"
#include "fsync_pool.h"
#include "log.h"
#include "listener.h"
#include "metrics_http.h"
#include "namespace.h"
#include "native_conn.h"
#include "nbd_conn.h"
#include "notify.h"
#include "powercut.h"
#include "rdma_listen.h"
#include "size.h"
#include "spin_window.h"
#include "store.h"
#include "tls_server.h"
#include "token.h"
#include "wake_cost.h"
#include "worker.h"
#include "write_recorder.h"

#ifndef RDAX_VERSION
#define RDAX_VERSION "unknown"
#endif

/* Descriptors kept for what is not a connection: namespaces, pools, etcd, logs. */
#define RDAXD_FD_RESERVE 128

/*
 * Metadata requests: two threads for the slow ones (lists, creates that
 * zero, closes that write back), so one slow create does not block all, and
 * one kept for the quick ones (hello, look-ups, opens), so no amount of
 * slow work delays another client's HELLO (fsync_pool.h, "Fairness").
 */
#define RDAXD_META_THREADS	 3
#define RDAXD_META_QUICK_THREADS 1

/*
 * NBD forwarding's blocking steps (nbd_forward.h): an export's etcd look-up
 * and first connect, and each round of a resume (a round is short: the
 * backoff between rounds waits on the loop, not here). Four, so that the
 * connections of several clients resuming at a failover take turns quickly.
 */
#define RDAXD_FORWARD_THREADS 4

static const char *const rdaxd_transports[] = {"tcp", "rdma"};

/* fail -- one error line on stderr (where the log goes too); returns the exit code */
static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rdaxd: %s\n", msg);
	return code;
}

/* mkdir_p -- create @dir and its missing parents with @mode; 0 or -errno */
static int mkdir_p(const char *dir, mode_t mode)
{
	char *copy = strdup(dir);
	if (!copy)
		return -ENOMEM;
	int ret = 0;
	for (char *p = copy + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(copy, mode) < 0 && errno != EEXIST) {
			ret = -errno;
			break;
		}
		*p = saved;
		if (saved == '\0')
			break;
	}
	free(copy);
	return ret;
}

/* run_format -- rdaxd --format PATH [--force] */
static int run_format(const struct config *cfg)
{
	const char *path = cfg->format_path;
	char why[512] = "";
	int ret = ns_format(path, cfg->force, why, sizeof(why));
	if (ret) /* the engine says why and what to do */
		return fail(1, "%s", why[0] ? why : rdax_strerror(ret));
	struct stat st;
	char size[32] = "?";
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
		size_format((uint64_t)st.st_size, size, sizeof(size));
	printf("rdaxd: formatted %s (%s)\n", path, size);
	return 0;
}

/* pidfile_write -- "PID\n" into @path; 0 or -errno */
static int pidfile_write(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	int ret = write(fd, buf, (size_t)n) == n ? 0 : -EIO;
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	return ret;
}

/*
 * ready_line -- "rdaxd: ready on URI[, URI] (N namespace(s): PATH, SIZE, method M[; ...])";
 * run_daemon appends "; metrics http://HOST:PORT/metrics" with --metrics
 */
static void ready_line(const struct listener *l, const struct store *store, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "rdaxd: ready on ");
	if (n < len)
		n += listener_uris(l, buf + n, len - n);
	unsigned count = store_namespace_count(store);
	if (n < len)
		n += (size_t)snprintf(buf + n, len - n, " (%u namespace%s: ", count,
				      count == 1 ? "" : "s");
	for (unsigned i = 0; i < count && n < len; i++) {
		struct ns *ns = store_namespace(store, i);
		char size[32];
		n += (size_t)snprintf(buf + n, len - n, "%s%s, %s, method %s", i ? "; " : "",
				      ns->path, size_format(ns->persist.size, size, sizeof(size)),
				      persist_method_name(ns->persist.method));
	}
	if (n < len)
		n += (size_t)snprintf(buf + n, len - n, ")");
	if (n < len && powercut_allowed())
		snprintf(buf + n, len - n, ", power cuts allowed");
}

/* on_signal -- SIGTERM/SIGINT: leave the accept loop, main() shuts down */
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	LOG_INFO("signal %d: shutting down", w->signum);
	ev_break(loop, EVBREAK_ALL);
}

/* The daemon's parts, in the order they are made. */
struct daemon {
	uint8_t *token;
	size_t token_len;
	struct tls_server *tls; /* NULL: --tls off */
	struct acl *acl;	/* NULL: no --acl */
	struct store *store;
	struct dispatch_env env;
	struct fsync_pool *pool_fsync, *pool_meta;
	struct fsync_pool *pool_forward; /* NULL unless --cluster with an NBD listener */
	struct native_shared native;
	struct worker **workers;
	unsigned nworkers;
	struct conn_sets *sets;	   /* every worker's connections, of every transport */
	struct conn_limit *limit;  /* connection slots: in all, per address */
	struct listener *listener; /* every listening endpoint */
	struct nbd_shared nbd_shared;
	struct conn_rdma_shared rdma_shared;
	struct server_rdma *rdma; /* NULL without an rdma:// listener */
	struct cluster *cluster;  /* NULL without --cluster */
	struct metrics_expo_src metrics_src;
	struct metrics_http *metrics;	 /* NULL without --metrics */
	struct write_recorder *recorder; /* NULL without --write-log */
	bool served;			 /* the accept loop ran: connections may exist */
	bool pidfile_written;
};

/* daemon_open_namespaces -- every --namespace, with the engine's reason on failure */
static int daemon_open_namespaces(struct daemon *d, const struct config *cfg)
{
	char err[CONFIG_ERR_MAX];
	if (cfg->ns_defaulted) {
		char *dir = strdup(cfg->namespaces[0].path);
		if (!dir)
			return fail(1, "out of memory");
		char *slash = strrchr(dir, '/');
		if (slash && slash != dir) {
			*slash = '\0';
			int ret = mkdir_p(dir, geteuid() == 0 ? 0755 : 0700);
			if (ret) {
				free(dir);
				return fail(1,
					    "cannot create the data directory %s: %s (set "
					    "RDAX_DATA_DIR or give --namespace)",
					    cfg->namespaces[0].path, strerror(-ret));
			}
		}
		free(dir);
	}
	int ret = store_new(&d->store);
	if (ret)
		return fail(1, "out of memory");
	for (unsigned i = 0; i < cfg->nnamespaces; i++) {
		const struct config_namespace *n = &cfg->namespaces[i];
		ret = store_namespace_add(d->store, n->path, n->size, n->mode, err, sizeof(err));
		if (ret)
			return fail(1, "%s", err);
	}
	if (cfg->allow_powercut && !store_all_sim(d->store)) {
		for (unsigned i = 0; i < store_namespace_count(d->store); i++) {
			struct ns *ns = store_namespace(d->store, i);
			if (ns->persist.mode != PERSIST_SIM)
				return fail(1,
					    "--allow-powercut needs every namespace in sim mode: "
					    "namespace %s is in %s mode (a real namespace cannot "
					    "lose its CPU caches on demand; serve it as "
					    "--namespace %s,mode=sim to test with power cuts)",
					    ns->path, persist_mode_name(ns->persist.mode),
					    ns->path);
		}
	}
	if (cfg->write_log) {
		ret = mkdir_p(cfg->write_log, 0700);
		if (ret)
			return fail(1, "--write-log %s: cannot create it: %s", cfg->write_log,
				    strerror(-ret));
		ret = write_recorder_new(cfg->write_log, cfg->write_log_max, &d->recorder, err,
					 sizeof(err));
		if (ret)
			return fail(1, "%s", err);
		write_recorder_attach(d->recorder, d->store);
	}
	return 0;
}

/* start_native -- an accepted tcp:// socket speaks the native protocol */
static int start_native(void *arg, struct conn_set *set, int fd, const char *peer,
			struct conn_slot *slot, const char *refusal)
{
	return native_conn_start_socket(set, arg, fd, peer, slot, refusal);
}

/* start_nbd -- an accepted nbd:// or nbd+unix:// socket speaks NBD */
static int start_nbd(void *arg, struct conn_set *set, int fd, const char *peer,
		     struct conn_slot *slot, const char *refusal)
{
	return nbd_conn_start(set, arg, fd, peer, slot, refusal);
}

/*
 * nbd_authenticates -- does every NBD client prove who it is (TLS required,
 * with PSK or client certificates)? Then a token need not confine NBD to
 * loopback.
 */
static bool nbd_authenticates(const struct daemon *d)
{
	return d->tls && d->tls->mode == TLS_REQUIRE && (d->tls->psk || d->tls->verify_peer);
}

/*
 * daemon_start_nbd -- the NBD listeners, if any --listen asks for NBD.
 * With a token, nbd:// must be loopback-only (docs/nbd.md). 0 or an exit code.
 */
static int daemon_start_nbd(struct daemon *d, const struct config *cfg)
{
	char err[CONFIG_ERR_MAX];
	unsigned n = 0;
	for (unsigned i = 0; i < cfg->nlistens; i++)
		n += cfg->listens[i].kind == CONFIG_LISTEN_NBD ||
		     cfg->listens[i].kind == CONFIG_LISTEN_NBD_UNIX;
	if (n == 0)
		return 0;
	int ret = 0;
	if (cfg->cluster) {
		/* NBD of every cluster volume on any node: look-ups, connects, resumes */
		ret = fsync_pool_new("forward", RDAXD_FORWARD_THREADS, 0, &d->pool_forward);
		if (ret)
			return fail(1, "cannot start the pool threads: %s", strerror(-ret));
	}
	d->nbd_shared = (struct nbd_shared){
	    .store = d->store,
	    .tls = d->tls,
	    .acl = d->acl,
	    .pools = {.fsync = d->pool_fsync, .meta = d->pool_meta},
	    .flush_mode = cfg->flush_mode,
	    .max_block = NBD_MAX_BLOCK,
	    .etcd = cfg->cluster,
	    .cluster_name = cfg->cluster_name,
	    .token_file = cfg->token_file,
	    .forward = d->pool_forward,
	};
	for (unsigned i = 0; i < cfg->nlistens; i++) {
		const struct config_listen *l = &cfg->listens[i];
		if (l->kind == CONFIG_LISTEN_NBD)
			ret = listener_add_tcp(
			    d->listener, "nbd", "nbd:", l->host, l->port,
			    d->token != NULL && !nbd_authenticates(d),
			    "; NBD has no access token, and this daemon has --token-file: use a "
			    "loopback address, or nbd+unix:///PATH (guarded by file permissions); "
			    "see docs/nbd.md",
			    start_nbd, &d->nbd_shared, err, sizeof(err));
		else if (l->kind == CONFIG_LISTEN_NBD_UNIX)
			ret = listener_add_unix(d->listener, "nbd+unix", l->path, l->mode,
						start_nbd, &d->nbd_shared, err, sizeof(err));
		if (ret)
			return fail(1, "%s", err);
	}
	return 0;
}

/*
 * daemon_start_rdma -- the RDMA server and its listeners, if any --listen
 * asks for rdma:// (before the workers start). A namespace that cannot be
 * registered (fsdax) stops the daemon here. 0 or an exit code.
 */
static int daemon_start_rdma(struct daemon *d, const struct config *cfg)
{
	char err[CONFIG_ERR_MAX];
	unsigned n = 0;
	for (unsigned i = 0; i < cfg->nlistens; i++)
		n += cfg->listens[i].kind == CONFIG_LISTEN_RDMA;
	if (n == 0) {
		if (cfg->rdma_busy_poll_us != CONFIG_DEFAULT_BUSY_POLL_US)
			LOG_WARN("--rdma-busy-poll %u has no effect: no rdma:// listener",
				 cfg->rdma_busy_poll_us);
		return 0;
	}
	d->rdma_shared = (struct conn_rdma_shared){
	    .native = d->native,
	    .busy_poll_us = busy_poll_cap(cfg->rdma_busy_poll_us),
	};
	if (cfg->rdma_busy_poll_us == CONFIG_DEFAULT_BUSY_POLL_US && wake_cost_us())
		LOG_INFO("rdma:// adaptive polling: at most %u us (%u wake-ups of %u us measured "
			 "here; --rdma-busy-poll sets it)",
			 d->rdma_shared.busy_poll_us, SPIN_WINDOW_WAKES_PER_CAP, wake_cost_us());
	else if (cfg->rdma_busy_poll_us == CONFIG_DEFAULT_BUSY_POLL_US)
		LOG_WARN("rdma:// adaptive polling: at most %u us, the default; this host's wake-up "
			 "could not be measured (no thread or eventfd)",
			 d->rdma_shared.busy_poll_us);
	int ret = server_rdma_new(d->listener, d->sets, &d->rdma_shared, d->store, &d->rdma);
	if (ret)
		return fail(1, "cannot set up the RDMA server: %s%s", strerror(-ret),
			    ret == -ENODEV ? " (no RDMA device: load rdma_ucm and configure a "
					     "device, see docs/rdma.md)"
					   : "");
	if (cfg->tls == TLS_REQUIRE && !cfg->tls_psk_file)
		return fail(1, "--tls require with an rdma:// listener needs --tls-psk: rdma:// "
			       "has no TLS, its connection requests are signed with the PSK "
			       "(docs/security.md)");
	if (cfg->tls_psk_file) {
		/*
		 * rdma:// has no TLS: with a PSK file, connection requests are
		 * signed with its keys (rdma_auth.h); with --tls require, unsigned
		 * ones are refused.
		 */
		struct rdma_auth_verifier *v;
		ret = rdma_auth_verifier_new(cfg->tls_psk_file, (uint32_t)time(NULL), &v, err,
					     sizeof(err));
		if (ret)
			return fail(1, "%s", ret == -EINVAL ? err : strerror(-ret));
		server_rdma_set_auth(d->rdma, v, cfg->tls == TLS_REQUIRE);
	}
	for (unsigned i = 0; i < cfg->nlistens; i++) {
		const struct config_listen *l = &cfg->listens[i];
		if (l->kind != CONFIG_LISTEN_RDMA)
			continue;
		ret = server_rdma_listen(d->rdma, l->host, l->port, err, sizeof(err));
		if (ret)
			return fail(1, "%s", err);
	}
	return 0;
}

/*
 * fd_budget -- the connections the descriptor limit leaves room for: the
 * soft RLIMIT_NOFILE is raised to the hard one if that is needed for
 * @want, and @want is lowered (with a warning) to what fits beside the
 * refusing connections and RDAXD_FD_RESERVE descriptors for everything else
 * (namespaces, pools, the cluster's etcd client, logs). 0 or an exit code.
 */
static int fd_budget(unsigned *want)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 0; /* nothing known: trust the setting */
	rlim_t need = (rlim_t)*want + CONN_LIMIT_REFUSING + RDAXD_FD_RESERVE;
	if (rl.rlim_cur < need && rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = {.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max,
				    .rlim_max = rl.rlim_max};
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
	}
	if (rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_cur <= CONN_LIMIT_REFUSING + RDAXD_FD_RESERVE)
		return fail(
		    1,
		    "the descriptor limit (%llu, ulimit -n) leaves no room for connections: "
		    "it must exceed %u",
		    (unsigned long long)rl.rlim_cur, CONN_LIMIT_REFUSING + RDAXD_FD_RESERVE);
	unsigned fit = (unsigned)(rl.rlim_cur - CONN_LIMIT_REFUSING - RDAXD_FD_RESERVE);
	LOG_WARN("--max-connections %u lowered to %u: the descriptor limit is %llu (raise it: "
		 "ulimit -n, LimitNOFILE=)",
		 *want, fit, (unsigned long long)rl.rlim_cur);
	*want = fit;
	return 0;
}

/* daemon_start_limits -- connection slots, keepalive and the time limits; 0 or an exit code */
static int daemon_start_limits(struct daemon *d, const struct config *cfg)
{
	unsigned total = cfg->max_connections;
	int code = fd_budget(&total);
	if (code)
		return code;
	unsigned per_peer =
	    cfg->max_connections_per_peer < total ? cfg->max_connections_per_peer : total;
	int ret = conn_limit_new(total, per_peer, &d->limit);
	if (ret)
		return fail(1, "cannot set up the connection limits: %s", strerror(-ret));
	listener_set_limits(d->listener, d->limit, cfg->keepalive);
	const struct conn_timeouts t = {
	    .handshake = cfg->handshake_timeout,
	    .request = cfg->request_timeout,
	    .idle = cfg->idle_timeout,
	};
	conn_sets_set_timeouts(d->sets, &t);
	conn_sets_set_out_budget(d->sets, (size_t)cfg->max_reply_memory);
	LOG_INFO("connections: at most %u (%u per address), %llu MiB of queued replies; "
		 "timeouts: handshake %u s, request %u s, idle %u s (0: none); keepalive %u s",
		 total, per_peer, (unsigned long long)(cfg->max_reply_memory >> 20),
		 cfg->handshake_timeout, cfg->request_timeout, cfg->idle_timeout, cfg->keepalive);
	return 0;
}

/* daemon_start -- pools, workers, listeners; 0 or an exit code */
static int daemon_start(struct daemon *d, const struct config *cfg)
{
	char err[CONFIG_ERR_MAX];
	d->env = (struct dispatch_env){
	    .store = d->store,
	    .max_payload = cfg->max_payload,
	    .max_body = FRAME_DEFAULT_MAX_BODY,
	    .token = d->token,
	    .token_len = d->token_len,
	    .acl = d->acl,
	    .flush_mode = cfg->flush_mode,
	    .server_version = RDAX_VERSION,
	    .transports = rdaxd_transports,
	    .ntransports = 1,
	    .cluster_etcd = cfg->cluster,
	    .cluster_name = cfg->cluster_name,
	};
	for (unsigned i = 0; i < cfg->nlistens; i++)
		if (cfg->listens[i].kind == CONFIG_LISTEN_RDMA)
			d->env.ntransports = 2; /* "rdma" too */
	unsigned nfsync = cfg->threads < 2 ? 2 : cfg->threads;
	int ret = fsync_pool_new("fsync", nfsync, 0, &d->pool_fsync);
	if (ret == 0)
		ret = fsync_pool_new("meta", RDAXD_META_THREADS, RDAXD_META_QUICK_THREADS,
				     &d->pool_meta);
	if (ret)
		return fail(1, "cannot start the pool threads: %s", strerror(-ret));
	d->native = (struct native_shared){
	    .env = &d->env,
	    .tls = d->tls,
	    .pools = {.fsync = d->pool_fsync, .meta = d->pool_meta},
	};

	d->workers = calloc(cfg->threads, sizeof(*d->workers));
	if (!d->workers)
		return fail(1, "out of memory");
	for (; d->nworkers < cfg->threads; d->nworkers++) {
		ret = worker_new(d->nworkers, &d->workers[d->nworkers]);
		if (ret)
			return fail(1, "cannot create worker %u: %s", d->nworkers, strerror(-ret));
	}
	/* the connection sets hook into the workers: before they start */
	ret = conn_sets_new(d->workers, d->nworkers, &d->sets);
	if (ret == 0)
		ret = listener_new(ev_default_loop(0), d->sets, &d->listener);
	if (ret)
		return fail(1, "cannot set up the connection sets: %s", strerror(-ret));
	ret = daemon_start_limits(d, cfg);
	if (ret)
		return ret;
	for (unsigned i = 0; i < cfg->nlistens; i++) {
		if (cfg->listens[i].kind != CONFIG_LISTEN_TCP)
			continue;
		ret = listener_add_tcp(d->listener, "tcp", "", cfg->listens[i].host,
				       cfg->listens[i].port, false, NULL, start_native, &d->native,
				       err, sizeof(err));
		if (ret)
			return fail(1, "%s", err);
	}
	ret = daemon_start_nbd(d, cfg);
	if (ret)
		return ret;
	ret = daemon_start_rdma(d, cfg);
	if (ret)
		return ret;
	for (unsigned i = 0; i < d->nworkers; i++) {
		ret = worker_start(d->workers[i]);
		if (ret)
			return fail(1, "cannot start worker %u: %s", i, strerror(-ret));
	}
	listener_start(d->listener);
	return 0;
}

/*
 * daemon_stop -- undo daemon_start and daemon_open_namespaces, whatever got
 * done: connections drained, pools (their queued tasks run), workers, then
 * the namespaces closed with everything dirty written back.
 */
static void daemon_stop(struct daemon *d, const struct config *cfg)
{
	metrics_http_stop(&d->metrics); /* first: a scrape reads everything below */
	powercut_shutdown();
	if (d->served) {
		/* accept nothing more anywhere, then one drain for every transport at once */
		listener_close(d->listener);
		if (d->rdma)
			server_rdma_close(d->rdma);
		conn_sets_drain_wait(d->sets);
	}
	fsync_pool_delete(&d->pool_fsync);
	fsync_pool_delete(&d->pool_meta);
	fsync_pool_delete(&d->pool_forward); /* a resume round still out posts to its worker */
	/* the replica links run on the workers: stopped while those still run */
	cluster_stop(&d->cluster); /* the node key goes now, not at the lease's expiry */
	for (unsigned i = 0; i < d->nworkers; i++)
		worker_stop(d->workers[i]);
	listener_delete(&d->listener);
	server_rdma_delete(&d->rdma); /* deregisters the namespaces: before the store closes */
	conn_sets_delete(&d->sets);
	conn_limit_delete(&d->limit); /* every slot is back: connections and lingers are gone */
	for (unsigned i = 0; i < d->nworkers; i++)
		worker_delete(&d->workers[i]);
	free(d->workers);
	store_delete(&d->store); /* every write log has ended: its volume was closed */
	write_recorder_delete(&d->recorder);
	tls_server_delete(&d->tls);
	acl_delete(&d->acl);
	if (d->pidfile_written && unlink(cfg->pidfile) < 0)
		LOG_WARN("remove pidfile %s: %s", cfg->pidfile, strerror(errno));
	free(d->token);
}

/* is_loopback -- a listen host only this machine reaches */
static bool is_loopback(const char *host)
{
	return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
	       strcmp(host, "localhost") == 0;
}

/*
 * daemon_start_cluster -- with --cluster: join (docs/cluster.md), advertising
 * --advertise or else the listen addresses. A node that cannot reach etcd
 * says so and does not start. 0 or an exit code.
 */
static int daemon_start_cluster(struct daemon *d, const struct config *cfg)
{
	if (!cfg->cluster)
		return 0;
	const char *addrs[CONFIG_MAX_LISTENS + CONFIG_MAX_ADVERTISE];
	unsigned n = 0;
	for (unsigned i = 0; i < cfg->nadvertise; i++)
		addrs[n++] = cfg->advertise[i];
	/* by default the listen addresses others can reach: loopback ones only if all are */
	bool other = false;
	for (unsigned i = 0; i < cfg->nlistens; i++)
		other = other || (cfg->listens[i].kind != CONFIG_LISTEN_NBD_UNIX &&
				  !is_loopback(cfg->listens[i].host));
	for (unsigned i = 0; cfg->nadvertise == 0 && i < cfg->nlistens; i++)
		if (cfg->listens[i].kind != CONFIG_LISTEN_NBD_UNIX &&
		    !(other && is_loopback(cfg->listens[i].host)))
			addrs[n++] = cfg->listens[i].uri;
	struct cluster_opts o = {
	    .etcd = cfg->cluster,
	    .cluster_name = cfg->cluster_name,
	    .node = cfg->node_name,
	    .zone = cfg->zone,
	    .lease_ttl_s = cfg->lease_ttl_s,
	    .replica_busy_poll_us = busy_poll_cap(cfg->replica_busy_poll_us),
	    .addrs = addrs,
	    .naddrs = n,
	    .store = d->store,
	    .version = RDAX_VERSION,
	    .workers = d->workers,
	    .nworkers = d->nworkers,
	};
	char err[CONFIG_ERR_MAX];
	if (cluster_start(&o, &d->cluster, err, sizeof(err)))
		return fail(1, "%s", err);
	return 0;
}

/* daemon_load_security -- the TLS credentials and the ACL, checked before anything starts */
static int daemon_load_security(struct daemon *d, const struct config *cfg)
{
	char err[CONFIG_ERR_MAX];
	if (cfg->tls != TLS_OFF) {
		struct tls_server_opts o = {
		    .mode = cfg->tls,
		    .cert_dir = cfg->tls_cert_dir,
		    .psk_file = cfg->tls_psk_file,
		    .verify_peer = cfg->tls_verify_peer,
		};
		int ret = tls_server_new(&o, &d->tls, err, sizeof(err));
		if (ret)
			return fail(1, "%s", ret == -EINVAL ? err : strerror(-ret));
		LOG_INFO("TLS %s:%s%s%s", tls_mode_name(cfg->tls), d->tls->x509 ? " x509" : "",
			 d->tls->psk ? " psk" : "",
			 cfg->tls_verify_peer ? ", client certificates required" : "");
	}
	if (cfg->acl_file) {
		int ret = acl_load(cfg->acl_file, &d->acl, err, sizeof(err));
		if (ret)
			return fail(1, "%s", ret == -EINVAL ? err : strerror(-ret));
	}
	return 0;
}

/* on_served -- after a power cut: the daemon serves again; say so like the ready line */
static void on_served(void *arg, uint64_t incarnation, uint64_t cuts)
{
	struct daemon *d = arg;
	char line[2048], status[2200];
	ready_line(d->listener, d->store, line, sizeof(line));
	snprintf(status, sizeof(status),
		 "%s (after power cut %" PRIu64 ", incarnation %016" PRIx64 ")", line, cuts,
		 incarnation);
	printf("%s\n", status);
	fflush(stdout);
	notify_ready(status);
}

/* daemon_start_powercut -- with --allow-powercut: the cut's watchers on the accept loop */
static int daemon_start_powercut(struct daemon *d, const struct config *cfg)
{
	if (!cfg->allow_powercut)
		return 0;
	const struct powercut_parts parts = {
	    .loop = ev_default_loop(0),
	    .store = d->store,
	    .sets = d->sets,
	    .rdma = d->rdma,
	    .served = on_served,
	    .arg = d,
	};
	if (powercut_setup(&parts))
		return fail(1, "cannot set up power cuts");
	return 0;
}

/* run_daemon -- serve until SIGTERM/SIGINT; the exit code */
static int run_daemon(const struct config *cfg)
{
	struct daemon d = {0};
	char err[CONFIG_ERR_MAX];
	int code = 0;

	/* a peer that goes away must not kill us: sends use MSG_NOSIGNAL, and for good measure */
	signal(SIGPIPE, SIG_IGN);
	struct ev_loop *loop = ev_default_loop(0);
	if (!loop)
		return fail(1, "cannot create the event loop");

	if (cfg->token_file) {
		int ret =
		    token_file_read(cfg->token_file, &d.token, &d.token_len, err, sizeof(err));
		if (ret)
			return fail(1, "%s", err);
	}
	code = daemon_load_security(&d, cfg);
	if (code)
		goto out_stop;
	code = daemon_open_namespaces(&d, cfg);
	if (code)
		goto out_stop;
	incarnation_new();
	code = daemon_start(&d, cfg);
	if (code)
		goto out_stop;
	/*
	 * The cluster after the workers (its replica links run on their loops)
	 * and before the main loop accepts: the volumes this node is primary of
	 * are replicated (repl_registry.h) before a listener takes the first
	 * client write (the listeners accept on the main loop, ev_run below).
	 */
	code = daemon_start_cluster(&d, cfg);
	if (code)
		goto out_stop;
	if (cfg->metrics) {
		d.metrics_src =
		    (struct metrics_expo_src){.store = d.store, .version = RDAX_VERSION};
		if (metrics_http_start(cfg->metrics, &d.metrics_src, &d.metrics, err,
				       sizeof(err))) {
			code = fail(1, "%s", err);
			goto out_stop;
		}
	}
	code = daemon_start_powercut(&d, cfg);
	if (code)
		goto out_stop;

	if (cfg->pidfile) {
		int ret = pidfile_write(cfg->pidfile);
		if (ret) {
			code = fail(1, "cannot write pidfile %s: %s", cfg->pidfile, strerror(-ret));
			goto out_stop;
		}
		d.pidfile_written = true;
	}

	ev_signal sigterm, sigint;
	ev_signal_init(&sigterm, on_signal, SIGTERM);
	ev_signal_start(loop, &sigterm);
	ev_signal_init(&sigint, on_signal, SIGINT);
	ev_signal_start(loop, &sigint);

	char line[2048];
	ready_line(d.listener, d.store, line, sizeof(line));
	if (d.metrics) /* last, so the listeners' addresses keep their place */
		snprintf(line + strlen(line), sizeof(line) - strlen(line), "; metrics %s/metrics",
			 metrics_http_url(d.metrics));
	char mp[SIZE_FORMAT_MAX];
	LOG_INFO("%s (%u event-loop thread%s, flush mode %s, max payload %s%s, incarnation "
		 "%016" PRIx64 "%s%s)",
		 line, cfg->threads, cfg->threads == 1 ? "" : "s",
		 cfg->flush_mode == FLUSH_HAMMER ? "hammer" : "tracked",
		 size_format(cfg->max_payload, mp, sizeof(mp)), d.token ? ", token required" : "",
		 incarnation_get(), cfg->write_log ? ", write logs in " : "",
		 cfg->write_log ? cfg->write_log : "");
	printf("%s\n", line);
	fflush(stdout);
	notify_ready(line);

	d.served = true;
	ev_run(loop, 0);
	if (powercut_failed())
		code = 1; /* the namespaces did not come back from a power cut (logged) */
	notify_stopping();

	ev_signal_stop(loop, &sigterm);
	ev_signal_stop(loop, &sigint);
out_stop:
	daemon_stop(&d, cfg);
	if (code == 0)
		LOG_INFO("stopped");
	return code;
}

int main(int argc, char **argv)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX];
	int code;

	config_init(&cfg);
	if (config_parse_args(&cfg, argc, argv, err, sizeof(err))) {
		code = fail(2, "%s (see rdaxd --help)", err);
		goto out;
	}
	if (cfg.help) {
		config_usage(stdout);
		code = 0;
		goto out;
	}
	if (cfg.version) {
		printf("rdaxd %s\n", RDAX_VERSION);
		code = 0;
		goto out;
	}
	if (config_finish(&cfg, err, sizeof(err))) {
		code = fail(2, "%s (see rdaxd --help)", err);
		goto out;
	}
	log_set_level(cfg.log_level);
	if (faults_from_env()) {
		code = fail(2, "RDAX_FAULTS names an unknown fault (see the log)");
		goto out;
	}
	code = cfg.format_path ? run_format(&cfg) : run_daemon(&cfg);
out:
	config_free(&cfg);
	return code;
}
