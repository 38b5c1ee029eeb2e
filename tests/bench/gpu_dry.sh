#!/usr/bin/env bash
# tests/bench/gpu_dry.sh GPU_DRY — bench/gpu_dry runs a GPT-2 training step (bench/gpt2_gpu.shf at
# a tiny size) through the CUDA backend on a device that does nothing, and reports each compiled
# function's calls and the work of its last call. The products are the model's: per layer 6
# forward (qkv, scores, scores·v, proj, fc, out) and 12 backward, plus the tied head's 3:
# 2·18 + 3 = 39 products of 3·(2·(14 680 064) + 8 388 608) = 113 246 208 FLOP.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$("$1" bench/gpt2_gpu.shf -- --d 64 --layers 2 --heads 2 --T 64 --B 2 --vocab 512 --steps 2)
line=$(grep -E '^  train-step ' <<<"$out") || { echo "no train-step line in:"; echo "$out"; exit 1; }
grep -Eq 'train-step +4 calls +[1-9][0-9]* kernels +0\.0[0-9]+ GB of buffers +39 products +0\.113 GFLOP$' <<<"$line" ||
  { echo "unexpected: $line"; exit 1; }
grep -q '^  cuda work: ' <<<"$out" || { echo "no cuda work line in:"; echo "$out"; exit 1; }
echo "ok: $line"
