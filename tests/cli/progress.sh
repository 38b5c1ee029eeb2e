#!/usr/bin/env bash
# tests/cli/progress.sh SHEAF — the progress bar of long loops (SPEC §10, eval/progress.cpp): a
# `repeat` of ≥ 100 iterations running over 1 s with stderr on a terminal (a pseudo-terminal from
# util-linux `script`) shows iteration/total, rate, ETA and the `(progress ...)` fields; printed
# lines are not interleaved with it; it is absent with --no-progress, off a terminal, and for short
# loops.
set -u
[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
source "$(dirname "$0")/lib/harness.sh"
command -v script >/dev/null || { echo "FAIL: util-linux 'script' is needed for a pseudo-terminal" >&2; exit 1; }

cat >"$TMP/long.shf" <<'SHF'
(def t0 (io "clock"))
(repeat [i 120] [x 0.0]
  (let [_ (repeat [j 1] [w 0] (while (< (- (io "clock") t0) (* 0.015 (inc i))) [w 0] (inc w)))]
    (progress :loss (/ 1.0 (inc i)))
    (when (= i 100) (print "half way"))
    (+ x 1.0)))
(print "done")
SHF
cat >"$TMP/short.shf" <<'SHF'
(print (repeat [i 50] [x 0] (inc x)))
SHF
in_pty() { (cd "$TMP" && NO_COLOR=1 script -qec "$SHEAF $*" /dev/null >"$TMP/out" 2>&1 </dev/null); STATUS=$?; }

in_pty long.shf
status_is 0 'long loop on a terminal'
grep -qE '[0-9]+/120 \[#*\.*\] [0-9.]+ it/s  ETA [0-9]+:[0-9]{2} \| loss 0\.[0-9]{4}' "$TMP/out" || fail 'the bar shows i/total, rate, ETA and the loss field'
grep -qa $'\r\033\[Khalf way' "$TMP/out" || fail 'a printed line first erases the bar'
grep -qa 'done' "$TMP/out" || fail 'the program finishes'
# A runtime notice while the bar is drawn (a stale build of f, first called at i = 100) erases the
# bar's line first: it prints above the bar, never into it.
sed -e 's/^(print "done")$/(print (f (ones [2])))/' -e 's/(print "half way")/(f (ones [2]))/' "$TMP/long.shf" >"$TMP/notice.shf"
printf '(def k 2.0)\n(defn f [x] (* x k))\n%s\n' "$(cat "$TMP/notice.shf")" >"$TMP/notice.shf.new"
mv "$TMP/notice.shf.new" "$TMP/notice.shf"
in_pty notice.shf --no-progress
sed -i 's/^(def k 2.0)$/(def k 3.0)/' "$TMP/notice.shf"
in_pty notice.shf
grep -qa 'is stale' "$TMP/out" || fail 'the stale notice is printed'
grep -qa $'\r\033\[Ksheaf: __sheaf__/f.cpu.[0-9a-f]*.so is stale' "$TMP/out" || fail 'a notice first erases the bar'
grep -qa '\[3\. 3\.\]' "$TMP/out" || fail 'the program finishes with the new value'
in_pty long.shf --no-progress
grep -q 'it/s' "$TMP/out" && fail '--no-progress: no bar'
run long.shf
grep -q 'it/s' "$TMP/err" && fail 'stderr not a terminal: no bar'
in_pty short.shf
grep -q 'it/s' "$TMP/out" && fail 'a loop of 50 iterations has no bar'
exit $FAILED
