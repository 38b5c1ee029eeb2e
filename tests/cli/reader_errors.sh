#!/usr/bin/env bash
# tests/cli/reader_errors.sh — reader errors (SPEC §3, §9.6), which abort a whole golden file and
# so are checked here through `sheaf -c`, plus the command-line contract of SPEC §8: exit
# statuses, --version/--help, printing of the final value, diagnostics with file:line:col.
# Usage: reader_errors.sh path/to/sheaf — runs every check, then exits 1 if any failed.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
source "$(dirname "$0")/lib/harness.sh"

# reader_error TEXT MESSAGE: `sheaf -c TEXT` fails with status 1, MESSAGE and an <eval> location.
reader_error() {
  run -c "$1"
  status_is 1 "-c '$1'"
  stderr_has "error: $2" "-c '$1'"
  stderr_has " --> <eval>:" "-c '$1'"
  [[ -s "$TMP/out" ]] && fail "-c '$1': nothing may be printed on stdout"
}

# ---- Reader errors (SPEC §9.6, wording fixed) ----
reader_error '(+ 1 2))' "Unexpected closing ')'"
reader_error ')' "Unexpected closing ')'"
reader_error '(+ 1 2' 'Unclosed list'
reader_error '[1 2' 'Unclosed vector'
reader_error '{:a 1' 'Unclosed dict'
reader_error '(f [1 2)' ''
reader_error '"abc' 'Unterminated string'
reader_error '(print "abc)' 'Unterminated string'
reader_error '{:a 1 :b}' 'Dict requires even number of elements (key-value pairs)'
reader_error '{:a}' 'Dict requires even number of elements (key-value pairs)'
# The position of an unexpected closer: line 1, column 8.
run -c '(+ 1 2))'
stderr_has ' --> <eval>:1:8' "location of the unexpected ')'"
# An unclosed opener names its own line (here line 3), wherever the text ends.
run -c $'1\n2\n(+ 1\n   2'
status_is 1 'unclosed list on line 3'
grep -qE 'line 3|<eval>:3:' "$TMP/err" || fail "unclosed list on line 3: stderr does not name line 3"
# An integer literal outside i64 is an error at its position, not a float that lost digits.
reader_error '123456789012345678901234567890123456789' 'integer literal out of range: 123456789012345678901234567890123456789'
reader_error '9223372036854775808' 'integer literal out of range'
reader_error '-9223372036854775809' 'integer literal out of range'
reader_error '(h 0:99999999999999999999)' 'integer literal out of range: 99999999999999999999'
run -c '(+ 1 9223372036854775808)'
stderr_has ' --> <eval>:1:6' 'location of an out-of-range integer literal'
run -c '[-9223372036854775808 9223372036854775807 1e39 1.0]'
status_is 0 'i64 extremes and floats still read'
# A reader error in a file reports the file name.
printf '(def a 1)\n(+ a\n' >"$TMP/unclosed.shf"
run unclosed.shf
status_is 1 'unclosed list in a file'
stderr_has 'Unclosed list' 'unclosed list in a file'
stderr_has 'unclosed.shf:2:' 'unclosed list in a file'
# Diagnostics are not colored when stderr is not a terminal.
run -c '(+ 1'
grep -q $'\x1b' "$TMP/err" && fail 'ANSI escapes on a non-terminal stderr'

# ---- Options (SPEC §8) ----
run --version
status_is 0 '--version'
[[ "$(cat "$TMP/out")" == "Sheaf "* ]] || fail "--version must print 'Sheaf <version>'"
run --help
status_is 0 '--help'
[[ -s "$TMP/out" ]] || fail '--help prints usage on stdout'
run -h
status_is 0 '-h'
[[ -s "$TMP/out" ]] || fail '-h prints usage on stdout'
run --no-such-option
status_is 2 'unknown option'
run -c
status_is 2 '-c without its argument'
printf '(+ 1 1)\n' >"$TMP/two.shf"
run --no-such-option two.shf
status_is 2 'unknown option before FILE'
run two.shf --no-such-option
status_is 0 'a word after FILE that is no sheaf option is the program'"'"'s (SPEC §10.1: --key value for args)'
printf '(print (argv))\n' >"$TMP/argv.shf"
run argv.shf steps=3 --no-jit -- --resume
status_is 0 'program arguments'
stdout_is "['steps=3', '--resume']" '(argv): the words after FILE and everything after --'

# ---- The final value (SPEC §6.1, §8) ----
run -c '(+ 1 2)'
status_is 0 '-c (+ 1 2)'
stdout_is '3' '-c (+ 1 2)'
run -c '(def a 2) (* a 21)'
stdout_is '42' '-c with several forms'
run -c '"text"'
stdout_is 'text' 'a final string prints unquoted'
run -c '[1 2]'
stdout_is '[1. 2.]' 'a final tensor'
printf ';; -*- mode: clojure -*-\n(def a 2)\n(defn f [x] (* x a))\n(f 21)\n' >"$TMP/prog.shf"
run prog.shf
status_is 0 'file run'
stdout_is '42' 'file run prints its final value'
printf '(+ 1 2)\nnil\n' >"$TMP/nil.shf"
run nil.shf
status_is 0 'file ending in nil'
stdout_is '' 'a final nil is not printed'
printf '(print "hello")\n' >"$TMP/print.shf"
run print.shf
stdout_is 'hello' 'print returns nil, which is not printed'
run -c '(list nil nil)'
stdout_is '' 'a final list of nils is not printed'
run -c '(def x 5)'
status_is 0 '-c (def x 5)'
printf '(+ 1 1)\n' >"$TMP/prog.txt"
run prog.txt
status_is 0 'a file with another extension runs'
stdout_is '2' 'a file with another extension runs'
stderr_has 'warning' 'a file with another extension warns'

# ---- Runtime diagnostics (SPEC §9.6) ----
printf '(defn f [x] (undefined-thing x))\n(f 1)\n' >"$TMP/undef.shf"
run undef.shf
status_is 1 'undefined function in a file'
stderr_has 'error: Unknown function: undefined-thing' 'undefined function in a file'
stderr_has 'undef.shf:1:14' 'location of undefined-thing'
stderr_has 'hint' 'undefined function in a file'
[[ -s "$TMP/out" ]] && fail 'an error prints nothing on stdout'
run -c '(defn g [x] x) (gg 1)'
status_is 1 'misspelled name'
stderr_has 'did you mean' 'misspelled name'
stderr_has ' --> <eval>:1:' 'misspelled name'
printf '(print "before")\n(undefined-fn)\n(print "after")\n' >"$TMP/partial.shf"
run partial.shf
status_is 1 'error after output'
stdout_is 'before' 'forms before an error have run, forms after it have not'
# lambda is deprecated: one warning per program, on stderr.
run -c '((lambda [x] x) 1) ((lambda [x] x) 2)'
status_is 0 'lambda'
stdout_is '2' 'lambda'
[[ $(grep -cF "warning: 'lambda' is deprecated, use 'fn'" "$TMP/err") -eq 1 ]] ||
  fail "lambda: expected exactly one deprecation warning on stderr"
# Deep recursion is a diagnostic with status 1, never a crash.
run -c '(defn deep [n] (if (= n 0) 0 (+ 1 (deep (- n 1))))) (deep 1000000)'
status_is 1 'deep recursion'
stderr_has 'Maximum recursion depth exceeded' 'deep recursion'

exit $FAILED
