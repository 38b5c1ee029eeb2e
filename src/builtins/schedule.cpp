// builtins/schedule.cpp — learning-rate schedules (SPEC §5.16): linear-warmup
// inverse-sqrt-warmup exponential-decay step-decay cosine-decay.
//
// Each formula is written once, over a number type N, and runs on one of two paths:
// - host numbers only (the common call with a Python-style step counter): N = double, and the
//   result is rounded to a host float (f32) once at the end, so (cosine-decay 0.1 55 10 100) is
//   0.05 — step by step in f32 it would be 0.049999997, π/2 in f32 not being π/2;
// - a tensor among the arguments (a traced step inside a compiled loop, a rank-0 lr): N = Num,
//   whose arithmetic calls the language's own builtins (+ - * / // ** min cos sqrt, and < with
//   where for the branch), so the result has the dtype and shape those give and records IR
//   when traced. Both sides of a branch are computed there; the unselected one is discarded.
#include <array>
#include <cmath>
#include <tuple>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"

namespace sheaf {
namespace {

// ---- the host path: double -----------------------------------------------------------------
double lit(double, double v) { return v; }
double minimum(double x, double y) { return std::min(x, y); }
double floor_div(double x, double y) { return std::floor(x / y); }
double power(double x, double y) { return std::pow(x, y); }
double cosine(double x) { return std::cos(x); }
double root(double x) { return std::sqrt(x); }
double if_less(double a, double b, double then, double otherwise) { return a < b ? then : otherwise; }

// ---- the tensor path: values computed by the builtins ----------------------------------------
struct Num {
  Interp* in;
  const CallArgs* call;
  Value v;

  Num apply(std::string_view name, std::vector<Value> args) const {
    const BuiltinDef* d = in->builtin_def(name);
    return {in, call, d->fn(*in, CallArgs{args, call->site, d->name})};
  }
};
Num operator+(const Num& x, const Num& y) { return x.apply("+", {x.v, y.v}); }
Num operator-(const Num& x, const Num& y) { return x.apply("-", {x.v, y.v}); }
Num operator*(const Num& x, const Num& y) { return x.apply("*", {x.v, y.v}); }
Num operator/(const Num& x, const Num& y) { return x.apply("/", {x.v, y.v}); }
Num lit(const Num& like, double v) { return {like.in, like.call, Value::real(static_cast<float>(v))}; }
Num minimum(const Num& x, const Num& y) { return x.apply("min", {x.v, y.v}); }
Num floor_div(const Num& x, const Num& y) { return x.apply("//", {x.v, y.v}); }
Num power(const Num& x, const Num& y) { return x.apply("**", {x.v, y.v}); }
Num cosine(const Num& x) { return x.apply("cos", {x.v}); }
Num root(const Num& x) { return x.apply("sqrt", {x.v}); }
Num if_less(const Num& a, const Num& b, const Num& then, const Num& otherwise) {
  Num c = a.apply("<", {a.v, b.v});
  if (c.v.is(Kind::Bool)) return c.v.as_bool() ? then : otherwise;
  return a.apply("where", {c.v, then.v, otherwise.v});
}

// ---- the formulas ----------------------------------------------------------------------------
// lr·min(1, step/warmup)
template <typename N>
N linear_warmup(N lr, N step, N warmup) {
  return lr * minimum(lit(lr, 1), step / warmup);
}

// lr·step/warmup² before warmup, lr/√(step·warmup) from then on.
template <typename N>
N inverse_sqrt_warmup(N lr, N step, N warmup) {
  return if_less(step, warmup, lr * (step / (warmup * warmup)), lr / root(step * warmup));
}

// lr·rate^(step/decay-steps), continuous.
template <typename N>
N exponential_decay(N lr, N step, N decay_steps, N rate) {
  return lr * power(rate, step / decay_steps);
}

// lr·gamma^⌊step/step-size⌋
template <typename N>
N step_decay(N lr, N step, N step_size, N gamma) {
  return lr * power(gamma, floor_div(step, step_size));
}

// Linear warmup to lr, then lr·½(1 + cos(π·min(1, (step − warmup)/(total − warmup)))).
template <typename N>
N cosine_decay(N lr, N step, N warmup, N total) {
  N progress = minimum(lit(lr, 1), (step - warmup) / (total - warmup));
  N decayed = lr * lit(lr, 0.5) * (lit(lr, 1) + cosine(lit(lr, M_PI) * progress));
  return if_less(step, warmup, lr * (step / warmup), decayed);
}

// Runs `formula` on the K arguments: in double when all are host numbers, else on values.
template <size_t K, typename F>
Value schedule(Interp& in, const CallArgs& a, F formula) {
  bool host = true;
  for (size_t i = 0; i < K; ++i) {
    if (!a[i].is_number() && !a[i].is(Kind::Tensor)) type_error(a, i, "a number or a tensor");
    host = host && a[i].is_number();
  }
  if (host) {
    std::array<double, K> x;
    for (size_t i = 0; i < K; ++i) x[i] = a[i].as_double();
    return Value::real(static_cast<float>(std::apply(formula, x)));
  }
  auto nums = [&]<size_t... I>(std::index_sequence<I...>) { return std::array<Num, K>{Num{&in, &a, a[I]}...}; };
  return std::apply(formula, nums(std::make_index_sequence<K>())).v;
}

Value b_linear_warmup(Interp& in, const CallArgs& a) {
  return schedule<3>(in, a, [](auto... x) { return linear_warmup(x...); });
}
Value b_inverse_sqrt_warmup(Interp& in, const CallArgs& a) {
  return schedule<3>(in, a, [](auto... x) { return inverse_sqrt_warmup(x...); });
}
Value b_exponential_decay(Interp& in, const CallArgs& a) {
  return schedule<4>(in, a, [](auto... x) { return exponential_decay(x...); });
}
Value b_step_decay(Interp& in, const CallArgs& a) {
  return schedule<4>(in, a, [](auto... x) { return step_decay(x...); });
}
Value b_cosine_decay(Interp& in, const CallArgs& a) {
  return schedule<4>(in, a, [](auto... x) { return cosine_decay(x...); });
}

const BuiltinDef kSchedules[] = {
    {"linear-warmup", "(linear-warmup lr step warmup)", "lr·min(1, step/warmup).", b_linear_warmup, 3, 3},
    {"inverse-sqrt-warmup", "(inverse-sqrt-warmup lr step warmup)", "lr·step/warmup² before warmup, lr/√(step·warmup) after.",
     b_inverse_sqrt_warmup, 3, 3},
    {"exponential-decay", "(exponential-decay lr step decay-steps rate)", "lr·rate^(step/decay-steps), continuous.",
     b_exponential_decay, 4, 4},
    {"step-decay", "(step-decay lr step step-size gamma)", "lr·gamma^⌊step/step-size⌋.", b_step_decay, 4, 4},
    {"cosine-decay", "(cosine-decay lr step warmup total)",
     "Linear warmup to lr, then lr·½(1+cos(π·min(1, (step−warmup)/(total−warmup)))).", b_cosine_decay, 4, 4},
};

}  // namespace

std::span<const BuiltinDef> schedule_builtins() { return kSchedules; }

}  // namespace sheaf
