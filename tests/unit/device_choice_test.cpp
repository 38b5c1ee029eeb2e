// tests/unit/device_choice_test.cpp — runtime/device_choice: the one mapping from a device name
// (--device, sheaf.load(device=...)) to the JIT's backend, and its errors.
#include "runtime/device_choice.hpp"

#include <gtest/gtest.h>

#include <sstream>

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

TEST(DeviceChoice, NamesPickTheirBackend) {
  Chosen cpu, ref;
  choose_device(cpu.jit, "cpu");
  choose_device(ref.jit, "ref");
  EXPECT_EQ(cpu.jit.device, Device::Cpu);
  EXPECT_EQ(ref.jit.device, Device::Ref);
  EXPECT_FALSE(cpu.jit.find_gpu) << "an explicit cpu never switches to a GPU";
}

TEST(DeviceChoice, NoNameIsTheCpuUntilTheFirstCompileFindsAGpu) {
  Chosen c;
  choose_device(c.jit, "");
  EXPECT_EQ(c.jit.device, Device::Cpu);
  EXPECT_TRUE(c.jit.find_gpu) << "the first compile asks for a usable GPU";
}

TEST(DeviceChoice, UnknownOrNotAllowedNamesListTheAvailableOnes) {
  Chosen c;
  try {
    choose_device(c.jit, "gpu");
    FAIL() << "'gpu' is not a device";
  } catch (const SheafError& e) {
    EXPECT_STREQ(e.what(), "device 'gpu': unknown; available devices: cpu, ref, cuda");
  }
  const DeviceNames python{"cpu", "ref"};
  EXPECT_THROW(check_device_name("cuda", python), SheafError);
  EXPECT_NO_THROW(check_device_name("ref", python));
}

TEST(DeviceChoice, CudaWithoutAGpuSaysWhyAndWhatElseThereIs) {
  Chosen c;
  if (cuda::gpu()) GTEST_SKIP() << "this machine has a GPU";
  try {
    choose_device(c.jit, "cuda");
    FAIL() << "no GPU here";
  } catch (const SheafError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("device 'cuda': "), std::string::npos) << m;
    EXPECT_NE(m.find("; available devices: cpu, ref"), std::string::npos) << m;
  }
  EXPECT_NE(c.jit.device, Device::Cuda);
}

}  // namespace
}  // namespace sheaf
