// ir/shape_rules.cpp — the shape and dtype rule of every IR op (StableHLO semantics).
// The tracer uses it to type each node it records, the verifier to re-check a whole graph.
// Control flow checks only the signatures of its regions (parameter and result types against
// the operands); the regions' insides are ir::verify's business (it recurses into them).
#include <algorithm>
#include <set>

#include "base/error.hpp"
#include "ir/ir.hpp"
#include "tensor/shape.hpp"

namespace sheaf::ir {
namespace {

[[noreturn]] void bad(Op op, const std::vector<Type>& in, const std::string& why) {
  std::vector<std::string> ts;
  for (const Type& t : in) ts.push_back(type_str(t));
  throw SheafError(fmt::format("{}({}): {}", op_name(op), fmt::join(ts, ", "), why));
}

void want_operands(Op op, const std::vector<Type>& in, size_t n) {
  if (in.size() != n) bad(op, in, fmt::format("expected {} operand(s)", n));
}

int64_t checked_axis(Op op, const std::vector<Type>& in, int64_t axis, size_t rank) {
  if (axis < 0 || axis >= static_cast<int64_t>(rank)) bad(op, in, fmt::format("axis {} out of range", axis));
  return axis;
}

bool is_permutation(const std::vector<int64_t>& p, size_t n) {
  if (p.size() != n) return false;
  std::vector<bool> seen(n, false);
  for (int64_t d : p) {
    if (d < 0 || d >= static_cast<int64_t>(n) || seen[static_cast<size_t>(d)]) return false;
    seen[static_cast<size_t>(d)] = true;
  }
  return true;
}

bool unique_axes(const std::vector<int64_t>& axes, size_t rank) {
  std::set<int64_t> s(axes.begin(), axes.end());
  return s.size() == axes.size() && std::all_of(axes.begin(), axes.end(), [&](int64_t d) { return d >= 0 && d < static_cast<int64_t>(rank); });
}

void want_integer_starts(Op op, const std::vector<Type>& in, size_t first) {
  for (size_t i = first; i < in.size(); ++i)
    if (!in[i].shape.empty() || !is_int(in[i].dtype)) bad(op, in, "start indices must be rank-0 integers");
}

Type dot_type(Op op, const std::vector<Type>& in, const DotDims& d) {
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (in[0].dtype != in[1].dtype) bad(op, in, "operands must have one dtype");
  if (d.lhs_batch.size() != d.rhs_batch.size() || d.lhs_contract.size() != d.rhs_contract.size())
    bad(op, in, "batch and contracting dimension lists must pair up");
  std::vector<bool> used_a(a.size(), false), used_b(b.size(), false);
  auto use = [&](std::vector<bool>& used, int64_t dim, size_t rank) {
    if (dim < 0 || dim >= static_cast<int64_t>(rank) || used[static_cast<size_t>(dim)]) bad(op, in, "invalid dimension numbers");
    used[static_cast<size_t>(dim)] = true;
  };
  Shape out;
  for (size_t i = 0; i < d.lhs_batch.size(); ++i) {
    use(used_a, d.lhs_batch[i], a.size());
    use(used_b, d.rhs_batch[i], b.size());
    if (a[static_cast<size_t>(d.lhs_batch[i])] != b[static_cast<size_t>(d.rhs_batch[i])]) bad(op, in, "batch dimension sizes differ");
    out.push_back(a[static_cast<size_t>(d.lhs_batch[i])]);
  }
  for (size_t i = 0; i < d.lhs_contract.size(); ++i) {
    use(used_a, d.lhs_contract[i], a.size());
    use(used_b, d.rhs_contract[i], b.size());
    if (a[static_cast<size_t>(d.lhs_contract[i])] != b[static_cast<size_t>(d.rhs_contract[i])])
      bad(op, in, "contracting dimension sizes differ");
  }
  for (size_t i = 0; i < a.size(); ++i)
    if (!used_a[i]) out.push_back(a[i]);
  for (size_t i = 0; i < b.size(); ++i)
    if (!used_b[i]) out.push_back(b[i]);
  return {in[0].dtype, out};
}

// Parameter and result types of a region graph.
std::vector<Type> param_types(const Graph& r) {
  std::vector<Type> ts;
  for (int32_t p : r.params) ts.push_back(r.type(p));
  return ts;
}
std::vector<Type> result_types(const Graph& r) {
  std::vector<Type> ts;
  for (int32_t v : r.results) ts.push_back(r.type(v));
  return ts;
}

std::string types_text(const std::vector<Type>& ts) {
  std::vector<std::string> s;
  for (const Type& t : ts) s.push_back(type_str(t));
  return fmt::format("({})", fmt::join(s, ", "));
}

// Region `r` (named `what`) must take `params` and, when `results` is given, return them.
void want_region(Op op, const std::vector<Type>& in, const std::shared_ptr<const Graph>& r, const std::string& what,
                 const std::vector<Type>& params, const std::vector<Type>* results) {
  if (!r) bad(op, in, what + " region is missing");
  if (param_types(*r) != params)
    bad(op, in, fmt::format("{} region takes {}, expected {}", what, types_text(param_types(*r)), types_text(params)));
  if (results && result_types(*r) != *results)
    bad(op, in, fmt::format("{} region returns {}, expected {}", what, types_text(result_types(*r)), types_text(*results)));
}

}  // namespace

std::vector<Type> infer_types(Op op, const std::vector<Type>& in, const Attrs& a, const Type* declared) {
  auto need_declared = [&]() -> const Type& {
    if (!declared) bad(op, in, "the result type must be given");
    return *declared;
  };
  switch (op) {
    case Op::Parameter:
      want_operands(op, in, 0);
      return {need_declared()};
    case Op::Constant:
      want_operands(op, in, 0);
      return {Type{a.value.dtype(), a.value.shape()}};
    case Op::Iota: {
      want_operands(op, in, 0);
      const Type& t = need_declared();
      checked_axis(op, in, a.axis, t.shape.size());
      if (t.dtype != a.dtype) bad(op, in, "iota dtype differs from its result type");
      return {t};
    }
    case Op::Unary: {
      want_operands(op, in, 1);
      bool logical = a.unary == Unary::Not;
      if (logical ? is_float(in[0].dtype) : (!is_float(in[0].dtype) && a.unary != Unary::Neg && a.unary != Unary::Abs && a.unary != Unary::Sign))
        bad(op, in, fmt::format("{} does not apply to {}", unary_name(a.unary), dtype_name(in[0].dtype)));
      return {in[0]};
    }
    case Op::Binary:
      want_operands(op, in, 2);
      if (in[0] != in[1]) bad(op, in, "operands must have equal types");
      return {Type{is_comparison(a.binary) ? DType::Bool : in[0].dtype, in[0].shape}};
    case Op::Convert:
      want_operands(op, in, 1);
      return {Type{a.dtype, in[0].shape}};
    case Op::Select:
      want_operands(op, in, 3);
      if (in[0].dtype != DType::Bool || in[0].shape != in[1].shape || in[1] != in[2])
        bad(op, in, "select needs a bool predicate and two operands of one type, all of one shape");
      return {in[1]};
    case Op::BroadcastInDim: {
      want_operands(op, in, 1);
      const Type& t = need_declared();
      if (t.dtype != in[0].dtype || a.dims.size() != in[0].shape.size()) bad(op, in, "broadcast dimensions must name every operand axis");
      for (size_t i = 0; i < a.dims.size(); ++i) {
        int64_t d = a.dims[i];
        if (d < 0 || d >= static_cast<int64_t>(t.shape.size()) || (i && a.dims[i - 1] >= d)) bad(op, in, "broadcast dimensions must increase");
        if (in[0].shape[i] != 1 && in[0].shape[i] != t.shape[static_cast<size_t>(d)])
          bad(op, in, fmt::format("operand axis {} cannot broadcast to {}", i, type_str(t)));
      }
      return {t};
    }
    case Op::Reshape: {
      want_operands(op, in, 1);
      const Type& t = need_declared();
      if (t.dtype != in[0].dtype || shape_numel(t.shape) != shape_numel(in[0].shape))
        bad(op, in, "cannot reshape to " + type_str(t));
      return {t};
    }
    case Op::Transpose: {
      want_operands(op, in, 1);
      if (!is_permutation(a.dims, in[0].shape.size())) bad(op, in, "invalid permutation");
      Shape s;
      for (int64_t d : a.dims) s.push_back(in[0].shape[static_cast<size_t>(d)]);
      return {Type{in[0].dtype, s}};
    }
    case Op::Slice: {
      want_operands(op, in, 1);
      size_t r = in[0].shape.size();
      if (a.starts.size() != r || a.limits.size() != r || a.strides.size() != r) bad(op, in, "slice bounds must cover every axis");
      Shape s;
      for (size_t i = 0; i < r; ++i) {
        if (a.starts[i] < 0 || a.limits[i] < a.starts[i] || a.limits[i] > in[0].shape[i] || a.strides[i] < 1)
          bad(op, in, fmt::format("invalid slice bounds on axis {}", i));
        s.push_back((a.limits[i] - a.starts[i] + a.strides[i] - 1) / a.strides[i]);
      }
      return {Type{in[0].dtype, s}};
    }
    case Op::Reverse:
      want_operands(op, in, 1);
      if (!unique_axes(a.dims, in[0].shape.size())) bad(op, in, "invalid axes");
      return {in[0]};
    case Op::Concatenate: {
      if (in.empty()) bad(op, in, "needs at least one operand");
      Type t = in[0];
      checked_axis(op, in, a.axis, t.shape.size());
      t.shape[static_cast<size_t>(a.axis)] = 0;
      for (const Type& x : in) {
        if (x.dtype != t.dtype || x.shape.size() != t.shape.size()) bad(op, in, "operands must have one dtype and rank");
        for (size_t i = 0; i < x.shape.size(); ++i)
          if (i != static_cast<size_t>(a.axis) && x.shape[i] != in[0].shape[i]) bad(op, in, "operands differ off the concatenation axis");
        t.shape[static_cast<size_t>(a.axis)] += x.shape[static_cast<size_t>(a.axis)];
      }
      return {t};
    }
    case Op::Pad: {
      want_operands(op, in, 1);
      size_t r = in[0].shape.size();
      if (a.lo.size() != r || a.hi.size() != r) bad(op, in, "padding must cover every axis");
      Type t = in[0];
      for (size_t i = 0; i < r; ++i) {
        if (a.lo[i] < 0 || a.hi[i] < 0) bad(op, in, "negative padding");
        t.shape[i] += a.lo[i] + a.hi[i];
      }
      return {t};
    }
    case Op::DynamicSlice: {
      if (in.empty() || in.size() != in[0].shape.size() + 1) bad(op, in, "needs one start index per axis");
      want_integer_starts(op, in, 1);
      if (a.sizes.size() != in[0].shape.size()) bad(op, in, "needs one size per axis");
      for (size_t i = 0; i < a.sizes.size(); ++i)
        if (a.sizes[i] < 0 || a.sizes[i] > in[0].shape[i]) bad(op, in, fmt::format("size {} on axis {} does not fit", a.sizes[i], i));
      return {Type{in[0].dtype, a.sizes}};
    }
    case Op::DynamicUpdateSlice: {
      if (in.size() < 2 || in.size() != in[0].shape.size() + 2) bad(op, in, "needs an update and one start index per axis");
      want_integer_starts(op, in, 2);
      if (in[1].dtype != in[0].dtype || in[1].shape.size() != in[0].shape.size()) bad(op, in, "update must match the operand's dtype and rank");
      for (size_t i = 0; i < in[0].shape.size(); ++i)
        if (in[1].shape[i] > in[0].shape[i]) bad(op, in, "update does not fit");
      return {in[0]};
    }
    case Op::Reduce: {
      want_operands(op, in, 1);
      if (!unique_axes(a.dims, in[0].shape.size()) || !std::is_sorted(a.dims.begin(), a.dims.end())) bad(op, in, "invalid axes");
      Shape s;
      for (size_t i = 0; i < in[0].shape.size(); ++i)
        if (std::find(a.dims.begin(), a.dims.end(), static_cast<int64_t>(i)) == a.dims.end()) s.push_back(in[0].shape[i]);
      return {Type{in[0].dtype, s}};
    }
    case Op::ArgReduce: {
      want_operands(op, in, 1);
      checked_axis(op, in, a.axis, in[0].shape.size());
      if (a.reduce != Reduce::Max && a.reduce != Reduce::Min) bad(op, in, "arg_reduce is max or min");
      Shape s = in[0].shape;
      s.erase(s.begin() + a.axis);
      return {Type{DType::I32, s}};
    }
    case Op::DotGeneral:
      want_operands(op, in, 2);
      return {dot_type(op, in, a.dot)};
    case Op::Gather: {
      want_operands(op, in, 2);
      checked_axis(op, in, a.axis, in[0].shape.size());
      if (!is_int(in[1].dtype)) bad(op, in, "indices must be integers");
      Shape s(in[0].shape.begin(), in[0].shape.begin() + a.axis);
      s.insert(s.end(), in[1].shape.begin(), in[1].shape.end());
      s.insert(s.end(), in[0].shape.begin() + a.axis + 1, in[0].shape.end());
      return {Type{in[0].dtype, s}};
    }
    case Op::Scatter: {
      want_operands(op, in, 3);
      auto g = infer_types(Op::Gather, {in[0], in[1]}, a);
      if (g[0] != in[2]) bad(op, in, "updates must have the type of the gathered slices " + type_str(g[0]));
      return {in[0]};
    }
    case Op::Sort:
      want_operands(op, in, 1);
      checked_axis(op, in, a.axis, in[0].shape.size());
      return {in[0], Type{DType::I32, in[0].shape}};
    case Op::TopK: {
      want_operands(op, in, 1);
      if (in[0].shape.empty() || a.k < 0 || a.k > in[0].shape.back()) bad(op, in, fmt::format("k = {} does not fit the last axis", a.k));
      Shape s = in[0].shape;
      s.back() = a.k;
      return {Type{in[0].dtype, s}, Type{DType::I32, s}};
    }
    case Op::While: {
      if (a.regions.size() != 2) bad(op, in, "while needs two regions (cond, body)");
      if (in.empty()) bad(op, in, "while needs at least one carried value");
      const std::vector<Type> pred{Type{DType::Bool, {}}};
      want_region(op, in, a.regions[0], "cond", in, &pred);
      want_region(op, in, a.regions[1], "body", in, &in);
      return in;
    }
    case Op::Case: {
      if (in.empty() || in[0] != Type{DType::I32, {}}) bad(op, in, "the branch index must be i32[]");
      if (a.regions.empty()) bad(op, in, "case needs at least one branch");
      std::vector<Type> xs(in.begin() + 1, in.end());
      want_region(op, in, a.regions[0], "branch 0", xs, nullptr);
      std::vector<Type> out = result_types(*a.regions[0]);
      if (out.empty()) bad(op, in, "branches must return at least one value");
      for (size_t b = 1; b < a.regions.size(); ++b) want_region(op, in, a.regions[b], fmt::format("branch {}", b), xs, &out);
      return out;
    }
    case Op::OptimizationBarrier: return in;
    case Op::Softmax: case Op::SoftmaxGrad: {
      want_operands(op, in, op == Op::Softmax ? 1 : 2);
      if (!is_float(in[0].dtype)) bad(op, in, "needs a float operand");
      if (in[0].shape.empty()) bad(op, in, "needs an operand of rank 1 or more");
      checked_axis(op, in, a.axis, in[0].shape.size());
      if (op == Op::SoftmaxGrad && in[1] != in[0]) bad(op, in, "the cotangent must have the probabilities' type");
      return {in[0]};
    }
    case Op::Gelu: case Op::GeluGrad: {
      want_operands(op, in, op == Op::Gelu ? 1 : 2);
      if (!is_float(in[0].dtype)) bad(op, in, "needs a float operand");
      if (op == Op::GeluGrad && in[1] != in[0]) bad(op, in, "the cotangent must have the operand's type");
      return {in[0]};
    }
    case Op::Call: {
      if (a.regions.size() != 1 && a.regions.size() != 3) bad(op, in, "call needs one region, or three (custom-vjp)");
      if (a.index < 0 || a.index > static_cast<int64_t>(in.size())) bad(op, in, "call: bad argument count");
      want_region(op, in, a.regions[0], "function", in, nullptr);
      std::vector<Type> out = result_types(*a.regions[0]);
      if (a.regions.size() == 2 && (a.k < 0 || a.k > static_cast<int64_t>(out.size()))) bad(op, in, "call: bad output count");
      return out;
    }
    case Op::AllReduce:
      if (in.empty()) bad(op, in, "all_reduce needs at least one operand");
      for (const Type& t : in)
        if (t.dtype == DType::Bool) bad(op, in, "bool cannot be summed");
      return in;
  }
  bad(op, in, "unknown op");
}

}  // namespace sheaf::ir
