/* SPDX-License-Identifier: BSD-3-Clause */
/* json.c -- a streaming JSON writer for rdax --json */
#include "json.h"

#include <inttypes.h>
#include <stdlib.h>

/* put_string -- @s as a JSON string literal */
static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* member -- the separator and "key": before a value at the current depth */
static void member(struct json *j, const char *key)
{
	if (!j->first[j->depth])
		fputc(',', j->f);
	j->first[j->depth] = false;
	if (key && !j->is_array[j->depth]) {
		put_string(j->f, key);
		fputc(':', j->f);
	}
}

/* open_container -- start a container of the given kind */
static void open_container(struct json *j, const char *key, bool array)
{
	if (j->depth >= JSON_DEPTH_MAX)
		abort();
	member(j, key);
	fputc(array ? '[' : '{', j->f);
	j->depth++;
	j->first[j->depth] = true;
	j->is_array[j->depth] = array;
}

void json_begin(struct json *j, FILE *f)
{
	j->f = f;
	j->depth = 0;
	j->first[0] = true;
	j->is_array[0] = true; /* the top level holds one value, with no key */
	open_container(j, NULL, false);
}

void json_object(struct json *j, const char *key)
{
	open_container(j, key, false);
}

void json_array(struct json *j, const char *key)
{
	open_container(j, key, true);
}

void json_str(struct json *j, const char *key, const char *value)
{
	member(j, key);
	if (value)
		put_string(j->f, value);
	else
		fputs("null", j->f);
}

void json_u64(struct json *j, const char *key, uint64_t value)
{
	member(j, key);
	fprintf(j->f, "%" PRIu64, value);
}

void json_bool(struct json *j, const char *key, bool value)
{
	member(j, key);
	fputs(value ? "true" : "false", j->f);
}

void json_end(struct json *j)
{
	if (j->depth == 0)
		return;
	fputc(j->is_array[j->depth] ? ']' : '}', j->f);
	j->depth--;
}

void json_finish(struct json *j)
{
	while (j->depth > 0)
		json_end(j);
	fputc('\n', j->f);
}
