/* SPDX-License-Identifier: BSD-3-Clause */
/* psk_file.c -- read psktool's "username:hexkey" lines (format in psk_file.h) */
#include "psk_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

/* hexval -- the value of one hex digit, or -1 */
static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* parse_line -- one "user:hexkey" into @e; 0 or -EINVAL */
static int parse_line(const char *line, struct psk_entry *e)
{
	const char *colon = strchr(line, ':');
	if (!colon || colon == line || (size_t)(colon - line) > PSK_USER_MAX)
		return -EINVAL;
	const char *hex = colon + 1;
	size_t len = strlen(hex);
	if (len == 0 || len % 2 || len / 2 > PSK_KEY_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		e->key[i] = (uint8_t)(hi << 4 | lo);
	}
	e->key_len = len / 2;
	memcpy(e->user, line, (size_t)(colon - line));
	e->user[colon - line] = '\0';
	return 0;
}

int psk_file_read(const char *path, struct psk_entry **out, size_t *n, char *err, size_t errlen)
{
	if (!path || !out || !n)
		return -EINVAL;
	FILE *f = fopen(path, "re");
	if (!f) {
		rdax_seterr(err, errlen, "PSK file %s: %s", path, strerror(errno));
		return -EINVAL;
	}
	struct psk_entry *a = NULL;
	size_t count = 0, cap = 0;
	char line[PSK_USER_MAX + 2 * PSK_KEY_MAX + 8];
	unsigned lineno = 0;
	int ret = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			rdax_seterr(err, errlen, "PSK file %s:%u: line too long", path, lineno);
			ret = -EINVAL;
			break;
		}
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '\0')
			continue;
		if (count == cap) {
			cap = cap ? cap * 2 : 8;
			struct psk_entry *b = realloc(a, cap * sizeof(*b));
			if (!b) {
				ret = -ENOMEM;
				break;
			}
			a = b;
		}
		if (parse_line(line, &a[count])) {
			rdax_seterr(err, errlen,
				    "PSK file %s:%u: not 'username:hexkey' (psktool's format)",
				    path, lineno);
			ret = -EINVAL;
			break;
		}
		count++;
	}
	explicit_bzero(line, sizeof(line));
	fclose(f);
	if (ret == 0 && count == 0) {
		rdax_seterr(err, errlen, "PSK file %s: no 'username:hexkey' line", path);
		ret = -EINVAL;
	}
	if (ret) {
		psk_file_free(&a, count);
		return ret;
	}
	*out = a;
	*n = count;
	return 0;
}

void psk_file_free(struct psk_entry **entries, size_t n)
{
	if (!entries || !*entries)
		return;
	explicit_bzero(*entries, n * sizeof(**entries));
	free(*entries);
	*entries = NULL;
}
