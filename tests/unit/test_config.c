/* SPDX-License-Identifier: BSD-3-Clause */
/* test_config.c -- rdaxd flags, config file, namespaces and listen addresses */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "errors.h"
#include "frame.h"
#include "tmpdir.h"

static char tmpdir[200];

static int setup_tmpdir(void **state)
{
	tmpdir_make(tmpdir, sizeof(tmpdir), "test-config");
	return 0;
}

static int teardown_tmpdir(void **state)
{
	tmpdir_remove(tmpdir);
	return 0;
}

/* write_file -- @name in the temp dir with @text; returns the path (static buffer) */
static const char *write_file(const char *name, const char *text, size_t len)
{
	static char path[300];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
	return path;
}

/* parse -- config_parse_args on a NULL-terminated list of arguments */
static int parse(struct config *c, char *err, ...)
{
	char *argv[32] = {"rdaxd"};
	int argc = 1;
	va_list ap;
	va_start(ap, err);
	for (char *a; (a = va_arg(ap, char *)) != NULL;)
		argv[argc++] = a;
	va_end(ap);
	config_init(c);
	return config_parse_args(c, argc, argv, err, CONFIG_ERR_MAX);
}

static void config_parse_namespace__options(void **state)
{
	struct config_namespace ns;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(config_parse_namespace("/dev/dax0.0", &ns, err, sizeof(err)), 0);
	assert_string_equal(ns.path, "/dev/dax0.0");
	assert_int_equal(ns.size, 0);
	assert_int_equal(ns.mode, PERSIST_AUTO);
	free(ns.path);

	assert_int_equal(config_parse_namespace("/x/a.ns,size=8G,mode=sim", &ns, err, sizeof(err)),
			 0);
	assert_string_equal(ns.path, "/x/a.ns");
	assert_int_equal(ns.size, 8ULL << 30);
	assert_int_equal(ns.mode, PERSIST_SIM);
	free(ns.path);

	assert_int_equal(config_parse_namespace("b.ns,mode=auto,size=4M", &ns, err, sizeof(err)),
			 0);
	assert_int_equal(ns.size, 4ULL << 20);
	free(ns.path);
}

static void config_parse_namespace__bad(void **state)
{
	struct config_namespace ns = {.path = NULL};
	char err[CONFIG_ERR_MAX];
	assert_int_equal(config_parse_namespace("", &ns, err, sizeof(err)), -EINVAL);
	assert_int_equal(config_parse_namespace(",size=1G", &ns, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no path"));
	assert_int_equal(config_parse_namespace("a,size=lots", &ns, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'lots'"));
	assert_int_equal(config_parse_namespace("a,size=0", &ns, err, sizeof(err)), -EINVAL);
	assert_int_equal(config_parse_namespace("a,size=1M", &ns, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "minimum"));
	assert_int_equal(config_parse_namespace("a,mode=fast", &ns, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "auto or sim"));
	assert_int_equal(config_parse_namespace("a,colour=red", &ns, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown option 'colour=red'"));
	assert_null(ns.path);
}

static void config_parse_listen__forms(void **state)
{
	struct config_listen l;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(config_parse_listen("tcp://127.0.0.1:7470", &l, err, sizeof(err)), 0);
	assert_string_equal(l.host, "127.0.0.1");
	assert_int_equal(l.port, 7470);
	assert_string_equal(l.uri, "tcp://127.0.0.1:7470");
	free(l.host);
	free(l.uri);
	assert_int_equal(config_parse_listen("tcp://[::1]:0", &l, err, sizeof(err)), 0);
	assert_string_equal(l.host, "::1");
	assert_int_equal(l.port, 0);
	free(l.host);
	free(l.uri);
	assert_int_equal(config_parse_listen("tcp://localhost:65535", &l, err, sizeof(err)), 0);
	assert_string_equal(l.host, "localhost");
	assert_int_equal(l.port, 65535);
	free(l.host);
	free(l.uri);
}

static void config_parse_listen__bad(void **state)
{
	struct config_listen l;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(config_parse_listen("127.0.0.1:7470", &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "tcp://HOST:PORT"));
	assert_int_equal(config_parse_listen("udp://10.0.0.1:7471", &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "transport 'udp' is not supported"));
	/* rdma:// is a listen kind of its own */
	assert_int_equal(config_parse_listen("rdma://10.0.0.1:7471", &l, err, sizeof(err)), 0);
	assert_int_equal(l.kind, CONFIG_LISTEN_RDMA);
	assert_string_equal(l.host, "10.0.0.1");
	assert_int_equal(l.port, 7471);
	free(l.host);
	free(l.uri);
	assert_int_equal(config_parse_listen("tcp://host", &l, err, sizeof(err)), -EINVAL);
	assert_int_equal(config_parse_listen("tcp://:7470", &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no host"));
	assert_int_equal(config_parse_listen("tcp://h:70000", &l, err, sizeof(err)), -EINVAL);
	assert_int_equal(config_parse_listen("tcp://h:-1", &l, err, sizeof(err)), -EINVAL);
	assert_int_equal(config_parse_listen("tcp://h:", &l, err, sizeof(err)), -EINVAL);
	assert_int_equal(config_parse_listen("tcp://::1:80", &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "brackets"));
	assert_int_equal(config_parse_listen("tcp://[::1]80", &l, err, sizeof(err)), -EINVAL);
}

static void config_parse_args__flags(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(parse(&c, err, "--namespace", "a.ns,size=4M", "--namespace=b.ns,mode=sim",
			       "--listen", "tcp://127.0.0.1:1", "--listen=tcp://[::1]:2",
			       "--threads", "3", "--log-level=debug", "--pidfile", "/run/p",
			       "--token-file", "/etc/t", "--flush-mode", "hammer", "--max-payload",
			       "8M", "--rdma-busy-poll", "50", NULL),
			 0);
	assert_int_equal(c.nnamespaces, 2);
	assert_string_equal(c.namespaces[0].path, "a.ns");
	assert_int_equal(c.namespaces[0].size, 4ULL << 20);
	assert_string_equal(c.namespaces[1].path, "b.ns");
	assert_int_equal(c.namespaces[1].mode, PERSIST_SIM);
	assert_int_equal(c.nlistens, 2);
	assert_int_equal(c.listens[1].port, 2);
	assert_int_equal(c.threads, 3);
	assert_int_equal(c.log_level, LOG_LEVEL_DEBUG);
	assert_string_equal(c.pidfile, "/run/p");
	assert_string_equal(c.token_file, "/etc/t");
	assert_int_equal(c.flush_mode, FLUSH_HAMMER);
	assert_int_equal(c.max_payload, 8U << 20);
	assert_int_equal(c.rdma_busy_poll_us, 50);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_int_equal(c.nnamespaces, 2); /* given: no default added */
	assert_false(c.ns_defaulted);
	config_free(&c);
}

static void config_parse_args__later_flag_wins(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(parse(&c, err, "--threads", "3", "--threads", "5", "--log-level", "error",
			       "--log-level", "warn", NULL),
			 0);
	assert_int_equal(c.threads, 5);
	assert_int_equal(c.log_level, LOG_LEVEL_WARN);
	config_free(&c);
}

static void config_parse_args__bad(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(parse(&c, err, "--bogus", NULL), -EINVAL);
	assert_string_equal(err, "unknown option '--bogus'");
	config_free(&c);
	assert_int_equal(parse(&c, err, "--threads", NULL), -EINVAL);
	assert_string_equal(err, "--threads needs a value");
	config_free(&c);
	assert_int_equal(parse(&c, err, "--threads", "0", NULL), -EINVAL);
	assert_non_null(strstr(err, "--threads '0'"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--threads", "2x", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--threads", "99999", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--log-level", "loud", NULL), -EINVAL);
	assert_non_null(strstr(err, "error, warn, info, debug"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--flush-mode", "lazy", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--max-payload", "512K", NULL), -EINVAL);
	assert_non_null(strstr(err, "from 1M to 64M"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--max-payload", "65M", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--rdma-busy-poll", "1000001", NULL), -EINVAL);
	assert_non_null(strstr(err, "microseconds from 0 to 1000000"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--rdma-busy-poll", "-1", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--rdma-busy-poll", "automatic", NULL), -EINVAL);
	assert_non_null(strstr(err, "not 'auto' nor a number"));
	config_free(&c);
	/* "auto" is the default, said out loud: the cap from this host's wake-up (wake_cost.h) */
	assert_int_equal(parse(&c, err, "--rdma-busy-poll", "auto", NULL), 0);
	assert_int_equal(c.rdma_busy_poll_us, SPIN_WINDOW_CAP_AUTO);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--namespace", "x,size=big", NULL), -EINVAL);
	assert_non_null(strstr(err, "--namespace 'x,size=big'"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--listen", "udp://h:1", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "serve", NULL), -EINVAL);
	assert_string_equal(err, "unexpected argument 'serve'");
	config_free(&c);
	assert_int_equal(parse(&c, err, "-t", "2", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--pidfile=", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--config", "/nonexistent/rdaxd.conf", NULL), -EINVAL);
	assert_non_null(strstr(err, "/nonexistent/rdaxd.conf"));
	config_free(&c);
}

static void config_parse_args__help_version(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	/* --help wins over anything else, even a bad --config */
	assert_int_equal(parse(&c, err, "--config", "/nonexistent", "--help", NULL), 0);
	assert_true(c.help);
	config_free(&c);
	assert_int_equal(parse(&c, err, "-h", NULL), 0);
	assert_true(c.help);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--version", NULL), 0);
	assert_true(c.version);
	config_free(&c);
}

static void config_load_file__settings(void **state)
{
	static const char text[] = "# rdaxd test config\n"
				   "\n"
				   "namespace = /a.ns,size=4M\n"
				   "  namespace=/b.ns   # a second one\n"
				   "listen = tcp://127.0.0.1:9000\n"
				   "threads = 4\n"
				   "log_level = warn\n"
				   "flush-mode = hammer\n"
				   "max-payload = 2M\n"
				   "pidfile = /run/rdax#1.pid\n";
	const char *path = write_file("a.conf", text, sizeof(text) - 1);
	struct config c;
	char err[CONFIG_ERR_MAX];
	config_init(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), 0);
	assert_int_equal(c.nnamespaces, 2);
	assert_string_equal(c.namespaces[1].path, "/b.ns");
	assert_int_equal(c.nlistens, 1);
	assert_int_equal(c.threads, 4);
	assert_int_equal(c.log_level, LOG_LEVEL_WARN);
	assert_int_equal(c.flush_mode, FLUSH_HAMMER);
	assert_int_equal(c.max_payload, 2U << 20);
	/* '#' inside a value, not after white space, is not a comment */
	assert_string_equal(c.pidfile, "/run/rdax#1.pid");
	config_free(&c);
}

static void config_load_file__errors_name_the_line(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	static const char unknown[] = "threads = 2\ncolour = blue\n";
	const char *path = write_file("b.conf", unknown, sizeof(unknown) - 1);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "b.conf:2: unknown setting 'colour'"));
	config_free(&c);

	static const char noeq[] = "threads 2\n";
	path = write_file("c.conf", noeq, sizeof(noeq) - 1);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "c.conf:1: expected 'key = value'"));
	config_free(&c);

	static const char badval[] = "\n\nthreads = many\n";
	path = write_file("d.conf", badval, sizeof(badval) - 1);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "d.conf:3: threads 'many'"));
	config_free(&c);

	static const char novalue[] = "pidfile =\n";
	path = write_file("e.conf", novalue, sizeof(novalue) - 1);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -EINVAL);
	config_free(&c);

	/* flags that make no sense in a file */
	static const char nested[] = "config = /etc/other.conf\n";
	path = write_file("f.conf", nested, sizeof(nested) - 1);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -EINVAL);
	config_free(&c);

	config_init(&c);
	assert_int_equal(config_load_file(&c, "/nonexistent.conf", err, sizeof(err)), -ENOENT);
	config_free(&c);
}

static void config_parse_args__flags_add_to_and_override_file(void **state)
{
	static const char text[] = "namespace = /file.ns\n"
				   "listen = tcp://127.0.0.1:9000\n"
				   "threads = 4\n"
				   "log-level = warn\n";
	const char *path = write_file("g.conf", text, sizeof(text) - 1);
	char cpath[300]; /* as large as write_file()'s buffer */
	snprintf(cpath, sizeof(cpath), "%s", path);
	struct config c;
	char err[CONFIG_ERR_MAX];
	/* --config after the flags still applies first */
	assert_int_equal(
	    parse(&c, err, "--threads", "2", "--namespace", "/flag.ns", "--config", cpath, NULL),
	    0);
	assert_int_equal(c.threads, 2);
	assert_int_equal(c.log_level, LOG_LEVEL_WARN);
	assert_int_equal(c.nnamespaces, 2);
	assert_string_equal(c.namespaces[0].path, "/file.ns");
	assert_string_equal(c.namespaces[1].path, "/flag.ns");
	assert_int_equal(c.nlistens, 1);
	config_free(&c);
}

static void config_finish__defaults(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	setenv("RDAX_DATA_DIR", "/srv/rdax-test", 1);
	assert_int_equal(parse(&c, err, NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_true(c.ns_defaulted);
	assert_int_equal(c.nnamespaces, 1);
	assert_string_equal(c.namespaces[0].path, "/srv/rdax-test/default.ns");
	assert_int_equal(c.namespaces[0].size, 1ULL << 30);
	assert_int_equal(c.namespaces[0].mode, PERSIST_AUTO);
	assert_int_equal(c.nlistens, 1);
	assert_string_equal(c.listens[0].host, "127.0.0.1");
	assert_int_equal(c.listens[0].port, 7470);
	assert_true(c.threads >= 1);
	assert_int_equal(c.max_payload, FRAME_DEFAULT_MAX_PAYLOAD);
	assert_int_equal(c.rdma_busy_poll_us, CONFIG_DEFAULT_BUSY_POLL_US); /* adaptive polling */
	assert_int_equal(c.flush_mode, FLUSH_TRACKED);
	assert_int_equal(c.log_level, LOG_LEVEL_INFO);
	config_free(&c);
	unsetenv("RDAX_DATA_DIR");
}

/* The connection limits: defaults, flags, file keys, and combinations refused */
static void config__connection_limits(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	setenv("RDAX_DATA_DIR", "/srv/rdax-test", 1);
	assert_int_equal(parse(&c, err, NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_int_equal(c.handshake_timeout, 10);
	assert_int_equal(c.request_timeout, 30);
	assert_int_equal(c.idle_timeout, 0);
	assert_int_equal(c.keepalive, 60);
	assert_int_equal(c.max_connections, 1024);
	assert_int_equal(c.max_connections_per_peer, 512);
	assert_int_equal(c.max_reply_memory, 256ULL << 20);
	config_free(&c);
	/* a small total: the per-peer default follows it */
	assert_int_equal(parse(&c, err, "--max-connections", "100", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_int_equal(c.max_connections_per_peer, 100);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--handshake-timeout", "0", "--request-timeout", "5",
			       "--idle-timeout", "3600", "--keepalive", "0", "--max-connections",
			       "20", "--max-connections-per-peer", "4", "--max-reply-memory", "0",
			       NULL),
			 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_int_equal(c.handshake_timeout, 0);
	assert_int_equal(c.request_timeout, 5);
	assert_int_equal(c.idle_timeout, 3600);
	assert_int_equal(c.keepalive, 0);
	assert_int_equal(c.max_connections, 20);
	assert_int_equal(c.max_connections_per_peer, 4);
	assert_int_equal(c.max_reply_memory, 0);
	config_free(&c);
	/* the same as config-file keys */
	static const char text[] = "max_connections = 30\nmax-connections-per-peer = 3\n"
				   "request-timeout = 7\nkeepalive = 120\nmax-reply-memory = 64M\n";
	const char *path = write_file("limits.conf", text, sizeof(text) - 1);
	assert_int_equal(parse(&c, err, "--config", path, NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_int_equal(c.max_connections, 30);
	assert_int_equal(c.max_connections_per_peer, 3);
	assert_int_equal(c.request_timeout, 7);
	assert_int_equal(c.keepalive, 120);
	assert_int_equal(c.max_reply_memory, 64ULL << 20);
	config_free(&c);
	/* refused, with the reason */
	assert_int_equal(parse(&c, err, "--max-reply-memory", "4K", NULL), -EINVAL);
	assert_non_null(strstr(err, "--max-reply-memory '4K'"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--max-reply-memory", "lots", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--max-connections", "0", NULL), -EINVAL);
	assert_non_null(strstr(err, "--max-connections '0'"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--handshake-timeout", "86401", NULL), -EINVAL);
	assert_non_null(strstr(err, "seconds from 0 (none) to 86400"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--keepalive", "40000", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--idle-timeout", "-1", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(
	    parse(&c, err, "--max-connections", "10", "--max-connections-per-peer", "11", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "exceeds --max-connections"));
	config_free(&c);
	unsetenv("RDAX_DATA_DIR");
}

static void config_default_datadir__order(void **state)
{
	char *dir;
	setenv("RDAX_DATA_DIR", "/d", 1);
	assert_int_equal(config_default_datadir(&dir), 0);
	assert_string_equal(dir, "/d");
	free(dir);
	unsetenv("RDAX_DATA_DIR");
	setenv("XDG_DATA_HOME", "/xdg", 1);
	setenv("HOME", "/home/u", 1);
	assert_int_equal(config_default_datadir(&dir), 0);
	assert_string_equal(dir, geteuid() == 0 ? "/var/lib/rdax" : "/xdg/rdax");
	free(dir);
	unsetenv("XDG_DATA_HOME");
	assert_int_equal(config_default_datadir(&dir), 0);
	assert_string_equal(dir, geteuid() == 0 ? "/var/lib/rdax" : "/home/u/.local/share/rdax");
	free(dir);
}

static void config_finish__format_combinations(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(parse(&c, err, "--format", "/dev/dax0.0", "--force", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	assert_string_equal(c.format_path, "/dev/dax0.0");
	assert_true(c.force);
	assert_int_equal(c.nnamespaces, 0); /* format mode: no default namespace */
	config_free(&c);

	assert_int_equal(parse(&c, err, "--format", "/x", "--listen", "tcp://h:1", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--format takes only"));
	config_free(&c);

	assert_int_equal(parse(&c, err, "--force", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--force only goes with --format"));
	config_free(&c);
}

/* config_parse_args__metrics -- --metrics http://HOST:PORT, in the file too; bad forms named */
static void config_parse_args__metrics(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(parse(&c, err, "--metrics", "http://127.0.0.1:0", NULL), 0);
	assert_string_equal(c.metrics, "http://127.0.0.1:0");
	config_free(&c);
	assert_int_equal(parse(&c, err, "--metrics=http://[::1]:9470", NULL), 0);
	assert_string_equal(c.metrics, "http://[::1]:9470");
	config_free(&c);
	static const char *const bad[] = {"127.0.0.1:9470", "https://h:1", "http://h", "http://h:x",
					  "http://:1", "http://h:1/metrics", "tcp://h:1", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(&c, err, "--metrics", bad[i], NULL), -EINVAL);
		assert_non_null(strstr(err, "--metrics"));
		assert_non_null(strstr(err, "http://HOST:PORT"));
		config_free(&c);
	}
	const char *path = write_file("m.conf", "metrics = http://127.0.0.1:9470\n", 32);
	assert_int_equal(parse(&c, err, "--config", path, NULL), 0);
	assert_string_equal(c.metrics, "http://127.0.0.1:9470");
	config_free(&c);
	assert_int_equal(parse(&c, err, "--format", "/x", "--metrics", "http://h:1", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), -EINVAL);
	config_free(&c);
}

/* the TLS and ACL settings: flags, file keys, and the combinations config_finish refuses */
static void config_tls__keys_and_combinations(void **state)
{
	static const char text[] = "tls = require\n"
				   "tls-certificates = /etc/rdax/tls\n"
				   "tls-psk = /etc/rdax/keys.psk\n"
				   "tls-verify-peer = true\n"
				   "acl = /etc/rdax/acl\n";
	const char *path = write_file("tls.conf", text, sizeof(text) - 1);
	struct config c;
	char err[CONFIG_ERR_MAX];
	config_init(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), 0);
	assert_int_equal(c.tls, TLS_REQUIRE);
	assert_string_equal(c.tls_cert_dir, "/etc/rdax/tls");
	assert_string_equal(c.tls_psk_file, "/etc/rdax/keys.psk");
	assert_true(c.tls_verify_peer);
	assert_string_equal(c.acl_file, "/etc/rdax/acl");
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	config_free(&c);

	config_init(&c);
	assert_int_equal(
	    parse(&c, err, "--tls", "on", "--tls-psk", "/k", "--tls-verify-peer", NULL), 0);
	assert_int_equal(c.tls, TLS_ON);
	assert_true(c.tls_verify_peer);
	/* verifying client certificates needs the certificates directory (its CA) */
	assert_int_equal(config_finish(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--tls-certificates"));
	config_free(&c);

	config_init(&c);
	assert_int_equal(parse(&c, err, "--tls", "maybe", NULL), -EINVAL);
	assert_non_null(strstr(err, "not off, on or require"));
	config_free(&c);

	/* credentials without --tls would be silently unused: refused */
	config_init(&c);
	assert_int_equal(parse(&c, err, "--tls-psk", "/k", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--tls on"));
	config_free(&c);

	/* --tls on without any credentials */
	config_init(&c);
	assert_int_equal(parse(&c, err, "--tls", "on", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), -EINVAL);
	config_free(&c);

	/* a boolean key with a value that is not one */
	const char *bad = write_file("bad.conf", "tls-verify-peer = perhaps\n", 26);
	config_init(&c);
	assert_int_equal(config_load_file(&c, bad, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bad.conf:1"));
	config_free(&c);
}

/* config_persistence_testing__keys -- --write-log, --write-log-max, --allow-powercut, and the file
 */
static void config_persistence_testing__keys(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(parse(&c, err, "--write-log", "/tmp/wl", "--write-log-max", "2M",
			       "--allow-powercut", NULL),
			 0);
	assert_string_equal(c.write_log, "/tmp/wl");
	assert_int_equal(c.write_log_max, 2ULL << 20);
	assert_true(c.allow_powercut);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	config_free(&c);

	/* defaults: no log, 1G when given without a limit, no power cuts */
	assert_int_equal(parse(&c, err, "--write-log", "/tmp/wl", NULL), 0);
	assert_int_equal(c.write_log_max, 1ULL << 30);
	assert_false(c.allow_powercut);
	config_free(&c);

	/* the file: allow-powercut = yes|no */
	static const char text[] =
	    "write-log = /var/wl\nwrite_log_max = 64K\nallow-powercut = yes\n";
	const char *path = write_file("p.conf", text, sizeof(text) - 1);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), 0);
	assert_string_equal(c.write_log, "/var/wl");
	assert_int_equal(c.write_log_max, 64ULL << 10);
	assert_true(c.allow_powercut);
	config_free(&c);
	static const char no[] = "allow-powercut = no\n";
	path = write_file("q.conf", no, sizeof(no) - 1);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), 0);
	assert_false(c.allow_powercut);
	config_free(&c);
	static const char bad[] = "allow-powercut = maybe\n";
	path = write_file("r.conf", bad, sizeof(bad) - 1);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "r.conf:1: allow-powercut 'maybe': not yes or no"));
	config_free(&c);

	/* refusals */
	assert_int_equal(parse(&c, err, "--write-log-max", "1K", NULL), -EINVAL);
	assert_non_null(strstr(err, "--write-log-max '1K': not a size of at least 64K"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--write-log", "", NULL), -EINVAL);
	config_free(&c);
	assert_int_equal(parse(&c, err, "--allow-powercut=yes", NULL), -EINVAL);
	assert_non_null(strstr(err, "--allow-powercut takes no value"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--write-log-max", "8M", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--write-log-max only goes with --write-log"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--allow-powercut", "--cluster", "etcd://h:1", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--allow-powercut does not go with --cluster"));
	config_free(&c);
	assert_int_equal(parse(&c, err, "--format", "/x", "--allow-powercut", NULL), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), -EINVAL);
	config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(config_tls__keys_and_combinations),
	    cmocka_unit_test(config_parse_namespace__options),
	    cmocka_unit_test(config_parse_namespace__bad),
	    cmocka_unit_test(config_parse_listen__forms),
	    cmocka_unit_test(config_parse_listen__bad),
	    cmocka_unit_test(config_parse_args__flags),
	    cmocka_unit_test(config_parse_args__later_flag_wins),
	    cmocka_unit_test(config_parse_args__metrics),
	    cmocka_unit_test(config_parse_args__bad),
	    cmocka_unit_test(config_parse_args__help_version),
	    cmocka_unit_test(config_load_file__settings),
	    cmocka_unit_test(config_load_file__errors_name_the_line),
	    cmocka_unit_test(config_parse_args__flags_add_to_and_override_file),
	    cmocka_unit_test(config_finish__defaults),
	    cmocka_unit_test(config__connection_limits),
	    cmocka_unit_test(config_default_datadir__order),
	    cmocka_unit_test(config_finish__format_combinations),
	    cmocka_unit_test(config_persistence_testing__keys),
	};
	return cmocka_run_group_tests(tests, setup_tmpdir, teardown_tmpdir);
}
