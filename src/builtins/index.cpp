// builtins/index.cpp — indexing and dynamic builtins (SPEC §5.6): index-update, dynamic-slice,
// dynamic-update-slice, top_k. Start positions may be runtime values (rank-0 tensors, i32
// tensors); sizes are static. Dynamic windows follow StableHLO: starts are clamped so the
// window fits. `get` on tensors lives with the other `get` cases in dict.cpp; `sort` in list.cpp.
#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/gather.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

// x and v converted to their common dtype (SPEC §2.3; x is an array, never weak).
std::pair<Tensor, Tensor> common(const CallArgs& a, size_t xi, size_t vi) {
  Operand x = array_operand(a, xi);
  x.weak = false;
  return run_primitive(a, [&] { return promoted(x, array_operand(a, vi), a.name); });
}

// Starts (one per leading axis: an integer, a list, or a 1-D integer tensor), padded with zeros
// to the rank. Known starts are rank-0 constants; traced ones stay in the graph.
std::vector<Tensor> starts_arg(const CallArgs& a, size_t i, int64_t rank) {
  const Value& v = a[i];
  std::vector<Tensor> s;
  if (is_traced(v) && v.as_tensor().rank() == 1) {
    const Tensor& t = v.as_tensor();
    for (int64_t k = 0; k < t.numel(); ++k) s.push_back(convert(reshape(slice_axis(t, 0, k, k + 1), {}), DType::I32));
  } else if (v.is_list()) {
    for (const Value& x : v.as_list().items) s.push_back(int_scalar(a, x, i, "an integer or a list of integers"));
  } else if (is_int_list(v)) {
    for (int64_t x : int_list(a, v, i)) s.push_back(Tensor::scalar(DType::I32, static_cast<double>(x)));
  } else {
    s.push_back(int_scalar(a, v, i, "an integer or a list of integers"));
  }
  if (static_cast<int64_t>(s.size()) > rank)
    throw SheafError(fmt::format("{}: {} start indices for a rank-{} tensor", a.name, s.size(), rank), a.site);
  s.resize(static_cast<size_t>(rank), Tensor::scalar(DType::I32, 0));
  return s;
}

// (index-update t i v): t with slice i along axis 0 replaced by v (broadcast to the row shape).
// i may be a runtime value; a known i out of range is an error (a traced one is clamped).
Value b_index_update(Interp&, const CallArgs& a) {
  if (a[0].is_list()) {  // lists: functional replacement of element i
    std::vector<Value> items = a[0].as_list().items;
    int64_t n = static_cast<int64_t>(items.size()), i = arg_int(a, 1);
    if (i < -n || i >= n) throw SheafError(fmt::format("index-update: index {} out of range for a list of {}", i, n), a.site);
    items[static_cast<size_t>(i < 0 ? i + n : i)] = a[2];
    return Value::list(std::move(items));
  }
  auto [t, v] = common(a, 0, 2);
  if (t.rank() == 0) throw SheafError(fmt::format("index-update: cannot index a scalar {}", type_str(t)), a.site);
  int64_t n = t.dim(0);
  if (!is_traced(a[1])) {
    int64_t i = arg_int(a, 1);
    if (i < -n || i >= n) throw SheafError(fmt::format("index-update: index {} out of range for axis 0 of {}", i, type_str(t)), a.site);
  }
  Tensor i = int_scalar(a, a[1], 1, "an integer");
  Tensor zero = Tensor::scalar(DType::I32, 0);
  i = select(binary(Binary::Lt, i, zero), binary(Binary::Add, i, Tensor::scalar(DType::I32, static_cast<double>(n))), i);
  Shape row(t.shape().begin() + 1, t.shape().end());
  auto b = broadcast_shapes(v.shape(), row);
  if (!b || *b != row) throw SheafError(fmt::format("index-update: value {} does not fit a row of {}", type_str(v), type_str(t)), a.site);
  Shape one = row;
  one.insert(one.begin(), 1);
  std::vector<Tensor> starts(static_cast<size_t>(t.rank()), zero);
  starts[0] = i;
  return Value::tensor(dynamic_update_slice(t, reshape(broadcast_to(v, row), one), starts));
}

// (dynamic-slice x start length) on axis 0, or (dynamic-slice x starts sizes) on leading axes.
Value b_dynamic_slice(Interp&, const CallArgs& a) {
  Tensor x = array_arg(a, 0);
  if (x.rank() == 0) throw SheafError(fmt::format("dynamic-slice: cannot slice a scalar {}", type_str(x)), a.site);
  std::vector<Tensor> starts = starts_arg(a, 1, x.rank());
  std::vector<int64_t> sizes = int_list(a, a[2], 2);
  if (sizes.size() > static_cast<size_t>(x.rank()))
    throw SheafError(fmt::format("dynamic-slice: sizes {} have more entries than {} has axes", list_str(sizes), type_str(x)), a.site);
  for (size_t d = sizes.size(); d < static_cast<size_t>(x.rank()); ++d) sizes.push_back(x.shape()[d]);
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] < 0 || sizes[d] > x.shape()[d])
      throw SheafError(fmt::format("dynamic-slice: size {} does not fit axis {} of {}", sizes[d], d, type_str(x)), a.site);
  return Value::tensor(dynamic_slice(x, starts, sizes));
}

// (dynamic-update-slice x update starts); an update of lower rank gets leading unit axes.
Value b_dynamic_update_slice(Interp&, const CallArgs& a) {
  auto [x, u] = common(a, 0, 1);
  if (u.rank() > x.rank())
    throw SheafError(fmt::format("dynamic-update-slice: update {} has more axes than {}", type_str(u), type_str(x)), a.site);
  Shape us = u.shape();
  us.insert(us.begin(), static_cast<size_t>(x.rank() - u.rank()), 1);
  for (size_t d = 0; d < us.size(); ++d)
    if (us[d] > x.shape()[d])
      throw SheafError(fmt::format("dynamic-update-slice: update {} does not fit in {}", type_str(u), type_str(x)), a.site);
  return Value::tensor(dynamic_update_slice(x, reshape(u, us), starts_arg(a, 2, x.rank())));
}

// (top_k x k) → (values indices) along the last axis.
Value b_top_k(Interp&, const CallArgs& a) {
  Tensor x = array_arg(a, 0);
  if (x.rank() == 0) throw SheafError(fmt::format("top_k: needs at least 1 dimension, got {}", type_str(x)), a.site);
  int64_t k = arg_int(a, 1), n = x.dim(x.rank() - 1);
  if (k < 0 || k > n) throw SheafError(fmt::format("top_k: k = {} out of range for the last axis of {}", k, type_str(x)), a.site);
  Sorted s = top_k(x, k);
  return Value::tuple({Value::tensor(s.values), Value::tensor(s.indices)});
}

const BuiltinDef kIndex[] = {
    {"index-update", "(index-update t i v)", "Functional replacement of slice i along axis 0 (negative i from the end).",
     b_index_update, 3, 3},
    {"dynamic-slice", "(dynamic-slice x start length) / (dynamic-slice x starts sizes)",
     "Window of static size at runtime starts (axis 0, or one start per leading axis); starts are clamped so it fits.",
     b_dynamic_slice, 3, 3},
    {"dynamic-update-slice", "(dynamic-update-slice x update starts)", "Write update into x at (clamped) starts.",
     b_dynamic_update_slice, 3, 3},
    {"top_k", "(top_k x k)", "Largest k along the last axis: tuple (values indices), descending, first index on ties.", b_top_k, 2, 2},
};

}  // namespace

std::span<const BuiltinDef> index_builtins() { return kIndex; }

}  // namespace sheaf
