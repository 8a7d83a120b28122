#!/bin/bash
# run-bench.sh [BUILD_DIR] -- rdax over RDMA against perftest, one VM boot (docs/rdma.md)
#
# Boots the project's VM (tests/vm) with a devdax NVDIMM and, on the same
# rxe device in that one boot, runs:
#   ib_write_lat -s 4096, ib_send_lat -s 64 (and -e)  (perftest over rdma_cm)
#   ib_write_bw -s 65536, before and after rdax
#   bench_rdma: rdax 4 KiB write+fsync latency, 4 KiB write latency,
#               64 KiB write bandwidth (rdaxd serving /dev/dax0.0), with the
#               CPU both sides spent; with both sides' defaults (adaptive
#               polling), both sleeping, and adaptive polling capped at 5 ms
#   perf: where the daemon's and the client's CPU time goes (cpu-clock
#         samples), and the daemon's context switches per request
# and prints the numbers and their ratios. Under emulation (soft-RoCE in a
# TCG VM, ~0.1-1 ms per round trip) the absolute numbers mean nothing; only
# the ratios, measured in one run, do. BENCH_NO_PROFILE=1 skips perf;
# BENCH_BW_DEPTH sets rdax's 64 KiB writes in flight (default 16);
# BENCH_LAT_TURNS the latency turns (default 5); BENCH_PIN=1 puts every
# server on the guest's CPU 1 and every client on its CPU 0.
# The guest boots with clocksource=tsc (BENCH_TSC=0: the clock source the
# guest picks itself, under TCG the emulated HPET). With the HPET every clock
# read -- libev's per loop turn, the spin loops' -- is an exit to qemu, a cost
# no real host pays and perftest (which reads the TSC itself) never sees; it
# took a write+fsync from 1.20x to 3.6x perftest's (docs/rdma.md).
#
# BUILD_DIR: an optimised build (default: build-release beside this checkout's
# CMakeLists.txt; built if missing).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build-release}
# (re)build what runs: an existing tree is brought up to date, never run stale
if [ ! -f "$build/CMakeCache.txt" ]; then
	cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_BENCH=ON >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target rdaxd bench_rdma >/dev/null
build=$(cd "$build" && pwd)
out=$build/bench-rdma
mkdir -p "$out"
if [ "${BENCH_TSC:-1}" = 1 ]; then
	export RDAX_VM_APPEND="${RDAX_VM_APPEND:+$RDAX_VM_APPEND }clocksource=tsc tsc=reliable"
fi
# the guest script's knobs (BENCH_LAT_ITERS, BENCH_BW_ITERS, BENCH_BW_MIB,
# BENCH_BW_DEPTH, BENCH_LAT_TURNS, BENCH_NO_PROFILE, BENCH_PIN) reach it only through RDAX_VM_ENV
export RDAX_VM_ENV="BENCH_LAT_ITERS BENCH_BW_ITERS BENCH_BW_MIB BENCH_BW_DEPTH BENCH_LAT_TURNS BENCH_NO_PROFILE BENCH_PIN ${RDAX_VM_ENV:-}"
export RDAX_VM_PMEM=devdax RDAX_VM_MEM=${RDAX_VM_MEM:-4G} RDAX_VM_TIMEOUT=${RDAX_VM_TIMEOUT:-900}
exec "$src/tests/vm/run.sh" "$out" bash "$here/bench/guest-bench.sh" "$build"
