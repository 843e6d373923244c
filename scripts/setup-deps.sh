#!/usr/bin/env bash
# Installs the Debian 12 packages ccpool needs to build, test and demo.
# Idempotent: when everything is present it only runs dpkg-query and exits.
# As non-root it prints the apt-get line to run instead of running it.
set -euo pipefail

packages=(
  # build
  cmake g++ make pkg-config git
  # libraries
  libzstd-dev liblmdb-dev libxxhash-dev libtbb-dev libspdlog-dev libfmt-dev
  libcli11-dev nlohmann-json3-dev libexpected-dev libhiredis-dev libssl-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev
  redis-server redis-tools python3 python3-redis util-linux procps
  # operability tests: promtool + a Prometheus server, systemd-socket-activate,
  # YAML parsing of the Kubernetes manifests
  prometheus systemd python3-yaml
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup-deps: all ${#packages[@]} packages present"
  exit 0
fi

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
