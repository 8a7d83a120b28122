/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * librdax.h -- the rdax client library: volumes of remote persistent memory
 *
 * A program connects to an rdaxd (rdax_connect), manages volumes by name
 * (rdax_volume_create/delete/list/info), opens one (rdax_volume_open) and
 * writes, reads, fsyncs and discards ranges of it. A write is durable once
 * an fsync that covers it has returned, or when it was made with
 * RDAX_WRITE_FSYNC.
 *
 * Calls of two kinds:
 * - synchronous (rdax_write, rdax_read, rdax_fsync, ...): return when the
 *   whole operation is done. Any length is accepted; the library splits it
 *   into requests of at most rdax_conn_max_payload() bytes and keeps several
 *   of them in flight.
 * - asynchronous (rdax_submit_write/read/fsync): queue the operation and
 *   return at once; rdax_wait_completions() reports finished operations by
 *   the cookie given at submission. Requests go out in submission order.
 *
 * Errors: every function that can fail returns 0 (or a count) on success and
 * a negative code on failure: -errno (-EINVAL, -ENOENT, -ERANGE, ...) or
 * -RDAX_E_* below. rdax_strerror() names any code; rdax_conn_last_error()
 * gives the detailed message of the last failed call on a connection (the
 * server's own message when the server refused the request).
 *
 * Thread safety (see also docs/librdax.md):
 * - A connection, the volumes opened on it and its completions form one
 *   unit that must be used by ONE THREAD AT A TIME. The library takes no
 *   lock; calls on one connection from several threads at once must be
 *   serialised by the caller (one mutex around every call is enough).
 * - Different connections are independent: any number of threads may each
 *   use their own connection at the same time.
 * - rdax_strerror() and rdax_connect_last_error() may be called from any
 *   thread at any time; the latter is per thread.
 * - An options object is read, never kept, by rdax_connect(); it may be
 *   reused or deleted afterwards, but not changed by another thread while a
 *   connect reads it.
 * - The library installs no signal handlers and never raises SIGPIPE.
 */
#ifndef LIBRDAX_H
#define LIBRDAX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Project error codes, numbered above any errno value (returned negated).
 * The daemon uses the same enum (common/errors.h includes this header).
 */
enum rdax_error {
	RDAX_E_FIRST = 4096,
	RDAX_E_NOT_RDAX = RDAX_E_FIRST, /* no rdax superblock: not formatted */
	RDAX_E_BAD_METADATA,		/* superblock or volume table fails its checks */
	RDAX_E_VERSION,			/* on-media or protocol version not supported */
	RDAX_E_PROTOCOL,		/* malformed frame or message */
	RDAX_E_NOT_OPEN,		/* volume not open on this connection */
	RDAX_E_ACCESS,			/* access token missing or wrong */
	RDAX_E_TOO_BIG,			/* request exceeds a configured limit */
	RDAX_E_STALE_EPOCH,		/* cluster: a request of an epoch older than seen */
	RDAX_E_NOT_PRIMARY,		/* cluster: this node is not the volume's primary */
	RDAX_E_NO_QUORUM,		/* cluster: etcd unreachable, the node will not guess */
	RDAX_E_LAST
};

/*
 * rdax_strerror -- a message for any code returned by librdax (the sign is
 * ignored; errno values get strerror()'s text).
 * Context: any thread. Returns a static string.
 */
const char *rdax_strerror(int code);

/* Default server address of the rdax command and of rdaxd. */
#define RDAX_DEFAULT_URL  "tcp://127.0.0.1:7470"
#define RDAX_DEFAULT_PORT 7470

/* Default and largest number of asynchronous operations in flight per connection. */
#define RDAX_DEFAULT_QUEUE_DEPTH 64
#define RDAX_MAX_QUEUE_DEPTH	 4096

/* Longest access token, in bytes. */
#define RDAX_TOKEN_MAX 4096

/* "Any namespace": rdax_volume_create lets the server choose (most free space). */
#define RDAX_NAMESPACE_ANY UINT32_MAX

/* rdax_write / rdax_submit_write flags */
#define RDAX_WRITE_FSYNC (1U << 0) /* durable: acknowledged only once all of it is durable */

/* rdax_fsync_flags / rdax_submit_fsync flags */
#define RDAX_FSYNC_HAMMER (1U << 0) /* write back every line of the range (baseline) */

struct rdax_conn_opts; /* connection options (opaque) */
struct rdax_conn;      /* a connection to one rdaxd (opaque) */
struct rdax_volume;    /* a volume opened on a connection (opaque) */

/* --- connection options ------------------------------------------------- */

/*
 * rdax_conn_opts_new -- options with the defaults: no token, client name
 * "librdax", no timeout, queue depth RDAX_DEFAULT_QUEUE_DEPTH, rdma://
 * adaptive polling capped by this host's wake-up (RDAX_BUSY_POLL_AUTO).
 * Returns 0, -EINVAL (NULL), -ENOMEM. Sets *optsp only on success.
 */
int rdax_conn_opts_new(struct rdax_conn_opts **optsp);

/* rdax_conn_opts_delete -- free; accepts NULL and *optsp == NULL; sets *optsp = NULL */
void rdax_conn_opts_delete(struct rdax_conn_opts **optsp);

/*
 * rdax_conn_opts_set_token -- the access token sent in HELLO (copied).
 * Returns 0, -EINVAL (NULL, len 0), -RDAX_E_TOO_BIG (len > RDAX_TOKEN_MAX), -ENOMEM.
 */
int rdax_conn_opts_set_token(struct rdax_conn_opts *opts, const void *token, size_t len);

/*
 * rdax_conn_opts_set_token_file -- read the token from a file, without its
 * trailing newline(s) ("\n" or "\r\n"), as rdaxd --token-file reads it.
 * Returns 0, -errno of open/read, -EINVAL (NULL, empty file),
 * -RDAX_E_TOO_BIG (longer than RDAX_TOKEN_MAX), -ENOMEM.
 */
int rdax_conn_opts_set_token_file(struct rdax_conn_opts *opts, const char *path);

/* rdax_conn_opts_set_client_name -- sent in HELLO, for the server's logs; 0, -EINVAL, -ENOMEM */
int rdax_conn_opts_set_client_name(struct rdax_conn_opts *opts, const char *name);

/*
 * rdax_conn_opts_set_timeout -- a call that waits for the server gives up
 * after @timeout_ms milliseconds in which nothing at all was received or
 * sent; the connection is then broken (-ETIMEDOUT) because the state of its
 * requests is unknown. Applies to connecting too. 0 (default): wait forever.
 * Choose it longer than the slowest fsync. Returns 0, -EINVAL (NULL, < 0).
 */
int rdax_conn_opts_set_timeout(struct rdax_conn_opts *opts, int timeout_ms);

/*
 * rdax_conn_opts_set_resume -- a connection that survives the loss of its
 * stream (docs/librdax.md, "Resuming"): when the server closes or resets it,
 * stays silent past the timeout, or answers that it is no longer the
 * volume's primary (-RDAX_E_NOT_PRIMARY, with the primary's address), the
 * library reconnects -- to the named primary first, then to each address
 * given to rdax_connect, each name resolved again, with backoff -- says
 * HELLO, opens every open volume again and sends again what was in flight,
 * in order. Calls block meanwhile; @timeout_ms after the loss, if no
 * reconnect has worked, the connection breaks and every call fails with
 * -ETIMEDOUT (rdax_conn_last_error names the loss and the last try). 0
 * (default): no resume, a lost connection is broken at once. Writes
 * acknowledged before the loss and not yet covered by an fsync are checked
 * by the server's verifier: see rdax_conn_opts_set_write_hold.
 * A silent server is noticed only with rdax_conn_opts_set_timeout.
 * Returns 0, -EINVAL (NULL, < 0).
 */
int rdax_conn_opts_set_resume(struct rdax_conn_opts *opts, int timeout_ms);

/*
 * rdax_conn_opts_set_write_hold -- with resume: how many bytes of plain
 * writes (acknowledged, not yet covered by an fsync) the connection keeps a
 * copy of, over all its volumes, to send them again if the server lost them
 * (its verifier changed: a restart, a power cut, a failover). A write over
 * the budget is remembered without its data: an fsync that covers it after
 * such a loss fails with -EIO instead of succeeding. Default 0 (no copies).
 * Returns 0, -EINVAL (NULL).
 */
int rdax_conn_opts_set_write_hold(struct rdax_conn_opts *opts, uint64_t bytes);

/*
 * rdax_conn_opts_set_queue_depth -- asynchronous operations that may be
 * submitted and not yet reaped (also the most requests the library keeps in
 * flight). Returns 0, -EINVAL (NULL, 0, > RDAX_MAX_QUEUE_DEPTH).
 */
int rdax_conn_opts_set_queue_depth(struct rdax_conn_opts *opts, unsigned depth);

/*
 * rdax_conn_opts_set_busy_poll -- rdma:// only: a call that waits spins on
 * the completion queue before it sleeps on the completion channel, for
 * twice the connection's recent waits and at most @usec microseconds (a
 * connection whose waits are longer sleeps at once). Waking from that sleep
 * costs a system call and a scheduler wake-up per reply; spinning trades
 * some CPU for latency, as RDMA applications usually do. 0: sleep at once.
 * Default RDAX_BUSY_POLL_AUTO: ten wake-ups of this host, measured once per
 * process at the first rdma:// connection (two threads, a few eventfd round
 * trips), at least RDAX_DEFAULT_BUSY_POLL_US and at most 5000 us -- 200 us
 * on a real host, more where a wake-up costs more (a VM). Ignored over
 * tcp://. Returns 0, -EINVAL (NULL, > RDAX_MAX_BUSY_POLL_US and not AUTO).
 */
#define RDAX_MAX_BUSY_POLL_US	  1000000U
#define RDAX_DEFAULT_BUSY_POLL_US 200U
#define RDAX_BUSY_POLL_AUTO	  0xffffffffU
int rdax_conn_opts_set_busy_poll(struct rdax_conn_opts *opts, unsigned usec);

/*
 * rdax_conn_opts_set_tls_certificates -- rdaxs://: x509 credentials in
 * @dir, the layout of qemu and libnbd: ca-cert.pem (the CA the server's
 * certificate must chain to, and name the host connected to), and
 * client-cert.pem + client-key.pem if present (for a daemon with
 * --tls-verify-peer: the certificate's common name is the client's
 * identity). Without this or a PSK, rdaxs:// checks the server against the
 * system's CAs. The files are read by rdax_connect. Returns 0, -EINVAL
 * (NULL), -ENOMEM.
 */
int rdax_conn_opts_set_tls_certificates(struct rdax_conn_opts *opts, const char *dir);

/*
 * rdax_conn_opts_set_tls_psk -- rdaxs://: a pre-shared key from @path
 * (psktool's "username:hexkey" lines) for @username (NULL: the file's first
 * user); the username is the client's identity. The file is read by
 * rdax_connect. Returns 0, -EINVAL (NULL path), -ENOMEM.
 */
int rdax_conn_opts_set_tls_psk(struct rdax_conn_opts *opts, const char *path, const char *username);

/* --- connections -------------------------------------------------------- */

/*
 * rdax_connect -- connect to the rdaxd at @url and say HELLO.
 * @url: "tcp://HOST[:PORT]" -- HOST a name, an IPv4 address or an IPv6
 * address in brackets ("tcp://[::1]:7470"); PORT defaults to 7470.
 * Several addresses of one scheme separated by commas (the nodes of a
 * cluster, at most 16): the first that answers is used, and a resuming
 * connection (rdax_conn_opts_set_resume) goes on to the others.
 * "rdma://HOST[:PORT]": the same over RDMA (an RC queue pair through
 * librdmacm; HOST an address of an RDMA device): writes and reads are then
 * one-sided RDMA operations, everything else the same requests as over TCP
 * (docs/rdma.md). "rdaxs://HOST[:PORT]": tcp:// in TLS (a daemon with --tls
 * on or require), with the credentials of rdax_conn_opts_set_tls_*
 * (docs/security.md); TLS options with another scheme are refused.
 * @opts: NULL for the defaults.
 * Context: blocks (name lookup, connect, one round trip).
 * Returns 0 and sets *connp; or -EINVAL (NULL, malformed URL),
 * -ENODEV (rdma:// without RDMA devices), -EHOSTUNREACH (the name does not resolve),
 * -ECONNREFUSED and other connect errors (also a TLS handshake the server
 * refused: wrong PSK, unknown user, certificate not accepted), -EPROTO
 * (another TLS failure), -ETIMEDOUT, -RDAX_E_ACCESS (token refused, or TLS
 * required by the daemon), -RDAX_E_VERSION, -RDAX_E_PROTOCOL (not an rdax server), -ENOMEM.
 * On failure rdax_connect_last_error() says why.
 */
int rdax_connect(const char *url, const struct rdax_conn_opts *opts, struct rdax_conn **connp);

/*
 * rdax_connect_last_error -- the message of this thread's last failed
 * rdax_connect ("connect 127.0.0.1:7470: Connection refused"), "" if none.
 * Context: any thread; the string is per thread, valid until its next rdax_connect.
 */
const char *rdax_connect_last_error(void);

/*
 * rdax_disconnect -- close the connection and free it; the server closes its
 * volume handles. Completions not yet returned by rdax_wait_completions are
 * dropped. Accepts NULL and *connp == NULL; sets *connp = NULL.
 * Returns 0, or -EBUSY (volumes still open: close them first -- which in turn
 * waits for their asynchronous operations; nothing done).
 */
int rdax_disconnect(struct rdax_conn **connp);

/*
 * rdax_conn_last_error -- the detailed message of the last call on @conn
 * that failed (the server's message if the server refused it), or "".
 * For asynchronous operations: the message of the last failed completion
 * returned by rdax_wait_completions. Valid until the next call on @conn.
 */
const char *rdax_conn_last_error(const struct rdax_conn *conn);

/*
 * rdax_conn_status -- 0 while the connection works; once its stream broke
 * (EOF, reset, malformed reply, timeout), the code every call now fails with.
 */
int rdax_conn_status(const struct rdax_conn *conn);

/* rdax_conn_max_payload -- the server's limit on one WRITE/READ request, in bytes */
uint32_t rdax_conn_max_payload(const struct rdax_conn *conn);

/* rdax_conn_server_version -- the server's version string from HELLO, "" if it sent none */
const char *rdax_conn_server_version(const struct rdax_conn *conn);

/*
 * rdax_conn_primary_url -- a cluster node refused the last call that failed
 * with -RDAX_E_NOT_PRIMARY because another node serves the volume: that
 * node's address (tcp://...), to connect to instead; "" if no call was so
 * refused or the node did not know. Valid until the next call on @conn.
 */
const char *rdax_conn_primary_url(const struct rdax_conn *conn);

/* rdax_conn_resumes -- how many times the connection resumed after a loss (0 without resume) */
unsigned rdax_conn_resumes(const struct rdax_conn *conn);

/* rdax_conn_url -- the address (one of rdax_connect's list, or a primary followed) in use */
const char *rdax_conn_url(const struct rdax_conn *conn);

/*
 * rdax_conn_incarnation -- which life of the server answered HELLO: a
 * random number the daemon draws when it starts and again at every power
 * cut (rdax_powercut). Another value on a later connection means the server
 * lost, in between, everything that was not made durable. 0: the server
 * sent none (an older rdaxd).
 */
uint64_t rdax_conn_incarnation(const struct rdax_conn *conn);

/* rdax_conn_powercut_allowed -- 1 if the server accepts rdax_powercut (rdaxd --allow-powercut) */
int rdax_conn_powercut_allowed(const struct rdax_conn *conn);

enum rdax_persist_method {
	RDAX_PERSIST_CPU_CACHE_FLUSH = 0, /* CLWB/CLFLUSHOPT + SFENCE */
	RDAX_PERSIST_FENCE_ONLY = 1,	  /* eADR: SFENCE only */
	RDAX_PERSIST_MSYNC = 2,		  /* not PMEM: msync(2) */
	RDAX_PERSIST_SIM = 3,		  /* power-fail simulator */
};

/* A namespace of the server, as of the HELLO reply (free_bytes is not refreshed). */
struct rdax_namespace_info {
	uint32_t id;
	const char *path; /* on the server; valid until rdax_disconnect */
	uint64_t size;
	uint64_t free_bytes;
	enum rdax_persist_method persist_method;
	const char *mode; /* "auto" or "sim"; valid until rdax_disconnect */
};

/* rdax_conn_namespace_count -- how many namespaces the HELLO reply listed */
unsigned rdax_conn_namespace_count(const struct rdax_conn *conn);

/* rdax_conn_namespace_get -- the @index'th namespace; 0, -EINVAL (NULL), -ERANGE (index) */
int rdax_conn_namespace_get(const struct rdax_conn *conn, unsigned index,
			    struct rdax_namespace_info *info);

/* A bad block of a namespace's media (struct rdax_namespace_status). */
struct rdax_bad_range {
	uint64_t offset; /* in the namespace, bytes */
	uint64_t length;
	const char *volume;	/* the volume it falls in; NULL: in none */
	uint64_t volume_offset; /* where in that volume */
};

/* A namespace with its kind and the health of its media (rdax_namespace_list). */
struct rdax_namespace_status {
	uint32_t id;
	const char *path; /* on the server */
	const char *kind; /* "devdax", "fsdax", "file"; "" from a server that does not say */
	const char *mode; /* "auto" or "sim" */
	enum rdax_persist_method persist_method;
	uint64_t size;
	uint64_t free_bytes;
	const char *health; /* "ok", "bad-blocks", "unsafe-shutdown"; "" if not reported */
	int usc_supported;  /* the device reports an unsafe-shutdown count ... */
	uint64_t unsafe_shutdown_count; /* ... this one */
	int unsafe_shutdown;	 /* hit by one while in use: acknowledged writes may be lost */
	int badblocks_supported; /* the device reports its bad blocks */
	size_t nbad;
	const struct rdax_bad_range *bad; /* one per (bad block, volume it touches) */
	size_t nmarked;
	const char *const *marked_volumes; /* volumes marked by the unsafe shutdown */
};

/*
 * rdax_namespace_list -- every namespace of the server with its kind and
 * media health, the bad blocks read again by the server: *listp = an array
 * of *countp entries (strings inside it), freed with
 * rdax_namespace_list_free(). Context: blocks for one round trip.
 * Returns 0, -EINVAL (NULL), -ENOMEM, -RDAX_E_PROTOCOL (among others: a
 * server older than this request, which then closes the connection), or a
 * connection error.
 */
int rdax_namespace_list(struct rdax_conn *conn, struct rdax_namespace_status **listp,
			size_t *countp);

/* rdax_namespace_list_free -- free what rdax_namespace_list returned; accepts NULL; sets *listp =
 * NULL */
void rdax_namespace_list_free(struct rdax_namespace_status **listp);

/*
 * Clearing an unsafe-shutdown mark: once the data of a marked volume was
 * checked or restored, an operator acknowledges the mark (docs/metrics.md,
 * "Media health"). The server commits the change to the namespace's
 * metadata before it answers.
 */

/* What a clear found marked, and cleared (rdax_volume_clear_unsafe, rdax_namespace_clear_unsafe).
 */
struct rdax_unsafe_cleared {
	uint32_t namespace_id;	    /* the namespace the marks were in */
	int namespace_cleared;	    /* its own mark was set, and is cleared now */
	size_t nvolumes;	    /* volumes whose mark was set, and is cleared now ... */
	const char *const *volumes; /* ... their names (none: nothing was marked) */
};

/*
 * rdax_volume_clear_unsafe -- clear volume @name's unsafe-shutdown mark
 * (needs the create right on it under the server's --acl). A volume that is
 * not marked: 0, nothing changes. *resultp (@resultp may be NULL) says what
 * was marked; free it with rdax_unsafe_cleared_free(). Context: blocks for
 * one round trip and the server's metadata commit.
 * Returns 0, -EINVAL, -ENOENT (no such volume), -RDAX_E_ACCESS (no right),
 * -ENOMEM, the server's -EIO or -EOVERFLOW (not committed: the mark stays),
 * -RDAX_E_PROTOCOL (a server older than this request closes the
 * connection), or a connection error.
 */
int rdax_volume_clear_unsafe(struct rdax_conn *conn, const char *name,
			     struct rdax_unsafe_cleared **resultp);

/*
 * rdax_namespace_clear_unsafe -- clear the unsafe-shutdown mark of a
 * namespace -- named by its @path on the server as rdax_namespace_list
 * gives it, or with @path NULL by @namespace_id -- and the mark of every
 * volume in it, in one commit (needs the create right on every volume, a
 * rule for "*", under the server's --acl). Otherwise as
 * rdax_volume_clear_unsafe; -ENOENT: no such namespace.
 */
int rdax_namespace_clear_unsafe(struct rdax_conn *conn, const char *path, uint32_t namespace_id,
				struct rdax_unsafe_cleared **resultp);

/* rdax_unsafe_cleared_free -- free a clear's result; accepts NULL; sets *resultp = NULL */
void rdax_unsafe_cleared_free(struct rdax_unsafe_cleared **resultp);

/* --- volume management -------------------------------------------------- */

/* A volume as the server lists it. */
struct rdax_volume_info {
	const char *name; /* inside the array returned; freed with it */
	uint64_t size;
	uint32_t namespace_id;
	uint64_t namespace_offset;
};

/*
 * rdax_volume_create -- create volume @name of @size bytes in namespace
 * @namespace_id (RDAX_NAMESPACE_ANY: the server picks). The server may
 * require a multiple of 4 KiB. Context: blocks for one round trip.
 * Returns 0, -EINVAL (NULL, empty name, size 0; or the server's refusal of
 * the name/size), -EEXIST, -ENOSPC, -ENOENT (namespace), or a connection error.
 */
int rdax_volume_create(struct rdax_conn *conn, const char *name, uint64_t size,
		       uint32_t namespace_id);

/* rdax_volume_delete -- delete it and its data; 0, -EINVAL, -ENOENT, -EBUSY (open), ... */
int rdax_volume_delete(struct rdax_conn *conn, const char *name);

/*
 * rdax_volume_list -- all volumes: *infosp = an array of *countp entries (NULL
 * and 0 when there are none), to be freed with rdax_volume_info_free().
 * Returns 0, -EINVAL (NULL), -ENOMEM, or a connection error.
 */
int rdax_volume_list(struct rdax_conn *conn, struct rdax_volume_info **infosp, size_t *countp);

/* rdax_volume_info -- one volume by name into *infop (free with rdax_volume_info_free) */
int rdax_volume_info(struct rdax_conn *conn, const char *name, struct rdax_volume_info **infop);

/* rdax_volume_info_free -- free what list/info returned; accepts NULL; sets *infosp = NULL */
void rdax_volume_info_free(struct rdax_volume_info **infosp);

/*
 * rdax_volume_open -- open @name for I/O on this connection.
 * Returns 0 and sets *volp; -EINVAL, -ENOENT, -ENOMEM, or a connection error.
 */
int rdax_volume_open(struct rdax_conn *conn, const char *name, struct rdax_volume **volp);

/*
 * rdax_volume_close -- close the handle and free *volp (even when the close
 * request fails: the volume object is gone either way); sets *volp = NULL.
 * Accepts NULL and *volp == NULL. Returns 0, -EBUSY (asynchronous operations
 * on it not yet completed: nothing done), or the error of the close request.
 */
int rdax_volume_close(struct rdax_volume **volp);

/* rdax_volume_size -- its size in bytes (from the open reply) */
uint64_t rdax_volume_size(const struct rdax_volume *vol);

/*
 * rdax_volume_epoch -- a cluster volume: the epoch of the node serving it on
 * this connection, as its open reply said (after a resume, the new node's);
 * 0 for a volume of a single rdaxd
 */
uint64_t rdax_volume_epoch(const struct rdax_volume *vol);

/* rdax_volume_name -- its name */
const char *rdax_volume_name(const struct rdax_volume *vol);

/* --- synchronous I/O ---------------------------------------------------- */
/*
 * Common to all: nothing is sent if an argument is wrong: -EINVAL (NULL vol
 * or buf, len 0, unknown flags), -EOVERFLOW (offset + len wraps), -ERANGE
 * (beyond the end of the volume). Other errors come from the server or the
 * connection. Context: blocks until every request of the call is answered.
 */

/*
 * rdax_write -- write @len bytes at @offset. With RDAX_WRITE_FSYNC the call
 * returns 0 only once all @len bytes are durable. On error, an unknown part
 * of the range may have been written.
 */
int rdax_write(struct rdax_volume *vol, uint64_t offset, const void *buf, size_t len,
	       unsigned flags);

/* rdax_read -- read @len bytes at @offset into @buf; never-written bytes read as zeros */
int rdax_read(struct rdax_volume *vol, uint64_t offset, void *buf, size_t len);

/*
 * rdax_fsync -- make durable every write to [offset, offset + length) that
 * was sent on this connection before this call (synchronous, or submitted
 * and not failed -- completed or not), and every write of other connections
 * that had completed before it. @length 0: to the end of the volume.
 * *written_back (may be NULL) = bytes the server wrote back.
 */
int rdax_fsync(struct rdax_volume *vol, uint64_t offset, uint64_t length, uint64_t *written_back);

/* rdax_fsync_flags -- rdax_fsync with RDAX_FSYNC_* flags */
int rdax_fsync_flags(struct rdax_volume *vol, uint64_t offset, uint64_t length, unsigned flags,
		     uint64_t *written_back);

/* rdax_discard -- the range reads as zeros afterwards (durably); length 0 is -EINVAL */
int rdax_discard(struct rdax_volume *vol, uint64_t offset, uint64_t length);

/* Counters of a volume, from the server. */
struct rdax_volume_stat {
	uint64_t size;
	uint64_t dirty_bytes; /* written and not yet fsynced */
	uint64_t entries_4k;  /* dirty-tree entries by size */
	uint64_t entries_2m;
	uint64_t entries_1g;
	uint64_t tree_bytes;  /* memory of the dirty tree */
	uint64_t fsyncs;      /* fsyncs done on the volume */
	uint64_t fsync_bytes; /* bytes written back by them */
};

/* rdax_stat -- the volume's counters into *st */
int rdax_stat(struct rdax_volume *vol, struct rdax_volume_stat *st);

/* --- persistence testing ------------------------------------------------ */

/* The longest delay of rdax_powercut, in milliseconds (a day). */
#define RDAX_POWERCUT_MAX_DELAY_MS (24U * 3600U * 1000U)

/*
 * rdax_powercut -- cut the server's power (a daemon started with
 * --allow-powercut, every namespace in sim mode): every connection is
 * dropped -- this one too -- everything not written back is lost, and the
 * daemon serves again as a new incarnation (docs/persistence-testing.md).
 * @after > 0: after that many more acknowledged writes, discards and
 * fsyncs of any client (the last of them is acknowledged, nothing after
 * it); @delay_ms > 0: after that many milliseconds; both: whichever comes
 * first; neither: at once. *incarnation (may be NULL) gets the incarnation
 * the cut will end. The connection breaks when the cut happens: reconnect
 * and compare rdax_conn_incarnation() to know it did.
 * Returns 0 (armed; for a cut at once the connection breaks right after),
 * -EINVAL (@delay_ms over RDAX_POWERCUT_MAX_DELAY_MS), -EPERM (the daemon
 * does not allow power cuts), -EBUSY (a cut is already armed),
 * -RDAX_E_PROTOCOL (a server that does not know the request closes the
 * connection), or a connection error.
 */
int rdax_powercut(struct rdax_conn *conn, uint64_t after, unsigned delay_ms, uint64_t *incarnation);

/* --- registered buffers ------------------------------------------------ */
/*
 * rdax_buffer_alloc -- *bufp gets @len bytes (rounded up to whole pages,
 * zeroed) that belong to @conn. Over rdma:// they are registered with the
 * device at once and again after every reconnect, so a one-sided write from
 * within such a buffer, or a read into one, moves its bytes straight
 * between the buffer and the device: no copy through the library's bounce
 * ring (which any other memory takes; registering per operation costs more
 * than the copy). Over tcp:// it is plain memory.
 * Returns 0; -EINVAL; -ENOSPC (RDAX_BUFFERS_MAX buffers already); -ENOMEM
 * or -EAGAIN (mmap, or the memlock limit refused the registration).
 */
#define RDAX_BUFFERS_MAX 64
int rdax_buffer_alloc(struct rdax_conn *conn, size_t len, void **bufp);

/*
 * rdax_buffer_free -- unmap a buffer of rdax_buffer_alloc (NULL: nothing).
 * No operation on it may be in flight. Over rdma:// it first waits (briefly)
 * for the completions of one-sided operations still posted: a durable
 * write returns on the daemon's reply, which can precede its own
 * completion. rdax_disconnect frees the rest.
 * Returns 0, or -EINVAL (not a buffer of @conn).
 */
int rdax_buffer_free(struct rdax_conn *conn, void *buf);

/* --- asynchronous I/O --------------------------------------------------- */
/*
 * rdax_submit_* check their arguments like the synchronous calls, queue the
 * operation and return at once (sending what the socket takes without
 * blocking). The buffer must stay valid and unchanged (write) or unread
 * (read) until the operation's completion has been returned. An operation
 * longer than rdax_conn_max_payload() is split like a synchronous call and
 * completes once, when all of it is done.
 * Returns 0; -EINVAL, -EOVERFLOW, -ERANGE (arguments); -EAGAIN (queue depth
 * reached: reap completions first); the connection's error once it broke.
 */

enum rdax_op {
	RDAX_OP_WRITE = 1,
	RDAX_OP_READ,
	RDAX_OP_FSYNC,
};

struct rdax_completion {
	uint64_t cookie; /* as given to rdax_submit_* */
	int status;	 /* 0 or a negative code */
	enum rdax_op op;
	uint64_t bytes; /* write/read: bytes transferred (all on success); fsync: written back */
};

int rdax_submit_write(struct rdax_volume *vol, uint64_t offset, const void *buf, size_t len,
		      unsigned flags, uint64_t cookie);
int rdax_submit_read(struct rdax_volume *vol, uint64_t offset, void *buf, size_t len,
		     uint64_t cookie);
/* rdax_submit_fsync -- @length 0: to the end of the volume; @flags RDAX_FSYNC_* */
int rdax_submit_fsync(struct rdax_volume *vol, uint64_t offset, uint64_t length, unsigned flags,
		      uint64_t cookie);

/*
 * rdax_wait_completions -- store up to @max finished operations in @out and
 * return how many. Waits until at least @min are available, @timeout_ms
 * passes (-1: no limit, 0: just poll), or nothing is left in flight, and
 * meanwhile keeps sending queued requests. Completions come in the order the
 * operations finished, which is not always submission order (an fsync may
 * finish after later writes).
 * Synchronous calls on the connection also make progress; completions of
 * asynchronous operations that finish meanwhile wait here.
 * Returns the count (>= 0; may be < @min on timeout); -EINVAL (NULL conn or
 * out, max 0, min > max, timeout < -1); the connection's error when it is
 * broken and no completion is left to return. A failed operation's message:
 * rdax_conn_last_error().
 */
int rdax_wait_completions(struct rdax_conn *conn, struct rdax_completion *out, unsigned max,
			  unsigned min, int timeout_ms);

/* rdax_inflight -- asynchronous operations submitted and not yet returned as completions */
unsigned rdax_inflight(const struct rdax_conn *conn);

#ifdef __cplusplus
}
#endif

#endif
