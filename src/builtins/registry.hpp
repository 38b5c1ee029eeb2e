// builtins/registry.hpp — the one builtin table (name, signature, doc, function, arity).
// It feeds dispatch, REPL `:help` and completion, and later `init-ai` and docs/reference.md.
// Each family file (math, compare, list, dict, string, …) contributes one static array.
#pragma once
#include <span>
#include <vector>

#include "value/function.hpp"

namespace sheaf {

std::span<const BuiltinDef> math_builtins();
std::span<const BuiltinDef> compare_builtins();
std::span<const BuiltinDef> list_builtins();
std::span<const BuiltinDef> dict_builtins();
std::span<const BuiltinDef> string_builtins();

// All builtins, in family order.
const std::vector<const BuiltinDef*>& builtin_table();

}  // namespace sheaf
