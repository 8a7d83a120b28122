/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * acl.h -- who may see, read, write, create and delete which volumes (--acl FILE)
 *
 * The file has one rule per line, '#' comments and blank lines allowed:
 *
 *   SUBJECT   VOLUMES   RIGHTS
 *   user:alice  alice-*   rw,create
 *   user:bob    shared-*  ro
 *   token       *         rw
 *   local       scratch   rw
 *
 * SUBJECT is who the rule is for:
 *   user:NAME  a client that proved NAME: a TLS PSK username (--tls-psk), or
 *              the common name of a client certificate the CA signed
 *              (--tls-verify-peer);
 *   token      a client that sent the --token-file token and proved no name;
 *   local      a client that proved nothing, on a loopback address or a unix
 *              socket;
 *   *          any client.
 * VOLUMES is a shell pattern over volume names (fnmatch(3): '*', '?', [...]).
 * RIGHTS is a comma list of ro (see it, open it, read it), rw (ro, and write,
 * discard, fsync) and create (create volumes of such names, delete them).
 *
 * A client's rights on a volume are the union of the rules whose subject and
 * pattern match. A volume on which it has neither ro nor rw is invisible to
 * it: not listed, and looked up or opened it does not exist. Without --acl
 * every client that passes the daemon's authentication has every right.
 *
 * Thread safety: an acl is read-only once loaded; any thread may query it.
 */
#ifndef RDAXD_ACL_H
#define RDAXD_ACL_H

#include <stdbool.h>
#include <stddef.h>

/* Longest identity name in a rule, and the longest a subject carries. */
#define ACL_NAME_MAX 128

enum acl_right {
	ACL_READ = 1U << 0,   /* ro: see, open, read */
	ACL_WRITE = 1U << 1,  /* rw: write, discard, fsync */
	ACL_CREATE = 1U << 2, /* create and delete */
};
#define ACL_ALL (ACL_READ | ACL_WRITE | ACL_CREATE)

/* What a connection proved about itself (acl.h's SUBJECT forms). */
struct acl_subject {
	char user[ACL_NAME_MAX + 1]; /* "": no name proved */
	bool token;		     /* sent the right token */
	bool local;		     /* loopback or unix socket */
};

struct acl;

/*
 * acl_load -- parse @path (format above). Returns 0, -EINVAL (@err names the
 * file, the line and what is wrong), -ENOMEM.
 */
int acl_load(const char *path, struct acl **out, char *err, size_t errlen);

/* acl_delete -- free; accepts NULL and sets *ap to NULL */
void acl_delete(struct acl **ap);

/*
 * acl_rights -- the rights of @who on the volume @name: ACL_ALL when @acl is
 * NULL (no --acl), else the union of the matching rules (0: invisible).
 */
unsigned acl_rights(const struct acl *acl, const struct acl_subject *who, const char *name);

/*
 * acl_rights_every -- the rights of @who on every volume name, existing or
 * not: ACL_ALL when @acl is NULL, else the union of the matching rules whose
 * VOLUMES is "*". What acts on a whole namespace (clearing its unsafe-
 * shutdown mark) needs its right this way, whoever owns the volumes in it.
 */
unsigned acl_rights_every(const struct acl *acl, const struct acl_subject *who);

/* acl_subject_describe -- "user:alice", "token", "local" or "anonymous", for messages */
const char *acl_subject_describe(const struct acl_subject *who, char *buf, size_t len);

#endif
