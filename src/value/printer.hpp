// value/printer.hpp — the one printer (SPEC §2.8) behind REPL echo, print, str and golden tests.
#pragma once
#include <string>

#include "value/value.hpp"

namespace sheaf {

// `top`: a string at top level prints its characters; inside a collection it is quoted.
std::string print_value(const Value& v, bool top = true);
// The same, appended to `out` (no copy of a large string in between).
void print_value_to(std::string& out, const Value& v, bool top = true);

// Shortest decimal that reads back as the same f32, Python-repr layout: 5.0, 0.1, 1e-05, 1.5e+20.
std::string format_float(float f);

// NumPy str() layout of a tensor (SPEC §2.8); rank 0 prints as the scalar of its dtype.
std::string print_tensor(const Tensor& t);

}  // namespace sheaf
