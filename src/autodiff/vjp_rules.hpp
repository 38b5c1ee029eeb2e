// autodiff/vjp_rules.hpp — one vector-Jacobian product rule per IR op (SPEC §6.6).
// A rule maps the cotangent of a node's results to the cotangents of its operands. It is written
// with the tensor primitives of src/tensor, so while a trace is active it records IR: the
// backward pass lands in the same graph as the forward pass and reuses its values.
//   x     the operand values of the node (symbolic tensors of the current trace)
//   y     its result values
//   g     the cotangent of each result (nullopt: zero), shaped and typed like the result
//   need  need[i]: operand i is active (float and depends on the differentiated input)
// Returns one entry per operand: its cotangent (operand's type), or nullopt for zero / not
// needed. Rounding, comparisons, arg-reductions and integer or bool results give zero.
// A `while` has a rule when its trip count is known (autodiff/region_vjp.hpp); otherwise, and for
// `case`, differentiating through it throws a SheafError naming the op and the source form.
#pragma once
#include <optional>
#include <span>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::autodiff {

std::vector<std::optional<Tensor>> vjp(const ir::Node& n, std::span<const Tensor> x, std::span<const Tensor> y,
                                       std::span<const std::optional<Tensor>> g, const std::vector<bool>& need);

}  // namespace sheaf::autodiff
