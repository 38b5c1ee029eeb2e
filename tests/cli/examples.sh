#!/usr/bin/env bash
# tests/cli/examples.sh SHEAF — the examples train end to end and reach their stated bounds.
#   linreg: recovers w = 3, b = -0.5 within 0.05.
#   mlp:    one epoch on Fashion-MNIST reaches ≥ 80 % test accuracy (10 epochs reach ≈ 87 %).
set -euo pipefail
SHEAF="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

out="$("$SHEAF" "$ROOT/examples/linreg/train.shf")"
line="$(grep '^fitted' <<<"$out")" || fail "linreg printed no result: $out"
python3 - "$line" <<'PY' || fail "linreg: $line"
import re, sys
w, b = map(float, re.findall(r"w = (-?[\d.]+).*b = (-?[\d.]+)", sys.argv[1])[0])
assert abs(w - 3.0) < 0.05 and abs(b + 0.5) < 0.05, (w, b)
PY

if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  fail "dataset-fashion-mnist is not installed (scripts/bootstrap.sh installs it)"
fi
sed 's/:epochs 10/:epochs 1/' "$ROOT/examples/mlp/train.shf" > "$TMP/train.shf"
acc="$("$SHEAF" "$TMP/train.shf" | tail -n 1)"
python3 -c "import sys; a = float('$acc'); sys.exit(0 if a >= 0.80 else 1)" || fail "mlp: test accuracy $acc after one epoch (< 0.80)"
echo "PASS: examples (mlp accuracy after one epoch: $acc)"
