// backend/cuda/sdpa.hpp — an attention chain (fusion.hpp's Attention step, with its AttentionGrad
// step when it has one) as the problem a fused scaled-dot-product-attention library takes: cuDNN's
// SDPA forward and backward (cudnn_sdpa.hpp), the engine PyTorch and JAX use on Hopper.
// Every tensor is 4-d (batch, head, row, column) by element strides from an element offset into
// the buffer at its slot:
//   q [b, h, t, d], k [b, h, s, d], v [b, h, s, dv], o [b, h, t, dv]   f16/bf16
//   stats [b, h, t, 1] f32: each row's log Σ exp(score − …) + max — softmax's row values as one
//   number, which the forward writes and the backward reads (into the buffer of the Attention
//   step's row max; its row sum is then not written)
//   d_o like o; dq, dk, dv like q, k, v (the backward's)
// with o = softmax(scale · q·kᵀ, masked to s ≤ t when causal) · v. The chain's batch dims become
// (b, h): none → (1, 1), one → (n, 1), more → merged while every tensor's strides allow (else no
// problem). A chain maps when its prologue is roundings, products and quotients by positive
// constants and at most a causal mask with a fill of at most −10⁴ (every masked probability 0 in
// f32, as the mask in cuDNN's), the head dims are multiples of 8 up to 128, no operand carries a
// folded bias (fusion: fold_attention_bias off) and the head columns are contiguous. cuDNN
// computes the scores in f32 where the graph rounds them to the operands' type first: the results
// differ by that rounding, like the own kernels' (attention_kernel.hpp) exponentials.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "backend/memory.hpp"
#include "tensor/dtype.hpp"

namespace sheaf::cuda {

struct SdpaTensor {
  int32_t slot = -1;                 // the buffer (MemoryPlan slot)
  int64_t offset = 0;                // elements
  std::array<int64_t, 4> strides{};  // elements: batch, head, row, column
  bool operator==(const SdpaTensor&) const = default;
};

struct Sdpa {
  DType dtype = DType::BF16;
  int64_t b = 1, h = 1, t = 0, s = 0, d = 0, dv = 0;
  float scale = 1;
  bool causal = false;
  bool grad = false;  // has a backward (the AttentionGrad step)
  SdpaTensor q, k, v, o, stats, d_o, dq, dk, dv_;
  bool operator==(const Sdpa&) const = default;
  // The FLOPs of the forward's two products (causal: the half at s ≤ t), or of the backward's
  // five (the scores recomputed).
  double flops(bool backward) const;
};

// Whether two problems take the same library plan: equal but for where their tensors lie (slots
// and offsets; a model's layers).
bool same_plan(Sdpa x, Sdpa y);

// A readable key of everything a library plan depends on (not the slots and offsets):
// "bf16 b8 h12 t1024 s1024 d64/64 scale 0.125 causal grad q 2359296,64,2304,1 ...".
std::string sdpa_key(const Sdpa& a);

// The problem of the Attention step `fwd` of `s` and, when the chain has one, its AttentionGrad
// step `grad` (−1: none); nullopt when the chain does not map (above).
std::optional<Sdpa> sdpa_problem(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, size_t fwd,
                                 int64_t grad);

}  // namespace sheaf::cuda
