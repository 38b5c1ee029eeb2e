// autodiff/reverse.hpp — the reverse sweep (SPEC §6.6): gradients of a scalar traced value with
// respect to earlier values of the same trace, recorded into that trace.
#pragma once
#include <span>
#include <vector>

#include "tensor/tensor.hpp"

namespace sheaf::autodiff {

// d loss / d wrt[i] for each i, as tensors of the active trace (wrt's shapes and dtypes).
// `wrt` must be values of the innermost trace, each defined by its own node, with nothing that
// is not derived from them recorded between the first of them and the loss other than values
// they do not influence. `loss` is a rank-0 float tensor (symbolic or not: a value that does
// not depend on wrt gives zero gradients). Integer and bool wrt values get zeros.
// Activity analysis first marks the float values that depend on wrt; the sweep then walks those
// nodes backwards from a seed of one, applying one VJP rule per node (vjp_rules.hpp) and summing
// the cotangents of values used more than once.
std::vector<Tensor> gradients(const Tensor& loss, std::span<const Tensor> wrt);

// The vector-Jacobian product: Σ_i cotangents[i] · d outputs[i] / d wrt[k] for each k, as tensors of
// the active trace (wrt's shapes and dtypes). `outputs` are float values of any shape (others
// contribute nothing); cotangents[i] has outputs[i]'s shape. gradients(loss, wrt) is the case of
// one output with a cotangent of one. Conditions on wrt as for gradients.
std::vector<Tensor> vjp_of(std::span<const Tensor> outputs, std::span<const Tensor> cotangents, std::span<const Tensor> wrt);

// Zeros of `dtype` and `shape` for cotangents. In a trace, a rank-0 constant broadcast in the graph:
// nothing is materialised on the host (the cotangent of attention scores is [B H T T]). Outside a
// trace, and for rank 0 (a concrete scalar keeps host-scalar typing), a concrete tensor.
Tensor zeros(DType dtype, const Shape& shape);

}  // namespace sheaf::autodiff
