// builtins/reduce.cpp — reduce builtins (SPEC §5).
#include "builtins/registry.hpp"

namespace sheaf {

std::span<const BuiltinDef> reduce_builtins() { return {}; }

}  // namespace sheaf
