#!/usr/bin/env bash
# tests/cli/gpt2x.sh SHEAF — examples/gpt2x, the GPT written as Sheaf 2.x programs are (defparams,
# typed parameters, nn/optim without `use`, `(use ./model.shf)`), at a tiny size on Debian's
# fortunes (d 32, 1 layer, T 32, B 16, 80 steps on the first 100 k characters; ~20 s):
#   train:    the logged loss falls, the weights and the .json are written;
#   reload:   generate.shf reloads them and reports the held-out loss train.shf printed;
#   generate: the sampled text starts with the prompt and stays in the vocabulary.
set -euo pipefail
SHEAF="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f /usr/share/games/fortunes/fortunes ] || fail "the fortunes package is not installed (scripts/bootstrap.sh installs it)"
# the example uses ../gpt's data and args modules by path: keep the two directories side by side
cp -r "$ROOT/examples/gpt" "$ROOT/examples/gpt2x" "$TMP/"
cat "$TMP"/gpt2x/*.shf | grep -v '^ *;' | grep -qE '\(use (nn|optim)\)' && fail "examples/gpt2x should use nn and optim without (use ...)"
cd "$TMP"  # a directory other than the example's: modules resolve against the including file

TINY="d=32 layers=1 heads=2 T=32 B=16 steps=80 log-every=20 max-chars=100000 ckpt=tiny"
out="$("$SHEAF" gpt2x/train.shf $TINY)" || fail "training failed: $out"
python3 - "$out" <<'PY' || fail "training: $out"
import re, sys
out = sys.argv[1]
losses = [float(m.group(2)) for m in re.finditer(r"^step (\d+)/80 \| loss (\d+\.\d{4})$", out, re.M)]
assert len(losses) == 4, losses
assert losses[-1] < losses[0] - 0.5, losses
PY
weights="$(sed -n 's/^saved //p' <<<"$out")"
[ -f "$weights" ] && [ -f tiny.json ] || fail "no checkpoint written ('$weights', tiny.json)"
held_out="$(sed -n 's/^held-out loss //p' <<<"$out")"

gen="$("$SHEAF" gpt2x/generate.shf ckpt=tiny chars=100 seed=1 prompt=The)" || fail "generation failed: $gen"
grep -qxF "reloaded $weights: held-out loss $held_out" <<<"$gen" ||
  fail "the reloaded model does not give train.shf's held-out loss $held_out: $gen"
python3 - "$(tail -n +2 <<<"$gen")" <<'PY' || fail "generation: $gen"
import json, sys
text = sys.argv[1]
vocab = set(json.load(open("tiny.json"))["vocab"])
assert text.startswith("The"), text[:20]
body = text[3:].rstrip("\n")
assert len(body) >= 95, len(body)
bad = sorted(set(c for c in body if c not in vocab))
assert not bad, bad
PY
echo "gpt2x: ok (held-out loss $held_out after 80 steps)"
