#!/usr/bin/env bash
# scripts/test_wheel.sh — builds the wheel (pyproject.toml: scikit-build-core + pybind11) and tests
# it as a user gets it, installed with pip into fresh venvs:
#   - the python3 on the PATH with NumPy 2 from PyPI (pinned in scripts/requirements-wheel.txt),
#   - Debian's /usr/bin/python3 with its NumPy 1.24 (python3-numpy, seen through
#     --system-site-packages).
# In each venv: tests/python/test_binding.py against the installed module, and the venv's `sheaf`
# command (--version, a program, a TensorBoard record and a 2-rank MPI job through the libraries
# the wheel puts in lib/sheaf).
# Each further PYTHON given is tested like the first (NumPy 2 from PyPI), e.g. pyenv's 3.9 to 3.13.
# One wheel per CPython version (both defaults are 3.11 on Debian 12 with pyenv's: one build).
# The CMake tree is build-wheel-<wheel tag>/ (pyproject.toml), kept between runs; with
# CCACHE_BASEDIR at the repository root (the default here) the core's objects are those build/
# compiled. The build venvs, the wheels and the test venvs are in build-wheel-test/. Needs pip's
# access to PyPI (or the wheels in PIP_FIND_LINKS).
# Usage: scripts/test_wheel.sh [PYTHON...] — exits non-zero at the first failure. ctest runs it
# without arguments as python.wheel (python/CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/build-wheel-test
PINS=$ROOT/scripts/requirements-wheel.txt
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}
export CC=${CC:-cc} CXX=${CXX:-c++}  # CMake's defaults, as for build/ (scikit-build-core would take Python's)
export PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH PYTHONHOME
rm -rf "$OUT/dist" "$OUT"/venv-* "$OUT/run"
mkdir -p "$OUT/dist" "$OUT/run"

fail() { echo "test_wheel: FAIL: $*" >&2; exit 1; }
seconds() { date +%s; }
elapsed() { echo "$(($(seconds) - $1)) s"; }

# build_wheel PYTHON — the wheel for PYTHON's CPython version in $OUT/dist (once per version).
build_wheel() {
  local py=$1 tag
  tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  compgen -G "$OUT/dist/sheaf-*-$tag-*.whl" >/dev/null && return 0
  local venv=$OUT/build-$tag t0
  t0=$(seconds)
  [[ -x $venv/bin/python ]] || "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet -c "$PINS" scikit-build-core pybind11
  # The same flags as build/ (-DSHEAF_WERROR=ON, Release) so that ccache serves its objects.
  "$venv/bin/python" -m pip wheel -v --no-build-isolation --no-deps -w "$OUT/dist" \
    --config-settings=cmake.define.SHEAF_WERROR=ON . >"$OUT/build-$tag.log" 2>&1 ||
    { tail -40 "$OUT/build-$tag.log" >&2; fail "building the $tag wheel (log: $OUT/build-$tag.log)"; }
  echo "test_wheel: built $(basename "$OUT"/dist/sheaf-*-"$tag"-*.whl) in $(elapsed "$t0")"
}

# test_venv NAME PYTHON NUMPY_MAJOR [venv options] — installs the wheel into a fresh venv and tests it.
test_venv() {
  local name=$1 py=$2 numpy_major=$3 venv=$OUT/venv-$1 t0
  shift 3
  build_wheel "$py"
  t0=$(seconds)
  "$py" -m venv "$@" "$venv"
  local wheel tag
  tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  wheel=$(echo "$OUT"/dist/sheaf-*-"$tag"-*.whl)
  if [[ $numpy_major == 2 ]]; then
    "$venv/bin/python" -m pip install --quiet -c "$PINS" numpy "$wheel"
  else  # the system's NumPy satisfies the wheel's requirement: nothing is downloaded
    "$venv/bin/python" -m pip install --quiet "$wheel"
  fi
  cd "$OUT/run"  # not the repository: `import sheaf` must find the installed module
  "$venv/bin/python" - "$venv" "$numpy_major" <<'EOF' || fail "$name: the installed module"
import os, sys, numpy, sheaf
venv, major = sys.argv[1], sys.argv[2]
assert numpy.__version__.split(".")[0] == major, f"NumPy {numpy.__version__}, expected {major}.x"
assert os.path.realpath(sheaf.__file__).startswith(os.path.realpath(venv)), sheaf.__file__
print(f"test_wheel: {os.path.basename(venv)}: Python {sys.version.split()[0]}, NumPy {numpy.__version__}, sheaf {sheaf.__version__}")
EOF
  "$venv/bin/python" "$ROOT/tests/python/test_binding.py" >"$OUT/$name-test.log" 2>&1 ||
    { tail -40 "$OUT/$name-test.log" >&2; fail "$name: tests/python/test_binding.py"; }
  local sheaf=$venv/bin/sheaf
  [[ -x $sheaf ]] || fail "$name: no sheaf command in the venv's bin/"
  "$sheaf" --version | grep -q '^Sheaf ' || fail "$name: sheaf --version"
  [[ $("$sheaf" -c '(use optim) (sgd-step [1 2] [1 1] 0.5)') == '[0.5 1.5]' ]] || fail "$name: sheaf runs a program"
  if [[ -e $venv/lib/sheaf/libsheaf_tensorboard.so ]]; then  # protobuf was installed at build time
    (cd "$OUT/run" && "$sheaf" -c '(tensorboard "tb" 1 {:loss 0.5})' >/dev/null) &&
      compgen -G "$OUT/run/tb/events.out.tfevents.*" >/dev/null ||
      fail "$name: a TensorBoard record with the venv's lib/sheaf/libsheaf_tensorboard.so"
    rm -rf "$OUT/run/tb"
  fi
  if command -v mpirun >/dev/null; then  # MPI is installed: the wheel has the shim
    local mpirun=(mpirun --oversubscribe)
    [[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)
    [[ $(timeout 60 "${mpirun[@]}" -np 2 "$sheaf" -c '(print (rank) (all-reduce 1))' </dev/null | sort | tr '\n' ' ') == "0 2 1 2 " ]] ||
      fail "$name: a 2-rank job with the venv's sheaf and lib/sheaf/libsheaf_mpi.so"
  fi
  cd "$ROOT"
  echo "test_wheel: $name: installed and tested in $(elapsed "$t0")"
}

t_all=$(seconds)
test_venv numpy2 python3 2
test_venv debian /usr/bin/python3 1 --system-site-packages
for py in "$@"; do
  test_venv "$("$py" -c 'import sys; print("py%d.%d" % sys.version_info[:2])')" "$py" 2
done
echo "test_wheel: $((2 + $#)) venvs passed in $(elapsed "$t_all")"
