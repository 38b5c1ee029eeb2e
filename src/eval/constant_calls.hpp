// eval/constant_calls.hpp — while a function is traced, a builtin called again with the same known
// arguments returns the result of its first call instead of computing it again: a model whose
// every layer builds its causal mask, (== (tril (ones [T T])) 1.0), builds it once per trace, not
// once per layer (GPT-2 small: 12 masks of a million elements, half of its first step's host time).
// Known arguments are numbers, booleans, nil, strings, keywords, lists of them and concrete tensors,
// the last by identity (their bytes, dtype and shape; an entry keeps them alive, so their bytes are
// not reused). Sound because a builtin without effects is a function of its arguments and values
// are immutable. Only tensor results of at least 64 KiB are kept, 256 MiB in all with the tensors
// their entries keep alive, until the outermost trace ends (trace::detail::Scope calls
// clear_constant_calls).
#pragma once
#include <optional>
#include <span>
#include <string>

#include "value/function.hpp"

namespace sheaf {

// The key of builtin `d` called with `args`, or nullopt when an argument is not known (a traced
// tensor, a function, a dict) or `d` has effects.
std::optional<std::string> constant_call_key(const BuiltinDef& d, std::span<const Value> args);
// The result kept for `key`, or null.
const Value* find_constant_call(const std::string& key);
// Keeps `result` for `key` when it is a large concrete tensor and the budget allows, with `args`.
void keep_constant_call(std::string key, const Value& result, std::span<const Value> args);
// Forgets every kept result (the outermost trace ended).
void clear_constant_calls();
// The calls answered by a kept result so far, in this process (--jit-profile).
size_t constant_calls_reused();

}  // namespace sheaf
