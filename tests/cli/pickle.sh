#!/usr/bin/env bash
# tests/cli/pickle.sh — pickles (SPEC §1.4, §7.2) against Python's pickle and NumPy, with NumPy
# 2.x (the default python3) and NumPy 1.x (Debian's /usr/bin/python3 with python3-numpy): Python
# writes a tree of every NumPy dtype Sheaf reads, nested dicts, lists, tuples, scalars and
# strings with protocols 2–5; Sheaf loads each, prints a few leaves and saves it again as .pkl,
# which Python reads back equal to the tree as Sheaf converts it; a tree saved by a Sheaf program
# reads back in Python as nested dicts/lists of arrays; and hostile pickles (os.system and eval
# reductions, deep nesting, huge sizes, truncation, cycles, object arrays) fail with an error
# naming the cause, without running anything.
# Usage: pickle.sh path/to/sheaf. Needs numpy in both interpreters (scripts/bootstrap.sh).
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
HELPER=$(realpath "$(dirname "$0")/../tools/pickle_interop.py")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
PASSED=0

fail() { echo "FAIL: $*" >&2; FAILED=$((FAILED + 1)); }
pass() { PASSED=$((PASSED + 1)); }

# sheaf_run DIR NAME PROGRAM: runs the program in DIR; stdout in DIR/NAME.out, stderr in DIR/NAME.err.
sheaf_run() { (cd "$1" && NO_COLOR=1 "$SHEAF" -c "$3" >"$1/$2.out" 2>"$1/$2.err"); }
# helper PY DIR NAME ARGS...: runs the Python helper; a non-zero exit is a failure with its message.
helper() {
  local py=$1 name=$2
  shift 2
  if $py "$HELPER" "$@" 2>"$TMP/$name.py.err"; then pass; else fail "$name: $(cat "$TMP/$name.py.err")"; fi
}

READ_PROG=$(cat <<'SHF'
(map (fn [p]
  (io "save" (str "resaved_p" p ".pkl") (io "load" (str "py_p" p ".pkl")))) '[2 3 4 5])
(def t (io "load" "py_p2.pkl"))
(print (dtype (get t "i64")) (dtype (get t "f16")) (dtype (get t "mask")) (dtype (get t "f64")) (dtype (get t "u8")))
(print (get t "fortran"))
(print (nth (get t "cube") 1))
(print (get t "pair") (get t "np_i64") (get t "np_f64") (get t "np_bool") (get t "flags") (get t "int_keys"))
(print (get t "od") (get t "bytes") (get t "name") (get t "rank0") (shape (get t "empty")))
(print (io "load" "py.pickle"))
SHF
)
READ_WANT=":i32 :f16 :bool :f32 :i32
[[0. 1. 2.]
 [3. 4. 5.]]
[[12 13 14 15]
 [16 17 18 19]
 [20 21 22 23]]
(1, 'two', nil) -3 0.25 true [true, false] {:1 'one', :2 'two'}
{:a 2, :b 1} ab gpt ✓ 3.5 [0, 3]
[[0 1 2 3], 'x']"

WRITE_PROG=$(cat <<'SHF'
(io "save" "sheaf.pkl"
  {"f32" [[1.5 -2] [3 4]] "f16" [0.5 -1.25 65504] :f16 "i32" [1 -2 2147483647] :i32
   "u32" [0 4294967295] :u32 "mask" [1 0 1] :bool "rank0" (tensor 2.5) "empty" (zeros [0])
   :enc {:layers [{:w [1 2]} {:w [3]}]} :top2 (top_k [3 1 2] 2) :step 7 :big 1099511627776
   :lr 0.5 :on true :none nil :kw :relu :names ["a" "b"] :empty_list [] :empty_dict {}})
(io "save" "bad.pkl" {:ok [1 2] :w [1 2] :bf16})
SHF
)

declare -A HOSTILE=(
  [system]="refused global 'posix.system'"
  [system_p2]="refused global 'posix.system'"
  [eval]="refused global 'builtins.eval'"
  [nested_system]="refused global 'posix.system'"
  [deep]="nests deeper than 10000 levels"
  [huge_str]="truncated: an operand of 4611686018427387904 bytes"
  [huge_array]="needs 4000000000000000000 bytes of data, got 16"
  [truncated]="truncated"
  [cycle]="the data contains itself"
  [object_array]="unsupported NumPy dtype 'O8'"
  [two_pickles]="follow the end of the pickle"
  [missing_memo]="memo entry 7 was never stored"
)

ran=0
for PY in python3 /usr/bin/python3; do
  version=$($PY -c 'import numpy; print(numpy.__version__)' 2>/dev/null) || { fail "$PY: numpy is missing (run scripts/bootstrap.sh)"; continue; }
  ran=$((ran + 1))
  D="$TMP/numpy-$version"
  mkdir -p "$D"
  helper "$PY" "write-$version" write "$D" || continue

  # ---- Python writes, Sheaf reads and writes back ----
  if sheaf_run "$D" read "$READ_PROG"; then
    pass
    helper "$PY" "resaved-$version" check-resaved "$D"
    if [[ "$(cat "$D/read.out")" == "$READ_WANT" ]]; then pass; else fail "NumPy $version: sheaf printed:
$(cat "$D/read.out")
expected:
$READ_WANT"; fi
  else
    fail "NumPy $version: sheaf failed to read: $(head -c 800 "$D/read.err")"
  fi

  # ---- Sheaf writes, Python reads ----
  if sheaf_run "$D" write "$WRITE_PROG"; then
    fail "NumPy $version: saving a bf16 tensor to .pkl succeeded"
  elif grep -q "the tensor at 'w' is bf16, which NumPy lacks" "$D/write.err" && [[ ! -e $D/bad.pkl ]]; then
    pass
    helper "$PY" "sheaf-$version" check-sheaf "$D"
  else
    fail "NumPy $version: sheaf write: $(head -c 800 "$D/write.err")"
  fi

  # ---- hostile pickles: refused, nothing runs ----
  for name in "${!HOSTILE[@]}"; do
    if sheaf_run "$D" "hostile_$name" "(io \"load\" \"hostile_$name.pkl\")"; then
      fail "NumPy $version: hostile_$name.pkl loaded"
    elif grep -qF "${HOSTILE[$name]}" "$D/hostile_$name.err"; then
      pass
    else
      fail "NumPy $version: hostile_$name.pkl: expected '${HOSTILE[$name]}', got: $(head -c 600 "$D/hostile_$name.err")"
    fi
  done
  if [[ -e $D/pwned ]]; then fail "NumPy $version: a hostile pickle ran a command"; else pass; fi
done
[[ $ran -eq 2 ]] || fail "expected two Python interpreters with NumPy, found $ran"

echo "pickle: $PASSED checks passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
