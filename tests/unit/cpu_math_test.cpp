// tests/unit/cpu_math_test.cpp — the CPU backend's own math functions in generated code, against
// the C library in double: tanh (sh_tanh, backend/cpu/render.cpp) within 2 ulp over a sweep of
// every 2000th float pattern up to |x| = 12 and its negation, exact at the special values (±0
// keep their sign, ±inf give ±1, NaN stays NaN, subnormals pass through) and on both sides of the
// branch point 0.625 and the argument clamp 10. Skipped, with a message, without a C++ compiler.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <sstream>

#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/toolchain.hpp"
#include "eval/interp.hpp"
#include "passes/pipeline.hpp"
#include "runtime/device_choice.hpp"
#include "runtime/jit.hpp"
#include "trace/tracer.hpp"

namespace sheaf {
namespace {

// `fn` (one f32 argument) compiled by the CPU backend and run on xs.
std::vector<float> run_on_cpu(const char* fn, const std::vector<float>& xs) {
  std::ostringstream out;
  Interp in{out};
  in.run_text(fn, "math.shf");
  Tensor x = Tensor::empty(DType::F32, {static_cast<int64_t>(xs.size())});
  std::memcpy(x.mutable_bytes(), xs.data(), xs.size() * sizeof(float));
  std::vector<Value> args = {Value::tensor(x)};
  trace::Traced t = trace::trace_call(in, in.run_text("f", "math.shf"), args, SrcLoc{}, false);
  passes::optimize(t.graph);
  Jit& jit = *jit_of(in);
  choose_device(jit, "cpu");
  CompileContext context{"f", "key", "", [] { return std::string(32, '0'); }, [] { return std::string(32, '0'); }};
  const std::vector<Tensor> inputs = {x};
  std::vector<Tensor> got = jit.backend->compile(t.graph, context)->run(inputs, false);
  // native code, not the reference executor's std::tanh
  const cpu::CpuStats& stats = static_cast<const cpu::CpuBackend&>(*jit.backend).stats();
  EXPECT_EQ(stats.built + stats.loaded, 1u);
  EXPECT_EQ(stats.ref_runs, 0u);
  std::vector<float> ys(xs.size());
  std::memcpy(ys.data(), got.at(0).bytes(), ys.size() * sizeof(float));
  return ys;
}

// |got − want| in units of the last place of want rounded to f32 (subnormal spacing below).
double ulps(float got, double want) {
  const float w = static_cast<float>(want);
  const double unit = w == 0 ? std::ldexp(1.0, -149) : std::max(std::ldexp(1.0, std::ilogb(w) - 23), std::ldexp(1.0, -149));
  return std::fabs(static_cast<double>(got) - want) / unit;
}

TEST(CpuMath, TanhWithinTwoUlpAndExactAtSpecialValues) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler";
  std::vector<float> xs;
  for (uint32_t bits = 0; bits <= std::bit_cast<uint32_t>(12.0f); bits += 2000) {
    xs.push_back(std::bit_cast<float>(bits));
    xs.push_back(-std::bit_cast<float>(bits));
  }
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, 1e-30f, 0.625f,
                            std::nextafter(0.625f, 0.0f), -0.625f, 10.0f, std::nextafter(10.0f, 0.0f), 20.0f, -1e30f};
  const size_t first_special = xs.size();
  xs.insert(xs.end(), std::begin(specials), std::end(specials));
  const std::vector<float> ys = run_on_cpu("(defn f [x] (tanh x))", xs);
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::tanh(static_cast<double>(xs[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(ys[i])) << "tanh(NaN) = " << ys[i];
      continue;
    }
    EXPECT_EQ(std::signbit(ys[i]), std::signbit(xs[i])) << "tanh(" << xs[i] << ") = " << ys[i];
    const double e = ulps(ys[i], want);
    if (i >= first_special) {
      EXPECT_LE(e, 1.0) << "tanh(" << xs[i] << ") = " << ys[i] << ", want " << want;
    }
    if (e > worst) {
      worst = e;
      worst_x = xs[i];
    }
  }
  EXPECT_LE(worst, 2.0) << "tanh(" << std::hexfloat << worst_x << ") is " << std::defaultfloat << worst << " ulp off";
}

}  // namespace
}  // namespace sheaf
