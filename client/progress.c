/* SPDX-License-Identifier: BSD-3-Clause */
/* progress.c -- a progress bar on a terminal's standard error */
#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "size.h"

#define BAR_WIDTH   30
#define INTERVAL_MS 200

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* draw -- the bar for @done bytes, over the previous one */
static void draw(const struct progress *p, uint64_t done)
{
	unsigned pct = p->total ? (unsigned)((double)done * 100.0 / (double)p->total) : 100;
	unsigned fill = pct * BAR_WIDTH / 100;
	char bar[BAR_WIDTH + 1], d[SIZE_FORMAT_MAX], t[SIZE_FORMAT_MAX];
	for (unsigned i = 0; i < BAR_WIDTH; i++)
		bar[i] = i < fill ? '#' : ' ';
	bar[BAR_WIDTH] = '\0';
	/* \033[K: clear what a longer previous line left */
	fprintf(stderr, "\r%s [%s] %3u%%  %s of %s\033[K", p->label, bar, pct,
		size_format(done, d, sizeof(d)), size_format(p->total, t, sizeof(t)));
	fflush(stderr);
}

void progress_begin(struct progress *p, const char *label, uint64_t total)
{
	p->on = isatty(STDERR_FILENO) == 1;
	p->label = label;
	p->total = total;
	p->last_ms = 0;
}

void progress_update(struct progress *p, uint64_t done)
{
	if (!p->on)
		return;
	uint64_t now = now_ms();
	if (now - p->last_ms < INTERVAL_MS)
		return;
	p->last_ms = now;
	draw(p, done);
}

void progress_end(struct progress *p, uint64_t done)
{
	if (!p->on)
		return;
	draw(p, done);
	fputc('\n', stderr);
}
