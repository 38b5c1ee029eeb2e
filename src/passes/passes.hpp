// passes/passes.hpp — the optimisation passes over the tensor IR (one file each in src/passes).
// Every pass takes a verified graph and returns a new one (nothing is edited in place) with the
// same parameters (types, order) and results (types, order), value ids dense and in node order,
// and results that equal the input graph's under the reference executor: bit for bit, except
// that NaNs match NaNs only as NaNs: their sign and payload depend on the kernel path (x86 SIMD
// makes the negative default NaN for 0·inf; folding may compute it on another path) — see
// simplify.cpp.
#pragma once
#include "ir/ir.hpp"

namespace sheaf::passes {

// Evaluates nodes whose operands are all known (constants, iotas, splats) — constant_fold.cpp.
ir::Graph fold_constants(const ir::Graph& g);
// Algebraic identities that are exact for IEEE floats (x * 1 → x, ...) — simplify.cpp.
ir::Graph simplify(const ir::Graph& g);
// Reuses the first of several identical nodes — cse.cpp.
ir::Graph eliminate_common_subexpressions(const ir::Graph& g);
// Drops nodes no result depends on; parameters stay — dce.cpp.
ir::Graph eliminate_dead_code(const ir::Graph& g);

// All of the above to a fixed point, then ir::verify — pipeline.cpp.
void optimize(ir::Graph& g);

// f16/bf16 dot_general and reduce as f32 ones between conversions, for the CPU backend (which has
// neither in half precision); not part of optimize — widen_halves.cpp.
ir::Graph widen_halves(const ir::Graph& g);

// dot_general operands whose free or contracting dims are not adjacent and in order (row-major)
// transposed into (batch, free, contracting) / (batch, contracting, free) order, for backends that
// run products as strided matrix products; not part of optimize — canonical_dots.cpp.
ir::Graph canonical_dots(const ir::Graph& g);

// Products that share an operand, or whose results are only summed, as one product over
// concatenated operands (slices of it for the shared case), for backends that run products as
// BLAS calls; sums add in another order; not part of optimize — merge_dots.cpp.
ir::Graph merge_dots(const ir::Graph& g);

}  // namespace sheaf::passes
