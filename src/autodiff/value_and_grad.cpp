// autodiff/value_and_grad.cpp — the language side of reverse mode: `(value-and-grad f)` (SPEC
// §4.5) and `(grad f)` (§5.10) return functions; calling one differentiates f at its first
// argument (any pytree) and passes the others through.
//   While tracing (inside a compiled function, or when the JIT traces the returned function
//   itself): the float leaves of p get fresh identities in the trace, f is inlined on them, and
//   the reverse sweep (reverse.hpp) appends the backward pass to the same graph, so forward and
//   backward are one executable. Nested uses compose: (grad (grad f)) differentiates the
//   backward nodes of the inner call.
//   Eagerly (--no-jit, or a top-level call the JIT could not compile): the same is traced into
//   a graph of its own and run once on the reference executor.
// The returned function of a named f is named f-vag / f-grad (SPEC §7.9) and memoized per f, so
// the JIT caches its executables across calls.
// `(jvp f primals tangents)` (forward mode) is built from two reverse sweeps (see jvp_traced).
#include "autodiff/value_and_grad.hpp"

#include <unordered_map>

#include "autodiff/builtins.hpp"
#include "autodiff/reverse.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/pytree.hpp"
#include "runtime/run_once.hpp"
#include "tensor/layout.hpp"
#include "tensor/recorder.hpp"
#include "tensor/reduce.hpp"
#include "tensor/shape.hpp"
#include "trace/tracer.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

std::string_view who(bool with_value) { return with_value ? "value-and-grad" : "grad"; }

// A float leaf (tensor or host number) as a tensor; nullopt for anything else.
std::optional<Tensor> float_leaf(const Value& v) {
  if (v.is(Kind::Float)) return Tensor::scalar(DType::F32, v.as_float());
  if (v.is(Kind::Tensor) && is_float(v.as_tensor().dtype())) return v.as_tensor();
  return std::nullopt;
}

// t's value under a new identity of the active trace (a node of its own): the sweep
// differentiates with respect to it, whatever else reads t.
Tensor fresh_value(const Tensor& t) {
  ir::Type type{t.dtype(), t.shape()};
  return ir::record1(ir::Op::Reshape, {t}, {}, &type);
}

// p with each float leaf (tensor or host number) replaced by a fresh value of the trace, which
// `wrt` collects in pytree order. Integer leaves stay: they get no gradient.
Value fresh_leaves(const Value& p, std::vector<Tensor>& wrt) {
  return map_leaves(p, [&](const Value& v) {
    std::optional<Tensor> t = float_leaf(v);
    if (!t) return v;
    Tensor f = fresh_value(*t);
    if (v.is(Kind::Float) || t->weak()) f = f.as_weak();
    wrt.push_back(f);
    return Value::tensor(f);
  });
}

// `like` with each float leaf replaced by the next of `values` (weak where the leaf was a host
// number or weak: a host number again when it leaves the trace), integer leaves by zeros, other
// leaves kept. Gradients mirror p this way, and jvp's tangents mirror f's result.
Value float_leaves_replaced(const Value& like, std::span<const Tensor> values) {
  size_t i = 0;
  return map_leaves(like, [&](const Value& v) {
    if (float_leaf(v)) {
      Tensor t = ir::recorder().lift(values[i++]);
      return Value::tensor(v.is(Kind::Float) || v.as_tensor().weak() ? t.as_weak() : t);
    }
    if (v.is(Kind::Tensor)) {
      Tensor z = ir::recorder().lift(autodiff::zeros(v.as_tensor().dtype(), v.as_tensor().shape()));
      return Value::tensor(v.as_tensor().weak() ? z.as_weak() : z);
    }
    return v.is(Kind::Int) ? Value::integer(0) : v;
  });
}

// Inside a trace: value and gradient of f at args[0].
Value differentiate_traced(Interp& in, const Value& f, std::vector<Value> args, bool with_value, SrcLoc site) {
  if (args.empty()) throw SheafError(fmt::format("{}: the function needs at least one argument (the one differentiated)", who(with_value)), site);
  std::vector<Tensor> wrt;
  args[0] = fresh_leaves(args[0], wrt);
  Value out = in.call(f, args, site);
  Tensor loss;
  if (out.is(Kind::Float)) {
    loss = Tensor::scalar(DType::F32, out.as_float());
  } else if (out.is(Kind::Tensor) && out.as_tensor().rank() == 0 && is_float(out.as_tensor().dtype())) {
    loss = out.as_tensor();
  } else {
    std::string got = out.is(Kind::Tensor) ? type_str(out.as_tensor()) : describe_node(out);
    throw SheafError(fmt::format("{}: function must return a scalar, got {}", who(with_value), got), site);
  }
  Value g = float_leaves_replaced(args[0], autodiff::gradients(loss, wrt));
  return with_value ? Value::list({out, g}, ListKind::Tuple) : g;
}

// Outside a trace: the same, traced into a graph of its own and run once (runtime/run_once).
// A function that prints is first run eagerly (its output appears once, in order), then traced
// with its output effects muted for the gradient.
Value differentiate_eager(Interp& in, const Value& f, std::span<const Value> args, bool with_value, SrcLoc site) {
  std::string name = f.is(Kind::Fn) ? f.as<FnObj>().name : "";
  auto body = [&](std::vector<Value>& sym) { return differentiate_traced(in, f, sym, with_value, site); };
  auto recheck = [&] { in.call(f, args, site); };  // a guard in f failed: f interpreted reports it
  try {
    try {
      return run_once(args, site, name, body, recheck);
    } catch (const TraceAbort& abort) {
      std::string_view reason = abort.what();
      if (reason != "calls 'print', which has effects" && reason != "calls 'progress', which has effects") throw;
      in.call(f, args, site);
      trace::OutputEffectsMuted muted;
      return run_once(args, site, name, body, recheck);
    }
  } catch (const TraceAbort& abort) {
    throw SheafError(fmt::format("{}: cannot differentiate {}: {}", who(with_value), name.empty() ? "the function" : "'" + name + "'",
                                 abort.what()),
                     site);
  }
}

// (__vag-apply f with-value args): the body of every function value-and-grad / grad return.
Value b_vag_apply(Interp& in, const CallArgs& a) {
  bool with_value = a[1].truthy();
  const std::vector<Value>& args = a[2].as_list().items;
  if (trace::tracing()) return differentiate_traced(in, a[0], args, with_value, a.site);
  return differentiate_eager(in, a[0], args, with_value, a.site);
}

Value b_grad(Interp&, const CallArgs& a) { return make_value_and_grad(arg_callable(a, 0), false, a.site); }

// ---- forward mode ------------------------------------------------------------------------------

// (jvp f primals tangents) inside a trace: (f(primals...), J·tangents). Forward mode comes from
// reverse mode by linearity: v(u) = Jᵀu is linear in u, so d/du ⟨v(u), t⟩ = J·t. u are fresh
// trace values, one per float output leaf; both sweeps use the VJP rules, so every
// differentiable op has a JVP.
Value jvp_traced(Interp& in, const Value& f, const Value& primals, const Value& tangents, SrcLoc site) {
  auto as_args = [&](const Value& v, std::string_view what) {
    if (auto items = list_items(v)) return *items;
    throw SheafError(fmt::format("jvp: {} must be a list with one entry per argument of f, e.g. (jvp f [x] [t])", what), site);
  };
  std::vector<Value> p = as_args(primals, "primals"), t = as_args(tangents, "tangents");
  if (p.size() != t.size())
    throw SheafError(fmt::format("jvp: {} primals but {} tangents", p.size(), t.size()), site);
  std::vector<Tensor> x;
  Value fresh = fresh_leaves(Value::list(p), x);
  std::vector<Value> pl, tl;
  tree_leaves(Value::list(p), pl);
  tree_leaves(Value::list(t), tl);
  if (pl.size() != tl.size() || !equal(tree_def(Value::list(p)), tree_def(Value::list(t))))
    throw SheafError(fmt::format("jvp: tangents must have the structure of the primals: {} vs {}",
                                 print_value(tree_def(Value::list(p)), false), print_value(tree_def(Value::list(t)), false)),
                     site);
  std::vector<Tensor> tx;
  for (size_t k = 0; k < pl.size(); ++k) {
    if (!float_leaf(pl[k])) {
      if (!tl[k].is_number() && !tl[k].is(Kind::Tensor) && !tl[k].is_nil())
        throw SheafError(fmt::format("jvp: the tangent of a {} primal must be a number, a tensor or nil, got {}",
                                     describe_node(pl[k]), describe_node(tl[k])), site);
      continue;
    }
    std::optional<Tensor> tk = float_leaf(tl[k]);
    if (!tk && tl[k].is(Kind::Int)) tk = Tensor::scalar(DType::F32, static_cast<double>(tl[k].as_int()));
    Tensor pk = *float_leaf(pl[k]);
    if (!tk || tk->shape() != pk.shape())
      throw SheafError(fmt::format("jvp: the tangent of a {} primal must be a float tensor of the same shape", type_str(pk)), site);
    tx.push_back(*tk);
  }
  Value out = in.call(f, fresh.as_list().items, site);
  std::vector<Value> ol;
  tree_leaves(out, ol);
  std::vector<Tensor> y, u;
  for (const Value& o : ol) {
    std::optional<Tensor> ot = float_leaf(o);
    if (!ot) continue;
    y.push_back(*ot);
    u.push_back(fresh_value(autodiff::zeros(ot->dtype(), ot->shape())));
  }
  std::vector<Tensor> v = autodiff::vjp_of(y, u, x);  // Jᵀu, linear in u
  return Value::list({out, float_leaves_replaced(out, autodiff::vjp_of(v, tx, u))}, ListKind::Tuple);
}

Value b_jvp(Interp& in, const CallArgs& a) {
  const Value& f = arg_callable(a, 0);
  if (trace::tracing()) return jvp_traced(in, f, a[1], a[2], a.site);
  std::vector<Value> args{a[1], a[2]};
  try {
    return run_once(args, a.site, "jvp", [&](std::vector<Value>& sym) { return jvp_traced(in, f, sym[0], sym[1], a.site); });
  } catch (const TraceAbort& abort) {
    throw SheafError(fmt::format("jvp: cannot differentiate the function: {}", abort.what()), a.site);
  }
}

const BuiltinDef kAutodiff[] = {
    {"grad", "(grad f)", "Like value-and-grad, but the returned function gives only the gradient pytree.", b_grad, 1, 1},
    {"jvp", "(jvp f primals tangents)",
     "Forward mode: tuple (value tangent-out) of f at the primals (a list, one per argument) along the tangents.", b_jvp, 3, 3},
    {"__vag-apply", "(__vag-apply f with-value args)", "Implementation of the functions value-and-grad and grad return.",
     b_vag_apply, 3, 3},
};

}  // namespace

Value make_value_and_grad(const Value& f, bool with_value, SrcLoc site) {
  const bool named = f.is(Kind::Fn) && !f.as<FnObj>().name.empty();
  static std::unordered_map<const Obj*, Value> memo[2];  // named functions live for the program anyway
  if (named)
    if (auto it = memo[with_value].find(f.raw()); it != memo[with_value].end()) return it->second;
  Value v = make_forwarding_fn("__vag-apply", {f, Value::boolean(with_value)}, named ? f.as<FnObj>().name : "",
                               with_value ? "-vag" : "-grad", site);
  if (named) memo[with_value].emplace(f.raw(), v);
  return v;
}

std::optional<std::vector<Value>> list_items(const Value& v) {
  if (v.is_list()) return v.as_list().items;
  if (v.is(Kind::Tensor) && v.as_tensor().rank() == 1) {
    std::vector<Value> items;
    for (int64_t i = 0; i < v.as_tensor().numel(); ++i) items.push_back(Value::tensor(reshape(slice_axis(v.as_tensor(), 0, i, i + 1), {})));
    return items;
  }
  return std::nullopt;
}

Value make_forwarding_fn(std::string_view builtin, const std::vector<Value>& bound, const std::string& name, std::string_view suffix,
                         SrcLoc site) {
  auto fn = std::make_shared<FnObj>();
  if (!name.empty()) fn->name = name + std::string(suffix);
  fn->params.rest = Value::symbol("args");
  fn->env = std::make_shared<Env>();
  std::vector<Value> call{Value::symbol(std::string(builtin), site)};
  for (size_t i = 0; i < bound.size(); ++i) {
    int id = symbols::intern(fmt::format("__bound-{}", i));
    fn->env->bind(id, bound[i]);
    call.push_back(Value::symbol_id(id));
  }
  call.push_back(Value::symbol("args"));
  fn->body = {Value::list(std::move(call), ListKind::Paren, site)};
  fn->loc = site;
  return Value::object(Kind::Fn, std::move(fn));
}

std::span<const BuiltinDef> autodiff_builtins() { return kAutodiff; }

namespace {

// (value-and-grad f): the differentiating function of f.
Value sf_value_and_grad(Interp& in, const ListObj& f, const EnvPtr& env) {
  if (f.items.size() != 2) throw SheafError("value-and-grad expects one function: (value-and-grad f)", f.loc);
  Value fn = in.eval(f.items[1], env);
  if (!fn.is_callable()) throw SheafError("value-and-grad: expected a function, got " + describe_node(fn), f.loc);
  return make_value_and_grad(fn, true, f.loc);
}

}  // namespace

void install_value_and_grad_form() { define_special_form("value-and-grad", sf_value_and_grad); }

}  // namespace sheaf
