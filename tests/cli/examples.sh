#!/usr/bin/env bash
# tests/cli/examples.sh SHEAF — the examples train end to end and reach their stated bounds.
#   linreg: recovers w = 3, b = -0.5 within 0.05.
#   xor:    for seeds 0, 4 and 9, 500 SGD steps end with loss < 0.01 and every prediction within 0.1
#           of its XOR target.
#   mlp:    one epoch on Fashion-MNIST (epochs=1 on the command line) reaches ≥ 80 % test accuracy
#           (the full 2 epochs reach ≈ 86 %, the issue's bound is 84 %), prints loss/accuracy/time
#           per epoch, logs them to runs/mlp.jsonl and TensorBoard's runs/mlp/, and writes a
#           safetensors checkpoint that loads back with the parameter shapes.
#   cnn:    one epoch on Fashion-MNIST (the warmup + cosine schedule then ends with that epoch)
#           reaches ≥ 87 % test accuracy and prints an epoch line. Measured after such an epoch:
#           88.8 % (seed 0) and 89.0 % (seed 1); the example's full 2 epochs reach 90.3-90.4 %
#           (the issue's bound is 89 %). 87 % leaves ~2 points for other seeds' spread and for
#           sums that round differently on another CPU. About 50-60 s on 2 shared cores (one
#           epoch of 937 compiled steps, the C++ build of the step, the test set twice).
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

for seed in 0 4 9; do
  sed "s/:seed 0/:seed $seed/" "$ROOT/examples/xor/train.shf" > "$TMP/xor.shf"
  out="$("$SHEAF" "$TMP/xor.shf")"
  python3 - "$out" <<'PY' || fail "xor seed $seed: $out"
import re, sys
out = sys.argv[1]
loss = float(re.search(r"final loss: ([\d.e-]+)", out).group(1))
preds = [float(x) for x in re.search(r"predictions: \[([^\]]*)\]", out).group(1).split()]
assert loss < 0.01, loss
assert len(preds) == 4 and all(abs(p - t) < 0.1 for p, t in zip(preds, [0, 1, 1, 0])), preds
PY
done

if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  fail "dataset-fashion-mnist is not installed (scripts/bootstrap.sh installs it)"
fi
cp "$ROOT/examples/mlp/train.shf" "$TMP/train.shf"  # its __sheaf__/ cache stays out of the source tree
out="$(cd "$TMP" && "$SHEAF" "$TMP/train.shf" epochs=1 --checkpoint "$TMP/mlp.safetensors")"
grep -Eq '^epoch 1 \| train loss [0-9.]+ \| test accuracy [0-9.]+% \| [0-9.]+ s$' <<<"$out" || fail "mlp: no epoch line: $out"
acc="$(tail -n 1 <<<"$out")"
python3 -c "import sys; a = float('$acc'); sys.exit(0 if a >= 0.80 else 1)" || fail "mlp: test accuracy $acc after one epoch (< 0.80)"
python3 - "$TMP" <<'PY' || fail "mlp: metrics log: $(cat "$TMP/runs/mlp.jsonl")"
import glob, json, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(f"{d}/runs/mlp.jsonl")]
assert [r["step"] for r in rows] == [1] and 0.8 <= rows[0]["test-accuracy"] <= 1 and rows[0]["train-loss"] > 0, rows
assert glob.glob(f"{d}/runs/mlp/events.out.tfevents.*"), "no TensorBoard file"
PY
shapes="$("$SHEAF" -c "(let [h (io \"load\" \"$TMP/mlp.safetensors\")] [(shape (get h :l1 :W)) (shape (get h :l2 :b))])")"
[ "$shapes" = "[[784, 256], [10]]" ] || fail "mlp checkpoint: got $shapes"

sed 's/:epochs 2/:epochs 1/' "$ROOT/examples/cnn/train.shf" > "$TMP/cnn.shf"
out="$("$SHEAF" "$TMP/cnn.shf")"
grep -Eq '^epoch 1 \| train loss [0-9.]+ \| test accuracy [0-9.]+% \| [0-9.]+ s$' <<<"$out" || fail "cnn: no epoch line: $out"
cnn_acc="$(tail -n 1 <<<"$out")"
python3 -c "import sys; a = float('$cnn_acc'); sys.exit(0 if a >= 0.87 else 1)" || fail "cnn: test accuracy $cnn_acc after one epoch (< 0.87)"
echo "PASS: examples (accuracy after one epoch: mlp $acc, cnn $cnn_acc)"
