#!/usr/bin/env bash
# scripts/bootstrap.sh [demo|all] — installs what the demo (demo) or the build, tests and benchmarks
# (all, the default) need on Debian 12.
# Idempotent: packages already present are skipped, `apt-get update` runs at most once, and
# Python tools are installed with pip only when missing. Runs as root (or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

# `make demo` needs only the first list (compiler, CMake/Ninja, the libraries the binary links,
# OpenBLAS, protobuf for the demo's TensorBoard log, the dataset); `make test` and `make bench`
# install both.
DEMO_PACKAGES=(
  cmake ninja-build g++ ccache pkg-config          # build
  lld                                              # linker that folds identical functions (binary size)
  libedit-dev                                      # REPL line editing
  nlohmann-json3-dev libfmt-dev libcli11-dev zlib1g-dev
  libssl-dev                                       # libcrypto: HMAC-SHA-256 of cached artifacts
  libopenblas-dev                                  # CPU BLAS
  libgoogle-perftools-dev                          # tcmalloc, the executables' allocator (linked statically)
  libprotobuf-dev protobuf-compiler                # TensorBoard event files (libsheaf_tensorboard.so)
  dataset-fashion-mnist                            # the demo's data; IDX loading test (tests/cli/io_interop.sh)
)
TEST_PACKAGES=(
  clang libclang-rt-14-dev                         # libFuzzer target
  libgtest-dev libgmock-dev googletest             # unit tests
  libboost-context-dev                             # the emulated GPU's threads as fibers (tests/unit/cuda_emulator.cpp)
  llvm-14-tools                                    # FileCheck + lit for IR tests
  libbenchmark-dev                                 # micro-benchmarks (bench/dispatch_bench.cpp)
  libcairo2-dev                                    # `sheaf plot` (cairo's header; libcairo2 is loaded at run time)
  openmpi-bin libopenmpi-dev                       # data-parallel jobs (libsheaf_mpi.so, mpirun; tests/dist)
  tmux                                             # REPL test under a pseudo-terminal
  fortunes                                         # text corpus of examples/gpt (tests/cli/gpt.sh)
  python3 python3-pip
  python3-dev python3-numpy python3-venv           # Python binding (python/, tests/python, scripts/test_wheel.sh)
)
MODE=${1:-all}  # demo | all
case "$MODE" in
  demo) APT_PACKAGES=("${DEMO_PACKAGES[@]}") ;;
  all) APT_PACKAGES=("${DEMO_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "usage: scripts/bootstrap.sh [demo|all]" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$MODE" = demo ]; then
  echo "bootstrap: ok (demo)"
  exit 0
fi

# Python tools for tests and benchmarks (numpy is the reference for tensor printing checks;
# safetensors is the reference reader/writer for tests/cli/io_interop.sh; IREE's iree-compile and
# iree-run-module check the emitted StableHLO in tests/unit/stablehlo_test.cpp and back
# `sheaf build -o x.vmfb`; tiktoken with bpe-openai's copy of cl100k_base counts the tokens of
# `sheaf init-ai`'s output offline, scripts/cl100k.py; tensorboard reads the event files and pypng
# the plots of tests/cli/metrics.sh; scipy-openblas32 is the OpenBLAS the build copies beside the
# binary, src/tensor/blas.cpp; pybind11, pinned in requirements-wheel.txt, builds the Python binding
# in build/).
PY=python3
if ! $PY -c "import numpy, safetensors, iree.compiler, iree.runtime, tiktoken, bpe_openai, tensorboard, png, scipy_openblas32, pybind11
assert pybind11.version_info >= (2, 13)" 2>/dev/null; then
  echo "bootstrap: pip install -r scripts/requirements-test.txt"
  $PY -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt ||
    $PY -m pip install --quiet --disable-pip-version-check --break-system-packages -r scripts/requirements-test.txt
fi
# NVIDIA's header-only cudnn-frontend (its C++ headers in site-packages/include) builds
# libsheaf_cudnn.so, cuDNN's attention on GPUs (CMakeLists.txt); --no-deps: the headers need none of
# the wheel's Python dependencies.
if ! $PY -c "import os, site, sys; sys.exit(not any(os.path.exists(p + '/include/cudnn_frontend.h') for p in site.getsitepackages()))" 2>/dev/null; then
  echo "bootstrap: pip install --no-deps nvidia-cudnn-frontend"
  $PY -m pip install --quiet --disable-pip-version-check --no-deps -r scripts/requirements-cudnn.txt ||
    $PY -m pip install --quiet --disable-pip-version-check --no-deps --break-system-packages -r scripts/requirements-cudnn.txt
fi
echo "bootstrap: ok"
