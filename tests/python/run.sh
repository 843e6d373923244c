#!/usr/bin/env bash
# The Python package's checks, in a venv of test tools inside the build tree:
#   run.sh mypy              mypy --strict over every module of python/ccpool, these tests and
#                            the service fixture they share (tests/service/support/service_fixture.py)
#   run.sh pytest [ARGS...]  pytest tests/python
# CCPOOL_BUILD_DIR names the build tree (CTest sets it). The venv
# (<build>/python-tools-venv: Debian's /usr/bin/python3 with pinned pytest and
# mypy from PyPI) is made on first use; when it cannot be made, exit 125 (a
# CTest skip) with the reason.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${CCPOOL_BUILD_DIR:?CCPOOL_BUILD_DIR must name the build tree}
venv=$build/python-tools-venv
pins=(pytest==9.2.0 mypy==2.4.1)

(
  flock 9
  if [[ "$("$venv/bin/python" -m pip freeze 2>/dev/null | grep -cE '^(pytest==9\.2\.0|mypy==2\.4\.1)$')" != 2 ]]; then
    rm -rf "$venv"
    if ! /usr/bin/python3 -m venv "$venv" >"$venv.log" 2>&1; then
      echo "SKIP: '/usr/bin/python3 -m venv' failed (Debian package python3-venv): $(tail -n 1 "$venv.log")"
      exit 125
    fi
    if ! "$venv/bin/python" -m pip install --no-input -q "${pins[@]}" >>"$venv.log" 2>&1; then
      echo "SKIP: pip install ${pins[*]} failed (PyPI unreachable?); log: $venv.log: $(tail -n 1 "$venv.log")"
      rm -rf "$venv"
      exit 125
    fi
  fi
) 9>"$venv.lock"

export PYTHONDONTWRITEBYTECODE=1
case "${1:-}" in
  mypy)
    cd "$root/python"
    MYPYPATH="$root/python:$root/tests/service/support" exec "$venv/bin/python" -m mypy --strict --python-version 3.10 \
      --config-file "$root/pyproject.toml" --follow-imports=silent --cache-dir "$build/python-tools-venv.mypy-cache" \
      ccpool/*.py ccpool/_bootstrap/sitecustomize.py "$here"/*.py \
      "$root/tests/service/support/service_fixture.py" ;;
  pytest)
    shift
    exec "$venv/bin/python" -m pytest -p no:cacheprovider -q "$here" "$@" ;;
  *)
    echo "usage: run.sh mypy | pytest [ARGS...]" >&2
    exit 2 ;;
esac
