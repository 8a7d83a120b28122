/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_url_size.c -- the address and size parsers both programs share
 *
 * Input: one byte choosing the parser, then the string (cut at the first
 * NUL, as a command line or a config value would be):
 *   0 url_parse   1 url_parse_listen   2 config_parse_listen (rdaxd --listen)
 *   3 config_parse_namespace (rdaxd --namespace)   4 size_parse
 * Checked beyond the sanitizers: an accepted URL has a known scheme, a
 * NUL-terminated host and path within their limits, a port string that is
 * the port, an absolute unix path, a mode within 0777; what the listen
 * parser accepts the server parser accepts too where a port is written; a
 * refusal always has a message; an accepted size formats compactly to a
 * string that parses back to the same number, and a refused one gets a
 * hint.
 */
#include "fuzz.h"

#include <errno.h>
#include <inttypes.h>

#include "config.h"
#include "log.h"
#include "size.h"
#include "url.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_log_init();
	return 0;
}

/* check_url -- what an accepted URL promises (url.h) */
static void check_url(const struct url *u, bool listen)
{
	FUZZ_CHECK(u->scheme >= URL_TCP && u->scheme <= URL_NBD_UNIX);
	FUZZ_CHECK(url_scheme_name(u->scheme) != NULL);
	FUZZ_CHECK(memchr(u->host, '\0', sizeof(u->host)) != NULL);
	FUZZ_CHECK(memchr(u->path, '\0', sizeof(u->path)) != NULL);
	FUZZ_CHECK(memchr(u->port_str, '\0', sizeof(u->port_str)) != NULL);
	if (u->scheme == URL_NBD_UNIX) {
		FUZZ_CHECK(u->path[0] == '/' && u->host[0] == '\0' && u->port == 0);
		FUZZ_CHECK(u->mode <= 0777);
		return;
	}
	FUZZ_CHECK(u->host[0] != '\0');
	char port[8];
	snprintf(port, sizeof(port), "%u", u->port);
	FUZZ_CHECK(strcmp(port, u->port_str) == 0);
	FUZZ_CHECK(listen || u->port != 0);
}

static void fuzz_url(const char *s, bool listen)
{
	struct url u;
	char err[256] = "";
	int ret =
	    listen ? url_parse_listen(s, &u, err, sizeof(err)) : url_parse(s, &u, err, sizeof(err));
	if (ret) {
		FUZZ_CHECK(ret == -EINVAL && err[0] != '\0');
		return;
	}
	check_url(&u, listen);
	if (listen && u.scheme != URL_NBD_UNIX && u.port != 0) {
		struct url again;
		FUZZ_CHECK(url_parse(s, &again, NULL, 0) == 0);
		FUZZ_CHECK(again.scheme == u.scheme && again.port == u.port);
		FUZZ_CHECK(strcmp(again.host, u.host) == 0);
	}
}

static void fuzz_listen(const char *s)
{
	struct config_listen l = {0};
	char err[CONFIG_ERR_MAX] = "";
	int ret = config_parse_listen(s, &l, err, sizeof(err));
	if (ret) {
		FUZZ_CHECK(ret == -EINVAL || ret == -ENOMEM);
		FUZZ_CHECK(ret == -ENOMEM || err[0] != '\0');
	} else {
		FUZZ_CHECK(l.uri && strcmp(l.uri, s) == 0);
		FUZZ_CHECK(l.kind == CONFIG_LISTEN_NBD_UNIX ? l.path && l.path[0] == '/'
							    : l.host != NULL);
	}
	free(l.uri);
	free(l.host);
	free(l.path);
}

static void fuzz_namespace(const char *s)
{
	struct config_namespace n = {0};
	char err[CONFIG_ERR_MAX] = "";
	int ret = config_parse_namespace(s, &n, err, sizeof(err));
	if (ret) {
		FUZZ_CHECK(err[0] != '\0');
	} else {
		FUZZ_CHECK(n.path && n.path[0] != '\0');
		FUZZ_CHECK(n.mode == PERSIST_AUTO || n.mode == PERSIST_SIM);
	}
	free(n.path);
}

static void fuzz_size(const char *s)
{
	uint64_t v = 0;
	int ret = size_parse(s, &v);
	char buf[SIZE_FORMAT_MAX], hint[256];
	if (ret) {
		FUZZ_CHECK(ret == -EINVAL || ret == -ERANGE);
		if (ret == -EINVAL)
			FUZZ_CHECK(size_syntax_hint(s, hint, sizeof(hint))[0] != '\0');
		return;
	}
	uint64_t back = 0;
	FUZZ_CHECK(size_parse(size_format_compact(v, buf, sizeof(buf)), &back) == 0);
	FUZZ_CHECK(back == v);
	FUZZ_CHECK(size_format(v, buf, sizeof(buf))[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	char *s = fuzz_strndup(data + 1, size - 1); /* a C string: cut at the first NUL */
	FUZZ_CHECK(s);
	switch (data[0] % 5) {
	case 0:
		fuzz_url(s, false);
		break;
	case 1:
		fuzz_url(s, true);
		break;
	case 2:
		fuzz_listen(s);
		break;
	case 3:
		fuzz_namespace(s);
		break;
	case 4:
		fuzz_size(s);
		break;
	}
	free(s);
	return 0;
}
