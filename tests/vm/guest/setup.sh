#!/bin/bash
# setup.sh -- the VM's second stage: PID 1 on the overlay of the host's root
#
# Mounts what a Debian system expects, the run directory and the shared
# directory (both at their host paths), brings up soft-RoCE (rxe0 on a dummy
# netdev) and the NVDIMM in the mode asked for, then runs the command run.sh
# wrote (run/cmd.sh) with its output into run/stdout and run/stderr, writes
# its exit code to run/rc and powers off. A setup step that fails writes its
# reason to run/setup-failed instead (run.sh exits 125 with it).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8

arg() { sed -n "s/.*rdax_vm\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
say() { echo "rdax-vm: $* (uptime $(cut -d' ' -f1 /proc/uptime) s)" >/dev/console; }
power_off() {
	sync
	busybox poweroff -f
	sleep 5
	echo o >/proc/sysrq-trigger
}
setup_failed() {
	say "setup failed: $*"
	[ -d "$run" ] && echo "$*" >"$run/setup-failed"
	power_off
}

# ---- the system: /proc, /sys, tmpfs where Debian expects them ----
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /dev/shm /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t devpts -o ptmxmode=0666 devpts /dev/pts
mount -t configfs configfs /sys/kernel/config 2>/dev/null
ln -sfn /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
hostname rdax-vm
echo "127.0.0.1 localhost rdax-vm" >/etc/hosts
ip link set lo up

# ---- the run and shared directories, at their host paths ----
share9p() { mkdir -p "$2" && mount -t 9p -o trans=virtio,version=9p2000.L,cache=mmap,msize=512000 "$1" "$2"; }
run=$(arg run)
share9p run "$run" || {
	say "cannot mount the run directory $run"
	power_off
}
. "$run/settings" || setup_failed "cannot read $run/settings"
share9p share "$RDAX_VM_SHARE" || setup_failed "cannot mount $RDAX_VM_SHARE over 9p"

# a downloaded kernel's modules are in the cache, not under /lib/modules
kver=$(uname -r)
if [ ! -d "/lib/modules/$kver/kernel" ]; then
	mkdir -p "/lib/modules/$kver"
	mount --bind "$RDAX_VM_MODROOT/lib/modules/$kver" "/lib/modules/$kver" ||
		setup_failed "no modules for $kver in $RDAX_VM_MODROOT"
fi
say "mounted"

# ---- soft-RoCE: rxe0 on a dummy netdev; its traffic loops inside the VM ----
modprobe dummy numdummies=0 || setup_failed "modprobe dummy"
ip link add rdax0 mtu "$RDAX_VM_MTU" type dummy || setup_failed "ip link add rdax0"
ip addr add "$RDAX_VM_IP/24" dev rdax0 || setup_failed "ip addr add $RDAX_VM_IP"
ip link set rdax0 up || setup_failed "ip link set rdax0 up"
for m in rdma_rxe rdma_ucm ib_uverbs; do
	modprobe $m || setup_failed "modprobe $m"
done
rdma link add rxe0 type rxe netdev rdax0 || setup_failed "rdma link add rxe0"
# wait for the port and its IPv4-mapped RoCEv2 GID (::ffff:a.b.c.d)
gid_tail=$(printf '%02x%02x:%02x%02x' ${RDAX_VM_IP//./ })
gid=
for _ in $(seq 100); do
	if grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null; then
		gid=$(grep -l "ffff:$gid_tail" /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null | head -n 1)
		[ -n "$gid" ] && break
	fi
	sleep 0.1
done
[ -n "$gid" ] || setup_failed "rxe0 not ACTIVE, or no IPv4 GID, after 10 s"
export RDAX_VM_RDMA_DEV=rxe0 RDAX_VM_GID_INDEX=${gid##*/}
say "rxe0 ready"

# ---- the NVDIMM: namespace0.0 in the mode asked for ----
if [ "$RDAX_VM_PMEM" != none ]; then
	for m in nfit nd_pmem dax_pmem device_dax; do
		modprobe $m || setup_failed "modprobe $m"
	done
	for _ in $(seq 100); do
		[ -e /sys/bus/nd/devices/namespace0.0 ] && break
		sleep 0.1
	done
	[ -e /sys/bus/nd/devices/namespace0.0 ] || setup_failed "no NVDIMM namespace0.0"
	ndctl create-namespace -f -e namespace0.0 -m "$RDAX_VM_PMEM" >/tmp/ndctl.log 2>&1 ||
		setup_failed "ndctl create-namespace -m $RDAX_VM_PMEM: $(tail -n 3 /tmp/ndctl.log)"
	case $RDAX_VM_PMEM in
	fsdax) dev=/dev/pmem0 ;;
	devdax) dev=/dev/dax0.0 ;;
	esac
	for _ in $(seq 100); do
		[ -e $dev ] && break
		sleep 0.1
	done
	[ -e $dev ] || setup_failed "no $dev"
	export RDAX_VM_PMEM_DEV=$dev
	if [ "$RDAX_VM_PMEM" = fsdax ]; then
		case $RDAX_VM_PMEM_FS in
		ext4) mkfs.ext4 -q -F -b 4096 $dev ;;
		xfs) mkfs.xfs -q -f -m reflink=0 $dev ;;
		esac >/tmp/mkfs.log 2>&1 || setup_failed "mkfs.$RDAX_VM_PMEM_FS $dev: $(tail -n 3 /tmp/mkfs.log)"
		mkdir -p /mnt/pmem
		mount -t "$RDAX_VM_PMEM_FS" -o dax $dev /mnt/pmem || setup_failed "mount -o dax $dev"
		grep -q ' /mnt/pmem .*dax' /proc/mounts || setup_failed "/mnt/pmem is not mounted with dax"
		export RDAX_VM_PMEM_MOUNT=/mnt/pmem
	fi
	say "NVDIMM ready: $dev"
fi

# ---- the command ----
ulimit -l unlimited # memory registration pins pages
ulimit -c 0
export RDAX_VM=1 RDAX_VM_IP
touch "$run/started"
bash "$run/cmd.sh" >>"$run/stdout" 2>>"$run/stderr" </dev/null
echo $? >"$run/rc"
say "done"
cd /
sync
umount /mnt/pmem 2>/dev/null
power_off
