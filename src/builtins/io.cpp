// builtins/io.cpp — io builtins (SPEC §5).
#include "builtins/registry.hpp"

namespace sheaf {

std::span<const BuiltinDef> io_builtins() { return {}; }

}  // namespace sheaf
