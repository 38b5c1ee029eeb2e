// tensor/elementwise.hpp — elementwise primitives on host tensors (StableHLO semantics).
//   unary:   same shape and dtype (float ops on f16/bf16 compute in f32 and round back)
//   binary:  operands of one dtype, NumPy broadcasting; comparisons give bool
//   convert: any dtype to any dtype (float→int truncates toward zero, saturating)
//   select:  cond (bool) ? a : b with broadcasting
// Callers (builtins) apply the language's dtype promotion first (SPEC §2.3).
#pragma once
#include "tensor/tensor.hpp"

namespace sheaf {

enum class Unary { Neg, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tan, Tanh, Floor, Ceil, Round, Sign, Logistic, Not };
enum class Binary {
  Add, Sub, Mul, Div, Pow, Max, Min,
  Rem,       // remainder with the sign of the divisor (Python `%`)
  FloorDiv,  // floor(a / b); integer division rounding toward -inf for ints
  Eq, Ne, Lt, Le, Gt, Ge,
  And, Or, Xor,
  ShiftLeft, ShiftRightLogical, ShiftRightArithmetic,
};

bool is_comparison(Binary op);

Tensor unary(Unary op, const Tensor& x);
Tensor binary(Binary op, const Tensor& a, const Tensor& b);
Tensor convert(const Tensor& x, DType to);
Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor broadcast_to(const Tensor& x, const Shape& shape);

}  // namespace sheaf
