/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * metrics.h -- the daemon's counters: cheap to bump on the data path, summed at a scrape
 *
 * Every thread that counts (a worker loop, a pool thread) owns a shard: a
 * block of counters only that thread writes. A bump is a load and a store
 * of its own cache lines -- relaxed atomics, which compile to plain moves on
 * x86: no lock prefix, no line shared with another thread, nothing that
 * contends when every worker counts every request. A scrape (the metrics
 * endpoint, metrics_http.h) walks the list of shards and adds them up;
 * what it reads may be a bump or two behind, never torn.
 *
 * A shard is made on a thread's first bump (one mutex, once per thread) and
 * never freed: when its thread exits, it goes on a free list and the next
 * new thread takes it over, adding to the same counts -- so every counter
 * stays monotonic (Prometheus counters may not go down) and threads that
 * come and go do not grow the list.
 *
 * What is counted here is what happens (requests, bytes, errors, fsyncs,
 * connections); what is (dirty bytes, free space, media health) is read
 * from the engine at the scrape (metrics_expo.h).
 *
 * Thread safety: the bump functions from any thread, for that thread's
 * shard; metrics_sum() from any thread at any time.
 */
#ifndef RDAXD_METRICS_H
#define RDAXD_METRICS_H

#include <stdbool.h>
#include <stdint.h>

/* The transport a request came over: the "transport" label. */
enum metrics_transport {
	METRICS_TCP,  /* the rdax protocol over TCP */
	METRICS_RDMA, /* the rdax protocol over RDMA (its messages; one-sided writes are the NIC's)
		       */
	METRICS_NBD,  /* NBD over TCP or a unix socket */
	METRICS_TRANSPORT_COUNT
};

/* What a request asked for: the "op" label (NBD's commands map to the nearest one). */
enum metrics_op {
	METRICS_OP_HELLO,
	METRICS_OP_VOLUME_CREATE,
	METRICS_OP_VOLUME_DELETE,
	METRICS_OP_VOLUME_LIST,
	METRICS_OP_VOLUME_INFO,
	METRICS_OP_VOLUME_OPEN,
	METRICS_OP_VOLUME_CLOSE,
	METRICS_OP_WRITE,
	METRICS_OP_READ,
	METRICS_OP_FSYNC,   /* FSYNC; NBD FLUSH */
	METRICS_OP_DISCARD, /* DISCARD; NBD TRIM */
	METRICS_OP_STAT,
	METRICS_OP_NAMESPACE_LIST,
	METRICS_OP_UNSAFE_CLEAR,
	METRICS_OP_WRITE_ZEROES, /* NBD WRITE_ZEROES */
	METRICS_OP_OTHER,	 /* anything else (a refused unknown command) */
	METRICS_OP_COUNT
};

/*
 * Error codes counted one by one: errno values below 256, then the
 * RDAX_E_* codes (errors.h) from METRICS_ERR_RDAX_BASE; anything else in the
 * last slot.
 */
#define METRICS_ERR_RDAX_BASE 256
#define METRICS_ERR_SLOTS     (METRICS_ERR_RDAX_BASE + 16)

/*
 * fsync latency buckets, upper bounds in seconds: from 5 us (a small range
 * written back on the loop with CLWB) to 1 s (msync of a large volume on a
 * disk), about three per decade as Prometheus' own defaults go.
 */
#define METRICS_FSYNC_BUCKETS 17
extern const double metrics_fsync_bounds[METRICS_FSYNC_BUCKETS];

/* A sum of every shard (metrics_sum). */
struct metrics_totals {
	uint64_t requests[METRICS_TRANSPORT_COUNT][METRICS_OP_COUNT];
	uint64_t bytes[METRICS_TRANSPORT_COUNT][METRICS_OP_COUNT];
	uint64_t errors[METRICS_TRANSPORT_COUNT][METRICS_ERR_SLOTS];
	uint64_t conns_opened[METRICS_TRANSPORT_COUNT];
	uint64_t conns_closed[METRICS_TRANSPORT_COUNT];
	uint64_t fsync_buckets[METRICS_FSYNC_BUCKETS + 1]; /* not cumulative; last: +Inf */
	uint64_t fsync_count;
	uint64_t fsync_ns;	     /* total time */
	uint64_t fsync_written_back; /* bytes */
};

/* metrics_op_name -- the "op" label of @op ("write", "volume_open", ...) */
const char *metrics_op_name(enum metrics_op op);

/* metrics_transport_name -- the "transport" label of @t ("tcp", "rdma", "nbd") */
const char *metrics_transport_name(enum metrics_transport t);

/* metrics_err_slot -- the slot of error @code (negative or positive); metrics_err_name names it */
unsigned metrics_err_slot(int code);

/* metrics_err_code -- the (positive) code of @slot, 0 for the slot of other codes */
int metrics_err_code(unsigned slot);

/* metrics_request -- one request of @op over @t answered, moving @bytes of data (read, written) */
void metrics_request(enum metrics_transport t, enum metrics_op op, uint64_t bytes);

/* metrics_bytes -- @bytes of data moved by a request of @op counted already (a WRITE's payload) */
void metrics_bytes(enum metrics_transport t, enum metrics_op op, uint64_t bytes);

/* metrics_error -- an error reply with @code (negative or positive) over @t */
void metrics_error(enum metrics_transport t, int code);

/* metrics_conn -- a connection over @t began (@opened) or ended */
void metrics_conn(enum metrics_transport t, bool opened);

/* metrics_fsync -- an fsync of a volume took @ns nanoseconds and wrote back @written bytes */
void metrics_fsync(uint64_t ns, uint64_t written);

/* metrics_now_ns -- CLOCK_MONOTONIC in nanoseconds, for the durations above */
uint64_t metrics_now_ns(void);

/* metrics_sum -- every shard added up into *out */
void metrics_sum(struct metrics_totals *out);

#endif
