#!/bin/bash
# ext4_nbd.sh -- the third persistence-testing example: ext4 on an rdax volume
# through the kernel's NBD client, and every crash state of its run checked
# by e2fsck (docs/persistence-testing.md)
#
#   ext4_nbd.sh [--control] [--states N] [--seed S] [--granularity G] RDAXD RDAX WORKDIR
#
# Needs root, the nbd kernel module, nbd-client, mkfs.ext4 and e2fsck (the
# VM of the RDMA suite has them: tests/rdma/guest-suite.sh runs this).
#
#  1. rdaxd in sim mode with --write-log serves a 32 MiB volume over NBD;
#  2. the kernel attaches it (/dev/nbdN), mkfs.ext4 makes a file system on
#     it and the device is detached: the file system is durable, and the
#     volume is exported as BASE, the content the next log starts from;
#  3. attached again (a new open period: a new write log), mounted, and a
#     workload creates, writes, fsyncs, renames and deletes files; then
#     unmounted and detached, which ends the log;
#  4. rdax crash-states builds N states a power cut anywhere in step 3
#     could have left (sampled from seed S), and checks each: e2fsck replays the journal (-E journal_only), then must find
#     the file system clean (e2fsck -fn exits 0). Every state must pass:
#     ext4 orders its journal commits with FLUSH and FUA, which rdaxd makes
#     durable before it acknowledges them.
#
# Granularity: write (the default here) -- each request not yet durable
# reached media whole or not at all. That is the model of a block device,
# which a file system is written for: disks, and persistent memory behind
# the kernel's BTT, write a sector whole; ext4 counts on it for its 1 KiB
# superblock, which it rewrites in place (with FUA, not through the
# journal). --granularity line tears writes at 64-byte lines, as raw
# persistent memory may: ext4 is not made for that, and a state with a
# torn superblock fails e2fsck even with the journal.
#
# --control: the same with a file system made without a journal
# (mkfs.ext4 -O ^has_journal), whose metadata updates are not atomic: some
# crash state must then fail the same check, and the script exits 0 only if
# one did (1 if every state passed: the check could not tell).
#
# Exit: 0 pass (or, with --control, the failure found), 1 fail, 2 usage,
# 3 set-up failure (no nbd module, a tool missing, the daemon did not start).
set -u
control=0 states=40 seed=1 gran=write
while [ $# -gt 0 ]; do
	case $1 in
	--control) control=1 ;;
	--states) states=$2; shift ;;
	--seed) seed=$2; shift ;;
	--granularity) gran=$2; shift ;;
	--*) echo "ext4_nbd: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
[ $# = 3 ] || { echo "usage: ext4_nbd.sh [--control] [--states N] [--seed S] [--granularity line|write] RDAXD RDAX WORKDIR" >&2; exit 2; }
rdaxd=$1 rdax=$2 work=$3
for tool in nbd-client mkfs.ext4 e2fsck; do
	command -v $tool >/dev/null || { echo "ext4_nbd: $tool is missing" >&2; exit 3; }
done
modprobe nbd nbds_max=4 2>/dev/null
[ -b /dev/nbd0 ] || { echo "ext4_nbd: no /dev/nbd0 (the nbd module)" >&2; exit 3; }

mkdir -p "$work" && cd "$work" || exit 3
rm -rf wl states mnt ns daemon.* base.img
mkdir mnt
port=$((20000 + RANDOM % 20000)) nport=$((port + 1))
"$rdaxd" --namespace "$work/ns,size=128M,mode=sim" --listen "tcp://127.0.0.1:$port" \
	--listen "nbd://127.0.0.1:$nport" --write-log "$work/wl" --threads 2 \
	>daemon.out 2>daemon.log &
pid=$!
dev=""
cleanup() {
	mountpoint -q mnt && umount mnt
	[ -n "$dev" ] && nbd-client -d "$dev" >/dev/null 2>&1
	kill -TERM $pid 2>/dev/null && wait $pid
}
trap cleanup EXIT
for _ in $(seq 1 240); do
	grep -q "rdaxd: ready" daemon.out && break
	kill -0 $pid 2>/dev/null || break
	sleep 0.25
done
grep -q "rdaxd: ready" daemon.out || { echo "ext4_nbd: rdaxd did not start" >&2; tail daemon.log >&2; exit 3; }
export RDAX_SERVER=tcp://127.0.0.1:$port
"$rdax" volume create fs 32M || exit 3

# attach -- the volume on the first free /dev/nbdN (a new NBD connection: a new write log)
attach() {
	local d
	for d in /dev/nbd0 /dev/nbd1 /dev/nbd2 /dev/nbd3; do
		if nbd-client -c "$d" >/dev/null 2>&1; then continue; fi
		if nbd-client 127.0.0.1 "$nport" "$d" -N fs -b 4096 >/dev/null 2>&1; then
			dev=$d
			return 0
		fi
	done
	echo "ext4_nbd: nbd-client could not attach the volume" >&2
	return 1
}
detach() { nbd-client -d "$dev" >/dev/null && dev=""; }

# 2. the file system, made durable, and the base image
attach || exit 3
if [ $control = 1 ]; then
	mkfs.ext4 -q -F -O ^has_journal -E nodiscard "$dev" || exit 3
else
	mkfs.ext4 -q -F -E nodiscard "$dev" || exit 3
fi
sync
detach || exit 3
"$rdax" export fs base.img || exit 3

# 3. the workload, recorded
attach || exit 3
mount -t ext4 "$dev" mnt || exit 3
mkdir -p mnt/a/b mnt/c
for i in 1 2 3 4 5 6; do
	head -c $((i * 3000)) /dev/urandom >"mnt/a/f$i"
done
sync mnt/a/f1 mnt/a/f2
echo "one line" >mnt/c/log
for i in 1 2 3; do echo "line $i" >>mnt/c/log; sync mnt/c/log; done
mv mnt/a/f3 mnt/a/b/g3
rm mnt/a/f4
ln mnt/a/f5 mnt/c/hard
head -c 20000 /dev/urandom >mnt/a/b/big && sync -f mnt
umount mnt || exit 3
detach || exit 3
log=$(ls wl/fs.*.wlog | sort -t. -k2 -n | tail -1)
echo "ext4_nbd: the run's write log: $log ($(stat -c %s "$log") bytes)"

# 4. every state must be a file system the journal recovers
cat >check-state.sh <<'EOF'
#!/bin/sh
# check-state.sh IMAGE -- replay the journal of a copy, then it must be clean
copy=$(dirname "$1")/check.img
cp --sparse=always "$1" "$copy" || exit 2
e2fsck -E journal_only -y "$copy" >/dev/null 2>&1
e2fsck -fn "$copy" >"$copy.fsck" 2>&1
rc=$?
[ $rc = 0 ] || { echo "e2fsck -fn exit $rc:"; head -20 "$copy.fsck"; }
rm -f "$copy" "$copy.fsck"
exit $rc
EOF
chmod +x check-state.sh
"$rdax" crash-states "$log" fs --base base.img --out states --max "$states" --seed "$seed" \
	--granularity "$gran" \
	--check "$work/check-state.sh \"\$1\"" >crash-states.out 2>&1
rc=$?
tail -n 25 crash-states.out
if [ $control = 1 ]; then
	if [ $rc = 1 ] && grep -q "fails the check" crash-states.out; then
		echo "ext4_nbd: control: without a journal, a crash state e2fsck must repair was found"
		exit 0
	fi
	echo "ext4_nbd: control: every state of the journal-less file system passed: the check cannot tell"
	exit 1
fi
[ $rc = 0 ] && grep -q "every state passed the check" crash-states.out || exit 1
echo "ext4_nbd: every crash state is a file system the journal recovers"
