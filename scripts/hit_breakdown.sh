#!/usr/bin/env bash
# Where a `ccpool exec` hit's time goes (BENCHMARKS.md, issue 16): one cached
# `gcc -c a.c` (a 2-line file including <stdio.h>) served N times in a row by a
# private service started with --no-resp. Counts are load-independent (syscalls
# and context switches per hit from strace/perf, instructions per hit from
# callgrind); walls are printed with the load average next to them.
#   scripts/hit_breakdown.sh [BUILD_DIR]     (default build; N=100 hits)
#   CCPOOL_HIT_CALLGRIND=0 skips the callgrind run (slow: ~1 min)
#   CCPOOL_HIT_ONLY_CALLGRIND=1 runs only that
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build}")/bin
n=${N:-100}
export CCPOOL_NO_AUTOSTART=1
tmp=$(mktemp -d /tmp/ccpool-hit.XXXXXX)
sock=$tmp/sock
service_pid=
trap '[ -n "$service_pid" ] && kill "$service_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
cd "$tmp"
printf '#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n' > a.c

start_service() {  # $@: a wrapper (strace, valgrind) or nothing
  rm -f "$sock"
  "$@" "$bin/ccpool-cli" serve --foreground --no-resp --jobs 2 --idle-timeout 0 \
    --dir "$tmp/store" --socket "$sock" 2>"$tmp/serve.log" &
  service_pid=$!
  for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
  [ -S "$sock" ] || { echo "the service did not start: $(tail -3 "$tmp/serve.log")" >&2; exit 1; }
  "$bin/ccpool" exec --socket "$sock" -- gcc -c a.c -o a.o  # the first: miss or hit, not counted
}
stop_service() {  # `ccpool stop`: a wrapper may not pass SIGTERM on
  "$bin/ccpool" stop --socket "$sock" >/dev/null; wait "$service_pid" 2>/dev/null || true; service_pid=
}
hits() { for _ in $(seq "$1"); do "$bin/ccpool" exec --socket "$sock" -- gcc -c a.c -o a.o; done; }
hit_count() { "$bin/ccpool" status --socket "$sock" --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["hits"], s["hit_service_us"])'; }
per_hit() { python3 -c "print(round($1 / $n, 1))"; }

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
start_service
hits 3
if [ "${CCPOOL_HIT_ONLY_CALLGRIND:-0}" = 0 ]; then

# Wall: N sequential hits, /bin/true and ccache hits of the same compile.
wall() { local t0 t1; t0=$(date +%s%N); "$@"; t1=$(date +%s%N); python3 -c "print(f'{($t1 - $t0) / $n / 1e6:.3f} ms')"; }
true_n() { for _ in $(seq "$n"); do /bin/true; done; }
export CCACHE_DIR=$tmp/ccache
ccache gcc -c a.c -o c.o >/dev/null
ccache_n() { for _ in $(seq "$n"); do ccache gcc -c a.c -o c.o; done; }
for _ in 1 2 3; do
  echo "wall per run: ccpool exec hit $(wall hits "$n"), /bin/true $(wall true_n), ccache hit $(wall ccache_n)"
done
echo "hits, hit_service_us: $(hit_count)"

# Where the service's part goes (ccpool status: hit_stages_us, the mean per hit), and what is outside it: a
# hit's wall less /bin/true's and less the service's time is the client's own work, its connect and the two
# wake-ups no service counter sees (the I/O thread on the connect, the client on the reply).
"$bin/ccpool" status --socket "$sock" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
st = s["hit_stages_us"]
print("service stages per hit (us): " + ", ".join(f"{k} {v:.1f}" for k, v in st.items()) +
      f"; sum {sum(st.values()):.1f} of hit_service_us {s['"'"'hit_service_us'"'"']:.1f}")'
t0=$(date +%s%N); hits "$n"; t1=$(date +%s%N)
t2=$(date +%s%N); true_n; t3=$(date +%s%N)
read -r hits_before service_before < <(hit_count)
hits "$n"
read -r hits_after service_after < <(hit_count)
python3 -c "
wall = ($t1 - $t0) / $n / 1e3; floor = ($t3 - $t2) / $n / 1e3
service = ($service_after * $hits_after - $service_before * $hits_before) / ($hits_after - $hits_before)
print(f'outside the service per hit (us): {wall - floor - service:.1f} (hit wall {wall:.1f} less /bin/true {floor:.1f} less the service {service:.1f})')"

# Service CPU and context switches over N hits.
perf stat -e task-clock,context-switches,cpu-migrations -p "$service_pid" -o "$tmp/perf.txt" &
perf_pid=$!
sleep 0.5
hits "$n"
kill -INT "$perf_pid"; wait "$perf_pid" || true
awk -v n="$n" '/task-clock/ {gsub(",","",$1); printf "service task-clock per hit: %.3f ms\n", $1 / n}
  /context-switches/ {gsub(",","",$1); printf "service context switches per hit: %.1f\n", $1 / n}' "$tmp/perf.txt"

# Client: syscalls of one hit, and its CPU.
strace -f -c -o "$tmp/client.strace" "$bin/ccpool" exec --socket "$sock" -- gcc -c a.c -o a.o
echo "client syscalls per hit: $(awk '$NF == "total" {print $4}' "$tmp/client.strace")"
strace -f -o "$tmp/client.trace" "$bin/ccpool" exec --socket "$sock" -- gcc -c a.c -o a.o
echo "client syscalls that talk to the service:"
grep -E 'connect|sendto|sendmsg|recvfrom|recvmsg|poll|write\(3' "$tmp/client.trace" | sed 's/^/  /' | cut -c1-110

# Service syscalls per hit: strace attached to every thread for N hits only.
strace -f -c -o "$tmp/service.strace" -p "$(ls /proc/"$service_pid"/task | paste -sd,)" 2>/dev/null &
strace_pid=$!
sleep 1
hits "$n"
sleep 0.2
kill -INT "$strace_pid"; wait "$strace_pid" || true
echo "service syscalls over $n hits, per hit:"
awk -v n="$n" '$1 ~ /^[0-9.]+$/ && $4 ~ /^[0-9]+$/ {
    errs = (NF == 6) ? $5 : 0
    if ($4 / n >= 0.5 || $NF == "total") printf "  %-16s %6.1f%s\n", $NF, $4 / n, errs ? sprintf(" (%.1f failed)", errs / n) : "" }' "$tmp/service.strace"
fi
stop_service

# Service instructions per hit (callgrind, counters zeroed after the warm-up).
if [ "${CCPOOL_HIT_CALLGRIND:-1}" = 1 ]; then
  start_service valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.%p" --dump-instr=no
  hits 3
  callgrind_control -z "$service_pid" >/dev/null
  hits "$n"
  callgrind_control -d "$service_pid" >/dev/null
  dump=$tmp/cg.$service_pid.1  # the N hits (valgrind has no pidfd_open: hits only, no compiles)
  stop_service
  total=$(awk '/^summary:/ {print $2}' "$dump")
  echo "service instructions per hit (callgrind): $(per_hit "$total")"
fi
