// tensor/elementwise.hpp — elementwise primitives on host tensors (StableHLO semantics).
//   unary:   same shape and dtype (float ops on f16/bf16 compute in f32 and round back)
//   binary:  operands of one dtype, NumPy broadcasting; comparisons give bool
//   convert: any dtype to any dtype (float→int truncates toward zero, saturating)
//   select:  cond (bool) ? a : b with broadcasting
// Callers (builtins) apply the language's dtype promotion first (SPEC §2.3).
#pragma once
#include <cmath>
#include <type_traits>

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

// One element of a non-comparison binary primitive. Integers wrap; integer division and
// remainder by zero give 0 (callers that must report it check first). The host-scalar
// arithmetic of the interpreter uses the same function, so scalars and tensors agree.
template <typename T>
inline T apply_binary(Binary op, T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case Binary::Add: return x + y;
      case Binary::Sub: return x - y;
      case Binary::Mul: return x * y;
      case Binary::Div: return x / y;
      case Binary::Pow: return std::pow(x, y);
      case Binary::Max: return (x > y || std::isnan(x)) ? x : y;
      case Binary::Min: return (x < y || std::isnan(x)) ? x : y;
      case Binary::Rem: {
        T r = std::fmod(x, y);
        return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
      }
      case Binary::FloorDiv: return std::floor(x / y);
      default: return 0;
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case Binary::Add: return static_cast<T>(static_cast<U>(x) + static_cast<U>(y));
      case Binary::Sub: return static_cast<T>(static_cast<U>(x) - static_cast<U>(y));
      case Binary::Mul: return static_cast<T>(static_cast<U>(x) * static_cast<U>(y));
      case Binary::Div:
      case Binary::FloorDiv: {
        if (y == 0) return 0;
        if constexpr (std::is_signed_v<T>) {
          if (y == -1) return static_cast<T>(U(0) - static_cast<U>(x));
          T q = x / y;
          return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
        } else {
          return x / y;
        }
      }
      case Binary::Rem: {
        if (y == 0) return 0;
        if constexpr (std::is_signed_v<T>) {
          if (y == -1) return 0;
          T r = x % y;
          return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
        } else {
          return x % y;
        }
      }
      case Binary::Pow: {
        if constexpr (std::is_signed_v<T>) {
          if (y < 0) return x == 1 ? 1 : (x == -1 ? (y % 2 ? -1 : 1) : 0);
        }
        U base = static_cast<U>(x), r = 1;
        for (T e = y; e > 0; e >>= 1, base *= base)
          if (e & 1) r *= base;
        return static_cast<T>(r);
      }
      case Binary::Max: return x > y ? x : y;
      case Binary::Min: return x < y ? x : y;
      case Binary::And: return x & y;
      case Binary::Or: return x | y;
      case Binary::Xor: return x ^ y;
      case Binary::ShiftLeft: return static_cast<U>(y) >= sizeof(T) * 8 ? 0 : static_cast<T>(static_cast<U>(x) << y);
      case Binary::ShiftRightLogical: return static_cast<U>(y) >= sizeof(T) * 8 ? 0 : static_cast<T>(static_cast<U>(x) >> y);
      case Binary::ShiftRightArithmetic:
        if constexpr (std::is_signed_v<T>) return static_cast<U>(y) >= sizeof(T) * 8 ? (x < 0 ? -1 : 0) : x >> y;
        else return static_cast<U>(y) >= sizeof(T) * 8 ? 0 : x >> y;
      default: return 0;
    }
  }
}


Tensor unary(Unary op, const Tensor& x);
Tensor binary(Binary op, const Tensor& a, const Tensor& b);
Tensor convert(const Tensor& x, DType to);
Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor broadcast_to(const Tensor& x, const Shape& shape);

}  // namespace sheaf
