/* SPDX-License-Identifier: BSD-3-Clause */
/* errors.c -- rdax error messages */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const project_messages[] = {
    [RDAX_E_NOT_RDAX - RDAX_E_FIRST] = "not an rdax namespace (no rdax superblock)",
    [RDAX_E_BAD_METADATA - RDAX_E_FIRST] = "namespace metadata fails its checks",
    [RDAX_E_VERSION - RDAX_E_FIRST] = "unsupported version",
    [RDAX_E_PROTOCOL - RDAX_E_FIRST] = "protocol error",
    [RDAX_E_NOT_OPEN - RDAX_E_FIRST] = "volume not open on this connection",
    [RDAX_E_ACCESS - RDAX_E_FIRST] = "access denied",
    [RDAX_E_TOO_BIG - RDAX_E_FIRST] = "request exceeds a limit",
    [RDAX_E_STALE_EPOCH - RDAX_E_FIRST] = "request of an older epoch than the replica has seen",
    [RDAX_E_NOT_PRIMARY - RDAX_E_FIRST] = "this node is not the volume's primary",
    [RDAX_E_NO_QUORUM - RDAX_E_FIRST] = "the cluster's store cannot be reached",
};

const char *rdax_strerror(int code)
{
	if (code < 0)
		code = -code;
	if (code == 0)
		return "success";
	if (code >= RDAX_E_FIRST && code < RDAX_E_LAST)
		return project_messages[code - RDAX_E_FIRST];
	return strerror(code);
}

void rdax_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
