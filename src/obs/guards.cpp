// obs/guards.cpp — guard checks, the --guard grammar, traced checks (see guards.hpp).
#include "obs/guards.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "base/error.hpp"
#include "eval/pytree.hpp"
#include "obs/summary.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/reduce.hpp"

namespace sheaf::obs {
namespace {

constexpr std::string_view kGrammar =
    "expected [scope:]target:check with check no-nan, range[lo,hi] or shape[d1,d2,...] "
    "(e.g. no-nan, forward:h:range[-1,1], forward,train-step:grads:no-nan)";

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

double number(const std::string& s, const std::string& spec) {
  try {
    size_t used = 0;
    double x = std::stod(s, &used);
    if (used == s.size()) return x;
  } catch (const std::exception&) {
  }
  throw SheafError(fmt::format("--guard '{}': '{}' is not a number; {}", spec, s, kGrammar));
}

GuardCheck parse_check(const std::string& c, const std::string& spec) {
  GuardCheck g;
  if (c == "no-nan") return g;
  auto args = [&](std::string_view name) -> std::optional<std::vector<std::string>> {
    if (c.rfind(name, 0) != 0 || c.size() < name.size() + 2 || c[name.size()] != '[' || c.back() != ']') return std::nullopt;
    return split(c.substr(name.size() + 1, c.size() - name.size() - 2), ',');
  };
  if (auto a = args("range")) {
    if (a->size() != 2) throw SheafError(fmt::format("--guard '{}': range takes two bounds, range[lo,hi]; {}", spec, kGrammar));
    g.kind = GuardCheck::Kind::Range;
    g.lo = number((*a)[0], spec);
    g.hi = number((*a)[1], spec);
    if (g.lo > g.hi) throw SheafError(fmt::format("--guard '{}': the range is empty (lo > hi)", spec));
    return g;
  }
  if (auto a = args("shape")) {
    g.kind = GuardCheck::Kind::Shape;
    if (!(a->size() == 1 && (*a)[0].empty()))
      for (const std::string& d : *a) {
        double x = number(d, spec);
        if (x < 0 || x != static_cast<double>(static_cast<int64_t>(x)))
          throw SheafError(fmt::format("--guard '{}': '{}' is not a dimension (a non-negative integer)", spec, d));
        g.dims.push_back(static_cast<int64_t>(x));
      }
    return g;
  }
  throw SheafError(fmt::format("--guard '{}': unknown check '{}'; {}", spec, c, kGrammar));
}

std::string dims_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::optional<std::string> check_leaf(const GuardCheck& c, const Value& v) {
  if (v.is(Kind::Float)) {
    double x = v.as_float();
    if (c.kind == GuardCheck::Kind::NoNan && !std::isfinite(x)) return std::isnan(x) ? "Value is NaN" : "Value is " + sci(x);
    if (c.kind == GuardCheck::Kind::Range && (x < c.lo || x > c.hi))
      return fmt::format("Value {} outside allowed [{}, {}]", sci(x), sci(c.lo), sci(c.hi));
    return std::nullopt;
  }
  if (!v.is(Kind::Tensor) || v.as_tensor().is_symbolic()) return std::nullopt;
  const Tensor& t = v.as_tensor();
  if (c.kind == GuardCheck::Kind::Shape) {
    if (t.shape() != c.dims) return fmt::format("Shape mismatch: expected {}, got {}", dims_str(c.dims), dims_str(t.shape()));
    return std::nullopt;
  }
  if (c.kind == GuardCheck::Kind::NoNan)
    return has_nonfinite(t) ? std::optional<std::string>("Tensor contains NaN or Inf values: " + tensor_brief(t)) : std::nullopt;
  TensorStats s = tensor_stats(t);
  if (t.numel() > 0 && (s.min < c.lo || s.max > c.hi))
    return fmt::format("Value range [{}, {}] outside allowed [{}, {}]", sci(s.min), sci(s.max), sci(c.lo), sci(c.hi));
  return std::nullopt;
}

// Rank-0 bool: the check passes on the traced float tensor t.
Tensor traced_passes(const GuardCheck& c, const Tensor& t) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < t.rank(); ++i) all.push_back(i);
  if (c.kind == GuardCheck::Kind::NoNan) {  // x·0 is NaN exactly where x is NaN or ±Inf
    Tensor s = reduce(Reduce::Sum, binary(Binary::Mul, t, Tensor::scalar(t.dtype(), 0)), all);
    return binary(Binary::Eq, s, s);
  }
  // Out of range: x < lo or x > hi; NaN compares false, so it is skipped as the concrete check skips it.
  Tensor out = binary(Binary::Or, binary(Binary::Lt, t, Tensor::scalar(t.dtype(), c.lo)),
                      binary(Binary::Gt, t, Tensor::scalar(t.dtype(), c.hi)));
  Tensor count = reduce(Reduce::Sum, convert(out, DType::F32), all);
  return binary(Binary::Eq, count, Tensor::scalar(DType::F32, 0));
}

}  // namespace

std::string_view GuardCheck::kind_name() const {
  switch (kind) {
    case Kind::NoNan: return "NoNan";
    case Kind::Range: return "Range";
    case Kind::Shape: return "Shape";
  }
  return "";
}

bool GuardSpec::applies_to(std::string_view fn) const {
  if (scope.empty()) return true;
  for (const std::string& s : scope)
    if (s == fn) return true;
  return false;
}

GuardSpec parse_guard_spec(const std::string& text) {
  std::vector<std::string> parts = split(text, ':');
  if (parts.size() > 3 || parts.back().empty()) throw SheafError(fmt::format("--guard '{}': {}", text, kGrammar));
  GuardSpec g;
  g.text = text;
  g.check = parse_check(parts.back(), text);
  if (parts.size() >= 2) g.target = parts[parts.size() - 2];
  if (g.target.empty()) throw SheafError(fmt::format("--guard '{}': empty target; {}", text, kGrammar));
  if (parts.size() == 3)
    for (const std::string& f : split(parts[0], ','))
      if (!f.empty()) g.scope.push_back(f);
  return g;
}

GuardCheck guard_form_check(const std::string& kind, const Value& literal, SrcLoc loc) {
  GuardCheck g;
  auto numbers = [&](size_t want) {
    if (!literal.is_list() || (want && literal.as_list().items.size() != want))
      throw SheafError(fmt::format("guard :{}: expected a literal vector{}", kind, want == 2 ? " [lo hi]" : " [d...]"), loc);
    std::vector<double> r;
    for (const Value& x : literal.as_list().items) {
      if (!x.is_number()) throw SheafError(fmt::format("guard :{}: the bounds must be number literals", kind), loc);
      r.push_back(x.as_double());
    }
    return r;
  };
  if (kind == "no-nan") return g;
  if (kind == "range") {
    std::vector<double> b = numbers(2);
    g.kind = GuardCheck::Kind::Range;
    g.lo = b[0];
    g.hi = b[1];
    if (g.lo > g.hi) throw SheafError("guard :range: the range is empty (lo > hi)", loc);
    return g;
  }
  if (kind == "shape") {
    g.kind = GuardCheck::Kind::Shape;
    for (double d : numbers(0)) {
      if (d < 0 || d != static_cast<double>(static_cast<int64_t>(d))) throw SheafError("guard :shape: dimensions must be non-negative integers", loc);
      g.dims.push_back(static_cast<int64_t>(d));
    }
    return g;
  }
  throw SheafError(fmt::format("guard: unknown check :{}; expected :no-nan, :range [lo hi] or :shape [d...]", kind), loc);
}

std::optional<std::string> check_value(const GuardCheck& c, const Value& v) {
  if (v.is(Kind::Dict)) {
    for (const auto& [k, x] : v.as_dict().entries)
      if (auto m = check_value(c, x)) return ":" + k + " -> " + *m;
    return std::nullopt;
  }
  if (v.is_list()) {
    const auto& items = v.as_list().items;
    for (size_t i = 0; i < items.size(); ++i)
      if (auto m = check_value(c, items[i])) return fmt::format("[{}] -> {}", i, *m);
    return std::nullopt;
  }
  return check_leaf(c, v);
}

bool has_traced_leaf(const Value& v) {
  return any_leaf(v, [](const Value& x) { return x.is(Kind::Tensor) && x.as_tensor().is_symbolic(); });
}

void record_traced_check(const GuardCheck& c, const Value& tree) {
  std::vector<Value> leaves;
  tree_leaves(tree, leaves);
  for (const Value& v : leaves) {
    if (!v.is(Kind::Tensor) || !v.as_tensor().is_symbolic()) continue;
    const Tensor& t = v.as_tensor();
    if (c.kind == GuardCheck::Kind::Shape) {
      if (t.shape() != c.dims) throw TraceAbort("a shape guard fails on a traced value");  // interpreted: reports
      continue;
    }
    if (c.kind == GuardCheck::Kind::NoNan && !is_float(t.dtype())) continue;
    eval_hooks.trace.record_guard(traced_passes(c, t));
  }
}

}  // namespace sheaf::obs
