// eval/promote.cpp — operand conversion and dtype promotion for elementwise builtins.
#include "eval/promote.hpp"

#include "base/error.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/shape.hpp"

namespace sheaf {

Operand operand(const CallArgs& a, size_t i) {
  const Value& v = a[i];
  switch (v.kind()) {
    case Kind::Tensor: return {v.as_tensor(), v.as_tensor().weak()};
    case Kind::Int: return {Tensor::scalar(DType::I32, static_cast<double>(v.as_int())), true};
    case Kind::Float: return {Tensor::scalar(DType::F32, v.as_float()), true};
    case Kind::Bool: return {Tensor::scalar(DType::Bool, v.as_bool()), true};
    default: break;
  }
  std::string kinds;
  for (size_t j = 0; j < a.size(); ++j) kinds += (j ? " and " : "") + std::string(kind_name(a[j].kind()));
  throw SheafError(fmt::format("{}: Expected numeric values, got {}", a.name, kinds), a.site);
}

DType float_dtype(DType d) { return is_float(d) ? d : DType::F32; }

DType promote(const Operand& x, const Operand& y, std::string_view who) {
  DType a = x.t.dtype(), b = y.t.dtype();
  if (a == b) return a;
  if (x.weak != y.weak) {  // scalar next to a tensor: the tensor's dtype, except float with int
    const Operand& strong = x.weak ? y : x;
    const Operand& weak = x.weak ? x : y;
    if (is_float(weak.t.dtype()) && !is_float(strong.t.dtype())) return DType::F32;
    return strong.t.dtype();
  }
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_int(a) && is_float(b)) return b;
  if (is_int(b) && is_float(a)) return a;
  if (x.weak && y.weak) return is_float(a) ? a : b;
  throw SheafError(fmt::format("{}: cannot combine {} and {} tensors; use (cast x :{}) to convert one of them", who,
                               dtype_name(a), dtype_name(b), dtype_name(a)));
}

std::pair<Tensor, Tensor> promoted(const Operand& x, const Operand& y, std::string_view who) {
  DType d = promote(x, y, who);
  return {convert(x.t, d), convert(y.t, d)};
}

}  // namespace sheaf
