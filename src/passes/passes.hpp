// passes/passes.hpp — the optimisation passes over the tensor IR (one file each in src/passes).
// Every pass takes a verified graph and returns a new one (nothing is edited in place) with the
// same parameters (types, order) and results (types, order), value ids dense and in node order,
// and results that equal the input graph's under the reference executor: bit for bit, except
// that NaNs match NaNs only as NaNs: their sign and payload depend on the kernel path (x86 SIMD
// makes the negative default NaN for 0·inf; folding may compute it on another path) — see
// simplify.cpp.
#pragma once
#include <optional>

#include "ir/ir.hpp"

namespace sheaf::passes {

// Evaluates nodes whose operands are all known (constants, iotas, splats) — constant_fold.cpp.
ir::Graph fold_constants(const ir::Graph& g);
// The same, or nullopt when nothing folds (nothing copied: the pipeline's form).
std::optional<ir::Graph> constants_folded(const ir::Graph& g);
// Algebraic identities that are exact for IEEE floats (x * 1 → x, ...) — simplify.cpp.
ir::Graph simplify(const ir::Graph& g);
// The same, or nullopt when nothing simplifies (nothing copied: the pipeline's form).
std::optional<ir::Graph> simplified(const ir::Graph& g);
// Reuses the first of several identical nodes — cse.cpp.
ir::Graph eliminate_common_subexpressions(const ir::Graph& g);
// The same, or nullopt when no two nodes are identical (nothing rebuilt: the pipeline's form).
std::optional<ir::Graph> common_subexpressions_merged(const ir::Graph& g);
// Drops nodes no result depends on; parameters stay — dce.cpp.
ir::Graph eliminate_dead_code(const ir::Graph& g);
// The same, or nullopt when no node is dead (nothing rebuilt: the pipeline's form).
std::optional<ir::Graph> dead_code_dropped(const ir::Graph& g);

// All of the above to a fixed point, then ir::verify — pipeline.cpp.
void optimize(ir::Graph& g);

}  // namespace sheaf::passes
