#!/bin/sh
# powercut-campaign.sh -- a long power-cut campaign: N kill -9 cuts of a sim-mode
# rdaxd under load, every acknowledged fsync checked after each restart.
#
#   deploy/powercut-campaign.sh [CUTS] [SEED]
#
# CUTS defaults to 1000. SEED (optional) makes the first batch reproducible;
# every batch prints its seed and the command that reruns it. The cuts run in
# batches of BATCH (default 200) cuts per powercut process, each batch on a
# fresh namespace. Before the campaign the control (the daemon with
# RDAX_FAULTS=skip-writeback) must show that the check detects a lost
# write-back; otherwise the campaign would prove nothing and stops.
#
# Environment: BUILD_DIR (default build-campaign; configured and built here,
# without sanitizers unless SANITIZE=1), BATCH, LOADERS (default 4),
# CLEAN_EVERY (default 10: after every 10 cuts one round ends with SIGTERM
# instead, where every completed write must survive; 0: none),
# TMPDIR (where the namespaces and logs go).
# Exit: 0 all cuts passed; 1 a loss was found (its files are kept and named);
# 3 the control did not detect the loss, or the harness failed.
set -eu
cd "$(dirname "$0")/.."

cuts=${1:-1000}
seed=${2:-}
batch=${BATCH:-200}
loaders=${LOADERS:-4}
clean=${CLEAN_EVERY:-10}
BUILD_DIR=${BUILD_DIR:-build-campaign}
case $cuts in '' | *[!0-9]*) echo "usage: $0 [CUTS] [SEED]" >&2; exit 2 ;; esac
case $batch in '' | *[!0-9]* | 0) echo "BATCH must be a positive number" >&2; exit 2 ;; esac

if [ "${SANITIZE:-0}" = 1 ]; then
	san=ON
else
	san=OFF
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEBUG_SANITIZE=$san >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target powercut powercut_load rdaxd >/dev/null
pc="$BUILD_DIR/tests/integration/powercut"

echo "== control: the check must detect a skipped write-back"
if ! "$pc" --control --cuts 20 --loaders "$loaders"; then
	echo "== the control did not detect the loss: the campaign would prove nothing" >&2
	exit 3
fi

start=$(date +%s)
done_cuts=0
n=0
while [ "$done_cuts" -lt "$cuts" ]; do
	left=$((cuts - done_cuts))
	this=$((left < batch ? left : batch))
	n=$((n + 1))
	if [ -n "$seed" ] && [ $n -eq 1 ]; then
		bseed=$seed
	else
		# 60 random bits from the kernel
		bseed=0x$(od -An -N8 -tx8 /dev/urandom | tr -d ' ' | cut -c2-)
	fi
	echo "== batch $n: $this cuts, seed $bseed ($done_cuts of $cuts done)"
	rc=0
	"$pc" --cuts "$this" --seed "$bseed" --loaders "$loaders" --clean-every "$clean" || rc=$?
	if [ $rc -ne 0 ]; then
		echo "== batch $n FAILED (exit $rc) after $done_cuts earlier cuts;" \
			"rerun: $pc --cuts $this --seed $bseed --loaders $loaders --clean-every $clean" \
			"--keep --verbose" >&2
		[ $rc -eq 1 ] && exit 1
		exit 3
	fi
	done_cuts=$((done_cuts + this))
done
echo "== campaign passed: $done_cuts cuts in $(($(date +%s) - start)) s, no acknowledged data lost"
