/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_replay.c -- run a harness over corpus files without libFuzzer
 *
 *   fuzz_NAME [FILE|DIR]...
 *
 * Every file named, and every regular file directly inside a directory named,
 * goes through LLVMFuzzerTestOneInput() once, in name order. Built into every
 * harness when the tree is not built with -DTESTS_FUZZ=ON (gcc builds), so
 * the seeds and the regression inputs of each harness run in the default
 * suite under ASan and UBSan. Exit 0 after "N inputs", 1 if a file cannot be
 * read; a finding aborts, as under libFuzzer.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* LLVMFuzzerInitialize -- optional in a harness (libFuzzer's rule): weak here */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* replay_file -- one input; 0 or -1 (unreadable) */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "fuzz_replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, n = 0;
	uint8_t *buf = malloc(cap);
	size_t got;
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			uint8_t *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	int err = ferror(f) || !buf;
	fclose(f);
	if (err) {
		fprintf(stderr, "fuzz_replay: %s: read failed\n", path);
		free(buf);
		return -1;
	}
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

/* by_name -- scandir order */
static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	unsigned inputs = 0;
	int ret = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "fuzz_replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			ret |= replay_file(argv[i]);
			inputs++;
			continue;
		}
		struct dirent **ents;
		int n = scandir(argv[i], &ents, NULL, by_name);
		if (n < 0) {
			fprintf(stderr, "fuzz_replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		for (int k = 0; k < n; k++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", argv[i], ents[k]->d_name);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				ret |= replay_file(path);
				inputs++;
			}
			free(ents[k]);
		}
		free(ents);
	}
	printf("%u inputs\n", inputs);
	return ret ? 1 : 0;
}
