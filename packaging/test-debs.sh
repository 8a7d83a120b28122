#!/bin/sh
# test-debs.sh -- the Debian packages on a fresh Debian 12, booted with systemd
#
#   packaging/test-debs.sh WORK
#
# Builds the packages (packaging/build-debs.sh, lintian included) in WORK/build,
# makes a minimal Debian 12 root with debootstrap (cached in WORK as a tarball)
# and then, in a throw-away copy of it:
#  1. `dpkg -i` of the four packages (it stops at the missing libraries) and
#     `apt-get -f install` for those: the packages install, the rdax user
#     exists, the configuration is a conffile, the unit is enabled;
#  2. boots the root with systemd (systemd-nspawn -b, its own network) and
#     checks that the unit started the daemon: Type=notify status, user rdax,
#     no capabilities, memlock unlimited (where systemd can raise it); runs
#     the demo with the rdax command;
#     systemd-analyze security of the loaded unit at most 3.0; a reinstall
#     keeps an edited configuration and restarts the daemon with the data
#     intact; a stop is a clean exit; a purge stops it and removes the
#     packages but keeps the namespace data.
# Needs root, debootstrap and systemd-container (deploy/install-deps.sh).
# Exits 77 (skipped) only when the fresh root cannot be made (no mirror).
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$1
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$work"
work=$(cd "$work" && pwd)
root=$work/root
cache=$work/bookworm-minbase.tar
debs=/var/tmp/rdax-debs # inside the root (nspawn mounts a fresh /tmp)
npid=""

fail() {
	echo "FAIL: $*" >&2
	[ -f "$work/boot.log" ] && tail -20 "$work/boot.log" >&2
	exit 1
}
ok() { echo "ok: $*"; }

for tool in debootstrap systemd-nspawn nsenter dpkg-deb; do
	command -v $tool >/dev/null || fail "$tool missing (deploy/install-deps.sh installs it)"
done
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, systemd-nspawn)"

# -- the packages
BUILD_DIR=$work/build "$here/build-debs.sh" >"$work/build-debs.log" 2>&1 ||
	{ tail -40 "$work/build-debs.log"; fail "packaging/build-debs.sh (its log: $work/build-debs.log)"; }
grep -E '^[EW]: ' "$work/build-debs.log" || true
ok "packages built, no lintian error: $(cd "$work/build" && echo *.deb)"

# -- a fresh Debian 12 root (minbase plus what boots it: systemd, dbus)
if [ ! -s "$cache" ]; then
	rm -rf "$work/cache-root"
	if ! debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm \
		"$work/cache-root" "$mirror" >"$work/debootstrap.log" 2>&1; then
		tail -5 "$work/debootstrap.log"
		echo "SKIP: debootstrap from $mirror failed: no fresh root to test in"
		exit 77
	fi
	tar -C "$work/cache-root" -cf "$cache.part" . && mv "$cache.part" "$cache"
	rm -rf "$work/cache-root"
fi
cleanup() {
	if [ -n "$npid" ] && kill -0 "$npid" 2>/dev/null; then
		kill -TERM "$npid" 2>/dev/null || true
		sleep 3
		kill -KILL "$npid" 2>/dev/null || true
	fi
	rm -rf "$root"
}
trap cleanup EXIT
rm -rf "$root" && mkdir -p "$root"
tar -C "$root" -xf "$cache"
mkdir -p "$root$debs"
cp "$work"/build/*.deb "$root$debs/"

# in_root CMD -- CMD in the root, not booted (host network: apt reaches the mirror).
# The final echo ends CMD's output with a newline: nspawn's own closing
# message on stderr (about /run/systemd/nspawn/propagate) then has a line of
# its own and is dropped.
in_root() {
	systemd-nspawn -q -D "$root" --register=no --keep-unit --pipe \
		env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		/bin/sh -c "$1; echo" 2>&1 | grep -v 'Attempted to remove disk file system' || true
}

# -- 1. dpkg -i, then apt-get -f install for the libraries it lacks
in_root "dpkg -i $debs/*.deb >/var/tmp/dpkg.log 2>&1; echo \$? >/var/tmp/dpkg.rc
	apt-get -q -y -f install --no-install-recommends >/var/tmp/apt.log 2>&1; echo \$? >/var/tmp/apt.rc"
[ "$(cat "$root/var/tmp/apt.rc")" = 0 ] || { cat "$root/var/tmp/apt.log"; fail "apt-get -f install"; }
for p in rdaxd librdax0 librdax-dev rdax; do
	st=$(in_root "dpkg-query -W -f='\${Status}' $p")
	[ "$st" = "install ok installed" ] || { cat "$root/var/tmp/dpkg.log"; fail "$p: $st"; }
done
ok "dpkg -i (exit $(cat "$root/var/tmp/dpkg.rc"): missing libraries) + apt-get -f install: all four installed"
in_root "getent passwd rdax" | grep -q '^rdax:x:[0-9]*:[0-9]*:rdax daemon:/var/lib/rdax:' ||
	fail "no system user rdax"
in_root "dpkg-query -W -f='\${Conffiles}' rdaxd" | grep -q '/etc/rdax/rdaxd.conf' ||
	fail "/etc/rdax/rdaxd.conf is not a conffile"
[ -L "$root/etc/systemd/system/multi-user.target.wants/rdaxd.service" ] || fail "unit not enabled"
version=$(in_root "rdaxd --version")
[ "$version" = "rdaxd $(dpkg-deb -f "$root$debs"/rdaxd_*.deb Version | sed 's/-[^-]*$//')" ] ||
	fail "rdaxd --version: $version"
for page in man1/rdax.1 man3/librdax.3 man5/rdaxd.conf.5 man8/rdaxd.8; do
	[ -f "$root/usr/share/man/$page.gz" ] || fail "no manual page $page"
done
ok "user rdax, conffile, unit enabled, manual pages, $version"

# -- 2. boot it; the enabled unit starts the daemon
# CAP_SYS_RESOURCE: as on a host, systemd may raise limits (LimitMEMLOCK=)
systemd-nspawn -q -D "$root" --register=no --keep-unit --private-network \
	--capability=CAP_SYS_RESOURCE -b --console=pipe >"$work/boot.log" 2>&1 </dev/null &
npid=$!
leader=""
i=0
while [ -z "$leader" ]; do
	i=$((i + 1))
	if [ $i -gt 300 ] || ! kill -0 $npid 2>/dev/null; then
		fail "the root did not boot"
	fi
	sleep 0.2
	for c in $(pgrep -P $npid || true); do
		[ "$(cat /proc/"$c"/comm 2>/dev/null)" = systemd ] && leader=$c
	done
done
# in_boot CMD -- CMD inside the booted root
in_boot() {
	nsenter -t "$leader" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin /bin/sh -c "$1"
}
i=0
until state=$(in_boot "systemctl is-system-running" 2>/dev/null) ||
	[ "$state" = degraded ]; do
	i=$((i + 1))
	[ $i -le 120 ] || fail "system not up: $state"
	sleep 0.5
done
# active_pid -- wait for rdaxd.service to be active; print its main PID
active_pid() {
	j=0
	until [ "$(in_boot "systemctl is-active rdaxd" || true)" = active ]; do
		j=$((j + 1))
		[ $j -le 120 ] || { in_boot "systemctl status rdaxd --no-pager; journalctl -u rdaxd --no-pager | tail -30" >&2; fail "rdaxd.service not active"; }
		sleep 0.5
	done
	in_boot "systemctl show -p MainPID --value rdaxd"
}
pid=$(active_pid)
status=$(in_boot "systemctl show -p StatusText --value rdaxd")
case $status in
"rdaxd: ready on tcp://127.0.0.1:7470 "*) ;;
*) fail "StatusText: $status" ;;
esac
ok "booted ($state); rdaxd.service active, status: $status"
user=$(in_boot "stat -c %U /proc/$pid")
[ "$user" = rdax ] || fail "the daemon runs as $user"
caps=$(in_boot "grep -E '^Cap(Eff|Prm|Amb|Bnd):' /proc/$pid/status" | awk '{print $2}' | sort -u)
[ "$caps" = 0000000000000000 ] || fail "the daemon has capabilities: $caps"
ok "runs as rdax, no capabilities (effective, permitted, bounding, ambient)"
# LimitMEMLOCK=infinity: systemd raises the limit, which takes CAP_SYS_RESOURCE;
# where this machine itself lacks it, no systemd here can, and only the
# unit's setting is checked
memlock=$(in_boot "grep 'Max locked memory' /proc/$pid/limits")
setting=$(in_boot "systemctl show -p LimitMEMLOCK --value rdaxd")
[ "$setting" = infinity ] || fail "LimitMEMLOCK=$setting"
capbnd=$(sed -n 's/^CapBnd:\t*//p' /proc/self/status)
if [ $((0x$capbnd >> 24 & 1)) = 1 ]; then
	echo "$memlock" | grep -q 'unlimited *unlimited' || fail "memlock limit: $memlock"
	ok "memlock unlimited in the running daemon"
else
	ok "LimitMEMLOCK=infinity set; NOT checked in the daemon: this machine has no CAP_SYS_RESOURCE to raise it ($memlock)"
fi

# the demo: a volume, a write, an fsync, a read back
S=tcp://127.0.0.1:7470
demo=$(in_boot "rdax --server $S volume create demo 64M >/dev/null &&
	echo 'hello, persistent memory' | rdax --server $S write demo 4096 &&
	rdax --server $S fsync demo && rdax --server $S read demo 4096 24") ||
	fail "demo: $demo"
echo "$demo" | grep -q '^hello, persistent memory$' || fail "demo read back: $demo"
ok "demo: created, wrote, fsynced, read back"

report=$(in_boot "systemd-analyze security rdaxd --no-pager" 2>&1 | tail -1)
level=$(echo "$report" | sed -n 's/.*rdaxd.service: \([0-9.]*\).*/\1/p')
if [ -z "$level" ] || ! awk -v l="$level" 'BEGIN { exit !(l <= 3.0) }'; then
	fail "systemd-analyze security of the loaded unit: $report"
fi
ok "systemd-analyze security (loaded unit): $level"

# reinstall: the edited conffile stays, the daemon restarts, data intact
in_boot "echo 'threads = 1' >>/etc/rdax/rdaxd.conf && dpkg -i $debs/rdaxd_*.deb" >"$work/reinstall.log" 2>&1 ||
	{ cat "$work/reinstall.log"; fail "reinstall"; }
tail -1 "$root/etc/rdax/rdaxd.conf" | grep -q '^threads = 1$' || fail "reinstall overwrote the edited configuration"
pid2=$(active_pid)
[ "$pid2" != "$pid" ] || fail "the reinstall did not restart the daemon"
in_boot "rdax --server $S read demo 4096 24" | grep -q '^hello, persistent memory$' ||
	fail "data lost across the restart"
ok "reinstall kept the edited configuration, restarted the daemon (pid $pid -> $pid2), data intact"

# a stop is a clean exit (SIGTERM: drain, write back)
in_boot "systemctl stop rdaxd"
code=$(in_boot "systemctl show -p ExecMainStatus --value rdaxd")
[ "$code" = 0 ] || fail "rdaxd exited $code on stop"
in_boot "journalctl -u rdaxd --no-pager" | grep -q 'stopped$' || fail "no 'stopped' line in the journal"
in_boot "systemctl start rdaxd"
active_pid >/dev/null
ok "systemctl stop: exit 0; started again"

# purge: stopped, packages and configuration gone, the namespace data kept
in_boot "dpkg --purge rdax librdax-dev rdaxd librdax0" >"$work/purge.log" 2>&1 ||
	{ cat "$work/purge.log"; fail "purge"; }
in_boot "pgrep -x rdaxd" >/dev/null && fail "rdaxd still runs after the purge"
load=$(in_boot "systemctl show -p LoadState --value rdaxd")
[ "$load" = not-found ] || fail "unit still known after purge: $load"
[ ! -e "$root/etc/rdax/rdaxd.conf" ] || fail "configuration left after purge"
[ -s "$root/var/lib/rdax/default.ns" ] || fail "purge removed the namespace data"
grep -q '/var/lib/rdax is kept' "$work/purge.log" || fail "purge did not say the data is kept"
ok "purge: daemon stopped, unit gone, configuration gone, /var/lib/rdax kept (said so)"

in_boot "systemctl poweroff" || true
i=0
while kill -0 $npid 2>/dev/null && [ $i -lt 100 ]; do
	i=$((i + 1))
	sleep 0.2
done
echo "packages_fresh_root: all checks passed"
