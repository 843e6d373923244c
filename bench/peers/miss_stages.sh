#!/usr/bin/env bash
# What a miss costs: the same compile run plainly and through `ccpool exec`, each time with a new -D value so
# that every ccpool request misses (BENCHMARKS.md, "Issue 27, fourth pass"). Per TU (workload b's tiny TU and its
# 2k-line C++ TU), ROUNDS rounds alternate a batch of N plain compiles and a batch of N misses (N/4 for the
# 2k-line TU); prints the mean wall per compile of each and the service's mean time per miss by stage
# (`miss_stages_us` of `ccpool status --json`: everything but `run` is ccpool's own cost). Run from the
# repository root:
#   bench/peers/miss_stages.sh
# Environment: BUILD_DIR (default build), N (default 40), ROUNDS (default 3), CXX (default g++).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
bin=$(cd "${BUILD_DIR:-build}/bin" && pwd)
n=${N:-40} rounds=${ROUNDS:-3} cxx=${CXX:-g++}
for tool in "$cxx" python3; do
  command -v "$tool" >/dev/null || { echo "miss_stages: $tool is missing" >&2; exit 125; }
done
work=$(mktemp -d /tmp/ccpool-miss-stages.XXXXXX)
sock=$work/sock
trap '"$bin/ccpool" stop --socket "$sock" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
cd "$work"
python3 -c "
import sys; sys.path.insert(0, '$root/bench/peers')
from wl_b import TINY, big_tu
open('tiny.cpp', 'w').write(TINY)
open('big.cpp', 'w').write(big_tu())"
"$bin/ccpool" serve --socket "$sock" --dir "$work/store" >/dev/null
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg) N=$n ROUNDS=$rounds"

# batch MODE TU TAG COUNT: COUNT compiles, each with its own -D value; prints the wall in nanoseconds.
batch() {
  local start i
  start=$(date +%s%N)
  for ((i = 0; i < $4; i++)); do
    if [[ $1 == plain ]]; then
      "$cxx" -O2 -DCCPOOL_BENCH_V="$3$i" -c "$2.cpp" -o plain.o
    else
      "$bin/ccpool" exec --socket "$sock" -- "$cxx" -O2 -DCCPOOL_BENCH_V="$3$i" -c "$2.cpp" -o miss.o
    fi
  done
  echo $(($(date +%s%N) - start))
}

stages() {
  "$bin/ccpool" status --socket "$sock" --json |
    python3 -c 'import json, sys; s = json.load(sys.stdin)
print(json.dumps({"misses": s["timed_misses"], "us": s["miss_stages_us"]}))'
}

for tu in tiny big; do
  plain=0 ccpool=0 count=$n
  [[ $tu == tiny ]] || count=$(((n + 3) / 4))  # the 2k-line TU takes about 20 times as long
  before=$(stages)
  for ((r = 0; r < rounds; r++)); do
    plain=$((plain + $(batch plain "$tu" "p$r$tu" "$count")))
    ccpool=$((ccpool + $(batch ccpool "$tu" "c$r$tu" "$count")))
  done
  after=$(stages)
  python3 - "$tu" "$plain" "$ccpool" "$((count * rounds))" "$before" "$after" <<'EOF'
import json, sys
tu, plain, ccpool, count = sys.argv[1], int(sys.argv[2]) / 1e9, int(sys.argv[3]) / 1e9, int(sys.argv[4])
before, after = json.loads(sys.argv[5]), json.loads(sys.argv[6])
m0, m1 = before["misses"], after["misses"]
stages = {k: (after["us"][k] * m1 - before["us"][k] * m0) / (m1 - m0) for k in after["us"]}
overhead = sum(v for k, v in stages.items() if k != "run")
print(f"{tu}: plain {plain / count * 1000:.2f} ms, ccpool miss {ccpool / count * 1000:.2f} ms per compile "
      f"({(ccpool / plain - 1) * 100:+.1f} %), {m1 - m0} misses timed")
print("  service per miss, us: " + ", ".join(f"{k} {v:.0f}" for k, v in stages.items()) +
      f"; all but run {overhead:.0f}")
EOF
done
