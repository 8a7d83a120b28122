/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fsync_pattern.h -- data patterns for the fsync engine's tests
 * (test_fsync.c, test_fsync_inline.c, test_fsync_races.c): write one into a
 * volume, then ask whether the namespace file -- what a power cut leaves in
 * sim mode -- holds it. The helpers now live in the shared test library
 * (tests/support/pattern.h); this header remains until those tests include
 * that one directly.
 */
#ifndef RDAX_TEST_FSYNC_PATTERN_H
#define RDAX_TEST_FSYNC_PATTERN_H

#include "pattern.h"

#endif
