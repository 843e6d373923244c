#!/usr/bin/env bash
# Installs the Debian 12 packages ccpool needs to build, test and demo, then
# the Python venv of the real-torch suite (tests/torch, bench/torch).
# Idempotent: when everything is present it only runs dpkg-query, reads two
# package versions and exits.
# As non-root it prints the apt-get line to run instead of running it.
#
# The venv: $CCPOOL_VENV (default $BUILD_DIR/venv, BUILD_DIR default ./build),
# made from the first python3.11 on PATH (CCPOOL_VENV_PYTHON overrides), with
# pinned torch and triton. It never makes this script fail: when it cannot be
# built, $CCPOOL_VENV/ccpool-venv-failed holds the reason and the torch suite
# exits 125 printing it.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  # build
  cmake g++ make pkg-config git clang-format
  # libraries
  libzstd-dev liblmdb-dev libxxhash-dev libtbb-dev libspdlog-dev libfmt-dev
  libcli11-dev nlohmann-json3-dev libexpected-dev libhiredis-dev libssl-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev
  redis-server redis-tools python3 python3-redis python3-venv util-linux procps strace
  # operability tests: promtool + a Prometheus server, systemd-socket-activate,
  # YAML parsing of the Kubernetes manifests
  prometheus systemd python3-yaml
  # the torch suite's Slurm case: a private one-node cluster (auth/none)
  slurmctld slurmd slurm-client
  # packaging (tests/packaging): the .deb's Depends, the wheel's compiles shared with the build
  dpkg-dev ccache
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup-deps: all ${#packages[@]} packages present"
else
  cmd="apt-get install -y --no-install-recommends ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup-deps: missing packages: ${missing[*]}" >&2
    echo "setup-deps: run as root:  apt-get update && $cmd" >&2
    exit 1
  fi
  echo "setup-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  $cmd
fi

# --- the torch venv ---------------------------------------------------------
# Exact pins: other torch releases are multi-GiB downloads. redis-py: the
# Inductor and Triton remote caches import it. accelerate: the launcher the
# torch suite runs besides torchrun. The extras only draw the
# benchmark's plot (bench/torch): without them the suite still runs.
venv_pins=(torch==2.13.0 triton==3.7.1 redis==8.1.0 accelerate==1.15.0)
venv_extras=(numpy==2.4.6 matplotlib==3.11.2)
venv=${CCPOOL_VENV:-${BUILD_DIR:-$(pwd)/build}/venv}
failed="$venv/ccpool-venv-failed"

# Prints "torch==X triton==Y" as installed in the venv (no import: fast).
venv_versions() {
  "$venv/bin/python" - <<'PY' 2>/dev/null
from importlib.metadata import version
print(" ".join(f"{n}=={version(n).split('+')[0]}" for n in ("torch", "triton", "redis", "accelerate")))
PY
}

venv_fail() {
  mkdir -p "$venv"
  printf '%s\n' "$1" >"$failed"
  echo "setup-deps: WARNING: torch venv not usable: $1" >&2
  echo "setup-deps: the torch suite will skip (exit 125) with this reason" >&2
}

venv_extras_present() {
  "$venv/bin/python" -c 'import matplotlib, numpy' 2>/dev/null
}

setup_venv_extras() {
  venv_extras_present && return 0
  if ! "$venv/bin/python" -m pip install --no-input "${venv_extras[@]}" >>"${venv}.log" 2>&1; then
    echo "setup-deps: WARNING: pip install ${venv_extras[*]} failed (log: ${venv}.log);" \
         "bench/torch cannot draw its plot" >&2
  fi
}

setup_venv() {
  if [[ -x "$venv/bin/python" && "$(venv_versions)" == "${venv_pins[*]}" ]]; then
    rm -f "$failed"
    setup_venv_extras
    echo "setup-deps: venv $venv has ${venv_pins[*]}"
    return 0
  fi
  local py=${CCPOOL_VENV_PYTHON:-$(command -v python3.11 || true)}
  if [[ -z "$py" ]]; then
    venv_fail "no python3.11 on PATH (torch 2.13.0's CPU wheel is cp311); set CCPOOL_VENV_PYTHON"
    return 0
  fi
  echo "setup-deps: creating $venv from $py with ${venv_pins[*]}"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"  # a fresh clone has no build directory yet
  if ! "$py" -m venv "$venv" >"${venv}.log" 2>&1; then
    venv_fail "'$py -m venv $venv' failed: $(tail -n 3 "${venv}.log" | tr '\n' ' ')"
    return 0
  fi
  if ! "$venv/bin/python" -m pip install --no-input "${venv_pins[@]}" >>"${venv}.log" 2>&1; then
    venv_fail "pip install ${venv_pins[*]} failed (log: ${venv}.log): $(tail -n 3 "${venv}.log" | tr '\n' ' ')"
    return 0
  fi
  if [[ "$(venv_versions)" != "${venv_pins[*]}" ]]; then
    venv_fail "venv has '$(venv_versions)', expected '${venv_pins[*]}' (log: ${venv}.log)"
    return 0
  fi
  rm -f "$failed"
  setup_venv_extras
  echo "setup-deps: venv $venv ready"
}
setup_venv
