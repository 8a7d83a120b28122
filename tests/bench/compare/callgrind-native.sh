#!/bin/bash
# callgrind-native.sh -- instructions per 4 KiB write in rdaxd and in its clients
#
#   tests/bench/compare/callgrind-native.sh --build DIR [--ops N] [--shapes LIST] [--keep DIR]
#
# Counts (valgrind's callgrind, so the figures repeat from run to run) what
# one write costs, for the native protocol (librdax, cmp_native) and the NBD
# export of the same daemon (libnbd, cmp_nbd):
#  - server: rdaxd runs under callgrind, the client natively; the counters are
#    zeroed before and dumped after each shape, as run.sh --callgrind does;
#  - client: rdaxd runs natively, the client under callgrind, counting only
#    inside the target's write/submit/reap callbacks (the library's cost,
#    not the timing loop's).
# Shapes (default write,durable,qd32): see cmp_shapes.h. N operations per
# shape (default 2000) plus the helper's warm-up tenth, which is counted and
# divided by. DIR is a build with -DBUILD_BENCH=ON (rdaxd, cmp_native,
# cmp_nbd). Prints a table; exits non-zero only when something cannot run.
# --keep DIR: copy the callgrind files there (for callgrind_annotate).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=""
ops=2000
shapes=write,durable,qd32
keep=""
client_cpu=0
server_cpu=1
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--ops) ops=$2; shift 2 ;;
	--shapes) shapes=$2; shift 2 ;;
	--keep) keep=$2; shift 2 ;;
	*) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
[ -n "$build" ] || { echo "callgrind-native.sh: --build DIR is required" >&2; exit 2; }
rdaxd=$build/daemon/rdaxd
helpers=$build/tests/bench/compare
work=$(mktemp -d /dev/shm/rdax-cg-native.XXXXXX)
pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [ -n "$keep" ]; then
		mkdir -p "$keep"
		cp "$work"/srv.* "$work"/cli_* "$keep"/ 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_ready() {
	for _ in $(seq 400); do
		grep -q 'rdaxd: ready' "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "callgrind-native.sh: rdaxd did not start; its log:" >&2
	cat "$1" >&2
	exit 1
}

# start_rdaxd WRAPPER... -- rdaxd on the server CPU; sets port, nport, spid
start_rdaxd() {
	port=$(free_port)
	nport=$(free_port)
	rm -f "$work/ns0" "$work/out"
	taskset -c "$server_cpu" env PMEM_IS_PMEM_FORCE=1 "$@" "$rdaxd" \
		--namespace "$work/ns0,size=320M,mode=auto" --listen "tcp://127.0.0.1:$port" \
		--listen "nbd://127.0.0.1:$nport" --threads 1 --log-level warn \
		>"$work/out" 2>&1 &
	spid=$!
	pids+=("$spid")
	wait_ready "$work/out"
	taskset -c "$client_cpu" "$helpers/cmp_native" --url "tcp://127.0.0.1:$port" \
		--volume cmp --size 256M --shapes none >/dev/null
}

stop_rdaxd() {
	kill -TERM "$spid"
	wait "$spid" 2>/dev/null || true
}

# ir_total FILE -- the total instruction count of a callgrind output file
ir_total() {
	awk '/^(summary|totals):/ { print $2; exit }' "$1"
}

native() { echo --url "tcp://127.0.0.1:$port" --volume cmp; }
nbd() { echo --uri "nbd://127.0.0.1:$nport/cmp"; }

declare -A srv cli
IFS=, read -r -a shape_list <<<"$shapes"

echo "callgrind-native: servers under callgrind ..." >&2
start_rdaxd valgrind --tool=callgrind --callgrind-out-file="$work/srv.%p"
for shape in "${shape_list[@]}"; do
	for tool in native nbd; do
		callgrind_control -z "$spid" >/dev/null
		# shellcheck disable=SC2046
		taskset -c "$client_cpu" "$helpers/cmp_$tool" $($tool) --ops "$ops" \
			--shapes "$shape" --no-flush >/dev/null
		callgrind_control -d "${tool}_$shape" "$spid" >/dev/null
	done
done
stop_rdaxd
for shape in "${shape_list[@]}"; do
	for tool in native nbd; do
		f=$(grep -l "^desc: Trigger:.*[ ]${tool}_${shape}\$" "$work"/srv.* | head -1)
		srv[$tool,$shape]=$(ir_total "$f")
	done
done

echo "callgrind-native: clients under callgrind ..." >&2
start_rdaxd
for shape in "${shape_list[@]}"; do
	taskset -c "$client_cpu" valgrind --tool=callgrind --callgrind-out-file="$work/cli_native_$shape" \
		--collect-atstart=no --toggle-collect=n_write --toggle-collect=n_submit --toggle-collect=n_read \
		--toggle-collect=n_submit_read \
		--toggle-collect=n_reap "$helpers/cmp_native" $(native) --ops "$ops" \
		--shapes "$shape" --no-flush >/dev/null 2>"$work/cg.log"
	cli[native,$shape]=$(ir_total "$work/cli_native_$shape")
	taskset -c "$client_cpu" valgrind --tool=callgrind --callgrind-out-file="$work/cli_nbd_$shape" \
		--collect-atstart=no --toggle-collect=b_write --toggle-collect=b_submit --toggle-collect=b_read \
		--toggle-collect=b_submit_read \
		--toggle-collect=b_reap "$helpers/cmp_nbd" $(nbd) --ops "$ops" \
		--shapes "$shape" --no-flush >/dev/null 2>"$work/cg.log"
	cli[nbd,$shape]=$(ir_total "$work/cli_nbd_$shape")
done
stop_rdaxd

div=$((ops + ops / 10))
printf "instructions per operation (%d operations + %d warm-up per shape)\n" "$ops" $((ops / 10))
printf "%-8s %14s %14s %14s %14s\n" shape "rdaxd native" "rdaxd NBD" "librdax" "libnbd"
for shape in "${shape_list[@]}"; do
	printf "%-8s %14d %14d %14d %14d\n" "$shape" $((srv[native,$shape] / div)) \
		$((srv[nbd,$shape] / div)) $((cli[native,$shape] / div)) $((cli[nbd,$shape] / div))
done
