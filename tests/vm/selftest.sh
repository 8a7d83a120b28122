#!/bin/bash
# selftest.sh -- the VM harness's own checks (ctest vm_harness)
#
# Without a boot: a missing kernel and a bad setting make run.sh exit 125
# with the reason. One boot (fsdax): inside, rxe0 is ACTIVE and carries an
# RDMA CM connection (rping), /mnt/pmem is DAX-mounted on /dev/pmem0, a
# forwarded variable arrives, the root is writable without touching the host;
# outside, stdout and stderr arrive apart, a file written to DIR is on the
# host and the command's exit code (7) is run.sh's. One boot without NVDIMM:
# a command exiting 125 is reported as 1 (125 is only ever "no VM"). One
# boot cut by RDAX_VM_TIMEOUT exits 124. Exit 77 (skipped) only when the VM
# cannot start, with the reason.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run=$here/run.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/rdax-vm-selftest.XXXXXX")
trap 'rm -rf "$work"' EXIT
pass=0 fail=0

# expect NAME CONDITION... -- one check, counted
expect() {
	local name=$1
	shift
	if "$@"; then
		pass=$((pass + 1))
		echo "PASS $name"
	else
		fail=$((fail + 1))
		echo "FAIL $name"
	fi
}

# vm OUT_PREFIX CMD... -- run.sh on $work, output kept; returns run.sh's exit code
vm() {
	local prefix=$1
	shift
	"$run" "$work" "$@" >"$work/$prefix.out" 2>"$work/$prefix.err"
}

rc=0
RDAX_VM_KERNEL=/nonexistent/vmlinuz-0 vm nokernel true || rc=$?
expect "missing kernel: exit 125" test $rc = 125
expect "missing kernel: reason" grep -q "cannot start the VM: no kernel image /nonexistent/vmlinuz-0" "$work/nokernel.err"
rc=0
RDAX_VM_PMEM=nvme vm badpmem true || rc=$?
expect "bad setting: exit 125" test $rc = 125
expect "bad setting: reason" grep -q "RDAX_VM_PMEM must be fsdax, devdax or none" "$work/badpmem.err"

inside='
set -u
echo "in-vm=${RDAX_VM:-} dev=${RDAX_VM_RDMA_DEV:-} pmem=${RDAX_VM_PMEM_DEV:-} forwarded=${SELFTEST_TOKEN:-}"
echo "to stderr" >&2
grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state && echo "rxe0 ACTIVE"
grep -q " /mnt/pmem .*dax" /proc/mounts && echo "pmem dax-mounted"
timeout 120 rping -s -a "$RDAX_VM_IP" -C 3 >/dev/null 2>&1 &
sleep 2
timeout 120 rping -c -a "$RDAX_VM_IP" -C 3 -v >rping.log 2>&1 && echo "rping ok"
wait
echo guest >/etc/rdax-vm-selftest && echo "root writable"
echo shared >in-share
exit 7'
rc=0
SELFTEST_TOKEN=t0k3n RDAX_VM_ENV=SELFTEST_TOKEN vm boot bash -c "$inside" || rc=$?
if [ $rc = 125 ]; then
	echo "vm_harness: SKIPPED: the VM could not start: $(grep 'cannot start the VM' "$work/boot.err" | tail -n 1)"
	tail -n 20 "$work/boot.err"
	exit 77
fi
expect "command's exit code" test $rc = 7
expect "variables inside" grep -qx "in-vm=1 dev=rxe0 pmem=/dev/pmem0 forwarded=t0k3n" "$work/boot.out"
expect "rxe0 ACTIVE" grep -qx "rxe0 ACTIVE" "$work/boot.out"
expect "RDMA CM over rxe0 (rping)" grep -qx "rping ok" "$work/boot.out"
expect "NVDIMM DAX-mounted" grep -qx "pmem dax-mounted" "$work/boot.out"
expect "root writable" grep -qx "root writable" "$work/boot.out"
expect "host root untouched" test ! -e /etc/rdax-vm-selftest
expect "DIR shared" grep -qx shared "$work/in-share"
expect "stderr apart" grep -qx "to stderr" "$work/boot.err"
expect "stdout apart" bash -c "! grep -q 'to stderr' '$work/boot.out'"

rc=0
RDAX_VM_PMEM=none vm own125 bash -c 'exit 125' || rc=$?
expect "command's 125 reported as 1" test $rc = 1
expect "command's 125 said" grep -q "the command exited 125" "$work/own125.err"

rc=0
RDAX_VM_TIMEOUT=15 RDAX_VM_PMEM=none vm timeout sleep 600 || rc=$?
expect "time limit: exit 124" test $rc = 124
expect "time limit: said" grep -q "time limit of 15 s" "$work/timeout.err"

echo "vm_harness: $pass passed, $fail failed"
[ $fail = 0 ]
