#!/bin/sh
# install-deps.sh -- install the Debian 12 packages rdax builds, tests and runs with
# (libgnutls28-dev: TLS; gnutls-bin: certtool and psktool for the TLS tests;
# qemu-utils, libnbd-bin, python3-libnbd and fio: the NBD interop tests' clients;
# libnbd-dev: the cluster NBD test's checker (libnbd from C);
# qemu-system-x86 ... xfsprogs: the VM the RDMA suite boots, tests/vm;
# nbd-client: the kernel NBD client the VM suite's ext4 example attaches with;
# libcurl4-openssl-dev, libjson-c-dev: the etcd client; libxxhash-dev: the resync's
# block digests; etcd-server, iptables,
# libnetfilter-queue-dev: the cluster tests' etcd and network faults; scdoc: the man
# pages, mandoc and groff-base: their checks; libsystemd-dev: sd_notify;
# systemd ... man-db: the unit's checks and the Debian packages' build and test,
# packaging/; libpmem2-dev: unsafe-shutdown counts and bad blocks; libmicrohttpd-dev:
# the metrics endpoint, prometheus: its checks, promtool and a real scraper;
# clang-14, libclang-rt-14-dev: libFuzzer and its sanitizers, tests/fuzz).
# Idempotent; needs root (or sudo).
set -eu

packages="build-essential cmake pkg-config
	libpmem-dev libpmem2-dev libmicrohttpd-dev libev-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev
	librdmacm-dev libibverbs-dev rdma-core ibverbs-utils perftest
	libcmocka-dev python3 libgnutls28-dev gnutls-bin
	qemu-utils libnbd-bin python3-libnbd libnbd-dev fio
	qemu-system-x86 busybox-static kmod iproute2 ibverbs-providers rdmacm-utils
	ndctl daxctl cpio xz-utils bc e2fsprogs xfsprogs nbd-client
	libcurl4-openssl-dev libjson-c-dev libxxhash-dev etcd-server iptables libnetfilter-queue-dev
	scdoc mandoc groff-base prometheus
	libsystemd-dev systemd systemd-container debootstrap lintian dpkg-dev file procps man-db
	clang-14 libclang-rt-14-dev"

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
