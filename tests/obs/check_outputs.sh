#!/usr/bin/env bash
# tests/obs/check_outputs.sh SHEAF — observability outputs that are not exact text (SPEC §8, §9):
#   --blame         parsed (rows depend on timings): header, columns, exact call counts of user
#                   functions, builtins and `<compile f>`, the Compiled function table, the call
#                   tree's nesting and counts, `... N others` folding past 20 functions;
#   --profile-out   Chrome trace-event JSON: event fields, a proper forest of intervals, compile
#                   and compiled events, counts matching the --blame report, atomic write;
#   --trace-out json  sheaf_trace.jsonl: fields, nesting levels, jit_call of compiled calls;
#   CLI errors      malformed --guard specs, --trace-level/--trace-out values: status 2, grammar named;
#   --trace f1,f2 FILE vs --trace FILE: the argument after --trace is a function list only if it
#                   neither starts with '-' nor ends in .shf.
# Each run is in a fresh temporary directory (NO_COLOR=1, stdin </dev/null). Without a C++
# compiler the CPU backend's one-line notice on stderr is tolerated (compiled functions then run
# on the reference executor, still as compiled calls).
set -uo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 path/to/sheaf" >&2
  exit 2
fi
SHEAF="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
HERE="$(cd "$(dirname "$0")" && pwd)"
CHECK=("${PYTHON:-python3}" "$HERE/check_profile.py")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
STATUS=0
RUN=""

fail() {
  echo "FAIL: $*"
  echo "  status: $STATUS"
  echo "  stdout: $(head -c 600 "$RUN/out")"
  echo "  stderr: $(head -c 1500 "$RUN/err")"
  FAILED=1
}
# run_raw PROGRAM ARGS...: a fresh directory $RUN with PROGRAM (a file in $TMP) copied in;
# `sheaf ARGS` run there. run PROGRAM ARGS...: the same with PROGRAM as the last argument.
run_raw() {
  local prog=$1
  shift
  RUN=$(mktemp -d "$TMP/run.XXXXXX")
  cp "$TMP/$prog" "$RUN/"
  (cd "$RUN" && NO_COLOR=1 "$SHEAF" "$@" >"$RUN/out" 2>"$RUN/err" </dev/null)
  STATUS=$?
}
run() { run_raw "$1" "${@:2}" "$1"; }
status_is() { [[ $STATUS -eq $1 ]] || fail "$2: exit status $STATUS, expected $1"; }
stderr_has() { grep -qF -- "$1" "$RUN/err" || fail "$2: stderr lacks '$1'"; }
stderr_lacks() { grep -qF -- "$1" "$RUN/err" && fail "$2: stderr has '$1'"; }
stdout_is() { [[ "$(cat "$RUN/out")" == "$1" ]] || fail "$2: stdout is not '$1'"; }
check() {  # check WHAT KIND FILE ARGS...: check_profile.py, its FAIL lines reported
  local what=$1
  shift
  local msg
  if ! msg=$("${CHECK[@]}" "$@" 2>&1); then
    fail "$what: $msg"
  fi
}
no_tmp_left() {
  local left
  left=$(find "$RUN" -name '*.tmp' -print)
  [[ -z "$left" ]] || fail "$1: temporary files left behind: $left"
}

# ---- programs -----------------------------------------------------------------------------------
# train: interpreted (it prints); step: compiled on its first call, then run 4 more times.
cat >"$TMP/train.shf" <<'EOF'
(defn step [x] (* (tanh x) 2.0))
(defn train [n]
  (loop [i 0 x (tensor [0.1 0.2])]
    (if (< i n)
      (recur (inc i) (step x))
      (do (print "done {}" i) x))))
(train 5)
nil
EOF
# 25 user functions called once each, interpreted (--no-jit): 26 profiled names with `+`.
{
  for i in $(seq -w 1 25); do echo "(defn f$i [x] (+ x $i))"; done
  for i in $(seq -w 1 25); do echo "(f$i 1)"; done
  echo nil
} >"$TMP/many.shf"

# ---- --blame ------------------------------------------------------------------------------------
run train.shf --blame
status_is 0 'blame run'
stdout_is 'done 5' 'blame: the program runs'
check 'blame of train.shf' blame "$RUN/err" \
  --fn train=1 --fn step=5 --fn '<compile step>=1' --fn tensor=1 --fn '<=6' --fn inc=5 --fn print=1 \
  --distinct 7 --total-calls 20 --compiled step=5 \
  --tree 'train=1' --tree 'train :: step=5' --tree 'train :: step :: <compile step>=1' --root-calls 1
stderr_lacks '├─ [' 'blame alone prints no trace'

run many.shf --blame --no-jit
status_is 0 'blame run, 25 functions'
check 'blame of 25 functions' blame "$RUN/err" --distinct 26 --total-calls 50 --root-calls 25
grep -q '^  Compiled function' "$RUN/err" && fail 'blame --no-jit: no Compiled function table expected'

# ---- --profile-out ------------------------------------------------------------------------------
run train.shf --profile-out prof.json --blame
status_is 0 'profile-out run'
[[ -f "$RUN/prof.json" ]] || fail 'profile-out: prof.json written'
no_tmp_left 'profile-out'
check 'chrome events of train.shf' chrome "$RUN/prof.json" \
  --count train=1 --count step=5 --count '<compile step>=1' --count tensor=1 --count '<=6' --count inc=5 --count print=1 \
  --cat train=function --cat step=compiled --cat '<compile step>=compile' --cat tensor=builtin --cat inc=builtin \
  --inside '<compile step>=step' --inside step=train --inside inc=train
check 'blame beside profile-out' blame "$RUN/err" --fn step=5 --fn '<compile step>=1' --compiled step=5

run train.shf --profile-out prof.json
status_is 0 'profile-out without --blame'
stderr_lacks 'Profiler:' 'profile-out alone prints no report'
check 'chrome events without --blame' chrome "$RUN/prof.json" --count step=5 --count '<compile step>=1'

run train.shf --profile-out prof.json --no-jit
status_is 0 'profile-out --no-jit'
check 'chrome events, interpreted' chrome "$RUN/prof.json" \
  --count step=5 --count tanh=5 --count '*=5' --count '<compile step>=0' --cat step=function \
  --inside tanh=step --inside '*=step' --inside step=train

run many.shf --profile-out prof.json --no-jit
check 'chrome events of 25 functions' chrome "$RUN/prof.json" --count f01=1 --count f25=1 --count +=25 --inside '+=f[0-9]+'

# ---- --trace-out json ---------------------------------------------------------------------------
run train.shf --trace --trace-out json
status_is 0 'trace-out json run'
stdout_is 'done 5' 'trace-out json: the program runs'
grep -v '^sheaf: no C++ compiler found' "$RUN/err" | grep -q . && fail 'trace-out json: nothing on stderr'
[[ -f "$RUN/sheaf_trace.jsonl" ]] || fail 'trace-out json: sheaf_trace.jsonl written in the cwd'
no_tmp_left 'trace-out json'
check 'sheaf_trace.jsonl, every call' jsonl "$RUN/sheaf_trace.jsonl" \
  --count call:train=1 --count return:train=1 --count call:step=5 --count jit_call:step=5 --count return:step=5 \
  --count call:tanh=0 --count call:inc=5 --count call:print=1 --level train=0 --level step=1 --level inc=1 --level print=1

run train.shf --trace step --trace-out json
status_is 0 'trace-out json, --trace step'
check 'sheaf_trace.jsonl, --trace step' jsonl "$RUN/sheaf_trace.jsonl" \
  --count call:step=5 --count jit_call:step=0 --count call:tanh=5 --count 'call:*=5' --count call:train=0 \
  --count call:inc=0 --level step=0 --level tanh=1

run train.shf --trace --trace-out json --trace-level fast
grep -q 'min:' "$RUN/sheaf_trace.jsonl" && fail 'trace-out json, fast: no min/max in the summaries'
grep -qF '"f32[2] (8B)"' "$RUN/sheaf_trace.jsonl" || fail 'trace-out json, fast: shape-only summaries'

# ---- CLI errors ---------------------------------------------------------------------------------
GRAMMAR='[scope:]target:check'
for spec in 'foo:bar:baz:no-nan' 'x:wat' 'range[a,1]' 'f::no-nan' '' 'shape[2,x]' 'range[0,1' 'nonan'; do
  run train.shf --guard "$spec"
  status_is 2 "--guard '$spec'"
  stderr_has "error: --guard '$spec'" "--guard '$spec' is named"
  stderr_has "$GRAMMAR" "--guard '$spec': the grammar is named"
  stdout_is '' "--guard '$spec': the program does not run"
done
for spec in 'range[1]' 'range[1,2,3]'; do
  run train.shf --guard "$spec"
  status_is 2 "--guard '$spec'"
  stderr_has "error: --guard '$spec': range takes two bounds, range[lo,hi]" "--guard '$spec': the range grammar"
  stdout_is '' "--guard '$spec': the program does not run"
done
run train.shf --guard 'step:x:range[0,1]' --guard 'x:wat'
status_is 2 'a bad --guard after a good one'
stderr_has "error: --guard 'x:wat'" 'the bad one is named'
run_raw train.shf train.shf --guard
status_is 2 '--guard without its spec'
run train.shf --trace-level bogus
status_is 2 '--trace-level bogus'
stderr_has 'bogus' '--trace-level bogus: the value is named'
stderr_has 'fast' '--trace-level bogus: the choices are named'
stdout_is '' '--trace-level bogus: the program does not run'
run train.shf --trace-out xml
status_is 2 '--trace-out xml'
stderr_has 'console' '--trace-out xml: the choices are named'
run_raw train.shf train.shf --profile-out
status_is 2 '--profile-out without its file'
run_raw train.shf --profile-out train.shf train.shf
status_is 2 '--profile-out naming a program'
stderr_has "expected a .json file" '--profile-out FILE.shf is refused, the program is not overwritten'
grep -qF '(defn' "$RUN/train.shf" || fail '--profile-out FILE.shf: the program is intact'
run train.shf --profile-out train.shf/prof.json
status_is 1 'an unwritable --profile-out fails the run (no crash)'
stderr_has 'error: --profile-out' 'an unwritable --profile-out is reported'
for spec in 'range[2,1]' 'shape[2.5]' 'shape[-1]'; do
  run train.shf --guard "$spec"
  status_is 2 "--guard '$spec' (an empty range or a bad dimension)"
done
run_raw train.shf train.shf --trace-fns
status_is 2 '--trace-fns without its list'

# ---- --trace argument disambiguation (SPEC §8) --------------------------------------------------
for prog_first in 0 1; do
  if [[ $prog_first == 1 ]]; then run_raw train.shf --trace step,inc train.shf; what='--trace step,inc FILE'; else run_raw train.shf train.shf --trace step,inc; what='FILE --trace step,inc'; fi
  status_is 0 "$what"
  stdout_is 'done 5' "$what: the file runs"
  [[ $(grep -c '^├─ \[step\]' "$RUN/err") -eq 5 ]] || fail "$what: 5 top-level step calls"
  [[ $(grep -c '^├─ \[inc\]' "$RUN/err") -eq 5 ]] || fail "$what: 5 top-level inc calls"
  [[ $(grep -c '^│ ├─ \[tanh\]' "$RUN/err") -eq 5 ]] || fail "$what: step's inside is traced (tanh at depth 1)"
  stderr_lacks '[train]' "$what: train is not traced"
  stderr_lacks '[tensor]' "$what: tensor is not traced"
  stderr_lacks '[compiled]' "$what: step runs interpreted"
done
for args in '--trace train.shf' 'train.shf --trace' '--trace --no-jit train.shf' '--no-jit train.shf --trace'; do
  # shellcheck disable=SC2086
  run_raw train.shf $args
  status_is 0 "$args"
  stdout_is 'done 5' "$args: the file runs"
  stderr_has '├─ [train] 5' "$args: every call is traced (train)"
  stderr_has '│ ├─ [tensor]' "$args: every call is traced (tensor inside train)"
done
run_raw train.shf --trace=step train.shf
status_is 0 '--trace=step FILE'
[[ $(grep -c '^├─ \[step\]' "$RUN/err") -eq 5 ]] || fail '--trace=step FILE: 5 step calls'
stderr_lacks '[inc]' '--trace=step FILE: only step'
run_raw train.shf --trace -c '(+ 1 2)'
status_is 0 '--trace -c EXPR'
stdout_is '3' '--trace -c EXPR: -c is not a function list'
stderr_has '├─ [+] 1, 2' '--trace -c EXPR: traced'
run_raw train.shf --trace step -c '(do (defn step [x] (* x 2)) (+ (step 1) 1))'
status_is 0 '--trace step -c EXPR'
stdout_is '3' '--trace step -c EXPR'
stderr_has '├─ [step] 1' '--trace step -c EXPR: step traced'
stderr_lacks '[+] 2, 1' '--trace step -c EXPR: + at top level not traced'

if [[ $FAILED == 0 ]]; then echo "obs outputs: all checks passed"; fi
exit $FAILED
