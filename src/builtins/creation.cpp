// builtins/creation.cpp — creation builtins (SPEC §5).
#include "builtins/registry.hpp"

namespace sheaf {

std::span<const BuiltinDef> creation_builtins() { return {}; }

}  // namespace sheaf
