/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_config_file.c -- rdaxd's config file, read as rdaxd reads it
 *
 * Input: the bytes of a config file. They go through config_load_stream()
 * (what config_load_file() runs once the file is open) from memory, then
 * config_finish() as at start, then config_free().
 *
 * Checked beyond the sanitizers (leaks included): a refused file always
 * names a reason; an accepted one leaves every list within its limit
 * (namespaces, listens, advertised addresses), every listen address parsed
 * (a host, or an absolute socket path) and every namespace with a path;
 * config_free() leaves an empty config.
 */
#include "fuzz.h"

#include <errno.h>

#include "config.h"
#include "log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_log_init();
	/* config_finish's default namespace lives under the data directory */
	setenv("RDAX_DATA_DIR", "/nonexistent/rdax-fuzz", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0; /* fmemopen refuses an empty buffer on some libcs */
	struct config c;
	char err[CONFIG_ERR_MAX] = "";
	config_init(&c);
	int ret = config_load_stream(&c, f, "fuzz.conf", err, sizeof(err));
	fclose(f);
	if (ret) {
		FUZZ_CHECK(ret == -EINVAL || ret == -ENOMEM || ret == -EIO);
		FUZZ_CHECK(ret == -ENOMEM || err[0] != '\0');
	} else {
		err[0] = '\0';
		ret = config_finish(&c, err, sizeof(err));
		FUZZ_CHECK(ret == 0 || ret == -ENOMEM || err[0] != '\0');
		FUZZ_CHECK(c.nnamespaces <= CONFIG_MAX_NAMESPACES);
		FUZZ_CHECK(c.nlistens <= CONFIG_MAX_LISTENS);
		FUZZ_CHECK(c.nadvertise <= CONFIG_MAX_ADVERTISE);
		for (unsigned i = 0; i < c.nnamespaces; i++)
			FUZZ_CHECK(c.namespaces[i].path != NULL);
		for (unsigned i = 0; i < c.nlistens; i++) {
			const struct config_listen *l = &c.listens[i];
			FUZZ_CHECK(l->uri != NULL);
			FUZZ_CHECK(l->kind == CONFIG_LISTEN_NBD_UNIX ? l->path && l->path[0] == '/'
								     : l->host != NULL);
		}
	}
	config_free(&c);
	FUZZ_CHECK(c.nnamespaces == 0 && c.nlistens == 0 && c.namespaces == NULL);
	return 0;
}
