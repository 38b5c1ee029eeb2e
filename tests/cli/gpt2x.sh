#!/usr/bin/env bash
# tests/cli/gpt2x.sh SHEAF — examples/gpt2x, the GPT written as Sheaf 2.x programs are (defparams,
# typed parameters, nn/optim without `use`, `(use ./model.shf)`), at a tiny size on Debian's
# fortunes (d 32, 1 layer, T 32, B 16, 80 steps on the first 100 k characters; ~25 s):
#   train:    the logged loss falls, the weights and the .json are written;
#   reload:   generate.shf reloads them and reports the held-out loss train.shf printed;
#   generate: the sampled text starts with the prompt and stays in the vocabulary.
# Usage: gpt2x.sh path/to/sheaf — runs every check, then exits 1 if any failed.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/lib/harness.sh"
[[ -f /usr/share/games/fortunes/fortunes ]] || { echo "FAIL: the fortunes package is not installed (scripts/bootstrap.sh installs it)" >&2; exit 1; }

# The example uses ../gpt's data and args modules by path: the two directories side by side, run
# from $TMP (another directory than the example's: modules resolve against the including file).
cp -r "$ROOT/examples/gpt" "$ROOT/examples/gpt2x" "$TMP/"
grep -hv '^ *;' "$TMP"/gpt2x/*.shf | grep -qE '\(use (nn|optim)\)' && fail 'examples/gpt2x uses nn and optim without (use ...)'

run gpt2x/train.shf d=32 layers=1 heads=2 T=32 B=16 steps=80 log-every=20 max-chars=100000 ckpt=tiny
status_is 0 'tiny training'
python3 - "$TMP/out" <<'PY' || fail 'the logged loss falls by more than 0.5 nats/char in 80 steps'
import re, sys
out = open(sys.argv[1]).read()
losses = [float(m.group(1)) for m in re.finditer(r"^step \d+/80 \| loss (\d+\.\d{4})$", out, re.M)]
assert len(losses) == 4 and losses[-1] < losses[0] - 0.5, losses
PY
weights=$(sed -n 's/^saved //p' "$TMP/out")
held_out=$(sed -n 's/^held-out loss //p' "$TMP/out")
[[ $weights == tiny.pkl && -f $TMP/$weights && -f $TMP/tiny.json ]] || fail "the checkpoint ('$weights', tiny.json) was written"
python3 - "$TMP/$weights" <<'PY' || fail "Python's pickle reads the weights back as NumPy arrays"
import pickle, sys
import numpy as np
tree = pickle.load(open(sys.argv[1], "rb"))
leaves = []
def walk(t):
    if isinstance(t, dict): [walk(v) for v in t.values()]
    elif isinstance(t, list): [walk(v) for v in t]
    else: leaves.append(t)
walk(tree)
assert leaves and all(isinstance(x, np.ndarray) and x.dtype == np.float32 for x in leaves), [type(x) for x in leaves][:5]
PY

run gpt2x/generate.shf ckpt=tiny chars=100 seed=1 prompt=The
status_is 0 'generation'
stdout_has "reloaded $weights: held-out loss $held_out" "the reloaded model gives train.shf's held-out loss"
python3 - "$TMP/out" "$TMP/tiny.json" <<'PY' || fail 'the sample starts with the prompt and stays in the vocabulary'
import json, sys
text = open(sys.argv[1]).read().split("\n", 1)[1]
vocab = set(json.load(open(sys.argv[2]))["vocab"])
body = text[3:].rstrip("\n")
assert text.startswith("The") and len(body) >= 95, text[:20]
assert not set(body) - vocab, sorted(set(body) - vocab)
PY

exit $FAILED
