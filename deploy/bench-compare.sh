#!/bin/sh
# bench-compare.sh -- the comparative benchmark: rdax beside nbdkit and the loopback floors
#
#   deploy/bench-compare.sh [--quick | --full] [--out DIR] [--rounds N] [--callgrind]
#                           [--client-cpu N] [--server-cpu N] [--tmp DIR] [--size SIZE]
#
# Installs what it needs beyond deploy/install-deps.sh (fio, nbdkit, iperf3,
# gnuplot, libnbd; idempotent, with apt-get), builds an optimised tree
# (BUILD_DIR, default build-bench), then runs tests/bench/compare/run.sh:
# in one run, on loopback, clients pinned to one CPU and servers to another,
# the same fio jobs and libnbd client against rdax's NBD export, nbdkit's
# memory plugin and nbdkit's file plugin on tmpfs; the same shapes through
# rdax's native protocol; the TCP floors (64-byte ping-pong, pipelined
# messages, iperf3 -l 1M); fsync tracked vs hammer on 64 MiB, 1 GiB and 8 GiB
# volumes; with --callgrind (and --full) instructions per operation of rdaxd
# and nbdkit. Writes OUT/report.md (default build/bench-compare), PNG plots
# and the raw JSON. About 4 minutes by default, 1 with --quick, 13 with --full.
# Never a pass/fail test: figures are reported, with their ratios to their
# same-run peers and floors, and the issue's targets as met / not met.
set -eu
cd "$(dirname "$0")/.."

deploy/install-deps.sh
packages="fio nbdkit iperf3 gnuplot-nox libnbd-dev libnbd-bin iproute2 util-linux python3"
missing=""
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	echo "bench-compare: installing$missing"
	$SUDO apt-get update -q
	# iperf3's package asks whether to start a daemon: it must not (the benchmark starts its own)
	echo "iperf3 iperf3/start_daemon boolean false" | $SUDO debconf-set-selections
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

BUILD_DIR=${BUILD_DIR:-build-bench}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_BENCH=ON \
	-DDEBUG_SANITIZE=OFF >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target rdaxd cmp_floor cmp_engine cmp_native cmp_nbd

exec bash tests/bench/compare/run.sh --build "$BUILD_DIR" "$@"
