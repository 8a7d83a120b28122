/* SPDX-License-Identifier: BSD-3-Clause */
/* completion.c -- wait on one thread for a result another thread delivers */
#include "completion.h"

#include <time.h>

void completion_init(struct completion *c)
{
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &a);
	pthread_condattr_destroy(&a);
	c->done = false;
	c->status = 0;
}

void completion_complete(struct completion *c, int status)
{
	pthread_mutex_lock(&c->lock);
	c->done = true;
	c->status = status;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

bool completion_wait(struct completion *c, int timeout_ms, int *status)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (timeout_ms >= 0) {
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
	}
	pthread_mutex_lock(&c->lock);
	while (!c->done) {
		if (timeout_ms < 0)
			pthread_cond_wait(&c->cond, &c->lock);
		else if (pthread_cond_timedwait(&c->cond, &c->lock, &ts) != 0)
			break;
	}
	bool done = c->done;
	if (done && status)
		*status = c->status;
	pthread_mutex_unlock(&c->lock);
	return done;
}

void completion_destroy(struct completion *c)
{
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}
