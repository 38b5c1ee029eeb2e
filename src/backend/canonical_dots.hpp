// backend/canonical_dots.hpp — dot_general operands whose free or contracting dims are not
// adjacent and in order (row-major) transposed into (batch, free, contracting) / (batch,
// contracting, free) order, for the backends that run products as strided matrix products (the
// CPU's OpenBLAS calls, the GPU's cuBLASLt calls): an einsum such as "bhtk,hkd->btd" (an attention
// output projection on weights reshaped to [H Hd D]) would otherwise be no Dot step at all but a
// product on the host. Keeps the contract of the optimisation passes (passes/passes.hpp): a new
// graph with the same parameters and results, equal under the reference executor. Not part of
// optimize: each backend runs it after merge_dots; canonical_dots.cpp.
#pragma once
#include "ir/ir.hpp"

namespace sheaf::fusion {

ir::Graph canonical_dots(const ir::Graph& g);

}  // namespace sheaf::fusion
