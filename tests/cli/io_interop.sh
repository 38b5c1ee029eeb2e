#!/usr/bin/env bash
# tests/cli/io_interop.sh — Sheaf's file formats against the reference implementations (SPEC §7):
# safetensors written by Sheaf load in Python's `safetensors` package (numpy backend) with the
# same values and dtypes, and files written by that package (f16, converted integer types, f64,
# bf16 through raw bytes) load in Sheaf with the same values; the same both ways for .npy; and
# Debian's Fashion-MNIST IDX files load with the shape and pixels NumPy reads.
# Usage: io_interop.sh path/to/sheaf. Needs numpy + safetensors (pip) and dataset-fashion-mnist
# (apt), all installed by scripts/bootstrap.sh; a missing one fails with a message saying so.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
HELPER=$(realpath "$(dirname "$0")/../tools/io_interop.py")
PY=${PYTHON:-python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
PASSED=0

fail() { echo "FAIL: $*" >&2; FAILED=$((FAILED + 1)); }
pass() { PASSED=$((PASSED + 1)); }

if ! $PY -c "import numpy, safetensors" 2>/dev/null; then
  echo "FAIL: Python packages numpy and safetensors are required (missing: $($PY -c 'import numpy' 2>/dev/null || echo numpy) $($PY -c 'import safetensors' 2>/dev/null || echo safetensors)); run scripts/bootstrap.sh" >&2
  exit 1
fi

# sheaf_run NAME PROGRAM: runs the program in $TMP; stdout in $TMP/NAME.out.
sheaf_run() {
  if (cd "$TMP" && NO_COLOR=1 "$SHEAF" -c "$2" >"$TMP/$1.out" 2>"$TMP/$1.err"); then
    return 0
  fi
  fail "$1: sheaf failed: $(head -c 800 "$TMP/$1.err")"
  return 1
}
# helper NAME ARGS...: runs the Python helper; a non-zero exit is a failure with its message.
helper() {
  local name=$1
  shift
  if $PY "$HELPER" "$@" >"$TMP/$name.py.out" 2>"$TMP/$name.py.err"; then pass; else fail "$name: $(cat "$TMP/$name.py.err")"; fi
}

# ---- Sheaf writes, Python reads ----
WRITE_PROG=$(cat <<'SHF'
(def tree {"f32" [[1.5 -2] [3 4]] "f16" [0.5 -1.25 65504] :f16 "bf16" [1 -2.5 3.140625] :bf16
           "i32" [1 -2 2147483647] :i32 "u32" [0 4294967295] :u32 "mask" [1 0 1] :bool
           :step 7 :lr 0.5 :enc {:layers [{:w [1 2]} {:w [3]}]}})
(io "save" "sheaf.safetensors" tree)
(io "save" "sheaf_f32.npy" (get tree "f32"))
(io "save" "sheaf_f16.npy" (get tree "f16"))
(io "save" "sheaf_i32.npy" (get tree "i32"))
(io "save" "sheaf_u32.npy" (get tree "u32"))
(io "save" "sheaf_mask.npy" (get tree "mask"))
SHF
)
sheaf_run sheaf-writes "$WRITE_PROG" && helper check-sheaf check-sheaf "$TMP"

# ---- Python writes, Sheaf reads (and writes back what it holds, for an exact comparison) ----
helper write write "$TMP"
NPY_RESAVES=""
for n in f32 f16 i32 u32 bool i64 i16 i8 u8 f64; do
  NPY_RESAVES+="(io \"save\" \"resaved_$n.npy\" ((io \"load\" \"py_$n.npy\") 0:)) "
done
sheaf_run sheaf-reads "
(def h (io \"load\" \"py.safetensors\"))
(io \"save\" \"resaved.safetensors\" h)
(io \"save\" \"resaved_bf16.safetensors\" {:w (get (io \"load\" \"py_bf16.safetensors\") :w)})
$NPY_RESAVES
(print h)
(print (get h :u32))
(print (get-in h [:model :layers 1 :weight]))
(print (get (io \"load\" \"py_bf16.safetensors\") :w))" && helper check-resaved check-resaved "$TMP"
if [[ -f $TMP/sheaf-reads.out ]]; then
  want=$'<handle safetensors 15 tensors>\n[         0 2147483653 4294967295]\n[[ 6.  7.]\n [ 8.  9.]\n [10. 11.]]\n[ 1.0000000e+00 -2.5000000e+00  3.1406250e+00  9.9945068e-04\n  3.0040553e+38]'
  if [[ "$(cat "$TMP/sheaf-reads.out")" == "$want" ]]; then pass; else fail "sheaf-reads printed: $(cat "$TMP/sheaf-reads.out")"; fi
fi

# ---- Fashion-MNIST (Debian's dataset-fashion-mnist) against NumPy ----
DATA=$(dpkg -L dataset-fashion-mnist 2>/dev/null | grep -m1 '/train-images-idx3-ubyte.gz$' || true)
if [[ -z $DATA ]]; then
  fail "the Debian package dataset-fashion-mnist is not installed: run scripts/bootstrap.sh"
else
  DIR=$(dirname "$DATA")
  if $PY "$HELPER" idx-expect "$DIR/train-images-idx3-ubyte.gz" "$DIR/train-labels-idx1-ubyte.gz" >"$TMP/idx.want" 2>"$TMP/idx.err"; then
    sheaf_run idx "
(def imgs (io \"load\" \"$DIR/train-images-idx3-ubyte.gz\"))
(def labels (io \"load\" \"$DIR/train-labels-idx1-ubyte.gz\"))
(print (shape imgs))
(print (get-in imgs [0 10 13]))
(print (get-in imgs [0 27 27]))
(print (get-in imgs [1 14 14]))
(print (get-in imgs [12345 5 20]))
(print (get-in imgs [59999 20 10]))
(print (get labels 0) (get labels 1) (get labels 2) (get labels 12345) (get labels 59999))
(print (get-in imgs [7 14]))" &&
      if diff "$TMP/idx.want" "$TMP/idx.out" >"$TMP/idx.diff"; then pass; else fail "Fashion-MNIST differs from NumPy: $(cat "$TMP/idx.diff")"; fi
  else
    fail "idx-expect: $(cat "$TMP/idx.err")"
  fi
fi

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
