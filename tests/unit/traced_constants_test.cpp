// tests/unit/traced_constants_test.cpp — what the tracer records for constants (trace/recording.hpp):
// equal large constants are one node; a value computed from constants alone (a scalar, its
// broadcast to a shape, a random draw's counters) is recorded once however often a function
// builds it, before any pass runs; and a scalar recorded once keeps its own value when a later
// literal reuses its freed storage.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "backend/ref/executor.hpp"
#include "eval/interp.hpp"
#include "trace/tracer.hpp"

namespace sheaf {
namespace {

// `fn` of the program traced on the global `arg`: the graph before any pass.
ir::Graph traced(Interp& in, const char* fn, const char* arg) {
  const std::vector<Value> args{in.global(symbols::intern(arg))->value};
  return trace::trace_call(in, in.global(symbols::intern(fn))->value, args, SrcLoc{}, false).graph;
}

// A mask each layer builds anew while it is traced, (tril (ones [T T])), is one constant of the
// graph however many layers build it (one upload and one causal scan, not one a layer); a
// different mask is a constant of its own.
TEST(TracedConstants, EqualLargeConstantsAreOneNode) {
  std::ostringstream out;
  Interp in{out};
  in.run_text(R"(
(def x (random-normal 1 [64 64]))
(defn layers [x] (reduce (fn [h i] (* h (tril (ones [64 64])))) x (range 3)))
(defn two-masks [x] (+ (* x (tril (ones [64 64]))) (* x (tril (ones [64 64]) 1))))
)", "<constants>");
  auto constants = [&](const char* fn) {
    const ir::Graph g = traced(in, fn, "x");
    return std::count_if(g.nodes.begin(), g.nodes.end(),
                         [&](const ir::Node& n) { return n.op == ir::Op::Constant && g.type(n.out).shape == Shape{64, 64}; });
  };
  EXPECT_EQ(constants("layers"), 1);
  EXPECT_EQ(constants("two-masks"), 2);
}

// Three normal draws of one shape from a traced key: each builds threefry's round constants, its
// counters (an iota) and their broadcasts to the shape; the trace holds each once. Nothing else
// merges: the draws' keys differ, so their rounds stay three.
TEST(TracedConstants, ValuesOfConstantsAloneAreRecordedOnce) {
  std::ostringstream out;
  Interp in{out};
  in.run_text(R"(
(def key (random-key 7))
(defn draws [key]
  (let [ks (random-split key 3)]
    (reduce + (map (fn [i] (random-normal (nth ks i) [8 8])) (range 3)))))
)", "<draws>");
  const ir::Graph g = traced(in, "draws", "key");
  std::map<std::tuple<DType, double>, int> scalars;       // rank-0 constants by value
  std::map<std::tuple<int32_t, Shape>, int> broadcasts;  // broadcasts of a constant, by operand and shape
  int counters = 0, cosines = 0;
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Constant && n.attrs.value.rank() == 0) ++scalars[{n.attrs.value.dtype(), n.attrs.value.get(0)}];
    if (n.op == ir::Op::BroadcastInDim && g.producer(n.in[0]).op == ir::Op::Constant) ++broadcasts[{n.in[0], g.type(n.out).shape}];
    if (n.op == ir::Op::Iota && g.type(n.out).shape == Shape{64}) ++counters;
    if (n.op == ir::Op::Unary && n.attrs.unary == Unary::Cos) ++cosines;
  }
  ASSERT_FALSE(scalars.empty());
  ASSERT_FALSE(broadcasts.empty());
  for (const auto& [value, count] : scalars) EXPECT_EQ(count, 1) << "constant " << std::get<1>(value);
  for (const auto& [of, count] : broadcasts) EXPECT_EQ(count, 1) << "broadcast of %" << std::get<0>(of);
  EXPECT_EQ(counters, 1);
  EXPECT_EQ(cosines, 3);
}

// A literal equal to a recorded one is that node, and the tensor it came from may be freed; a
// later literal whose storage lands at the freed address is still its own value (the tracer finds
// lifted tensors by their storage's address).
TEST(TracedConstants, ALiteralRecordedOnceKeepsLaterLiteralsApart) {
  const std::vector<Value> args{Value::tensor(Tensor::scalar(DType::F32, 2.0))};
  trace::Traced t = trace::trace_with(args, SrcLoc{}, false, "f", [](std::vector<Value>& sym) {
    Tensor x = binary(Binary::Mul, sym[0].as_tensor(), Tensor::scalar(DType::F32, 0.0));  // 0 · x
    for (double v : {0.0, 0.0, 0.5, 0.25}) x = binary(Binary::Add, x, Tensor::scalar(DType::F32, v));  // each freed after
    return Value::tensor(x);
  });
  ir::verify(t.graph);
  ASSERT_EQ(t.graph.results.size(), 1u);
  EXPECT_EQ(ref::run(t.graph, std::vector<Tensor>{Tensor::scalar(DType::F32, 2.0)})[0].get(0), 0.75);
}

}  // namespace
}  // namespace sheaf
