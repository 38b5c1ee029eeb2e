// autodiff/loop_vjp.hpp — the VJP rule of a `while` with a known trip count (attrs.k > 0: a
// `repeat` compiled as one loop). Same contract as vjp_rules.hpp; it records two loops into the
// active trace (see loop_vjp.cpp). A while without a trip count is not differentiable.
#pragma once
#include <optional>
#include <span>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::autodiff {

std::vector<std::optional<Tensor>> counted_while_vjp(const ir::Node& n, std::span<const Tensor> x,
                                                     std::span<const std::optional<Tensor>> g, const std::vector<bool>& need);

}  // namespace sheaf::autodiff
