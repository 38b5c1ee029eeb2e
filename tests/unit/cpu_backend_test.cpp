// tests/unit/cpu_backend_test.cpp — backend consistency (issue [5]): every case of
// jit_consistency_cases.shf (every tensor builtin) and of cpu_fusion_cases.shf (fused patterns:
// elementwise chains over broadcasts and views, reductions in every position, softmax,
// layer-norm, losses, matmuls with transposed and batched operands, optimizer updates, odd
// sizes) and of cpu_merged_cases.shf (products the CPU backend merges, at sizes only it runs)
// runs twice: compiled for the CPU backend (generated C++, OpenBLAS) and compiled for the
// reference executor. Final values must agree (floats within 20× the tolerance of
// value_compare.hpp: native code sums in another order and contracts multiply-adds), the
// printed output must be equal, and the CPU backend must really have built native code for
// every compiled function (nothing left on the reference executor). Skipped, with a message,
// when no C++ compiler is available.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/toolchain.hpp"
#include "case_file.hpp"
#include "runtime/device_choice.hpp"
#include "runtime/jit.hpp"
#include "value_compare.hpp"

namespace sheaf {
namespace {

using Case = testing_support::CaseSection;
using testing_support::difference;
using testing_support::Outcome;
using testing_support::run_case;

constexpr double kNativeTolerance = 20;

std::vector<Case> cases_of(const char* file) {
  auto dir = testing_support::unit_dir();
  return testing_support::read_case_sections(dir / file);
}

const std::vector<Case>& builtin_cases() {
  static const std::vector<Case> c = cases_of("jit_consistency_cases.shf");
  return c;
}
const std::vector<Case>& fusion_cases() {
  static const std::vector<Case> c = cases_of("cpu_fusion_cases.shf");
  return c;
}
const std::vector<Case>& merged_cases() {
  static const std::vector<Case> c = cases_of("cpu_merged_cases.shf");
  return c;
}

class CpuBackend : public ::testing::TestWithParam<Case> {};

TEST_P(CpuBackend, MatchesReferenceExecutor) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the CPU backend cannot build code here";
  setenv("SHEAF_CPU_STRICT", "1", 1);  // a compile error fails the case instead of falling back
  const Case& c = GetParam();
  std::ostringstream out_cpu, out_ref;
  Interp native{out_cpu}, ref{out_ref};
  auto backend = std::make_unique<cpu::CpuBackend>((std::filesystem::temp_directory_path() / "sheaf-cpu-backend-test" / c.name).string());
  const cpu::CpuStats& s = backend->stats();
  jit_of(native)->backend = std::move(backend);
  choose_device(*jit_of(ref), "ref");
  Outcome want = run_case(ref, c);
  ASSERT_EQ(want.error, "") << "the program fails on the reference executor:\n" << c.text;
  Outcome got = run_case(native, c);
  ASSERT_EQ(got.error, "") << "the program fails on the cpu backend:\n" << c.text;

  EXPECT_GE(s.built + s.loaded, 1u) << "no native code was built";
  EXPECT_EQ(s.ref_runs, 0u) << "some function ran on the reference executor";
  EXPECT_EQ(testing_support::compiled_cleanly(native), "");
  // ";; expect: N attention steps": the programs built have that many Attention and AttentionGrad steps
  if (std::smatch m; std::regex_search(c.body, m, std::regex(R"(\n;; expect: (\d+) attention steps\n)"))) {
    EXPECT_EQ(s.attention_steps, std::stoull(m[1].str())) << "attention steps";
  }
  EXPECT_EQ(difference(got.value, want.value, "", kNativeTolerance), "");
  EXPECT_EQ(out_cpu.str(), out_ref.str());
}

std::string test_name(const ::testing::TestParamInfo<Case>& info) { return testing_support::gtest_name(info.param.name); }

INSTANTIATE_TEST_SUITE_P(Builtins, CpuBackend, ::testing::ValuesIn(builtin_cases()), test_name);
INSTANTIATE_TEST_SUITE_P(Fusion, CpuBackend, ::testing::ValuesIn(fusion_cases()), test_name);
INSTANTIATE_TEST_SUITE_P(Merged, CpuBackend, ::testing::ValuesIn(merged_cases()), test_name);

TEST(CpuBackendTable, FusionCasesLoad) {
  EXPECT_GE(fusion_cases().size(), 20u);
  EXPECT_GE(merged_cases().size(), 1u);
}

}  // namespace
}  // namespace sheaf
