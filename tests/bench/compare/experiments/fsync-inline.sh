#!/bin/bash
# fsync-inline.sh -- a durable write with its fsync on the event loop (the default) vs the pool
#
#   tests/bench/compare/experiments/fsync-inline.sh --build DIR [--rounds N] [--seconds S]
#
# Small range fsyncs (an NBD FUA write, a native WRITE with fsync or ranged
# FSYNC, at most 64 KiB) run on the connection's event loop when the
# volume's fsync lock is free (vol_op_fsync_try_inline(), daemon/vol_op.c);
# before, every fsync went to the fsync pool thread and back. This
# experiment measures what that saves: it exports the committed tree (git
# archive HEAD) into a temporary directory, makes vol_op_fsync_try_inline()
# decline every fsync when the environment variable EXP_POOL is set (so each
# goes to the pool, as before), and builds that rdaxd. Two daemons of that
# binary then run side by side, A with EXP_POOL (the pool) and B as committed
# (inline), pinned like the benchmark; the QD1 shapes write, durable and
# wflush run against both, interleaved A, B, A, B... for --rounds rounds,
# through cmp_native and cmp_nbd from DIR (a build of tests/bench/compare).
# Prints the median p50 of each shape and mode, and the server's context
# switches per operation. The work tree is left untouched.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
build=""
rounds=6
secs=1
client_cpu=0
server_cpu=1
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	*) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
[ -n "$build" ] || { echo "fsync-inline.sh: --build DIR is required" >&2; exit 2; }
helpers=$build/tests/bench/compare

scratch=$(mktemp -d /tmp/rdax-fsync-inline.XXXXXX)
data=$(mktemp -d /dev/shm/rdax-fsync-inline.XXXXXX)
pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$scratch" "$data"
}
trap cleanup EXIT

git -C "$repo" archive HEAD | tar -x -C "$scratch"
python3 - "$scratch" <<'EOF'
import sys
root = sys.argv[1]
edits = [
    ("daemon/vol_op.c", "#include <stddef.h>\n", "#include <stddef.h>\n#include <stdlib.h>\n"),
    ("daemon/vol_op.c", """	if (!v || !v->ns || len == 0 || len > VOL_OP_INLINE_MAX)
		return false;""", """	if (!v || !v->ns || len == 0 || len > VOL_OP_INLINE_MAX)
		return false;
	if (getenv("EXP_POOL"))
		return false;"""),
]
for path, old, new in edits:
    full = root + "/" + path
    text = open(full).read()
    if text.count(old) != 1:
        sys.exit("fsync-inline.sh: %s changed; the experiment's edit no longer applies" % path)
    open(full, "w").write(text.replace(old, new))
EOF
echo "fsync-inline: building the experimental rdaxd ..." >&2
cmake -S "$scratch" -B "$scratch/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTS=OFF \
	>/dev/null
cmake --build "$scratch/build" -j"$(nproc)" --target rdaxd >/dev/null
rdaxd=$scratch/build/daemon/rdaxd

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

declare -A tcp nbd pid
for mode in A B; do
	tcp[$mode]=$(free_port)
	nbd[$mode]=$(free_port)
	if [ $mode = A ]; then
		inline=(env EXP_POOL=1)
	else
		inline=(env)
	fi
	"${inline[@]}" PMEM_IS_PMEM_FORCE=1 taskset -c "$server_cpu" "$rdaxd" \
		--namespace "$data/ns$mode,size=320M,mode=auto" --listen "tcp://127.0.0.1:${tcp[$mode]}" \
		--listen "nbd://127.0.0.1:${nbd[$mode]}" --threads 1 --log-level warn \
		>"$data/out$mode" 2>&1 &
	pid[$mode]=$!
	pids+=("$!")
done
for mode in A B; do
	for _ in $(seq 200); do
		grep -q 'rdaxd: ready' "$data/out$mode" && break
		sleep 0.05
	done
	taskset -c "$client_cpu" "$helpers/cmp_native" --url "tcp://127.0.0.1:${tcp[$mode]}" \
		--volume cmp --size 256M --shapes none --prefill >/dev/null 2>&1
done
for r in $(seq "$rounds"); do
	echo "fsync-inline: round $r of $rounds" >&2
	for mode in A B; do
		taskset -c "$client_cpu" "$helpers/cmp_native" --url "tcp://127.0.0.1:${tcp[$mode]}" \
			--volume cmp --seconds "$secs" --cpu "$client_cpu" --server-pid "${pid[$mode]}" \
			--shapes write,durable,wflush >"$data/native_${mode}_$r.json" 2>/dev/null
		taskset -c "$client_cpu" "$helpers/cmp_nbd" --uri "nbd://127.0.0.1:${nbd[$mode]}/cmp" \
			--seconds "$secs" --cpu "$client_cpu" --server-pid "${pid[$mode]}" \
			--shapes write,durable,wflush >"$data/nbd_${mode}_$r.json" 2>/dev/null
	done
done
python3 - "$data" "$rounds" <<'EOF'
import json, statistics, sys
data, rounds = sys.argv[1], int(sys.argv[2])
print("A: every fsync handed to the pool (as before); B: small ones inline (as committed)")
print("%-7s %-8s %30s %30s" % ("client", "shape", "A p50 us / ctxsw per op",
                               "B p50 us / ctxsw per op"))
for tool in ("native", "nbd"):
    for shape in ("write", "durable", "wflush"):
        cells = []
        for mode in ("A", "B"):
            docs = [json.load(open("%s/%s_%s_%d.json" % (data, tool, mode, r)))[shape]
                    for r in range(1, rounds + 1)]
            p50 = statistics.median(d["lat"]["p50_ns"] / 1e3 for d in docs)
            cs = statistics.median(d.get("server_ctxsw_per_op", float("nan")) for d in docs)
            cells.append("%8.1f / %4.2f" % (p50, cs))
        print("%-7s %-8s %30s %30s" % (tool, shape, cells[0], cells[1]))
EOF
