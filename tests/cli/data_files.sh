#!/usr/bin/env bash
# tests/cli/data_files.sh — loaded data files that change under a live handle (io/data_file.hpp):
# an .npy truncated while a handle reads it gives a clear error and exit status 1 (never SIGBUS);
# a .safetensors file rewritten in place gives an error for the tensors not yet read, and the
# tensors already read keep their values; a file replaced by `io "save"` (a rename) keeps the
# handle reading the contents it loaded. Each program waits, after its first reads, until this
# script has changed the file (`go.txt`).
# Usage: data_files.sh path/to/sheaf — runs every check, then exits 1 if any failed.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
source "$(dirname "$0")/lib/harness.sh"

# changed PROGRAM CHANGE: runs PROGRAM (sheaf -c) in the background; once it has written
# loaded.txt, runs the shell command CHANGE in $TMP and writes go.txt; then waits for it.
changed() {
  rm -f "$TMP/loaded.txt" "$TMP/go.txt"
  (cd "$TMP" && NO_COLOR=1 timeout 60 "$SHEAF" -c "$1" >"$TMP/out" 2>"$TMP/err" </dev/null) &
  local job=$!
  for _ in $(seq 300); do
    [[ -e $TMP/loaded.txt ]] && break
    sleep 0.1
  done
  (cd "$TMP" && eval "$2")
  : >"$TMP/go.txt"
  wait $job
  STATUS=$?
}
WAIT='(io "save" "loaded.txt" "") (while (not (io "exists" "go.txt")) [n 0] (inc n))'

# ---- an .npy file truncated under a live handle ----
run -c '(io "save" "rows.npy" (reshape (cast (range 4096) :f32) [1024 4]))'
status_is 0 'writing rows.npy'
changed "(def h (io \"load\" \"rows.npy\")) (print (h 0)) $WAIT (print (h 1000))" 'truncate -s 128 rows.npy'
status_is 1 'a row of a truncated .npy: exit status 1, not SIGBUS'
stdout_is '[0. 1. 2. 3.]' 'the row read before the truncation'
stderr_has "'rows.npy': the file changed on disk since it was loaded (16512 bytes then, 128 now)" 'the error names the file and the sizes'

# ---- a .safetensors file rewritten in place (same size, other bytes) ----
run -c '(io "save" "w.safetensors" {:a [1 2 3 4] :b [5 6 7 8]})'
status_is 0 'writing w.safetensors'
size=$(stat -c %s "$TMP/w.safetensors")
changed "(def h (io \"load\" \"w.safetensors\")) (def a (get h :a)) (print a) $WAIT (print a) (print (get h :b))" \
  "dd if=/dev/zero of=w.safetensors bs=1 seek=$((size - 32)) count=32 conv=notrunc status=none"
status_is 1 'a tensor of a file rewritten in place'
stdout_is '[1. 2. 3. 4.]
[1. 2. 3. 4.]' 'a tensor read before the rewrite keeps its values'
stderr_has "'w.safetensors': the file changed on disk since it was loaded (rewritten in place, still $size bytes)" \
  'the tensor read after the rewrite is an error, not the new bytes'

# ---- a file replaced by a save (rename): the handle keeps what it loaded ----
run -c '(io "save" "r.npy" [1 2 3]) (def h (io "load" "r.npy")) (io "save" "r.npy" [7 8 9]) (print (h 0) (h 2) ((io "load" "r.npy") 0))'
status_is 0 'a handle over a file replaced by a save'
stdout_is '1.0 3.0 7.0' 'the handle reads the contents it loaded'

exit $FAILED
