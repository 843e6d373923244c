#!/usr/bin/env bash
# The Redis-protocol front against a real redis-server (issue 16), measured with
# redis-benchmark in one run, interleaved round by round so both see the same
# machine load:
#   - `-t set,get -n N -c 50 -d 1024` over loopback TCP;
#   - `-t set -r 100000`, the same over TCP with keys drawn from 100000 (without
#     -r redis-benchmark SETs one key, which the front's group commit writes
#     once per batch; this row shows SETs of distinct keys, no goal);
#   - the same with `-P 16` over the Unix sockets.
# Peers: redis-server with its default persistence (RDB snapshots, no per-write
# fsync) and redis-server with `appendonly yes, appendfsync always` (a durable
# reply, like the front's). Everything binds 127.0.0.1 or a Unix socket in a
# private temporary directory and is stopped on exit.
#   bench/resp_vs_redis.sh [--rounds R] [--requests N]
# Writes bench/results/resp_vs_redis.csv (every run) and the table between the
# resp-vs-redis markers of BENCHMARKS.md (medians over the rounds).
# BUILD_DIR (default build/) holds bin/ccpool.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
rounds=3 requests=20000
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --requests) requests=$2; shift ;;
    -h|--help) sed -n 2,15p "$0"; exit 0 ;;
    *) echo "resp_vs_redis.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
for tool in redis-server redis-benchmark redis-cli; do
  command -v $tool >/dev/null || { echo "resp_vs_redis.sh: $tool not found: apt-get install redis-server redis-tools" >&2; exit 125; }
done
ccpool=${BUILD_DIR:-$root/build}/bin/ccpool
[[ -x $ccpool ]] || { echo "resp_vs_redis.sh: $ccpool not built: cmake --build build --target ccpool" >&2; exit 125; }

work=$(mktemp -d /tmp/ccpool-respbench.XXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ping() {  # host args...
  for _ in $(seq 100); do redis-cli "$@" PING 2>/dev/null | grep -q PONG && return 0; sleep 0.1; done
  echo "resp_vs_redis.sh: no PONG from $*" >&2; exit 1
}

front_port=$(free_port)
mkdir -p "$work/ccpool"
CCPOOL_DIR="$work/store" "$ccpool" serve --foreground --socket "$work/ccpool/sock" --dir "$work/store" \
  --resp-port "$front_port" --idle-timeout 0 >"$work/ccpool.log" 2>&1 &
pids+=($!)
wait_ping -h 127.0.0.1 -p "$front_port"

start_redis() {  # name extra-args...; sets $port
  local name=$1; shift
  port=$(free_port)
  mkdir -p "$work/$name"
  redis-server --bind 127.0.0.1 --port "$port" --unixsocket "$work/$name/redis.sock" --unixsocketperm 700 \
    --dir "$work/$name" --daemonize no --logfile "$work/$name/log" "$@" >/dev/null 2>&1 &
  pids+=($!)
  wait_ping -h 127.0.0.1 -p "$port"
}
start_redis redis
redis_port=$port
start_redis redis-aof --appendonly yes --appendfsync always
aof_port=$port

declare -A tcp=([ccpool]=$front_port [redis]=$redis_port [redis-aof]=$aof_port)
declare -A unix=([ccpool]=$work/ccpool/resp.sock [redis]=$work/redis/redis.sock [redis-aof]=$work/redis-aof/redis.sock)

# The disk's flush latency bounds a durable SET: 50 clients, one reply each per
# commit, one fdatasync per commit => at most 50 / fdatasync SETs per second.
# Measured before every round (other load on the disk changes it).
fsync_probe() {
  /usr/bin/python3 - "$work/store" <<'PY'
import os, statistics, sys, time
path = os.path.join(sys.argv[1], "fsync-probe")
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
times = []
for i in range(40):
    os.pwrite(fd, b"x" * 4096, (i % 8) * 4096)
    t = time.perf_counter(); os.fdatasync(fd); times.append(time.perf_counter() - t)
os.close(fd); os.unlink(path)
print("%.2f" % (statistics.median(times) * 1e3))
PY
}
fsyncs=()

csv=$root/bench/results/resp_vs_redis.csv
mkdir -p "$(dirname "$csv")"
echo "round,server,mode,test,rps,avg_ms,p50_ms,p95_ms,p99_ms,load1" >"$csv"
for round in $(seq "$rounds"); do
  fsyncs+=("$(fsync_probe)")
  for server in ccpool redis redis-aof; do
    for mode in tcp tcp-keys unix-P16; do
      tests=set,get keys=()
      case $mode in
        tcp) target=(-h 127.0.0.1 -p "${tcp[$server]}"); pipe=1 ;;
        tcp-keys) target=(-h 127.0.0.1 -p "${tcp[$server]}"); pipe=1 tests=set keys=(-r 100000) ;;
        unix-P16) target=(-s "${unix[$server]}"); pipe=16 ;;
      esac
      load=$(cut -d' ' -f1 /proc/loadavg)
      redis-benchmark "${target[@]}" -t "$tests" "${keys[@]}" -n "$requests" -c 50 -d 1024 -P "$pipe" --csv 2>/dev/null |
        tail -n +2 | tr -d '"' |
        awk -F, -v r="$round" -v s="$server" -v m="$mode" -v l="$load" \
          '{printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", r, s, m, $1, $2, $3, $5, $6, $7, l}' >>"$csv"
    done
  done
done
fsync_ms=$(printf '%s\n' "${fsyncs[@]}" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
echo "resp_vs_redis.sh: fdatasync of a 4 KiB page in the store's directory, per round: ${fsyncs[*]} ms"
echo "resp_vs_redis.sh: raw results in $csv"
commits=$("$ccpool" status --socket "$work/ccpool/sock" --json |
  /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["store_commits"], s["store_committed_puts"], s["store_largest_batch"], s["store_coalesced_puts"])')
echo "resp_vs_redis.sh: store commits, puts, largest batch, coalesced puts: $commits"
/usr/bin/python3 - "$csv" "$root/BENCHMARKS.md" "$requests" "$(nproc)" "$fsync_ms" $commits <<'PY'
import csv, statistics, sys
path, md, requests, cores, fsync_ms, commits, puts, largest, coalesced = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
def med(server, mode, test, field):
    v = [float(r[field]) for r in rows if (r["server"], r["mode"], r["test"]) == (server, mode, test)]
    return statistics.median(v) if v else float("nan")
loads = sorted(float(r["load1"]) for r in rows)
out = ["<!-- resp-vs-redis:begin (bench/resp_vs_redis.sh writes this section) -->",
       f"`bench/resp_vs_redis.sh`: redis-benchmark -n {requests} -c 50 -d 1024, medians of "
       f"{max(int(r['round']) for r in rows)} interleaved rounds on {cores} cores; 1-minute load average "
       f"{loads[0]:.1f}-{loads[-1]:.1f} during the run (a shared virtual machine: absolute figures are noisy, "
       "the ratios were taken side by side). Raw: [`bench/results/resp_vs_redis.csv`](bench/results/resp_vs_redis.csv).",
       "", "| mode | test | ccpool front | redis-server | ratio | goal | redis-server, appendfsync always |",
       "|---|---|---|---|---|---|---|"]
for mode, label in (("tcp", "TCP, 1 deep"), ("tcp-keys", "TCP, 1 deep, `-r 100000`"),
                    ("unix-P16", "Unix socket, -P 16")):
    for test, goal in (("SET", 0.5), ("GET", 0.9)):
        if mode == "tcp-keys" and test == "GET":
            continue
        f, r, a = (med(s, mode, test, "rps") for s in ("ccpool", "redis", "redis-aof"))
        fp, rp, ap = (med(s, mode, test, "p50_ms") for s in ("ccpool", "redis", "redis-aof"))
        ok = ("met" if f / r >= goal and fp < 2 else "missed") if mode == "tcp" else "(no goal)"
        out.append(f"| {label} | {test} | {f/1000:.1f}k/s, p50 {fp:.2f} ms | {r/1000:.1f}k/s, p50 {rp:.2f} ms | "
                   f"{f/r:.2f}x | >= {goal}x, p50 < 2 ms: {ok} | {a/1000:.1f}k/s, p50 {ap:.2f} ms |")
out += ["", f"fdatasync of one 4 KiB page in the store's directory, measured before each round: median {fsync_ms} ms. A SET is answered after "
        f"the commit of its batch (its pages written, then one fdatasync), so 50 one-deep clients put at most 50 SETs "
        f"in one commit. The front's SETs of the whole run took "
        f"{commits} write transactions for {puts} puts ({int(puts) / max(int(commits), 1):.1f} per transaction, "
        f"at most {largest}); {coalesced} of the puts were superseded by a later SET of the same key in "
        f"their batch and not written."]
out.append("<!-- resp-vs-redis:end -->")
text = open(md).read()
begin, end = text.find("<!-- resp-vs-redis:begin"), text.find("<!-- resp-vs-redis:end -->")
if begin < 0 or end < 0:
    sys.exit("BENCHMARKS.md lacks the resp-vs-redis markers")
text = text[:begin] + "\n".join(out) + text[end + len("<!-- resp-vs-redis:end -->"):]
open(md, "w").write(text)
print("\n".join(out))
PY
