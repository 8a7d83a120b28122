/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * psk_file.h -- pre-shared keys in psktool's format, for TLS and RDMA authentication
 *
 * One "username:hexkey" per line (GnuTLS's psktool writes them; blank
 * lines are skipped). rdaxd checks its --tls-psk file with it at start and
 * keys RDMA connection requests with it (rdma_auth.h); clients find their
 * user's key in it (tls_client.c).
 *
 * Thread safety: pure functions over the caller's memory.
 */
#ifndef RDAX_COMMON_PSK_FILE_H
#define RDAX_COMMON_PSK_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Longest username and key kept (psktool makes 32-byte keys). */
#define PSK_USER_MAX 128
#define PSK_KEY_MAX  64

struct psk_entry {
	char user[PSK_USER_MAX + 1];
	uint8_t key[PSK_KEY_MAX];
	size_t key_len;
};

/*
 * psk_file_read -- every entry of @path into a malloc'd array (*out, *n;
 * free with psk_file_free, which also clears the keys). Returns 0,
 * -EINVAL (@err names the file, the line and why; no entry at all is an
 * error too), -ENOMEM.
 */
int psk_file_read(const char *path, struct psk_entry **out, size_t *n, char *err, size_t errlen);

/* psk_file_free -- clear and free what psk_file_read returned; accepts NULL */
void psk_file_free(struct psk_entry **entries, size_t n);

#endif
