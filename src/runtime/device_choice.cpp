// runtime/device_choice.cpp — device names to the JIT's backend (runtime/device_choice.hpp).
#include "runtime/device_choice.hpp"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cuda/allocator.hpp"
#include "backend/cuda/cublaslt.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/driver.hpp"
#include "backend/ref_backend.hpp"
#include "base/error.hpp"
#include "dist/comm.hpp"
#include "runtime/jit.hpp"

namespace sheaf {
namespace {

// A backend that asks once, at its first compile, for another to take its place.
class SwitchingOnce final : public Backend {
 public:
  SwitchingOnce(std::unique_ptr<Backend> first, std::function<std::unique_ptr<Backend>()> find)
      : now_(std::move(first)), find_(std::move(find)) {}
  std::string_view name() const override { return now_->name(); }
  std::unique_ptr<CompiledGraph> compile(const ir::Graph& g, const CompileContext& c) override {
    if (find_)
      if (std::unique_ptr<Backend> found = std::exchange(find_, nullptr)()) now_ = std::move(found);
    return now_->compile(g, c);
  }
  BufferCounts buffers(uint64_t host_inputs) const override { return now_->buffers(host_inputs); }
  void report(std::ostream& os, double dispatch_s) const override { now_->report(os, dispatch_s); }

 private:
  std::unique_ptr<Backend> now_;
  std::function<std::unique_ptr<Backend>()> find_;
};

// The CUDA backend on `gpu`, its programs built with `o`'s options.
std::unique_ptr<Backend> cuda_backend(std::shared_ptr<cuda::Device> gpu, const BackendOptions& o) {
  cuda::ProgramOptions p;
  p.tf32 = o.tf32;
  p.cache_dir = o.cache_dir;
  return std::make_unique<cuda::CudaBackend>(std::make_shared<cuda::Allocator>(std::move(gpu)), std::move(p));
}

// The CUDA backend on GPU 0 with NVRTC and cuBLASLt to build for it; null when any is missing or
// in a data-parallel job.
std::unique_ptr<Backend> usable_gpu(const BackendOptions& o) {
  if (dist::distributed()) return nullptr;
  std::shared_ptr<cuda::Device> gpu = cuda::gpu();
  if (!gpu || !cuda::nvrtc() || !cuda::cublaslt()) return nullptr;
  return cuda_backend(std::move(gpu), o);
}

[[noreturn]] void refuse(std::string_view name, const std::string& why, const DeviceNames& allowed) {
  std::vector<std::string_view> others;  // the devices that need no GPU
  for (std::string_view d : allowed.names)
    if (d != "cuda") others.push_back(d);
  throw SheafError(fmt::format("device '{}': {}; available devices: {}", name, why, fmt::join(others, ", ")));
}

}  // namespace

std::string cache_beside(const std::string& dir) { return (std::filesystem::path(dir) / "__sheaf__").string(); }

void check_device_name(std::string_view name, const DeviceNames& allowed) {
  if (name.empty() && !allowed.none)
    throw SheafError(fmt::format("no device named; available devices: {}", fmt::join(allowed.names, ", ")));
  if (!name.empty() && std::find(allowed.names.begin(), allowed.names.end(), name) == allowed.names.end())
    throw SheafError(fmt::format("device '{}': unknown; available devices: {}", name, fmt::join(allowed.names, ", ")));
}

void choose_device(Jit& jit, std::string_view name, const DeviceNames& allowed, const BackendOptions& o) {
  check_device_name(name, allowed);
  if (name.empty()) {
    jit.backend = switching_once(std::make_unique<cpu::CpuBackend>(o.cache_dir), [o] { return usable_gpu(o); });
  } else if (name == "cuda") {
    std::string why;
    std::shared_ptr<cuda::Device> gpu = cuda::gpu(&why);
    if (!gpu) refuse(name, why, allowed);
    jit.backend = cuda_backend(std::move(gpu), o);
  } else if (name == "ref") {
    jit.backend = std::make_unique<RefBackend>();
  } else {
    jit.backend = std::make_unique<cpu::CpuBackend>(o.cache_dir);
  }
}

std::unique_ptr<Backend> switching_once(std::unique_ptr<Backend> first, std::function<std::unique_ptr<Backend>()> find) {
  return std::make_unique<SwitchingOnce>(std::move(first), std::move(find));
}

}  // namespace sheaf
