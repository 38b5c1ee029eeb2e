// backend/fusion.hpp — fusion grouping: partitions an optimised graph into the steps a native
// backend runs in order (the CPU backend renders each step as C++).
//   Loop  one loop nest over an iteration space: elementwise nodes (unary, binary, convert,
//         select, iota; pad reads its operand only inside the bounds; gather, concatenate (GPU
//         schedules) and dynamic_slice read theirs at computed positions) computed at every point, optionally
//         followed by reductions over the same space that fold one set of dims; operands from
//         outside are read through views
//   Copy  a loop that materialises one view into a contiguous buffer — or, in CPU schedules, into
//         its region of a concatenation's buffer: a concatenation there is one Copy per operand
//         (each point read once, from one operand; a loop would read every operand at each point)
//   Dot   dot_general as (batched) matrix products, operands read through strided views
//   Update dynamic_update_slice: x (contiguous) copied into the result's buffer — skipped when the
//         backend gives the result x's own buffer (in place); a fill when x is a splat_byte —
//         then a loop over the update's space writes each point at the clamped starts
//   While a `while` node: its regions run as programs of their own (the backend renders them)
//         over contiguous carried buffers; a carried value the body passes through unchanged
//         (a loop invariant) is not copied: the node's result is a view of the operand
//   Host  any other node, run by the reference kernels on the host
// Recomputation: an elementwise value that a later loop reads is computed again in that loop
// (with the elementwise nodes it depends on, back to values with buffers) instead of being
// written to a buffer and read back, when those inputs cost at most 1.5× the value's bytes per
// point (softmax's shifted scores and exponentials are recomputed from the bf16 scores
// rather than stored in f32 for the next pass) — in GPU schedules up to 2× for a value read once.
// Sibling reductions: a reduction that would start a loop of its own (its operand read from a
// buffer, or computed by a loop of elementwise nodes nothing has read yet) joins the latest loop
// over the same space that already folds the same dims and can read the operand there — a
// cross-entropy's pick of the target's logit and the row max walk the logits once (CPU
// schedules: only f32 reductions join loops of f32 ones, which stay SIMD).
// Row phases (GPU schedules): consecutive loops over one space whose reductions all fold the same
// innermost dims (the rows) and that read what earlier ones of them wrote only at their own row
// — softmax's max, sum of exponentials and normalisation, layer-norm's mean, variance and
// scaling — are marked `row_phase` after the first: a GPU backend may run them as phases of one
// kernel of a block per row (a barrier between phases; the row, read again, comes from cache).
// A loop over the run's space whose reductions fold every dim but the rows (a column sum: a bias
// or layer-norm gain gradient) continues it too; no phase of the run reads such a sum (it is
// complete only after the run). A loop that would continue such a run a few steps after its end,
// reading nothing those steps write, moves up to it (a cross-entropy's logit gradient, after the
// loss's sum over the batch); a column sum just before the run's first loop moves after it when
// that loop does not read it.
// The memory plan keeps every buffer such a run touches alive until its last step.
// Views: broadcast_in_dim, transpose, reshape, slice, reverse and optimization_barrier never run;
// they become a View
// (buffer + offset + one stride per dim, stride 0 for broadcast axes) read by the steps that
// consume them. A value has a buffer when it is a parameter, a constant or a step output; a
// value computed inside a loop gets one only when something outside the loop reads it.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/ir.hpp"
#include "backend/attention.hpp"
#include "passes/composites.hpp"

namespace sheaf::fusion {

// Element (i0, .., ir-1) of a value lives at buffer[offset + Σ strides[d]·id] (elements of the
// buffer's dtype).
struct View {
  int32_t buffer = -1;  // value id owning the memory
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// Scatter (GPU schedules only): out = x with updates added at their indices — x copied into out's
// buffer, then the updates added one thread per update point (atomically). `space` is the
// updates' shape.
// TopK (GPU schedules only): the first k elements of x along one axis in arg_reduce's order (NaN,
// then the larger value — the smaller for argmin —, then the smaller index) into contiguous
// buffers, x read through its view: top_k with k ≤ 64 (values and i32 indices, the last axis) or
// arg_reduce (k = 1, the index only, attrs.axis). `space` is x's shape.
// Attention (GPU schedules only): the chain of an AttentionMatch (attention.hpp) as one
// step, `nodes` all of its nodes; only its last product's value is written (Out, below) — and,
// when the chain has an AttentionGrad, softmax's row max and sum.
// AttentionGrad (GPU schedules only): that gradient as one step (`nodes` its nodes), placed at
// its first node (everything it reads is ready there; what reads its results comes later): dQ,
// dK and dV from q, k, v, the mask, dO, the forward's output and row values.
enum class StepKind : uint8_t { Loop, Copy, Dot, While, Host, Scatter, Update, TopK, Attention, AttentionGrad };

// dot_general as products of matrices: for every batch index b (row-major over `batch`),
// out[b] (m×n, contiguous) = A_b (m×k) · B_b (k×n), where A_b's element (r, c) is at
// lhs.buffer[lhs.offset + Σ batch_lhs[i]·b_i + r·a_rs + c·a_cs] and likewise for B.
struct DotLayout {
  std::vector<int64_t> batch, batch_lhs, batch_rhs;
  int64_t m = 1, n = 1, k = 1;
  int64_t a_rs = 0, a_cs = 0, b_rs = 0, b_cs = 0;
  // Epilogues::bias (GPU and CPU): the step is dot_general plus a bias — its nodes are the
  // product and the add reading it, its output the add's — and `bias` (value id, −1: none) is the
  // add's other operand: a row read through read_view with stride 0 on every dim but the last
  // (stride 1, n elements, 16-byte aligned). Element (r, col) of the result is the product's f32
  // sum plus bias[col], rounded once to the result's type (the graph rounds the product first);
  // the CPU's BLAS adds its partial sums onto the bias, so where it splits the contraction into
  // blocks the f32 result may differ from the graph's in the last bits, as a product's own sum may.
  int32_t bias = -1;
  // GPU (Epilogues::row_sums): the step also sums an operand over the rows it contracts (a
  // bias's gradient: cuBLASLt's bias-gradient epilogue) — its nodes are the product and a
  // reduce_sum of that operand over every dim but its last, which are the dims the product
  // contracts — and `row_sum` (value id, −1: none) is the reduce's result, which the step writes:
  // b's sum ([n]), or a's ([m]) when `row_sum_of_a`. Summed in f32 and rounded once, as the reduce.
  int32_t row_sum = -1;
  bool row_sum_of_a = false;
  // GPU (Epilogues::gelu): the step also applies GELU, cuBLASLt's GELU epilogues
  // (the gelu and gelu_grad composites' sites: passes/composites.hpp), without batch dims, to a
  // result of n a multiple of 8 elements a row:
  //   Gelu      the step writes act_out = gelu(the product's f32 sum [+ bias]), rounded once, and
  //             with `aux` (value id, −1: none) the value before GELU (the product, or its bias
  //             add) into aux's own contiguous buffer, rounded as the graph rounds it;
  //   GeluGrad  the step writes act_out = the product's f32 sum · gelu'(aux), rounded once: aux
  //             (gelu_grad's x) is read contiguous from memory, the product (its g) is not
  //             written.
  // The composite's expansion nodes are not placed (except those another node reads, computed
  // as usual from x). f16/bf16 results round once where the graph rounds each op of the
  // expansion: up to an ulp or two of the result's type apart (docs/compilation.md).
  enum class Act : uint8_t { None, Gelu, GeluGrad };
  Act act = Act::None;
  int32_t act_out = -1, aux = -1;
};

// An Attention step: for every batch index b (row-major over `batch`), out[b] ([t, dv])
// = softmax over the s keys of prologue(Q_b · K_bᵀ) · V_b. Operand X (q, k, v: value ids, read
// through read_view) has its element (row r, head-dim column c) of batch b at
// view.offset + Σ batch_X[i]·b_i + r·X_rs + c — the head dims are contiguous, and the offset and
// every stride are multiples of 8 (16-byte loads of f16/bf16). The mask (value id, -1: none) is
// read at offset + Σ batch_mask[i]·b_i + t·mask_ts + s·mask_ss; `causal` when it is a constant
// by which the scores are kept exactly at s ≤ t (the kernel then reads no mask and computes the
// condition).
// Outputs (Out): element (row r, column c) of batch b of `value` lies at offset + Σ batch[i]·b_i +
// r·rs + c·cs of the buffer of its view. That is the value's own contiguous buffer, or — when the
// value's only reader is a transpose — the transpose's: the step writes the layout its reader
// wants (attention's [b, h, t, d] output as the [b, t, h, d] the next product reads, with no copy);
// the gradients dQ, dK, dV of an AttentionGrad step whose concatenation its match found
// (AttentionGrad::concat: the gradient of slicing q, k, v from one tensor) lie in that
// concatenation's buffer, which the step writes whole: no pad or add runs.
// out is the Attention step's output. With a gradient (AttentionGrad steps, and the Attention
// step of the chain they differentiate): row_max and row_sum are softmax's row values (f32
// [b.., t], contiguous), which the Attention step writes. The AttentionGrad step reads those, out
// and dO (value id d_out, read like q: batch strides batch_do, row stride do_rs, contiguous head
// dim), and writes the gradients of q, k and v (q: t rows; k, v: s rows; head columns).
// Bias (bias_q, bias_k, bias_v): the operand is a projection's product plus a bias along its last
// dim (OperandBias) that no step computes: the operand's view is then into the product's
// buffer, and its element at buffer index e is P[e] + bias[(e − shift) mod row], rounded to the
// operand's type (the graph's add) — the kernels add it as they load. The columns of one batch
// index's rows lie within one row of `row` elements. value −1: none.
struct AttentionLayout {
  struct Out {
    int32_t value = -1;
    int64_t offset = 0;
    std::vector<int64_t> batch;
    int64_t rs = 0, cs = 0;
  };
  struct Bias {
    int32_t value = -1;
    int64_t row = 0, shift = 0;
  };
  std::vector<int64_t> batch, batch_q, batch_k, batch_v, batch_mask;
  int64_t t = 0, s = 0, d = 0, dv = 0;
  int64_t q_rs = 0, k_rs = 0, v_rs = 0, mask_ts = 0, mask_ss = 0;
  // The operands' head strides: 1 on the GPU; any on the CPU, whose products read either layout
  // (head columns contiguous or rows contiguous, else packed by the BLAS call).
  int64_t q_cs = 1, k_cs = 1, v_cs = 1, do_cs = 1;
  int32_t q = -1, k = -1, v = -1, mask = -1;
  std::vector<ScoreOp> prologue;
  bool causal = false;
  Out out;
  int32_t row_max = -1, row_sum = -1, d_out = -1;
  // CPU: softmax's probabilities [b.., t, s] (f32, contiguous; value id, -1: none), which the
  // Attention step writes as its products read them (where a causal step's block skips keys, it
  // writes their probability, 0 but for a block that takes every key) and its AttentionGrad step
  // reads instead of computing them again: when they take at most
  // kCpuAttentionStoredProbs bytes (a chain's: a model's layers keep theirs until their gradient).
  int32_t probs = -1;
  std::vector<int64_t> batch_do;
  int64_t do_rs = 0;
  Out grad_q, grad_k, grad_v;
  Bias bias_q, bias_k, bias_v;
};

// The values an Attention or AttentionGrad step reads (through read_view).
std::vector<int32_t> attention_reads(const AttentionLayout& a, bool grad);

struct Step {
  StepKind kind = StepKind::Loop;
  std::vector<int32_t> nodes;         // node indices, topological (Copy/Host: exactly one; Dot: the product and its epilogue's add or reduce)
  Shape space;                        // Loop/Copy/Update/Scatter: the iteration space; Attention: the scores
  bool reduces = false;               // Loop: has reductions, all folding `reduce_dims` (sorted; may be empty)
  std::vector<int64_t> reduce_dims;
  std::vector<int32_t> outputs;       // values this step writes into buffers
  std::vector<int32_t> recomputed;    // Loop: values another loop computes that this one computes
                                      // again from their inputs (sorted; never written here)
  bool row_phase = false;             // GPU Loop: may run as a later phase of the previous step's kernel (below)
  View source;                        // Copy: what it reads (the view's own entry is then contiguous)
  std::optional<View> into;           // Copy: where it writes `space` when not its output's own buffer
                                      // (CPU: an operand's region of a concatenation's buffer)
  DotLayout dot;                      // Dot
  AttentionLayout attention;          // Attention
};

struct Schedule {
  std::vector<Step> steps;
  std::vector<int32_t> step_of;             // value → step that computes it (-1: parameter, constant, view)
  std::vector<std::optional<View>> view;    // value → where its elements are (unset: inside a loop only)
  std::vector<bool> has_buffer;             // value → owns memory (parameters, constants, step outputs)
};

// The product a Dot step writes: its product's value, with a bias (DotLayout::bias) its add's, or
// with GELU (DotLayout::act) the composite's result.
int32_t dot_result(const ir::Graph& g, const Step& st);

// Whether step `step` computes v in its loop (v is then read there without a buffer).
bool computes(const Schedule& s, int32_t v, int32_t step);

// Where step `reader` finds v: its view, except for a view that a later Copy step
// materialises — readers placed before that copy still read the source.
const View& read_view(const Schedule& s, int32_t v, int32_t reader);

// The cuBLASLt epilogues a GPU schedule may give its products. `bias`: a product without batch
// dims whose only reader adds a row along its last dim (a dense layer's bias) becomes one Dot step
// computing both (DotLayout::bias), unless that add is an attention operand's bias folded into its
// Attention step. With `bias`, `row_sums`: one that contracts an operand's rows, which are summed
// where no loop could (DotLayout::row_sum: the bias's gradient), sums them too; and `gelu` (with
// FuseOptions::composites): a GELU after a product (and its bias) and GELU's gradient before one
// run as the product's GELU epilogues (DotLayout::act). The CUDA backend takes all()
// (SHEAF_CUDA_EPILOGUES chooses others, to measure them).
struct Epilogues {
  bool bias = false, row_sums = false, gelu = false;
  static constexpr Epilogues all() { return {true, true, true}; }
};

struct FuseOptions {
  // A GPU schedule: f16/bf16 products are Dot steps too (a GPU's products accumulate them in f32)
  // and f16/bf16 reductions are loops (its kernels always accumulate in f32 registers); otherwise
  // both are Host steps (the CPU backend widens them to f32 first: cpu::widen_halves).
  // Elementwise f16/bf16 ops are loops in both. f32 scatter-adds (gradients
  // of gathers) are Scatter steps, arg_reduce and top_k TopK steps (the CPU runs them on the host),
  // and attention chains (attention.hpp) whose head dims are multiples of 16 up to
  // kAttentionMaxHead are Attention steps — with their gradient an AttentionGrad step when the
  // head dims are at most kAttentionGradMaxHead (else neither is fused).
  bool gpu = false;
  // GPU schedules: attention chains become Attention steps (their kernels use bf16/f16
  // tensor-core products, mma.sync m16n8k16: sm_80 and newer).
  bool attention = true;
  // The graph's parameters start 16-byte aligned, as buffers of their own do; false for a loop
  // body, whose parameters are views of its loop's buffers at any offset (an Attention step then
  // copies an operand it would read straight from a parameter).
  bool aligned_params = true;
  // Attention operands may be read from their projection's product with its bias added as they
  // load (AttentionLayout::Bias); false when a fused-attention library, which reads plain
  // operands, may run the chains (cuda/sdpa.hpp).
  bool fold_attention_bias = true;
  // The epilogues the products may take (Epilogues; none by default): a GPU's are cuBLASLt's; the
  // CPU takes the bias alone (rt->sgemm_bias: the bias's rows written in place of the BLAS's
  // zeroing, the product accumulated onto them) and ignores the others.
  Epilogues epilogues;
  // Where the graph's softmax and softmax_grad composites were expanded (passes::lower_composites,
  // whose graph this is): a GPU schedule finds attention chains around them; none without.
  const passes::CompositeSites* composites = nullptr;
};

inline constexpr int64_t kAttentionMaxHead = 96, kAttentionGradMaxHead = 64;
// A CPU Attention step keeps one batch index's scores (and with a gradient their cotangents) in a
// scratch tile per thread: at most this many ([t, s]: 16 MiB of f32), and its layout's batch
// strides in arrays of this many.
inline constexpr int64_t kCpuAttentionMaxScores = int64_t{1} << 22;
inline constexpr size_t kCpuAttentionMaxBatchDims = 6;
inline constexpr int64_t kCpuAttentionStoredProbs = int64_t{1} << 24;

// The steps of `g` (verified, optimised). Every graph result has a contiguous buffer of its own
// or is a parameter/constant.
Schedule fuse(const ir::Graph& g, const FuseOptions& o = {});

// Marks Step::row_phase in GPU schedule `s` of `g` (fuse does; row_phases.cpp), moving steps as
// "Row phases" above says.
void mark_row_phases(const ir::Graph& g, Schedule& s);

// Carried position k of a `while` node whose body returns its parameter k unchanged.
bool loop_invariant(const ir::Node& n, size_t k);

// The byte that every byte of a value read through `x` is, when `x` repeats one element (every
// stride 0) of a constant whose bytes are all that byte (0 for +0.0 and integer 0): the zeros a
// gradient's scatter-add or a loop's stack starts from. Scatter and Update steps then fill their
// result with it instead of copying x (x is not materialised).
std::optional<uint8_t> splat_byte(const ir::Graph& g, const View& x);

// Row-major strides of `shape` (elements).
std::vector<int64_t> contiguous_strides(const Shape& shape);

// Can a Loop compute node `n` (op and dtypes supported by loop code generation)?
bool loop_supported(const ir::Graph& g, const ir::Node& n, const FuseOptions& o = {});

}  // namespace sheaf::fusion
