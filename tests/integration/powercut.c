/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * powercut.c -- power cuts under load: every acknowledged fsync survives
 *
 *   powercut [--cuts N] [--seed S] [--loaders L] [--clean-every K] [--control] [--keep]
 *            [--verbose]
 *
 * rdaxd runs in sim mode (persist.h): a SIGKILL is a power cut that keeps
 * exactly what was written back. Each round starts L load clients
 * (powercut_load) on one volume, waits until they have received a random
 * number of durability acknowledgements, kills the daemon with SIGKILL,
 * restarts it, reads the whole volume back and checks it against the
 * loaders' logs.
 *
 * The rule, per byte b of a region (each region has exactly one writer):
 *   D(b) = the newest operation on b that an acknowledged fsync (or durable
 *          write / discard acknowledgement) covered -- or the state verified
 *          after the previous cut, or zeros;
 *   P(b) = the operations on b logged (sent, maybe in flight, maybe
 *          acknowledged but not yet fsynced) after D(b).
 *   After the cut, b must hold the content D(b) put there, or the content of
 *   one of P(b): an unacknowledged or un-fsynced write may legitimately have
 *   landed (wholly, or some of its cache lines), but nothing acknowledged
 *   as durable may be lost, and nothing older than D(b) may come back.
 * A loss is reported with the byte, its loader, and the candidates.
 *
 * After a verified round the volume's actual content becomes the new D, so
 * rounds build on each other; one daemon namespace lives through all cuts.
 *
 * Beside the data loaders runs one metadata loader (powercut_load --meta)
 * that creates, writes and deletes volumes "m<gen>". After the cut the
 * volume table must hold every volume whose create was acknowledged and
 * whose delete was not attempted, none whose delete was acknowledged, none
 * that was never attempted, and each with its size; the metadata must load
 * at every restart. The driver deletes the leftovers after each check.
 *
 * --clean-every K: after every K cuts one extra round ends with SIGTERM
 * instead (the daemon must exit 0); there every write whose completion was
 * reported counts as durable too, since a clean stop writes back everything.
 *
 * --control runs the daemon with RDAX_FAULTS=skip-writeback (the first entry
 * of every fsync is not written back) and inverts the verdict: exit 0 when a
 * loss was detected (it stops at the first), 1 if all cuts passed -- i.e.
 * the check could not see the broken mechanism. --control-fault F is
 * --control with fault F instead (common/faults.h; over RDMA,
 * rdma-durable-unmarked breaks the durable write notices alone).
 *
 * Exit: 0 pass, 1 loss detected (or, with --control, not detected),
 * 2 usage, 3 harness or daemon failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "librdax.h"
#include "powercut_common.h"

#ifndef POWERCUT_LOAD_PATH
#error "POWERCUT_LOAD_PATH must be defined by the build"
#endif

#define MAX_LOADERS PC_NBIG
#define VOLUME "pc"
#define LOADER_EXIT_TIMEOUT_MS 60000
#define ACK_WAIT_TIMEOUT_MS 120000
/* generations per loader per round (far more operations than a round makes) */
#define GEN_SPAN (1u << 18)

enum { META_NONE, META_CREATING, META_CREATED, META_DELETING, META_DELETED };

struct pending {
	uint32_t gen;
	bool discard;
	uint64_t off, len;
};

struct loader_state {
	struct pending *p;
	size_t n, cap;
};

struct pc {
	uint64_t seed;
	unsigned cuts, loaders;
	bool control, keep, verbose;
	const char *control_fault; /* RDAX_FAULTS of the daemon under --control */
	unsigned clean_every; /* after every N cuts, one round ends with SIGTERM instead */
	bool clean_round;     /* this round ends with a clean stop */
	char dir[256];
	struct hx_daemon d;
	uint32_t *durable;     /* per byte: generation of the durable content (0: zeros) */
	uint8_t *discarded;    /* per generation of this round: 1 if a discard */
	uint32_t round_gen0;   /* first generation of this round */
	uint32_t next_gen;
	struct loader_state ls[MAX_LOADERS];
	uint8_t *got, *want;
	/* the metadata loader's volumes of this round, by gen - meta_gen0 */
	uint32_t meta_gen0;
	uint8_t *meta_state; /* META_* */
	uint64_t *meta_size;
	/* statistics */
	uint64_t total_acks, total_ops, lost_bytes;
};

static unsigned owner_of(const struct pc *pc, uint64_t off)
{
	return pc_region_of(off) % pc->loaders;
}

static bool gen_is_discard(const struct pc *pc, uint32_t gen)
{
	return gen >= pc->round_gen0 && gen < pc->next_gen && pc->discarded[gen - pc->round_gen0];
}

/* content -- what generation @gen of the owner of @off put at [off, off + len) */
static void content(const struct pc *pc, uint32_t gen, uint64_t off, size_t len, uint8_t *out)
{
	if (gen == 0 || gen_is_discard(pc, gen))
		memset(out, 0, len);
	else
		pc_content(out, len, pc->seed, owner_of(pc, off), gen, off);
}

/* make_durable -- @w's bytes in [off, off + len) now hold at least generation w->gen */
static void make_durable(struct pc *pc, const struct pending *w, uint64_t off, uint64_t len)
{
	uint64_t s = w->off > off ? w->off : off;
	uint64_t e1 = w->off + w->len, e2 = off + len;
	uint64_t e = e1 < e2 ? e1 : e2;
	for (uint64_t b = s; b < e; b++)
		if (pc->durable[b] < w->gen)
			pc->durable[b] = w->gen;
}

/* replay -- apply loader @k's log; returns the number of acks or -1 */
static long replay(struct pc *pc, unsigned k, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "powercut: %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct loader_state *ls = &pc->ls[k];
	struct pc_rec r;
	long acks = 0;
	while (fread(&r, sizeof(r), 1, f) == 1) {
		if (r.kind == PC_WRITE || r.kind == PC_DISCARD) {
			if (r.gen < pc->round_gen0 + k * GEN_SPAN ||
			    r.gen >= pc->round_gen0 + (k + 1) * GEN_SPAN || r.len == 0 ||
			    r.off + r.len > PC_VOLUME_SIZE || pc_region_of(r.off) == PC_NREGIONS ||
			    pc_region_of(r.off) != pc_region_of(r.off + r.len - 1) ||
			    owner_of(pc, r.off) != k) {
				fprintf(stderr, "powercut: loader %u: bad record gen %u [%llu, +%llu)\n",
					k, r.gen, (unsigned long long)r.off, (unsigned long long)r.len);
				fclose(f);
				return -1;
			}
			if (r.gen >= pc->next_gen)
				pc->next_gen = r.gen + 1;
			if (r.kind == PC_DISCARD)
				pc->discarded[r.gen - pc->round_gen0] = 1;
			if (ls->n == ls->cap) {
				ls->cap = ls->cap ? 2 * ls->cap : 64;
				ls->p = realloc(ls->p, ls->cap * sizeof(*ls->p));
				if (!ls->p)
					abort();
			}
			ls->p[ls->n++] = (struct pending){ r.gen, r.kind == PC_DISCARD, r.off, r.len };
			pc->total_ops++;
		} else if (r.kind == PC_FSYNC || r.kind == PC_DURABLE ||
			   (r.kind == PC_ACKED && pc->clean_round)) {
			/* after a clean stop, every completed write counts as durable */
			if (r.kind != PC_ACKED)
				acks++;
			uint64_t off = r.len ? r.off : 0, len = r.len ? r.len : PC_VOLUME_SIZE;
			size_t keep = 0;
			for (size_t i = 0; i < ls->n; i++) {
				struct pending *w = &ls->p[i];
				bool applies = r.kind == PC_FSYNC ? w->gen <= r.gen : w->gen == r.gen;
				if (applies)
					make_durable(pc, w, off, len);
				bool covered = applies && w->off >= off && w->off + w->len <= off + len;
				if (!covered)
					ls->p[keep++] = *w;
			}
			ls->n = keep;
		}
	}
	fclose(f);
	return acks;
}

/* replay_meta -- the metadata loader's log into pc->meta_state; 0 or -1 */
static int replay_meta(struct pc *pc, const char *path, long *acks)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "powercut: %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct pc_rec r;
	while (fread(&r, sizeof(r), 1, f) == 1) {
		if (r.gen < pc->meta_gen0 || r.gen >= pc->meta_gen0 + GEN_SPAN || r.kind < PC_CREATE ||
		    r.kind > PC_DELETED) {
			fprintf(stderr, "powercut: meta loader: bad record kind %u gen %u\n", r.kind,
				r.gen);
			fclose(f);
			return -1;
		}
		uint32_t i = r.gen - pc->meta_gen0;
		static const uint8_t to[] = { [PC_CREATE] = META_CREATING, [PC_CREATED] = META_CREATED,
					      [PC_DELETE] = META_DELETING, [PC_DELETED] = META_DELETED };
		pc->meta_state[i] = to[r.kind];
		pc->meta_size[i] = r.len;
		if (r.kind == PC_CREATED || r.kind == PC_DELETED)
			(*acks)++;
	}
	fclose(f);
	return 0;
}

/*
 * verify_meta -- the volume table after the cut against the metadata log;
 * then delete the leftovers. Returns the number of violations, or -1.
 */
static long verify_meta(struct pc *pc, unsigned round)
{
	struct rdax_conn *c = NULL;
	int ret = rdax_connect(pc->d.url, NULL, &c);
	if (ret)
		return -1;
	struct rdax_volume_info *vi = NULL;
	size_t n = 0;
	ret = rdax_volume_list(c, &vi, &n);
	if (ret) {
		fprintf(stderr, "powercut: volume list after the cut: %s\n", rdax_strerror(ret));
		rdax_disconnect(&c);
		return -1;
	}
	long bad = 0;
	uint8_t *seen = calloc(GEN_SPAN, 1);
	for (size_t i = 0; i < n; i++) {
		if (vi[i].name[0] != 'm')
			continue;
		uint32_t gen = (uint32_t)strtoul(vi[i].name + 1, NULL, 10);
		uint32_t k = gen - pc->meta_gen0;
		if (gen < pc->meta_gen0 || k >= GEN_SPAN || pc->meta_state[k] == META_NONE ||
		    pc->meta_state[k] == META_DELETED || vi[i].size != pc->meta_size[k]) {
			fprintf(stderr,
				"powercut: cut %u: volume %s (size %llu) after the cut: %s\n", round,
				vi[i].name, (unsigned long long)vi[i].size,
				gen < pc->meta_gen0 || k >= GEN_SPAN || !pc->meta_state[k]
					? "never created"
				: pc->meta_state[k] == META_DELETED ? "its delete was acknowledged"
								     : "wrong size");
			bad++;
		} else {
			seen[k] = 1;
		}
	}
	for (uint32_t k = 0; k < GEN_SPAN; k++) {
		if (pc->meta_state[k] == META_CREATED && !seen[k]) {
			fprintf(stderr, "powercut: cut %u: volume m%u lost: its create was "
					"acknowledged, no delete attempted\n",
				round, pc->meta_gen0 + k);
			bad++;
		}
	}
	/* clean up for the next round */
	for (size_t i = 0; i < n; i++) {
		if (vi[i].name[0] != 'm')
			continue;
		ret = rdax_volume_delete(c, vi[i].name);
		if (ret) {
			fprintf(stderr, "powercut: delete %s after the cut: %s\n", vi[i].name,
				rdax_strerror(ret));
			bad = bad ? bad : -1;
		}
	}
	free(seen);
	rdax_volume_info_free(&vi);
	rdax_disconnect(&c);
	memset(pc->meta_state, 0, GEN_SPAN);
	return bad;
}

/* read_volume -- the whole volume through a fresh connection into pc->got */
static int read_volume(struct pc *pc)
{
	struct rdax_conn *c = NULL;
	struct rdax_volume *v = NULL;
	int ret = rdax_connect(pc->d.url, NULL, &c);
	if (ret) {
		fprintf(stderr, "powercut: connect after restart: %s\n", rdax_connect_last_error());
		return ret;
	}
	ret = rdax_volume_open(c, VOLUME, &v);
	if (ret == 0 && rdax_volume_size(v) != PC_VOLUME_SIZE) {
		fprintf(stderr, "powercut: volume size %llu after restart\n",
			(unsigned long long)rdax_volume_size(v));
		ret = -EINVAL;
	}
	if (ret == 0)
		ret = rdax_read(v, 0, pc->got, PC_VOLUME_SIZE);
	if (ret)
		fprintf(stderr, "powercut: read back: %s (%s)\n", rdax_strerror(ret),
			rdax_conn_last_error(c));
	rdax_volume_close(&v);
	rdax_disconnect(&c);
	return ret;
}

/*
 * verify -- check every byte against the rule at the top; collapse the
 * state to what is there. Returns the number of bytes that broke the rule.
 */
static uint64_t verify(struct pc *pc, unsigned round)
{
	uint64_t bad = 0;
	uint64_t b = 0;
	while (b < PC_VOLUME_SIZE) {
		/* a run of bytes with the same durable generation inside one region */
		uint64_t rstart, rlen, rend = PC_VOLUME_SIZE;
		unsigned reg = pc_region_of(b);
		if (reg < PC_NREGIONS) {
			pc_region(reg, &rstart, &rlen);
			rend = rstart + rlen;
		}
		uint64_t e = b + 1;
		while (e < rend && pc->durable[e] == pc->durable[b] && e - b < (1 << 20))
			e++;
		size_t n = (size_t)(e - b);
		content(pc, pc->durable[b], b, n, pc->want);
		if (memcmp(pc->want, pc->got + b, n) == 0) {
			b = e;
			continue;
		}
		unsigned k = owner_of(pc, b);
		const struct loader_state *ls = &pc->ls[k];
		for (uint64_t i = b; i < e; i++) {
			uint8_t actual = pc->got[i];
			if (actual == pc->want[i - b])
				continue;
			/* the newest pending write that covers i and matches wins */
			bool ok = false;
			for (size_t j = ls->n; j-- > 0 && !ok;) {
				const struct pending *w = &ls->p[j];
				if (i < w->off || i >= w->off + w->len || w->gen <= pc->durable[i])
					continue;
				uint8_t c;
				content(pc, w->gen, i, 1, &c);
				if (c == actual) {
					pc->durable[i] = w->gen;
					ok = true;
				}
			}
			if (ok)
				continue;
			if (bad < 8) {
				fprintf(stderr,
					"powercut: cut %u: LOST byte %llu (loader %u, region %llu, "
					"line %llu): has 0x%02x, durable gen %u wants 0x%02x; "
					"pending candidates:",
					round, (unsigned long long)i, k,
					(unsigned long long)pc_region_of(i),
					(unsigned long long)(i / 64), actual, pc->durable[i],
					pc->want[i - b]);
				for (size_t j = 0; j < ls->n; j++) {
					const struct pending *w = &ls->p[j];
					if (i >= w->off && i < w->off + w->len)
						fprintf(stderr, " gen %u%s", w->gen,
							w->discard ? "(discard)" : "");
				}
				fprintf(stderr, "\n");
			}
			bad++;
		}
		b = e;
	}
	/* collapse: generations of discards of this round stand for zeros from now on */
	for (uint64_t i = 0; i < PC_VOLUME_SIZE; i++)
		if (gen_is_discard(pc, pc->durable[i]))
			pc->durable[i] = 0;
	for (unsigned k = 0; k < pc->loaders; k++)
		pc->ls[k].n = 0;
	return bad;
}

/* spawn_loader -- fork/exec powercut_load #k; @progress_w becomes its fd 3 */
static pid_t spawn_loader(struct pc *pc, unsigned k, uint64_t rseed, int progress_w,
			  const char *logp)
{
	bool meta = k == pc->loaders; /* the one after the data loaders */
	char ks[16], ls[16], ss[32], rs[32], gs[16];
	snprintf(ks, sizeof(ks), "%u", k);
	snprintf(ls, sizeof(ls), "%u", pc->loaders);
	snprintf(ss, sizeof(ss), "%llu", (unsigned long long)pc->seed);
	snprintf(rs, sizeof(rs), "%llu", (unsigned long long)rseed);
	snprintf(gs, sizeof(gs), "%u", pc->round_gen0 + k * GEN_SPAN);
	const char *argv[] = { POWERCUT_LOAD_PATH, "--url", pc->d.url, "--volume", VOLUME,
			       "--loader", ks, "--loaders", ls, "--seed", ss, "--rseed", rs,
			       "--gen", gs, "--log", logp, "--progress-fd", "3",
			       meta ? "--meta" : NULL, NULL };
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(progress_w, 3);
		close_range(4, ~0U, 0);
		signal(SIGPIPE, SIG_DFL);
		execv(argv[0], (char *const *)argv);
		perror(argv[0]);
		_exit(127);
	}
	return pid;
}

/*
 * wait_acks -- read progress bytes until all @nready loaders said 'R' and
 * @want acks arrived after that, or every loader closed the pipe
 */
static uint64_t wait_acks(int fd, unsigned nready, uint64_t want)
{
	uint64_t got = 0;
	unsigned readies = 0;
	int64_t deadline = hx_now_ms() + ACK_WAIT_TIMEOUT_MS;
	char buf[256];
	while (readies < nready || got < want) {
		int64_t left = deadline - hx_now_ms();
		if (left <= 0) {
			fprintf(stderr, "powercut: %u of %u loaders ready, %llu acks after %d ms\n",
				readies, nready, (unsigned long long)got, ACK_WAIT_TIMEOUT_MS);
			break;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == 'R')
				readies++;
			else if (readies == nready)
				got++; /* count only acks once everyone runs */
		}
	}
	return got;
}

/* one_round -- load, cut, restart, verify. 0 ok, 1 loss, 3 harness failure */
static int one_round(struct pc *pc, unsigned round, uint64_t rseed)
{
	uint64_t rng = rseed;
	uint64_t want_acks = 2 + hx_splitmix64(&rng) % 64;
	unsigned extra_us = (unsigned)(hx_splitmix64(&rng) % 3000);
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return 3;
	memset(pc->discarded, 0, (size_t)MAX_LOADERS * GEN_SPAN);
	pid_t pids[MAX_LOADERS + 1];
	char logs[MAX_LOADERS + 1][320];
	unsigned nproc = pc->loaders + 1; /* the data loaders and the metadata loader */
	pc->meta_gen0 = pc->round_gen0 + pc->loaders * GEN_SPAN;
	for (unsigned k = 0; k < nproc; k++) {
		snprintf(logs[k], sizeof(logs[k]), "%s/load%u.log", pc->dir, k);
		unlink(logs[k]);
		pids[k] = spawn_loader(pc, k, hx_splitmix64(&rng), pfd[1], logs[k]);
	}
	close(pfd[1]);
	uint64_t acks = wait_acks(pfd[0], nproc, want_acks);
	/* a little more load, so the cut does not always follow an ack closely */
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	int64_t until = (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000 + extra_us;
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000 < until);
	int ret = pc->clean_round ? hx_daemon_stop(&pc->d) : hx_daemon_kill(&pc->d);
	if (ret < 0 && pc->clean_round)
		fprintf(stderr, "powercut: round %u: rdaxd did not stop cleanly under load\n", round);
	/* the read end stays open until the loaders exited: an ack arriving after the cut
	 * must not kill its loader with SIGPIPE (loaders keep SIGPIPE's default action, so
	 * a SIGPIPE raised by librdax would still show) */
	int status_bad = 0;
	for (unsigned k = 0; k < nproc; k++) {
		int st = 0;
		int64_t deadline = hx_now_ms() + LOADER_EXIT_TIMEOUT_MS;
		pid_t r;
		while ((r = waitpid(pids[k], &st, WNOHANG)) == 0 && hx_now_ms() < deadline) {
			struct timespec ts = { 0, 5 * 1000 * 1000 };
			nanosleep(&ts, NULL); /* bounded wait for an exit, not synchronisation */
		}
		if (r == 0) {
			fprintf(stderr, "powercut: loader %u did not exit after the cut\n", k);
			kill(pids[k], SIGKILL);
			waitpid(pids[k], &st, 0);
			status_bad = 1;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "powercut: loader %u ended with status 0x%x\n", k, st);
			status_bad = 1;
		}
	}
	close(pfd[0]);
	if (ret < 0 || status_bad)
		return 3;
	if (acks < want_acks)
		fprintf(stderr, "powercut: cut %u: only %llu of %llu acks before the cut\n", round,
			(unsigned long long)acks, (unsigned long long)want_acks);

	if (hx_daemon_restart(&pc->d) != 0) {
		fprintf(stderr, "powercut: cut %u: the daemon does not start after the cut\n",
			round);
		return 3;
	}
	long round_acks = 0;
	for (unsigned k = 0; k < pc->loaders; k++) {
		long a = replay(pc, k, logs[k]);
		if (a < 0)
			return 3;
		round_acks += a;
	}
	if (replay_meta(pc, logs[pc->loaders], &round_acks) < 0)
		return 3;
	pc->total_acks += (uint64_t)round_acks;
	if (read_volume(pc) != 0)
		return 3;
	uint64_t bad = verify(pc, round);
	long meta_bad = verify_meta(pc, round);
	if (meta_bad < 0)
		return 3;
	bad += (uint64_t)meta_bad;
	pc->lost_bytes += bad;
	if (pc->verbose || bad)
		printf("powercut: round %u (%s) seed 0x%llx: %ld acks logged, %llu bytes lost\n",
		       round, pc->clean_round ? "clean stop" : "cut", (unsigned long long)rseed,
		       round_acks, (unsigned long long)bad);
	/* the next round's generations start above everything used so far */
	pc->round_gen0 = pc->round_gen0 + (pc->loaders + 1) * GEN_SPAN;
	pc->next_gen = pc->round_gen0;
	return bad ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: powercut [--cuts N] [--seed S] [--loaders L] [--clean-every K] "
			"[--control | --control-fault F] [--keep] [--verbose]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cuts", required_argument, NULL, 'n' }, { "seed", required_argument, NULL, 's' },
		{ "loaders", required_argument, NULL, 'L' }, { "control", no_argument, NULL, 'c' },
		{ "keep", no_argument, NULL, 'k' },	  { "verbose", no_argument, NULL, 'v' },
		{ "clean-every", required_argument, NULL, 'C' },
		{ "control-fault", required_argument, NULL, 'F' },
		{ NULL, 0, NULL, 0 },
	};
	static struct pc pc;
	pc.cuts = 50;
	pc.loaders = 4;
	pc.control_fault = "skip-writeback";
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	pc.seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n': pc.cuts = (unsigned)strtoul(optarg, NULL, 0); break;
		case 's': pc.seed = strtoull(optarg, NULL, 0); break;
		case 'L': pc.loaders = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'c': pc.control = true; break;
		case 'F':
			pc.control = true;
			pc.control_fault = optarg;
			break;
		case 'k': pc.keep = true; break;
		case 'v': pc.verbose = true; break;
		case 'C': pc.clean_every = (unsigned)strtoul(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (pc.cuts == 0 || pc.loaders == 0 || pc.loaders > MAX_LOADERS || optind != argc)
		usage();
	/* generations are 32-bit: GEN_SPAN per loader per round */
	uint64_t rounds = pc.cuts + (pc.clean_every ? pc.cuts / pc.clean_every : 0) + 1;
	if (rounds * (pc.loaders + 1) * GEN_SPAN >= UINT32_MAX) {
		fprintf(stderr, "powercut: at most %llu cuts with %u loaders per run\n",
			(unsigned long long)(UINT32_MAX / ((uint64_t)(pc.loaders + 1) * GEN_SPAN)) - 2,
			pc.loaders);
		return 2;
	}
	printf("powercut: seed 0x%llx, %u cuts, %u loaders%s%s (rerun: powercut --seed 0x%llx "
	       "--cuts %u --loaders %u --clean-every %u%s%s)\n",
	       (unsigned long long)pc.seed, pc.cuts, pc.loaders,
	       pc.control ? ", CONTROL: daemon with RDAX_FAULTS=" : "",
	       pc.control ? pc.control_fault : "", (unsigned long long)pc.seed, pc.cuts,
	       pc.loaders, pc.clean_every, pc.control ? " --control-fault " : "",
	       pc.control ? pc.control_fault : "");
	fflush(stdout);

	pc.durable = calloc(PC_VOLUME_SIZE, sizeof(uint32_t));
	pc.discarded = calloc((size_t)MAX_LOADERS * GEN_SPAN, 1);
	pc.got = malloc(PC_VOLUME_SIZE);
	pc.meta_state = calloc(GEN_SPAN, 1);
	pc.meta_size = calloc(GEN_SPAN, sizeof(uint64_t));
	pc.want = malloc(1 << 20);
	if (!pc.durable || !pc.discarded || !pc.got || !pc.want || !pc.meta_state || !pc.meta_size)
		return 3;
	if (hx_tmpdir_make(pc.control ? "powercut-control" : "powercut", pc.dir, sizeof(pc.dir)))
		return 3;
	struct hx_daemon_opts o = { .ns_size = "64M",
				    .mode = "sim",
				    .threads = 2,
				    .faults = pc.control ? pc.control_fault : NULL };
	if (hx_daemon_start(&pc.d, pc.dir, &o) != 0)
		return 3;
	struct rdax_conn *conn = NULL;
	if (rdax_connect(pc.d.url, NULL, &conn) != 0 ||
	    rdax_volume_create(conn, VOLUME, PC_VOLUME_SIZE, RDAX_NAMESPACE_ANY) != 0) {
		fprintf(stderr, "powercut: cannot create the volume: %s\n",
			conn ? rdax_conn_last_error(conn) : rdax_connect_last_error());
		return 3;
	}
	rdax_disconnect(&conn);
	pc.round_gen0 = 1;
	pc.next_gen = 1;

	uint64_t rng = pc.seed;
	int verdict = 0;
	unsigned round;
	int64_t t0 = hx_now_ms();
	unsigned cuts_done = 0, cleans = 0;
	for (round = 1; cuts_done < pc.cuts; round++) {
		pc.clean_round = pc.clean_every && !pc.control && cuts_done > 0 &&
				 cuts_done % pc.clean_every == 0 && cleans < cuts_done / pc.clean_every;
		verdict = one_round(&pc, round, hx_splitmix64(&rng));
		if (pc.clean_round)
			cleans++;
		else
			cuts_done++;
		if (verdict != 0)
			break;
	}
	int64_t secs = (hx_now_ms() - t0) / 1000;
	if (verdict != 3 && hx_daemon_stop(&pc.d) != 0) {
		fprintf(stderr, "powercut: the daemon did not stop cleanly at the end\n");
		verdict = 3;
	}
	if (verdict == 3) {
		hx_daemon_kill(&pc.d);
		hx_daemon_dump_log(&pc.d, 8192);
	}
	printf("powercut: %u cuts and %u clean stops in %llds, %llu durability acks and %llu "
	       "operations checked, %llu bytes lost\n",
	       cuts_done, cleans, (long long)secs, (unsigned long long)pc.total_acks,
	       (unsigned long long)pc.total_ops, (unsigned long long)pc.lost_bytes);
	int rc;
	if (verdict == 3) {
		printf("powercut: FAILED (harness/daemon failure at cut %u), seed 0x%llx\n", round,
		       (unsigned long long)pc.seed);
		rc = 3;
	} else if (pc.control) {
		rc = verdict == 1 ? 0 : 1;
		printf("powercut: control %s: the loss %s detected (seed 0x%llx)\n",
		       rc == 0 ? "PASSED" : "FAILED", rc == 0 ? "was" : "was NOT",
		       (unsigned long long)pc.seed);
	} else {
		rc = verdict;
		printf("powercut: %s, seed 0x%llx\n",
		       rc == 0 ? "PASSED" : "FAILED: acknowledged data lost",
		       (unsigned long long)pc.seed);
	}
	if (rc == 0 && !pc.keep)
		hx_tmpdir_remove(pc.dir);
	else
		printf("powercut: files kept in %s\n", pc.dir);
	free(pc.durable);
	free(pc.discarded);
	free(pc.got);
	free(pc.want);
	free(pc.meta_state);
	free(pc.meta_size);
	for (unsigned k = 0; k < MAX_LOADERS; k++)
		free(pc.ls[k].p);
	return rc;
}
