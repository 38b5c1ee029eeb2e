// builtins/activation.cpp — activation builtins (SPEC §5).
#include "builtins/registry.hpp"

namespace sheaf {

std::span<const BuiltinDef> activation_builtins() { return {}; }

}  // namespace sheaf
