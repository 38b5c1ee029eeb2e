// autodiff/builtins.hpp — the builtin families autodiff contributes to the builtin table
// (builtins/registry.cpp): differentiation (grad, jvp; value-and-grad is a special form) and
// differentiation rules (checkpoint, custom-vjp).
#pragma once
#include <span>

#include "value/function.hpp"

namespace sheaf {

std::span<const BuiltinDef> autodiff_builtins();  // autodiff/value_and_grad.cpp
std::span<const BuiltinDef> rule_builtins();      // autodiff/custom_rules.cpp

}  // namespace sheaf
