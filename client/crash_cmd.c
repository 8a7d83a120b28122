/* SPDX-License-Identifier: BSD-3-Clause */
/* crash_cmd.c -- rdax crash-states: states to files, manifests, checks, loads (crash_cmd.h) */
#include "crash_cmd.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash_states.h"
#include "faults.h"
#include "json.h"
#include "librdax.h"
#include "size.h"
#include "write_log.h"

#define EXIT_FAIL  1
#define EXIT_USAGE 2

#define DEFAULT_MAX 1000
/* Base-image blocks: all-zero ones are skipped, so images stay sparse. */
#define BASE_BLOCK  (64U << 10)
#define LOAD_SUFFIX ".crash-"

struct cmd {
	const struct crash_cmd_env *env;
	const char *log_path, *volume, *out, *check, *base_path;
	uint64_t max, seed;
	enum cs_granularity gran;
	bool load, force;

	struct wlog_view *log;
	struct cs_model *model;
	struct cs_iter *it;
	struct cs_summary sum;
	const uint8_t *base; /* the --base image, mapped */
	size_t base_len;
	struct rdax_conn *conn;
	int dirfd;
	uint64_t produced, failed; /* failed: index of the failing state, UINT64_MAX: none */
};

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
	va_list ap;
	fputs("rdax: crash-states: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char crash_cmd_help[] =
    "Build the states a power cut could leave, from LOG, the write log rdaxd\n"
    "kept of volume VOLUME, and write each to DIR as a raw image of the volume\n"
    "(state-N.img, sparse) with a JSON manifest (state-N.json: which writes, by\n"
    "log record, and which of their bytes it holds), and DIR/summary.json.\n"
    "Writes acknowledged before the last fsync that covered them are in every\n"
    "state; each later one is present, absent or, at line granularity, present\n"
    "in any subset of its 64-byte lines. At most N states (default 1000): all\n"
    "of them when there are no more, else sampled from seed S (default 1).\n"
    "--granularity write: whole writes only (fewer states).\n"
    "--base FILE: the volume's content when the log began, when it held data.\n"
    "--check CMD: run 'sh -c CMD sh IMAGE' on each state (the image is $1; also\n"
    "  $RDAX_STATE_IMAGE, $RDAX_STATE_MANIFEST, $RDAX_STATE_INDEX); exit status\n"
    "  0 passes. The first failing state stops the run: its manifest is printed\n"
    "  and rdax exits 1.\n"
    "--load: also create each state as volume VOLUME.crash-N on the server\n"
    "  ($RDAX_STATE_VOLUME for --check; a state that passes the check is deleted).\n"
    "--force: DIR may hold an earlier run's states (they are replaced).\n"
    "See docs/persistence-testing.md.\n";

/* --- options ------------------------------------------------------------- */

static int parse_u64(const char *opt, const char *v, bool size_units, uint64_t *out)
{
	if (size_units) {
		if (size_parse(v, out) == 0)
			return 0;
	} else if (v[0] && isdigit((unsigned char)v[0])) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(v, &end, 0);
		if (!errno && !*end) {
			*out = n;
			return 0;
		}
	}
	msg("bad %s '%s' (%s)", opt, v, size_units ? SIZE_SYNTAX : "a number, decimal or 0x hex");
	return EXIT_USAGE;
}

/* parse -- the options and the two arguments into @c; 0 or EXIT_USAGE */
static int parse(struct cmd *c, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"out", required_argument, NULL, 'o'},  {"max", required_argument, NULL, 'm'},
	    {"seed", required_argument, NULL, 's'}, {"granularity", required_argument, NULL, 'g'},
	    {"base", required_argument, NULL, 'b'}, {"check", required_argument, NULL, 'c'},
	    {"load", no_argument, NULL, 'l'},	    {"force", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},	    {NULL, 0, NULL, 0},
	};
	c->max = DEFAULT_MAX;
	c->seed = 1;
	optind = 0;
	opterr = 0;
	int opt;
	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o':
			c->out = optarg;
			break;
		case 'm':
			if (parse_u64("--max", optarg, true, &c->max))
				return EXIT_USAGE;
			if (c->max == 0) {
				msg("--max must be at least 1");
				return EXIT_USAGE;
			}
			break;
		case 's':
			if (parse_u64("--seed", optarg, false, &c->seed))
				return EXIT_USAGE;
			break;
		case 'g':
			if (strcmp(optarg, "line") == 0) {
				c->gran = CS_GRAN_LINE;
			} else if (strcmp(optarg, "write") == 0) {
				c->gran = CS_GRAN_WRITE;
			} else {
				msg("bad --granularity '%s' (line or write)", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'b':
			c->base_path = optarg;
			break;
		case 'c':
			c->check = optarg;
			break;
		case 'l':
			c->load = true;
			break;
		case 'f':
			c->force = true;
			break;
		case 'h':
			printf("usage: rdax [OPTIONS] crash-states %s\n\n%s", CRASH_CMD_USAGE,
			       crash_cmd_help);
			return -1;
		case ':':
			msg("%s needs a value", argv[optind - 1]);
			return EXIT_USAGE;
		default:
			msg("unknown option '%.*s' (see 'rdax help crash-states')",
			    (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	if (argc - optind != 2 || !c->out) {
		msg("%s (see 'rdax help crash-states')",
		    argc - optind < 2	? "missing arguments: LOG VOLUME"
		    : argc - optind > 2 ? "too many arguments"
					: "--out DIR is required");
		return EXIT_USAGE;
	}
	c->log_path = argv[optind];
	c->volume = argv[optind + 1];
	if (c->check && !c->check[0]) {
		msg("--check needs a command");
		return EXIT_USAGE;
	}
	return 0;
}

/* --- input: the log, the volume, the base -------------------------------- */

static int open_log(struct cmd *c)
{
	char err[512] = "";
	int ret = write_log_open(c->log_path, &c->log, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "rdax: crash-states %s: %s\n", c->log_path,
			err[0] ? err : rdax_strerror(ret));
		return EXIT_FAIL;
	}
	if (write_log_check_volume(c->log, c->volume, NULL, err, sizeof(err))) {
		fprintf(stderr, "rdax: crash-states %s: %s\n", c->log_path, err);
		return EXIT_FAIL;
	}
	return 0;
}

/* open_base -- map --base, or insist on it when the log did not start on a new volume */
static int open_base(struct cmd *c)
{
	uint64_t size = c->log->vol.size;
	if (!c->base_path) {
		if (c->log->vol.base_zero)
			return 0;
		msg("the log began on volume '%s' holding data: give its content at the log's "
		    "start with --base FILE",
		    c->volume);
		return EXIT_FAIL;
	}
	if (c->log->vol.base_zero) {
		msg("--base given, but the log began on a new volume (all zeros)");
		return EXIT_FAIL;
	}
	int fd = open(c->base_path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		msg("--base %s: %s", c->base_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_FAIL;
	}
	if ((uint64_t)st.st_size != size) {
		msg("--base %s: %" PRIu64 " bytes, the volume has %" PRIu64, c->base_path,
		    (uint64_t)st.st_size, size);
		close(fd);
		return EXIT_FAIL;
	}
	void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	int e = errno;
	close(fd);
	if (p == MAP_FAILED) {
		msg("--base %s: mmap: %s", c->base_path, strerror(e));
		return EXIT_FAIL;
	}
	c->base = p;
	c->base_len = size;
	return 0;
}

/* --- output: the directory, images, manifests ----------------------------- */

/* our_file -- a name this command writes: state-DIGITS.img/.json, summary.json */
static bool our_file(const char *n)
{
	if (strcmp(n, "summary.json") == 0)
		return true;
	if (strncmp(n, "state-", 6) != 0)
		return false;
	size_t d = strspn(n + 6, "0123456789");
	return d > 0 && (strcmp(n + 6 + d, ".img") == 0 || strcmp(n + 6 + d, ".json") == 0);
}

/*
 * prepare_out -- DIR new or empty; with --force the state files of an
 * earlier run are removed, and nothing else
 */
static int prepare_out(struct cmd *c)
{
	if (mkdir(c->out, 0755) != 0 && errno != EEXIST) {
		msg("--out %s: %s", c->out, strerror(errno));
		return EXIT_FAIL;
	}
	c->dirfd = open(c->out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->dirfd < 0) {
		msg("--out %s: %s", c->out, strerror(errno));
		return EXIT_FAIL;
	}
	DIR *d = fdopendir(dup(c->dirfd));
	if (!d) {
		msg("--out %s: %s", c->out, strerror(errno));
		return EXIT_FAIL;
	}
	unsigned others = 0, ours = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (our_file(e->d_name))
			ours++;
		else
			others++;
	}
	if ((ours || others) && !c->force) {
		closedir(d);
		msg("--out %s is not empty (%u files): nothing written; --force replaces the "
		    "state files of an earlier run",
		    c->out, ours + others);
		return EXIT_FAIL;
	}
	rewinddir(d);
	for (struct dirent *e; (e = readdir(d));) {
		if (our_file(e->d_name) && unlinkat(c->dirfd, e->d_name, 0) != 0) {
			msg("--out %s: removing %s: %s", c->out, e->d_name, strerror(errno));
			closedir(d);
			return EXIT_FAIL;
		}
	}
	closedir(d);
	return 0;
}

static int pwrite_all(int fd, const uint8_t *p, uint64_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (uint64_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static bool all_zero(const uint8_t *p, size_t len)
{
	return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

static int image_run(uint64_t off, const uint8_t *data, uint64_t len, void *arg)
{
	return pwrite_all(*(int *)arg, data, len, off);
}

/* write_image -- DIR/@name: the volume's size, the base, then the state's lines */
static int write_image(struct cmd *c, const char *name)
{
	int fd = openat(c->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int ret = ftruncate(fd, (off_t)c->log->vol.size) ? -errno : 0;
	for (uint64_t off = 0; !ret && c->base && off < c->base_len; off += BASE_BLOCK) {
		uint64_t len = c->base_len - off < BASE_BLOCK ? c->base_len - off : BASE_BLOCK;
		if (!all_zero(c->base + off, len))
			ret = pwrite_all(fd, c->base + off, len, off);
	}
	if (!ret)
		ret = cs_state_lines(c->it, image_run, &fd);
	if (close(fd) != 0 && !ret)
		ret = -errno;
	return ret;
}

static const char *gran_name(enum cs_granularity g)
{
	return g == CS_GRAN_LINE ? "line" : "write";
}

static const char *fsync_request(unsigned flags)
{
	return flags & WLOG_FSYNC_FLUSH ? "flush" : flags & WLOG_FSYNC_FUA ? "fua" : "fsync";
}

static const char *op_status(const struct cs_op *op)
{
	return op->lines_present == op->lines ? "present"
	       : op->lines_present == 0	      ? "absent"
					      : "partial";
}

struct ranges_out {
	struct json *j;
	bool want_present;
};

static int range_json(uint64_t off, uint64_t len, bool present, void *arg)
{
	struct ranges_out *r = arg;
	if (present == r->want_present) {
		json_array(r->j, NULL);
		json_u64(r->j, NULL, off);
		json_u64(r->j, NULL, len);
		json_end(r->j);
	}
	return 0;
}

/* json_ranges -- "key": [[off, len], ...] of op @i's bytes that did (not) reach media */
static void json_ranges(struct json *j, const struct cs_iter *it, uint64_t i, const char *key,
			bool present)
{
	struct ranges_out r = {j, present};
	json_array(j, key);
	cs_state_op_ranges(it, i, range_json, &r);
	json_end(j);
}

static void json_volume(struct json *j, const struct cmd *c)
{
	char uuid[37];
	json_object(j, "volume");
	json_str(j, "name", c->log->vol.name);
	json_u64(j, "size", c->log->vol.size);
	json_str(j, "uuid", wlog_uuid_format(c->log->vol.uuid, uuid));
	json_end(j);
}

/* json_durable -- store records before the cut that are durable whole, as [first, last] runs */
static void json_durable(struct json *j, const struct cmd *c, const struct cs_state *st)
{
	json_array(j, "durable_stores");
	int64_t first = -1, last = -1;
	for (uint64_t r = 0; r <= st->acked; r++) {
		bool durable = false, store = r < st->acked;
		if (store && c->log->records[r].type == WLOG_FSYNC)
			continue; /* not a store: neither starts nor breaks a run */
		if (store)
			durable = !cs_state_record_pending(c->it, r);
		if (durable) {
			first = first < 0 ? (int64_t)r : first;
			last = (int64_t)r;
		} else if (first >= 0) {
			json_array(j, NULL);
			json_u64(j, NULL, (uint64_t)first);
			json_u64(j, NULL, (uint64_t)last);
			json_end(j);
			first = -1;
		}
	}
	json_end(j);
}

/* json_point -- the durability point record @rec (-1: none, null) as member @key */
static void json_point(struct json *j, const struct cmd *c, const char *key, int64_t rec)
{
	if (rec < 0) {
		json_str(j, key, NULL);
		return;
	}
	const struct wlog_record *p = &c->log->records[rec];
	json_object(j, key);
	json_u64(j, "record", (uint64_t)rec);
	json_str(j, "type", wlog_type_name(p->type));
	json_u64(j, "offset", p->off);
	json_u64(j, "length", p->len);
	if (p->type == WLOG_FSYNC) {
		json_u64(j, "mark", p->mark);
		json_str(j, "request", fsync_request(p->flags));
	}
	json_end(j);
}

/*
 * write_manifest -- DIR/@name: the state as one JSON object
 * (docs/persistence-testing.md, "Manifest")
 */
static int write_manifest(struct cmd *c, const struct cs_state *st, const char *name,
			  const char *image, const char *volume)
{
	int fd = openat(c->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		int e = -errno;
		if (fd >= 0)
			close(fd);
		return e;
	}
	struct json j;
	json_begin(&j, f);
	json_u64(&j, "state", st->index);
	json_str(&j, "image", image);
	json_str(&j, "loaded_volume", volume);
	json_str(&j, "log", c->log_path);
	json_volume(&j, c);
	json_str(&j, "granularity", gran_name(c->gran));
	json_str(&j, "enumeration", st->sampled ? "sampled" : "exhaustive");
	json_u64(&j, "interval", st->interval);
	json_point(&j, c, "after_record", st->after_record);
	json_point(&j, c, "before_record", st->before_record);
	json_u64(&j, "acknowledged_records", st->acked);
	json_durable(&j, c, st);
	json_array(&j, "pending");
	for (uint64_t i = 0; i < st->nops; i++) {
		const struct cs_op *op = cs_state_op(c->it, i);
		const struct wlog_record *r = &c->log->records[op->record];
		json_object(&j, NULL);
		json_u64(&j, "record", op->record);
		json_str(&j, "type", wlog_type_name(r->type));
		json_u64(&j, "offset", r->off);
		json_u64(&j, "length", r->len);
		json_str(&j, "status", op_status(op));
		json_u64(&j, "lines", op->lines);
		json_u64(&j, "lines_present", op->lines_present);
		if (op->record == st->acked)
			json_bool(&j, "in_flight", true);
		if (op->lines_present != op->lines)
			json_ranges(&j, c->it, i, "missing", false);
		if (op->lines_present && op->lines_present != op->lines)
			json_ranges(&j, c->it, i, "present_bytes", true);
		json_end(&j);
	}
	json_finish(&j);
	return fclose(f) == 0 ? 0 : -errno;
}

static int range_text(uint64_t off, uint64_t len, bool present, void *arg)
{
	if (!present)
		printf(" [%" PRIu64 ", +%" PRIu64 "]", off, len);
	return 0;
}

/* describe -- the failing state for people, then its manifest, on standard output */
static void describe(struct cmd *c, const struct cs_state *st, const char *manifest)
{
	printf("state %" PRIu64 " fails the check: a power cut ", st->index);
	if (st->before_record >= 0)
		printf("before record %" PRId64 " (%s) completed", st->before_record,
		       wlog_type_name(c->log->records[st->before_record].type));
	else
		printf("at the end of the log");
	if (st->after_record >= 0)
		printf(", after record %" PRId64 " (%s)", st->after_record,
		       wlog_type_name(c->log->records[st->after_record].type));
	printf("; not yet durable:\n");
	for (uint64_t i = 0; i < st->nops; i++) {
		const struct cs_op *op = cs_state_op(c->it, i);
		const struct wlog_record *r = &c->log->records[op->record];
		printf("  record %" PRIu64 " %s [%" PRIu64 ", +%" PRIu64 "]: %s", op->record,
		       wlog_type_name(r->type), r->off, r->len, op_status(op));
		if (op->lines_present != op->lines) {
			printf(", missing");
			cs_state_op_ranges(c->it, i, range_text, NULL);
		}
		putchar('\n');
	}
	printf("manifest %s/%s:\n", c->out, manifest);
	int fd = openat(c->dirfd, manifest, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	close(fd);
}

/* --- --check and --load -------------------------------------------------- */

/* run_check -- the user's command on one state; 0 passed, else its wait status (reported) */
static int run_check(struct cmd *c, const struct cs_state *st, const char *image,
		     const char *manifest, const char *volume)
{
	char img[4096], man[4096], idx[32];
	snprintf(img, sizeof(img), "%s/%s", c->out, image);
	snprintf(man, sizeof(man), "%s/%s", c->out, manifest);
	snprintf(idx, sizeof(idx), "%" PRIu64, st->index);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		msg("--check: fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		setenv("RDAX_STATE_IMAGE", img, 1);
		setenv("RDAX_STATE_MANIFEST", man, 1);
		setenv("RDAX_STATE_INDEX", idx, 1);
		if (volume)
			setenv("RDAX_STATE_VOLUME", volume, 1);
		if (c->env->server)
			setenv("RDAX_SERVER", c->env->server, 1);
		if (c->env->token_file)
			setenv("RDAX_TOKEN_FILE", c->env->token_file, 1);
		execl("/bin/sh", "sh", "-c", c->check, "sh", img, (char *)NULL);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			msg("--check: waitpid: %s", strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		msg("state %" PRIu64 " fails the check (exit status %d): manifest %s", st->index,
		    WEXITSTATUS(status), man);
	else
		msg("state %" PRIu64 " fails the check (killed by signal %d): manifest %s",
		    st->index, WIFSIGNALED(status) ? WTERMSIG(status) : 0, man);
	return status ? status : -1;
}

static int load_run(uint64_t off, const uint8_t *data, uint64_t len, void *arg)
{
	return rdax_write(arg, off, data, len, 0);
}

/* load_state -- the state as new volume @name: created, written, fsynced; 0 or EXIT_FAIL */
static int load_state(struct cmd *c, const char *name)
{
	int ret;
	if (!c->conn && (ret = c->env->connect(c->env->arg, &c->conn)))
		return ret;
	ret = rdax_volume_create(c->conn, name, c->log->vol.size, RDAX_NAMESPACE_ANY);
	if (ret) {
		msg("--load: volume create %s: %s", name,
		    ret == -EEXIST ? "a volume of that name exists (from an earlier run? delete it)"
				   : rdax_conn_last_error(c->conn));
		return EXIT_FAIL;
	}
	struct rdax_volume *vol;
	const char *what = "open";
	ret = rdax_volume_open(c->conn, name, &vol);
	if (ret)
		goto err_delete;
	what = "write";
	for (uint64_t off = 0; !ret && c->base && off < c->base_len; off += BASE_BLOCK) {
		uint64_t len = c->base_len - off < BASE_BLOCK ? c->base_len - off : BASE_BLOCK;
		if (!all_zero(c->base + off, len))
			ret = rdax_write(vol, off, c->base + off, len, 0);
	}
	if (!ret)
		ret = cs_state_lines(c->it, load_run, vol);
	if (!ret) {
		what = "fsync";
		ret = rdax_fsync(vol, 0, 0, NULL);
	}
	int cret = rdax_volume_close(&vol);
	if (!ret && cret) {
		what = "close";
		ret = cret;
	}
	if (ret)
		goto err_delete;
	return 0;

err_delete:
	msg("--load: %s %s: %s", what, name,
	    rdax_conn_last_error(c->conn)[0] ? rdax_conn_last_error(c->conn) : rdax_strerror(ret));
	rdax_volume_delete(c->conn, name); /* our own half-made volume */
	return EXIT_FAIL;
}

/* --- the run ------------------------------------------------------------- */

static int write_summary(struct cmd *c)
{
	int fd = openat(c->dirfd, "summary.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	struct json j;
	json_begin(&j, f);
	json_str(&j, "log", c->log_path);
	json_volume(&j, c);
	json_u64(&j, "log_records", c->log->count);
	json_bool(&j, "log_full", c->log->full);
	json_str(&j, "granularity", gran_name(c->gran));
	json_u64(&j, "seed", c->seed);
	json_u64(&j, "max", c->max);
	json_u64(&j, "intervals", c->sum.intervals);
	json_u64(&j, "intervals_sampled", c->sum.intervals_sampled);
	if (c->sum.total == CS_COUNT_MANY)
		json_str(&j, "total_states", NULL); /* more than max: not counted */
	else
		json_u64(&j, "total_states", c->sum.total);
	json_bool(&j, "exhaustive", c->sum.exhaustive);
	json_u64(&j, "planned", c->sum.planned);
	json_u64(&j, "produced", c->produced);
	json_str(&j, "check", c->check);
	if (c->failed != UINT64_MAX)
		json_u64(&j, "failed_state", c->failed);
	else
		json_str(&j, "failed_state", NULL);
	json_finish(&j);
	return fclose(f) == 0 ? 0 : -errno;
}

/* produce -- every planned state: image, manifest, then --load and --check */
static int produce(struct cmd *c)
{
	const struct cs_state *st;
	int r;
	while ((r = cs_iter_next(c->it, &st)) == 1) {
		char image[64], manifest[64], volume[80];
		snprintf(image, sizeof(image), "state-%06" PRIu64 ".img", st->index);
		snprintf(manifest, sizeof(manifest), "state-%06" PRIu64 ".json", st->index);
		snprintf(volume, sizeof(volume), "%s" LOAD_SUFFIX "%06" PRIu64, c->volume,
			 st->index);
		int ret = write_image(c, image);
		if (ret) {
			msg("writing %s/%s: %s", c->out, image, strerror(-ret));
			return EXIT_FAIL;
		}
		if (c->load && (ret = load_state(c, volume)))
			return ret;
		ret = write_manifest(c, st, manifest, image, c->load ? volume : NULL);
		if (ret) {
			msg("writing %s/%s: %s", c->out, manifest, strerror(-ret));
			return EXIT_FAIL;
		}
		c->produced++;
		if (!c->check)
			continue;
		ret = run_check(c, st, image, manifest, c->load ? volume : NULL);
		if (ret) {
			c->failed = st->index;
			describe(c, st, manifest);
			return EXIT_FAIL;
		}
		if (c->load && rdax_volume_delete(c->conn, volume))
			msg("--load: volume delete %s: %s", volume, rdax_conn_last_error(c->conn));
	}
	if (r < 0) {
		msg("%s", rdax_strerror(r));
		return EXIT_FAIL;
	}
	return 0;
}

/* plan -- the model and the iterator; then what will be produced is known */
static int plan(struct cmd *c)
{
	int ret = cs_model_new(c->log, c->gran, &c->model);
	if (!ret) {
		struct cs_opts o = {.max_states = c->max, .seed = c->seed, .base = c->base};
		ret = cs_iter_new(c->model, &o, &c->it);
	}
	if (ret) {
		msg("%s: %s", c->log_path,
		    ret == -E2BIG ? "too many records or lines for the model" : rdax_strerror(ret));
		return EXIT_FAIL;
	}
	cs_iter_summary(c->it, &c->sum);
	if (c->load) {
		/* the names of every state's volume must be valid volume names */
		char n[32];
		int digits =
		    snprintf(n, sizeof(n), "%06" PRIu64, c->sum.planned ? c->sum.planned - 1 : 0);
		if (strlen(c->volume) + strlen(LOAD_SUFFIX) + (size_t)digits > 63) {
			msg("--load: the state volumes' names (%s" LOAD_SUFFIX "N) would be longer "
			    "than 63 characters",
			    c->volume);
			return EXIT_FAIL;
		}
	}
	return 0;
}

/* report -- what was produced, on standard output */
static void report(const struct cmd *c)
{
	char total[64];
	if (c->sum.total == CS_COUNT_MANY)
		snprintf(total, sizeof(total), "more than %" PRIu64, c->max);
	else
		snprintf(total, sizeof(total), "%" PRIu64, c->sum.total);
	printf("crash-states: %s: ", c->volume);
	if (c->failed != UINT64_MAX)
		printf("stopped at failing state %" PRIu64 " (%" PRIu64 " of %" PRIu64
		       " planned states written",
		       c->failed, c->produced, c->sum.planned);
	else if (c->sum.exhaustive)
		printf("%" PRIu64 " states (every one there is", c->produced);
	else
		printf("%" PRIu64 " states sampled with seed %" PRIu64 " of %s (%" PRIu64
		       " intervals sampled",
		       c->produced, c->seed, total, c->sum.intervals_sampled);
	printf("; %" PRIu64 " crash intervals, %s granularity) in %s\n", c->sum.intervals,
	       gran_name(c->gran), c->out);
	if (c->log->full)
		printf("crash-states: note: the log stopped at its size limit (%" PRIu64
		       " bytes): the states cover its %" PRIu64 " records\n",
		       c->log->limit, c->log->count);
	if (c->check && c->failed == UINT64_MAX)
		printf("crash-states: every state passed the check\n");
}

int crash_cmd_run(int argc, char **argv, const struct crash_cmd_env *env)
{
	struct cmd c = {.env = env, .dirfd = -1, .failed = UINT64_MAX};
	int rc = parse(&c, argc, argv);
	if (rc)
		return rc < 0 ? 0 : rc; /* -1: --help, printed */
	if (faults_from_env())
		return EXIT_USAGE;
	if ((rc = open_log(&c)) || (rc = open_base(&c)) || (rc = plan(&c)) ||
	    (rc = prepare_out(&c)))
		goto out;
	rc = produce(&c);
	int sret = write_summary(&c);
	if (sret && !rc) {
		msg("writing %s/summary.json: %s", c.out, strerror(-sret));
		rc = EXIT_FAIL;
	}
	if (!rc || c.failed != UINT64_MAX)
		report(&c);
out:
	if (c.dirfd >= 0)
		close(c.dirfd);
	cs_iter_delete(&c.it);
	cs_model_delete(&c.model);
	write_log_view_delete(&c.log);
	if (c.base)
		munmap((void *)c.base, c.base_len);
	return rc;
}
