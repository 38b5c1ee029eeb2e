// builtins/activation.cpp — activations (SPEC §5.3): relu leaky-relu sigmoid tanh gelu selu
// celu silu softmax log-softmax. (dropout lives with the random builtins.)
// Each is a composite of elementwise and reduction primitives. Integer inputs compute in f32
// (relu keeps integers); f16/bf16 stay in their dtype. A host number gives a host number, like
// exp: (sigmoid 0) → 0.5. softmax and log-softmax work along :axis (default last) and subtract
// the maximum first so that large inputs do not overflow; softmax and gelu are the composite
// primitives of tensor/softmax.hpp and tensor/gelu.hpp (each one IR op with its own VJP).
#include "builtins/activation.hpp"

#include <cmath>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/promote.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/gelu.hpp"
#include "tensor/reduce.hpp"
#include "tensor/shape.hpp"
#include "tensor/softmax.hpp"
#include "trace/tracer.hpp"

namespace sheaf {

namespace {

// x - max(x) along the axis (kept), the stable argument of exp. log-softmax does not depend on
// the shift, so no gradient flows through the max (it would sum to zero, at a cost).
Tensor shifted(const Tensor& x, int64_t axis) {
  Tensor m = reduce(Reduce::Max, x, softmax_axes(x, axis), true);
  trace::stop_gradient(m);
  return binary(Binary::Sub, x, m);
}

}  // namespace

Tensor log_softmax(const Tensor& x, int64_t axis) {
  Tensor z = shifted(x, axis);
  Tensor lse = unary(Unary::Log, reduce(Reduce::Sum, unary(Unary::Exp, z), softmax_axes(x, axis), true));
  return binary(Binary::Sub, z, lse);
}

namespace {

// The activated argument: a tensor, or a host number lifted to a rank-0 tensor.
struct Act {
  Tensor x;
  bool host;
  Value result(const Tensor& y) const { return host ? scalar_value(y) : Value::tensor(y); }
};

Act act_arg(const CallArgs& a, const Value& v, bool keep_int = false) {
  Tensor t;
  if (v.is(Kind::Tensor)) t = v.as_tensor();
  else if (v.is(Kind::Int)) t = Tensor::scalar(DType::I32, static_cast<double>(v.as_int()));
  else if (v.is(Kind::Float)) t = Tensor::scalar(DType::F32, v.as_float());
  else type_error(a, 0, "a tensor or a number");
  if (t.dtype() == DType::Bool || !keep_int) t = convert(t, float_dtype(t.dtype()));
  return {t, !v.is(Kind::Tensor)};
}

Tensor k(const Tensor& like, double v) { return Tensor::scalar(like.dtype(), v); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(Binary::Mul, a, b); }
Tensor add(const Tensor& a, const Tensor& b) { return binary(Binary::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(Binary::Sub, a, b); }

template <Tensor (*F)(const Tensor&)>
Value activation(Interp&, const CallArgs& a) {
  Act x = act_arg(a, a[0]);
  return x.result(F(x.x));
}

Tensor sigmoid(const Tensor& x) { return unary(Unary::Logistic, x); }
Tensor tanh_(const Tensor& x) { return unary(Unary::Tanh, x); }
Tensor silu(const Tensor& x) { return mul(x, sigmoid(x)); }

// λ·(x if x > 0 else α(eˣ − 1))
Tensor selu(const Tensor& x) {
  constexpr double lambda = 1.0507009873554805, alpha = 1.6732632423543772;
  Tensor neg = mul(k(x, alpha), sub(unary(Unary::Exp, x), k(x, 1)));
  return mul(k(x, lambda), select(binary(Binary::Gt, x, k(x, 0)), x, neg));
}

Value b_relu(Interp&, const CallArgs& a) {
  Act x = act_arg(a, a[0], /*keep_int=*/true);
  return x.result(binary(Binary::Max, x.x, k(x.x, 0)));
}

// The activated value and an optional parameter, positional (argument 2) or keyword (any of
// `names`, which are aliases). The parameter is a rank-0 f32 tensor: a host number, or a
// traced (runtime) value.
struct WithParam {
  Value x;
  Tensor param;
  Tensor like(const Tensor& t) const { return convert(param, t.dtype()); }
};
WithParam with_param(const CallArgs& a, std::initializer_list<std::string_view> names, double fallback) {
  Options o = parse_options(a, names);
  std::string_view name = *names.begin();
  if (o.positional.empty() || o.positional.size() > 2)
    throw SheafError(fmt::format("{}: expected x and an optional {}", a.name, name), a.site);
  const Value* v = o.kw.empty() ? nullptr : &o.kw.begin()->second;
  if (!v && o.positional.size() == 2) v = &o.positional[1];
  if (!v) return {o.positional[0], Tensor::scalar(DType::F32, fallback)};
  if (is_traced(*v) && v->as_tensor().rank() == 0 && v->as_tensor().dtype() != DType::Bool)
    return {o.positional[0], convert(v->as_tensor(), DType::F32)};
  auto d = number_of(*v);
  if (!d) throw SheafError(fmt::format("{}: {} must be a number", a.name, name), a.site);
  return {o.positional[0], Tensor::scalar(DType::F32, *d)};
}

// x if x > 0 else slope·x
Value b_leaky_relu(Interp&, const CallArgs& a) {
  WithParam p = with_param(a, {"slope", "negative_slope"}, 0.01);
  Act x = act_arg(a, p.x);
  return x.result(select(binary(Binary::Gt, x.x, k(x.x, 0)), x.x, mul(p.like(x.x), x.x)));
}

// max(0, x) + min(0, α(e^{x/α} − 1))
Value b_celu(Interp&, const CallArgs& a) {
  WithParam p = with_param(a, {"alpha"}, 1.0);
  if (!p.param.is_symbolic() && p.param.get(0) == 0) throw SheafError("celu: alpha must not be 0", a.site);
  Act x = act_arg(a, p.x);
  const Tensor& t = x.x;
  Tensor alpha = p.like(t);
  Tensor e = sub(unary(Unary::Exp, binary(Binary::Div, t, alpha)), k(t, 1));
  Tensor y = add(binary(Binary::Max, t, k(t, 0)), binary(Binary::Min, k(t, 0), mul(alpha, e)));
  return x.result(y);
}

template <Tensor (*F)(const Tensor&, int64_t)>
Value softmax_builtin(Interp&, const CallArgs& a) {
  Options o = parse_options(a, {"axis"});
  if (o.positional.size() != 1) throw SheafError(fmt::format("{}: expected one tensor and an optional :axis", a.name), a.site);
  Act x = act_arg(a, o.positional[0]);
  int64_t axis = -1;
  if (const Value* v = o.get("axis")) {
    auto d = number_of(*v);
    if (!d || *d != std::trunc(*d)) throw SheafError(fmt::format("{}: :axis must be an integer", a.name), a.site);
    axis = static_cast<int64_t>(*d);
  }
  if (x.x.rank() > 0) {
    try {
      axis = normalize_axis(axis, x.x.rank());
    } catch (SheafError& e) {
      throw SheafError(fmt::format("{}: {}", a.name, e.what()), a.site);
    }
  }
  return x.result(F(x.x, axis));
}

const BuiltinDef kActivation[] = {
    {"relu", "(relu x)", "max(0, x).", b_relu, 1, 1},
    {"leaky-relu", "(leaky-relu x [slope])", "x if x > 0 else slope·x; slope positional, :slope or :negative_slope, default 0.01.", b_leaky_relu, 1, 3},
    {"sigmoid", "(sigmoid x)", "1/(1+e^-x).", activation<sigmoid>, 1, 1},
    {"tanh", "(tanh x)", "Hyperbolic tangent.", activation<tanh_>, 1, 1},
    {"gelu", "(gelu x)", "GELU, tanh approximation: 0.5x(1+tanh(√(2/π)(x+0.044715x³))).", activation<gelu>, 1, 1},
    {"selu", "(selu x)", "λ·(x if x > 0 else α(e^x−1)), λ≈1.0507, α≈1.6733.", activation<selu>, 1, 1},
    {"celu", "(celu x [:alpha a])", "max(0,x) + min(0, α(e^(x/α)−1)); α defaults to 1.", b_celu, 1, 3},
    {"silu", "(silu x)", "x·sigmoid(x).", activation<silu>, 1, 1},
    {"softmax", "(softmax x [:axis a])", "Normalized exponentials along the axis (default last), max-subtracted.", softmax_builtin<softmax>, 1, 3},
    {"log-softmax", "(log-softmax x [:axis a])", "Stable log of softmax along the axis (default last).", softmax_builtin<log_softmax>, 1, 3},
};

}  // namespace

std::span<const BuiltinDef> activation_builtins() { return kActivation; }

}  // namespace sheaf
