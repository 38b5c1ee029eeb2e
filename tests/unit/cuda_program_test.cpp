// tests/unit/cuda_program_test.cpp — the CUDA backend end to end (issue [8]): compiled functions run
// by cuda::Program through the JIT, on the emulated GPU (cuda_emulator.hpp; every path but the
// driver calls) and, where one is present, on the real GPU (cuda::gpu()).
//   Consistency  every case of jit_consistency_cases.shf (every tensor builtin) and
//                cpu_fusion_cases.shf runs compiled for the GPU and on the reference executor:
//                values within the CPU backend's tolerance, equal printed output, every compiled
//                function built for the GPU.
//   Examples     examples/xor/train.shf and a short run of examples/mlp/train.shf print the same
//                losses and accuracies on the GPU as on the CPU backend (within 1e-3 relative).
//   Residency    a training loop: parameters stay on the GPU between steps (uploaded once), the
//                same data tensor is uploaded once per argument position, nothing is downloaded
//                until a value is printed, repeated steps are captured and replayed, a device
//                tensor read twice downloads once, and the caching allocator reaches a steady
//                state (no device allocation after the first steps).
// The emulated runs skip, with a message, where no C++ compiler is found; the GPU runs where no
// GPU is.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/toolchain.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cudnn_sdpa.hpp"
#include "case_file.hpp"
#include "cuda_emulator.hpp"
#include "runtime/device_choice.hpp"
#include "runtime/jit.hpp"
#include "value_compare.hpp"

namespace sheaf {
namespace {

using Case = testing_support::CaseSection;
using testing_support::difference;
using testing_support::Outcome;
using testing_support::run_case;

constexpr double kNativeTolerance = 20;  // as cpu_backend_test.cpp


std::vector<Case> cases_of(const char* file) { return testing_support::read_case_sections(testing_support::unit_dir() / file); }

// The GPU a test runs on: "emulated", "emulated_sdpa" (attention by the emulated library:
// cuda_emulator_sdpa.cpp) or "gpu"; null with the reason to skip.
std::shared_ptr<cuda::Device> device_named(const std::string& name, std::string& why) {
  if (name == "gpu") return cuda::gpu(&why);
  if (!cpu::toolchain()) {
    why = "no C++ compiler: the kernels cannot be emulated here";
    return nullptr;
  }
  std::shared_ptr<testing_support::EmulatedDevice> d = testing_support::emulated_device();
  d->library_attention = name == "emulated_sdpa";
  return d;
}

// Whether cuDNN's frontend can check problems here: SHEAF_CUDNN_LIB set to this build's
// libsheaf_cudnn.so (unless set already), which loads with libcudnn.
bool use_cudnn_plugin_of_this_build(std::string* why = nullptr) {
  const std::filesystem::path plugin = std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / "libsheaf_cudnn.so";
  if (!std::getenv("SHEAF_CUDNN_LIB") && std::filesystem::exists(plugin)) setenv("SHEAF_CUDNN_LIB", plugin.c_str(), 1);
  return cuda::CudnnSdpa::available(why);
}

// The attention launches the library ran on `device` (an emulated one; 0 for a GPU).
size_t library_attention_runs(const std::shared_ptr<cuda::Device>& device) {
  const auto* e = dynamic_cast<const testing_support::EmulatedDevice*>(device.get());
  return e ? e->counters.sdpa_forward + e->counters.sdpa_backward : 0;
}

// Makes the JIT of `in` compile for `device` with `o` (compile errors fail instead of falling
// back); its backend, which `in` owns.
const cuda::CudaBackend& use_gpu(Interp& in, std::shared_ptr<cuda::Device> device, const cuda::ProgramOptions& o = {}) {
  setenv("SHEAF_CUDA_STRICT", "1", 1);
  auto backend = std::make_unique<cuda::CudaBackend>(std::make_shared<cuda::Allocator>(std::move(device)), o);
  const cuda::CudaBackend& b = *backend;
  jit_of(in)->backend = std::move(backend);
  return b;
}

// An interpreter compiling for a fresh emulated GPU with `o`; `out` holds what it printed.
struct OnEmulatedGpu {
  std::shared_ptr<testing_support::EmulatedDevice> device = testing_support::emulated_device();
  std::ostringstream out;
  Interp in{out};
  const cuda::CudaBackend& backend;
  explicit OnEmulatedGpu(const cuda::ProgramOptions& o = {}) : backend(use_gpu(in, device, o)) {}
  const cuda::ProgramStats& stats() const { return backend.stats().run; }
};

struct CaseOnDevice {
  std::string device, table;
  Case c;
};

void PrintTo(const CaseOnDevice& c, std::ostream* os) { *os << c.device << " " << c.table << " " << c.c.name; }

std::vector<CaseOnDevice> all_cases() {
  std::vector<CaseOnDevice> out;
  for (const char* d : {"emulated", "gpu"})
    for (auto [table, file] : {std::pair{"builtins", "jit_consistency_cases.shf"}, std::pair{"fusion", "cpu_fusion_cases.shf"}})
      for (Case& c : cases_of(file)) out.push_back({d, table, std::move(c)});
  // the attention cases again with the library's attention (those it takes; the rest fall back)
  for (Case& c : cases_of("cpu_fusion_cases.shf"))
    if (c.name.starts_with("attention")) out.push_back({"emulated_sdpa", "fusion", std::move(c)});
  return out;
}

class CudaBackend : public ::testing::TestWithParam<CaseOnDevice> {};

TEST_P(CudaBackend, MatchesReferenceExecutor) {
  std::string why;
  std::shared_ptr<cuda::Device> device = device_named(GetParam().device, why);
  if (!device) GTEST_SKIP() << why;
  const Case& c = GetParam().c;
  std::ostringstream out_gpu, out_ref;
  Interp gpu{out_gpu}, ref{out_ref};
  const cuda::CudaBackend& backend = use_gpu(gpu, device);
  choose_device(*jit_of(ref), "ref");
  Outcome want = run_case(ref, c);
  ASSERT_EQ(want.error, "") << "the program fails on the reference executor:\n" << c.text;
  Outcome got = run_case(gpu, c);
  ASSERT_EQ(got.error, "") << "the program fails on the cuda backend:\n" << c.text;
  const JitStats& s = jit_of(gpu)->stats();
  EXPECT_GE(backend.stats().built, 1u) << "nothing was built for the GPU";
  EXPECT_EQ(backend.stats().run.calls, s.calls - s.fallbacks - s.guard_reruns) << "some compiled call did not run on the GPU";
  EXPECT_EQ(testing_support::compiled_cleanly(gpu), "");
  // Library attention (cuDNN's, or the emulated device playing it) computes f32 scores and reads a
  // projection its product rounded once (fusion.hpp, DotLayout::bias), and GELU epilogues round
  // once (DotLayout::act): their bf16 results match to the scale of each result. So do a real
  // GPU's, whose contracted multiply-adds and summation trees leave an element near 0 of a column
  // sum with the rounding of the large terms it sums (-0.00974 for -0.00976 among sums up to 232).
  const bool library = (device->has_sdpa() && c.name.starts_with("attention")) || c.name.starts_with("gelu") || GetParam().device == "gpu";
  EXPECT_EQ(difference(got.value, want.value, "", kNativeTolerance, library), "");
  EXPECT_EQ(out_gpu.str(), out_ref.str());
  if (GetParam().device == "emulated_sdpa") {
    EXPECT_GT(library_attention_runs(device), 0u) << "no attention ran in the library";
    // and cudnn-frontend takes each of the problems (where it loads: CudnnSdpa.FrontendValidates…)
    std::string why;
    if (use_cudnn_plugin_of_this_build()) {
      for (const cuda::Sdpa& p : dynamic_cast<const testing_support::EmulatedDevice&>(*device).sdpa_problems)
        EXPECT_TRUE(cuda::CudnnSdpa::validate(p, 90, why)) << cuda::sdpa_key(p) << ": " << why;
    }
  }
}

std::string test_name(const ::testing::TestParamInfo<CaseOnDevice>& info) {
  return info.param.device + "_" + info.param.table + "_" + testing_support::gtest_name(info.param.c.name);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBackend, ::testing::ValuesIn(all_cases()), test_name);

// A row run's values over its points pass from phase to phase in registers (the default) or, with
// hold_row_points=0 (SHEAF_CUDA_RENDER, to measure the difference on a GPU), through memory; its
// phases load a row's points before computing and its later phases' loads come at the row's start,
// or not (row_slot_loads_first=0, prefetch_row_registers=0), or a row ahead (prefetch_next_row=1;
// with 3 SMs, 9 blocks walk the 24 rows, two or three each): every way gives the reference
// executor's results, and the same bits, each point summed in the same order. Held in registers,
// the run's gradient before its row mean is subtracted never reaches memory: the kernels touch
// fewer bytes than when it passes through memory.
// A layer norm's value and gradients over 24 rows of 300 (blocks of 256: two slots a thread, the
// second partly empty), its input's gradient read by the next step, which is not in the run.
TEST(CudaRowRuns, PointsInRegistersOrMemoryGiveOneResult) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  const Case c{.name = "layer-norm-gradients", .text = R"(
(def x (random-normal 1 '[24 300]))
(def y (random-normal 2 '[24 300]))
(def p {:b (random-normal 3 [300]) :g (+ 1 (random-normal 4 [300])) :beta (random-normal 5 [300])})
(defn norm [p x]
  (let [h (+ x (get p :b))
        m (mean h :axis -1 :keepdims)
        v (mean (* (- h m) (- h m)) :axis -1 :keepdims)]
    (+ (* (/ (- h m) (sqrt (+ v 1e-5))) (get p :g)) (get p :beta))))
(defn step [p x y]
  (let [[l [gp gx]] ((value-and-grad (fn [px] (sum (* (norm (first px) (second px)) y)))) [p x])]
    [l gp (* gx gx)]))
(step p x y))"};
  std::ostringstream printed;
  Interp ref{printed};
  choose_device(*jit_of(ref), "ref");
  const Outcome want = run_case(ref, c);
  ASSERT_EQ(want.error, "");
  std::vector<Outcome> got;
  std::vector<double> bytes;  // of the buffers the kernels touched
  for (const char* render : {"", "hold_row_points=0", "row_slot_loads_first=0,prefetch_row_registers=0",
                             "hold_row_points=0,row_slot_loads_first=0,prefetch_row_registers=0", "prefetch_next_row=1",
                             "column_phase_sms=3", "column_phase_sms=3,prefetch_next_row=1"}) {
    OnEmulatedGpu gpu({.render = render});
    got.push_back(run_case(gpu.in, c));
    bytes.push_back(gpu.stats().work.kernel_bytes);
    ASSERT_EQ(got.back().error, "") << render;
    EXPECT_EQ(difference(got.back().value, want.value, "", kNativeTolerance), "") << render;
    EXPECT_EQ(testing_support::compiled_cleanly(gpu.in), "") << render;
  }
  for (size_t k = 1; k < 5; ++k) EXPECT_TRUE(equal(got[0].value, got[k].value)) << k;
  EXPECT_TRUE(equal(got[5].value, got[6].value));  // fewer blocks: the column sums add their partials apart
  EXPECT_LT(bytes[0], bytes[1]);
  EXPECT_EQ(bytes[0], bytes[2]);
  EXPECT_EQ(bytes[1], bytes[3]);
  EXPECT_EQ(bytes[0], bytes[4]);
  EXPECT_EQ(bytes[5], bytes[6]);
}

// ---- the examples -------------------------------------------------------------------------------

// `file`'s text with each (from, to) replaced (each must occur).
std::string edited(const std::filesystem::path& file, const std::vector<std::pair<std::string, std::string>>& edits) {
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  for (const auto& [from, to] : edits) {
    size_t at = text.find(from);
    if (at == std::string::npos) throw std::runtime_error(file.string() + " no longer contains " + from);
    text.replace(at, from.size(), to);
  }
  return text;
}

// Printed output of `program` on `device` ("cpu" or a GPU).
std::string output_of(const std::string& program, const std::string& name, const std::shared_ptr<cuda::Device>& gpu) {
  std::ostringstream out;
  Interp in{out};
  if (gpu) use_gpu(in, gpu);
  else choose_device(*jit_of(in), "cpu");
  in.run_text(program, name);
  return out.str();
}

// Lines equal but for their numbers, which agree within `rel` (seconds, "| 1.2 s", are dropped).
std::string compare_numbers(const std::string& got, const std::string& want, double rel) {
  // an array pads its elements to the widest one's digits: spaces between numbers are not compared
  static const std::regex number(R"(-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?)"), seconds(R"(\| [0-9.]+ s)"), spaces(" +");
  auto text = [&](const std::string& s) { return std::regex_replace(std::regex_replace(std::regex_replace(s, seconds, ""), number, "#"), spaces, " "); };
  if (text(got) != text(want)) return "the printed text differs:\n" + got + "\nwant:\n" + want;
  std::string g = std::regex_replace(got, seconds, ""), w = std::regex_replace(want, seconds, "");
  std::sregex_iterator gi(g.begin(), g.end(), number), wi(w.begin(), w.end(), number), end;
  for (; gi != end && wi != end; ++gi, ++wi) {
    double a = std::stod(gi->str()), b = std::stod(wi->str());
    if (std::abs(a - b) > rel * std::max(1.0, std::abs(b))) return "got " + gi->str() + " where the cpu printed " + wi->str() + ":\n" + got + "\nwant:\n" + want;
  }
  return "";
}

class CudaExamples : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaExamples, XorLossesMatchCpu) {
  std::string why;
  std::shared_ptr<cuda::Device> device = device_named(GetParam(), why);
  if (!device) GTEST_SKIP() << why;
  std::string program = edited(testing_support::unit_dir() / "../../examples/xor/train.shf", {});
  std::string want = output_of(program, "xor/train.shf", nullptr), got = output_of(program, "xor/train.shf", device);
  EXPECT_NE(want.find("final loss"), std::string::npos) << want;
  EXPECT_EQ(compare_numbers(got, want, 1e-3), "");
}

TEST_P(CudaExamples, MlpLossAndAccuracyMatchCpu) {
  std::string why;
  std::shared_ptr<cuda::Device> device = device_named(GetParam(), why);
  if (!device) GTEST_SKIP() << why;
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto checkpoint = std::filesystem::temp_directory_path() / fmt::format("sheaf-cuda-mlp-{}.safetensors", getpid());
  // one epoch of 12 steps (the example's model, optimizer and data path), no metrics files
  std::string program = edited(testing_support::unit_dir() / "../../examples/mlp/train.shf",
                               {{":epochs 2", ":epochs 1"}, {"steps (// 60000 batch)", "steps 12"}, {":log true", ":log false"},
                                {"\"mlp-checkpoint.safetensors\"", "\"" + checkpoint.string() + "\""}});
  std::string want = output_of(program, "mlp/train.shf", nullptr), got = output_of(program, "mlp/train.shf", device);
  std::filesystem::remove(checkpoint);
  EXPECT_NE(want.find("test accuracy"), std::string::npos) << want;
  EXPECT_EQ(compare_numbers(got, want, 1e-3), "");
}

// The tiny GPT-2 of CudaGpt: 4 steps, each loss printed; `per_head`: one layer, written with a
// module per head; `einsum`: written in gpt_step_style2.shf's style.
std::string gpt_program(bool per_head = false, const std::string& shape = "", bool einsum = false) {
  std::string program = edited(testing_support::unit_dir() / "../../bench/gpt2_gpu.shf",
                               {{":vocab 50304 :d 768 :layers 12 :heads 12 :T 1024 :B 8",
                                 shape.empty() ? fmt::format(":vocab 512 :d 64 :layers {} :heads 2 :T 64 :B 2", per_head ? 1 : 2) : shape},
                                {":lr 0.0003", ":lr 0.001"},
                                {":per-head 0", per_head ? ":per-head 1" : ":per-head 0"},
                                {":einsum 0", einsum ? ":einsum 1" : ":einsum 0"}});
  return program.substr(0, program.find(";; ---- measurement ----")) +
         "(loop [s state0 i 0] (when (< i 4) (let [[l s] (train-step s idx tgt)] (print \"step {} loss {:.4f}\" i l) (recur s (+ i 1)))))\n";
}

// A tiny GPT-2 (bench/gpt2_gpu.shf: bf16 products, causal attention — fused forward and backward
// on the GPU, by the own kernels or the library's —, AdamW at lr 0.001) trains for 4 steps with
// the CPU backend's losses (6.27 → 5.35) within the noise of bf16 rounding: the whole step end to
// end. (The library computes the scores in f32 where the graph rounds them to bf16; at lr 0.01
// Adam turns that into steps of another sign for weights whose gradients are near 0, and the
// losses part by 1e-2 after 3 steps, while its gradients agree with the CPU's element by element
// in cpu_fusion_cases.shf's attention cases, which the library runs too.)
class CudaGpt : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGpt, LossesMatchCpu) {
  std::string why;
  std::shared_ptr<cuda::Device> device = device_named(GetParam(), why);
  if (!device) GTEST_SKIP() << why;
  const std::string program = gpt_program();
  std::string want = output_of(program, "gpt2_gpu.shf", nullptr), got = output_of(program, "gpt2_gpu.shf", device);
  EXPECT_NE(want.find("step 3 loss"), std::string::npos) << want;
  EXPECT_EQ(compare_numbers(got, want, 1e-3), "");
  // with a library, each layer's attention runs there: forward and backward, 2 layers, 4 steps;
  // the layers' problems differ only in where their tensors lie, so they share one plan
  if (GetParam() == "emulated_sdpa") {
    EXPECT_EQ(library_attention_runs(device), 2u * 2u * 4u);
    const auto& problems = dynamic_cast<const testing_support::EmulatedDevice&>(*device).sdpa_problems;
    ASSERT_EQ(problems.size(), 2u);
    EXPECT_FALSE(problems[0] == problems[1]);
    EXPECT_TRUE(cuda::same_plan(problems[0], problems[1])) << cuda::sdpa_key(problems[0]) << " / " << cuda::sdpa_key(problems[1]);
  }
}

// A library that accepts every chain on sight but then builds no plan for any: the step is rendered
// again with the own attention kernels (the library runs nothing) and trains with the CPU's losses.
TEST(CudaGptRefused, ChainsWhosePlansDoNotBuildRunTheOwnKernels) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  std::shared_ptr<testing_support::EmulatedDevice> device = testing_support::emulated_device();
  device->library_attention = device->refuse_at_prepare = true;
  const std::string program = gpt_program();
  std::string want = output_of(program, "gpt2_gpu.shf", nullptr), got = output_of(program, "gpt2_gpu.shf", device);
  EXPECT_NE(want.find("step 3 loss"), std::string::npos) << want;
  EXPECT_EQ(compare_numbers(got, want, 1e-3), "");
  EXPECT_GT(device->counters.sdpa_prepared, 0u) << "no chain was offered to the library";
  EXPECT_EQ(library_attention_runs(device), 0u);
}

// The problems the GPT-2 step gives a library (causal attention with its backward, q, k and v
// read from the projection [B, T, 3, H, hd], the gradients written into its gradient) pass
// cudnn-frontend's own checks of shapes, strides and options (CudnnSdpa::validate, no GPU needed),
// and a head dim cuDNN does not take fails them. Needs libsheaf_cudnn.so (built beside the binary
// when nvidia-cudnn-frontend is installed) and libcudnn.so.9.
TEST(CudnnSdpa, FrontendValidatesTheGptStepsProblems) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  std::string why;
  if (!use_cudnn_plugin_of_this_build(&why)) GTEST_SKIP() << why;
  std::shared_ptr<testing_support::EmulatedDevice> device = testing_support::emulated_device();
  device->library_attention = true;
  const std::string out = output_of(gpt_program(), "gpt2_gpu.shf", device);
  ASSERT_NE(out.find("step 3 loss"), std::string::npos) << out;
  ASSERT_EQ(device->sdpa_problems.size(), 2u) << "a problem per layer";
  for (const cuda::Sdpa& p : device->sdpa_problems) {
    EXPECT_TRUE(p.grad && p.causal && p.b == 2 && p.h == 2 && p.t == 64 && p.d == 32) << cuda::sdpa_key(p);
    EXPECT_TRUE(cuda::CudnnSdpa::validate(p, 90, why)) << cuda::sdpa_key(p) << ": " << why;
  }
  cuda::Sdpa wide = device->sdpa_problems[0];
  wide.d = wide.dv = 1024;
  EXPECT_FALSE(cuda::CudnnSdpa::validate(wide, 90, why)) << "a head dim of 1024 passed";
}

INSTANTIATE_TEST_SUITE_P(Devices, CudaExamples, ::testing::Values("emulated", "gpu"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Devices, CudaGpt, ::testing::Values("emulated", "emulated_sdpa", "gpu"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The same model written with a module per head (gpt2_gpu.shf --per-head 1): its per-head
// projections merge into one product, whose per-head slices the optimizer's packed updates read
// at their offsets (kernel arguments at a view), its heads' attention chains into one over batch ×
// heads (merge_heads: one library call a layer forward and one backward, as for the fused model,
// not one a head), and it trains with the CPU's losses.
class CudaGptPerHead : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGptPerHead, LossesMatchCpu) {
  std::string why;
  std::shared_ptr<cuda::Device> device = device_named(GetParam(), why);
  if (!device) GTEST_SKIP() << why;
  const std::string program = gpt_program(true);
  std::string want = output_of(program, "gpt2_gpu.shf", nullptr), got = output_of(program, "gpt2_gpu.shf", device);
  EXPECT_NE(want.find("step 3 loss"), std::string::npos) << want;
  EXPECT_EQ(compare_numbers(got, want, 1e-3), "");
  if (GetParam() == "emulated_sdpa") {
    EXPECT_EQ(library_attention_runs(device), 1u * 2u * 4u);  // 1 layer, forward and backward, 4 steps
    const auto& problems = dynamic_cast<const testing_support::EmulatedDevice&>(*device).sdpa_problems;
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_TRUE(problems[0].grad && problems[0].causal && problems[0].h == 2 && problems[0].b == 2 && problems[0].d == 32)
        << cuda::sdpa_key(problems[0]);
  }
}

// Wider heads (d 384, 6 heads of 64, 384 tokens): merge_dots merges the input gradients of the
// per-head projections in runs of two heads, over d(q k v) of those heads joined head by head;
// merge_heads makes each run's operand columns of one d(qkv), which the library's backward call
// writes in place (rows 6 heads · 3 · 64 apart, not 64). The first three losses are the CPU's
// (the fourth parts by ~1e-2: Adam turns the library's f32 scores, where the graph rounds them to
// bf16, into steps of another sign for weights whose gradients are near 0, as in CudaGpt).
TEST(CudaGptPerHeadWide, GradientsOfRunsOfHeadsAreWrittenInPlace) {
  std::string why;
  std::shared_ptr<cuda::Device> device = device_named("emulated_sdpa", why);
  if (!device) GTEST_SKIP() << why;
  const std::string program = gpt_program(true, ":vocab 512 :d 384 :layers 1 :heads 6 :T 64 :B 6");
  auto first_three = [](const std::string& out) { return out.substr(0, out.find("step 3 loss")); };
  std::string want = output_of(program, "gpt2_gpu.shf", nullptr), got = output_of(program, "gpt2_gpu.shf", device);
  EXPECT_NE(want.find("step 2 loss"), std::string::npos) << want;
  EXPECT_EQ(compare_numbers(first_three(got), first_three(want), 1e-3), "");
  const auto& problems = dynamic_cast<const testing_support::EmulatedDevice&>(*device).sdpa_problems;
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].b * problems[0].h, 6 * 6) << cuda::sdpa_key(problems[0]);
  for (const cuda::SdpaTensor* g : {&problems[0].dq, &problems[0].dk, &problems[0].dv_}) EXPECT_EQ(g->strides[2], 6 * 3 * 64) << cuda::sdpa_key(problems[0]);
}

// The same model in gpt_step_style2.shf's style (gpt2_gpu.shf --einsum 1: einsum projections on
// [D H Hd] weights — the output projection contracts two dims of attention's output —, a `where`
// mask, layer-norm from mean and variance): every product runs on the device, none on the host,
// and it trains with the CPU's losses.
TEST(CudaGptEinsum, LossesMatchCpuWithEveryProductOnTheDevice) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  OnEmulatedGpu gpu;
  const std::string program = gpt_program(false, "", true);
  gpu.in.run_text(program, "gpt2_gpu.shf");
  const std::string want = output_of(program, "gpt2_gpu.shf", nullptr);
  EXPECT_NE(want.find("step 3 loss"), std::string::npos) << want;
  EXPECT_EQ(compare_numbers(gpu.out.str(), want, 1e-3), "");
  EXPECT_EQ(gpu.stats().host_steps, 0u) << "a product ran on the host";
}

INSTANTIATE_TEST_SUITE_P(Devices, CudaGptPerHead, ::testing::Values("emulated", "emulated_sdpa"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---- the default device -------------------------------------------------------------------------

// With no --device (runtime/device_choice.cpp: switching_once), the first compile asks once for a
// usable GPU: one makes every compiled function run on it; none leaves the CPU backend.
struct DefaultDeviceRun {
  int asked = 0;
  std::string backend;                    // the JIT's at the end
  uint64_t gpu_built = 0, cpu_built = 0;  // functions built for each (the CPU's: when the GPU was asked for, or at the end)
  std::string out;
};

// Two compiles of one function (two shapes) from a JIT on the CPU that asks for the GPU `gpu`.
DefaultDeviceRun run_with_default_device(std::shared_ptr<cuda::Device> gpu) {
  DefaultDeviceRun r;
  std::ostringstream out;
  Interp in{out};
  auto on_cpu = std::make_unique<cpu::CpuBackend>();
  const cpu::CpuBackend* cpu = on_cpu.get();  // gone once a GPU takes its place
  const cuda::CudaBackend* cuda = nullptr;
  auto count_cpu_builds = [&] { r.cpu_built = cpu->stats().built + cpu->stats().loaded; };
  jit_of(in)->backend = switching_once(std::move(on_cpu), [&]() -> std::unique_ptr<Backend> {
    ++r.asked;
    count_cpu_builds();
    if (!gpu) return nullptr;
    auto b = std::make_unique<cuda::CudaBackend>(std::make_shared<cuda::Allocator>(gpu));
    cuda = b.get();
    return b;
  });
  in.run_text("(defn f [x] (* x 2.0)) (print (f (ones [3]))) (print (f (ones [4])))", "default.shf");
  r.backend = jit_of(in)->backend->name();
  if (cuda) r.gpu_built = cuda->stats().built;
  else count_cpu_builds();
  r.out = out.str();
  return r;
}

TEST(CudaDefaultDevice, TheFirstCompileTakesAUsableGpu) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  setenv("SHEAF_CUDA_STRICT", "1", 1);
  DefaultDeviceRun r = run_with_default_device(testing_support::emulated_device());
  EXPECT_EQ(r.asked, 1);
  EXPECT_EQ(r.backend, "cuda");
  EXPECT_EQ(r.gpu_built, 2u);
  EXPECT_EQ(r.cpu_built, 0u) << "nothing was built for the CPU";
  EXPECT_EQ(r.out, "[2. 2. 2.]\n[2. 2. 2. 2.]\n");
}

TEST(CudaDefaultDevice, NoUsableGpuLeavesTheCpu) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler for the CPU backend";
  DefaultDeviceRun r = run_with_default_device(nullptr);
  EXPECT_EQ(r.asked, 1);
  EXPECT_EQ(r.backend, "cpu");
  EXPECT_EQ(r.gpu_built, 0u);
  EXPECT_EQ(r.cpu_built, 2u);
  EXPECT_EQ(r.out, "[2. 2. 2.]\n[2. 2. 2. 2.]\n");
}

// ---- residency, reuse, capture ------------------------------------------------------------------

constexpr const char* kTrainingLoop = R"(
(def X (random-normal 1 [64 16]))
(def Y (random-normal 2 [64 4]))
(defn loss [p x y] (mean (** (- (+ (@ x (get p :W)) (get p :b)) y) 2)))
(defn step [p x y]
  (let [[l g] ((value-and-grad loss) p x y)]
    [l {:W (- (get p :W) (* 0.1 (get g :W))) :b (- (get p :b) (* 0.1 (get g :b)))}]))
(def p0 {:W (random-normal 3 [16 4]) :b (zeros [4])})
(def trained (repeat [i 20] [[l p] [0.0 p0]] (step p X Y)))
)";

// ProgramOptions::capture_at (SHEAF_CUDA_CAPTURE): 1 captures a buffer table the first time it
// is seen, so every call after the program's first is a capture or a replay; 0 captures nothing
// (every later call runs launch by launch); 2, the default, runs a table directly the first time
// and captures it the second.
TEST(CudaResidency, TablesCapturedAtFirstOrSecondSightOrNever) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  for (const int64_t at : {0, 1, 2}) {
    OnEmulatedGpu gpu({.capture_at = at});
    gpu.in.run_text(kTrainingLoop, "loop.shf");
    const cuda::ProgramStats& s = gpu.stats();
    ASSERT_EQ(s.calls, 20u);
    const uint64_t not_direct = s.captured + s.replayed;  // calls not run launch by launch
    EXPECT_TRUE(at == 0 ? not_direct == 0 : at == 1 ? not_direct == 19 : not_direct < 19)
        << "capture_at " << at << ": " << s.captured << " captures, " << s.replayed << " replays";
    EXPECT_GE(s.replayed, at == 0 ? 0u : 15u) << at;
    // every call after the first is captured, replayed or run launch by launch, and --jit-profile
    // says what the captures and the runs launch by launch cost the host
    EXPECT_EQ(s.queued + s.captured + s.replayed, s.calls - 1) << at;
    EXPECT_EQ(s.captured > 0, s.capture_s > 0) << at;
    EXPECT_EQ(s.queued > 0, s.queue_s > 0) << at;
    if (at == 0) {
      EXPECT_EQ(s.queued, 19u);
    } else if (at == 1) {
      EXPECT_EQ(s.queued, 0u);
    } else {
      EXPECT_GE(s.queued, 1u);  // a table's first sight
    }
  }
}

TEST(CudaResidency, TrainingLoopStaysOnTheGpu) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  OnEmulatedGpu gpu;
  Interp& in = gpu.in;
  in.run_text(kTrainingLoop, "loop.shf");
  const cuda::ProgramStats& s = gpu.stats();
  const testing_support::EmulatedDevice::Counters& n = gpu.device->counters;
  EXPECT_EQ(s.calls, 20u);
  // p0's W and b once; X and Y once each (then reused); the rank-0 loss of a step is not an input
  EXPECT_EQ(s.uploaded, 4u) << "uploads of step's inputs";
  EXPECT_EQ(s.reused, 2u * 19) << "X and Y come again at the same positions";
  EXPECT_EQ(s.resident, 2u * 19) << "W and b of step i are the results of step i-1";
  EXPECT_EQ(n.downloads, 0u) << "nothing was read on the host";
  EXPECT_EQ(s.host_steps, 0u);
  EXPECT_GE(s.captured, 1u);
  EXPECT_GE(s.replayed, 15u) << s.captured << " captures; results cycle through a few buffer sets: the loop replays captures";
  in.run_text("(def more (repeat [i 10] [[l p] trained] (step p X Y)))", "more.shf");
  EXPECT_EQ(n.downloads, 0u);
  const std::vector<std::string> reads = {"(print \"{:.4f}\" (first more))",
                                           "(print \"{:.4f} {}\" (first more) (shape (get (second more) :W)))"};
  for (const std::string& r : reads) in.run_text(r, "print.shf");
  EXPECT_EQ(n.downloads, 1u) << "printing the loss downloads it once; the shape needs no download";
  std::ostringstream want;
  Interp ref{want};
  choose_device(*jit_of(ref), "ref");
  ref.run_text(kTrainingLoop, "loop.shf");
  ref.run_text("(def more (repeat [i 10] [[l p] trained] (step p X Y)))", "more.shf");
  for (const std::string& r : reads) ref.run_text(r, "print.shf");
  EXPECT_EQ(gpu.out.str(), want.str());
}

// The caching allocator and the result buffers reach a steady state: 30 steps allocate no more
// device memory than 10.
TEST(CudaResidency, SteadyLoopAllocatesNothing) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  auto allocations = [](int steps) {
    OnEmulatedGpu gpu;
    std::string program = kTrainingLoop;
    program.replace(program.find("[i 20]"), 6, fmt::format("[i {}]", steps));
    gpu.in.run_text(program, "loop.shf");
    return gpu.device->counters.allocations;
  };
  EXPECT_EQ(allocations(30), allocations(10));
}

// `program` run on an emulated GPU and on the reference executor: what each printed, and what the
// GPU's programs did.
struct EmulatedAndReference {
  std::string got, want;
  cuda::ProgramStats stats;
  explicit EmulatedAndReference(const char* program) {
    OnEmulatedGpu gpu;
    std::ostringstream ref_out;
    Interp ref{ref_out};
    choose_device(*jit_of(ref), "ref");
    gpu.in.run_text(program, "program.shf");
    ref.run_text(program, "program.shf");
    got = gpu.out.str(), want = ref_out.str(), stats = gpu.stats();
  }
};

// A loop that feeds each step new host values (a learning rate from a schedule, rows gathered from
// a dataset, as the examples' epochs do) re-uploads them into the buffers of values already
// dropped at the same positions: its buffer tables cycle with the parameters' buffer sets, so the
// steps after the first few replay captures. (Fresh buffers from the allocator instead: the 4-byte
// rate and the 256-byte targets share its 512-byte blocks, trade them from step to step, and the
// tables repeat every six steps, more than the captures kept: nothing was replayed.)
constexpr const char* kScheduledBatches = R"(
(defn loss [p x y] (mean (** (- (+ (@ x (get p :W)) (get p :b)) (reshape y 64 1)) 2)))
(defn step [p lr x y]
  (let [[l g] ((value-and-grad loss) p x y)]
    [l {:W (- (get p :W) (* lr (get g :W))) :b (- (get p :b) (* lr (get g :b)))}]))
(def p0 {:W (random-normal 3 [16 1]) :b (zeros [1])})
(def XS (random-normal 4 [256 16]))
(def YS (random-normal 5 [256]))
(def trained (repeat [i 24] [[l p] [0.0 p0]]
  (let [rows (+ (* 64 (mod i 4)) (arange 64))] (step p (/ 0.1 (+ 1.0 i)) (get XS rows) (get YS rows)))))
(print "{:.4f}" (first trained))  ;; the GPU sums in another order: the 5th decimal may differ
)";

TEST(CudaResidency, NewHostValuesEveryStepStillReplay) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  EmulatedAndReference r(kScheduledBatches);
  EXPECT_EQ(r.stats.calls, 24u);
  EXPECT_EQ(r.stats.uploaded, 2u + 3 * 24) << "p0 once, then each step's rate and batch";
  EXPECT_GE(r.stats.replayed, 18u) << r.stats.captured << " captures";
  EXPECT_EQ(r.got, r.want);
}

// A language-model step (embedding gather + positions, bf16 products, a split and re-joined
// activation, a tied head, cross-entropy, SGD) runs entirely in kernels and products: no host
// step (the embedding's gradient is a scatter-add kernel), so repeated steps are captured and
// replayed. The loss curve matches the reference executor.
constexpr const char* kLanguageModelStep = R"(
(def tok (random-randint 1 [4 6] 0 16))
(def tgt (random-randint 2 [4 6] 0 16))
(def p0 {:wte (* 0.3 (random-normal 3 [16 8])) :wpe (* 0.1 (random-normal 4 [6 8])) :W (* 0.3 (random-normal 5 [8 8]))})
(defn loss [p tok tgt]
  (let [x (+ (get (get p :wte) tok) (get p :wpe))
        h (cast (@ (cast x :bf16) (cast (get p :W) :bf16)) :f32)
        q (concat (tanh (slice h 0 3 :axis 2)) (slice h 3 8 :axis 2) :axis 2)]
    (sparse-cross-entropy (reshape (@ q (transpose (get p :wte))) -1 16) (reshape tgt -1))))
(defn step [p tok tgt]
  (let [[l g] ((value-and-grad loss) p tok tgt)]
    [l (tree-map (fn [a b] (- a (* 0.5 b))) p g)]))
(def losses (first (repeat [i 12] [[ls p] [[] p0]] (let [[l p] (step p tok tgt)] [(concat ls [l]) p]))))
(print "{}" (map (fn [l] (round (* 1000 (float l)))) losses))
)";

TEST(CudaResidency, LanguageModelStepHasNoHostStep) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  EmulatedAndReference r(kLanguageModelStep);
  const cuda::ProgramStats& s = r.stats;
  EXPECT_EQ(s.calls, 12u);
  EXPECT_EQ(s.host_steps, 0u) << "a gather, scatter-add, concatenate, bf16 product or reduction ran on the host";
  EXPECT_GE(s.replayed, 6u);
  EXPECT_EQ(r.got, r.want);
}

// An attention output projection written as an einsum on weights reshaped to [H Hd D]
// ("bhtk,hkd->btd") contracts h and k, which are not adjacent in its [b h t k] operand; it and its
// weight gradient ("bhtk,btd->hkd") run as cuBLASLt products over one transpose of that operand
// (canonical_dots), not on the host. The gradients match the reference executor's.
TEST(CudaResidency, EinsumOutputProjectionsRunOnTheDevice) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  EmulatedAndReference r(R"(
(def p {:ctx (cast (random-normal 1 [2 3 16 8]) :bf16) :wo (cast (random-normal 2 [3 8 24]) :bf16)})
(def dy (random-normal 3 [2 16 24]))
(defn loss [p] (sum (* (cast (einsum "bhtk,hkd->btd" (get p :ctx) (get p :wo)) :f32) dy)))
(defn grads [p] ((grad loss) p))
(print "{}" (repeat [i 3] [g nil] (tree-map (fn [x] (round (* 10 (sum (abs (cast x :f32)))))) (grads p)))))");
  EXPECT_EQ(r.stats.host_steps, 0u) << "a product ran on the host";
  EXPECT_EQ(r.stats.work.products, 2 * r.stats.calls);  // the projection's and its weight gradient's
  EXPECT_EQ(r.got, r.want);
}

// A classifier's accuracy (argmax over the classes, compared with the labels), an argmin and the
// top 5 over a long axis run as kernels: no host step, so repeated calls are captured and
// replayed. Ties go to the first index, NaN wins (the rounded logits tie; one row holds a NaN).
// (A call's results stay alive until the next one replaces them: two buffer sets alternate.)
TEST(CudaResidency, ArgmaxAndTopKRunOnTheDevice) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  EmulatedAndReference r(R"(
(def logits (where (== (reshape (range 640) 64 10) 37) nan (round (* 2 (random-normal 1 [64 10])))))
(def labels (random-randint 2 [64] 0 10))
(def long (random-normal 3 [3 5000]))
(defn accuracy [x y] (mean (cast (== (argmax x :axis 1) y) :f32)))
(defn lowest [x] [(argmin x :axis 1) (argmax (cast x :bf16) :axis 0) (top_k x 5)])
(print "{}" (repeat [i 8] [a 0.0] (accuracy logits labels)))
(print "{}" (repeat [i 8] [r nil] (lowest long))))");
  EXPECT_EQ(r.stats.host_steps, 0u) << "an arg_reduce or top_k ran on the host";
  EXPECT_GE(r.stats.replayed, 4u) << "repeated calls were not replayed";
  EXPECT_EQ(r.got, r.want);
}

// A training loop compiled into one function (a `while` of 50 trips) keeps its state on the GPU:
// the body is a program of its own, called per iteration on the previous iteration's buffers
// (and replayed as a capture), with no host step; a data-dependent `loop` reads one bool per
// iteration; the gradient of a counted loop (its VJP stacks the states with dynamic_update_slice
// and reads them back with dynamic_slice) runs on the device too, the stack updated in place. All
// match the reference executor.
TEST(CudaResidency, CompiledLoopsRunOnTheDevice) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  constexpr const char* kLoops = R"(
(defn loss [w x] (mean (** (tanh (@ x w)) 2)))
(defn train [w x] (repeat [i 50] [w w] (- w (* 0.3 ((grad loss) w x)))))
(defn halve [v] (loop [v v n 0] (if (> (sum (abs v)) 1.0) (recur (* v 0.5) (+ n 1)) [v n])))
(defn rnn [w x] ((grad (fn [w] (sum (repeat [i 30] [h x] (tanh (@ h w)))))) w))
(print "{:.5f} {}" (loss (train (random-normal 1 [6 3]) (random-normal 2 [5 6])) (random-normal 2 [5 6])) (halve (random-normal 3 [8])))
(print "{:.5f}" (sum (rnn (* 0.3 (random-normal 4 [4 4])) (random-normal 5 [2 4]))))
)";
  EmulatedAndReference r(kLoops);
  EXPECT_EQ(r.stats.host_steps, 0u) << "a while ran on the host";
  EXPECT_EQ(r.stats.in_place, 60u) << "each forward iteration of rnn's gradient stacks its two carried values (h, i) in place";
  EXPECT_EQ(r.got, r.want);
}

// The all-reduce of a data-parallel step sums device buffers (NCCL on a GPU; a copy in this job of
// one) instead of going through host memory.
TEST(CudaResidency, AllReduceRunsOnTheDevice) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  OnEmulatedGpu gpu;
  gpu.in.run_text(R"(
(defn loss [w x] (mean (tanh (@ x w))))
(defn step [w x] (- w (* 0.1 (all-reduce ((grad loss) w x) :mean))))
(def w (repeat [i 5] [w (random-normal 1 [6 3])] (step w (random-normal 2 [5 6]))))
)",
              "dp.shf");
  const cuda::ProgramStats& s = gpu.stats();
  EXPECT_EQ(s.calls, 5u);
  EXPECT_EQ(s.collectives, 5u);
  EXPECT_EQ(s.host_steps, 0u);
  EXPECT_EQ(gpu.device->counters.collectives, 5u);
}

// --tf32 (ProgramOptions::tf32) reaches the f32 products and only them; without it no product may
// round to TF32.
TEST(CudaResidency, Tf32OnlyWhenAskedAndOnlyForF32) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  constexpr const char* kProducts = R"(
(defn f [a b] (list (@ a b) (@ (cast a :bf16) (cast b :bf16))))
(def r (f (random-normal 1 [40 50]) (random-normal 2 [50 30])))
)";
  for (bool tf32 : {false, true}) {
    cuda::ProgramOptions o;
    o.tf32 = tf32;
    OnEmulatedGpu gpu(o);
    gpu.in.run_text(kProducts, "products.shf");
    EXPECT_EQ(gpu.device->counters.gemms, 2u);
    EXPECT_EQ(gpu.device->counters.tf32_gemms, tf32 ? 1u : 0u) << "tf32 " << tf32;
  }
}

// Attention heads written as modules project x once per head; on the GPU, as on the CPU,
// merge_dots makes them one cuBLASLt product over the concatenated weights (bf16, as a
// mixed-precision model runs them), whose slices are the heads' projections.
TEST(CudaResidency, PerHeadProjectionsAreOneProduct) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  OnEmulatedGpu gpu;
  gpu.in.run_text(R"(
(defn heads [x ws] (concat (map (fn [w] (@ x w)) ws) :axis -1))
(def x (cast (random-normal 1 [2 128 16]) :bf16))
(def ws (map (fn [k] (cast (random-normal k [16 8]) :bf16)) (list 2 3 4)))
(def one-by-one (concat (map (fn [w] (@ x w)) ws) :axis -1))
(def err (max (abs (- (cast (heads x ws) :f32) (cast one-by-one :f32)))))
)", "heads.shf");
  EXPECT_EQ(gpu.device->counters.gemms, 1u);
  EXPECT_EQ(gpu.stats().work.products, 1u);
  EXPECT_LT(gpu.in.global(symbols::intern("err"))->value.as_tensor().get(0), 1e-6);
}

// --jit-profile's "cuda work" line: kernels and the bytes of their buffers, products with their
// FLOPs and bytes, and the floor of the bytes moved.
TEST(CudaResidency, WorkOfTheLaunchTablesIsCounted) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  OnEmulatedGpu gpu;
  gpu.in.run_text(R"(
(defn f [a b x] (list (@ a b) (* x 2.0)))
(def a (random-normal 1 [40 50]))
(def r1 (f a (random-normal 2 [50 30]) (random-normal 3 [1000])))
(def r2 (f a (random-normal 4 [50 30]) (random-normal 5 [1000])))
)", "work.shf");
  const cuda::ProgramStats& s = gpu.stats();
  EXPECT_EQ(s.calls, 2u);
  EXPECT_EQ(s.work.products, 2u);
  EXPECT_EQ(s.work.product_flops, 2 * 2.0 * 40 * 30 * 50);
  EXPECT_EQ(s.work.kernels, 2u);                        // x·2, once a call
  EXPECT_EQ(s.work.kernel_bytes, 2 * (4000 + 4000.0));  // reads x, writes the result
  EXPECT_EQ(s.work.product_bytes, 2 * (8000 + 6000 + 4800.0));  // reads a and b, writes a·b
  // The floor: a, b and x read once, both results written once — what the calls moved.
  EXPECT_EQ(s.work.floor_bytes, 2 * (8000 + 6000 + 4000 + 4800 + 4000.0));
  EXPECT_EQ(s.work.moved_bytes(), s.work.floor_bytes);
  std::ostringstream report;
  jit_of(gpu.in)->report(report);
  EXPECT_NE(report.str().find("cuda work: 2 kernels touching 0.000 GB of buffers, 2 products of 0.000 TFLOP"), std::string::npos) << report.str();
  EXPECT_NE(report.str().find("against a floor of 0.000 GB (1.00x"), std::string::npos) << report.str();
}

// The floor counts a value once however many views read it, and a value the fusion must write
// and read again (a product's result that a loop reads) both ways.
TEST(CudaResidency, FloorCountsEachBufferOnceEachWay) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  OnEmulatedGpu gpu;
  gpu.in.run_text(R"(
(defn f [a b] (tanh (@ (@ a b) (transpose b))))
(def r (f (random-normal 1 [40 50]) (random-normal 2 [50 30])))
)", "floor.shf");
  const cuda::ProgramStats& s = gpu.stats();
  // a [40 50] and b [50 30] read once (bᵀ is a view of b); a·b [40 30] and a·b·bᵀ [40 50] written
  // and read once; the result [40 50] written once.
  EXPECT_EQ(s.work.floor_bytes, 4 * (2000 + 1500 + 2 * 1200 + 2 * 2000 + 2000.0));
  EXPECT_EQ(s.work.product_bytes, 4 * (2000 + 1500 + 1200 + 1200 + 1500 + 2000.0));
}

// SHEAF_CUDA_PROFILE (ProgramOptions::profile): every launch of a program's calls after its first
// is timed between two stamps, calls are not captured, a loop body's launches are timed under its own name, and --jit-profile lists
// them by time; without it nothing is timed and repeated calls are captured.
TEST(CudaResidency, LaunchesAreTimedWhenProfiling) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  const char* program = R"(
(defn f [a b x] (list (@ a b) (* x 2.0)))
(defn g [x n] (loop [y x i 0] (if (< i n) (recur (+ (* y 2.0) 1.0) (+ i 1)) y)))
(def a (random-normal 1 [40 50]))
(def b (random-normal 2 [50 30]))
(def x (random-normal 3 [1000]))
(f a b x)
(f a b x)
(f a b x)
(g x 3)
)";
  for (bool profile : {false, true}) {
    cuda::ProgramOptions o;
    o.profile = profile;
    OnEmulatedGpu gpu(o);
    gpu.in.run_text(program, "timed.shf");
    const cuda::ProgramStats& s = gpu.stats();
    if (!profile) {
      EXPECT_TRUE(s.times.empty());
      EXPECT_GT(s.replayed + s.captured, 0u) << "a call of f with the buffers of an earlier one is captured";
      continue;
    }
    EXPECT_EQ(s.replayed + s.captured, 0u);
    auto product = s.times.find("f product 40x30x50");
    ASSERT_NE(product, s.times.end());
    EXPECT_EQ(product->second.kind, cuda::Launch::Kind::Dot);
    EXPECT_EQ(product->second.launches, 2u) << "the first call is not timed";
    EXPECT_EQ(product->second.flops, 2 * 2.0 * 40 * 30 * 50);
    EXPECT_EQ(product->second.what, "f32");
    uint64_t f_kernels = 0, body_kernels = 0;
    for (const auto& [key, t] : s.times) {
      EXPECT_GE(t.ms, 0.0) << key;
      if (t.kind != cuda::Launch::Kind::Kernel) continue;
      if (key.starts_with("f s")) {
        f_kernels += t.launches;
        EXPECT_EQ(t.bytes, static_cast<double>(t.launches) * 8000) << key;  // reads x, writes x·2
      }
      if (key.starts_with("g (while body) s")) body_kernels += t.launches;
    }
    EXPECT_EQ(f_kernels, 2u);
    std::ostringstream report;
    jit_of(gpu.in)->report(report);
    EXPECT_GE(body_kernels, 2u) << "kernels of every iteration but the first\n" << report.str();
    EXPECT_NE(report.str().find("cuda launch times"), std::string::npos) << report.str();
    EXPECT_TRUE(std::regex_search(report.str(), std::regex(R"(\n +[0-9.]+ +[0-9.]+% +2 +[0-9.]+ +- +[0-9.]+  f product 40x30x50 f32\n)")))
        << report.str();
  }
}

// Runs `program` on `gpu` with SHEAF_DUMP_CUDA set; returns what it wrote for function `fn`.
std::string dumped_unit(OnEmulatedGpu& gpu, const std::string& program, const std::string& fn) {
  auto dir = std::filesystem::temp_directory_path() / fmt::format("sheaf-cuda-dump-{}", getpid());
  std::filesystem::create_directories(dir);
  setenv("SHEAF_DUMP_CUDA", dir.c_str(), 1);
  gpu.in.run_text(program, "dump.shf");
  unsetenv("SHEAF_DUMP_CUDA");
  std::ifstream file(dir / (fn + ".cu"));
  std::stringstream text;
  text << file.rdbuf();
  std::filesystem::remove_all(dir);
  return text.str();
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// SHEAF_DUMP_CUDA=DIR: each function's translation unit, its launch table at the end.
TEST(CudaResidency, DumpWritesTheUnitAndItsLaunchTable) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  OnEmulatedGpu gpu;
  const std::string t = dumped_unit(gpu,
                                    "(defn f [a b x] (list (@ a b) (sum (* x 2.0) :axis 1)))\n"
                                    "(def r (f (random-normal 1 [40 50]) (random-normal 2 [50 30]) (random-normal 3 [8 1000])))\n",
                                    "f");
  EXPECT_NE(t.find("extern \"C\" __global__"), std::string::npos) << t;
  // the product: 2·40·30·50 FLOP; the row sums: a block per row, reading x and writing 8 sums
  EXPECT_NE(t.find("product [] 40x30x50  0.00012 GFLOP  f32  a strides 50,1 b strides 30,1\n"), std::string::npos) << t;
  EXPECT_NE(t.find(" grid 8 block 256 (threads share points)  0.032 MB  [8,1000] binary,reduce\n"), std::string::npos) << t;
}

// Attention kernels use bf16 tensor-core products (mma.sync m16n8k16, sm_80 and newer): on an
// sm_90 GPU causal attention is one fused kernel; on an sm_75 one (a T4) the chain runs as
// products and row kernels, with the same result.
TEST(CudaResidency, AttentionIsFusedOnlyWhereTheGpuHasBf16TensorCores) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  const std::string program =
      "(defn f [q k v] (let [[B T hd] (shape q) keep (== (tril (ones [T T])) 1.0)\n"
      "                      s (* (cast (@ (cast q :bf16) (transpose (cast k :bf16) [0 2 1])) :f32) 0.25)]\n"
      "  (@ (cast (softmax (where keep s -1e9) :axis -1) :bf16) (cast v :bf16))))\n"
      "(def o (f (random-normal 1 [2 40 16]) (random-normal 2 [2 40 16]) (random-normal 3 [2 40 16])))\n"
      "(print \"{:.3f}\" (mean (abs (cast o :f32))))\n";
  std::string printed[2];
  for (int turing = 0; turing < 2; ++turing) {
    OnEmulatedGpu gpu;
    if (turing) gpu.device->arch_name = "sm_75";
    const std::string t = dumped_unit(gpu, program, "f");
    EXPECT_EQ(t.find("mma.sync") != std::string::npos, !turing) << t;
    EXPECT_EQ(t.find(" product ") == std::string::npos, !turing) << t;
    printed[turing] = gpu.out.str();
  }
  EXPECT_NE(printed[0], "");
  EXPECT_EQ(printed[0], printed[1]);
}

// Steps whose kernels differ only in their buffers and values (a model's repeated layers) launch
// one kernel, each with its own arguments: the unit holds its code once.
TEST(CudaResidency, IdenticalKernelsAreShared) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  OnEmulatedGpu gpu;
  const std::string t = dumped_unit(gpu,
                                    "(defn layer [h w s] (softmax (* (@ h w) s) :axis -1))\n"
                                    "(defn f [x w] (layer (layer (layer x w 2.0) w 2.0) w 3.0))\n"
                                    "(def x (random-normal 1 [8 64]))\n(def w (random-normal 2 [64 64]))\n"
                                    "(def err (max (abs (- (f x w) (layer (layer (layer x w 2.0) w 2.0) w 3.0)))))\n",
                                    "f");
  // three softmaxes of a block per row after the products: the first two are the same code
  std::vector<std::string> launched;  // the kernel of each kernel launch, from the launch table
  std::istringstream lines(t.substr(std::min(t.size(), t.find("/* launch table"))));
  for (std::string line; std::getline(lines, line);)
    if (size_t at = line.find(" kernel "); at != std::string::npos) launched.push_back(line.substr(at + 8, line.find(' ', at + 8) - at - 8));
  ASSERT_EQ(launched.size(), 3u) << t;
  EXPECT_EQ(launched[0], launched[1]) << t;
  EXPECT_NE(launched[1], launched[2]) << t;
  EXPECT_EQ(occurrences(t, "__global__"), 2u) << t;
  EXPECT_LT(gpu.in.global(symbols::intern("err"))->value.as_tensor().get(0), 1e-6);
}

TEST(CudaResidency, ReuseIsByIdentityAndBoundedPerPosition) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  OnEmulatedGpu gpu;
  gpu.in.run_text(R"(
(defn f [a] (* a 2))
(def xs (map (fn [i] (random-normal i [1000])) (range 10)))
(def r1 (map f xs))            ;; 10 distinct tensors: 10 uploads, only 8 kept
(def r2 (map f [(nth xs 0) (nth xs 1)]))           ;; the two oldest were dropped: uploaded again
(def r3 (map f (map (fn [i] (nth xs i)) (range 4 10))))  ;; the six most recent are still there
(def y (+ (first xs) 0))       ;; a new tensor (interpreted): a new upload even if equal
(def r4 (f y))
)",
              "reuse.shf");
  const cuda::ProgramStats& s = gpu.stats();
  EXPECT_EQ(s.uploaded, 10u + 2 + 1);
  EXPECT_EQ(s.reused, 6u);
}

}  // namespace
}  // namespace sheaf
