#!/bin/bash
# fault-sweep.sh -- fail every fault point of rdaxd in turn under a client scenario
#
#   tests/fault/fault-sweep.sh [--build-dir DIR] [--every K] [--from N] [--to N]
#                              [--work-dir DIR] [--keep] [--control] [--mode sim|auto]
#
# rdaxd-fault (tests/fault/CMakeLists.txt) counts the fallible calls it
# makes -- allocations, sockets, files and mappings, threads, event loops,
# protobuf unpacks (fault_wrap.c) -- and with RDAX_FAULT_AT=N fails the Nth
# (common/faults.h). For each N this script starts it on a fresh namespace
# (--mode: sim, the default, or auto, where the namespace is mapped with
# pmem_map_file) with native and NBD listeners and runs a scenario with the real
# clients (rdax, nbdsh): create, durable and plain writes, read, fsync,
# discard, stat, list, info, a second volume created and deleted, an NBD
# write + flush + read; then SIGTERM. A point passes when:
#   - at start: the daemon exits non-zero with an error message;
#   - later: every request is answered (an error is fine, silence is not:
#     each client gives up after 20 s) and nothing a client read back with
#     success differs from what was written; the daemon stops on SIGTERM;
#   - always: no sanitizer report (AddressSanitizer, LeakSanitizer, UBSan)
#     and no crash;
#   - afterwards: a restart without faults reads back every write that was
#     acknowledged as durable (an fsync or flush that succeeded).
# The sweep goes from --from (1) until a run reaches fewer than N points (the
# baseline count is printed first), taking every K-th point (--every, 1: all;
# the suite's sample, fault_sweep_sample, takes every 25th). Exit 0 after
# "fault sweep: N points, all clean", 1 when a point failed (its logs are
# kept under the work directory and named), 2 on a usage or harness error.
#
# --control first runs the scenario twice against daemons broken on purpose
# (common/faults.h): RDAX_FAULTS=leak-per-request must be reported as a
# sanitizer (leak) report, RDAX_FAULTS=skip-writeback as acknowledged data
# lost after the restart; if either goes unnoticed the sweep proves
# nothing and stops with exit 3.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/build-test
every=1
from=1
to=0
work=
keep=0
control=0
mode=sim
while [ $# -gt 0 ]; do
	case $1 in
	--build-dir) build=$2; shift 2 ;;
	--every) every=$2; shift 2 ;;
	--from) from=$2; shift 2 ;;
	--to) to=$2; shift 2 ;;
	--work-dir) work=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--control) control=1; shift ;;
	--mode) mode=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "fault-sweep: unknown argument '$1' (--help)" >&2; exit 2 ;;
	esac
done
daemon=$build/tests/fault/rdaxd-fault
rdax=$build/client/rdax
for f in "$daemon" "$rdax"; do
	[ -x "$f" ] || { echo "fault-sweep: $f missing (build the tree first)" >&2; exit 2; }
done
command -v nbdsh >/dev/null || { echo "fault-sweep: nbdsh missing (libnbd-bin)" >&2; exit 2; }
# nbdsh runs "python3 -m nbd": Debian's python3, where python3-libnbd installs the module
nbdsh_path=/usr/bin:/bin:$PATH
work=${work:-$(mktemp -d "${TMPDIR:-/tmp}/rdax-fault-sweep-XXXXXX")}
mkdir -p "$work"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
SAN_RE='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer'

dpid=
# start_daemon LOG [env...] -- start rdaxd-fault on $ns; sets dpid, tcp, nbd; 0 ready, 1 exited
start_daemon() {
	local log=$1
	shift
	: >"$log" # before the daemon's shell opens it: the wait below reads it at once
	env "$@" "$daemon" --namespace "$ns,size=16M,mode=$mode" --listen tcp://127.0.0.1:0 \
		--listen nbd://127.0.0.1:0 --threads 2 >"$log" 2>&1 &
	dpid=$!
	local i
	for i in $(seq 1 600); do
		if grep -q 'rdaxd: ready on' "$log"; then
			tcp=$(sed -n 's/.*rdaxd: ready on \(tcp:[^,]*\), .*/\1/p' "$log" | head -1)
			nbd=$(sed -n 's/.*rdaxd: ready on [^,]*, \(nbd:[^ ]*\) .*/\1/p' "$log" | head -1)
			return 0
		fi
		if ! kill -0 "$dpid" 2>/dev/null; then
			return 1
		fi
		sleep 0.1
	done
	echo "daemon did not become ready in 60 s" >>"$log"
	return 2
}

# stop_daemon -- SIGTERM, wait up to 40 s (the drain takes at most 10); sets st (status or "hang")
stop_daemon() {
	kill -TERM "$dpid" 2>/dev/null
	local i
	for i in $(seq 1 400); do
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$dpid" 2>/dev/null; then
		kill -KILL "$dpid" 2>/dev/null
		wait "$dpid" 2>/dev/null
		st=hang
		return
	fi
	wait "$dpid"
	st=$?
}

# cli ARGS... -- one rdax call against the daemon, bounded; its exit status
cli() {
	timeout 30 "$rdax" --server "$tcp" --timeout 20 "$@" >>"$out" 2>&1
}

# cli_to FILE ARGS... -- the same, its output into FILE (a read)
cli_to() {
	local file=$1
	shift
	timeout 30 "$rdax" --server "$tcp" --timeout 20 "$@" >"$file" 2>>"$out"
}

fail() {
	echo "FAIL point $n: $*" | tee -a "$work/failures"
	failed=1
}

# scenario -- the clients' requests; records what was acknowledged durable in $acked
scenario() {
	local a=$work/a.bin b=$work/b.bin c=$work/c.bin got=$work/got.bin rc
	head -c 65536 /dev/urandom >"$a"
	head -c 8192 /dev/urandom >"$b"
	head -c 4096 /dev/urandom >"$c"
	: >"$acked"
	cli volume create v 1M
	local a_ok=0
	cli write v 0 --fsync <"$a" && echo "v 0 $a" >>"$acked" && a_ok=1
	# only an acknowledged write must read back (a refused one may have landed or not)
	if [ $a_ok -eq 1 ] && cli_to "$got" read v 0 64K; then
		cmp -s "$got" "$a" || fail "read returned other bytes than the acknowledged write"
	fi
	cli stat v
	cli volume list
	cli volume info v
	cli write v 65536 <"$b" && cli fsync v && echo "v 65536 $b" >>"$acked"
	if cli discard v 0 4K; then
		# the first 4 KiB are zeros now; durable with the discard's reply
		sed -i '/^v 0 /d' "$acked"
		head -c 4096 /dev/zero >"$work/z.bin"
		tail -c +4097 "$a" >"$work/a2.bin"
		echo "v 0 $work/z.bin" >>"$acked"
		[ $a_ok -eq 0 ] || echo "v 4096 $work/a2.bin" >>"$acked"
	fi
	cli volume create w 64K
	cli volume delete w
	rc=0
	PATH=$nbdsh_path timeout 30 nbdsh -u "$nbd/v" -c "
import os
buf = open('$c', 'rb').read()
h.pwrite(buf, 131072)
h.flush()
print('FLUSHED', flush=True)
assert h.pread(4096, 131072) == buf, 'NBD read returned other bytes'
" >>"$out" 2>&1 || rc=$?
	grep -q FLUSHED "$out" && echo "v 131072 $c" >>"$acked"
	grep -q "NBD read returned other bytes" "$out" && fail "NBD read returned other bytes"
	[ $rc -eq 124 ] && fail "NBD client got no answer in 30 s"
	grep -q "timed out\|no reply" "$out" && fail "a request got no answer"
}

# verify -- a fault-free restart reads back every acknowledged durable write
verify() {
	local log=$1 name off file len
	start_daemon "$log" || { fail "restart without faults failed"; return; }
	while read -r name off file; do
		len=$(stat -c %s "$file")
		if ! cli_to "$work/back.bin" read "$name" "$off" "$len" ||
			! cmp -s "$work/back.bin" "$file"; then
			fail "acknowledged data lost: $name at $off ($len bytes)"
		fi
	done <"$acked"
	stop_daemon
	[ "$st" = 0 ] || fail "fault-free restart ended with $st"
	grep -Eq "$SAN_RE" "$log" && fail "sanitizer report in the fault-free restart ($log)"
}

ns=$work/ns
acked=$work/acked
out=$work/base.out
echo "fault sweep: baseline run (no fault) in $work"
rm -f "$ns"
start_daemon "$work/base.log" RDAX_FAULT_REPORT=1 || { cat "$work/base.log" >&2; exit 2; }
n=0
failed=0
scenario
stop_daemon
total=$(sed -n 's/^fault points reached: //p' "$work/base.log" | tail -1)
if ! grep -q FLUSHED "$out"; then
	echo "fault-sweep: the baseline's NBD client did not run; see $out" >&2
	exit 2
fi
if [ "$st" != 0 ] || [ -z "$total" ] || [ $failed -ne 0 ]; then
	echo "fault-sweep: the baseline failed (exit $st); see $work/base.log $work/base.out" >&2
	exit 2
fi
echo "fault sweep: the baseline reaches $total points; failing every ${every}th from $from"
[ "$to" -gt 0 ] || to=$((total + 50))

# control NAME FAULT PATTERN -- the scenario against a broken daemon must fail with PATTERN
control_run() {
	local name=$1 fault=$2 pattern=$3
	failed=0
	n=control-$name
	log=$work/control-$name.log
	out=$work/control-$name.out
	: >"$out"
	rm -f "$ns"
	start_daemon "$log" RDAX_FAULTS="$fault" || { echo "fault-sweep: control $name did not start" >&2; exit 2; }
	scenario
	stop_daemon
	grep -Eq "$SAN_RE" "$log" && fail "sanitizer report ($log)"
	verify "$work/control-$name.verify.log"
	if grep -q "$pattern" "$work/failures" 2>/dev/null; then
		echo "fault sweep: control $name PASSED: $pattern"
	else
		echo "fault sweep: control $name FAILED: RDAX_FAULTS=$fault went unnoticed" >&2
		exit 3
	fi
	rm -f "$work/failures"
}
if [ $control -eq 1 ]; then
	control_run leak leak-per-request "sanitizer report"
	control_run writeback skip-writeback "acknowledged data lost"
fi

points=0
n=$from
while [ "$n" -le "$to" ]; do
	failed=0
	log=$work/point-$n.log
	out=$work/point-$n.out
	: >"$out"
	rm -f "$ns"
	start_daemon "$log" RDAX_FAULT_AT=$n RDAX_FAULT_REPORT=1
	started=$?
	what=$(sed -n 's/^fault injected: point [0-9]*, \(.*\) fails/\1/p' "$log" | head -1)
	if [ $started -eq 1 ]; then
		wait "$dpid"
		st=$?
		if ! grep -q '^fault injected' "$log"; then
			fail "the daemon did not start, and not because of the fault ($log)"
		elif [ $st -eq 0 ]; then
			fail "start failed at $what but the daemon exited 0 ($log)"
		elif [ $st -gt 128 ]; then
			fail "start failed at $what and the daemon died of signal $((st - 128)) ($log)"
		elif ! grep -q '<3>error\|rdaxd: ' "$log"; then
			fail "start failed at $what without an error message ($log)"
		fi
		grep -Eq "$SAN_RE" "$log" && fail "sanitizer report after $what failed at start ($log)"
		result="start refused"
	elif [ $started -eq 2 ]; then
		stop_daemon
		fail "the daemon hung at start after $what failed ($log)"
		result=hang
	else
		scenario
		stop_daemon
		[ "$st" = hang ] && fail "no exit within 40 s of SIGTERM after $what failed ($log)"
		[ "$st" != hang ] && [ "$st" -gt 128 ] && fail "the daemon died of signal $((st - 128)) ($log)"
		grep -Eq "$SAN_RE" "$log" && fail "sanitizer report after $what failed ($log)"
		verify "$work/point-$n.verify.log"
		result="served"
	fi
	what=$(sed -n 's/^fault injected: point [0-9]*, \(.*\) fails/\1/p' "$log" | head -1)
	reached=$(sed -n 's/^fault points reached: //p' "$log" | tail -1)
	if [ -z "$what" ] && [ -n "$reached" ] && [ "$reached" -lt "$n" ]; then
		echo "fault sweep: point $n not reached ($reached points): the end"
		break
	fi
	points=$((points + 1))
	printf 'point %d: %s -> %s%s\n' "$n" "${what:-not reached}" "$result" \
		"$([ $failed -ne 0 ] && echo ' FAILED')"
	if [ $failed -eq 0 ] && [ $keep -eq 0 ]; then
		rm -f "$log" "$out" "$work/point-$n.verify.log"
	fi
	n=$((n + every))
done
if [ -s "$work/failures" ]; then
	echo "fault sweep: $(wc -l <"$work/failures") failures in $points points; logs in $work" >&2
	exit 1
fi
[ $keep -eq 1 ] || rm -rf "$work"
echo "fault sweep: $points points, all clean"
