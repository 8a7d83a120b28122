#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers_help.sh RDAXD RDAX MANDIR [LIBRDAX_MAP] -- the man pages name every flag and
# command of the help texts, and librdax(3) every function the library exports
#
# rdaxd(8) must show every option of "rdaxd --help", rdaxd.conf(5) every one that is
# also a config key ("KEY ="), rdax(1) every global option of "rdax --help", every
# command's usage line as "rdax --help" lists it, and every option of "rdax help
# COMMAND", and librdax(3) every symbol of the library's version script. The pages are
# compared as mandoc renders them, formatting stripped.
# RDAX_MAN_CHECK_EXTRA: one more flag to require (the control test sets one nobody
# documented, and must fail).
set -uo pipefail
rdaxd=$1
rdax=$2
dir=$3
map=${4:-}
missing=0
checked=0

render() { mandoc -T ascii "$dir/$1" | col -b | tr -s ' \n' ' '; }
daemon_text=$(render rdaxd.8)
conf_text=$(render rdaxd.conf.5)
cli_text=$(render rdax.1)
lib_text=$(render librdax.3)

# need TEXT PAGE WHAT -- WHAT must appear in TEXT (PAGE names it in the message)
need() {
	checked=$((checked + 1))
	if ! grep -qF -- "$3" <<<"$1"; then
		echo "$2 does not mention '$3'"
		missing=$((missing + 1))
	fi
}

# options -- the -x and --long-name words of standard input
options() {
	grep -oE -- '(^|[^A-Za-z0-9-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b' | grep -oE -- '-.*' | sort -u
}

for f in $("$rdaxd" --help | options) ${RDAX_MAN_CHECK_EXTRA:-}; do
	need "$daemon_text" rdaxd.8 "$f"
	case $f in
	-h | --config | --format | --force | --help | --version) ;; # flags only
	*) need "$conf_text" rdaxd.conf.5 "${f#--} =" ;;
	esac
done

help=$("$rdax" --help)
for f in $(options <<<"$help"); do
	need "$cli_text" rdax.1 "$f"
done
# the command lines: between "commands:" and the blank line after them
commands=$(sed -n '/^commands:/,/^$/p' <<<"$help" | sed '1d;/^$/d;s/^ *//')
[ -n "$commands" ] || { echo "no commands in rdax --help"; exit 1; }
while IFS= read -r line; do
	need "$cli_text" rdax.1 "$line"
	# the command's name: its words before the first argument (upper case or '[')
	name=$(sed -E 's/ ([A-Z[].*)?$//' <<<"$line")
	[ "$name" = help ] && continue
	# shellcheck disable=SC2086 # a two-word name is two arguments
	for f in $("$rdax" help $name | options); do
		need "$cli_text" rdax.1 "$f"
	done
done <<<"$commands"

if [ -n "$map" ]; then
	for sym in $(grep -oE '\brdax_[a-z0-9_]+' "$map"); do
		need "$lib_text" librdax.3 "$sym()"
	done
fi

echo "covers_help: $checked names checked, $missing missing"
[ "$missing" = 0 ]
