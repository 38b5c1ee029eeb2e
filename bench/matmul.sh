#!/usr/bin/env bash
# bench/matmul.sh — f32 matmul GFLOP/s of sheaf (on each BLAS it can load, 1 and 2
# threads) beside NumPy and PyTorch, measured in one run; see bench/README.md.
#   bench/matmul.sh [path/to/sheaf] [extra matmul.py options]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
sheaf="${1:-$here/../build/sheaf}"
shift || true
[ -x "$sheaf" ] || { echo "matmul.sh: no sheaf binary at $sheaf (run 'make build' first)" >&2; exit 2; }
exec python3 "$here/matmul.py" --sheaf "$sheaf" "$@"
