// tests/unit/grad_check_test.cpp — reverse-mode autodiff (SPEC §6.6) against finite differences.
// Each case of grad_check_cases.shf defines a scalar loss (defn f [p ...] ...) and ends with the
// list of f's arguments; p (a tensor or a pytree of tensors and host floats) is differentiated.
// The gradient (grad f) is computed in two interpreters: the default one, where the call of the
// returned function is traced and forward and backward run as one compiled executable (the JIT
// must really compile it: at least one trace, no interpreted call), and one whose JIT is
// removed (the gradient is traced into a graph of its own and run once). The two gradients must
// mirror p (same dicts, lists, shapes; integer leaves get zeros) and agree to 1e-5 relative. Each
// float element x of p is then checked against central differences of f, evaluated in f32 by
// the JIT-free interpreter:
//   D(h) = (f(x + h) − f(x − h)) / 2h,   fd = (4·D(h/2) − D(h)) / 3   (Richardson)
//   h = 2^(⌊log2 max(1, |x|)⌋ − 4): a power of two, 1/16 for |x| < 2, about |x|/16 above
// and must satisfy |ad − fd| ≤ kAtol + kRtol·max(|ad|, |fd|), with kRtol = 1e-3, kAtol = 2e-4
// unless the case says `;; tol RTOL ATOL` (with its reason).
// Forward mode (JvpCheck, SPEC §5.10) over the same table: (jvp f [p args...] [t zeros...]) with
// a fixed pseudo-random tangent t of p (elements ±1/2, ±1), compiled and JIT-free, against the
// same central differences of f along t (x = 0 in s ↦ f(p + s·t), so h = 1/16) and against
// ⟨(grad f)(p), t⟩.
// Second order (SecondOrderCheck) over grad2_cases.shf, compositions of elementwise ops g: the
// Hessian-vector products (grad (fn [y] (sum (* w ((grad g) y))))) and jvp of (grad g), and
// (grad (grad ·)) of a scalar function, against central differences of (grad ·).
// Further tests: second derivatives (grad (grad f)) against analytic values, zero gradients of
// integer leaves, the gradient tree of a nested dict, closures, ties of `max`, the scalar-result
// and `while` errors, coverage of every differentiable builtin of SPEC §6.6, and tracing a
// gradient without materialising its zero cotangents on the host.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "case_file.hpp"
#include "value_compare.hpp"
#include "base/error.hpp"
#include "eval/interp.hpp"
#include "runtime/jit.hpp"
#include "tensor/shape.hpp"
#include "trace/tracer.hpp"
#include "value/printer.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {
namespace {

constexpr double kRtol = 1e-3, kAtol = 2e-4;          // AD vs finite differences
constexpr double kSameRtol = 1e-5, kSameAtol = 1e-6;  // compiled AD vs JIT-free AD

struct Case {
  std::string name;
  std::string body;  // the section as written
  std::string text;  // the program run: prelude + body
  double rtol = kRtol, atol = kAtol;
};

std::filesystem::path table_path(const char* file) { return testing_support::unit_dir() / file; }
std::filesystem::path cases_path() { return table_path("grad_check_cases.shf"); }

// The `;; --- name` sections of a table (case_file.hpp); `;; tol RTOL ATOL` loosens one case.
std::vector<Case> read_cases(const std::filesystem::path& path) {
  std::vector<Case> out;
  for (auto& c : testing_support::read_case_sections(path)) {
    out.push_back({c.name, c.body, c.text});
    std::istringstream lines(c.body);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(";; tol ", 0) == 0) std::istringstream(line.substr(7)) >> out.back().rtol >> out.back().atol;
  }
  return out;
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = read_cases(cases_path());
  return cases;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

bool is_float_leaf(const Value& v) { return v.is(Kind::Float) || (v.is(Kind::Tensor) && is_float(v.as_tensor().dtype())); }
int64_t leaf_size(const Value& v) { return v.is(Kind::Float) ? 1 : v.as_tensor().numel(); }
double leaf_get(const Value& v, int64_t i) { return v.is(Kind::Float) ? v.as_float() : v.as_tensor().get(i); }

// The float leaves of a pytree in pytree order, with their paths ("p:layers[1]:w").
void float_leaves(const Value& v, const std::string& path, std::vector<std::pair<std::string, Value>>& out) {
  if (is_float_leaf(v)) out.emplace_back(path, v);
  else if (v.is_list())
    for (size_t i = 0; i < v.as_list().items.size(); ++i) float_leaves(v.as_list().items[i], fmt::format("{}[{}]", path, i), out);
  else if (v.is(Kind::Dict))
    for (const auto& [k, x] : v.as_dict().entries) float_leaves(x, path + ":" + k, out);
}
std::vector<Value> float_leaves(const Value& v) {
  std::vector<std::pair<std::string, Value>> named;
  float_leaves(v, "", named);
  std::vector<Value> out;
  for (auto& [path, leaf] : named) out.push_back(leaf);
  return out;
}

// v with each leaf (what is neither a list nor a dict) replaced by fn(leaf), in pytree order;
// lists keep their kind, dicts their keys.
Value map_tree(const Value& v, const std::function<Value(const Value&)>& fn) {
  if (v.is_list()) {
    std::vector<Value> items;
    for (const Value& it : v.as_list().items) items.push_back(map_tree(it, fn));
    return Value::list(std::move(items), v.as_list().kind);
  }
  if (v.is(Kind::Dict)) {
    std::vector<std::pair<std::string, Value>> entries;
    for (const auto& [k, it] : v.as_dict().entries) entries.emplace_back(k, map_tree(it, fn));
    return make_dict(std::move(entries));
  }
  return fn(v);
}

// A float leaf like `like` (a host float, or a tensor of its dtype and shape) with the elements
// element(0), element(1), ... (rounded to its dtype).
Value float_leaf_of(const Value& like, const std::function<double(int64_t)>& element) {
  if (like.is(Kind::Float)) return Value::real(static_cast<float>(element(0)));
  const Tensor& t = like.as_tensor();
  std::vector<double> xs(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) xs[static_cast<size_t>(i)] = element(i);
  return Value::tensor(make_tensor(t.dtype(), t.shape(), xs));
}

// v with element `elem` of its float leaf number `target` set to x.
Value with_element(const Value& v, size_t target, int64_t elem, double x) {
  size_t leaf = 0;
  return map_tree(v, [&](const Value& l) {
    if (!is_float_leaf(l) || leaf++ != target) return l;
    return float_leaf_of(l, [&](int64_t i) { return i == elem ? x : leaf_get(l, i); });
  });
}

// v + s·t for a tangent t of v (as tangent_like makes it): each float element moves along its
// tangent; the other leaves stay.
Value along(const Value& v, const Value& t, double s) {
  std::vector<Value> tl = float_leaves(t);
  size_t leaf = 0;
  return map_tree(v, [&](const Value& l) {
    if (!is_float_leaf(l)) return l;
    const Value& tk = tl.at(leaf++);
    return float_leaf_of(l, [&](int64_t i) { return leaf_get(l, i) + s * leaf_get(tk, i); });
  });
}

// Element n of the fixed pseudo-random tangents: one of ±1/2, ±1 (splitmix64 of n). Dyadic, so
// x ± h·t at the steps of finite_difference is as exact as x ± h (the `cast` case needs it).
double tangent_element(uint64_t n) {
  uint64_t z = (n + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  static constexpr double kValues[] = {-1, -0.5, 0.5, 1};
  return kValues[z & 3];
}

// A tangent of the pytree v: the same structure; float leaves get fixed pseudo-random elements
// (numbered on from `n`) when `random`, zeros otherwise; integer leaves get zeros of their kind,
// dtype and shape (jvp ignores them); other leaves are kept.
Value tangent_like(const Value& v, bool random, uint64_t& n) {
  return map_tree(v, [&](const Value& l) {
    if (is_float_leaf(l)) return float_leaf_of(l, [&](int64_t) { return random ? tangent_element(n++) : 0.0; });
    if (l.is(Kind::Int)) return Value::integer(0);
    if (l.is(Kind::Tensor))
      return Value::tensor(make_tensor(l.as_tensor().dtype(), l.as_tensor().shape(), std::vector<double>(leaf_size(l))));
    return l;
  });
}

// "" when the gradient tree `g` mirrors `p`: the same dicts (keys), lists (kind and length); for
// a float tensor a float tensor of its dtype and shape, for a host float a host float, for an
// integer or bool leaf zeros of its kind, dtype and shape; other leaves unchanged. The float
// gradients are collected in pytree order.
std::string mirror(const Value& p, const Value& g, const std::string& path, std::vector<Value>& grads) {
  auto wrong = [&](const std::string& what) { return fmt::format("{}: {} (the gradient is {})", path, what, print_value(g, false)); };
  if (p.is(Kind::Float)) {
    if (!g.is(Kind::Float)) return wrong("a host float needs a host-float gradient");
    grads.push_back(g);
    return "";
  }
  if (p.is(Kind::Tensor)) {
    const Tensor& t = p.as_tensor();
    if (!g.is(Kind::Tensor) || g.as_tensor().dtype() != t.dtype() || g.as_tensor().shape() != t.shape())
      return wrong("expected a gradient of type " + type_str(t));
    if (is_float(t.dtype())) grads.push_back(g);
    else
      for (int64_t i = 0; i < t.numel(); ++i)
        if (g.as_tensor().get(i) != 0) return wrong("an integer or bool leaf needs a zero gradient");
    return "";
  }
  if (p.is(Kind::Int)) return g.is(Kind::Int) && g.as_int() == 0 ? "" : wrong("an integer leaf needs the gradient 0");
  if (p.is_list()) {
    const auto &pl = p.as_list(), *gl = g.is_list() ? &g.as_list() : nullptr;
    if (!gl || gl->kind != pl.kind || gl->items.size() != pl.items.size()) return wrong("expected a list like the parameter's");
    for (size_t i = 0; i < pl.items.size(); ++i)
      if (std::string e = mirror(pl.items[i], gl->items[i], fmt::format("{}[{}]", path, i), grads); !e.empty()) return e;
    return "";
  }
  if (p.is(Kind::Dict)) {
    if (!g.is(Kind::Dict) || g.as_dict().entries.size() != p.as_dict().entries.size()) return wrong("expected a dict with the parameter's keys");
    for (size_t i = 0; i < p.as_dict().entries.size(); ++i) {
      const auto &[k, x] = p.as_dict().entries[i];
      if (g.as_dict().entries[i].first != k) return wrong("expected the key :" + k);
      if (std::string e = mirror(x, g.as_dict().entries[i].second, path + ":" + k, grads); !e.empty()) return e;
    }
    return "";
  }
  return equal(p, g) ? "" : wrong("a non-numeric leaf must be passed through");
}

// A case run in one interpreter: f, its arguments and (grad f) at them; `traces` counts the
// traces the JIT made for that call.
struct Differentiated {
  Value f;
  std::vector<Value> args;
  Value grads;
  std::string error;
  uint64_t traces = 0;
};

Value global_fn(Interp& in, const char* name) { return in.global(symbols::intern(name))->value; }

// The case's program run in `in`: f and its arguments (no gradient yet).
Differentiated load(Interp& in, const Case& c) {
  Differentiated d;
  try {
    Value args = in.run_text(c.text, "<" + c.name + ">");
    if (!args.is_list() || args.as_list().items.empty()) return {{}, {}, {}, "the last form must be the list of f's arguments", 0};
    d.args = args.as_list().items;
    d.f = global_fn(in, "f");
  } catch (const SheafError& e) {
    d.error = e.what();
  }
  return d;
}

// The traces the JIT of `in` has made so far.
uint64_t traces_of(const Interp& in) { return in.jit ? jit_of(in)->stats().traces : 0; }

Differentiated differentiate(Interp& in, const Case& c) {
  Differentiated d = load(in, c);
  if (!d.error.empty()) return d;
  try {
    Value grad = in.run_text("(grad f)", "<grad>");
    uint64_t before = traces_of(in);
    d.grads = in.call(grad, d.args, SrcLoc{});
    d.traces = traces_of(in) - before;
  } catch (const SheafError& e) {
    d.error = e.what();
  }
  return d;
}

double scalar(const Value& v, std::string_view what) {
  std::optional<double> r = number_of(v);
  if (!r) throw SheafError(fmt::format("{} must be a scalar, got {}", what, print_value(v, false)));
  return *r;
}

// The numbers of a value, its tensors' elements in order.
std::vector<double> numbers(const Value& v) {
  std::vector<double> out;
  if (v.is_list())
    for (const Value& x : v.as_list().items)
      for (double d : numbers(x)) out.push_back(d);
  else if (v.is(Kind::Tensor))
    for (int64_t i = 0; i < v.as_tensor().numel(); ++i) out.push_back(v.as_tensor().get(i));
  else if (std::optional<double> d = number_of(v))
    out.push_back(*d);
  return out;
}

// f at the arguments with p replaced.
double loss(Interp& in, const Differentiated& d, const Value& p) {
  std::vector<Value> args = d.args;
  args[0] = p;
  return scalar(in.call(d.f, args, SrcLoc{}), "f's result");
}

double step(double x) { return std::exp2(std::floor(std::log2(std::max(1.0, std::fabs(x)))) - 4); }

// The derivative at x of a function of one real variable, whose values are vectors (each
// element differentiated), by Richardson-extrapolated central differences (see the header).
// The divisor is the distance between the two f32 points actually evaluated.
std::vector<double> finite_differences(const std::function<std::vector<double>(double)>& at, double x) {
  auto central = [&](double h) {
    double hi = static_cast<float>(x + h), lo = static_cast<float>(x - h);
    std::vector<double> a = at(hi), b = at(lo);
    for (size_t i = 0; i < a.size(); ++i) a[i] = (a[i] - b.at(i)) / (hi - lo);
    return a;
  };
  double h = step(x);
  std::vector<double> d = central(h), d2 = central(h / 2);
  for (size_t i = 0; i < d.size(); ++i) d2[i] = (4 * d2[i] - d[i]) / 3;
  return d2;
}
double finite_difference(const std::function<double(double)>& at, double x) {
  return finite_differences([&](double v) { return std::vector<double>{at(v)}; }, x)[0];
}

bool close(double a, double b, double rtol, double atol) {
  return std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) <= atol + rtol * std::max(std::fabs(a), std::fabs(b));
}

// The two interpreters every check compares: the default one (calls are traced and compiled) and
// one without a JIT (the reference).
struct Interpreters {
  std::ostringstream out_jit, out_eager;
  Interp compiled{out_jit};
  Interp eager{out_eager};
  Interpreters() { eager.jit.reset(); }
};

class GradCheck : public ::testing::TestWithParam<Case> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const Case& c = GetParam();
  Interpreters both;
  Interp &compiled = both.compiled, &eager = both.eager;
  Differentiated want = differentiate(eager, c);
  ASSERT_EQ(want.error, "") << "differentiating without the JIT fails:\n" << c.body;
  Differentiated got = differentiate(compiled, c);
  ASSERT_EQ(got.error, "") << "differentiating with the JIT fails:\n" << c.body;
  EXPECT_GE(got.traces, 1u) << "the call of (grad f) was not traced";
  EXPECT_EQ(testing_support::compiled_cleanly(compiled), "");

  std::vector<Value> ad, ad_eager;
  ASSERT_EQ(mirror(got.args[0], got.grads, "p", ad), "");
  ASSERT_EQ(mirror(want.args[0], want.grads, "p", ad_eager), "");
  std::vector<std::pair<std::string, Value>> leaves;
  float_leaves(want.args[0], "p", leaves);
  ASSERT_EQ(leaves.size(), ad.size());
  ASSERT_FALSE(leaves.empty()) << "p has no float leaf";

  std::string bad;
  int64_t elements = 0, failures = 0;
  for (size_t k = 0; k < leaves.size(); ++k) {
    for (int64_t e = 0; e < leaf_size(leaves[k].second); ++e, ++elements) {
      double x = leaf_get(leaves[k].second, e), g = leaf_get(ad[k], e), g_eager = leaf_get(ad_eager[k], e);
      double fd = finite_difference([&](double v) { return loss(eager, want, with_element(want.args[0], k, e, v)); }, x);
      bool same = close(g, g_eager, kSameRtol, kSameAtol), near = close(g, fd, c.rtol, c.atol);
      if (same && near) continue;
      if (++failures <= 8)
        bad += fmt::format("\n  {}[{}] at {:.6g}: compiled {:.7g}, without JIT {:.7g}, finite differences {:.7g}{}", leaves[k].first, e,
                           x, g, g_eager, fd, same ? "" : " (compiled and JIT-free differ)");
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << elements << " gradient elements are wrong:" << bad;
}

std::string test_name(const ::testing::TestParamInfo<Case>& info) { return testing_support::gtest_name(info.param.name); }

INSTANTIATE_TEST_SUITE_P(Builtins, GradCheck, ::testing::ValuesIn(all_cases()), test_name);

// ---- forward mode over the same table ---------------------------------------------------

// (jvp f args tangents) in one interpreter: the value and the tangent of f's (scalar) result.
// It runs inside a named function so that the JIT, when there is one, traces it.
struct Forward {
  double value = 0, tangent = 0;
  std::string error;
  uint64_t traces = 0;
};

Forward forward(Interp& in, const Differentiated& d, const std::vector<Value>& tangents) {
  Forward r;
  try {
    Value jvp = in.run_text("(defn jvp-of-f [primals tangents] (jvp f primals tangents))\njvp-of-f", "<jvp>");
    uint64_t before = traces_of(in);
    Value out = in.call(jvp, std::vector<Value>{Value::list(d.args), Value::list(tangents)}, SrcLoc{});
    r.traces = traces_of(in) - before;
    if (!out.is_list() || out.as_list().items.size() != 2)
      throw SheafError("jvp must return (value tangent), got " + print_value(out, false));
    r.value = scalar(out.as_list().items[0], "jvp's value");
    r.tangent = scalar(out.as_list().items[1], "jvp's tangent");
  } catch (const SheafError& e) {
    r.error = e.what();
  }
  return r;
}

// The tangents of f's arguments: fixed pseudo-random ones for p, zeros for the others.
std::vector<Value> tangents_of(const std::vector<Value>& args) {
  std::vector<Value> t;
  uint64_t n = 0;
  for (size_t i = 0; i < args.size(); ++i) t.push_back(tangent_like(args[i], i == 0, n));
  return t;
}

// Every case of the table in forward mode: (jvp f [p args...] [t zeros...]), compiled (traced by
// the JIT) and JIT-free, agree with each other (1e-5), with the JIT-free value of f, with the
// central difference of f along t, (f(p + h·t) − f(p − h·t)) / 2h (Richardson, h = 1/16 as for
// an element near 0; the case's tolerance), and with ⟨(grad f)(p), t⟩ from reverse mode (to 1e-5
// of Σ|gᵢ·tᵢ|, the scale of the sum, or to the case's looser relative tolerance).
class JvpCheck : public ::testing::TestWithParam<Case> {};

TEST_P(JvpCheck, MatchesFiniteDifferencesAndReverseMode) {
  const Case& c = GetParam();
  Interpreters both;
  Interp &compiled = both.compiled, &eager = both.eager;
  Differentiated want = differentiate(eager, c);
  ASSERT_EQ(want.error, "") << "differentiating without the JIT fails:\n" << c.body;
  Differentiated got = load(compiled, c);
  ASSERT_EQ(got.error, "") << c.body;
  const std::vector<Value> t = tangents_of(want.args);
  Forward fe = forward(eager, want, t);
  ASSERT_EQ(fe.error, "") << "jvp without the JIT fails:\n" << c.body;
  Forward fc = forward(compiled, got, t);
  ASSERT_EQ(fc.error, "") << "jvp with the JIT fails:\n" << c.body;
  EXPECT_GE(fc.traces, 1u) << "the call of jvp was not traced";
  EXPECT_EQ(testing_support::compiled_cleanly(compiled), "");

  std::vector<Value> g;
  ASSERT_EQ(mirror(want.args[0], want.grads, "p", g), "");
  std::vector<Value> tl = float_leaves(t[0]);
  ASSERT_EQ(tl.size(), g.size());
  double dot = 0, scale = 0;
  for (size_t k = 0; k < g.size(); ++k)
    for (int64_t e = 0; e < leaf_size(g[k]); ++e) {
      dot += leaf_get(g[k], e) * leaf_get(tl[k], e);
      scale += std::fabs(leaf_get(g[k], e) * leaf_get(tl[k], e));
    }
  double value = loss(eager, want, want.args[0]);
  double fd = finite_difference([&](double s) { return loss(eager, want, along(want.args[0], t[0], s)); }, 0.0);
  double dot_rtol = c.rtol > kRtol ? c.rtol : kSameRtol;  // a case loosened for rounding (cast) rounds here too
  std::string where = fmt::format("\n  jvp compiled {:.7g}, without JIT {:.7g}; finite differences {:.7g}; <grad f, t> {:.7g}"
                                  " (scale {:.4g})\n{}",
                                  fc.tangent, fe.tangent, fd, dot, scale, c.body);
  EXPECT_TRUE(close(fc.value, value, kSameRtol, kSameAtol) && close(fe.value, value, kSameRtol, kSameAtol))
      << "jvp's value: compiled " << fc.value << ", without JIT " << fe.value << ", f " << value;
  EXPECT_TRUE(close(fc.tangent, fe.tangent, kSameRtol, kSameAtol)) << "compiled and JIT-free jvp differ" << where;
  EXPECT_TRUE(close(fe.tangent, fd, c.rtol, c.atol)) << "jvp differs from finite differences" << where;
  EXPECT_LE(std::fabs(fe.tangent - dot), kSameAtol + dot_rtol * scale) << "jvp differs from reverse mode" << where;
}

INSTANTIATE_TEST_SUITE_P(Builtins, JvpCheck, ::testing::ValuesIn(all_cases()), test_name);

// ---- second order over grad2_cases.shf ---------------------------------------------------

const std::vector<Case>& second_order_cases() {
  static const std::vector<Case> cases = read_cases(table_path("grad2_cases.shf"));
  return cases;
}

// The functions a second-order case is checked with (see grad2_cases.shf), defined beside its g.
// The first argument s of so-d1 and so-d2 is the scalar they differentiate: x itself when x is a
// scalar, else the position on the line x + s·w.
std::string second_order_functions(bool scalar_x) {
  std::string text =
      "(defn so-hvp [x w] ((grad (fn [y] (sum (* w ((grad g) y))))) x))\n"
      "(defn so-hvp-fwd [x w] (second (jvp (grad g) (list x) (list w))))\n";
  if (scalar_x) return text + "(defn so-d1 [s x w] ((grad g) s))\n(defn so-d2 [s x w] ((grad (grad g)) s))\n";
  return text + "(defn so-phi [s x w] (g (+ x (* s w))))\n(defn so-d1 [s x w] ((grad so-phi) s x w))\n"
                "(defn so-d2 [s x w] ((grad (grad so-phi)) s x w))\n";
}

// A second-order case run in one interpreter.
struct SecondOrder {
  Value x, w, s;  // the point, the tangent, so-d2's argument s (x, or 0)
  bool scalar_x = false;
  std::vector<double> hvp, hvp_fwd;  // H·w by reverse over reverse, and by jvp of (grad g)
  double d2 = 0;
  std::string error;
  uint64_t traces = 0;
};

SecondOrder second_order(Interp& in, const Case& c) {
  SecondOrder r;
  try {
    r.x = in.run_text(c.text, "<" + c.name + ">");
    if (!r.x.is(Kind::Tensor) || !is_float(r.x.as_tensor().dtype()))
      throw SheafError("the last form must be the point x, a float tensor");
    r.scalar_x = r.x.as_tensor().rank() == 0;
    uint64_t n = 0;
    r.w = tangent_like(r.x, true, n);
    r.s = r.scalar_x ? r.x : Value::tensor(make_tensor(r.x.as_tensor().dtype(), Shape{}, {0.0}));
    in.run_text(second_order_functions(r.scalar_x), "<second-order>");
    uint64_t before = traces_of(in);
    r.hvp = numbers(in.call(global_fn(in, "so-hvp"), std::vector<Value>{r.x, r.w}, SrcLoc{}));
    r.hvp_fwd = numbers(in.call(global_fn(in, "so-hvp-fwd"), std::vector<Value>{r.x, r.w}, SrcLoc{}));
    r.d2 = scalar(in.call(global_fn(in, "so-d2"), std::vector<Value>{r.s, r.x, r.w}, SrcLoc{}), "the second derivative");
    r.traces = traces_of(in) - before;
  } catch (const SheafError& e) {
    r.error = e.what();
  }
  return r;
}

// "" when a and b agree element by element, else (at most 8 of) the elements that differ.
std::string differences(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol, std::string_view what) {
  if (a.size() != b.size()) return fmt::format("{}: {} vs {} elements", what, a.size(), b.size());
  std::string bad;
  size_t failures = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!close(a[i], b[i], rtol, atol) && ++failures <= 8) bad += fmt::format("\n  [{}] {:.7g} vs {:.7g}", i, a[i], b[i]);
  return failures == 0 ? "" : fmt::format("{}: {} of {} elements differ:{}", what, failures, a.size(), bad);
}

class SecondOrderCheck : public ::testing::TestWithParam<Case> {};

TEST_P(SecondOrderCheck, MatchesFiniteDifferencesOfTheGradient) {
  const Case& c = GetParam();
  Interpreters both;
  Interp &compiled = both.compiled, &eager = both.eager;
  SecondOrder want = second_order(eager, c);
  ASSERT_EQ(want.error, "") << "without the JIT:\n" << c.body;
  SecondOrder got = second_order(compiled, c);
  ASSERT_EQ(got.error, "") << "with the JIT:\n" << c.body;
  EXPECT_GE(got.traces, 3u) << "the calls were not traced";
  EXPECT_EQ(testing_support::compiled_cleanly(compiled), "");

  // Finite differences (JIT-free) of (grad g) along w, and of so-d1 at s.
  Value grad_g = eager.run_text("(grad g)", "<grad>");
  std::vector<double> fd_hvp = finite_differences(
      [&](double s) { return numbers(eager.call(grad_g, std::vector<Value>{along(want.x, want.w, s)}, SrcLoc{})); }, 0.0);
  Value d1 = global_fn(eager, "so-d1");
  double fd_d2 = finite_difference(
      [&](double s) {
        Value at = float_leaf_of(want.s, [&](int64_t) { return s; });
        return scalar(eager.call(d1, std::vector<Value>{at, want.x, want.w}, SrcLoc{}), "so-d1's result");
      },
      leaf_get(want.s, 0));
  // wᵀ·(H·w), and for a scalar x g'' = (H·w)/w.
  std::vector<double> w = numbers(want.w);
  double whw = 0, scale = 0;
  for (size_t i = 0; i < w.size() && i < want.hvp.size(); ++i) {
    whw += w[i] * want.hvp[i];
    scale += std::fabs(w[i] * want.hvp[i]);
  }
  if (want.scalar_x) whw /= w[0] * w[0], scale /= w[0] * w[0];

  auto expect_same = [&](const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol, std::string_view what) {
    if (std::string e = differences(a, b, rtol, atol, what); !e.empty()) ADD_FAILURE() << e << "\n" << c.body;
  };
  expect_same(got.hvp, want.hvp, kSameRtol, kSameAtol, "H*w compiled vs without JIT");
  expect_same(got.hvp_fwd, want.hvp_fwd, kSameRtol, kSameAtol, "H*w by jvp of (grad g), compiled vs without JIT");
  expect_same(want.hvp_fwd, want.hvp, kSameRtol, kSameAtol, "H*w by jvp of (grad g) vs by reverse over reverse");
  expect_same(want.hvp, fd_hvp, c.rtol, c.atol, "H*w vs finite differences of (grad g) along w");
  EXPECT_TRUE(close(got.d2, want.d2, kSameRtol, kSameAtol))
      << "(grad (grad .)) compiled " << got.d2 << ", without JIT " << want.d2 << "\n" << c.body;
  EXPECT_TRUE(close(want.d2, fd_d2, c.rtol, c.atol))
      << "(grad (grad .)) " << want.d2 << ", finite differences of (grad .) " << fd_d2 << "\n" << c.body;
  EXPECT_LE(std::fabs(want.d2 - whw), kSameAtol + kSameRtol * scale)
      << "(grad (grad .)) " << want.d2 << ", w.H.w " << whw << "\n" << c.body;
}

INSTANTIATE_TEST_SUITE_P(Compositions, SecondOrderCheck, ::testing::ValuesIn(second_order_cases()), test_name);

TEST(GradCheckTable, CasesLoad) {
  EXPECT_GE(all_cases().size(), 60u) << "cannot read " << cases_path();
  EXPECT_GE(second_order_cases().size(), 20u) << "cannot read " << table_path("grad2_cases.shf");
}

TEST(GradCheckTable, CaseNamesAreUnique) {
  std::set<std::string> seen;
  for (const Case& c : all_cases()) EXPECT_TRUE(seen.insert(test_name({c, 0})).second) << "duplicate case " << c.name;
  seen.clear();
  for (const Case& c : second_order_cases()) EXPECT_TRUE(seen.insert(test_name({c, 0})).second) << "duplicate case " << c.name;
}

// Every required VJP of SPEC §6.6 (and the other differentiable builtins of §5, nn and optim)
// is used by some case: the symbols of the case texts, comments left out.
TEST(GradCheckTable, CoversEveryDifferentiableBuiltin) {
  std::set<std::string> used;
  for (const Case& c : all_cases()) {
    std::istringstream lines(c.body);
    for (std::string line; std::getline(lines, line);) {
      line = line.substr(0, line.find(';'));
      for (char& ch : line)
        if (std::string_view("()[]{}'\"`,").find(ch) != std::string_view::npos) ch = ' ';
      std::istringstream words(line);
      for (std::string w; words >> w;) used.insert(w);
    }
  }
  const char* required[] = {
      // SPEC §6.6
      "+", "-", "*", "/", "**", "neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tan", "@", "einsum", "transpose", "reshape",
      "swapaxes", "slice", "dynamic-slice", "dynamic-update-slice", "index-update", "concat", "stack", "get", "where", "broadcast",
      "roll", "flip", "tril", "cast", "relu", "leaky-relu", "gelu", "selu", "celu", "silu", "sigmoid", "tanh", "softmax",
      "log-softmax", "dropout", "sum", "mean", "product", "var", "min", "max", "minimum", "maximum", "clamp", "normalize",
      "sparse-cross-entropy", "conv1d", "conv2d", "scan", "reduce", "map", "if", "repeat", "grad",
      // the other differentiable builtins of §5, and nn/optim
      "inc", "dec", "mod", "%", "round", "floor", "ceil", "//", "argmax", "argmin", "tr", "tensor-split", "first", "second", "last",
      "rest", "nth", "append", "append-and-roll", "tensor", "float", "top_k", "sort", "loop", "recur", "while", "vmap", "tree-map",
      "tree-reduce", "flatten",
      "get-in", "apply", "with-params", "one-hot", "cross-entropy-loss", "mse-loss", "mae-loss", "linear", "layer-norm", "rms-norm",
      "global-norm", "clip-by-global-norm"};
  for (const char* n : required) EXPECT_TRUE(used.count(n)) << "no case uses " << n;
}

// ---- the rest of SPEC §4.5 / §6.6 --------------------------------------------------------

// The value of `text` in an interpreter with the JIT (compiled) or without it, or the error.
struct Outcome {
  Value value;
  std::string error;
  std::string jit;  // compiled_cleanly, for the JIT run
};
Outcome run_program(const std::string& text, bool with_jit) {
  std::ostringstream out;
  Interp in{out};
  if (!with_jit) in.jit.reset();
  Outcome r;
  try {
    r.value = in.run_text(text, "<grad-test>");
  } catch (const SheafError& e) {
    r.error = e.what();
  }
  if (with_jit) r.jit = testing_support::compiled_cleanly(in);
  return r;
}

// (grad (grad f)) of scalar compositions: the backward nodes of the inner call are
// differentiated again, compiled as one executable.
TEST(GradCheckExtra, SecondDerivativesMatchAnalyticValues) {
  const std::vector<double> xs = {-1.3, -0.4, 0.3, 0.9, 2.1};
  std::string points;
  for (double x : xs) points += fmt::format(" (tensor {})", x);
  const std::string text = "(defn f [x] (* (sin x) (* x x x)))\n(defn g [x] (exp (tanh x)))\n(defn h [x] (* x (log (+ x 3))))\n"
                           "(def f2 (grad (grad f)))\n(def g2 (grad (grad g)))\n(def h2 (grad (grad h)))\n"
                           "(list (map (fn [x] (f2 x)) (list" + points + ")) (map (fn [x] (g2 x)) (list" + points + "))"
                           " (map (fn [x] (h2 x)) (list" + points + ")))";
  std::vector<double> want;
  for (double x : xs) want.push_back(-x * x * x * std::sin(x) + 6 * x * x * std::cos(x) + 6 * x * std::sin(x));
  for (double x : xs) {
    double t = std::tanh(x), s = 1 - t * t;
    want.push_back(std::exp(t) * s * (s - 2 * t));
  }
  for (double x : xs) want.push_back(1 / (x + 3) + 3 / ((x + 3) * (x + 3)));
  for (bool with_jit : {true, false}) {
    Outcome r = run_program(text, with_jit);
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.jit, "");
    std::vector<double> got = numbers(r.value);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(close(got[i], want[i], 1e-5, 1e-5)) << "point " << i << ": " << got[i] << " vs " << want[i] << (with_jit ? " (JIT)" : "");
  }
}

// value-and-grad: the value, and a gradient tree that mirrors the nested dict/list parameters
// (keys, nesting); integer leaves get zeros of their own type, host floats host floats.
TEST(GradCheckExtra, GradientTreeMirrorsTheParameters) {
  const std::string text =
      "(defn f [p x] (+ (sum (* (get p :w) (+ (cast (get p :n) :f32) (get p :k)))) (* (get p :s) (get-in p [:layers 1 :b 0]))"
      " (sum (@ x (get-in p [:layers 0 :w])))))\n"
      "(def p {:w (tensor [1.0 2.0 3.0]) :n (tensor '[1 2 3] :i32) :k 3 :s 0.5"
      " :layers [{:w (tensor [[1.0 2.0] [3.0 4.0]]) :b (tensor [0.5])} {:b (tensor [0.25 1.0])}]})\n"
      "((value-and-grad f) p (tensor [1.0 -1.0]))";
  for (bool with_jit : {true, false}) {
    Outcome r = run_program(text, with_jit);
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.jit, "");
    EXPECT_EQ(print_value(r.value, false),
              "(28.125, {:k 0, :layers [{:b [0.], :w [[ 1.  1.]\n [-1. -1.]]}, {:b [0.5 0. ]}], :n [0 0 0], :s 0.25, :w [4. 5. 6.]})")
        << (with_jit ? "(JIT)" : "");
  }
}

// A closure over data differentiates like the function it wraps, at top level and inside a
// compiled function.
TEST(GradCheckExtra, ClosuresDifferentiate) {
  const std::string text =
      "(defn loss [p x y] (mean (** (- (@ x p) y) 2)))\n(def x (random-normal 1 '[5 3]))\n(def y (random-normal 2 '[5]))\n"
      "(def w (random-normal 3 '[3]))\n(defn step [w] ((grad (fn [p] (loss p x y))) w))\n"
      "(list ((grad loss) w x y) ((grad (fn [p] (loss p x y))) w) (step w) (* (/ 2.0 5) (@ (- (@ x w) y) x)))";
  for (bool with_jit : {true, false}) {
    Outcome r = run_program(text, with_jit);
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.jit, "");
    const auto& v = r.value.as_list().items;
    std::vector<double> want = numbers(v[3]);
    for (size_t i = 0; i < 3; ++i) {
      std::vector<double> got = numbers(v[i]);
      ASSERT_EQ(got.size(), want.size());
      for (size_t j = 0; j < want.size(); ++j) EXPECT_TRUE(close(got[j], want[j], 1e-5, 1e-6)) << "form " << i << " element " << j;
    }
  }
}

// Cotangent zeros in a trace are rank-0 constants broadcast in the graph (autodiff::zeros), never
// host tensors: tracing the gradient of a select over 2^26 elements (256 MB of f32 — attention
// scores of GPT-2 small are 400 MB) leaves the process's peak memory where it was. Materialising
// them made tracing GPT-2 small's training step take 41 s instead of 0.4 s.
TEST(GradCheckExtra, TracingMaterialisesNoZeroCotangents) {
  std::ostringstream out;
  Interp in(out);
  in.run_text("(def mask (> (random-normal 1 [1024]) 0.0))\n"
              "(defn g [s] ((grad (fn [s] (sum (where mask (broadcast s [64 1024 1024]) 0.0)))) s))\n"
              "(def s (random-normal 2 [1024]))\n",
              "zeros.shf");
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  std::vector<Value> args{in.global(symbols::intern("s"))->value};
  trace::Traced t = trace::trace_call(in, in.global(symbols::intern("g"))->value, args, SrcLoc{}, false);
  getrusage(RUSAGE_SELF, &after);
  EXPECT_FALSE(t.graph.nodes.empty());
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "KB of peak memory grew while tracing";
}

// The gradient of a broadcast sums every axis it widened in one reduction: a bias [H 1 Hd] added
// to [B H T Hd] (an einsum's heads) gets its gradient by one pass over the cotangent, summing B
// (a new axis) and T (a size-1 axis widened) together, not one pass for each kind of axis.
TEST(GradCheckExtra, BroadcastGradientSumsItsAxesInOnePass) {
  std::ostringstream out;
  Interp in(out);
  in.run_text("(def x (random-normal 1 [3 2 5 4]))\n"
              "(defn g [b] ((grad (fn [b] (sum (* x (+ x (reshape b 2 1 4)))))) b))\n"
              "(def b (random-normal 2 [8]))\n",
              "unbroadcast.shf");
  std::vector<Value> args{in.global(symbols::intern("b"))->value};
  trace::Traced t = trace::trace_call(in, in.global(symbols::intern("g"))->value, args, SrcLoc{}, false);
  std::vector<std::vector<int64_t>> reduced;  // but the loss's sum
  for (const ir::Node& n : t.graph.nodes)
    if (n.op == ir::Op::Reduce && !t.graph.type(n.out).shape.empty()) reduced.push_back(n.attrs.dims);
  EXPECT_EQ(reduced, (std::vector<std::vector<int64_t>>{{0, 2}})) << ir::print(t.graph);
}

// A subexpression traced twice (a layer norm per attention head) gets one backward pass: the
// reverse sweep value-numbers the forward nodes and sends the duplicate's cotangent to the first
// copy (autodiff/reverse.cpp). The gradient of `twice` records the second forward copy of `ln`
// and nothing else beyond what `once` (the same function, the copy shared by a let) records — as
// many nodes as a second `ln` adds to a trace of the first (its constants are the first's) —; the
// two agree with each other, compiled and JIT-free.
TEST(GradCheckExtra, DuplicatedSubexpressionsShareOneBackwardPass) {
  const std::string defs =
      "(def a (random-normal 1 [4 6]))\n(def b (random-normal 2 [4 6]))\n"
      "(def p0 {:x (random-normal 3 [4 6]) :gamma (random-normal 4 [6]) :beta (random-normal 5 [6])})\n"
      "(defn ln [p] (let [x (get p :x) mu (mean x :axis -1 :keepdims) v (var x :axis -1 :keepdims)]"
      " (+ (* (/ (- x mu) (sqrt (+ v 1e-5))) (get p :gamma)) (get p :beta))))\n"
      "(defn twice [p] (+ (sum (* (ln p) a)) (sum (* (ln p) b))))\n"
      "(defn once [p] (let [y (ln p)] (+ (sum (* y a)) (sum (* y b)))))\n"
      "(defn ln-twice [p] [(ln p) (ln p)])\n"
      "(defn leaves [[l g]] (list l (get g :x) (get g :gamma) (get g :beta)))\n"
      "(defn g-twice [p] (leaves ((value-and-grad twice) p)))\n(defn g-once [p] (leaves ((value-and-grad once) p)))\n";
  std::ostringstream out;
  Interp in(out);
  in.run_text(defs, "duplicates.shf");
  std::vector<Value> args{in.global(symbols::intern("p0"))->value};
  auto nodes = [&](const char* fn) {
    return trace::trace_call(in, in.global(symbols::intern(fn))->value, args, SrcLoc{}, false).graph.nodes.size();
  };
  const size_t forward_copy = nodes("ln-twice") - nodes("ln");
  EXPECT_EQ(nodes("g-twice"), nodes("g-once") + forward_copy);
  for (bool with_jit : {true, false}) {
    Outcome r = run_program(defs + "(list (g-twice p0) (g-once p0))", with_jit);
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.jit, "");
    const auto& v = r.value.as_list().items;
    std::vector<double> twice = numbers(v[0]), once = numbers(v[1]);
    ASSERT_EQ(twice.size(), 1 + 24 + 6 + 6u);
    ASSERT_EQ(twice.size(), once.size());
    for (size_t i = 0; i < once.size(); ++i)
      EXPECT_TRUE(close(twice[i], once[i], 1e-6, 1e-6)) << "element " << i << ": " << twice[i] << " vs " << once[i] << (with_jit ? " (JIT)" : "");
  }
}

// SPEC §5.4: the gradient of max/min flows to every position equal to the result.
TEST(GradCheckExtra, MaxTiesShareTheGradient) {
  for (bool with_jit : {true, false}) {
    Outcome r = run_program("(defn f [x] (+ (max x) (min x)))\n((grad f) (tensor [1.0 3.0 -2.0 3.0 -2.0]))", with_jit);
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(print_value(r.value, false), "[0. 1. 1. 1. 1.]");
  }
}

TEST(GradCheckExtra, NonScalarResultIsAnError) {
  for (bool with_jit : {true, false})
    EXPECT_EQ(run_program("(defn f [x] (* x 2))\n((value-and-grad f) (random-normal 3 '[4]))", with_jit).error,
              "value-and-grad: function must return a scalar, got f32[4]");
}

TEST(GradCheckExtra, DataDependentWhileIsAnError) {
  for (bool with_jit : {true, false})
    EXPECT_EQ(run_program("(defn f [x] (sum (while (< (sum a) 100) [a x] (* a 2))))\n((grad f) (+ 1 (random-uniform 1 '[3])))", with_jit).error,
              "reverse-mode differentiation through 'while' is not supported; use repeat or scan");
}

}  // namespace
}  // namespace sheaf
