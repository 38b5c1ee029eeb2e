// builtins/scalar.hpp — host-scalar numerics shared by math and comparison builtins.
// SPEC §2.3: int ⊕ int → int (64-bit; a result outside i64 is an error, never wrapped),
// anything with a float → f32; `/` always floats. A rank-0 tensor is accepted wherever a number is.
#pragma once
#include <optional>

#include "tensor/elementwise.hpp"
#include "value/function.hpp"

namespace sheaf {

struct Num {
  bool is_int;
  int64_t i;
  float f;
  double d() const { return is_int ? static_cast<double>(i) : f; }
  Value value() const { return is_int ? Value::integer(i) : Value::real(f); }
};

std::optional<Num> to_num(const Value& v);
// Numeric argument i, or the error "Expected numeric values, got int and function".
Num num_arg(const CallArgs& a, size_t i);
// True when any argument is a tensor: the call then runs on tensor kernels.
bool any_tensor(const CallArgs& a);

// Left fold of an elementwise binary primitive over arguments first.. with SPEC §2.3 promotion
// and broadcasting; errors name the builtin and both shapes.
Value elementwise_fold(const CallArgs& a, Binary op, size_t first);

}  // namespace sheaf
