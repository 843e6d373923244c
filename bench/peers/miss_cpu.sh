#!/usr/bin/env bash
# What a cold build's misses cost the service, in CPU: xz-utils (186 objects,
# its programs included; autotools + libtool, make -j2) built cold under `ccpool run` by each given
# build of ccpool, alternated ROUNDS times, each build with a fresh service and
# store. Per build it prints the service's own CPU per miss (its threads, from
# /proc/PID/stat) against its compilers' CPU per miss (the processes it ran and
# reaped), while the build ran and 3 s after it (what the service does once
# idle), and the mean `collect` stage. The ratio of the two CPUs is steadier
# than the wall on a shared machine, whose speed drifts between builds by up to
# 40 % (BENCHMARKS.md, "Issue 27, fifth pass"). Run from the repository root:
#   bench/peers/miss_cpu.sh [BUILD_DIR...]     (default: build)
# Environment: ROUNDS (default 3), SOURCES (default: scripts/fetch-bench-sources.sh's
# directory; the xz tree is fetched there when missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
case ${1:-} in -h|--help) sed -n 2,14p "$0"; exit 0 ;; esac
builds=("$@")
[[ ${#builds[@]} -gt 0 ]] || builds=(build)
rounds=${ROUNDS:-3}
sources=${SOURCES:-${XDG_CACHE_HOME:-$HOME/.cache}/ccpool-bench/sources}
for tool in make cc python3; do
  command -v "$tool" >/dev/null || { echo "miss_cpu: $tool is missing" >&2; exit 125; }
done
for b in "${builds[@]}"; do
  [[ -x $b/bin/ccpool ]] || { echo "miss_cpu: $b/bin/ccpool is missing: build it first" >&2; exit 1; }
done
[[ -f $sources/xz/.ccpool-fetched ]] || scripts/fetch-bench-sources.sh "$sources"
work=$(mktemp -d /tmp/ccpool-miss-cpu.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "miss_cpu: configuring a copy of xz in $work/xz" >&2
cp -a "$sources/xz" "$work/xz"
(cd "$work/xz" && ./configure CC=cc >/dev/null)
tck=$(getconf CLK_TCK)
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg) ROUNDS=$rounds"

cold() {  # cold BUILD: one cold build of xz under ccpool run
  local b=$1 run pid start end own kids own_after misses collect
  run=$(mktemp -d "$work/run.XXXXXX")
  make -C "$work/xz" clean >/dev/null 2>&1
  "$b/bin/ccpool" serve --socket "$run/sock" --dir "$run/store" >/dev/null
  pid=$(cut -d' ' -f1 "$run/serve.pid")
  start=$(date +%s%N)
  "$b/bin/ccpool" run --socket "$run/sock" --dir "$run/store" -- make -C "$work/xz" -j2 >/dev/null 2>&1
  end=$(date +%s%N)
  read -r own kids < <(awk '{print $14 + $15, $16 + $17}' "/proc/$pid/stat")
  read -r misses collect < <("$b/bin/ccpool" status --socket "$run/sock" --json | python3 -c '
import json, sys; s = json.load(sys.stdin); print(s["misses"], round(s["miss_stages_us"].get("collect", 0)))')
  sleep 3
  own_after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  "$b/bin/ccpool" stop --socket "$run/sock" >/dev/null 2>&1 || true
  python3 -c "
b, tck, m = '$b', $tck, max($misses, 1)
own, kids, after = $own * 1000 / tck / m, $kids * 1000 / tck / m, $own_after * 1000 / tck / m
print(f'{b}: wall {($end - $start) / 1e9:.2f} s, misses $misses, service {own:.1f} ms/miss '
      f'({100 * own / max(kids, 1e-9):.1f} % of its compilers\' {kids:.0f} ms), '
      f'3 s later {after:.1f} ms/miss, collect {$collect / 1000:.1f} ms')"
  rm -rf "$run"
}

for ((r = 0; r < rounds; r++)); do
  for b in "${builds[@]}"; do cold "$b"; done
done
