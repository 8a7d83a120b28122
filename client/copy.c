/* SPDX-License-Identifier: BSD-3-Clause */
/* copy.c -- file <-> volume copies with many requests in flight (rules in copy.h) */
#include "copy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "fdio.h"
#include "progress.h"

#define BLOCK 4096 /* export: the granularity of holes in the output file */

/* The buffers of the requests in flight: slot i's buffer is buf[i]. */
struct pool {
	struct rdax_conn *conn;
	size_t chunk;
	uint8_t *buf[COPY_DEPTH];
	size_t len[COPY_DEPTH];
	uint64_t off[COPY_DEPTH]; /* the slot's offset in the file */
	unsigned free_slots[COPY_DEPTH];
	unsigned nfree, inflight;
	int fd;
	bool holes;
	struct copy_stats *st;
	char *err;
	size_t errlen;
};

/* done_fn -- what to do with a slot whose request completed without error */
typedef int (*done_fn)(struct pool *p, unsigned slot);

/* conn_fail -- @code with the connection's message (or the code's name) in p->err */
static int conn_fail(struct pool *p, int code)
{
	const char *msg = rdax_conn_last_error(p->conn);
	rdax_seterr(p->err, p->errlen, "%s", msg && msg[0] ? msg : rdax_strerror(code));
	return code;
}

static int pool_init(struct pool *p, struct rdax_conn *conn, int fd, struct copy_stats *st,
		     char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	memset(st, 0, sizeof(*st));
	p->conn = conn;
	p->fd = fd;
	p->st = st;
	p->err = err;
	p->errlen = errlen;
	uint32_t mp = rdax_conn_max_payload(conn);
	p->chunk = mp < COPY_CHUNK_MAX ? mp : COPY_CHUNK_MAX;
	for (unsigned i = 0; i < COPY_DEPTH; i++) {
		if (!(p->buf[i] = malloc(p->chunk))) {
			rdax_seterr(err, errlen, "%s", strerror(ENOMEM));
			return -ENOMEM;
		}
		p->free_slots[p->nfree++] = i;
	}
	return 0;
}

/*
 * pool_reap -- wait for at least one completion and free its slot, after
 * @done for a successful one. The first failure is kept; later completions
 * are still reaped. Returns 0 or that failure.
 */
static int pool_reap(struct pool *p, done_fn done)
{
	struct rdax_completion c[COPY_DEPTH];
	int n = rdax_wait_completions(p->conn, c, COPY_DEPTH, 1, -1);
	if (n < 0)
		return conn_fail(p, n);
	int ret = 0;
	for (int k = 0; k < n; k++) {
		unsigned slot = (unsigned)c[k].cookie;
		if (c[k].status && !ret)
			ret = conn_fail(p, c[k].status);
		else if (!ret && done)
			ret = done(p, slot);
		p->inflight--;
		p->free_slots[p->nfree++] = slot;
	}
	return ret;
}

/* pool_fini -- wait for what is still in flight (after a failure: ignoring it) and free */
static int pool_fini(struct pool *p, done_fn done, int ret)
{
	while (p->inflight > 0) {
		int r = pool_reap(p, ret ? NULL : done);
		if (r && !ret)
			ret = r;
		if (r && rdax_conn_status(p->conn))
			break; /* the connection broke: nothing more will complete */
	}
	for (unsigned i = 0; i < COPY_DEPTH; i++)
		free(p->buf[i]);
	return ret;
}

/*
 * next_data -- the file's next data extent at or after @pos: [*data, *end),
 * both clamped to @len (*data == @len: only a hole is left). Without
 * SEEK_DATA support (*seek cleared) everything from @pos is data.
 */
static int next_data(int fd, uint64_t pos, uint64_t len, bool *seek, uint64_t *data, uint64_t *end)
{
	*data = pos;
	*end = len;
	if (!*seek)
		return 0;
	off_t d = lseek(fd, (off_t)pos, SEEK_DATA);
	if (d < 0 && errno == ENXIO) {
		*data = len; /* a hole to the end of the file */
		return 0;
	}
	if (d < 0 && (errno == EINVAL || errno == EOPNOTSUPP)) {
		*seek = false;
		return 0;
	}
	if (d < 0)
		return -errno;
	off_t h = lseek(fd, d, SEEK_HOLE);
	if (h < 0)
		return -errno;
	*data = (uint64_t)d < len ? (uint64_t)d : len;
	*end = (uint64_t)h < len ? (uint64_t)h : len;
	return 0;
}

/* import_done -- a write landed */
static int import_done(struct pool *p, unsigned slot)
{
	p->st->data_bytes += p->len[slot];
	return 0;
}

int copy_import(struct rdax_conn *conn, struct rdax_volume *vol, int fd, uint64_t len,
		uint64_t vol_off, const char *label, struct copy_stats *st, char *err,
		size_t errlen)
{
	struct pool p;
	int ret = pool_init(&p, conn, fd, st, err, errlen);
	if (ret)
		return pool_fini(&p, NULL, ret);
	struct progress bar;
	progress_begin(&bar, label, len);
	uint64_t pos = 0, data_end = 0;
	bool seek = true;
	while (!ret && (pos < len || p.inflight > 0)) {
		while (!ret && pos < len && p.nfree > 0) {
			if (pos >= data_end) {
				uint64_t data;
				if ((ret = next_data(fd, pos, len, &seek, &data, &data_end))) {
					rdax_seterr(err, errlen, "reading the file: %s",
						    strerror(-ret));
					break;
				}
				if (data == pos)
					continue;
				/*
				 * a hole: DISCARD it. A synchronous call queues behind the
				 * writes in flight, whose completions librdax keeps for
				 * pool_reap (docs/librdax.md); the ranges do not overlap.
				 */
				if ((ret = rdax_discard(vol, vol_off + pos, data - pos)))
					ret = conn_fail(&p, ret);
				st->hole_bytes += data - pos;
				pos = data;
				continue;
			}
			unsigned slot = p.free_slots[--p.nfree];
			size_t n = data_end - pos < p.chunk ? (size_t)(data_end - pos) : p.chunk;
			ssize_t got = fdio_read(fd, p.buf[slot], n, (int64_t)pos);
			if (got >= 0 && (size_t)got < n)
				got = -EIO;
			if (got < 0) {
				ret = (int)got;
				rdax_seterr(err, errlen, "reading the file at %llu: %s",
					    (unsigned long long)pos,
					    ret == -EIO ? "it got shorter" : strerror(-ret));
			} else if ((ret = rdax_submit_write(vol, vol_off + pos, p.buf[slot], n, 0,
							    slot))) {
				ret = conn_fail(&p, ret);
			}
			if (ret) {
				p.free_slots[p.nfree++] = slot;
				break;
			}
			p.len[slot] = n;
			p.inflight++;
			pos += n;
		}
		if (!ret && p.inflight > 0)
			ret = pool_reap(&p, import_done);
		progress_update(&bar, st->data_bytes + st->hole_bytes);
	}
	ret = pool_fini(&p, import_done, ret);
	progress_end(&bar, st->data_bytes + st->hole_bytes);
	return ret;
}

/* export_done -- a read arrived: write its non-zero blocks (all of it without holes) */
static int export_done(struct pool *p, unsigned slot)
{
	const uint8_t *b = p->buf[slot];
	size_t len = p->len[slot], i = 0;
	while (i < len) {
		size_t run = 0; /* bytes from i on that go to the file */
		while (i + run < len) {
			size_t n = len - i - run < BLOCK ? len - i - run : BLOCK;
			const uint8_t *blk = b + i + run;
			bool zero = blk[0] == 0 && memcmp(blk, blk + 1, n - 1) == 0;
			if (zero && p->holes)
				break;
			run += n;
		}
		if (run) {
			int ret = fdio_write(p->fd, b + i, run, (int64_t)(p->off[slot] + i));
			if (ret) {
				rdax_seterr(p->err, p->errlen, "writing the file: %s",
					    strerror(-ret));
				return ret;
			}
			p->st->data_bytes += run;
			i += run;
		} else {
			size_t n = len - i < BLOCK ? len - i : BLOCK;
			p->st->hole_bytes += n;
			i += n;
		}
	}
	return 0;
}

int copy_export(struct rdax_conn *conn, struct rdax_volume *vol, int fd, bool holes,
		const char *label, struct copy_stats *st, char *err, size_t errlen)
{
	struct pool p;
	int ret = pool_init(&p, conn, fd, st, err, errlen);
	if (ret)
		return pool_fini(&p, NULL, ret);
	p.holes = holes;
	uint64_t len = rdax_volume_size(vol), pos = 0;
	struct progress bar;
	progress_begin(&bar, label, len);
	while (!ret && (pos < len || p.inflight > 0)) {
		while (!ret && pos < len && p.nfree > 0) {
			unsigned slot = p.free_slots[--p.nfree];
			size_t n = len - pos < p.chunk ? (size_t)(len - pos) : p.chunk;
			if ((ret = rdax_submit_read(vol, pos, p.buf[slot], n, slot))) {
				p.free_slots[p.nfree++] = slot;
				ret = conn_fail(&p, ret);
				break;
			}
			p.len[slot] = n;
			p.off[slot] = pos;
			p.inflight++;
			pos += n;
		}
		if (!ret && p.inflight > 0)
			ret = pool_reap(&p, export_done);
		progress_update(&bar, st->data_bytes + st->hole_bytes);
	}
	ret = pool_fini(&p, export_done, ret);
	progress_end(&bar, st->data_bytes + st->hole_bytes);
	return ret;
}
