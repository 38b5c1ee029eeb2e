// backend/ref/executor.hpp — the reference backend: runs IR by calling the eager host kernels
// op by op. Always available; the correctness oracle for every other backend, and what the
// constant-folding pass evaluates nodes with.
#pragma once
#include <span>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::ref {

// Results of one node on concrete operands (one tensor per result value).
std::vector<Tensor> run_node(const ir::Graph& g, const ir::Node& n, std::span<const Tensor> operands);

// A graph prepared for repeated runs: the last reader of every value (tensors are released after
// it), and the broadcasts that are never materialised because every reader is an elementwise
// binary or select, whose kernels broadcast NumPy-style: such a value is held as its operand
// reshaped with unit axes (no copy).
struct Plan {
  std::vector<int32_t> last_use;  // value id → index of its last reading node (results: nodes.size())
  std::vector<bool> implicit;     // value id → broadcast left implicit
};
Plan plan(const ir::Graph& g);

// Runs a whole graph: `args` in parameter order (types must match), results in `g.results` order.
std::vector<Tensor> run(const ir::Graph& g, const Plan& p, std::span<const Tensor> args);
std::vector<Tensor> run(const ir::Graph& g, std::span<const Tensor> args);  // plans, then runs

}  // namespace sheaf::ref
