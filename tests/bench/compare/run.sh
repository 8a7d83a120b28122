#!/bin/bash
# run.sh -- the comparative benchmark: rdax beside nbdkit and the loopback floors, in one run
#
#   run.sh --build DIR [--out DIR] [--quick | --full] [--rounds N] [--callgrind]
#          [--client-cpu N] [--server-cpu N] [--tmp DIR] [--size SIZE]
#
# deploy/bench-compare.sh installs the tools, builds DIR and calls this.
# The servers (one rdaxd serving its native protocol and NBD, nbdkit memory,
# nbdkit file on a tmpfs file) are started and their exports written over
# once; then ROUNDS rounds each measure the floors and every system, the
# order of the systems rotated per round so drift of a shared machine falls
# on all of them alike; the report takes the median of the rounds and shows
# their spread. Every round measures writes and reads (the exports were
# written over first). Then many clients at once: 1, 4 and 16 connections
# (MULTI_CONNS), each client its own process with QD32 of 4 KiB random
# writes, then reads; rdax serves each connection its own 64 MiB volume,
# nbdkit memory its one export to all of them. With --callgrind (and in --full), rdaxd and nbdkit memory
# then run under valgrind's callgrind for instructions per operation and
# where they go. Then the fsync engine alone (tracked vs hammer).
# Every server (rdaxd, nbdkit, the floor servers, iperf3 -s) is pinned with
# taskset to the server CPU, every client (fio, cmp_*, iperf3 -c) to the
# client CPU; where each really ran is recorded in the report. Data files
# live on tmpfs (--tmp, default /dev/shm). Results (raw JSON) go to
# OUT/raw, the report to OUT/report.md, plots to OUT/*.png.
#
# A benchmark, never a test: it exits non-zero only when something could
# not run, never because of a figure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=""
out=""
profile=default
client_cpu=0
server_cpu=1
tmp_root=/dev/shm
size=1G
rounds_opt=""
callgrind=0
cg_ops=2000

usage() {
	sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--quick) profile=quick; shift ;;
	--full) profile=full; shift ;;
	--client-cpu) client_cpu=$2; shift 2 ;;
	--server-cpu) server_cpu=$2; shift 2 ;;
	--tmp) tmp_root=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--rounds) rounds_opt=$2; shift 2 ;;
	--callgrind) callgrind=1; shift ;;
	-h|--help) usage ;;
	*) echo "run.sh: unknown argument $1" >&2; usage ;;
	esac
done
[ -n "$build" ] || usage
build=$(cd "$build" && pwd)
out=${out:-build/bench-compare}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# seconds per measurement, warm-up included by the helpers (a tenth of it)
case $profile in
quick) secs=1; rounds=1; engine_sizes=64M,1G; engine_reps=21 ;;
default) secs=2; rounds=3; engine_sizes=64M,1G,8G; engine_reps=101 ;;
full) secs=5; rounds=5; engine_sizes=64M,1G,8G; engine_reps=301; callgrind=1 ;;
esac
rounds=${rounds_opt:-$rounds}

rdaxd=$build/daemon/rdaxd
helpers=$build/tests/bench/compare
for tool in fio nbdkit iperf3 gnuplot python3 taskset ss; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool is not installed" >&2; exit 1; }
done
for bin in "$rdaxd" "$helpers/cmp_floor" "$helpers/cmp_engine" "$helpers/cmp_native" \
	"$helpers/cmp_nbd"; do
	[ -x "$bin" ] || { echo "run.sh: $bin is not built" >&2; exit 1; }
done
ncpu=$(nproc)
if [ "$client_cpu" -ge "$ncpu" ] || [ "$server_cpu" -ge "$ncpu" ]; then
	echo "run.sh: CPUs $client_cpu and $server_cpu: this machine has $ncpu" >&2
	exit 1
fi
if [ "$client_cpu" = "$server_cpu" ]; then
	echo "run.sh: warning: client and server share CPU $client_cpu" >&2
fi

work=$(mktemp -d "$tmp_root/rdax-bench-compare.XXXXXX")
raw=$out/raw
rm -rf "$raw"
mkdir -p "$raw"
pids=()

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

# stop_pid PID -- SIGTERM, then SIGKILL after 30 s; reaps it
stop_pid() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 300); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		stop_pid "$pid"
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# listening PORT -- a TCP socket listens on PORT (asked without connecting: iperf3 -s -1
# would take a probe for its one client)
listening() {
	[ -n "$(ss -Hltn "sport = :$1")" ]
}

# wait_for_port PORT -- until something listens on PORT (bounded: 30 s, a loaded machine
# has taken more than 10 s to start iperf3)
wait_for_port() {
	local i
	for i in $(seq 600); do
		listening "$1" && return 0
		sleep 0.05
	done
	echo "run.sh: nothing listens on port $1" >&2
	return 1
}

# skip NAME REASON... -- a measurement that did not run, and why (the report says so)
skip() {
	local name=$1
	shift
	printf '%s\n' "$*" >"$raw/skipped_$name.txt"
	log "skipped $name: $*"
}

# placement PID NAME -- where a server's threads are allowed to run and last ran
placement() {
	python3 "$here/report.py" placement "$1" "$2" >"$raw/placement_$2.json" || true
}

client() { taskset -c "$client_cpu" "$@"; }

# fio_jobs DIR NAME URI -- the fio jobs of fio/shapes.fio against one NBD export
fio_jobs() {
	local dir=$1 name=$2 uri=$3 job
	for job in wflush qd32 seq1m read rqd32 rseq1m; do
		log "round $r: $name: fio $job"
		NBD_URI=$uri SIZE=$size RUNTIME=$secs RAMP=$((secs * 100))ms \
			client fio --section="$job" --output-format=json \
			--output="$dir/${name}_fio_$job.json" "$here/fio/shapes.fio" >/dev/null
	done
}

python3 "$here/report.py" env --profile "$profile" --seconds "$secs" --rounds "$rounds" \
	--client-cpu "$client_cpu" --server-cpu "$server_cpu" --tmp "$tmp_root" \
	--size "$size" --repo "$here/../../.." --rdaxd "$rdaxd" >"$raw/env.json"

cat /proc/loadavg >"$raw/loadavg_start.txt"
head -1 /proc/stat >"$raw/stat_start.txt"

# --- servers: all started, pinned and prefilled before any round --------------------
log "rdax: starting rdaxd on $work/ns0 (mode=auto, PMEM_IS_PMEM_FORCE=1)"
tcp_port=$(free_port)
# the volume "cmp" of SIZE and MULTI_MAX volumes of MULTI_VOL for the many-clients runs
multi_conns=${MULTI_CONNS:-1 4 16}
multi_max=$(printf '%s\n' $multi_conns | sort -n | tail -1)
multi_vol=64M
ns_size=$(python3 "$here/report.py" nssize "$size")
ns_size=$((${ns_size%M} + multi_max * 64))M
rdax_args=(--namespace "$work/ns0,size=$ns_size,mode=auto"
	--listen "tcp://127.0.0.1:$tcp_port" --threads 1 --log-level warn)
nbd_port=""
# the help read whole first: under pipefail, grep -q leaving at its first match
# can kill rdaxd with SIGPIPE mid-help and fail the test (one run lost its NBD rows)
rdaxd_help=$("$rdaxd" --help 2>&1 || true)
if grep -q 'nbd://' <<<"$rdaxd_help"; then
	nbd_port=$(free_port)
	rdax_args+=(--listen "nbd://127.0.0.1:$nbd_port")
fi
PMEM_IS_PMEM_FORCE=1 taskset -c "$server_cpu" "$rdaxd" "${rdax_args[@]}" \
	>"$work/rdaxd.out" 2>"$raw/rdaxd.log" &
rpid=$!
pids+=("$rpid")
for _ in $(seq 600); do
	grep -q 'rdaxd: ready' "$work/rdaxd.out" 2>/dev/null && break
	kill -0 "$rpid" 2>/dev/null || { cat "$raw/rdaxd.log" >&2; exit 1; }
	sleep 0.05
done
grep 'rdaxd: ready' "$work/rdaxd.out" >"$raw/rdaxd_ready.txt"
wait_for_port "$tcp_port"
if [ -n "$nbd_port" ] && ! listening "$nbd_port"; then
	skip rdax_nbd "rdaxd accepted --listen nbd://, but nothing listened there" \
		"(the NBD export is not in this build)"
	nbd_port=""
elif [ -z "$nbd_port" ]; then
	skip rdax_nbd "this rdaxd has no NBD listener (rdaxd --help names no nbd:// address)"
fi
log "rdax: creating and prefilling the volume"
client "$helpers/cmp_native" --url "tcp://127.0.0.1:$tcp_port" --volume cmp --size "$size" \
	--shapes none --prefill >/dev/null
for i in $(seq 0 $((multi_max - 1))); do
	client "$helpers/cmp_native" --url "tcp://127.0.0.1:$tcp_port" --volume "mc$i" \
		--size "$multi_vol" --shapes none --prefill >/dev/null
done

declare -A nbdkit_port nbdkit_pid
for plugin in memory file; do
	port=$(free_port)
	if [ $plugin = memory ]; then
		args=(memory "size=$size")
	else
		truncate -s "$size" "$work/disk.img"
		args=(file "file=$work/disk.img")
	fi
	log "nbdkit $plugin: starting and prefilling"
	taskset -c "$server_cpu" nbdkit -f -i 127.0.0.1 -p "$port" "${args[@]}" \
		2>"$raw/nbdkit_$plugin.log" &
	pids+=("$!")
	nbdkit_pid[$plugin]=$!
	wait_for_port "$port"
	nbdkit_port[$plugin]=$port
	client "$helpers/cmp_nbd" --uri "nbd://127.0.0.1:$port" --shapes none --prefill >/dev/null
done

# --- rounds: floors and every system, the order of the systems rotated per round ------
floors() {
	local dir=$1 port ipid
	log "round $r: floors (ping-pong, pipelines, iperf3)"
	"$helpers/cmp_floor" pingpong --seconds "$secs" --client-cpu "$client_cpu" \
		--server-cpu "$server_cpu" >"$dir/floor_ping.json"
	# the same round trip carrying a 4 KiB write (4 KiB there) or read (4 KiB back)
	"$helpers/cmp_floor" pingpong --size 4K --seconds "$secs" --client-cpu "$client_cpu" \
		--server-cpu "$server_cpu" >"$dir/floor_ping4kw.json"
	"$helpers/cmp_floor" pingpong --reply 4K --seconds "$secs" --client-cpu "$client_cpu" \
		--server-cpu "$server_cpu" >"$dir/floor_ping4kr.json"
	"$helpers/cmp_floor" pipeline --size 4K --depth 32 --seconds "$secs" \
		--client-cpu "$client_cpu" --server-cpu "$server_cpu" >"$dir/floor_pipe4k.json"
	"$helpers/cmp_floor" pipeline --size 1M --depth 8 --seconds "$secs" \
		--client-cpu "$client_cpu" --server-cpu "$server_cpu" >"$dir/floor_pipe1m.json"
	port=$(free_port)
	taskset -c "$server_cpu" iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
	ipid=$!
	wait_for_port "$port"
	client iperf3 -c 127.0.0.1 -p "$port" -l 1M -t "$secs" -J >"$dir/floor_iperf3.json" || true
	wait "$ipid" 2>/dev/null || true
}

measure() {
	local dir=$1 system=$2 uri
	case $system in
	rdax_native)
		log "round $r: rdax native: cmp_native shapes"
		client "$helpers/cmp_native" --url "tcp://127.0.0.1:$tcp_port" --volume cmp \
			--seconds "$secs" --cpu "$client_cpu" --server-pid "$rpid" \
			>"$dir/rdax_native.json" ;;
	rdax_nbd)
		[ -n "$nbd_port" ] || return 0
		uri="nbd://127.0.0.1:$nbd_port/cmp"
		log "round $r: rdax NBD: cmp_nbd shapes"
		client "$helpers/cmp_nbd" --uri "$uri" --seconds "$secs" --cpu "$client_cpu" \
			--server-pid "$rpid" >"$dir/rdax_nbd_cmp.json"
		fio_jobs "$dir" rdax_nbd "$uri" ;;
	nbdkit_*)
		uri="nbd://127.0.0.1:${nbdkit_port[${system#nbdkit_}]}"
		log "round $r: $system: cmp_nbd shapes"
		client "$helpers/cmp_nbd" --uri "$uri" --seconds "$secs" --cpu "$client_cpu" \
			--server-pid "${nbdkit_pid[${system#nbdkit_}]}" >"$dir/${system}_cmp.json"
		fio_jobs "$dir" "$system" "$uri" ;;
	esac
}

systems=(rdax_native rdax_nbd nbdkit_memory nbdkit_file)
for r in $(seq "$rounds"); do
	dir=$raw/round$r
	mkdir -p "$dir"
	floors "$dir"
	n=${#systems[@]}
	for i in $(seq 0 $((n - 1))); do
		measure "$dir" "${systems[$(((i + r - 1) % n))]}"
	done
done

# --- many clients: N connections at once, each a client process of its own ------------
# multi SYSTEM N SHAPE -- N clients of SYSTEM run SHAPE together; one JSON each
multi() {
	local system=$1 n=$2 shape=$3 i cpids=()
	for i in $(seq 0 $((n - 1))); do
		case $system in
		rdax_native)
			client "$helpers/cmp_native" --url "tcp://127.0.0.1:$tcp_port" --volume "mc$i" \
				--seconds "$msecs" --shapes "$shape" --cpu "$client_cpu" \
				--server-pid "$rpid" >"$raw/multi/${system}_${shape}_${n}_$i.json" & ;;
		rdax_nbd)
			client "$helpers/cmp_nbd" --uri "nbd://127.0.0.1:$nbd_port/mc$i" \
				--seconds "$msecs" --shapes "$shape" --cpu "$client_cpu" \
				--server-pid "$rpid" >"$raw/multi/${system}_${shape}_${n}_$i.json" & ;;
		nbdkit_memory)
			client "$helpers/cmp_nbd" --uri "nbd://127.0.0.1:${nbdkit_port[memory]}" \
				--seconds "$msecs" --shapes "$shape" --cpu "$client_cpu" \
				--server-pid "${nbdkit_pid[memory]}" \
				>"$raw/multi/${system}_${shape}_${n}_$i.json" & ;;
		esac
		cpids+=("$!")
	done
	# a client that measured nothing (16 processes sharing one loaded CPU) fails
	# alone: the report counts the clients that ran
	for i in "${cpids[@]}"; do
		wait "$i" || log "many clients: $system, $n connections, $shape: a client failed"
	done
}
# each client's own measured window: longer than one client's, so that with 16 of
# them on one CPU every one completes requests inside it
msecs=$((secs + 2))
mkdir -p "$raw/multi"
head -1 /proc/stat >"$raw/multi/stat_start.txt"
for n in $multi_conns; do
	for system in rdax_native rdax_nbd nbdkit_memory; do
		[ "$system" != rdax_nbd ] || [ -n "$nbd_port" ] || continue
		for shape in qd32 rqd32; do
			log "many clients: $system, $n connections, $shape"
			multi "$system" "$n" "$shape"
		done
	done
done
head -1 /proc/stat >"$raw/multi/stat_end.txt"
cat /proc/loadavg >"$raw/multi/loadavg.txt"

placement "$rpid" rdaxd
placement "${nbdkit_pid[memory]}" nbdkit_memory
placement "${nbdkit_pid[file]}" nbdkit_file
for pid in "${pids[@]}"; do
	stop_pid "$pid"
done
pids=()
rm -f "$work/ns0" "$work/disk.img"
# CPU time the hypervisor took from this VM over the rounds (the report's steal figure)
head -1 /proc/stat >"$raw/stat_rounds_end.txt"

# --- callgrind: instructions per operation in each server (--callgrind) --------------
# Each server runs under valgrind's callgrind, pinned as before; the client runs
# exactly $cg_ops operations of a shape (plus a tenth as warm-up) between a
# zeroing and a dump of the counters, so every dump counts that shape alone
# (--no-flush: without the helper's untimed flush after the shape).
cg_server() {
	local name=$1 vpid shape uri
	shift
	taskset -c "$server_cpu" env PMEM_IS_PMEM_FORCE=1 valgrind --tool=callgrind \
		--callgrind-out-file="$raw/callgrind/$name.%p" \
		"$@" >"$work/cg.out" 2>"$raw/callgrind/$name.log" &
	vpid=$!
	pids+=("$vpid")
	echo "$vpid"
}

cg_measure() {
	local name=$1 vpid=$2 shape=$3
	shift 3
	callgrind_control -z "$vpid" >/dev/null
	client "$@" --ops "$cg_ops" --shapes "$shape" --no-flush \
		>"$raw/callgrind/${name}_$shape.json" 2>/dev/null
	callgrind_control -d "${name}_$shape" "$vpid" >/dev/null
}

if [ "$callgrind" = 1 ]; then
	mkdir -p "$raw/callgrind"
	log "callgrind: rdaxd, $cg_ops operations per shape"
	port=$(free_port)
	nport=$(free_port)
	vpid=$(cg_server rdaxd "$rdaxd" \
		--namespace "$work/cg-ns0,size=$(python3 "$here/report.py" nssize 256M),mode=auto" \
		--listen "tcp://127.0.0.1:$port" --listen "nbd://127.0.0.1:$nport" --threads 1 \
		--log-level warn)
	pids+=("$vpid")
	wait_for_port "$port"
	client "$helpers/cmp_native" --url "tcp://127.0.0.1:$port" --volume cmp --size 256M \
		--shapes none >/dev/null
	for shape in write durable qd32; do
		cg_measure rdax_native "$vpid" "$shape" "$helpers/cmp_native" \
			--url "tcp://127.0.0.1:$port" --volume cmp
		if listening "$nport"; then
			cg_measure rdax_nbd "$vpid" "$shape" "$helpers/cmp_nbd" \
				--uri "nbd://127.0.0.1:$nport/cmp"
		fi
	done
	stop_pid "$vpid"
	rm -f "$work/cg-ns0"
	log "callgrind: nbdkit memory, $cg_ops operations per shape"
	port=$(free_port)
	vpid=$(cg_server nbdkit_memory nbdkit -f -i 127.0.0.1 -p "$port" memory size=256M)
	pids+=("$vpid")
	wait_for_port "$port"
	client "$helpers/cmp_nbd" --uri "nbd://127.0.0.1:$port" --shapes none --prefill >/dev/null
	for shape in write durable qd32; do
		cg_measure nbdkit_memory "$vpid" "$shape" "$helpers/cmp_nbd" \
			--uri "nbd://127.0.0.1:$port"
	done
	stop_pid "$vpid"
	python3 "$here/report.py" callgrind --dir "$raw/callgrind" --ops "$cg_ops" \
		>"$raw/callgrind.json"
fi

# --- the fsync engine: tracked vs hammer -------------------------------------------
sizes=$engine_sizes
avail=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
if [[ $sizes == *8G* ]] && [ "$avail" -lt $((9 * 1024 * 1024)) ]; then
	sizes=${sizes/,8G/}
	skip engine_8g "only $((avail / 1024)) MiB free in $tmp_root, an 8 GiB volume needs 8.1 GiB"
fi
log "engine: fsync tracked vs hammer on $sizes"
taskset -c "$server_cpu" "$helpers/cmp_engine" --dir "$work" --sizes "$sizes" \
	--reps "$engine_reps" --cpu "$server_cpu" >"$raw/engine.json"

cat /proc/loadavg >"$raw/loadavg_end.txt"

# --- the report ------------------------------------------------------------------
log "report: $out/report.md"
python3 "$here/report.py" report --raw "$raw" --out "$out" --plots "$here/plots"
log "done: $out/report.md"
