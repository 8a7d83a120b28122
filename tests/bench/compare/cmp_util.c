/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmp_util.c -- clocks, pinning, latency percentiles and JSON output of the
 * comparison helpers
 */
#include "cmp_util.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

uint64_t cmp_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int cmp_pin(int cpu)
{
	if (cpu < 0)
		return 0;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) < 0 ? -errno : 0;
}

int cmp_cpu_now(void)
{
	return sched_getcpu();
}

uint64_t cmp_cpu_time_ns(int pid)
{
	if (pid == 0) {
		struct rusage ru;
		if (getrusage(RUSAGE_SELF, &ru))
			return 0;
		return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
			   1000000000ULL +
		       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ULL;
	}
	char path[64], line[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(line, 1, sizeof(line) - 1, f);
	fclose(f);
	line[n] = '\0';
	/* fields 14 and 15 (utime, stime, in clock ticks), counted after the ")" ending the name */
	char *p = strrchr(line, ')');
	unsigned long long ut = 0, st = 0;
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	long hz = sysconf(_SC_CLK_TCK);
	return (ut + st) * (1000000000ULL / (uint64_t)(hz > 0 ? hz : 100));
}

uint64_t cmp_ctx_switches(int pid)
{
	char path[64], line[256];
	uint64_t sum = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *dir = opendir(path);
	if (!dir)
		return 0;
	for (struct dirent *de; (de = readdir(dir)) != NULL;) {
		if (de->d_name[0] == '.')
			continue;
		char sp[64 + sizeof(de->d_name) + 8];
		snprintf(sp, sizeof(sp), "%s/%s/status", path, de->d_name);
		FILE *f = fopen(sp, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned long long v;
			if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1 ||
			    sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
				sum += v;
		}
		fclose(f);
	}
	closedir(dir);
	return sum;
}

uint64_t cmp_rng(uint64_t *state)
{
	uint64_t x = (*state += 0x9e3779b97f4a7c15ULL);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

int cmp_lat_init(struct cmp_lat *l, size_t cap)
{
	memset(l, 0, sizeof(*l));
	l->v = calloc(cap ? cap : 1, sizeof(*l->v));
	if (!l->v)
		return -ENOMEM;
	l->cap = cap ? cap : 1;
	return 0;
}

void cmp_lat_free(struct cmp_lat *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void cmp_lat_add(struct cmp_lat *l, uint64_t ns)
{
	if (l->n < l->cap) {
		l->v[l->n++] = ns;
		l->sorted = false;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

double cmp_lat_pct(struct cmp_lat *l, double p)
{
	if (l->n == 0)
		return 0;
	if (!l->sorted) {
		qsort(l->v, l->n, sizeof(*l->v), cmp_u64);
		l->sorted = true;
	}
	/* nearest rank: the smallest sample with at least p% of the samples at or below it */
	double rank = p / 100.0 * (double)l->n;
	size_t i = rank <= 1 ? 0 : (size_t)(rank + 0.999999) - 1;
	return (double)l->v[i < l->n ? i : l->n - 1];
}

double cmp_lat_mean(const struct cmp_lat *l)
{
	double sum = 0;
	for (size_t i = 0; i < l->n; i++)
		sum += (double)l->v[i];
	return l->n ? sum / (double)l->n : 0;
}

void cmp_json_lat(FILE *f, const char *name, struct cmp_lat *l, bool comma)
{
	fprintf(f,
		"%s\"%s\": {\"n\": %zu, \"mean_ns\": %.0f, \"min_ns\": %.0f, \"p50_ns\": %.0f, "
		"\"p90_ns\": %.0f, \"p99_ns\": %.0f, \"p99.9_ns\": %.0f, \"max_ns\": %.0f}",
		comma ? ", " : "", name, l->n, cmp_lat_mean(l), cmp_lat_pct(l, 0),
		cmp_lat_pct(l, 50), cmp_lat_pct(l, 90), cmp_lat_pct(l, 99), cmp_lat_pct(l, 99.9),
		cmp_lat_pct(l, 100));
}

void cmp_json_num(FILE *f, const char *name, double value, bool comma)
{
	fprintf(f, "%s\"%s\": %.15g", comma ? ", " : "", name, value);
}

void cmp_json_str(FILE *f, const char *name, const char *value, bool comma)
{
	fprintf(f, "%s\"%s\": \"", comma ? ", " : "", name);
	for (const char *p = value; *p; p++) {
		if (*p == '"' || *p == '\\')
			fputc('\\', f);
		if ((unsigned char)*p >= 0x20)
			fputc(*p, f);
	}
	fputc('"', f);
}

uint64_t cmp_parse_size(const char *s)
{
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	unsigned shift = 0;
	switch (*end) {
	case 'K':
	case 'k':
		shift = 10;
		end++;
		break;
	case 'M':
	case 'm':
		shift = 20;
		end++;
		break;
	case 'G':
	case 'g':
		shift = 30;
		end++;
		break;
	case '\0':
		break;
	default:
		return 0;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return 0;
	return (uint64_t)v << shift;
}
