/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmp_shapes.c -- the timing loops of the four shapes (cmp_shapes.h)
 */
#include "cmp_shapes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmp_util.h"

#define LAT_CAP (8u << 20) /* samples kept per shape: plenty for a few seconds */

static bool shape_selected(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

static bool measuring_time(uint64_t t0, uint64_t t1)
{
	return t0 && t1 > t0;
}

static int report(struct cmp_target *t, const char *what, int ret)
{
	fprintf(stderr, "cmp: %s failed: %s\n", what, t->error(t->ctx, ret));
	return ret;
}

enum qd1_kind { QD1_WRITE, QD1_WFLUSH, QD1_DURABLE };

/*
 * run_qd1 -- QD1 4 KiB random writes (plain or durable) or write+flush
 * pairs; latency per write or pair. @ops > 0: exactly that many after
 * ops / 10 of warm-up, else by time.
 */
static int run_qd1(struct cmp_target *t, double seconds, uint64_t ops, enum qd1_kind kind,
		   struct cmp_lat *lat, double *ops_per_s)
{
	uint8_t *buf = aligned_alloc(CMP_SMALL, CMP_SMALL);
	uint64_t rng = 12345, slots = t->size / CMP_SMALL, n = 0, i = 0;
	bool durable = kind == QD1_DURABLE;
	int ret = 0;
	if (!buf)
		return -ENOMEM;
	memset(buf, 0x5a + kind, CMP_SMALL);
	uint64_t warm_end = cmp_now_ns() + (uint64_t)(seconds * 1e8), t0 = 0, end = 0;
	for (bool measuring = false;; i++) {
		uint64_t off = (cmp_rng(&rng) % slots) * CMP_SMALL;
		uint64_t a = cmp_now_ns();
		if (!measuring && (ops ? i >= ops / 10 : a >= warm_end)) {
			measuring = true;
			t0 = a;
			end = ops ? UINT64_MAX : a + (uint64_t)(seconds * 1e9);
		}
		if (measuring && (ops ? n >= ops : a >= end))
			break;
		ret = t->write(t->ctx, off, buf, CMP_SMALL, durable);
		if (ret) {
			report(t, durable ? "durable write" : "write", ret);
			break;
		}
		if (kind == QD1_WFLUSH && (ret = t->flush(t->ctx))) {
			report(t, "flush", ret);
			break;
		}
		if (measuring) {
			cmp_lat_add(lat, cmp_now_ns() - a);
			n++;
		}
	}
	uint64_t t1 = cmp_now_ns();
	*ops_per_s = measuring_time(t0, t1) ? (double)n / ((double)(t1 - t0) / 1e9) : 0;
	free(buf);
	return ret;
}

/*
 * run_async -- writes of @bs bytes with @depth in flight for @seconds after a
 * warm-up: completions per second of the measured window, latency per write
 * from submission to the completion being seen. @sequential: offsets in
 * order (wrapping), else uniformly random. @ops > 0: count completions
 * instead of time (ops / 10 of warm-up, then ops).
 */
static int run_async(struct cmp_target *t, double seconds, uint64_t ops, uint32_t bs,
		     unsigned depth, bool sequential, struct cmp_lat *lat, double *ops_per_s)
{
	uint8_t *buf = aligned_alloc(CMP_SMALL, bs);
	uint64_t *submitted = calloc(depth, sizeof(*submitted));
	uint64_t *free_tags = calloc(depth, sizeof(*free_tags));
	uint64_t *done = calloc(depth, sizeof(*done));
	uint64_t rng = 67890, slots = t->size / bs, next = 0, counted = 0, completed = 0;
	unsigned nfree = depth;
	int ret = 0;
	if (!buf || !submitted || !free_tags || !done) {
		ret = -ENOMEM;
		goto out_free;
	}
	memset(buf, 0x3c, bs);
	for (unsigned i = 0; i < depth; i++)
		free_tags[i] = depth - 1 - i;

	uint64_t now = cmp_now_ns(), warm_end = now + (uint64_t)(seconds * 1e8);
	uint64_t t0 = 0, end = UINT64_MAX;
	bool stop = false;
	while (!stop || nfree < depth) {
		while (!stop && nfree > 0) {
			uint64_t slot = sequential ? next++ % slots : cmp_rng(&rng) % slots;
			uint64_t tag = free_tags[--nfree];
			submitted[tag] = cmp_now_ns();
			ret = t->submit(t->ctx, slot * bs, buf, bs, tag);
			if (ret) {
				report(t, "submit write", ret);
				stop = true;
				nfree++;
				break;
			}
		}
		if (nfree == depth)
			break;
		int n = t->reap(t->ctx, done, depth);
		if (n < 0) {
			ret = report(t, "write completion", n);
			goto out_free;
		}
		now = cmp_now_ns();
		for (int i = 0; i < n; i++) {
			uint64_t tag = done[i];
			if (t0 && now <= end && (!ops || counted < ops)) {
				cmp_lat_add(lat, now - submitted[tag]);
				counted++;
			}
			free_tags[nfree++] = tag;
		}
		completed += (uint64_t)n;
		if (!t0 && (ops ? completed >= ops / 10 : now >= warm_end)) {
			t0 = now;
			end = ops ? UINT64_MAX : now + (uint64_t)(seconds * 1e9);
		} else if (t0 && (ops ? counted >= ops : now >= end)) {
			stop = true;
			end = now;
		}
	}
	*ops_per_s = measuring_time(t0, end) && end != UINT64_MAX
			 ? (double)counted / ((double)(end - t0) / 1e9)
			 : 0;
out_free:
	free(buf);
	free(submitted);
	free(free_tags);
	free(done);
	return ret;
}

int cmp_prefill(struct cmp_target *t)
{
	uint8_t *buf = calloc(1, CMP_BIG);
	uint64_t tags[8], next = 0, slots = t->size / CMP_BIG;
	unsigned inflight = 0;
	int ret = 0;
	if (!buf)
		return -ENOMEM;
	while (next < slots || inflight > 0) {
		while (next < slots && inflight < 8) {
			if ((ret = t->submit(t->ctx, next * CMP_BIG, buf, CMP_BIG, next)))
				goto out;
			next++;
			inflight++;
		}
		int n = t->reap(t->ctx, tags, 8);
		if (n < 0) {
			ret = n;
			goto out;
		}
		inflight -= (unsigned)n;
	}
	ret = t->flush(t->ctx);
out:
	if (ret)
		report(t, "prefill", ret);
	free(buf);
	return ret;
}

int cmp_run_shapes(struct cmp_target *t, const struct cmp_shape_opts *o, FILE *out)
{
	static const struct {
		const char *name;
		bool async, sequential;
		enum qd1_kind kind;
		uint32_t bs;
		unsigned depth;
	} shapes[] = {
	    {"write", false, false, QD1_WRITE, CMP_SMALL, 1},
	    {"wflush", false, false, QD1_WFLUSH, CMP_SMALL, 1},
	    {"durable", false, false, QD1_DURABLE, CMP_SMALL, 1},
	    {"qd32", true, false, QD1_WRITE, CMP_SMALL, 32},
	    {"seq1m", true, true, QD1_WRITE, CMP_BIG, 8},
	};
	for (unsigned i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		if (!shape_selected(o->shapes, shapes[i].name))
			continue;
		struct cmp_lat lat;
		double rate = 0;
		int ret = cmp_lat_init(&lat, LAT_CAP);
		if (ret)
			return ret;
		if (o->ops)
			fprintf(stderr, "cmp: %s, %llu operations ...\n", shapes[i].name,
				(unsigned long long)o->ops);
		else
			fprintf(stderr, "cmp: %s for %.1f s ...\n", shapes[i].name, o->seconds);
		uint64_t w0 = cmp_now_ns(), c0 = cmp_cpu_time_ns(0);
		uint64_t s0 = o->server_pid > 0 ? cmp_cpu_time_ns(o->server_pid) : 0;
		if (shapes[i].async)
			ret = run_async(t, o->seconds, o->ops, shapes[i].bs, shapes[i].depth,
					shapes[i].sequential, &lat, &rate);
		else
			ret = run_qd1(t, o->seconds, o->ops, shapes[i].kind, &lat, &rate);
		/* CPU used per wall second, warm-up included: which side is the bottleneck */
		double wall = (double)(cmp_now_ns() - w0);
		double client_util = (double)(cmp_cpu_time_ns(0) - c0) / wall;
		double server_util =
		    o->server_pid > 0 ? (double)(cmp_cpu_time_ns(o->server_pid) - s0) / wall : -1;
		/* leave nothing dirty for the next shape (not timed) */
		if (!ret && (ret = t->flush(t->ctx)))
			report(t, "flush", ret);
		if (ret) {
			cmp_lat_free(&lat);
			return ret;
		}
		fprintf(out,
			", \"%s\": {\"block_bytes\": %u, \"depth\": %u, \"ops_per_s\": %.6g, "
			"\"mib_per_s\": %.6g, \"ops\": %zu",
			shapes[i].name, shapes[i].bs, shapes[i].depth, rate,
			rate * shapes[i].bs / 1048576.0, lat.n);
		cmp_json_lat(out, "lat", &lat, true);
		cmp_json_num(out, "client_cpu_util", client_util, true);
		if (server_util >= 0)
			cmp_json_num(out, "server_cpu_util", server_util, true);
		fprintf(out, "}");
		fflush(out);
		cmp_lat_free(&lat);
	}
	return 0;
}
