/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdtest.c -- daemon with NBD listeners, real NBD clients, a raw NBD client for tests */
#include "nbdtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "wire.h"

#ifndef NBD_SCRIPTS_DIR
#error "NBD_SCRIPTS_DIR (tests/nbd in the source tree) must be defined by the build"
#endif

/* ---- daemon ---- */

/* parse_port -- the NBD port from the ready line; > 0 or -ENOENT */
static int parse_port(const char *line)
{
	const char *p = strstr(line, "nbd://127.0.0.1:");
	if (!p)
		return -ENOENT;
	int port = atoi(p + strlen("nbd://127.0.0.1:"));
	return port > 0 ? port : -ENOENT;
}

/* after_start -- read the NBD port from a fresh ready line */
static int after_start(struct nt_daemon *n)
{
	n->nbd_port = 0;
	n->nbd_base[0] = '\0';
	if (!n->nbd_listen[0])
		return 0;
	int port = parse_port(n->d.ready_line);
	if (port < 0) {
		fprintf(stderr, "nbdtest: no nbd://127.0.0.1 port in the ready line: %s\n",
			n->d.ready_line);
		return port;
	}
	n->nbd_port = port;
	snprintf(n->nbd_base, sizeof(n->nbd_base), "nbd://127.0.0.1:%d", port);
	return 0;
}

int nt_daemon_start(struct nt_daemon *n, const char *dir, const struct hx_daemon_opts *opts)
{
	struct hx_daemon_opts o = {0};
	if (opts)
		o = *opts;
	snprintf(n->nbd_listen, sizeof(n->nbd_listen), "nbd://127.0.0.1:0");
	snprintf(n->sock_path, sizeof(n->sock_path), "%s/nbd.sock", dir);
	snprintf(n->unix_listen, sizeof(n->unix_listen), "nbd+unix://%s", n->sock_path);
	const char *extra[8] = {"--listen", n->nbd_listen, "--listen", n->unix_listen};
	unsigned k = 4;
	for (unsigned i = 0; i < 8 && o.extra_args[i] && k < 7; i++)
		extra[k++] = o.extra_args[i];
	memcpy(o.extra_args, extra, sizeof(extra));
	int ret = hx_daemon_start(&n->d, dir, &o);
	if (ret)
		return ret;
	return after_start(n);
}

int nt_daemon_restart(struct nt_daemon *n)
{
	int ret = hx_daemon_restart(&n->d);
	if (ret)
		return ret;
	return after_start(n);
}

const char *nt_uri(const struct nt_daemon *n, const char *export, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", n->nbd_base, export);
	return buf;
}

const char *nt_unix_uri(const struct nt_daemon *n, const char *export, char *buf, size_t len)
{
	snprintf(buf, len, "nbd+unix:///%s?socket=%s", export, n->sock_path);
	return buf;
}

/* native_conn -- a HELLO'd rdax protocol connection to the daemon; 0 or an error */
static int native_conn(const struct nt_daemon *n, struct wconn *w)
{
	int ret = wire_connect(w, n->d.port);
	if (ret)
		return ret;
	uint8_t *tok = NULL;
	size_t tok_len = 0;
	if (n->d.token_file[0]) {
		ret = nt_read_file(n->d.token_file, &tok, &tok_len);
		if (ret)
			goto err_close;
		while (tok_len && (tok[tok_len - 1] == '\n' || tok[tok_len - 1] == '\r'))
			tok_len--;
	}
	ret = wire_hello(w, tok, tok_len);
	free(tok);
	if (ret == 0)
		return 0;
err_close:
	wire_close(w);
	return ret;
}

int nt_volume_create(const struct nt_daemon *n, const char *name, uint64_t size)
{
	struct wconn w;
	int ret = native_conn(n, &w);
	if (ret)
		return ret;
	ret = wire_create(&w, name, size);
	wire_close(&w);
	return ret;
}

int nt_volume_delete(const struct nt_daemon *n, const char *name)
{
	struct wconn w;
	int ret = native_conn(n, &w);
	if (ret)
		return ret;
	ret = wire_delete(&w, name);
	wire_close(&w);
	return ret;
}

/* ---- tools ---- */

void nt_env_init(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	const char *old = getenv("PATH");
	char *path;
	if (asprintf(&path, "/usr/bin:/bin%s%s", old ? ":" : "", old ? old : "") < 0)
		return;
	setenv("PATH", path, 1);
	free(path);
	/* the clients must not pick up a user's debug settings */
	unsetenv("LIBNBD_DEBUG");
}

const char *nt_tool(const char *name, const char *package, char *buf, size_t len)
{
	nt_env_init();
	const char *path = getenv("PATH");
	char *copy = strdup(path ? path : "/usr/bin:/bin");
	if (!copy)
		return NULL;
	char *save = NULL;
	const char *found = NULL;
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		snprintf(buf, len, "%s/%s", dir, name);
		if (access(buf, X_OK) == 0) {
			found = buf;
			break;
		}
	}
	free(copy);
	if (!found)
		fprintf(stderr,
			"nbdtest: %s not found: install the Debian package %s "
			"(deploy/install-deps.sh does)\n",
			name, package);
	return found;
}

/* tool_package -- the Debian package of a tool, for the message when it is missing */
static const char *tool_package(const char *name)
{
	if (strcmp(name, "qemu-img") == 0)
		return "qemu-utils";
	if (strcmp(name, "fio") == 0)
		return "fio";
	if (strcmp(name, "nbdsh") == 0)
		return "libnbd-bin and python3-libnbd";
	return "libnbd-bin";
}

int nt_run(const char *const argv[], struct hx_run *r, bool verbose)
{
	char path[512];
	const char *args[48];
	size_t n = 0;
	memset(r, 0, sizeof(*r));
	if (!nt_tool(argv[0], tool_package(argv[0]), path, sizeof(path)))
		return -ENOENT;
	args[n++] = path;
	for (size_t i = 1; argv[i] && n < 47; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	int ret = hx_run_argv(args, NULL, 0, r);
	if (ret)
		return ret;
	if (r->status != 0 || verbose) {
		fprintf(stderr, "$");
		for (size_t i = 0; args[i]; i++)
			fprintf(stderr, " %s", args[i]);
		fprintf(stderr, "\n[exit %d]\n--- stdout\n%s--- stderr\n%s---\n", r->status, r->out,
			r->err);
	}
	return 0;
}

int nt_nbdsh(const char *script, const char *const env[], struct hx_run *r)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "exec(compile(open('%s/%s').read(), '%s', 'exec'))",
		 NBD_SCRIPTS_DIR, script, script);
	for (size_t i = 0; env && env[i]; i++)
		putenv((char *)env[i]);
	const char *argv[] = {"nbdsh", "-n", "-c", cmd, NULL};
	int ret = nt_run(argv, r, false);
	for (size_t i = 0; env && env[i]; i++) {
		char name[128];
		const char *eq = strchr(env[i], '=');
		snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - env[i]) : 0, env[i]);
		unsetenv(name);
	}
	return ret;
}

int nt_read_file(const char *path, uint8_t **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	struct stat st;
	if (fstat(fileno(f), &st) < 0) {
		fclose(f);
		return -errno;
	}
	uint8_t *b = malloc((size_t)st.st_size + 1);
	if (!b) {
		fclose(f);
		return -ENOMEM;
	}
	size_t n = fread(b, 1, (size_t)st.st_size, f);
	fclose(f);
	if (n != (size_t)st.st_size) {
		free(b);
		return -EIO;
	}
	*buf = b;
	*len = n;
	return 0;
}

/* ---- raw client ---- */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

int nt_raw_send(struct nt_raw *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int nt_raw_recv(struct nt_raw *c, void *buf, size_t len)
{
	uint8_t *p = buf;
	int64_t deadline = hx_now_ms() + NT_TIMEOUT_MS;
	while (len > 0) {
		int64_t left = deadline - hx_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		int r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		ssize_t n = recv(c->fd, p, len, 0);
		if (n == 0)
			return -EPIPE;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

bool nt_raw_eof(struct nt_raw *c)
{
	uint8_t b;
	return nt_raw_recv(c, &b, 1) == -EPIPE;
}

/* raw_greeting -- on the connected c->fd: read the greeting and check it; 0 or -errno */
static int raw_greeting(struct nt_raw *c)
{
	uint8_t g[NBD_GREETING_SIZE];
	int ret = nt_raw_recv(c, g, sizeof(g));
	if (ret) {
		nt_raw_close(c);
		return ret;
	}
	if (get64(g) != NBD_MAGIC || get64(g + 8) != NBD_OPTS_MAGIC ||
	    get16(g + 16) != (NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES)) {
		fprintf(stderr, "nbdtest: unexpected greeting\n");
		nt_raw_close(c);
		return -EBADMSG;
	}
	return 0;
}

int nt_raw_connect(struct nt_raw *c, int port)
{
	c->structured = false;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int ret = -errno;
		nt_raw_close(c);
		return ret;
	}
	return raw_greeting(c);
}

int nt_raw_connect_unix(struct nt_raw *c, const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	c->structured = false;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int ret = -errno;
		nt_raw_close(c);
		return ret;
	}
	return raw_greeting(c);
}

void nt_raw_close(struct nt_raw *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

int nt_raw_option(struct nt_raw *c, uint32_t option, const void *data, uint32_t len)
{
	uint8_t h[NBD_OPT_HEADER_SIZE];
	nbd_opt_header_encode(h, option, len);
	int ret = nt_raw_send(c, h, sizeof(h));
	if (ret == 0 && data && len)
		ret = nt_raw_send(c, data, len);
	return ret;
}

int nt_raw_opt_reply(struct nt_raw *c, struct nt_opt_reply *r)
{
	uint8_t h[NBD_OPT_REPLY_HEADER_SIZE];
	int ret = nt_raw_recv(c, h, sizeof(h));
	if (ret)
		return ret;
	if (get64(h) != NBD_REP_MAGIC)
		return -EBADMSG;
	r->option = get32(h + 8);
	r->type = get32(h + 12);
	r->len = get32(h + 16);
	memset(r->data, 0, sizeof(r->data));
	uint32_t keep = r->len < sizeof(r->data) ? r->len : (uint32_t)sizeof(r->data);
	ret = nt_raw_recv(c, r->data, keep);
	for (uint32_t left = r->len - keep; ret == 0 && left > 0;) {
		uint8_t sink[512];
		uint32_t n = left < sizeof(sink) ? left : (uint32_t)sizeof(sink);
		ret = nt_raw_recv(c, sink, n);
		left -= n;
	}
	return ret;
}

int nt_raw_go(struct nt_raw *c, const char *export, bool structured, uint64_t *size)
{
	struct nt_opt_reply r;
	int ret;
	if (structured) {
		ret = nt_raw_option(c, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
		if (ret == 0)
			ret = nt_raw_opt_reply(c, &r);
		if (ret)
			return ret;
		if (r.type != NBD_REP_ACK)
			return (int)(r.type & 0x7fffffff);
		c->structured = true;
	}
	size_t nlen = strlen(export);
	uint8_t data[4 + 256 + 2 + 2];
	if (nlen > 256)
		return -EINVAL;
	put32(data, (uint32_t)nlen);
	memcpy(data + 4, export, nlen);
	put16(data + 4 + nlen, 1);
	put16(data + 6 + nlen, NBD_INFO_BLOCK_SIZE);
	ret = nt_raw_option(c, NBD_OPT_GO, data, (uint32_t)(8 + nlen));
	if (ret)
		return ret;
	for (;;) {
		ret = nt_raw_opt_reply(c, &r);
		if (ret)
			return ret;
		if (r.option != NBD_OPT_GO)
			return -EBADMSG;
		if (r.type == NBD_REP_INFO) {
			if (r.len >= 12 && get16(r.data) == NBD_INFO_EXPORT && size)
				*size = get64(r.data + 2);
			continue;
		}
		if (r.type == NBD_REP_ACK)
			return 0;
		return (int)(r.type & 0x7fffffff);
	}
}

int nt_raw_request(struct nt_raw *c, uint16_t type, uint16_t flags, uint64_t handle,
		   uint64_t offset, uint32_t length, const void *payload, uint32_t payload_len)
{
	struct nbd_request r = {
	    .magic = NBD_REQUEST_MAGIC,
	    .flags = flags,
	    .type = type,
	    .handle = handle,
	    .offset = offset,
	    .length = length,
	};
	uint8_t h[NBD_REQUEST_SIZE];
	nbd_request_encode(h, &r);
	int ret = nt_raw_send(c, h, sizeof(h));
	if (ret == 0 && payload && payload_len)
		ret = nt_raw_send(c, payload, payload_len);
	return ret;
}

/* read_chunk_payload -- the rest of a chunk after its header */
static int read_chunk_payload(struct nt_raw *c, struct nt_reply *r, uint16_t type, uint32_t len,
			      uint8_t *buf, size_t buf_len)
{
	int ret;
	uint8_t tmp[8];
	switch (type) {
	case NBD_REPLY_TYPE_NONE:
		return len == 0 ? 0 : -EBADMSG;
	case NBD_REPLY_TYPE_OFFSET_DATA: {
		if (len < 9)
			return -EBADMSG;
		ret = nt_raw_recv(c, tmp, 8);
		if (ret)
			return ret;
		if (r->data_len == 0)
			r->offset = get64(tmp);
		uint32_t dlen = len - 8;
		if (r->data_len + (size_t)dlen > buf_len)
			return -EBADMSG;
		ret = nt_raw_recv(c, buf + r->data_len, dlen);
		r->data_len += dlen;
		return ret;
	}
	case NBD_REPLY_TYPE_ERROR:
	case NBD_REPLY_TYPE_ERROR_OFFSET: {
		if (len < 6)
			return -EBADMSG;
		uint8_t eh[6];
		ret = nt_raw_recv(c, eh, 6);
		if (ret)
			return ret;
		r->error = get32(eh);
		uint16_t mlen = get16(eh + 4);
		if ((uint32_t)mlen + 6 > len || r->error == 0)
			return -EBADMSG;
		uint8_t rest[4200];
		if (len - 6 > sizeof(rest))
			return -EBADMSG;
		ret = nt_raw_recv(c, rest, len - 6);
		if (ret)
			return ret;
		size_t keep = mlen < sizeof(r->message) - 1 ? mlen : sizeof(r->message) - 1;
		memcpy(r->message, rest, keep);
		r->message[keep] = '\0';
		return 0;
	}
	default:
		return -EBADMSG;
	}
}

int nt_raw_reply(struct nt_raw *c, struct nt_reply *r, void *buf, size_t buf_len,
		 uint32_t expect_data)
{
	memset(r, 0, sizeof(*r));
	uint8_t m[4];
	int ret = nt_raw_recv(c, m, 4);
	if (ret)
		return ret;
	if (get32(m) == NBD_SIMPLE_REPLY_MAGIC) {
		uint8_t h[12];
		ret = nt_raw_recv(c, h, sizeof(h));
		if (ret)
			return ret;
		r->error = get32(h);
		r->handle = get64(h + 4);
		if (r->error == 0 && expect_data) {
			if (expect_data > buf_len)
				return -EBADMSG;
			ret = nt_raw_recv(c, buf, expect_data);
			r->data_len = expect_data;
		}
		return ret;
	}
	if (get32(m) != NBD_STRUCTURED_REPLY_MAGIC)
		return -EBADMSG;
	r->structured = true;
	for (bool first = true;; first = false) {
		uint8_t h[16];
		if (!first) {
			ret = nt_raw_recv(c, m, 4);
			if (ret)
				return ret;
			if (get32(m) != NBD_STRUCTURED_REPLY_MAGIC)
				return -EBADMSG;
		}
		ret = nt_raw_recv(c, h, sizeof(h));
		if (ret)
			return ret;
		uint16_t flags = get16(h), type = get16(h + 2);
		uint64_t handle = get64(h + 4);
		uint32_t len = get32(h + 12);
		if (!first && handle != r->handle)
			return -EBADMSG; /* the tests keep one request in flight when they read
					    chunks */
		r->handle = handle;
		r->chunks++;
		ret = read_chunk_payload(c, r, type, len, buf, buf_len);
		if (ret)
			return ret;
		if (flags & NBD_REPLY_FLAG_DONE)
			return 0;
	}
}

int nt_raw_roundtrip(struct nt_raw *c, uint64_t off, uint32_t len, uint64_t seed)
{
	uint8_t *w = malloc(len), *rd = malloc(len);
	int ret = -ENOMEM;
	struct nt_reply r;
	if (!w || !rd)
		goto out;
	hx_pattern(w, len, seed, off);
	ret = nt_raw_request(c, NBD_CMD_WRITE, 0, seed, off, len, w, len);
	if (ret == 0)
		ret = nt_raw_reply(c, &r, NULL, 0, 0);
	if (ret == 0 && (r.error || r.handle != seed))
		ret = -EIO;
	if (ret == 0)
		ret = nt_raw_request(c, NBD_CMD_FLUSH, 0, seed + 1, 0, 0, NULL, 0);
	if (ret == 0)
		ret = nt_raw_reply(c, &r, NULL, 0, 0);
	if (ret == 0 && (r.error || r.handle != seed + 1))
		ret = -EIO;
	if (ret == 0)
		ret = nt_raw_request(c, NBD_CMD_READ, 0, seed + 2, off, len, NULL, 0);
	if (ret == 0)
		ret = nt_raw_reply(c, &r, rd, len, len);
	if (ret == 0 &&
	    (r.error || r.handle != seed + 2 || r.data_len != len || memcmp(w, rd, len) != 0))
		ret = -EIO;
out:
	free(w);
	free(rd);
	return ret;
}
