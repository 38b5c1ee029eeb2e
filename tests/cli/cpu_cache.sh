#!/usr/bin/env bash
# tests/cli/cpu_cache.sh SHEAF — the CPU backend's `__sheaf__/` cache (SPEC §7.9, issue [5]).
#   - a cold run compiles (C++ compiler) and writes manifest.json + one .so per function and key;
#   - a warm run with no compiler on PATH loads everything from the cache and prints the same;
#   - a corrupted (same size, other bytes: its MAC fails) or truncated artifact is detected and
#     rebuilt with a one-line notice; a truncated one without a compiler runs on the reference
#     executor instead, with a notice (trust failures without a compiler: cache_trust.sh);
#   - an edited function makes its artifact stale: rebuilt with a notice;
#   - a manifest that does not parse is rebuilt silently; no temporary files are left behind;
#   - no compiler and no cache: the reference executor, with a notice; --device ref writes no
#     cache; --device cuda is refused with the reason (no GPU found) and the available devices.
# Skips (exit 0 with a message) when no C++ compiler is installed.
set -uo pipefail
SHEAF="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
source "$(dirname "$0")/lib/harness.sh"

if ! command -v c++ >/dev/null && ! command -v g++ >/dev/null; then
  echo "SKIP: no C++ compiler, the CPU backend cannot build code here"
  exit 0
fi
cp "$ROOT/examples/xor/train.shf" "$TMP/train.shf"
# `run_hidden`: sheaf with a PATH that has no compiler (sheaf itself is called by absolute path).
run_hidden() {
  (cd "$TMP" && env -u SHEAF_CXX PATH=/nonexistent NO_COLOR=1 "$SHEAF" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null)
  STATUS=$?
}
artifact() { ls "$TMP"/__sheaf__/step.cpu.*.so | head -1; }

# ---- cold run: compiles and fills the cache ----
run train.shf --jit-profile
status_is 0 'cold run'
stderr_has 'cpu backend: 4 built' 'the cold run compiles every function'
[[ -f "$TMP/__sheaf__/manifest.json" ]] || fail 'manifest.json written'
[[ -n "$(artifact)" ]] || fail 'an artifact for step'
grep -q '"prng": "threefry2x32-20/16bit-v1"' "$TMP/__sheaf__/manifest.json" || fail 'manifest records the PRNG tag'
grep -q '"args": "f32\[2x8\]' "$TMP/__sheaf__/manifest.json" || fail 'manifest records readable signatures'
cp "$TMP/out" "$TMP/expected"

# ---- warm run without a compiler ----
run_hidden train.shf --jit-profile
status_is 0 'warm run, compiler hidden'
cmp -s "$TMP/out" "$TMP/expected" || fail 'the warm run prints what the cold run printed'
stderr_has 'cpu backend: 0 built' 'nothing is compiled on a warm run'
stderr_has '4 loaded from' 'every function comes from the cache'
grep -q '^sheaf:' "$TMP/err" && fail 'a warm run prints no notice'

# ---- corrupted artifact (same size): rebuilt, with a notice ----
so=$(artifact)
printf '\x00\x11\x22\x33\x44\x55\x66\x77' | dd of="$so" bs=1 seek=2000 conv=notrunc status=none
run train.shf
status_is 0 'run after corruption'
stderr_has "step.cpu.$(basename "$so" | cut -d. -f3).so is not signed with this user's key (made by another user or machine, or changed since); recompiling" 'corruption notice'
[[ $(grep -c '^sheaf:' "$TMP/err") -eq 1 ]] || fail 'exactly one notice line'
cmp -s "$TMP/out" "$TMP/expected" || fail 'the rebuilt artifact computes the same'

# ---- truncated artifact: rebuilt; without a compiler, the reference executor ----
head -c 1000 "$so" >"$so.cut" && mv "$so.cut" "$so"
run_hidden train.shf
status_is 0 'truncated artifact, no compiler'
stderr_has 'is corrupt (truncated or resized), and no C++ compiler was found' 'truncation notice without compiler'
stderr_has "'step' runs on the reference executor" 'falls back to the reference executor'
stdout_has 'final loss:' 'the program still runs to the end'
run train.shf
status_is 0 'truncated artifact, compiler present'
stderr_has 'is corrupt (truncated or resized); recompiling' 'truncation notice'
cmp -s "$TMP/out" "$TMP/expected" || fail 'rebuilt after truncation'

# ---- an edited function: stale ----
sed -i 's/(sgd-step p g (get config :lr))/(sgd-step p g (* 1.0 (get config :lr)))/' "$TMP/train.shf"
run train.shf
status_is 0 'run after editing step'
stderr_has 'is stale (its code changed, or the code of a function it calls); recompiling' 'stale notice'
cmp -s "$TMP/out" "$TMP/expected" || fail 'the edited program computes the same'
run_hidden train.shf
status_is 0 'the rebuilt cache serves a compiler-less run'
grep -q '^sheaf:' "$TMP/err" && fail 'no notice once rebuilt'

# ---- a changed setting the function reads (config's :log-every): stale, and the notice says so ----
sed -i 's/:log-every 50/:log-every 100/' "$TMP/train.shf"
run train.shf
status_is 0 'run after changing a setting'
stderr_has 'is stale (a `def` value it reads changed, e.g. a setting from the command line); recompiling' 'stale notice for a value'
sed -i 's/:log-every 100/:log-every 50/' "$TMP/train.shf"
run train.shf
cmp -s "$TMP/out" "$TMP/expected" || fail 'the setting restored computes as before'

# ---- a manifest that does not parse ----
echo '{"functions": [garbage' >"$TMP/__sheaf__/manifest.json"
run train.shf
status_is 0 'run with a broken manifest'
cmp -s "$TMP/out" "$TMP/expected" || fail 'the broken manifest is rebuilt'
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$TMP/__sheaf__/manifest.json" || fail 'manifest.json is valid JSON again'
leftovers=$(ls -A "$TMP/__sheaf__" | grep -v -E '^(manifest\.json|[a-z_-]+\.cpu\.[0-9a-f]{16}\.so)$')
[[ -z "$leftovers" ]] || fail "temporary files left in __sheaf__: $leftovers"

# ---- no compiler, no cache ----
rm -rf "$TMP/__sheaf__"
run_hidden train.shf
status_is 0 'no compiler and no cache'
stderr_has 'no C++ compiler found' 'notice when nothing can be compiled'
[[ $(grep -c '^sheaf:' "$TMP/err") -eq 1 ]] || fail 'the notice is printed once'
stdout_has 'final loss:' 'runs on the reference executor'

# ---- --device ref and cuda ----
rm -rf "$TMP/__sheaf__"
run train.shf --device ref
status_is 0 '--device ref'
[[ -d "$TMP/__sheaf__" ]] && fail '--device ref writes no cache'
run train.shf --device cuda
status_is 2 '--device cuda (no GPU here, or no GPU execution yet)'
stderr_has 'available devices: cpu, ref' 'the error lists the available devices'
if ! command -v nvidia-smi >/dev/null; then
  stderr_has "error: device 'cuda': no GPU was found: libcuda.so.1" 'no driver: the error says no GPU was found and why'
fi

exit $FAILED
