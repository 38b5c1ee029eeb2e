#!/usr/bin/env bash
# scripts/gpu_check.sh — runs on the GPU machine (device tool), from the repository root, with the
# binaries of scripts/gpu_pack.sh carried in .gpu/. Phases run in the order given; each is bounded
# by a timeout so that a list of them fits one device call. What comes back is at most 8 files in
# $OUT (the device tool's limit; /tmp/gpu-check without it):
#   smoke   the machine (nvidia-smi, compilers, libraries), three tiny programs on --device cuda
#           with --jit-profile, and a tiny GPT-2 with cuDNN's attention and with the own kernels
#           (SHEAF_CUDNN=0): which attention ran, and the losses side by side → machine.txt
#   tests   every unit test that needs a GPU or checks the CUDA backend (gtest filter below, or
#           $GPU_TESTS), one process each, nproc at a time, each ≤ 120 s, all ≤ $TESTS_S (240) s;
#           each failure's log and a summary → tests.log; every log, skip reasons → test-logs.tgz
#   run     the XOR and MLP examples with --device cuda --jit-profile, then the same on the CPU,
#           losses side by side                                           → run.log
#   bench   python3 bench/gpu.py --sheaf .gpu/sheaf (GPT-2 small and medium, bf16, sheaf with cuDNN's
#           attention and with its own, and the per-head and einsum styles; $BENCH_ARGS, default
#           --steps 10 --rounds 1 --timeout 150 --own-attention --per-head --einsum), ≤ $BENCH_S
#           (540) s                                                        → bench.log, gpu_results.md
#   sanitize compute-sanitizer's memcheck, racecheck and synccheck over two steps of a tiny GPT-2
#           (bench/gpt2_gpu.shf's tiny config), each ≤ 60 s                → sanitize.log
#   profile the GPT-2 small step with SHEAF_CUDA_PROFILE=1 --jit-profile: the time of every
#           launch (kernels by name, products by shape, cuDNN's attention), the launch table
#                                                                          → profile.txt; its CUDA
#           source, the same with SHEAF_CUDNN=0 (the own attention kernels) and, with ONE_POINT=1,
#           with a point per thread (SHEAF_CUDA_RENDER=points_per_thread=1) → cuda.tgz
#   ab      the GPT-2 small step as the switches change it, one warm run each (after a cold one):
#           10 steps as is; the row runs' values through memory (SHEAF_CUDA_RENDER=
#           hold_row_values=0), their values over the points through memory, as before
#           2026-11-30's second session (hold_row_points=0), their phases loading each point
#           in turn (row_slot_loads_first=0), no loads at a row's start for later phases
#           (prefetch_row_registers=0), all three as before, block loops over points of more than 8 bytes not unrolled, as
#           before 2026-11-30 (unroll_max_round_bytes=17), block loops unrolled at most 4
#           times, the earlier limit (block_loop_max_rounds=4), 4 row-run blocks per SM
#           (column_phase_sm_threads=1024), row runs in blocks of 128 threads (6 a SM), and 8 of
#           them a SM; the row runs walking rows loading each row's points a row ahead
#           (prefetch_next_row=1), with 3 and with 4 blocks a SM; buffer sets captured at first
#           sight (SHEAF_CUDA_CAPTURE=1);
#           cuDNN's plans built without the driver's JIT cache (CUDA_CACHE_DISABLE=1), forward and
#           backward on two threads and one after the other (SHEAF_CUDNN_SERIAL_BUILD=1), and
#           from engines that compile nothing at run time (SHEAF_CUDNN_ENGINES=precompiled);
#           and 40 steps (the replayed steady state); first, second and mean step, cuDNN's
#           preparation, where a first step goes before the GPU runs (traces, the builds by
#           phase, first calls' host time, device allocations)                 → ab.txt
#   ncu     Nsight Compute on the two layer-norm backward row runs and the loss's row run of one
#           step (or the kernels of $NCU_KERNELS, a regex), then on the two row runs loading a row
#           ahead (prefetch_next_row=1): duration, throughput, occupancy, warp stalls → ncu.txt
# OpenBLAS: where the machine has none, .gpu/lib's copy serves the CPU columns (LD_LIBRARY_PATH of
# the sheaf and unit_tests processes only).
# usage: bash scripts/gpu_check.sh smoke tests run bench sanitize profile ab ncu   (any of them, in any order)
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

BLAS_DIR=/tmp/gpu-lib
if ! ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0' && [ -f .gpu/lib/libopenblas.so.0.xz ]; then
  mkdir -p "$BLAS_DIR" && cp .gpu/lib/*.so.* "$BLAS_DIR"/ 2>/dev/null
  xz -dc .gpu/lib/libopenblas.so.0.xz >"$BLAS_DIR/libopenblas.so.0" 2>/dev/null ||
    python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' .gpu/lib/libopenblas.so.0.xz >"$BLAS_DIR/libopenblas.so.0"
fi
# runs a sheaf or unit_tests process with the carried OpenBLAS when it was unpacked
with_blas() { if [ -f "$BLAS_DIR/libopenblas.so.0" ]; then LD_LIBRARY_PATH="$BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; else "$@"; fi; }
export -f with_blas; export BLAS_DIR

machine() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  nproc; for c in c++ g++ clang++; do command -v $c >/dev/null && { $c --version | head -1; break; }; done
  ls /usr/local/cuda/lib64/libnvrtc.so* /usr/local/cuda/lib64/libcublasLt.so* 2>/dev/null | head -4
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available())' 2>&1 | tail -1
  [ -f "$BLAS_DIR/libopenblas.so.0" ] && echo "OpenBLAS: the carried copy ($BLAS_DIR)" || echo "OpenBLAS: the system's"
}

smoke() {
  {
    machine
    local programs=(
      '(print (+ (ones [4]) 1))'
      '(defn f [x y] (sum (* (@ x y) 2.0))) (print (f (ones [64 64]) (ones [64 64])))'
      '(defn g [x] (let [h (cast (@ (cast x :bf16) (cast x :bf16)) :f32)] (mean (tanh h)))) (print ((value-and-grad g) (random-normal 1 [128 128])))'
    )
    for p in "${programs[@]}"; do
      echo "===== sheaf --device cuda -c '$p'"
      timeout 60 "$SHEAF" --device cuda --jit-profile -c "$p" 2>&1 | tail -30
      echo "(exit ${PIPESTATUS[0]}; cpu: $(timeout 60 "$SHEAF" --device cpu -c "$p" 2>&1 | tail -3))"
    done
    local gpt=$PWD/bench/gpt2_gpu.shf tiny=(--d 64 --layers 2 --heads 2 --T 64 --B 2 --vocab 512 --steps 4)
    for cudnn in 1 0; do
      echo "===== tiny GPT-2, SHEAF_CUDNN=$cudnn"
      SHEAF_CUDNN=$cudnn timeout 120 "$SHEAF" --device cuda --jit-profile "$gpt" -- "${tiny[@]}" 2>&1 |
        grep -E "^loss|attention:|rror" | sed 's/.*\(attention: .*\)/\1/' | head -8
    done
    echo "===== tiny GPT-2 on the CPU"
    with_blas timeout 120 "$SHEAF" --device cpu "$gpt" -- "${tiny[@]}" 2>&1 | grep -E "^loss" | head -4
  } 2>&1 | tee "$OUT/machine.txt"
}

tests() {
  local filter=${GPU_TESTS:-'*gpu*:*Gpu*:Cuda.*:CudaDriver.*:CudaDevice.*:CudaAbi.*:Nvrtc.*:CudaCache.*:CudnnSdpa.*'}
  local logs=/tmp/gpu-logs; rm -rf "$logs"; mkdir -p "$logs"
  "$TESTS" --gtest_list_tests --gtest_filter="$filter" |
    awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}' >"$logs/tests.txt"
  echo "gpu_check: $(wc -l <"$logs/tests.txt") tests" | tee "$OUT/tests.log"
  local start=$SECONDS
  timeout "${TESTS_S:-240}" xargs -P "$(nproc)" -I{} bash -c \
    'with_blas timeout 120 "$1" --gtest_filter="$2" >"$3/$(echo "$2" | tr "/" "_").log" 2>&1 || echo "$2"' _ "$TESTS" {} "$logs" \
    <"$logs/tests.txt" >"$logs/failed.txt"
  local ran skipped; ran=$(ls "$logs" | grep -c '\.log$'); skipped=$(grep -l "\[  SKIPPED \]" "$logs"/*.log | wc -l)
  # each skip's reason: the line after gtest's "file:line: Skipped"
  grep -h -A1 ': Skipped$' "$logs"/*.log | grep -v -e ': Skipped$' -e '^--$' | sort | uniq -c | sort -rn >"$logs/skips.txt"
  {
    for t in $(cat "$logs/failed.txt"); do
      echo "===== FAILED $t"; tail -60 "$logs/$(echo "$t" | tr "/" "_").log"
    done | head -2000
    echo "skips:"; head -20 "$logs/skips.txt"
    echo "gpu_check: $(wc -l <"$logs/tests.txt") tests, $ran started, $(wc -l <"$logs/failed.txt") failed, $skipped skipped, $((SECONDS - start)) s"
  } >>"$OUT/tests.log"
  tar czf "$OUT/test-logs.tgz" -C /tmp gpu-logs
  sed 's/^/FAILED /' "$logs/failed.txt" | head -60
  tail -1 "$OUT/tests.log"
}

run() {
  for ex in examples/xor/train.shf examples/mlp/train.shf; do
    for dev in cuda cpu; do
      echo "===== $ex --device $dev"
      (cd "$(dirname "$ex")" && with_blas timeout 120 "$SHEAF" --device $dev --jit-profile "$(basename "$ex")") 2>&1 | tail -25
    done
  done >"$OUT/run.log" 2>&1
  grep -h -i -E "loss|accuracy|error|=====" "$OUT/run.log" | head -60
}

bench() {
  PYTHONUNBUFFERED=1 timeout "${BENCH_S:-540}" python3 bench/gpu.py --sheaf "$SHEAF" ${BENCH_ARGS:---steps 10 --rounds 1 --timeout 150 --own-attention --per-head --einsum} \
    --out "$OUT/gpu_results.md" 2>&1 | tee "$OUT/bench.log"
}

sanitize() {
  local cs; cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  local program=$PWD/bench/gpt2_gpu.shf tiny=(--d 64 --layers 2 --heads 2 --T 64 --B 2 --vocab 512 --steps 2)
  for tool in memcheck racecheck synccheck; do
    echo "===== compute-sanitizer --tool $tool: two steps of a tiny GPT-2"
    (cd /tmp; timeout 60 "$cs" --tool $tool --error-exitcode 9 "$SHEAF" --device cuda "$program" -- "${tiny[@]}" 2>&1 | tail -40
     exit "${PIPESTATUS[0]}")
    echo "(exit $?)"
  done >"$OUT/sanitize.log" 2>&1
  grep -E "=====|ERROR SUMMARY|exit" "$OUT/sanitize.log"
}

profile() {
  local dir=/tmp/gpu-profile; rm -rf "$dir"; mkdir -p "$dir/cuda"
  SHEAF_CUDA_PROFILE=1 SHEAF_DUMP_CUDA="$dir/cuda" timeout 200 "$SHEAF" --device cuda --jit-profile bench/gpt2_gpu.shf -- --steps 3 \
    >"$OUT/profile.txt" 2>&1
  grep -E "RESULT|cuda launch times|products .* kernels|attention" "$OUT/profile.txt" | grep -v "^step"
  # the own attention kernels instead of cuDNN's
  SHEAF_CUDNN=0 SHEAF_CUDA_PROFILE=1 timeout 150 "$SHEAF" --device cuda --jit-profile bench/gpt2_gpu.shf -- --steps 3 \
    >"$dir/profile_own_attention.txt" 2>&1
  grep -s -E "RESULT|products .* kernels" "$dir/profile_own_attention.txt"
  # the same with a point per thread and no unrolled loops (render.hpp: loads in flight)
  [ "${ONE_POINT:-0}" = 0 ] || SHEAF_CUDA_RENDER=points_per_thread=1 SHEAF_CUDA_PROFILE=1 timeout 150 "$SHEAF" --device cuda --jit-profile bench/gpt2_gpu.shf -- --steps 3 \
    >"$dir/profile_one_point.txt" 2>&1
  grep -s -E "RESULT" "$dir/profile_one_point.txt"
  tar czf "$OUT/cuda.tgz" -C "$dir" .
}

ab() {
  local dir=/tmp/gpu-ab; rm -rf "$dir"; mkdir -p "$dir" && cp bench/gpt2_gpu.shf "$dir"/
  one() {
    local name=$1 steps=$2; shift 2
    echo "===== $name: $steps steps $*"
    (cd "$dir" && env "$@" timeout 90 "$SHEAF" --device cuda --jit-profile gpt2_gpu.shf -- --steps "$steps") >"$dir/run.txt" 2>&1
    echo "(exit $?)"; grep -E "RESULT gpt2_(first|second|ms)|loss .* after [0-9]+ steps" "$dir/run.txt"
    grep -o -E "[0-9]+ captures \([0-9.]+ms on the host\), [0-9]+ replays, [0-9]+ later calls launch by launch \([0-9.]+ms on the host\)|attention: .*" "$dir/run.txt"
    # where a first step goes before the GPU runs: traces (their IR passes), builds by phase, first calls, allocations
    grep -o -E "[0-9]+ traces \([0-9.]+ms: IR passes [0-9.]+|[0-9]+ built \([^)]*\)|first calls [0-9.]+ms on the host|[0-9]+ device allocations \([0-9.]+ms\)" "$dir/run.txt"
  }
  {
    one cold 10; one as-is 10
    # the switches no GPU has measured yet first, in case the call's time runs out
    one row-loads-a-row-ahead 10 SHEAF_CUDA_RENDER=prefetch_next_row=1
    one row-loads-a-row-ahead-4-blocks-per-sm 10 SHEAF_CUDA_RENDER=prefetch_next_row=1,column_phase_sm_threads=1024
    one cudnn-uncached-two-threads 10 CUDA_CACHE_DISABLE=1
    one cudnn-uncached-precompiled-engines 10 CUDA_CACHE_DISABLE=1 SHEAF_CUDNN_ENGINES=precompiled
    one row-values-in-memory 10 SHEAF_CUDA_RENDER=hold_row_values=0
    one row-points-in-memory 10 SHEAF_CUDA_RENDER=hold_row_points=0
    one row-loads-point-by-point 10 SHEAF_CUDA_RENDER=row_slot_loads_first=0
    one row-loads-no-prefetch 10 SHEAF_CUDA_RENDER=prefetch_row_registers=0
    one row-runs-as-before 10 SHEAF_CUDA_RENDER=hold_row_points=0,row_slot_loads_first=0,prefetch_row_registers=0
    one no-unroll-over-9-byte-points 10 SHEAF_CUDA_RENDER=unroll_max_round_bytes=17
    one block-loops-4-rounds 10 SHEAF_CUDA_RENDER=block_loop_max_rounds=4
    one row-runs-4-blocks-per-sm 10 SHEAF_CUDA_RENDER=column_phase_sm_threads=1024
    one row-runs-blocks-of-128 10 SHEAF_CUDA_RENDER=block=128,column_phase_max_sums=32
    one row-runs-8-blocks-of-128-per-sm 10 SHEAF_CUDA_RENDER=block=128,column_phase_max_sums=32,column_phase_sm_threads=1024
    one capture-at-first-sight 10 SHEAF_CUDA_CAPTURE=1
    one cudnn-uncached-one-thread 10 CUDA_CACHE_DISABLE=1 SHEAF_CUDNN_SERIAL_BUILD=1
    one as-is-again 10; one steady 40
  } 2>&1 | tee "$OUT/ab.txt"
}

ncu_phase() {
  local ncu; ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { echo "gpu_check: no ncu here"; return; }
  # --clock-control none: the card's clocks are left as they are (the device tool's rule)
  profile() {  # kernels regex, launches, then the environment
    local kernels=$1 count=$2; shift 2
    (cd /tmp && env "$@" timeout 120 "$ncu" --clock-control none --kernel-name "regex:$kernels" --launch-skip 0 --launch-count "$count" \
       --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
       "$SHEAF" --device cuda "$OLDPWD/bench/gpt2_gpu.shf" -- --steps 1) 2>&1
    echo "(exit $?)"
  }
  {
    echo "===== as is"; profile "${NCU_KERNELS:-^s(284|315|325)\$}" 3
    echo "===== the layer-norm backward row runs loading a row ahead (SHEAF_CUDA_RENDER=prefetch_next_row=1)"
    profile '^s(315|325)$' 2 SHEAF_CUDA_RENDER=prefetch_next_row=1
  } >"$OUT/ncu.txt"
  grep -E "^=====|^\(exit|^  s[0-9]+|Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit Registers|Warp Cycles Per Issued|stalled" "$OUT/ncu.txt" | head -60
}

for phase in "$@"; do
  case $phase in
    smoke | tests | run | bench | sanitize | profile | ab) echo "== gpu_check $phase ($(date +%T))"; $phase ;;
    ncu) echo "== gpu_check ncu ($(date +%T))"; ncu_phase ;;
    *) echo "gpu_check: unknown phase $phase (smoke, tests, run, bench, sanitize, profile, ab or ncu)"; exit 2 ;;
  esac
done
