/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json.h -- the JSON writer behind every "rdax ... --json" (docs/cli.md has the schemas)
 *
 * One document per command: an object, written as it is built, members in
 * the order they are added, on one line ending in "\n". Strings are escaped
 * per RFC 8259 (quote, backslash, control characters as \uXXXX; other bytes
 * pass through, so UTF-8 stays UTF-8). Numbers are unsigned 64-bit integers,
 * in bytes where they are sizes: a script never parses "64.0 MiB".
 *
 * Usage:
 *	struct json j;
 *	json_begin(&j, stdout);
 *	json_str(&j, "name", v->name);
 *	json_u64(&j, "size", v->size);
 *	json_array(&j, "volumes"); json_object(&j, NULL); ... json_end(&j); json_end(&j);
 *	json_finish(&j);
 *
 * Thread safety: one struct json per thread; it only writes to its FILE.
 */
#ifndef RDAX_CLIENT_JSON_H
#define RDAX_CLIENT_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Deepest nesting of objects and arrays (rdax's schemas use 3). */
#define JSON_DEPTH_MAX 8

struct json {
	FILE *f;
	unsigned depth;			/* open containers, the top object included */
	bool first[JSON_DEPTH_MAX + 1]; /* no member written yet at this depth */
	bool is_array[JSON_DEPTH_MAX + 1];
};

/* json_begin -- start the top-level object on @f */
void json_begin(struct json *j, FILE *f);

/*
 * Members. @key names the member inside an object and must be NULL inside
 * an array. Opening deeper than JSON_DEPTH_MAX is a programming error (abort).
 */
void json_object(struct json *j, const char *key);
void json_array(struct json *j, const char *key);
void json_str(struct json *j, const char *key, const char *value); /* NULL: null */
void json_u64(struct json *j, const char *key, uint64_t value);
void json_bool(struct json *j, const char *key, bool value);

/* json_end -- close the innermost object or array */
void json_end(struct json *j);

/* json_finish -- close everything still open and end the line */
void json_finish(struct json *j);

#endif
