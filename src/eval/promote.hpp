// eval/promote.hpp — operands of elementwise builtins and the dtype rules of SPEC §2.3.
// Host scalars are weakly typed: next to a tensor they take the tensor's dtype (a float scalar
// with an integer tensor gives f32). Two tensors: bool promotes to the other dtype, an integer
// tensor to the other's float dtype; any other mixture is an error naming both dtypes.
#pragma once
#include <string_view>
#include <utility>

#include "value/function.hpp"

namespace sheaf {

struct Operand {
  Tensor t;
  bool weak;  // a host scalar (int, float or bool)
};

// Argument i as an operand; non-numeric values give "Expected numeric values, got …".
Operand operand(const CallArgs& a, size_t i);
// The common dtype of two operands (error for incompatible tensor dtypes).
DType promote(const Operand& x, const Operand& y, std::string_view who);
// Both operands converted to their common dtype.
std::pair<Tensor, Tensor> promoted(const Operand& x, const Operand& y, std::string_view who);
// Float dtype for operations that always produce floats (`/`, exp, mean …): ints → f32.
DType float_dtype(DType d);

}  // namespace sheaf
