#!/bin/bash
# guest-bench.sh BUILD_DIR -- inside the VM (run-bench.sh): perftest and rdax on rxe0, ratios
set -euo pipefail
build=$1
ip=${RDAX_VM_IP:?not in the VM}
lat_iters=${BENCH_LAT_ITERS:-300}
bw_iters=${BENCH_BW_ITERS:-400}

# pair SERVER_CMD CLIENT_CMD -- a perftest server and its client; the client's output
pair() {
	$1 >/tmp/perf-server.log 2>&1 &
	local s=$! i
	for i in $(seq 1 30); do
		sleep 1
		if $2 >/tmp/perf-client.log 2>&1; then
			wait $s || true
			cat /tmp/perf-client.log
			return 0
		fi
		kill -0 $s 2>/dev/null || break
	done
	kill $s 2>/dev/null || true
	echo "perftest failed:" >&2
	cat /tmp/perf-server.log /tmp/perf-client.log >&2
	return 1
}

# column N of perftest's result line (the line after the "#bytes" header)
col() { awk -v n="$1" 'f && NF > 3 { print $n; exit } /#bytes/ { f = 1 }'; }

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

echo "== rdax over rdma:// (rdaxd on /dev/dax0.0)"
"$build/daemon/rdaxd" --format /dev/dax0.0 --force >/dev/null
"$build/daemon/rdaxd" --namespace /dev/dax0.0 --listen "rdma://$ip:7471" \
	--log-level warn >/tmp/rdaxd.out 2>/tmp/rdaxd.log &
d=$!
for i in $(seq 1 120); do grep -q "rdaxd: ready" /tmp/rdaxd.out && break; sleep 0.5; done
grep "rdaxd: ready" /tmp/rdaxd.out
"$build/tests/rdma/bench_rdma" --url "rdma://$ip:7471" --lat-iters "$lat_iters" \
	--bw-mib "${BENCH_BW_MIB:-48}" --depth 16 | tee /tmp/bench.out
kill -TERM $d && wait $d

echo "== the same, rdaxd --rdma-busy-poll 20000 and a busy-polling client"
"$build/daemon/rdaxd" --namespace /dev/dax0.0 --listen "rdma://$ip:7471" \
	--rdma-busy-poll 20000 --log-level warn >/tmp/rdaxd.out 2>/tmp/rdaxd.log &
d=$!
for i in $(seq 1 120); do grep -q "rdaxd: ready" /tmp/rdaxd.out && break; sleep 0.5; done
grep "rdaxd: ready" /tmp/rdaxd.out
"$build/tests/rdma/bench_rdma" --url "rdma://$ip:7471" --lat-iters "$lat_iters" --only-poll |
	sed 's/_poll_/_spin_both_/' | tee -a /tmp/bench.out
kill -TERM $d && wait $d
val() { awk -v k="$1" '$1 == k { print $2 }' /tmp/bench.out; }
rl=$(val rdax_write_fsync_4k_median_us)
rw=$(val rdax_write_4k_median_us)
rb=$(val rdax_write_64k_bw_MiBps)
rs=$(val rdax_stat_rpc_median_us)
rf=$(val rdax_fsync_clean_median_us)
rlp=$(val rdax_write_fsync_4k_poll_median_us)
rsp=$(val rdax_stat_rpc_poll_median_us)
rlb=$(val rdax_write_fsync_4k_spin_both_median_us)
rsb=$(val rdax_stat_rpc_spin_both_median_us)

echo "== ratios (under emulation only these mean anything)"
awk -v rl="$rl" -v rw="$rw" -v rb="$rb" -v wl="$wl" -v sl="$sl" -v wb="$wb" -v se="$se" \
	-v rs="$rs" -v rf="$rf" -v rlp="$rlp" -v rsp="$rsp" -v rlb="$rlb" -v rsb="$rsb" 'BEGIN {
	# perftest latencies are half round trips: one way. A write+fsync is the 4 KiB
	# write and the FSYNC request going one way, the reply coming back.
	printf "4 KiB write+fsync: rdax %.0f us vs ib_write_lat + ib_send_lat = %.0f us: ratio %.2f\n", rl, wl + sl, rl / (wl + sl)
	printf "   (its structural floor, ib_write_lat + 2 x ib_send_lat = %.0f us: ratio %.2f)\n", wl + 2 * sl, rl / (wl + 2 * sl)
	printf "4 KiB write alone: rdax %.0f us vs 2 x ib_write_lat %.0f us: ratio %.2f\n", rw, 2 * wl, rw / (2 * wl)
	printf "where a write+fsync goes (medians, us):\n"
	printf "   request round trip (STAT): rdax %.0f vs ib_send_lat x 2 = %.0f (ratio %.2f), vs ib_send_lat -e x 2 = %.0f (ratio %.2f)\n", rs, 2 * sl, rs / (2 * sl), 2 * se, rs / (2 * se)
	printf "   fsync with nothing to write back: %.0f (the round trip + %.0f)\n", rf, rf - rs
	printf "   write+fsync: %.0f (the clean fsync + %.0f)\n", rl, rl - rf
	printf "with a busy-polling client (rdax_conn_opts_set_busy_poll; the daemon still sleeps):\n"
	printf "   4 KiB write+fsync: rdax %.0f us vs ib_write_lat + ib_send_lat = %.0f us: ratio %.2f\n", rlp, wl + sl, rlp / (wl + sl)
	printf "   request round trip (STAT): rdax %.0f vs ib_send_lat x 2 = %.0f (ratio %.2f)\n", rsp, 2 * sl, rsp / (2 * sl)
	printf "with the daemon busy-polling too (--rdma-busy-poll), as perftest does:\n"
	printf "   4 KiB write+fsync: rdax %.0f us vs ib_write_lat + ib_send_lat = %.0f us: ratio %.2f\n", rlb, wl + sl, rlb / (wl + sl)
	printf "   request round trip (STAT): rdax %.0f vs ib_send_lat x 2 = %.0f (ratio %.2f)\n", rsb, 2 * sl, rsb / (2 * sl)
	printf "64 KiB write bandwidth: rdax %.1f MiB/s vs ib_write_bw %.1f MiB/s: ratio %.2f\n", rb, wb, rb / wb
}'
