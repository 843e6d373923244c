#!/usr/bin/env bash
# Installs missing packages, builds (Release), and runs every test with CTest.
#   scripts/test.sh            full run
#   BUILD_DIR=build scripts/test.sh
#   CCPOOL_TEST_SANITIZE=1     also build and run the unit tests under ASan+UBSan
#   CCPOOL_VENV=DIR            the torch venv (default $BUILD_DIR/venv; setup-deps.sh makes it)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

jobs=$(nproc)
build=${BUILD_DIR:-$root/build}
venv=${CCPOOL_VENV:-$build/venv}
CCPOOL_VENV=$venv scripts/setup-deps.sh

# Layout first: every C and C++ file as .clang-format says (--fix rewrites them).
scripts/check-format.sh

# With ccache, the wheel the packaging tests build (tests/packaging: the same
# compilers and launcher) compiles nothing again.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCCPOOL_BUILD_FUZZ=ON \
  -DCCPOOL_TORCH_VENV="$venv" "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$jobs"

# The libraries again under clang's -Wthread-safety (base/thread_annotations.h):
# a GUARDED_BY member used without its lock, or a REQUIRES function called
# without it, fails the run. Library targets only, so it costs little.
tsa=${build}-tsa
cmake -S . -B "$tsa" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" -DCCPOOL_BUILD_TESTS=OFF -DCCPOOL_BUILD_BENCH=OFF >/dev/null
cmake --build "$tsa" -j "$jobs" --target ccpool_base ccpool_cache ccpool_pool ccpool_ipc ccpool_compiler \
  ccpool_remote ccpool_resp ccpool_service ccpool_client ccpool_launch ccpool_workers

export CCPOOL_TEST_TMP=${CCPOOL_TEST_TMP:-$(mktemp -d /tmp/ccpool-tests.XXXXXX)}
# Cross-uid tests run a client as uid 65534: it must be able to traverse to
# their sockets, so that the services' own peer checks are what refuse it.
chmod 0755 "$CCPOOL_TEST_TMP"
# Tests start their own services and redis-servers; none may leak into the user's.
unset CCPOOL_SOCKET CCPOOL_DIR CCPOOL_REMOTE LD_PRELOAD || true

# Skipped tests: when the script ends, pass or fail, list every skipped test with its
# reason (scripts/skip_summary.py), keeping the exit status. Each ctest run writes JUnit
# XML to a file in junit_reports; a suite that runs ctest elsewhere adds its own file.
junit_reports=("$build/Testing/ccpool-junit.xml" "${build}-asan/Testing/ccpool-junit.xml")
rm -f "${junit_reports[@]}"
trap 'rc=$?; /usr/bin/python3 "$root/scripts/skip_summary.py" "${junit_reports[@]}" || true; exit $rc' EXIT

cd "$build"
ctest --output-on-failure -j "$jobs" --timeout 600 --output-junit "${junit_reports[0]}"

if [[ "${CCPOOL_TEST_SANITIZE:-0}" == 1 ]]; then
  san=${build}-asan
  cmake -S "$root" -B "$san" -DCMAKE_BUILD_TYPE=Debug -DCCPOOL_SANITIZE=ON -DCCPOOL_BUILD_BENCH=OFF >/dev/null
  cmake --build "$san" -j "$jobs"
  (cd "$san" && ctest --output-on-failure -j "$jobs" -L unit --output-junit "${junit_reports[1]}")
fi
