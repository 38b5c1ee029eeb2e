// value/tensor_value.cpp — conversions between tensors and host values.
#include "value/tensor_value.hpp"

#include <cstring>

#include "tensor/layout.hpp"

namespace sheaf {

Value scalar_value(const Tensor& t, int64_t i) {
  if (t.is_symbolic()) {  // while tracing, a host scalar is a weak rank-0 symbolic tensor
    Tensor flat = reshape(t, {t.numel()});
    return Value::tensor(reshape(slice_axis(flat, 0, i, i + 1), {}).as_weak());
  }
  double v = t.get(i);
  if (is_float(t.dtype())) return Value::real(static_cast<float>(v));
  if (t.dtype() == DType::Bool) return Value::boolean(v != 0);
  return Value::integer(static_cast<int64_t>(v));
}

Value row_value(const Tensor& t, int64_t i) {
  if (t.rank() == 1) return scalar_value(t, i);
  Shape sub(t.shape().begin() + 1, t.shape().end());
  if (t.is_symbolic()) return Value::tensor(reshape(slice_axis(t, 0, i, i + 1), sub));
  Tensor r(t.dtype(), sub);
  size_t row_bytes = r.nbytes();
  if (row_bytes) std::memcpy(r.mutable_bytes(), t.bytes() + static_cast<size_t>(i) * row_bytes, row_bytes);
  return Value::tensor(std::move(r));
}

std::vector<Value> row_values(const Tensor& t) {
  std::vector<Value> rows;
  rows.reserve(static_cast<size_t>(t.shape()[0]));
  for (int64_t i = 0; i < t.shape()[0]; ++i) rows.push_back(row_value(t, i));
  return rows;
}

std::optional<double> number_of(const Value& v) {
  switch (v.kind()) {
    case Kind::Int: return static_cast<double>(v.as_int());
    case Kind::Float: return v.as_float();
    case Kind::Tensor:
      if (v.as_tensor().rank() == 0) return v.as_tensor().get(0);
      return std::nullopt;
    default: return std::nullopt;
  }
}

Tensor make_tensor(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values[static_cast<size_t>(i)]);
  return t;
}

}  // namespace sheaf
