/* SPDX-License-Identifier: BSD-3-Clause */
/* metrics.c -- per-thread counter shards, summed at a scrape (metrics.h) */
#include "metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "log.h"

const double metrics_fsync_bounds[METRICS_FSYNC_BUCKETS] = {
    5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
    5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,  0.25,   0.5,  1.0,
};

/* One thread's counters: written by that thread only, read by a scrape. */
struct metrics_shard {
	_Atomic uint64_t requests[METRICS_TRANSPORT_COUNT][METRICS_OP_COUNT];
	_Atomic uint64_t bytes[METRICS_TRANSPORT_COUNT][METRICS_OP_COUNT];
	_Atomic uint64_t errors[METRICS_TRANSPORT_COUNT][METRICS_ERR_SLOTS];
	_Atomic uint64_t conns_opened[METRICS_TRANSPORT_COUNT];
	_Atomic uint64_t conns_closed[METRICS_TRANSPORT_COUNT];
	_Atomic uint64_t fsync_buckets[METRICS_FSYNC_BUCKETS + 1];
	_Atomic uint64_t fsync_count, fsync_ns, fsync_written_back;
	struct metrics_shard *next;	 /* every shard (metrics_shards) */
	struct metrics_shard *next_free; /* shards of exited threads */
};

static pthread_mutex_t shards_lock = PTHREAD_MUTEX_INITIALIZER;
static struct metrics_shard *_Atomic metrics_shards; /* pushed at the head, never removed */
static struct metrics_shard *free_shards;
static pthread_key_t shard_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static __thread struct metrics_shard *my_shard __attribute__((tls_model("initial-exec")));

/* Where a thread counts when no shard could be made (out of memory): counts are lost, not wrong. */
static struct metrics_shard lost_shard;

static const char *const op_names[METRICS_OP_COUNT] = {
    [METRICS_OP_HELLO] = "hello",
    [METRICS_OP_VOLUME_CREATE] = "volume_create",
    [METRICS_OP_VOLUME_DELETE] = "volume_delete",
    [METRICS_OP_VOLUME_LIST] = "volume_list",
    [METRICS_OP_VOLUME_INFO] = "volume_info",
    [METRICS_OP_VOLUME_OPEN] = "volume_open",
    [METRICS_OP_VOLUME_CLOSE] = "volume_close",
    [METRICS_OP_WRITE] = "write",
    [METRICS_OP_READ] = "read",
    [METRICS_OP_FSYNC] = "fsync",
    [METRICS_OP_DISCARD] = "discard",
    [METRICS_OP_STAT] = "stat",
    [METRICS_OP_NAMESPACE_LIST] = "namespace_list",
    [METRICS_OP_UNSAFE_CLEAR] = "unsafe_clear",
    [METRICS_OP_WRITE_ZEROES] = "write_zeroes",
    [METRICS_OP_OTHER] = "other",
};

static const char *const transport_names[METRICS_TRANSPORT_COUNT] = {
    [METRICS_TCP] = "tcp",
    [METRICS_RDMA] = "rdma",
    [METRICS_NBD] = "nbd",
};

const char *metrics_op_name(enum metrics_op op)
{
	return (unsigned)op < METRICS_OP_COUNT ? op_names[op] : "other";
}

const char *metrics_transport_name(enum metrics_transport t)
{
	return (unsigned)t < METRICS_TRANSPORT_COUNT ? transport_names[t] : "unknown";
}

unsigned metrics_err_slot(int code)
{
	unsigned c = (unsigned)(code < 0 ? -code : code);
	if (c > 0 && c < METRICS_ERR_RDAX_BASE)
		return c;
	if (c >= RDAX_E_FIRST && c < RDAX_E_LAST &&
	    c - RDAX_E_FIRST < METRICS_ERR_SLOTS - METRICS_ERR_RDAX_BASE - 1)
		return METRICS_ERR_RDAX_BASE + (c - RDAX_E_FIRST);
	return METRICS_ERR_SLOTS - 1;
}

int metrics_err_code(unsigned slot)
{
	if (slot > 0 && slot < METRICS_ERR_RDAX_BASE)
		return (int)slot;
	if (slot >= METRICS_ERR_RDAX_BASE && slot < METRICS_ERR_SLOTS - 1)
		return RDAX_E_FIRST + (int)(slot - METRICS_ERR_RDAX_BASE);
	return 0;
}

/* shard_release -- a thread with a shard exits: its shard waits for the next thread */
static void shard_release(void *arg)
{
	struct metrics_shard *s = arg;
	if (s == &lost_shard)
		return;
	pthread_mutex_lock(&shards_lock);
	s->next_free = free_shards;
	free_shards = s;
	pthread_mutex_unlock(&shards_lock);
}

static void key_make(void)
{
	if (pthread_key_create(&shard_key, shard_release) != 0)
		LOG_WARN(
		    "pthread_key_create failed: metrics shards of exited threads are not reused");
}

/* shard_get -- this thread's shard, made (or taken over) on its first bump */
static struct metrics_shard *shard_get(void)
{
	struct metrics_shard *s = my_shard;
	if (__builtin_expect(s != NULL, 1))
		return s;
	pthread_once(&key_once, key_make);
	pthread_mutex_lock(&shards_lock);
	s = free_shards;
	if (s) {
		free_shards = s->next_free;
	} else {
		s = calloc(1, sizeof(*s));
		if (s) {
			s->next = atomic_load(&metrics_shards);
			atomic_store(&metrics_shards, s); /* release: a scrape sees it whole */
		}
	}
	pthread_mutex_unlock(&shards_lock);
	if (!s)
		return my_shard = &lost_shard;
	pthread_setspecific(shard_key, s);
	return my_shard = s;
}

/* bump -- add @n to a counter only this thread writes: a plain load and store, no lock prefix */
static inline void bump(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

void metrics_request(enum metrics_transport t, enum metrics_op op, uint64_t bytes)
{
	if ((unsigned)t >= METRICS_TRANSPORT_COUNT || (unsigned)op >= METRICS_OP_COUNT)
		return;
	struct metrics_shard *s = shard_get();
	bump(&s->requests[t][op], 1);
	if (bytes)
		bump(&s->bytes[t][op], bytes);
}

void metrics_bytes(enum metrics_transport t, enum metrics_op op, uint64_t bytes)
{
	if ((unsigned)t >= METRICS_TRANSPORT_COUNT || (unsigned)op >= METRICS_OP_COUNT)
		return;
	bump(&shard_get()->bytes[t][op], bytes);
}

void metrics_error(enum metrics_transport t, int code)
{
	if ((unsigned)t >= METRICS_TRANSPORT_COUNT || code == 0)
		return;
	bump(&shard_get()->errors[t][metrics_err_slot(code)], 1);
}

void metrics_conn(enum metrics_transport t, bool opened)
{
	if ((unsigned)t >= METRICS_TRANSPORT_COUNT)
		return;
	struct metrics_shard *s = shard_get();
	bump(opened ? &s->conns_opened[t] : &s->conns_closed[t], 1);
}

void metrics_fsync(uint64_t ns, uint64_t written)
{
	struct metrics_shard *s = shard_get();
	double sec = (double)ns / 1e9;
	unsigned b = 0;
	while (b < METRICS_FSYNC_BUCKETS && sec > metrics_fsync_bounds[b])
		b++;
	bump(&s->fsync_buckets[b], 1);
	bump(&s->fsync_count, 1);
	bump(&s->fsync_ns, ns);
	bump(&s->fsync_written_back, written);
}

uint64_t metrics_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* shard_add -- add one shard into *out */
static void shard_add(struct metrics_shard *s, struct metrics_totals *out)
{
#define ADD(field) out->field += atomic_load_explicit(&s->field, memory_order_relaxed)
	for (unsigned t = 0; t < METRICS_TRANSPORT_COUNT; t++) {
		for (unsigned o = 0; o < METRICS_OP_COUNT; o++) {
			ADD(requests[t][o]);
			ADD(bytes[t][o]);
		}
		for (unsigned e = 0; e < METRICS_ERR_SLOTS; e++)
			ADD(errors[t][e]);
		ADD(conns_opened[t]);
		ADD(conns_closed[t]);
	}
	for (unsigned b = 0; b <= METRICS_FSYNC_BUCKETS; b++)
		ADD(fsync_buckets[b]);
	ADD(fsync_count);
	ADD(fsync_ns);
	ADD(fsync_written_back);
#undef ADD
}

void metrics_sum(struct metrics_totals *out)
{
	memset(out, 0, sizeof(*out));
	for (struct metrics_shard *s = atomic_load(&metrics_shards); s; s = s->next)
		shard_add(s, out);
	shard_add(&lost_shard, out);
}
