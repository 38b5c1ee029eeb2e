// builtins/tree.cpp — tree builtins (SPEC §5).
#include "builtins/registry.hpp"

namespace sheaf {

std::span<const BuiltinDef> tree_builtins() { return {}; }

}  // namespace sheaf
