#!/bin/sh
# install-deps.sh -- install the Debian 12 packages rdax builds, tests and runs with
# (qemu-utils, libnbd-bin, python3-libnbd and fio: the NBD interop tests' clients;
# qemu-system-x86 ... xfsprogs: the VM the RDMA suite boots, ../shared/vmtest;
# nbd-client: the kernel NBD client the VM suite's ext4 example attaches with;
# libcurl4-openssl-dev, libjson-c-dev: the etcd client; etcd-server, iptables,
# libnetfilter-queue-dev: the cluster tests' etcd and network faults; scdoc: the man
# pages, mandoc and groff-base: their checks; libsystemd-dev: sd_notify;
# systemd ... man-db: the unit's checks and the Debian packages' build and test,
# packaging/).
# Idempotent; needs root (or sudo).
set -eu

packages="build-essential cmake pkg-config
	libpmem-dev libev-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev
	librdmacm-dev libibverbs-dev rdma-core ibverbs-utils perftest
	libcmocka-dev python3
	qemu-utils libnbd-bin python3-libnbd fio
	qemu-system-x86 busybox-static kmod iproute2 ibverbs-providers rdmacm-utils
	ndctl daxctl cpio xz-utils bc e2fsprogs xfsprogs nbd-client
	libcurl4-openssl-dev libjson-c-dev etcd-server iptables libnetfilter-queue-dev
	scdoc mandoc groff-base
	libsystemd-dev systemd systemd-container debootstrap lintian dpkg-dev file procps man-db"

missing=""
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing$missing"
$SUDO apt-get update -q
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
