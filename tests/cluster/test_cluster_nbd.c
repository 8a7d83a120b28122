/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_nbd.c -- NBD clients of a non-primary node through a kill -9 of the primary
 *
 * etcd and three nodes (--lease-ttl=2, sim mode, each with an nbd:// listener)
 * in network namespaces; volume "nb" with --replicas 3. Every NBD client
 * talks to a node that is not the volume's primary, which forwards to the
 * primary (daemon/cluster/nbd_forward.h):
 *
 *   tools    nbdcopy --flush and qemu-img convert (-t writeback) of a
 *            40 MiB file into the export, and fio (nbd engine, 40 MiB of
 *            checksummed blocks, an fsync at the end, then its verify
 *            phase), each while the primary is killed (kill -9) mid-run:
 *            each exits 0; the copies read back from the new primary equal
 *            to the file, fio's blocks verify through the same export.
 *   checker  the durability checker (checker.h) writing 4 KiB blocks through
 *            libnbd and flushing (NBD_CMD_FLUSH), while the primary is
 *            killed; no request fails, the client never reconnects. Then
 *            every node loses power (kill -9 of all, sim mode: only what was
 *            flushed survives) and comes back: every block an acknowledged
 *            FLUSH covered reads back from the primary of the moment.
 *
 * Control (--control, its own ctest): every node runs with
 * nbd-forward-flush-early -- the forwarder acknowledges a FLUSH without the
 * primary's fsync; the checker round must find flushed blocks missing after
 * the power cut.
 *
 *   test_cluster_nbd [--seed N]      both rounds
 *   test_cluster_nbd --control       the control
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include "checker.h"
#include "cluster_fixture.h"
#include "cluster_meta.h"
#include "librdax.h"
#include "member.h"

#define NODES	  3
#define VOL	  "nb"
#define VOL_SIZE  (64ULL << 20)
#define COPY_SIZE (40ULL << 20)
#define NBLOCKS	  256
/* where the checker's blocks are: past the copy's bytes */
#define CK_OFF (48ULL << 20)
/* checker steps acknowledged after the failover before the power cut */
#define STEPS_AFTER 40

static struct nx_cluster cl;
static int failures;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* key -- the volume key now (retried while etcd is slow); false if it cannot be read */
static bool key(struct cluster_volume_rec *rec)
{
	if (nx_volume_key_retry(cl.etcd.spec, VOL, 100, 100, rec) == 0)
		return true;
	NX_CHECK(0, "cannot read the volume key");
	return false;
}

static unsigned idx(const char *node)
{
	return nx_node_index(node) % NODES;
}

/* primary -- the index of the node the volume key names primary */
static unsigned primary(void)
{
	struct cluster_volume_rec rec;
	return key(&rec) ? idx(rec.primary) : 0;
}

/* wait_failover -- until the key names a primary other than @old (at most 60 s) */
static unsigned wait_failover(unsigned old)
{
	for (unsigned n = 0; n < 600; n++) {
		unsigned p = primary();
		if (p != old)
			return p;
		usleep(100 * 1000);
	}
	printf("FAIL: no failover from n%u\n", old + 1);
	failures++;
	return old;
}

/* wait_isr -- until every node is in the ISR again (a restarted one resynced), at most 120 s */
static void wait_isr(void)
{
	struct cluster_volume_rec rec;
	for (unsigned n = 0; n < 1200; n++) {
		if (key(&rec) && rec.nisr == NODES && rec.state == CLUSTER_VOL_READY)
			return;
		usleep(100 * 1000);
	}
	printf("FAIL: the ISR did not grow back to %u\n", NODES);
	failures++;
}

/* open_primary -- a resuming librdax client on the primary the key names */
static int open_primary(struct rdax_conn **c, struct rdax_volume **v)
{
	char urls[512];
	unsigned p = primary();
	/* the primary first; the others only to be followed to it */
	snprintf(urls, sizeof(urls), "%s,%s,%s", cl.node[p].url, cl.node[(p + 1) % NODES].url,
		 cl.node[(p + 2) % NODES].url);
	return nx_resuming_open("client", urls, VOL, 5000, 60000, 0, c, v);
}

/* create -- volume @name of @size on @replicas nodes, through the rdax CLI; 0 or -1 */
static int create(const char *name, const char *size, const char *replicas)
{
	const char *argv[] = {RDAX_CLI_PATH, "--cluster",  cl.etcd.spec, "--timeout",
			      "30",	     "volume",	   "create",	 name,
			      size,	     "--replicas", replicas,	 NULL};
	struct hx_run r;
	if (hx_run_argv(argv, NULL, 0, &r))
		return -1;
	int ret = r.status;
	if (ret)
		printf("volume create %s: %s\n", name, r.err);
	hx_run_free(&r);
	return ret ? -1 : 0;
}

/* spawn -- @argv in the background, its output into @log; the pid or -1 */
static pid_t spawn(const char *const argv[], const char *log)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	execvp(argv[0], (char *const *)argv);
	_exit(127);
}

/* reap_within -- wait for @pid at most @ms; its exit status, or -1 (killed then) */
static int reap_within(pid_t pid, uint64_t ms)
{
	uint64_t end = now_ms() + ms;
	int st;
	while (now_ms() < end) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(50 * 1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* show_log -- the first lines of a client's output, after a failure */
static void show_log(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];
	for (unsigned n = 0; f && n < 20 && fgets(line, sizeof(line), f); n++)
		printf("    | %s", line);
	if (f)
		fclose(f);
}

/* log_lines -- print the lines of @path that hold @needle; whether there was one */
static bool log_lines(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[512];
	bool found = false;
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, needle)) {
			printf("    | %s", line);
			found = true;
		}
	if (f)
		fclose(f);
	return found;
}

/*
 * A client program through a non-primary node's export: nbdcopy and
 * qemu-img copy a file in (their bytes are compared with the file from the
 * new primary afterwards); fio writes with checksummed blocks and reads
 * them back itself, after the failover, through the same export.
 */
enum tool { TOOL_NBDCOPY, TOOL_QEMU_IMG, TOOL_FIO };
static const char *const tool_names[] = {"nbdcopy", "qemu-img", "fio"};

/*
 * Their command lines; FILE and URI stand for the file and the export.
 * Each must still be writing when the primary is killed (after 0.4 s; 1 s
 * for fio): unthrottled, all three were done with the 40 MiB before that,
 * and the round proved nothing. nbdcopy (no rate limit): one request of
 * 64 KiB at a time. qemu-img: -n, the export exists; -t writeback, the
 * cache mode whose close sends a flush, named rather than left to
 * convert's default; -r 16M, at most 16 MiB/s. fio: the write phase at
 * most 16 MiB/s, an fsync at its end, then the verify phase reads every
 * block back.
 */
static const char *const tool_argvs[][16] = {
    [TOOL_NBDCOPY] = {"nbdcopy", "--flush", "--requests=1", "--request-size=65536", "FILE", "URI",
		      NULL},
    [TOOL_QEMU_IMG] = {"qemu-img", "convert", "-n", "-f", "raw", "-O", "raw", "-t", "writeback",
		       "-r", "16M", "FILE", "URI", NULL},
    [TOOL_FIO] = {"fio", "--name=through-node", "--ioengine=nbd", "--uri=URI", "--rw=write",
		  "--bs=256k", "--size=40M", "--iodepth=4", "--end_fsync=1", "--verify=crc32c",
		  "--verify_fatal=1", "--exitall_on_error=1", "--rate=,16m", NULL},
};

/* tool_argv -- @t's command line with @path and @uri put in (@spare holds "--uri=...") */
static void tool_argv(enum tool t, const char *path, const char *uri, char *spare, size_t n,
		      const char *argv[16])
{
	for (unsigned i = 0; i < 16; i++) {
		const char *a = tool_argvs[t][i];
		argv[i] = a;
		if (a && strcmp(a, "FILE") == 0)
			argv[i] = path;
		else if (a && strcmp(a, "URI") == 0)
			argv[i] = uri;
		else if (a && strcmp(a, "--uri=URI") == 0) {
			snprintf(spare, n, "--uri=%s", uri);
			argv[i] = spare;
		}
	}
}

/*
 * round_tool -- @t writes through a non-primary node's export while the
 * primary is killed; it exits 0, and (nbdcopy, qemu-img) the copy reads back
 * from the new primary equal to the file
 */
static void round_tool(uint64_t seed, enum tool t)
{
	unsigned p = primary(), fwd = (p + 2) % NODES;
	const char *name = tool_names[t];
	printf("%s: %llu MiB through n%u's NBD export; n%u (the primary) killed mid-run\n", name,
	       (unsigned long long)(COPY_SIZE >> 20), fwd + 1, p + 1);
	uint8_t *src = malloc(COPY_SIZE), *back = malloc(COPY_SIZE);
	char path[400], log[400], uri[160], spare[200];
	snprintf(path, sizeof(path), "%s/source.raw", cl.dir);
	snprintf(log, sizeof(log), "%s/%s.log", cl.dir, name);
	snprintf(uri, sizeof(uri), "%s/%s", cl.node[fwd].nbd, VOL);
	if (!src || !back) {
		NX_CHECK(0, "out of memory");
		goto out;
	}
	hx_pattern(src, COPY_SIZE, seed ^ t, 0);
	if (hx_write_file(path, src, COPY_SIZE)) {
		NX_CHECK(0, "cannot write %s", path);
		goto out;
	}
	const char *argv[16];
	tool_argv(t, path, uri, spare, sizeof(spare), argv);
	uint64_t t0 = now_ms();
	pid_t pid = spawn(argv, log);
	NX_CHECK(pid > 0, "cannot start %s", name);
	if (pid <= 0)
		goto out;
	/* fio starts slower: its first writes are under way after about a second */
	usleep(t == TOOL_FIO ? 1000 * 1000 : 400 * 1000);
	/*
	 * look without reaping (WNOWAIT): a tool that already ended keeps its
	 * status for reap_within below, which would otherwise wait its whole
	 * 120 s on a child already gone and report -1 instead of the exit code
	 */
	siginfo_t si = {0};
	bool mid = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		   si.si_pid == 0;
	NX_CHECK(mid, "%s ended before the kill (the round proves nothing): %llu ms", name,
	      (unsigned long long)(now_ms() - t0));
	nx_node_kill(&cl.node[p]);
	uint64_t tk = now_ms();
	int st = reap_within(pid, 120000);
	printf("  %s exit %d after %llu ms (%llu ms after the kill)\n", name, st,
	       (unsigned long long)(now_ms() - t0), (unsigned long long)(now_ms() - tk));
	NX_CHECK(st == 0, "%s through n%u failed (exit %d) across the failover", name, fwd + 1, st);
	if (st)
		show_log(log);
	unsigned np = wait_failover(p);
	printf("  n%u primary now\n", np + 1);
	if (t == TOOL_FIO) {
		/* its verify phase read every block back through n@fwd, after the failover */
		NX_CHECK(log_lines(log, "READ: bw=") && log_lines(log, "WRITE: bw="),
		      "fio's log shows no write and verify phase");
		goto restart;
	}
	struct rdax_conn *c;
	struct rdax_volume *v;
	if (open_primary(&c, &v) == 0) {
		int ret = rdax_read(v, 0, back, COPY_SIZE);
		NX_CHECK(ret == 0, "read back: %s", rdax_conn_last_error(c));
		if (ret == 0) {
			uint64_t bad = COPY_SIZE;
			for (uint64_t i = 0; i < COPY_SIZE && bad == COPY_SIZE; i++)
				if (src[i] != back[i])
					bad = i;
			NX_CHECK(bad == COPY_SIZE,
			      "the volume on %s differs from the file from byte %" PRIu64,
			      rdax_conn_url(c), bad);
			if (bad == COPY_SIZE)
				printf("  all %llu MiB read back equal from %s\n",
				       (unsigned long long)(COPY_SIZE >> 20), rdax_conn_url(c));
		}
		rdax_volume_close(&v);
		rdax_disconnect(&c);
	} else {
		NX_CHECK(0, "cannot open the volume at its primary to compare");
	}
restart:
	/* back as a replica, for the next round's failover */
	NX_CHECK(nx_node_restart(&cl.node[p]) == 0, "restart n%u", p + 1);
	wait_isr();
out:
	free(src);
	free(back);
}

/* The checker's write path: libnbd on a non-primary node's export. */
static int nbd_io_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct nbd_handle *h = arg;
	if (nbd_pwrite(h, buf, len, off, 0) == -1) {
		printf("  nbd write at %" PRIu64 ": %s\n", off, nbd_get_error());
		return -EIO;
	}
	return 0;
}

static int nbd_io_fsync(void *arg, uint64_t off, uint64_t len)
{
	(void)off;
	(void)len;
	struct nbd_handle *h = arg;
	if (nbd_flush(h, 0) == -1) {
		printf("  nbd flush: %s\n", nbd_get_error());
		return -EIO;
	}
	return 0;
}

/*
 * round_checker -- checker steps through a non-primary node's export while
 * the primary is killed; then a power cut of every node; then every
 * acknowledged FLUSH's blocks must read back from the primary. Returns the
 * findings of the verification (0: none).
 */
static int round_checker(uint64_t seed)
{
	/*
	 * the forwarding node is not the one first in line to take over (the
	 * first ISR member after the primary): after the failover it still
	 * forwards to another node
	 */
	struct cluster_volume_rec rec;
	unsigned p = 0, next = 1;
	if (key(&rec)) {
		p = idx(rec.primary);
		for (unsigned i = 0; i < rec.nisr; i++)
			if (idx(rec.isr[i]) != p) {
				next = idx(rec.isr[i]);
				break;
			}
	}
	unsigned fwd = 0;
	while (fwd == p || fwd == next)
		fwd++;
	char uri[160];
	snprintf(uri, sizeof(uri), "%s/%s", cl.node[fwd].nbd, VOL);
	printf("checker: through n%u's NBD export (%s); n%u (the primary) killed\n", fwd + 1, uri,
	       p + 1);
	struct nbd_handle *h = nbd_create();
	if (!h || nbd_connect_uri(h, uri) == -1) {
		NX_CHECK(0, "nbd connect %s: %s", uri, nbd_get_error());
		if (h)
			nbd_close(h);
		return 0;
	}
	NX_CHECK(nbd_can_multi_conn(h) == 0, "a forwarded export offers CAN_MULTI_CONN");
	NX_CHECK(nbd_can_flush(h) == 1 && nbd_can_fua(h) == 1, "flush and FUA offered");
	NX_CHECK(nbd_get_size(h) == (int64_t)VOL_SIZE, "export size %" PRId64, nbd_get_size(h));
	struct ck ck;
	if (ck_init(&ck, seed, CK_OFF, NBLOCKS, NULL)) {
		NX_CHECK(0, "checker");
		nbd_close(h);
		return 0;
	}
	const struct ck_io io = {.write = nbd_io_write, .fsync = nbd_io_fsync, .arg = h};
	unsigned fails = 0, before = 0, after = 0;
	for (unsigned k = 0; k < 20; k++, before++)
		fails += ck_step_with(&ck, &io, 3) != 0;
	uint64_t t0 = now_ms(), first = 0, stall = 0, last = t0;
	nx_node_kill(&cl.node[p]);
	unsigned np = p;
	while (after < STEPS_AFTER && now_ms() - t0 < 90000) {
		int ret = ck_step_with(&ck, &io, 3);
		uint64_t now = now_ms();
		if (ret) {
			fails++;
			continue;
		}
		stall = now - last > stall ? now - last : stall;
		last = now;
		if (np == p)
			np = primary();
		if (np != p) {
			if (!first)
				first = now - t0;
			after++;
		}
	}
	printf("  %u steps before the kill, %u after the failover (n%u primary); %u failed; "
	       "first flush acknowledged by the new primary %" PRIu64 " ms after the kill, "
	       "longest stall %" PRIu64 " ms\n",
	       before, after, np + 1, fails, first, stall);
	NX_CHECK(fails == 0, "%u checker steps failed through the forwarding node", fails);
	NX_CHECK(after == STEPS_AFTER, "the checker did not go on after the failover");
	nbd_shutdown(h, 0);
	nbd_close(h);

	/* the power cut: exactly what was flushed survives, on every copy */
	printf("  power cut of every node, then all back\n");
	for (unsigned i = 0; i < NODES; i++)
		if (i != p)
			nx_node_kill(&cl.node[i]);
	for (unsigned i = 0; i < NODES; i++)
		NX_CHECK(nx_node_restart(&cl.node[i]) == 0, "restart n%u", i + 1);
	int found = 0;
	struct rdax_conn *c;
	struct rdax_volume *v;
	/* the leader keys went with the leases: wait for a node to take the volume over */
	int ret = -1;
	for (unsigned n = 0; n < 60 && ret; n++) {
		ret = open_primary(&c, &v);
		if (ret)
			sleep(1);
	}
	if (ret == 0) {
		ret = ck_verify(&ck, v);
		found = ret != 0;
		if (ret)
			printf("  verify on %s: %s\n", rdax_conn_url(c),
			       ret == -EIO ? ck.why : rdax_strerror(ret));
		else
			printf("  every flushed block read back from %s (%" PRIu64
			       " acknowledged flushes)\n",
			       rdax_conn_url(c), ck.acked_fsyncs);
		rdax_volume_close(&v);
		rdax_disconnect(&c);
	} else {
		NX_CHECK(0, "cannot open the volume after the power cut");
	}
	ck_free(&ck);
	return found;
}

/* list_name -- NBD_OPT_LIST's callback: note the names seen */
static int list_name(void *arg, const char *name, const char *description)
{
	char *seen = arg;
	(void)description;
	size_t have = strlen(seen);
	snprintf(seen + have, 1024 - have, "%s ", name);
	return 0;
}

/*
 * round_nocopy -- a node that holds no copy of a volume exports it too:
 * NBD_OPT_LIST there shows every volume of the cluster (no change record);
 * a write, a zeroing (WRITE_ZEROES) and a FLUSH through it read back, there
 * and from the volume's primary
 */
static void round_nocopy(uint64_t seed)
{
	if (create("nb2", "8M", "2"))
		return;
	struct cluster_volume_rec rec;
	if (nx_volume_key(cl.etcd.spec, "nb2", &rec)) {
		NX_CHECK(0, "no key for nb2");
		return;
	}
	unsigned x = NODES;
	for (unsigned i = 0; i < NODES && x == NODES; i++) {
		char name[16];
		snprintf(name, sizeof(name), "n%u", i + 1);
		if (!cluster_name_in(rec.replicas, rec.nreplicas, name))
			x = i;
	}
	printf("no copy: nb2 on %s and %s; through n%u, which holds none\n", rec.replicas[0],
	       rec.replicas[1], x + 1);
	if (x == NODES) {
		NX_CHECK(0, "every node holds nb2");
		return;
	}
	char uri[160], seen[1024] = "";
	snprintf(uri, sizeof(uri), "%s/nb2", cl.node[x].nbd);
	struct nbd_handle *h = nbd_create();
	if (!h || nbd_set_opt_mode(h, true) == -1 || nbd_connect_uri(h, uri) == -1 ||
	    nbd_opt_list(h, (nbd_list_callback){.callback = list_name, .user_data = seen}) == -1) {
		NX_CHECK(0, "nbd list on %s: %s", uri, nbd_get_error());
		if (h)
			nbd_close(h);
		return;
	}
	printf("  NBD_OPT_LIST on n%u: %s\n", x + 1, seen);
	NX_CHECK(strstr(seen, "nb ") && strstr(seen, "nb2 ") && !strstr(seen, ".rrec"),
	      "the list on n%u is not every volume of the cluster: %s", x + 1, seen);
	if (nbd_opt_go(h) == -1) {
		NX_CHECK(0, "nbd go nb2 on n%u: %s", x + 1, nbd_get_error());
		nbd_close(h);
		return;
	}
	NX_CHECK(nbd_get_size(h) == 8 << 20, "nb2's size through n%u: %" PRId64, x + 1,
	      nbd_get_size(h));
	uint8_t w[65536], r[65536], z[16384] = {0};
	hx_pattern(w, sizeof(w), seed, 0);
	memset(w + 8192, 0, sizeof(z)); /* what the zeroing leaves */
	int ok = nbd_pwrite(h, w, sizeof(w), 1 << 20, 0) == 0 &&
		 nbd_zero(h, sizeof(z), (1 << 20) + 8192, 0) == 0 && nbd_flush(h, 0) == 0 &&
		 nbd_pread(h, r, sizeof(r), 1 << 20, 0) == 0;
	NX_CHECK(ok, "write, zero, flush, read through n%u: %s", x + 1, nbd_get_error());
	NX_CHECK(!ok || memcmp(w, r, sizeof(w)) == 0, "nb2 read back through n%u differs", x + 1);
	nbd_shutdown(h, 0);
	nbd_close(h);
	struct rdax_conn *c;
	struct rdax_volume *v;
	char url[200];
	snprintf(url, sizeof(url), "%s", cl.node[idx(rec.primary)].url);
	if (rdax_connect(url, NULL, &c) == 0) {
		if (rdax_volume_open(c, "nb2", &v) == 0) {
			NX_CHECK(rdax_read(v, 1 << 20, r, sizeof(r)) == 0 &&
				  memcmp(w, r, sizeof(w)) == 0,
			      "nb2 on its primary %s differs from what went through n%u",
			      rec.primary, x + 1);
			rdax_volume_close(&v);
		} else {
			NX_CHECK(0, "open nb2 on %s: %s", url, rdax_conn_last_error(c));
		}
		rdax_disconnect(&c);
	}
}

static bool arg_flag(int argc, char **argv, const char *name)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	uint64_t seed = nx_seed(argc, argv);
	bool control = arg_flag(argc, argv, "--control");
	nx_cluster_extra_arg = "--lease-ttl=2";
	nx_cluster_nbd = true;
	nx_node_ns_size = "192M";
	if (nx_cluster_start(&cl, "clnbd", NODES, seed, true, NULL))
		return 1;
	if (!cl.net.isolated) {
		printf("SKIP: the nodes need network namespaces: %s\n", cl.net.why);
		nx_cluster_stop(&cl);
		return 77;
	}
	if (control && nx_cluster_restart_all(&cl, "nbd-forward-flush-early"))
		return 1;
	sleep(2); /* every node's key is up */
	if (create(VOL, "64M", "3"))
		return 1;
	if (control) {
		int found = round_checker(seed);
		printf("control nbd-forward-flush-early: %s\n",
		       found ? "caught (flushed blocks missing after the power cut)"
			     : "NOT caught");
		nx_cluster_stop(&cl);
		return found ? 0 : 1;
	}
	round_nocopy(seed);
	round_tool(seed, TOOL_NBDCOPY);
	round_tool(seed, TOOL_QEMU_IMG);
	round_tool(seed, TOOL_FIO);
	if (round_checker(seed ^ 0x5eed))
		failures++;
	printf("%d finding(s)\n", failures);
	if (nx_cluster_stop(&cl))
		failures++;
	return failures ? 1 : 0;
}
