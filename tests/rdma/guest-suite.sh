#!/bin/bash
# guest-suite.sh LOG_DIR NAME=PATH... -- every RDMA check, inside the VM (run by vm-suite.sh)
#
# The VM boots with an fsdax NVDIMM (ext4 -o dax on /mnt/pmem), so:
#  1. the fsdax refusal: an rdma:// listener over a namespace file on
#     /mnt/pmem must not start, and say why (devdax); the same namespace
#     over tcp:// only does start (the control).
#  2. sim mode on an emulated file namespace (files in the VM's /tmp):
#     the one-sided tests, the integration and bad-input suites over
#     rdma://, the power cut with one-sided writes and its control;
#     `rdax powercut` with one-sided writes in flight and its controls;
#     the write log of one-sided writes against a real cut, and its control;
#     the third persistence example: ext4 on an rdax volume through the
#     kernel's NBD client, every crash state of its run checked by e2fsck,
#     and its control (no journal); librdax's resume over rdma:// (it_resume:
#     one-sided writes in flight across a clean restart and a kill -9, new
#     windows and the old rkeys dead, the fsync over lost writes -EIO and
#     its control client-no-verifier).
#  3. the NVDIMM becomes devdax (ndctl) and the one-sided tests, the
#     integration and bad-input suites run again against /dev/dax0.0
#     (auto mode: CLWB + SFENCE).
#  Before and after 3, rdax namespace list and the metrics name the kind
#  (fsdax, devdax) and what the emulated device says of its health.
#  4. cluster_rdma: tests/cluster's cluster_e2e with etcd (the host's, run in
#     the VM) and three rdaxd nodes on rxe0's address, on ports: a volume
#     replicated over RDMA links (one-sided writes into the replicas), the
#     checker through the primary, a replica killed and stopped, their
#     resyncs, volume info's link "rdma", the fence on the links' windows,
#     and the controls repl-ack-early and replica-no-fence.
#  5. cluster_follow_rdma (test_rdma_follow, the same kind of cluster): an
#     rdma:// client follows the primary through a kill -9 and a SIGSTOP past
#     the lease (new windows on the new primary, every acknowledged block
#     read back); a deposed primary's client window is dead. Its control,
#     cluster_follow_rdma_control (client-window-keep, must be caught), runs
#     only when named in RDMA_SUITE_ONLY (another minute or two).
# Prints PASS/FAIL per check and "rdma suite: N passed, M failed"; the
# log of a failed check is printed (its tail) and kept in LOG_DIR.
set -u
logs=$1
shift
for kv in "$@"; do export "${kv%%=*}=${kv#*=}"; done
: "${RDAXD:?}" "${RDAX:?}" "${IT_CLIENT:?}" "${IT_BADINPUT:?}" "${IT_CLI:?}" "${POWERCUT:?}" "${DIRECT:?}"
: "${IT_POWERCUT:?}" "${EXT4_NBD:?}" "${IT_CRASH_STATES:?}" "${IT_RESUME:?}"
export ip=${RDAX_VM_IP:?not in the VM} logs
export TMPDIR=/tmp RDAX_IT_RDMA=$ip
# ASan: the daemon's leak check runs at its exit (hx_daemon_stop wants exit 0)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
pass=0 fail=0 skipped=0

# asked NAME -- is NAME named in RDMA_SUITE_ONLY? (the checks run only when asked)
asked() {
	[[ " ${RDMA_SUITE_ONLY:-} " == *" $1 "* ]]
}

# check NAME TIMEOUT CMD... -- run CMD with a bound, log to LOG_DIR/NAME.log
check() {
	local name=$1 limit=$2 rc=0 t0
	shift 2
	if [ -n "${RDMA_SUITE_ONLY:-}" ] && ! asked "$name"; then
		skipped=$((skipped + 1))
		return
	fi
	t0=$(date +%s)
	# bash -c: CMD may be one of the functions below (exported)
	timeout -k 10 "$limit" bash -c '"$@"' _ "$@" >"$logs/$name.log" 2>&1 || rc=$?
	local took=$(($(date +%s) - t0))
	if [ $rc = 0 ]; then
		pass=$((pass + 1))
		echo "PASS $name (${took}s)"
	else
		fail=$((fail + 1))
		echo "FAIL $name (rc $rc, ${took}s)$([ $rc = 124 ] && echo ': timed out')"
		tail -n 40 "$logs/$name.log" | sed 's/^/    /'
	fi
}

# fsdax_refused -- rdaxd must refuse an rdma:// listener over an fsdax file, naming devdax
fsdax_refused() {
	local ns=/mnt/pmem/rdax-fsdax.ns out rc=0
	grep -q ' /mnt/pmem .*dax' /proc/mounts || { echo "no DAX mount on /mnt/pmem"; return 1; }
	out=$(timeout 120 "$RDAXD" --namespace "$ns,size=64M" --listen "rdma://$ip:7390" 2>&1) || rc=$?
	echo "$out" | tail -n 3
	[ $rc = 1 ] || { echo "expected exit 1, got $rc"; return 1; }
	echo "$out" | grep -q "fsdax" || { echo "no mention of fsdax"; return 1; }
	echo "$out" | grep -q "devdax" || { echo "no devdax recommendation"; return 1; }
	echo "$out" | grep -q "rdaxd: ready" && { echo "it became ready"; return 1; }
	# the control: the same namespace over tcp:// serves (the refusal is RDMA's)
	"$RDAXD" --namespace "$ns" --listen tcp://127.0.0.1:7391 >"$logs/fsdax-tcp.out" 2>&1 &
	local pid=$! i
	for i in $(seq 1 120); do
		grep -q "rdaxd: ready" "$logs/fsdax-tcp.out" && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.5
	done
	grep -q "rdaxd: ready" "$logs/fsdax-tcp.out" || { cat "$logs/fsdax-tcp.out"; return 1; }
	kill -TERM $pid && wait $pid || { echo "tcp:// daemon did not exit 0"; return 1; }
	echo "refused over rdma://, served over tcp://"
}

# ns_health -- rdaxd on namespace $1 (mode auto, tcp:// and --metrics): rdax namespace list
# says kind $2, the metrics name it too; what the emulated NVDIMM reports of its
# health (qemu's has no unsafe-shutdown count) is printed, and must be well formed
ns_health() {
	local ns=$1 kind=$2 out="$logs/health-$2.out" pid i json url
	if [ -c "$ns" ]; then "$RDAXD" --format "$ns" --force || return 1; fi
	"$RDAXD" --namespace "$ns" --listen tcp://127.0.0.1:7392 --metrics http://127.0.0.1:0 \
		>"$out" 2>&1 &
	pid=$!
	for i in $(seq 1 240); do
		grep -q "rdaxd: ready" "$out" && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.5
	done
	grep -q "rdaxd: ready" "$out" || { cat "$out"; kill $pid; return 1; }
	json=$("$RDAX" --server tcp://127.0.0.1:7392 namespace list --json) || { kill $pid; return 1; }
	"$RDAX" --server tcp://127.0.0.1:7392 namespace list
	url=$(sed -n 's/.*metrics \(http:[^ ]*\).*/\1/p' "$out" | head -n 1)
	curl -sf "$url" >"$logs/health-$kind.metrics" || { echo "no metrics at $url"; kill $pid; return 1; }
	kill -TERM $pid && wait $pid || { echo "rdaxd did not exit 0"; return 1; }
	echo "$json"
	echo "$json" | grep -q "\"kind\":\"$kind\"" || { echo "kind is not $kind"; return 1; }
	echo "$json" | grep -Eq '"unsafe_shutdown_count":(null|[0-9]+)' || return 1
	echo "$json" | grep -Eq '"badblocks_supported":(true|false)' || return 1
	grep -q "^rdax_namespace_info{.*kind=\"$kind\"" "$logs/health-$kind.metrics" ||
		{ echo "metrics without kind $kind"; return 1; }
	grep -E "^rdax_namespace_(media_health|unsafe|bad)" "$logs/health-$kind.metrics"
}

# to_devdax -- turn the NVDIMM into /dev/dax0.0
to_devdax() {
	umount /mnt/pmem && ndctl create-namespace -f -e namespace0.0 -m devdax >/dev/null &&
		test -c /dev/dax0.0
}

# rdma_auth -- rdma:// with --tls require and a PSK: signed clients served with their ACL,
# unsigned and wrongly keyed ones refused, a replayed request refused; the control: the
# same replay with the nonce check switched off (RDAX_FAULTS) is accepted
rdma_auth() {
	local d=/tmp/rdma-auth port=7393 psk wrong acl out
	rm -rf $d && mkdir -p $d
	psk=$d/keys.psk wrong=$d/wrong.psk acl=$d/acl
	printf 'alice:00112233445566778899aabbccddeeff\nbob:ffeeddccbbaa99887766554433221100\n' >$psk
	printf 'alice:0011223344556677889900aabbccddee\n' >$wrong
	printf 'user:alice alice-* rw,create\n' >$acl
	start() { # start [RDAX_FAULTS]
		RDAX_FAULTS=${1:-} "$RDAXD" --namespace $d/ns,size=64M,mode=sim \
			--listen "rdma://$ip:$port" --tls require --tls-psk $psk --acl $acl \
			>$d/out 2>$d/err &
		pid=$!
		for i in $(seq 1 120); do
			grep -q "rdaxd: ready" $d/out && return 0
			kill -0 $pid 2>/dev/null || break
			sleep 0.5
		done
		cat $d/err
		return 1
	}
	start || return 1
	local r="$RDAX --timeout 60 --server rdma://$ip:$port"
	$r --tls-psk $psk --tls-username alice volume create alice-1 16M ||
		{ echo "alice (signed) refused"; return 1; }
	echo data | $r --tls-psk $psk --tls-username alice write alice-1 0 --fsync ||
		{ echo "alice cannot write"; return 1; }
	out=$($r --tls-psk $psk --tls-username bob volume list) ||
		{ echo "bob (signed) refused"; return 1; }
	echo "$out" | grep -q alice-1 && { echo "bob sees alice's volume"; return 1; }
	$r volume list 2>&1 && { echo "an unsigned client was served"; return 1; }
	$r --tls-psk $wrong --tls-username alice volume list 2>&1 &&
		{ echo "a wrong key was accepted"; return 1; }
	"$REPLAY" "$ip" $port $psk alice || return 1
	grep -q "a replay of an earlier request" $d/err || { echo "no replay in the log"; return 1; }
	kill -TERM $pid && wait $pid || { echo "rdaxd did not exit 0"; return 1; }
	# the control: without the nonce check the replay gets in, so the check is what refused it
	start rdma-auth-no-replay-check || return 1
	if "$REPLAY" "$ip" $port $psk alice; then
		echo "control: the replay was refused with the check off"
		kill -TERM $pid
		return 1
	fi
	echo "control: with the check off the replay was accepted (caught)"
	kill -TERM $pid && wait $pid
	return 0
}

export -f fsdax_refused to_devdax ns_health rdma_auth

echo "rdma suite in the VM: $(uname -r), rxe0 at $ip, NVDIMM $RDAX_VM_PMEM_DEV"
check fsdax_refused 300 fsdax_refused
check fsdax_health 300 ns_health /mnt/pmem/rdax-health.ns,size=64M fsdax
[ -n "${REPLAY:-}" ] && check rdma_auth 600 rdma_auth

export RDAX_IT_MODE=sim
check sim_direct 600 "$DIRECT"
check sim_client 900 "$IT_CLIENT"
check sim_badinput ${BADINPUT_LIMIT:-900} "$IT_BADINPUT"
check sim_cli 900 "$IT_CLI"
check sim_powercut 900 "$POWERCUT" --cuts 4 --clean-every 2 --loaders 2
check sim_powercut_control 900 "$POWERCUT" --cuts 4 --loaders 2 --control
# the durable write notices' own control: a durable notice that marks nothing (its FSYNC
# finds the range clean) must lose acknowledged writes at the cuts
check sim_powercut_durable_control 900 "$POWERCUT" --cuts 4 --loaders 2 --control-fault rdma-durable-unmarked
# rdax powercut (the daemon's in-process cut) with one-sided writes in flight, and its controls
check sim_powercut_cmd 900 env RDAX_IT_ONLY='cut__native*' "$IT_POWERCUT"
# the daemon's write log of one-sided writes: a real cut leaves one of its crash states
check sim_write_log_cut 600 env RDAX_IT_ONLY='write_log__*state_is*' "$IT_CRASH_STATES"
# ext4 through the kernel's NBD client: every sampled crash state recovers by its journal
check ext4_nbd 900 bash "$EXT4_NBD" --states 30 "$RDAXD" "$RDAX" /tmp/ext4-nbd
check ext4_nbd_control 900 bash "$EXT4_NBD" --control --states 30 "$RDAXD" "$RDAX" /tmp/ext4-nbd-control
# librdax's resume over rdma://: restarts with one-sided writes in flight, windows taken
# anew and the old rkeys dead, the fsync over lost writes and its control
check sim_resume 900 "$IT_RESUME"
# SIGTERM with slow clients on TCP, NBD and RDMA at once: one drain timeout
[ -n "${DRAIN:-}" ] && check sim_drain_all 600 "$DRAIN"
# the same one-sided tests with daemons whose loops spin on their CQs
export RDAX_IT_RDMA_BUSY_POLL=2000
check sim_direct_busy_poll 600 "$DIRECT"
unset RDAX_IT_RDMA_BUSY_POLL
unset RDAX_IT_MODE

check devdax_switch 120 to_devdax
export RDAX_IT_NS=/dev/dax0.0
check devdax_direct 600 "$DIRECT"
check devdax_client 900 "$IT_CLIENT"
check devdax_badinput 900 "$IT_BADINPUT"
check devdax_cli 900 "$IT_CLI"
unset RDAX_IT_NS
check devdax_health 300 ns_health /dev/dax0.0 devdax

# the cluster over RDMA links: sim-mode nodes on files, the tcp:// listeners on rxe0's address
# too (both are advertised); etcd on loopback
[ -n "${CLUSTER_E2E:-}" ] && check cluster_rdma 1500 env RDAX_IT_TCP_HOST=$ip "$CLUSTER_E2E"
# rdma:// clients following the primary; a deposed primary's client windows (about
# 1-2 minutes). Its control only when asked: RDMA_SUITE_ONLY="cluster_follow_rdma_control"
if [ -n "${RDMA_FOLLOW:-}" ]; then
	check cluster_follow_rdma 1500 env RDAX_IT_TCP_HOST=$ip "$RDMA_FOLLOW"
	if asked cluster_follow_rdma_control; then
		check cluster_follow_rdma_control 1500 env RDAX_IT_TCP_HOST=$ip "$RDMA_FOLLOW" --control
	else
		echo "cluster_follow_rdma_control: run only when asked (RDMA_SUITE_ONLY)"
	fi
fi

echo "rdma suite: $pass passed, $fail failed$([ $skipped -gt 0 ] && echo ", $skipped not selected")"
[ $fail = 0 ]
