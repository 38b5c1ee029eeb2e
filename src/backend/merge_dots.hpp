// backend/merge_dots.hpp — products that share an operand, or whose results are only summed, as
// one product over concatenated operands (slices of it for the shared case), for the backends that
// run products as library calls (CPU: BLAS; GPU: cuBLASLt), before fusion; merge_dots.cpp. Keeps
// the contract of the optimisation passes (passes/passes.hpp): a new graph with the same
// parameters and results, equal under the reference executor up to the order of a sum, and no
// dead nodes.
#pragma once
#include <optional>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::fusion {

ir::Graph merge_dots(const ir::Graph& g);

// The nodes of g (parameters aside) in units — the nodes of groups[i] together (unit -1 - i), any
// other node alone (its index) — ordered so that each unit follows the units it reads, at the
// place of its first node when it can be (a priority queue on the first node's index). nullopt
// when groups read each other in a cycle; `stuck` is then a group that could not run. For the
// passes that replace groups of nodes by others (merge_dots, merge_heads).
std::optional<std::vector<int32_t>> unit_order(const ir::Graph& g, const std::vector<std::vector<int32_t>>& groups, size_t& stuck);

}  // namespace sheaf::fusion
