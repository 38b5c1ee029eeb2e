#!/usr/bin/env bash
# scripts/bench_deps.sh — installs the peers of the training benchmarks (bench/run.py), idempotently:
# Debian's python3-torch (PyTorch 1.13, CPU only, for /usr/bin/python3; PyPI's torch wheel pulls
# GBs of CUDA), jax[cpu] from PyPI into the default python3 (scripts/requirements-bench.txt), and
# IREE's compiler and runtime (scripts/requirements-test.txt). Runs as root (or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "bench_deps: apt-get install python3-torch"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
fi

PY=python3
pip_install() {
  $PY -m pip install --quiet --disable-pip-version-check -r "$1" ||
    $PY -m pip install --quiet --disable-pip-version-check --break-system-packages -r "$1"
}
if ! $PY -c "import jax" 2>/dev/null; then
  echo "bench_deps: pip install -r scripts/requirements-bench.txt"
  pip_install scripts/requirements-bench.txt
fi
if ! $PY -c "import numpy, iree.compiler, iree.runtime" 2>/dev/null || ! command -v iree-benchmark-module >/dev/null; then
  echo "bench_deps: pip install -r scripts/requirements-test.txt"
  pip_install scripts/requirements-test.txt
fi
echo "bench_deps: ok"
