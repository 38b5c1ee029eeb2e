// backend/cuda/driver.cpp — dlopen of the CUDA driver and NVRTC (see driver.hpp).
#include "backend/cuda/driver.hpp"

#include "backend/cuda/dynlib.hpp"

#include <fmt/format.h>

#include <mutex>
#include <vector>

namespace sheaf::cuda {
namespace {

constexpr int kAttrMultiprocessors = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrMajor = 75;            // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrMinor = 76;            // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

std::string result_name(const Driver& d, CUresult r) {
  const char* name = nullptr;
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  return fmt::format("{} ({})", name ? name : "CUDA error", r);
}

Loaded<Driver>& loaded_driver() {
  static Loaded<Driver> l;
  static std::once_flag once;
  return load_once<Driver>(l, once, {"libcuda.so.1", "libcuda.so"}, false, "no GPU was found",
                           "the CUDA driver (libcuda.so.1) is too old", [](Resolver& need, Driver& d, std::string& why) {
    // Each entry point by the exact symbol of its ABI (cuda.h's macros map cuMemAlloc to
    // cuMemAlloc_v2 and so on; the unsuffixed symbols are older ABIs kept for old binaries).
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
    if (!need.ok()) return false;
    CUresult r = d.cuInit(0);
    int count = 0;
    if (r == 0) r = d.cuDeviceGetCount(&count);
    if (r != 0 || count == 0) {
      why = "no GPU was found: " + (r != 0 ? "cuInit failed with " + result_name(d, r) : std::string("the driver reports no device"));
      return false;
    }
    return true;
  });
}

Loaded<Nvrtc>& loaded_nvrtc() {
  static Loaded<Nvrtc> l;
  static std::once_flag once;
  return load_once<Nvrtc>(l, once, {"libnvrtc.so.13", "libnvrtc.so"}, true, "NVRTC was not found", "NVRTC is too old",
                          [](Resolver& need, Nvrtc& n, std::string&) {
    need("nvrtcVersion", n.nvrtcVersion);
    need("nvrtcGetErrorString", n.nvrtcGetErrorString);
    need("nvrtcCreateProgram", n.nvrtcCreateProgram);
    need("nvrtcCompileProgram", n.nvrtcCompileProgram);
    need("nvrtcGetPTXSize", n.nvrtcGetPTXSize);
    need("nvrtcGetPTX", n.nvrtcGetPTX);
    need("nvrtcGetCUBINSize", n.nvrtcGetCUBINSize);
    need("nvrtcGetCUBIN", n.nvrtcGetCUBIN);
    need("nvrtcGetProgramLogSize", n.nvrtcGetProgramLogSize);
    need("nvrtcGetProgramLog", n.nvrtcGetProgramLog);
    need("nvrtcDestroyProgram", n.nvrtcDestroyProgram);
    return true;
  });
}

}  // namespace

const Driver* driver(std::string* why) { return loaded_driver().get(why); }
const Nvrtc* nvrtc(std::string* why) { return loaded_nvrtc().get(why); }

std::optional<DeviceInfo> device_info(std::string* why, int ordinal) {
  const Driver* d = driver(why);
  if (!d) return std::nullopt;
  CUdevice dev = 0;
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  CUresult r = d->cuDeviceGet(&dev, ordinal);
  if (r == 0) r = d->cuDeviceGetName(name, sizeof name, dev);
  if (r == 0) r = d->cuDeviceGetAttribute(&info.major, kAttrMajor, dev);
  if (r == 0) r = d->cuDeviceGetAttribute(&info.minor, kAttrMinor, dev);
  if (r == 0) r = d->cuDeviceGetAttribute(&info.multiprocessors, kAttrMultiprocessors, dev);
  if (r == 0) r = d->cuDeviceTotalMem(&info.memory, dev);
  if (r == 0) r = d->cuDriverGetVersion(&info.driver_version);
  if (r != 0) {
    if (why) *why = fmt::format("querying GPU {} failed with {}", ordinal, error_name(r));
    return std::nullopt;
  }
  info.name = name;
  return info;
}

int device_count() {
  const Driver* d = driver();
  int count = 0;
  if (!d || d->cuDeviceGetCount(&count) != 0) return 0;
  return count;
}

std::string error_name(CUresult r) { return result_name(loaded_driver().fns, r); }

}  // namespace sheaf::cuda
