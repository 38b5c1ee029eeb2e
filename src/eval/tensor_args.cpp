// eval/tensor_args.cpp — values as arrays and integer lists for the structural builtins.
#include "eval/tensor_args.hpp"

#include <cmath>

#include "eval/args.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/gather.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

std::optional<int64_t> integral(const Value& v) {
  auto d = number_of(v);
  if (!d || std::trunc(*d) != *d || std::fabs(*d) > 9.2e18) return std::nullopt;
  return static_cast<int64_t>(*d);
}

// A list whose elements are all numbers or bools: one 1-D tensor.
std::optional<Tensor> flat_numbers(const std::vector<Value>& items) {
  bool any_float = false, all_bool = true;
  std::vector<double> vals;
  vals.reserve(items.size());
  for (const Value& x : items) {
    if (!x.is_number() && !x.is(Kind::Bool)) return std::nullopt;
    any_float = any_float || x.is(Kind::Float);
    all_bool = all_bool && x.is(Kind::Bool);
    vals.push_back(x.is(Kind::Bool) ? x.as_bool() : x.as_double());
  }
  DType d = any_float ? DType::F32 : all_bool ? DType::Bool : DType::I32;
  return make_tensor(d, {static_cast<int64_t>(items.size())}, vals);
}

}  // namespace

std::optional<Operand> as_operand(const Value& v) {
  switch (v.kind()) {
    case Kind::Tensor: return Operand{v.as_tensor(), v.as_tensor().weak()};
    case Kind::Int: return Operand{Tensor::scalar(DType::I32, static_cast<double>(v.as_int())), true};
    case Kind::Float: return Operand{Tensor::scalar(DType::F32, v.as_float()), true};
    case Kind::Bool: return Operand{Tensor::scalar(DType::Bool, v.as_bool()), true};
    case Kind::List: break;
    default: return std::nullopt;
  }
  const std::vector<Value>& items = v.as_list().items;
  if (items.empty()) return Operand{Tensor(DType::F32, {0}), false};
  if (auto t = flat_numbers(items)) return Operand{*t, false};
  std::vector<Operand> ops;
  for (const Value& x : items) {
    auto o = as_operand(x);
    if (!o || (!ops.empty() && o->t.shape() != ops[0].t.shape())) return std::nullopt;  // ragged
    ops.push_back(*o);
  }
  Operand acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) acc = {Tensor::scalar(promote(acc, ops[i], "array"), 0), acc.weak && ops[i].weak};
  Shape row = ops[0].t.shape();
  row.insert(row.begin(), 1);
  std::vector<Tensor> rows;
  for (const Operand& o : ops) rows.push_back(reshape(convert(o.t, acc.t.dtype()), row));
  return Operand{concatenate(rows, 0), false};
}

Operand array_operand(const CallArgs& a, size_t i) {
  auto o = as_operand(a[i]);
  if (!o) type_error(a, i, "a tensor, a number or a (nested) list of numbers");
  return *o;
}

Tensor array_arg(const CallArgs& a, size_t i) { return array_operand(a, i).t; }

std::vector<Tensor> promote_all(const CallArgs& a, const std::vector<Operand>& ops) {
  Operand acc = ops.at(0);
  for (size_t i = 1; i < ops.size(); ++i)
    acc = {Tensor::scalar(run_primitive(a, [&] { return promote(acc, ops[i], a.name); }), 0), acc.weak && ops[i].weak};
  std::vector<Tensor> out;
  for (const Operand& o : ops) out.push_back(convert(o.t, acc.t.dtype()));
  return out;
}

bool is_int_list(const Value& v) { return v.is_list() || (v.is(Kind::Tensor) && v.as_tensor().rank() == 1); }

std::vector<int64_t> int_list(const CallArgs& a, const Value& v, size_t arg_index) {
  std::vector<Value> items;
  if (v.is_list()) items = v.as_list().items;
  else if (v.is(Kind::Tensor) && v.as_tensor().rank() == 1)
    for (int64_t i = 0; i < v.as_tensor().numel(); ++i) items.push_back(scalar_value(v.as_tensor(), i));
  else items.push_back(v);
  std::vector<int64_t> out;
  for (const Value& x : items) {
    auto n = integral(x);
    if (!n) type_error(a, arg_index, "an integer or a list of integers");
    out.push_back(*n);
  }
  return out;
}

Tensor int_scalar(const CallArgs& a, const Value& v, size_t arg_index, std::string_view expected) {
  if (is_traced(v)) {
    if (v.as_tensor().rank() != 0) type_error(a, arg_index, expected);
    return convert(v.as_tensor(), DType::I32);
  }
  std::vector<int64_t> n = int_list(a, v, arg_index);
  if (n.size() != 1 || is_int_list(v)) type_error(a, arg_index, expected);
  return Tensor::scalar(DType::I32, static_cast<double>(n[0]));
}

std::string list_str(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

Value shape_value(const Shape& s) {
  std::vector<Value> items;
  for (int64_t d : s) items.push_back(Value::integer(d));
  return Value::list(std::move(items));
}

int64_t axis_of(const CallArgs& a, const Value& v, int64_t rank) {
  auto n = integral(v);
  if (!n) throw SheafError(fmt::format("{}: axis must be an integer, got {}", a.name, kind_name(v.kind())), a.site);
  return run_primitive(a, [&] { return normalize_axis(*n, rank); });
}

std::optional<Tensor> integral_tensor(const Tensor& t) {
  for (int64_t k = 0; !t.is_symbolic() && k < t.numel(); ++k)
    if (double d = t.get(k); std::trunc(d) != d) return std::nullopt;
  return convert(t, DType::I32);
}

Tensor take_index(const Tensor& x, const Tensor& idx, int64_t axis, std::string_view who, SrcLoc loc) {
  Tensor i = idx;
  if (!is_int(i.dtype())) {  // integral floats are accepted
    std::optional<Tensor> n = i.dtype() == DType::Bool && i.numel() > 0 ? std::nullopt : integral_tensor(i);
    if (!n) throw SheafError(fmt::format("{}: indices must be integers, got {}", who, type_str(idx)), loc);
    i = *n;
  }
  if (i.dtype() == DType::I32) {  // negative indices count from the end
    Tensor neg = binary(Binary::Lt, i, Tensor::scalar(DType::I32, 0));
    i = select(neg, binary(Binary::Add, i, Tensor::scalar(DType::I32, static_cast<double>(x.dim(axis)))), i);
  }
  try {
    return take(x, i, axis);
  } catch (SheafError& e) {
    throw SheafError(fmt::format("{}: {}", who, e.what()), loc);
  }
}

}  // namespace sheaf
