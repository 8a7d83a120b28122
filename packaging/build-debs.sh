#!/bin/sh
# build-debs.sh -- build rdax's Debian packages (rdaxd, librdax0, librdax-dev,
# rdax) with CPack and check them with lintian (docs/install.md).
#   packaging/build-debs.sh        packages in $BUILD_DIR (default build-deb)
# Environment: BUILD_DIR; LINTIAN=0 skips lintian. Exits non-zero if the build
# fails or lintian reports an error (warnings are printed, not fatal).
set -eu
cd "$(dirname "$0")/.."
src=$(pwd)
BUILD_DIR=${BUILD_DIR:-build-deb}

# Debian's build flags with every hardening feature (fortify, stack protector,
# relro, bindnow, PIE), as a package built by dpkg-buildpackage would get.
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
cflags="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CFLAGS)"
ldflags=$(dpkg-buildflags --get LDFLAGS)
# reproducible: the changelog's date is the last commit's
if [ -z "${SOURCE_DATE_EPOCH:-}" ] && git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	SOURCE_DATE_EPOCH=$(git -C "$src" log -1 --format=%ct)
	export SOURCE_DATE_EPOCH
fi

# /usr, with the unit and the udev rule where Debian 12 keeps them (/lib);
# CMAKE_BUILD_TYPE=None: the flags above and nothing else. No -Werror: like
# any Debian package build, a new compiler's warning must not stop it
# (deploy/run-tests.sh's release build is the warnings gate).
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=None -DBUILD_TESTS=OFF -DBUILD_BENCH=OFF \
	-DDEBUG_WERROR=OFF -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_DOCDIR=share/doc/rdaxd \
	-DRDAX_SYSTEMD_UNITDIR=/lib/systemd/system -DRDAX_UDEVRULESDIR=/lib/udev/rules.d \
	-DRDAX_SYSUSERSDIR=/usr/lib/sysusers.d -DBUILD_DEB_DOCS=ON \
	-DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
	-DCMAKE_SHARED_LINKER_FLAGS="$ldflags" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" >/dev/null
rm -f "$BUILD_DIR"/*.deb
(cd "$BUILD_DIR" && cpack -G DEB >/dev/null)
ls "$BUILD_DIR"/*.deb

if [ "${LINTIAN:-1}" != 0 ]; then
	echo "== lintian"
	lintian --fail-on error "$BUILD_DIR"/*.deb
fi
