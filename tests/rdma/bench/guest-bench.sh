#!/bin/bash
# guest-bench.sh BUILD_DIR -- inside the VM (run-bench.sh): perftest and rdax on rxe0, ratios
set -euo pipefail
build=$1
ip=${RDAX_VM_IP:?not in the VM}
lat_iters=${BENCH_LAT_ITERS:-300}
bw_iters=${BENCH_BW_ITERS:-400}
# rdax's 64 KiB writes in flight (ib_write_bw keeps its default of 128)
bw_depth=${BENCH_BW_DEPTH:-16}
# BENCH_PIN=1: every server (perftest's, rdaxd) on CPU 1, every client on CPU 0
srv= cli=
if [ -n "${BENCH_PIN:-}" ]; then srv="taskset -c 1" cli="taskset -c 0"; fi

# pair SERVER_CMD CLIENT_CMD -- a perftest server and its client; the client's output
pair() {
	$srv $1 >/tmp/perf-server.log 2>&1 &
	local s=$! i
	for i in $(seq 1 30); do
		sleep 1
		# bounded: a client of a server in a bad state (after a client crashed) can hang
		if timeout 120 $cli $2 >/tmp/perf-client.log 2>&1; then
			wait $s || true
			cat /tmp/perf-client.log
			return 0
		fi
		kill -0 $s 2>/dev/null || break
	done
	kill $s 2>/dev/null || true
	wait $s 2>/dev/null || true
	echo "perftest failed:" >&2
	cat /tmp/perf-server.log /tmp/perf-client.log >&2
	return 1
}

# column N of perftest's result line (the line after the "#bytes" header)
col() { awk -v n="$1" 'f && NF > 3 { print $n; exit } /#bytes/ { f = 1 }'; }

# every clock read of rdaxd, librdax and libev goes through it (perftest reads the TSC itself)
echo "guest clock source: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
echo "== perftest on rxe0 ($ip), same boot"
wl=$(pair "ib_write_lat -d rxe0 -R -s 4096 -n $lat_iters" \
	"ib_write_lat -d rxe0 -R -s 4096 -n $lat_iters $ip" | col 5)
sl=$(pair "ib_send_lat -d rxe0 -R -s 64 -n $lat_iters" \
	"ib_send_lat -d rxe0 -R -s 64 -n $lat_iters $ip" | col 5)
# the same SEND round trip with both sides sleeping on completion events, as
# rdaxd and librdax do (perftest polls by default): the event-driven floor
se=$(pair "ib_send_lat -d rxe0 -R -e -s 64 -n $lat_iters" \
	"ib_send_lat -d rxe0 -R -e -s 64 -n $lat_iters $ip" | col 5)
wb=$(pair "ib_write_bw -d rxe0 -R -s 65536 -n $bw_iters" \
	"ib_write_bw -d rxe0 -R -s 65536 -n $bw_iters $ip" | col 4)
echo "ib_write_lat 4096 B: t_typical $wl us (half a round trip)"
echo "ib_send_lat 64 B:    t_typical $sl us (half a round trip)"
echo "ib_send_lat -e 64 B: t_typical $se us (half a round trip, sleeping on events)"
echo "ib_write_bw 65536 B: $wb MiB/s"

# daemon_start [RDAXD_ARGS] -- rdaxd on /dev/dax0.0, its pid in $d, once it is ready
daemon_start() {
	$srv "$build/daemon/rdaxd" --namespace /dev/dax0.0 --listen "rdma://$ip:7471" ${1:-} \
		--log-level warn >/tmp/rdaxd.out 2>/tmp/rdaxd.log &
	d=$!
	for i in $(seq 1 120); do grep -q "rdaxd: ready" /tmp/rdaxd.out && break; sleep 0.5; done
}

# rdax_run TAG RDAXD_ARGS BENCH_ARGS -- rdaxd on /dev/dax0.0 with RDAXD_ARGS, bench_rdma
# with BENCH_ARGS against it, names tagged TAG, the daemon's CPU measured too
rdax_run() {
	daemon_start "$2"
	grep "rdaxd: ready" /tmp/rdaxd.out
	$cli "$build/tests/rdma/bench_rdma" --url "rdma://$ip:7471" --lat-iters "$lat_iters" \
		--bw-mib "${BENCH_BW_MIB:-48}" --depth "$bw_depth" --daemon-pid $d --tag "$1" $3 |
		tee -a /tmp/bench.out
	kill -TERM $d && wait $d
}

"$build/daemon/rdaxd" --format /dev/dax0.0 --force >/dev/null
: >/tmp/bench.out
echo "== rdax over rdma:// (rdaxd on /dev/dax0.0), both sides' defaults: adaptive polling"
rdax_run default "" ""
echo "== the same, both sides sleeping at once (--rdma-busy-poll 0, client 0)"
rdax_run sleep "--rdma-busy-poll 0" "--busy-poll 0 --latency-only"
echo "== the same, adaptive polling with a 5 ms cap on both sides (round trips here are ~0.1-1 ms)"
rdax_run cap5ms "--rdma-busy-poll 5000" "--busy-poll 5000 --latency-only"
wb2=$(pair "ib_write_bw -d rxe0 -R -s 65536 -n $bw_iters" \
	"ib_write_bw -d rxe0 -R -s 65536 -n $bw_iters $ip" | col 4)
echo "ib_write_bw 65536 B, again after rdax: $wb2 MiB/s"

# bandwidth in turns: ib_write_bw and rdax's one-sided writes one after the
# other, three times, so both see the same moments of the machine (one
# figure each, minutes apart, moved by 0.85-1.3x between boots)
echo "== 64 KiB write bandwidth in turns: ib_write_bw, then rdax (defaults: copied through librdax's bounce ring), then rdax from a registered buffer (rdax_buffer_alloc), three times"
daemon_start
for turn in 1 2 3; do
	# a perftest that cannot connect (its server late under load) loses its turn, not the run
	b=$(pair "ib_write_bw -d rxe0 -R -s 65536 -n $bw_iters" \
		"ib_write_bw -d rxe0 -R -s 65536 -n $bw_iters $ip" | col 4) || b=
	[ -n "$b" ] && echo "ib_write_bw_turn$turn $b" | tee -a /tmp/bench.out
	reuse=--reuse
	[ $turn = 1 ] && reuse=
	sleep 1 # as pair() gives perftest: the last run's teardown is not measured
	$cli "$build/tests/rdma/bench_rdma" --url "rdma://$ip:7471" --bw-mib "${BENCH_BW_MIB:-48}" \
		--depth "$bw_depth" --bandwidth-only --keep-volume $reuse --tag "turn$turn" | tee -a /tmp/bench.out
	sleep 1
	$cli "$build/tests/rdma/bench_rdma" --url "rdma://$ip:7471" --bw-mib "${BENCH_BW_MIB:-48}" \
		--depth "$bw_depth" --bandwidth-only --keep-volume --reuse --registered \
		--tag "regturn$turn" | tee -a /tmp/bench.out
done
kill -TERM $d && wait $d

# latency in turns: perftest's write and send latencies and rdax's
# write+fsync with both sides' defaults, five times; perftest's own figures
# moved from 99 to 158 us between boots of the same day, so a ratio is only
# as good as the moment both were taken in. Whoever runs second in a turn
# runs right after the other, so the order swaps every turn.
lat_turns=${BENCH_LAT_TURNS:-5}
echo "== 4 KiB write+fsync latency in turns: ib_write_lat + ib_send_lat and rdax (defaults), the order swapped each turn, $lat_turns times"
# perftest_turn N / rdax_turn N -- one turn's figures of each
perftest_turn() {
	local w l
	w=$(pair "ib_write_lat -d rxe0 -R -s 4096 -n $lat_iters" \
		"ib_write_lat -d rxe0 -R -s 4096 -n $lat_iters $ip" | col 5) || w=
	l=$(pair "ib_send_lat -d rxe0 -R -s 64 -n $lat_iters" \
		"ib_send_lat -d rxe0 -R -s 64 -n $lat_iters $ip" | col 5) || l=
	[ -n "$w" ] && [ -n "$l" ] && printf 'ib_write_lat_turn%s %s\nib_send_lat_turn%s %s\n' \
		"$1" "$w" "$1" "$l" | tee -a /tmp/bench.out
	return 0
}
rdax_turn() {
	sleep 1 # as pair() gives perftest: the last run's teardown is not measured
	$cli "$build/tests/rdma/bench_rdma" --url "rdma://$ip:7471" --lat-iters "$lat_iters" \
		--latency-only --keep-volume --reuse --tag "lturn$1" | tee -a /tmp/bench.out
}
daemon_start
for turn in $(seq 1 "$lat_turns"); do
	if [ $((turn % 2)) = 1 ]; then
		perftest_turn $turn
		rdax_turn $turn
	else
		rdax_turn $turn
		perftest_turn $turn
	fi
done
kill -TERM $d && wait $d

# where the time goes: perf in this VM (no hardware counters under TCG: cpu-clock
# samples), the daemon and the client sleeping (what they execute per request, not
# their spinning) and both spinning (what is left); context switches per operation
if command -v perf >/dev/null && [ -z "${BENCH_NO_PROFILE:-}" ]; then
	for mode in sleep cap5ms; do
		case $mode in
		sleep) da="--rdma-busy-poll 0" ca="--busy-poll 0" ;;
		cap5ms) da="--rdma-busy-poll 5000" ca="--busy-poll 5000" ;;
		esac
		daemon_start "$da"
		# the volume first: creating it zeroes it all, which is no request's cost
		$cli "$build/tests/rdma/bench_rdma" --url "rdma://$ip:7471" --lat-iters 5 --latency-only \
			--keep-volume $ca >/dev/null
		perf record -q -e cpu-clock -F 4000 -g -o /tmp/perf-daemon-$mode.data -p $d \
			2>/tmp/perf-rec.log &
		pr=$!
		perf stat -e context-switches,cpu-clock -p $d -o /tmp/perf-stat-$mode.txt &
		ps_=$!
		sleep 1
		perf record -q -e cpu-clock -F 4000 -g -o /tmp/perf-client-$mode.data \
			$cli "$build/tests/rdma/bench_rdma" --url "rdma://$ip:7471" --lat-iters "$lat_iters" \
			--latency-only --reuse --tag "prof_$mode" $ca >/tmp/bench-prof.out 2>&1 || true
		kill -INT $pr $ps_ 2>/dev/null || true
		wait $pr $ps_ 2>/dev/null || true
		kill -TERM $d && wait $d
		ops=$((3 * lat_iters + 20))
		echo "== profile, $mode: rdaxd ($ops requests; perf stat of the daemon)"
		grep -E "context-switches|cpu-clock" /tmp/perf-stat-$mode.txt |
			awk -v n=$ops '{ gsub(",", "", $1); printf "   %s: %s (%.2f per request)\n", $2, $1, $1 / n }'
		perf report -i /tmp/perf-daemon-$mode.data --stdio --no-children --sort dso,symbol \
			-g none --percent-limit 1.5 2>/dev/null | grep -E "^ +[0-9]" | head -25
		echo "== profile, $mode: bench_rdma (the client)"
		perf report -i /tmp/perf-client-$mode.data --stdio --no-children --sort dso,symbol \
			-g none --percent-limit 1.5 2>/dev/null | grep -E "^ +[0-9]" | head -25
		cp /tmp/perf-*-$mode.data "$PWD/" 2>/dev/null || true
	done
fi

val() { awk -v k="$1" '$1 == k { print $2 }' /tmp/bench.out; }
echo "== ratios (under emulation only these mean anything)"
echo "default spin cap (auto): $(val auto_cap_us_default) us, ten wake-ups of $(val host_wake_us_default) us measured here"
for t in default sleep cap5ms; do
	rl=$(val rdax_write_fsync_4k_${t}_median_us)
	rs=$(val rdax_stat_rpc_${t}_median_us)
	rf=$(val rdax_fsync_clean_${t}_median_us)
	cc=$(val rdax_write_fsync_4k_${t}_client_cpu_share)
	dc=$(val rdax_write_fsync_4k_${t}_daemon_cpu_share)
	ccu=$(val rdax_write_fsync_4k_${t}_client_cpu_us)
	dcu=$(val rdax_write_fsync_4k_${t}_daemon_cpu_us)
	awk -v t="$t" -v rl="$rl" -v rs="$rs" -v rf="$rf" -v wl="$wl" -v sl="$sl" -v se="$se" \
		-v cc="$cc" -v dc="$dc" -v ccu="$ccu" -v dcu="$dcu" 'BEGIN {
	printf "%s:\n", t
	# perftest latencies are half round trips: one way. A write+fsync is the 4 KiB
	# write going one way, its durable notice the request, and the reply coming
	# back: the reference is also its structural floor (with an FSYNC request of
	# its own, as before durable notices, the floor was ib_write_lat + 2 x ib_send_lat).
	printf "   4 KiB write+fsync: rdax %.0f us vs ib_write_lat + ib_send_lat = %.0f us: ratio %.2f (the floor of a write, its notice the request, and the reply)\n", rl, wl + sl, rl / (wl + sl)
	printf "   its CPU: client %.0f us per write+fsync (%.0f%% of a CPU), daemon %.0f us (%.0f%%)\n", ccu, 100 * cc, dcu, 100 * dc
	printf "   request round trip (STAT): rdax %.0f vs 2 x ib_send_lat = %.0f (ratio %.2f), vs 2 x ib_send_lat -e = %.0f (ratio %.2f)\n", rs, 2 * sl, rs / (2 * sl), 2 * se, rs / (2 * se)
	printf "   fsync with nothing to write back: %.0f (the round trip + %.0f); write+fsync: the clean fsync + %.0f\n", rf, rf - rs, rl - rf
	}'
done
rw=$(val rdax_write_4k_default_median_us)
rb=$(val rdax_write_64k_bw_default_MiBps)
rd=$(val rdax_write_64k_durable_bw_default_MiBps)
awk -v rw="$rw" -v rb="$rb" -v rd="$rd" -v wl="$wl" -v wb="$wb" -v wb2="$wb2" 'BEGIN {
	printf "4 KiB write alone (default): rdax %.0f us vs 2 x ib_write_lat %.0f us: ratio %.2f\n", rw, 2 * wl, rw / (2 * wl)
	printf "64 KiB write bandwidth (default): rdax %.1f MiB/s vs ib_write_bw %.1f (before) and %.1f MiB/s (after): ratios %.2f and %.2f\n", rb, wb, wb2, rb / wb, rb / wb2
	printf "   with the fsync that makes them durable: rdax %.1f MiB/s (%.2f of the writes alone)\n", rd, rd / rb
}'
# bw_turns PREFIX WHAT -- the bandwidth turns of rdax's runs tagged PREFIXturnN against ib_write_bw's
bw_turns() {
	for turn in 1 2 3; do
		p=$(val ib_write_bw_turn$turn)
		r=$(val rdax_write_64k_bw_${1}turn${turn}_MiBps)
		[ -n "$p" ] && [ -n "$r" ] && echo "$p $r"
	done | awk -v what="$2" '{ n++; p[n] = $1; r[n] = $2; q[n] = $2 / $1 }
	END {
		if (n == 0) { printf "64 KiB write bandwidth in turns, %s: no complete turn\n", what; exit }
		printf "64 KiB write bandwidth in turns, %s (%d complete):", what, n
		for (i = 1; i <= n; i++) printf " ib_write_bw %.1f, rdax %.1f MiB/s (%.2f);", p[i], r[i], q[i]
		# the median turn by ratio
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (q[j] < q[i]) { t = q[i]; q[i] = q[j]; q[j] = t }
		printf "\n   median ratio %.2f\n", q[int((n + 1) / 2)]
	}'
}
bw_turns "" "copied (any memory)"
bw_turns reg "from a registered buffer (rdax_buffer_alloc)"
for turn in $(seq 1 "$lat_turns"); do
	w=$(val ib_write_lat_turn$turn)
	l=$(val ib_send_lat_turn$turn)
	r=$(val rdax_write_fsync_4k_lturn${turn}_median_us)
	[ -n "$w" ] && [ -n "$l" ] && [ -n "$r" ] && echo "$w $l $r"
done | awk '{ n++; f[n] = $1 + $2; r[n] = $3; q[n] = $3 / ($1 + $2) }
END {
	if (n == 0) { print "4 KiB write+fsync in turns: no complete turn"; exit }
	printf "4 KiB write+fsync in turns (%d complete):", n
	for (i = 1; i <= n; i++) printf " perftest %.0f, rdax %.0f us (%.2f);", f[i], r[i], q[i]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (q[j] < q[i]) { t = q[i]; q[i] = q[j]; q[j] = t }
	printf "\n   median ratio %.2f (rdax vs ib_write_lat + ib_send_lat of the same turn)\n", q[int((n + 1) / 2)]
}'
