// tensor/print.hpp — the text of floats and tensors (SPEC §2.8), shared by the value printer
// (value/printer.hpp) and the IR printer (ir::print's constants).
#pragma once
#include <string>

#include "tensor/tensor.hpp"

namespace sheaf {

// Shortest decimal that reads back as the same f32, Python-repr layout: 5.0, 0.1, 1e-05, 1.5e+20.
std::string format_float(float f);

// NumPy str() layout of a tensor (SPEC §2.8); rank 0 prints as the scalar of its dtype.
std::string print_tensor(const Tensor& t);

}  // namespace sheaf
