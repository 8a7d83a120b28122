/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_api.c -- the public API without a server: argument checks,
 * options, connect failures. Uses only librdax.h and the shared library, so
 * it also proves those symbols are exported.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "librdax.h"

/* tcp_socket_on_loopback -- a bound socket; listening or not; *port = its port */
static int tcp_socket_on_loopback(bool do_listen, uint16_t *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, len), 0);
	if (do_listen)
		assert_int_equal(listen(fd, 1), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static void rdax_strerror__project_codes_match_the_server(void **state)
{
	/* the library's messages come from the server's errors.c: the public
	 * header's numbers must name the same errors */
	assert_string_equal(rdax_strerror(-RDAX_E_PROTOCOL), "protocol error");
	assert_string_equal(rdax_strerror(RDAX_E_PROTOCOL), "protocol error");
	assert_string_equal(rdax_strerror(-RDAX_E_VERSION), "unsupported version");
	assert_string_equal(rdax_strerror(-RDAX_E_NOT_OPEN), "volume not open on this connection");
	assert_string_equal(rdax_strerror(-RDAX_E_ACCESS), "access denied");
	assert_string_equal(rdax_strerror(-RDAX_E_TOO_BIG), "request exceeds a limit");
	assert_string_equal(rdax_strerror(-RDAX_E_NOT_RDAX),
			    "not an rdax namespace (no rdax superblock)");
	assert_string_equal(rdax_strerror(-RDAX_E_BAD_METADATA),
			    "namespace metadata fails its checks");
	assert_string_equal(rdax_strerror(-ENOENT), strerror(ENOENT));
	assert_string_equal(rdax_strerror(0), "success");
	assert_int_equal(RDAX_E_FIRST, 4096);
	assert_string_equal(rdax_strerror(-RDAX_E_STALE_EPOCH),
			    "request of an older epoch than the replica has seen");
	assert_string_equal(rdax_strerror(-RDAX_E_NOT_PRIMARY),
			    "this node is not the volume's primary");
	assert_string_equal(rdax_strerror(-RDAX_E_NO_QUORUM),
			    "the cluster's store cannot be reached");
	assert_int_equal(RDAX_E_LAST, RDAX_E_NO_QUORUM + 1);
}

static void rdax_conn_opts__checks_arguments(void **state)
{
	struct rdax_conn_opts *o = NULL;
	assert_int_equal(rdax_conn_opts_new(NULL), -EINVAL);
	assert_int_equal(rdax_conn_opts_new(&o), 0);
	assert_non_null(o);
	assert_int_equal(rdax_conn_opts_set_token(NULL, "a", 1), -EINVAL);
	assert_int_equal(rdax_conn_opts_set_token(o, NULL, 1), -EINVAL);
	assert_int_equal(rdax_conn_opts_set_token(o, "a", 0), -EINVAL);
	static char big[RDAX_TOKEN_MAX + 1];
	assert_int_equal(rdax_conn_opts_set_token(o, big, sizeof(big)), -RDAX_E_TOO_BIG);
	assert_int_equal(rdax_conn_opts_set_token(o, big, RDAX_TOKEN_MAX), 0);
	assert_int_equal(rdax_conn_opts_set_client_name(o, NULL), -EINVAL);
	assert_int_equal(rdax_conn_opts_set_client_name(o, "test"), 0);
	assert_int_equal(rdax_conn_opts_set_timeout(o, -1), -EINVAL);
	assert_int_equal(rdax_conn_opts_set_timeout(o, 0), 0);
	assert_int_equal(rdax_conn_opts_set_queue_depth(o, 0), -EINVAL);
	assert_int_equal(rdax_conn_opts_set_queue_depth(o, RDAX_MAX_QUEUE_DEPTH + 1), -EINVAL);
	assert_int_equal(rdax_conn_opts_set_queue_depth(o, RDAX_MAX_QUEUE_DEPTH), 0);
	assert_int_equal(rdax_conn_opts_set_busy_poll(NULL, 10), -EINVAL);
	assert_int_equal(rdax_conn_opts_set_busy_poll(o, RDAX_MAX_BUSY_POLL_US + 1), -EINVAL);
	assert_int_equal(rdax_conn_opts_set_busy_poll(o, RDAX_MAX_BUSY_POLL_US), 0);
	assert_int_equal(rdax_conn_opts_set_busy_poll(o, 0), 0);
	assert_int_equal(rdax_conn_opts_set_busy_poll(o, RDAX_BUSY_POLL_AUTO), 0);
	assert_int_equal(rdax_conn_opts_set_token_file(o, NULL), -EINVAL);
	assert_int_equal(rdax_conn_opts_set_token_file(NULL, "x"), -EINVAL);
	rdax_conn_opts_delete(&o);
	assert_null(o);
	rdax_conn_opts_delete(&o);
	rdax_conn_opts_delete(NULL);
}

/* write_temp -- a temporary file holding @len bytes of @s; the path in @path */
static void write_temp(char *path, size_t plen, const char *s, size_t len)
{
	snprintf(path, plen, "%s/librdax-token-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, s, len), (ssize_t)len);
	close(fd);
}

static void rdax_conn_opts_set_token_file__strips_newlines_refuses_empty_and_long(void **state)
{
	struct rdax_conn_opts *o;
	char path[256];
	assert_int_equal(rdax_conn_opts_new(&o), 0);
	assert_int_equal(rdax_conn_opts_set_token_file(o, "/nonexistent/token"), -ENOENT);
	write_temp(path, sizeof(path), "tok\r\n", 5);
	assert_int_equal(rdax_conn_opts_set_token_file(o, path), 0);
	unlink(path);
	write_temp(path, sizeof(path), "\n\n", 2);
	assert_int_equal(rdax_conn_opts_set_token_file(o, path), -EINVAL);
	unlink(path);
	static char big[RDAX_TOKEN_MAX + 2];
	memset(big, 'x', sizeof(big));
	big[RDAX_TOKEN_MAX] = '\n';
	write_temp(path, sizeof(path), big, RDAX_TOKEN_MAX + 1); /* at the limit + newline */
	assert_int_equal(rdax_conn_opts_set_token_file(o, path), 0);
	unlink(path);
	write_temp(path, sizeof(path), big, RDAX_TOKEN_MAX); /* exactly at the limit */
	assert_int_equal(rdax_conn_opts_set_token_file(o, path), 0);
	unlink(path);
	memset(big, 'x', sizeof(big));
	write_temp(path, sizeof(path), big, sizeof(big)); /* over */
	assert_int_equal(rdax_conn_opts_set_token_file(o, path), -RDAX_E_TOO_BIG);
	unlink(path);
	rdax_conn_opts_delete(&o);
}

static void rdax_connect__bad_arguments_and_urls(void **state)
{
	struct rdax_conn *conn = NULL;
	assert_int_equal(rdax_connect(NULL, NULL, &conn), -EINVAL);
	assert_int_equal(rdax_connect("tcp://127.0.0.1:1", NULL, NULL), -EINVAL);
	assert_int_equal(rdax_connect("127.0.0.1:7470", NULL, &conn), -EINVAL);
	assert_non_null(strstr(rdax_connect_last_error(), "://"));
	assert_int_equal(rdax_connect("tcp://::1:7470", NULL, &conn), -EINVAL);
	assert_non_null(strstr(rdax_connect_last_error(), "brackets"));
	assert_int_equal(rdax_connect("tcp://h:70000", NULL, &conn), -EINVAL);
	/* an NBD address parses (common/url.h) but is not for librdax: said before connecting */
	assert_int_equal(rdax_connect("nbd://127.0.0.1:1", NULL, &conn), -EINVAL);
	assert_non_null(strstr(rdax_connect_last_error(), "is an NBD address"));
	assert_int_equal(rdax_connect("nbd+unix:///tmp/none.sock", NULL, &conn), -EINVAL);
	assert_non_null(strstr(rdax_connect_last_error(), "is an NBD address"));
	assert_null(conn);
}

/*
 * rdma:// to an address no RDMA device has (on a machine without RDMA: no
 * device at all): a clean failure with a reason, never a connection. The
 * RDMA transport itself is tested in the VM (tests/rdma).
 */
static void rdax_connect__rdma_without_a_device_fails_cleanly(void **state)
{
	struct rdax_conn *conn = NULL;
	int ret = rdax_connect("rdma://127.0.0.1:1", NULL, &conn);
	if (ret != -ENODEV && ret != -EHOSTUNREACH && ret != -ECONNREFUSED &&
	    ret != -EADDRNOTAVAIL)
		fail_msg("rdax_connect(rdma://127.0.0.1:1) = %d (%s)", ret, rdax_strerror(ret));
	assert_null(conn);
	assert_true(rdax_connect_last_error()[0] != '\0');
}

static void rdax_connect__closed_port_is_refused(void **state)
{
	uint16_t port;
	/* bound but not listening: the kernel answers with a reset, deterministically */
	int fd = tcp_socket_on_loopback(false, &port);
	char url[64];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%u", port);
	struct rdax_conn *conn = NULL;
	assert_int_equal(rdax_connect(url, NULL, &conn), -ECONNREFUSED);
	assert_null(conn);
	char expect[128];
	snprintf(expect, sizeof(expect), "connect 127.0.0.1:%u: %s", port, strerror(ECONNREFUSED));
	assert_string_equal(rdax_connect_last_error(), expect);
	close(fd);
}

static void rdax_connect__ipv6_closed_port_is_refused_or_unavailable(void **state)
{
	struct rdax_conn *conn = NULL;
	int ret = rdax_connect("tcp://[::1]:1", NULL, &conn);
	/* no IPv6 on the machine: EADDRNOTAVAIL / EAFNOSUPPORT / ENETUNREACH */
	assert_true(ret == -ECONNREFUSED || ret == -EADDRNOTAVAIL || ret == -EAFNOSUPPORT ||
		    ret == -ENETUNREACH);
	assert_null(conn);
	assert_non_null(strstr(rdax_connect_last_error(), "[::1]:1"));
}

static void rdax_connect__unknown_host(void **state)
{
	struct rdax_conn *conn = NULL;
	int ret = rdax_connect("tcp://no-such-host.invalid:7470", NULL, &conn);
	assert_true(ret == -EHOSTUNREACH || ret == -EAGAIN);
	assert_null(conn);
	assert_non_null(strstr(rdax_connect_last_error(), "resolve no-such-host.invalid"));
}

static void rdax_connect__silent_server_times_out(void **state)
{
	uint16_t port;
	/* listening, never accepting: the handshake completes, HELLO is never answered */
	int fd = tcp_socket_on_loopback(true, &port);
	char url[64];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%u", port);
	struct rdax_conn_opts *o;
	assert_int_equal(rdax_conn_opts_new(&o), 0);
	assert_int_equal(rdax_conn_opts_set_timeout(o, 100), 0);
	struct rdax_conn *conn = NULL;
	assert_int_equal(rdax_connect(url, o, &conn), -ETIMEDOUT);
	assert_null(conn);
	assert_non_null(strstr(rdax_connect_last_error(), "no answer"));
	rdax_conn_opts_delete(&o);
	close(fd);
}

static void null_handles__refused_without_crashing(void **state)
{
	uint8_t b[8];
	struct rdax_volume_info *vi;
	size_t n;
	struct rdax_volume *v = NULL;
	struct rdax_volume_stat st;
	struct rdax_completion c;
	struct rdax_namespace_info ns;
	assert_int_equal(rdax_disconnect(NULL), 0);
	struct rdax_conn *conn = NULL;
	assert_int_equal(rdax_disconnect(&conn), 0);
	assert_string_equal(rdax_conn_last_error(NULL), "");
	assert_int_equal(rdax_conn_status(NULL), -EINVAL);
	assert_int_equal(rdax_conn_max_payload(NULL), 0);
	assert_string_equal(rdax_conn_server_version(NULL), "");
	assert_int_equal(rdax_conn_namespace_count(NULL), 0);
	assert_int_equal(rdax_conn_namespace_get(NULL, 0, &ns), -EINVAL);
	assert_int_equal(rdax_volume_create(NULL, "v", 4096, RDAX_NAMESPACE_ANY), -EINVAL);
	assert_int_equal(rdax_volume_delete(NULL, "v"), -EINVAL);
	assert_int_equal(rdax_volume_list(NULL, &vi, &n), -EINVAL);
	assert_int_equal(rdax_volume_info(NULL, "v", &vi), -EINVAL);
	assert_int_equal(rdax_volume_open(NULL, "v", &v), -EINVAL);
	assert_null(v);
	assert_int_equal(rdax_volume_close(NULL), 0);
	assert_int_equal(rdax_volume_close(&v), 0);
	rdax_volume_info_free(NULL);
	assert_int_equal(rdax_volume_size(NULL), 0);
	assert_string_equal(rdax_volume_name(NULL), "");
	assert_int_equal(rdax_write(NULL, 0, b, 1, 0), -EINVAL);
	assert_int_equal(rdax_read(NULL, 0, b, 1), -EINVAL);
	assert_int_equal(rdax_fsync(NULL, 0, 0, NULL), -EINVAL);
	assert_int_equal(rdax_fsync_flags(NULL, 0, 0, 0, NULL), -EINVAL);
	assert_int_equal(rdax_discard(NULL, 0, 1), -EINVAL);
	assert_int_equal(rdax_stat(NULL, &st), -EINVAL);
	assert_int_equal(rdax_submit_write(NULL, 0, b, 1, 0, 0), -EINVAL);
	assert_int_equal(rdax_submit_read(NULL, 0, b, 1, 0), -EINVAL);
	assert_int_equal(rdax_submit_fsync(NULL, 0, 0, 0, 0), -EINVAL);
	assert_int_equal(rdax_wait_completions(NULL, &c, 1, 0, 0), -EINVAL);
	assert_int_equal(rdax_inflight(NULL), 0);
	void *buf;
	assert_int_equal(rdax_buffer_alloc(NULL, 4096, &buf), -EINVAL);
	assert_int_equal(rdax_buffer_free(NULL, b), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(rdax_strerror__project_codes_match_the_server),
	    cmocka_unit_test(rdax_conn_opts__checks_arguments),
	    cmocka_unit_test(rdax_conn_opts_set_token_file__strips_newlines_refuses_empty_and_long),
	    cmocka_unit_test(rdax_connect__bad_arguments_and_urls),
	    cmocka_unit_test(rdax_connect__rdma_without_a_device_fails_cleanly),
	    cmocka_unit_test(rdax_connect__closed_port_is_refused),
	    cmocka_unit_test(rdax_connect__ipv6_closed_port_is_refused_or_unavailable),
	    cmocka_unit_test(rdax_connect__unknown_host),
	    cmocka_unit_test(rdax_connect__silent_server_times_out),
	    cmocka_unit_test(null_handles__refused_without_crashing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
