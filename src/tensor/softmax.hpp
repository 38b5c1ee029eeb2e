// tensor/softmax.hpp — softmax and its VJP as composite primitives: each is one IR op (softmax,
// softmax_grad) while a function is traced, and on concrete tensors, in the reference executor and
// in every lowering, its decomposition into the other primitives below. The op is what the
// compiler sees and differentiates: the VJP of softmax is softmax_grad (autodiff/vjp_rules.cpp),
// so the GPU's attention matcher (backend/attention.hpp) finds softmax and its gradient as
// the ops themselves, whatever their decompositions are. Lowerings expand both
// (passes/composites.hpp) and say which values of the expansion are the row max and row sum.
//   softmax(x) along `axis`:          e = exp(x − bcast(max_axis x)), p = e / bcast(Σ_axis e)
//   softmax_grad(p, g) along `axis`:  p · (g − bcast(Σ_axis g·p))   (the VJP of softmax at its
//                                     result p, for the result's cotangent g)
// Both keep the operand's dtype and shape (f16/bf16 as the primitives compute them: each op rounds
// to the dtype). Rank 0, non-float operands and a cotangent of another type than p are never
// recorded as the op: the decomposition is (a rank-0 softmax is 1; exp of an integer fails as it
// always has; the primitives promote mixed operands).
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.hpp"

namespace sheaf {

Tensor softmax(const Tensor& x, int64_t axis);
Tensor softmax_grad(const Tensor& p, const Tensor& g, int64_t axis);

// The expansions. SoftmaxParts' row values are the reductions (axis dropped), which the lowering
// (ir/composites.cpp) keeps the ids of.
struct SoftmaxParts {
  Tensor row_max, row_sum, out;
};
SoftmaxParts softmax_expansion(const Tensor& x, int64_t axis);
Tensor softmax_grad_expansion(const Tensor& p, const Tensor& g, int64_t axis);

// The axes a softmax (and log-softmax) of x along `axis` reduces: none for rank 0, whose only
// element is its row.
std::vector<int64_t> softmax_axes(const Tensor& x, int64_t axis);

}  // namespace sheaf
