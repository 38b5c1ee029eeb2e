// backend/cuda/driver.cpp — dlopen of the CUDA driver and NVRTC (see driver.hpp).
#include "backend/cuda/driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace sheaf::cuda {
namespace {

constexpr int kAttrMultiprocessors = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrMajor = 75;            // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrMinor = 76;            // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

// The first of `names` that dlopen finds; `why` gets the first dlerror otherwise.
void* open_first(const std::vector<std::string>& names, std::string& why) {
  for (const std::string& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = dlerror();
    if (why.empty()) why = e ? e : n + ": cannot be loaded";
  }
  return nullptr;
}

// Resolves every entry point into `fn` (by name); false with `why` naming the first missing one.
template <typename F>
bool resolve(void* lib, const char* name, F& fn, std::string& why) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) why = fmt::format("it lacks {}", name);
  return fn != nullptr;
}

// A library's entry points once loaded: ok, or why not.
template <typename Fns>
struct Loaded {
  Fns fns{};
  bool ok = false;
  std::string why;
};

std::string result_name(const Driver& d, CUresult r) {
  const char* name = nullptr;
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  return fmt::format("{} ({})", name ? name : "CUDA error", r);
}

Loaded<Driver>& loaded_driver() {
  static Loaded<Driver> l;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = open_first({"libcuda.so.1", "libcuda.so"}, l.why);
    if (!lib) {
      l.why = "no GPU was found: " + l.why;
      return;
    }
    Driver& d = l.fns;
    std::string& why = l.why;
    bool ok = true;
    // Each entry point by the exact symbol of its ABI (cuda.h's macros map cuMemAlloc to
    // cuMemAlloc_v2 and so on; the unsuffixed symbols are older ABIs kept for old binaries).
    auto need = [&](const char* name, auto& fn) { ok = ok && resolve(lib, name, fn, why); };
    need("cuInit", d.cuInit);
    need("cuDriverGetVersion", d.cuDriverGetVersion);
    need("cuDeviceGetCount", d.cuDeviceGetCount);
    need("cuDeviceGet", d.cuDeviceGet);
    need("cuDeviceGetName", d.cuDeviceGetName);
    need("cuDeviceGetAttribute", d.cuDeviceGetAttribute);
    need("cuDeviceTotalMem_v2", d.cuDeviceTotalMem);
    need("cuGetErrorName", d.cuGetErrorName);
    need("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain);
    need("cuDevicePrimaryCtxRelease_v2", d.cuDevicePrimaryCtxRelease);
    need("cuCtxSetCurrent", d.cuCtxSetCurrent);
    need("cuStreamCreate", d.cuStreamCreate);
    need("cuStreamDestroy_v2", d.cuStreamDestroy);
    need("cuStreamSynchronize", d.cuStreamSynchronize);
    need("cuMemGetInfo_v2", d.cuMemGetInfo);
    need("cuMemAlloc_v2", d.cuMemAlloc);
    need("cuMemFree_v2", d.cuMemFree);
    need("cuMemcpyHtoDAsync_v2", d.cuMemcpyHtoDAsync);
    need("cuMemcpyDtoHAsync_v2", d.cuMemcpyDtoHAsync);
    need("cuMemcpyDtoDAsync_v2", d.cuMemcpyDtoDAsync);
    need("cuMemsetD8Async", d.cuMemsetD8Async);
    need("cuModuleLoadData", d.cuModuleLoadData);
    need("cuModuleUnload", d.cuModuleUnload);
    need("cuModuleGetFunction", d.cuModuleGetFunction);
    need("cuLaunchKernel", d.cuLaunchKernel);
    need("cuStreamBeginCapture_v2", d.cuStreamBeginCapture);
    need("cuStreamEndCapture", d.cuStreamEndCapture);
    need("cuGraphInstantiateWithFlags", d.cuGraphInstantiateWithFlags);
    need("cuGraphLaunch", d.cuGraphLaunch);
    need("cuGraphExecDestroy", d.cuGraphExecDestroy);
    need("cuGraphDestroy", d.cuGraphDestroy);
    if (!ok) {
      why = "the CUDA driver (libcuda.so.1) is too old: " + why;
      return;
    }
    CUresult r = d.cuInit(0);
    int count = 0;
    if (r == 0) r = d.cuDeviceGetCount(&count);
    if (r != 0 || count == 0) {
      why = "no GPU was found: " + (r != 0 ? "cuInit failed with " + result_name(d, r) : std::string("the driver reports no device"));
      return;
    }
    l.ok = true;
  });
  return l;
}

Loaded<Nvrtc>& loaded_nvrtc() {
  static Loaded<Nvrtc> l;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names = {"libnvrtc.so.13", "libnvrtc.so"};
    const char* home = std::getenv("CUDA_HOME");
    for (std::string dir : {std::string(home ? home : "") + "/lib64", std::string("/usr/local/cuda/lib64")})
      if (dir != "/lib64") {
        names.push_back(dir + "/libnvrtc.so.13");
        names.push_back(dir + "/libnvrtc.so");
      }
    void* lib = open_first(names, l.why);
    if (!lib) {
      l.why = "NVRTC was not found: " + l.why;
      return;
    }
    Nvrtc& n = l.fns;
    std::string& why = l.why;
    l.ok = resolve(lib, "nvrtcVersion", n.nvrtcVersion, why) && resolve(lib, "nvrtcGetErrorString", n.nvrtcGetErrorString, why) &&
                 resolve(lib, "nvrtcCreateProgram", n.nvrtcCreateProgram, why) &&
                 resolve(lib, "nvrtcCompileProgram", n.nvrtcCompileProgram, why) &&
                 resolve(lib, "nvrtcGetPTXSize", n.nvrtcGetPTXSize, why) && resolve(lib, "nvrtcGetPTX", n.nvrtcGetPTX, why) &&
                 resolve(lib, "nvrtcGetCUBINSize", n.nvrtcGetCUBINSize, why) && resolve(lib, "nvrtcGetCUBIN", n.nvrtcGetCUBIN, why) &&
                 resolve(lib, "nvrtcGetProgramLogSize", n.nvrtcGetProgramLogSize, why) &&
                 resolve(lib, "nvrtcGetProgramLog", n.nvrtcGetProgramLog, why) &&
                 resolve(lib, "nvrtcDestroyProgram", n.nvrtcDestroyProgram, why);
    if (!l.ok) why = "NVRTC is too old: " + why;
  });
  return l;
}

template <typename Fns>
const Fns* get(Loaded<Fns>& l, std::string* why) {
  if (!l.ok && why) *why = l.why;
  return l.ok ? &l.fns : nullptr;
}

}  // namespace

const Driver* driver(std::string* why) { return get(loaded_driver(), why); }
const Nvrtc* nvrtc(std::string* why) { return get(loaded_nvrtc(), why); }

std::optional<DeviceInfo> device_info(std::string* why) {
  const Driver* d = driver(why);
  if (!d) return std::nullopt;
  CUdevice dev = 0;
  DeviceInfo info;
  char name[256] = {};
  CUresult r = d->cuDeviceGet(&dev, 0);
  if (r == 0) r = d->cuDeviceGetName(name, sizeof name, dev);
  if (r == 0) r = d->cuDeviceGetAttribute(&info.major, kAttrMajor, dev);
  if (r == 0) r = d->cuDeviceGetAttribute(&info.minor, kAttrMinor, dev);
  if (r == 0) r = d->cuDeviceGetAttribute(&info.multiprocessors, kAttrMultiprocessors, dev);
  if (r == 0) r = d->cuDeviceTotalMem(&info.memory, dev);
  if (r == 0) r = d->cuDriverGetVersion(&info.driver_version);
  if (r != 0) {
    if (why) *why = "querying GPU 0 failed with " + error_name(r);
    return std::nullopt;
  }
  info.name = name;
  return info;
}

std::string error_name(CUresult r) { return result_name(loaded_driver().fns, r); }

}  // namespace sheaf::cuda
