#!/bin/bash
# The validation memo on repeated warm rebuilds (BENCHMARKS.md, "Issue 27: acceptance run"); run from the
# repository root: bench/peers/memo_leveldb.sh   (BUILD_DIR default build/; leveldb from scripts/fetch-bench-sources.sh)
# leveldb: one cold build per service (memo off / on), then warm rebuilds alternated; per warm: wall, hits, hit latency sum delta, ninja compile edges.
B=${BUILD_DIR:-build}/bin; B=$(cd "$B" && pwd); SRC=${CCPOOL_BENCH_SOURCES:-$HOME/.cache/ccpool-bench/sources}/leveldb; W=/tmp/memo27; rm -rf $W; mkdir -p $W
for m in off on; do
  mkdir -p $W/$m/run
  cmake -S $SRC -B $W/$m/bld -G Ninja -DCMAKE_BUILD_TYPE=Release -DLEVELDB_BUILD_TESTS=OFF -DLEVELDB_BUILD_BENCHMARKS=OFF -DLEVELDB_INSTALL=OFF >/dev/null
  if [ $m = on ]; then export CCPOOL_VALIDATION_MEMO=1; else export CCPOOL_VALIDATION_MEMO=0; fi
  $B/ccpool run --socket $W/$m/run/sock --dir $W/$m/store -- cmake --build $W/$m/bld -j2 --target leveldb >/dev/null
done
unset CCPOOL_VALIDATION_MEMO
st() { $B/ccpool status --socket $W/$1/run/sock --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["hits"], d["hit_latency"]["sum_s"])'; }
for i in 1 2 3; do for m in off on; do
  cmake --build $W/$m/bld --target clean >/dev/null; read h0 l0 < <(st $m); sz=$(stat -c %s $W/$m/bld/.ninja_log)
  s=$(date +%s.%N); $B/ccpool run --socket $W/$m/run/sock -- cmake --build $W/$m/bld -j2 --target leveldb >/dev/null; e=$(date +%s.%N)
  read h1 l1 < <(st $m)
  ce=$(tail -c +$((sz+1)) $W/$m/bld/.ninja_log | awk -F'\t' '$4 ~ /\.o$/ {if(min==""||$1<min)min=$1; if($2>max)max=$2} END{print max-min}')
  echo "warm$i memo=$m wall $(echo "$e - $s" | bc) hits $((h1-h0)) hit_latency_per_hit_ms $(echo "($l1 - $l0)*1000/($h1-$h0)" | bc -l | cut -c1-5) compile_span_ms $ce load $(cut -d' ' -f1 /proc/loadavg)"
done; done
for m in off on; do $B/ccpool stop --socket $W/$m/run/sock >/dev/null; done
