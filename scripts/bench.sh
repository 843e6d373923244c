#!/usr/bin/env bash
# ccpool against its peers (issue 6): plain g++, a capped per-rank pool
# (TORCHINDUCTOR_COMPILE_THREADS=2), ccache, sccache and ccpool, interleaved,
# on workloads a-e, then f: the Redis front against redis-server
# (bench/resp_vs_redis.sh). Writes bench/results/{raw,meta}.json, resp_vs_redis.csv
# and PNG plots, then rewrites the marked sections of BENCHMARKS.md.
#   scripts/bench.sh --quick            about 25 min on an idle 2-core machine
#   scripts/bench.sh                    the full run (R up to 16, K up to 64; long)
#   scripts/bench.sh --only a,b --reps 3 --keep-work
#   scripts/bench.sh --report-only      regenerate BENCHMARKS.md from bench/results
# BUILD_DIR (default build/) holds the ccpool binaries; they are built if missing.
# CCPOOL_BENCH_SOURCES (default ~/.cache/ccpool-bench/sources): workload c's Debian source trees.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
PY=/usr/bin/python3
args=("$@")
quick=() only=a,b,c,d,f reps=1 keep=0 report_only=0 tiny=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=(--quick) ;;
    --tiny) tiny=(--tiny) ;;            # smoke-test sizes, for developing this script
    --only) only=$2; shift ;;
    --reps) reps=$2; shift ;;
    --keep-work) keep=1 ;;
    --report-only) report_only=1 ;;
    -h|--help) sed -n 2,11p "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
results=$root/bench/results
mkdir -p "$results"
# The machine's load at the start and the end of the whole run (workloads and the Redis comparison): the
# report prints both (a shared machine's other work moves every ratio).
loadavg_at() { echo "$1 $(date -u +%FT%TZ) $(cat /proc/loadavg)" >>"$results/loadavg.txt"; }

if [[ $report_only -eq 0 ]]; then
  # Peers and plotting come from Debian; as non-root print what to run.
  need=()
  command -v ccache >/dev/null || need+=(ccache)
  command -v sccache >/dev/null || need+=(sccache)
  command -v hyperfine >/dev/null || need+=(hyperfine)
  command -v ninja >/dev/null || need+=(ninja-build)
  $PY -c 'import matplotlib' 2>/dev/null || need+=(python3-matplotlib)
  [[ -d /usr/src/googletest ]] || need+=(googletest)
  if [[ ${#need[@]} -gt 0 ]]; then
    if [[ $(id -u) -ne 0 ]]; then
      echo "bench.sh: missing ${need[*]}; run as root:" >&2
      echo "  apt-get update && apt-get install -y --no-install-recommends ${need[*]}" >&2
      exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  scripts/setup-deps.sh
  sources=${CCPOOL_BENCH_SOURCES:-${XDG_CACHE_HOME:-$HOME/.cache}/ccpool-bench/sources}
  if [[ ,$only, == *,c,* ]]; then
    # libzstd, xz-utils, leveldb and fmtlib from Debian's source packages; a failed fetch skips those trees (said in the report).
    scripts/fetch-bench-sources.sh "$sources" || echo "bench.sh: could not fetch the workload-c trees; they are skipped" >&2
  fi

  build=${BUILD_DIR:-$root/build}
  mkdir -p "$build" && build=$(cd "$build" && pwd)  # the workloads run from other directories
  echo "== building ccpool (Release) in $build (a no-op when up to date)"
  if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
         cmake --build "$build" -j "$(nproc)" --target ccpool ccpool-client ccpool-shim >/dev/null; }; then
    [[ -x $build/bin/ccpool && -x $build/bin/ccpool-client && -f $build/lib/libccpool-shim.so ]] || exit 1
    echo "bench.sh: the build failed; benchmarking the binaries already in $build" >&2
  fi

  rm -f "$results/loadavg.txt"
  loadavg_at start
  work=$(mktemp -d /tmp/ccpool-bench.XXXXXX)
  cleanup() {
    # Stop every service and server this run started (each has its own socket/port under $work).
    for s in "$work"/contenders/ccpool/g*/run/sock; do
      [[ -S $s ]] && "$build/bin/ccpool" stop --socket "$s" >/dev/null 2>&1 || true
    done
    SCCACHE_SERVER_PORT=4237 sccache --stop-server >/dev/null 2>&1 || true
    [[ $keep -eq 1 ]] && echo "bench.sh: work dir kept: $work" || rm -rf "$work"
  }
  trap cleanup EXIT
  for w in ${only//,/ }; do rm -f "$results/$w"-*.png; done  # the plots of the workloads this run measures
  $PY bench/peers/driver.py --build "$build" --out "$results" --work "$work" --sources "$sources" --only "$only" --reps "$reps" \
    "${quick[@]}" "${tiny[@]}" --command "scripts/bench.sh ${args[*]}"
  if [[ ,$only, == *,f,* ]]; then
    echo "== workload f: the Redis front against redis-server (bench/resp_vs_redis.sh)"
    BUILD_DIR=$build bench/resp_vs_redis.sh --rounds 3
  fi
  loadavg_at end
fi

$PY bench/peers/report.py "$results" "$root/BENCHMARKS.md"
