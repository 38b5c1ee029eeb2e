// tests/unit/stablehlo_test.cpp — the StableHLO emitter (emit/stablehlo.hpp).
// Text checks: the generic form, types, literals and the ops each IR op becomes. Oracle checks:
// hand-built graphs covering every IR op and dtype are emitted into one module per test,
// compiled with IREE's iree-compile (llvm-cpu), run with iree-run-module on the same random and
// edge-case inputs as the reference executor, and compared: exact for integers and bool, rtol
// 1e-5 for f32 (wider for f16/bf16). Inputs and outputs travel as raw little-endian .bin files.
// Without IREE (IREE_COMPILE / IREE_RUN_MODULE or PATH) the oracle checks are skipped. The temp
// directory (module, inputs, outputs) is kept when a check fails or SHEAF_KEEP_TEST_FILES is set.
#include "emit/stablehlo.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <type_traits>

#include "backend/ref/executor.hpp"
#include "base/error.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

namespace fs = std::filesystem;
using ir::Op;
using ir::Type;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- building graphs ----------------------------------------------------------------------

// A graph under construction with the inputs it will be run on.
struct Case {
  ir::Graph g;
  std::vector<Tensor> inputs;
  std::vector<std::string> labels;  // optional, one per result: what a mismatch message names

  explicit Case(std::string name) { g.name = std::move(name); }
  int32_t param(Tensor t) {
    ir::Attrs a;
    a.index = static_cast<int64_t>(inputs.size());
    Type ty{t.dtype(), t.shape()};
    inputs.push_back(std::move(t));
    return g.add(Op::Parameter, {}, a, {ty});
  }
  int32_t op(Op o, std::vector<int32_t> in, ir::Attrs a = {}) { return g.emit(o, std::move(in), a); }
  int32_t typed(Op o, std::vector<int32_t> in, ir::Attrs a, Type t) { return g.add(o, std::move(in), a, {t}); }
  void ret(std::vector<int32_t> r) { g.results = std::move(r); }
};

Tensor filled(DType d, Shape s, const std::vector<double>& v) {  // v repeated to fill
  Tensor t(d, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, v[static_cast<size_t>(i) % v.size()]);
  return t;
}

std::mt19937& rng() {
  static std::mt19937 r(1234);
  return r;
}

// Uniform in [lo, hi]; integral values when `step` > 0 (multiples of step).
Tensor uniform(DType d, Shape s, double lo, double hi, double step = 0) {
  Tensor t(d, std::move(s));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(rng());
    t.set(i, step > 0 ? std::round(v / step) * step : v);
  }
  return t;
}

Tensor bools(Shape s) { return uniform(DType::Bool, std::move(s), 0, 1, 1); }

// ---- the IREE oracle ----------------------------------------------------------------------

std::optional<std::string> find_tool(const char* env, const char* name) {
  if (const char* e = std::getenv(env); e && *e) return std::string(e);
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  for (std::string dir; std::getline(ss, dir, ':');) {
    fs::path p = fs::path(dir) / name;
    if (!dir.empty() && fs::exists(p) && !fs::is_directory(p)) return p.string();
  }
  return std::nullopt;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string iree_type(const Tensor& t) {  // "3x5xf32", "ui32", "i1"
  static constexpr const char* names[] = {"f32", "f16", "bf16", "i32", "ui32", "i1"};
  std::string s;
  for (int64_t d : t.shape()) s += std::to_string(d) + "x";
  return s + names[static_cast<size_t>(t.dtype())];
}

double tolerance(DType d) {
  switch (d) {
    case DType::F32: return 1e-5;
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    default: return 0;
  }
}

// Compares one result; returns a description of the first mismatches ("" when equal).
std::string compare(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return fmt::format("type {} vs expected {}", type_str(got), type_str(want));
  double rtol = tolerance(want.dtype()), atol = rtol * 0.1;
  std::string bad;
  int shown = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.get(i), e = want.get(i);
    bool ok = a == e || (std::isnan(a) && std::isnan(e)) || (rtol > 0 && std::fabs(a - e) <= atol + rtol * std::fabs(e));
    if (!ok && shown++ < 6) bad += fmt::format(" [{}] got {} want {};", i, a, e);
  }
  return bad;
}

class Oracle {
 public:
  // Emits every case into one module, compiles it, runs each function on its inputs with
  // iree-run-module and compares every result with ref::run.
  static void check(const std::vector<Case>& cases) {
    auto compile = find_tool("IREE_COMPILE", "iree-compile"), run = find_tool("IREE_RUN_MODULE", "iree-run-module");
    std::vector<const ir::Graph*> gs;
    for (const Case& c : cases) gs.push_back(&c.g);
    std::string text = emit::emit_stablehlo(gs);  // emitted (and verified) even without IREE
    if (!compile || !run) GTEST_SKIP() << "IREE (iree-compile, iree-run-module) not found: oracle check skipped";
    std::string tmpl = (fs::temp_directory_path() / "sheaf-stablehlo-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    fs::path dir = tmpl;
    std::ofstream(dir / "m.mlir") << text;
    std::string cmd = fmt::format("'{}' --iree-hal-target-backends=llvm-cpu --iree-llvmcpu-target-cpu=host '{}' -o '{}' > '{}' 2>&1", *compile,
                                  (dir / "m.mlir").string(), (dir / "m.vmfb").string(), (dir / "log").string());
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "iree-compile failed (module in " << dir << "):\n" << read_file(dir / "log");
    for (const Case& c : cases) run_case(*run, dir, c);
    if (::testing::Test::HasFailure() || std::getenv("SHEAF_KEEP_TEST_FILES")) std::cerr << "module and files kept in " << dir << "\n";
    else fs::remove_all(dir);
  }

 private:
  static void run_case(const std::string& run, const fs::path& dir, const Case& c) {
    std::string cmd = fmt::format("'{}' --module='{}' --function='{}'", run, (dir / "m.vmfb").string(), c.g.name);
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      fs::path p = dir / fmt::format("in{}.bin", i);
      std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(c.inputs[i].bytes()), static_cast<std::streamsize>(c.inputs[i].nbytes()));
      cmd += fmt::format(" --input={}=@'{}'", iree_type(c.inputs[i]), p.string());
    }
    for (size_t k = 0; k < c.g.results.size(); ++k) cmd += fmt::format(" --output=@'{}'", (dir / fmt::format("out{}.bin", k)).string());
    cmd += fmt::format(" > '{}' 2>&1", (dir / "log").string());
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "iree-run-module failed on " << c.g.name << ":\n" << read_file(dir / "log");
    std::vector<Tensor> want = ref::run(c.g, c.inputs);
    for (size_t k = 0; k < want.size(); ++k) {
      std::string bytes = read_file(dir / fmt::format("out{}.bin", k));
      Tensor got = Tensor::empty(want[k].dtype(), want[k].shape());
      ASSERT_EQ(bytes.size(), got.nbytes()) << c.g.name << " result " << k;
      std::memcpy(got.mutable_bytes(), bytes.data(), bytes.size());
      if (got.dtype() == DType::Bool)
        for (int64_t i = 0; i < got.numel(); ++i) got.set(i, bytes[static_cast<size_t>(i)] != 0);
      std::string diff = compare(got, want[k]);
      EXPECT_EQ(diff, "") << c.g.name << " result " << k << (k < c.labels.size() ? " " + c.labels[k] : "") << " ("
                          << type_str(want[k]) << ")\n"
                          << ir::print(c.g);
    }
  }
};

// ---- text ---------------------------------------------------------------------------------

std::string emit_one(const Case& c) { return emit::emit_stablehlo({&c.g}); }

TEST(StableHloText, GenericModuleWithOneFunctionPerGraph) {
  Case a("train-step"), b("loss");
  int32_t x = a.param(Tensor(DType::F32, {4, 2})), y = a.param(Tensor(DType::F32, {4, 2}));
  int32_t s = a.op(Op::Binary, {x, y}, {.binary = Binary::Add});
  a.ret({s, a.op(Op::Binary, {x, y}, {.binary = Binary::Lt})});
  b.ret({b.param(Tensor(DType::U32, {}))});
  std::string t = emit::emit_stablehlo({&a.g, &b.g});
  EXPECT_EQ(t.rfind("\"builtin.module\"() ({\n", 0), 0u) << t;
  EXPECT_NE(t.find("^bb0(%arg0: tensor<4x2xf32>, %arg1: tensor<4x2xf32>):"), std::string::npos) << t;
  EXPECT_NE(t.find("%0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>"), std::string::npos) << t;
  EXPECT_NE(t.find("comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>"),
            std::string::npos) << t;
  EXPECT_NE(t.find("\"func.return\"(%0, %1) : (tensor<4x2xf32>, tensor<4x2xi1>) -> ()"), std::string::npos) << t;
  EXPECT_NE(t.find("function_type = (tensor<4x2xf32>, tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xi1>), sym_name = \"train-step\""),
            std::string::npos) << t;
  EXPECT_NE(t.find("function_type = (tensor<ui32>) -> tensor<ui32>, sym_name = \"loss\""), std::string::npos) << t;
  EXPECT_THROW(emit::emit_stablehlo({&a.g, &a.g}), SheafError);  // duplicate symbol
}

TEST(StableHloText, ConstantLiterals) {
  Case c("consts");
  std::vector<int32_t> r;
  r.push_back(c.g.emit_constant(filled(DType::F32, {3}, {1, -2.5, 1e20})));
  r.push_back(c.g.emit_constant(filled(DType::F32, {2, 2}, {kNaN, kInf, -kInf, -0.0})));
  r.push_back(c.g.emit_constant(Tensor::scalar(DType::F32, 2)));
  r.push_back(c.g.emit_constant(filled(DType::I32, {2}, {-7, 2147483647})));
  r.push_back(c.g.emit_constant(filled(DType::U32, {2}, {4294967295.0, 3})));
  r.push_back(c.g.emit_constant(filled(DType::Bool, {3}, {1, 0, 1})));
  r.push_back(c.g.emit_constant(filled(DType::F16, {2}, {0.5, 3})));
  r.push_back(c.g.emit_constant(filled(DType::I32, {20}, {1, 2})));  // > 16 elements: hex
  r.push_back(c.g.emit_constant(filled(DType::F32, {2, 3}, {4})));   // splat
  c.ret(r);
  std::string t = emit_one(c);
  EXPECT_NE(t.find("dense<[1.0, -2.5, 1.0e+20]> : tensor<3xf32>"), std::string::npos) << t;
  EXPECT_NE(t.find("dense<[[0x7FC00000, 0x7F800000], [0xFF800000, -0.0]]> : tensor<2x2xf32>"), std::string::npos) << t;
  EXPECT_NE(t.find("dense<2.0> : tensor<f32>"), std::string::npos) << t;
  EXPECT_NE(t.find("dense<[-7, 2147483647]> : tensor<2xi32>"), std::string::npos) << t;
  EXPECT_NE(t.find("dense<[4294967295, 3]> : tensor<2xui32>"), std::string::npos) << t;
  EXPECT_NE(t.find("dense<[true, false, true]> : tensor<3xi1>"), std::string::npos) << t;
  EXPECT_NE(t.find("dense<[0.5, 3.0]> : tensor<2xf16>"), std::string::npos) << t;
  EXPECT_NE(t.find("dense<\"0x0100000002000000"), std::string::npos) << t;
  EXPECT_NE(t.find("dense<4.0> : tensor<2x3xf32>"), std::string::npos) << t;
  EXPECT_EQ(t.find("dense<1>"), std::string::npos) << t;  // no float without a '.'
}

TEST(StableHloText, OpsAndErrors) {
  Case c("ops");
  int32_t x = c.param(Tensor(DType::F32, {3, 4}));
  int32_t s = c.op(Op::Sort, {x}, {.axis = 1});
  int32_t r = c.op(Op::Reduce, {x}, {.reduce = Reduce::Max, .dims = {0}});
  int32_t d = c.op(Op::DotGeneral, {x, x}, {.dot = {{}, {}, {0}, {0}}});
  c.ret({s, s + 1, r, d});
  std::string t = emit_one(c);
  EXPECT_NE(t.find("= \"stablehlo.sort\"("), std::string::npos) << t;  // packed (key, position) ui64
  EXPECT_NE(t.find("-> tensor<3x4xui64>"), std::string::npos) << t;
  EXPECT_NE(t.find("\"stablehlo.gather\""), std::string::npos) << t;  // values taken by position
  EXPECT_NE(t.find("\"stablehlo.reduce\"("), std::string::npos) << t;
  EXPECT_NE(t.find("dense<0xFF800000> : tensor<f32>"), std::string::npos) << t;  // -inf init of max
  EXPECT_NE(t.find("\"stablehlo.return\""), std::string::npos) << t;
  EXPECT_NE(t.find("#stablehlo.dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [0], "
                   "rhs_contracting_dimensions = [0]>"),
            std::string::npos) << t;
  Case b("bad");
  int32_t p = b.param(Tensor(DType::Bool, {2}));
  b.ret({b.op(Op::Binary, {p, p}, {.binary = Binary::Sub})});
  EXPECT_THROW(emit_one(b), SheafError);
}

// ---- elementwise --------------------------------------------------------------------------

// One function per dtype: every op of `ops` on the same parameters, one labelled result each.
template <typename OpT>
Case elementwise_case(std::string name, const std::vector<OpT>& ops, const std::vector<Tensor>& args,
                      const std::function<std::vector<int32_t>(OpT, const std::vector<int32_t>&)>& operands = nullptr) {
  Case c(std::move(name));
  std::vector<int32_t> ps, outs;
  for (const Tensor& t : args) ps.push_back(c.param(t));
  for (OpT o : ops) {
    std::vector<int32_t> in = operands ? operands(o, ps) : ps;
    if constexpr (std::is_same_v<OpT, Unary>) {
      outs.push_back(c.op(Op::Unary, in, {.unary = o}));
      c.labels.emplace_back(ir::unary_name(o));
    } else {
      outs.push_back(c.op(Op::Binary, in, {.binary = o}));
      c.labels.emplace_back(ir::binary_name(o));
    }
  }
  c.g.results = outs;
  return c;
}

TEST(StableHloIree, Unary) {
  std::vector<Case> cs;
  const std::vector<double> special = {kNaN, kInf, -kInf, 0.0, -0.0, 2.5, -2.5, 0.5, -1.5};
  std::vector<Unary> floats;
  for (int u = 0; u < static_cast<int>(Unary::Not); ++u) floats.push_back(static_cast<Unary>(u));
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    Tensor x = uniform(d, {3, 7}, -3, 3), near = uniform(d, {3, 7}, -1.4, 1.4);  // tan: away from its poles
    for (size_t i = 0; i < special.size(); ++i) x.set(static_cast<int64_t>(i), special[i]);
    cs.push_back(elementwise_case<Unary>(fmt::format("unary-{}", dtype_name(d)), floats, {x, near},
                                         [](Unary u, const std::vector<int32_t>& p) { return std::vector<int32_t>{p[u == Unary::Tan]}; }));
  }
  cs.push_back(elementwise_case<Unary>("unary-i32", {Unary::Neg, Unary::Abs, Unary::Sign, Unary::Not},
                                       {filled(DType::I32, {8}, {-2147483648.0, 2147483647, 0, -1, 1, -77, 5, 123456})}));
  cs.push_back(elementwise_case<Unary>("unary-u32", {Unary::Neg, Unary::Abs, Unary::Sign},
                                       {filled(DType::U32, {6}, {0, 1, 4294967295.0, 2147483648.0, 5, 77})}));
  cs.push_back(elementwise_case<Unary>("unary-bool", {Unary::Not}, {filled(DType::Bool, {4}, {0, 1, 1, 0})}));
  Oracle::check(cs);
}

TEST(StableHloIree, BinaryFloat) {
  std::vector<Case> cs;
  const std::vector<Binary> ops = {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Pow, Binary::Max, Binary::Min,
                                   Binary::Rem, Binary::FloorDiv, Binary::Eq, Binary::Ne, Binary::Lt, Binary::Le, Binary::Gt, Binary::Ge};
  // Pairs with NaN, ±inf, ±0, negative bases with integral and fractional exponents.
  const std::vector<double> xs = {kNaN, 1, kInf, -kInf, 0.0, -0.0, -2, -2, -2, -8, -0.0, 0, 2, 3, 1, kNaN, -kInf, -kInf, -1, -1};
  const std::vector<double> ys = {0, kNaN, 2, 3, -1, -1, 3, 2, 0.5, -3, 3, 0, -kInf, 0.0, 7, 1, 0.5, 3, kInf, kNaN};
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    Tensor x = uniform(d, {6, 8}, -6, 6, d == DType::F32 ? 0 : 0.25), y = uniform(d, {6, 8}, -4, 4);
    Tensor py = uniform(d, {6, 8}, -4, 4, 0.5);  // pow: many integral exponents
    for (size_t i = 0; i < xs.size(); ++i) {
      x.set(static_cast<int64_t>(i), xs[i]);
      y.set(static_cast<int64_t>(i), ys[i]);
      py.set(static_cast<int64_t>(i), ys[i]);
    }
    cs.push_back(elementwise_case<Binary>(fmt::format("binary-{}", dtype_name(d)), ops, {x, y, py},
                                          [](Binary b, const std::vector<int32_t>& p) { return std::vector<int32_t>{p[0], p[b == Binary::Pow ? 2 : 1]}; }));
  }
  Oracle::check(cs);
}

TEST(StableHloIree, BinaryInteger) {
  std::vector<Case> cs;
  const std::vector<Binary> ops = {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Pow, Binary::Max, Binary::Min,
                                   Binary::Rem, Binary::FloorDiv, Binary::Eq, Binary::Ne, Binary::Lt, Binary::Le, Binary::Gt,
                                   Binary::Ge, Binary::And, Binary::Or, Binary::Xor, Binary::ShiftLeft, Binary::ShiftRightLogical,
                                   Binary::ShiftRightArithmetic};
  // Division edge cases: by 0, by -1 (INT_MIN / -1 wraps), exact and inexact negatives.
  const std::vector<double> ex = {7, -7, 7, -7, -2147483648.0, 5, 0, 4294967295.0, -2147483648.0};
  const std::vector<double> ey = {2, 2, -2, -2, -1, 0, 0, 7, 1};
  for (DType d : {DType::I32, DType::U32}) {
    bool s = d == DType::I32;
    Tensor x = uniform(d, {5, 9}, s ? -2e9 : 0, s ? 2e9 : 4e9, 1), y = uniform(d, {5, 9}, s ? -30 : 0, 30, 1);
    for (size_t i = 0; i < ex.size(); ++i) {
      x.set(static_cast<int64_t>(i), ex[i]);
      y.set(static_cast<int64_t>(i), ey[i]);
    }
    Tensor px = uniform(d, {5, 9}, s ? -5 : 0, 9, 1), amounts = uniform(d, {5, 9}, s ? -3 : 0, 40, 1);  // pow and shift: y past 31
    cs.push_back(elementwise_case<Binary>(fmt::format("binary-{}", dtype_name(d)), ops, {x, y, px, amounts},
                                          [](Binary b, const std::vector<int32_t>& p) {
                                            if (b == Binary::Pow) return std::vector<int32_t>{p[2], p[3]};
                                            return std::vector<int32_t>{p[0], p[b >= Binary::ShiftLeft ? 3 : 1]};
                                          }));
  }
  cs.push_back(elementwise_case<Binary>("binary-bool",
                                        {Binary::And, Binary::Or, Binary::Xor, Binary::Add, Binary::Mul, Binary::Max, Binary::Min, Binary::Eq,
                                         Binary::Ne, Binary::Lt, Binary::Ge},
                                        {filled(DType::Bool, {4}, {0, 0, 1, 1}), filled(DType::Bool, {4}, {0, 1, 0, 1})}));
  Oracle::check(cs);
}

TEST(StableHloIree, ConvertEveryPair) {
  std::map<DType, Tensor> src = {
      {DType::F32, filled(DType::F32, {16}, {kNaN, kInf, -kInf, -0.0, 0.5, -1.7, 3e9, -3e9, 65504, 1e6, 2.5, 70000, -0.4, 16777217,
                                               5e9, 2147483647})},
      {DType::F16, filled(DType::F16, {8}, {kNaN, kInf, -kInf, -0.0, 0.5, -1.7, 65504, -300.25})},
      {DType::BF16, filled(DType::BF16, {8}, {kNaN, kInf, -2.5, -0.0, 0.5, 3e9, 1e38, -300.25})},
      {DType::I32, filled(DType::I32, {9}, {-2147483648.0, -1, 0, 1, 2147483647, 16777217, 123456789, 2049, 70000})},
      {DType::U32, filled(DType::U32, {7}, {0, 1, 4294967295.0, 2147483648.0, 16777217, 2049, 70000})},
      {DType::Bool, filled(DType::Bool, {4}, {0, 1, 1, 0})}};
  std::vector<Case> cs;
  for (auto& [from, x] : src) {
    Case c(fmt::format("convert-{}", dtype_name(from)));
    int32_t p = c.param(x);
    for (DType to : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U32, DType::Bool}) {
      c.g.results.push_back(c.op(Op::Convert, {p}, {.dtype = to}));
      c.labels.push_back(fmt::format("to {}", dtype_name(to)));
    }
    cs.push_back(std::move(c));
  }
  Oracle::check(cs);
}

TEST(StableHloIree, SelectAndBroadcastingThroughBroadcastInDim) {
  Case c("select-broadcast");
  int32_t p = c.param(bools({3, 4}));
  int32_t row = c.param(uniform(DType::F32, {4}, -1, 1));
  int32_t col = c.param(uniform(DType::F32, {3, 1}, -1, 1));
  int32_t one = c.param(uniform(DType::F32, {}, -1, 1));
  Type t{DType::F32, {3, 4}};
  int32_t a = c.typed(Op::BroadcastInDim, {row}, {.dims = {1}}, t);
  int32_t b = c.typed(Op::BroadcastInDim, {col}, {.dims = {0, 1}}, t);
  int32_t s = c.typed(Op::BroadcastInDim, {one}, {}, t);
  int32_t sum = c.op(Op::Binary, {a, s}, {.binary = Binary::Add});
  c.ret({c.op(Op::Select, {p, sum, b}), a, b});
  Case h("select-f16");
  int32_t hp = h.param(bools({5}));
  h.ret({h.op(Op::Select, {hp, h.param(uniform(DType::F16, {5}, -1, 1)), h.param(uniform(DType::F16, {5}, -1, 1))})});
  Oracle::check({c, h});
}

// ---- structural ---------------------------------------------------------------------------

TEST(StableHloIree, LayoutOps) {
  std::vector<Case> cs;
  for (DType d : {DType::F32, DType::BF16, DType::I32, DType::Bool}) {
    Case c(fmt::format("layout-{}", dtype_name(d)));
    Tensor x = d == DType::Bool ? bools({2, 3, 4}) : uniform(d, {2, 3, 4}, -50, 50, d == DType::I32 ? 1 : 0);
    int32_t p = c.param(x), q = c.param(d == DType::Bool ? bools({2, 1, 4}) : uniform(d, {2, 1, 4}, -5, 5, 1));
    int32_t rs = c.typed(Op::Reshape, {p}, {}, {d, {4, 6}});
    int32_t tr = c.op(Op::Transpose, {p}, {.dims = {2, 0, 1}});
    int32_t sl = c.op(Op::Slice, {p}, {.starts = {0, 1, 0}, .limits = {2, 3, 4}, .strides = {1, 1, 3}});
    int32_t rv = c.op(Op::Reverse, {p}, {.dims = {0, 2}});
    int32_t cc = c.op(Op::Concatenate, {q, p, q}, {.axis = 1});
    int32_t pd = c.op(Op::Pad, {p}, {.lo = {1, 0, 2}, .hi = {0, 2, 1}, .scalar = d == DType::Bool ? 1.0 : -7.0});
    int32_t io = c.typed(Op::Iota, {}, {.dtype = d, .axis = 1}, {d, {2, 5}});
    c.ret({rs, tr, sl, rv, cc, pd, io});
    cs.push_back(std::move(c));
  }
  Case k("constants");
  k.ret({k.g.emit_constant(filled(DType::F32, {2, 3}, {1, -2.5, 1e20, kNaN, -kInf, -0.0})),
         k.g.emit_constant(uniform(DType::F32, {5, 7}, -1e3, 1e3)), k.g.emit_constant(uniform(DType::BF16, {40}, -8, 8)),
         k.g.emit_constant(filled(DType::F16, {3}, {0.1, 65504, -kInf})), k.g.emit_constant(filled(DType::U32, {30}, {4294967295.0, 9})),
         k.g.emit_constant(filled(DType::Bool, {20}, {1, 0, 0})), k.g.emit_constant(Tensor::scalar(DType::I32, -3)),
         k.g.emit_constant(filled(DType::F32, {2, 2}, {0.25}))});
  cs.push_back(std::move(k));
  Oracle::check(cs);
}

TEST(StableHloIree, DynamicSlices) {
  std::vector<Case> cs;
  // (start0, start1): inside, clamped from below and above, and u32 beyond INT_MAX.
  const std::vector<std::pair<double, double>> starts = {{1, 2}, {-3, 9}, {10, -1}, {4000000000.0, 1}};
  for (size_t k = 0; k < starts.size(); ++k) {
    DType sd = k == 3 ? DType::U32 : DType::I32;
    Case c(fmt::format("dynamic-{}", k));
    int32_t x = c.param(uniform(DType::F32, {5, 6}, -9, 9));
    int32_t u = c.param(uniform(DType::F32, {2, 3}, -9, 9));
    int32_t s0 = c.param(Tensor::scalar(sd, starts[k].first)), s1 = c.param(Tensor::scalar(sd, starts[k].second));
    c.ret({c.op(Op::DynamicSlice, {x, s0, s1}, {.sizes = {3, 4}}), c.op(Op::DynamicUpdateSlice, {x, u, s0, s1})});
    cs.push_back(std::move(c));
  }
  // Two in-place updates of one computed value must not see each other.
  Case c("dynamic-shared");
  int32_t x = c.param(uniform(DType::F32, {5, 6}, -9, 9));
  int32_t u = c.param(uniform(DType::F32, {2, 3}, -9, 9)), v = c.param(uniform(DType::F32, {2, 3}, -9, 9));
  int32_t s0 = c.param(Tensor::scalar(DType::I32, 1)), s1 = c.param(Tensor::scalar(DType::I32, 2));
  int32_t y = c.op(Op::Binary, {x, x}, {.binary = Binary::Mul});
  c.ret({c.op(Op::DynamicUpdateSlice, {y, u, s0, s1}), c.op(Op::DynamicUpdateSlice, {y, v, s1, s0}), y});
  cs.push_back(std::move(c));
  Oracle::check(cs);
}

// ---- reductions, dot ----------------------------------------------------------------------

TEST(StableHloIree, Reduce) {
  std::vector<Case> cs;
  const std::vector<std::vector<int64_t>> axes = {{1}, {0, 2}, {0, 1, 2}};
  for (DType d : {DType::F32, DType::F16, DType::I32, DType::U32, DType::Bool})
    for (int r = 0; r < 4; ++r) {
      auto red = static_cast<Reduce>(r);
      if (d == DType::Bool && (red == Reduce::Sum || red == Reduce::Prod)) continue;
      Tensor x = d == DType::Bool ? bools({3, 4, 5})
                 : is_float(d)    ? uniform(d, {3, 4, 5}, red == Reduce::Prod ? 0.5 : -4, red == Reduce::Prod ? 1.5 : 4)
                                  : uniform(d, {3, 4, 5}, d == DType::I32 ? -2e9 : 0, d == DType::I32 ? 2e9 : 4e9, 1);
      if (d == DType::F32 && r >= 2) x.set(7, kNaN);  // max/min propagate NaN
      Case c(fmt::format("reduce-{}-{}", ir::reduce_name(red), dtype_name(d)));
      int32_t p = c.param(x);
      std::vector<int32_t> outs;
      for (const auto& a : axes) outs.push_back(c.op(Op::Reduce, {p}, {.reduce = red, .dims = a}));
      c.ret(outs);
      cs.push_back(std::move(c));
    }
  Oracle::check(cs);
}

TEST(StableHloIree, ArgReduceFirstIndexAndNaN) {
  std::vector<Case> cs;
  for (DType d : {DType::F32, DType::F16, DType::I32, DType::U32, DType::Bool})
    for (Reduce r : {Reduce::Max, Reduce::Min}) {
      // Few distinct values: ties everywhere; NaN in some lines.
      Tensor x = d == DType::Bool ? bools({4, 6}) : uniform(d, {4, 6}, d == DType::U32 ? 0 : -1, 1, 1);
      if (is_float(d)) {
        x.set(3, kNaN);
        x.set(5, kNaN);
        x.set(13, kNaN);
      }
      Case c(fmt::format("arg{}-{}", ir::reduce_name(r), dtype_name(d)));
      int32_t p = c.param(x);
      c.ret({c.op(Op::ArgReduce, {p}, {.reduce = r, .axis = 0}), c.op(Op::ArgReduce, {p}, {.reduce = r, .axis = 1})});
      cs.push_back(std::move(c));
    }
  Oracle::check(cs);
}

TEST(StableHloIree, DotGeneral) {
  std::vector<Case> cs;
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U32, DType::Bool}) {
    auto make = [&](Shape s) { return d == DType::Bool ? bools(std::move(s)) : uniform(d, std::move(s), d == DType::U32 ? 0 : -3, 3, is_int(d) ? 1 : 0); };
    Case c(fmt::format("dot-{}", dtype_name(d)));
    int32_t a = c.param(make({3, 4})), b = c.param(make({4, 5}));
    int32_t ba = c.param(make({2, 3, 4})), bb = c.param(make({2, 4, 5}));
    int32_t at = c.param(make({4, 3}));
    c.ret({c.op(Op::DotGeneral, {a, b}, {.dot = {{}, {}, {1}, {0}}}),
           c.op(Op::DotGeneral, {ba, bb}, {.dot = {{0}, {0}, {2}, {1}}}),
           c.op(Op::DotGeneral, {at, b}, {.dot = {{}, {}, {0}, {0}}}),
           c.op(Op::DotGeneral, {a, at}, {.dot = {{}, {}, {}, {}}})});  // outer product
    cs.push_back(std::move(c));
  }
  Oracle::check(cs);
}

// ---- gather, scatter, sort ----------------------------------------------------------------

TEST(StableHloIree, GatherClampsIndices) {
  std::vector<Case> cs;
  for (DType d : {DType::F32, DType::F16, DType::I32, DType::Bool}) {
    Case c(fmt::format("gather-{}", dtype_name(d)));
    int32_t x = c.param(d == DType::Bool ? bools({5, 3}) : uniform(d, {5, 3}, -9, 9, 1));
    int32_t i0 = c.param(filled(DType::I32, {4}, {2, -2, 7, 0}));
    int32_t i1 = c.param(filled(DType::I32, {2, 2}, {2, 0, 1, 5}));
    int32_t i2 = c.param(Tensor::scalar(DType::I32, 3));
    int32_t iu = c.param(filled(DType::U32, {3}, {4000000000.0, 1, 2147483648.0}));
    c.ret({c.op(Op::Gather, {x, i0}, {.axis = 0}), c.op(Op::Gather, {x, i1}, {.axis = 1}), c.op(Op::Gather, {x, i2}, {.axis = 0}),
           c.op(Op::Gather, {x, iu}, {.axis = 0})});
    cs.push_back(std::move(c));
  }
  Oracle::check(cs);
}

TEST(StableHloIree, ScatterSkipsOutOfRange) {
  std::vector<Case> cs;
  for (DType d : {DType::F32, DType::F16, DType::I32, DType::U32, DType::Bool})
    for (ScatterMode m : {ScatterMode::Set, ScatterMode::Add}) {
      auto make = [&](Shape s) { return d == DType::Bool ? bools(std::move(s)) : uniform(d, std::move(s), d == DType::U32 ? 0 : -9, 9, 0.25); };
      Case c(fmt::format("scatter-{}-{}", m == ScatterMode::Add ? "add" : "set", dtype_name(d)));
      int32_t x = c.param(make({5, 3}));
      // Set: distinct in-range indices (the winner of a repeat is unspecified in StableHLO).
      int32_t i0 = c.param(m == ScatterMode::Set ? filled(DType::I32, {4}, {3, -1, 0, 9}) : filled(DType::I32, {5}, {1, 4, 1, -1, 1}));
      int32_t u0 = c.param(make({m == ScatterMode::Set ? 4 : 5, 3}));
      int32_t i1 = c.param(filled(DType::U32, {2, 2}, {2, 4000000000.0, 0, 3}));
      int32_t u1 = c.param(make({5, 2, 2}));
      c.ret({c.op(Op::Scatter, {x, i0, u0}, {.scatter = m, .axis = 0}), c.op(Op::Scatter, {x, i1, u1}, {.scatter = m, .axis = 1})});
      cs.push_back(std::move(c));
    }
  Oracle::check(cs);
}

TEST(StableHloIree, SortAndTopK) {
  std::vector<Case> cs;
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U32, DType::Bool}) {
    Tensor x = d == DType::Bool ? bools({3, 8}) : uniform(d, {3, 8}, d == DType::U32 ? 0 : -3, 3, 1);  // many ties
    if (is_float(d)) {
      x.set(1, kNaN);
      x.set(4, kNaN);
      x.set(9, -0.0);
      x.set(10, 0.0);
      x.set(11, -kInf);
    }
    Case c(fmt::format("sort-{}", dtype_name(d)));
    int32_t p = c.param(x);
    int32_t up = c.op(Op::Sort, {p}, {.axis = 1}), down = c.op(Op::Sort, {p}, {.axis = 1, .descending = true});
    int32_t col = c.op(Op::Sort, {p}, {.axis = 0, .descending = true});
    int32_t top = c.op(Op::TopK, {p}, {.k = 3});
    c.ret({up, up + 1, down, down + 1, col, col + 1, top, top + 1});
    cs.push_back(std::move(c));
  }
  Oracle::check(cs);
}


// ---- control flow -------------------------------------------------------------------------

// A region graph: parameters of `ts`; `body` adds its nodes and returns its results.
std::shared_ptr<const ir::Graph> region(const std::vector<Type>& ts, const std::function<std::vector<int32_t>(ir::Graph&, const std::vector<int32_t>&)>& body) {
  auto r = std::make_shared<ir::Graph>();
  std::vector<int32_t> ps;
  for (const Type& t : ts) ps.push_back(r->add(Op::Parameter, {}, {.index = static_cast<int64_t>(ps.size())}, {t}));
  r->results = body(*r, ps);
  return r;
}

int32_t rconst(ir::Graph& g, DType d, double v) { return g.emit_constant(Tensor::scalar(d, v)); }
int32_t rsplat(ir::Graph& g, const Type& t, double v) { return g.add(Op::BroadcastInDim, {rconst(g, t.dtype, v)}, {}, {t}); }
int32_t rbin(ir::Graph& g, Binary b, int32_t x, int32_t y) { return g.emit(Op::Binary, {x, y}, {.binary = b}); }

const Type kI32{DType::I32, {}};
const Type kF32x4{DType::F32, {4}};

// while (i < limit) { i += 1; x *= 2 } over carried (i: i32[], x: f32[4]).
ir::Attrs doubling_loop(double limit) {
  ir::Attrs a;
  a.regions = {region({kI32, kF32x4}, [&](ir::Graph& g, const std::vector<int32_t>& p) {
                 return std::vector<int32_t>{rbin(g, Binary::Lt, p[0], rconst(g, DType::I32, limit))};
               }),
               region({kI32, kF32x4}, [](ir::Graph& g, const std::vector<int32_t>& p) {
                 return std::vector<int32_t>{rbin(g, Binary::Add, p[0], rconst(g, DType::I32, 1)),
                                             rbin(g, Binary::Mul, p[1], rsplat(g, kF32x4, 2))};
               })};
  return a;
}

// case over (a: f32[4], n: i32[]) returning (f32[4], i32[]): branch 0 a + a, 1 -a, 2 a * 10 and n + 100.
ir::Attrs three_branches() {
  ir::Attrs a;
  a.regions = {region({kF32x4, kI32}, [](ir::Graph& g, const std::vector<int32_t>& p) {
                 return std::vector<int32_t>{rbin(g, Binary::Add, p[0], p[0]), p[1]};
               }),
               region({kF32x4, kI32}, [](ir::Graph& g, const std::vector<int32_t>& p) {
                 return std::vector<int32_t>{g.emit(Op::Unary, {p[0]}, {.unary = Unary::Neg}), rconst(g, DType::I32, 7)};
               }),
               region({kF32x4, kI32}, [](ir::Graph& g, const std::vector<int32_t>& p) {
                 return std::vector<int32_t>{rbin(g, Binary::Mul, p[0], rsplat(g, kF32x4, 10)), rbin(g, Binary::Add, p[1], rconst(g, DType::I32, 100))};
               })};
  return a;
}

TEST(StableHloText, WhileAndCaseRegions) {
  Case c("loop");
  int32_t i = c.param(Tensor::scalar(DType::I32, 0)), x = c.param(filled(DType::F32, {4}, {1, 2, 3, 4}));
  int32_t k = c.param(Tensor::scalar(DType::I32, 1));
  int32_t w = c.op(Op::While, {i, x}, doubling_loop(5));
  int32_t s = c.op(Op::Case, {k, w + 1, w}, three_branches());
  c.ret({w, w + 1, s, s + 1});
  std::string t = emit_one(c);
  EXPECT_NE(t.find(":2 = \"stablehlo.while\"(%arg0, %arg1) ({\n"), std::string::npos) << t;
  EXPECT_NE(t.find("^bb0(%0: tensor<i32>, %1: tensor<4xf32>):"), std::string::npos) << t;  // cond's block arguments
  EXPECT_NE(t.find("\"stablehlo.return\"(%3) : (tensor<i1>) -> ()"), std::string::npos) << t;
  EXPECT_NE(t.find(" : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)"), std::string::npos) << t;
  EXPECT_NE(t.find("\"stablehlo.case\"("), std::string::npos) << t;
  EXPECT_NE(t.find(") ({\n      %"), std::string::npos) << t;  // branches: no block arguments
  EXPECT_NE(t.find("-> (tensor<4xf32>, tensor<i32>)"), std::string::npos) << t;
  // ref semantics: 5 doublings; branch 1 of the case.
  std::vector<Tensor> r = ref::run(c.g, c.inputs);
  EXPECT_EQ(r[0].get(0), 5);
  EXPECT_EQ(r[1].get(3), 128);
  EXPECT_EQ(r[2].get(0), -32);
  EXPECT_EQ(r[3].get(0), 7);
}

TEST(StableHloIree, WhileLoops) {
  std::vector<Case> cs;
  for (double start : {0.0, 3.0, 9.0}) {  // 5, 2 and 0 iterations
    Case c(fmt::format("while-{}", start));
    int32_t i = c.param(Tensor::scalar(DType::I32, start)), x = c.param(uniform(DType::F32, {4}, -3, 3));
    int32_t w = c.op(Op::While, {i, x}, doubling_loop(5));
    c.ret({w, w + 1});
    cs.push_back(std::move(c));
  }
  // A case nested in the body reads the body's block arguments; a constant is carried along.
  Case n("while-nested-case");
  int32_t i = n.param(Tensor::scalar(DType::I32, 0)), x = n.param(uniform(DType::F32, {4}, -3, 3));
  int32_t lim = n.g.emit_constant(Tensor::scalar(DType::I32, 7));
  ir::Attrs a;
  std::vector<Type> carried{kI32, kF32x4, kI32};
  a.regions = {region(carried, [](ir::Graph& g, const std::vector<int32_t>& p) { return std::vector<int32_t>{rbin(g, Binary::Lt, p[0], p[2])}; }),
               region(carried, [](ir::Graph& g, const std::vector<int32_t>& p) {
                 int32_t k = rbin(g, Binary::Rem, p[0], rconst(g, DType::I32, 3));
                 int32_t s = g.emit(Op::Case, {k, p[1], p[0]}, three_branches());
                 return std::vector<int32_t>{rbin(g, Binary::Add, p[0], rconst(g, DType::I32, 1)), s, p[2]};
               })};
  int32_t w = n.op(Op::While, {i, x, lim}, a);
  n.ret({w, w + 1, w + 2});
  cs.push_back(std::move(n));
  std::vector<Tensor> r = ref::run(cs[0].g, cs[0].inputs);
  EXPECT_EQ(r[0].get(0), 5);
  EXPECT_EQ(r[1].get(2), cs[0].inputs[1].get(2) * 32);
  EXPECT_EQ(ref::run(cs[2].g, cs[2].inputs)[1].get(1), cs[2].inputs[1].get(1));  // no iteration
  Oracle::check(cs);
}

TEST(StableHloIree, CaseOutOfRangeTakesTheLastBranch) {
  std::vector<Case> cs;
  Tensor x = uniform(DType::F32, {4}, -3, 3);
  for (double index : {0.0, 1.0, 2.0, -1.0, 7.0, -2147483648.0}) {
    Case c(fmt::format("case-{}", index));
    int32_t k = c.param(Tensor::scalar(DType::I32, index)), a = c.param(x), m = c.param(Tensor::scalar(DType::I32, 5));
    int32_t s = c.op(Op::Case, {k, a, m}, three_branches());
    c.ret({s, s + 1});
    cs.push_back(std::move(c));
  }
  const double want_n[] = {5, 7, 105, 105, 105, 105};  // ref: -1, 7, INT_MIN → branch 2
  for (size_t k = 0; k < cs.size(); ++k) {
    std::vector<Tensor> r = ref::run(cs[k].g, cs[k].inputs);
    EXPECT_EQ(r[1].get(0), want_n[k]) << cs[k].g.name;
    if (k >= 2) {
      EXPECT_FLOAT_EQ(r[0].get(1), x.get(1) * 10) << cs[k].g.name;
    }
  }
  Oracle::check(cs);
}

}  // namespace
}  // namespace sheaf
