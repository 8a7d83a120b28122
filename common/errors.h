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

/* enum rdax_error and rdax_strerror(): the public header holds the one definition */
#include "librdax.h"

/*
 * rdax_seterr -- format a message into the caller's buffer @err of @errlen
 * bytes (the "char *err, size_t errlen" pair of functions that explain
 * their failures); does nothing if @err is NULL or @errlen is 0
 */
void rdax_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
