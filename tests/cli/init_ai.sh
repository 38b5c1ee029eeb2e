#!/usr/bin/env bash
# tests/cli/init_ai.sh — `sheaf init-ai` and `sheaf reference` (issue [10]): init-ai writes
# sheaf-context.md, refuses to overwrite it, stays within 15 000 tokens (tiktoken cl100k_base,
# scripts/cl100k.py), and every Clojure example of its guide runs; docs/reference.md is exactly
# what `sheaf reference` prints (regenerate with `make docs`). Every builtin appearing in both is
# checked from the builtin table by tests/unit/reference_test.cpp.
# Usage: init_ai.sh path/to/sheaf — runs every check, then exits 1 if any failed.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
ROOT=$(realpath "$(dirname "$0")/../..")
source "$(dirname "$0")/lib/harness.sh"

# ---- init-ai writes sheaf-context.md and never overwrites it ----
run init-ai
status_is 0 'init-ai in the current directory'
stdout_has 'wrote ./sheaf-context.md' 'init-ai says what it wrote'
[[ -s $TMP/sheaf-context.md ]] || fail 'sheaf-context.md exists'
grep -q '^## REFERENCE$' "$TMP/sheaf-context.md" || fail 'sheaf-context.md has the REFERENCE section'
echo "keep me" >>"$TMP/sheaf-context.md"
sum=$(md5sum <"$TMP/sheaf-context.md")
run init-ai
status_is 1 'init-ai with an existing file'
stderr_has 'sheaf-context.md already exists' 'init-ai refuses to overwrite'
[[ $(md5sum <"$TMP/sheaf-context.md") == "$sum" ]] || fail 'the existing file is unchanged'
mkdir -p "$TMP/sub"
run init-ai sub
status_is 0 'init-ai DIR'
[[ -s $TMP/sub/sheaf-context.md ]] || fail 'init-ai DIR writes DIR/sheaf-context.md'
run init-ai --force
status_is 2 'init-ai with an unknown option is a usage error'

# ---- size: at most 15 000 tokens ----
tokens=$(python3 "$ROOT/scripts/cl100k.py" "$TMP/sub/sheaf-context.md" | cut -d' ' -f1)
[[ $tokens =~ ^[0-9]+$ && $tokens -le 15000 ]] || fail "sheaf-context.md has $tokens tokens (limit 15000)"
echo "sheaf-context.md: $tokens tokens (cl100k_base)"

# ---- every example of the guide runs ----
python3 - "$TMP/sub/sheaf-context.md" "$TMP/blocks" <<'PY'
import os, re, sys
text = open(sys.argv[1]).read()
os.makedirs(sys.argv[2], exist_ok=True)
blocks = re.findall(r"```clojure\n(.*?)```", text, re.S)
assert len(blocks) >= 2, len(blocks)
for i, b in enumerate(blocks):
    open(os.path.join(sys.argv[2], "block%d.shf" % i), "w").write(b)
PY
for b in "$TMP"/blocks/*.shf; do
  run "$b"
  status_is 0 "guide example $(basename "$b") runs"
done

# ---- docs/reference.md is fresh ----
"$SHEAF" reference | diff -u "$ROOT/docs/reference.md" - >"$TMP/ref.diff" ||
  { FAILED=1; echo "FAIL: docs/reference.md is stale: run 'make docs'" >&2; head -20 "$TMP/ref.diff" >&2; }
run reference -o ref.md
status_is 0 'reference -o FILE'
cmp -s "$TMP/ref.md" "$ROOT/docs/reference.md" || fail 'reference -o writes the same text'

exit $FAILED
