#!/usr/bin/env bash
# Where a real tree's warm rebuilds spend the service's time, by hit stage, with the validation memo on and off
# (BENCHMARKS.md, "Issue 27, third pass"). Per CMake tree and memo setting: a fresh service and store, one cold
# build under `ccpool run`, then ROUNDS clean + rebuilds; per rebuild the wall, the hits, the service's mean time
# per hit by stage (`hit_stage_seconds` deltas from `ccpool status --json`) and the memo's counters. Run from the
# repository root:
#   bench/peers/warm_stages.sh [TREE...]      TREE: leveldb (default), googletest, fmt, or a CMake source dir
# Environment: BUILD_DIR (default build), ROUNDS (default 3), MEMO (default "on off"),
# CCPOOL_BENCH_SOURCES (scripts/fetch-bench-sources.sh's directory), READERS=1 (before each rebuild, another
# process reads every file of /usr/include and of the tree, as other compiles on a node would).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(cd "${BUILD_DIR:-build}/bin" && pwd)
sources=${CCPOOL_BENCH_SOURCES:-${XDG_CACHE_HOME:-$HOME/.cache}/ccpool-bench/sources}
rounds=${ROUNDS:-3}
trees=("$@")
[[ ${#trees[@]} -gt 0 ]] || trees=(leveldb)
for tool in cmake ninja python3; do
  command -v "$tool" >/dev/null || { echo "warm_stages: $tool is missing" >&2; exit 125; }
done
work=$(mktemp -d /tmp/ccpool-warm-stages.XXXXXX)
sock=
trap '[[ -n $sock ]] && "$bin/ccpool" stop --socket "$sock" >/dev/null 2>&1; rm -rf "$work"' EXIT

source_of() {
  case $1 in
    googletest) echo /usr/src/googletest ;;
    leveldb | fmt) echo "$sources/$1" ;;
    *) echo "$1" ;;
  esac
}

# The status fields this script reads, as one JSON line.
snapshot() {
  "$bin/ccpool" status --socket "$sock" --json |
    python3 -c 'import json, sys; s = json.load(sys.stdin)
print(json.dumps({"hits": s["hits"], "misses": s["misses"], "stages": s["hit_stage_seconds"],
                  "memo": s["validation_memo"]}))'
}

report() {  # $1 $2: snapshots before and after; $3: the wall in ms
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
a, b, wall = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
hits = b["hits"] - a["hits"]
per = {k: (v - a["stages"].get(k, 0)) * 1e6 / max(hits, 1) for k, v in b["stages"].items()}
memo = {k: b["memo"].get(k, 0) - a["memo"].get(k, 0) for k in ("served", "learned", "deferred", "probes")}
print(f"  wall {wall} ms, {hits} hits, {b['misses'] - a['misses']} misses; service per hit (us): " +
      ", ".join(f"{k} {v:.0f}" for k, v in per.items()) + f"; sum {sum(per.values()):.0f}; memo {memo}")
PY
}

for tree in "${trees[@]}"; do
  src=$(source_of "$tree")
  [[ -f $src/CMakeLists.txt ]] || { echo "warm_stages: no CMake tree at $src (scripts/fetch-bench-sources.sh)" >&2; exit 125; }
  for memo in ${MEMO:-on off}; do
    dir=$work/$(basename "$src")-$memo
    mkdir -p "$dir/run"
    sock=$dir/run/sock
    cmake -S "$src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLEVELDB_BUILD_TESTS=OFF \
      -DLEVELDB_BUILD_BENCHMARKS=OFF -DLEVELDB_INSTALL=OFF -DFMT_TEST=OFF -DFMT_DOC=OFF -DFMT_INSTALL=OFF \
      >/dev/null 2>&1
    value=1
    [[ $memo == on ]] || value=0
    echo "== $tree, memo $memo (load $(cut -d' ' -f1-3 /proc/loadavg))"
    start=$(date +%s%N)
    CCPOOL_VALIDATION_MEMO=$value "$bin/ccpool" run --socket "$sock" --dir "$dir/store" -- \
      cmake --build "$dir/build" -j "$(nproc)" >/dev/null
    echo "  cold build $(( ($(date +%s%N) - start) / 1000000 )) ms"
    for round in $(seq "$rounds"); do
      cmake --build "$dir/build" --target clean >/dev/null
      if [[ ${READERS:-0} == 1 ]]; then find /usr/include "$src" -type f -exec cat {} + >/dev/null; fi
      before=$(snapshot)
      start=$(date +%s%N)
      "$bin/ccpool" run --socket "$sock" -- cmake --build "$dir/build" -j "$(nproc)" >/dev/null
      wall=$(( ($(date +%s%N) - start) / 1000000 ))
      echo -n "  warm $round:"
      report "$before" "$(snapshot)" "$wall"
    done
    "$bin/ccpool" stop --socket "$sock" >/dev/null
    sock=
  done
done
