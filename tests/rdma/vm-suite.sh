#!/bin/bash
# vm-suite.sh OUT_DIR NAME=PATH... -- the RDMA suite: boot the VM once, run guest-suite.sh
#
# The VM is the project's (tests/vm/run.sh). OUT_DIR is shared read-write
# with it (logs land in OUT_DIR/vm-logs); the programs (NAME=PATH, see
# CMakeLists.txt) are read through the VM's read-only view of this machine's
# root. Exit: the guest suite's result; 77 (skipped) only when the VM cannot
# start (run.sh exit 125), with the reason; a VM that times out, or that the
# suite takes down, is a failure.
#
# Environment: RDAX_VM_* as in tests/vm/README.md (defaults here: an fsdax
# NVDIMM of 1G, 4G of RAM, a 2400 s limit: about 15 minutes on an idle
# 2-core machine, twice that when other builds load it); RDMA_SUITE_ONLY="NAME ..." runs
# only those checks of guest-suite.sh.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$1
shift
mkdir -p "$out/vm-logs"
export RDAX_VM_PMEM=fsdax RDAX_VM_PMEM_FS=ext4
export RDAX_VM_PMEM_SIZE=${RDAX_VM_PMEM_SIZE:-1G}
export RDAX_VM_MEM=${RDAX_VM_MEM:-4G}
export RDAX_VM_TIMEOUT=${RDAX_VM_TIMEOUT:-2400}
export RDMA_SUITE_ONLY=${RDMA_SUITE_ONLY:-}
export RDAX_VM_ENV="RDMA_SUITE_ONLY ${RDAX_VM_ENV:-}"
start=$(date +%s)
# stderr is kept too, for the reason of a VM that cannot start
"$here/../vm/run.sh" "$out" bash "$here/guest-suite.sh" "$out/vm-logs" "$@" \
	2> >(tee "$out/vm-stderr.log" >&2)
rc=$?
wait # the tee
echo "rdma_vm_suite: VM run took $(($(date +%s) - start)) s"
case $rc in
125)
	reason=$(grep 'cannot start the VM' "$out/vm-stderr.log" | tail -n 1)
	echo "rdma_vm_suite: SKIPPED: the VM could not start (${reason#rdax-vm: cannot start the VM: })"
	exit 77
	;;
124)
	echo "rdma_vm_suite: FAILED: the VM hit its time limit (RDAX_VM_TIMEOUT=$RDAX_VM_TIMEOUT s)"
	exit 1
	;;
esac
exit $rc
