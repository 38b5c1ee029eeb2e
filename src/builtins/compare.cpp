// builtins/compare.cpp — equality, ordering and logic on host values (SPEC §5.2).
#include "builtins/args.hpp"
#include "builtins/registry.hpp"
#include "builtins/scalar.hpp"

namespace sheaf {
namespace {

Value b_equal(Interp&, const CallArgs& a) {
  for (size_t i = 1; i < a.size(); ++i)
    if (!equal(a[0], a[i])) return Value::boolean(false);
  return Value::boolean(true);
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

Value b_not(Interp&, const CallArgs& a) { return Value::boolean(!a[0].truthy()); }

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
