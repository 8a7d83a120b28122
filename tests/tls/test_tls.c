/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_tls.c -- TLS, identities and per-volume access against the real rdaxd
 *
 * One daemon with --tls require, a PSK file (alice, bob), x509 credentials
 * with --tls-verify-peer and an ACL (docs/security.md), made fresh by
 * mkcerts.sh with GnuTLS's certtool and psktool. Real clients throughout:
 * librdax and the rdax command over rdaxs:// with PSK and with x509,
 * nbdinfo, nbdcopy and qemu-img over nbds:// with both, and nbdinfo and
 * nbdcopy over nbds+unix:// (the unix socket) with PSK.
 *
 * Every refusal runs with a bystander: a TLS connection opened before the
 * first refusal writes, fsyncs and reads back after each one, so a refusal
 * that hurt the daemon or another client fails the test. Access is checked
 * over the native protocol and NBD, with a control: the same daemon without
 * --acl lets alice see bob's volume, so the invisibility is the ACL's doing.
 * Plain NBD is refused on the unix socket as on TCP (every option before
 * STARTTLS), and the --control run sees it served when TLS is broken.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <gnutls/gnutls.h>

#include "frame.h"
#include "librdax.h"
#include "nbdtest.h"
#include "tls_client.h"

#define VOL_SIZE (16ULL << 20)

static struct {
	char dir[256], certs[320], psk[400], wrong_psk[400], carol_psk[400], acl[400];
	char conf[400], conf_noacl[400];
	struct nt_daemon n;
	struct rdax_conn *bystander; /* bob over PSK, open from the start */
	uint64_t round;
	const char *faults; /* --control: the daemon's RDAX_FAULTS */
} T;

/* path -- T.certs/@sub */
static const char *path(char *buf, size_t len, const char *sub)
{
	snprintf(buf, len, "%s/%s", T.certs, sub);
	return buf;
}

/* write_text -- @path with the formatted text; asserts */
static void write_text(const char *file, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	assert_int_equal(hx_write_file(file, buf, (size_t)n), 0);
}

/* connect_psk -- rdaxs:// with @user of @file; the return of rdax_connect */
static int connect_psk(const char *file, const char *user, struct rdax_conn **c)
{
	struct rdax_conn_opts *o;
	assert_int_equal(rdax_conn_opts_new(&o), 0);
	assert_int_equal(rdax_conn_opts_set_tls_psk(o, file, user), 0);
	rdax_conn_opts_set_timeout(o, 30000);
	char url[96];
	snprintf(url, sizeof(url), "rdaxs://127.0.0.1:%d", T.n.d.port);
	int ret = rdax_connect(url, o, c);
	rdax_conn_opts_delete(&o);
	return ret;
}

/* connect_x509 -- rdaxs://localhost (the name in the server's certificate) with @who's dir */
static int connect_x509(const char *who, struct rdax_conn **c)
{
	char dir[400];
	struct rdax_conn_opts *o;
	assert_int_equal(rdax_conn_opts_new(&o), 0);
	assert_int_equal(rdax_conn_opts_set_tls_certificates(o, path(dir, sizeof(dir), who)), 0);
	rdax_conn_opts_set_timeout(o, 30000);
	char url[96];
	snprintf(url, sizeof(url), "rdaxs://localhost:%d", T.n.d.port);
	int ret = rdax_connect(url, o, c);
	rdax_conn_opts_delete(&o);
	return ret;
}

/* roundtrip -- on @c: write @len bytes of a fresh pattern to @vol at @off, durable, read back */
static void roundtrip(struct rdax_conn *c, const char *vol, uint64_t off, size_t len)
{
	struct rdax_volume *v;
	int ret = rdax_volume_open(c, vol, &v);
	if (ret)
		fail_msg("open %s: %s", vol, rdax_conn_last_error(c));
	uint8_t *w = malloc(len), *r = malloc(len);
	assert_non_null(w);
	assert_non_null(r);
	hx_pattern(w, len, ++T.round, off);
	assert_int_equal(rdax_write(v, off, w, len, RDAX_WRITE_FSYNC), 0);
	assert_int_equal(rdax_read(v, off, r, len), 0);
	assert_memory_equal(w, r, len);
	assert_int_equal(rdax_volume_close(&v), 0);
	free(w);
	free(r);
}

/* bystander_ok -- the connection opened before the refusals still works */
static void bystander_ok(void)
{
	roundtrip(T.bystander, "bob-1", 4096 * (T.round % 64), 8192);
}

/* run -- @argv (a path, or a tool found by nt_run) with its output captured; its exit status */
static int run(const char *const argv[], struct hx_run *r)
{
	if (argv[0][0] == '/')
		assert_int_equal(hx_run_argv(argv, NULL, 0, r), 0);
	else
		assert_int_equal(nt_run(argv, r, false), 0);
	return r->status;
}

static int group_setup(void **state)
{
	nt_env_init();
	if (hx_tmpdir_make("tls", T.dir, sizeof(T.dir)))
		return -1;
	snprintf(T.certs, sizeof(T.certs), "%s/certs", T.dir);
	const char *mk[] = {MKCERTS_PATH, T.certs, NULL};
	struct hx_run r;
	if (hx_run_argv(mk, NULL, 0, &r) || r.status != 0) {
		fprintf(stderr, "mkcerts.sh failed: %s\n", r.err ? r.err : "");
		return -1;
	}
	hx_run_free(&r);
	snprintf(T.psk, sizeof(T.psk), "%s/keys.psk", T.certs);
	snprintf(T.wrong_psk, sizeof(T.wrong_psk), "%s/wrong.psk", T.certs);
	snprintf(T.carol_psk, sizeof(T.carol_psk), "%s/carol.psk", T.dir);
	snprintf(T.acl, sizeof(T.acl), "%s/acl", T.dir);
	snprintf(T.conf, sizeof(T.conf), "%s/rdaxd.conf", T.dir);
	/* carol: a well-formed key for a user the daemon does not know */
	write_text(T.carol_psk, "carol:00112233445566778899aabbccddeeff\n");
	write_text(T.acl, "# SUBJECT VOLUMES RIGHTS\n"
			  "user:alice alice-* rw,create\n"
			  "user:alice shared ro\n"
			  "user:bob   bob-*   rw,create\n"
			  "user:bob   shared  rw,create\n");
	write_text(T.conf,
		   "tls = require\ntls-psk = %s\ntls-certificates = %s/server\n"
		   "tls-verify-peer = true\nacl = %s\n",
		   T.psk, T.certs, T.acl);
	struct hx_daemon_opts o = {
	    .mode = "sim", .faults = T.faults, .extra_args = {"--config", T.conf}};
	if (nt_daemon_start(&T.n, T.dir, &o))
		return -1;
	struct rdax_conn *c;
	if (connect_psk(T.psk, "alice", &c) || rdax_volume_create(c, "alice-1", VOL_SIZE, 0) ||
	    rdax_disconnect(&c)) {
		fprintf(stderr, "setup alice: %s\n", rdax_connect_last_error());
		return -1;
	}
	if (connect_psk(T.psk, "bob", &c) || rdax_volume_create(c, "bob-1", VOL_SIZE, 0) ||
	    rdax_volume_create(c, "shared", VOL_SIZE, 0) || rdax_disconnect(&c)) {
		fprintf(stderr, "setup bob: %s\n", rdax_connect_last_error());
		return -1;
	}
	if (connect_psk(T.psk, "bob", &T.bystander))
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	rdax_disconnect(&T.bystander);
	int ret = hx_daemon_stop(&T.n.d);
	if (ret == 0)
		hx_tmpdir_remove(T.dir);
	return ret ? -1 : 0;
}

/* ---- clients over TLS ---- */

/* librdax over rdaxs:// with a PSK and with a certificate: the same bytes either way */
static void librdax__psk_and_x509(void **state)
{
	struct rdax_conn *p, *x;
	assert_int_equal(connect_psk(T.psk, "alice", &p), 0);
	if (connect_x509("alice", &x))
		fail_msg("x509: %s", rdax_connect_last_error());
	/* 3 MiB: payloads of several records, decrypted straight into the mapping */
	size_t len = 3U << 20;
	roundtrip(p, "alice-1", 1U << 20, len);
	struct rdax_volume *v;
	assert_int_equal(rdax_volume_open(x, "alice-1", &v), 0);
	uint8_t *want = malloc(len), *got = malloc(len);
	hx_pattern(want, len, T.round, 1U << 20);
	assert_int_equal(rdax_read(v, 1U << 20, got, len), 0);
	assert_memory_equal(want, got, len);
	/* queue depth 32 of 4 KiB durable writes: many records in flight both ways */
	struct rdax_completion comp[32];
	unsigned sent = 0, done = 0;
	while (done < 256) {
		while (sent < 256 && sent - done < 32) {
			assert_int_equal(rdax_submit_write(v, (uint64_t)sent * 4096,
							   want + sent * 4096, 4096,
							   RDAX_WRITE_FSYNC, sent),
					 0);
			sent++;
		}
		int n = rdax_wait_completions(x, comp, 32, 1, 30000);
		assert_true(n > 0);
		for (int i = 0; i < n; i++)
			assert_int_equal(comp[i].status, 0);
		done += (unsigned)n;
	}
	assert_int_equal(rdax_read(v, 0, got, 256 * 4096), 0);
	assert_memory_equal(want, got, 256 * 4096);
	assert_int_equal(rdax_volume_close(&v), 0);
	free(want);
	free(got);
	assert_int_equal(rdax_disconnect(&p), 0);
	assert_int_equal(rdax_disconnect(&x), 0);
}

/* the rdax command over rdaxs:// with each kind of credentials, import then export */
static void cli__psk_and_x509(void **state)
{
	char url[96], in[400], out[400], dir[400];
	snprintf(url, sizeof(url), "rdaxs://localhost:%d", T.n.d.port);
	snprintf(in, sizeof(in), "%s/in", T.dir);
	snprintf(out, sizeof(out), "%s/out", T.dir);
	size_t len = 2U << 20;
	uint8_t *b = malloc(len);
	hx_pattern(b, len, 77, 0);
	assert_int_equal(hx_write_file(in, b, len), 0);
	struct hx_run r;
	const char *imp[] = {RDAX_CLI_PATH,    "--server", url,	     "--tls-psk", T.psk,
			     "--tls-username", "alice",	   "import", in,	  "alice-1",
			     "--fsync",	       NULL};
	if (run(imp, &r) != 0)
		fail_msg("rdax import: %s", r.err);
	hx_run_free(&r);
	const char *exp[] = {RDAX_CLI_PATH,
			     "--server",
			     url,
			     "--tls-certificates",
			     path(dir, sizeof(dir), "alice"),
			     "export",
			     "alice-1",
			     out,
			     NULL};
	if (run(exp, &r) != 0)
		fail_msg("rdax export: %s", r.err);
	hx_run_free(&r);
	uint8_t *got;
	size_t got_len;
	assert_int_equal(nt_read_file(out, &got, &got_len), 0);
	assert_int_equal(got_len, VOL_SIZE);
	assert_memory_equal(got, b, len);
	free(got);
	free(b);
	/* TLS options with tcp:// are refused, not sent in clear */
	char plain[96];
	snprintf(plain, sizeof(plain), "tcp://127.0.0.1:%d", T.n.d.port);
	const char *clear[] = {RDAX_CLI_PATH, "--server", plain,  "--tls-psk",
			       T.psk,	      "volume",	  "list", NULL};
	assert_int_not_equal(run(clear, &r), 0);
	assert_non_null(strstr(r.err, "rdaxs://"));
	hx_run_free(&r);
}

/*
 * nbdinfo_copy_roundtrip -- nbdinfo at @info_uri says TLS; a volume's worth
 * of pattern @seed copied up to @up_uri by nbdcopy and down again from
 * @down_uri reads back equal (@what names the case in a failure)
 */
static void nbdinfo_copy_roundtrip(const char *what, const char *info_uri, const char *up_uri,
				   const char *down_uri, uint64_t seed)
{
	char src[400], dst[400];
	snprintf(src, sizeof(src), "%s/%s-src", T.dir, what);
	snprintf(dst, sizeof(dst), "%s/%s-dst", T.dir, what);
	uint8_t *b = malloc(VOL_SIZE);
	assert_non_null(b);
	hx_pattern(b, VOL_SIZE, seed, 0);
	assert_int_equal(hx_write_file(src, b, VOL_SIZE), 0);
	struct hx_run r;
	const char *info[] = {"nbdinfo", info_uri, NULL};
	if (run(info, &r) != 0)
		fail_msg("nbdinfo (%s): %s", what, r.err);
	assert_non_null(strstr(r.out, "with TLS"));
	hx_run_free(&r);
	const char *up[] = {"nbdcopy", src, up_uri, NULL};
	if (run(up, &r) != 0)
		fail_msg("nbdcopy up (%s): %s", what, r.err);
	hx_run_free(&r);
	unlink(dst);
	const char *down[] = {"nbdcopy", down_uri, dst, NULL};
	if (run(down, &r) != 0)
		fail_msg("nbdcopy down (%s): %s", what, r.err);
	hx_run_free(&r);
	uint8_t *got;
	size_t got_len;
	assert_int_equal(nt_read_file(dst, &got, &got_len), 0);
	assert_int_equal(got_len, VOL_SIZE);
	assert_memory_equal(got, b, VOL_SIZE);
	free(got);
	free(b);
}

/* nbdinfo, nbdcopy and qemu-img over nbds:// with a PSK and with certificates */
static void nbd__interop_psk_and_x509(void **state)
{
	char psk_uri[512], x509_uri[512], dir[400], dst[400];
	snprintf(psk_uri, sizeof(psk_uri), "nbds://alice@127.0.0.1:%d/alice-1?tls-psk-file=%s",
		 T.n.nbd_port, T.psk);
	snprintf(x509_uri, sizeof(x509_uri), "nbds://localhost:%d/alice-1?tls-certificates=%s",
		 T.n.nbd_port, path(dir, sizeof(dir), "alice"));
	/* up with the PSK, down with the certificate */
	nbdinfo_copy_roundtrip("nbd", x509_uri, psk_uri, x509_uri, 99);
	snprintf(dst, sizeof(dst), "%s/nbd-dst", T.dir);
	uint8_t *b = malloc(VOL_SIZE), *got;
	size_t got_len;
	struct hx_run r;
	assert_non_null(b);
	hx_pattern(b, VOL_SIZE, 99, 0);
	/* qemu-img: PSK (its dir holds keys.psk) and x509 (ca, client cert and key) */
	char port[16], opts_psk[512], opts_x509[512], obj_psk[512], obj_x509[512];
	snprintf(port, sizeof(port), "%d", T.n.nbd_port);
	snprintf(opts_psk, sizeof(opts_psk),
		 "driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=%s,"
		 "export=alice-1,tls-creds=tls0",
		 port);
	snprintf(obj_psk, sizeof(obj_psk),
		 "tls-creds-psk,id=tls0,endpoint=client,dir=%s,username=alice", T.certs);
	snprintf(opts_x509, sizeof(opts_x509),
		 "driver=nbd,server.type=inet,server.host=localhost,server.port=%s,"
		 "export=alice-1,tls-creds=tls0",
		 port);
	snprintf(obj_x509, sizeof(obj_x509), "tls-creds-x509,id=tls0,endpoint=client,dir=%s",
		 path(dir, sizeof(dir), "alice"));
	const char *qinfo[] = {"qemu-img",     "info",	 "--object", obj_psk,
			       "--image-opts", opts_psk, NULL};
	if (run(qinfo, &r) != 0)
		fail_msg("qemu-img info (psk): %s", r.err);
	assert_non_null(strstr(r.out, "16 MiB"));
	hx_run_free(&r);
	unlink(dst);
	const char *qconv[] = {"qemu-img", "convert", "--object", obj_x509, "--image-opts",
			       opts_x509,  "-O",      "raw",	  dst,	    NULL};
	if (run(qconv, &r) != 0)
		fail_msg("qemu-img convert (x509): %s", r.err);
	hx_run_free(&r);
	assert_int_equal(nt_read_file(dst, &got, &got_len), 0);
	assert_int_equal(got_len, VOL_SIZE);
	assert_memory_equal(got, b, VOL_SIZE);
	free(got);
	free(b);
	bystander_ok();
}

/*
 * nbds+unix:// with a PSK: nbdinfo and nbdcopy over the daemon's unix
 * socket, which --tls require guards like its TCP listener; the bytes
 * copied in are the bytes copied out
 */
static void nbd__unix_socket_psk(void **state)
{
	char uri[1024];
	snprintf(uri, sizeof(uri), "nbds+unix://alice@/alice-1?socket=%s&tls-psk-file=%s",
		 T.n.sock_path, T.psk);
	nbdinfo_copy_roundtrip("unix", uri, uri, uri, 77);
	bystander_ok();
}

/* ---- refusals, each with the bystander served after it ---- */

/* plaintext_connect -- a tcp:// client's rdax_connect (closed again if it got in) */
static int plaintext_connect(void)
{
	char url[96];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", T.n.d.port);
	struct rdax_conn *c = NULL;
	int ret = rdax_connect(url, NULL, &c);
	if (ret == 0)
		rdax_disconnect(&c);
	return ret;
}

/* x509_connect -- rdax_connect with @who's certificate (closed again if it got in) */
static int x509_connect(const char *who)
{
	struct rdax_conn *c = NULL;
	int ret = connect_x509(who, &c);
	if (ret == 0)
		rdax_disconnect(&c);
	return ret;
}

static void refuse__plaintext_native(void **state)
{
	assert_int_equal(plaintext_connect(), -RDAX_E_ACCESS);
	assert_non_null(strstr(rdax_connect_last_error(), "requires TLS"));
	bystander_ok();
}

/*
 * refused_before_starttls -- on @c, just connected to a --tls require NBD
 * listener: NBD_OPT_LIST and NBD_OPT_GO before STARTTLS get
 * NBD_REP_ERR_TLS_REQD (the LIST's message checked if @check_message),
 * EXPORT_NAME (no error reply) closes the connection; @c is closed
 */
static void refused_before_starttls(struct nt_raw *c, bool check_message)
{
	uint8_t f[4] = {0, 0, 0, 3};
	assert_int_equal(nt_raw_send(c, f, 4), 0);
	assert_int_equal(nt_raw_option(c, NBD_OPT_LIST, NULL, 0), 0);
	struct nt_opt_reply r;
	assert_int_equal(nt_raw_opt_reply(c, &r), 0);
	assert_int_equal(r.type, NBD_REP_ERR_TLS_REQD);
	if (check_message) {
		/* the error reply's message says what to do */
		r.data[r.len < sizeof(r.data) ? r.len : sizeof(r.data) - 1] = '\0';
		assert_non_null(strstr((const char *)r.data, "requires TLS"));
	}
	assert_int_equal(nt_raw_go(c, "alice-1", false, NULL),
			 (int)(NBD_REP_ERR_TLS_REQD & 0x7fffffff));
	assert_int_equal(nt_raw_option(c, NBD_OPT_EXPORT_NAME, "alice-1", 7), 0);
	assert_true(nt_raw_eof(c));
	nt_raw_close(c);
}

static void refuse__nbd_without_starttls(void **state)
{
	struct nt_raw c;
	assert_int_equal(nt_raw_connect(&c, T.n.nbd_port), 0);
	refused_before_starttls(&c, false);
	bystander_ok();
}

/*
 * plain nbd+unix:// to the same daemon: every option before STARTTLS is
 * refused (NBD_REP_ERR_TLS_REQD, EXPORT_NAME closes), as over TCP; a
 * local client proves nothing that --tls require would take instead.
 * nbdinfo without TLS gets the refusal as its error.
 */
static void refuse__nbd_unix_without_starttls(void **state)
{
	struct nt_raw c;
	assert_int_equal(nt_raw_connect_unix(&c, T.n.sock_path), 0);
	refused_before_starttls(&c, true);
	bystander_ok();

	/*
	 * libnbd reports NBD_REP_ERR_TLS_REQD to NBD_OPT_GO as ENOTSUP, and
	 * logs the server's message under LIBNBD_DEBUG
	 */
	char uri[512];
	snprintf(uri, sizeof(uri), "nbd+unix:///alice-1?socket=%s", T.n.sock_path);
	struct hx_run ir;
	const char *info[] = {"nbdinfo", uri, NULL};
	setenv("LIBNBD_DEBUG", "1", 1);
	int status = run(info, &ir);
	unsetenv("LIBNBD_DEBUG");
	assert_int_not_equal(status, 0);
	assert_non_null(ir.err);
	assert_non_null(strstr(ir.err, "requires TLS"));
	assert_null(strstr(ir.out ? ir.out : "", "export-size"));
	hx_run_free(&ir);
	bystander_ok();
}

static void refuse__wrong_psk_and_unknown_user(void **state)
{
	struct rdax_conn *c = NULL;
	assert_int_equal(connect_psk(T.wrong_psk, "alice", &c), -ECONNREFUSED);
	assert_non_null(strstr(rdax_connect_last_error(), "TLS handshake failed"));
	assert_int_equal(connect_psk(T.carol_psk, "carol", &c), -ECONNREFUSED);
	bystander_ok();
	/* the same over NBD */
	char uri[512];
	snprintf(uri, sizeof(uri), "nbds://alice@127.0.0.1:%d/alice-1?tls-psk-file=%s",
		 T.n.nbd_port, T.wrong_psk);
	struct hx_run r;
	const char *info[] = {"nbdinfo", uri, NULL};
	assert_int_not_equal(run(info, &r), 0);
	hx_run_free(&r);
	bystander_ok();
}

static void refuse__foreign_and_expired_certificates(void **state)
{
	const char *who[] = {"other", "expired"};
	for (int i = 0; i < 2; i++) {
		if (x509_connect(who[i]) == 0)
			fail_msg("a client certificate of %s was accepted", who[i]);
		assert_non_null(strstr(rdax_connect_last_error(), "TLS"));
		bystander_ok();
	}
	/* and a client with no certificate at all (the CA only) */
	char dir[400];
	snprintf(dir, sizeof(dir), "%s/ca-only", T.dir);
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp %s/main-ca-cert.pem %s/ca-cert.pem", dir,
		 T.certs, dir);
	assert_int_equal(system(cmd), 0);
	struct rdax_conn_opts *o;
	assert_int_equal(rdax_conn_opts_new(&o), 0);
	assert_int_equal(rdax_conn_opts_set_tls_certificates(o, dir), 0);
	char url[96];
	snprintf(url, sizeof(url), "rdaxs://localhost:%d", T.n.d.port);
	struct rdax_conn *c = NULL;
	assert_int_not_equal(rdax_connect(url, o, &c), 0);
	rdax_conn_opts_delete(&o);
	bystander_ok();
}

/* tls_raw -- a TLS session of our own to the native port (alice's PSK), for raw abuse */
static int tls_raw(gnutls_session_t *s, struct tls_client **cr)
{
	char err[512];
	struct tls_client_opts o = {.psk_file = T.psk, .username = "alice"};
	assert_int_equal(tls_client_new(&o, cr, err, sizeof(err)), 0);
	/* a plain TCP socket (nt_raw_connect reads an NBD greeting: not here) */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)T.n.d.port),
				.sin_addr.s_addr = htonl(0x7f000001)};
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (tls_client_handshake(*cr, fd, NULL, 30000, s, err, sizeof(err)))
		fail_msg("raw TLS: %s", err);
	return fd;
}

/* closed_within -- does the daemon close @fd within @ms (reading and dropping what comes)? */
static bool closed_within(int fd, int ms)
{
	int64_t end = hx_now_ms() + ms;
	while (hx_now_ms() < end) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 500) <= 0)
			continue;
		uint8_t b[4096];
		ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return true;
	}
	return false;
}

/* garbage records in the middle of a stream: the connection ends, nothing else does */
static void refuse__record_garbage_mid_stream(void **state)
{
	for (int round = 0; round < 2; round++) {
		gnutls_session_t s;
		struct tls_client *cr;
		int fd = tls_raw(&s, &cr);
		/* a HELLO frame's start in a proper record, then bytes that are no record */
		uint8_t hdr[FRAME_HEADER_SIZE] = {0x52, 0x44, 0x41, 0x58, 1, 0, 1, 0};
		while (gnutls_record_send(s, hdr, sizeof(hdr)) == GNUTLS_E_AGAIN)
			;
		uint8_t junk[300];
		hx_pattern(junk, sizeof(junk), 1234 + round, 0);
		if (round == 1) /* a record header that claims a valid type and length */
			memcpy(junk, "\x17\x03\x03\x01\x00", 5);
		assert_int_equal(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
		assert_true(closed_within(fd, 30000));
		gnutls_deinit(s);
		tls_client_delete(&cr);
		close(fd);
		bystander_ok();
	}
}

/* a handshake that never finishes: the daemon drops it after its timeout */
static void refuse__handshake_never_finishes(void **state)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)T.n.d.port),
				.sin_addr.s_addr = htonl(0x7f000001)};
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	/* the start of a ClientHello record, never completed */
	static const uint8_t part[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc};
	assert_int_equal(send(fd, part, sizeof(part), MSG_NOSIGNAL), (ssize_t)sizeof(part));
	bystander_ok(); /* served while the handshake hangs */
	/* TLS_HANDSHAKE_TIMEOUT is 10 s; the bound only keeps a broken daemon from hanging us */
	assert_true(closed_within(fd, 60000));
	close(fd);
	bystander_ok();
}

/* downgrades: TLS 1.1 offered alone; plaintext or injected bytes after STARTTLS */
static void refuse__downgrades(void **state)
{
	/* a client that offers only TLS 1.0 and 1.1 */
	gnutls_session_t s;
	assert_int_equal(gnutls_init(&s, GNUTLS_CLIENT), 0);
	assert_int_equal(
	    gnutls_priority_set_direct(s, "NORMAL:-VERS-ALL:+VERS-TLS1.1:+VERS-TLS1.0:+PSK", NULL),
	    0);
	gnutls_psk_client_credentials_t pc;
	gnutls_psk_allocate_client_credentials(&pc);
	gnutls_datum_t key = {(unsigned char *)"00112233", 8};
	gnutls_psk_set_client_credentials(pc, "alice", &key, GNUTLS_PSK_KEY_HEX);
	gnutls_credentials_set(s, GNUTLS_CRD_PSK, pc);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)T.n.d.port),
				.sin_addr.s_addr = htonl(0x7f000001)};
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	gnutls_transport_set_int(s, fd);
	int g;
	do
		g = gnutls_handshake(s);
	while (g < 0 && !gnutls_error_is_fatal(g));
	assert_true(g < 0);
	gnutls_deinit(s);
	gnutls_psk_free_client_credentials(pc);
	close(fd);
	bystander_ok();

	/* NBD: STARTTLS acknowledged, then plaintext options instead of a handshake */
	struct nt_raw c;
	assert_int_equal(nt_raw_connect(&c, T.n.nbd_port), 0);
	uint8_t f[4] = {0, 0, 0, 3};
	assert_int_equal(nt_raw_send(&c, f, 4), 0);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_STARTTLS, NULL, 0), 0);
	struct nt_opt_reply r;
	assert_int_equal(nt_raw_opt_reply(&c, &r), 0);
	assert_int_equal(r.type, NBD_REP_ACK);
	assert_int_equal(nt_raw_option(&c, NBD_OPT_LIST, NULL, 0), 0);
	/* no option reply: the handshake fails on them (an alert may come), the connection ends */
	assert_true(closed_within(c.fd, 30000));
	nt_raw_close(&c);
	bystander_ok();

	/* NBD: an option sent right behind STARTTLS, before its ACK: an injection */
	assert_int_equal(nt_raw_connect(&c, T.n.nbd_port), 0);
	assert_int_equal(nt_raw_send(&c, f, 4), 0);
	uint8_t two[2 * NBD_OPT_HEADER_SIZE];
	nbd_opt_header_encode(two, NBD_OPT_STARTTLS, 0);
	nbd_opt_header_encode(two + NBD_OPT_HEADER_SIZE, NBD_OPT_LIST, 0);
	assert_int_equal(nt_raw_send(&c, two, sizeof(two)), 0);
	/*
	 * in one segment the daemon sees the injection and closes; split, it
	 * sends the ACK and the handshake fails on the option: either way the
	 * option is never answered and the connection ends
	 */
	uint8_t rb[64];
	ssize_t got = 0;
	int64_t until = hx_now_ms() + 30000;
	while (hx_now_ms() < until) {
		struct pollfd p = {.fd = c.fd, .events = POLLIN};
		if (poll(&p, 1, 500) <= 0)
			continue;
		ssize_t k = recv(c.fd, rb + got, sizeof(rb) - (size_t)got, MSG_DONTWAIT);
		if (k <= 0 && !(k < 0 && (errno == EAGAIN || errno == EINTR)))
			break;
		if (k > 0)
			got += k;
		assert_true(got < (ssize_t)sizeof(rb));
	}
	assert_true(hx_now_ms() < until);
	/* at most the STARTTLS ACK, then TLS alert bytes: no reply to the LIST */
	static const uint8_t magic[8] = {0, 3, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9};
	for (ssize_t i = 0; i + 16 <= got; i++) {
		if (memcmp(rb + i, magic, 8) != 0)
			continue;
		assert_int_equal(i, 0);
		assert_int_equal(rb[11], NBD_OPT_STARTTLS);
	}
	nt_raw_close(&c);
	bystander_ok();
}

/* ---- access ---- */

/* list_has -- does @c's volume list name @name? */
static bool list_has(struct rdax_conn *c, const char *name)
{
	struct rdax_volume_info *vi;
	size_t n;
	assert_int_equal(rdax_volume_list(c, &vi, &n), 0);
	bool found = false;
	for (size_t i = 0; i < n; i++)
		found = found || strcmp(vi[i].name, name) == 0;
	rdax_volume_info_free(&vi);
	return found;
}

/* alice cannot see, open, read, write, create or delete bob's volumes (native protocol) */
static void access__native(void **state)
{
	struct rdax_conn *a;
	assert_int_equal(connect_x509("alice", &a), 0);
	assert_true(list_has(a, "alice-1"));
	assert_true(list_has(a, "shared"));
	assert_false(list_has(a, "bob-1"));
	struct rdax_volume *v = NULL;
	assert_int_equal(rdax_volume_open(a, "bob-1", &v), -ENOENT);
	/* the same answer as a volume that does not exist */
	assert_non_null(strstr(rdax_conn_last_error(a), "no volume \"bob-1\""));
	assert_int_equal(rdax_volume_open(a, "bob-nope", &v), -ENOENT);
	assert_non_null(strstr(rdax_conn_last_error(a), "no volume \"bob-nope\""));
	struct rdax_volume_info *info = NULL;
	assert_int_equal(rdax_volume_info(a, "bob-1", &info), -ENOENT);
	assert_int_equal(rdax_volume_create(a, "bob-2", VOL_SIZE, 0), -RDAX_E_ACCESS);
	assert_int_equal(rdax_volume_delete(a, "bob-1"), -RDAX_E_ACCESS);
	assert_int_equal(rdax_volume_create(a, "alice-2", VOL_SIZE, 0), 0);
	assert_int_equal(rdax_volume_delete(a, "alice-2"), 0);

	/* shared is ro for alice: read yes; write, discard, fsync with something dirty no */
	assert_int_equal(rdax_volume_open(a, "shared", &v), 0);
	uint8_t buf[4096] = {1};
	assert_int_equal(rdax_read(v, 0, buf, sizeof(buf)), 0);
	assert_int_equal(rdax_write(v, 0, buf, sizeof(buf), 0), -RDAX_E_ACCESS);
	assert_int_equal(rdax_discard(v, 0, 4096), -RDAX_E_ACCESS);
	assert_int_equal(rdax_fsync(v, 0, 0, NULL), 0); /* nothing dirty: changes nothing */
	struct rdax_volume *bv;
	assert_int_equal(rdax_volume_open(T.bystander, "shared", &bv), 0);
	assert_int_equal(rdax_write(bv, 8192, buf, sizeof(buf), 0), 0); /* bob: dirty, no fsync */
	assert_int_equal(rdax_fsync(v, 0, 0, NULL), -RDAX_E_ACCESS);
	assert_int_equal(rdax_fsync(bv, 0, 0, NULL), 0);
	assert_int_equal(rdax_volume_close(&bv), 0);
	assert_int_equal(rdax_volume_close(&v), 0);
	assert_int_equal(rdax_disconnect(&a), 0);
	bystander_ok();
}

/* over NBD: bob's volume is not listed for alice, cannot be opened; shared is read-only */
static void access__nbd(void **state)
{
	char uri[512];
	struct hx_run r;
	snprintf(uri, sizeof(uri), "nbds://alice@127.0.0.1:%d?tls-psk-file=%s", T.n.nbd_port,
		 T.psk);
	const char *list[] = {"nbdinfo", "--list", uri, NULL};
	if (run(list, &r) != 0)
		fail_msg("nbdinfo --list: %s", r.err);
	assert_non_null(strstr(r.out, "alice-1"));
	assert_non_null(strstr(r.out, "shared"));
	assert_null(strstr(r.out, "bob-1"));
	hx_run_free(&r);
	snprintf(uri, sizeof(uri), "nbds://alice@127.0.0.1:%d/bob-1?tls-psk-file=%s", T.n.nbd_port,
		 T.psk);
	const char *info[] = {"nbdinfo", uri, NULL};
	assert_int_not_equal(run(info, &r), 0);
	hx_run_free(&r);
	snprintf(uri, sizeof(uri), "nbds://alice@127.0.0.1:%d/shared?tls-psk-file=%s", T.n.nbd_port,
		 T.psk);
	const char *ro[] = {"nbdinfo", uri, NULL};
	assert_int_equal(run(ro, &r), 0);
	assert_non_null(strstr(r.out, "is_read_only: true"));
	hx_run_free(&r);
	char src[400];
	snprintf(src, sizeof(src), "%s/small", T.dir);
	uint8_t b[65536];
	hx_pattern(b, sizeof(b), 5, 0);
	assert_int_equal(hx_write_file(src, b, sizeof(b)), 0);
	const char *copy[] = {"nbdcopy", src, uri, NULL};
	assert_int_not_equal(run(copy, &r), 0);
	hx_run_free(&r);
	/* bob writes shared over NBD (rw for him) */
	char buri[512];
	snprintf(buri, sizeof(buri), "nbds://bob@127.0.0.1:%d/shared?tls-psk-file=%s", T.n.nbd_port,
		 T.psk);
	const char *bcopy[] = {"nbdcopy", src, buri, NULL};
	if (run(bcopy, &r) != 0)
		fail_msg("bob nbdcopy: %s", r.err);
	hx_run_free(&r);
	bystander_ok();
}

/* the control: without --acl the same daemon shows alice bob's volume */
static void access__control_without_acl(void **state)
{
	char conf[400];
	snprintf(conf, sizeof(conf), "%s/noacl.conf", T.dir);
	write_text(conf, "tls = require\ntls-psk = %s\n", T.psk);
	assert_int_equal(hx_daemon_stop(&T.n.d), 0);
	rdax_disconnect(&T.bystander);
	T.n.d.opts.extra_args[5] = conf; /* --config's value (after the two --listen pairs) */
	assert_string_equal(T.n.d.opts.extra_args[4], "--config");
	assert_int_equal(nt_daemon_restart(&T.n), 0);
	struct rdax_conn *a;
	assert_int_equal(connect_psk(T.psk, "alice", &a), 0);
	assert_true(list_has(a, "bob-1"));
	struct rdax_volume *v;
	assert_int_equal(rdax_volume_open(a, "bob-1", &v), 0);
	assert_int_equal(rdax_volume_close(&v), 0);
	assert_int_equal(rdax_disconnect(&a), 0);
	/* back to the ACL for whatever follows */
	assert_int_equal(hx_daemon_stop(&T.n.d), 0);
	T.n.d.opts.extra_args[5] = T.conf;
	assert_int_equal(nt_daemon_restart(&T.n), 0);
	assert_int_equal(connect_psk(T.psk, "bob", &T.bystander), 0);
	bystander_ok();
}

/*
 * control -- the same checks against a daemon whose TLS and ACL are broken
 * on purpose (RDAX_FAULTS=tls-plain-ok,tls-no-verify,acl-ignore): each must
 * see the breach. Exit 0 only if all of them did.
 */
static int control(void)
{
	T.faults = "tls-plain-ok,tls-no-verify,acl-ignore";
	if (group_setup(NULL))
		return 1;
	int seen = 0;
	if (plaintext_connect() == 0) {
		printf("control: a plaintext client got in (caught)\n");
		seen++;
	}
	struct nt_raw u;
	if (nt_raw_connect_unix(&u, T.n.sock_path) == 0) {
		uint8_t f[4] = {0, 0, 0, 3};
		struct nt_opt_reply r;
		if (nt_raw_send(&u, f, 4) == 0 && nt_raw_option(&u, NBD_OPT_LIST, NULL, 0) == 0 &&
		    nt_raw_opt_reply(&u, &r) == 0 && r.type != NBD_REP_ERR_TLS_REQD) {
			printf("control: plain nbd+unix got an option served (caught)\n");
			seen++;
		}
		nt_raw_close(&u);
	}
	if (x509_connect("expired") == 0) {
		printf("control: an expired certificate was accepted (caught)\n");
		seen++;
	}
	struct rdax_conn *a;
	if (connect_psk(T.psk, "alice", &a) == 0) {
		if (list_has(a, "bob-1")) {
			printf("control: alice sees bob's volume (caught)\n");
			seen++;
		}
		rdax_disconnect(&a);
	}
	group_teardown(NULL);
	printf("control: %d of 4 breaches caught\n", seen);
	return seen == 4 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--control") == 0)
		return control();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(librdax__psk_and_x509),
	    cmocka_unit_test(cli__psk_and_x509),
	    cmocka_unit_test(nbd__interop_psk_and_x509),
	    cmocka_unit_test(nbd__unix_socket_psk),
	    cmocka_unit_test(refuse__plaintext_native),
	    cmocka_unit_test(refuse__nbd_without_starttls),
	    cmocka_unit_test(refuse__nbd_unix_without_starttls),
	    cmocka_unit_test(refuse__wrong_psk_and_unknown_user),
	    cmocka_unit_test(refuse__foreign_and_expired_certificates),
	    cmocka_unit_test(refuse__record_garbage_mid_stream),
	    cmocka_unit_test(refuse__handshake_never_finishes),
	    cmocka_unit_test(refuse__downgrades),
	    cmocka_unit_test(access__native),
	    cmocka_unit_test(access__nbd),
	    cmocka_unit_test(access__control_without_acl),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
