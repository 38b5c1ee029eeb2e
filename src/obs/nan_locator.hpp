// obs/nan_locator.hpp — where a compiled function's NaN came from (SPEC §9.2, §10): the graph is
// run again op by op on the reference executor and the first node that turns finite operands
// into a NaN or ±Inf is named with its StableHLO spelling, its source form and its operands:
//   stablehlo.exponential at xor.shf:16:28 (exp (- z)) (operands f32[4x1] [min:2.70e2 max:4.83e2])
// Constants and iota are skipped (a -inf mask is deliberate); when every non-finite value comes
// from an input or a constant, the first node with a non-finite result is named instead.
#pragma once
#include <optional>
#include <span>
#include <string>

#include "ir/ir.hpp"

namespace sheaf::obs {

std::optional<std::string> first_nonfinite(const ir::Graph& g, std::span<const Tensor> inputs);

}  // namespace sheaf::obs
