#!/usr/bin/env bash
# tests/cli/build_commit.sh — cmake/build_commit.cmake, which every build runs for `sheaf
# --version`: in a scratch git repository it writes the short commit, "+" once a tracked file
# differs from it (an untracked one does not count), the new commit after a commit, and "unknown"
# outside a repository; run again with nothing changed it leaves the header untouched (so nothing
# is rebuilt). The binary's own version line names a commit. Skipped (77) without git.
# Usage: build_commit.sh path/to/build/sheaf
set -u
[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
command -v git >/dev/null || { echo "no git: skipped"; exit 77; }
SHEAF=$(realpath "$1")
SCRIPT=$(realpath "$(dirname "$0")/../../cmake/build_commit.cmake")
source "$(dirname "$0")/lib/harness.sh"
OUT=$TMP/build_commit.hpp
REPO=$TMP/repo
STATUS=0

header() { cmake -DSOURCE_DIR="$1" -DOUT="$OUT" -P "$SCRIPT" && cat "$OUT"; }
expect() {  # expect WHAT EXPECTED-HEADER-LINE
  local got
  got=$(header "$REPO")
  [[ $got == "$2" ]] || { echo "FAIL: $1: expected '$2', got '$got'" >&2; FAILED=1; }
}
git_() { git -C "$REPO" -c user.name=t -c user.email=t@example.org "$@" >/dev/null; }

mkdir -p "$REPO" && git_ init -q && echo one >"$REPO/f" && git_ add f && git_ commit -q -m one
first=$(git -C "$REPO" rev-parse --short HEAD)
expect 'a clean checkout' "#define SHEAF_COMMIT \"$first\""
before=$(stat -c %y "$OUT")
sleep 1
expect 'run again' "#define SHEAF_COMMIT \"$first\""
[[ $(stat -c %y "$OUT") == "$before" ]] || { echo "FAIL: an unchanged commit rewrote the header" >&2; FAILED=1; }
echo untracked >"$REPO/g"
expect 'an untracked file' "#define SHEAF_COMMIT \"$first\""
echo two >"$REPO/f"
expect 'a changed tracked file' "#define SHEAF_COMMIT \"$first+\""
git_ commit -q -am two
second=$(git -C "$REPO" rev-parse --short HEAD)
[[ $second != "$first" ]] || { echo "FAIL: the second commit has the first one's hash" >&2; FAILED=1; }
expect 'a new commit' "#define SHEAF_COMMIT \"$second\""
mkdir -p "$TMP/plain"
got=$(header "$TMP/plain")
[[ $got == '#define SHEAF_COMMIT "unknown"' ]] || { echo "FAIL: outside a repository: got '$got'" >&2; FAILED=1; }

run --version
status_is 0 '--version'
grep -qE '\(commit ([0-9a-f]{7,}\+?|unknown), ' "$TMP/out" || fail '--version names the commit first'
exit $FAILED
