// backend/merge_dots.hpp — products that share an operand, or whose results are only summed, as
// one product over concatenated operands (slices of it for the shared case), for the backends that
// run products as library calls (CPU: BLAS; GPU: cuBLASLt), before fusion; merge_dots.cpp. Keeps
// the contract of the optimisation passes (passes/passes.hpp): a new graph with the same
// parameters and results, equal under the reference executor up to the order of a sum, and no
// dead nodes.
#pragma once
#include "ir/ir.hpp"

namespace sheaf::fusion {

ir::Graph merge_dots(const ir::Graph& g);

}  // namespace sheaf::fusion
