/* SPDX-License-Identifier: BSD-3-Clause */
/* token.c -- read an access token file */
#include "token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"

int token_file_read(const char *path, uint8_t **out, size_t *len, char *err, size_t errlen)
{
	if (!path || !out || !len) {
		rdax_seterr(err, errlen, "token file: no path");
		return -EINVAL;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int ret = -errno;
		rdax_seterr(err, errlen, "token file %s: %s", path, strerror(errno));
		return ret;
	}
	/* one byte more than allowed, plus "\r\n", tells "too long" from "at the limit" */
	size_t cap = RDAX_TOKEN_MAX + 3, n = 0;
	uint8_t *buf = malloc(cap);
	int ret = 0;
	if (!buf) {
		ret = -ENOMEM;
		rdax_seterr(err, errlen, "token file %s: %s", path, strerror(ENOMEM));
		goto err_close;
	}
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			rdax_seterr(err, errlen, "token file %s: %s", path, strerror(errno));
			goto err_free;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n == 0) {
		ret = -EINVAL;
		rdax_seterr(err, errlen, "token file %s is empty", path);
		goto err_free;
	}
	if (n > RDAX_TOKEN_MAX) {
		ret = -RDAX_E_TOO_BIG;
		rdax_seterr(err, errlen, "token file %s: longer than %d bytes", path,
			    RDAX_TOKEN_MAX);
		goto err_free;
	}
	close(fd);
	*out = buf;
	*len = n;
	return 0;

err_free:
	free(buf);
err_close:
	close(fd);
	return ret;
}
