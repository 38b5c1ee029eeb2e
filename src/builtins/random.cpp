// builtins/random.cpp — random builtins (SPEC §5).
#include "builtins/registry.hpp"

namespace sheaf {

std::span<const BuiltinDef> random_builtins() { return {}; }

}  // namespace sheaf
