#!/bin/bash
# run.sh DIR COMMAND [ARG...] -- run COMMAND in a throw-away qemu VM with soft-RoCE and a NVDIMM
#
# The VM runs a Debian kernel on this machine's own root filesystem (read-only
# over 9p, with a tmpfs overlay on top), so whatever is built or installed here
# runs there unchanged. It has a soft-RoCE device rxe0 on a dummy netdev (no
# packet leaves the VM: qemu has no network backend) and an emulated NVDIMM
# (fsdax with a DAX-mounted file system, or devdax). DIR is shared read-write
# at the same path; COMMAND runs in DIR as root.
#
# Exit: COMMAND's exit code (its stdout and stderr are streamed to ours);
# 124 when the VM hit RDAX_VM_TIMEOUT; 125 only when the VM could not start or
# be set up, with the reason on stderr. A COMMAND that itself exits 124 or 125,
# or that takes the VM down, is reported as 1, so that 125 always means "no VM".
# Settings (environment, RDAX_VM_*) and how it works: tests/vm/README.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# no_vm REASON -- the VM cannot start: say why, exit 125
no_vm() {
	echo "rdax-vm: cannot start the VM: $*" >&2
	exit 125
}

if [ $# -lt 2 ]; then
	sed -n '2,15s/^# \{0,1\}//p' "$0" >&2
	exit 2
fi
share=$(cd "$1" 2>/dev/null && pwd) || no_vm "no such directory: $1"
shift
[ "$share" != / ] || no_vm "DIR must not be /"
case "$share$here" in *[[:space:]]*) no_vm "paths with white space cannot reach the guest's kernel command line: $share" ;; esac

cache=${RDAX_VM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rdax-vm}
timeout_s=${RDAX_VM_TIMEOUT:-600}
mem=${RDAX_VM_MEM:-2G}
smp=${RDAX_VM_SMP:-2}
ip=${RDAX_VM_IP:-192.0.2.1}
mtu=${RDAX_VM_MTU:-1500}
pmem=${RDAX_VM_PMEM:-fsdax}
pmem_fs=${RDAX_VM_PMEM_FS:-ext4}
pmem_size=${RDAX_VM_PMEM_SIZE:-1G}
kernel=${RDAX_VM_KERNEL:-debian}
append_extra=${RDAX_VM_APPEND:-}
accel=${RDAX_VM_ACCEL:-auto}
case $pmem in fsdax | devdax | none) ;; *) no_vm "RDAX_VM_PMEM must be fsdax, devdax or none, not '$pmem'" ;; esac
case $pmem_fs in ext4 | xfs) ;; *) no_vm "RDAX_VM_PMEM_FS must be ext4 or xfs, not '$pmem_fs'" ;; esac
case $accel in auto | kvm | tcg) ;; *) no_vm "RDAX_VM_ACCEL must be auto, kvm or tcg, not '$accel'" ;; esac
[[ $timeout_s =~ ^[0-9]+$ ]] || no_vm "RDAX_VM_TIMEOUT must be a number of seconds, not '$timeout_s'"
[[ $ip =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || no_vm "RDAX_VM_IP must be an IPv4 address, not '$ip'"

# host_check -- the Debian packages the VM needs (deploy/install-deps.sh installs them)
host_check() {
	local pkgs="qemu-system-x86 busybox-static kmod cpio gzip xz-utils iproute2 rdma-core
		ibverbs-providers ndctl e2fsprogs xfsprogs" p missing=""
	for p in $pkgs; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
			missing="$missing $p"
	done
	[ -z "$missing" ] || no_vm "missing Debian packages:$missing (deploy/install-deps.sh installs them)"
}

# kernel_fetch -- unpack the Debian kernel package linux-image-amd64 points at into the cache
#
# Sets vmlinuz and modroot (the root holding lib/modules/VERSION). The host's
# apt sources are used as they are; nothing is installed on the host.
kernel_fetch() {
	local pkg dir ver tmp
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then
		apt-get -q update >"$cache/apt.log" 2>&1 || true
		pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
			awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	fi
	if [ -z "$pkg" ]; then # no package lists: any kernel fetched before will do
		dir=$(ls -d "$cache"/kernel-*/.complete 2>/dev/null | head -n 1)
		[ -n "$dir" ] || no_vm "apt knows no linux-image-amd64 and no kernel is cached in $cache"
		dir=${dir%/.complete}
	else
		dir=$cache/kernel-$pkg
	fi
	if [ ! -f "$dir/.complete" ]; then
		echo "rdax-vm: fetching the guest kernel $pkg" >&2
		tmp=$(mktemp -d "$cache/download.XXXXXX")
		if ! (cd "$tmp" && apt-get -q download "$pkg") >"$cache/apt.log" 2>&1; then
			rm -rf "$tmp"
			no_vm "apt-get download $pkg failed: $(tail -n 2 "$cache/apt.log" | tr '\n' ' ')"
		fi
		rm -rf "$dir"
		dpkg-deb -x "$tmp"/*.deb "$dir" || no_vm "dpkg-deb -x of $pkg failed"
		rm -rf "$tmp"
		ver=$(ls "$dir/lib/modules")
		depmod -b "$dir" "$ver" || no_vm "depmod of $pkg failed"
		touch "$dir/.complete"
	fi
	ver=$(ls "$dir/lib/modules")
	vmlinuz=$dir/boot/vmlinuz-$ver
	modroot=$dir
}

# kernel_pick -- the Debian kernel, or an installed one named by RDAX_VM_KERNEL
kernel_pick() {
	case $kernel in
	debian) kernel_fetch ;;
	/*)
		vmlinuz=$kernel
		modroot=/
		;;
	*) no_vm "RDAX_VM_KERNEL must be 'debian' or the absolute path of a vmlinuz, not '$kernel'" ;;
	esac
	kver=${vmlinuz##*/vmlinuz-}
	[ -f "$vmlinuz" ] || no_vm "no kernel image $vmlinuz"
	[ -f "$modroot/lib/modules/$kver/modules.dep" ] || no_vm "no modules for $kver under $modroot"
}

# initramfs_pick -- the cached initramfs for this kernel, built again when its inputs change
initramfs_pick() {
	local key
	key=$(cat "$here/guest/init" "$here/initramfs.sh" /bin/busybox | sha1sum | cut -c1-12)
	initramfs=$cache/initramfs-$kver-$key.cpio.gz
	[ -f "$initramfs" ] && return
	rm -f "$cache/initramfs-$kver-"*.cpio.gz
	"$here/initramfs.sh" "$kver" "$modroot" "$initramfs" ||
		no_vm "building the initramfs for $kver failed"
}

# kvm_works -- does KVM boot this stock kernel? (a short probe boot)
#
# A host with nested paravirtual KVM (kvm_pvm) has a /dev/kvm that runs only
# PVM guest kernels: a stock kernel hangs there, so it is not even tried.
kvm_works() {
	local log ok=1
	[ -e /sys/module/kvm_pvm ] && return 1
	[ -w /dev/kvm ] || return 1
	log=$(mktemp)
	timeout -k 2 30 qemu-system-x86_64 -accel kvm -cpu host -m 256 -nodefaults \
		-no-user-config -display none -no-reboot -serial "file:$log" -kernel "$vmlinuz" \
		-initrd "$initramfs" -append "console=ttyS0 quiet panic=-1 rdax_vm.probe" \
		>/dev/null 2>&1 || true
	grep -q RDAX-VM-PROBE-OK "$log" && ok=0
	rm -f "$log"
	return $ok
}

# accel_pick -- KVM where it works (probed once per guest and host kernel), else TCG
accel_pick() {
	local probe
	if [ "$accel" = auto ]; then
		probe=$cache/accel-$kver-$(uname -r)
		if [ ! -f "$probe" ]; then
			if kvm_works; then echo kvm; else echo tcg; fi >"$probe"
		fi
		accel=$(cat "$probe")
	fi
	case $accel in
	kvm) accel_args=(-accel kvm -cpu host) ;;
	# -cpu max has CLWB and CLFLUSHOPT, so libpmem flushes as on real hardware
	tcg) accel_args=(-accel tcg,thread=multi -cpu max) ;;
	esac
}

mkdir -p "$cache/runs" || no_vm "cannot create the cache $cache"
host_check
exec 9>"$cache/.lock"
flock 9 # one run at a time updates the cache
kernel_pick
initramfs_pick
accel_pick
flock -u 9

# The run directory: what the guest reads (settings, command) and writes
# (its output, the command's exit code, a setup failure's reason).
run=$(mktemp -d "$cache/runs/run.XXXXXX")
qemu_pid=
cleanup() {
	if [ -n "$qemu_pid" ]; then
		kill "$qemu_pid" 2>/dev/null || true
		wait "$qemu_pid" 2>/dev/null || true
	fi
	if [ -n "${RDAX_VM_KEEP:-}" ]; then
		echo "rdax-vm: kept $run" >&2
	else
		rm -rf "$run"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

printf 'RDAX_VM_%s=%q\n' SHARE "$share" IP "$ip" MTU "$mtu" PMEM "$pmem" \
	PMEM_FS "$pmem_fs" MODROOT "$modroot" >"$run/settings"
{
	printf 'cd %q || exit 1\n' "$share"
	for v in ${RDAX_VM_ENV:-}; do
		[ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"
	done
	printf 'exec'
	printf ' %q' "$@"
	echo
} >"$run/cmd.sh"
: >"$run/stdout"
: >"$run/stderr"
: >"$run/console.log"

if [ "$pmem" = none ]; then
	machine_args=(-machine pc -m "$mem")
else
	truncate -s "$pmem_size" "$run/pmem.img" || no_vm "cannot make a $pmem_size NVDIMM file in $run"
	machine_args=(-machine pc,nvdimm=on -m "$mem,slots=2,maxmem=64G"
		-object "memory-backend-file,id=pmem0,share=on,mem-path=$run/pmem.img,size=$pmem_size"
		-device nvdimm,id=nvdimm0,memdev=pmem0)
fi

start=$SECONDS
timeout -k 10 "$timeout_s" qemu-system-x86_64 "${accel_args[@]}" -smp "$smp" "${machine_args[@]}" \
	-nodefaults -no-user-config -display none -no-reboot -nic none \
	-serial "file:$run/console.log" -kernel "$vmlinuz" -initrd "$initramfs" \
	-append "console=ttyS0 loglevel=4 panic=-1 rdax_vm.setup=$here/guest/setup.sh rdax_vm.run=$run${append_extra:+ $append_extra}" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs "local,path=$run,mount_tag=run,security_model=none,multidevs=remap" \
	-virtfs "local,path=$share,mount_tag=share,security_model=none,multidevs=remap" \
	</dev/null >"$run/qemu.log" 2>&1 &
qemu_pid=$!
tail -n +1 -s 0.2 -f --pid="$qemu_pid" "$run/stdout" &
tail -n +1 -s 0.2 -f --pid="$qemu_pid" "$run/stderr" >&2 &
[ -n "${RDAX_VM_VERBOSE:-}" ] && tail -n +1 -s 0.2 -f --pid="$qemu_pid" "$run/console.log" >&2 &
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=
wait # the tails print what is left
[ -n "${RDAX_VM_VERBOSE:-}" ] && echo "rdax-vm: the VM ran $((SECONDS - start)) s ($accel)" >&2

if [ -f "$run/setup-failed" ]; then
	no_vm "$(cat "$run/setup-failed")"
fi
if [ -f "$run/rc" ]; then
	rc=$(cat "$run/rc")
	if [ "$rc" = 124 ] || [ "$rc" = 125 ]; then
		echo "rdax-vm: the command exited $rc, reported as 1 (124 and 125 are the VM's)" >&2
		exit 1
	fi
	exit "$rc"
fi
if [ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ]; then
	echo "rdax-vm: the VM hit its time limit of $timeout_s s (RDAX_VM_TIMEOUT); its console's end:" >&2
	tail -n 15 "$run/console.log" >&2
	exit 124
fi
if [ -f "$run/started" ]; then
	# set up, then gone without the command's exit code: the command (or the
	# kernel under it) took the VM down -- a failure, never a reason to skip
	echo "rdax-vm: the VM stopped while the command ran (qemu exit $qemu_rc); its console's end:" >&2
	tail -n 25 "$run/console.log" >&2
	exit 1
fi
echo "rdax-vm: the VM ended without a result (qemu exit $qemu_rc); qemu and console:" >&2
tail -n 5 "$run/qemu.log" >&2
tail -n 25 "$run/console.log" >&2
exit 125
