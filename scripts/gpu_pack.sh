#!/usr/bin/env bash
# scripts/gpu_pack.sh — packs what a session with a GPU machine (the device tool) needs to test and
# benchmark the CUDA backend there, into .gpu/ (ignored by git through .git/info/exclude): the
# machine has CUDA, PyTorch and JAX but none of our build dependencies and no network, so the
# binaries are built here (sheaf and unit_tests link only libc/libstdc++; OpenBLAS and the CUDA
# libraries are opened at run time) and travel with the working tree (`carry: [".gpu"]`).
#   .gpu/sheaf, .gpu/unit_tests   Release builds of this checkout
#   .gpu/libsheaf_cudnn.so        cuDNN's attention (when the build has it), found beside them
#   .gpu/source_dir               this checkout's path: the unit tests find their case tables
#                                 through __FILE__, so scripts/gpu_check.sh links it to the copy
#   .gpu/fashion-mnist            the MLP example's data (dataset-fashion-mnist), which the GPU
#                                 machine lacks (gpu_check.sh links it where the example reads it)
#   .gpu/lib/                     Debian's OpenBLAS (xz-compressed: 36 MB → 4 MB) and the Fortran
#                                 runtime it needs, for the CPU columns when the machine has none
# usage: bash scripts/gpu_pack.sh [BUILD_DIR (default build)]
# then, with the device tool:  run(command="bash scripts/gpu_check.sh tests", carry=[".gpu"])
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}

cmake -S . -B "$BUILD" -G Ninja -DSHEAF_WERROR=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target sheaf unit_tests
EXCLUDE=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$EXCLUDE")"
grep -qx '/.gpu/' "$EXCLUDE" 2>/dev/null || echo '/.gpu/' >>"$EXCLUDE"
rm -rf .gpu && mkdir .gpu
cp "$BUILD/sheaf" "$BUILD/tests/unit_tests" .gpu/
strip .gpu/sheaf .gpu/unit_tests
if [ -f "$BUILD/libsheaf_cudnn.so" ]; then cp "$BUILD/libsheaf_cudnn.so" .gpu/ && strip .gpu/libsheaf_cudnn.so
else echo "gpu_pack: no $BUILD/libsheaf_cudnn.so (pip install nvidia-cudnn-frontend): the GPU runs the own attention only"; fi
pwd >.gpu/source_dir
cp -r /usr/share/datasets/fashion-mnist .gpu/fashion-mnist
mkdir .gpu/lib
xz -T0 -6 -c "$(readlink -f /usr/lib/x86_64-linux-gnu/libopenblas.so.0)" >.gpu/lib/libopenblas.so.0.xz
cp -L /lib/x86_64-linux-gnu/libgfortran.so.5 /lib/x86_64-linux-gnu/libquadmath.so.0 .gpu/lib/
echo "gpu_pack: $(du -sh .gpu | cut -f1) in .gpu/ (sheaf $(git rev-parse --short HEAD)$(git diff --quiet || echo ', with uncommitted changes'))"
