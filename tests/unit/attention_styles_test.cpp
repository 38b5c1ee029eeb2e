// tests/unit/attention_styles_test.cpp — each way the repository's programs write attention
// reaches the GPU's flash-attention steps: backend/attention.hpp recognises the chain, fusion makes
// it one Attention step, and a training step's backward pass one AttentionGrad step. Each style is
// the program's attention function at a small size (B 2, T 256, d 64, 2 heads of 32: masks too
// large to fold into constants of the scores' shape, as at the benchmarks' sizes), traced as the
// JIT does (passes::optimize, then fusion::fuse for a GPU with bf16 tensor cores):
//   mixed    bench/gpt2_gpu.shf: fused qkv projection, einsum scores, a bool causal mask by
//            `where` -1e9, builtin softmax; bench/gpt_step.shf and examples/gpt/model.shf are the
//            same function without the casts
//   style2   bench/gpt_step_style2.shf: einsum heads on [D H Hd] weights, a float mask compared
//            with `==`, `where` -3e4, [out probs] of which the caller keeps out
//   style3   bench/gpt_step_style3.shf: per-head modules concatenated, `@` with a transposed key,
//            an additive causal bias (0 / -1e9), softmax written out with exp, max and sum
//   style4   bench/gpt_step_style4.shf: one sequence's attention vmapped over the batch, [out in]
//            weights used transposed, heads by reshape and transpose, a 0/1 mask filled with -inf
// The kernel multiplies bf16 (f16) operands and computes the softmax in f32, so a style meets it
// in the mixed precision of gpt2_gpu.shf: bf16 products, the scores cast to f32 for the softmax
// and the probabilities back to bf16 — the casts are the only change to each function. (With a
// bf16 softmax there is no chain.) In f32, as the benchmarks and examples/gpt run (`bf` the
// identity), each style reaches the CPU's attention steps likewise (backend/cpu/attention_code.hpp),
// through the CPU backend's own lowering (cpu::prepare) and no GPU step. A change to softmax, its
// VJP, the prologue or the pass that loses a style fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "eval/interp.hpp"
#include "backend/cpu/program.hpp"
#include "backend/fusion.hpp"
#include "passes/pipeline.hpp"
#include "trace/tracer.hpp"

namespace sheaf {
namespace {

constexpr const char* kProgram = R"(
(use nn)
(def T 256) (def D 64) (def H 2) (def Hd 32)
(defn bf [x] (cast x :bf16))
(defn f32 [x] (cast x :f32))
(defn w [key shape] (bf (* (random-normal key shape) 0.02)))
(def x (bf (random-normal 1 [2 T D])))
(def causal (== (tril (ones [T T])) 1.0))
(def p {:attn {:W (w 2 [D (* 3 D)]) :b (w 3 [(* 3 D)])} :proj {:W (w 4 [D D]) :b (w 5 [D])}})

;; bench/gpt2_gpu.shf; bench/gpt_step.shf and examples/gpt/model.shf are this function in f32
;; (x f32 [B T d], parameters f32 or bf16: every product casts its operands)
(defn mixed-affine [x p] (+ (@ (bf x) (bf (get p :W))) (bf (get p :b))))
(defn mixed-attention [x p]
  (let [[B T d] (shape x)
        hd (// d H)
        qkv (mixed-affine x (get p :attn))
        q (reshape (slice qkv 0 d :axis 2) B T H hd)
        k (reshape (slice qkv d (* 2 d) :axis 2) B T H hd)
        v (reshape (slice qkv (* 2 d) (* 3 d) :axis 2) B T H hd)
        att (* (f32 (einsum "bthd,bshd->bhts" q k)) (/ 1.0 (sqrt hd)))
        att (softmax (where causal att -1e9) :axis -1)
        y (einsum "bhts,bshd->bthd" (bf att) v)]
    (mixed-affine (reshape y B T d) (get p :proj))))
(def x32 (f32 x))

;; bench/gpt_step_style2.shf
(def mask (tril (ones [T T])))
(def p2 {:wq (w 6 [D D]) :wk (w 7 [D D]) :wv (w 8 [D D]) :wo (w 9 [D D])
         :bq (w 10 [D]) :bk (w 11 [D]) :bv (w 12 [D]) :bo (w 13 [D])})
(defn attend [x p]
  (let [heads (fn [w b] (+ (einsum "... t d, d h k -> ... h t k" x (reshape w D H Hd)) (reshape b H 1 Hd)))
        q (heads (get p :wq) (get p :bq))
        k (heads (get p :wk) (get p :bk))
        v (heads (get p :wv) (get p :bv))
        scores (/ (f32 (einsum "... h t k, ... h s k -> ... h t s" q k)) (sqrt Hd))
        probs (softmax (where (== mask 1.0) scores -3e4) :axis -1)
        ctx (einsum "... h t s, ... h s k -> ... h t k" (bf probs) v)
        out (+ (einsum "... h t k, h k d -> ... t d" ctx (reshape (get p :wo) H Hd D)) (get p :bo))]
    [out probs]))
(defn style2-attention [x p] (let [[a _] (attend x p)] a))

;; bench/gpt_step_style3.shf
(def causal-bias (* (- 1.0 (tril (ones [T T]))) -1e9))
(defn dense [key n-in n-out] {:w (w key [n-in n-out]) :b (w (+ key 1) [n-out])})
(def p3 {:heads [{:q (dense 20 D Hd) :k (dense 22 D Hd) :v (dense 24 D Hd)}
                 {:q (dense 26 D Hd) :k (dense 28 D Hd) :v (dense 30 D Hd)}]
         :proj (dense 32 D D)})
(defn apply-dense [p x] (+ (@ x (get p :w)) (get p :b)))
(defn stable-softmax [s]
  (let [e (exp (- s (max s :axis -1 :keepdims)))]
    (/ e (sum e :axis -1 :keepdims))))
(defn head [x h]
  (let [q (apply-dense (get h :q) x)
        k (apply-dense (get h :k) x)
        v (apply-dense (get h :v) x)
        s (+ (* (f32 (@ q (transpose k [0 2 1]))) (/ 1.0 (sqrt Hd))) causal-bias)]
    (@ (bf (stable-softmax s)) v)))
(defn style3-attention [x p]
  (apply-dense (get p :proj) (concat (map (fn [h] (head x h)) (get p :heads)) :axis -1)))

;; one sequence's attention vmapped over the batch, PyTorch-layout [out in] weights
(defn linear [key n-in n-out] {:weight (w key [n-out n-in]) :bias (w (+ key 1) [n-out])})
(def p4 {:q (linear 40 D D) :k (linear 42 D D) :v (linear 44 D D) :o (linear 46 D D)})
(defn lin [p x] (+ (@ x (transpose (get p :weight))) (get p :bias)))
(defn split-heads [x] (transpose (reshape x T H Hd) [1 0 2]))  ;; [T D] → [H T Hd]
(defn one-attention [x p]
  (let [q (split-heads (lin (get p :q) x))
        k (split-heads (lin (get p :k) x))
        v (split-heads (lin (get p :v) x))
        s (/ (f32 (@ q (transpose k [0 2 1]))) (sqrt (float Hd)))
        s (where (== mask 0.0) -inf s)
        o (@ (bf (softmax s :axis -1)) v)]
    (lin (get p :o) (reshape (transpose o [1 0 2]) T D))))
(defn style4-attention [x p] ((vmap one-attention [0 nil]) x p))

;; a training step's gradient of each: (value-and-grad) over the parameters
(defn train [f x p] ((value-and-grad (fn [p] (sum (f32 (f x p))))) p))
(defn mixed-train [x p] (train mixed-attention x p))
(defn style2-train [x p] (train style2-attention x p))
(defn style3-train [x p] (train style3-attention x p))
(defn style4-train [x p] (train style4-attention x p))
)";

struct Style {
  const char* name;  // the forward function; "<prefix>-train" is its training step
  const char* prefix;
  const char* x;
  const char* params;
  size_t chains;   // attention chains: one per einsum over all heads, one per head module
  size_t trained;  // the chains of its training step (each an Attention and an AttentionGrad step)
};

// The numbers of Attention and AttentionGrad steps of `steps`.
std::pair<size_t, size_t> count(const std::vector<fusion::Step>& steps) {
  std::pair<size_t, size_t> n{0, 0};
  for (const fusion::Step& st : steps) {
    n.first += st.kind == fusion::StepKind::Attention;
    n.second += st.kind == fusion::StepKind::AttentionGrad;
  }
  return n;
}

class AttentionStyles : public ::testing::TestWithParam<Style> {
 protected:
  void SetUp() override {
    in.run_text(kProgram, "<attention styles>");
    std::string f32 = kProgram;
    const std::string bf = "(defn bf [x] (cast x :bf16))";
    f32.replace(f32.find(bf), bf.size(), "(defn bf [x] x)");
    in32.run_text(f32, "<attention styles in f32>");
  }

  // The optimised graph of `fn` applied to the style's x and parameters.
  ir::Graph traced(Interp& i, const std::string& fn) {
    const Style& s = GetParam();
    std::vector<Value> args;
    for (const char* a : {s.x, s.params}) args.push_back(i.global(symbols::intern(a))->value);
    trace::Traced t = trace::trace_call(i, i.global(symbols::intern(fn))->value, args, SrcLoc{}, false);
    passes::optimize(t.graph);
    return std::move(t.graph);
  }

  // The GPU schedule of `fn` (mixed precision): how many steps of each kind.
  std::pair<size_t, size_t> attention_steps(const std::string& fn) {
    const passes::Lowered l = passes::lower_composites(traced(in, fn), false);
    return count(fusion::fuse(l.graph, {.gpu = true, .attention = true, .composites = &l.sites}).steps);
  }

  // The CPU backend's schedule of `fn` in f32.
  std::pair<size_t, size_t> cpu_attention_steps(const std::string& fn) { return count(cpu::prepare(traced(in32, fn)).units[0].schedule.steps); }

  std::ostringstream out;
  Interp in{out}, in32{out};
};

TEST_P(AttentionStyles, ForwardIsOneAttentionStepPerChain) {
  const auto [forward, backward] = attention_steps(GetParam().name);
  EXPECT_EQ(forward, GetParam().chains);
  EXPECT_EQ(backward, 0u);
}

TEST_P(AttentionStyles, TrainingStepHasAnAttentionGradStepPerChain) {
  const auto [forward, backward] = attention_steps(std::string(GetParam().prefix) + "-train");
  EXPECT_EQ(forward, GetParam().trained);
  EXPECT_EQ(backward, GetParam().trained);
}

TEST_P(AttentionStyles, F32IsOneAttentionStepPerChainOnTheCpu) {
  EXPECT_EQ(cpu_attention_steps(GetParam().name), std::make_pair(GetParam().chains, size_t{0}));
  EXPECT_EQ(cpu_attention_steps(std::string(GetParam().prefix) + "-train"), std::make_pair(GetParam().trained, GetParam().trained));
}

INSTANTIATE_TEST_SUITE_P(Programs, AttentionStyles,
                         ::testing::Values(Style{"mixed-attention", "mixed", "x32", "p", 1, 1},
                                           Style{"style2-attention", "style2", "x", "p2", 1, 1},
                                           // softmax written out: the op once recognised
                                           Style{"style3-attention", "style3", "x", "p3", 2, 2},
                                           Style{"style4-attention", "style4", "x", "p4", 1, 1}),
                         [](const auto& info) { return std::string(info.param.prefix); });

}  // namespace
}  // namespace sheaf
