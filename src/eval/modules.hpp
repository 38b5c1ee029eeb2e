// eval/modules.hpp — bundled prelude modules (lib/*.shf embedded at build time).
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace sheaf {
// Source of a bundled module (nn, optim, macros, misc), or nullopt.
std::optional<std::string_view> bundled_module(std::string_view name);
std::vector<std::string_view> bundled_module_names();
}  // namespace sheaf
