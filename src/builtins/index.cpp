// builtins/index.cpp — index builtins (SPEC §5).
#include "builtins/registry.hpp"

namespace sheaf {

std::span<const BuiltinDef> index_builtins() { return {}; }

}  // namespace sheaf
