// runtime/device_choice.cpp — device names to the JIT's backend (runtime/device_choice.hpp).
#include "runtime/device_choice.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/cuda/allocator.hpp"
#include "backend/cuda/driver.hpp"
#include "backend/cuda/cublaslt.hpp"
#include "base/error.hpp"
#include "dist/comm.hpp"
#include "runtime/jit.hpp"

namespace sheaf {
namespace {

// GPU 0 with NVRTC and cuBLASLt to build for it; null when any is missing or in a data-parallel job.
std::shared_ptr<cuda::Allocator> usable_gpu() {
  if (dist::distributed()) return nullptr;
  std::shared_ptr<cuda::Device> gpu = cuda::gpu();
  if (!gpu || !cuda::nvrtc() || !cuda::cublaslt()) return nullptr;
  return std::make_shared<cuda::Allocator>(gpu);
}

[[noreturn]] void refuse(std::string_view name, const std::string& why, const DeviceNames& allowed) {
  DeviceNames others;  // the devices that need no GPU
  for (std::string_view d : allowed)
    if (d != "cuda") others.push_back(d);
  throw SheafError(fmt::format("device '{}': {}; available devices: {}", name, why, fmt::join(others, ", ")));
}

}  // namespace

void check_device_name(std::string_view name, const DeviceNames& allowed) {
  if (!name.empty() && std::find(allowed.begin(), allowed.end(), name) == allowed.end())
    throw SheafError(fmt::format("device '{}': unknown; available devices: {}", name, fmt::join(allowed, ", ")));
}

void choose_device(Jit& jit, std::string_view name, const DeviceNames& allowed) {
  check_device_name(name, allowed);
  if (name.empty()) {
    jit.device = Device::Cpu;
    jit.find_gpu = usable_gpu;  // asked at the first compile
  } else if (name == "cuda") {
    std::string why;
    std::shared_ptr<cuda::Device> gpu = cuda::gpu(&why);
    if (!gpu) refuse(name, why, allowed);
    jit.gpu = std::make_shared<cuda::Allocator>(gpu);
    jit.device = Device::Cuda;
  } else {
    jit.device = name == "ref" ? Device::Ref : Device::Cpu;
  }
}

}  // namespace sheaf
