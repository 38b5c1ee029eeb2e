// tests/unit/backend_test.cpp — the Backend interface (backend/backend.hpp). Every backend a device
// name stands for (ref, cpu; cuda on the emulated GPU) compiles one traced graph and runs it to the
// reference executor's results, and names itself; the backend of no device asked for
// (switching_once) asks for another exactly once, at its first compile, and then is that one.
#include "backend/backend.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/toolchain.hpp"
#include "backend/cuda/allocator.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/ref/executor.hpp"
#include "backend/ref_backend.hpp"
#include "cuda_emulator.hpp"
#include "eval/interp.hpp"
#include "passes/pipeline.hpp"
#include "runtime/device_choice.hpp"
#include "runtime/jit.hpp"
#include "trace/tracer.hpp"
#include "value_compare.hpp"

namespace sheaf {
namespace {

constexpr double kNativeTolerance = 20;  // as cpu_backend_test.cpp

// f traced on x: [4 3], w: [3 5] and optimised, with its flattened inputs.
struct Traced {
  std::ostringstream out;
  Interp in{out};
  ir::Graph graph;
  std::vector<Tensor> inputs;
  Traced() {
    in.run_text("(defn f [x w] [(tanh (+ (@ x w) 1.0)) (sum (* x x) :axis 0)])"
                "(def x (random-normal 1 [4 3])) (def w (random-normal 2 [3 5]))",
                "f.shf");
    std::vector<Value> args = {in.run_text("x", "f.shf"), in.run_text("w", "f.shf")};
    trace::Traced t = trace::trace_call(in, in.run_text("f", "f.shf"), args, SrcLoc{}, false);
    passes::optimize(t.graph);
    graph = std::move(t.graph);
    std::string key;
    trace::flatten_args(args, false, key, inputs);
  }
};

// "" when `backend` compiles and runs `t` to the reference executor's results.
std::string runs_alike(Backend& backend, const Traced& t) {
  const std::string name = "f";
  CompileContext context{name, "key", "", [] { return std::string(32, '0'); }, [] { return std::string(32, '0'); }};
  std::unique_ptr<CompiledGraph> compiled = backend.compile(t.graph, context);
  std::vector<Tensor> got = compiled->run(t.inputs, false), want = ref::run(t.graph, t.inputs);
  if (got.size() != want.size()) return "results: " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  std::string d;
  for (size_t i = 0; i < want.size() && d.empty(); ++i)
    d = testing_support::difference(Value::tensor(got[i]), Value::tensor(want[i]), "result " + std::to_string(i), kNativeTolerance);
  return d;
}

TEST(Backend, EveryDeviceNameCompilesAndRunsAlike) {
  Traced t;
  for (const char* device : {"ref", "cpu"}) {
    Jit& jit = *jit_of(t.in);
    choose_device(jit, device);
    EXPECT_EQ(jit.backend->name(), device);
    EXPECT_EQ(runs_alike(*jit.backend, t), "") << device;
  }
  if (!cpu::toolchain()) return;  // generated C++ (the CPU backend's, the emulated GPU's kernels)
  const cpu::CpuStats& cpu = static_cast<const cpu::CpuBackend&>(*jit_of(t.in)->backend).stats();
  EXPECT_EQ(cpu.built + cpu.loaded, 1u) << "the cpu run was native code";
  EXPECT_EQ(cpu.ref_runs, 0u);
  cuda::CudaBackend gpu(std::make_shared<cuda::Allocator>(testing_support::emulated_device()));
  EXPECT_EQ(gpu.name(), "cuda");
  EXPECT_EQ(runs_alike(gpu, t), "");
  EXPECT_EQ(gpu.stats().built, 1u);
  EXPECT_EQ(gpu.stats().run.calls, 1u);
  // where the build and the first call went (the --jit-profile line): its phases add up to at
  // most the build, the kernels' rendering and loading among them; the call's buffers came from
  // the device
  const cuda::BuildTimes& b = gpu.stats().build;
  EXPECT_GT(b.kernels, 0.0);
  EXPECT_LE(b.passes + b.fusion + b.kernels + b.setup, gpu.stats().build_s);
  EXPECT_GT(gpu.stats().run.first_calls_s, 0.0);
  std::ostringstream report;
  gpu.report(report, 0);
  EXPECT_NE(report.str().find("1 built ("), std::string::npos) << report.str();
  EXPECT_NE(report.str().find(" device allocations ("), std::string::npos) << report.str();
}

// The reference executor under another name, counting its compiles.
struct Counting final : Backend {
  std::string label;
  int* compiles;
  Counting(std::string l, int* c) : label(std::move(l)), compiles(c) {}
  std::string_view name() const override { return label; }
  std::unique_ptr<CompiledGraph> compile(const ir::Graph& g, const CompileContext& c) override {
    ++*compiles;
    return RefBackend().compile(g, c);
  }
  BufferCounts buffers(uint64_t inputs) const override { return {inputs, 7}; }
  void report(std::ostream& os, double) const override { os << label << "\n"; }
};

TEST(Backend, NoDeviceSwitchesOnceAtTheFirstCompile) {
  Traced t;
  for (bool found : {true, false}) {
    int asked = 0, first = 0, second = 0;
    std::unique_ptr<Backend> b = switching_once(std::make_unique<Counting>("first", &first), [&]() -> std::unique_ptr<Backend> {
      ++asked;
      return found ? std::make_unique<Counting>("second", &second) : nullptr;
    });
    EXPECT_EQ(b->name(), "first");
    EXPECT_EQ(asked, 0) << "nothing is asked before the first compile";
    EXPECT_EQ(runs_alike(*b, t), "");
    EXPECT_EQ(runs_alike(*b, t), "");
    EXPECT_EQ(asked, 1);
    EXPECT_EQ(b->name(), found ? "second" : "first");
    EXPECT_EQ(first, found ? 0 : 2);
    EXPECT_EQ(second, found ? 2 : 0);
    std::ostringstream report;
    b->report(report, 0);
    EXPECT_EQ(report.str(), found ? "second\n" : "first\n");
    EXPECT_EQ(b->buffers(3).misses, 7u);
  }
}

}  // namespace
}  // namespace sheaf
