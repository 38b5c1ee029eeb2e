#!/usr/bin/env bash
# tests/cli/hostile_files.sh — `io "load"` on hostile files (SPEC §7): each gives a clear error
# naming the file and exit status 1, promptly (every run is under `timeout 10`), never a crash,
# a hang, an allocation the file cannot back, or an error that quotes the file's bytes. Covers
# index files naming shards outside their folder, IDX/gzip headers that lie about their size,
# safetensors/npy headers that disagree with the file, zero-sized shapes with huge dims, and
# deeply nested JSON. The files are made here with printf and python3 (standard library only).
# Usage: hostile_files.sh path/to/sheaf — runs every check, then exits 1 if any failed.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
source "$(dirname "$0")/lib/harness.sh"

# run_limited PROGRAM: like `run -c PROGRAM`, under `timeout 10`. Outside the sanitizer build
# (whose shadow memory needs a huge address space) the address space is capped at 8 GB, so that
# a reader that trusted a header fails fast instead of committing the machine's memory.
SANITIZED=0
grep -qa __asan_init "$SHEAF" && SANITIZED=1
run_limited() {
  (cd "$TMP" && { [[ $SANITIZED == 1 ]] || ulimit -v 8000000; } &&
    NO_COLOR=1 timeout 10 "$SHEAF" -c "$1" >"$TMP/out" 2>"$TMP/err" </dev/null)
  STATUS=$?
}
# load_fails NAME PROGRAM MESSAGE: the program fails with status 1 and MESSAGE on stderr.
load_fails() {
  run_limited "$2"
  status_is 1 "$1"
  stderr_has "$3" "$1"
}
py() { python3 -c "$1" || fail "python3 could not write the fixture: $1"; }

# ---- Index files: shard paths stay inside the index's folder ----
mkdir -p "$TMP/m/sub"
run -c '(io "save" "m/a.safetensors" {:a [1 2]}) (io "save" "m/sub/b.safetensors" {:b [3]})
        (io "save" "secret.safetensors" {:secret [42]})'
status_is 0 'writing the shards'
ln -s a.safetensors "$TMP/m/alias.safetensors"
ln -s ../secret.safetensors "$TMP/m/link.safetensors"
index() { printf '{"weight_map": {%s}}' "$2" >"$TMP/m/$1.safetensors.index.json"; }
index good '"a": "alias.safetensors", "b": "sub/b.safetensors"'
run_limited '(def h (io "load" "m/good.safetensors.index.json")) (print (get h :a) (get h :b))'
status_is 0 'an index naming shards inside its folder, through a link and a subfolder'
stdout_has '[1. 2.] [3.]' 'an index naming shards inside its folder'
index up '"secret": "../secret.safetensors"'
load_fails 'index with ../' '(io "load" "m/up.safetensors.index.json")' \
  "'m/up.safetensors.index.json': weight_map entry 'secret' names '../secret.safetensors', a path with a '..' component"
index abs "\"secret\": \"$TMP/secret.safetensors\""
load_fails 'index with an absolute path' '(io "load" "m/abs.safetensors.index.json")' \
  "weight_map entry 'secret' names '$TMP/secret.safetensors', an absolute path"
index passwd '"x": "/etc/passwd"'
load_fails 'index naming /etc/passwd' '(io "load" "m/passwd.safetensors.index.json")' 'an absolute path'
grep -q 'root' "$TMP/err" && fail 'the error about /etc/passwd quotes the file'
index link '"secret": "link.safetensors"'
load_fails 'index with a link out of the folder' '(io "load" "m/link.safetensors.index.json")' \
  "weight_map entry 'secret' names 'link.safetensors', a link that leads outside the folder"
mkfifo "$TMP/m/fifo.safetensors"
index fifo '"x": "fifo.safetensors"'
load_fails 'index naming a FIFO' '(io "load" "m/fifo.safetensors.index.json")' \
  "weight_map entry 'x' names 'fifo.safetensors', which is not a regular file"

# ---- Errors describe a malformed file without quoting its bytes ----
printf 'SECRETPW and more text' >"$TMP/text.safetensors"
load_fails 'a text file as safetensors' '(io "load" "text.safetensors")' \
  "'text.safetensors': invalid safetensors header: the header length (the first 8 bytes) exceeds the limit"
grep -q "$(python3 -c 'import struct; print(struct.unpack("<Q", b"SECRETPW")[0])')" "$TMP/err" &&
  fail 'the error quotes the first 8 bytes as a number'
py "import struct; open('$TMP/badjson.safetensors', 'wb').write(struct.pack('<Q', 16) + b'SECRETPW{\"a\": 1}')"
load_fails 'a header that is not JSON' '(io "load" "badjson.safetensors")' "'badjson.safetensors': invalid JSON"
grep -q 'SECRET' "$TMP/err" && fail 'the JSON error quotes the header'
py "import struct; open('$TMP/name.safetensors', 'wb').write(struct.pack('<Q', 48) + b'{\"w\\\\u001b[31m\": {\"dtype\": \"C64\", \"shape\": []}}  ')"
load_fails 'a tensor name with an escape sequence' '(io "load" "name.safetensors")' "tensor 'w\\x1b[31m' has unsupported dtype 'C64'"

# ---- safetensors headers that disagree with the file ----
py "import struct; open('$TMP/long.safetensors', 'wb').write(struct.pack('<Q', 4096) + b'{}      ')"
load_fails 'header length beyond the file' '(io "load" "long.safetensors")' \
  "'long.safetensors': invalid safetensors header: the header length (the first 8 bytes) exceeds the 8 bytes that follow it"
py "import json, struct
h = json.dumps({'w': {'dtype': 'F64', 'shape': [2**59], 'data_offsets': [0, 2**62]}}).encode()
h += b' ' * (-len(h) % 8)
open('$TMP/offsets.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + bytes(16))"
load_fails 'data_offsets beyond the file' '(io "load" "offsets.safetensors")' \
  "tensor 'w' has data_offsets [0, 4611686018427387904] beyond the 16 data bytes"

# ---- Zero-sized shapes with a huge dim load in O(rank) ----
py "import json, struct
h = json.dumps({'w': {'dtype': 'F32', 'shape': [2**62, 0], 'data_offsets': [0, 0]}}).encode()
h += b' ' * (-len(h) % 8)
open('$TMP/zero.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h)"
run_limited '(def h (io "load" "zero.safetensors")) (print (len h) (keys h) (shape (get h :w)) (shape (get (get h :w) 5)))'
status_is 0 'safetensors f32[2^62 0]'
stdout_is "1 ['w'] [4611686018427387904, 0] [0]" 'safetensors f32[2^62 0]'
py "open('$TMP/zero.npy', 'wb').write(b'\\x93NUMPY\\x01\\x00\\x76\\x00' + (\"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 0), }\".ljust(117) + '\\n').encode())"
run_limited '(def h (io "load" "zero.npy")) (print h (shape (h 5)) (shape (h 2:7)) (shape (get h [1 2])))'
status_is 0 'npy f32[2^62 0]'
stdout_is '<handle npy f32[4611686018427387904x0]> [0] [5, 0] [2, 0]' 'npy f32[2^62 0]'
run_limited '(def z (zeros [4611686018427387904 0])) (print (shape z) (shape (get z 5)) (shape (slice z 1 3)))'
status_is 0 'zeros [2^62 0]'
stdout_is '[4611686018427387904, 0] [0] [2, 0]' 'zeros [2^62 0]'
run_limited '(io "save" "z.json" (zeros [4611686018427387904 0]))'
status_is 1 'saving f32[2^62 0] as JSON'
stderr_has "'z.json': cannot write f32[4611686018427387904x0] as JSON: it has no elements but more than 1048576 empty arrays" \
  'saving f32[2^62 0] as JSON'
run_limited '(io "save" "e.json" (zeros [2 0 3])) (io "read" "e.json")'
stdout_is '[[],[]]' 'saving f32[2 0 3] as JSON'
py "open('$TMP/wide.npy', 'wb').write(b'\\x93NUMPY\\x01\\x00\\x76\\x00' + (\"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776, 1099511627776), }\".ljust(117) + '\\n').encode())"
load_fails 'npy shape whose nonzero dims overflow' '(io "load" "wide.npy")' "'wide.npy': npy shape is too large"

# ---- npy and raw binary sizes ----
py "open('$TMP/short.npy', 'wb').write(b'\\x93NUMPY\\x01\\x00\\x76\\x00' + (\"{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000,), }\".ljust(117) + '\\n').encode() + bytes(16))"
load_fails 'npy header claiming more data than the file' '(io "load" "short.npy")' \
  "'short.npy': the f64[1000000000] data (bytes 128..8000000128) lies beyond the end of the file (144 bytes)"
printf 'abcdefg' >"$TMP/odd.bin"
load_fails 'raw .bin not a multiple of the dtype size' '(io "load" "odd.bin" :i32)' \
  "'odd.bin': size 7 bytes is not a multiple of the 4-byte i32 element"

# ---- IDX headers that lie ----
printf '\x00\x00\x0e\x01\x7f\xff\xff\xff0123456789abcdef' >"$TMP/f64.idx"
load_fails 'IDX f64[2^31-1] in 24 bytes' '(io "load" "f64.idx")' \
  "'f64.idx': truncated IDX file: the f64 data of shape [2147483647] ends early: the header claims 17179869176 bytes but the file holds 16"
py "import gzip; open('$TMP/lies-idx1-ubyte.gz', 'wb').write(gzip.compress(b'\\x00\\x00\\x08\\x01\\x40\\x00\\x00\\x00' + bytes(10)))"
load_fails 'gzip IDX whose header lies' '(io "load" "lies-idx1-ubyte.gz")' \
  "the u8 data of shape [1073741824] ends early: the header claims 1073741824 bytes but the gzip data inflates to 10"
printf '\x00\x00\x08\x03\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff' >"$TMP/wide.idx"
load_fails 'IDX shape whose nonzero dims overflow' '(io "load" "wide.idx")' "IDX shape [0 4294967295 4294967295] is too large"

# ---- JSON ----
py "open('$TMP/deep.json', 'w').write('[' * 100000 + ']' * 100000)"
load_fails 'deeply nested JSON' '(io "load" "deep.json")' "'deep.json': the data nests deeper than 10000 levels"
py "open('$TMP/deep.jsonl', 'w').write('{}\\n' + '{\"a\":' * 20000 + '1' + '}' * 20000 + '\\n')"
load_fails 'deeply nested JSONL line' '(io "load" "deep.jsonl")' "'deep.jsonl:2': the data nests deeper than 10000 levels"
printf '{"a": "\xff\xfe"}' >"$TMP/utf8.json"
load_fails 'JSON with invalid UTF-8' '(io "load" "utf8.json")' "'utf8.json': invalid JSON: parse error at line 1, column 8"
grep -q $'\xff' "$TMP/err" && fail 'the JSON error quotes the invalid bytes'
printf '[1e999]' >"$TMP/huge.json"
load_fails 'JSON number beyond f64' '(io "load" "huge.json")' "'huge.json': invalid JSON"

exit $FAILED
