// tests/unit/composites_test.cpp — softmax and softmax_grad, gelu and gelu_grad as composite ops
// (tensor/softmax.hpp, tensor/gelu.hpp, ir/composites.hpp, passes/composites.hpp): what the
// traces record, the shape rule, the written-out softmax and GELU recognised before the reverse
// sweep and in the pipeline, and the lowering that expands
// them (sharing nodes with the rest of the graph, and saying where each went). Their values and
// gradients are checked by the golden, grad-check (grad_check_cases.shf softmax; grad2_cases.shf
// softmax-grad, both operands of softmax_grad), vmap (vmap_consistency_cases.shf
// softmax-gradients) and fusion tables; the attention chains around them by
// attention_styles_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "backend/ref/executor.hpp"
#include "base/error.hpp"
#include "eval/interp.hpp"
#include "ir/composites.hpp"
#include "passes/composites.hpp"
#include "passes/pipeline.hpp"
#include "tensor/softmax.hpp"
#include "trace/tracer.hpp"

namespace sheaf {
namespace {

constexpr const char* kProgram = R"(
(def x (random-normal 1 [3 5]))
(def w (random-normal 2 [3 5]))
(defn builtin [x] (softmax x))
(defn written [x] (let [e (exp (- x (max x :axis -1 :keepdims true)))] (/ e (sum e :axis -1 :keepdims true))))
(defn builtin-grad [x w] ((grad (fn [x] (sum (* (builtin x) w)))) x))
(defn written-grad [x w] ((grad (fn [x] (sum (* (written x) w)))) x))
(defn max-after [x] [(softmax x) (max x :axis -1)])
(defn max-before [x] [(max x :axis -1) (softmax x)])
(defn gelu-builtin [x] (gelu x))
(defn gelu-written [x] (* 0.5 x (+ 1.0 (tanh (* 0.7978845608028654 (+ x (* 0.044715 x x x)))))))
(defn gelu-reordered [x] (* (+ (tanh (* (+ (* x x x 0.044715) x) 0.7978845608)) 1) x 0.5))
(defn gelu-written-grad [x w] ((grad (fn [x] (sum (* (gelu-written x) w)))) x))
(defn not-gelu [x] (* 0.5 x (+ 1.0 (tanh (* 0.7978845608028654 (+ x (* 0.05 x x x)))))))
(defn gelu-bf16 [x] (let [x (cast x :bf16)] (* 0.5 x (+ 1.0 (tanh (* 0.7978845608028654 (+ x (* 0.044715 x x x))))))))
)";

std::vector<Tensor> ref_run(const ir::Graph& g, const Tensor& x) { return ref::run(g, std::vector<Tensor>{x}); }

class Composites : public ::testing::Test {
 protected:
  void SetUp() override { in.run_text(kProgram, "<composites>"); }

  Value global(const char* name) { return in.global(symbols::intern(name))->value; }

  // The optimised graph of `fn` on the globals `args`, as the JIT builds it.
  ir::Graph traced(const char* fn, std::vector<const char*> args) {
    std::vector<Value> values;
    for (const char* a : args) values.push_back(global(a));
    trace::Traced t = trace::trace_call(in, global(fn), values, SrcLoc{}, false);
    passes::optimize(t.graph);
    return std::move(t.graph);
  }

  static size_t count(const ir::Graph& g, ir::Op op) {
    return static_cast<size_t>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const ir::Node& n) { return n.op == op; }));
  }

  std::ostringstream out;
  Interp in{out};
};

TEST_F(Composites, SoftmaxIsOneOpRunningItsExpansion) {
  const ir::Graph g = traced("builtin", {"x"});
  EXPECT_EQ(count(g, ir::Op::Softmax), 1u);
  EXPECT_EQ(count(g, ir::Op::Reduce), 0u);
  const Tensor x = global("x").as_tensor();
  const Tensor ran = ref_run(g, x)[0], expanded = softmax_expansion(x, 1).out;
  ASSERT_EQ(ran.numel(), expanded.numel());
  for (int64_t i = 0; i < ran.numel(); ++i) EXPECT_EQ(ran.get(i), expanded.get(i)) << i;  // the same ops, bit for bit
  // and they are softmax: each row's exp(x − max) / Σ exp(x − max), in double here
  const int64_t rows = x.dim(0), cols = x.dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    double m = x.get(r * cols), sum = 0;
    for (int64_t c = 1; c < cols; ++c) m = std::max(m, x.get(r * cols + c));
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(x.get(r * cols + c) - m);
    for (int64_t c = 0; c < cols; ++c) EXPECT_NEAR(ran.get(r * cols + c), std::exp(x.get(r * cols + c) - m) / sum, 1e-6) << r << " " << c;
  }
}

TEST_F(Composites, ItsGradientIsSoftmaxGrad) {
  const ir::Graph g = traced("builtin-grad", {"x", "w"});
  EXPECT_EQ(count(g, ir::Op::Softmax), 1u);
  EXPECT_EQ(count(g, ir::Op::SoftmaxGrad), 1u);
}

// A softmax written out is the op once traced and differentiated: the reverse sweep sees it
// (the max's gradient, zero up to rounding, is not emitted), and the pipeline drops the
// written-out nodes.
TEST_F(Composites, WrittenOutSoftmaxBecomesTheOp) {
  const ir::Graph forward = traced("written", {"x"});
  EXPECT_EQ(count(forward, ir::Op::Softmax), 1u);
  EXPECT_EQ(count(forward, ir::Op::Reduce), 0u);
  const ir::Graph grad = traced("written-grad", {"x", "w"});
  EXPECT_EQ(count(grad, ir::Op::Softmax), 1u);
  EXPECT_EQ(count(grad, ir::Op::SoftmaxGrad), 1u);
  EXPECT_EQ(count(grad, ir::Op::Select), 0u) << ir::print(grad);  // no VJP of the max
  EXPECT_EQ(count(grad, ir::Op::Reduce), 0u) << ir::print(grad);
}

// The lowering expands each composite, merging its nodes with equal nodes of the graph, after it
// (the row max of max-after) or before it (max-before, where the max is then not the expansion's
// own), and records where each went.
TEST_F(Composites, LoweringSharesEqualNodesAndRecordsSites) {
  for (const char* fn : {"max-after", "max-before"}) {
    const ir::Graph g = traced(fn, {"x"});
    ASSERT_EQ(count(g, ir::Op::Softmax), 1u) << fn;
    const passes::Lowered l = passes::lower_composites(g, false);
    EXPECT_EQ(count(l.graph, ir::Op::Softmax), 0u) << fn;
    size_t maxes = 0;
    for (const ir::Node& n : l.graph.nodes) maxes += n.op == ir::Op::Reduce && n.attrs.reduce == Reduce::Max;
    EXPECT_EQ(maxes, 1u) << fn << ir::print(l.graph);
    ASSERT_EQ(l.sites.softmax.size(), 1u) << fn;
    const passes::SoftmaxSite& s = l.sites.softmax[0];
    const bool after = std::string_view(fn) == "max-after";
    EXPECT_EQ(s.out, l.graph.results[after ? 0 : 1]) << fn;
    EXPECT_EQ(l.graph.nodes[static_cast<size_t>(s.row_max)].out, l.graph.results[after ? 1 : 0]) << fn;  // the one max
    EXPECT_EQ(std::binary_search(s.nodes.begin(), s.nodes.end(), s.row_max), after) << fn;  // added by the expansion?
    EXPECT_TRUE(std::binary_search(s.nodes.begin(), s.nodes.end(), s.row_sum)) << fn;
    const Tensor x = global("x").as_tensor();
    const std::vector<Tensor> before = ref_run(g, x), lowered = ref_run(l.graph, x);
    for (size_t r = 0; r < before.size(); ++r)
      for (int64_t i = 0; i < before[r].numel(); ++i) EXPECT_EQ(before[r].get(i), lowered[r].get(i)) << fn << " " << r << " " << i;
  }
}

// A tanh GELU written out, with its products and sums in any order, is the gelu op once traced
// (and its gradient gelu_grad); other constants are not. Its values are the builtin's within an
// ulp (the expansion multiplies in its own order).
TEST_F(Composites, WrittenOutGeluBecomesTheOp) {
  const Tensor x = global("x").as_tensor();
  const std::vector<Tensor> want = ref_run(traced("gelu-builtin", {"x"}), x);
  for (const char* fn : {"gelu-builtin", "gelu-written", "gelu-reordered", "gelu-bf16"}) {
    const ir::Graph g = traced(fn, {"x"});
    EXPECT_EQ(count(g, ir::Op::Gelu), 1u) << fn << ir::print(g);
    EXPECT_EQ(count(g, ir::Op::Unary), 0u) << fn;
    if (std::string_view(fn) == "gelu-bf16") continue;
    const Tensor got = ref_run(g, x)[0];
    for (int64_t i = 0; i < got.numel(); ++i) EXPECT_NEAR(got.get(i), want[0].get(i), 1e-6) << fn << " " << i;
  }
  const ir::Graph grad = traced("gelu-written-grad", {"x", "w"});
  EXPECT_EQ(count(grad, ir::Op::Gelu), 0u) << ir::print(grad);  // only its gradient is returned
  EXPECT_EQ(count(grad, ir::Op::GeluGrad), 1u) << ir::print(grad);
  EXPECT_EQ(count(traced("not-gelu", {"x"}), ir::Op::Gelu), 0u);
}

TEST(CompositeShapeRule, NamesWhatIsWrong) {
  auto fails = [](ir::Op op, std::vector<ir::Type> in, int64_t axis, const char* why) {
    try {
      ir::infer_types(op, in, {.axis = axis});
      ADD_FAILURE() << "accepted: " << why;
    } catch (const SheafError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  fails(ir::Op::Softmax, {{DType::I32, {4}}}, 0, "needs a float operand");
  fails(ir::Op::Softmax, {{DType::F32, {}}}, 0, "rank 1 or more");
  fails(ir::Op::Softmax, {{DType::F32, {4}}}, 1, "axis 1 out of range");
  fails(ir::Op::SoftmaxGrad, {{DType::F32, {4}}, {DType::BF16, {4}}}, 0, "the probabilities' type");
  fails(ir::Op::SoftmaxGrad, {{DType::F32, {4}}}, 0, "expected 2 operand(s)");
  fails(ir::Op::Gelu, {{DType::I32, {4}}}, 0, "needs a float operand");
  fails(ir::Op::GeluGrad, {{DType::F32, {4}}, {DType::BF16, {4}}}, 0, "the cotangent must have the operand's type");
  EXPECT_EQ(ir::infer_types(ir::Op::SoftmaxGrad, {{DType::BF16, {2, 4}}, {DType::BF16, {2, 4}}}, {.axis = 0})[0],
            (ir::Type{DType::BF16, {2, 4}}));
}

}  // namespace
}  // namespace sheaf
