/* SPDX-License-Identifier: BSD-3-Clause */
/* acl.c -- parse the --acl file, answer what a subject may do with a volume (format in acl.h) */
#include "acl.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "faults.h"

/* Rules per file: far more than any deployment writes, small enough to scan per request. */
#define ACL_MAX_RULES 4096
/* Longest volume pattern (a volume name is at most 63 characters; a pattern may be longer). */
#define ACL_PATTERN_MAX 255

enum acl_kind { SUBJ_USER, SUBJ_TOKEN, SUBJ_LOCAL, SUBJ_ANY };

struct acl_rule {
	enum acl_kind kind;
	char user[ACL_NAME_MAX + 1]; /* SUBJ_USER */
	char pattern[ACL_PATTERN_MAX + 1];
	unsigned rights;
};

struct acl {
	struct acl_rule *rules;
	unsigned n;
};

/* parse_subject -- "user:NAME", "token", "local", "*"; 0 or -EINVAL */
static int parse_subject(const char *w, struct acl_rule *r)
{
	if (strcmp(w, "token") == 0)
		r->kind = SUBJ_TOKEN;
	else if (strcmp(w, "local") == 0)
		r->kind = SUBJ_LOCAL;
	else if (strcmp(w, "*") == 0)
		r->kind = SUBJ_ANY;
	else if (strncmp(w, "user:", 5) == 0 && w[5] && strlen(w + 5) <= ACL_NAME_MAX) {
		r->kind = SUBJ_USER;
		strcpy(r->user, w + 5);
	} else
		return -EINVAL;
	return 0;
}

/* parse_rights -- "ro", "rw", "create", comma-separated; 0 or -EINVAL */
static int parse_rights(char *w, unsigned *out)
{
	size_t n = strlen(w);
	if (n == 0 || w[0] == ',' || w[n - 1] == ',' || strstr(w, ",,"))
		return -EINVAL; /* an empty item is a typo, not nothing */
	unsigned rights = 0;
	for (char *save = NULL, *t = strtok_r(w, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (strcmp(t, "ro") == 0)
			rights |= ACL_READ;
		else if (strcmp(t, "rw") == 0)
			rights |= ACL_READ | ACL_WRITE;
		else if (strcmp(t, "create") == 0)
			rights |= ACL_CREATE;
		else
			return -EINVAL;
	}
	if (!rights)
		return -EINVAL;
	*out = rights;
	return 0;
}

/* parse_line -- one rule of @line (comment stripped, not blank); 0 or -EINVAL with @why */
static int parse_line(char *line, struct acl_rule *r, const char **why)
{
	char *save = NULL;
	char *subj = strtok_r(line, " \t", &save);
	char *pat = strtok_r(NULL, " \t", &save);
	char *rights = strtok_r(NULL, " \t", &save);
	if (!subj || !pat || !rights || strtok_r(NULL, " \t", &save)) {
		*why = "not 'SUBJECT VOLUMES RIGHTS' (three words)";
		return -EINVAL;
	}
	if (parse_subject(subj, r)) {
		*why = "the subject is not user:NAME, token, local or *";
		return -EINVAL;
	}
	if (strlen(pat) > ACL_PATTERN_MAX) {
		*why = "the volume pattern is too long";
		return -EINVAL;
	}
	strcpy(r->pattern, pat);
	if (parse_rights(rights, &r->rights)) {
		*why = "the rights are not a comma list of ro, rw, create";
		return -EINVAL;
	}
	return 0;
}

int acl_load(const char *path, struct acl **out, char *err, size_t errlen)
{
	if (!path || !out)
		return -EINVAL;
	FILE *f = fopen(path, "re");
	if (!f) {
		rdax_seterr(err, errlen, "--acl %s: %s", path, strerror(errno));
		return -EINVAL;
	}
	int ret = -ENOMEM;
	struct acl *acl = calloc(1, sizeof(*acl));
	if (!acl)
		goto err_close;
	char line[1024];
	unsigned lineno = 0, cap = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			rdax_seterr(err, errlen, "--acl %s:%u: line too long", path, lineno);
			ret = -EINVAL;
			goto err_free;
		}
		line[strcspn(line, "#\r\n")] = '\0';
		char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0')
			continue;
		if (acl->n == ACL_MAX_RULES) {
			rdax_seterr(err, errlen, "--acl %s:%u: more than %d rules", path, lineno,
				    ACL_MAX_RULES);
			ret = -EINVAL;
			goto err_free;
		}
		if (acl->n == cap) {
			cap = cap ? cap * 2 : 16;
			struct acl_rule *a = realloc(acl->rules, cap * sizeof(*a));
			if (!a) {
				ret = -ENOMEM;
				goto err_free;
			}
			acl->rules = a;
		}
		struct acl_rule *r = &acl->rules[acl->n];
		memset(r, 0, sizeof(*r));
		const char *why = "";
		if (parse_line(p, r, &why)) {
			rdax_seterr(err, errlen, "--acl %s:%u: %s", path, lineno, why);
			ret = -EINVAL;
			goto err_free;
		}
		acl->n++;
	}
	fclose(f);
	*out = acl;
	return 0;

err_free:
	acl_delete(&acl);
err_close:
	fclose(f);
	return ret;
}

void acl_delete(struct acl **ap)
{
	if (!ap || !*ap)
		return;
	free((*ap)->rules);
	free(*ap);
	*ap = NULL;
}

/* subject_matches -- is @r's subject @who? */
static bool subject_matches(const struct acl_rule *r, const struct acl_subject *who)
{
	switch (r->kind) {
	case SUBJ_USER:
		return who->user[0] && strcmp(r->user, who->user) == 0;
	case SUBJ_TOKEN:
		return !who->user[0] && who->token;
	case SUBJ_LOCAL:
		return !who->user[0] && !who->token && who->local;
	case SUBJ_ANY:
		return true;
	}
	return false;
}

unsigned acl_rights(const struct acl *acl, const struct acl_subject *who, const char *name)
{
	if (!acl || rdax_faults.acl_ignore)
		return ACL_ALL;
	unsigned rights = 0;
	for (unsigned i = 0; i < acl->n && rights != ACL_ALL; i++) {
		const struct acl_rule *r = &acl->rules[i];
		if ((rights | r->rights) != rights && subject_matches(r, who) &&
		    fnmatch(r->pattern, name, 0) == 0)
			rights |= r->rights;
	}
	return rights;
}

unsigned acl_rights_every(const struct acl *acl, const struct acl_subject *who)
{
	if (!acl || rdax_faults.acl_ignore)
		return ACL_ALL;
	unsigned rights = 0;
	for (unsigned i = 0; i < acl->n; i++) {
		const struct acl_rule *r = &acl->rules[i];
		if (strcmp(r->pattern, "*") == 0 && subject_matches(r, who))
			rights |= r->rights;
	}
	return rights;
}

const char *acl_subject_describe(const struct acl_subject *who, char *buf, size_t len)
{
	if (who->user[0])
		snprintf(buf, len, "user:%s", who->user);
	else
		snprintf(buf, len, "%s", who->token ? "token" : who->local ? "local" : "anonymous");
	return buf;
}
