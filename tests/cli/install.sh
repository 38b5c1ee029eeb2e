#!/usr/bin/env bash
# tests/cli/install.sh — `make install` (cmake --install): the stripped binary (≤ 8 MB, no shared
# libraries beyond libc, libstdc++, libm, libgcc_s and OpenSSL's libcrypto, which signs compiled
# artifacts: linked statically it would add 4.5 MB), the MPI shim, the TensorBoard library and the
# shipped OpenBLAS where the binary finds them, the prelude modules and the docs; the installed
# binary runs programs, reports its build in --version, writes a TensorBoard file with the
# installed library and runs a 2-rank job with the installed shim. A build with the Python binding
# installs the module where its Python looks under that prefix, and it imports and runs.
# Usage: install.sh path/to/build/sheaf — runs every check, then exits 1 if any failed.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
CACHE=$(dirname "$SHEAF")/CMakeCache.txt
source "$(dirname "$0")/lib/harness.sh"
PREFIX=$TMP/prefix
STATUS=0
cmake --install "$(dirname "$SHEAF")" --prefix "$PREFIX" --strip >"$TMP/install.log" 2>&1 || fail 'cmake --install'
for f in bin/sheaf lib/sheaf/libsheaf_mpi.so lib/sheaf/libsheaf_tensorboard.so share/sheaf/lib/optim.shf share/doc/sheaf/reference.md share/doc/sheaf/distributed.md; do
  [[ -f $PREFIX/$f ]] || fail "installed $f"
done
# cuDNN's attention library, where the build made it (the cudnn-frontend headers were found)
if [[ -f $(dirname "$SHEAF")/libsheaf_cudnn.so ]]; then
  [[ -f $PREFIX/lib/sheaf/libsheaf_cudnn.so ]] || fail "installed lib/sheaf/libsheaf_cudnn.so"
fi
SHEAF=$PREFIX/bin/sheaf
size=$(stat -c %s "$SHEAF")
echo "installed binary: $size bytes (stripped)"
if ldd "$SHEAF" | grep -q -E 'libasan|libubsan'; then
  echo "sanitizer build: size and run-time libraries not checked"
else
  [[ $size -le 8388608 ]] || fail "the stripped binary has $size bytes (goal: at most 8 MiB)"
  extra=$(ldd "$SHEAF" | awk '{print $1}' | grep -v -E '^(linux-vdso|/lib64/ld-linux|libc\.so|libstdc\+\+\.so|libm\.so|libgcc_s\.so|libcrypto\.so)')
  [[ -z $extra ]] || fail "unexpected run-time libraries: $extra"
fi

# the OpenBLAS the build ships (scipy-openblas32, when it was installed) goes to lib/sheaf, where
# the installed binary finds it
if [[ -f $(dirname "$1")/libscipy_openblas.so ]]; then
  [[ -f $PREFIX/lib/sheaf/libscipy_openblas.so ]] || fail 'installed lib/sheaf/libscipy_openblas.so'
  (cd "$TMP" && "$SHEAF" -c '(defn f [a] (@ a a)) (f (ones [40 40]))' --jit-profile >"$TMP/out" 2>"$TMP/err" </dev/null)
  stderr_has '(libscipy_openblas.so, lib/sheaf)' 'the installed binary runs its products on the installed OpenBLAS'
fi

run --version
status_is 0 '--version'
stdout_has 'Sheaf ' '--version names the program'
stdout_has 'commit ' '--version gives the build'
run -c '(use optim) (sgd-step [1 2] [1 1] 0.5)'
status_is 0 'the installed binary runs a program with a bundled module'
stdout_is '[0.5 1.5]' 'the installed binary computes'

run -c '(tensorboard "tb" 1 {:loss 0.5})'
status_is 0 'the installed binary writes a TensorBoard record'
ls "$TMP"/tb/events.out.tfevents.* >/dev/null 2>&1 || fail 'an event file with the installed libsheaf_tensorboard.so'

# The Python module: in one of the Python's package folders (those under its prefix, or under
# /usr/local for Debian's) moved to PREFIX; with PYTHONPATH there it imports and computes.
modules=$(find "$PREFIX" -name 'sheaf*.so')
if grep -q '^SHEAF_PYTHON:BOOL=ON' "$CACHE"; then
  py=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' "$CACHE")
  dirs=$("$py" - "$PREFIX" <<'EOF'
import sys
for p in sys.path:
    for base in (sys.prefix, "/usr/local"):
        if p.startswith(base + "/lib/") and p.endswith("-packages"):
            print(sys.argv[1] + p[len(base):])
EOF
)
  [[ -n $modules ]] && grep -qxF "$(dirname "$modules")" <<<"$dirs" ||
    fail "the Python module '$modules' is not in a package folder of $py under the prefix: $dirs"
  printf '(defn double [x] (* x 2.0))\n' >"$TMP/double.shf"
  out=$(cd "$TMP" && PYTHONPATH=$(dirname "$modules") "$py" -c \
    'import numpy as np, sheaf; print(sheaf.load("double.shf").double(np.arange(3, dtype=np.float32)).tolist())' 2>&1)
  [[ $out == '[0.0, 2.0, 4.0]' ]] || fail "the installed Python module imports and runs: $out"
else
  [[ -z $modules ]] || fail "a build without the Python binding installed $modules"
fi

MPIRUN=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && MPIRUN+=(--allow-run-as-root)
(cd "$TMP" && ASAN_OPTIONS=detect_leaks=0 timeout 60 "${MPIRUN[@]}" -x ASAN_OPTIONS -np 2 "$SHEAF" -c '(print (rank) (all-reduce 1))' >"$TMP/out" 2>"$TMP/err" </dev/null)
STATUS=$?
status_is 0 'a 2-rank job with the installed libsheaf_mpi.so'
[[ $(sort "$TMP/out" | tr '\n' ' ') == "0 2 1 2 " ]] || fail '2 ranks sum 1 each'

exit $FAILED
