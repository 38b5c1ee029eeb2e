// tests/unit/cuda_test.cpp — the CUDA backend's loading and kernel compilation, which need no GPU:
// the driver is absent here and must be reported as such (or, on a GPU machine, describe
// device 0); NVRTC (from the CUDA toolkit, when installed) compiles CUDA C++ to PTX and to a cubin
// for an H100/H200 (sm_90) and reports compile errors with its log. Skips with a message where
// NVRTC is not installed.
#include <gtest/gtest.h>

#include "backend/cuda/driver.hpp"
#include "backend/cuda/nvrtc.hpp"
#include "base/error.hpp"

namespace sheaf::cuda {
namespace {

constexpr const char* kScale = R"(
extern "C" __global__ void scale(const float* __restrict__ x, float* __restrict__ y, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
})";

TEST(CudaDriver, ReportsNoGpuOrDescribesDevice0) {
  std::string why;
  if (!driver(&why)) {
    EXPECT_NE(why.find("no GPU was found"), std::string::npos) << why;
    EXPECT_FALSE(device_info());
    return;
  }
  std::optional<DeviceInfo> info = device_info(&why);
  ASSERT_TRUE(info) << why;
  EXPECT_GE(info->major, 5);
  EXPECT_GT(info->multiprocessors, 0);
  EXPECT_GT(info->memory, size_t{1} << 30);
  EXPECT_FALSE(info->name.empty());
}

TEST(Nvrtc, CompilesPtxAndCubinForSm90) {
  std::string why;
  if (!nvrtc(&why)) GTEST_SKIP() << why;
  EXPECT_EQ(nvrtc_version().rfind("NVRTC ", 0), 0u) << nvrtc_version();
  CompiledKernels ptx = compile_cuda(kScale, "scale.cu", 9, 0, false);
  EXPECT_NE(ptx.ptx.find(".target sm_90"), std::string::npos) << ptx.ptx.substr(0, 400);
  EXPECT_NE(ptx.ptx.find(".entry scale("), std::string::npos);
  CompiledKernels bin = compile_cuda(kScale, "scale.cu", 9, 0, true);
  ASSERT_GE(bin.cubin.size(), 4u);
  EXPECT_EQ(bin.cubin.substr(0, 4), "\x7f" "ELF");
}

TEST(Nvrtc, ReportsCompileErrorsWithTheLog) {
  std::string why;
  if (!nvrtc(&why)) GTEST_SKIP() << why;
  try {
    compile_cuda("extern \"C\" __global__ void f() { undefined_thing = 1; }", "broken.cu", 9, 0, false);
    FAIL() << "expected a compile error";
  } catch (const SheafError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("broken.cu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("undefined_thing"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace sheaf::cuda
