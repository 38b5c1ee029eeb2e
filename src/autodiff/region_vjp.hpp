// autodiff/region_vjp.hpp — the VJP rules of the ops with regions (same contract as
// vjp_rules.hpp; they record into the active trace):
//   while with a known trip count (attrs.k > 0: a `repeat` compiled as one loop): two loops, see
//     region_vjp.cpp; a while without a trip count is not differentiable;
//   call without a VJP region (`checkpoint`): the function's VJP, recomputing its forward pass
//     from operands passed through an optimization_barrier that also reads the cotangents, so the
//     recomputation happens in the backward pass and is not merged with the forward one;
//   call with a VJP region (`custom-vjp`): that region on the residuals and the cotangents; the
//     values the function reads from the enclosing trace get no cotangent through it.
#pragma once
#include <optional>
#include <span>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::autodiff {

std::vector<std::optional<Tensor>> counted_while_vjp(const ir::Node& n, std::span<const Tensor> x,
                                                     std::span<const std::optional<Tensor>> g, const std::vector<bool>& need);

std::vector<std::optional<Tensor>> call_vjp(const ir::Node& n, std::span<const Tensor> x, std::span<const Tensor> y,
                                            std::span<const std::optional<Tensor>> g, const std::vector<bool>& need);

}  // namespace sheaf::autodiff
