// tests/unit/fusion_test.cpp — what backend/fusion.cpp decides, seen in the schedule (the numbers
// it computes are checked against the reference executor by the fusion cases in
// cpu_fusion_cases.shf). Recomputation: an elementwise value read by a later loop is computed
// again there when its inputs cost at most 1.5× its bytes per point (on the GPU 2× for a value
// read once), so it never gets a buffer —
// softmax over bf16 attention scores keeps no f32 [B H T T] intermediate, for the CPU schedule and
// the GPU one, nor does layer-norm's gradient keep f32 [tokens, features] values between its
// passes; a value whose inputs cost more, or that is read through a view, is written once.
// Row phases: which loops of a GPU schedule may share a kernel.
#include <gtest/gtest.h>

#include <sstream>

#include "backend/canonical_dots.hpp"
#include "backend/fusion.hpp"
#include "backend/loop_code.hpp"
#include "backend/merge_dots.hpp"
#include "backend/merge_heads.hpp"
#include "eval/interp.hpp"
#include "passes/pipeline.hpp"
#include "trace/tracer.hpp"

namespace sheaf {
namespace {

constexpr const char* kProgram = R"(
(use nn)
(def s (cast (random-normal 1 [2 3 64 64]) :bf16))
(def x (random-normal 2 [64 96]))
(def y (random-normal 3 [64 96]))
(def mask (== (tril (ones [64 64])) 1.0))
(defn attn [s] (cast (softmax (where mask (* (cast s :f32) 0.125) -1e9) :axis -1) :bf16))
(defn attn-grad [s] ((grad (fn [s] (sum (cast (attn s) :f32)))) s))
(defn rows-cols [x] (let [e (exp (* x 0.5))] [(sum e :axis 0) (sum e :axis 1)]))
(defn costly [x y] (let [u (cast (* x y) :bf16)] [(sum u :axis 0) (sum u :axis 1)]))
(defn transposed [x y] (let [u (exp (* x y))] [(sum u :axis 1) (* (transpose u) 2.0)]))
(def dy (cast (random-normal 4 [64 96]) :bf16))
(def ln {:gamma (random-normal 5 [96]) :beta (zeros [96])})
(defn ln-grad [x dy p] ((grad (fn [x p] (sum (* (cast dy :f32) (layer-norm x p))))) x p))
(def h (cast (random-normal 7 [64 96]) :bf16))
(defn ln-grad-residual [x h dy p]
  ((grad (fn [x p] (sum (* (cast dy :f32) (layer-norm (+ x (cast h :f32)) p))))) x p))
(def t (random-randint 6 [64] 0 96))
(defn xent [x t] (sparse-cross-entropy x t))
(defn xent-vg [x t] ((value-and-grad (fn [x] (sparse-cross-entropy x t))) x))
(def table (random-normal 7 [50 96]))
(defn embed-grad [table t] ((grad (fn [table] (sum (* (get table t) x)))) table))
(defn placed [x] (dynamic-update-slice (zeros [128 96]) x [32 0]))
(def qkv (cast (random-normal 8 [2 64 3 96]) :bf16))
(defn heads [qkv]
  (let [q (slice qkv 0 32 :axis 3) k (slice qkv 32 64 :axis 3) v (slice qkv 64 96 :axis 3)
        s (* (cast (einsum "bthd,bshd->bhts" q k) :f32) 0.125)]
    (einsum "bhts,bshd->bthd" (cast (softmax (where mask s -1e9) :axis -1) :bf16) v)))
(defn heads-unmasked [qkv]
  (let [q (slice qkv 0 32 :axis 3) k (slice qkv 32 64 :axis 3) v (slice qkv 64 96 :axis 3)]
    (einsum "bhts,bshd->bthd" (cast (softmax (cast (einsum "bthd,bshd->bhts" q k) :f32) :axis -1) :bf16) v)))
(defn heads-grad [qkv] ((grad (fn [qkv] (sum (cast (heads qkv) :f32)))) qkv))
(defn heads-vg [qkv] ((value-and-grad (fn [qkv] (sum (cast (heads qkv) :f32)))) qkv))
(def xin (cast (random-normal 9 [2 64 48]) :bf16))
(def proj {:w (cast (random-normal 10 [48 288]) :bf16) :b (cast (random-normal 11 [288]) :bf16)})
(defn project [p x] (reshape (+ (@ x (get p :w)) (get p :b)) 2 64 3 96))
(defn projected [p x] (heads (project p x)))
(defn projected-vg [p x] ((value-and-grad (fn [p] (sum (cast (projected p x) :f32)))) p))
(defn projected-too [p x] (let [qkv (project p x)] [(heads qkv) qkv]))
(defn joined [x y] (concat x (exp y) (* x 2) :axis 1))
(def w1 (random-normal 12 [96 32]))
(def b1 (random-normal 13 [32]))
(def w2 (random-normal 14 [32 16]))
(defn linear2 [x w1 b1 w2] (@ (+ (@ x w1) b1) w2))
(def lp {:w1 w1 :b1 b1 :w2 w2})
(defn linear2-grad [x p]
  ((grad (fn [p] (let [y (linear2 x (get p :w1) (get p :b1) (get p :w2))] (sum (* y y))))) p))
;; a product's result seen through a reshape, whose rows a product contracts and a sum sums
(def z (random-normal 15 [2 32 16]))
(defn reshaped-rows [x w1 z]
  (let [h (reshape (@ x w1) 2 32 32)] [(sum h :axis [0 1]) (einsum "btf,btg->fg" h z)]))
(defn linear-tanh [x w1 b1] (tanh (+ (@ x w1) b1)))
(defn linear2-bf16 [x w1 b1 w2] (linear2 (cast x :bf16) (cast w1 :bf16) (cast b1 :bf16) (cast w2 :bf16)))
(defn linear-gelu [x w1 b1] (gelu (+ (@ x w1) b1)))
(defn gelu-of-product [x w1] (gelu (@ x w1)))
(defn gelu-and-input [x w1 b1] (let [h (+ (@ x w1) b1)] [(gelu h) (* h 2.0)]))
(defn linear-gelu-grad [x p]
  ((grad (fn [p] (let [y (@ (gelu (+ (@ x (get p :w1)) (get p :b1))) (get p :w2))] (sum (* y y))))) p))
;; attention in another style: q, k, v by einsums on [D H Hd] weights, each with a bias [H 1 Hd]
(def ex (cast (random-normal 16 [4 64 256]) :bf16))
(defn elayer [k] {:w (random-normal k [256 64]) :b (random-normal (+ k 1) [64])})
(def eparams {:q (elayer 17) :k (elayer 19) :v (elayer 21)})
(defn eheads [p x]
  (let [proj (fn [l] (+ (einsum "btd,dhk->bhtk" x (cast (reshape (get l :w) 256 2 32) :bf16))
                        (cast (reshape (get l :b) 2 1 32) :bf16)))
        q (proj (get p :q)) k (proj (get p :k)) v (proj (get p :v))
        s (* (cast (einsum "bhtk,bhsk->bhts" q k) :f32) 0.125)]
    (einsum "bhts,bhsk->bhtk" (cast (softmax (where mask s -1e9) :axis -1) :bf16) v)))
(defn eheads-vg [p x] ((value-and-grad (fn [a] (sum (cast (eheads (get a :p) (get a :x)) :f32)))) {:p p :x x}))
;; and as Hugging Face models write it: separate q, k, v linear layers, heads split by reshape and
;; transpose, scores by @
(defn hheads [p x]
  (let [split (fn [t] (transpose (reshape t 4 64 2 32) [0 2 1 3]))
        proj (fn [l] (split (+ (@ x (cast (get l :w) :bf16)) (cast (get l :b) :bf16))))
        q (proj (get p :q)) k (proj (get p :k)) v (proj (get p :v))
        s (* (cast (@ q (transpose k [0 1 3 2])) :f32) 0.125)]
    (@ (cast (softmax (where mask s -1e9) :axis -1) :bf16) v)))
(defn hheads-vg [p x] ((value-and-grad (fn [a] (sum (cast (hheads (get a :p) (get a :x)) :f32)))) {:p p :x x}))
(defn odd-heads [qkv]
  (let [q (slice qkv 0 24 :axis 3) k (slice qkv 24 48 :axis 3) v (slice qkv 48 72 :axis 3)]
    (einsum "bhts,bshd->bthd" (cast (softmax (cast (einsum "bthd,bshd->bhts" q k) :f32) :axis -1) :bf16) v)))
)";

struct Fused {
  ir::Graph graph;
  fusion::Schedule schedule;
  size_t loops = 0;
  // Values with a buffer written by a loop (not parameters, constants or graph results), as "f32[2x3x64x64]".
  std::vector<std::string> intermediates;
  passes::CompositeSites sites;  // where graph's softmaxes were expanded
};

Fused fuse(Interp& in, const char* fn, std::vector<const char*> args, bool gpu, fusion::FuseOptions o = {}) {
  std::vector<Value> values;
  for (const char* a : args) values.push_back(in.global(symbols::intern(a))->value);
  trace::Traced t = trace::trace_call(in, in.global(symbols::intern(fn))->value, values, SrcLoc{}, false);
  passes::optimize(t.graph);
  passes::Lowered l = passes::lower_composites(t.graph, true);
  Fused f{std::move(l.graph), {}, 0, {}, std::move(l.sites)};
  o.gpu = gpu;
  o.composites = &f.sites;
  f.schedule = fusion::fuse(f.graph, o);
  for (const fusion::Step& st : f.schedule.steps) {
    if (st.kind != fusion::StepKind::Loop) continue;
    ++f.loops;
    for (int32_t v : st.outputs)
      if (std::find(f.graph.results.begin(), f.graph.results.end(), v) == f.graph.results.end())
        f.intermediates.push_back(ir::type_str(f.graph.type(v)));
  }
  return f;
}

// As `fuse`, with the passes a backend runs before fusion (CUDA's: merge_dots, merge_heads,
// canonical_dots), for GetParam()'s schedule with a fused-attention library's options.
Fused fuse_merged(Interp& in, const char* fn, std::vector<const char*> args, bool gpu) {
  std::vector<Value> values;
  for (const char* a : args) values.push_back(in.global(symbols::intern(a))->value);
  trace::Traced t = trace::trace_call(in, in.global(symbols::intern(fn))->value, values, SrcLoc{}, false);
  passes::optimize(t.graph);
  passes::Lowered l = passes::lower_composites(fusion::canonical_dots(fusion::merge_heads(fusion::merge_dots(t.graph))), false);
  Fused f{std::move(l.graph), {}, 0, {}, std::move(l.sites)};
  f.schedule = fusion::fuse(f.graph, {.gpu = gpu, .fold_attention_bias = false, .epilogues = fusion::Epilogues::all(), .composites = &f.sites});
  return f;
}

size_t count(const std::vector<std::string>& xs, const std::string& x) { return static_cast<size_t>(std::count(xs.begin(), xs.end(), x)); }

class Recompute : public ::testing::TestWithParam<bool> {  // GetParam(): a GPU schedule
 protected:
  void SetUp() override { in.run_text(kProgram, "<fusion>"); }
  std::ostringstream out;
  Interp in{out};
};

TEST_P(Recompute, SoftmaxKeepsNoF32ScoresBetweenItsPasses) {
  Fused f = fuse(in, "attn", {"s"}, GetParam());
  // max pass, exp-sum pass, normalising pass; each reads the bf16 scores and recomputes the rest
  EXPECT_EQ(f.loops, 3u);
  EXPECT_EQ(count(f.intermediates, "f32[2x3x64x64]"), 0u) << ir::print(f.graph);
  for (const std::string& t : f.intermediates) EXPECT_EQ(t.find("x64x64"), std::string::npos) << t;
}

TEST_P(Recompute, SoftmaxGradientReadsTheBf16ScoresAgain) {
  Fused f = fuse(in, "attn-grad", {"s"}, GetParam());
  EXPECT_EQ(count(f.intermediates, "f32[2x3x64x64]"), 0u) << ir::print(f.graph);
}

TEST_P(Recompute, AValueReadByTwoReductionsIsComputedInBoth) {
  Fused f = fuse(in, "rows-cols", {"x"}, GetParam());
  EXPECT_EQ(f.loops, 2u);
  EXPECT_EQ(count(f.intermediates, "f32[64x96]"), 0u);
  int recomputed = 0;
  for (const fusion::Step& st : f.schedule.steps) recomputed += static_cast<int>(st.recomputed.size());
  EXPECT_EQ(recomputed, 2);  // exp and the product, in the second reduction's loop
}

TEST_P(Recompute, CostlyInputsOrAViewMeanOneBuffer) {
  // u is bf16 (2 bytes) from two f32 inputs (8 bytes a point): written once, read twice
  Fused costly = fuse(in, "costly", {"x", "y"}, GetParam());
  EXPECT_EQ(count(costly.intermediates, "bf16[64x96]"), 1u);
  // the transpose is a view of u's buffer
  Fused transposed = fuse(in, "transposed", {"x", "y"}, GetParam());
  EXPECT_EQ(count(transposed.intermediates, "f32[64x96]"), 1u);
}

// Layer-norm's gradient: dy·γ·(x − mean)/σ and the like are computed again wherever they are read
// from bf16 dy and f32 x (6 bytes a point; the row statistics and γ come through broadcasts),
// never written as f32 [tokens, features] between the column sums and the row sums.
TEST_P(Recompute, LayerNormGradientKeepsNoF32Intermediates) {
  Fused f = fuse(in, "ln-grad", {"x", "dy", "ln"}, GetParam());
  EXPECT_EQ(count(f.intermediates, "f32[64x96]"), 0u) << ir::print(f.graph);
}

// Layer-norm of a residual sum (f32 x + bf16 h, as in a transformer block): its gradient's values
// come from 8 bytes a point (x, h, dy). The reverse sweep gives the mean, which var computes again,
// one backward pass, so the cotangent of x − μ (dy·γ/σ plus var's part) is read by the row sum of
// the mean's gradient and by the last loop: with two readers it is written (the GPU recomputes a
// value with one reader from up to 2× its bytes, others from 1.5×), on either schedule, in five
// passes over [64, 96] that read and write 40 bytes a point.
TEST_P(Recompute, ResidualLayerNormGradientWritesOneF32Intermediate) {
  Fused f = fuse(in, "ln-grad-residual", {"x", "h", "dy", "ln"}, GetParam());
  EXPECT_EQ(count(f.intermediates, "f32[64x96]"), 1u) << ir::print(f.graph);
  EXPECT_EQ(f.loops, 9u);
}

// The loss sums each row's picked log-probability before the rows: nothing folds the logits'
// rows and classes at once (on a GPU that would be a pass more over the logits). The loss walks
// the logits twice (the pick and the max share a loop: the max of a buffer joins a sibling row
// sum) and its gradient once more.
TEST_P(Recompute, CrossEntropyPicksPerRow) {
  for (auto [fn, walks_wanted] : {std::pair{"xent", 2}, std::pair{"xent-vg", 3}}) {
    Fused f = fuse(in, fn, {"x", "t"}, GetParam());
    int walks = 0;
    for (const fusion::Step& st : f.schedule.steps) {
      if (st.kind != fusion::StepKind::Loop || st.space != Shape{64, 96}) continue;
      EXPECT_NE(st.reduce_dims, (std::vector<int64_t>{0, 1})) << fn;
      ++walks;
    }
    EXPECT_EQ(walks, walks_wanted) << fn << ": " << ir::print(f.graph);
  }
}

// An embedding's gradient (a scatter-add on the GPU) and an update of zeros start from a fill of
// their result: the zeros are never materialised (no Copy of a broadcast), nor copied. (The CPU
// scatters on the host, from a contiguous copy of the zeros.)
TEST_P(Recompute, ZerosToUpdateAreFilledNotWritten) {
  for (auto [fn, args] : {std::pair{"embed-grad", std::vector<const char*>{"table", "t"}}, std::pair{"placed", std::vector<const char*>{"x"}}}) {
    Fused f = fuse(in, fn, args, GetParam());
    const bool on_host = std::string_view(fn) == "embed-grad" && !GetParam();
    size_t starts = 0;
    for (const fusion::Step& st : f.schedule.steps) {
      EXPECT_TRUE(on_host || st.kind != fusion::StepKind::Copy) << fn << ": " << ir::print(f.graph);
      if (st.kind != fusion::StepKind::Scatter && st.kind != fusion::StepKind::Update) continue;
      const ir::Node& n = f.graph.nodes[static_cast<size_t>(st.nodes[0])];
      const fusion::View& x = fusion::read_view(f.schedule, n.in[0], static_cast<int32_t>(&st - f.schedule.steps.data()));
      EXPECT_EQ(fusion::splat_byte(f.graph, x), std::optional<uint8_t>{0}) << fn;
      ++starts;
    }
    EXPECT_EQ(starts, on_host ? 0u : 1u) << fn;
  }
}

// Row phases (GPU schedules only): softmax's sum and normalising loops continue the run its max
// loop starts; so does its gradient's elementwise loop after the row sum, and a cross-entropy's
// gradient loop moves up to the run. A column sum just before a row sum over the same space moves
// after it and continues its run (a column phase: render.hpp). Nothing is a phase in a CPU schedule.
TEST_P(Recompute, RowPhasesOnlyOnTheGpuOverTheSameRows) {
  auto phases = [](const Fused& f) {
    std::string r;
    for (const fusion::Step& st : f.schedule.steps) r += st.kind != fusion::StepKind::Loop ? '-' : st.row_phase ? 'p' : 'L';
    return r;
  };
  EXPECT_EQ(phases(fuse(in, "attn", {"s"}, GetParam())), GetParam() ? "Lpp" : "LLL");
  const std::string grad = phases(fuse(in, "attn-grad", {"s"}, GetParam()));
  EXPECT_EQ(grad.find('p') != std::string::npos, GetParam()) << grad;
  const Fused rows_cols = fuse(in, "rows-cols", {"x"}, GetParam());
  EXPECT_EQ(phases(rows_cols), GetParam() ? "Lp" : "LL");
  EXPECT_EQ(rows_cols.schedule.steps[0].reduce_dims, GetParam() ? std::vector<int64_t>{1} : std::vector<int64_t>{0});
  // the loss's pick and max, sum of exponentials and log: one kernel on the GPU
  const std::string xent = phases(fuse(in, "xent", {"x", "t"}, GetParam()));
  EXPECT_EQ(xent.substr(0, 3), GetParam() ? "Lpp" : "LLL") << xent;
  // its gradient needs only the per-row values: on the GPU it moves up from after the loss's sum
  // over the batch (the last two loops) into the run — one pass more over the logits, not a kernel
  const std::string xent_vg = phases(fuse(in, "xent-vg", {"x", "t"}, GetParam()));
  EXPECT_EQ(xent_vg, GetParam() ? "LpppppLp" : "LLLLLLLL") << xent_vg;
}

// Attention chains (backend/attention.hpp) are one Attention step in a GPU schedule, reading q, k
// and v where they lie in the fused qkv tensor (head dims contiguous, 16-byte aligned): the causal
// mask (a constant tril) is recognised, no mask is none. A training step's backward pass is one
// AttentionGrad step (below); a gradient alone has no chain (nothing reads the forward output, so
// its product is gone), head dims that are not multiples of 16 do not fit the tensor-core steps,
// and a CPU schedule has no Attention step.
std::vector<const fusion::Step*> steps_of(const Fused& f, fusion::StepKind kind) {
  std::vector<const fusion::Step*> r;
  for (const fusion::Step& st : f.schedule.steps)
    if (st.kind == kind) r.push_back(&st);
  return r;
}

TEST_P(Recompute, AttentionChainsAreOneStepOnTheGpu) {
  auto attention = [](const Fused& f) { return steps_of(f, fusion::StepKind::Attention); };
  const Fused masked = fuse(in, "heads", {"qkv"}, GetParam());
  const auto steps = attention(masked);
  ASSERT_EQ(steps.size(), GetParam() ? 1u : 0u);
  if (GetParam()) {
    const fusion::AttentionLayout& a = steps[0]->attention;
    EXPECT_TRUE(a.causal);
    EXPECT_EQ(a.batch, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ((std::vector<int64_t>{a.t, a.s, a.d, a.dv}), (std::vector<int64_t>{64, 64, 32, 32}));
    EXPECT_EQ(a.batch_q, (std::vector<int64_t>{64 * 3 * 96, 96}));
    EXPECT_EQ(a.q_rs, 3 * 96);
    EXPECT_EQ(fusion::read_view(masked.schedule, a.k, static_cast<int32_t>(steps[0] - masked.schedule.steps.data())).offset, 32);
    // the output's only reader transposes it to [b, t, h, d]: the step writes that layout, no copy
    EXPECT_EQ(masked.schedule.steps.size(), 1u);
    EXPECT_EQ(a.out.batch, (std::vector<int64_t>{64 * 3 * 32, 32}));
    EXPECT_EQ((std::vector<int64_t>{a.out.rs, a.out.cs}), (std::vector<int64_t>{3 * 32, 1}));
    EXPECT_FALSE(masked.schedule.has_buffer[a.out.value]);
    ASSERT_EQ(a.prologue.size(), 4u);  // the product's rounding, the convert, the scale, the mask
    EXPECT_EQ(a.prologue[2].kind, fusion::ScoreOp::Kind::Mul);
    EXPECT_EQ(a.prologue[2].c, 0.125);
    EXPECT_EQ(a.prologue[3].kind, fusion::ScoreOp::Kind::Mask);
  }
  const Fused plain = fuse(in, "heads-unmasked", {"qkv"}, GetParam());
  const auto unmasked = attention(plain);
  ASSERT_EQ(unmasked.size(), GetParam() ? 1u : 0u);
  if (GetParam()) {
    EXPECT_EQ(unmasked[0]->attention.mask, -1);
  }
  EXPECT_TRUE(attention(fuse(in, "heads-grad", {"qkv"}, GetParam())).empty());
  EXPECT_TRUE(attention(fuse(in, "odd-heads", {"qkv"}, GetParam())).empty());
  // a GPU without bf16 tensor cores (sm_75) gets no Attention step
  EXPECT_TRUE(attention(fuse(in, "heads", {"qkv"}, GetParam(), {.attention = false})).empty());
  // a loop body's parameter may start anywhere: q, k and v are copied before the step reads them
  const Fused body = fuse(in, "heads", {"qkv"}, GetParam(), {.aligned_params = false});
  const auto copied = attention(body);
  ASSERT_EQ(copied.size(), GetParam() ? 1u : 0u);
  if (GetParam()) {
    const int32_t at = static_cast<int32_t>(copied[0] - body.schedule.steps.data());
    for (int32_t v : {copied[0]->attention.q, copied[0]->attention.k, copied[0]->attention.v}) {
      const fusion::View w = fusion::read_view(body.schedule, v, at);
      EXPECT_NE(body.graph.producer(w.buffer).op, ir::Op::Parameter);
      EXPECT_EQ(w.offset, 0);
    }
  }
}

// A training step's attention (value and gradient): the Attention step also writes softmax's row
// max and sum, and the backward pass our VJP rules emit is one AttentionGrad step after it, reading
// those, the forward output and dO (the sum's cotangent, copied: its head dim is not contiguous),
// writing dQ, dK and dV into their concatenation d(qkv) — none of the [.., T, S] gradients
// reaches memory.
TEST_P(Recompute, AttentionGradientIsOneStepOnTheGpu) {
  const Fused vg = fuse(in, "heads-vg", {"qkv"}, GetParam());
  const auto forward = steps_of(vg, fusion::StepKind::Attention), backward = steps_of(vg, fusion::StepKind::AttentionGrad);
  ASSERT_EQ(forward.size(), GetParam() ? 1u : 0u);
  ASSERT_EQ(backward.size(), GetParam() ? 1u : 0u);
  if (!GetParam()) return;
  const fusion::AttentionLayout &f = forward[0]->attention, &b = backward[0]->attention;
  EXPECT_LT(forward[0], backward[0]);
  ASSERT_GE(f.row_max, 0);
  EXPECT_EQ(vg.graph.type(f.row_max).shape, (Shape{2, 3, 64}));
  EXPECT_EQ(vg.graph.type(f.row_sum).shape, (Shape{2, 3, 64}));
  EXPECT_EQ(b.row_max, f.row_max);
  EXPECT_EQ(b.out.value, f.out.value);
  EXPECT_TRUE(b.causal);
  EXPECT_EQ(b.do_rs % 8, 0);
  const auto grad_step = static_cast<int32_t>(backward[0] - vg.schedule.steps.data());
  int64_t column = 0;
  for (const auto& o : {b.grad_q, b.grad_k, b.grad_v}) {
    ASSERT_GE(o.value, 0);
    EXPECT_EQ(vg.schedule.step_of[o.value], grad_step);
    // each goes back to [b, t, h, d] by a transpose and into d(qkv) by a pad (the gradient of the
    // slice), the three pads summed: written in place there (head dim contiguous, rows 3·96
    // apart, at columns 0, 32, 64 of d(qkv)'s [.., 3, 96] rows), no copy, no sum
    EXPECT_FALSE(vg.schedule.has_buffer[o.value]);
    const fusion::View& w = *vg.schedule.view[o.value];
    EXPECT_EQ(vg.graph.type(w.buffer).shape, (Shape{2, 64, 3, 96}));
    EXPECT_EQ(vg.schedule.step_of[w.buffer], grad_step);
    EXPECT_EQ((std::vector<int64_t>{o.rs, o.cs}), (std::vector<int64_t>{3 * 96, 1}));
    EXPECT_EQ(o.offset, column);
    column += 32;
  }
  EXPECT_EQ(vg.loops, 1u);  // the loss's sum; no loop adds the pads
  // no buffer of the scores' shape but the (constant) mask: the [2, 3, 64, 64] gradients stay in the kernels
  for (size_t v = 0; v < vg.graph.types.size(); ++v)
    EXPECT_FALSE(vg.schedule.has_buffer[v] && vg.graph.types[v].shape == (Shape{2, 3, 64, 64}) &&
                 vg.graph.producer(static_cast<int32_t>(v)).op != ir::Op::Constant)
        << "value " << v << " " << ir::op_name(vg.graph.producer(static_cast<int32_t>(v)).op);
}

// q, k and v sliced from a projection with a bias, x·W + b, that nothing else reads: the Attention
// step (and the AttentionGrad step of a training step) read the product x·W and add b as they load
// (AttentionLayout::Bias, over rows of 288), and no loop writes x·W + b. Returned as well, it is
// written and read as it is.
TEST_P(Recompute, AttentionAddsAProjectionsBiasAsItLoads) {
  for (const char* fn : {"projected", "projected-vg"}) {
    const Fused f = fuse(in, fn, {"proj", "xin"}, GetParam());
    EXPECT_EQ(count(f.intermediates, "bf16[2x64x288]"), GetParam() ? 0u : 1u) << fn;
    if (!GetParam()) continue;
    auto steps = steps_of(f, fusion::StepKind::Attention);
    const auto grads = steps_of(f, fusion::StepKind::AttentionGrad);
    steps.insert(steps.end(), grads.begin(), grads.end());
    ASSERT_EQ(steps.size(), fn == std::string("projected") ? 1u : 2u) << fn;
    for (const fusion::Step* st : steps) {
      const fusion::AttentionLayout& a = st->attention;
      for (const fusion::AttentionLayout::Bias& b : {a.bias_q, a.bias_k, a.bias_v}) {
        ASSERT_GE(b.value, 0) << fn;
        EXPECT_EQ(f.graph.type(b.value).shape, (Shape{288}));
        EXPECT_EQ(b.row, 288);
      }
      const auto at = static_cast<int32_t>(st - f.schedule.steps.data());
      const int32_t product = fusion::read_view(f.schedule, a.q, at).buffer;
      EXPECT_EQ(f.graph.producer(product).op, ir::Op::DotGeneral) << fn;
      EXPECT_EQ(fusion::read_view(f.schedule, a.k, at).offset, 32);
    }
  }
  const Fused both = fuse(in, "projected-too", {"proj", "xin"}, GetParam());
  for (const fusion::Step* st : steps_of(both, fusion::StepKind::Attention)) EXPECT_EQ(st->attention.bias_q.value, -1);
}

// The products add a bias row read only by other products as they finish (DotLayout::bias; a
// GPU's cuBLASLt bias epilogue, the CPU's rt->sgemm_bias): in f32 wherever that holds, on a GPU in
// bf16 too for the projection that attention chains alone read and no Attention step folds (a
// fused-attention library's). Never where a loop reads the sum (it adds the bias as it loads).
TEST_P(Recompute, ProductsAddABiasRowOnlyProductsRead) {
  auto biased = [&](const char* fn, std::vector<const char*> args, fusion::FuseOptions o) {
    o.epilogues = fusion::Epilogues::all();
    const Fused f = fuse(in, fn, std::move(args), GetParam(), o);
    std::vector<std::string> sums;  // the types of the sums the products compute
    for (const fusion::Step* st : steps_of(f, fusion::StepKind::Dot)) {
      if (st->dot.bias < 0) continue;
      EXPECT_EQ(st->nodes.size(), 2u) << fn;
      EXPECT_EQ(f.graph.type(st->dot.bias).shape.back(), st->dot.n) << fn;
      EXPECT_EQ(st->outputs, std::vector<int32_t>{fusion::dot_result(f.graph, *st)}) << fn;
      sums.push_back(ir::type_str(f.graph.type(fusion::dot_result(f.graph, *st))));
    }
    return sums;
  };
  const bool gpu = GetParam();
  const std::vector<std::string> none, f32_sum{"f32[64x32]"}, projection{"bf16[2x64x288]"};
  EXPECT_EQ(biased("linear2", {"x", "w1", "b1", "w2"}, {}), f32_sum);
  EXPECT_EQ(biased("linear2-grad", {"x", "lp"}, {}), f32_sum);
  EXPECT_EQ(biased("linear-tanh", {"x", "w1", "b1"}, {}), none);
  EXPECT_EQ(biased("linear2-bf16", {"x", "w1", "b1", "w2"}, {.fold_attention_bias = false}), none);
  for (const char* fn : {"projected", "projected-vg"}) {
    EXPECT_EQ(biased(fn, {"proj", "xin"}, {.fold_attention_bias = false}), gpu ? projection : none) << fn;
    EXPECT_EQ(biased(fn, {"proj", "xin"}, {}), none) << fn;  // the Attention step adds it as it loads
  }
}

// The products of a GPU schedule that contract an operand's rows also sum them (DotLayout::
// row_sum, cuBLASLt's bias-gradient epilogue) where the operand is in memory whatever runs (a
// product's result: dh of a dense layer, whose bias's gradient sums it) and no loop could sum it
// as it computes it; never on the CPU.
TEST_P(Recompute, ProductsSumTheRowsTheyContract) {
  fusion::FuseOptions o;
  o.epilogues = fusion::Epilogues::all();
  const Fused f = fuse(in, "linear2-grad", {"x", "lp"}, GetParam(), o);
  std::vector<std::string> sums;
  for (const fusion::Step* st : steps_of(f, fusion::StepKind::Dot)) {
    if (st->dot.row_sum < 0) continue;
    EXPECT_EQ(st->nodes.size(), 2u);
    EXPECT_EQ(f.graph.type(st->dot.row_sum).shape, (Shape{st->dot.row_sum_of_a ? st->dot.m : st->dot.n}));
    sums.push_back(ir::type_str(f.graph.type(st->dot.row_sum)));
  }
  // b1's gradient sums dh = dy·w2ᵀ (a product); b2 has none; dy = 2y is a loop's, which sums it
  EXPECT_EQ(sums, GetParam() ? std::vector<std::string>{"f32[32]"} : std::vector<std::string>{});
  // a reshape of a product's result is that result's memory (merged heads' d(qkv) is one)
  const Fused r = fuse(in, "reshaped-rows", {"x", "w1", "z"}, GetParam(), o);
  size_t reshaped = 0;
  for (const fusion::Step* st : steps_of(r, fusion::StepKind::Dot)) reshaped += st->dot.row_sum >= 0;
  EXPECT_EQ(reshaped, GetParam() ? 1u : 0u) << ir::print(r.graph);
}

// Attention written with einsum projections on [D H Hd] weights, each with its bias [H 1 Hd]
// (bench/gpt2_gpu.shf --einsum), or with separate q, k, v linear layers whose heads are split by
// reshape and transpose, runs on a GPU as the batch-written form does: one q, k, v product
// whose epilogue adds the biases' [3H Hd] concatenation (the Attention step reads q, k and v from
// it, transposed); the AttentionGrad step writes dq, dk, dv into the concatenation that the input
// and weight gradients read (no copy); the weight gradient's product sums that concatenation's
// rows over b and t (the biases' gradients, [3H Hd]), and the three weights' gradients are views
// of its result. On the CPU none of the epilogues.
TEST_P(Recompute, SeparateProjectionsRunAsTheBatchWrittenForm) {
  // einsum projections: the bias row [3H Hd], d(qkv) [b t 3H Hd]; Hugging Face's linear layers:
  // the bias row [3D], d(qkv) [b t 3D] (each gradient transposed and reshaped into it)
  struct Form {
    const char* fn;
    std::string row, dqkv;
    std::vector<std::string> copies;  // what no loop may write
  };
  for (const Form& form : {Form{"eheads-vg", "bf16[6x32]", "bf16[4x64x6x32]", {"bf16[256x2x32]", "bf16[256x64]"}},
                           Form{"hheads-vg", "bf16[192]", "bf16[4x64x192]", {"bf16[256x64]"}}}) {
    const Fused f = fuse_merged(in, form.fn, {"eparams", "ex"}, GetParam());
    std::vector<std::string> biases, row_sums;
    for (const fusion::Step* st : steps_of(f, fusion::StepKind::Dot)) {
      if (st->dot.bias >= 0) biases.push_back(ir::type_str(f.graph.type(f.graph.producer(st->dot.bias).in[0])));
      if (st->dot.row_sum >= 0) row_sums.push_back(ir::type_str(f.graph.type(st->dot.row_sum)));
    }
    const bool gpu = GetParam();
    EXPECT_EQ(biases, gpu ? std::vector<std::string>{form.row} : std::vector<std::string>{}) << form.fn << ir::print(f.graph);
    EXPECT_EQ(row_sums, gpu ? std::vector<std::string>{form.row} : std::vector<std::string>{}) << form.fn << ir::print(f.graph);
    const auto grads = steps_of(f, fusion::StepKind::AttentionGrad);
    ASSERT_EQ(grads.size(), gpu ? 1u : 0u) << form.fn;
    if (!gpu) continue;
    const fusion::AttentionLayout& b = grads[0]->attention;
    for (const auto& o : {b.grad_q, b.grad_k, b.grad_v}) {
      ASSERT_GE(o.value, 0) << form.fn;
      EXPECT_FALSE(f.schedule.has_buffer[o.value]) << form.fn;
      const fusion::View& w = *f.schedule.view[o.value];
      EXPECT_EQ(f.graph.producer(w.buffer).op, ir::Op::Concatenate) << form.fn;
      EXPECT_EQ(ir::type_str(f.graph.type(w.buffer)), form.dqkv) << form.fn;
    }
    // no loop copies the gradients into their concatenation, nor the merged weight gradient into
    // the three weights' (each is a view of it: its rows 64 columns of 192, which the loops
    // casting the gradients to f32 read)
    std::vector<std::string> copies = form.copies;
    copies.push_back(form.dqkv);
    for (const fusion::Step* st : steps_of(f, fusion::StepKind::Loop))
      for (int32_t v : st->outputs)
        for (const std::string& copied : copies) EXPECT_NE(ir::type_str(f.graph.type(v)), copied) << form.fn;
  }
}

// GELU after a product (and its bias) and GELU's gradient before one are the products' GELU
// epilogues in a GPU schedule (DotLayout::act, cuBLASLt's GELU_BIAS, GELU_AUX_BIAS and DGELU):
// the product writes GELU's result, and its input too (aux) when something else reads that —
// the gradient's product, which reads it back, or a loop; no loop computes GELU or its
// derivative. b1's gradient sums the rows of the gradient's product (DotLayout::row_sum). Never
// on the CPU.
TEST_P(Recompute, ProductsApplyGeluAndItsGradient) {
  fusion::FuseOptions o;
  o.epilogues = fusion::Epilogues::all();
  // per Dot step with GELU: "gelu" / "gelu+bias" / "gelu+aux" / "gelu'", then the loops' unary ops
  auto acts = [&](const char* fn, std::vector<const char*> args) {
    const Fused f = fuse(in, fn, std::move(args), GetParam(), o);
    std::vector<std::string> r;
    for (const fusion::Step* st : steps_of(f, fusion::StepKind::Dot)) {
      const fusion::DotLayout& d = st->dot;
      if (d.act == fusion::DotLayout::Act::None) continue;
      EXPECT_EQ(fusion::dot_result(f.graph, *st), d.act_out) << fn;
      EXPECT_EQ(d.n % 8, 0) << fn;
      if (d.act == fusion::DotLayout::Act::GeluGrad) {
        r.push_back("gelu'");
        EXPECT_EQ(st->outputs, std::vector<int32_t>{d.act_out}) << fn;  // the product itself is not written
        continue;
      }
      r.push_back(std::string("gelu") + (d.bias >= 0 ? "+bias" : "") + (d.aux >= 0 ? "+aux" : ""));
      EXPECT_EQ(st->outputs.size(), d.aux >= 0 ? 2u : 1u) << fn;
    }
    for (const fusion::Step* st : steps_of(f, fusion::StepKind::Loop))
      for (int32_t ni : st->nodes)
        if (f.graph.nodes[static_cast<size_t>(ni)].op == ir::Op::Unary) r.push_back(std::string(ir::unary_name(f.graph.nodes[static_cast<size_t>(ni)].attrs.unary)));
    size_t sums = 0;
    for (const fusion::Step* st : steps_of(f, fusion::StepKind::Dot)) sums += st->dot.row_sum >= 0;
    if (sums) r.push_back(fmt::format("{} row sums", sums));
    return r;
  };
  using V = std::vector<std::string>;
  const bool gpu = GetParam();
  EXPECT_EQ(acts("linear-gelu", {"x", "w1", "b1"}), gpu ? V{"gelu+bias"} : V{"tanh"});
  EXPECT_EQ(acts("gelu-of-product", {"x", "w1"}), gpu ? V{"gelu"} : V{"tanh"});
  EXPECT_EQ(acts("gelu-and-input", {"x", "w1", "b1"}), gpu ? V{"gelu+bias+aux"} : V{"tanh"});
  const V trained{"gelu+bias+aux", "gelu'", "1 row sums"};
  EXPECT_EQ(acts("linear-gelu-grad", {"x", "lp"}), gpu ? trained : V({"tanh", "tanh"}));  // the gradient's loop computes t again
  // each kind can be left out (SHEAF_CUDA_EPILOGUES): loops then compute GELU and its derivative
  // (and b1's gradient, summing a loop's result, with them), or sum the rows
  o.epilogues.gelu = false;
  EXPECT_EQ(acts("linear-gelu-grad", {"x", "lp"}), V({"tanh", "tanh"}));
  o.epilogues = fusion::Epilogues::all();
  o.epilogues.row_sums = false;
  EXPECT_EQ(acts("linear-gelu-grad", {"x", "lp"}), gpu ? V({"gelu+bias+aux", "gelu'"}) : V({"tanh", "tanh"}));
}

// A concatenation: in a CPU schedule one Copy step per operand, each writing its region of the
// result's buffer (the first places it); a GPU schedule computes it in a loop.
TEST_P(Recompute, ConcatenationIsACopyPerOperandOnTheCpu) {
  const Fused f = fuse(in, "joined", {"x", "y"}, GetParam());
  const auto copies = steps_of(f, fusion::StepKind::Copy);
  if (GetParam()) {
    EXPECT_TRUE(copies.empty());
    return;
  }
  ASSERT_EQ(copies.size(), 3u);
  const int32_t out = f.graph.results[0];
  for (size_t j = 0; j < copies.size(); ++j) {
    ASSERT_TRUE(copies[j]->into.has_value());
    EXPECT_EQ(copies[j]->into->buffer, out);
    EXPECT_EQ(copies[j]->into->offset, static_cast<int64_t>(96 * j));
    EXPECT_EQ(copies[j]->into->strides, (std::vector<int64_t>{288, 1}));
    EXPECT_EQ(copies[j]->space, (Shape{64, 96}));
    EXPECT_EQ(copies[j]->outputs, j == 0 ? std::vector<int32_t>{out} : std::vector<int32_t>{});
  }
  EXPECT_EQ(f.schedule.steps[static_cast<size_t>(f.schedule.step_of[out])].into->offset, 0);
}

INSTANTIATE_TEST_SUITE_P(Schedules, Recompute, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "gpu" : "cpu"; });

}  // namespace
}  // namespace sheaf

namespace sheaf {
namespace {

// Two renders of one layer differ only in their name, slots, value ids and comments; canonical
// text is what the renderers compare to keep one of them.
TEST(LoopCode, CanonicalTextNumbersNamesInOrderOfFirstUse) {
  const std::string a =
      "void s12(float* p7, const float* p3) {  // layer 1\n"
      "  float v40 = p3[i], a41 = 0; a41 += v40 * v40; p7[i] = a41 + p3[i]; s12(p7, p3); q2 = h9 + k1 + n4;\n"
      "}\n";
  const std::string b =
      "void s99(float* p1, const float* p8) {  // layer 2\n"
      "  float v5 = p8[i], a6 = 0; a6 += v5 * v5; p1[i] = a6 + p8[i]; s99(p1, p8); q7 = h3 + k0 + n2;\n"
      "}\n";
  EXPECT_EQ(loop_code::canonical(a, "s12"), loop_code::canonical(b, "s99"));
  EXPECT_EQ(loop_code::canonical(a, "s12"),
            "void (float* p0, const float* p1) {  \n"
            "  float v0 = p1[i], a0 = 0; a0 += v0 * v0; p0[i] = a0 + p1[i]; (p0, p1); q0 = h0 + k0 + n0;\n"
            "}\n");
  // what only looks like a numbered name stays: inside a word, or followed by a word character
  EXPECT_EQ(loop_code::canonical("x = pv1 + p2x + expf(v3) + _a4 + n5_; s1s(1);", "s1"), "x = pv1 + p2x + expf(v0) + _a4 + n5_; s1s(1);");
  // renamed consistently it is the same computation; a name read in another place is another one
  EXPECT_EQ(loop_code::canonical("p1[i] = p2[i] + p1[i];", "f"), loop_code::canonical("p2[i] = p1[i] + p2[i];", "g"));
  EXPECT_NE(loop_code::canonical("p1[i] = p2[i] + p1[i];", "f"), loop_code::canonical("p1[i] = p2[i] + p2[i];", "f"));
}

// A sum over dims on both sides of a kept one, the innermost reduced ([N C HW] over N and HW),
// runs with the kept dim outside; nests whose sums already trail, or whose innermost dim is
// kept (a column sum), stay as they are.
TEST(LoopNest, KeptDimsMoveOutsideReducedOnes) {
  const std::vector<std::vector<int64_t>> access{{16 * 784, 784, 1}};
  loop_code::Nest bias(Shape{64, 16, 784}, {true, false, true}, access);
  ASSERT_TRUE(bias.kept_outside());
  EXPECT_EQ(bias.sizes, (std::vector<int64_t>{16, 64, 784}));
  EXPECT_EQ(bias.reduced, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(bias.groups, (std::vector<std::vector<size_t>>{{1}, {0}, {2}}));
  EXPECT_EQ(bias.axis_index(0), "i1");
  loop_code::Nest rows(Shape{64, 16, 784}, {false, false, true}, access);
  EXPECT_FALSE(rows.kept_outside());
  loop_code::Nest columns(Shape{64, 16, 784}, {true, true, false}, access);
  EXPECT_FALSE(columns.kept_outside());
  EXPECT_EQ(columns.sizes, (std::vector<int64_t>{64 * 16, 784}));
}

}  // namespace
}  // namespace sheaf
