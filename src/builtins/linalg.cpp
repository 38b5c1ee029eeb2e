// builtins/linalg.cpp — linalg builtins (SPEC §5).
#include "builtins/registry.hpp"

namespace sheaf {

std::span<const BuiltinDef> linalg_builtins() { return {}; }

}  // namespace sheaf
