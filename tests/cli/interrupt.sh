#!/usr/bin/env bash
# tests/cli/interrupt.sh SHEAF — Ctrl-C in a program (SPEC §10.1 on-interrupt, cli/interrupts.hpp):
# SIGINT stops a running compiled loop or interpreted loop at its next safe point; the function
# given to (on-interrupt f) runs (its error, if any, is reported), then the program ends with status
# 130. A second SIGINT ends it at once, also while the handler runs. (The REPL's Ctrl-C is tested by repl.sh.)
set -u
[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
source "$(dirname "$0")/lib/harness.sh"
STATUS=none

# A compiled while loop (one native call) that would run for hours; a short call first builds it.
cat >"$TMP/compiled.shf" <<'SHF'
(on-interrupt (fn [] (print "saved at" (io "clock" ) "s")))
(defn spin [x n limit] (while (< (second s) limit) [s [x n]] [(+ (* (first s) 0.5) 1.0) (+ (second s) 1.0)]))
(spin (ones [64]) (tensor 0.0) (tensor 10.0))
(io "append" "log.jsonl" {:at "running"})
(spin (ones [64]) (tensor 0.0) (tensor 1e12))
(print "not reached")
SHF
cat >"$TMP/interpreted.shf" <<'SHF'
(io "append" "log.jsonl" {:at "running"})
(loop [i 0] (recur (inc i)))
SHF
cat >"$TMP/failing.shf" <<'SHF'
(on-interrupt (fn [] (+ (get {:step 1} :stpe) 1)))
(io "append" "log.jsonl" {:at "running"})
(loop [i 0] (recur (inc i)))
SHF
cat >"$TMP/stubborn.shf" <<'SHF'
(on-interrupt (fn [] (io "append" "log.jsonl" {:at "saving"}) (loop [i 0] (recur (inc i)))))
(io "append" "log.jsonl" {:at "running"})
(loop [i 0] (recur (inc i)))
SHF

# start FILE: runs sheaf in the background (PID); `running WORD` waits (up to 60 s) for the
# program to log {"at": "WORD"} (stdout is not flushed while it runs; an appended row is).
start() {
  rm -f "$TMP/log.jsonl"
  (cd "$TMP" && NO_COLOR=1 exec "$SHEAF" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null) &
  PID=$!
}
running() {
  for _ in $(seq 600); do
    grep -qF "\"$1\"" "$TMP/log.jsonl" 2>/dev/null && return 0
    kill -0 "$PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
# finish: waits (up to 30 s) for the program to end; STATUS is its exit status (999: still running).
finish() {
  for _ in $(seq 300); do
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$PID" 2>/dev/null; then
    kill -KILL "$PID"
    wait "$PID" 2>/dev/null
    STATUS=999
  else
    wait "$PID"
    STATUS=$?
  fi
}

start --jit-profile compiled.shf
running running || fail 'compiled: the program starts'
sleep 0.5
kill -INT "$PID"
finish
status_is 130 'compiled loop stopped by SIGINT'
stdout_has 'saved at' 'on-interrupt runs after the compiled loop stops'
grep -qF 'not reached' "$TMP/out" && fail 'compiled: the program goes on after the interrupt'
stderr_has 'Interrupted (Ctrl-C)' 'the interrupt is reported'
stderr_has 'compiled.shf:5:1' 'at the call that was running'
stderr_has ' 0 interpreted calls' 'the loop ran compiled'

start interpreted.shf
running running || fail 'interpreted: the program starts'
kill -INT "$PID"
finish
status_is 130 'interpreted loop without on-interrupt'
stderr_has 'interpreted.shf:2:' 'the interrupt names the loop'

start failing.shf
running running || fail 'failing: the program starts'
kill -INT "$PID"
finish
status_is 130 'an on-interrupt function that fails'
stderr_has 'failing.shf:1:' 'its error is reported'

start stubborn.shf
running running || fail 'stubborn: the program starts'
kill -INT "$PID"
running saving || fail 'stubborn: the handler starts'
kill -INT "$PID"
finish
status_is 130 'a second SIGINT ends the program while its handler runs'

exit $FAILED
