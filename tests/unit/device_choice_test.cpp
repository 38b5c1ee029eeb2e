// tests/unit/device_choice_test.cpp — runtime/device_choice: the one mapping from a device name
// (--device, sheaf.load(device=...)) to the JIT's backend, and its errors.
#include "runtime/device_choice.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cuda/device.hpp"
#include "base/error.hpp"
#include "eval/interp.hpp"
#include "runtime/jit.hpp"

namespace sheaf {
namespace {

struct Chosen {
  std::ostringstream out;
  Interp in{out};
  Jit& jit = *jit_of(in);
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const SheafError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DeviceChoice, NamesPickTheirBackend) {
  Chosen cpu, ref;
  choose_device(cpu.jit, "cpu");
  choose_device(ref.jit, "ref");
  EXPECT_EQ(cpu.jit.backend->name(), "cpu");
  EXPECT_EQ(ref.jit.backend->name(), "ref");
  EXPECT_TRUE(dynamic_cast<cpu::CpuBackend*>(cpu.jit.backend.get())) << "an explicit cpu never switches to a GPU";
}

TEST(DeviceChoice, NoNameIsTheCpuUntilTheFirstCompileFindsAGpu) {
  Chosen c;
  choose_device(c.jit, "");
  EXPECT_EQ(c.jit.backend->name(), "cpu");
  EXPECT_FALSE(dynamic_cast<cpu::CpuBackend*>(c.jit.backend.get())) << "the first compile asks for a usable GPU";
  c.in.run_text("(defn f [x] (* x 2.0)) (f (ones [3]))", "f.shf");
  EXPECT_EQ(c.jit.backend->name(), cuda::gpu() ? "cuda" : "cpu");
}

TEST(DeviceChoice, UnknownOrNotAllowedNamesListTheAvailableOnes) {
  Chosen c;
  EXPECT_EQ(error_of([&] { choose_device(c.jit, "gpu"); }), "device 'gpu': unknown; available devices: cpu, ref, cuda");
  const DeviceNames python{{"cpu", "ref"}, false};
  EXPECT_EQ(error_of([&] { check_device_name("cuda", python); }), "device 'cuda': unknown; available devices: cpu, ref");
  EXPECT_NO_THROW(check_device_name("ref", python));
  EXPECT_EQ(c.jit.backend->name(), "ref") << "a refused name leaves the backend as it was";
}

TEST(DeviceChoice, NoNameOnlyWhereAllowed) {
  EXPECT_NO_THROW(check_device_name("", kAllDevices));
  EXPECT_EQ(error_of([] { check_device_name("", {{"cpu", "ref"}, false}); }), "no device named; available devices: cpu, ref");
}

TEST(DeviceChoice, CudaWithoutAGpuSaysWhyAndWhatElseThereIs) {
  Chosen c;
  if (cuda::gpu()) GTEST_SKIP() << "this machine has a GPU";
  std::string m = error_of([&] { choose_device(c.jit, "cuda"); });
  EXPECT_NE(m.find("device 'cuda': "), std::string::npos) << m;
  EXPECT_NE(m.find("; available devices: cpu, ref"), std::string::npos) << m;
  EXPECT_EQ(c.jit.backend->name(), "ref");
}

TEST(DeviceChoice, CacheBesideTheEntryFile) { EXPECT_EQ(cache_beside("/a/b"), "/a/b/__sheaf__"); }

}  // namespace
}  // namespace sheaf
