#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# import_vs_nbdcopy.sh -- rdax import / export beside nbdcopy over the NBD export of the
# same volume, in one run, printed as ratios (timings are noise between runs: compare
# only figures of one run).
#
#   tests/bench/import_vs_nbdcopy.sh [BUILD_DIR] [SIZE_MIB]
#
# One rdaxd (an emulated namespace, mode=sim, in a temporary directory) listens on
# tcp:// and nbd://; a volume of SIZE_MIB (default 512) is copied from a file of
# random data (dense: every byte is sent by both tools) and from a sparse file (1/8 data),
# and back into a file. Each copy runs three times; the best time of each tool is used.
# nbdcopy runs as by default and with one connection and one thread (-C 1 -T 1), the
# shape of rdax's copy. Ratio > 1: rdax is faster.
set -euo pipefail

build=${1:-build}
mib=${2:-512}
rdaxd="$build/daemon/rdaxd"
rdax="$build/client/rdax"
for p in "$rdaxd" "$rdax"; do
	[ -x "$p" ] || { echo "no $p: build first (cmake --build $build)" >&2; exit 1; }
done
command -v nbdcopy >/dev/null || { echo "nbdcopy missing (Debian: libnbd-bin)" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/rdax-bench-import-XXXXXX")
pid=""
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tport=$(free_port)
nport=$(free_port)
"$rdaxd" --namespace "$dir/ns,size=$((mib * 2 + 64))M,mode=sim" --log-level warn \
	--listen "tcp://127.0.0.1:$tport" --listen "nbd://127.0.0.1:$nport" >"$dir/ready" 2>"$dir/log" &
pid=$!
for _ in $(seq 100); do grep -q ready "$dir/ready" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/ready" || { echo "rdaxd did not start:" >&2; cat "$dir/log" >&2; exit 1; }

server="tcp://127.0.0.1:$tport"
nbd="nbd://127.0.0.1:$nport"
"$rdax" --server "$server" volume create bench "${mib}M"

head -c "$((mib << 20))" /dev/urandom >"$dir/dense.img"
truncate -s "${mib}M" "$dir/sparse.img"
for i in $(seq 0 8 $((mib - 1))); do
	dd if=/dev/urandom of="$dir/sparse.img" bs=1M count=1 seek="$i" conv=notrunc status=none
done

# best -- the lowest wall time of three runs of "$@", in seconds
best() {
	local b=""
	for _ in 1 2 3; do
		local t0 t1 t
		t0=$(date +%s.%N)
		"$@" >/dev/null
		t1=$(date +%s.%N)
		t=$(echo "$t1 - $t0" | bc -l)
		if [ -z "$b" ] || [ "$(echo "$t < $b" | bc -l)" = 1 ]; then b=$t; fi
	done
	echo "$b"
}

report() { # name rdax_seconds nbdcopy_seconds nbdcopy_1_seconds
	printf '%-22s rdax %6.3f s %7.1f MiB/s | nbdcopy %6.3f s, ratio %.2f | nbdcopy -C1 -T1 %6.3f s, ratio %.2f\n' \
		"$1" "$2" "$(echo "$mib / $2" | bc -l)" "$3" "$(echo "$3 / $2" | bc -l)" \
		"$4" "$(echo "$4 / $2" | bc -l)"
}

# nbdcopy twice: as it runs by default (several connections, since rdaxd
# advertises multi-conn, and several threads), and with one connection and one
# thread, like rdax import/export
echo "rdax import/export vs nbdcopy, ${mib} MiB volume, loopback, best of 3 ($(nproc) CPUs," \
	"load average $(cut -d' ' -f1 /proc/loadavg)); ratio > 1: rdax is faster"
for kind in dense sparse; do
	r=$(best "$rdax" --server "$server" import "$dir/$kind.img" bench)
	n=$(best nbdcopy "$dir/$kind.img" "$nbd/bench")
	n1=$(best nbdcopy -C 1 -T 1 "$dir/$kind.img" "$nbd/bench")
	report "import ($kind file)" "$r" "$n" "$n1"
done
"$rdax" --server "$server" import "$dir/dense.img" bench
r=$(best "$rdax" --server "$server" export bench "$dir/out.img")
n=$(best nbdcopy "$nbd/bench" "$dir/out2.img")
n1=$(best nbdcopy -C 1 -T 1 "$nbd/bench" "$dir/out3.img")
report "export (dense volume)" "$r" "$n" "$n1"
for f in out out2 out3; do
	cmp "$dir/$f.img" "$dir/dense.img" || { echo "the copy $f.img differs" >&2; exit 1; }
done
