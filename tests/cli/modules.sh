#!/usr/bin/env bash
# tests/cli/modules.sh — where `use` finds modules when sheaf runs from another directory (SPEC
# §4.6): a program's bare `(use helper)` loads the helper beside the program, never one planted in
# the current directory; `-c` and the REPL search the current directory; $SHEAF_LIB comes after
# the program's directory; paths resolve against the including file. And nn/optim load only when
# a program refers to one of their names (SPEC §4.7).
# Usage: modules.sh path/to/sheaf — runs every check, then exits 1 if any failed.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
source "$(dirname "$0")/lib/harness.sh"

mkdir -p "$TMP/app/sub" "$TMP/work" "$TMP/shared"
cat >"$TMP/app/main.shf" <<'SHF'
(use helper)
(use ./sub/extra)
(print "{} {}" (who) (extra))
SHF
echo '(defn who [] "app")' >"$TMP/app/helper.shf"
echo '(defn extra [] "extra")' >"$TMP/app/sub/extra.shf"
echo '(defn who [] "hostile")' >"$TMP/work/helper.shf"
echo '(defn from-lib [] "lib")' >"$TMP/shared/libonly.shf"
echo '(defn who [] "lib")' >"$TMP/shared/helper.shf"

# run_in DIR ARGS...: sheaf from DIR, with SHEAF_LIB=$TMP/shared
run_in() {
  local dir=$1
  shift
  (cd "$dir" && NO_COLOR=1 SHEAF_LIB="$TMP/shared" "$SHEAF" "$@" >"$TMP/out" 2>"$TMP/err")
  STATUS=$?
}

# ---- a program's modules come from its own directory, not from the current one ----
run_in "$TMP/work" ../app/main.shf </dev/null
status_is 0 'running ../app/main.shf from another directory'
stdout_is 'app extra' "the program's helper.shf and ./sub/extra, not work/helper.shf nor \$SHEAF_LIB's"
run_in / "$TMP/app/main.shf" </dev/null
stdout_is 'app extra' 'the same from / with an absolute path'

# ---- $SHEAF_LIB is searched after the program's directory ----
echo '(use libonly) (print (from-lib))' >"$TMP/app/uses_lib.shf"
run_in "$TMP/work" ../app/uses_lib.shf </dev/null
stdout_is 'lib' 'a module found only in $SHEAF_LIB'

# ---- a module not beside the program is not taken from the current directory ----
echo '(use stray) (print "loaded")' >"$TMP/app/uses_stray.shf"
echo '(print "stray from the current directory")' >"$TMP/work/stray.shf"
run_in "$TMP/work" ../app/uses_stray.shf </dev/null
status_is 1 'a module only in the current directory'
stderr_has "module 'stray' not found" 'names the module'
grep -qF 'stray from the current directory' "$TMP/out" && fail 'the current directory was searched for a program'

# ---- -c and the REPL evaluate in the current directory, so they search it ----
run_in "$TMP/work" -c '(use helper) (who)' </dev/null
stdout_is 'hostile' '-c uses the current directory'
(cd "$TMP/work" && printf '(use helper)\n(who)\n' | NO_COLOR=1 "$SHEAF" >"$TMP/out" 2>"$TMP/err")
stdout_has '=> hostile' 'the REPL uses the current directory'

# ---- nn and optim load on the first reference to one of their names, not before ----
(cd "$TMP/work" && printf '(+ 1 2)\n:registry\n(linear [[1 2]] [[1] [1]] [0])\n:registry\n' | NO_COLOR=1 "$SHEAF" >"$TMP/out" 2>"$TMP/err")
awk '/Loaded modules/{n++} n==1 && /^  nn /{bad=1} END{exit bad}' "$TMP/out" || fail 'nn was loaded before any of its names was used'
awk '/Loaded modules/{n++} n==2 && /^  nn /{ok=1} END{exit !ok}' "$TMP/out" || fail 'referring to linear loaded nn'
grep -q '^  optim ' "$TMP/out" && fail 'optim was loaded without a reference to it'
(cd "$TMP/work" && printf ':h adam-step\n' | NO_COLOR=1 "$SHEAF" >"$TMP/out" 2>"$TMP/err")
stdout_has '(adam-step p g m v t lr & hyper)' ':h describes an optim function before its module is loaded'
# a user definition shadows one of nn's once nn is loaded; :clear brings nn's back
(cd "$TMP/work" && printf '(linear [[1]] [[2]] [3])\n(defn linear [x] :mine)\n(linear 1)\n:clear\n(linear [[1]] [[2]] [3])\n' |
  NO_COLOR=1 "$SHEAF" >"$TMP/out" 2>"$TMP/err")
stdout_has '=> :mine' "the user's linear"
[[ $(grep -c '=> \[\[5\.\]\]' "$TMP/out") -eq 2 ]] || fail ":clear restores nn's linear"

exit $FAILED
