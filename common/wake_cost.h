/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wake_cost.h -- what a wake-up costs on this host, measured: the default cap of adaptive polling
 *
 * A side that sleeps on its completion channel pays a wake-up per message;
 * adaptive polling (spin_window.h) spins instead, for at most a cap. How
 * long spinning is worth it depends on what the sleep costs, and that
 * differs by two orders between hosts: 5-20 us on a real host, ~150 us in
 * an emulated VM (docs/rdma.md). A fixed cap sized for one is wrong for the
 * other: in the emulated VM a round trip with one side asleep no longer
 * fits a 200 us cap, so a connection whose sides both fell asleep stays
 * asleep (spin_window.h, "probe"). The classic answer to "spin or block"
 * sizes the spin by the cost of blocking, so the default cap ("auto") is
 * SPIN_WINDOW_WAKES_PER_CAP wake-ups of this host, never less than
 * SPIN_WINDOW_DEFAULT_CAP_US nor more than SPIN_WINDOW_AUTO_CAP_MAX_US.
 *
 * The wake-up is measured as one thread waking another through an eventfd
 * (poll() on one side, write() on the other) -- the same scheduler path a
 * completion channel's event takes -- the median of a few round trips,
 * once per process, by two threads of its own on two different CPUs the
 * process may use (a completion wakes a thread from another CPU; two
 * threads on one CPU would time a switch, not a wake-up). A process held
 * to one CPU times what its wake-ups cost there. In the emulated VM the
 * figure is 0.6-0.8 of a completion channel's wake-up (docs/rdma.md): the
 * cheaper part of the same path.
 */
#ifndef RDAX_WAKE_COST_H
#define RDAX_WAKE_COST_H

/* round trips (two wake-ups each) measured; the median one counts */
#define WAKE_COST_ROUNDS 15

/*
 * wake_cost_us -- the median wake-up of this host in microseconds (at least
 * 1), measured on the first call (WAKE_COST_ROUNDS round trips with a
 * thread of its own: well under a millisecond on a real host) and kept;
 * 0 if it could not be measured (no thread, no eventfd). Thread safe.
 */
unsigned wake_cost_us(void);

/*
 * busy_poll_cap -- the spin cap to use for a configured one: @configured
 * itself, or for SPIN_WINDOW_CAP_AUTO the cap from this host's wake-up
 * (spin_window_auto_cap(wake_cost_us())).
 */
unsigned busy_poll_cap(unsigned configured);

#endif
