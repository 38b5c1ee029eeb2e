// builtins/compare.cpp — equality, ordering and logic on host values (SPEC §5.2).
#include <algorithm>

#include "builtins/registry.hpp"
#include "builtins/scalar.hpp"
#include "eval/args.hpp"
#include "tensor/reduce.hpp"

namespace sheaf {
namespace {

bool traced(const Value& v) {
  if (v.is(Kind::Tensor)) return v.as_tensor().is_symbolic();
  return v.is_list() && std::any_of(v.as_list().items.begin(), v.as_list().items.end(), traced);
}

// x and y, where each is a host boolean or a rank-0 bool tensor (traced).
Value both(const Value& x, const Value& y) {
  if (x.is(Kind::Bool)) return x.as_bool() ? y : x;
  if (y.is(Kind::Bool)) return y.as_bool() ? x : y;
  return Value::tensor(binary(Binary::And, x.as_tensor(), y.as_tensor()).as_weak());
}

// Structural equality (SPEC §5.2) as a host boolean. When traced tensors take part, what is
// static (kinds, shapes, lengths) is decided while tracing and the element comparison becomes
// part of the graph: the result is then a weak rank-0 bool tensor (true when all elements are
// equal, compared in the common dtype, or f32 for mixed dtypes, like the host comparison).
Value equal_value(const Value& x, const Value& y) {
  if (!traced(x) && !traced(y)) return Value::boolean(equal(x, y));
  if (x.is_list() && y.is_list()) {
    const auto &xs = x.as_list().items, &ys = y.as_list().items;
    if (xs.size() != ys.size()) return Value::boolean(false);
    Value r = Value::boolean(true);
    for (size_t i = 0; i < xs.size(); ++i) r = both(r, equal_value(xs[i], ys[i]));
    return r;
  }
  auto as_tensor = [](const Value& v) -> std::optional<Tensor> {
    if (v.is(Kind::Tensor)) return v.as_tensor();
    if (v.is(Kind::Int)) return Tensor::scalar(DType::I32, static_cast<double>(v.as_int()));
    if (v.is(Kind::Float)) return Tensor::scalar(DType::F32, v.as_float());
    return std::nullopt;
  };
  auto tx = as_tensor(x), ty = as_tensor(y);
  if (!tx || !ty || tx->shape() != ty->shape()) return Value::boolean(equal(x, y));  // decided by kinds and shapes
  DType d = tx->dtype() == ty->dtype() ? tx->dtype() : DType::F32;
  Tensor eq = binary(Binary::Eq, convert(*tx, d), convert(*ty, d));
  std::vector<int64_t> all(static_cast<size_t>(eq.rank()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return Value::tensor(reduce(Reduce::Min, eq, all).as_weak());
}

Value b_equal(Interp&, const CallArgs& a) {
  Value r = Value::boolean(true);
  for (size_t i = 1; i < a.size(); ++i) r = both(r, equal_value(a[0], a[i]));
  return r;
}

// ==, !=: element-wise; on scalars (numbers, strings, keywords, bools) a boolean.
Value elementwise_eq(const CallArgs& a, bool want_equal) {
  if (any_tensor(a)) return elementwise_fold(a, want_equal ? Binary::Eq : Binary::Ne, 0);
  return Value::boolean(equal(a[0], a[1]) == want_equal);
}
Value b_eqeq(Interp&, const CallArgs& a) { return elementwise_eq(a, true); }
Value b_neq(Interp&, const CallArgs& a) { return elementwise_eq(a, false); }

// Ordering of two scalars: numbers by value, strings lexicographically. -1, 0, 1; nullopt on nan.
std::optional<int> order(const CallArgs& a, size_t i, size_t j) {
  if (a[i].is(Kind::Str) && a[j].is(Kind::Str)) {
    int c = a[i].as_str().compare(a[j].as_str());
    return (c > 0) - (c < 0);
  }
  Num x = num_arg(a, i), y = num_arg(a, j);
  if (x.is_int && y.is_int) return (x.i > y.i) - (x.i < y.i);
  double dx = x.d(), dy = y.d();
  if (dx != dx || dy != dy) return std::nullopt;
  return (dx > dy) - (dx < dy);
}

template <bool (*Pred)(int), Binary Op>
Value chain(Interp&, const CallArgs& a) {
  if (any_tensor(a)) {
    if (a.size() != 2) throw SheafError(fmt::format("{}: element-wise comparison of tensors takes two arguments", a.name), a.site);
    return elementwise_fold(a, Op, 0);
  }
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    auto o = order(a, i, i + 1);
    if (!o || !Pred(*o)) return Value::boolean(false);
  }
  return Value::boolean(true);
}
bool lt(int o) { return o < 0; }
bool gt(int o) { return o > 0; }
bool le(int o) { return o <= 0; }
bool ge(int o) { return o >= 0; }

// A traced rank-0 bool is a runtime truth value: its negation is computed in the graph.
Value b_not(Interp&, const CallArgs& a) {
  const Value& v = a[0];
  if (v.is(Kind::Tensor) && v.as_tensor().is_symbolic() && v.as_tensor().rank() == 0 && v.as_tensor().dtype() == DType::Bool)
    return Value::tensor(unary(Unary::Not, v.as_tensor()).as_weak());
  return Value::boolean(!v.truthy());
}

const BuiltinDef kCompare[] = {
    {"=", "(= a b ...)", "Structural equality: same kind, shape and values; (= 1 1.0) is true.", b_equal, 1, -1},
    {"==", "(== a b)", "Element-wise equality; scalars give a boolean.", b_eqeq, 2, 2},
    {"!=", "(!= a b)", "Element-wise inequality; scalars give a boolean.", b_neq, 2, 2},
    {"<", "(< a b ...)", "Strictly increasing (element-wise on tensors).", chain<lt, Binary::Lt>, 1, -1},
    {">", "(> a b ...)", "Strictly decreasing (element-wise on tensors).", chain<gt, Binary::Gt>, 1, -1},
    {"<=", "(<= a b ...)", "Non-decreasing (element-wise on tensors).", chain<le, Binary::Le>, 1, -1},
    {">=", "(>= a b ...)", "Non-increasing (element-wise on tensors).", chain<ge, Binary::Ge>, 1, -1},
    {"not", "(not x)", "true iff x is falsy (false or nil).", b_not, 1, 1},
};

}  // namespace

std::span<const BuiltinDef> compare_builtins() { return kCompare; }

}  // namespace sheaf
