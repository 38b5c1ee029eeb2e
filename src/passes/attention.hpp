// passes/attention.hpp — finds scaled dot-product attention in an optimised graph, so that a GPU
// schedule can run it as one kernel (fusion.hpp's Attention step: flash attention, whose
// [.., T, S] scores and probabilities never reach memory). A match is the chain
//   s = dot_general(Q, K)           Q [.., T, D], K [.., S, D] (each operand: the batch dims, one
//                                   free dim, the contracted dim D — in any order of its own dims),
//                                   f16/bf16, the product of that type: s [b.., T, S]
//   x = prologue(s)                 converts, products and quotients by a splat constant, at most
//                                   one select of a bool mask [b.., T, S] and a splat fill
//   p = softmax(x) over S           reduce_max, sub, exp, reduce_sum, div in f32 (the row values
//                                   broadcast back by reshape/broadcast_in_dim)
//   o = dot_general(convert(p), V)  V [.., S, DV] of Q's type: o [b.., T, DV] of that type
// where every value of the chain but o is read only inside it (not a result): a program that
// keeps the probabilities (a training step, whose backward pass reads them) has no match.
// Nothing here changes the graph; fusion decides what runs where.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::passes {

// One step of the prologue, on an f32 score; its result is rounded to `dtype` (f16/bf16: as a
// convert would; f32: nothing).
struct ScoreOp {
  enum class Kind : uint8_t { Round, Mul, Div, Mask } kind = Kind::Round;
  DType dtype = DType::F32;
  double c = 0;          // Mul/Div: the constant; Mask: the fill
  bool keep_if = true;   // Mask: the score is kept where the mask is keep_if, else the fill
};

struct AttentionMatch {
  std::vector<int32_t> nodes;     // node indices of the chain, ascending (`scores` first, `out` last)
  int32_t scores = -1, out = -1;  // node indices: dot_general(Q, K), dot_general(convert(p), V)
  std::vector<ScoreOp> prologue;  // from the product's f32 value (its rounding first) to x
  int32_t mask = -1;              // value id of the Mask op's bool operand (-1: none)
};

// The matches of `g`, in graph order; they share no node.
std::vector<AttentionMatch> find_attention(const ir::Graph& g);

}  // namespace sheaf::passes
