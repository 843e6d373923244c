#!/usr/bin/env bash
# Runs the Google Benchmark programs of every library and saves their output
# under bench/results/micro/, for the per-issue sections of BENCHMARKS.md.
#   BUILD_DIR=build bench/micro.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
out=bench/results/micro
mkdir -p "$out"
cmake --build "$build" -j "$(nproc)" --target store_bench service_bench compiler_bench shim_bench \
  ipc_bench resp_bench remote_bench pool_bench >/dev/null
run() {  # name args...
  local name=$1; shift
  echo "== $name" >&2
  { echo "# $build/bin/$name $*"; echo "# $(date -u '+%F %T') UTC, load: $(cut -d' ' -f1-3 /proc/loadavg)";
    "$build/bin/$name" "$@" 2>&1; } > "$out/$name.txt"
}
run store_bench --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
run service_bench --benchmark_min_time=0.3
run compiler_bench --benchmark_min_time=0.3
run shim_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
run ipc_bench --benchmark_min_time=0.2
run resp_bench --benchmark_min_time=0.2
run remote_bench --benchmark_min_time=0.2
run pool_bench --benchmark_min_time=0.2
echo "results in $out/" >&2
