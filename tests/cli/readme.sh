#!/usr/bin/env bash
# tests/cli/readme.sh SHEAF — the README's first program prints what the README says it prints:
# the first ```clojure block is run as fit.shf and its output compared with the block after it
# (the lines below `$ build/sheaf fit.shf`).
set -u
[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
README="$(dirname "$0")/../../README.md"
source "$(dirname "$0")/lib/harness.sh"
STATUS=none

# block N: the lines inside the N-th fenced block (``` ... ```) of the README, counting from 1.
block() { awk -v n="$1" '/^```/ { k += 0.5; next } k == n - 0.5 { print }' "$README"; }
program_at=$(awk '/^```clojure/ { print NR; exit }' "$README")
[[ -n $program_at ]] || { echo "FAIL: README has no clojure block" >&2; exit 1; }
n=$(awk -v at="$program_at" 'NR <= at && /^```/ { k++ } END { print (k + 1) / 2 }' "$README")
block "$n" >"$TMP/fit.shf"
block $((n + 1)) | sed '1{/^\$ /d}' >"$TMP/expected"

run fit.shf
status_is 0 "README program"
diff -u "$TMP/expected" "$TMP/out" >&2 || fail "README program: output differs from the README's"
exit $FAILED
