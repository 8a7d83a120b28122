/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * token.h -- read an access token file (rdaxd --token-file, rdax --token-file,
 * rdax_conn_opts_set_token_file)
 *
 * The token is the file's bytes without its trailing newline(s) ("\n" or
 * "\r\n", as an editor or `echo` leaves them), 1 to RDAX_TOKEN_MAX bytes.
 * Client and daemon read it with this one function, so a file that one
 * accepts the other accepts the same way.
 *
 * Thread safety: none needed (no shared state).
 */
#ifndef RDAX_COMMON_TOKEN_H
#define RDAX_COMMON_TOKEN_H

#include <stddef.h>
#include <stdint.h>

/*
 * token_file_read -- the token in file @path. *out is malloc'd (the caller
 * frees it), *len its length; both written only on success. @err (may be
 * NULL) gets "token file PATH: <why>".
 * Context: blocks on the file read.
 * Returns 0, -errno (open/read), -EINVAL (NULL argument, empty token),
 * -RDAX_E_TOO_BIG (longer than RDAX_TOKEN_MAX), -ENOMEM.
 */
int token_file_read(const char *path, uint8_t **out, size_t *len, char *err, size_t errlen);

#endif
