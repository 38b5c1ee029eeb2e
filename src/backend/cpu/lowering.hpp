// backend/cpu/lowering.hpp — the graph-to-graph lowerings the CPU backend applies to an optimised
// graph before fusion (program.cpp: widen_halves → merge_dots → canonical_dots, the last two
// shared with the GPU: backend/merge_dots.hpp, backend/canonical_dots.hpp; then the composites'
// expansion, passes/composites.hpp). Each keeps the contract of the optimisation passes
// (passes/passes.hpp): a new graph with the same parameters and results, equal under the
// reference executor.
#pragma once
#include "ir/ir.hpp"

namespace sheaf::cpu {

// f16/bf16 dot_general and reduce as f32 ones between conversions, for the CPU backend (which has
// neither in half precision); widen_halves.cpp.
ir::Graph widen_halves(const ir::Graph& g);

// Whether widen_halves would change g: a dot_general or reduce of f16/bf16 in it or its regions.
bool reduces_halves(const ir::Graph& g);

}  // namespace sheaf::cpu
