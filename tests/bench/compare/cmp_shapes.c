/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmp_shapes.c -- the timing loops of the shapes (cmp_shapes.h)
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

static int report(struct cmp_target *t, const char *what, int ret)
{
	fprintf(stderr, "cmp: %s failed: %s\n", what, t->error(t->ctx, ret));
	return ret;
}

enum qd1_kind { QD1_WRITE, QD1_WFLUSH, QD1_DURABLE, QD1_READ };

/*
 * What the measured window (warm-up excluded) cost: wall time, operations,
 * CPU time of this client and of the server process (all its threads), and
 * the server's context switches -- per operation, the figures that stay
 * meaningful on a shared machine where latencies do not.
 */
struct window {
	int server_pid;
	uint64_t t0, t1, ops;
	uint64_t client_cpu0, client_cpu1, server_cpu0, server_cpu1, server_cs0, server_cs1;
};

static void win_open(struct window *w, uint64_t now)
{
	w->t0 = now;
	w->client_cpu0 = cmp_cpu_time_ns(0);
	if (w->server_pid > 0) {
		w->server_cpu0 = cmp_cpu_time_ns(w->server_pid);
		w->server_cs0 = cmp_ctx_switches(w->server_pid);
	}
}

static void win_close(struct window *w, uint64_t now, uint64_t ops)
{
	w->t1 = now;
	w->ops = ops;
	w->client_cpu1 = cmp_cpu_time_ns(0);
	if (w->server_pid > 0) {
		w->server_cpu1 = cmp_cpu_time_ns(w->server_pid);
		w->server_cs1 = cmp_ctx_switches(w->server_pid);
	}
}

/*
 * run_qd1 -- QD1 4 KiB random writes (plain or durable), write+flush
 * pairs or reads; latency per write, pair or read. @ops > 0: exactly that many after
 * ops / 10 of warm-up, else by time.
 */
static int run_qd1(struct cmp_target *t, double seconds, uint64_t ops, enum qd1_kind kind,
		   struct cmp_lat *lat, struct window *w)
{
	uint8_t *buf = aligned_alloc(CMP_SMALL, CMP_SMALL);
	uint64_t rng = 12345, slots = t->size / CMP_SMALL, n = 0, i = 0;
	bool durable = kind == QD1_DURABLE;
	int ret = 0;
	if (!buf)
		return -ENOMEM;
	memset(buf, 0x5a + kind, CMP_SMALL);
	uint64_t warm_end = cmp_now_ns() + (uint64_t)(seconds * 1e8), end = 0;
	bool measuring = false;
	for (;; i++) {
		uint64_t off = (cmp_rng(&rng) % slots) * CMP_SMALL;
		uint64_t a = cmp_now_ns();
		if (!measuring && (ops ? i >= ops / 10 : a >= warm_end)) {
			measuring = true;
			win_open(w, a);
			end = ops ? UINT64_MAX : a + (uint64_t)(seconds * 1e9);
		}
		if (measuring && (ops ? n >= ops : a >= end))
			break;
		if (kind == QD1_READ)
			ret = t->read(t->ctx, off, buf, CMP_SMALL);
		else
			ret = t->write(t->ctx, off, buf, CMP_SMALL, durable);
		if (ret) {
			report(t,
			       kind == QD1_READ ? "read"
			       : durable	? "durable write"
						: "write",
			       ret);
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
	if (measuring)
		win_close(w, cmp_now_ns(), n);
	free(buf);
	return ret;
}

/*
 * run_async -- writes (@read: reads) of @bs bytes with @depth in flight for
 * @seconds after a warm-up: completions per second of the measured window,
 * latency per operation from submission to the completion being seen.
 * @sequential: offsets in order (wrapping), else uniformly random. @ops > 0:
 * count completions instead of time (ops / 10 of warm-up, then ops). Writes
 * share one buffer; each read in flight has its own.
 */
static int run_async(struct cmp_target *t, double seconds, uint64_t ops, uint32_t bs,
		     unsigned depth, bool sequential, bool read, struct cmp_lat *lat,
		     struct window *w)
{
	uint8_t *buf = aligned_alloc(CMP_SMALL, (size_t)bs * (read ? depth : 1));
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
	memset(buf, 0x3c, (size_t)bs * (read ? depth : 1));
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
			if (read)
				ret = t->submit_read(t->ctx, slot * bs, buf + (size_t)tag * bs, bs,
						     tag);
			else
				ret = t->submit(t->ctx, slot * bs, buf, bs, tag);
			if (ret) {
				report(t, read ? "submit read" : "submit write", ret);
				stop = true;
				nfree++;
				break;
			}
		}
		if (nfree == depth)
			break;
		int n = t->reap(t->ctx, done, depth);
		if (n < 0) {
			ret = report(t, read ? "read completion" : "write completion", n);
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
			win_open(w, now);
			end = ops ? UINT64_MAX : now + (uint64_t)(seconds * 1e9);
		} else if (t0 && !stop && (ops ? counted >= ops : now >= end)) {
			stop = true;
			end = now;
			win_close(w, now, counted);
		}
	}
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
		bool async, sequential, read;
		enum qd1_kind kind;
		uint32_t bs;
		unsigned depth;
	} shapes[] = {
	    {"write", false, false, false, QD1_WRITE, CMP_SMALL, 1},
	    {"wflush", false, false, false, QD1_WFLUSH, CMP_SMALL, 1},
	    {"durable", false, false, false, QD1_DURABLE, CMP_SMALL, 1},
	    {"qd32", true, false, false, QD1_WRITE, CMP_SMALL, 32},
	    {"seq1m", true, true, false, QD1_WRITE, CMP_BIG, 8},
	    {"read", false, false, true, QD1_READ, CMP_SMALL, 1},
	    {"rqd32", true, false, true, QD1_WRITE, CMP_SMALL, 32},
	    {"rseq1m", true, true, true, QD1_WRITE, CMP_BIG, 8},
	};
	for (unsigned i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		if (!shape_selected(o->shapes, shapes[i].name))
			continue;
		struct cmp_lat lat;
		struct window w = {.server_pid = o->server_pid};
		int ret = cmp_lat_init(&lat, LAT_CAP);
		if (ret)
			return ret;
		if (o->ops)
			fprintf(stderr, "cmp: %s, %llu operations ...\n", shapes[i].name,
				(unsigned long long)o->ops);
		else
			fprintf(stderr, "cmp: %s for %.1f s ...\n", shapes[i].name, o->seconds);
		if (shapes[i].async)
			ret = run_async(t, o->seconds, o->ops, shapes[i].bs, shapes[i].depth,
					shapes[i].sequential, shapes[i].read, &lat, &w);
		else
			ret = run_qd1(t, o->seconds, o->ops, shapes[i].kind, &lat, &w);
		/* leave nothing dirty for the next shape (not timed) */
		if (!ret && !o->no_flush && !shapes[i].read && (ret = t->flush(t->ctx)))
			report(t, "flush", ret);
		if (!ret && (w.t1 <= w.t0 || w.ops == 0)) {
			fprintf(stderr, "cmp: %s: nothing measured\n", shapes[i].name);
			ret = -EIO;
		}
		if (ret) {
			cmp_lat_free(&lat);
			return ret;
		}
		double wall = (double)(w.t1 - w.t0), ops = (double)w.ops;
		double rate = ops / (wall / 1e9);
		fprintf(out,
			", \"%s\": {\"block_bytes\": %u, \"depth\": %u, \"ops_per_s\": %.6g, "
			"\"mib_per_s\": %.6g, \"ops\": %llu, \"window_start_ns\": %llu, "
			"\"window_end_ns\": %llu",
			shapes[i].name, shapes[i].bs, shapes[i].depth, rate,
			rate * shapes[i].bs / 1048576.0, (unsigned long long)w.ops,
			(unsigned long long)w.t0, (unsigned long long)w.t1);
		/* CPU busy per wall second (100% on one side: that side is the bottleneck) */
		cmp_json_num(out, "client_cpu_util", (double)(w.client_cpu1 - w.client_cpu0) / wall,
			     true);
		cmp_json_num(out, "client_cpu_ns_per_op",
			     (double)(w.client_cpu1 - w.client_cpu0) / ops, true);
		if (o->server_pid > 0) {
			cmp_json_num(out, "server_cpu_util",
				     (double)(w.server_cpu1 - w.server_cpu0) / wall, true);
			cmp_json_num(out, "server_cpu_ns_per_op",
				     (double)(w.server_cpu1 - w.server_cpu0) / ops, true);
			cmp_json_num(out, "server_ctxsw_per_op",
				     (double)(w.server_cs1 - w.server_cs0) / ops, true);
		}
		cmp_json_lat(out, "lat", &lat, true);
		fprintf(out, "}");
		fflush(out);
		cmp_lat_free(&lat);
	}
	return 0;
}
