// tests/unit/jit_consistency_test.cpp — every tensor builtin, eager vs compiled (issue [3]).
// Each case of jit_consistency_cases.shf defines `(defn f ...)` around one builtin (or one
// nn/optim function) and calls it on random inputs built at top level (fixed seeds). A case runs
// in two interpreters: the default one, where calling f traces it and runs the recorded IR on the
// reference executor, and one whose JIT is removed (everything interpreted). The final values
// must agree — same kinds, dtypes and shapes; integer and bool data exactly; floats within a tight
// tolerance — and the JIT must really have compiled f: at least one trace, no interpreted call
// (the recorded reasons are shown when it fell back). A coverage test checks that every builtin
// of the tensor families, and every nn/optim function, appears in some case.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "case_file.hpp"
#include "value_compare.hpp"
#include "base/error.hpp"
#include "builtins/registry.hpp"
#include "eval/interp.hpp"
#include "runtime/jit.hpp"
#include "tensor/shape.hpp"
#include "value/printer.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {
namespace {

using Case = testing_support::CaseSection;
using testing_support::difference;
using testing_support::Outcome;
using testing_support::run_case;

std::filesystem::path cases_path() { return testing_support::unit_dir() / "jit_consistency_cases.shf"; }

// Cases: the `;; --- name` sections of the table (case_file.hpp).
const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    return testing_support::read_case_sections(cases_path());
  }();
  return cases;
}

class JitConsistency : public ::testing::TestWithParam<Case> {};

TEST_P(JitConsistency, CompiledMatchesInterpreted) {
  const Case& c = GetParam();
  std::ostringstream out_jit, out_eager;
  Interp compiled{out_jit};
  Interp eager{out_eager};
  eager.jit.reset();
  Outcome want = run_case(eager, c);
  ASSERT_EQ(want.error, "") << "the interpreted program fails:\n" << c.text;
  Outcome got = run_case(compiled, c);
  ASSERT_EQ(got.error, "") << "the compiled program fails:\n" << c.text;

  EXPECT_EQ(testing_support::compiled_cleanly(compiled), "");
  EXPECT_EQ(difference(got.value, want.value, ""), "");
  EXPECT_EQ(out_jit.str(), out_eager.str());
}

std::string test_name(const ::testing::TestParamInfo<Case>& info) { return testing_support::gtest_name(info.param.name); }

INSTANTIATE_TEST_SUITE_P(Builtins, JitConsistency, ::testing::ValuesIn(all_cases()), test_name);

TEST(JitConsistencyTable, CasesLoad) { EXPECT_GE(all_cases().size(), 80u) << "cannot read " << cases_path(); }

// Case names are unique (gtest would silently run only one of two equal names).
TEST(JitConsistencyTable, CaseNamesAreUnique) {
  std::set<std::string> seen;
  for (const Case& c : all_cases()) EXPECT_TRUE(seen.insert(test_name({c, 0})).second) << "duplicate case " << c.name;
}

// The symbols of the case texts (the prelude excluded).
std::set<std::string> used_names() {
  std::set<std::string> names;
  auto delim = [](char ch) { return std::isspace(static_cast<unsigned char>(ch)) || std::string_view("()[]{}'\"`,;").find(ch) != std::string_view::npos; };
  for (const Case& c : all_cases()) {
    const std::string& t = c.body;
    for (size_t i = 0; i < t.size();) {
      if (delim(t[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < t.size() && !delim(t[j])) ++j;
      names.insert(t.substr(i, j - i));
      i = j;
    }
  }
  return names;
}

// Every builtin of the tensor families (SPEC §5.1–5.7, 5.9, 5.10, 5.14), the tensor uses of the
// sequence builtins and every nn/optim function has a row. The exclusions are not tensor builtins.
TEST(JitConsistencyTable, CoversEveryTensorBuiltin) {
  std::vector<std::string> required;
  for (auto family : {math_builtins(), compare_builtins(), activation_builtins(), reduce_builtins(), shape_builtins(),
                      index_builtins(), linalg_builtins(), creation_builtins(), loss_builtins(), tree_builtins(),
                      conv_builtins(), transform_builtins()})
    for (const BuiltinDef& d : family)
      if (std::string_view(d.name).substr(0, 2) != "__") required.emplace_back(d.name);
  for (const char* n : {"map", "reduce", "apply", "first", "second", "last", "rest", "cons", "append", "nth", "count",
                        "len", "empty?", "sort", "range", "arange", "list", "get", "get-in", "dropout"})
    required.emplace_back(n);
  for (const char* n : {"linear", "layer-norm", "rms-norm", "cross-entropy-loss", "mse-loss", "mae-loss", "xavier-uniform",
                        "xavier-normal", "kaiming-uniform", "kaiming-normal", "lecun-uniform", "lecun-normal",
                        "xavier-init", "sgd-step", "sgd-momentum-step", "adam-step", "adamw-step", "global-norm",
                        "clip-by-global-norm", "linear-warmup", "inverse-sqrt-warmup", "exponential-decay",
                        "step-decay", "cosine-decay"})
    required.emplace_back(n);
  std::set<std::string> used = used_names();
  for (const std::string& n : required) EXPECT_TRUE(used.count(n)) << "no case uses " << n;
}

// The comparison itself: a difference in one float, an integer, a dtype or a kind is caught.
TEST(JitConsistencyTable, ComparisonCatchesDifferences) {
  Tensor a = make_tensor(DType::F32, {2}, {1.0, 2.0});
  EXPECT_EQ(difference(Value::tensor(a), Value::tensor(make_tensor(DType::F32, {2}, {1.0, 2.0 + 1e-7})), ""), "");
  EXPECT_NE(difference(Value::tensor(a), Value::tensor(make_tensor(DType::F32, {2}, {1.0, 2.001})), ""), "");
  EXPECT_NE(difference(Value::tensor(a), Value::tensor(make_tensor(DType::I32, {2}, {1.0, 2.0})), ""), "");
  EXPECT_NE(difference(Value::tensor(make_tensor(DType::I32, {1}, {5})), Value::tensor(make_tensor(DType::I32, {1}, {6})), ""), "");
  EXPECT_NE(difference(Value::integer(1), Value::real(1.0f), ""), "");
  EXPECT_NE(difference(Value::list({Value::integer(1)}), Value::list({Value::integer(2)}), ""), "");
}

}  // namespace
}  // namespace sheaf
