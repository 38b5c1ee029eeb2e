// builtins/math.cpp — arithmetic and elementwise math on host scalars (SPEC §5.1).
#include <array>
#include <cmath>
#include <limits>

#include "builtins/registry.hpp"
#include "builtins/scalar.hpp"
#include "eval/args.hpp"
#include "eval/promote.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/shape.hpp"
#include "value/printer.hpp"

namespace sheaf {

std::optional<Num> to_num(const Value& v) {
  switch (v.kind()) {
    case Kind::Int: return Num{true, v.as_int(), 0};
    case Kind::Float: return Num{false, 0, v.as_float()};
    case Kind::Tensor: {
      const Tensor& t = v.as_tensor();
      if (t.rank() != 0 || t.dtype() == DType::Bool) return std::nullopt;
      if (is_float(t.dtype())) return Num{false, 0, static_cast<float>(t.get(0))};
      return Num{true, static_cast<int64_t>(t.get(0)), 0};
    }
    default: return std::nullopt;
  }
}

bool any_tensor(const CallArgs& a) {
  for (const Value& v : a.args)
    if (v.is(Kind::Tensor)) return true;
  return false;
}

Value elementwise_fold(const CallArgs& a, Binary op, size_t first) {
  Operand acc = operand(a, first);
  for (size_t i = first + 1; i < a.size(); ++i) {
    Operand y = operand(a, i);
    auto [p, q] = promoted(acc, y, a.name);
    acc = {binary(op, p, q), acc.weak && y.weak};  // kernel errors are named by Interp::call
  }
  return Value::tensor(acc.t);
}


Num num_arg(const CallArgs& a, size_t i) {
  if (auto n = to_num(a[i])) return *n;
  std::string kinds;
  for (size_t j = 0; j < a.size(); ++j) kinds += (j ? " and " : "") + std::string(kind_name(a[j].kind()));
  throw SheafError(fmt::format("{}: Expected numeric values, got {}", a.name, kinds), a.site);
}

namespace {

[[noreturn]] void overflow(const CallArgs& a) {
  throw SheafError(fmt::format("integer overflow in {}", a.name), a.site,
                   "host integers are 64-bit and never wrap; convert to float first for an approximate result");
}

// x ** y for y >= 0 by squaring; false when a product leaves i64.
bool int_pow(int64_t x, int64_t y, int64_t& r) {
  r = 1;
  for (int64_t base = x, e = y; e > 0;) {
    if ((e & 1) && __builtin_mul_overflow(r, base, &r)) return false;
    e >>= 1;
    if (e > 0 && __builtin_mul_overflow(base, base, &base)) return false;
  }
  return true;
}

// int ⊕ int on host integers: exact, or "integer overflow in <builtin>" (SPEC §2.3). Tensors
// keep their dtype's wrapping (an i32 tensor wraps as in NumPy).
int64_t int_binary(Binary op, int64_t x, int64_t y, const CallArgs& a) {
  int64_t r = 0;
  bool over = false;
  switch (op) {
    case Binary::Add: over = __builtin_add_overflow(x, y, &r); break;
    case Binary::Sub: over = __builtin_sub_overflow(x, y, &r); break;
    case Binary::Mul: over = __builtin_mul_overflow(x, y, &r); break;
    case Binary::Pow: over = !int_pow(x, y, r); break;
    case Binary::FloorDiv:  // the one quotient outside i64: INT64_MIN // -1
      over = x == std::numeric_limits<int64_t>::min() && y == -1;
      if (!over) r = apply_binary<int64_t>(op, x, y);
      break;
    default: r = apply_binary<int64_t>(op, x, y);
  }
  if (over) overflow(a);
  return r;
}

// Host scalars: int ⊕ int stays int (64-bit, checked), anything with a float is f32; the
// per-element semantics are those of the tensor primitive (apply_binary), so both paths agree.
Num scalar_binary(Binary op, Num x, Num y, const CallArgs& a) {
  if (x.is_int && y.is_int) return Num{true, int_binary(op, x.i, y.i, a), 0};
  return Num{false, 0, apply_binary<float>(op, static_cast<float>(x.d()), static_cast<float>(y.d()))};
}

// Left fold of a binary primitive over all arguments: tensors (any rank) on tensor kernels,
// host scalars with the scalar typing rules.
Value arith(const CallArgs& a, Binary op) {
  if (any_tensor(a)) return elementwise_fold(a, op, 0);
  Num acc = num_arg(a, 0);
  for (size_t i = 1; i < a.size(); ++i) acc = scalar_binary(op, acc, num_arg(a, i), a);
  return acc.value();
}

Value negate(Num x, const CallArgs& a) {
  if (!x.is_int) return Value::real(-x.f);
  if (x.i == std::numeric_limits<int64_t>::min()) overflow(a);
  return Value::integer(-x.i);
}

// (f x 1) for inc/dec.
Value with_one(const CallArgs& a, Binary op) {
  std::array<Value, 2> args{a[0], Value::integer(1)};
  return arith(CallArgs{args, a.site, a.name}, op);
}

Value b_add(Interp&, const CallArgs& a) { return a.size() == 0 ? Value::integer(0) : arith(a, Binary::Add); }
Value b_mul(Interp&, const CallArgs& a) { return a.size() == 0 ? Value::integer(1) : arith(a, Binary::Mul); }
Value b_sub(Interp&, const CallArgs& a) {
  if (a.size() > 1) return arith(a, Binary::Sub);
  if (any_tensor(a)) return Value::tensor(unary(Unary::Neg, a[0].as_tensor()));
  return negate(num_arg(a, 0), a);
}
Value b_inc(Interp&, const CallArgs& a) { return with_one(a, Binary::Add); }
Value b_dec(Interp&, const CallArgs& a) { return with_one(a, Binary::Sub); }

Value b_div(Interp&, const CallArgs& a) {
  if (any_tensor(a)) {  // always floating: integer operands are divided as f32
    Operand acc = a.size() == 1 ? Operand{Tensor::scalar(DType::F32, 1), true} : operand(a, 0);
    for (size_t i = a.size() == 1 ? 0 : 1; i < a.size(); ++i) {
      Operand y = operand(a, i);
      DType d = float_dtype(promote(acc, y, a.name));
      acc = {binary(Binary::Div, convert(acc.t, d), convert(y.t, d)), acc.weak && y.weak};
    }
    return Value::tensor(acc.t);
  }
  float acc = a.size() == 1 ? 1.0f : static_cast<float>(num_arg(a, 0).d());
  for (size_t i = a.size() == 1 ? 0 : 1; i < a.size(); ++i) acc = acc / static_cast<float>(num_arg(a, i).d());
  return Value::real(acc);
}

// //, mod: host integers report division by zero (the tensor kernel gives 0).
Value checked_division(const CallArgs& a, Binary op) {
  if (!any_tensor(a)) {
    Num x = num_arg(a, 0), y = num_arg(a, 1);
    if (x.is_int && y.is_int && y.i == 0) throw SheafError(fmt::format("{}: integer division by zero", a.name), a.site);
  }
  return arith(a, op);
}
Value b_floordiv(Interp&, const CallArgs& a) { return checked_division(a, Binary::FloorDiv); }
Value b_mod(Interp&, const CallArgs& a) { return checked_division(a, Binary::Rem); }

Value b_pow(Interp&, const CallArgs& a) {
  if (!any_tensor(a)) {
    Num x = num_arg(a, 0), y = num_arg(a, 1);
    if (x.is_int && y.is_int && y.i < 0)  // int ** negative int is a float
      return Value::real(std::pow(static_cast<float>(x.i), static_cast<float>(y.i)));
  }
  return arith(a, Binary::Pow);
}

template <float (*F)(float), Unary Op>
Value float_fn(Interp&, const CallArgs& a) {
  if (any_tensor(a)) {
    const Tensor& t = a[0].as_tensor();
    return Value::tensor(unary(Op, convert(t, float_dtype(t.dtype()))));
  }
  return Value::real(F(static_cast<float>(num_arg(a, 0).d())));
}
float f_exp(float x) { return std::exp(x); }
float f_log(float x) { return std::log(x); }
float f_sqrt(float x) { return std::sqrt(x); }
float f_sin(float x) { return std::sin(x); }
float f_cos(float x) { return std::cos(x); }
float f_tan(float x) { return std::tan(x); }
float f_round(float x) { return std::round(x); }  // ties away from zero
float f_ceil(float x) { return std::ceil(x); }
float f_floor(float x) { return std::floor(x); }

Value b_abs(Interp&, const CallArgs& a) {
  if (any_tensor(a)) return Value::tensor(unary(Unary::Abs, a[0].as_tensor()));
  Num x = num_arg(a, 0);
  return x.is_int ? (x.i < 0 ? negate(x, a) : Value::integer(x.i)) : Value::real(std::fabs(x.f));
}
Value b_neg(Interp&, const CallArgs& a) {
  if (any_tensor(a)) return Value::tensor(unary(Unary::Neg, a[0].as_tensor()));
  return negate(num_arg(a, 0), a);
}

// (ash v shift): v·2^shift for shift ≥ 0, ⌊v / 2^−shift⌋ otherwise. Integer tensors (and traced
// host integers) shift element-wise with broadcasting, in their 32-bit dtype; float tensors
// holding integers shift as i32 ((ash [512 1024] -8) → [2 4]).
Value b_ash(Interp&, const CallArgs& a) {
  if (any_tensor(a)) {
    Operand ov = operand(a, 0), os = operand(a, 1);
    auto integers = [](Operand o) {
      if (!is_float(o.t.dtype())) return o;
      std::optional<Tensor> t = integral_tensor(o.t);
      return t ? Operand{o.weak ? t->as_weak() : *t, o.weak} : o;
    };
    auto [v, s] = promoted(integers(ov), integers(os), a.name);
    if (!is_int(v.dtype()))
      throw SheafError(fmt::format("ash: expects integers, got {} and {}", type_str(ov.t), type_str(os.t)), a.site);
    bool weak = ov.weak && os.weak;
    Tensor zero = Tensor::scalar(s.dtype(), 0);
    Tensor left = binary(Binary::ShiftLeft, v, s);
    Tensor right = binary(Binary::ShiftRightArithmetic, v, binary(Binary::Sub, zero, s));
    Tensor r = select(binary(Binary::Ge, s, zero), left, right);
    return Value::tensor(weak ? r.as_weak() : r);
  }
  int64_t v = arg_int(a, 0), s = arg_int(a, 1);
  if (s >= 0) {  // v·2^s, exact or an overflow error
    if (v == 0) return Value::integer(0);
    if (s >= 64) overflow(a);
    int64_t r = static_cast<int64_t>(static_cast<uint64_t>(v) << s);
    if ((r >> s) != v) overflow(a);
    return Value::integer(r);
  }
  return Value::integer(s <= -64 ? (v < 0 ? -1 : 0) : v >> (-s));  // arithmetic shift = floor division
}

Value b_minmax(const CallArgs& a, bool want_max) {
  if (any_tensor(a)) return elementwise_fold(a, want_max ? Binary::Max : Binary::Min, 0);
  Num best = num_arg(a, 0);
  bool all_int = best.is_int;
  for (size_t i = 1; i < a.size(); ++i) {
    Num x = num_arg(a, i);
    all_int = all_int && x.is_int;
    bool better = want_max ? x.d() > best.d() : x.d() < best.d();
    if (better || std::isnan(x.d())) best = x;
  }
  if (!all_int && best.is_int) best = Num{false, 0, static_cast<float>(best.i)};
  return best.value();
}
Value b_maximum(Interp&, const CallArgs& a) { return b_minmax(a, true); }
Value b_minimum(Interp&, const CallArgs& a) { return b_minmax(a, false); }

Value b_clamp(Interp&, const CallArgs& a) {
  if (any_tensor(a)) {
    Value lo = elementwise_fold(CallArgs{std::array{a[0], a[1]}, a.site, a.name}, Binary::Max, 0);
    return elementwise_fold(CallArgs{std::array{lo, a[2]}, a.site, a.name}, Binary::Min, 0);
  }
  Num x = num_arg(a, 0), lo = num_arg(a, 1), hi = num_arg(a, 2);
  if (x.is_int && lo.is_int && hi.is_int) return Value::integer(std::min(std::max(x.i, lo.i), hi.i));
  return Value::real(std::min(std::max(static_cast<float>(x.d()), static_cast<float>(lo.d())), static_cast<float>(hi.d())));
}

Value b_int(Interp&, const CallArgs& a) {
  const Value& v = a[0];
  if (v.is(Kind::Str)) {
    try {
      size_t used = 0;
      long long r = std::stoll(v.as_str(), &used);
      if (used == v.as_str().size()) return Value::integer(r);
    } catch (...) {
    }
    throw SheafError("int: cannot convert '" + v.as_str() + "' to an integer", a.site);
  }
  if (v.is(Kind::Bool)) return Value::integer(v.as_bool());
  if (v.is(Kind::Tensor) && v.as_tensor().rank() > 0) return Value::tensor(convert(v.as_tensor(), DType::I32));
  // A traced rank-0 tensor: the host integer it stands for is a weak i32 of the graph.
  if (v.is(Kind::Tensor) && v.as_tensor().is_symbolic()) return Value::tensor(convert(v.as_tensor(), DType::I32).as_weak());
  if (v.is(Kind::Tensor) && v.as_tensor().dtype() == DType::Bool) return Value::integer(v.as_tensor().get(0) != 0);
  Num x = num_arg(a, 0);
  if (x.is_int) return Value::integer(x.i);
  float t = std::trunc(x.f);  // i64 holds [-2^63, 2^63)
  if (!std::isfinite(x.f) || t < -9.223372036854775808e18f || t >= 9.223372036854775808e18f)
    throw SheafError("int: cannot convert " + format_float(x.f) + " to a 64-bit integer", a.site);
  return Value::integer(static_cast<int64_t>(t));
}

Value b_float(Interp&, const CallArgs& a) {
  const Value& v = a[0];
  if (v.is(Kind::Str)) {
    try {
      size_t used = 0;
      float r = std::stof(v.as_str(), &used);
      if (used == v.as_str().size()) return Value::real(r);
    } catch (...) {
    }
    throw SheafError("float: cannot convert '" + v.as_str() + "' to a float", a.site);
  }
  if (v.is(Kind::Bool)) return Value::real(v.as_bool());
  if (v.is(Kind::Tensor) && v.as_tensor().rank() > 0) return Value::tensor(convert(v.as_tensor(), DType::F32));
  if (v.is(Kind::Tensor) && v.as_tensor().is_symbolic()) return Value::tensor(convert(v.as_tensor(), DType::F32).as_weak());
  if (v.is(Kind::Tensor)) return Value::real(static_cast<float>(v.as_tensor().get(0)));
  return Value::real(static_cast<float>(num_arg(a, 0).d()));
}

const BuiltinDef kMath[] = {
    {"+", "(+ a b ...)", "Sum; (+) is 0. int + int stays int.", b_add, 0, -1},
    {"-", "(- a) / (- a b ...)", "Negation, or left-fold subtraction.", b_sub, 1, -1},
    {"*", "(* a b ...)", "Element-wise product; (*) is 1. Matrix product is @.", b_mul, 0, -1},
    {"/", "(/ a b ...)", "True division; always floating.", b_div, 1, -1},
    {"//", "(// a b)", "Floor division toward -inf; int for integer inputs.", b_floordiv, 2, 2},
    {"mod", "(mod a b)", "Remainder with the sign of the divisor: (mod -7 3) is 2.", b_mod, 2, 2},
    {"%", "(% a b)", "Alias of mod.", b_mod, 2, 2},
    {"**", "(** base exp)", "Power; int ** non-negative int stays int.", b_pow, 2, 2},
    {"abs", "(abs x)", "Absolute value.", b_abs, 1, 1},
    {"neg", "(neg x)", "Unary minus.", b_neg, 1, 1},
    {"inc", "(inc x)", "x + 1.", b_inc, 1, 1},
    {"dec", "(dec x)", "x - 1.", b_dec, 1, 1},
    {"ash", "(ash v shift)", "Arithmetic shift: shift > 0 multiplies by 2^shift, < 0 floor-divides.", b_ash, 2, 2},
    {"exp", "(exp x)", "e^x.", float_fn<f_exp, Unary::Exp>, 1, 1},
    {"log", "(log x)", "Natural logarithm (nan outside the domain, -inf at 0).", float_fn<f_log, Unary::Log>, 1, 1},
    {"sqrt", "(sqrt x)", "Square root.", float_fn<f_sqrt, Unary::Sqrt>, 1, 1},
    {"sin", "(sin x)", "Sine.", float_fn<f_sin, Unary::Sin>, 1, 1},
    {"cos", "(cos x)", "Cosine.", float_fn<f_cos, Unary::Cos>, 1, 1},
    {"tan", "(tan x)", "Tangent.", float_fn<f_tan, Unary::Tan>, 1, 1},
    {"round", "(round x)", "Round half away from zero; float result.", float_fn<f_round, Unary::Round>, 1, 1},
    {"ceil", "(ceil x)", "Ceiling; float result.", float_fn<f_ceil, Unary::Ceil>, 1, 1},
    {"floor", "(floor x)", "Floor; float result.", float_fn<f_floor, Unary::Floor>, 1, 1},
    {"clamp", "(clamp x lo hi)", "Clip x to [lo, hi].", b_clamp, 3, 3},
    {"minimum", "(minimum a b)", "Element-wise minimum of two values.", b_minimum, 2, 2},
    {"maximum", "(maximum a b)", "Element-wise maximum of two values.", b_maximum, 2, 2},
    {"int", "(int x)", "To integer (truncation toward zero); parses strings.", b_int, 1, 1},
    {"float", "(float x)", "To float; parses strings.", b_float, 1, 1},
};

}  // namespace

std::span<const BuiltinDef> math_builtins() { return kMath; }

}  // namespace sheaf
