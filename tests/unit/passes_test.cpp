// tests/unit/passes_test.cpp — the optimisation passes (src/passes) on hand-built graphs.
// Every graph is checked three ways: the printed IR or op counts after the pass, ir::verify, and
// the reference executor giving the same bits before and after on random inputs that include
// -0.0, ±inf, NaN, subnormals and integer extremes (a NaN may only change its payload). The
// signed-zero tests feed -0.0 on purpose: x + +0.0 must stay, because it turns -0.0 into +0.0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "backend/canonical_dots.hpp"
#include "backend/cpu/lowering.hpp"
#include "backend/merge_dots.hpp"
#include "backend/ref/executor.hpp"
#include "graph_results.hpp"
#include "base/error.hpp"
#include "ir/node_key.hpp"
#include "passes/pipeline.hpp"
#include "passes/rewrite.hpp"
#include "tensor/shape.hpp"

namespace sheaf::passes {
namespace {

using ir::Attrs;
using ir::Graph;
using ir::Op;
using ir::Type;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- building graphs ----

int32_t param(Graph& g, Type t) { return g.add(Op::Parameter, {}, {.index = static_cast<int64_t>(g.params.size())}, {std::move(t)}); }
int32_t bin(Graph& g, Binary op, int32_t a, int32_t b) { return g.emit(Op::Binary, {a, b}, {.binary = op}); }
int32_t un(Graph& g, Unary op, int32_t x) { return g.emit(Op::Unary, {x}, {.unary = op}); }
int32_t scalar(Graph& g, DType d, double v) { return g.emit_constant(Tensor::scalar(d, v)); }
int32_t reshape(Graph& g, int32_t x, Shape s) { return g.add(Op::Reshape, {x}, {}, {Type{g.type(x).dtype, std::move(s)}}); }
int32_t broadcast(Graph& g, int32_t x, std::vector<int64_t> dims, Shape s) {
  return g.add(Op::BroadcastInDim, {x}, {.dims = std::move(dims)}, {Type{g.type(x).dtype, std::move(s)}});
}
// broadcast_in_dim of a scalar constant: the splat form constant folding produces.
int32_t splat(Graph& g, const Type& t, double v) { return broadcast(g, scalar(g, t.dtype, v), {}, t.shape); }
// A materialised constant of type t filled with v.
int32_t full(Graph& g, const Type& t, double v) {
  Tensor x(t.dtype, t.shape);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, v);
  return g.emit_constant(x);
}
int32_t values(Graph& g, DType d, Shape s, std::vector<double> v) {
  Tensor x(d, std::move(s));
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, v[static_cast<size_t>(i)]);
  return g.emit_constant(x);
}

size_t count(const Graph& g, Op op) {
  size_t n = 0;
  for (const ir::Node& node : g.nodes) n += node.op == op;
  return n;
}

// ---- comparing executions ----

Tensor random_tensor(const Type& t, std::mt19937& rng) {
  static const double floats[] = {-0.0, 0.0, 1.0, -1.0, kInf, -kInf, kNaN, 1e-40, -3e-39, 2.5};
  static const double ints[] = {0, 1, -1, -2147483648.0, 2147483647.0, 4294967295.0, 7};
  Tensor x(t.dtype, t.shape);
  std::normal_distribution<double> normal(0.0, 3.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool special = rng() % 3 == 0;
    if (t.dtype == DType::Bool) x.set(i, rng() % 2);
    else if (is_float(t.dtype)) x.set(i, special ? floats[rng() % std::size(floats)] : normal(rng));
    else x.set(i, special ? ints[rng() % std::size(ints)] : static_cast<double>(static_cast<int>(rng() % 2001) - 1000));
  }
  return x;
}

std::vector<Tensor> random_args(const Graph& g, std::mt19937& rng) {
  std::vector<Tensor> args;
  for (int32_t p : g.params) args.push_back(random_tensor(g.type(p), rng));
  return args;
}

// Equal bits, or NaNs of the same sign.
bool same_element(const Tensor& a, const Tensor& b, int64_t i) {
  size_t es = dtype_size(a.dtype());
  if (std::memcmp(a.bytes() + static_cast<size_t>(i) * es, b.bytes() + static_cast<size_t>(i) * es, es) == 0) return true;
  double x = a.get(i), y = b.get(i);
  // NaN sign and payload from invalid operations (0·inf) depend on the kernel path the hardware
  // takes (x86 SIMD gives the negative default NaN), so any NaN matches any NaN.
  return is_float(a.dtype()) && std::isnan(x) && std::isnan(y);
}

// Runs both graphs on the same inputs; every result element must agree.
void expect_same_results(const Graph& before, const Graph& after, std::vector<std::vector<Tensor>> inputs = {}) {
  ir::verify(before);
  ASSERT_NO_THROW(ir::verify(after)) << ir::print(after);
  ASSERT_EQ(before.params.size(), after.params.size());
  for (size_t i = 0; i < before.params.size(); ++i) ASSERT_EQ(before.type(before.params[i]), after.type(after.params[i]));
  ASSERT_EQ(before.results.size(), after.results.size());
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 4; ++trial) inputs.push_back(random_args(before, rng));
  for (const auto& args : inputs) {
    std::vector<Tensor> x = ref::run(before, args), y = ref::run(after, args);
    for (size_t r = 0; r < x.size(); ++r) {
      ASSERT_EQ(type_str(x[r]), type_str(y[r])) << "result " << r;
      for (int64_t i = 0; i < x[r].numel(); ++i)
        ASSERT_TRUE(same_element(x[r], y[r], i)) << "result " << r << " element " << i << ": " << x[r].get(i) << " became "
                                                 << y[r].get(i) << "\nbefore:\n" << ir::print(before) << "after:\n" << ir::print(after);
    }
  }
}

// A pass followed by DCE (so replaced nodes disappear), checked against the original.
Graph run_checked(ir::Graph (*pass)(const Graph&), const Graph& g) {
  Graph out = eliminate_dead_code(pass(g));
  expect_same_results(g, out);
  return out;
}

const Type f32x23{DType::F32, {2, 3}};

// ---- the Rewriter ----

TEST(Rewriter, KeepsParametersFirstAndValueIdsDense) {
  Graph g;
  g.name = "f";
  int32_t a = param(g, f32x23), b = param(g, f32x23), c = param(g, {DType::I32, {}});
  int32_t dead = bin(g, Binary::Mul, a, b);
  int32_t s = bin(g, Binary::Add, a, b);
  bin(g, Binary::Sub, dead, s);
  g.results = {s, a};
  Graph out = eliminate_dead_code(g);
  EXPECT_EQ(out.params, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(out.type(2), g.type(c));
  EXPECT_EQ(ir::print(out),
            "func @f(%0: f32[2x3], %1: f32[2x3], %2: i32[]) {\n"
            "  %3 = add(%0, %1) : f32[2x3]\n"
            "  return %3, %0\n"
            "}\n");
  expect_same_results(g, out);
}

TEST(Rewriter, ReadingADroppedValueIsAnInternalError) {
  Graph g;
  int32_t x = param(g, f32x23);
  g.results = {un(g, Unary::Neg, x)};
  EXPECT_THROW(rewrite(g, [](Rewriter&, const ir::Node&) { return true; }), SheafError);
}

TEST(Rewriter, SplatHelpersSeeThroughLayoutOpsAndKeepSignedZeros) {
  Graph g;
  int32_t neg_zero = splat(g, f32x23, -0.0);
  int32_t one = reshape(g, full(g, {DType::F32, {6}}, 1.0), {2, 3});
  int32_t mixed = values(g, DType::F32, {2}, {0.0, -0.0});
  EXPECT_TRUE(is_splat_of(g, neg_zero, -0.0));
  EXPECT_FALSE(is_splat_of(g, neg_zero, 0.0));
  EXPECT_TRUE(is_splat_of(g, one, 1.0));
  EXPECT_FALSE(splat_scalar(g, mixed).has_value());  // equal as numbers, not as bits
  EXPECT_EQ(use_counts(g)[static_cast<size_t>(neg_zero - 1)], 1);
}

// ---- constant folding ----

TEST(Fold, EvaluatesConstantSubgraphs) {
  Graph g;
  int32_t x = param(g, {DType::F32, {2}});
  int32_t c = bin(g, Binary::Add, values(g, DType::F32, {2}, {1, 2}), values(g, DType::F32, {2}, {3, 4.5}));
  g.results = {bin(g, Binary::Mul, un(g, Unary::Neg, c), x)};
  Graph out = run_checked(fold_constants, g);
  EXPECT_EQ(ir::print(out),
            "func @main(%0: f32[2]) {\n"
            "  %1 = constant() {[-4.  -6.5]} : f32[2]\n"
            "  %2 = mul(%1, %0) : f32[2]\n"
            "  return %2\n"
            "}\n");
}

TEST(Fold, IotaOperandsAndMultipleResults) {
  Graph g;
  int32_t x = param(g, {DType::F32, {4}});
  int32_t i = g.add(Op::Iota, {}, {.dtype = DType::I32, .axis = 0}, {{DType::I32, {4}}});
  int32_t mask = bin(g, Binary::Lt, i, splat(g, {DType::I32, {4}}, 2));
  int32_t sorted = g.emit(Op::Sort, {values(g, DType::F32, {4}, {3, -1, 2, -0.0})}, {.axis = 0});
  g.results = {g.emit(Op::Select, {mask, x, sorted}, {}), sorted + 1};
  Graph out = run_checked(fold_constants, g);
  EXPECT_EQ(count(out, Op::Iota), 0u);
  EXPECT_EQ(count(out, Op::Sort), 0u);
  EXPECT_EQ(ir::print(out),
            "func @main(%0: f32[4]) {\n"
            "  %1 = constant() {[true true false false]} : bool[4]\n"
            "  %2 = constant() {[-1. -0.  2.  3.]} : f32[4]\n"
            "  %3 = constant() {[1 3 2 0]} : i32[4]\n"
            "  %4 = select(%1, %0, %2) : f32[4]\n"
            "  return %4, %3\n"
            "}\n");
}

// Which values folding can read as tensors, told without materialising any (has_constant_tensor,
// which fold_known asks of every operand first): constants at any size, iotas and splats up to the
// limit, nothing computed at run time.
TEST(Fold, KnownOperandsAreToldWithoutMaterialisingThem) {
  Graph g;
  const int32_t x = param(g, {DType::F32, {4}});
  const int32_t c = values(g, DType::F32, {2}, {1, 2});
  const int32_t i = g.add(Op::Iota, {}, {.dtype = DType::I32, .axis = 0}, {{DType::I32, {4}}});
  const int32_t s = splat(g, {DType::F32, {8}}, 3);
  const int32_t y = un(g, Unary::Neg, x);
  for (int32_t v : {x, c, i, s, y})
    for (int64_t limit : {1, 4, 8}) {
      EXPECT_EQ(passes::has_constant_tensor(g, v, limit), passes::constant_tensor(g, v, limit).has_value()) << v << " " << limit;
    }
  EXPECT_TRUE(passes::has_constant_tensor(g, c, 1));  // a constant is already in memory
  EXPECT_FALSE(passes::has_constant_tensor(g, s, 4));
  EXPECT_TRUE(passes::has_constant_tensor(g, s, 8));
  EXPECT_FALSE(passes::has_constant_tensor(g, x, 8));
  EXPECT_FALSE(passes::has_constant_tensor(g, y, 8));
}

TEST(Fold, LargeSplatsStayBroadcastsOfAScalar) {
  Graph g;
  Type big{DType::F32, {512, 512}};
  int32_t x = param(g, big);
  int32_t e = un(g, Unary::Exp, bin(g, Binary::Add, splat(g, big, 2), full(g, big, 3)));  // 2^18 elements
  int32_t flat = reshape(g, e, {512 * 512});
  g.results = {bin(g, Binary::Mul, x, e), flat};
  Graph out = run_checked(fold_constants, g);
  for (const ir::Node& n : out.nodes) {
    if (n.op == Op::Constant) {
      EXPECT_LE(n.attrs.value.numel(), 1) << ir::print(out);
    }
  }
  EXPECT_EQ(ir::print(out),
            "func @main(%0: f32[512x512]) {\n"
            "  %1 = constant() {148.41316} : f32[]\n"
            "  %2 = broadcast_in_dim(%1) {dims=[]} : f32[512x512]\n"
            "  %3 = constant() {148.41316} : f32[]\n"
            "  %4 = broadcast_in_dim(%3) {dims=[]} : f32[262144]\n"
            "  %5 = mul(%0, %2) : f32[512x512]\n"
            "  return %5, %4\n"
            "}\n");
  // Already folded: a second run changes nothing.
  EXPECT_TRUE(same_graph(out, fold_constants(out)));
}

TEST(Fold, LargeResultsThatAreNotSplatsStay) {
  Graph g;
  Type big{DType::I32, {300, 300}};
  int32_t i = g.add(Op::Iota, {}, {.dtype = DType::I32, .axis = 1}, {big});
  g.results = {bin(g, Binary::Mul, i, i)};
  Graph out = fold_constants(g);
  EXPECT_TRUE(same_graph(g, out)) << ir::print(out);
}

TEST(Fold, ReshapeOfALargeConstantSharesItsBytes) {
  Graph g;
  Tensor big(DType::F32, {400, 400});
  for (int64_t i = 0; i < big.numel(); ++i) big.set(i, static_cast<double>(i));
  g.results = {reshape(g, g.emit_constant(big), {160000})};
  Graph out = run_checked(fold_constants, g);
  ASSERT_EQ(out.nodes.size(), 1u);
  EXPECT_EQ(out.nodes[0].attrs.value.bytes(), big.bytes());
  EXPECT_EQ(out.type(out.results[0]), (Type{DType::F32, {160000}}));
}

// ---- simplification ----

// The point of this test: x + +0.0 is not x when x is -0.0, x + -0.0 always is.
TEST(Simplify, AdditiveIdentitiesRespectSignedZeros) {
  Graph g;
  int32_t x = param(g, f32x23);
  int32_t plus = bin(g, Binary::Add, x, splat(g, f32x23, 0.0));      // kept
  int32_t minus = bin(g, Binary::Add, full(g, f32x23, -0.0), x);     // → x
  int32_t sub_plus = bin(g, Binary::Sub, x, splat(g, f32x23, 0.0));  // → x
  int32_t sub_minus = bin(g, Binary::Sub, x, splat(g, f32x23, -0.0));  // kept
  g.results = {plus, minus, sub_plus, sub_minus};
  Graph out = eliminate_dead_code(simplify(g));
  EXPECT_EQ(ir::print(out),
            "func @main(%0: f32[2x3]) {\n"
            "  %1 = constant() {0.0} : f32[]\n"
            "  %2 = broadcast_in_dim(%1) {dims=[]} : f32[2x3]\n"
            "  %3 = add(%0, %2) : f32[2x3]\n"
            "  %4 = constant() {-0.0} : f32[]\n"
            "  %5 = broadcast_in_dim(%4) {dims=[]} : f32[2x3]\n"
            "  %6 = sub(%0, %5) : f32[2x3]\n"
            "  return %3, %0, %0, %6\n"
            "}\n");
  Tensor zeros(DType::F32, {2, 3});
  for (int64_t i = 0; i < 6; ++i) zeros.set(i, i % 2 ? 0.0 : -0.0);
  std::vector<Tensor> r = ref::run(g, std::span(&zeros, 1));
  EXPECT_FALSE(std::signbit(r[0].get(0)));  // -0.0 + +0.0 = +0.0: folding it to x would be wrong
  EXPECT_TRUE(std::signbit(r[1].get(0)));
  EXPECT_TRUE(std::signbit(r[2].get(0)));
  EXPECT_FALSE(std::signbit(r[3].get(0)));
  expect_same_results(g, out, {{zeros}});
}

TEST(Simplify, IntegerAndMultiplicativeIdentities) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U32}) {
    Graph g;
    Type t{d, {2, 3}};
    int32_t x = param(g, t);
    int32_t y = bin(g, Binary::Mul, splat(g, t, 1), bin(g, Binary::Div, x, full(g, t, 1)));
    int32_t zero = is_float(d) ? splat(g, t, -0.0) : splat(g, t, 0);
    y = bin(g, Binary::Sub, bin(g, Binary::Add, zero, bin(g, Binary::Mul, y, full(g, t, 1))), splat(g, t, 0));
    g.results = {y};
    Graph out = run_checked(simplify, g);
    EXPECT_EQ(out.nodes.size(), 1u) << dtype_name(d) << "\n" << ir::print(out);
  }
}

TEST(Simplify, MultiplyByOtherConstantsStays) {
  Graph g;
  int32_t x = param(g, f32x23);
  g.results = {bin(g, Binary::Mul, x, splat(g, f32x23, -1)), bin(g, Binary::Div, full(g, f32x23, 1), x),
               bin(g, Binary::Mul, x, values(g, DType::F32, {2, 3}, {1, 1, 1, 1, 1, 1.5}))};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(count(out, Op::Binary), 3u);
}

TEST(Simplify, BooleanAndShiftIdentities) {
  Graph g;
  Type b{DType::Bool, {4}}, u{DType::U32, {4}};
  int32_t p = param(g, b), q = param(g, u);
  g.results = {bin(g, Binary::And, splat(g, b, 1), bin(g, Binary::Or, p, splat(g, b, 0))),
               bin(g, Binary::ShiftLeft, bin(g, Binary::Xor, full(g, u, 0), q), splat(g, u, 0))};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(out.results, (std::vector<int32_t>{p, q}));
}

TEST(Simplify, DoubleNegationOnlyWhereTheKernelInvertsExactly) {
  Graph g;
  int32_t f = param(g, f32x23), i = param(g, {DType::I32, {2, 3}}), u = param(g, {DType::U32, {2, 3}});
  g.results = {un(g, Unary::Neg, un(g, Unary::Neg, f)), un(g, Unary::Neg, un(g, Unary::Neg, i)),
               un(g, Unary::Neg, un(g, Unary::Neg, u))};
  Tensor extremes(DType::I32, {2, 3});
  extremes.set(0, -2147483648.0);  // -(-2^31) saturates to 2^31 - 1, and back to -2^31 + 1
  std::mt19937 rng(7);
  Graph out = eliminate_dead_code(simplify(g));
  expect_same_results(g, out, {{random_tensor(f32x23, rng), extremes, random_tensor({DType::U32, {2, 3}}, rng)}});
  EXPECT_EQ(out.results[0], f);
  EXPECT_EQ(out.results[2], u);
  EXPECT_EQ(count(out, Op::Unary), 2u);  // the i32 pair stays
}

TEST(Simplify, LayoutIdentitiesDisappear) {
  Graph g;
  int32_t x = param(g, f32x23);
  int32_t y = g.emit(Op::Convert, {x}, {.dtype = DType::F32});
  y = reshape(g, y, {2, 3});
  y = g.emit(Op::Transpose, {y}, {.dims = {0, 1}});
  y = broadcast(g, y, {0, 1}, {2, 3});
  y = g.emit(Op::Slice, {y}, {.starts = {0, 0}, .limits = {2, 3}, .strides = {1, 1}});
  y = g.emit(Op::Pad, {y}, {.lo = {0, 0}, .hi = {0, 0}, .scalar = 7});
  y = g.emit(Op::Concatenate, {y}, {.axis = 1});
  int32_t one = reshape(g, y, {1, 2, 3});
  y = reshape(g, g.emit(Op::Reverse, {one}, {.dims = {0}}), {2, 3});
  g.results = {y};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(out.results[0], x) << ir::print(out);
}

TEST(Simplify, LayoutChainsCompose) {
  Graph g;
  int32_t x = param(g, {DType::F32, {2, 3, 4}}), v = param(g, {DType::F32, {3}});
  int32_t t = g.emit(Op::Transpose, {g.emit(Op::Transpose, {x}, {.dims = {1, 2, 0}})}, {.dims = {2, 0, 1}});  // identity
  int32_t u = g.emit(Op::Transpose, {g.emit(Op::Transpose, {x}, {.dims = {1, 0, 2}})}, {.dims = {2, 0, 1}});
  int32_t r = reshape(g, reshape(g, x, {6, 4}), {4, 6});
  int32_t b = broadcast(g, broadcast(g, v, {1}, {1, 3}), {0, 2}, {5, 2, 3});
  g.results = {t, u, r, b};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(ir::print(out),
            "func @main(%0: f32[2x3x4], %1: f32[3]) {\n"
            "  %2 = transpose(%0) {dims=[2, 1, 0]} : f32[4x3x2]\n"
            "  %3 = reshape(%0) : f32[4x6]\n"
            "  %4 = broadcast_in_dim(%1) {dims=[2]} : f32[5x2x3]\n"
            "  return %0, %2, %3, %4\n"
            "}\n");
}

// A product read only through a transpose is computed with its operands swapped when that leaves
// no transpose (x·wᵀ read as [n m]) or keeps the last axis last (dK = (qᵀ·g) read as [b s h d]);
// not when the product has another reader, nor when the transpose keeps the last axis already.
TEST(Simplify, AProductReadOnlyTransposedSwapsItsOperands) {
  Graph g;
  int32_t x = param(g, {DType::F32, {5, 6}}), w = param(g, {DType::F32, {4, 6}});
  int32_t q = param(g, {DType::F32, {2, 3, 5, 4}}), d = param(g, {DType::F32, {2, 3, 5, 7}});
  auto dot = [&](int32_t a, int32_t b, DotDims dims) { return g.emit(Op::DotGeneral, {a, b}, {.dot = std::move(dims)}); };
  auto transpose = [&](int32_t v, std::vector<int64_t> dims) { return g.emit(Op::Transpose, {v}, {.dims = std::move(dims)}); };
  int32_t xw = transpose(dot(x, w, {.lhs_contract = {1}, .rhs_contract = {1}}), {1, 0});
  int32_t dk = transpose(dot(q, d, {{0, 1}, {0, 1}, {2}, {2}}), {0, 3, 1, 2});
  int32_t shared = dot(x, w, {.lhs_contract = {1}, .rhs_contract = {1}});
  int32_t kept = transpose(dot(q, d, {{0, 1}, {0, 1}, {2}, {2}}), {1, 0, 2, 3});
  g.results = {xw, dk, transpose(shared, {1, 0}), shared, kept};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(ir::print(out),
            "func @main(%0: f32[5x6], %1: f32[4x6], %2: f32[2x3x5x4], %3: f32[2x3x5x7]) {\n"
            "  %4 = dot_general(%1, %0) {batch=[]x[] contract=[1]x[1]} : f32[4x5]\n"
            "  %5 = dot_general(%3, %2) {batch=[0, 1]x[0, 1] contract=[2]x[2]} : f32[2x3x7x4]\n"
            "  %6 = transpose(%5) {dims=[0, 2, 1, 3]} : f32[2x7x3x4]\n"
            "  %7 = dot_general(%0, %1) {batch=[]x[] contract=[1]x[1]} : f32[5x4]\n"
            "  %8 = dot_general(%2, %3) {batch=[0, 1]x[0, 1] contract=[2]x[2]} : f32[2x3x4x7]\n"
            "  %9 = transpose(%8) {dims=[1, 0, 2, 3]} : f32[3x2x4x7]\n"
            "  %10 = transpose(%7) {dims=[1, 0]} : f32[4x5]\n"
            "  return %4, %6, %10, %7, %9\n"
            "}\n");
}

// An arange baked into the graph as a constant (the class ids of a one-hot mask) becomes an iota,
// which kernels compute from the index; so does a broadcast of an iota, unless it widens a size-1
// axis (then every element is 0). Constants that only look like one stay: -0.0, a count along
// two axes, a step that is not 1, a single element.
TEST(Simplify, AConstantThatCountsAlongOneAxisIsAnIota) {
  Graph g;
  int32_t ids = values(g, DType::I32, {4}, {0, 1, 2, 3});
  int32_t cols = values(g, DType::F32, {2, 3}, {0, 1, 2, 0, 1, 2});
  int32_t rows = values(g, DType::U32, {3, 1, 2}, {0, 0, 1, 1, 2, 2});
  int32_t wide = broadcast(g, ids, {1}, {5, 4});
  int32_t iota1 = g.add(Op::Iota, {}, {.dtype = DType::I32, .axis = 0}, {Type{DType::I32, {1}}});
  int32_t zeros = broadcast(g, iota1, {0}, {6});
  int32_t neg0 = values(g, DType::F32, {3}, {-0.0, 1, 2});
  int32_t both = values(g, DType::I32, {2, 2}, {0, 1, 1, 2});
  int32_t step2 = values(g, DType::I32, {3}, {0, 2, 4});
  int32_t one = values(g, DType::I32, {1}, {0});
  g.results = {ids, cols, rows, wide, zeros, neg0, both, step2, one};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(ir::print(out),
            "func @main() {\n"
            "  %0 = iota() {axis=0} : i32[4]\n"
            "  %1 = iota() {axis=1} : f32[2x3]\n"
            "  %2 = iota() {axis=0} : u32[3x1x2]\n"
            "  %3 = iota() {axis=1} : i32[5x4]\n"
            "  %4 = iota() {axis=0} : i32[1]\n"
            "  %5 = broadcast_in_dim(%4) {dims=[0]} : i32[6]\n"
            "  %6 = constant() {[-0.  1.  2.]} : f32[3]\n"
            "  %7 = constant() {[[0 1]  [1 2]]} : i32[2x2]\n"
            "  %8 = constant() {[0 2 4]} : i32[3]\n"
            "  %9 = constant() {[0]} : i32[1]\n"
            "  return %0, %1, %2, %3, %5, %6, %7, %8, %9\n"
            "}\n");
}

// A reshape or transpose sits on the narrow side of a cast, so that fusion keeps the narrow value
// in memory: reshape(f32(x)) → f32(reshape(x)), bf16(transpose(y)) → transpose(bf16(y)); a cast
// between equal sizes (f32 ↔ i32) and a widening cast of a layout op stay.
TEST(Simplify, LayoutOpsMoveToTheNarrowSideOfACast) {
  Graph g;
  int32_t x = param(g, {DType::BF16, {2, 3}}), y = param(g, {DType::F32, {2, 3}});
  int32_t widened = reshape(g, g.emit(Op::Convert, {x}, {.dtype = DType::F32}), {6});
  int32_t narrowed = g.emit(Op::Convert, {g.emit(Op::Transpose, {y}, {.dims = {1, 0}})}, {.dtype = DType::BF16});
  int32_t same = reshape(g, g.emit(Op::Convert, {y}, {.dtype = DType::I32}), {3, 2});
  int32_t stays = g.emit(Op::Convert, {reshape(g, x, {3, 2})}, {.dtype = DType::F32});
  g.results = {widened, narrowed, same, stays};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(ir::print(out),
            "func @main(%0: bf16[2x3], %1: f32[2x3]) {\n"
            "  %2 = reshape(%0) : bf16[6]\n"
            "  %3 = convert(%2) {f32} : f32[6]\n"
            "  %4 = convert(%1) {bf16} : bf16[2x3]\n"
            "  %5 = transpose(%4) {dims=[1, 0]} : bf16[3x2]\n"
            "  %6 = convert(%1) {i32} : i32[2x3]\n"
            "  %7 = reshape(%6) : i32[3x2]\n"
            "  %8 = reshape(%0) : bf16[3x2]\n"
            "  %9 = convert(%8) {f32} : f32[3x2]\n"
            "  return %3, %5, %7, %9\n"
            "}\n");
}

TEST(Simplify, ConcatenateDropsEmptyOperands) {
  Graph g;
  int32_t x = param(g, f32x23), e = param(g, {DType::F32, {2, 0}});
  g.results = {g.emit(Op::Concatenate, {e, x, e}, {.axis = 1}), g.emit(Op::Concatenate, {x, e, x}, {.axis = 1})};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(out.results[0], x);
  EXPECT_EQ(out.nodes[out.def[static_cast<size_t>(out.results[1])]].in, (std::vector<int32_t>{x, x}));
}

TEST(Simplify, SelectOfEqualBranchesOrAKnownPredicate) {
  Graph g;
  Type b{DType::Bool, {2, 3}};
  int32_t c = param(g, b), x = param(g, f32x23), y = param(g, f32x23);
  g.results = {g.emit(Op::Select, {c, x, x}, {}), g.emit(Op::Select, {splat(g, b, 1), x, y}, {}),
               g.emit(Op::Select, {full(g, b, 0), x, y}, {}), g.emit(Op::Select, {c, x, y}, {})};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(std::vector<int32_t>(out.results.begin(), out.results.begin() + 3), (std::vector<int32_t>{x, x, y}));
  EXPECT_EQ(count(out, Op::Select), 1u);
}

// A bool select between the two constants is its predicate (or its negation): a loop's decision
// select(c, true, false) is c.
TEST(Simplify, BoolSelectOfConstantsIsThePredicate) {
  Graph g;
  Type b{DType::Bool, {2, 3}};
  int32_t c = param(g, b), other = param(g, b);
  g.results = {g.emit(Op::Select, {c, splat(g, b, 1), full(g, b, 0)}, {}), g.emit(Op::Select, {c, full(g, b, 0), splat(g, b, 1)}, {}),
               g.emit(Op::Select, {c, splat(g, b, 1), other}, {})};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(out.results[0], c);
  const ir::Node& negated = out.nodes[out.def[static_cast<size_t>(out.results[1])]];
  EXPECT_EQ(negated.op, Op::Unary);
  EXPECT_EQ(negated.attrs.unary, Unary::Not);
  EXPECT_EQ(negated.in, std::vector<int32_t>{c});
  EXPECT_EQ(count(out, Op::Select), 1u);  // a select with one unknown branch stays
}

TEST(Simplify, DynamicSlicesWithKnownStartsBecomeStatic) {
  Graph g;
  Type t{DType::F32, {4, 3}};
  int32_t x = param(g, t), s = param(g, {DType::I32, {}}), update = param(g, t);
  int32_t far = scalar(g, DType::I32, 5), low = scalar(g, DType::I32, -2);
  int32_t known = g.emit(Op::DynamicSlice, {x, far, low}, {.sizes = {2, 2}});   // clamped to [2, 0]
  int32_t whole = g.emit(Op::DynamicSlice, {x, s, s}, {.sizes = {4, 3}});       // any start clamps to 0
  int32_t dynamic = g.emit(Op::DynamicSlice, {x, s, low}, {.sizes = {2, 2}});   // stays
  int32_t replaced = g.emit(Op::DynamicUpdateSlice, {x, update, s, s}, {});
  g.results = {known, whole, dynamic, replaced};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(ir::print(out),
            "func @main(%0: f32[4x3], %1: i32[], %2: f32[4x3]) {\n"
            "  %3 = constant() {-2} : i32[]\n"
            "  %4 = slice(%0) {starts=[2, 0] limits=[4, 2] strides=[1, 1]} : f32[2x2]\n"
            "  %5 = dynamic_slice(%0, %1, %3) {sizes=[2, 2]} : f32[2x2]\n"
            "  return %4, %0, %5, %2\n"
            "}\n");
  Tensor start = Tensor::scalar(DType::I32, 9);
  std::mt19937 rng(3);
  expect_same_results(g, out, {{random_tensor(t, rng), start, random_tensor(t, rng)}});
}

TEST(Simplify, ReductionsOverNothingExceptFloatSums) {
  Graph g;
  int32_t x = param(g, {DType::F32, {2, 1, 3}}), i = param(g, {DType::I32, {2, 1}});
  int32_t prod = g.emit(Op::Reduce, {x}, {.reduce = Reduce::Prod, .dims = {}});
  int32_t max = g.emit(Op::Reduce, {x}, {.reduce = Reduce::Max, .dims = {1}});
  int32_t isum = g.emit(Op::Reduce, {i}, {.reduce = Reduce::Sum, .dims = {1}});
  int32_t fsum = g.emit(Op::Reduce, {x}, {.reduce = Reduce::Sum, .dims = {1}});  // -0.0 → +0.0: stays
  g.results = {prod, max, isum, fsum};
  Tensor neg_zero(DType::F32, {2, 1, 3});
  for (int64_t k = 0; k < 6; ++k) neg_zero.set(k, -0.0);
  EXPECT_FALSE(std::signbit(ref::run(g, std::vector<Tensor>{neg_zero, Tensor(DType::I32, {2, 1})})[3].get(0)));
  Graph out = eliminate_dead_code(simplify(g));
  EXPECT_EQ(ir::print(out),
            "func @main(%0: f32[2x1x3], %1: i32[2x1]) {\n"
            "  %2 = reshape(%0) : f32[2x3]\n"
            "  %3 = reshape(%1) : i32[2]\n"
            "  %4 = reduce_sum(%0) {dims=[1]} : f32[2x3]\n"
            "  return %0, %2, %3, %4\n"
            "}\n");
  expect_same_results(g, out, {{neg_zero, Tensor(DType::I32, {2, 1})}});
}

TEST(Simplify, TakeAndScatterOverAnIotaAreASliceAndAnAdd) {
  // (get pos (range T)) and its gradient: take(x, iota) reads x's first rows in order; a scatter
  // over every row of x, each once, adds each update to its row (the kernel's x + u).
  Graph g;
  Type t{DType::F32, {4, 3}};
  int32_t x = param(g, t), u = param(g, t), s = param(g, {DType::F32, {2, 3}});
  int32_t all = g.add(Op::Iota, {}, {.dtype = DType::I32, .axis = 0}, {Type{DType::I32, {4}}});
  int32_t two = g.add(Op::Iota, {}, {.dtype = DType::I32, .axis = 0}, {Type{DType::I32, {2}}});
  int32_t first = g.emit(Op::Gather, {x, two}, {.axis = 0});                               // slice of 2 rows
  int32_t added = g.emit(Op::Scatter, {x, all, u}, {.scatter = ScatterMode::Add, .axis = 0});
  int32_t set = g.emit(Op::Scatter, {x, all, u}, {.scatter = ScatterMode::Set, .axis = 0});
  int32_t part = g.emit(Op::Scatter, {x, two, s}, {.scatter = ScatterMode::Add, .axis = 0});  // rows 2, 3 add -0.0
  int32_t part_set = g.emit(Op::Scatter, {x, two, s}, {.scatter = ScatterMode::Set, .axis = 0});  // stays
  g.results = {first, added, set, part, part_set};
  Graph out = run_checked(simplify, g);
  EXPECT_EQ(count(out, Op::Gather), 0u);
  EXPECT_EQ(count(out, Op::Scatter), 1u);
  EXPECT_EQ(count(out, Op::Slice), 1u);
  EXPECT_EQ(count(out, Op::Pad), 1u);
  EXPECT_EQ(count(out, Op::Binary), 2u);
}

TEST(CanonicalDots, OperandsWhoseDimsCannotMergeAreTransposed) {
  // "bhtk,hkd->btd": the left operand contracts h and k, not adjacent in [b h t k]; "bhtk,btd->hkd":
  // its free dims h, k are not adjacent — but they are in the first product's transpose [b t h k]
  // (contracting b, t), which it reads too. "btd,dn->btn" merges as it is and stays.
  Graph g;
  int32_t ctx = param(g, {DType::F32, {2, 3, 4, 5}}), w = param(g, {DType::F32, {3, 5, 6}});
  int32_t dy = param(g, {DType::F32, {2, 4, 6}}), m = param(g, {DType::F32, {6, 7}});
  int32_t out = g.emit(Op::DotGeneral, {ctx, w}, {.dot = {.lhs_contract = {1, 3}, .rhs_contract = {0, 1}}});
  int32_t dw = g.emit(Op::DotGeneral, {ctx, dy}, {.dot = {.lhs_contract = {0, 2}, .rhs_contract = {0, 1}}});
  int32_t plain = g.emit(Op::DotGeneral, {dy, m}, {.dot = {.lhs_contract = {2}, .rhs_contract = {0}}});
  g.results = {out, dw, plain};
  Graph c = fusion::canonical_dots(g);
  expect_same_results(g, c);
  EXPECT_EQ(ir::print(c),
            "func @main(%0: f32[2x3x4x5], %1: f32[3x5x6], %2: f32[2x4x6], %3: f32[6x7]) {\n"
            "  %4 = transpose(%0) {dims=[0, 2, 1, 3]} : f32[2x4x3x5]\n"
            "  %5 = dot_general(%4, %1) {batch=[]x[] contract=[2, 3]x[0, 1]} : f32[2x4x6]\n"
            "  %6 = dot_general(%4, %2) {batch=[]x[] contract=[0, 1]x[0, 1]} : f32[3x5x6]\n"
            "  %7 = dot_general(%2, %3) {batch=[]x[] contract=[2]x[0]} : f32[2x4x7]\n"
            "  return %5, %6, %7\n"
            "}\n");
}

// ---- merged products ----

using testing_support::expect_close_results;
using testing_support::random_args;

// Σ_j dot(dy_j [2 128 4], w_j [256 4]) over `n` fresh parameter pairs (per-head input
// gradients contracting the head columns); each dy_j is passed to `each` as it is made.
int32_t summed_head_products(Graph& g, int n, const std::function<void(int32_t)>& each = nullptr) {
  const DotDims dims{.lhs_contract = {2}, .rhs_contract = {1}};
  int32_t sum = -1;
  for (int j = 0; j < n; ++j) {
    int32_t dy = param(g, {DType::F32, {2, 128, 4}}), w = param(g, {DType::F32, {256, 4}});
    int32_t term = g.emit(Op::DotGeneral, {dy, w}, {.dot = dims});
    sum = sum < 0 ? term : bin(g, Binary::Add, sum, term);
    if (each) each(dy);
  }
  return sum;
}

TEST(MergeDots, ProductsSharingAnOperandBecomeOneWiderProduct) {
  // Per-head projections dot(x, w1), dot(x, w2) of a [2 64 8] x (128 rows: merged) become one product
  // over concat(w1, w2) and two slices; the product over w3, which reads dot(x, w1), stays, and so do
  // the products of a [2 8] y (2 rows: too few to pay for the copy) and of a [2 48 8] z (96 rows:
  // 192 flops per copied element, enough for one product, not for a concatenation of two read
  // element by element from both). The first product's reader
  // moves after the merged product, whose second weight is computed later.
  Graph g;
  int32_t x = param(g, {DType::F32, {2, 64, 8}}), w1 = param(g, {DType::F32, {8, 4}}), u = param(g, {DType::F32, {8, 6}});
  int32_t y = param(g, {DType::F32, {2, 8}}), z = param(g, {DType::F32, {2, 48, 8}});
  const DotDims dims{.lhs_contract = {2}, .rhs_contract = {0}};
  int32_t p1 = g.emit(Op::DotGeneral, {x, w1}, {.dot = dims});
  int32_t early = un(g, Unary::Neg, p1);
  int32_t w2 = un(g, Unary::Exp, u);
  int32_t p2 = g.emit(Op::DotGeneral, {x, w2}, {.dot = dims});
  int32_t col = g.emit(Op::Reduce, {p1}, {.reduce = Reduce::Sum, .dims = {0}});
  int32_t w3 = g.emit(Op::Slice, {col}, {.starts = {0, 0}, .limits = {8, 4}, .strides = {1, 1}});
  int32_t p3 = g.emit(Op::DotGeneral, {x, w3}, {.dot = dims});
  const DotDims small{.lhs_contract = {1}, .rhs_contract = {0}};
  int32_t s1 = g.emit(Op::DotGeneral, {y, w1}, {.dot = small}), s2 = g.emit(Op::DotGeneral, {y, w2}, {.dot = small});
  int32_t z1 = g.emit(Op::DotGeneral, {z, w1}, {.dot = dims}), z2 = g.emit(Op::DotGeneral, {z, w2}, {.dot = dims});
  g.results = {early, p2, p3, s1, s2, z1, z2};
  Graph out = fusion::merge_dots(g);
  expect_close_results(g, out);
  EXPECT_EQ(count(out, Op::DotGeneral), 6u) << ir::print(out);
  EXPECT_EQ(count(out, Op::Concatenate), 1u);
  EXPECT_EQ(count(out, Op::Slice), 3u);
  bool found = false;
  for (const ir::Node& n : out.nodes)
    if (n.op == Op::DotGeneral && out.type(n.out).shape == Shape{2, 64, 10}) found = out.producer(n.in[1]).op == Op::Concatenate;
  EXPECT_TRUE(found) << ir::print(out);
}

TEST(MergeDots, HalfPrecisionProductsMergeLikeF32Ones) {
  // The GPU runs bf16 products (bench/gpt2_gpu.shf's casts): per-head projections dot(x, w_h) of a
  // bf16 [2 128 16] x merge over concat(w1, w2, w3) as f32 ones do. A product of another dtype is
  // not a candidate: f32 dot(xf, w) beside them stays.
  Graph g;
  int32_t x = param(g, {DType::BF16, {2, 128, 16}}), xf = param(g, {DType::F32, {2, 128, 16}}), wf = param(g, {DType::F32, {16, 8}});
  const DotDims dims{.lhs_contract = {2}, .rhs_contract = {0}};
  for (int h = 0; h < 3; ++h) g.results.push_back(g.emit(Op::DotGeneral, {x, param(g, {DType::BF16, {16, 8}})}, {.dot = dims}));
  g.results.push_back(g.emit(Op::DotGeneral, {xf, wf}, {.dot = dims}));
  Graph out = fusion::merge_dots(g);
  expect_close_results(g, out);
  EXPECT_EQ(count(out, Op::DotGeneral), 2u) << ir::print(out);
  EXPECT_EQ(count(out, Op::Concatenate), 1u) << ir::print(out);
}

// merge_dots' result `out` of g (three projections of a cast x, each with a bias, in mixed
// precision) is one product that adds one bias, exactly as g: the weights and the biases
// concatenated and each concatenation cast once.
void expect_one_biased_product(const Graph& g, const Graph& out) {
  expect_close_results(g, out, 0.0);
  EXPECT_EQ(count(out, Op::DotGeneral), 1u) << ir::print(out);
  EXPECT_EQ(count(out, Op::Binary), 1u) << ir::print(out);
  EXPECT_EQ(count(out, Op::Concatenate), 2u) << ir::print(out);  // the weights and the biases
  EXPECT_EQ(count(out, Op::Convert), 3u) << ir::print(out);      // x and the two concatenations
}

TEST(MergeDots, BiasesAndCastsOfMergedProductsJoinThem) {
  // Heads as modules in mixed precision: q_h = bf16(x)·bf16(w_h) + bf16(b_h). The merged product
  // reads one conversion of concat(w_1..w_3) (no cast per weight) and adds one broadcast of one
  // conversion of concat(b_1..b_3); each head's projection is a slice of that sum. Exact: nothing
  // is summed in another order.
  Graph g;
  int32_t x = g.emit(Op::Convert, {param(g, {DType::F32, {2, 128, 16}})}, {.dtype = DType::BF16});
  const DotDims dims{.lhs_contract = {2}, .rhs_contract = {0}};
  for (int h = 0; h < 3; ++h) {
    int32_t w = g.emit(Op::Convert, {param(g, {DType::F32, {16, 8}})}, {.dtype = DType::BF16});
    int32_t b = g.emit(Op::Convert, {param(g, {DType::F32, {8}})}, {.dtype = DType::BF16});
    int32_t row = g.add(Op::BroadcastInDim, {b}, {.dims = {2}}, {{DType::BF16, {2, 128, 8}}}, {});
    g.results.push_back(bin(g, Binary::Add, g.emit(Op::DotGeneral, {x, w}, {.dot = dims}), row));
  }
  Graph out = fusion::merge_dots(g);
  expect_one_biased_product(g, out);
  for (const ir::Node& n : out.nodes) {
    if (n.op == Op::DotGeneral) { EXPECT_EQ(out.producer(n.in[1]).op, Op::Convert) << ir::print(out); }
  }
}

TEST(MergeDots, SummedProductsBecomeOneProductOverConcatenatedContractions) {
  // dX = dot(dy1, w1) + c + dot(dy2, w2) + dot(dy3, w3) (the input gradient of per-head projections,
  // contracting the head columns): one product over concat(dy1..3) and concat(w1..3), plus c. A
  // product that something else reads too (d4) stays.
  Graph g;
  std::vector<int32_t> terms;
  const DotDims dims{.lhs_contract = {2}, .rhs_contract = {1}};
  for (int64_t cols : {4, 4, 8, 4}) {
    int32_t dy = param(g, {DType::F32, {2, 128, cols}}), w = param(g, {DType::F32, {256, cols}});
    terms.push_back(g.emit(Op::DotGeneral, {dy, w}, {.dot = dims}));
  }
  int32_t c = param(g, {DType::F32, {2, 128, 256}});
  int32_t sum = bin(g, Binary::Add, bin(g, Binary::Add, bin(g, Binary::Add, terms[0], c), terms[1]), terms[2]);
  g.results = {bin(g, Binary::Add, sum, terms[3]), terms[3]};
  Graph out = fusion::merge_dots(g);
  expect_close_results(g, out);
  EXPECT_EQ(count(out, Op::DotGeneral), 2u) << ir::print(out);
  EXPECT_EQ(count(out, Op::Concatenate), 2u);
  EXPECT_EQ(count(out, Op::Binary), 2u);
}

// merge_dots' result `out` of g agrees with g, its first `sums` results (row sums) bit for bit.
void expect_row_sums_exact(const Graph& g, const Graph& out, size_t sums) {
  expect_close_results(g, out);
  const std::vector<Tensor> args = random_args(g);
  const std::vector<Tensor> before = ref::run(g, args), after = ref::run(out, args);
  for (size_t r = 0; r < sums; ++r)
    for (int64_t i = 0; i < before[r].numel(); ++i) EXPECT_EQ(before[r].get(i), after[r].get(i)) << "row sum " << r << " element " << i;
}

TEST(MergeDots, RowSumsOfASumsOperandsAreSlicesOfOneSum) {
  // Three heads' input gradient Σ_h dot(dy_h, w_h) beside their bias gradients Σ_rows dy_h: the
  // product reads concat(dy_1..3), and the three bias gradients are slices of one row sum of that
  // concatenation, exactly (each column sums the same values in the same order). A fourth row sum,
  // of a value no product reads, stays.
  Graph g;
  const int32_t sum = summed_head_products(g, 3, [&](int32_t dy) { g.results.push_back(g.emit(Op::Reduce, {dy}, {.reduce = Reduce::Sum, .dims = {0, 1}})); });
  g.results.push_back(g.emit(Op::Reduce, {param(g, {DType::F32, {2, 128, 4}})}, {.reduce = Reduce::Sum, .dims = {0, 1}}));
  g.results.push_back(sum);
  Graph out = fusion::merge_dots(g);
  expect_row_sums_exact(g, out, 4);  // the input gradient adds in another order
  EXPECT_EQ(count(out, Op::DotGeneral), 1u) << ir::print(out);
  EXPECT_EQ(count(out, Op::Reduce), 2u) << ir::print(out);
  for (const ir::Node& n : out.nodes) {
    if (n.op == Op::Reduce && out.type(n.out).shape == Shape{12}) { EXPECT_EQ(out.producer(n.in[0]).op, Op::Concatenate) << ir::print(out); }
  }
}

TEST(MergeDots, EinsumProjectionsJoinTheirBiasesUnderATranspose) {
  // q, k, v as einsums "b t d, d h k -> b h t k" on [D H Hd] weights in mixed precision, each with
  // its bias [H 1 Hd]: the product gives [b t h k], transposed before the bias is added. The merged
  // product over concat(w_q, w_k, w_v) (one cast of one concatenation) adds one broadcast of the
  // biases' [3H Hd] concatenation (one cast) along its h and k dims, and each of q, k, v is a
  // transposed slice of that sum — the form a product's bias epilogue takes. The weights join
  // along their first free dim, h, as [D 3H Hd]: in each row of the product, q's columns, then
  // k's, then v's, as a batch-written [D 3D] weight has them. Exact.
  Graph g;
  int32_t x = g.emit(Op::Convert, {param(g, {DType::F32, {2, 128, 16}})}, {.dtype = DType::BF16});
  const DotDims dims{.lhs_contract = {2}, .rhs_contract = {0}};
  for (int i = 0; i < 3; ++i) {
    int32_t w = g.add(Op::Reshape, {g.emit(Op::Convert, {param(g, {DType::F32, {16, 16}})}, {.dtype = DType::BF16})}, {},
                      {{DType::BF16, {16, 2, 8}}});
    int32_t b = g.add(Op::Reshape, {g.emit(Op::Convert, {param(g, {DType::F32, {16}})}, {.dtype = DType::BF16})}, {},
                      {{DType::BF16, {2, 1, 8}}});
    int32_t heads = g.emit(Op::Transpose, {g.emit(Op::DotGeneral, {x, w}, {.dot = dims})}, {.dims = {0, 2, 1, 3}});
    int32_t row = g.add(Op::BroadcastInDim, {b}, {.dims = {1, 2, 3}}, {{DType::BF16, {2, 2, 128, 8}}}, {});
    g.results.push_back(bin(g, Binary::Add, heads, row));
  }
  Graph out = fusion::merge_dots(g);
  expect_one_biased_product(g, out);
  EXPECT_EQ(count(out, Op::Transpose), 3u) << ir::print(out);
  ASSERT_EQ(count(out, Op::BroadcastInDim), 1u) << ir::print(out);
  for (const ir::Node& n : out.nodes)
    if (n.op == Op::BroadcastInDim) {
      EXPECT_EQ(out.type(n.in[0]).shape, (Shape{6, 8})) << ir::print(out);
      EXPECT_EQ(n.attrs.dims, (std::vector<int64_t>{2, 3})) << ir::print(out);
    }
}

TEST(MergeDots, RowSumsOfOperandsReadTransposedAreSlicesOfOneSum) {
  // The backward of the einsum projections above: dX = Σ dot(transpose(dq_i), w_i) contracting
  // h and k of [b t h k] (merged over the concatenation of the transposed gradients along h, the
  // first contracted dim), beside the bias gradients Σ_{b,t} dq_i of the untransposed [b h t k]
  // gradients, which are slices of one sum of that concatenation over b and t, exactly.
  Graph g;
  std::vector<int32_t> terms;
  for (int i = 0; i < 3; ++i) {
    int32_t dq = param(g, {DType::F32, {2, 2, 128, 8}});
    int32_t heads = g.emit(Op::Transpose, {dq}, {.dims = {0, 2, 1, 3}});
    terms.push_back(g.emit(Op::DotGeneral, {heads, param(g, {DType::F32, {256, 2, 8}})}, {.dot = {.lhs_contract = {2, 3}, .rhs_contract = {1, 2}}}));
    g.results.push_back(g.emit(Op::Reduce, {dq}, {.reduce = Reduce::Sum, .dims = {0, 2}}));
  }
  g.results.push_back(bin(g, Binary::Add, bin(g, Binary::Add, terms[0], terms[1]), terms[2]));
  Graph out = fusion::merge_dots(g);
  expect_row_sums_exact(g, out, 3);  // the input gradient adds in another order
  EXPECT_EQ(count(out, Op::DotGeneral), 1u) << ir::print(out);
  ASSERT_EQ(count(out, Op::Reduce), 1u) << ir::print(out);
  for (const ir::Node& n : out.nodes)
    if (n.op == Op::Reduce) {
      EXPECT_EQ(out.producer(n.in[0]).op, Op::Concatenate) << ir::print(out);
      EXPECT_EQ(out.type(n.out).shape, (Shape{6, 8})) << ir::print(out);
    }
}

TEST(MergeDots, ASumTooLongToPayAsOneMergesInRuns) {
  // Six summed products dot(dy_j [2 128 4], w_j [256 4]) do 512 flops per element of either operand:
  // a concatenation of six does not pay (6·128 per element), runs of four and two do (the input
  // gradients of all heads summed into one cotangent, as the reverse sweep gives a layer norm
  // traced per head): two products over four concatenations, in the order of the operands.
  Graph g;
  g.results = {summed_head_products(g, 6)};
  Graph out = fusion::merge_dots(g);
  expect_close_results(g, out);
  EXPECT_EQ(count(out, Op::DotGeneral), 2u) << ir::print(out);
  EXPECT_EQ(count(out, Op::Concatenate), 4u) << ir::print(out);
  std::vector<Shape> widths;
  for (const ir::Node& n : out.nodes)
    if (n.op == Op::DotGeneral) widths.push_back(out.type(n.in[1]).shape);
  EXPECT_EQ(widths, (std::vector<Shape>{{256, 16}, {256, 8}})) << ir::print(out);
}

TEST(MergeDots, SharedOperandProductsMergeOverTheConcatenationsOfSums) {
  // Two heads' input gradients dX_h = Σ_j dot(dy_hj, w_hj) (each a sum group: concat(dy_h1..3)) and
  // the six weight gradients dot(x, dy_hj) contracting the batch and rows: six are too many to pay
  // for a concatenation of their own, but each head's three read the one its input gradient
  // makes, so they merge per head into a product over it (no further concatenation).
  Graph g;
  const DotDims input{.lhs_contract = {2}, .rhs_contract = {1}}, weight{.lhs_contract = {0, 1}, .rhs_contract = {0, 1}};
  int32_t x = param(g, {DType::F32, {2, 128, 256}});
  std::vector<int32_t> results;
  for (int h = 0; h < 2; ++h) {
    int32_t sum = -1;
    for (int j = 0; j < 3; ++j) {
      int32_t dy = param(g, {DType::F32, {2, 128, 4}}), w = param(g, {DType::F32, {256, 4}});
      int32_t term = g.emit(Op::DotGeneral, {dy, w}, {.dot = input});
      sum = sum < 0 ? term : bin(g, Binary::Add, sum, term);
      results.push_back(g.emit(Op::DotGeneral, {x, dy}, {.dot = weight}));
    }
    results.push_back(sum);
  }
  g.results = results;
  Graph out = fusion::merge_dots(g);
  expect_close_results(g, out);
  EXPECT_EQ(count(out, Op::DotGeneral), 4u) << ir::print(out);
  EXPECT_EQ(count(out, Op::Concatenate), 4u) << ir::print(out);
  for (const ir::Node& n : out.nodes) {
    if (n.op != Op::DotGeneral || n.in[0] != x) continue;
    EXPECT_EQ(out.type(n.out).shape, (Shape{256, 12})) << ir::print(out);
  }
}

TEST(MergeDots, SharedOperandProductsTakeTheOrderOfASumOverTheSameOperands) {
  // dX = Σ_j dot(dy_j, w_j) orders its products by the weights (defined first: w1 w2 w3), while the
  // gradients come in the other order (dy3 dy2 dy1, as einsum projections' are); the weight
  // gradients dot(x, dy_j), which pay as a group of their own, take the sum's order, so that both
  // products read one concatenation of the dy_j.
  Graph g;
  const DotDims input{.lhs_contract = {2}, .rhs_contract = {1}}, weight{.lhs_contract = {0, 1}, .rhs_contract = {0, 1}};
  int32_t x = param(g, {DType::F32, {2, 128, 256}});
  std::vector<int32_t> w, dy(3);
  for (int j = 0; j < 3; ++j) w.push_back(param(g, {DType::F32, {256, 4}}));
  for (int j = 2; j >= 0; --j) dy[static_cast<size_t>(j)] = param(g, {DType::F32, {2, 128, 4}});
  int32_t sum = -1;
  for (size_t j = 0; j < 3; ++j) {
    int32_t term = g.emit(Op::DotGeneral, {dy[j], w[j]}, {.dot = input});
    sum = sum < 0 ? term : bin(g, Binary::Add, sum, term);
    g.results.push_back(g.emit(Op::DotGeneral, {x, dy[j]}, {.dot = weight}));
  }
  g.results.push_back(sum);
  Graph out = fusion::merge_dots(g);
  expect_close_results(g, out);
  EXPECT_EQ(count(out, Op::DotGeneral), 2u) << ir::print(out);
  EXPECT_EQ(count(out, Op::Concatenate), 2u) << ir::print(out);  // the dy_j once, the w_j once
}

// ---- common subexpressions ----

TEST(Cse, MergesEqualNodesAndConstants) {
  Graph g;
  int32_t x = param(g, f32x23), y = param(g, f32x23);
  int32_t a1 = bin(g, Binary::Add, x, y), a2 = bin(g, Binary::Add, x, y);
  int32_t e1 = un(g, Unary::Exp, a1), e2 = un(g, Unary::Exp, a2);
  int32_t c1 = values(g, DType::F32, {3}, {1, 2, 3}), c2 = values(g, DType::F32, {3}, {1, 2, 3});
  int32_t s1 = g.emit(Op::Sort, {c1}, {.axis = 0}), s2 = g.emit(Op::Sort, {c2}, {.axis = 0});
  g.results = {bin(g, Binary::Sub, e1, e2), bin(g, Binary::Sub, x, y), s1 + 1, s2 + 1, s2};
  Graph out = run_checked(eliminate_common_subexpressions, g);
  EXPECT_EQ(ir::print(out),
            "func @main(%0: f32[2x3], %1: f32[2x3]) {\n"
            "  %2 = add(%0, %1) : f32[2x3]\n"
            "  %3 = exp(%2) : f32[2x3]\n"
            "  %4 = constant() {[1. 2. 3.]} : f32[3]\n"
            "  %5, %6 = sort(%4) {axis=0} : f32[3], i32[3]\n"
            "  %7 = sub(%3, %3) : f32[2x3]\n"
            "  %8 = sub(%0, %1) : f32[2x3]\n"
            "  return %7, %8, %6, %6, %5\n"
            "}\n");
}

TEST(Cse, KeepsApartWhatDiffersInBits) {
  Graph g;
  int32_t x = param(g, f32x23), y = param(g, f32x23);  // parameters of one type are not equal
  int32_t z1 = scalar(g, DType::F32, 0.0), z2 = scalar(g, DType::F32, -0.0), z3 = scalar(g, DType::F16, 0.0);
  int32_t p1 = g.emit(Op::Pad, {x}, {.lo = {1, 0}, .hi = {0, 0}, .scalar = 0.0});
  int32_t p2 = g.emit(Op::Pad, {x}, {.lo = {1, 0}, .hi = {0, 0}, .scalar = -0.0});
  int32_t r1 = reshape(g, x, {6}), r2 = reshape(g, x, {3, 2});  // equal operands, other result types
  g.results = {x, y, z1, z2, z3, p1, p2, r1, r2};
  Graph out = run_checked(eliminate_common_subexpressions, g);
  EXPECT_TRUE(same_graph(g, out)) << ir::print(out);
}

TEST(Cse, LargeConstantsMergeByStorage) {
  Graph g;
  Tensor big(DType::F32, {100, 100});
  Tensor copy(DType::F32, {100, 100});  // equal bytes, another buffer
  int32_t a = g.emit_constant(big), b = g.emit_constant(big), c = g.emit_constant(copy);
  g.results = {a, b, c};
  Graph out = eliminate_common_subexpressions(g);
  EXPECT_EQ(out.results, (std::vector<int32_t>{0, 0, 1}));
}

// The table CSE keys nodes with: through its growth (1000 keys), every stored key is found with
// its value, and keys that differ only in a constant's bytes or an operand are not confused.
TEST(Cse, NodeKeyMapFindsWhatItStoredAndNothingElse) {
  Graph g;
  const int32_t x = param(g, {DType::F32, {}});
  std::vector<int32_t> constants, sums;
  for (int i = 0; i < 500; ++i) constants.push_back(scalar(g, DType::F32, i));
  for (int i = 0; i < 500; ++i) sums.push_back(bin(g, Binary::Add, x, constants[static_cast<size_t>(i)]));
  ir::NodeKeyMap map;
  for (const ir::Node& n : g.nodes) {
    if (n.op == Op::Parameter) continue;
    ASSERT_EQ(map.find(g, n, n.in), nullptr) << ir::print(g);
    map.insert_pending(n.out);
  }
  for (const ir::Node& n : g.nodes) {
    if (n.op == Op::Parameter) continue;
    const int32_t* v = map.find(g, n, n.in);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(*v, n.out);
  }
  const ir::Node& sum = g.producer(sums[7]);
  const std::vector<int32_t> other{x, constants[8]};
  ASSERT_NE(map.find(g, sum, other), nullptr);  // read with another operand it is another sum
  EXPECT_EQ(*map.find(g, sum, other), sums[8]);
}

// ---- dead code ----

TEST(Dce, KeepsParametersAndWholeMultiResultNodes) {
  Graph g;
  int32_t x = param(g, {DType::F32, {5}});
  param(g, f32x23);  // unused, still an input
  int32_t s = g.emit(Op::Sort, {x}, {.axis = 0, .descending = true});
  un(g, Unary::Exp, s);  // dead, and makes s's values dead
  g.results = {s + 1};
  Graph out = run_checked(eliminate_dead_code, g);
  EXPECT_EQ(ir::print(out),
            "func @main(%0: f32[5], %1: f32[2x3]) {\n"
            "  %2, %3 = sort(%0) {axis=0 descending} : f32[5], i32[5]\n"
            "  return %3\n"
            "}\n");
}

// ---- the pipeline ----

// A layer written the way a tracer records it: broadcasts of scalars, constant weights, scale
// by 1, a duplicated activation, an unused branch.
Graph small_layer() {
  Graph g;
  g.name = "layer";
  int32_t x = param(g, {DType::F32, {4, 2}});
  int32_t w = reshape(g, values(g, DType::F32, {4}, {0.5, -1, 2, 0.25}), {2, 2});
  int32_t wt = g.emit(Op::Transpose, {g.emit(Op::Transpose, {w}, {.dims = {1, 0}})}, {.dims = {1, 0}});
  int32_t h = g.emit(Op::DotGeneral, {x, wt}, {.dot = {.lhs_contract = {1}, .rhs_contract = {0}}});
  int32_t bias = broadcast(g, bin(g, Binary::Mul, values(g, DType::F32, {2}, {1, -1}), splat(g, {DType::F32, {2}}, 0.5)), {1}, {4, 2});
  int32_t z = bin(g, Binary::Mul, bin(g, Binary::Add, h, bias), splat(g, {DType::F32, {4, 2}}, 1));
  int32_t a1 = un(g, Unary::Tanh, z), a2 = un(g, Unary::Tanh, z);
  un(g, Unary::Log, a1);
  g.results = {bin(g, Binary::Add, a1, a2)};
  return g;
}

TEST(Pipeline, ReachesAFixedPoint) {
  Graph g = small_layer();
  Graph out = g;
  std::vector<std::string> seen;
  int rounds = optimize(out, [&](std::string_view pass, int round, const Graph& step) {
    ir::verify(step);
    if (round == 1) seen.emplace_back(pass);
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"fold", "simplify", "composites", "cse", "dce"}));
  EXPECT_LE(rounds, 3);
  expect_same_results(g, out);
  EXPECT_EQ(ir::print(out),
            "func @layer(%0: f32[4x2]) {\n"
            "  %1 = constant() {[[ 0.5  -1.  ]  [ 2.    0.25]]} : f32[2x2]\n"
            "  %2 = dot_general(%0, %1) {batch=[]x[] contract=[1]x[0]} : f32[4x2]\n"
            "  %3 = constant() {[[ 0.5 -0.5]  [ 0.5 -0.5]  [ 0.5 -0.5]  [ 0.5 -0.5]]} : f32[4x2]\n"
            "  %4 = add(%2, %3) : f32[4x2]\n"
            "  %5 = tanh(%4) : f32[4x2]\n"
            "  %6 = add(%5, %5) : f32[4x2]\n"
            "  return %6\n"
            "}\n");
  Graph again = out;
  EXPECT_EQ(optimize(again, nullptr), 1);
  EXPECT_TRUE(same_graph(out, again));
}

// Random graphs over f32[2x3] and i32[2x3] mixing every rewrite above; each pass alone and the
// whole pipeline must keep the results.
struct RandomGraph {
  std::mt19937 rng;
  Graph g;
  std::vector<int32_t> f, i;  // values of type f32[2x3], i32[2x3]

  explicit RandomGraph(unsigned seed) : rng(seed) {
    f = {param(g, f32x23), param(g, f32x23)};
    i = {param(g, {DType::I32, {2, 3}})};
    for (int k = 0; k < 14; ++k) step();
    g.results = {f.back(), f[f.size() - 2], pick(f), pick(f), i.back()};
  }
  int32_t pick(const std::vector<int32_t>& pool) { return pool[rng() % pool.size()]; }
  // A value known at compile time: a splat, or (one time in four) arithmetic on splats.
  int32_t known(const Type& t) {
    static const double vs[] = {0.0, -0.0, 1.0, -1.0, 2.0, 0.5, kInf, kNaN};
    if (rng() % 4 == 0) return bin(g, rng() % 2 ? Binary::Add : Binary::Mul, known(t), known(t));
    double v = vs[rng() % std::size(vs)];
    return rng() % 2 ? splat(g, t, v) : full(g, t, v);
  }
  void step() {
    Type it{DType::I32, {2, 3}};
    static const Binary fops[] = {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Max, Binary::Pow};
    static const Unary uops[] = {Unary::Neg, Unary::Abs, Unary::Exp, Unary::Tanh, Unary::Floor, Unary::Sign};
    int32_t a = pick(f), b = pick(f);
    switch (rng() % 12) {
      case 0: f.push_back(bin(g, fops[rng() % 6], a, b)); break;
      case 1: f.push_back(rng() % 2 ? bin(g, fops[rng() % 6], a, known(f32x23)) : bin(g, fops[rng() % 6], known(f32x23), a)); break;
      case 2: f.push_back(un(g, uops[rng() % 6], rng() % 3 ? a : known(f32x23))); break;
      case 3: f.push_back(un(g, Unary::Neg, un(g, Unary::Neg, a))); break;
      case 4: {
        static const Shape shapes[] = {{6}, {3, 2}, {1, 6}, {6, 1}, {2, 3}};
        f.push_back(reshape(g, reshape(g, a, shapes[rng() % std::size(shapes)]), {2, 3}));
        break;
      }
      case 5: f.push_back(g.emit(Op::Transpose, {g.emit(Op::Transpose, {a}, {.dims = {1, 0}})}, {.dims = {1, 0}})); break;
      case 6: f.push_back(g.emit(Op::Select, {bin(g, Binary::Lt, a, rng() % 2 ? b : known(f32x23)), a, rng() % 2 ? b : a}, {})); break;
      case 7: {
        int32_t r = g.emit(Op::Reduce, {a}, {.reduce = rng() % 2 ? Reduce::Sum : Reduce::Max, .dims = {1}});
        f.push_back(broadcast(g, r, {0}, {2, 3}));
        break;
      }
      case 8: {
        int32_t l = g.emit(Op::Slice, {a}, {.starts = {0, 0}, .limits = {2, 1}, .strides = {1, 1}});
        int32_t r = g.emit(Op::Slice, {a}, {.starts = {0, 1}, .limits = {2, 3}, .strides = {1, 1}});
        f.push_back(g.emit(Op::Concatenate, {l, r}, {.axis = 1}));
        break;
      }
      case 9: {
        int32_t h = g.emit(Op::Convert, {a}, {.dtype = rng() % 2 ? DType::F16 : DType::F32});
        f.push_back(g.emit(Op::Convert, {h}, {.dtype = DType::F32}));
        break;
      }
      case 10: {
        int32_t c = pick(i);
        int32_t s = rng() % 3 ? bin(g, rng() % 2 ? Binary::Add : Binary::Mul, c, rng() % 2 ? known(it) : c)
                              : un(g, Unary::Neg, un(g, Unary::Neg, c));
        i.push_back(s);
        f.push_back(g.emit(Op::Convert, {s}, {.dtype = DType::F32}));
        break;
      }
      default: {  // a copy of an earlier node, for CSE
        if (g.nodes.size() == g.params.size()) return step();
        const ir::Node n = g.nodes[g.params.size() + rng() % (g.nodes.size() - g.params.size())];
        std::vector<ir::Type> ts(g.types.begin() + n.out, g.types.begin() + n.out + n.nout);
        int32_t v = g.add(n.op, n.in, n.attrs, ts);
        if (ts[0] == f32x23) f.push_back(v);
        break;
      }
    }
  }
};

// Every pass of the pipeline says "unchanged" (nullopt: nothing rebuilt) when it finds nothing to
// do, and rebuilds the graph when it does (Composites.WrittenOutGeluBecomesTheOp and
// WrittenOutSoftmaxBecomesTheOp cover the composites pass's finds).
TEST(Pipeline, PassesThatFindNothingRebuildNothing) {
  Graph g;
  const int32_t x = param(g, {DType::F32, {2, 3}});
  g.results = {un(g, Unary::Exp, x)};
  auto changes = [](const Graph& h) {
    std::vector<std::string> r;
    for (const Pass& p : pipeline())
      if (p.run(h)) r.push_back(std::string(p.name));
    return r;
  };
  EXPECT_EQ(changes(g), std::vector<std::string>{});
  Graph twice = g;
  twice.results.push_back(un(twice, Unary::Exp, x));  // the same node again
  EXPECT_EQ(changes(twice), std::vector<std::string>{"cse"});
  Graph dead = g;
  un(dead, Unary::Neg, x);  // read by nothing
  EXPECT_EQ(changes(dead), std::vector<std::string>{"dce"});
  Graph known = g;
  known.results.push_back(un(known, Unary::Exp, scalar(known, DType::F32, 1)));
  EXPECT_EQ(changes(known), std::vector<std::string>{"fold"});
  Graph identity = g;
  identity.results.push_back(un(identity, Unary::Neg, un(identity, Unary::Neg, x)));  // -(-x) → x, then -x is dead
  EXPECT_EQ(changes(identity), (std::vector<std::string>{"simplify"}));
}

// The pipeline's fold and simplify copy nothing until their first change: what they build from
// there on is what the passes that copy every node build (the same graph, node for node), and
// when they change nothing they say so, on graphs that change at their first node, their last,
// in between, or nowhere.
TEST(Pipeline, PassesThatCopyFromTheirFirstChangeBuildWhatFullCopiesBuild) {
  size_t unchanged = 0, changed = 0;
  auto check = [&](const Graph& g, Graph (*whole)(const Graph&), std::optional<Graph> (*lazy)(const Graph&)) {
    const Graph full = whole(g);
    const std::optional<Graph> from_change = lazy(g);
    if (from_change) {
      ++changed;
      EXPECT_TRUE(same_graph(full, *from_change)) << ir::print(full) << "\n" << ir::print(*from_change);
      ir::verify(*from_change);
    } else {
      ++unchanged;
      EXPECT_TRUE(same_graph(full, g)) << ir::print(full);
    }
  };
  for (unsigned seed = 0; seed < 150; ++seed) {
    SCOPED_TRACE(seed);
    Graph g = RandomGraph(seed).g;
    for (int round = 0; round < 3; ++round) {  // later rounds change less, and at last nothing
      check(g, fold_constants, constants_folded);
      check(g, simplify, simplified);
      g = simplify(fold_constants(g));
    }
    if (HasFatalFailure()) return;
  }
  Graph first;  // a change at the first node after the parameter: a constant 0 1 2 3 is an iota
  const int32_t x = param(first, {DType::F32, {4}});
  const int32_t counts = values(first, DType::F32, {4}, {0, 1, 2, 3});
  first.results = {bin(first, Binary::Add, x, counts), un(first, Unary::Neg, un(first, Unary::Neg, x))};
  ASSERT_TRUE(simplified(first));
  check(first, simplify, simplified);
  Graph last = first;  // ... and at the last: a known exp
  last.results.push_back(un(last, Unary::Exp, scalar(last, DType::F32, 2)));
  check(simplify(last), fold_constants, constants_folded);
  EXPECT_GT(unchanged, 50u);
  EXPECT_GT(changed, 50u);
  Graph late;  // a parameter after another node: rebuilt at once, which moves it first
  const int32_t two = scalar(late, DType::F32, 2);
  late.results = {bin(late, Binary::Mul, param(late, {DType::F32, {}}), two)};
  for (auto pass : {constants_folded, simplified}) {
    const std::optional<Graph> rebuilt = pass(late);
    ASSERT_TRUE(rebuilt);
    ir::verify(*rebuilt);
  }
}

TEST(Pipeline, RandomGraphsKeepTheirResults) {
  size_t before = 0, after = 0;
  for (unsigned seed = 0; seed < 150; ++seed) {
    SCOPED_TRACE(seed);
    Graph g = RandomGraph(seed).g;
    for (const Pass& p : pipeline()) expect_same_results(g, p.run(g).value_or(g));
    Graph out = g;
    optimize(out);
    expect_same_results(g, out);
    if (HasFatalFailure()) return;
    before += g.nodes.size();
    after += out.nodes.size();
  }
  EXPECT_LT(after, before * 3 / 4) << before << " nodes became " << after;
}


// ---- control flow: while and case are opaque nodes; their regions are optimised on their own ----

const Type i32s{DType::I32, {}};
const Type f32x4{DType::F32, {4}};

// A region graph taking `ts`; `body` adds its nodes and returns its results.
std::shared_ptr<const Graph> region(const std::vector<Type>& ts, const std::function<std::vector<int32_t>(Graph&, std::vector<int32_t>)>& body) {
  auto r = std::make_shared<Graph>();
  std::vector<int32_t> ps;
  for (const Type& t : ts) ps.push_back(param(*r, t));
  r->results = body(*r, ps);
  return r;
}

// while (i < limit) { i += 1; x = x * 2 * 1 } over (i: i32[], x: f32[4]); the * 1 is for simplify.
Attrs counting_loop(double limit) {
  Attrs a;
  a.regions = {region({i32s, f32x4}, [&](Graph& g, std::vector<int32_t> p) { return std::vector<int32_t>{bin(g, Binary::Lt, p[0], scalar(g, DType::I32, limit))}; }),
               region({i32s, f32x4}, [](Graph& g, std::vector<int32_t> p) {
                 int32_t x = bin(g, Binary::Mul, p[1], splat(g, f32x4, 2));
                 x = bin(g, Binary::Mul, x, splat(g, f32x4, 1));
                 return std::vector<int32_t>{bin(g, Binary::Add, p[0], scalar(g, DType::I32, 1)), x};
               })};
  return a;
}

// case over (a, b: f32[4]) → f32[4]: a + b, a - b, a * b.
Attrs three_way() {
  Attrs a;
  for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul})
    a.regions.push_back(region({f32x4, f32x4}, [&](Graph& g, std::vector<int32_t> p) { return std::vector<int32_t>{bin(g, op, p[0], p[1])}; }));
  return a;
}

Tensor f32x4_of(double v) {
  Tensor t(DType::F32, {4});
  for (int64_t i = 0; i < 4; ++i) t.set(i, v);
  return t;
}

const Graph& body_of(const Graph& g, size_t nth_while) {
  for (const ir::Node& n : g.nodes)
    if (n.op == Op::While && nth_while-- == 0) return *n.attrs.regions[1];
  throw SheafError("no such while");
}

TEST(ControlFlow, VerifierChecksRegionsAndPrintsThem) {
  Graph g;
  int32_t x = param(g, f32x4);
  int32_t w = g.emit(Op::While, {scalar(g, DType::I32, 0), x}, counting_loop(5));
  g.results = {w + 1};
  EXPECT_NO_THROW(ir::verify(g));
  EXPECT_EQ(ir::print(g),
            "func @main(%0: f32[4]) {\n"
            "  %1 = constant() {0} : i32[]\n"
            "  %2, %3 = while(%1, %0) : i32[], f32[4]\n"
            "    cond(%0: i32[], %1: f32[4]) {\n"
            "      %2 = constant() {5} : i32[]\n"
            "      %3 = lt(%0, %2) : bool[]\n"
            "      return %3\n"
            "    }\n"
            "    body(%0: i32[], %1: f32[4]) {\n"
            "      %2 = constant() {2.0} : f32[]\n"
            "      %3 = broadcast_in_dim(%2) {dims=[]} : f32[4]\n"
            "      %4 = mul(%1, %3) : f32[4]\n"
            "      %5 = constant() {1.0} : f32[]\n"
            "      %6 = broadcast_in_dim(%5) {dims=[]} : f32[4]\n"
            "      %7 = mul(%4, %6) : f32[4]\n"
            "      %8 = constant() {1} : i32[]\n"
            "      %9 = add(%0, %8) : i32[]\n"
            "      return %9, %7\n"
            "    }\n"
            "  return %3\n"
            "}\n");
}

TEST(ControlFlow, VerifierRejectsMismatchedRegions) {
  Graph g;
  int32_t i = param(g, i32s), x = param(g, f32x4), y = param(g, {DType::F32, {3}});
  Attrs bad = counting_loop(5);
  bad.regions[1] = region({i32s, f32x4}, [](Graph& r, std::vector<int32_t> p) {  // returns f32[3], not f32[4]
    return std::vector<int32_t>{p[0], r.emit(Op::Slice, {p[1]}, {.starts = {0}, .limits = {3}, .strides = {1}})};
  });
  EXPECT_THROW(g.emit(Op::While, {i, x}, bad), SheafError);
  Graph h = g;
  h.add(Op::While, {i, x}, bad, {i32s, f32x4});
  try {
    ir::verify(h);
    ADD_FAILURE() << "a body returning the wrong type was accepted";
  } catch (const SheafError& e) {
    EXPECT_NE(std::string(e.what()).find("body region returns (i32[], f32[3]), expected (i32[], f32[4])"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.emit(Op::While, {i, y}, counting_loop(5)), SheafError);   // operands differ from the parameters
  EXPECT_THROW(g.emit(Op::Case, {x, x, x}, three_way()), SheafError);      // index not i32[]
  Attrs mixed = three_way();
  mixed.regions[2] = region({f32x4, f32x4}, [](Graph&, std::vector<int32_t> p) { return std::vector<int32_t>{p[0], p[1]}; });
  EXPECT_THROW(g.emit(Op::Case, {i, x, x}, mixed), SheafError);           // branches return different types
  // A broken node inside a region is found by the recursive verify.
  Graph inner = *counting_loop(5).regions[1];
  inner.nodes.back().in[0] = 99;
  Attrs broken = counting_loop(5);
  broken.regions[1] = std::make_shared<const Graph>(inner);
  Graph k = g;
  k.add(Op::While, {i, x}, broken, {i32s, f32x4});
  EXPECT_THROW(ir::verify(k), SheafError);
}

TEST(ControlFlow, PassesKeepWhileAndCaseResults) {
  Graph g;
  int32_t x = param(g, f32x4), k = param(g, i32s);
  int32_t zero = scalar(g, DType::I32, 0);
  Attrs loop = counting_loop(5);
  int32_t w1 = g.emit(Op::While, {zero, x}, loop);
  int32_t w2 = g.emit(Op::While, {zero, x}, loop);                 // same regions: merged by CSE
  int32_t w3 = g.emit(Op::While, {zero, x}, counting_loop(5));     // equal but other graphs: kept apart
  g.emit(Op::While, {zero, un(g, Unary::Neg, x)}, loop);           // unused: dropped
  int32_t c = g.emit(Op::Case, {k, w1 + 1, w2 + 1}, three_way());
  int32_t c2 = g.emit(Op::Case, {scalar(g, DType::I32, 1), w3 + 1, x}, three_way());  // known index: still a case
  g.results = {w1, c, w3 + 1, c2};
  std::vector<std::vector<Tensor>> inputs;
  for (double index : {-1.0, 0.0, 1.0, 2.0, 7.0}) inputs.push_back({f32x4_of(1.5), Tensor::scalar(DType::I32, index)});
  for (const Pass& p : pipeline()) expect_same_results(g, p.run(g).value_or(g), inputs);
  Graph out = g;
  EXPECT_LE(optimize(out, nullptr), 3);
  expect_same_results(g, out, inputs);
  EXPECT_EQ(count(out, Op::While), 2u);
  EXPECT_EQ(count(out, Op::Case), 2u);
  EXPECT_EQ(count(body_of(g, 0), Op::Binary), 3u);
  EXPECT_EQ(count(body_of(out, 0), Op::Binary), 2u);  // the region was simplified: x * 1 is gone
  Graph again = out;
  EXPECT_EQ(optimize(again, nullptr), 1);  // region identity is stable: a fixed point at once
  EXPECT_TRUE(same_graph(out, again));
  std::vector<Tensor> r = ref::run(out, inputs[0]);  // index -1 → the last branch: a * b
  EXPECT_EQ(r[0].get(0), 5);
  EXPECT_EQ(r[1].get(0), 48.0 * 48.0);
  EXPECT_EQ(r[3].get(0), 48.0 - 1.5);
}

TEST(ControlFlow, FoldingNeverRunsALoop) {
  Graph g;
  param(g, f32x4);
  int32_t w = g.emit(Op::While, {scalar(g, DType::I32, 0), full(g, f32x4, 3)}, counting_loop(5));
  g.results = {w + 1};
  Graph out = run_checked(fold_constants, g);
  EXPECT_EQ(count(out, Op::While), 1u);
  std::vector<Tensor> args{f32x4_of(0)};
  EXPECT_EQ(ref::run(out, args)[0].get(2), 96);
}

}  // namespace
}  // namespace sheaf::passes
