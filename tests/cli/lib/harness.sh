# tests/cli/lib/harness.sh — shared helpers of the command-line tests (sourced, not a test).
# The sourcing script sets SHEAF (absolute path of the binary); this file creates $TMP (removed
# at exit) and FAILED. `run ARGS...` runs sheaf in $TMP capturing status, stdout and stderr; the
# checks report a FAIL line with the captured output and set FAILED=1.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0

fail() {
  echo "FAIL: $*" >&2
  echo "  status: $STATUS" >&2
  echo "  stdout: $(head -c 800 "$TMP/out")" >&2
  echo "  stderr: $(head -c 800 "$TMP/err")" >&2
  FAILED=1
}
run() {
  (cd "$TMP" && NO_COLOR=1 "$SHEAF" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null)
  STATUS=$?
}
status_is() { [[ $STATUS -eq $1 ]] || fail "$2: expected exit status $1"; }
stderr_has() { grep -qF -- "$1" "$TMP/err" || fail "$2: stderr lacks '$1'"; }
stdout_has() { grep -qF -- "$1" "$TMP/out" || fail "$2: stdout lacks '$1'"; }
stdout_is() { [[ "$(cat "$TMP/out")" == "$1" ]] || fail "$2: expected stdout '$1'"; }
