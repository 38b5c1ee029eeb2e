// backend/cuda/nvrtc.cpp — compiling generated CUDA C++ (see nvrtc.hpp).
#include "backend/cuda/nvrtc.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "backend/cuda/driver.hpp"
#include "base/error.hpp"

namespace sheaf::cuda {

namespace {
constexpr const char* kOptions[] = {"-std=c++17", "-default-device", "--fmad=true"};
// NVVM's optimizer and ptxas work on the kernels in parallel, on every core: a training step's
// unit of about 40 kernels builds about 1.45x faster on 2 cores (bench/gpu_dry --compile). An
// NVRTC older than the option rejects it (NVRTC_ERROR_INVALID_OPTION); the unit is then built
// again without it.
constexpr const char* kParallel = "--split-compile=0";
constexpr nvrtcResult kInvalidOption = 5;

// One NVRTC program of `source` compiled with `options`: its result code, log and, on success,
// its cubin or PTX.
nvrtcResult compile_once(const Nvrtc* n, const std::string& source, const std::string& name, bool cubin,
                         const std::vector<const char*>& options, CompiledKernels& out) {
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n->nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (r != 0) throw SheafError(fmt::format("NVRTC could not create a program for {}: {}", name, n->nvrtcGetErrorString(r)));
  struct Destroy {
    const Nvrtc* n;
    nvrtcProgram* p;
    ~Destroy() { n->nvrtcDestroyProgram(p); }
  } destroy{n, &prog};
  r = n->nvrtcCompileProgram(prog, static_cast<int>(options.size()), options.data());
  size_t size = 0;
  n->nvrtcGetProgramLogSize(prog, &size);
  out.log.resize(size);
  n->nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (r != 0) return r;
  if (cubin) {
    n->nvrtcGetCUBINSize(prog, &size);
    out.cubin.resize(size);
    n->nvrtcGetCUBIN(prog, out.cubin.data());
  } else {
    n->nvrtcGetPTXSize(prog, &size);
    out.ptx.resize(size);
    n->nvrtcGetPTX(prog, out.ptx.data());
    if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  }
  return r;
}

}  // namespace

CompiledKernels compile_cuda(const std::string& source, const std::string& name, int major, int minor, bool cubin,
                             const std::vector<std::string>& extra) {
  std::string why;
  const Nvrtc* n = nvrtc(&why);
  if (!n) throw SheafError("cannot compile CUDA kernels: " + why);
  std::string arch = fmt::format("--gpu-architecture={}_{}{}", cubin ? "sm" : "compute", major, minor);
  std::vector<const char*> options = {arch.c_str()};
  options.insert(options.end(), std::begin(kOptions), std::end(kOptions));
  for (const std::string& e : extra) options.push_back(e.c_str());
  options.push_back(kParallel);
  CompiledKernels out;
  nvrtcResult r = compile_once(n, source, name, cubin, options, out);
  if (r == kInvalidOption) {
    options.pop_back();
    out = {};
    r = compile_once(n, source, name, cubin, options, out);
  }
  if (r != 0) throw SheafError(fmt::format("NVRTC could not compile {} for {} ({}):\n{}", name, arch.substr(19), n->nvrtcGetErrorString(r), out.log));
  return out;
}

std::string nvrtc_version() {
  std::string why;
  const Nvrtc* n = nvrtc(&why);
  if (!n) return why;
  int major = 0, minor = 0;
  n->nvrtcVersion(&major, &minor);
  return fmt::format("NVRTC {}.{}", major, minor);
}

std::string nvrtc_compiler() { return fmt::format("{} {} {}", nvrtc_version(), fmt::join(kOptions, " "), kParallel); }

}  // namespace sheaf::cuda
