/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * powercut_load.c -- one load client of the power-cut test (on librdax)
 *
 *   powercut_load --url URL --volume NAME --loader K --loaders L --seed S
 *                 --rseed R --gen G --log PATH [--progress-fd FD]
 *
 * Writes random ranges of the regions it owns (region r belongs to loader
 * r % L) with content from pc_content(S, K, gen, offset), gen counting up
 * from G, and makes them durable in several ways: fsync of the written
 * range, fsync of the whole volume, durable writes (WRITE with fsync),
 * discards (durable on acknowledgement), and pipelined batches (writes in
 * flight behind an fsync). Every intent is logged before the request is
 * sent, every durability acknowledgement after it arrived (powercut_common.h);
 * after each acknowledgement one byte (1) goes to the progress fd so the
 * driver can choose when to cut; once connected and set up, the byte 'R'.
 *
 * With --meta it is the metadata loader instead: it creates volumes
 * "m<gen>" of random sizes, writes into them, and deletes them, logging
 * each create/delete intent and acknowledgement, so the driver can check
 * that the volume table after a cut holds every acknowledged change and
 * nothing that was not attempted.
 *
 * Runs until the connection breaks (the cut): exit 0. Any other error: a
 * message and exit 3.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "librdax.h"
#include "powercut_common.h"

struct load {
	struct rdax_conn *conn;
	struct rdax_volume *vol;
	unsigned loader, loaders;
	uint64_t seed;
	uint64_t rng;
	uint32_t gen;
	int log_fd;
	int progress_fd;
	uint8_t *buf; /* PC_REGION bytes per owned region (pipelined batches) */
	unsigned nowned;
	unsigned owned[PC_NREGIONS];
	uint64_t acks;
};

static void log_rec(struct load *l, uint32_t kind, uint32_t gen, uint64_t off, uint64_t len)
{
	struct pc_rec r = { .kind = kind, .gen = gen, .off = off, .len = len };
	if (write(l->log_fd, &r, sizeof(r)) != (ssize_t)sizeof(r)) {
		perror("powercut_load: log write");
		exit(3);
	}
}

static void progress(struct load *l)
{
	l->acks++;
	if (l->progress_fd >= 0) {
		char b = 1;
		/* non-blocking: when the driver is not reading, the byte is simply dropped */
		if (write(l->progress_fd, &b, 1) < 0 && errno != EAGAIN)
			l->progress_fd = -1;
	}
}

/* ready -- tell the driver this loader is connected and set up (never dropped) */
static void ready(struct load *l)
{
	char b = 'R';
	while (l->progress_fd >= 0 && write(l->progress_fd, &b, 1) < 0) {
		if (errno != EAGAIN)
			break;
		struct pollfd p = { .fd = l->progress_fd, .events = POLLOUT };
		poll(&p, 1, -1);
	}
}

/* check -- a failed call: the cut (exit 0) or a real error (exit 3) */
static void check(struct load *l, int ret, const char *what)
{
	if (ret >= 0)
		return;
	if (rdax_conn_status(l->conn) < 0)
		exit(0); /* the connection is gone: the daemon was cut */
	fprintf(stderr, "powercut_load %u: %s: %s (%s)\n", l->loader, what, rdax_strerror(ret),
		rdax_conn_last_error(l->conn));
	exit(3);
}

static uint64_t rnd(struct load *l, uint64_t n)
{
	return hx_splitmix64(&l->rng) % n;
}

/* pick_range -- a random range inside owned region @r: mostly small, sometimes all of it */
static void pick_range(struct load *l, unsigned r, uint64_t *off, uint64_t *len)
{
	uint64_t base, rlen;
	pc_region(r, &base, &rlen);
	uint64_t p = rnd(l, 100);
	if (p < 10) {
		*off = base;
		*len = rlen; /* all of it: for a big region, a huge entry */
		return;
	}
	uint64_t max = p < 75 ? 16384 : 256 << 10;
	*len = 1 + rnd(l, max < rlen ? max : rlen);
	*off = base + rnd(l, rlen - *len + 1);
}

static unsigned pick_region(struct load *l)
{
	return l->owned[rnd(l, l->nowned)];
}

/* do_write -- log the intent, write gen's content; returns the gen */
static uint32_t do_write(struct load *l, uint64_t off, uint64_t len, unsigned flags)
{
	uint32_t gen = l->gen++;
	pc_content(l->buf, len, l->seed, l->loader, gen, off);
	log_rec(l, PC_WRITE, gen, off, len);
	check(l, rdax_write(l->vol, off, l->buf, len, flags), "write");
	log_rec(l, PC_ACKED, gen, off, len);
	return gen;
}

/* op_write_fsync_range -- write, then fsync exactly that range */
static void op_write_fsync_range(struct load *l)
{
	uint64_t off, len;
	pick_range(l, pick_region(l), &off, &len);
	uint32_t gen = do_write(l, off, len, 0);
	check(l, rdax_fsync(l->vol, off, len, NULL), "fsync range");
	log_rec(l, PC_FSYNC, gen, off, len);
	progress(l);
}

/* op_durable_write -- WRITE with fsync: only this write is claimed durable */
static void op_durable_write(struct load *l)
{
	uint64_t off, len;
	pick_range(l, pick_region(l), &off, &len);
	uint32_t gen = do_write(l, off, len, RDAX_WRITE_FSYNC);
	log_rec(l, PC_DURABLE, gen, off, len);
	progress(l);
}

/* op_writes_fsync_all -- a few writes, then an fsync of the whole volume */
static void op_writes_fsync_all(struct load *l)
{
	unsigned n = 1 + (unsigned)rnd(l, 3);
	uint32_t gen = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t off, len;
		pick_range(l, pick_region(l), &off, &len);
		gen = do_write(l, off, len, 0);
	}
	check(l, rdax_fsync(l->vol, 0, 0, NULL), "fsync all");
	log_rec(l, PC_FSYNC, gen, 0, 0);
	progress(l);
}

/* op_write_only -- a write left pending (durable only with a later fsync) */
static void op_write_only(struct load *l)
{
	uint64_t off, len;
	pick_range(l, pick_region(l), &off, &len);
	do_write(l, off, len, 0);
}

/* op_discard -- discard a range (unaligned edges too): durable on acknowledgement */
static void op_discard(struct load *l)
{
	uint64_t off, len;
	pick_range(l, pick_region(l), &off, &len);
	uint32_t gen = l->gen++;
	log_rec(l, PC_DISCARD, gen, off, len);
	check(l, rdax_discard(l->vol, off, len), "discard");
	log_rec(l, PC_ACKED, gen, off, len);
	log_rec(l, PC_DURABLE, gen, off, len);
	progress(l);
}

/*
 * op_pipelined -- one write per owned region submitted at once; once all
 * completed, an fsync of the whole volume is submitted with one more write
 * per region behind it (in flight while the fsync runs). The fsync is
 * claimed only for the writes completed before it was submitted.
 */
static void op_pipelined(struct load *l)
{
	struct rdax_completion comp[2 * PC_NREGIONS + 1];
	uint64_t off[PC_NREGIONS], len[PC_NREGIONS];
	uint32_t last = 0;
	for (unsigned i = 0; i < l->nowned; i++) {
		pick_range(l, l->owned[i], &off[i], &len[i]);
		uint8_t *b = l->buf + (size_t)i * PC_REGION;
		uint32_t gen = l->gen++;
		pc_content(b, len[i], l->seed, l->loader, gen, off[i]);
		log_rec(l, PC_WRITE, gen, off[i], len[i]);
		check(l, rdax_submit_write(l->vol, off[i], b, len[i], 0, gen), "submit write");
		last = gen;
	}
	unsigned done = 0;
	while (done < l->nowned) {
		int n = rdax_wait_completions(l->conn, comp, PC_NREGIONS, 1, -1);
		check(l, n, "wait writes");
		for (int i = 0; i < n; i++) {
			check(l, comp[i].status, "async write");
			log_rec(l, PC_ACKED, (uint32_t)comp[i].cookie, 0, 0);
		}
		done += (unsigned)n;
	}
	uint32_t upto = last;
	check(l, rdax_submit_fsync(l->vol, 0, 0, 0, UINT64_MAX), "submit fsync");
	/* the buffers of the first batch are free again: reuse them behind the fsync */
	for (unsigned i = 0; i < l->nowned; i++) {
		pick_range(l, l->owned[i], &off[i], &len[i]);
		uint8_t *b = l->buf + (size_t)i * PC_REGION;
		uint32_t gen = l->gen++;
		pc_content(b, len[i], l->seed, l->loader, gen, off[i]);
		log_rec(l, PC_WRITE, gen, off[i], len[i]);
		check(l, rdax_submit_write(l->vol, off[i], b, len[i], 0, gen), "submit write");
	}
	done = 0;
	while (done < l->nowned + 1) {
		int n = rdax_wait_completions(l->conn, comp, 2 * PC_NREGIONS + 1, 1, -1);
		check(l, n, "wait batch");
		for (int i = 0; i < n; i++) {
			check(l, comp[i].status, "async op");
			if (comp[i].cookie == UINT64_MAX) {
				log_rec(l, PC_FSYNC, upto, 0, 0);
				progress(l);
			} else {
				log_rec(l, PC_ACKED, (uint32_t)comp[i].cookie, 0, 0);
			}
		}
		done += (unsigned)n;
	}
}

/* meta_delete -- delete "m<gen>" with its intent and acknowledgement logged */
static void meta_delete(struct load *l, uint32_t gen, uint64_t size)
{
	char name[32];
	snprintf(name, sizeof(name), "m%u", gen);
	log_rec(l, PC_DELETE, gen, 0, size);
	check(l, rdax_volume_delete(l->conn, name), "delete");
	log_rec(l, PC_DELETED, gen, 0, size);
	progress(l);
}

/*
 * meta_loop -- create, write, close and delete volumes forever (the --meta
 * loader); a quarter of them are kept for a while (at most 8 at a time, the
 * oldest deleted first) so cuts find volumes in every state
 */
static void meta_loop(struct load *l)
{
	uint32_t kept_gen[8];
	uint64_t kept_size[8];
	unsigned nkept = 0, oldest = 0;
	for (;;) {
		uint32_t gen = l->gen++;
		char name[32];
		snprintf(name, sizeof(name), "m%u", gen);
		uint64_t size = (1 + rnd(l, 512)) * 4096;
		log_rec(l, PC_CREATE, gen, 0, size);
		check(l, rdax_volume_create(l->conn, name, size, RDAX_NAMESPACE_ANY), "create");
		log_rec(l, PC_CREATED, gen, 0, size);
		progress(l);
		struct rdax_volume *v = NULL;
		check(l, rdax_volume_open(l->conn, name, &v), "open");
		uint64_t len = 1 + rnd(l, size < 65536 ? size : 65536);
		memset(l->buf, 0xab, len);
		check(l, rdax_write(v, size - len, l->buf, len, 0), "meta write");
		check(l, rdax_volume_close(&v), "close");
		if (rnd(l, 4) != 0) {
			meta_delete(l, gen, size);
			continue;
		}
		if (nkept == 8) {
			meta_delete(l, kept_gen[oldest], kept_size[oldest]);
			oldest = (oldest + 1) % 8;
			nkept--;
		}
		unsigned slot = (oldest + nkept) % 8;
		kept_gen[slot] = gen;
		kept_size[slot] = size;
		nkept++;
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: powercut_load --url URL --volume NAME --loader K --loaders L "
			"--seed S --rseed R --gen G --log PATH [--progress-fd FD]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "url", required_argument, NULL, 'u' },     { "volume", required_argument, NULL, 'v' },
		{ "loader", required_argument, NULL, 'k' },  { "loaders", required_argument, NULL, 'L' },
		{ "seed", required_argument, NULL, 's' },    { "rseed", required_argument, NULL, 'r' },
		{ "gen", required_argument, NULL, 'g' },     { "log", required_argument, NULL, 'l' },
		{ "progress-fd", required_argument, NULL, 'p' }, { "meta", no_argument, NULL, 'M' },
		{ NULL, 0, NULL, 0 },
	};
	/* static: what it holds stays reachable when check() exits mid-operation */
	static struct load l = { .progress_fd = -1, .log_fd = -1 };
	const char *url = NULL, *vol = NULL, *logp = NULL;
	bool meta = false;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'u': url = optarg; break;
		case 'v': vol = optarg; break;
		case 'k': l.loader = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'L': l.loaders = (unsigned)strtoul(optarg, NULL, 0); break;
		case 's': l.seed = strtoull(optarg, NULL, 0); break;
		case 'r': l.rng = strtoull(optarg, NULL, 0); break;
		case 'g': l.gen = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'l': logp = optarg; break;
		case 'p': l.progress_fd = atoi(optarg); break;
		case 'M': meta = true; break;
		default: usage();
		}
	}
	if (!url || !vol || !logp || l.loaders == 0 || (!meta && l.loader >= l.loaders) ||
	    l.gen == 0)
		usage();
	for (unsigned r = 0; r < PC_NREGIONS; r++)
		if (r % l.loaders == l.loader)
			l.owned[l.nowned++] = r;
	if (l.nowned == 0 && !meta)
		usage();
	if (meta)
		l.nowned = 1; /* one buffer */
	l.log_fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (l.log_fd < 0) {
		perror(logp);
		return 3;
	}
	if (l.progress_fd >= 0)
		fcntl(l.progress_fd, F_SETFL, O_NONBLOCK);
	l.buf = malloc((size_t)l.nowned * PC_REGION);
	if (!l.buf)
		return 3;
	struct rdax_conn_opts *o;
	if (rdax_conn_opts_new(&o) != 0)
		return 3;
	rdax_conn_opts_set_client_name(o, "powercut_load");
	rdax_conn_opts_set_queue_depth(o, 2 * PC_NREGIONS + 2);
	int ret = rdax_connect(url, o, &l.conn);
	rdax_conn_opts_delete(&o);
	if (ret) {
		fprintf(stderr, "powercut_load %u: connect %s: %s\n", l.loader, url,
			rdax_connect_last_error());
		return 3;
	}
	if (meta) {
		ready(&l);
		meta_loop(&l);
	}
	ret = rdax_volume_open(l.conn, vol, &l.vol);
	if (ret) {
		check(&l, ret, "open");
		fprintf(stderr, "powercut_load %u: open %s: %s\n", l.loader, vol,
			rdax_strerror(ret));
		return 3;
	}
	ready(&l);
	for (;;) {
		uint64_t p = rnd(&l, 100);
		if (p < 40)
			op_write_fsync_range(&l);
		else if (p < 55)
			op_durable_write(&l);
		else if (p < 65)
			op_writes_fsync_all(&l);
		else if (p < 77)
			op_write_only(&l);
		else if (p < 85)
			op_discard(&l);
		else
			op_pipelined(&l);
	}
}
