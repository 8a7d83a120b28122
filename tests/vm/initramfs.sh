#!/bin/bash
# initramfs.sh KERNEL_VERSION MODULES_ROOT OUT -- the VM's initramfs: busybox, guest/init, the modules to reach the root
#
# MODULES_ROOT holds lib/modules/KERNEL_VERSION ("/" for an installed kernel).
# The initramfs only has to mount this machine's root over 9p with an overlay
# on it (guest/init); everything else the guest needs, it finds there. So it
# holds a static busybox, guest/init and four modules (virtio_pci,
# 9pnet_virtio, 9p, overlay) with what they depend on, in load order,
# uncompressed (busybox's insmod need not know .ko.xz).
set -euo pipefail
kver=$1 modroot=$2 out=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
moddir=$modroot/lib/modules/$kver
[ -f "$moddir/modules.dep" ] || {
	echo "initramfs: no $moddir/modules.dep" >&2
	exit 1
}

tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{bin,dev,proc,sys,modules}
install -m 755 /bin/busybox "$tree/bin/busybox"
install -m 755 "$here/guest/init" "$tree/init"

# module_path NAME -- the module's path in modules.dep, empty when built in
module_path() {
	awk -F: -v n="$1" '{ f = $1; sub(".*/", "", f); sub(/\.ko.*/, "", f);
		gsub("-", "_", f); if (f == n) { print $1; exit } }' "$moddir/modules.dep"
}

# module_add PATH -- PATH after its dependencies, each once
declare -A added=()
load_order=()
module_add() {
	local dep
	[ -n "${added[$1]:-}" ] && return
	added[$1]=1
	# modules.dep lists a module's dependencies last-loaded first
	for dep in $(awk -v m="$1:" '$1 == m { $1 = ""; print }' "$moddir/modules.dep" | tr ' ' '\n' | tac); do
		module_add "$dep"
	done
	load_order+=("$1")
}

for name in virtio_pci 9pnet_virtio 9p overlay; do
	path=$(module_path "$name")
	if [ -z "$path" ]; then
		grep -q "/$name.ko" "$moddir/modules.builtin" 2>/dev/null && continue
		echo "initramfs: no module $name for $kver" >&2
		exit 1
	fi
	module_add "$path"
done

: >"$tree/modules.list"
for path in "${load_order[@]}"; do
	base=$(basename "$path")
	base=${base%%.ko*}.ko
	case $path in
	*.ko.xz) xz -dc "$moddir/$path" >"$tree/modules/$base" ;;
	*.ko.zst) zstd -qdc "$moddir/$path" >"$tree/modules/$base" ;;
	*.ko.gz) gzip -dc "$moddir/$path" >"$tree/modules/$base" ;;
	*) cp "$moddir/$path" "$tree/modules/$base" ;;
	esac
	echo "$base" >>"$tree/modules.list"
done
(cd "$tree" && find . | cpio -o -H newc --quiet | gzip -1) >"$out.tmp"
mv "$out.tmp" "$out"
