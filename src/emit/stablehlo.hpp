// emit/stablehlo.hpp — StableHLO text of tensor-IR graphs, in MLIR generic form (SPEC §10):
//   "builtin.module"() ({
//     "func.func"() ({
//     ^bb0(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>):
//       %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
//       "func.return"(%0) : (tensor<4xf32>) -> ()
//     }) {function_type = (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>, sym_name = "f"} : () -> ()
//   }) : () -> ()
// One func.func per graph: parameters in input order, results in `g.results` order. The symbol is
// the graph's name verbatim (kebab case included): generic form spells it as a string attribute,
// so no mangling is needed (`@"train-step"` in custom form; `iree-run-module --function=train-step`).
//
// The module computes what the reference executor computes (src/backend/ref), not merely what the
// nearest StableHLO op does. Where they differ the op is composed:
//   - f16/bf16 arithmetic (unary, binary, reduce, dot_general, scatter-add) runs in f32 and rounds
//     once, like the eager kernels; conversions to and from them pass through f32.
//   - convert float→int saturates (NaN and ±inf give 0), i32↔u32 saturates, x→bool is x != 0.
//   - i32 neg/abs saturate at INT_MIN (eager computes them in double); u32 abs is the identity.
//   - integer div and floor_div round toward -inf, x/0 = 0, INT_MIN/-1 wraps (no trap);
//     rem takes the sign of the divisor (Python %) for floats and ints, x%0 = 0.
//   - float pow of a negative base with an integral exponent follows C pow (stablehlo.power
//     lowered by IREE gives NaN there).
//   - bool arithmetic: add/max → or, mul/min → and; other non-logical bool ops are an error.
//   - arg_reduce, sort and top_k order NaN above every number, first index first on ties.
//   - gather clamps its indices, scatter skips out-of-range ones (both explicitly, so the result
//     does not rest on a backend's bounds handling).
//   - while → stablehlo.while (regions take the carried values); case → stablehlo.case with its
//     index clamped explicitly (out of range → last branch); case branches take no arguments and
//     read the case's operands from the enclosing function, whose SSA names are all unique.
// Unsigned tensors are `ui32`, bool is `i1`, rank 0 is `tensor<f32>`. Float literals always carry
// a decimal point (`1.0`, `1.0e+20`), non-finite ones are bit patterns
// (`0x7F800000`); constants over 16 elements are hex blobs `dense<"0x...">` (bool stays a list).
// Errors (malformed graph, duplicate function names, ops with no meaning for a dtype) are
// SheafErrors.
#pragma once
#include <string>
#include <vector>

#include "ir/ir.hpp"

namespace sheaf::emit {

std::string emit_stablehlo(const std::vector<const ir::Graph*>& fns);

// The StableHLO op that spells node `n` (its main op where the lowering composes several):
// "stablehlo.exponential", "stablehlo.compare" (direction LT), "stablehlo.dot_general". Reports
// (the guard's first-NaN line) name IR nodes this way.
std::string stablehlo_name(const ir::Node& n);

}  // namespace sheaf::emit
