#!/usr/bin/env bash
# tests/cli/cache_trust.sh SHEAF — no code runs from a hostile local user's files (SPEC §7.9,
# issue [12]):
#   (a) files and links planted at the old predictable scratch names in $TMPDIR
#       ($TMPDIR/sheaf-<pid>-<n>.cpp/.log/.version, sheaf-<pid>-<fn>-0.so) are neither compiled
#       nor written through; the private scratch directory is gone after a run and after SIGTERM;
#   (b) a library planted in __sheaf__/ whose manifest entry matches in every unkeyed field
#       (hash, digest, size, FNV checksum, a made-up MAC) never runs its constructor: it is
#       recompiled with a notice, and with no compiler the run stops with an error naming
#       `sheaf trust`;
#   (c) a FIFO in place of an artifact or of manifest.json is skipped without hanging;
#   (d) a __sheaf__/ that group or others may write is neither loaded nor written;
#   (e) a cache copied to another user's key (another XDG_CACHE_HOME) does not load without a
#       compiler until `sheaf trust DIR` lists and signs it; trust refuses FIFOs and open folders.
# Skips (exit 0 with a message) when no C/C++ compiler is installed.
set -uo pipefail
SHEAF="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
source "$(dirname "$0")/lib/harness.sh"

if ! command -v c++ >/dev/null || ! command -v cc >/dev/null; then
  echo "SKIP: no C/C++ compiler, the CPU backend cannot build code here"
  exit 0
fi
export XDG_CACHE_HOME="$TMP/keys-a"  # this user's key lives here, not in the real ~/.cache
export TMPDIR="$TMP/tmp"
mkdir -p "$TMPDIR"
mkdir -m 700 "$TMP/app"
cat >"$TMP/app/prog.shf" <<'EOF'
(defn f [x] (* (+ x 1.0) 2.0))
(print (f (tensor [1.0 2.0 3.0])))
EOF
# `in_app ARGS...`: sheaf run from $TMP/app; `hidden`: the same with no compiler on PATH. A run
# that blocks on a FIFO is ended by `timeout` (status 124).
in_app() {
  (cd "$TMP/app" && NO_COLOR=1 timeout 300 "$SHEAF" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null)
  STATUS=$?
}
hidden() {
  (cd "$TMP/app" && timeout 300 env -u SHEAF_CXX PATH=/nonexistent NO_COLOR=1 "$SHEAF" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null)
  STATUS=$?
}
expect_output() { stdout_is '[4. 6. 8.]' "$1: the program computes the right values"; }
artifact() { ls "$TMP"/app/__sheaf__/f.cpu.*.so 2>/dev/null | head -1; }
no_scratch_left() { [[ -z "$(ls -A "$TMPDIR")" ]] || fail "$1: files left in TMPDIR: $(ls -A "$TMPDIR")"; }

# ---- (a) hostile files at the old predictable scratch names ----
echo precious >"$TMP/victim"
cat >"$TMP/evil.cpp" <<EOF
#include <cstdio>
__attribute__((constructor)) static void evil() { std::FILE* f = std::fopen("$TMP/marker-a", "w"); if (f) std::fclose(f); }
EOF
# The pid of `exec` is the pid of sheaf: every name the old code would use is taken beforehand.
(cd "$TMP/app" && NO_COLOR=1 TMP="$TMP" SHEAF="$SHEAF" sh -c '
  for n in 1 2 3 4 5 6 7 8; do
    cp "$TMP/evil.cpp" "$TMPDIR/sheaf-$$-$n.cpp" && chmod 666 "$TMPDIR/sheaf-$$-$n.cpp"
    for ext in log version o; do ln -s "$TMP/victim" "$TMPDIR/sheaf-$$-$n.$ext"; done
  done
  ln -s "$TMP/victim" "$TMPDIR/sheaf-$$-f-0.so"
  exec "$SHEAF" prog.shf --jit-profile' >"$TMP/out" 2>"$TMP/err" </dev/null)
STATUS=$?
status_is 0 '(a) a run among planted scratch files'
expect_output '(a)'
stderr_has 'cpu backend: 1 built' '(a) f is compiled'
[[ "$(cat "$TMP/victim")" == precious ]] || fail '(a) no file is written through a planted link'
[[ -e "$TMP/marker-a" ]] && fail '(a) a planted source file is never compiled'
[[ $(ls "$TMPDIR"/sheaf-*-*.cpp | wc -l) -eq 8 ]] || fail '(a) every planted source file is still there'
for f in "$TMPDIR"/sheaf-*-*.cpp; do cmp -s "$f" "$TMP/evil.cpp" || fail "(a) $f is left alone"; done
rm -f "$TMPDIR"/sheaf-*-*  # the planted names (a private directory would be sheaf-XXXXXX)
no_scratch_left '(a) after a run'

# ---- a warm cache loads without a compiler ----
rm -rf "$TMP/app/__sheaf__"
in_app prog.shf
status_is 0 'cold run'
grep -q '"mac": "[0-9a-f]\{64\}"' "$TMP/app/__sheaf__/manifest.json" || fail 'the manifest holds a 64-hex-digit MAC per artifact'
grep -q '"checksum"' "$TMP/app/__sheaf__/manifest.json" && fail 'the unkeyed FNV checksum is gone'
[[ "$(stat -c %a "$TMP/keys-a/sheaf")" == 700 && "$(stat -c %a "$TMP/keys-a/sheaf/key")" == 600 ]] ||
  fail 'the key folder is 0700 and the key 0600'
hidden prog.shf --jit-profile
status_is 0 'warm run, compiler hidden'
expect_output 'warm run'
stderr_has '1 loaded from' 'the warm run loads f from the cache'
so=$(artifact)

# ---- (b) a planted library with a manifest that matches in every unkeyed field ----
cat >"$TMP/evil.c" <<EOF
#include <stdio.h>
__attribute__((constructor)) static void evil(void) { FILE* f = fopen("$TMP/marker-b", "w"); if (f) fclose(f); }
EOF
cc -shared -fPIC -o "$TMP/evil.so" "$TMP/evil.c" || fail 'the planted library builds'
cp "$TMP/evil.so" "$so"
python3 - "$TMP/app/__sheaf__/manifest.json" "$so" <<'EOF'
import hashlib, hmac, json, os, sys
manifest, so = sys.argv[1], sys.argv[2]
data = open(so, "rb").read()
h = 0xcbf29ce484222325  # the old FNV-1a 64 "checksum", as any attacker recomputes it
for b in data:
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
m = json.load(open(manifest))
for fn in m["functions"].values():
    for a in fn["artifacts"].values():
        if a["file"] == os.path.basename(so):
            a["bytes"] = len(data)
            a["checksum"] = "%016x" % h
            a["mac"] = hmac.new(b"\0" * 32, data, hashlib.sha256).hexdigest()
json.dump(m, open(manifest, "w"), indent=2)
EOF
hidden prog.shf
status_is 1 '(b) a planted library and no compiler: the run stops'
stderr_has "is not signed with this user's key" '(b) the error says why'
stderr_has "and no C++ compiler was found to rebuild 'f'" '(b) the error says nothing can rebuild it'
stderr_has "sheaf trust $TMP/app/__sheaf__" '(b) the error says how to trust the folder'
[[ -e "$TMP/marker-b" ]] && fail '(b) the planted library never runs (no compiler)'
in_app prog.shf
status_is 0 '(b) a planted library with a compiler'
expect_output '(b)'
stderr_has "f.cpu.$(basename "$so" | cut -d. -f3).so is not signed with this user's key (made by another user or machine, or changed since); recompiling" '(b) recompile notice'
[[ $(grep -c '^sheaf:' "$TMP/err") -eq 1 ]] || fail '(b) exactly one notice line'
[[ -e "$TMP/marker-b" ]] && fail '(b) the planted library never runs (recompiled)'
cmp -s "$so" "$TMP/evil.so" && fail '(b) the planted library is replaced by the rebuild'
hidden prog.shf
status_is 0 '(b) the rebuild serves a compiler-less run'

# ---- (c) FIFOs are skipped, not opened for reading ----
rm -f "$so" && mkfifo "$so"
in_app prog.shf
status_is 0 '(c) a FIFO in place of the artifact does not hang the run'
stderr_has "f.cpu.$(basename "$so" | cut -d. -f3).so is a FIFO; recompiling" '(c) FIFO notice'
expect_output '(c)'
rm -f "$TMP/app/__sheaf__/manifest.json" && mkfifo "$TMP/app/__sheaf__/manifest.json"
in_app prog.shf
status_is 0 '(c) a FIFO in place of manifest.json does not hang the run'
expect_output '(c) manifest'
[[ -f "$TMP/app/__sheaf__/manifest.json" ]] || { fail '(c) the FIFO manifest is replaced by a real one'; rm -f "$TMP/app/__sheaf__/manifest.json"; }

# ---- (d) a folder others may write ----
hidden prog.shf
status_is 0 '(d) the cache is usable again'
chmod 777 "$TMP/app/__sheaf__"
cp -p "$TMP/app/__sheaf__/manifest.json" "$TMP/manifest.before"
in_app prog.shf --jit-profile
status_is 0 '(d) a group/other-writable cache folder'
stderr_has '__sheaf__ is writable by group or others (mode 0777), so nothing in it is loaded; recompiling' '(d) notice'
stderr_has 'cpu backend: 1 built' '(d) f is compiled, not loaded'
expect_output '(d)'
cmp -s "$TMP/manifest.before" "$TMP/app/__sheaf__/manifest.json" || fail '(d) nothing is written into the open folder'
hidden prog.shf
status_is 1 '(d) an open folder and no compiler: the run stops'
stderr_has "chmod go-w $TMP/app/__sheaf__" '(d) the hint says how to close the folder'
chmod 755 "$TMP/app/__sheaf__"
chmod 666 "$(artifact)"
in_app prog.shf
stderr_has 'is writable by group or others (mode 0666); recompiling' '(d) an artifact others may write is not loaded'
chmod 644 "$(artifact)"
if [[ $(id -u) -eq 0 ]]; then  # only root can give a file to another user
  chown 65534 "$(artifact)"
  in_app prog.shf
  stderr_has 'is owned by another user (uid 65534); recompiling' '(d) an artifact of another user is not loaded'
  chown 0 "$(artifact)"
fi

# ---- (e) a copied cache and `sheaf trust` ----
in_app prog.shf  # fresh artifacts signed with key A
mkdir -m 700 "$TMP/copy"
cp -r "$TMP/app/prog.shf" "$TMP/app/__sheaf__" "$TMP/copy/"
export XDG_CACHE_HOME="$TMP/keys-b"  # another user, or another machine
copied() {
  (cd "$TMP/copy" && timeout 300 env -u SHEAF_CXX PATH=/nonexistent NO_COLOR=1 "$SHEAF" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null)
  STATUS=$?
}
copied prog.shf
status_is 1 '(e) a copied cache does not load before it is trusted'
stderr_has "is not signed with this user's key" '(e) the error says why'
stderr_has "sheaf trust $TMP/copy/__sheaf__" '(e) the error names sheaf trust and the folder'
run trust "$TMP/copy"
status_is 0 '(e) sheaf trust'
stdout_has "Artifacts in $TMP/copy/__sheaf__:" '(e) trust names the folder'
grep -qE '^  f +cpu +.+ +[0-9.]+ (B|KiB|MiB) +signed$' "$TMP/out" || fail '(e) trust lists function, backend, compiler, size'
stdout_has "$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(next(iter(m["functions"]["f"]["artifacts"].values()))["compiler"])' "$TMP/copy/__sheaf__/manifest.json")" '(e) trust shows the compiler'
stdout_has "signed 1 of 1 artifacts with your key ($TMP/keys-b/sheaf/key)" '(e) trust says what it signed and with which key'
copied prog.shf --jit-profile
status_is 0 '(e) the trusted copy runs without a compiler'
expect_output '(e)'
stderr_has '1 loaded from' '(e) f comes from the trusted cache'
# trust refuses what it must not sign
mkfifo "$TMP/copy/__sheaf__/cuda-0123456789abcdef.sm_90.cubin"
run trust "$TMP/copy/__sheaf__"
status_is 1 '(e) trust with a FIFO in the folder'
stdout_has 'refused: cuda-0123456789abcdef.sm_90.cubin (it is a FIFO)' '(e) the FIFO is refused'
stdout_has 'signed 1 of 2 artifacts' '(e) the rest is signed'
rm -f "$TMP/copy/__sheaf__/cuda-0123456789abcdef.sm_90.cubin"
chmod 777 "$TMP/copy/__sheaf__"
run trust "$TMP/copy"
status_is 1 '(e) trust of an open folder'
stderr_has 'refusing to trust' '(e) an open folder is refused'
stderr_has 'is writable by group or others (mode 0777)' '(e) and the reason given'
run trust "$TMP/app/prog.shf"
status_is 1 '(e) trust of something that is no cache'
stderr_has 'holds no Sheaf cache' '(e) says there is no cache'
run --help
stdout_has 'sheaf trust DIR' 'sheaf --help lists sheaf trust'

# ---- the scratch directory goes with the process, also on SIGTERM ----
no_scratch_left 'after all runs'
mkdir -m 700 "$TMP/app2"
cat >"$TMP/app2/forever.shf" <<'EOF'
(defn f [x] (* x 3.0))
(print (f (tensor [1.0])))
(while true [i 0] (inc i))
EOF
(cd "$TMP/app2" && exec "$SHEAF" forever.shf >"$TMP/out" 2>"$TMP/err" </dev/null) &
pid=$!
# Once f is in the cache, its compiler has finished and the program loops forever.
for _ in $(seq 1200); do ls "$TMP"/app2/__sheaf__/f.cpu.*.so >/dev/null 2>&1 && break; sleep 0.1; done
[[ -n "$(ls -A "$TMPDIR")" ]] || fail 'the running program has a scratch directory'
kill -TERM "$pid"
wait "$pid"
STATUS=$?
status_is 143 'SIGTERM ends the program with its status'
no_scratch_left 'after SIGTERM'

exit $FAILED
