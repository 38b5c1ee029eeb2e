// tests/unit/merge_heads_test.cpp — backend/merge_heads.cpp: attention heads written one by one
// become one computation over a head axis, with the same results bit for bit under the reference
// executor. Each function is traced, optimised and merged as the CUDA backend does (merge_dots,
// then merge_heads).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "backend/merge_dots.hpp"
#include "backend/merge_heads.hpp"
#include "eval/interp.hpp"
#include "graph_results.hpp"
#include "passes/pipeline.hpp"
#include "trace/tracer.hpp"

namespace sheaf {
namespace {

constexpr const char* kProgram = R"(
(def causal (* (- 1.0 (tril (ones [16 16]))) -1e9))
(defn attend [q k v]
  (let [s (+ (* (cast (@ q (transpose k [0 2 1])) :f32) 0.25) causal)]
    (@ (cast (softmax s :axis -1) :bf16) v)))
;; three heads whose q, k and v are columns of one projection [2 16 3·24]: h·24 + 0, 8, 16
(defn sliced [qkv]
  (concat (map (fn [h] (let [at (* h 24)]
                         (attend (slice qkv at (+ at 8) :axis 2) (slice qkv (+ at 8) (+ at 16) :axis 2)
                                 (slice qkv (+ at 16) (+ at 24) :axis 2))))
               (range 3))
          :axis -1))
(def weights (random-normal 6 [2 16 24]))  ;; the loss weighs each output: a cotangent per head
(defn sliced-vg [qkv w] ((value-and-grad (fn [qkv] (sum (* (cast (sliced qkv) :f32) w)))) qkv))
;; heads as modules: each its own q, k, v weights (products too small for merge_dots to merge)
(defn modules [ws x]
  (concat (map (fn [w] (attend (@ x (get w :q)) (@ x (get w :k)) (@ x (get w :v)))) ws) :axis -1))
(defn modules-vg [ws x w] ((value-and-grad (fn [ws] (sum (* (cast (modules ws x) :f32) w)))) ws))
;; each head's own q, k and v; their gradients joined head by head (dq0 dk0 dv0 dq1 ..), as
;; merge_dots joins them for the input gradient of per-head projections — all heads, heads 1 and 2,
;; and a run that starts and ends inside a head (dv0 .. dq2, as merge_dots cuts a long join by size)
(defn own-heads [p]
  (concat (map (fn [h] (attend (nth (get p :q) h) (nth (get p :k) h) (nth (get p :v) h))) (range 3)) :axis -1))
(defn joined-grads [p w]
  (let [g ((grad (fn [p] (sum (* (cast (own-heads p) :f32) w)))) p)
        at (fn [role h] (nth (get g role) h))]
    [(concat (at :q 0) (at :k 0) (at :v 0) (at :q 1) (at :k 1) (at :v 1) (at :q 2) (at :k 2) (at :v 2) :axis -1)
     (concat (at :q 1) (at :k 1) (at :v 1) (at :q 2) (at :k 2) (at :v 2) :axis -1)
     (concat (at :v 0) (at :q 1) (at :k 1) (at :v 1) (at :q 2) :axis -1)]))
(def per-head (let [one (fn [k] (cast (random-normal k [2 16 8]) :bf16))]
                {:q (map one (list 11 12 13)) :k (map one (list 14 15 16)) :v (map one (list 17 18 19))}))
;; heads with their own projections of a wider x [36 16 192] (3 heads of 64, 576 tokens): merge_dots
;; merges the input gradient's 9 products in runs of 3 (one head's q, k and v each: a longer run
;; would not pay for concatenating the heads' gradients), and their weight gradients over each run
(defn wide-vg [p w]
  ((value-and-grad (fn [p] (sum (* (cast (modules (get p :ws) (get p :x)) :f32) w)))) p))
(def wide (let [one (fn [k] (cast (random-normal k [192 64]) :bf16))]
            {:ws (map (fn [k] {:q (one k) :k (one (+ k 10)) :v (one (+ k 20))}) (list 3 4 5))
             :x (cast (random-normal 7 [36 16 192]) :bf16)}))
(def wide-weights (random-normal 8 [36 16 192]))
;; two attentions, the second reading the first's output: not siblings
(defn chained [qkv]
  (let [q (slice qkv 0 8 :axis 2) k (slice qkv 8 16 :axis 2) v (slice qkv 16 24 :axis 2)]
    (attend (attend q k v) k v)))
(def qkv (cast (random-normal 1 [2 16 72]) :bf16))
(def x (cast (random-normal 2 [2 16 24]) :bf16))
(def ws (map (fn [k] {:q (cast (random-normal k [24 8]) :bf16) :k (cast (random-normal (+ k 10) [24 8]) :bf16)
                      :v (cast (random-normal (+ k 20) [24 8]) :bf16)})
             (list 3 4 5)))
)";

class MergeHeads : public ::testing::Test {
 protected:
  void SetUp() override { in.run_text(kProgram, "<heads>"); }

  // The optimised graph of fn on the program's globals `args`, and the same after merge_dots.
  ir::Graph traced(const char* fn, std::vector<const char*> args) {
    std::vector<Value> values;
    for (const char* a : args) values.push_back(in.global(symbols::intern(a))->value);
    trace::Traced t = trace::trace_call(in, in.global(symbols::intern(fn))->value, values, SrcLoc{}, false);
    passes::optimize(t.graph);
    return fusion::merge_dots(t.graph);
  }

  std::ostringstream out;
  Interp in{out};
};

size_t count(const ir::Graph& g, ir::Op op) {
  return static_cast<size_t>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const ir::Node& n) { return n.op == op; }));
}

// The heads' q, k and v, columns of one tensor at a regular stride, are read where they lie (a
// reshape, slice and transpose of it), the three chains are one over [3, 2, 16, ..] — forward and
// backward —, and the concatenation of their outputs is a transpose of the batched output.
TEST_F(MergeHeads, SlicedHeadsAreOneChainReadInPlace) {
  for (const char* fn : {"sliced", "sliced-vg"}) {
    const ir::Graph g = fn == std::string("sliced") ? traced(fn, {"qkv"}) : traced(fn, {"qkv", "weights"});
    ASSERT_EQ(count(g, ir::Op::Softmax), 3u) << fn;
    const ir::Graph merged = fusion::merge_heads(g);
    testing_support::expect_close_results(g, merged, 0.0);  // the same values
    EXPECT_EQ(count(merged, ir::Op::Softmax), 1u) << ir::print(merged);
    EXPECT_EQ(count(merged, ir::Op::SoftmaxGrad), fn == std::string("sliced") ? 0u : 1u) << ir::print(merged);
    EXPECT_EQ(count(merged, ir::Op::DotGeneral), fn == std::string("sliced") ? 2u : 6u) << ir::print(merged);
    EXPECT_EQ(count(merged, ir::Op::Concatenate), 0u) << ir::print(merged);  // nothing stacked by a copy
    for (const ir::Node& n : merged.nodes)
      if (n.op == ir::Op::Softmax) { EXPECT_EQ(merged.type(n.out).shape, (Shape{3, 2, 16, 16})) << ir::print(merged); }
  }
}

// Heads as modules: their projections (each its own product here) are stacked by a
// concatenation, and the chains still run as one, gradients included.
TEST_F(MergeHeads, ModuleHeadsAreStackedAndRunAsOne) {
  const ir::Graph g = traced("modules-vg", {"ws", "x", "weights"});
  ASSERT_EQ(count(g, ir::Op::Softmax), 3u);
  const ir::Graph merged = fusion::merge_heads(g);
  testing_support::expect_close_results(g, merged, 0.0);  // the same values
  EXPECT_EQ(count(merged, ir::Op::Softmax), 1u) << ir::print(merged);
  EXPECT_EQ(count(merged, ir::Op::SoftmaxGrad), 1u) << ir::print(merged);
  const bool stacked = std::any_of(merged.nodes.begin(), merged.nodes.end(), [&](const ir::Node& n) {
    return n.op == ir::Op::Concatenate && n.attrs.axis == 0 && merged.type(n.out).shape.front() == 3;
  });
  EXPECT_TRUE(stacked) << ir::print(merged);
}

// The heads' gradients joined head by head are one tensor [2, 16, 3 heads, 3, 8] (the three
// gradients padded to their place and summed: the form an AttentionGrad step writes in place), and
// the join of heads 1 and 2 and the run from dv0 to dq2 its slices: none is a concatenation any more.
TEST_F(MergeHeads, GradientsJoinedHeadByHeadAreOneTensor) {
  const ir::Graph g = traced("joined-grads", {"per-head", "weights"});
  ASSERT_EQ(count(g, ir::Op::Concatenate), 3u);  // the three joins (the heads' output is not used)
  const ir::Graph merged = fusion::merge_heads(g);
  testing_support::expect_close_results(g, merged, 0.0);  // the same values
  EXPECT_EQ(count(merged, ir::Op::SoftmaxGrad), 1u) << ir::print(merged);
  for (const ir::Node& n : merged.nodes)  // (the heads' own q, k and v are stacked along a new first axis)
    if (n.op == ir::Op::Concatenate) { EXPECT_EQ(n.attrs.axis, 0) << ir::print(merged); }
  EXPECT_EQ(count(merged, ir::Op::Pad), 3u) << ir::print(merged);
}

// Once the heads' gradients are one join, the products merge_dots merged in runs over them merge
// again, whole, as in the batch-written model: the input gradient d(qkv) [36 16 576] · Wᵀ and
// the weight gradient xᵀ · d(qkv) [192 576].
TEST_F(MergeHeads, ProductsMergedInRunsOverTheHeadsMergeWhole) {
  const ir::Graph g = traced("wide-vg", {"wide", "wide-weights"});
  auto has = [](const ir::Graph& graph, Shape lhs, Shape out) {
    return std::any_of(graph.nodes.begin(), graph.nodes.end(), [&](const ir::Node& n) {
      return n.op == ir::Op::DotGeneral && graph.type(n.in[0]).shape == lhs && graph.type(n.out).shape == out;
    });
  };
  ASSERT_TRUE(has(g, {36, 16, 192}, {36, 16, 192})) << "merge_dots merged the input gradient in runs of 3·64";
  ASSERT_TRUE(has(g, {36, 16, 192}, {192, 192})) << "and the weight gradient";
  ASSERT_FALSE(has(g, {36, 16, 576}, {36, 16, 192}));
  const ir::Graph merged = fusion::merge_heads(g);
  testing_support::expect_close_results(g, merged, 1e-2);  // the gradients sum in another order
  EXPECT_EQ(count(merged, ir::Op::SoftmaxGrad), 1u) << ir::print(merged);
  EXPECT_TRUE(has(merged, {36, 16, 576}, {36, 16, 192})) << ir::print(merged);
  EXPECT_TRUE(has(merged, {36, 16, 192}, {192, 576})) << ir::print(merged);
  EXPECT_FALSE(has(merged, {36, 16, 192}, {36, 16, 192})) << ir::print(merged);  // no run is left
  EXPECT_FALSE(has(merged, {36, 16, 192}, {192, 192})) << ir::print(merged);
}

// A chain that reads another's output is not its sibling: both stay.
TEST_F(MergeHeads, ChainsReadingEachOtherStayApart) {
  const ir::Graph g = traced("chained", {"qkv"});
  ASSERT_EQ(count(g, ir::Op::Softmax), 2u);
  const ir::Graph merged = fusion::merge_heads(g);
  testing_support::expect_close_results(g, merged, 0.0);  // the same values
  EXPECT_EQ(count(merged, ir::Op::Softmax), 2u) << ir::print(merged);
}

}  // namespace
}  // namespace sheaf
