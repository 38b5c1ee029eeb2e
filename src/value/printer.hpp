// value/printer.hpp — the one printer (SPEC §2.8) behind REPL echo, print, str and golden tests.
#pragma once
#include <string>

#include "tensor/print.hpp"
#include "value/value.hpp"

namespace sheaf {

// `top`: a string at top level prints its characters; inside a collection it is quoted.
std::string print_value(const Value& v, bool top = true);
// The same, appended to `out` (no copy of a large string in between).
void print_value_to(std::string& out, const Value& v, bool top = true);

}  // namespace sheaf
