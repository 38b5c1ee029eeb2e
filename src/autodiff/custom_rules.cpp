// autodiff/custom_rules.cpp — `checkpoint` and `custom-vjp` (SPEC §5.10): functions that behave
// as f and bring their own rule under differentiation.
//   (checkpoint f)          a function: while tracing, a call of it is one `call` node whose VJP
//                           recomputes f from its arguments in the backward pass
//                           (trace::trace_checkpoint, autodiff/region_vjp.hpp); eagerly, f.
//   (custom-vjp f fwd bwd)  a function: while tracing, (fwd args...) = [out residuals] gives the
//                           value and (bwd residuals g) the list of argument cotangents (one per
//                           argument, mirroring it; nil for none); eagerly, f.
// Both are functions of a rest argument that forward to an internal builtin, like the functions
// value-and-grad returns.
#include "autodiff/builtins.hpp"
#include "autodiff/reverse.hpp"
#include "autodiff/value_and_grad.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/pytree.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/shape.hpp"
#include "trace/tracer.hpp"
#include "value/function.hpp"
#include "value/printer.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {
namespace {

// The tensor and number leaves of v (what a region carries), in pytree order.
std::vector<Value> numeric_leaves(const Value& v) {
  std::vector<Value> all, out;
  tree_leaves(v, all);
  for (const Value& x : all)
    if (x.is(Kind::Tensor) || x.is_number()) out.push_back(x);
  return out;
}

Tensor as_tensor(const Value& v) { return v.is(Kind::Tensor) ? v.as_tensor() : Tensor::scalar(v.is(Kind::Int) ? DType::I32 : DType::F32, v.as_double()); }

Value b_checkpoint(Interp&, const CallArgs& a) {
  const Value& f = arg_callable(a, 0);
  return make_forwarding_fn("__checkpoint-apply", {f}, f.is(Kind::Fn) ? f.as<FnObj>().name : "", "-checkpoint", a.site);
}

Value b_checkpoint_apply(Interp& in, const CallArgs& a) {
  const Value& f = a[0];
  const Value& args = a[1];
  if (!trace::tracing()) return in.call(f, args.as_list().items, a.site);
  return trace::trace_checkpoint(args, [&](const Value& st) { return in.call(f, st.as_list().items, a.site); });
}

Value b_custom_vjp(Interp&, const CallArgs& a) {
  const Value& f = arg_callable(a, 0);
  arg_callable(a, 1);
  arg_callable(a, 2);
  return make_forwarding_fn("__custom-vjp-apply", {a[0], a[1], a[2]}, f.is(Kind::Fn) ? f.as<FnObj>().name : "", "-custom-vjp", a.site);
}

// bwd's result as one cotangent per tensor or number leaf of the arguments, typed like it.
std::vector<Tensor> argument_cotangents(const Value& result, const std::vector<Value>& args, SrcLoc site) {
  std::optional<std::vector<Value>> items = list_items(result);
  if (!items || items->size() != args.size())
    throw SheafError(fmt::format("custom-vjp: bwd must return a list with one cotangent per argument ({}), got {}", args.size(),
                                 describe_node(result)), site);
  std::vector<Tensor> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::vector<Value> want = numeric_leaves(args[i]);
    const Value& ct = (*items)[i];
    std::vector<Value> got = ct.is_nil() ? std::vector<Value>{} : numeric_leaves(ct);
    if (!ct.is_nil() && got.size() != want.size())
      throw SheafError(fmt::format("custom-vjp: the cotangent of argument {} has {} tensor leaves, the argument {}", i + 1, got.size(),
                                   want.size()), site);
    for (size_t k = 0; k < want.size(); ++k) {
      Tensor w = as_tensor(want[k]);
      if (ct.is_nil()) {
        out.push_back(autodiff::zeros(w.dtype(), w.shape()));
        continue;
      }
      Tensor g = as_tensor(got[k]);
      if (g.shape() != w.shape())
        throw SheafError(fmt::format("custom-vjp: the cotangent of argument {} is {}, the argument is {}", i + 1, type_str(g), type_str(w)),
                         site);
      out.push_back(convert(g, w.dtype()));
    }
  }
  return out;
}

Value b_custom_vjp_apply(Interp& in, const CallArgs& a) {
  const Value &f = a[0], &fwd = a[1], &bwd = a[2], &args = a[3];
  if (!trace::tracing()) return in.call(f, args.as_list().items, a.site);
  auto fwd_call = [&](const Value& st) {
    Value r = in.call(fwd, st.as_list().items, a.site);
    std::optional<std::vector<Value>> items = list_items(r);
    if (!items || items->size() != 2)
      throw SheafError(fmt::format("custom-vjp: fwd must return [out residuals], got {}", describe_node(r)), a.site);
    return Value::list(std::move(*items));
  };
  auto bwd_call = [&](const Value& residuals, const Value& g) -> std::vector<Tensor> {
    std::vector<Value> bwd_args{residuals, g};
    return argument_cotangents(in.call(bwd, bwd_args, a.site), args.as_list().items, a.site);
  };
  return trace::trace_custom_vjp(
      args, [&](const Value& st) { return in.call(f, st.as_list().items, a.site); }, fwd_call, bwd_call);
}

const BuiltinDef kRules[] = {
    {"checkpoint", "(checkpoint f)",
     "Same function; under differentiation its intermediate values are recomputed in the backward pass instead of stored.",
     b_checkpoint, 1, 1},
    {"custom-vjp", "(custom-vjp f fwd bwd)",
     "Behaves as f; under differentiation (fwd args...) returns [out residuals] and (bwd residuals g) the list of argument cotangents.",
     b_custom_vjp, 3, 3},
    {"__checkpoint-apply", "(__checkpoint-apply f args)", "Implementation of the functions checkpoint returns.", b_checkpoint_apply, 2, 2},
    {"__custom-vjp-apply", "(__custom-vjp-apply f fwd bwd args)", "Implementation of the functions custom-vjp returns.",
     b_custom_vjp_apply, 4, 4},
};

}  // namespace

std::span<const BuiltinDef> rule_builtins() { return kRules; }

}  // namespace sheaf
