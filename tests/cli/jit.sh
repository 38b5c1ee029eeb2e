#!/usr/bin/env bash
# tests/cli/jit.sh — automatic compilation and `sheaf build` from the command line (SPEC §6, §8):
# errors in compiled functions point at the user's form, --jit-profile names every fallback and its
# reason, --no-jit gives the same output, and `sheaf build` handles shapes, effects, missing tools
# and bad outputs with clear messages.
# Usage: jit.sh path/to/sheaf — runs every check, then exits 1 if any failed.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
source "$(dirname "$0")/lib/harness.sh"

# ---- a shape error inside a compiled function is reported at the user's form ----
cat >"$TMP/shape.shf" <<'SHF'
(defn layer [w x]
  (@ x w))
(layer (ones [3 5]) (ones [4 2]))
SHF
run shape.shf
status_is 1 'shape error in a compiled function'
stderr_has 'shape.shf:2:3' 'the error points at the (@ x w) form'
stderr_has 'f32[4x2]' 'the error names the shapes'
stderr_has 'f32[3x5]' 'the error names the shapes'
stderr_has 'in layer' 'the error names the function'

# ---- --jit-profile: compiled calls, cache hits, fallbacks with reasons ----
cat >"$TMP/profile.shf" <<'SHF'
(defn step [w x] (- w (* 0.1 (@ (transpose x) (@ x w)))))
(defn noisy [x] (print "sum" (sum x)) x)
(def w (repeat [i 5] [w (ones [3 1])] (step w (ones [4 3]))))
(noisy w)
(print (step w (ones [4 3])))
SHF
run profile.shf --jit-profile
status_is 0 '--jit-profile run'
stderr_has 'Dispatch profile (' '--jit-profile header'
stderr_has 'executables: 5 hits, 2 misses' 'one trace of step, reused'
stderr_has "interpreted noisy: calls 'print', which has effects" 'effect fallback reason'
stderr_has 'f32 products: ' '--jit-profile says what f32 products run on'
stderr_has 'generated code: ' '--jit-profile says how the generated C++ is compiled'
stderr_has 'cpu time in 6 compiled calls: ' '--jit-profile splits the compiled calls'"'"' time into products, loops and host steps'
# products by shape: a transposed operand is marked, the threads, calls and rate per shape; a
# batch of small products runs in parts on both threads
cat >"$TMP/products.shf" <<'SHF'
(defn prod [a b] (@ (transpose a) b))
(defn heads [q k] (einsum "n t d, n s d -> n t s" q k))
(def a (ones [64 48]))
(repeat [i 3] [c nil] (prod a (ones [64 80])))
(heads (ones [8 64 48]) (ones [8 64 48]))
SHF
SHEAF_NUM_THREADS=2 run products.shf --jit-profile
status_is 0 '--jit-profile with products'
stderr_has 'products by shape (2 of 2, by time):' '--jit-profile lists the products by shape'
stderr_has '(64×48)ᵀ · 64×80 ' 'a shape: aᵀ·b'
stderr_has ' 3 calls ' 'the shape'"'"'s calls'
grep -qE '8×\(64×48 · \(64×48\)ᵀ\) +2 threads +1 calls' "$TMP/err" || fail 'a batch of 8 products on 2 threads'
# the table goes on past the eight slowest shapes until it holds 95 % of the products' time: of
# ten shapes of about equal cost, the top eight take about 80 % (on one thread: OpenBLAS's second
# thread, asleep while g++ compiles the next shape, costs a product this small milliseconds to wake)
cat >"$TMP/shapes.shf" <<'SHF'
(defn prod [a b] (@ a b))
(def a (ones [96 96]))
(repeat [i 30] [c nil] (prod a (ones [96 (+ 90 (mod i 10))])))
SHF
SHEAF_NUM_THREADS=1 run shapes.shf --jit-profile
grep -qE 'products by shape \((9|10) of 10, by time\)' "$TMP/err" || fail 'the shapes that take 95 % of the products'"'"' time'
# loops on the loop threads by time: each names its step's function, space and ops, its calls
# and the GB/s of one pass over its operands and results, and their bytes: the tanh loop reads
# and writes 4 MiB
cat >"$TMP/loops.shf" <<'SHF'
(defn act [x] (tanh (* x 2.0)))
(def x (ones [1024 1024]))
(repeat [i 3] [y nil] (act x))
SHF
SHEAF_NUM_THREADS=2 run loops.shf --jit-profile
status_is 0 '--jit-profile with loops'
stderr_has 'loops on the loop threads: ' '--jit-profile times the loops on the loop threads'
grep -qE '^    s[0-9]+ f32\[1024x1024\] mul·tanh +3 calls +[0-9.]+ms +[0-9.]+ GB/s over 8\.4 MB$' "$TMP/err" ||
  fail 'a loop: its function, space, ops, calls, GB/s and the bytes of one pass (8.4 MB)'
# attention and its gradient are steps of their own (backend/cpu/attention_code.hpp), timed apart
# from the products and named in the loop table
cat >"$TMP/attention.shf" <<'SHF'
(def p {:q (random-normal 1 [4 64 16]) :k (random-normal 2 [4 64 16]) :v (random-normal 3 [4 64 16])})
(def w (random-normal 4 [4 64 16]))
(def mask (== (tril (ones [64 64])) 1.0))
(defn loss [p]
  (sum (* (@ (softmax (where mask (* (@ (get p :q) (transpose (get p :k) [0 2 1])) 0.25) -1e9) :axis -1) (get p :v)) w)))
(repeat [i 2] [g nil] ((value-and-grad loss) p))
SHF
SHEAF_NUM_THREADS=2 run attention.shf --jit-profile
status_is 0 '--jit-profile with attention'
grep -qE ' \+ attention [0-9.]+ms \([0-9]+%; 4 steps, 0\.01 GFLOP\) \+ loops and copies ' "$TMP/err" || fail 'the attention steps'"'"' time, count and GFLOP'
grep -qE '^    s[0-9]+ f32\[4x64x64\] attention gradient +2 calls ' "$TMP/err" || fail 'an attention gradient step in the loop table'
# the generated code uses the host's vector ISA, spelled out (toolchain.hpp: isa_flags)
if grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
  stderr_has '-mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512cd -mprefer-vector-width=512' 'AVX-512 hosts: 512-bit vectors'
elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  stderr_has '-mavx2 -mfma -mf16c' 'AVX2 hosts: AVX2 and FMA'
fi
# a masked select (softmax's normalisation and its gradient under a causal mask) vectorises: under
# GCC's default -ftrapping-math the product sinks into the select's branch and the loop stays
# scalar (toolchain.hpp). Asked of GCC itself, with the flags --jit-profile reports.
cat >"$TMP/masked.shf" <<'SHF'
(defn f [x y m] (* (where m (* x y) 0.0) 0.125))
(def x (ones [64 128]))
(f x x (== (tril (ones [64 128])) 1.0))
SHF
SHEAF_DUMP_CPP="$TMP" run masked.shf --jit-profile
status_is 0 'a masked select compiles'
[[ -f $TMP/f.cpp ]] || fail 'SHEAF_DUMP_CPP writes the unit of f'
cxx_line=$(grep -o 'generated code: .*' "$TMP/err")  # "generated code: <compiler's identity> -<flags>"
if c++ --version 2>/dev/null | grep -q 'Free Software Foundation' && [[ -f $TMP/f.cpp ]]; then
  # shellcheck disable=SC2086 # the flags are words
  c++ -${cxx_line#* -} -fopt-info-vec-all -c "$TMP/f.cpp" -o /dev/null >"$TMP/vec" 2>&1
  grep -q 'optimized: loop vectorized' "$TMP/vec" && ! grep -q 'control flow in loop' "$TMP/vec" ||
    fail "the masked select's loop is vectorised ($(grep -m1 'not vectorized' "$TMP/vec"))"
fi
# the BLAS: the OpenBLAS the build ships beside the binary first (src/tensor/blas.cpp), $SHEAF_BLAS
# before it; a library that is not there is skipped
if [[ -f "$(dirname "$SHEAF")/libscipy_openblas.so" ]]; then
  stderr_has '(libscipy_openblas.so, beside the binary)' 'the shipped OpenBLAS is used'
  (cd "$TMP" && SHEAF_BLAS=/nonexistent/libblas.so "$SHEAF" profile.shf --jit-profile >"$TMP/out" 2>"$TMP/err" </dev/null)
  stderr_has '(libscipy_openblas.so, beside the binary)' 'a $SHEAF_BLAS that is not there is skipped'
fi
if [[ -f /usr/lib/x86_64-linux-gnu/libopenblas.so.0 ]]; then
  (cd "$TMP" && SHEAF_BLAS=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 "$SHEAF" profile.shf --jit-profile >"$TMP/out" 2>"$TMP/err" </dev/null)
  stderr_has '(libopenblas.so.0, $SHEAF_BLAS)' '$SHEAF_BLAS comes first'
  # A core set in the environment is kept (some machines set one for every process; the test
  # leaves it as it is); otherwise such a library gets the SkylakeX core on AVX-512.
  if [[ -n ${OPENBLAS_CORETYPE:-} ]]; then
    grep -qiF -- "$OPENBLAS_CORETYPE (libopenblas.so.0" "$TMP/err" ||
      fail "the environment's OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE is kept: stderr lacks it"
  elif grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo; then
    stderr_has 'SkylakeX (libopenblas.so.0' 'an OpenBLAS other than the shipped one gets the SkylakeX core on AVX-512'
  fi
fi
# BLAS threads: SHEAF_NUM_THREADS (a fixed count), else one per core this process may use (its
# affinity mask, which `nproc` counts, when no cgroup quota caps it), shared among the ranks on
# the machine, and fewer while other processes keep those cores busy
blas_run() {
  (cd "$TMP" && env -u SHEAF_NUM_THREADS -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS -u OMPI_COMM_WORLD_LOCAL_SIZE \
    -u MPI_LOCALNRANKS -u SLURM_NTASKS_PER_NODE "$@" "$SHEAF" profile.shf --jit-profile >"$TMP/out" 2>"$TMP/err" </dev/null)
}
quota=$(cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null | grep -oE '^[0-9]+' | head -1)
blas_run
if grep -qF 'f32 products: OpenBLAS' "$TMP/err"; then
  if [[ -z $quota ]]; then
    cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
    [[ $cores -eq 1 ]] && want='1 thread' || want="$cores threads \\(fewer while other processes keep its cores busy\\)"
    grep -qE ", $want\$" "$TMP/err" || fail "OpenBLAS uses the $cores usable cores by default, fewer under load"
  fi
  blas_run SHEAF_NUM_THREADS=3
  grep -qE ', 3 threads$' "$TMP/err" || fail 'SHEAF_NUM_THREADS=3 gives 3 BLAS threads'
  if command -v taskset >/dev/null; then
    blas_run taskset -c "$(taskset -cp $$ | grep -oE '[0-9]+' | tail -1)"
    grep -qE ', 1 thread$' "$TMP/err" || fail 'a process bound to one CPU uses one BLAS thread'
  fi
  blas_run OMPI_COMM_WORLD_LOCAL_SIZE=4096
  grep -qE ', 1 thread$' "$TMP/err" || fail '4096 ranks on this machine: one BLAS thread each'
fi
# ---- the device: --device, else $SHEAF_DEVICE, else cuda where a GPU is usable and cpu elsewhere ----
device_run() {  # [VAR=value ...] [sheaf flags ...]
  local envs=()
  while [[ $# -gt 0 && $1 == *=* ]]; do envs+=("$1"); shift; done
  (cd "$TMP" && env -u SHEAF_DEVICE "${envs[@]}" "$SHEAF" profile.shf --jit-profile "$@" >"$TMP/out" 2>"$TMP/err" </dev/null)
}
device_run
if ldconfig -p 2>/dev/null | grep -qF 'libcuda.so.1'; then
  grep -qE '^  (cpu|cuda) backend: ' "$TMP/err" || fail 'no --device: the cpu or the cuda backend'
else
  grep -qF '  cpu backend: ' "$TMP/err" || fail 'no --device and no CUDA driver: the cpu backend'
fi
device_run SHEAF_DEVICE=ref
grep -qE '^  (cpu|cuda) backend: ' "$TMP/err" && fail 'SHEAF_DEVICE=ref: the reference executor, no backend'
device_run SHEAF_DEVICE=ref --device cpu
grep -qF '  cpu backend: ' "$TMP/err" || fail '--device wins over SHEAF_DEVICE'
device_run SHEAF_DEVICE=tpu
grep -qF 'tpu not in {cpu,ref,cuda}' "$TMP/err" || fail 'SHEAF_DEVICE=tpu is an error naming the devices'

run profile.shf --jit-profile
cp "$TMP/out" "$TMP/jit.out"

# ---- typed parameters compile and differentiate like untyped ones; a call with a wrong shape stops
# before dispatch (and the check also runs while tracing, where shapes are static) ----
cat >"$TMP/typed.shf" <<'SHF'
(defparams Linear {:W [3 1] :b [1]})
(defn loss [(p :as Linear) (x [n 3])] (with-params [p] (mean (+ (@ x W) b))))
(defn train [(p :as Linear) (x [n 3])]
  (let [[l g] ((value-and-grad loss) p x)] (sgd-step p g 0.5)))
(def p (repeat [i 3] [p {:W (ones [3 1]) :b (zeros [1])}] (train p (ones [4 3]))))
(print (get p :b))
(train p (ones [4 2]))
SHF
run typed.shf --jit-profile
status_is 1 'typed function called with a wrong shape'
stdout_has '[-1.5]' 'three compiled steps of a typed function'
stderr_has 'train: parameter x expects shape [n 3], got [4 2]' 'the shape check of a compiled function'
stderr_has 'typed.shf:7:1' 'the error is located at the call'
stderr_has 'executables: 2 hits, 1 misses; 1 traces' 'train compiled once and reused; the bad call is not traced'
stderr_has '; 0 interpreted calls' 'nothing fell back to the interpreter'
run profile.shf --no-jit
cmp -s "$TMP/out" "$TMP/jit.out" || fail '--no-jit prints the same as the compiled run'

# ---- sheaf build ----
run build profile.shf -S -o out.mlir --config '{"w":[3,1],"x":[4,3]}'
status_is 0 'build -S'
grep -qF '"stablehlo.dot_general"' "$TMP/out.mlir" || fail 'build -S writes a StableHLO module'
grep -qF 'sym_name = "step"' "$TMP/out.mlir" || fail 'the module has the function step'
grep -qF '"hash"' "$TMP/out.mlir.manifest.json" || fail 'the manifest has content hashes'
stderr_has "warning: 'noisy' has side effects (print, io) and cannot be compiled" 'effects are skipped with a warning'
# an output that is a named pipe (or /dev/null) is written into, never renamed over
mkfifo "$TMP/pipe"
timeout 20 cat "$TMP/pipe" >"$TMP/piped.mlir" &
run build profile.shf -S -o pipe --config '{"w":[3,1],"x":[4,3]}'
status_is 0 'build -S into a named pipe'
wait
[[ -p $TMP/pipe ]] || fail 'the named pipe is still a pipe after build -o pipe'
grep -qF 'sym_name = "step"' "$TMP/piped.mlir" || fail 'the module went through the pipe'
[[ ! -e $TMP/pipe.manifest.json ]] || fail 'no manifest beside a pipe'
run build profile.shf -S -o none.mlir
status_is 1 'build without shapes'
stderr_has 'nothing could be compiled' 'build without shapes'
run build profile.shf -o out.so --config '{"w":[3,1],"x":[4,3]}'
status_is 1 'build to an unknown format'
stderr_has '.vmfb' 'the error names the supported outputs'
(cd "$TMP" && NO_COLOR=1 PATH=/nonexistent IREE_COMPILE= "$SHEAF" build profile.shf -o out.vmfb --config '{"w":[3,1],"x":[4,3]}' \
  >"$TMP/out" 2>"$TMP/err" </dev/null)
STATUS=$?
status_is 1 'build .vmfb without iree-compile'
stderr_has "needs IREE's iree-compile" 'a clear error when IREE is absent'
run build profile.shf --trace-with --ir -o traced.ir
status_is 0 'build --trace-with'
grep -qF 'func @step(%0: f32[3x1], %1: f32[4x3])' "$TMP/traced.ir" || fail '--trace-with records the shapes of the first call'
run build profile.shf -o out.mlir --bogus
status_is 2 'unknown build option'

# ---- a guard form in an exported function: dropped with a warning, not an extra result ----
cat >"$TMP/guarded.shf" <<'SHF'
(defn f [x] (sum (guard :no-nan (log x))))
SHF
run build guarded.shf -S -o guarded.mlir --config '{"x":[3]}'
status_is 0 'build of a guarded function'
stderr_has "warning: the guards in 'f' are not checked by the compiled module" 'guards are dropped with a warning'
grep -qF 'function_type = (tensor<3xf32>) -> tensor<f32>,' "$TMP/guarded.mlir" || fail 'the module returns only the sum'

exit $FAILED
