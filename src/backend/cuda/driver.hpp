// backend/cuda/driver.hpp — the CUDA driver API and NVRTC, loaded at run time with dlopen
// (DESIGN: the binary starts and runs where CUDA is absent). No CUDA header is needed to build:
// the few types and entry points used are declared here with their C ABI.
//   driver()  libcuda.so.1 (the NVIDIA driver), cuInit'ed; null with the reason when there is no
//             driver or no device ("no GPU was found: libcuda.so.1: cannot open shared object file")
//   nvrtc()   libnvrtc.so.13 / libnvrtc.so from the loader path, else $CUDA_HOME/lib64 or
//             /usr/local/cuda/lib64; null with the reason when absent
// Both are loaded once per process and never unloaded.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

namespace sheaf::cuda {

using CUresult = int;  // 0 = CUDA_SUCCESS
using CUdevice = int;
using nvrtcResult = int;  // 0 = NVRTC_SUCCESS
using nvrtcProgram = struct _nvrtcProgram*;

struct Driver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDeviceTotalMem)(size_t* bytes, CUdevice device);  // cuDeviceTotalMem_v2
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
};

struct Nvrtc {
  nvrtcResult (*nvrtcVersion)(int* major, int* minor);
  const char* (*nvrtcGetErrorString)(nvrtcResult result);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram* prog, const char* src, const char* name, int num_headers,
                                    const char* const* headers, const char* const* include_names);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int num_options, const char* const* options);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram prog, char* ptx);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char* cubin);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char* log);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram* prog);
};

// The loaded driver with at least one device, or null; `why` (if given) then says what is missing.
const Driver* driver(std::string* why = nullptr);
const Nvrtc* nvrtc(std::string* why = nullptr);

// Device 0 of the driver: what kernels are compiled for and what --jit-profile reports.
struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability (9.0 for H100/H200)
  int multiprocessors = 0;
  size_t memory = 0;         // bytes
  int driver_version = 0;    // 13000 = CUDA 13.0
};
std::optional<DeviceInfo> device_info(std::string* why = nullptr);

// "CUDA_ERROR_NO_DEVICE (100)" for a driver result.
std::string error_name(CUresult r);

}  // namespace sheaf::cuda
