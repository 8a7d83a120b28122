/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * progress.h -- a one-line progress bar on standard error, for long copies
 *
 * Drawn only when standard error is a terminal (never into a pipe or a log),
 * at most five times a second, as "\rLABEL [#####     ]  42%  1.5 GiB of 3.6 GiB";
 * progress_end() draws the final state and ends the line.
 *
 * Thread safety: one struct progress per thread.
 */
#ifndef RDAX_CLIENT_PROGRESS_H
#define RDAX_CLIENT_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct progress {
	bool on; /* stderr is a terminal */
	const char *label;
	uint64_t total;	  /* bytes */
	uint64_t last_ms; /* when the bar was last drawn */
};

/* progress_begin -- a bar for @total bytes; draws nothing unless stderr is a tty */
void progress_begin(struct progress *p, const char *label, uint64_t total);

/* progress_update -- @done of the total bytes are through */
void progress_update(struct progress *p, uint64_t done);

/* progress_end -- draw @done one last time and end the line */
void progress_end(struct progress *p, uint64_t done);

#endif
