#!/bin/sh
# run-campaign.sh -- libFuzzer over every harness of tests/fuzz, bounded
#
#   tests/fuzz/run-campaign.sh [--seconds N | --runs N] [--harness NAME]...
#                              [--build-dir DIR] [--work-dir DIR] [--jobs N]
#
# Builds a clang tree with libFuzzer, ASan and UBSan (-DTESTS_FUZZ=ON; the
# first time takes minutes, later runs rebuild what changed), then runs each
# harness in turn, starting from its seed corpus in tests/fuzz/corpus/ and
# from what earlier runs in the same work directory found:
#   --seconds N   N seconds in all, shared equally by the harnesses (default
#                 60: the suite's bounded run, ctest fuzz_bounded)
#   --runs N      N executions of each harness instead (the campaign:
#                 --runs 10000000)
#   --harness     only this harness (repeatable); default all
#   --jobs N      harnesses run N at a time (default 1)
#   --build-dir   the clang tree (default build-fuzz)
#   --work-dir    corpora, findings and logs (default build-fuzz/work)
# A finding (crash, leak, sanitizer report, failed check, timeout, memory
# blow-up) stops with exit 1 and names the input libFuzzer saved; reproduce
# with `<build-dir>/tests/fuzz/<harness> <input>`. A regression input goes
# into tests/fuzz/corpus/<harness>/ under a name that says what it found.
# Prints a line per harness (executions, seconds, executions per second,
# coverage: edges and features at the end) and a results table in
# <work-dir>/results.md; exit 0 after "fuzz: N harnesses, no finding".
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
seconds=60
runs=
jobs=1
build=
work=
harnesses=
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) seconds=$2; runs=; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--harness) harnesses="$harnesses $2"; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--build-dir) build=$2; shift 2 ;;
	--work-dir) work=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "run-campaign: unknown argument '$1' (--help)" >&2; exit 2 ;;
	esac
done
for n in "$seconds" ${runs:-1} "$jobs"; do
	case $n in '' | *[!0-9]* | 0) echo "run-campaign: '$n' is not a positive number" >&2; exit 2 ;; esac
done
build=${build:-$src/build-fuzz}
work=${work:-$build/work}
all=$(sed -n 's/^set(RDAX_FUZZERS \(.*\)/\1/p; /^	fuzz_/p' "$src/tests/fuzz/CMakeLists.txt" |
	tr -d ')' | tr ' \t' '\n\n' | grep '^fuzz_' || true)
harnesses=${harnesses:-$all}
count=$(echo $harnesses | wc -w)

cc=$(command -v clang-14 || command -v clang || true)
if [ -z "$cc" ]; then
	echo "run-campaign: clang not found (deploy/install-deps.sh installs clang-14)" >&2
	exit 2
fi
echo "fuzz: building the libFuzzer tree in $build"
mkdir -p "$build"
CC=$cc cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESTS_FUZZ=ON \
	-DDEBUG_SANITIZE=ON -DDEBUG_WERROR=OFF -DBUILD_BENCH=OFF >"$build/fuzz-configure.log" 2>&1 ||
	{ cat "$build/fuzz-configure.log" >&2; exit 2; }
cmake --build "$build" -j"$(nproc)" --target fuzz_all >"$build/fuzz-build.log" 2>&1 ||
	{ tail -40 "$build/fuzz-build.log" >&2; exit 2; }

mkdir -p "$work/artifacts" "$work/logs"
if [ -n "$runs" ]; then
	limit="-runs=$runs"
	echo "fuzz: $count harnesses, $runs executions each"
else
	each=$((seconds / count))
	[ "$each" -ge 1 ] || each=1
	limit="-max_total_time=$each"
	echo "fuzz: $count harnesses, $each s each"
fi

# one_harness NAME -- run it; its summary line goes to $work/logs/NAME.sum
one_harness() {
	name=$1
	mkdir -p "$work/corpus/$name"
	max_len=4096
	[ "$name" = fuzz_native_requests ] && max_len=65536
	log="$work/logs/$name.log"
	start=$(date +%s)
	rc=0
	"$build/tests/fuzz/$name" $limit -max_len=$max_len -timeout=20 -rss_limit_mb=3072 \
		-print_final_stats=1 -artifact_prefix="$work/artifacts/$name-" \
		"$work/corpus/$name" "$src/tests/fuzz/corpus/$name" >"$log" 2>&1 || rc=$?
	secs=$(($(date +%s) - start))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
	files=$(ls "$work/corpus/$name" | wc -l)
	if [ $rc -ne 0 ]; then
		echo "FAIL $name exit $rc after ${secs}s: $(ls "$work/artifacts" | grep "^$name-" | tr '\n' ' ')(log $log)" \
			>"$work/logs/$name.sum"
		grep -m5 -E 'ERROR|SUMMARY|fuzz check failed|Test unit written' "$log" >>"$work/logs/$name.sum" || true
		return 1
	fi
	printf '| %s | %s | %s | %s | %s | %s | %s MB |\n' "$name" "${execs:-?}" "$secs" "${rate:-?}" \
		"${cov:-?}" "$files" "${rss:-?}" >"$work/logs/$name.sum"
}

failed=0
set -- $harnesses
while [ $# -gt 0 ]; do
	pids=
	batch=
	i=0
	while [ $# -gt 0 ] && [ $i -lt "$jobs" ]; do
		one_harness "$1" &
		pids="$pids $!"
		batch="$batch $1"
		i=$((i + 1))
		shift
	done
	for p in $pids; do
		wait "$p" || failed=1
	done
	for h in $batch; do
		cat "$work/logs/$h.sum"
	done
done

{
	echo "| harness | executions | seconds | exec/s | coverage at the end | corpus files | peak RSS |"
	echo "|---|---:|---:|---:|---|---:|---:|"
	for h in $harnesses; do
		grep '^|' "$work/logs/$h.sum" || echo "| $h | FAILED | | | | | |"
	done
} >"$work/results.md"
if [ $failed -ne 0 ]; then
	echo "fuzz: a finding; see the FAIL lines above" >&2
	exit 1
fi
echo "fuzz: $count harnesses, no finding (table: $work/results.md)"
