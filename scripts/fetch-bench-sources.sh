#!/usr/bin/env bash
# Fetches the third-party source trees that workload c of scripts/bench.sh
# builds, from Debian's own source packages, and unpacks them:
#   DEST/zstd   libzstd (plain Makefile, `-MT $@ -MMD -MP -MF` auto-dependencies)
#   DEST/xz     xz-utils (autotools + libtool, depcomp's `-MT -MD -MP -MF`)
#   DEST/leveldb  leveldb (CMake + Ninja, C++)
#   DEST/fmt    fmtlib (CMake + Ninja, C++; its headers test `__has_include`)
# Usage: scripts/fetch-bench-sources.sh [DEST]   (default ~/.cache/ccpool-bench/sources)
#
# A fresh Debian machine has no deb-src entries, so `apt-get source` runs with
# a private sources list and a private lists directory: the system's apt state
# is not touched. apt checks the Sources index against Debian's archive key
# and every downloaded file against the .dsc checksums. Nothing here is
# committed; a second run with the trees present does nothing.
set -euo pipefail
dest=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/ccpool-bench/sources}
case ${1:-} in -h|--help) sed -n 2,14p "$0"; exit 0 ;; esac

# name in DEST, Debian source package, the tree's top directory inside the orig tarball
PKGS=("zstd libzstd zstd-*" "xz xz-utils xz-*" "leveldb leveldb leveldb-*" "fmt fmtlib fmtlib-*")

missing=()
for p in "${PKGS[@]}"; do
  read -r name _ _ <<<"$p"
  [[ -f $dest/$name/.ccpool-fetched ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && { echo "fetch-bench-sources: trees present in $dest"; exit 0; }

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
if [[ ! -r $keyring ]]; then
  echo "fetch-bench-sources: $keyring is missing; install debian-archive-keyring" >&2
  exit 1
fi
. /etc/os-release
suite=${VERSION_CODENAME:-bookworm}

mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
apt_dir=$dest/.apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/download"
echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian $suite main" >"$apt_dir/sources.list"
opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
      -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -q)
# apt drops to the _apt user to download, which cannot write into a root-owned
# private directory; this directory is ours alone.
[[ $(id -u) -eq 0 ]] && opts+=(-o "APT::Sandbox::User=root")
mkdir -p "$apt_dir/cache/archives/partial"

echo "fetch-bench-sources: reading Debian's $suite source index into $apt_dir"
apt-get "${opts[@]}" update >"$apt_dir/update.log" 2>&1 || { cat "$apt_dir/update.log" >&2; exit 1; }

for p in "${missing[@]}"; do
  read -r name pkg top <<<"$p"
  echo "fetch-bench-sources: $pkg -> $dest/$name"
  (cd "$apt_dir/download" && rm -f "${pkg}"_* &&
   apt-get "${opts[@]}" source --download-only "$pkg" >"$apt_dir/$pkg.log" 2>&1) ||
    { cat "$apt_dir/$pkg.log" >&2; exit 1; }
  orig=$(ls "$apt_dir/download/${pkg}"_*.orig.tar.* | grep -v '\.asc$' | head -n1)
  version=$(basename "$(ls "$apt_dir/download/${pkg}"_*.dsc)" .dsc)
  tmp=$(mktemp -d "$dest/.unpack.XXXXXX")
  tar -C "$tmp" -xf "$orig"
  # shellcheck disable=SC2086  # $top is a glob for the versioned directory
  src=$(cd "$tmp" && ls -d $top | head -n1)
  rm -rf "${dest:?}/$name"
  mv "$tmp/$src" "$dest/$name"
  rmdir "$tmp"
  echo "$version" >"$dest/$name/.ccpool-fetched"
done
echo "fetch-bench-sources: done ($(cat "$dest"/*/.ccpool-fetched | tr '\n' ' '))"
