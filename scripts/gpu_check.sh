#!/usr/bin/env bash
# scripts/gpu_check.sh — runs on the GPU machine (device tool), from the repository root, with the
# binaries of scripts/gpu_pack.sh carried in .gpu/. Each phase fits one device call (≤ 10 min);
# logs go to $OUT (they come back) or /tmp/gpu-check.
#   tests   the machine (nvidia-smi, compilers), then every unit test that needs a GPU or checks
#           the CUDA backend (gtest filter below, or $GPU_TESTS), one process each, nproc at a time;
#           prints each failure's log and a summary
#   run     the XOR and MLP examples with --device cuda --jit-profile, then the same
#           on the CPU, losses side by side
#   bench   python3 bench/gpu.py --sheaf .gpu/sheaf (GPT-2 small, bf16; $BENCH_ARGS, default
#           --steps 10 --rounds 1) → $OUT/gpu_results.md
#   profile the GPT-2 small step with SHEAF_CUDA_PROFILE=1 --jit-profile: the time of every
#           launch (kernels by name, products by shape), the launch table and the CUDA source
#           → $OUT/profile.txt, $OUT/cuda/train-step.cu; then again with a point per thread
#           (SHEAF_CUDA_POINTS_PER_THREAD=1) → $OUT/profile_one_point.txt
# usage: bash scripts/gpu_check.sh tests|run|bench|profile ...
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
SHEAF=$PWD/.gpu/sheaf
TESTS=$PWD/.gpu/unit_tests
[ -x "$SHEAF" ] && [ -x "$TESTS" ] || { echo "gpu_check: no .gpu/ binaries: run scripts/gpu_pack.sh and carry .gpu"; exit 2; }
# The unit tests read their tables from the path they were built in.
SRC=$(cat .gpu/source_dir)
if [ "$SRC" != "$PWD" ] && [ ! -e "$SRC" ]; then mkdir -p "$(dirname "$SRC")" && ln -s "$PWD" "$SRC"; fi
DATA=/usr/share/datasets/fashion-mnist
if [ ! -e "$DATA" ] && [ -d .gpu/fashion-mnist ]; then mkdir -p "$(dirname "$DATA")" && ln -s "$PWD/.gpu/fashion-mnist" "$DATA"; fi

machine() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  nproc; for c in c++ g++ clang++; do command -v $c >/dev/null && { $c --version | head -1; break; }; done
  ls /usr/local/cuda/lib64/libnvrtc.so* /usr/local/cuda/lib64/libcublasLt.so* 2>/dev/null | head -4
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available())' 2>&1 | tail -1
}

tests() {
  machine | tee "$OUT/machine.txt"
  local filter=${GPU_TESTS:-'*gpu*:*Gpu*:Cuda.*:CudaDriver.*:CudaDevice.*:CudaAbi.*:Nvrtc.*:CudaCache.*'}
  "$TESTS" --gtest_list_tests --gtest_filter="$filter" |
    awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}' >"$OUT/tests.txt"
  echo "gpu_check: $(wc -l <"$OUT/tests.txt") tests"
  mkdir -p /tmp/gpu-logs
  local start=$SECONDS
  xargs -P "$(nproc)" -I{} sh -c '"$1" --gtest_filter="$2" >"/tmp/gpu-logs/$(echo "$2" | tr "/" "_").log" 2>&1 || echo "$2"' _ "$TESTS" {} \
    <"$OUT/tests.txt" >"$OUT/failed.txt"
  local skipped; skipped=$(grep -l "\[  SKIPPED \]" /tmp/gpu-logs/*.log | wc -l)
  for t in $(cat "$OUT/failed.txt"); do
    echo "===== FAILED $t"; tail -60 "/tmp/gpu-logs/$(echo "$t" | tr "/" "_").log"
  done | tee "$OUT/failures.log" | head -400
  # each skip's reason: the line after gtest's "file:line: Skipped"
  grep -h -A1 ': Skipped$' /tmp/gpu-logs/*.log | grep -v -e ': Skipped$' -e '^--$' | sort | uniq -c | sort -rn >"$OUT/skips.txt"
  echo "gpu_check: $(wc -l <"$OUT/tests.txt") tests, $(wc -l <"$OUT/failed.txt") failed, $skipped skipped, $((SECONDS - start)) s"
}

run() {
  machine
  for ex in examples/xor/train.shf examples/mlp/train.shf; do
    for dev in cuda cpu; do
      echo "===== $ex --device $dev"
      (cd "$(dirname "$ex")" && timeout 240 "$SHEAF" --device $dev --jit-profile "$(basename "$ex")") 2>&1 | tail -25
    done
  done | tee "$OUT/run.log"
}

bench() {
  machine
  PYTHONUNBUFFERED=1 timeout 560 python3 bench/gpu.py --sheaf "$SHEAF" ${BENCH_ARGS:---steps 10 --rounds 1} \
    --out "$OUT/gpu_results.md" 2>&1 | tee "$OUT/bench.log"
}

profile() {
  machine
  mkdir -p "$OUT/cuda"
  SHEAF_CUDA_PROFILE=1 SHEAF_DUMP_CUDA="$OUT/cuda" timeout 300 "$SHEAF" --device cuda --jit-profile bench/gpt2_gpu.shf -- --steps 3 \
    2>&1 | tee "$OUT/profile.txt"
  # the same with a point per thread and no unrolled loops (render.hpp: loads in flight)
  SHEAF_CUDA_POINTS_PER_THREAD=1 SHEAF_CUDA_PROFILE=1 timeout 240 "$SHEAF" --device cuda --jit-profile bench/gpt2_gpu.shf -- --steps 3 \
    >"$OUT/profile_one_point.txt" 2>&1
  grep -E "RESULT|cuda launch times|products .* kernels" "$OUT/profile_one_point.txt"; sed -n '/us\/launch/,+30p' "$OUT/profile_one_point.txt"
}

for phase in "$@"; do
  case $phase in
    tests | run | bench | profile) $phase ;;
    *) echo "gpu_check: unknown phase $phase (tests, run, bench or profile)"; exit 2 ;;
  esac
done
