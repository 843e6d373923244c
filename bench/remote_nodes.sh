#!/usr/bin/env bash
# Cluster tier benchmark (issue 7). Simulated nodes are separate
# `ccpool serve` processes (own store, own socket) sharing one private
# redis-server on a free loopback port. Two measurements, one markdown table:
#
# 1. Hit latency through `ccpool exec`, sequential, N requests, mean and
#    median: local hits (node A's own store) against remote hits (node B, cold
#    store, served from Redis). N distinct declared jobs whose output is SIZE
#    incompressible bytes; misses (node A's first pass) are shown for scale.
# 2. NODES=2 nodes x RANKS ranks x KERNELS Inductor-like kernels, cold: each
#    node runs its ranks through `ccpool run` (one-step g++ .so from a
#    THREADS-thread pool per rank, scripts/lib/rank.py), both nodes at once,
#    once without the tier and once with it. Total executions and wall time.
#    Outputs of every rank are checked byte-identical to each other.
#
#   BUILD_DIR=build-rtier N=50 SIZE=32768 RANKS=8 KERNELS=16 THREADS=8 JOBS=2 bench/remote_nodes.sh
#
# Needs the ccpool, ccpool-client and ccpool-shim targets built in BUILD_DIR.
# Exit 125 when redis-server is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${BUILD_DIR:-$root/build}
build=$(cd "$build" && pwd)
N=${N:-50}
SIZE=${SIZE:-32768}
RANKS=${RANKS:-8}
KERNELS=${KERNELS:-16}
THREADS=${THREADS:-8}
JOBS=${JOBS:-2}
PY=/usr/bin/python3
ccpool=$build/bin/ccpool
[[ -x $ccpool && -x $build/bin/ccpool-client && -e $build/lib/libccpool-shim.so ]] ||
  { echo "build ccpool, ccpool-client and ccpool-shim in $build first" >&2; exit 1; }
[[ -x /usr/bin/redis-server && -x /usr/bin/redis-cli ]] ||
  { echo "SKIP: Debian's redis-server/redis-tools are not installed" >&2; exit 125; }

work=$(mktemp -d /tmp/ccpool-bench-remote.XXXXXX)
pids=()
declare -A node_pid
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# Keys hash the environment a tool sees: every client gets the same one.
export LANG=C LC_ALL=C CCPOOL_NO_AUTOSTART=1
unset CCPOOL_REMOTE CCPOOL_SOCKET CCPOOL_DIR LD_PRELOAD

port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
/usr/bin/redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --daemonize no --logfile "$work/redis.log" &
pids+=($!)
for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis-cli -p "$port" ping >/dev/null
url=redis://127.0.0.1:$port
# Nodes sign what they share (serve --remote requires a key file).
key="$work/cluster.key"
(umask 077; head -c 32 /dev/urandom | base64 >"$key")

# start_node NAME [serve args...]: a node in the foreground (its pid is ours).
start_node() {
  local name=$1; shift
  mkdir -p "$work/$name"
  "$ccpool" serve --foreground --no-resp --socket "$work/$name/run/sock" --dir "$work/$name/store" \
    --jobs "$JOBS" --idle-timeout 1h "$@" >"$work/$name/serve.out" 2>&1 &
  pids+=($!)
  node_pid[$name]=$!
  for _ in $(seq 300); do
    "$ccpool" status --socket "$work/$name/run/sock" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "node $name did not start; see $work/$name/serve.out" >&2; exit 1
}
stop_node() { kill -TERM "${node_pid[$1]}" 2>/dev/null || true; wait "${node_pid[$1]}" 2>/dev/null || true; }
stat_of() { "$ccpool" status --socket "$work/$1/run/sock" --json | $PY -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
wait_stat() {  # NODE KEY VALUE: until KEY >= VALUE
  for _ in $(seq 600); do (( $(stat_of "$1" "$2") >= $3 )) && return 0; sleep 0.05; done
  echo "node $1: $2 never reached $3" >&2; exit 1
}

# --- 1. hit latency ------------------------------------------------------------
echo "== hit latency: $N sequential ccpool exec, $SIZE-byte outputs" >&2
start_node lat-a --remote "$url" --remote-key-file "$key" --remote-prefix lat:
start_node lat-b --remote "$url" --remote-key-file "$key" --remote-prefix lat:
mkdir -p "$work/lat"
for i in $(seq "$N"); do head -c "$SIZE" /dev/urandom >"$work/lat/in_$i.bin"; done
# A script, not `sh -c`: see the report on dash arguments of declared jobs.
printf 'cat "$1" > "$2"\n' >"$work/lat/copy.sh"
# pass NODE: one sequential pass over the N jobs; prints the per-call ms.
pass() {
  local sock=$work/$1/run/sock i t0 t1
  for i in $(seq "$N"); do
    rm -f "$work/lat/out_$i.bin"
    t0=$EPOCHREALTIME
    (cd "$work/lat" && "$ccpool" exec --socket "$sock" --input "in_$i.bin" --output "out_$i.bin" \
       -- /bin/sh copy.sh "in_$i.bin" "out_$i.bin")
    t1=$EPOCHREALTIME
    cmp -s "$work/lat/in_$i.bin" "$work/lat/out_$i.bin" || { echo "wrong output $i" >&2; exit 1; }
    echo "$t0 $t1"
  done | awk '{ printf "%.3f\n", ($2 - $1) * 1000 }'
}
pass lat-a >"$work/miss.ms"
wait_stat lat-a remote_writes "$N"
pass lat-a >"$work/local.ms"
pass lat-b >"$work/remote.ms"
[[ $(stat_of lat-a hits) == "$N" && $(stat_of lat-a executions) == "$N" ]] ||
  { echo "node A: expected $N hits and $N executions" >&2; exit 1; }
[[ $(stat_of lat-b remote_hits) == "$N" && $(stat_of lat-b executions) == 0 ]] ||
  { echo "node B: expected $N remote hits and no execution" >&2; exit 1; }
stop_node lat-a
stop_node lat-b

# --- 2. nodes x ranks x kernels, cold ----------------------------------------------
$PY scripts/lib/gen_kernels.py "$work/kernels" "$KERNELS" >/dev/null
ranks_cmd() {  # OUT: RANKS rank processes at once, all compiling every kernel
  local r
  for r in $(seq "$RANKS"); do
    $PY "$root/scripts/lib/rank.py" "$work/kernels" "$1/rank$r" "$THREADS" &
  done
  wait
}
export -f ranks_cmd
export work RANKS THREADS PY root
# cold CONFIG [serve args...]: both nodes at once; prints "wall executions requests remote_hits".
cold() {
  local cfg=$1 n t0 t1 runs=()
  shift
  for n in a b; do start_node "$cfg-$n" "$@"; done
  t0=$EPOCHREALTIME
  for n in a b; do
    "$ccpool" run --socket "$work/$cfg-$n/run/sock" --ranks "$RANKS" -- \
      bash -c "ranks_cmd $work/$cfg-$n/out" >"$work/$cfg-$n/run.out" 2>&1 &
    runs+=($!)
  done
  for p in "${runs[@]}"; do wait "$p" || { echo "$cfg: a node's ranks failed" >&2; exit 1; }; done
  t1=$EPOCHREALTIME
  local ex=0 rq=0 rh=0
  for n in a b; do
    ex=$((ex + $(stat_of "$cfg-$n" executions)))
    rq=$((rq + $(stat_of "$cfg-$n" requests)))
    rh=$((rh + $(stat_of "$cfg-$n" remote_hits)))
    for f in "$work/$cfg-$n"/out/rank*/*.so; do
      cmp -s "$f" "$work/$cfg-a/out/rank1/$(basename "$f")" || { echo "DIFFERENT: $f" >&2; exit 1; }
    done
  done
  for n in a b; do stop_node "$cfg-$n"; done
  awk -v a="$t0" -v b="$t1" -v e="$ex" -v r="$rq" -v h="$rh" 'BEGIN { printf "%.2f %d %d %d\n", b - a, e, r, h }'
}
echo "== 2 nodes x $RANKS ranks x $KERNELS kernels, cold, without the tier" >&2
cold notier >"$work/notier.res"   # not $(...): the nodes' pids must stay in this shell
read -r t_plain e_plain r_plain h_plain <"$work/notier.res"
echo "== 2 nodes x $RANKS ranks x $KERNELS kernels, cold, with the tier" >&2
cold tier --remote "$url" --remote-key-file "$key" --remote-prefix ranks: >"$work/tier.res"
read -r t_tier e_tier r_tier h_tier <"$work/tier.res"

# --- table ---------------------------------------------------------------------
stats() { sort -n "$1" | awk '{ v[NR] = $1; s += $1 } END { printf "%.2f | %.2f", s / NR, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); jobs per node $JOBS; $(date -u +%F)"
echo
echo "| ccpool exec, sequential, N=$N, $SIZE B output | mean ms | median ms |"
echo "|---|---|---|"
echo "| miss (executes \`sh copy.sh\`) | $(stats "$work/miss.ms") |"
echo "| local hit (node store) | $(stats "$work/local.ms") |"
echo "| remote hit (Redis, then node store) | $(stats "$work/remote.ms") |"
echo
echo "| 2 nodes x $RANKS ranks x $KERNELS kernels, cold | requests | executions | remote hits | wall s |"
echo "|---|---|---|---|---|"
echo "| without the tier | $r_plain | $e_plain | $h_plain | $t_plain |"
echo "| with the tier | $r_tier | $e_tier | $h_tier | $t_tier |"
