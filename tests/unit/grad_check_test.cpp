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
// unless the case says `;; tol RTOL ATOL` (with its reason). Further tests: second derivatives
// (grad (grad f)) against analytic values, zero gradients of integer leaves, the gradient tree of
// a nested dict, closures, ties of `max`, the scalar-result and `while` errors, and coverage of
// every differentiable builtin of SPEC §6.6.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "case_file.hpp"
#include "value_compare.hpp"
#include "base/error.hpp"
#include "eval/interp.hpp"
#include "runtime/jit.hpp"
#include "tensor/shape.hpp"
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

std::filesystem::path cases_path() { return std::filesystem::path(__FILE__).parent_path() / "grad_check_cases.shf"; }

// Cases: the `;; --- name` sections of the table (case_file.hpp).
const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> out;
    for (auto& c : testing_support::read_case_sections(cases_path())) {
      out.push_back({c.name, c.body, c.text});
      std::istringstream lines(c.body);  // `;; tol RTOL ATOL` loosens one case
      for (std::string line; std::getline(lines, line);)
        if (line.rfind(";; tol ", 0) == 0) std::istringstream(line.substr(7)) >> out.back().rtol >> out.back().atol;
    }
    return out;
  }();
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

// v with element `elem` of its float leaf number `target` set to x (`leaf` counts the leaves).
Value with_element(const Value& v, size_t target, int64_t elem, double x, size_t& leaf) {
  if (is_float_leaf(v)) {
    if (leaf++ != target) return v;
    if (v.is(Kind::Float)) return Value::real(static_cast<float>(x));
    const Tensor& t = v.as_tensor();
    std::vector<double> xs(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) xs[static_cast<size_t>(i)] = i == elem ? x : t.get(i);
    return Value::tensor(make_tensor(t.dtype(), t.shape(), xs));
  }
  if (v.is_list()) {
    std::vector<Value> items;
    for (const Value& it : v.as_list().items) items.push_back(with_element(it, target, elem, x, leaf));
    return Value::list(std::move(items), v.as_list().kind);
  }
  if (v.is(Kind::Dict)) {
    std::vector<std::pair<std::string, Value>> entries;
    for (const auto& [k, it] : v.as_dict().entries) entries.emplace_back(k, with_element(it, target, elem, x, leaf));
    return make_dict(std::move(entries));
  }
  return v;
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

Differentiated differentiate(Interp& in, const Case& c) {
  Differentiated d;
  try {
    Value args = in.run_text(c.text, "<" + c.name + ">");
    if (!args.is_list() || args.as_list().items.empty()) return {{}, {}, {}, "the last form must be the list of f's arguments", 0};
    d.args = args.as_list().items;
    d.f = in.global(symbols::intern("f"))->value;
    Value grad = in.run_text("(grad f)", "<grad>");
    uint64_t before = in.jit ? in.jit->stats().traces : 0;
    d.grads = in.call(grad, d.args, SrcLoc{});
    d.traces = in.jit ? in.jit->stats().traces - before : 0;
  } catch (const SheafError& e) {
    d.error = e.what();
  }
  return d;
}

// f at the arguments with element `elem` of float leaf `leaf` of p set to x.
double loss_at(Interp& in, const Differentiated& d, size_t leaf, int64_t elem, double x) {
  std::vector<Value> args = d.args;
  size_t count = 0;
  args[0] = with_element(args[0], leaf, elem, x, count);
  Value v = in.call(d.f, args, SrcLoc{});
  std::optional<double> r = number_of(v);
  if (!r) throw SheafError("f must return a scalar, got " + print_value(v, false));
  return *r;
}

double step(double x) { return std::exp2(std::floor(std::log2(std::max(1.0, std::fabs(x)))) - 4); }

// d f / d p at one element by Richardson-extrapolated central differences (see the header).
// The divisor is the distance between the two f32 points actually evaluated.
double finite_difference(Interp& in, const Differentiated& d, size_t leaf, int64_t elem, double x) {
  auto central = [&](double h) {
    double hi = static_cast<float>(x + h), lo = static_cast<float>(x - h);
    return (loss_at(in, d, leaf, elem, hi) - loss_at(in, d, leaf, elem, lo)) / (hi - lo);
  };
  double h = step(x);
  return (4 * central(h / 2) - central(h)) / 3;
}

bool close(double a, double b, double rtol, double atol) {
  return std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) <= atol + rtol * std::max(std::fabs(a), std::fabs(b));
}

class GradCheck : public ::testing::TestWithParam<Case> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const Case& c = GetParam();
  std::ostringstream out_jit, out_eager;
  Interp compiled{out_jit};
  Interp eager{out_eager};
  eager.jit.reset();
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
      double fd = finite_difference(eager, want, k, e, x);
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

TEST(GradCheckTable, CasesLoad) { EXPECT_GE(all_cases().size(), 60u) << "cannot read " << cases_path(); }

TEST(GradCheckTable, CaseNamesAreUnique) {
  std::set<std::string> seen;
  for (const Case& c : all_cases()) EXPECT_TRUE(seen.insert(test_name({c, 0})).second) << "duplicate case " << c.name;
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
