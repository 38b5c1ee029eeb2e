// eval/modules.hpp — bundled prelude modules (lib/*.shf embedded at build time).
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace sheaf {
// Source of a bundled module (nn, optim, macros, misc), or nullopt.
std::optional<std::string_view> bundled_module(std::string_view name);
std::vector<std::string_view> bundled_module_names();
// nn and optim: their names resolve without `use` (SPEC §4.7).
bool is_autoloaded_module(std::string_view name);
}  // namespace sheaf
