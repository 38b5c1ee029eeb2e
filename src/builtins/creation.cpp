// builtins/creation.cpp — creating and converting tensors (SPEC §5.7): zeros ones eye one-hot
// tensor cast. (range/arange live with the sequence builtins; int/float with the math ones.)
#include <cmath>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

Tensor filled(Interp& in, const CallArgs& a, double v) {
  Shape s = arg_shape(a, 0);
  in.check_elements(shape_numel(s), a.site);
  DType d = a.size() > 1 ? arg_dtype(a, 1) : DType::F32;
  if (v == 0) return Tensor(d, s);  // zero bytes in every dtype
  Tensor t = Tensor::empty(d, s);
  if (d == DType::F32) {
    float* p = t.mutable_data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(v);
  } else {
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, v);
  }
  return t;
}

Value b_zeros(Interp& in, const CallArgs& a) { return Value::tensor(filled(in, a, 0)); }
Value b_ones(Interp& in, const CallArgs& a) { return Value::tensor(filled(in, a, 1)); }

Value b_eye(Interp& in, const CallArgs& a) {
  int64_t n = arg_int(a, 0), m = a.size() > 1 ? arg_int(a, 1) : n;
  if (n < 0 || m < 0) throw SheafError(fmt::format("eye: sizes must be non-negative, got {} and {}", n, m), a.site);
  in.check_elements(n * m, a.site);
  Tensor t(DType::F32, {n, m});
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = 1;
  return Value::tensor(std::move(t));
}

// (one-hot idx n): appends a class axis of size n; out-of-range classes give all-zero rows.
// out[..., c] = (idx[..., None] == iota(n))[..., c], so it traces like any composite.
Value b_one_hot(Interp& in, const CallArgs& a) {
  int64_t n = arg_int(a, 1);
  if (n < 0) throw SheafError(fmt::format("one-hot: number of classes must be non-negative, got {}", n), a.site);
  Tensor idx;
  if (a[0].is(Kind::Tensor)) idx = a[0].as_tensor();
  else idx = Tensor::scalar(DType::I32, static_cast<double>(arg_int(a, 0)));
  if (is_float(idx.dtype())) {  // known indices must be integral; traced ones cannot be checked
    for (int64_t i = 0; !idx.is_symbolic() && i < idx.numel(); ++i)
      if (idx.get(i) != std::trunc(idx.get(i)))
        throw SheafError(fmt::format("one-hot: indices must be integers, got {}", type_str(idx)), a.site);
    idx = convert(idx, DType::F32);
  } else if (idx.dtype() == DType::Bool) {
    idx = convert(idx, DType::I32);
  }
  Shape s = idx.shape();
  s.push_back(n);
  in.check_elements(shape_numel(s), a.site);
  Shape column = idx.shape();
  column.push_back(1);
  Tensor hit = binary(Binary::Eq, reshape(idx, column), iota(idx.dtype(), {n}, 0));
  return Value::tensor(convert(hit, DType::F32));
}

// The elements of nested data in row-major order. Host numbers and concrete tensors collect
// as doubles in `vals` (the fast path); a traced tensor leaf closes the run of values before it
// and joins `parts` as a flat piece of the target dtype, so the result is then built with
// primitives (concatenate, reshape).
struct Flat {
  DType dtype;
  std::vector<double> vals;
  std::vector<Tensor> parts;  // non-empty only when a traced tensor occurs

  void flush() {
    if (vals.empty()) return;
    parts.push_back(make_tensor(dtype, {static_cast<int64_t>(vals.size())}, vals));
    vals.clear();
  }
  void add_traced(const Tensor& t) {
    flush();
    parts.push_back(reshape(convert(t, dtype), {t.numel()}));
  }
  Tensor result(const Shape& shape) {
    if (parts.empty()) return make_tensor(dtype, shape, vals);
    flush();
    return reshape(concatenate(parts, 0), shape);
  }
};

// Nested list (or tensor rows) → shape and flat values; ragged nesting is an error.
void flatten_data(const Value& v, size_t depth, Shape& shape, Flat& out, const CallArgs& a) {
  bool scalar_leaf = is_traced(v) && v.as_tensor().rank() == 0;
  if (auto d = scalar_leaf ? std::nullopt : number_of(v); d || v.is(Kind::Bool) || scalar_leaf) {
    if (depth != shape.size()) throw SheafError("tensor: ragged nested data (mixed depths)", a.site);
    if (scalar_leaf) out.add_traced(v.as_tensor());
    else out.vals.push_back(v.is(Kind::Bool) ? v.as_bool() : *d);
    return;
  }
  if (v.is(Kind::Tensor)) {
    const Tensor& t = v.as_tensor();
    if (depth == shape.size()) shape.insert(shape.end(), t.shape().begin(), t.shape().end());
    else if (!std::equal(t.shape().begin(), t.shape().end(), shape.begin() + static_cast<std::ptrdiff_t>(depth), shape.end()))
      throw SheafError("tensor: ragged nested data (rows of different shapes)", a.site);
    if (t.is_symbolic()) out.add_traced(t);
    else
      for (int64_t i = 0; i < t.numel(); ++i) out.vals.push_back(t.get(i));
    return;
  }
  if (!v.is_list()) throw SheafError(fmt::format("tensor: expected numbers or nested lists, got {}", kind_name(v.kind())), a.site);
  const auto& items = v.as_list().items;
  if (depth == shape.size()) shape.push_back(static_cast<int64_t>(items.size()));
  else if (shape[depth] != static_cast<int64_t>(items.size()))
    throw SheafError(fmt::format("tensor: ragged nested data (a row of {} where {} were expected)", items.size(), shape[depth]), a.site);
  for (const Value& x : items) flatten_data(x, depth + 1, shape, out, a);
}

Value b_tensor(Interp& in, const CallArgs& a) {
  DType d = a.size() > 1 ? arg_dtype(a, 1) : DType::F32;
  if (a[0].is(Kind::Tensor)) return Value::tensor(convert(a[0].as_tensor(), d));
  Shape shape;
  Flat flat{d, {}, {}};
  flatten_data(a[0], 0, shape, flat, a);
  int64_t count = static_cast<int64_t>(flat.vals.size());
  for (const Tensor& p : flat.parts) count += p.numel();
  if (count != shape_numel(shape)) throw SheafError("tensor: ragged nested data", a.site);
  in.check_elements(shape_numel(shape), a.site);
  return Value::tensor(flat.result(shape));
}

Value b_cast(Interp&, const CallArgs& a) {
  DType d = arg_dtype(a, 1);
  const Value& v = a[0];
  if (v.is(Kind::Tensor)) return Value::tensor(convert(v.as_tensor(), d));
  if (auto n = number_of(v); n || v.is(Kind::Bool)) return Value::tensor(Tensor::scalar(d, v.is(Kind::Bool) ? v.as_bool() : *n));
  type_error(a, 0, "a tensor or a number");
}

const BuiltinDef kCreation[] = {
    {"zeros", "(zeros shape [dtype])", "Tensor of zeros (f32 unless a dtype keyword is given).", b_zeros, 1, 2},
    {"ones", "(ones shape [dtype])", "Tensor of ones (f32 unless a dtype keyword is given).", b_ones, 1, 2},
    {"eye", "(eye n [m])", "Identity matrix, or n×m with ones on the diagonal.", b_eye, 1, 2},
    {"one-hot", "(one-hot idx n)", "Appends a class axis of size n with a 1 at each index; f32.", b_one_hot, 2, 2},
    {"tensor", "(tensor data [dtype])", "Nested list (or tensor) → tensor; f32 unless a dtype keyword is given.", b_tensor, 1, 2},
    {"cast", "(cast x :dtype)", "Explicit conversion to :f32 :f16 :bf16 :i32 :u32 :bool; float→int truncates.", b_cast, 2, 2},
};

}  // namespace

std::span<const BuiltinDef> creation_builtins() { return kCreation; }

}  // namespace sheaf
