// builtins/loss.cpp — loss builtins (SPEC §5).
#include "builtins/registry.hpp"

namespace sheaf {

std::span<const BuiltinDef> loss_builtins() { return {}; }

}  // namespace sheaf
