// builtins/reduce.cpp — reductions (SPEC §5.4) and normalize (§5.17):
// sum mean product min max var argmax argmin normalize.
// The argument is a tensor, a host number (the result is then a host number) or a list of
// numbers / equal-shape tensors (stacked first). `:axis` is an int or a list of ints (negative
// counts from the end); without it everything is reduced to a scalar; `:keepdims` keeps the
// reduced axes with size 1. sum/product/min/max keep the dtype (bool sums count as i32);
// mean/var/normalize produce floats, computed in f32 and rounded back for f16/bf16.
// argmax/argmin give i32 indices, into the flattened tensor when no axis is given.
// With two or more positional arguments, min and max are the element-wise folds of
// minimum/maximum: (max 3 5) → 5.
#include <algorithm>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/promote.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "tensor/reduce.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

struct Reduction {
  Tensor x;
  bool host = false;           // the argument was a host number or list: scalar results are host numbers
  std::vector<int64_t> axes;   // normalised, sorted, unique
  bool all_axes = true;        // no :axis given
  bool keepdims = false;
  int64_t count() const {      // elements folded into each result
    int64_t n = 1;
    for (int64_t ax : axes) n *= x.dim(ax);
    return n;
  }
  Value result(const Tensor& t) const { return host && t.rank() == 0 ? scalar_value(t) : Value::tensor(t); }
};

std::vector<int64_t> axes_of(const CallArgs& a, const Value& v, int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t ax : int_list(a, v, 1)) axes.push_back(axis_of(a, Value::integer(ax), rank));
  std::sort(axes.begin(), axes.end());
  if (auto dup = std::adjacent_find(axes.begin(), axes.end()); dup != axes.end())
    throw SheafError(fmt::format("{}: repeated axis {}", a.name, *dup), a.site);
  return axes;
}

// The one positional argument and the options of a reduction.
Reduction reduction_args(const CallArgs& a, const Options& o) {
  if (o.positional.size() != 1)
    throw SheafError(fmt::format("{}: expected one tensor (and :axis/:keepdims options), got {} arguments", a.name, o.positional.size()), a.site);
  Reduction r;
  auto x = as_operand(o.positional[0]);
  if (!x) type_error(a, 0, "a tensor, a number or a (nested) list of numbers");
  r.x = x->t;
  r.host = !o.positional[0].is(Kind::Tensor);
  r.keepdims = o.flag("keepdims");
  const Value* axis = o.get("axis");
  r.all_axes = !axis || axis->is_nil();
  if (r.all_axes) {
    for (int64_t i = 0; i < r.x.rank(); ++i) r.axes.push_back(i);
  } else {
    r.axes = axes_of(a, *axis, r.x.rank());
  }
  return r;
}

Reduction reduction_args(const CallArgs& a) { return reduction_args(a, parse_options(a, {"axis", "keepdims"})); }

Tensor mean_f32(const Reduction& r, bool keepdims) {
  Tensor s = reduce(Reduce::Sum, convert(r.x, DType::F32), r.axes, keepdims);
  return binary(Binary::Div, s, Tensor::scalar(DType::F32, static_cast<double>(r.count())));
}

Value sum_or_product(const CallArgs& a, Reduce op) {
  Reduction r = reduction_args(a);
  Tensor x = r.x.dtype() == DType::Bool ? convert(r.x, DType::I32) : r.x;
  return r.result(reduce(op, x, r.axes, r.keepdims));
}

Value b_sum(Interp&, const CallArgs& a) { return sum_or_product(a, Reduce::Sum); }
Value b_product(Interp&, const CallArgs& a) { return sum_or_product(a, Reduce::Prod); }

Value b_mean(Interp&, const CallArgs& a) {
  Reduction r = reduction_args(a);
  return r.result(convert(mean_f32(r, r.keepdims), float_dtype(r.x.dtype())));
}

// Population variance: mean((x - mean(x))²).
Value b_var(Interp&, const CallArgs& a) {
  Reduction r = reduction_args(a);
  Tensor d = binary(Binary::Sub, convert(r.x, DType::F32), mean_f32(r, true));
  Tensor s = reduce(Reduce::Sum, binary(Binary::Mul, d, d), r.axes, r.keepdims);
  Tensor v = binary(Binary::Div, s, Tensor::scalar(DType::F32, static_cast<double>(r.count())));
  return r.result(convert(v, float_dtype(r.x.dtype())));
}

Value extreme(Interp& in, const CallArgs& a, bool want_max) {
  Options o = parse_options(a, {"axis", "keepdims"});
  if (o.positional.size() > 1) {
    if (!o.kw.empty())
      throw SheafError(fmt::format("{}: :axis and :keepdims apply to a single tensor, not to {} arguments", a.name, o.positional.size()), a.site);
    return in.builtin_def(want_max ? "maximum" : "minimum")->fn(in, a);  // element-wise fold, scalars stay host numbers
  }
  Reduction r = reduction_args(a, o);
  if (r.count() == 0)
    throw SheafError(fmt::format("{}: zero-size reduction of {} has no identity", a.name, type_str(r.x)), a.site);
  return r.result(reduce(want_max ? Reduce::Max : Reduce::Min, r.x, r.axes, r.keepdims));
}

Value b_max(Interp& in, const CallArgs& a) { return extreme(in, a, true); }
Value b_min(Interp& in, const CallArgs& a) { return extreme(in, a, false); }

Value arg_extreme(const CallArgs& a, Reduce op) {
  Reduction r = reduction_args(a);
  if (!r.all_axes && r.axes.size() != 1) throw SheafError(fmt::format("{}: :axis must be a single integer", a.name), a.site);
  if (r.x.numel() == 0) throw SheafError(fmt::format("{}: empty tensor {} has no extreme element", a.name, type_str(r.x)), a.site);
  if (!r.all_axes) return r.result(arg_reduce(op, r.x, r.axes[0], r.keepdims));
  Tensor idx = arg_reduce(op, reshape(r.x, {r.x.numel()}), 0);  // index into the flattened tensor
  return r.result(r.keepdims ? reshape(idx, Shape(static_cast<size_t>(r.x.rank()), 1)) : idx);
}

Value b_argmax(Interp&, const CallArgs& a) { return arg_extreme(a, Reduce::Max); }
Value b_argmin(Interp&, const CallArgs& a) { return arg_extreme(a, Reduce::Min); }

// x / sum(x) along the axes (all by default), in x's float dtype.
Value b_normalize(Interp&, const CallArgs& a) {
  Reduction r = reduction_args(a, parse_options(a, {"axis"}));
  Tensor x = convert(r.x, float_dtype(r.x.dtype()));
  Tensor s = reduce(Reduce::Sum, x, r.axes, true);
  return r.result(binary(Binary::Div, x, s));
}

const BuiltinDef kReduce[] = {
    {"sum", "(sum x [:axis a] [:keepdims])", "Sum of the elements, over the given axes (all by default).", b_sum, 1, -1},
    {"mean", "(mean x [:axis a] [:keepdims])", "Arithmetic mean (float result).", b_mean, 1, -1},
    {"product", "(product x [:axis a] [:keepdims])", "Product of the elements.", b_product, 1, -1},
    {"min", "(min x [:axis a] [:keepdims]) / (min a b ...)", "Smallest element; with several arguments the element-wise minimum.", b_min, 1, -1},
    {"max", "(max x [:axis a] [:keepdims]) / (max a b ...)", "Largest element; with several arguments the element-wise maximum.", b_max, 1, -1},
    {"var", "(var x [:axis a] [:keepdims])", "Population variance (divides by N); float result.", b_var, 1, -1},
    {"argmax", "(argmax x [:axis a] [:keepdims])", "Index (i32) of the first largest element; flattened without :axis.", b_argmax, 1, -1},
    {"argmin", "(argmin x [:axis a] [:keepdims])", "Index (i32) of the first smallest element; flattened without :axis.", b_argmin, 1, -1},
    {"normalize", "(normalize x [:axis a])", "x divided by its sum along the axis (all elements by default).", b_normalize, 1, -1},
};

}  // namespace

std::span<const BuiltinDef> reduce_builtins() { return kReduce; }

}  // namespace sheaf
