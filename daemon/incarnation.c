/* SPDX-License-Identifier: BSD-3-Clause */
/* incarnation.c -- which life of the daemon this is: a random number per start and power cut */
#include "incarnation.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t current;

uint64_t incarnation_get(void)
{
	return atomic_load_explicit(&current, memory_order_acquire);
}

/* draw -- 64 random bits; the clock and pid if the kernel's generator cannot answer */
static uint64_t draw(void)
{
	uint64_t v;
	ssize_t n;
	do
		n = getrandom(&v, sizeof(v), GRND_NONBLOCK);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(v))
		return v;
	/* early boot without entropy: still distinct from any earlier life of this machine */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	v = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	v ^= (uint64_t)getpid() << 40;
	/* splitmix64's finaliser: the bits spread over the whole word */
	v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ULL;
	v = (v ^ (v >> 27)) * 0x94d049bb133111ebULL;
	return v ^ (v >> 31);
}

uint64_t incarnation_new(void)
{
	uint64_t old = incarnation_get(), v;
	do
		v = draw();
	while (v == 0 || v == old);
	atomic_store_explicit(&current, v, memory_order_release);
	return v;
}
