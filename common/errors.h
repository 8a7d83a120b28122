/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * errors.h -- rdax error codes
 *
 * A function that can fail returns 0 on success or a negative code: either
 * -errno (EINVAL, ENOENT, ENOSPC, EEXIST, EBUSY, ERANGE, ...) or -RDAX_E_*,
 * project codes numbered above any errno value so the two never collide.
 */
#ifndef RDAX_ERRORS_H
#define RDAX_ERRORS_H

#include <stddef.h>

enum rdax_error {
	RDAX_E_FIRST = 4096,
	RDAX_E_NOT_RDAX = RDAX_E_FIRST, /* no rdax superblock: not formatted */
	RDAX_E_BAD_METADATA,		/* superblock or volume table fails its checks */
	RDAX_E_VERSION,			/* on-media or protocol version not supported */
	RDAX_E_PROTOCOL,		/* malformed frame or message */
	RDAX_E_NOT_OPEN,		/* volume not open on this connection */
	RDAX_E_ACCESS,			/* access token missing or wrong */
	RDAX_E_TOO_BIG,			/* request exceeds a configured limit */
	RDAX_E_LAST
};

/* rdax_strerror -- message for a code returned by an rdax function (sign ignored) */
const char *rdax_strerror(int code);

/*
 * rdax_seterr -- format a message into the caller's buffer @err of @errlen
 * bytes (the "char *err, size_t errlen" pair of functions that explain
 * their failures); does nothing if @err is NULL or @errlen is 0
 */
void rdax_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
