#!/bin/sh
# install-test.sh -- what `cmake --install` puts down, checked in a DESTDIR tree
# installed for a prefix other than the default (docs/install.md).
#
#   install-test.sh SRC WORK setup       configure SRC for PREFIX in WORK/build,
#                                        build it, install into WORK/destdir
#   install-test.sh SRC WORK paths       the unit and librdax.pc carry PREFIX's
#                                        paths, nothing lands outside it, and
#                                        `cmake --install --prefix OTHER` is refused
#   install-test.sh SRC WORK config      an edited configuration survives a reinstall
#   install-test.sh SRC WORK pkgconfig   pkg-config with librdax.pc alone; a program
#                                        that includes only <librdax.h> compiles,
#                                        links and runs against the installed rdaxd
#   install-test.sh SRC WORK security    systemd-analyze: the installed unit verifies
#                                        clean (its man pages found in the tree) and
#                                        its exposure is at most 3.0
# Each check has a control that shows it can fail (the same check on a broken
# copy must fail). Environment: CMAKE (default cmake), CC (default cc).
set -eu
src=$1
work=$2
step=$3
CMAKE=${CMAKE:-cmake}
CC=${CC:-cc}
prefix=/opt/rdax-test
# GNUInstallDirs puts the configuration of an /opt prefix in /etc/opt/NAME
sysconfdir=/etc/opt/rdax-test
build=$work/build
dest=$work/destdir
unit=$dest$prefix/lib/systemd/system/rdaxd.service
pc=$dest$prefix/lib/pkgconfig/librdax.pc
conf=$dest$sysconfdir/rdax/rdaxd.conf

fail() {
	echo "FAIL: $*" >&2
	exit 1
}
ok() { echo "ok: $*"; }

# field FILE KEY -- the value of the first KEY=... line of FILE
field() { sed -n "s/^$2=//p" "$1" | head -1; }

install_tree() { DESTDIR=$dest "$CMAKE" --install "$build" >"$work/install.log" 2>&1; }

case $step in
setup)
	rm -rf "$dest" # the build tree is kept: a rerun builds incrementally
	mkdir -p "$work"
	# warnings are the gate of deploy/run-tests.sh's release build, not of this one
	"$CMAKE" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTS=OFF \
		-DBUILD_BENCH=OFF -DDEBUG_WERROR=OFF -DCMAKE_INSTALL_PREFIX=$prefix \
		>"$work/configure.log" 2>&1 ||
		{ cat "$work/configure.log"; fail "configure"; }
	"$CMAKE" --build "$build" -j2 --target rdaxd librdax rdax_cli man >"$work/build.log" 2>&1 ||
		{ tail -50 "$work/build.log"; fail "build"; }
	install_tree || { cat "$work/install.log"; fail "install"; }
	ok "installed for $prefix into $dest"
	;;

paths)
	[ -f "$unit" ] || fail "no unit at $unit"
	exec_start=$(field "$unit" ExecStart)
	[ "$exec_start" = "$prefix/bin/rdaxd --config $sysconfdir/rdax/rdaxd.conf" ] ||
		fail "unit ExecStart: $exec_start"
	[ -x "$dest$prefix/bin/rdaxd" ] || fail "ExecStart's binary is not installed"
	[ -f "$conf" ] || fail "the configuration the unit reads is not installed"
	! grep -n '@[A-Z_]*@' "$unit" || fail "unsubstituted @VAR@ in the unit"
	ok "unit: $exec_start"

	[ -f "$pc" ] || fail "no librdax.pc at $pc"
	[ "$(field "$pc" prefix)" = "$prefix" ] || fail "librdax.pc prefix: $(field "$pc" prefix)"
	libdir=$(PKG_CONFIG_LIBDIR=$(dirname "$pc") pkg-config --variable=libdir librdax)
	incdir=$(PKG_CONFIG_LIBDIR=$(dirname "$pc") pkg-config --variable=includedir librdax)
	[ "$libdir" = "$prefix/lib" ] || fail "librdax.pc libdir: $libdir"
	[ "$incdir" = "$prefix/include" ] || fail "librdax.pc includedir: $incdir"
	[ -e "$dest$libdir/librdax.so" ] || fail "no librdax.so in libdir"
	[ -f "$dest$incdir/librdax.h" ] || fail "no librdax.h in includedir"
	ok "librdax.pc: libdir $libdir, includedir $incdir"

	files=$(cd "$dest" && find . ! -type d)
	stray=$(echo "$files" | grep -v -e "^\.$prefix/" -e "^\.$sysconfdir/" || true)
	[ -z "$stray" ] || fail "installed outside the prefix: $stray"
	ok "every file under $prefix or $sysconfdir"

	# another prefix at install time would leave the configured paths inside
	other=$work/other-prefix
	rm -rf "$other"
	if "$CMAKE" --install "$build" --prefix "$other" >"$work/other.log" 2>&1; then
		fail "cmake --install --prefix $other was not refused"
	fi
	grep -q "configured for the prefix $prefix" "$work/other.log" ||
		{ cat "$work/other.log"; fail "no explanation for the refused --prefix"; }
	[ ! -e "$other" ] || fail "the refused install still wrote to $other"
	ok "cmake --install --prefix OTHER refused, nothing written"
	;;

config)
	example=$src/deploy/rdaxd.conf.example
	cmp -s "$conf" "$example" || fail "the installed configuration is not the example"
	printf 'threads = 3\n' >>"$conf"
	# control: damage the unit too -- the reinstall must restore it, so it did run
	echo garbage >"$unit"
	install_tree || { cat "$work/install.log"; fail "reinstall"; }
	grep -q '^ExecStart=' "$unit" || fail "control: the reinstall did not restore the unit"
	tail -1 "$conf" | grep -q '^threads = 3$' || fail "the reinstall overwrote the edited configuration"
	grep -q "Kept (exists): $conf" "$work/install.log" || fail "the reinstall did not say it kept $conf"
	ok "edited configuration kept by a reinstall (which restored the damaged unit)"
	rm "$conf"
	install_tree || fail "reinstall"
	cmp -s "$conf" "$example" || fail "a removed configuration was not installed again"
	ok "a missing configuration is installed from the example"
	;;

pkgconfig)
	# only librdax.pc is visible: no other package's development files
	PKG_CONFIG_LIBDIR=$(dirname "$pc")
	PKG_CONFIG_SYSROOT_DIR=$dest
	export PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
	flags=$(pkg-config --cflags --libs librdax) || fail "pkg-config --cflags --libs librdax"
	echo "$flags" | grep -q -- "-I$dest$prefix/include" || fail "cflags: $flags"
	echo "$flags" | grep -q -- "-lrdax" || fail "libs: $flags"
	ok "pkg-config --cflags --libs librdax: $flags"
	# control: the private dependencies as Requires.private need their .pc files
	ctl=$work/pc-control
	rm -rf "$ctl" && mkdir -p "$ctl"
	sed 's/^Libs.private:.*/Requires.private: libprotobuf-c librdmacm libibverbs/' "$pc" >"$ctl/librdax.pc"
	if PKG_CONFIG_LIBDIR=$ctl pkg-config --cflags --libs librdax >/dev/null 2>&1; then
		fail "control: pkg-config did not need the Requires.private packages"
	fi
	ok "control: with Requires.private, pkg-config fails without the others' .pc files"

	prog=$work/hello
	cat >"$prog.c" <<-'EOF'
		/* only the public header: it must bring what its declarations use */
		#include <librdax.h>
		int main(int argc, char **argv);
		int main(int argc, char **argv)
		{
			struct rdax_conn *conn;
			struct rdax_volume *vol;
			static const char msg[] = "installed";
			char back[sizeof(msg)];
			uint64_t written_back = 0;
			if (argc != 2 || rdax_connect(argv[1], NULL, &conn) != 0)
				return 2;
			if (rdax_volume_create(conn, "hello", (uint64_t)1 << 20, 0) != 0 ||
			    rdax_volume_open(conn, "hello", &vol) != 0 ||
			    rdax_write(vol, 4096, msg, sizeof(msg), 0) != 0 ||
			    rdax_fsync(vol, 0, 0, &written_back) != 0 ||
			    rdax_read(vol, 4096, back, sizeof(back)) != 0)
				return 3;
			for (size_t i = 0; i < sizeof(msg); i++)
				if (back[i] != msg[i])
					return 4;
			rdax_volume_close(&vol);
			rdax_disconnect(&conn);
			return written_back > 0 ? 0 : 5;
		}
	EOF
	# shellcheck disable=SC2086
	$CC -std=c99 -pedantic -Wall -Wextra -Werror -o "$prog" "$prog.c" $flags ||
		fail "a program including only <librdax.h> does not build"
	if command -v c++ >/dev/null; then
		# shellcheck disable=SC2046
		c++ -fsyntax-only -Wall -Werror -x c++ "$prog.c" $(pkg-config --cflags librdax) ||
			fail "<librdax.h> does not compile as C++"
	fi
	ok "built with -std=c99 -pedantic -Werror (and as C++) from the installed tree"
	# control: the header without its <stdint.h> must not compile the program
	mkdir -p "$ctl/include"
	grep -v '#include <stdint.h>' "$dest$prefix/include/librdax.h" >"$ctl/include/librdax.h"
	if $CC -std=c99 -Werror -fsyntax-only -I"$ctl/include" "$prog.c" 2>/dev/null; then
		fail "control: a header missing <stdint.h> still compiled"
	fi
	ok "control: the compile check catches a header missing an include"

	ldd_out=$(LD_LIBRARY_PATH=$dest$prefix/lib ldd "$prog")
	echo "$ldd_out" | grep -q "librdax.so.0 => $dest$prefix/lib/librdax.so.0" ||
		fail "not linked against the installed librdax: $ldd_out"
	# the installed daemon, on an emulated namespace and a free port
	run=$work/run
	rm -rf "$run" && mkdir -p "$run"
	"$dest$prefix/bin/rdaxd" --namespace "$run/ns,size=64M" --listen tcp://127.0.0.1:0 \
		--threads 1 >"$run/out" 2>"$run/log" &
	pid=$!
	trap 'kill $pid 2>/dev/null || true' EXIT
	i=0
	until grep -q '^rdaxd: ready on' "$run/out"; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 $pid 2>/dev/null; then
			cat "$run/log" >&2
			fail "the installed rdaxd did not get ready"
		fi
		sleep 0.1
	done
	url=$(sed -n 's/^rdaxd: ready on \(tcp:\/\/[0-9.:]*\).*/\1/p' "$run/out")
	LD_LIBRARY_PATH=$dest$prefix/lib "$prog" "$url" || fail "the program failed: exit $?"
	kill -TERM $pid
	wait $pid || fail "the installed rdaxd exited $? after SIGTERM"
	trap - EXIT
	ok "it wrote, fsynced and read back through the installed librdax and rdaxd ($url)"
	;;

security)
	command -v systemd-analyze >/dev/null || fail "no systemd-analyze (deploy/install-deps.sh installs systemd)"
	# verify: the unit as installed, its ExecStart pointed into the DESTDIR
	# (the binary is checked to exist) and its Documentation= man pages
	# looked up there; any message is a failure
	command -v man >/dev/null || fail "no man (deploy/install-deps.sh installs man-db)"
	tmp=$work/unit-check
	rm -rf "$tmp" && mkdir -p "$tmp"
	sed "s|^ExecStart=$prefix|ExecStart=$dest$prefix|" "$unit" >"$tmp/rdaxd.service"
	out=$(MANPATH=$dest$prefix/share/man systemd-analyze verify "$tmp/rdaxd.service" 2>&1) ||
		fail "verify: $out"
	[ -z "$out" ] || fail "systemd-analyze verify: $out"
	ok "systemd-analyze verify: no message"
	printf 'BogusKey=1\n' >>"$tmp/rdaxd.service"
	out=$(MANPATH=$dest$prefix/share/man systemd-analyze verify "$tmp/rdaxd.service" 2>&1 || true)
	[ -n "$out" ] || fail "control: verify said nothing about an unknown key"
	ok "control: verify reports an unknown key"

	# security, offline (the unit file alone): --threshold=30 is 3.0 on the
	# printed scale; the printed level is checked as well
	analyze() {
		systemd-analyze security --offline=yes --threshold=30 --no-pager "$1" >"$tmp/report" 2>&1
	}
	analyze "$unit" || { cat "$tmp/report"; fail "systemd-analyze security: above 3.0"; }
	level=$(sed -n 's/.*Overall exposure level for rdaxd.service: \([0-9.]*\).*/\1/p' "$tmp/report")
	[ -n "$level" ] || { cat "$tmp/report"; fail "no exposure level in the report"; }
	awk -v l="$level" 'BEGIN { exit !(l <= 3.0) }' || fail "exposure $level above 3.0"
	ok "systemd-analyze security --offline=yes: exposure $level (at most 3.0)"
	# control: the unit without its sandboxing lines must be rated above 3.0
	sed -e '/^Protect/d' -e '/^Private/d' -e '/^Restrict/d' -e '/^SystemCall/d' \
		-e '/^CapabilityBoundingSet/d' -e '/^NoNewPrivileges/d' -e '/^User=/d' \
		-e '/^Memory/d' -e '/^Lock/d' -e '/^ProcSubset/d' -e '/^Device/d' \
		"$unit" >"$tmp/weak.service"
	if analyze "$tmp/weak.service"; then
		fail "control: the unit without sandboxing still passed"
	fi
	ok "control: the unit without its sandboxing is rated $(sed -n 's/.*Overall exposure level for weak.service: \([0-9.]*\).*/\1/p' "$tmp/report")"
	;;

*)
	fail "unknown step $step"
	;;
esac
