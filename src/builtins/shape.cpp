// builtins/shape.cpp — shape builtins (SPEC §5).
#include "builtins/registry.hpp"

namespace sheaf {

std::span<const BuiltinDef> shape_builtins() { return {}; }

}  // namespace sheaf
