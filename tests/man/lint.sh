#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# lint.sh MANDIR -- every built man page passes mandoc's and groff's checks
#
# Fails on any mandoc error (-T lint -W error) and on any groff warning (-ww).
# mandoc's style level is not used: scdoc puts a .PP after every heading and
# between blocks, which mandoc notes as "skipping paragraph macro" (redundant,
# harmless); everything above style is checked.
set -uo pipefail
dir=$1
fail=0
n=0
for page in rdax.1 librdax.3 rdaxd.conf.5 rdaxd.8; do
	p="$dir/$page"
	if [ ! -s "$p" ]; then
		echo "lint: $p missing (is the man target built?)"
		fail=1
		continue
	fi
	n=$((n + 1))
	out=$(mandoc -T lint -W error "$p" 2>&1) || fail=1
	[ -n "$out" ] && { echo "$out"; fail=1; }
	out=$(groff -ww -man -Tutf8 -z "$p" 2>&1)
	[ -n "$out" ] && { echo "groff $page: $out"; fail=1; }
done
echo "lint: $n pages checked"
exit "$fail"
