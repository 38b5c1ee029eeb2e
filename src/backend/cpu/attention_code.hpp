// backend/cpu/attention_code.hpp — an Attention or AttentionGrad step (fusion.hpp) of a CPU
// schedule as generated C++: per batch index (a batch element and head), on the loop threads in
// parts (rt->parallel_products), its products on the thread of its part (rt->gemm, OpenBLAS at one
// thread) and its softmax in a scratch tile of the [t, s] scores (rt->scratch) while they are in
// the core's cache, instead of products over the whole batch with the scores and probabilities
// written to memory between loops over them.
//   Attention      S = Q·Kᵀ (the rows of one block), x = prologue(S), p = softmax(x) (row max m
//                  and sum l kept for the gradient, and P itself where fusion stores it:
//                  AttentionLayout::probs), O = P·V
//   AttentionGrad  P as stored, or again from Q, K, m and l; dP = dO·Vᵀ; dx = p·(dP − Σ p·dP)
//                  (softmax's VJP); dS = the prologue's VJPs; dQ = dS·K; dK = dSᵀ·Q; dV = Pᵀ·dO
// Each element is computed by the graph's ops in f32 (the prologue's products and quotients,
// exp(x − m) / l), the sums in another order than the fused loops'. A causal mask (`causal`) is
// computed, not read, and the rows go in blocks of kCausalBlock: a block's scores and products skip
// the keys past its last row, which the mask fills; their probability, exp(fill − m)/l, is exactly 0
// unless a row's kept scores are all within about 104 of the fill (then that block takes every key),
// so that the products skip only terms 0·x — which the graph computes as 0 where x is finite — and
// the gradients' masked scores are 0 by the select's VJP.
#pragma once
#include <functional>
#include <string>

#include "backend/fusion.hpp"
#include "backend/memory.hpp"

namespace sheaf::cpu {

// Rows (and keys) per block of a causal Attention step: with t = s = 128 (bench/gpt_step.shf) the
// products take 10 of 16 key blocks.
inline constexpr int64_t kCausalBlock = 32;

// The layout struct of a step and the kernels every attention step calls (sh_attention,
// sh_attention_grad), declared in every part of a unit that has such a step, and defined in one
// (whose compile they lengthen by about 0.3 s on a 2-core Xeon). Use the prelude's sheaf_rt and sh_exp.
extern const char* const kAttentionDeclarations;
extern const char* const kAttentionKernels;

// A prologue function (sh_attn::scores or grads) named `name` whose loop over a row's n scores
// runs `body` on each (v: the score, s: its key, t: its row), and its prototype.
std::string prologue_function(const std::string& name, const std::string& body);
std::string prologue_prototype(const std::string& name);

// The name of the prologue function with loop statements `body` (`what`: "scores" or "grads"),
// which the caller defines once for all the steps that share it (a model's layers and heads).
using PrologueNamer = std::function<std::string(const std::string& body, const char* what)>;

// Step `index` (`st`, of graph g and schedule s, slots of m) as C++: its task `name` (the step's
// layout as constants, calling its kernel), the task's arguments (the pointer table a[] of
// rt->parallel_products) and range (the batch indices).
struct AttentionCode {
  std::string task, args;
  int64_t count = 0;
};
AttentionCode attention_code(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, size_t index,
                             const fusion::Step& st, const std::string& name, const PrologueNamer& prologue);

}  // namespace sheaf::cpu
