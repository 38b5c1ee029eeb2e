#!/usr/bin/env bash
# tests/obs/run_golden.sh SHEAF — golden tests of the observability tools (SPEC §9): --trace,
# guards (forms and --guard), breach reports.
# Every tests/obs/*.shf runs in a fresh temporary directory (the .shf copied there, cwd there,
# NO_COLOR=1, stdin </dev/null), so no __sheaf__/ cache leaks between runs or into the source tree.
# Directives in the leading `;;` comment lines:
#   ;; ARGS: --trace f        sheaf options, placed before the file (word-split, no quoting)
#   ;; STATUS: 1              expected exit status (default 0)
# NAME.expected holds the expected stdout, a line `--- stderr ---`, then the expected stderr, with
# every timing masked ([0-9]+.[0-9]+ followed by μs, ms or s → <T>). A mismatch prints a unified
# diff; the script exits 1 if any test failed. UPDATE=1 rewrites the .expected files instead.
# Without a C++ compiler the CPU backend prints one notice line ("no C++ compiler found ...") and
# runs compiled functions on the reference executor; that line is dropped before comparing.
# Optional further arguments: test names (without .shf) to run only those.
set -uo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: $0 path/to/sheaf [NAME...]" >&2
  exit 2
fi
SHEAF="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shift
DIR="$(cd "$(dirname "$0")" && pwd)"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

mask() { LC_ALL=C sed -E 's/[0-9]+\.[0-9]+(μs|ms|s)/<T>/g'; }

# The actual output of one test, in the .expected format, on stdout; the exit status in $WORK/status.
actual() {
  local src=$1 name args status run
  name=$(basename "$src")
  args=$(sed -n '/^;;/!q; s/^;; ARGS: *//p' "$src")
  run="$WORK/run.$RANDOM$RANDOM"
  mkdir "$run"
  cp "$src" "$run/$name"
  # shellcheck disable=SC2086  # ARGS is word-split on purpose
  (cd "$run" && NO_COLOR=1 "$SHEAF" $args "$name" >"$run/.out" 2>"$run/.err" </dev/null)
  status=$?
  echo "$status" >"$WORK/status"
  cat "$run/.out"
  [[ -s "$run/.out" && -n "$(tail -c1 "$run/.out")" ]] && echo
  echo '--- stderr ---'
  grep -v '^sheaf: no C++ compiler found' "$run/.err"
  rm -rf "$run"
}

FAILED=0
COUNT=0
if [[ $# -gt 0 ]]; then
  TESTS=()
  for n in "$@"; do TESTS+=("$DIR/${n%.shf}.shf"); done
else
  TESTS=("$DIR"/*.shf)
fi
for src in "${TESTS[@]}"; do
  [[ -f "$src" ]] || { echo "FAIL: no such test $src"; FAILED=1; continue; }
  COUNT=$((COUNT + 1))
  name=$(basename "$src" .shf)
  want_status=$(sed -n '/^;;/!q; s/^;; STATUS: *//p' "$src")
  want_status=${want_status:-0}
  out=$(actual "$src" | mask; echo x)  # keep trailing newlines
  out=${out%x}
  status=$(cat "$WORK/status")
  expected="$DIR/$name.expected"
  if [[ -n "${UPDATE:-}" ]]; then
    printf '%s' "$out" >"$expected"
    [[ "$status" == "$want_status" ]] || echo "WARNING: $name exited $status, its STATUS directive says $want_status"
    echo "updated $name.expected"
    continue
  fi
  ok=1
  if [[ "$status" != "$want_status" ]]; then
    echo "FAIL: $name: exit status $status, expected $want_status"
    ok=0
  fi
  if [[ ! -f "$expected" ]]; then
    echo "FAIL: $name: no $name.expected (run with UPDATE=1 to create it)"
    ok=0
  elif ! diff -u --label "$name.expected" --label "$name (actual)" "$expected" <(printf '%s' "$out"); then
    echo "FAIL: $name: output differs (diff above)"
    ok=0
  fi
  if [[ $ok == 1 ]]; then echo "ok   $name"; else FAILED=1; fi
done
[[ -n "${UPDATE:-}" ]] && exit 0
if [[ $FAILED == 1 ]]; then
  echo "obs golden: FAILED"
  exit 1
fi
echo "obs golden: all $COUNT passed"
