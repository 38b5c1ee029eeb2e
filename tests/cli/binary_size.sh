#!/usr/bin/env bash
# tests/cli/binary_size.sh SHEAF — a Release build of sheaf is at most 4 MB (4,194,304 bytes)
# once stripped, the size Sheaf 2.x ships at (CMakeLists.txt: "Binary size"). Debug and sanitizer
# builds are larger by design: for them the test reports itself skipped (exit 77).
set -u
[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
LIMIT=4194304
if ! "$1" --version | grep -q ', Release,'; then
  echo "skipped: not a Release build ($("$1" --version))"
  exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
strip -o "$TMP/sheaf" "$1"
size=$(stat -c %s "$TMP/sheaf")
echo "stripped: $size bytes (limit $LIMIT)"
if (( size > LIMIT )); then
  echo "FAIL: the stripped Release binary is $size bytes, more than $LIMIT" >&2
  exit 1
fi
