#!/usr/bin/env bash
# Mutation testing of the safety code, by hand (a tool, not a CI step).
#
# Each mutation of the list (scripts/mutations.list; its format is described at
# its top) replaces one exact piece of one line of one file. For each, this
# script applies it, rebuilds the targets it names (incrementally), runs the
# CTest tests its regex selects, restores the file, and rebuilds the same
# targets again, so no mutated object or binary is left either. The tests
# kill a mutation when one of them fails; it survives when all pass.
#
#   scripts/mutate.sh                 every mutation of the list
#   scripts/mutate.sh REGEX...        only mutations whose id matches one of the regexes (grep -E)
#   scripts/mutate.sh --check [...]   only check that each `find` occurs exactly once in its file
#                                     and (when the build is configured) that each `tests` selects a test
#   scripts/mutate.sh --list FILE     another list
# Environment: BUILD_DIR (default build; configured as scripts/test.sh does if it
# is not), JOBS (default nproc), MUTATE_TIMEOUT (seconds per test, default 300).
#
# Exit status: 0 when every selected mutation was killed (or, with --check, every
# entry is well-formed); 1 when one survived, did not apply, did not build or
# selected no test, or when the unmutated tests fail; 2 on usage errors.
#
# Never leaves a mutation behind: the original file is kept in
# $BUILD_DIR/mutate-state and put back by an EXIT trap (after errors, Ctrl+C,
# SIGTERM and SIGHUP too); a run that was killed outright (SIGKILL) is repaired
# by the next run, which restores that file before anything else.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

usage() {
  echo "usage: scripts/mutate.sh [--check] [--list FILE] [ID-REGEX...]  (see the comment at its top)" >&2
  exit 2
}

list=scripts/mutations.list
check_only=0
selectors=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --check) check_only=1 ;;
    --list) [[ $# -ge 2 ]] || usage; list=$2; shift ;;
    -h|--help) usage ;;
    -*) echo "mutate: unknown option '$1'" >&2; usage ;;
    *) selectors+=("$1") ;;
  esac
  shift
done
[[ -f "$list" ]] || { echo "mutate: no list '$list'" >&2; exit 2; }

build=${BUILD_DIR:-$root/build}
[[ "$build" = /* ]] || build=$root/$build
jobs=${JOBS:-$(nproc)}
timeout=${MUTATE_TIMEOUT:-300}
state=$build/mutate-state
logs=$build/mutate-logs

# --- the list ------------------------------------------------------------
ids=() files=() finds=() repls=() tests=() targets=()
parse_list() {
  local line key value n=-1 lineno=0
  local -A seen=()
  while IFS= read -r line || [[ -n "$line" ]]; do
    lineno=$((lineno + 1))
    [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
    if [[ ! "$line" =~ ^(id|file|find|replace|tests|build):\ (.*)$ ]]; then
      echo "mutate: $list:$lineno: expected 'id|file|find|replace|tests|build: VALUE'" >&2
      exit 2
    fi
    key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
    if [[ $key == id ]]; then
      [[ -z "${seen[$value]:-}" ]] || { echo "mutate: $list:$lineno: id '$value' twice" >&2; exit 2; }
      seen[$value]=1
      n=$((n + 1))
      ids[n]=$value files[n]='' finds[n]='' repls[n]='' tests[n]='' targets[n]=''
      continue
    fi
    [[ $n -ge 0 ]] || { echo "mutate: $list:$lineno: '$key:' before the first 'id:'" >&2; exit 2; }
    case $key in
      file) files[n]=$value ;;
      find) finds[n]=$value ;;
      replace) repls[n]=$value ;;
      tests) tests[n]=$value ;;
      build) targets[n]=$value ;;
    esac
  done < "$list"
  local i
  for i in "${!ids[@]}"; do
    if [[ -z "${files[i]}" || -z "${finds[i]}" || -z "${tests[i]}" || "${finds[i]}" == "${repls[i]}" ]]; then
      echo "mutate: $list: '${ids[i]}' needs file, find, replace (different from find) and tests" >&2
      exit 2
    fi
  done
}

selected() {
  [[ ${#selectors[@]} -eq 0 ]] && return 0
  local s
  for s in "${selectors[@]}"; do
    grep -Eq -- "$s" <<< "$1" && return 0
  done
  return 1
}

# occurrences FILE FIND: how many times FIND occurs in FILE (bytes, literally).
occurrences() {
  MUT_FILE=$1 MUT_FIND=$2 /usr/bin/python3 -c '
import os
data = open(os.environ["MUT_FILE"], "rb").read()
print(data.count(os.environ["MUT_FIND"].encode()))'
}

# replace_once FILE FIND REPLACE: writes FILE with its one FIND replaced.
replace_once() {
  MUT_FILE=$1 MUT_FIND=$2 MUT_REPL=$3 /usr/bin/python3 -c '
import os, sys
path, find, repl = os.environ["MUT_FILE"], os.environ["MUT_FIND"].encode(), os.environ["MUT_REPL"].encode()
data = open(path, "rb").read()
if data.count(find) != 1:
    sys.exit(3)
with open(path, "wb") as f:
    f.write(data.replace(find, repl, 1))'
}

# --- never leave a mutation behind -----------------------------------------
# While a mutation is applied, $state/path names the file and $state/original
# holds its bytes. restore puts them back with a new mtime, so make rebuilds
# whatever was compiled from the mutated bytes.
restore() {
  [[ -f "$state/path" ]] || return 0
  local path
  path=$(cat "$state/path")
  cp "$state/original" "$root/$path"
  touch "$root/$path"
  if ! cmp -s "$state/original" "$root/$path"; then
    echo "mutate: could not restore '$path'; its original is in $state/original" >&2
    return 1
  fi
  rm -f "$state/path" "$state/original"
}

on_exit() {
  local rc=$? path
  if [[ -f "$state/path" ]]; then
    path=$(cat "$state/path")
    if restore; then
      echo "mutate: stopped with '$path' mutated: restored it; the next build recompiles what it fed" >&2
    fi
    [[ $rc != 0 ]] || rc=1
  fi
  exit "$rc"
}

parse_list

if [[ $check_only == 1 ]]; then
  bad=0 checked=0 tests_known=0
  # CTest lists a gtest binary's tests only once it is built.
  if [[ -f "$build/CTestTestfile.cmake" ]] &&
     [[ $(cd "$build" && ctest -N | sed -n 's/^Total Tests: //p') != 0 ]]; then
    tests_known=1
  fi
  for i in "${!ids[@]}"; do
    selected "${ids[i]}" || continue
    checked=$((checked + 1))
    if [[ ! -f "${files[i]}" ]]; then
      echo "BAD    ${ids[i]}: no file '${files[i]}'"; bad=$((bad + 1)); continue
    fi
    count=$(occurrences "${files[i]}" "${finds[i]}")
    if [[ $count != 1 ]]; then
      echo "BAD    ${ids[i]}: 'find' occurs $count times in ${files[i]} (must be once)"; bad=$((bad + 1)); continue
    fi
    if [[ $tests_known == 1 ]]; then
      n=$(cd "$build" && ctest -N -R "${tests[i]}" | sed -n 's/^Total Tests: //p')
      if [[ "${n:-0}" == 0 ]]; then
        echo "BAD    ${ids[i]}: tests '${tests[i]}' selects no test (a wrong regex, or its targets are not built yet)"; bad=$((bad + 1)); continue
      fi
    fi
    echo "OK     ${ids[i]}"
  done
  [[ $tests_known == 1 ]] || echo "mutate --check: tests not checked (no built tests in $build)"
  echo "mutate --check: $checked entries, $bad bad"
  [[ $bad == 0 ]]
  exit
fi

# --- build, baseline -------------------------------------------------------
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  echo "mutate: configuring $build (Release, as scripts/test.sh)"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCCPOOL_BUILD_FUZZ=ON >/dev/null
fi
mkdir -p "$state" "$logs"
exec 9> "$build/mutate.lock"
flock -n 9 || { echo "mutate: another mutate.sh runs on $build" >&2; exit 2; }
if [[ -f "$state/path" ]]; then
  echo "mutate: a previous run was killed with '$(cat "$state/path")' mutated; restoring it first"
  restore
fi
trap on_exit EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

export CCPOOL_TEST_TMP=${CCPOOL_TEST_TMP:-$(mktemp -d /tmp/ccpool-mutate.XXXXXX)}
chmod 0755 "$CCPOOL_TEST_TMP"
unset CCPOOL_SOCKET CCPOOL_DIR CCPOOL_REMOTE LD_PRELOAD || true

# build_targets LOG TARGETS: an incremental build of TARGETS (all when empty).
build_targets() {
  local log=$1 t
  shift
  local args=()
  for t in $*; do args+=(--target "$t"); done
  cmake --build "$build" -j "$jobs" "${args[@]}" > "$log" 2>&1 9>&-
}

# test_numbers REGEX...: the numbers of the tests any of the regexes selects, as
# ctest -I wants them (CTest's regex engine allows too few groups to join them).
test_numbers() {
  local re
  for re in "$@"; do
    (cd "$build" && ctest -N -R "$re") | sed -n 's/^ *Test *#\([0-9]*\):.*/\1/p'
  done | sort -un | paste -sd, -
}

# run_tests LOG SELECTION...: runs the tests that ctest SELECTION... picks;
# prints "<total> <failed> <skipped> <failed names>".
run_tests() {
  local log=$1 rc=0
  shift
  # 9>&-: a service a test leaves running must not hold the lock of this script.
  (cd "$build" && ctest "$@" --timeout "$timeout" -j "$jobs" --output-on-failure) > "$log" 2>&1 9>&- || rc=$?
  local total failed skipped names
  total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  failed=$(sed -n 's/.*, \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -1)
  skipped=$(grep -c '\*\*\*Skipped\|Not Run' "$log" || true)
  names=$(sed -n '/The following tests FAILED:/,$p' "$log" | sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\).*/\1/p' | head -5 | paste -sd, -)
  [[ -n "$total" ]] || total=0
  [[ -n "$failed" ]] || failed=$((rc != 0 ? 1 : 0))
  echo "$total $failed $skipped ${names:-}"
}

chosen=()
all_targets=() all_tests=()
for i in "${!ids[@]}"; do
  selected "${ids[i]}" || continue
  chosen+=("$i")
  all_targets+=(${targets[i]})
  all_tests+=("${tests[i]}")
done
[[ ${#chosen[@]} -gt 0 ]] || { echo "mutate: no mutation matches ${selectors[*]}" >&2; exit 2; }
baseline_targets=$(printf '%s\n' "${all_targets[@]}" | sort -u | paste -sd' ' -)
# A mutation without `build:` rebuilds everything: so does the baseline.
for i in "${chosen[@]}"; do [[ -n "${targets[i]}" ]] || baseline_targets=''; done

echo "mutate: ${#chosen[@]} mutations from $list; build $build; logs $logs"
echo "mutate: baseline: building and running the selected tests unmutated"
if ! build_targets "$logs/baseline.build.log" "$baseline_targets"; then
  echo "mutate: the unmutated tree does not build; see $logs/baseline.build.log" >&2
  exit 1
fi
# After the build: CTest learns a gtest binary's tests when it is built.
baseline_numbers=$(test_numbers "${all_tests[@]}")
[[ -n "$baseline_numbers" ]] || { echo "mutate: the selected regexes select no test" >&2; exit 1; }
read -r total failed skipped names < <(run_tests "$logs/baseline.test.log" -I "0,0,0,$baseline_numbers")
if [[ $failed != 0 || $total == 0 ]]; then
  echo "mutate: the unmutated tests fail ($failed of $total: $names); see $logs/baseline.test.log" >&2
  exit 1
fi
echo "mutate: baseline: $total tests pass ($skipped skipped)"

killed=0 survived=0 unapplied=0 unbuilt=0 notests=0
report=()
for i in "${chosen[@]}"; do
  id=${ids[i]} file=${files[i]}
  if [[ ! -f "$file" ]] || [[ $(occurrences "$file" "${finds[i]}") != 1 ]]; then
    result="NOT APPLIED  $id: 'find' does not occur exactly once in $file"
    unapplied=$((unapplied + 1))
  else
    cp "$file" "$state/original"
    echo "$file" > "$state/path"
    replace_once "$file" "${finds[i]}" "${repls[i]}"
    if ! build_targets "$logs/$id.build.log" "${targets[i]}"; then
      result="NOT BUILT    $id: see $logs/$id.build.log"
      unbuilt=$((unbuilt + 1))
    else
      read -r total failed skipped names < <(run_tests "$logs/$id.test.log" -R "${tests[i]}")
      if [[ $total == 0 ]]; then
        result="NO TESTS     $id: '${tests[i]}' selects no test"
        notests=$((notests + 1))
      elif [[ $failed != 0 ]]; then
        result="KILLED       $id: $failed of $total tests failed ($names)"
        killed=$((killed + 1))
      else
        result="SURVIVED     $id: all $total tests passed ($skipped skipped); see $logs/$id.test.log"
        survived=$((survived + 1))
      fi
    fi
    restore
    if ! build_targets "$logs/$id.restore.log" "${targets[i]}"; then
      echo "mutate: the restored tree does not build; see $logs/$id.restore.log" >&2
      exit 1
    fi
  fi
  echo "$result"
  report+=("$result")
done

echo
echo "mutate: ${#chosen[@]} mutations: $killed killed, $survived survived, $unapplied not applied, $unbuilt not built, $notests without tests"
for r in "${report[@]}"; do
  [[ $r == KILLED* ]] || echo "  $r"
done
[[ $((survived + unapplied + unbuilt + notests)) == 0 ]]
