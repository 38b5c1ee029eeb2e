// backend/attention.hpp — finds scaled dot-product attention in an optimised graph, so that a GPU
// schedule can run it as one kernel (fusion.hpp's Attention step: flash attention, whose
// [.., T, S] scores and probabilities never reach memory). A match is the chain
//   s = dot_general(Q, K)           Q [.., T, D], K [.., S, D] (each operand: the batch dims, one
//                                   free dim, the contracted dim D — in any order of its own dims),
//                                   f16/bf16, the product of that type: s [b.., T, S]
//   x = prologue(s)                 converts, products and quotients by a splat constant, at most
//                                   one mask: a select of a bool mask [b.., T, S] and a splat
//                                   fill, or the add of a constant causal bias (ScoreOp::additive)
//   p = softmax(x) over S           the softmax op in f32 (a composite, tensor/softmax.hpp), found
//                                   where the graph's lowering expanded it (a SoftmaxSite of
//                                   passes/composites.hpp: its row max and sum are the step's
//                                   statistics)
//   o = dot_general(convert(p), V)  V [.., S, DV] of Q's type: o [b.., T, DV] of that type
// where every value of the chain but o is read only inside it (not a result): a program that
// keeps the probabilities for anything else has no match — but for the backward pass the VJP
// rules emit for the chain (a training step), which is then matched with it (AttentionGrad):
//   dPb = dot_general(dO, V)        dO [.., T, DV] (o's cotangent, any dim order): [b.., T, S]
//   dV  = dot_general(convert(p), dO) contracting T (either operand order)
//   dx  = softmax_grad(p, convert(dPb)) over S   softmax's VJP, the composite op (its expansion: a
//                                   SoftmaxGradSite)
//   dS  = the prologue's VJPs in reverse (select to 0 where masked, the scale, the converts)
//   dQ  = dot_general(dS, K) contracting S, dK = dot_general(dS, Q) contracting T (either order)
// with every value of both but o, dQ, dK and dV read only inside them, and every node of the
// backward pass after o's product (its first node, a product reading dO, is where its step runs).
// Nothing here changes the graph; fusion decides what runs where.
//
// Softmax and its VJP are composite ops, not patterns: the builtin records the op, a softmax
// written out with exp, max and sum becomes it before the reverse sweep and in the pipeline
// (passes/composites.hpp), and its VJP is softmax_grad. So this matcher does not depend on how
// softmax or its gradient are decomposed, only on the products and the prologue around them,
// which the programs write in several ways — einsum or `@` with a transposed key, a bool mask by
// `where` or an additive causal bias — that look alike after the IR passes (einsum and `@` become
// dot_general, masks fold to constants, products are canonical).
// tests/unit/attention_styles_test.cpp traces each style our programs use and fails when a change
// to the prologue, the composites or this pass loses one.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/ir.hpp"
#include "passes/composites.hpp"

namespace sheaf::fusion {

// One step of the prologue, on an f32 score; its result is rounded to `dtype` (f16/bf16: as a
// convert would; f32: nothing).
struct ScoreOp {
  enum class Kind : uint8_t { Round, Mul, Div, Mask } kind = Kind::Round;
  DType dtype = DType::F32;
  double c = 0;          // Mul/Div: the constant; Mask: the fill
  bool keep_if = true;   // Mask: the score is kept where the mask is keep_if, else the fill
  // Mask: written as an additive causal bias, score + mask (mask 0 where s ≤ t, the fill ≤ -1e9
  // elsewhere; keep_if false): the same probabilities as the fill in the score's place, since
  // exp(score + fill − max) and exp(fill − max) are both 0 in f32. Its VJP is the identity.
  bool additive = false;
};

// A product of the gradient: dot_general(x, y) or dot_general(y, x) of x [b.., T, S] (dS or
// convert(p)) contracting one of x's two last dims with y's rows; its result is [b.., rows, head]
// (x's other dim, y's head dim), or [b.., head, rows] when `transposed`.
struct GradProduct {
  int32_t node = -1;
  bool transposed = false;
};

struct AttentionGrad {
  std::vector<int32_t> nodes;             // node indices, ascending (none of the forward chain's)
  int32_t d_out = -1;                     // value id of dO
  std::vector<int64_t> d_out_batch;       // dO's dims: its batch dims (in b's order), rows T, head DV
  int64_t d_out_rows = -1, d_out_head = -1;
  int32_t row_max = -1, row_sum = -1;     // forward nodes: softmax's reduce_max and reduce_sum [b.., T]
  int32_t probs = -1;                     // value id of the forward's p, softmax's result [b.., T, S] (f32)
  GradProduct dq, dk, dv;
  // The gradients' concatenation (a training step's d(qkv), the gradient of slicing q, k and v out
  // of one tensor): dQ, dK and dV each reach, through transposes and reshapes read only on that
  // way, a pad with zeros along one axis read only by an add; those adds, read only by one
  // another, sum the three pads, which cover the axis once. Or the three ways end in one
  // concatenate of exactly them (merge_dots' operand of the merged input and weight gradients of
  // separate q, k and v projections). `concat`: the last add's node, or the concatenate (−1:
  // none); `concat_nodes`: the transposes, reshapes, pads and adds (or the concatenate), ascending.
  int32_t concat = -1;
  std::vector<int32_t> concat_nodes;
};

// A projection's bias under an operand: Q, K or V is B (value `sum`) = add(P, broadcast(b)) of
// f16/bf16, b (`bias`) a vector along B's last dim, or a view of B by reshape, transpose and
// slice; and everything reading B (through those views) is Q, K or V read by the chain or its
// gradient, so that B need not exist: the operand can be read from P (`product`) with b added as
// it is loaded (fusion's AttentionLayout::Bias). sum −1: none.
struct OperandBias {
  int32_t sum = -1, product = -1, bias = -1;
};

struct AttentionMatch {
  std::vector<int32_t> nodes;     // node indices of the chain, ascending (`scores` first, `out` last)
  int32_t scores = -1, out = -1;  // node indices: dot_general(Q, K), dot_general(convert(p), V)
  std::vector<ScoreOp> prologue;  // from the product's f32 value (its rounding first) to x
  int32_t mask = -1;              // value id of the Mask op's bool operand (-1: none)
  std::optional<AttentionGrad> grad;  // the chain's backward pass (a training step)
  OperandBias bias_q, bias_k, bias_v;
};

// The matches of `g` (a graph with its composites expanded at `sites`: passes::lower_composites),
// in graph order; they share no node.
std::vector<AttentionMatch> find_attention(const ir::Graph& g, const passes::CompositeSites& sites);

}  // namespace sheaf::fusion
