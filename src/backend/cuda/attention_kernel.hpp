// backend/cuda/attention_kernel.hpp — the kernel of an Attention step (fusion.hpp): flash attention
// (FlashAttention-2's forward pass) on tensor cores.
//   A block of 4 warps takes 64 query rows of one batch index (block b·⌈t/64⌉ + j: rows of tile
//   ⌈t/64⌉ − 1 − j, the longest causal rows first); its Q tile sits in __shared__ memory. For
//   each tile of 64 keys (causal: up to the diagonal), K and Vᵀ are loaded into __shared__
//   memory (16-byte loads; zeros past t and s), each warp computes its 16 × 64 scores with
//   mma.sync m16n8k16 (f16/bf16 operands, f32 accumulators), applies the prologue (the product's
//   rounding, scale, mask; keys past s get −inf) and the online softmax on its accumulators (the
//   row max over the 4 threads of a row by warp shuffles, the running max m, sum l and output
//   rescaled by exp(m_old − m_new)), then adds P·V with P rounded to the operands' type, taken from
//   the score accumulators as A fragments without a trip through memory. At the end
//   out = O / l, rounded to the output type; rows past t are not stored.
// Causal steps skip the key tiles above the diagonal when the mask is the prologue's last op and
// its fill is at most −10⁴ (exp(fill − m) is 0 in f32 for any row max m above fill + 104: the
// reference's terms for those keys vanish). A row whose every score is −inf gives NaN, as softmax
// does. A chain with a gradient step also stores each row's max m and sum l (f32). An operand
// with a bias (fusion::AttentionLayout::Bias) is read from the projection's product, and both
// kernels add the bias to each element as they load a tile (f32 sum rounded to the operand's
// type, as the graph's add), from the column the batch index's offset gives.
// The gradient (an AttentionGrad step: FlashAttention-2's backward pass, without atomics) is one
// kernel of two kinds of blocks, 4 warps each: per batch index, one block per 64 keys computes
// their dK and dV — K and V in __shared__ memory, it meets the query tiles of 32 rows in turn
// (causal: from the diagonal's), computing Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ by mma.sync with Q, Qᵀ, dO
// and dOᵀ in __shared__ memory, then dV += Pᵀ·dO and dK += dSᵀ·Q with Pᵀ and dSᵀ taken from the
// accumulators — and one block per 64 query rows computes their dQ over key tiles of 32 (S = Q·Kᵀ,
// dP = dO·Vᵀ, dQ += dS·K). P = exp(prologue(s) − m) / l is recomputed from the forward's row
// values, dS = P·(dP − D) with D = Σ dO∘O per row (= Σ dP∘P; FlashAttention's identity: O and dP
// rounded as the graph rounds them), then the prologue's VJPs in reverse (masked scores 0, the
// scale, the converts' roundings). Head dims up to 64 (fusion::kAttentionGradMaxHead): 38 KB of
// __shared__ memory at 64.
#pragma once
#include <functional>
#include <string>

#include "backend/cuda/render.hpp"
#include "backend/memory.hpp"

namespace sheaf::cuda {

// mma.sync and warp-shuffle helpers (sh_mma_bf16, sh_mma_f16, sh_u4): before the first attention
// kernel of a unit. A unit compiled with SHEAF_EMULATION defined (the test emulator, which
// brings its own helpers) gets only sh_u4.
extern const char* const kAttentionHelpers;

// Kernel `name` of Attention or AttentionGrad step `index`: its text. Sets l's grid, block,
// block_reduce and slots (the buffers, in parameter order — Attention: q, k, v, the mask when
// read, out, the row max and sum when written; AttentionGrad: q, k, v, the mask when read, dO,
// out, the row max and sum, dQ, dK, dV).
std::string attention_kernel(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, size_t index,
                             const std::string& name, Launch& l);

}  // namespace sheaf::cuda
