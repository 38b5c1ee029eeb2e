// bench/dispatch_bench.cpp — host overhead of calling a cached compiled function (Google Benchmark).
// XOR forward (x f32[4x2], a 2-8-1 MLP with tanh and sigmoid) is called through the interpreter
// compiled and cached (specialization-key lookup, flattening, the executable, result rebuild) on
// the CPU backend and on the reference executor; the same executables run directly (no
// interpreter); and interpreted (--no-jit). Dispatch overhead = compiled call − executable alone.
#include <benchmark/benchmark.h>

#include <sstream>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/program.hpp"
#include "backend/ref/executor.hpp"
#include "builtins/init_runtime.hpp"
#include "eval/interp.hpp"
#include "io/scratch_dir.hpp"
#include "passes/passes.hpp"
#include "runtime/device_choice.hpp"
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
  explicit Fixture(bool jit, const char* device = "ref") {
    if (!jit) in.jit.reset();
    else sheaf::choose_device(*jit_of(in), device);
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

void compiled_call(benchmark::State& st, const char* device) {
  Fixture f(true, device);
  f.call();  // trace, build and cache
  for (auto _ : st) benchmark::DoNotOptimize(f.call());
  st.counters["traces"] = static_cast<double>(jit_of(f.in)->stats().traces);
  if (auto* cpu = dynamic_cast<const sheaf::cpu::CpuBackend*>(jit_of(f.in)->backend.get()))
    st.counters["native"] = static_cast<double>(cpu->stats().built + cpu->stats().loaded);
}
void BM_CompiledCallCpu(benchmark::State& st) { compiled_call(st, "cpu"); }
void BM_CompiledCallRef(benchmark::State& st) { compiled_call(st, "ref"); }
BENCHMARK(BM_CompiledCallCpu);
BENCHMARK(BM_CompiledCallRef);

// The traced, optimised graph of forward and its flattened inputs.
struct Traced {
  sheaf::ir::Graph graph;
  std::vector<sheaf::Tensor> inputs;
  explicit Traced(Fixture& f) {
    sheaf::Value args[] = {f.p, f.x};
    graph = sheaf::trace::trace_call(f.in, f.fn, args, {}, false).graph;
    sheaf::passes::optimize(graph);
    std::string key;
    sheaf::trace::flatten_args(args, false, key, inputs);
  }
};

void BM_NativeOnly(benchmark::State& st) {
  Fixture f(true);
  Traced t(f);
  const auto& tc = sheaf::cpu::toolchain();
  if (!tc) return st.SkipWithError("no C++ compiler");
  sheaf::cpu::Prepared p = sheaf::cpu::prepare(t.graph);
  std::string so = sheaf::scratch_path(".so");
  sheaf::cpu::compile_shared_object(*tc, p.source.text, so);
  sheaf::cpu::Loaded lib = sheaf::cpu::load_shared_object(so, p.source.digest);
  sheaf::cpu::Program prog(std::move(p), lib);
  for (auto _ : st) benchmark::DoNotOptimize(prog.run(t.inputs));
}
BENCHMARK(BM_NativeOnly);

void BM_RefExecutableOnly(benchmark::State& st) {
  Fixture f(true);
  sheaf::Value args[] = {f.p, f.x};
  sheaf::trace::Traced t = sheaf::trace::trace_call(f.in, f.fn, args, {}, false);
  sheaf::ref::Plan plan = sheaf::ref::plan(t.graph);
  std::string key;
  std::vector<sheaf::Tensor> inputs;
  sheaf::trace::flatten_args(args, false, key, inputs);
  for (auto _ : st) benchmark::DoNotOptimize(sheaf::ref::run(t.graph, plan, inputs));
}
BENCHMARK(BM_RefExecutableOnly);

void BM_Interpreted(benchmark::State& st) {
  Fixture f(false);
  for (auto _ : st) benchmark::DoNotOptimize(f.call());
}
BENCHMARK(BM_Interpreted);

}  // namespace

int main(int argc, char** argv) {
  sheaf::init_runtime();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
