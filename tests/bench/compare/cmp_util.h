/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmp_util.h -- what the comparison helpers share: clocks, pinning,
 * latency samples and their percentiles, JSON output
 *
 * Each helper prints one JSON object on stdout (the report generator reads
 * it) and its progress on stderr. Times are in nanoseconds in the JSON and
 * never judged: the helpers measure, the report compares.
 *
 * Thread safety: a struct cmp_lat belongs to one thread; the rest is
 * stateless.
 */
#ifndef RDAX_CMP_UTIL_H
#define RDAX_CMP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* cmp_now_ns -- CLOCK_MONOTONIC in nanoseconds */
uint64_t cmp_now_ns(void);

/* cmp_pin -- pin the calling thread to @cpu (-1: leave as is); 0 or -errno */
int cmp_pin(int cpu);

/* cmp_cpu_now -- the CPU the calling thread runs on, -1 if unknown */
int cmp_cpu_now(void);

/*
 * cmp_cpu_time_ns -- CPU time (user + system) used so far by process @pid,
 * all its threads; @pid 0: this process. 0 if it cannot be read.
 */
uint64_t cmp_cpu_time_ns(int pid);

/*
 * cmp_ctx_switches -- context switches (voluntary + involuntary) of every
 * live thread of process @pid so far; 0 if they cannot be read
 */
uint64_t cmp_ctx_switches(int pid);

/* cmp_rng -- the next value of a splitmix64 generator (state advanced) */
uint64_t cmp_rng(uint64_t *state);

/* A bounded set of latency samples (ns); samples beyond the capacity are dropped. */
struct cmp_lat {
	uint64_t *v;
	size_t n, cap;
	bool sorted;
};

/* cmp_lat_init -- room for @cap samples; 0 or -ENOMEM */
int cmp_lat_init(struct cmp_lat *l, size_t cap);

/* cmp_lat_free -- release the samples; accepts a zeroed struct */
void cmp_lat_free(struct cmp_lat *l);

/* cmp_lat_add -- record one sample */
void cmp_lat_add(struct cmp_lat *l, uint64_t ns);

/* cmp_lat_pct -- the @p-th percentile (0..100), nearest rank; 0 when empty */
double cmp_lat_pct(struct cmp_lat *l, double p);

/* cmp_lat_mean -- the mean of the samples; 0 when empty */
double cmp_lat_mean(const struct cmp_lat *l);

/*
 * cmp_json_lat -- print `"name": {"n":..,"mean_ns":..,"p50_ns":..,...}` with
 * the percentiles the report plots (50, 90, 99, 99.9) and min/max.
 * @comma: put a comma before it.
 */
void cmp_json_lat(FILE *f, const char *name, struct cmp_lat *l, bool comma);

/* cmp_json_num -- print `"name": value` (@comma: a comma before it) */
void cmp_json_num(FILE *f, const char *name, double value, bool comma);

/* cmp_json_str -- print `"name": "value"`, escaping quotes and backslashes */
void cmp_json_str(FILE *f, const char *name, const char *value, bool comma);

/* cmp_parse_size -- "4K", "1M", "8G", "123" (powers of 1024); 0 on a malformed string */
uint64_t cmp_parse_size(const char *s);

#endif
