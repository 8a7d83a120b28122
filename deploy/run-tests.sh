#!/bin/sh
# run-tests.sh -- install dependencies, build (ASan + UBSan) and run the default test suite.
#   deploy/run-tests.sh            the default suite (bounded, ~minutes)
# Environment: BUILD_DIR (default build-test), CTEST_JOBS (tests run at once,
# default 2), CTEST_ARGS (extra ctest arguments).
set -eu
cd "$(dirname "$0")/.."
deploy/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build-test}
# An optimised build first: some warnings (-Werror) only appear at -O2/-O3.
cmake -S . -B "$BUILD_DIR-release" -DCMAKE_BUILD_TYPE=Release -DDEBUG_WERROR=ON >/dev/null
cmake --build "$BUILD_DIR-release" -j"$(nproc)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug -DDEBUG_SANITIZE=ON -DDEBUG_WERROR=ON >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
cd "$BUILD_DIR"
# Two at a time: the VM suite (rdma_vm_suite, the longest) runs beside the
# rest, which spend much of their time waiting on timeouts and daemons. Tests
# that cannot share hold a RESOURCE_LOCK or RUN_SERIAL (tests/*/CMakeLists.txt).
# shellcheck disable=SC2086
ctest --output-on-failure -j"${CTEST_JOBS:-2}" ${CTEST_ARGS:-}
