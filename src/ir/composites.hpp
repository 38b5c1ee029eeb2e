// ir/composites.hpp — the composite ops (softmax, softmax_grad: tensor/softmax.hpp; gelu,
// gelu_grad: tensor/gelu.hpp) as graphs of
// primitive ops. A composite is one node while a program is traced, optimised and differentiated;
// whatever cannot run it as one (the CPU's loops, StableHLO, a GPU outside an attention chain)
// expands it with expand(): passes/composites.hpp for whole graphs, emit/stablehlo.cpp per node.
// The expansion is the composite's own primitive decomposition (tensor/softmax.cpp), recorded
// into a graph, so the reference kernel, the lowerings and the emitted StableHLO agree.
#pragma once
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::ir {

inline bool is_composite(Op op) { return op == Op::Softmax || op == Op::SoftmaxGrad || op == Op::Gelu || op == Op::GeluGrad; }

// The expansion of composite node `n` with operand types `in`: `graph` takes the operands as its
// parameters and returns the node's result. For softmax, `row_max` and `row_sum` are the value
// ids (in `graph`) of its row reductions (the axis dropped); −1 otherwise.
struct Expansion {
  Graph graph;
  int32_t row_max = -1, row_sum = -1;
};
Expansion expand(const Node& n, const std::vector<Type>& in);

}  // namespace sheaf::ir
