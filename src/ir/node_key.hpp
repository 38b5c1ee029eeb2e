// ir/node_key.hpp — structural identity of a node: the key CSE and the reverse sweep's value
// numbering compare.
#pragma once
#include <cstddef>
#include <span>
#include <string>

#include "ir/ir.hpp"

namespace sheaf::ir {

// Byte string identifying node `n` of `g` read with operands `in`: equal keys ⇔ equal op,
// operands, result types and attributes (floats compared by bits). Constants are keyed by
// their bytes up to kConstantKeyBytes, larger ones by storage identity; regions (while, case)
// by the identity of their graphs. Locations are ignored.
inline constexpr size_t kConstantKeyBytes = 4096;
std::string node_key(const Graph& g, const Node& n, std::span<const int32_t> in);

}  // namespace sheaf::ir
