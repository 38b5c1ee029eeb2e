// bench/dispatch_bench.cpp — host overhead of calling a cached compiled function (Google Benchmark).
// XOR forward (x f32[4x2], a 2-8-1 MLP with tanh and sigmoid) is called through the interpreter
// three ways: compiled and cached (trace once, then specialization-key lookup, flattening, the
// reference executor, result rebuild), the same executable run directly (kernels only), and
// interpreted (--no-jit). Dispatch overhead = compiled call − executable alone.
#include <benchmark/benchmark.h>

#include <sstream>

#include "backend/ref/executor.hpp"
#include "eval/interp.hpp"
#include "runtime/jit.hpp"
#include "trace/tracer.hpp"

namespace {

constexpr const char* kProgram = R"(
(def params {:l1 {:W (random-normal 1 [2 8]) :b (zeros [8])}
             :l2 {:W (random-normal 2 [8 1]) :b (zeros [1])}})
(def x [[0 0] [0 1] [1 0] [1 1]])
(defn forward [p x]
  (sigmoid (+ (@ (tanh (+ (@ x (get p :l1 :W)) (get p :l1 :b))) (get p :l2 :W)) (get p :l2 :b))))
)";

struct Fixture {
  std::ostringstream out;
  sheaf::Interp in{out};
  sheaf::Value fn, p, x;
  explicit Fixture(bool jit) {
    if (!jit) in.jit.reset();
    in.run_text(kProgram, "<bench>");
    fn = in.run_text("forward", "<bench>");
    p = in.run_text("params", "<bench>");
    x = in.run_text("x", "<bench>");
  }
  sheaf::Value call() {
    sheaf::Value args[] = {p, x};
    return in.call(fn, args, {});
  }
};

void BM_CompiledCall(benchmark::State& st) {
  Fixture f(true);
  f.call();  // trace and cache
  for (auto _ : st) benchmark::DoNotOptimize(f.call());
  st.counters["traces"] = static_cast<double>(f.in.jit->stats().traces);
}
BENCHMARK(BM_CompiledCall);

void BM_ExecutableOnly(benchmark::State& st) {
  Fixture f(true);
  sheaf::Value args[] = {f.p, f.x};
  sheaf::trace::Traced t = sheaf::trace::trace_call(f.in, f.fn, args, {}, false);
  sheaf::ref::Plan plan = sheaf::ref::plan(t.graph);
  std::string key;
  std::vector<sheaf::Tensor> inputs;
  sheaf::trace::flatten_args(args, false, key, inputs);
  for (auto _ : st) benchmark::DoNotOptimize(sheaf::ref::run(t.graph, plan, inputs));
}
BENCHMARK(BM_ExecutableOnly);

void BM_Interpreted(benchmark::State& st) {
  Fixture f(false);
  for (auto _ : st) benchmark::DoNotOptimize(f.call());
}
BENCHMARK(BM_Interpreted);

}  // namespace

BENCHMARK_MAIN();
