// builtins/transform.cpp — function transformations: vmap (SPEC §5.10).
// (vmap f [axes]) returns a function; calling it maps f over an axis of every mapped argument
// (each leaf of a pytree) and stacks the outputs leaf-wise on a new axis 0. Axes: omitted → 0
// for every argument; an int → that axis for every argument; a list → one entry per argument,
// nil = not mapped (broadcast). The call is the transform of batching/vmap.hpp (f traced once,
// each op batched by its rule); a function that cannot be traced (effects, data-dependent
// shapes) is called once per index instead, with the same results.
#include "batching/batch_rules.hpp"
#include "batching/vmap.hpp"
#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/pytree.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"
#include "trace/tracer.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

const int kF = symbols::intern("__vmap-f");
const int kAxes = symbols::intern("__vmap-axes");

// The axis spec of argument i: nullopt when it is broadcast.
std::optional<int64_t> axis_spec(const Value& axes, size_t i, size_t nargs, const CallArgs& a) {
  if (axes.is_nil()) return 0;
  if (axes.is_list()) {
    const auto& items = axes.as_list().items;
    if (items.size() != nargs)
      throw SheafError(fmt::format("vmap: {} axis entries for {} arguments", items.size(), nargs), a.site);
    if (items[i].is_nil()) return std::nullopt;
    return static_cast<int64_t>(*number_of(items[i]));
  }
  return static_cast<int64_t>(*number_of(axes));
}

// Row `i` of a leaf along `axis` (the axis removed).
Value leaf_row(const Value& leaf, int64_t axis, int64_t i, const CallArgs& a) {
  auto op = as_operand(leaf);
  if (!op) throw SheafError(fmt::format("vmap: cannot map over a {}", describe_node(leaf)), a.site);
  const Tensor& t = op->t;
  return Value::tensor(batching::example(t, i, run_primitive(a, [&] { return normalize_axis(axis, t.rank()); })));
}

// The fallback: f called once per index, the outputs stacked leaf-wise.
Value vmap_loop(Interp& in, const Value& f, const std::vector<Value>& args, const batching::MapSpec& spec, const CallArgs& a) {
  std::vector<Value> outs;
  outs.reserve(static_cast<size_t>(spec.n));
  std::vector<Value> call_args(args.size());
  for (int64_t i = 0; i < spec.n; ++i) {
    for (size_t j = 0; j < args.size(); ++j) {
      if (!spec.axes[j]) {
        call_args[j] = args[j];
        continue;
      }
      Value one = args[j];
      call_args[j] = tree_map(std::span<const Value>(&one, 1),
                              [&](std::span<const Value> leaf) { return leaf_row(leaf[0], *spec.axes[j], i, a); }, a);
    }
    outs.push_back(in.call(f, call_args, a.site));
  }
  return tree_map(outs, [&](std::span<const Value> leaves) { return Value::tensor(stack_leaves(leaves, a)); }, a,
                  "vmap: outputs differ in structure");
}

// (__vmap-apply f axes args): the body of every function vmap returns; errors say "vmap:".
Value b_vmap_apply(Interp& in, const CallArgs& internal) {
  const CallArgs a{internal.args, internal.site, "vmap"};
  const Value& f = a[0];
  const Value& axes = a[1];
  std::vector<Value> args = a[2].as_list().items;
  std::optional<int64_t> n;
  batching::MapSpec spec;
  spec.axes.resize(args.size());
  for (size_t j = 0; j < args.size(); ++j) {
    spec.axes[j] = axis_spec(axes, j, args.size(), a);
    if (!spec.axes[j]) continue;
    std::vector<Value> leaves;
    tree_leaves(args[j], leaves);
    for (const Value& leaf : leaves) {
      auto op = as_operand(leaf);
      if (!op || op->t.rank() == 0)
        throw SheafError(fmt::format("vmap: argument {} is mapped over axis {} but holds a {}", j + 1, *spec.axes[j], describe_node(leaf)), a.site);
      int64_t ax = run_primitive(a, [&] { return normalize_axis(*spec.axes[j], op->t.rank()); });
      int64_t size = op->t.dim(ax);
      if (n && *n != size)
        throw SheafError(fmt::format("vmap: mapped axes have different sizes ({} and {})", *n, size), a.site);
      n = size;
    }
  }
  if (!n) throw SheafError("vmap: no argument is mapped (every axis is nil)", a.site);
  if (*n == 0) throw SheafError("vmap: the mapped axis has size 0", a.site);
  spec.n = *n;
  try {
    return trace::tracing() ? batching::vmap_traced(in, f, args, spec, a) : batching::vmap_eager(in, f, args, spec, a);
  } catch (const TraceAbort&) {
    ++batching::vmap_stats().loops;  // f has effects or needs values while tracing
  }
  return vmap_loop(in, f, args, spec, a);
}

Value b_vmap(Interp&, const CallArgs& a) {
  const Value& f = arg_callable(a, 0);
  Value axes = a.size() > 1 ? a[1] : Value();
  if (axes.is(Kind::Tensor) && axes.as_tensor().rank() == 1) {  // [0 1] reads as a tensor
    std::vector<Value> items;
    for (int64_t i = 0; i < axes.as_tensor().numel(); ++i) items.push_back(Value::integer(static_cast<int64_t>(axes.as_tensor().get(i))));
    axes = Value::list(std::move(items));
  }
  if (!axes.is_nil() && !axes.is_list() && !number_of(axes))
    throw SheafError("vmap: axes must be an int or a list of ints and nils, e.g. [0 nil]", a.site);
  if (axes.is_list())
    for (const Value& x : axes.as_list().items)
      if (!x.is_nil() && !number_of(x)) throw SheafError("vmap: axes must be an int or a list of ints and nils, e.g. [0 nil]", a.site);
  auto fn = std::make_shared<FnObj>();
  fn->params.rest = Value::symbol("args");
  fn->env = std::make_shared<Env>();
  fn->env->bind(kF, f);
  fn->env->bind(kAxes, axes);
  fn->body = {Value::list({Value::symbol("__vmap-apply", a.site), Value::symbol_id(kF), Value::symbol_id(kAxes), Value::symbol("args")},
                          ListKind::Paren, a.site)};
  fn->loc = a.site;
  return Value::object(Kind::Fn, std::move(fn));
}

const BuiltinDef kTransform[] = {
    {"vmap", "(vmap f) / (vmap f axis) / (vmap f [ax1 nil ...])",
     "Vectorise f over an axis (default 0) of each argument (pytrees too); nil = broadcast; outputs stacked on axis 0.",
     b_vmap, 1, 2},
    {"__vmap-apply", "(__vmap-apply f axes args)", "Implementation of the functions vmap returns.", b_vmap_apply, 3, 3},
};

}  // namespace

std::span<const BuiltinDef> transform_builtins() { return kTransform; }

}  // namespace sheaf
