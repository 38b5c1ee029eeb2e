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

// Runs a whole graph: `args` in parameter order (types must match), results in `g.results` order.
// A value's tensor is released after its last use.
std::vector<Tensor> run(const ir::Graph& g, std::span<const Tensor> args);

}  // namespace sheaf::ref
