#!/usr/bin/env bash
# tests/bench/gpu_dry.sh GPU_DRY — bench/gpu_dry runs a GPT-2 training step (bench/gpt2_gpu.shf at
# a tiny size) through the CUDA backend on a device that does nothing, and reports each compiled
# function's calls and the work of its last call. The products are the model's but attention's,
# which run inside its flash-attention kernels (forward and gradient): per layer 4 forward (qkv,
# proj, fc, out) and 8 backward, plus the tied head's 3: 2·12 + 3 = 27 products of
# 113 246 208 FLOP (all 39) − 2 layers · 6 · 1 048 576 (attention's) = 100 663 296 FLOP.
# With --cudnn (a device with cuDNN's fused attention) the products are the same and both layers'
# chains go to cuDNN — checked by cudnn-frontend's validation where libsheaf_cudnn.so (beside the
# build's binary) and libcudnn load.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$("$1" bench/gpt2_gpu.shf -- --d 64 --layers 2 --heads 2 --T 64 --B 2 --vocab 512 --steps 2)
line=$(grep -E '^  train-step ' <<<"$out") || { echo "no train-step line in:"; echo "$out"; exit 1; }
grep -Eq 'train-step +4 calls +[1-9][0-9]* kernels +0\.0[0-9]+ GB of buffers +27 products +0\.101 GFLOP +0\.0[0-9]+ GB +moved +0\.0[0-9]+ GB, floor +0\.0[0-9]+ GB$' <<<"$line" ||
  { echo "unexpected: $line"; exit 1; }
grep -q '^  cuda work: ' <<<"$out" || { echo "no cuda work line in:"; echo "$out"; exit 1; }
echo "ok: $line"
plugin=$(dirname "$(readlink -f "$1")")/../libsheaf_cudnn.so
[ -f "$plugin" ] && export SHEAF_CUDNN_LIB=$plugin
out=$("$1" --cudnn bench/gpt2_gpu.shf -- --d 64 --layers 2 --heads 2 --T 64 --B 2 --vocab 512 --steps 2)
grep -Eq 'train-step +4 calls .* 27 products +0\.101 GFLOP' <<<"$out" || { echo "unexpected with --cudnn:"; echo "$out"; exit 1; }
taken=$(grep -Eo 'attention: dry cuDNN takes [0-9]+ of [0-9]+ chains \([^)]*\)' <<<"$out") || { echo "no attention report in:"; echo "$out"; exit 1; }
grep -q 'takes 2 of 2 chains' <<<"$taken" || { echo "unexpected: $taken"; exit 1; }
echo "ok: $taken"
