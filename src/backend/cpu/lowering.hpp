// backend/cpu/lowering.hpp — the graph-to-graph lowerings the CPU backend applies to an optimised
// graph before fusion (program.cpp: widen_halves → merge_dots (backend/merge_dots.hpp, shared
// with the GPU) → canonical_dots). Each keeps the contract of the optimisation passes
// (passes/passes.hpp): a new graph with the same parameters and results, equal under the
// reference executor.
#pragma once
#include "ir/ir.hpp"

namespace sheaf::cpu {

// f16/bf16 dot_general and reduce as f32 ones between conversions, for the CPU backend (which has
// neither in half precision); widen_halves.cpp.
ir::Graph widen_halves(const ir::Graph& g);

// dot_general operands whose free or contracting dims are not adjacent and in order (row-major)
// transposed into (batch, free, contracting) / (batch, contracting, free) order, for backends that
// run products as strided matrix products; canonical_dots.cpp.
ir::Graph canonical_dots(const ir::Graph& g);

}  // namespace sheaf::cpu
