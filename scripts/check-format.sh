#!/usr/bin/env bash
# Checks that every C and C++ file in the repository is laid out as
# .clang-format says (scripts/test.sh runs it before building).
#   scripts/check-format.sh          list the files that differ; exit 1 if any
#   scripts/check-format.sh --fix    rewrite them in place
# Exit 125 when clang-format is missing (scripts/setup-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
case "${1:-}" in
  --fix) fix=1 ;;
  "") ;;
  -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "check-format: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format is not installed (apt install clang-format, or scripts/setup-deps.sh)" >&2
  exit 125
fi
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp')
if [[ $fix == 1 ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format ($(clang-format --version | head -1)):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "check-format: fix with scripts/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files as .clang-format says"
