#!/bin/sh
# run-demo.sh -- install dependencies, build rdax, start rdaxd on an emulated
# namespace and drive it with the rdax command: create a volume, write, fsync,
# read back, show the dirty-tree counters. Stops the daemon at the end unless
# --keep is given.
#
# Environment: BUILD_DIR (default build), RDAX_DATA_DIR (default a fresh
# directory under ${TMPDIR:-/var/tmp}), RDAX_DEMO_PORT (default 7470).
set -eu
cd "$(dirname "$0")/.."
keep=0
[ "${1:-}" = "--keep" ] && keep=1

deploy/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" >/dev/null
RDAXD="$BUILD_DIR/daemon/rdaxd"
RDAX="$BUILD_DIR/client/rdax"

data=${RDAX_DATA_DIR:-$(mktemp -d "${TMPDIR:-/var/tmp}/rdax-demo.XXXXXX")}
port=${RDAX_DEMO_PORT:-7470}
server="tcp://127.0.0.1:$port"
log="$data/rdaxd.log"

echo "== starting rdaxd on an emulated 256 MiB namespace in $data"
"$RDAXD" --namespace "$data/demo.ns,size=256M,mode=auto" --listen "$server" \
	--pidfile "$data/rdaxd.pid" >"$data/rdaxd.out" 2>"$log" &
pid=$!
i=0
until grep -q "^rdaxd: ready" "$data/rdaxd.out" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 $pid 2>/dev/null; then
		echo "rdaxd did not start; its log:" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.1
done
cat "$data/rdaxd.out"

run() {
	echo "\$ rdax $*"
	"$RDAX" --server "$server" "$@"
}

run volume create demo 64M 2>/dev/null || run volume info demo
run volume list
echo "\$ echo 'hello, persistent memory' | rdax write demo 4096"
echo 'hello, persistent memory' | "$RDAX" --server "$server" write demo 4096
run stat demo
run fsync demo
run stat demo
echo "\$ head -c 4M /dev/urandom | rdax write demo 2M --fsync   # one durable request"
head -c 4194304 /dev/urandom | "$RDAX" --server "$server" write demo 2M --fsync
run read demo 4096 25
run stat demo

if [ $keep -eq 1 ]; then
	echo "== rdaxd keeps running (pid $pid, log $log); stop it with: kill $pid"
	exit 0
fi
echo "== stopping rdaxd (SIGTERM writes back anything dirty)"
kill -TERM $pid
wait $pid
echo "rdaxd exited with $?"
