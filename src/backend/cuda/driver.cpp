// backend/cuda/driver.cpp — dlopen of the CUDA driver and NVRTC (see driver.hpp).
#include "backend/cuda/driver.hpp"

#include "backend/cuda/dynlib.hpp"

#include <fmt/format.h>

#include <mutex>
#include <vector>

namespace sheaf::cuda {
namespace {

std::string result_name(const Driver& d, CUresult r) {
  const char* name = nullptr;
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  return fmt::format("{} ({})", name ? name : "CUDA error", r);
}

Loaded<Driver>& loaded_driver() {
  static Loaded<Driver> l;
  static std::once_flag once;
  return load_once<Driver>(l, once, {"libcuda.so.1", "libcuda.so"}, false, "no GPU was found",
                           "the CUDA driver (libcuda.so.1) is too old", [](Resolver& need, Driver& fns, std::string& why) {
    SHEAF_CUDA_DRIVER_ENTRY_POINTS(SHEAF_CUDA_RESOLVE)
    SHEAF_CUDA_DRIVER_OPTIONAL_ENTRY_POINTS(SHEAF_CUDA_RESOLVE_OPTIONAL)
    if (!need.ok()) return false;
    CUresult r = fns.cuInit(0);
    int count = 0;
    if (r == 0) r = fns.cuDeviceGetCount(&count);
    if (r != 0 || count == 0) {
      why = "no GPU was found: " + (r != 0 ? "cuInit failed with " + result_name(fns, r) : std::string("the driver reports no device"));
      return false;
    }
    return true;
  });
}

Loaded<Nvrtc>& loaded_nvrtc() {
  static Loaded<Nvrtc> l;
  static std::once_flag once;
  return load_once<Nvrtc>(l, once, {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, true, "NVRTC was not found", "NVRTC is too old",
                          [](Resolver& need, Nvrtc& fns, std::string&) {
    SHEAF_CUDA_NVRTC_ENTRY_POINTS(SHEAF_CUDA_RESOLVE)
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
  if (r == 0) r = d->cuDeviceTotalMem_v2(&info.memory, dev);
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
