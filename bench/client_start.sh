#!/usr/bin/env bash
# What starting the client costs, and what a hit costs through each client
# (BENCHMARKS.md, "Issue 27, tenth pass"):
#   1. fork/exec/wait rounds (a C loop, 500 each): fork alone, a static
#      program without libc, a static glibc program, ccpool-client;
#   2. tiny-TU hits through ccpool-client and ccpool-client-fast, alternating,
#      1000 runs per batch with hyperfine, /bin/true beside them;
#   3. hits on a source younger than the file hasher's 2 s window: how many
#      the service's I/O thread served (hits_on_io_thread).
# Usage: bench/client_start.sh [BUILD_DIR]   (default: build)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
bin=$build/bin
for tool in gcc g++ hyperfine python3; do
  command -v "$tool" >/dev/null || { echo "client_start: '$tool' is missing (scripts/setup-deps.sh)"; exit 125; }
done
[[ -x $bin/ccpool-client-fast ]] || { echo "client_start: $bin/ccpool-client-fast is not built"; exit 125; }
work=$(mktemp -d /tmp/ccpool-client-start.XXXXXX)
sock=$work/run/sock
cleanup() { "$bin/ccpool" stop --socket "$sock" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
unset LD_PRELOAD CCPOOL_DIR
cd "$work"

echo "== 1. per fork/exec/wait round (500 rounds)"
printf 'void _start(void) { __asm__ volatile("mov $60, %%eax; xor %%edi, %%edi; syscall"); }\n' > nolibc.c
printf 'int main(void) { return 0; }\n' > glibc.c
cat > rounds.c <<'EOF'
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char** argv) {
  for (int a = 0; a < argc; ++a) { /* argv[0]: fork alone */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 500; ++i) {
      pid_t p = fork();
      if (p == 0) {
        if (a > 0) { int null = open("/dev/null", O_WRONLY); dup2(null, 2); execl(argv[a], argv[a], (char*)0); }
        _exit(0);
      }
      waitpid(p, 0, 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  %-48s %6.0f us\n", a ? argv[a] : "fork alone",
           ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 500 / 1e3);
  }
  return 0;
}
EOF
if [[ $(uname -m) == x86_64 ]]; then
  gcc -O2 -nostdlib -static -fno-pie -no-pie nolibc.c -o nolibc
  nolibc=$work/nolibc
else
  nolibc=""
fi
gcc -O2 -static glibc.c -o glibc
gcc -O2 rounds.c -o rounds
./rounds ${nolibc:+"$nolibc"} "$work/glibc" "$bin/ccpool-client"

echo "== 2. tiny-TU hits, mean and median of 1000 runs per batch"
mkdir -p run
"$bin/ccpool" serve --socket "$sock" --dir "$work/store" >/dev/null
export CCPOOL_SOCKET=$sock
echo 'int tiny(int x) { return x * 3 + 1; }' > tiny.cpp
touch -d '1 minute ago' tiny.cpp
"$bin/ccpool" exec --socket "$sock" -- g++ -O2 -c tiny.cpp -o ref.o
batch() {  # NAME COMMAND...
  local name=$1; shift
  hyperfine -N --style none --warmup 30 --runs 1000 --export-json hf.json "$*" >/dev/null 2>&1
  python3 -c "
import json, statistics
t = sorted(x * 1e6 for x in json.load(open('hf.json'))['results'][0]['times'])
print(f'  {\"$name\":20} mean {statistics.mean(t):5.0f} us   median {t[len(t) // 2]:5.0f} us')"
}
for round in 1 2; do
  batch /bin/true /bin/true
  batch ccpool-client "$bin/ccpool-client /usr/bin/g++ g++ -O2 -c tiny.cpp -o a.o"
  batch ccpool-client-fast "$bin/ccpool-client-fast /usr/bin/g++ g++ -O2 -c tiny.cpp -o b.o"
done
cmp ref.o a.o && cmp ref.o b.o

echo "== 3. hits on a fresh source (younger than 2 s)"
echo 'int fresh(int x) { return x * 5; }' > fresh.cpp
"$bin/ccpool" exec --socket "$sock" -- g++ -O2 -c fresh.cpp -o fresh-ref.o
before=$("$bin/ccpool" status --socket "$sock" --json)
hyperfine -N --style none --runs 300 "$bin/ccpool-client /usr/bin/g++ g++ -O2 -c fresh.cpp -o fresh.o" >/dev/null 2>&1
after=$("$bin/ccpool" status --socket "$sock" --json)
age=$(python3 -c "import os, time; print(round(time.time() - os.stat('fresh.cpp').st_ctime, 2))")
python3 -c "
import json, sys
b, a = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f'  hits {a[\"hits\"] - b[\"hits\"]}, of them on the I/O thread {a[\"hits_on_io_thread\"] - b[\"hits_on_io_thread\"]};'
      f' the source was {sys.argv[3]} s old at the end')" "$before" "$after" "$age"
cmp fresh-ref.o fresh.o
