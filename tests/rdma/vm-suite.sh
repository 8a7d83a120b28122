#!/bin/bash
# vm-suite.sh OUT_DIR VMTEST_DIR NAME=PATH... -- the RDMA suite: boot the VM once, run guest-suite.sh
#
# OUT_DIR is shared read-write with the VM (logs land in OUT_DIR/vm-logs);
# the programs (NAME=PATH, see CMakeLists.txt) are read through the VM's
# read-only view of this machine's root. Exit: the guest suite's result;
# 77 (skipped) only when the VM cannot start (run-in-vm.sh exit 125), with
# the reason printed; a VM that times out is a failure.
#
# Environment: VMTEST_* as in the vmtest README (defaults here: fsdax
# NVDIMM of 1G, 4G of RAM, a 2400 s limit: about 15 minutes on a quiet
# machine, and 25 seen on a loaded one); RDMA_SUITE_ONLY="NAME ..."
# runs only those checks of guest-suite.sh.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$1 vmtest=$2
shift 2
run=$vmtest/run-in-vm.sh
if [ ! -x "$run" ]; then
	echo "rdma_vm_suite: SKIPPED: no VM runner at $run (the vmtest directory is missing)"
	exit 77
fi
mkdir -p "$out/vm-logs"
export VMTEST_PMEM=fsdax VMTEST_PMEM_FS=ext4
export VMTEST_PMEM_SIZE=${VMTEST_PMEM_SIZE:-1G}
export VMTEST_MEM=${VMTEST_MEM:-4G}
export VMTEST_TIMEOUT=${VMTEST_TIMEOUT:-2400}
export RDMA_SUITE_ONLY=${RDMA_SUITE_ONLY:-}
export VMTEST_ENV="RDMA_SUITE_ONLY ${VMTEST_ENV:-}"
start=$(date +%s)
"$run" "$out" bash "$here/guest-suite.sh" "$out/vm-logs" "$@"
rc=$?
echo "rdma_vm_suite: VM run took $(($(date +%s) - start)) s"
case $rc in
125)
	echo "rdma_vm_suite: SKIPPED: the VM could not start (run-in-vm.sh exit 125; its reason is above)"
	exit 77
	;;
124)
	echo "rdma_vm_suite: FAILED: the VM hit its time limit (VMTEST_TIMEOUT=$VMTEST_TIMEOUT s)"
	exit 1
	;;
esac
exit $rc
