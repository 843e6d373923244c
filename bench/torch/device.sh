#!/usr/bin/env bash
# bench/torch/device.sh: issue 25's GPU checks on a lent GPU machine (the
# `device` tool of this workplace), whose image has CUDA, torch and triton but
# none of the Debian libraries ccpool links, and no package registry.
#
#   bench/torch/device.sh pack [BUILD]   here: copies BUILD's (default build/)
#       ccpool, ccpool-cli (with the Debian libraries it links, RPATH set by
#       patchelf), ccpool-client and ccpool-client-fast, the shim, the recorder and the Python
#       package into .device/, ignored by git: carry it.
#   bench/torch/device.sh bench [ARGS]   there: bench/torch/seed.py's graph
#       scenario on cuda, R = 4, 32 compile threads, the three cache placements
#       and SIGINT to each launcher mid-compile; ARGS go to seed.py (say
#       --graph-deep 16 --graph-dirs shared).
#   bench/torch/device.sh reps N [ARGS]  there: the same without SIGINT, N
#       repetitions (medians; one repetition of --graph-deep 16 took about 2
#       minutes on an H100, so three fit one 10-minute call).
#   bench/torch/device.sh tests          there: tests/torch/graph_flight_test.py
#       with model.py on cuda (CCPOOL_TEST_TORCH_DEVICE=cuda).
# Results and logs go to $OUT (the device tool's folder) or /tmp/ccpool-device.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
pack=$root/.device/build
out=${OUT:-/tmp/ccpool-device}
mkdir -p "$out"
export PYTHONUNBUFFERED=1

python_with_torch() {
  for p in /opt/torch/.venv/bin/python3 "$(command -v python3)"; do
    [[ -x $p ]] && "$p" -c 'import torch, triton' 2>/dev/null && { echo "$p"; return; }
  done
  echo "bench/torch/device.sh: no python3 with torch and triton here" >&2
  exit 125
}

about_machine() {
  nvidia-smi -L
  echo "cpus $(nproc)"
  "$1" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__,
      torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")'
  "$pack/bin/ccpool" --version || { echo "bench/torch/device.sh: $pack/bin/ccpool does not run here" >&2; exit 1; }
}

case "${1:-}" in
pack)
  build=$(realpath "${2:-build}")
  for f in bin/ccpool bin/ccpool-cli bin/ccpool-client lib/libccpool-shim.so lib/libccpool-trace.so; do
    [[ -f $build/$f ]] || { echo "bench/torch/device.sh: $build/$f missing: build first" >&2; exit 1; }
  done
  command -v patchelf >/dev/null || { echo "bench/torch/device.sh: needs patchelf (apt-get install patchelf)" >&2; exit 1; }
  rm -rf "$pack"
  mkdir -p "$pack/bin" "$pack/lib" "$pack/share/ccpool"
  cp "$build/bin/ccpool" "$build/bin/ccpool-cli" "$build/bin/ccpool-client" "$pack/bin/"
  # The shim execs the client without libc where it lies beside ccpool-client (static, no library at all).
  [[ -f $build/bin/ccpool-client-fast ]] && cp "$build/bin/ccpool-client-fast" "$pack/bin/"
  cp "$build/lib/libccpool-shim.so" "$build/lib/libccpool-trace.so" "$pack/lib/"
  cp -rL "$build/share/ccpool/python" "$pack/share/ccpool/"
  find "$pack/share" -name __pycache__ -prune -exec rm -rf {} +
  # ccpool-cli links Debian's libraries, which the GPU machine's image lacks: they travel in lib/ (the C and
  # C++ runtimes stay behind, the image's are newer) and its RPATH names them. The front door and the client
  # are static; the two preloaded libraries link the C library alone.
  ldd "$pack/bin/ccpool-cli" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so' |
    while read -r lib; do cp -L "$lib" "$pack/lib/"; done
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$pack/bin/ccpool-cli"
  for f in "$pack"/lib/lib*.so.*; do patchelf --force-rpath --set-rpath '$ORIGIN' "$f"; done
  grep -qx '/.device/' "$root/.git/info/exclude" 2>/dev/null || echo '/.device/' >>"$root/.git/info/exclude"
  du -sh "$root/.device"
  ;;
bench | reps)
  if [[ $1 == reps && ! ${2:-} =~ ^[1-9][0-9]*$ ]]; then
    echo "bench/torch/device.sh: reps needs a count, e.g. reps 3" >&2
    exit 2
  fi
  py=$(python_with_torch) || exit 125
  about_machine "$py" | tee "$out/machine.txt"
  ptxas=$(dirname "$("$py" -c 'import triton; print(triton.__file__)')")/backends/nvidia/bin/ptxas
  [[ -x $ptxas ]] || ptxas=/usr/local/cuda/bin/ptxas
  if [[ $1 == reps ]]; then
    mode=(--graph-reps "$2")
    shift
  else
    mode=(--graph-sigint)
  fi
  "$py" bench/torch/seed.py --only graphs --device cuda --graph-ranks 4 --graph-threads 32 "${mode[@]}" \
    --jobs "$(nproc)" --build "$pack" --python "$py" --ptxas "$ptxas" --out "$out/seed_cuda_r4.json" "${@:2}" 2>&1 |
    tee "$out/seed.log"
  ;;
tests)
  py=$(python_with_torch) || exit 125
  about_machine "$py" | tee "$out/machine.txt"
  harness=/usr/bin/python3
  [[ -x $harness ]] || harness=$py
  CCPOOL_BIN=$pack/bin CCPOOL_LIB=$pack/lib CCPOOL_VENV=$(dirname "$(dirname "$py")") \
    CCPOOL_TEST_TORCH_DEVICE=cuda "$harness" tests/torch/graph_flight_test.py GraphFlightTest 2>&1 |
    tee "$out/graph_flight_cuda.log"
  rc=${PIPESTATUS[0]}
  # The harness keeps a failed case's directory under /tmp/ccpool-tests (tests/service/support/service_fixture.py).
  [[ $rc -eq 0 ]] || tar czf "$out/kept.tgz" -C /tmp ccpool-tests 2>/dev/null
  exit "$rc"
  ;;
*)
  awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"
  [[ ${1:-} == -h || ${1:-} == --help ]] || exit 2
  ;;
esac
