/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_url.c -- url_parse, url_parse_listen and url_parse_endpoint: what an
 * address may and may not look like
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "url.h"

static void url_parse__tcp_ipv4_with_port(void **state)
{
	struct url u;
	assert_int_equal(url_parse("tcp://127.0.0.1:7470", &u, NULL, 0), 0);
	assert_int_equal(u.scheme, URL_TCP);
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 7470);
	assert_string_equal(u.port_str, "7470");
}

static void url_parse__host_name(void **state)
{
	struct url u;
	assert_int_equal(url_parse("tcp://pmem-server_1.example:9", &u, NULL, 0), 0);
	assert_string_equal(u.host, "pmem-server_1.example");
	assert_int_equal(u.port, 9);
}

static void url_parse__ipv6_in_brackets(void **state)
{
	struct url u;
	assert_int_equal(url_parse("tcp://[::1]:7471", &u, NULL, 0), 0);
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 7471);
	assert_int_equal(url_parse("tcp://[fe80::1%eth0]:1", &u, NULL, 0), 0);
	assert_string_equal(u.host, "fe80::1%eth0");
	assert_int_equal(url_parse("tcp://[::ffff:10.0.0.1]", &u, NULL, 0), 0);
	assert_string_equal(u.host, "::ffff:10.0.0.1");
	assert_int_equal(u.port, 7470);
}

static void url_parse__default_port(void **state)
{
	struct url u;
	assert_int_equal(url_parse("tcp://localhost", &u, NULL, 0), 0);
	assert_int_equal(u.port, 7470);
	assert_string_equal(u.port_str, "7470");
}

static void url_parse__port_limits(void **state)
{
	struct url u;
	assert_int_equal(url_parse("tcp://h:1", &u, NULL, 0), 0);
	assert_int_equal(url_parse("tcp://h:65535", &u, NULL, 0), 0);
	assert_int_equal(u.port, 65535);
	const char *bad[] = {
	    "tcp://h:0",   "tcp://h:65536", "tcp://h:99999",  "tcp://h:",    "tcp://h:-1",
	    "tcp://h:+80", "tcp://h:80a",   "tcp://h:123456", "tcp://h: 80", "tcp://h:0x50"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[128] = "";
		assert_int_equal(url_parse(bad[i], &u, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "port"));
	}
}

static void url_parse__rdma_is_recognised(void **state)
{
	struct url u;
	assert_int_equal(url_parse("rdma://192.168.1.2:7470", &u, NULL, 0), 0);
	assert_int_equal(u.scheme, URL_RDMA);
	assert_string_equal(u.host, "192.168.1.2");
}

static void url_parse__refuses_malformed(void **state)
{
	const char *bad[] = {
	    "",
	    "127.0.0.1:7470",	    /* no scheme */
	    "tcp:/127.0.0.1:7470",  /* one slash */
	    "http://127.0.0.1:80",  /* unknown scheme */
	    "TCP://127.0.0.1:7470", /* schemes are lower case */
	    "tcp://",		    /* no host */
	    "tcp://:7470",	    /* no host */
	    "tcp://::1:7470",	    /* IPv6 without brackets */
	    "tcp://[::1",	    /* unclosed */
	    "tcp://[]:7470",	    /* empty brackets */
	    "tcp://[1.2.3.4]:7470", /* not IPv6 */
	    "tcp://[::1]x",	    /* junk after ] */
	    "tcp://[::g]:1",	    /* not hex */
	    "tcp://[::1%]:1",	    /* empty zone */
	    "tcp://host/path",	    /* path */
	    "tcp://host:80/",	    /* path */
	    "tcp://ho st:80",	    /* space */
	    "tcp://host?x=1",	    /* query */
	    "tcp://user@host:80",   /* user info */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct url u;
		memset(&u, 0x5a, sizeof(u));
		struct url before = u;
		char err[256] = "";
		assert_int_equal(url_parse(bad[i], &u, err, sizeof(err)), -EINVAL);
		assert_true(strlen(err) > 0);
		/* nothing written on failure */
		assert_memory_equal(&u, &before, sizeof(u));
	}
}

static void url_parse__messages_say_why(void **state)
{
	struct url u;
	char err[256];
	url_parse("127.0.0.1:7470", &u, err, sizeof(err));
	assert_non_null(strstr(err, "://"));
	url_parse("udp://h:1", &u, err, sizeof(err));
	assert_non_null(strstr(err, "unknown scheme 'udp'"));
	url_parse("tcp://::1:7470", &u, err, sizeof(err));
	assert_non_null(strstr(err, "brackets"));
}

static void url_parse__long_host(void **state)
{
	char s[URL_HOST_MAX + 32], host[URL_HOST_MAX + 2];
	struct url u;
	memset(host, 'a', URL_HOST_MAX);
	host[URL_HOST_MAX] = '\0';
	snprintf(s, sizeof(s), "tcp://%s:1", host);
	assert_int_equal(url_parse(s, &u, NULL, 0), 0);
	assert_int_equal(strlen(u.host), URL_HOST_MAX);
	host[URL_HOST_MAX] = 'a';
	host[URL_HOST_MAX + 1] = '\0';
	snprintf(s, sizeof(s), "tcp://%s:1", host);
	assert_int_equal(url_parse(s, &u, NULL, 0), -EINVAL);
}

static void url_parse__null(void **state)
{
	struct url u;
	assert_int_equal(url_parse(NULL, &u, NULL, 0), -EINVAL);
	assert_int_equal(url_parse("tcp://h:1", NULL, NULL, 0), -EINVAL);
}

static void url_parse__nbd_schemes(void **state)
{
	struct url u;
	assert_int_equal(url_parse("nbd://h", &u, NULL, 0), 0);
	assert_int_equal(u.scheme, URL_NBD);
	assert_int_equal(u.port, URL_NBD_PORT);
	assert_string_equal(u.port_str, "10809");
	assert_int_equal(url_parse("rdma://h", &u, NULL, 0), 0);
	assert_int_equal(u.port, 7470);
	assert_int_equal(url_parse("nbd+unix:///run/rdax/nbd.sock", &u, NULL, 0), 0);
	assert_int_equal(u.scheme, URL_NBD_UNIX);
	assert_string_equal(u.path, "/run/rdax/nbd.sock");
	assert_string_equal(u.host, "");
	/* ?mode= is the listener's: a client has no socket file to set */
	char err[256] = "";
	assert_int_equal(url_parse("nbd+unix:///s?mode=0660", &u, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no '?' options"));
	assert_string_equal(url_scheme_name(URL_NBD_UNIX), "nbd+unix");
	assert_string_equal(url_scheme_name(URL_RDMA), "rdma");
}

static void url_parse_listen__port_rules(void **state)
{
	struct url u;
	char err[256] = "";
	/* a listener names its port; 0 asks the kernel for a free one */
	assert_int_equal(url_parse_listen("tcp://h", &u, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no port (tcp://HOST:PORT"));
	assert_int_equal(url_parse_listen("nbd://h", &u, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "nbd://HOST:PORT"));
	assert_int_equal(url_parse_listen("tcp://h:0", &u, NULL, 0), 0);
	assert_int_equal(u.port, 0);
	assert_string_equal(u.port_str, "0");
	assert_int_equal(url_parse_listen("tcp://[fe80::1%eth0]:65535", &u, NULL, 0), 0);
	assert_string_equal(u.host, "fe80::1%eth0");
	assert_int_equal(u.port, 65535);
	const char *bad[] = {"tcp://h:65536", "tcp://h:-1", "tcp://h:", "tcp://h:0x50"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(url_parse_listen(bad[i], &u, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "port"));
	}
}

static void url_parse_listen__same_host_rules(void **state)
{
	/* every host refused for a server is refused for a listener, with the same reason */
	const char *bad[] = {"tcp://:7470",	   "tcp://::1:7470",	"tcp://[::1:7470",
			     "tcp://[]:1",	   "tcp://[1.2.3.4]:1", "tcp://[::1]x",
			     "tcp://[::g]:1",	   "tcp://[::1%]:1",	"tcp://ho st:80",
			     "tcp://user@host:80", "tcp://host:80/",	"udp://h:1",
			     "TCP://h:1",	   "tcp:/h:1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct url u;
		char e1[256] = "", e2[256] = "";
		assert_int_equal(url_parse_listen(bad[i], &u, e1, sizeof(e1)), -EINVAL);
		assert_int_equal(url_parse(bad[i], &u, e2, sizeof(e2)), -EINVAL);
		/* the listener's "no host" adds an example; the reason is the same */
		assert_memory_equal(e1, e2, strlen("'tcp://:7470': no host"));
	}
}

static void url_parse_listen__unix(void **state)
{
	struct url u;
	char err[256] = "";
	assert_int_equal(url_parse_listen("nbd+unix:///s", &u, NULL, 0), 0);
	assert_int_equal(u.mode, URL_UNIX_MODE);
	assert_int_equal(url_parse_listen("nbd+unix:///s?mode=0660", &u, NULL, 0), 0);
	assert_int_equal(u.mode, 0660);
	assert_string_equal(u.path, "/s");
	assert_int_equal(url_parse_listen("nbd+unix:///s?mode=", &u, err, sizeof(err)), -EINVAL);
	assert_int_equal(url_parse_listen("nbd+unix:///s?mode=8", &u, err, sizeof(err)), -EINVAL);
	assert_int_equal(url_parse_listen("nbd+unix:///s?mode=1000", &u, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "mode=OCTAL"));
	char path[URL_PATH_MAX + 32] = "nbd+unix://";
	memset(path + 11, 'a', URL_PATH_MAX);
	path[11] = '/';
	assert_int_equal(url_parse_listen(path, &u, NULL, 0), 0);
	assert_int_equal(strlen(u.path), URL_PATH_MAX);
	path[11 + URL_PATH_MAX] = 'a';
	assert_int_equal(url_parse_listen(path, &u, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "107"));
}

/* url_parse_endpoint: one HOST:PORT of a list, the same host rules, the port written out */
static void url_parse_endpoint__host_port(void **state)
{
	struct url u;
	const char *list = "[::1]:2379,node-1.example:2380";
	assert_int_equal(url_parse_endpoint(list, 10, "etcd", 2379, &u, NULL, 0), 0);
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 2379);
	assert_int_equal(
	    url_parse_endpoint(list + 11, strlen(list + 11), "etcd", 2379, &u, NULL, 0), 0);
	assert_string_equal(u.host, "node-1.example");
	assert_string_equal(u.port_str, "2380");

	static const char *const bad[] = {"",		"host",	    "host:",	   "host:0",
					  "host:99999", "::1:2379", "user@host:1", "host:1/x",
					  "[::1",	"[]:1",	    "host/x:1",	   "tcp://host:1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[256] = "";
		assert_int_equal(
		    url_parse_endpoint(bad[i], strlen(bad[i]), "etcd", 2379, &u, err, sizeof(err)),
		    -EINVAL);
		assert_true(strlen(err) > 0);
	}
	char err[256];
	assert_int_equal(url_parse_endpoint("host", 4, "etcd", 2379, &u, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "no port"));
	assert_int_equal(url_parse_endpoint("::1:2379", 8, "etcd", 2379, &u, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "etcd://[::1]:2379")); /* the example names the scheme */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(url_parse__tcp_ipv4_with_port),
	    cmocka_unit_test(url_parse__host_name),
	    cmocka_unit_test(url_parse__ipv6_in_brackets),
	    cmocka_unit_test(url_parse__default_port),
	    cmocka_unit_test(url_parse__port_limits),
	    cmocka_unit_test(url_parse__rdma_is_recognised),
	    cmocka_unit_test(url_parse__refuses_malformed),
	    cmocka_unit_test(url_parse__messages_say_why),
	    cmocka_unit_test(url_parse__long_host),
	    cmocka_unit_test(url_parse__null),
	    cmocka_unit_test(url_parse__nbd_schemes),
	    cmocka_unit_test(url_parse_listen__port_rules),
	    cmocka_unit_test(url_parse_listen__same_host_rules),
	    cmocka_unit_test(url_parse_listen__unix),
	    cmocka_unit_test(url_parse_endpoint__host_port),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
