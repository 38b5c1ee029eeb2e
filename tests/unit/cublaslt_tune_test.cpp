// tests/unit/cublaslt_tune_test.cpp — how LtGemm (cublaslt.hpp) chooses a product's cuBLASLt
// algorithm (lt_tuning.hpp), on a fake cuBLASLt: a table of functions whose heuristic proposes
// numbered candidates (algo word 0 = 100 + i) and whose cublasLtMatmul records the candidate run,
// and a fake stream timer that runs what it is given and charges each candidate its time.
// Checked: the fastest candidate is chosen and runs the product; one candidate, no timer, a timer
// that cannot time, SHEAF_CUBLASLT_TUNE=0 take the heuristic's first without timing; a candidate
// cuBLASLt refuses to run is passed over; the choice is kept in the choices file, which a new
// LtGemm uses without timing; a kept choice that is not among the candidates, a file of another
// GPU, and damaged, truncated or unsigned files are never used (timed again, the file rewritten).
// A product with a bias row, or summing an operand's rows, sets cuBLASLt's epilogue and the row's
// address.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "backend/cuda/cublaslt.hpp"
#include "backend/cuda/lt_tuning.hpp"
#include "io/artifact_trust.hpp"
#include "temp_dir.hpp"

namespace sheaf::cuda {
namespace {

// The fake library's state.
struct Fake {
  int candidates = 4;         // results the heuristic returns (at most those requested)
  int failed_state = -1;      // a result whose state is not success (not a candidate)
  uint64_t refused = 0;       // cublasLtMatmul fails for this algorithm (0: none)
  int requested = 0;          // requestedAlgoCount of the last heuristic call
  std::vector<uint64_t> ran;  // word 0 of every algorithm cublasLtMatmul ran
  int heuristics = 0;         // heuristic calls
  std::map<int, uint64_t> desc;  // the descriptor's attributes (one descriptor at a time), 8 bytes at most
  std::map<int, uint64_t> desc_at_heuristic, desc_at_run;  // as the last heuristic call and run saw them
};
Fake fake;

template <typename T>
T dummy() {
  return reinterpret_cast<T>(&fake);  // opaque handles, never dereferenced
}
cublasStatus_t create(cublasLtHandle_t* h) {
  *h = dummy<cublasLtHandle_t>();
  return 0;
}
cublasStatus_t destroy(cublasLtHandle_t) { return 0; }
size_t version() { return 120304; }
cublasStatus_t desc_create(cublasLtMatmulDesc_t* d, int, int) {
  *d = dummy<cublasLtMatmulDesc_t>();
  fake.desc.clear();
  return 0;
}
cublasStatus_t desc_destroy(cublasLtMatmulDesc_t) { return 0; }
cublasStatus_t desc_set(cublasLtMatmulDesc_t, int attr, const void* value, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, value, std::min(size, sizeof v));
  fake.desc[attr] = v;
  return 0;
}
cublasStatus_t layout_create(cublasLtMatrixLayout_t* l, int, uint64_t, uint64_t, int64_t) {
  *l = dummy<cublasLtMatrixLayout_t>();
  return 0;
}
cublasStatus_t layout_destroy(cublasLtMatrixLayout_t) { return 0; }
cublasStatus_t layout_set(cublasLtMatrixLayout_t, int, const void*, size_t) { return 0; }
cublasStatus_t pref_create(cublasLtMatmulPreference_t* p) {
  *p = dummy<cublasLtMatmulPreference_t>();
  return 0;
}
cublasStatus_t pref_destroy(cublasLtMatmulPreference_t) { return 0; }
cublasStatus_t pref_set(cublasLtMatmulPreference_t, int, const void*, size_t) { return 0; }
cublasStatus_t heuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                         cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int requested,
                         LtHeuristicResult* results, int* returned) {
  fake.requested = requested;
  ++fake.heuristics;
  fake.desc_at_heuristic = fake.desc;
  *returned = std::min(requested, fake.candidates);
  for (int i = 0; i < *returned; ++i) {
    results[i] = LtHeuristicResult{};
    results[i].algo.data[0] = 100 + i;
    results[i].algo.data[7] = 0xfeedface00000000ull + i;
    results[i].state = i == fake.failed_state ? kStatusNotSupported : 0;
  }
  return 0;
}
cublasStatus_t matmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
                      const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*,
                      cublasLtMatrixLayout_t, const LtMatmulAlgo* algo, void*, size_t, CUstream) {
  if (algo->data[0] == fake.refused) return kStatusNotSupported;
  fake.ran.push_back(algo->data[0]);
  fake.desc_at_run = fake.desc;
  return 0;
}

const CublasLt kFakeLt = {create,        destroy,        version,     desc_create, desc_destroy,
                          desc_set,      layout_create,  layout_destroy, layout_set, pref_create,
                          pref_destroy,  pref_set,       heuristic,   matmul};

// Milliseconds of one run of each candidate: 101 is the fastest, 100 (the heuristic's first) slow.
const std::map<uint64_t, double> kMs = {{100, 2.0}, {101, 0.5}, {102, 1.0}, {103, 3.0}};

// A timer that runs `enqueue` and charges the candidates it ran; counts its calls.
struct FakeTimer {
  int calls = 0;
  bool can_time = true;
  StreamTimer timer() {
    return [this](const std::function<void()>& enqueue) -> std::optional<double> {
      ++calls;
      if (!can_time) return std::nullopt;
      const size_t before = fake.ran.size();
      enqueue();
      double ms = 0;
      for (size_t i = before; i < fake.ran.size(); ++i) ms += kMs.at(fake.ran[i]);
      return ms;
    };
  }
};

Gemm bf16_gemm() {  // c (64×48) = a (64×32) · b (32×48), row-major
  Gemm g;
  g.dtype = DType::BF16;
  g.m = 64, g.n = 48, g.k = 32;
  g.a_rs = 32, g.a_cs = 1, g.b_rs = 48, g.b_cs = 1;
  return g;
}

bool run(LtGemm& lt) { return lt.matmul(bf16_gemm(), 0x10000, 0x20000, 0x30000, 0, 0, nullptr, 0x40000, 1 << 20); }

void expect_tuning(const LtGemm& lt, int64_t shapes, int64_t timed, int64_t cached) {
  const ProductTuning t = lt.tuning();
  EXPECT_EQ(t.shapes, shapes);
  EXPECT_EQ(t.timed, timed);
  EXPECT_EQ(t.cached, cached);
}

constexpr const char* kGpu = "Fake GPU (sm_90)";

class LtTune : public ::testing::Test {
 protected:
  void SetUp() override {
    fake = Fake{};
    ::unsetenv("SHEAF_CUBLASLT_TUNE");
  }
  void TearDown() override { ::unsetenv("SHEAF_CUBLASLT_TUNE"); }
  std::string file() const { return (dir.path / lt_choices_name(kGpu, version())).string(); }
  // An LtGemm keeping its choices in `dir`, tuning with `t`; the file's candidate chosen, timed or not.
  uint64_t choice_of_a_fresh_gemm(FakeTimer& t) {
    fake.ran.clear();
    LtGemm lt(kFakeLt, t.timer());
    lt.set_cache(dir.path.string(), kGpu);
    EXPECT_TRUE(run(lt));
    return fake.ran.back();
  }
  testing_support::TempDir dir{"sheaf-lt-tune"};
};

TEST_F(LtTune, TheFastestCandidateRunsTheProduct) {
  FakeTimer t;
  LtGemm lt(kFakeLt, t.timer());
  ASSERT_TRUE(run(lt));
  EXPECT_EQ(fake.requested, kLtCandidates);
  // Each candidate: a warm-up and kLtTimedRuns timed runs, each alone; then the product itself.
  EXPECT_EQ(t.calls, 4 * (1 + kLtTimedRuns));
  ASSERT_EQ(fake.ran.size(), size_t{4 * (1 + kLtTimedRuns) + 1});
  EXPECT_EQ(fake.ran.back(), 101u);
  expect_tuning(lt, 1, 1, 0);
  // Later runs of the shape use the choice, untimed.
  fake.ran.clear();
  ASSERT_TRUE(run(lt));
  EXPECT_EQ(fake.ran, std::vector<uint64_t>{101});
  EXPECT_EQ(t.calls, 4 * (1 + kLtTimedRuns));
  expect_tuning(lt, 1, 1, 0);
}

// A product with an epilogue row — a bias (GemmEpilogue::Bias: CUBLASLT_EPILOGUE_BIAS), or sums of
// an operand over k (SumB: cuBLASLt's A is our b, BGRADA; SumA: its B is our a, BGRADB) — sets the
// epilogue and the row's address before the heuristic (which reads the address's alignment), and
// each run uses the row it is given; a product of the same shape without one is another product.
TEST_F(LtTune, EpiloguesTakeTheirRow) {
  for (auto [epilogue, lt_value] : {std::pair{GemmEpilogue::Bias, kEpilogueBias}, std::pair{GemmEpilogue::SumB, kEpilogueBgradA},
                                    std::pair{GemmEpilogue::SumA, kEpilogueBgradB}}) {
    fake = Fake{};
    LtGemm lt(kFakeLt);
    Gemm g = bf16_gemm();
    g.epilogue = epilogue;
    auto run_with_row = [&](DevicePtr row) { return lt.matmul(g, 0x10000, 0x20000, 0x30000, row, 0, nullptr, 0x40000, 1 << 20); };
    ASSERT_TRUE(run_with_row(0x50000));
    EXPECT_EQ(fake.desc_at_heuristic[kDescEpilogue], static_cast<uint64_t>(lt_value));
    EXPECT_EQ(fake.desc_at_heuristic[kDescBiasPointer], 0x50000u);
    EXPECT_EQ(fake.desc_at_run[kDescBiasPointer], 0x50000u);
    ASSERT_TRUE(run_with_row(0x60000));
    EXPECT_EQ(fake.heuristics, 1);  // the same shape and alignments: prepared once
    EXPECT_EQ(fake.desc_at_run[kDescBiasPointer], 0x60000u);
    ASSERT_TRUE(run(lt));
    EXPECT_EQ(fake.heuristics, 2);
    EXPECT_EQ(fake.desc_at_heuristic.count(kDescEpilogue), 0u);
    EXPECT_EQ(fake.desc_at_run.count(kDescBiasPointer), 0u);
  }
}

// A GELU epilogue (GemmAct): GELU_BIAS without an aux, GELU_AUX_BIAS and GELU_AUX with one (its
// pointer and leading dim, our n, set before the heuristic, the pointer again before each run),
// DGELU for the gradient (its aux read); each is a product of its own.
TEST_F(LtTune, GeluEpiloguesTakeTheirAux) {
  struct Case {
    GemmEpilogue epilogue;
    GemmAct act;
    bool aux;
    int32_t lt_value;
  };
  for (const Case& c : {Case{GemmEpilogue::Bias, GemmAct::Gelu, false, 36}, Case{GemmEpilogue::Bias, GemmAct::Gelu, true, 164},
                        Case{GemmEpilogue::None, GemmAct::Gelu, true, 160}, Case{GemmEpilogue::None, GemmAct::GeluGrad, true, 192}}) {
    fake = Fake{};
    LtGemm lt(kFakeLt);
    Gemm g = bf16_gemm();
    g.epilogue = c.epilogue, g.act = c.act;
    auto run_with = [&](DevicePtr aux) { return lt.matmul(g, 0x10000, 0x20000, 0x30000, 0x50000, c.aux ? aux : 0, nullptr, 0x40000, 1 << 20); };
    ASSERT_TRUE(run_with(0x70000));
    EXPECT_EQ(fake.desc_at_heuristic[kDescEpilogue], static_cast<uint64_t>(c.lt_value)) << c.lt_value;
    EXPECT_EQ(lt_epilogue(g, c.aux), c.lt_value);
    if (!c.aux) {
      EXPECT_EQ(fake.desc_at_heuristic.count(kDescAuxPointer), 0u);
      continue;
    }
    EXPECT_EQ(fake.desc_at_heuristic[kDescAuxPointer], 0x70000u);
    EXPECT_EQ(fake.desc_at_heuristic[kDescAuxLd], 48u);
    EXPECT_EQ(fake.desc_at_run[kDescAuxPointer], 0x70000u);
    ASSERT_TRUE(run_with(0x80000));
    EXPECT_EQ(fake.heuristics, 1);  // the same shape and alignments: prepared once
    EXPECT_EQ(fake.desc_at_run[kDescAuxPointer], 0x80000u);
  }
}

TEST_F(LtTune, ACandidateCublasRefusesIsPassedOver) {
  fake.refused = 101;
  FakeTimer t;
  LtGemm lt(kFakeLt, t.timer());
  ASSERT_TRUE(run(lt));
  EXPECT_EQ(fake.ran.back(), 102u);  // the fastest of those that run
  EXPECT_EQ(std::count(fake.ran.begin(), fake.ran.end(), 101u), 0);
}

TEST_F(LtTune, OneUsableCandidateIsNotTimed) {
  fake.candidates = 2;
  fake.failed_state = 0;  // the heuristic's first result failed: 101 is the only candidate
  FakeTimer t;
  LtGemm lt(kFakeLt, t.timer());
  ASSERT_TRUE(run(lt));
  EXPECT_EQ(fake.requested, kLtCandidates);
  EXPECT_EQ(t.calls, 0);
  EXPECT_EQ(fake.ran, std::vector<uint64_t>{101});
  expect_tuning(lt, 1, 0, 0);
}

TEST_F(LtTune, NoCandidateLeavesTheProductToTheFallback) {
  fake.candidates = 0;
  FakeTimer t;
  LtGemm lt(kFakeLt, t.timer());
  EXPECT_FALSE(run(lt));
  EXPECT_EQ(fake.requested, kLtCandidates);
  EXPECT_TRUE(fake.ran.empty());
  expect_tuning(lt, 0, 0, 0);
}

TEST_F(LtTune, WithoutTimingTheHeuristicsFirstRuns) {
  FakeTimer t;
  t.can_time = false;  // the stream is captured, or events keep no time
  LtGemm lt(kFakeLt, t.timer());
  ASSERT_TRUE(run(lt));
  EXPECT_EQ(fake.requested, kLtCandidates);
  EXPECT_EQ(t.calls, 1);  // asked once, nothing queued
  EXPECT_EQ(fake.ran, std::vector<uint64_t>{100});
  expect_tuning(lt, 1, 0, 0);

  fake.ran.clear();
  LtGemm untimed(kFakeLt);  // no timer at all
  ASSERT_TRUE(run(untimed));
  EXPECT_EQ(fake.ran, std::vector<uint64_t>{100});
}

TEST_F(LtTune, TuneZeroTurnsTimingAndTheFileOff) {
  FakeTimer first;
  EXPECT_EQ(choice_of_a_fresh_gemm(first), 101u);  // the file now chooses 101
  ::setenv("SHEAF_CUBLASLT_TUNE", "0", 1);
  EXPECT_FALSE(lt_tuning_enabled());
  FakeTimer t;
  EXPECT_EQ(choice_of_a_fresh_gemm(t), 100u);
  EXPECT_EQ(t.calls, 0);
  EXPECT_EQ(fake.ran, std::vector<uint64_t>{100});
  ::setenv("SHEAF_CUBLASLT_TUNE", "1", 1);
  EXPECT_TRUE(lt_tuning_enabled());
}

TEST_F(LtTune, TheChoiceIsKeptAndUsedWithoutTiming) {
  FakeTimer first;
  EXPECT_EQ(choice_of_a_fresh_gemm(first), 101u);
  EXPECT_GT(first.calls, 0);
  std::string why;
  std::optional<LtChoices> kept = read_lt_choices(file(), &why);
  ASSERT_TRUE(kept) << why;
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ(kept->begin()->second.data[0], 101u);
  EXPECT_EQ(kept->begin()->second.data[7], 0xfeedface00000001ull);

  FakeTimer again;
  LtGemm lt(kFakeLt, again.timer());
  lt.set_cache(dir.path.string(), kGpu);
  lt.set_cache((dir.path / "elsewhere").string(), kGpu);  // the first folder stays
  fake.ran.clear();
  ASSERT_TRUE(run(lt));
  EXPECT_EQ(again.calls, 0);
  EXPECT_EQ(fake.ran, std::vector<uint64_t>{101});
  expect_tuning(lt, 1, 0, 1);

  // Another GPU (or cuBLASLt) has a file of its own: timed there.
  FakeTimer other;
  LtGemm elsewhere(kFakeLt, other.timer());
  elsewhere.set_cache(dir.path.string(), "Other GPU (sm_80)");
  ASSERT_TRUE(run(elsewhere));
  EXPECT_GT(other.calls, 0);
  EXPECT_TRUE(std::filesystem::exists(dir.path / lt_choices_name("Other GPU (sm_80)", version())));
}

TEST_F(LtTune, AKeptAlgorithmThatIsNoCandidateIsNeverRun) {
  FakeTimer first;
  choice_of_a_fresh_gemm(first);
  std::optional<LtChoices> kept = read_lt_choices(file());
  ASSERT_TRUE(kept);
  for (auto& [key, algo] : *kept) algo.data[0] = 999;  // signed by us, but not cuBLASLt's proposal
  ASSERT_TRUE(write_lt_choices(file(), *kept));

  FakeTimer t;
  EXPECT_EQ(choice_of_a_fresh_gemm(t), 101u);
  EXPECT_GT(t.calls, 0);  // timed again
  EXPECT_EQ(std::count(fake.ran.begin(), fake.ran.end(), 999u), 0);
  kept = read_lt_choices(file());
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->begin()->second.data[0], 101u);  // and the file corrected
}

TEST_F(LtTune, DamagedFilesAreIgnoredWithANotice) {
  FakeTimer first;
  choice_of_a_fresh_gemm(first);
  std::ifstream in(file(), std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string body = good.substr(good.find('\n', good.find('\n') + 1) + 1);
  ASSERT_TRUE(read_lt_choices(file()));
  const std::string damaged[] = {
      "\x7f" "ELF garbage\n\x01\x02",                                                 // not a choices file
      good.substr(0, good.size() / 2),                                                // truncated
      good.substr(0, 30),                                                             // cut in the MAC line
      pack_lt_choices(body, std::string(64, '0')),                                    // not signed by us
      pack_lt_choices("7 = 00\n", trust::sign("7 = 00\n")),                           // signed, malformed
      pack_lt_choices(body.substr(0, body.size() - 1), trust::sign(body.substr(0, body.size() - 1))),  // no last \n
  };
  for (const std::string& bytes : damaged) {
    std::ofstream(file(), std::ios::binary | std::ios::trunc) << bytes;
    std::string why;
    EXPECT_FALSE(read_lt_choices(file(), &why));
    EXPECT_FALSE(why.empty());
    FakeTimer t;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(choice_of_a_fresh_gemm(t), 101u);
    const std::string notice = ::testing::internal::GetCapturedStderr();
    EXPECT_GT(t.calls, 0);
    EXPECT_NE(notice.find("sheaf: ignoring the cuBLASLt algorithm cache " + file() + " (" + why + ")"),
              std::string::npos)
        << notice;
    EXPECT_TRUE(read_lt_choices(file())) << "rewritten";
  }
}

// ---------------------------------------------------------------- the pure parts

TEST(LtTuning, FastestIsTheLeastTime) {
  EXPECT_EQ(fastest({2.0, 0.5, std::nullopt, 0.5, 1.0}), 1u);
  EXPECT_EQ(fastest({std::nullopt, 3.0}), 1u);
  EXPECT_EQ(fastest({std::nullopt, std::nullopt}), std::nullopt);
  EXPECT_EQ(fastest({}), std::nullopt);
  EXPECT_EQ(fastest({std::numeric_limits<double>::quiet_NaN(), 4.0}), 1u);
}

TEST(LtTuning, TimesEachCandidateByItsFastestRun) {
  // Candidate i's runs take times[i][run] (the warm-up first); candidate 1 is refused.
  const std::vector<std::vector<double>> times = {{9, 3, 3, 3}, {0, 0, 0, 0}, {9, 4, 1, 5}};
  std::vector<int> runs(3, 0);
  double charged = 0;
  auto run = [&](size_t i) {
    if (i == 1) return false;
    charged = times[i][runs[i]++];
    return true;
  };
  StreamTimer timer = [&](const std::function<void()>& enqueue) -> std::optional<double> {
    enqueue();
    return charged;
  };
  EXPECT_EQ(time_candidates(3, run, timer), 2u);  // 1 ms beats 3
  EXPECT_EQ(runs, (std::vector<int>{1 + kLtTimedRuns, 0, 1 + kLtTimedRuns}));
  EXPECT_EQ(time_candidates(2, [](size_t) { return false; }, timer), std::nullopt);  // none runs
  EXPECT_EQ(time_candidates(3, run, StreamTimer{}), std::nullopt);
  // A timer that stops timing part way: no choice.
  int calls = 0;
  StreamTimer flaky = [&](const std::function<void()>& enqueue) -> std::optional<double> {
    if (++calls > 3) return std::nullopt;
    enqueue();
    return 1.0;
  };
  runs.assign(3, 0);
  EXPECT_EQ(time_candidates(3, run, flaky), std::nullopt);
}

TEST(LtTuning, UsableCandidatesAreTheSuccessfulResultsReturned) {
  std::vector<LtHeuristicResult> r(4);
  for (int i = 0; i < 4; ++i) r[i].algo.data[0] = 10 + i;
  r[1].state = kStatusNotSupported;
  std::vector<LtMatmulAlgo> c = usable_candidates(r, 3);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].data[0], 10u);
  EXPECT_EQ(c[1].data[0], 12u);
  EXPECT_EQ(usable_candidates(r, 99).size(), 3u);  // never past the results
  EXPECT_TRUE(usable_candidates(r, -1).empty());
  EXPECT_TRUE(same_algo(c[0], r[0].algo));
  EXPECT_FALSE(same_algo(c[0], c[1]));
}

TEST(LtTuning, ChoicesRoundTripAndBadLinesSayWhere) {
  LtChoices choices;
  LtMatmulAlgo algo{};
  for (int w = 0; w < 8; ++w) algo.data[w] = 0x0123456789abcdefull + w;
  choices[{14, 0, 8192, 2304, 768, -1}] = algo;
  algo.data[0] = 0;
  choices[{0, 1}] = algo;
  const std::string body = format_lt_choices(choices);
  EXPECT_NE(body.find("14 0 8192 2304 768 -1 = 0123456789abcdef 0123456789abcdf0 "), std::string::npos) << body;
  std::string why;
  std::optional<LtChoices> back = parse_lt_choices(body, &why);
  ASSERT_TRUE(back) << why;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_TRUE(same_algo(back->at({14, 0, 8192, 2304, 768, -1}), choices.at({14, 0, 8192, 2304, 768, -1})));
  EXPECT_TRUE(same_algo(back->at({0, 1}), algo));
  EXPECT_TRUE(parse_lt_choices("", &why)->empty());

  const std::string word = " 0000000000000001";
  std::string eight;
  for (int w = 0; w < 8; ++w) eight += word;
  const std::pair<std::string, std::string> bad[] = {
      {"1 2" + eight + "\n", "line 3: expected key integers, '=' and the algorithm"},
      {"= " + eight + "\n", "line 3: expected key integers"},
      {"1 =" + eight + word + "\n", "line 3: expected 8 algorithm words after '=', not 9"},
      {"1 =" + eight + "\n1 x =" + eight + "\n", "line 4: 'x' is not an integer"},
      {"1 +2 =" + eight + "\n", "'+2' is not an integer"},
      {"1  2 =" + eight + "\n", "'' is not an integer"},
      {"1 =" + eight.substr(0, eight.size() - 1) + "g\n", "'000000000000000g' is not 16 hex digits"},
      {"1 = 1" + eight.substr(17) + "\n", "'1' is not 16 hex digits"},
      {"1 =" + eight, "line 3: the last line is cut short"},
  };
  for (const auto& [text, expected] : bad) {
    EXPECT_FALSE(parse_lt_choices(text, &why)) << text;
    EXPECT_NE(why.find(expected), std::string::npos) << text << " → " << why;
  }
}

TEST(LtTuning, TheFileIsNamedByGpuAndVersion) {
  const std::string name = lt_choices_name("NVIDIA H100 80GB HBM3 (sm_90)", 130000);
  EXPECT_TRUE(name.starts_with("cublaslt-") && name.ends_with(".algos") && name.size() == 31) << name;
  EXPECT_EQ(name, lt_choices_name("NVIDIA H100 80GB HBM3 (sm_90)", 130000));
  EXPECT_NE(name, lt_choices_name("NVIDIA H100 80GB HBM3 (sm_90)", 130001));
  EXPECT_NE(name, lt_choices_name("NVIDIA H200 (sm_90)", 130000));
  EXPECT_EQ(pack_lt_choices("1 = x\n", "m").rfind(std::string(kLtChoicesMagic) + "\nmac m\n1 = x\n", 0), 0u);
}

TEST(LtTuning, TheReportSaysHowChoicesWereMade) {
  EXPECT_EQ(describe_product_tuning({8, 6, 2}), "products: 8 shapes, 6 timed, 2 from the cache");
  EXPECT_EQ(describe_product_tuning({}), "");
}

}  // namespace
}  // namespace sheaf::cuda
