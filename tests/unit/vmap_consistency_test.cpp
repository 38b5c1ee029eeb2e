// tests/unit/vmap_consistency_test.cpp — vmap's transform against loops over the examples.
// Each case of vmap_consistency_cases.shf ends in (list got want): `got` calls vmap'd functions
// inside a named function of tensor arguments, `want` computes the same with a loop written out.
// A case runs in two interpreters: with the JIT (the named function is compiled, so vmap
// batches inside its trace) and without (vmap traces the call into a graph of its own and runs
// it, or batches inside the trace an eager grad makes). In both, got must equal want — same
// structure, kinds, dtypes and shapes; integer and bool data exactly; floats within a tight
// tolerance — and vmap must have used its transform, never the per-index loop, with a
// vectorised rule for every node unless the case says `;; expect: unrolled` (then some node
// must have been unrolled). A coverage test checks that
// the cases batch every IR op that has operands; another, that an effectful function still
// works through the loop.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "case_file.hpp"
#include "base/error.hpp"
#include "batching/vmap.hpp"
#include "eval/interp.hpp"
#include "eval/pytree.hpp"
#include "runtime/jit.hpp"
#include "tensor/shape.hpp"
#include "value/printer.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {
namespace {

struct Case {
  std::string name;
  std::string text;  // prelude + the section
  bool unrolled = false;  // the section says `;; expect: unrolled`
};

std::filesystem::path cases_path() { return testing_support::unit_dir() / "vmap_consistency_cases.shf"; }

// `;; --- name` sections; the one named `prelude` is prepended to every other one.
const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> out;
    for (auto& c : testing_support::read_case_sections(cases_path()))
      out.push_back({c.name, c.text, testing_support::has_line(c.body, ";; expect: unrolled")});
    return out;
  }();
  return cases;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

bool close(double x, double y, DType d) {
  if (!is_float(d) || std::isinf(x) || std::isinf(y)) return x == y;
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return std::fabs(x - y) <= 1e-6 + 1e-5 * std::fabs(y);
}

// "" when `got` matches `want`, else the first difference.
std::string difference(const Value& got, const Value& want) {
  if (!equal(tree_def(got), tree_def(want))) return "structures differ: " + print_value(got, false) + " vs " + print_value(want, false);
  std::vector<Value> g, w;
  tree_leaves(got, g);
  tree_leaves(want, w);
  for (size_t i = 0; i < w.size(); ++i) {
    std::string at = fmt::format("leaf {}: {} vs {}: ", i, describe_node(g[i]), describe_node(w[i]));
    if (g[i].kind() != w[i].kind()) return at + "kinds differ";
    if (!w[i].is(Kind::Tensor)) {
      if (!equal(g[i], w[i])) return at + print_value(g[i], false) + " vs " + print_value(w[i], false);
      continue;
    }
    const Tensor &a = g[i].as_tensor(), &b = w[i].as_tensor();
    if (a.dtype() != b.dtype() || a.shape() != b.shape()) return at + type_str(a) + " vs " + type_str(b);
    for (int64_t k = 0; k < b.numel(); ++k)
      if (!close(a.get(k), b.get(k), b.dtype())) return at + fmt::format("element {}: {} vs {}", k, a.get(k), b.get(k));
  }
  return "";
}

struct Outcome {
  std::string error;  // the SheafError, if any
  std::string diff;   // got vs want
  batching::VmapStats stats;  // during the run
  std::string output;
  std::vector<std::string> jit_fallbacks;
};

Outcome run(const std::string& text, const std::string& name, bool jit) {
  std::ostringstream out;
  Interp in{out};
  if (!jit) in.jit.reset();
  Outcome r;
  const batching::VmapStats before = batching::vmap_stats();
  try {
    Value v = in.run_text(text, "<" + name + ">");
    if (!v.is_list() || v.as_list().items.size() != 2) r.error = "the case does not end in (list got want)";
    else r.diff = difference(v.as_list().items[0], v.as_list().items[1]);
  } catch (const SheafError& e) {
    r.error = e.what();
  }
  const batching::VmapStats& after = batching::vmap_stats();
  r.stats.traced = after.traced - before.traced;
  r.stats.eager = after.eager - before.eager;
  r.stats.loops = after.loops - before.loops;
  r.stats.unrolled = after.unrolled - before.unrolled;
  for (const auto& [op, count] : after.by_op) {
    auto it = before.by_op.find(op);
    if (uint64_t d = count - (it == before.by_op.end() ? 0 : it->second)) r.stats.by_op[op] = d;
  }
  r.output = out.str();
  if (in.jit) r.jit_fallbacks = jit_of(in)->stats().fallback_reasons;
  return r;
}

class VmapConsistency : public ::testing::TestWithParam<Case> {};

TEST_P(VmapConsistency, TransformMatchesLoop) {
  const Case& c = GetParam();
  for (bool jit : {true, false}) {
    SCOPED_TRACE(jit ? "compiled (vmap inside the trace of `got`)" : "interpreted (vmap traces its own call)");
    Outcome r = run(c.text, c.name, jit);
    ASSERT_EQ(r.error, "") << c.text;
    EXPECT_EQ(r.diff, "");
    EXPECT_EQ(r.stats.loops, 0u) << "vmap fell back to the per-index loop";
    if (jit) {
      EXPECT_GE(r.stats.traced, 1u);
      EXPECT_EQ(r.stats.eager, 0u) << "a vmap ran outside compiled code";
      std::string reasons;
      for (const std::string& s : r.jit_fallbacks) reasons += "\n  " + s;
      EXPECT_TRUE(r.jit_fallbacks.empty()) << "interpreted:" << reasons;
    } else {
      EXPECT_GE(r.stats.eager + r.stats.traced, 1u);  // traced: inside the eager trace of grad
    }
    if (c.unrolled) EXPECT_GE(r.stats.unrolled, 1u) << "expected a node batched by unrolling";
    else EXPECT_EQ(r.stats.unrolled, 0u) << "a node was not vectorised";
  }
}

std::string test_name(const ::testing::TestParamInfo<Case>& info) { return testing_support::gtest_name(info.param.name); }

INSTANTIATE_TEST_SUITE_P(Cases, VmapConsistency, ::testing::ValuesIn(all_cases()), test_name);

TEST(VmapConsistencyTable, CasesLoad) { EXPECT_GE(all_cases().size(), 25u) << "cannot read " << cases_path(); }

// Every IR op with operands has its batching rule exercised by some case (from Case to Call:
// control flow and collectives, batched per example or elementwise; the composites after them are).
TEST(VmapConsistencyTable, CoversEveryOp) {
  std::set<ir::Op> batched;
  for (const Case& c : all_cases())
    for (const auto& [op, count] : run(c.text, c.name, true).stats.by_op) batched.insert(op);
  std::vector<ir::Op> ops{ir::Op::Softmax, ir::Op::SoftmaxGrad, ir::Op::Gelu, ir::Op::GeluGrad};
  for (ir::Op op = ir::Op::Unary; op < ir::Op::Case; op = static_cast<ir::Op>(static_cast<int>(op) + 1)) ops.push_back(op);
  for (ir::Op op : ops) EXPECT_TRUE(batched.count(op)) << "no case batches " << ir::op_name(op);
}

// A function with an effect cannot be traced: vmap calls it once per example, in order, with and
// without the JIT (where the compiled caller falls back to the interpreter).
TEST(VmapFallback, EffectfulFunctionLoops) {
  const std::string text = R"(
(defn f [x] (print (sum x)) (* 2 x))
(defn g [xs] ((vmap f) xs))
(list (g [[1 2] [3 4] [5 6]]) [[2 4] [6 8] [10 12]]))";
  for (bool jit : {true, false}) {
    Outcome r = run(text, "effects", jit);
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.diff, "");
    EXPECT_GE(r.stats.loops, 1u);
    EXPECT_EQ(r.output, "3.0\n7.0\n11.0\n");
  }
}

// The comparison catches a different element, dtype or structure.
TEST(VmapConsistencyTable, ComparisonCatchesDifferences) {
  Value a = Value::tensor(make_tensor(DType::F32, {2}, {1.0, 2.0}));
  EXPECT_EQ(difference(a, Value::tensor(make_tensor(DType::F32, {2}, {1.0, 2.0 + 1e-7}))), "");
  EXPECT_NE(difference(a, Value::tensor(make_tensor(DType::F32, {2}, {1.0, 2.001}))), "");
  EXPECT_NE(difference(a, Value::tensor(make_tensor(DType::I32, {2}, {1.0, 2.0}))), "");
  EXPECT_NE(difference(Value::list({a}), Value::list({a, a})), "");
}

}  // namespace
}  // namespace sheaf
