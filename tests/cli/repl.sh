#!/usr/bin/env bash
# tests/cli/repl.sh — the REPL (SPEC §8), driven (a) through a real pseudo-terminal with tmux,
# exercising libedit (prompts, echo, continuation, errors, Ctrl-C, Tab, :help, history, :quit,
# Ctrl-D), and (b) through a pipe, where lines are read plainly but prompts are still printed.
# Usage: repl.sh path/to/sheaf — exits non-zero on the first failed check.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
command -v tmux >/dev/null || {
  echo "FAIL: tmux is not installed; the REPL test needs it to drive a pseudo-terminal" >&2
  exit 1
}

TMP=$(mktemp -d)
SOCK="$TMP/tmux.sock"  # a private tmux server: never touches the user's sessions
SESSION="sheaf-repl-$$-$RANDOM"
mkdir -p "$TMP/home"
unset TMUX

tm() { tmux -S "$SOCK" -f /dev/null "$@"; }
cleanup() {
  tm kill-session -t "$SESSION" 2>/dev/null
  tm kill-server 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

pane() { tm capture-pane -p -t "$SESSION" -S -2000; }
fail() {
  echo "FAIL: $*" >&2
  echo "--- pane ---" >&2
  pane >&2
  exit 1
}

# poll PREDICATE...: run the predicate on the pane text every 0.1 s, for up to 10 s.
poll() {
  for _ in $(seq 100); do
    pane | "$@" && return 0
    sleep 0.1
  done
  return 1
}
has_prompts() { [[ $(grep -c '^sheaf>') -ge $1 ]]; }
expect() { poll grep -qF -- "$1" || fail "${2:-expected} '$1'"; }
expect_line() { poll grep -qxF -- "$1" || fail "${2:-expected} a line '$1'"; }

# send TEXT: wait for a fresh prompt, then type TEXT and Enter (no type-ahead before the prompt).
N=0
send() {
  N=$((N + 1))
  poll has_prompts "$N" || fail "no prompt #$N before sending '$1'"
  tm send-keys -t "$SESSION" -l -- "$1"
  tm send-keys -t "$SESSION" Enter
}

start() {
  tm kill-session -t "$SESSION" 2>/dev/null
  N=0
  local cmd
  cmd="env HOME=$(printf %q "$TMP/home") $(printf %q "$SHEAF"); echo \"[exited \$?]\"; sleep 600"
  tm new-session -d -s "$SESSION" -x 200 -y 50 "$cmd" || fail "tmux could not start a session"
  expect "Sheaf " "banner"
  expect "(:h for help)" "banner"
}

# ---- (a) a terminal session -----------------------------------------------------------------
start
send '(defn sq [x] (* x x))'
expect_line '=> <fn:sq>' "definition echo"
send '(sq 7)'
expect_line '=> 49' "call of a definition from an earlier input"

send '(+ 1'
poll grep -qx '\.\.\.' || fail "continuation prompt '...    ' for an unbalanced input"
tm send-keys -t "$SESSION" -l -- '2)'
tm send-keys -t "$SESSION" Enter
expect_line '=> 3' "multi-line input result"
# A multi-line form is one history entry: Up recalls both of its lines.
has_lines() { [[ $(grep -cxF -- "$1") -ge $2 ]]; }
N=$((N + 1))
poll has_prompts "$N" || fail "no prompt before recalling the multi-line form"
tm send-keys -t "$SESSION" Up Enter
poll has_lines '=> 3' 2 || fail "Up did not recall the whole multi-line form (+ 1 / 2)"

send '(undefined-fn 1)'
expect 'error: Unknown function: undefined-fn' "error message"
expect ' --> <repl>:1' "error location"
send '(sq 8)'
expect_line '=> 64' "session continues after an error"

N=$((N + 1))
poll has_prompts "$N" || fail "no prompt before Ctrl-C check"
tm send-keys -t "$SESSION" -l -- '(sq 12345'
expect 'sheaf> (sq 12345' "typed text before Ctrl-C"
tm send-keys -t "$SESSION" C-c
send '(sq 9)'
expect_line '=> 81' "input after Ctrl-C"
pane | grep -qF '152399025' && fail "Ctrl-C did not cancel the pending input"

# Ctrl-C while an input is running interrupts it; the session goes on.
send '(loop [i 0] (recur i))'
# A Ctrl-C that lands before the evaluation starts only clears the (empty) input line, so press
# it again, a second at a time, until the running loop reports the interrupt.
# interrupt_running K WHAT: presses Ctrl-C until the pane shows the K-th 'error: Interrupted'.
has_interrupts() { [[ $(grep -c 'error: Interrupted') -ge $1 ]]; }
interrupt_running() {
  for _ in 1 2 3 4 5; do
    sleep 0.3
    tm send-keys -t "$SESSION" C-c
    poll has_interrupts "$1" && return 0
  done
  fail "Ctrl-C did not interrupt $2"
}
interrupt_running 1 "a running interpreted loop"
send '(sq 10)'
expect_line '=> 100' "input after an interrupted evaluation"

# The same for a compiled loop (one native call polling the stop request), built by a short call.
send '(defn spin [x n limit] (while (< (second s) limit) [s [x n]] [(+ (* (first s) 0.5) 1.0) (+ (second s) 1.0)]))'
send '(second (spin (ones [4]) (tensor 0.0) (tensor 3.0)))'
expect_line '=> 3.0' "a short compiled loop"
send '(spin (ones [4]) (tensor 0.0) (tensor 1e12))'
interrupt_running 2 "a running compiled loop"
send '(sq 11)'
expect_line '=> 121' "input after an interrupted compiled loop"

send '(defn zebra-unique [x] x)'
expect_line '=> <fn:zebra-unique>' "second definition"
N=$((N + 1))
poll has_prompts "$N" || fail "no prompt before Tab check"
tm send-keys -t "$SESSION" -l -- '(zebra-u'
tm send-keys -t "$SESSION" Tab
tm send-keys -t "$SESSION" -l -- '5)'
tm send-keys -t "$SESSION" Enter
expect 'sheaf> (zebra-unique 5)' "Tab completion of a user name"
expect_line '=> 5' "completed call result"

send ':help map'
expect_line '(map f seq ...)' "signature of map"
send ':env'
poll grep -qE '^ +sq +defn +\[x\]$' || fail ":env lists sq as a defn with its parameters"
send ':trace on'
expect 'Tracing on (normal).' ":trace message"
send '(+ 1 2)'
expect '├─ [+] 1, 2' ":trace on shows the call on stderr"
expect '└─ ← 3 (' ":trace on shows the return"
send ':trace off'
expect 'Tracing off.' ":trace off message"
send '(* 6 7)'
expect_line '=> 42' "last evaluated input"
send ':quit'
expect_line 'Bye!' ":quit"
expect_line '[exited 0]' "exit status after :quit"
grep -qF '(*' "$TMP/home/.sheaf_history" || fail "history not written to \$HOME/.sheaf_history"

# A new session recalls history (Up Up = the input before :quit) and Ctrl-D quits.
start
N=1
poll has_prompts 1 || fail "no prompt in the second session"
tm send-keys -t "$SESSION" Up Up Enter
expect_line '=> 42' "input recalled from history"
N=2
poll has_prompts 2 || fail "no prompt before Ctrl-D"
tm send-keys -t "$SESSION" C-d
expect_line 'Bye!' "Ctrl-D"
expect_line '[exited 0]' "exit status after Ctrl-D"

# ---- (b) piped stdin ------------------------------------------------------------------------
out=$(printf '(defn sq [x] (* x x))\n(sq 7)\n(+ 1\n2)\n(nope)\n:help map\n:quit\n' |
      HOME="$TMP/home" "$SHEAF" 2>"$TMP/err")
status=$?
piped_fail() {
  echo "FAIL (piped): $*" >&2
  printf -- '--- stdout ---\n%s\n--- stderr ---\n' "$out" >&2
  cat "$TMP/err" >&2
  exit 1
}
[[ $status -eq 0 ]] || piped_fail "exit status $status"
[[ $(head -n1 <<<"$out") == "Sheaf "*" (:h for help)" ]] || piped_fail "banner"
grep -qxF 'sheaf> => 49' <<<"$out" || piped_fail "'=> 49' after the prompt"
grep -qxF 'sheaf> ...    => 3' <<<"$out" || piped_fail "continuation prompt and multi-line result"
grep -qF '(map f seq ...)' <<<"$out" || piped_fail ":help map"
[[ $(tail -n1 <<<"$out") == *"Bye!" ]] || piped_fail "Bye! at the end"
grep -qxF 'error: Unknown function: nope' "$TMP/err" || piped_fail "error on stderr"
grep -qF ' --> <repl>:1' "$TMP/err" || piped_fail "error location on stderr"

# :help on a function of nn or optim before its module is loaded: signature, the comment above
# its definition (lib/*.shf describe functions that way) and the module.
out=$(printf ':help layer-norm\n:help adam-step\n' | HOME="$TMP/home" "$SHEAF" 2>"$TMP/err")
grep -qF '(layer-norm x p & axis)' <<<"$out" || piped_fail ":help layer-norm signature"
grep -qxF '  variance taken along `axis` (default -1); p holds :gamma and :beta.' <<<"$out" || piped_fail ":help layer-norm doc"
grep -qxF '  (function, module nn)' <<<"$out" || piped_fail ":help layer-norm module"
grep -qF 'p'"'"' = p − lr·m̂/(√v̂ + eps). Returns [p'"'"' m'"'"' v'"'"' t'"'"'].' <<<"$out" || piped_fail ":help adam-step doc"
grep -qxF '  (function, module optim)' <<<"$out" || piped_fail ":help adam-step module"

out=$(printf '(+ 2 3)\n' | HOME="$TMP/home" "$SHEAF" 2>"$TMP/err")
grep -qxF 'sheaf> => 5' <<<"$out" && [[ $(tail -n1 <<<"$out") == *"Bye!" ]] ||
  piped_fail "end of input without :quit"

echo "PASS: REPL (terminal and piped)"
